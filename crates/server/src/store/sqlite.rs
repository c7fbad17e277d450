//! [`Db`] on SQLite: rusqlite's per-connection prepared-statement cache,
//! keyed by the statement's text. A transaction derefs to its connection,
//! so `&*tx` is the `&dyn Db` an op gets.

use super::{Db, DbResult, Dialect, Row, P};
use rusqlite::types::{ToSqlOutput, ValueRef};

impl rusqlite::ToSql for P<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match *self {
            P::Null => ValueRef::Null,
            P::Int(v) => ValueRef::Integer(v),
            P::Real(v) => ValueRef::Real(v),
            P::Text(s) => ValueRef::Text(s.as_bytes()),
        }))
    }
}

fn run(
    stmt: &mut rusqlite::Statement<'_>,
    params: &[P<'_>],
    each: &mut dyn FnMut(&Row<'_>) -> DbResult<bool>,
) -> DbResult<()> {
    let mut rows = stmt.query(rusqlite::params_from_iter(params.iter()))?;
    while let Some(r) = rows.next()? {
        if !each(&Row::Sqlite(r))? {
            break;
        }
    }
    Ok(())
}

impl Db for rusqlite::Connection {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn execute(&self, sql: &str, params: &[P<'_>]) -> DbResult<usize> {
        let mut stmt = self.prepare_cached(sql)?;
        // A statement with RETURNING yields rows; `raw_execute` would refuse it.
        let mut rows = stmt.query(rusqlite::params_from_iter(params.iter()))?;
        while rows.next()?.is_some() {}
        drop(rows);
        Ok(self.changes() as usize)
    }

    fn query(&self, sql: &str, params: &[P<'_>], each: &mut dyn FnMut(&Row<'_>) -> DbResult<bool>) -> DbResult<()> {
        run(&mut *self.prepare_cached(sql)?, params, each)
    }

    fn batch(&self, sql: &str) -> DbResult<()> {
        Ok(self.execute_batch(sql)?)
    }

    fn total_changes(&self) -> u64 {
        rusqlite::Connection::total_changes(self)
    }

    fn before_feed_write(&self) -> DbResult<()> {
        // One writer at a time (BEGIN IMMEDIATE): rows commit in `seq` order.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::store::p;
    use crate::store::{Db, DbExt};

    #[test]
    fn a_sqlite_connection_runs_the_portable_subset() {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        let db: &dyn Db = &c;
        db.batch("CREATE TABLE t (k TEXT PRIMARY KEY, n INTEGER NOT NULL, o TEXT)").unwrap();
        assert_eq!(
            db.execute("INSERT INTO t (k, n, o) VALUES (?1, ?2, ?3)", p!["a", 1i64, None::<String>]).unwrap(),
            1
        );
        assert_eq!(
            db.execute("INSERT INTO t (k, n) VALUES (?1, ?2) ON CONFLICT (k) DO NOTHING", p!["a", 5i64]).unwrap(),
            0,
            "a conflict changes nothing"
        );
        let n: i64 = db
            .query_one(
                "INSERT INTO t (k, n) VALUES (?1, 1) ON CONFLICT (k) DO UPDATE SET n = t.n + 1 RETURNING n",
                p!["a"],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 2);
        let rows: Vec<(String, i64, Option<String>)> =
            db.query_all("SELECT k, n, o FROM t ORDER BY k", p![], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap();
        assert_eq!(rows, vec![("a".to_string(), 2, None)]);
        assert!(db.query_opt("SELECT n FROM t WHERE k = ?1", p!["zz"], |r| r.get::<_, i64>(0)).unwrap().is_none());
    }
}
