//! The one small interface the ops run on, with an implementation per store:
//! SQLite (`sqlite.rs`, the default, embedded and `pcmail serve`) and
//! PostgreSQL (`pg.rs`, several `pcmail serve` instances on one database).
//!
//! An op is written once, against [`Db`]: it sends SQL text from a portable
//! subset both stores run the same (`?N` parameters, `ON CONFLICT`,
//! `RETURNING`, `COALESCE`, partial indexes), binds [`P`] values and reads
//! cells through [`Row::get`]. The few statements the two dialects cannot
//! share are chosen with [`Db::dialect`] next to each other in the op, so
//! the one place that reads a table is still one place. SQL text is always a
//! `&'static str`, so both stores cache prepared statements by it.

pub(crate) mod pg;
pub(crate) mod pg_conn;
pub(crate) mod pg_error;
pub(crate) mod pg_runtime;
pub mod pg_url;
mod sqlite;

/// Which SQL dialect a [`Db`] speaks, for the rare statement that differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// Failures of the store, whichever it is.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("{}", pg_message(.0))]
    Pg(#[from] postgres::Error),
    /// No connection could be had (pool exhausted, database unreachable).
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// A cell did not hold what the op expected.
    #[error("bad value in column {col}: {what}")]
    Decode { col: usize, what: String },
    /// A statement failed inside the transaction and the op carried on:
    /// PostgreSQL voided the transaction, so nothing of it is kept.
    #[error("the transaction was aborted: {0}")]
    Aborted(String),
    /// A statement that must return a row returned none.
    #[error("no row where one was expected")]
    NoRow,
    /// PostgreSQL: this transaction must wait for the feed lock from its
    /// start; it is run again (see `pg::FEED_LOCK`).
    #[error("the feed lock is taken; the transaction runs again holding it")]
    NeedsFeedLock,
}

pub(crate) use pg_error::pg_message;

impl DbError {
    /// Another writer holds the lock, the connection went, the server is
    /// restarting: the caller may retry the same request (`busy`).
    pub fn is_transient(&self) -> bool {
        match self {
            DbError::Sqlite(e) => matches!(
                e.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DatabaseBusy) | Some(rusqlite::ErrorCode::DatabaseLocked)
            ),
            DbError::Pg(e) => {
                e.is_closed()
                    || e.as_db_error().is_none()
                    || e.code().is_some_and(|c| {
                        let c = c.code();
                        // Connection exceptions; admin/crash shutdown, cannot connect now;
                        // and a retry budget spent on serialization failures.
                        c.starts_with("08") || c.starts_with("57P") || c == "40001" || c == "40P01" || c == "53300"
                    })
            }
            DbError::Unavailable(_) | DbError::NeedsFeedLock => true,
            DbError::Decode { .. } | DbError::NoRow | DbError::Aborted(_) => false,
        }
    }

    /// PostgreSQL's answer to two transactions that cannot both commit as if
    /// one after the other (serialization failure, deadlock, or a unique key
    /// another transaction inserted meanwhile): run the whole request again.
    pub fn is_retryable(&self) -> bool {
        match self {
            DbError::Pg(e) => e.code().is_some_and(|c| matches!(c.code(), "40001" | "40P01" | "23505")),
            DbError::NeedsFeedLock => true,
            _ => false,
        }
    }
}

pub type DbResult<T> = Result<T, DbError>;

/// One bound parameter. Booleans are integers 0/1 in both stores.
#[derive(Debug, Clone, Copy)]
pub enum P<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(&'a str),
}

impl<'a> From<&'a str> for P<'a> {
    fn from(v: &'a str) -> P<'a> {
        P::Text(v)
    }
}
impl<'a, 'b: 'a> From<&'a &'b str> for P<'a> {
    fn from(v: &'a &'b str) -> P<'a> {
        P::Text(v)
    }
}
impl<'a> From<&'a String> for P<'a> {
    fn from(v: &'a String) -> P<'a> {
        P::Text(v.as_str())
    }
}
impl<'a, 'b: 'a> From<&'a &'b String> for P<'a> {
    fn from(v: &'a &'b String) -> P<'a> {
        P::Text(v.as_str())
    }
}
impl<'a> From<&'a Option<String>> for P<'a> {
    fn from(v: &'a Option<String>) -> P<'a> {
        v.as_deref().map_or(P::Null, P::Text)
    }
}
impl<'a, 'b: 'a> From<&'a Option<&'b str>> for P<'a> {
    fn from(v: &'a Option<&'b str>) -> P<'a> {
        v.map_or(P::Null, P::Text)
    }
}
impl<'a, 'b: 'a> From<&'a Option<&'b String>> for P<'a> {
    fn from(v: &'a Option<&'b String>) -> P<'a> {
        v.map_or(P::Null, |s| P::Text(s.as_str()))
    }
}
impl<'a> From<&'a f64> for P<'a> {
    fn from(v: &'a f64) -> P<'a> {
        P::Real(*v)
    }
}
impl<'a> From<&'a bool> for P<'a> {
    fn from(v: &'a bool) -> P<'a> {
        P::Int(i64::from(*v))
    }
}
impl<'a> From<&'a Option<bool>> for P<'a> {
    fn from(v: &'a Option<bool>) -> P<'a> {
        v.map_or(P::Null, |b| P::Int(i64::from(b)))
    }
}
macro_rules! int_params {
    ($($t:ty),*) => {$(
        impl<'a> From<&'a $t> for P<'a> {
            fn from(v: &'a $t) -> P<'a> {
                P::Int(*v as i64)
            }
        }
        impl<'a> From<&'a Option<$t>> for P<'a> {
            fn from(v: &'a Option<$t>) -> P<'a> {
                v.map_or(P::Null, |n| P::Int(n as i64))
            }
        }
    )*};
}
int_params!(i64, i32, u32, u16, u8, usize);

/// Parameters for a statement: `p![a, b, c]` binds `?1`, `?2`, `?3`.
macro_rules! p {
    ($($x:expr),* $(,)?) => {
        &[$($crate::store::P::from(&$x)),*] as &[$crate::store::P<'_>]
    };
}
// A crate-local macro reached by path (`crate::store::p`), so a file that
// binds parameters depends on the store module, not on the crate root.
pub(crate) use p;

/// A read a request is about to make: its text and parameters, exactly as
/// the op will run it, for [`Db::prefetch`].
pub struct Read<'a> {
    pub sql: std::borrow::Cow<'a, str>,
    pub params: Vec<P<'a>>,
}

impl<'a> Read<'a> {
    pub fn new(sql: impl Into<std::borrow::Cow<'a, str>>, params: Vec<P<'a>>) -> Read<'a> {
        Read { sql: sql.into(), params }
    }
}

/// A row being read; cells by 0-based index.
pub enum Row<'a> {
    Sqlite(&'a rusqlite::Row<'a>),
    /// A PostgreSQL row whose cells start at this column: a statement that
    /// reads several queries at once puts each one's columns after those of
    /// the ones before it (`pg_conn::together_sql`).
    Pg(&'a postgres::Row, usize),
}

/// A column index (only `usize`, so a literal `0` needs no annotation).
pub trait ColIdx {
    fn idx(self) -> usize;
}

impl ColIdx for usize {
    fn idx(self) -> usize {
        self
    }
}

impl Row<'_> {
    /// `r.get(0)` or `r.get::<_, i64>(0)`, as with rusqlite.
    pub fn get<I: ColIdx, T: Cell>(&self, i: I) -> DbResult<T> {
        let i = i.idx();
        match self {
            Row::Sqlite(r) => T::from_sqlite(r, i),
            Row::Pg(r, first) => T::from_pg(r, first + i),
        }
    }
}

/// A Rust value a cell can be read as, from either store.
pub trait Cell: Sized {
    fn from_sqlite(r: &rusqlite::Row<'_>, i: usize) -> DbResult<Self>;
    fn from_pg(r: &postgres::Row, i: usize) -> DbResult<Self>;
}

/// What one statement does to one transaction. Implemented by each store;
/// the ops use the rusqlite-shaped helpers of [`DbExt`] and [`Stmt`] on top,
/// so an op reads the same whichever store runs it. Statements are cached
/// per connection by their text: SQL on a hot path is a `&'static str`
/// (built with `concat!`, never `format!`).
pub trait Db {
    fn dialect(&self) -> Dialect;

    /// Runs a statement whose rows (if any) are not read; the number of rows
    /// it inserted, changed or deleted.
    fn execute(&self, sql: &str, params: &[P<'_>]) -> DbResult<usize>;

    /// Runs a query and hands each row to `each` until it returns false.
    fn query(&self, sql: &str, params: &[P<'_>], each: &mut dyn FnMut(&Row<'_>) -> DbResult<bool>) -> DbResult<()>;

    /// Statements without parameters, run one after another (migrations).
    fn batch(&self, sql: &str) -> DbResult<()>;

    /// Rows changed so far on this connection (debug checks that a read-only op wrote nothing).
    fn total_changes(&self) -> u64;

    /// Called before a row goes into the `event` table, whose `seq` is the
    /// cursor of the poll's feeds: those rows must become visible in `seq`
    /// order. SQLite's single writer gives that for free; PostgreSQL takes
    /// the feed lock here (see `pg::FEED_LOCK`).
    fn before_feed_write(&self) -> DbResult<()>;

    /// Reads the request is about to make. Where each statement is a round
    /// trip (PostgreSQL) they are sent together, with the transaction's
    /// BEGIN, and a later `query` of the same text and parameters is
    /// answered from them until the transaction writes; a read that is
    /// never asked for costs only its own execution. SQLite reads in
    /// process, so it skips them. Only statements the request is sure to
    /// run belong here: a failing one fails the request.
    fn prefetch(&self, reads: &[Read<'_>]) -> DbResult<()> {
        let _ = reads;
        Ok(())
    }

    /// A write that only records the latest of something (the last writer
    /// wins, and the same write twice changes nothing) and that nothing
    /// else in the request reads back: a heartbeat. A read-only transaction
    /// on PostgreSQL runs it on its own right after its COMMIT, so the
    /// request stays a read (no SERIALIZABLE run, no conflict with other
    /// writers over it); anywhere else it runs in the transaction.
    fn touch(&self, sql: &str, params: &[P<'_>]) -> DbResult<()> {
        self.execute(sql, params).map(|_| ())
    }
}

/// A statement about to run (what `prepare_cached` gives): the shape of
/// rusqlite's, over any [`Db`].
pub struct Stmt<'s> {
    db: &'s (dyn Db + 's),
    sql: &'s str,
}

impl Stmt<'_> {
    pub fn execute(&mut self, params: &[P<'_>]) -> DbResult<usize> {
        self.db.execute(self.sql, params)
    }

    /// The first row, which must exist (`NoRow` otherwise; `.optional()` makes that `None`).
    pub fn query_row<T>(&mut self, params: &[P<'_>], f: impl FnOnce(&Row<'_>) -> DbResult<T>) -> DbResult<T> {
        let mut f = Some(f);
        let mut out = None;
        self.db.query(self.sql, params, &mut |r| {
            if let Some(f) = f.take() {
                out = Some(f(r)?);
            }
            Ok(false)
        })?;
        out.ok_or(DbError::NoRow)
    }

    /// Every row through `f` (read at once; the rows of one request are few).
    pub fn query_map<T>(
        &mut self,
        params: &[P<'_>],
        mut f: impl FnMut(&Row<'_>) -> DbResult<T>,
    ) -> DbResult<std::vec::IntoIter<DbResult<T>>> {
        let mut out = Vec::new();
        self.db.query(self.sql, params, &mut |r| {
            out.push(f(r));
            Ok(true)
        })?;
        Ok(out.into_iter())
    }

    /// True when the query returns a row.
    pub fn exists(&mut self, params: &[P<'_>]) -> DbResult<bool> {
        let mut found = false;
        self.db.query(self.sql, params, &mut |_| {
            found = true;
            Ok(false)
        })?;
        Ok(found)
    }
}

/// `NoRow` as `None`, like rusqlite's `OptionalExtension`.
pub trait Optional<T> {
    fn optional(self) -> DbResult<Option<T>>;
}

impl<T> Optional<T> for DbResult<T> {
    fn optional(self) -> DbResult<Option<T>> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(DbError::NoRow) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Convenience over [`Db`].
pub trait DbExt: Db {
    fn execute_batch(&self, sql: &str) -> DbResult<()> {
        self.batch(sql)
    }

    /// The first row, if any.
    fn query_opt<T>(
        &self,
        sql: &str,
        params: &[P<'_>],
        mut f: impl FnMut(&Row<'_>) -> DbResult<T>,
    ) -> DbResult<Option<T>> {
        let mut out = None;
        self.query(sql, params, &mut |r| {
            out = Some(f(r)?);
            Ok(false)
        })?;
        Ok(out)
    }

    /// The first row, which must exist.
    fn query_one<T>(&self, sql: &str, params: &[P<'_>], f: impl FnMut(&Row<'_>) -> DbResult<T>) -> DbResult<T> {
        self.query_opt(sql, params, f)?.ok_or(DbError::NoRow)
    }

    /// Every row.
    fn query_all<T>(
        &self,
        sql: &str,
        params: &[P<'_>],
        mut f: impl FnMut(&Row<'_>) -> DbResult<T>,
    ) -> DbResult<Vec<T>> {
        let mut out = Vec::new();
        self.query(sql, params, &mut |r| {
            out.push(f(r)?);
            Ok(true)
        })?;
        Ok(out)
    }
}

impl<D: Db + ?Sized> DbExt for D {}

/// `prepare_cached` and `query_row` on a `&dyn Db` (what `Ctx::tx` is).
impl<'d> dyn Db + 'd {
    pub fn prepare_cached<'s>(&'s self, sql: &'s str) -> DbResult<Stmt<'s>> {
        Ok(Stmt { db: self, sql })
    }

    pub fn query_row<T>(&self, sql: &str, params: &[P<'_>], f: impl FnOnce(&Row<'_>) -> DbResult<T>) -> DbResult<T> {
        Stmt { db: self, sql }.query_row(params, f)
    }
}

// ---- cells ----

fn decode(col: usize, what: impl std::fmt::Display) -> DbError {
    DbError::Decode { col, what: what.to_string() }
}

fn pg_type(r: &postgres::Row, i: usize) -> DbResult<&postgres::types::Type> {
    r.columns().get(i).map(|c| c.type_()).ok_or_else(|| decode(i, "no such column"))
}

fn pg_opt_i64(r: &postgres::Row, i: usize) -> DbResult<Option<i64>> {
    use postgres::types::Type;
    let ty = pg_type(r, i)?.clone();
    let v = match ty {
        Type::INT8 => r.try_get::<_, Option<i64>>(i)?,
        Type::INT4 => r.try_get::<_, Option<i32>>(i)?.map(i64::from),
        Type::INT2 => r.try_get::<_, Option<i16>>(i)?.map(i64::from),
        Type::BOOL => r.try_get::<_, Option<bool>>(i)?.map(i64::from),
        Type::OID => r.try_get::<_, Option<u32>>(i)?.map(i64::from),
        other => return Err(decode(i, format!("an integer was expected, the column is {other} (CAST it to BIGINT)"))),
    };
    Ok(v)
}

fn pg_opt_string(r: &postgres::Row, i: usize) -> DbResult<Option<String>> {
    use postgres::types::Type;
    let ty = pg_type(r, i)?.clone();
    match ty {
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => Ok(r.try_get(i)?),
        other => Err(decode(i, format!("text was expected, the column is {other}"))),
    }
}

fn pg_opt_f64(r: &postgres::Row, i: usize) -> DbResult<Option<f64>> {
    use postgres::types::Type;
    let ty = pg_type(r, i)?.clone();
    match ty {
        Type::FLOAT8 => Ok(r.try_get(i)?),
        Type::FLOAT4 => Ok(r.try_get::<_, Option<f32>>(i)?.map(f64::from)),
        _ => Ok(pg_opt_i64(r, i)?.map(|v| v as f64)),
    }
}

impl Cell for i64 {
    fn from_sqlite(r: &rusqlite::Row<'_>, i: usize) -> DbResult<Self> {
        Ok(r.get(i)?)
    }
    fn from_pg(r: &postgres::Row, i: usize) -> DbResult<Self> {
        pg_opt_i64(r, i)?.ok_or_else(|| decode(i, "NULL where an integer was expected"))
    }
}
impl Cell for Option<i64> {
    fn from_sqlite(r: &rusqlite::Row<'_>, i: usize) -> DbResult<Self> {
        Ok(r.get(i)?)
    }
    fn from_pg(r: &postgres::Row, i: usize) -> DbResult<Self> {
        pg_opt_i64(r, i)
    }
}
impl Cell for bool {
    fn from_sqlite(r: &rusqlite::Row<'_>, i: usize) -> DbResult<Self> {
        Ok(r.get(i)?)
    }
    fn from_pg(r: &postgres::Row, i: usize) -> DbResult<Self> {
        Ok(i64::from_pg(r, i)? != 0)
    }
}
impl Cell for Option<bool> {
    fn from_sqlite(r: &rusqlite::Row<'_>, i: usize) -> DbResult<Self> {
        Ok(r.get(i)?)
    }
    fn from_pg(r: &postgres::Row, i: usize) -> DbResult<Self> {
        Ok(pg_opt_i64(r, i)?.map(|v| v != 0))
    }
}
impl Cell for String {
    fn from_sqlite(r: &rusqlite::Row<'_>, i: usize) -> DbResult<Self> {
        Ok(r.get(i)?)
    }
    fn from_pg(r: &postgres::Row, i: usize) -> DbResult<Self> {
        pg_opt_string(r, i)?.ok_or_else(|| decode(i, "NULL where text was expected"))
    }
}
impl Cell for Option<String> {
    fn from_sqlite(r: &rusqlite::Row<'_>, i: usize) -> DbResult<Self> {
        Ok(r.get(i)?)
    }
    fn from_pg(r: &postgres::Row, i: usize) -> DbResult<Self> {
        pg_opt_string(r, i)
    }
}
impl Cell for f64 {
    fn from_sqlite(r: &rusqlite::Row<'_>, i: usize) -> DbResult<Self> {
        Ok(r.get(i)?)
    }
    fn from_pg(r: &postgres::Row, i: usize) -> DbResult<Self> {
        pg_opt_f64(r, i)?.ok_or_else(|| decode(i, "NULL where a number was expected"))
    }
}

/// Any cell as a loose value (copies between stores, test dumps).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
}

impl From<P<'_>> for Value {
    fn from(p: P<'_>) -> Value {
        match p {
            P::Null => Value::Null,
            P::Int(v) => Value::Int(v),
            P::Real(v) => Value::Real(v),
            P::Text(t) => Value::Text(t.to_string()),
        }
    }
}

impl Value {
    pub fn as_param(&self) -> P<'_> {
        match self {
            Value::Null => P::Null,
            Value::Int(v) => P::Int(*v),
            Value::Real(v) => P::Real(*v),
            Value::Text(s) => P::Text(s),
        }
    }
}

impl Cell for Value {
    fn from_sqlite(r: &rusqlite::Row<'_>, i: usize) -> DbResult<Self> {
        use rusqlite::types::ValueRef;
        Ok(match r.get_ref(i)? {
            ValueRef::Null => Value::Null,
            ValueRef::Integer(v) => Value::Int(v),
            ValueRef::Real(v) => Value::Real(v),
            ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
            ValueRef::Blob(_) => return Err(decode(i, "a blob (pcmail stores none)")),
        })
    }
    fn from_pg(r: &postgres::Row, i: usize) -> DbResult<Self> {
        use postgres::types::Type;
        let ty = pg_type(r, i)?.clone();
        Ok(match ty {
            Type::FLOAT8 | Type::FLOAT4 => pg_opt_f64(r, i)?.map_or(Value::Null, Value::Real),
            Type::INT8 | Type::INT4 | Type::INT2 | Type::BOOL | Type::OID => {
                pg_opt_i64(r, i)?.map_or(Value::Null, Value::Int)
            }
            _ => pg_opt_string(r, i)?.map_or(Value::Null, Value::Text),
        })
    }
}

/// Rewrites `?N` parameters to PostgreSQL's `$N` (a bare `?` takes the next
/// number), leaving string literals and quoted names alone.
pub(crate) fn to_dollar_params(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    push_dollar_params(&mut out, sql, 0);
    out
}

/// [`to_dollar_params`] onto `out`, each number raised by `base` (`?1`
/// becomes `$(base + 1)`): a statement placed after others that bind `base`
/// parameters.
pub(crate) fn push_dollar_params(out: &mut String, sql: &str, base: u32) {
    let mut chars = sql.chars().peekable();
    let mut next = 0u32;
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        if let Some(q) = quote {
            out.push(c);
            if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => {
                quote = Some(c);
                out.push(c);
            }
            '?' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                if digits.is_empty() {
                    next += 1;
                    digits = next.to_string();
                } else if let Ok(n) = digits.parse::<u32>() {
                    next = next.max(n);
                }
                out.push('$');
                match digits.parse::<u32>() {
                    Ok(n) if base > 0 => out.push_str(&(n + base).to_string()),
                    _ => out.push_str(&digits),
                }
            }
            _ => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_renumbered_outside_literals() {
        assert_eq!(
            to_dollar_params("SELECT a FROM t WHERE b = ?1 AND c = ?12"),
            "SELECT a FROM t WHERE b = $1 AND c = $12"
        );
        assert_eq!(to_dollar_params("x = ? AND y = ?"), "x = $1 AND y = $2");
        assert_eq!(to_dollar_params("x = '?1' AND \"q?\" = ?2"), "x = '?1' AND \"q?\" = $2");
        assert_eq!(to_dollar_params("a = 'it''s ?' OR b = ?3"), "a = 'it''s ?' OR b = $3");
        let mut after = String::from("x = $1 AND ");
        push_dollar_params(&mut after, "y = ?1 AND z = ? AND w = '?2' AND v = ?1", 1);
        assert_eq!(after, "x = $1 AND y = $2 AND z = $3 AND w = '?2' AND v = $2");
    }

    #[test]
    fn the_params_macro_binds_what_ops_pass() {
        let s = String::from("x");
        let o: Option<String> = None;
        let b = true;
        let n = 7usize;
        let ps = p![s, "lit", o, b, n, 3i64];
        assert!(matches!(ps[0], P::Text("x")));
        assert!(matches!(ps[1], P::Text("lit")));
        assert!(matches!(ps[2], P::Null));
        assert!(matches!(ps[3], P::Int(1)));
        assert!(matches!(ps[4], P::Int(7)));
        assert!(matches!(ps[5], P::Int(3)));
    }
}
