//! What every PostgreSQL connection of the store shares, whichever side
//! drives it (the pool's blocking threads, `store::pg`, or the server's
//! async runtime, `store::pg_runtime`): how parameters bind, what a
//! connection sets first, the task that drives it, and how a read sent
//! ahead is known again.

use super::{push_dollar_params, Read, P};
use postgres::types::{private::BytesMut, IsNull, ToSql, Type};
use std::future::Future;

impl ToSql for P<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match *self {
            P::Null => Ok(IsNull::Yes),
            P::Int(v) => match *ty {
                Type::INT8 => v.to_sql(ty, out),
                Type::INT4 => i32::try_from(v)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(v)?.to_sql(ty, out),
                Type::BOOL => (v != 0).to_sql(ty, out),
                Type::FLOAT8 => (v as f64).to_sql(ty, out),
                Type::TEXT | Type::VARCHAR | Type::UNKNOWN => v.to_string().as_str().to_sql(ty, out),
                _ => Err(format!("an integer cannot bind a parameter of type {ty}").into()),
            },
            P::Real(v) => match *ty {
                Type::FLOAT8 => v.to_sql(ty, out),
                Type::FLOAT4 => (v as f32).to_sql(ty, out),
                _ => Err(format!("a number cannot bind a parameter of type {ty}").into()),
            },
            P::Text(s) => match *ty {
                Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => s.to_sql(ty, out),
                _ => Err(format!("text cannot bind a parameter of type {ty}").into()),
            },
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

/// What every connection of a request sets first. No parallel plans: the
/// parts of [`together_sql`]'s UNION then come back one after another, each
/// in its own order (pcmail's statements are small; none gains from workers).
pub(crate) const SESSION_SETUP: &str =
    "SET statement_timeout = '30s'; SET idle_in_transaction_session_timeout = '60s'; \
     SET plan_cache_mode = force_generic_plan; SET max_parallel_workers_per_gather = 0";

/// A connection's task: it ends when the connection closes (an error is
/// seen by the request that waits on it).
pub(crate) async fn drive(conn: impl Future<Output = Result<(), postgres::Error>>) {
    let _ = conn.await;
}

/// Parameters as tokio-postgres binds them.
pub(crate) fn bind<'p>(params: &'p [P<'_>]) -> Vec<&'p (dyn ToSql + Sync)> {
    params.iter().map(|p| p as &(dyn ToSql + Sync)).collect()
}

/// The key of a read sent ahead: its text and its parameters, typed.
pub(crate) fn ahead_key(sql: &str, params: &[P<'_>]) -> String {
    use std::fmt::Write;
    let mut k = String::with_capacity(sql.len() + 16 * params.len());
    k.push_str(sql);
    for p in params {
        // Text carries its length, so no text can pass for a following parameter.
        let _ = match p {
            P::Null => write!(k, "\0N"),
            P::Int(v) => write!(k, "\0I{v}"),
            P::Real(v) => write!(k, "\0R{:x}", v.to_bits()),
            P::Text(t) => write!(k, "\0T{}:{t}", t.len()),
        };
    }
    k
}

/// A statement that cannot change a row (a read sent ahead stays true after it).
pub(crate) fn only_reads(sql: &str) -> bool {
    let head = sql.trim_start().as_bytes();
    head.len() >= 6 && head[..6].eq_ignore_ascii_case(b"SELECT")
}

/// Every read's parameters, one after another, as [`together_sql`]'s
/// statement numbers them.
pub(crate) fn bind_all<'p>(reads: &'p [Read<'_>]) -> Vec<&'p (dyn ToSql + Sync)> {
    reads.iter().flat_map(|r| bind(&r.params)).collect()
}

/// The name a connection keeps [`together_sql`]'s statement under: the reads'
/// texts in order, after a mark no SQL text starts with.
pub(crate) fn together_key(reads: &[Read<'_>]) -> String {
    let mut key = String::from("\u{1}together");
    for r in reads {
        key.push('\u{1}');
        key.push_str(&r.sql);
    }
    key
}

/// One statement returning the rows of every read in `reads`, each read's
/// cells in columns of their own (`columns`: each read's, from the read
/// prepared alone): `SELECT k, NULL::…, t.*, NULL::… FROM (read k) t UNION
/// ALL …`, where column 0 is the read's place in the list and the other
/// reads' columns are typed NULLs. One statement reads from one snapshot,
/// as a transaction of separate reads does, and costs PostgreSQL one
/// execution and one answer instead of one per read. Each read keeps its
/// own order: a subquery with ORDER BY or LIMIT stays a subquery, and an
/// Append without parallel workers returns its parts one after another
/// (the pool's and the runtime's connections make no parallel plans).
pub(crate) fn together_sql(reads: &[Read<'_>], columns: &[&[tokio_postgres::Column]]) -> String {
    use std::fmt::Write;
    let types: Vec<&Type> = columns.iter().flat_map(|c| c.iter().map(|c| c.type_())).collect();
    let mut sql = String::new();
    let (mut column, mut param) = (1usize, 0u32);
    for (k, (read, cols)) in reads.iter().zip(columns).enumerate() {
        if k > 0 {
            sql.push_str(" UNION ALL ");
        }
        let _ = write!(sql, "SELECT {k}");
        for (at, ty) in types.iter().enumerate().map(|(i, t)| (i + 1, t)) {
            if at == column {
                sql.push_str(", t.*");
            } else if at < column || at >= column + cols.len() {
                let _ = write!(sql, ", NULL::\"{}\".\"{}\"", ty.schema(), ty.name());
            }
        }
        sql.push_str(" FROM (");
        push_dollar_params(&mut sql, &read.sql, param);
        sql.push_str(") t");
        column += cols.len();
        param += read.params.len() as u32;
    }
    sql
}

/// The column each read's cells begin at in [`together_sql`]'s rows.
pub(crate) fn first_columns(columns: &[&[tokio_postgres::Column]]) -> Vec<usize> {
    columns
        .iter()
        .scan(1usize, |next, c| {
            let first = *next;
            *next += c.len();
            Some(first)
        })
        .collect()
}

/// [`together_sql`]'s rows, each given to its read (column 0), in order.
/// None: a row names no read of the list.
pub(crate) fn rows_by_read(rows: Vec<tokio_postgres::Row>, reads: usize) -> Option<Vec<Vec<tokio_postgres::Row>>> {
    let mut of_read: Vec<Vec<tokio_postgres::Row>> = (0..reads).map(|_| Vec::new()).collect();
    for row in rows {
        let k: i32 = row.try_get(0).ok()?;
        of_read.get_mut(usize::try_from(k).ok()?)?.push(row);
    }
    Some(of_read)
}
