//! What every PostgreSQL connection of the store shares, whichever side
//! drives it (the pool's blocking threads, `store::pg`, or the server's
//! async runtime, `store::pg_runtime`): how parameters bind, what a
//! connection sets first, the task that drives it, and how a read sent
//! ahead is known again.

use super::P;
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

/// What every connection of a request sets first.
pub(crate) const SESSION_SETUP: &str =
    "SET statement_timeout = '30s'; SET idle_in_transaction_session_timeout = '60s'; \
     SET plan_cache_mode = force_generic_plan";

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
