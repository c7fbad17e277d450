//! What SQLite says about a connection's prepared statements.

use rusqlite::ffi;

/// Each prepared statement of the connection that SQLite compiled again after
/// the first time (SQLITE_STMTSTATUS_REPREPARE), with its SQL text and how
/// often. rusqlite's statement cache keeps cached statements prepared, so
/// after a workload this lists every cached statement that missed.
pub fn statements_compiled_again(conn: &rusqlite::Connection) -> Vec<(String, i32)> {
    statements_with(conn, ffi::SQLITE_STMTSTATUS_REPREPARE).into_iter().filter(|(_, n)| *n > 0).collect()
}

/// Each statement the connection keeps prepared, with its SQL text and how
/// many times it ran to completion (SQLITE_STMTSTATUS_RUN). A statement
/// compiled for one call and dropped after it is not there.
pub fn statements_kept(conn: &rusqlite::Connection) -> Vec<(String, i32)> {
    statements_with(conn, ffi::SQLITE_STMTSTATUS_RUN)
}

/// Every prepared statement of the connection with one of its counters.
fn statements_with(conn: &rusqlite::Connection, counter: std::os::raw::c_int) -> Vec<(String, i32)> {
    let mut out = vec![];
    // SAFETY: `conn` is borrowed for the whole walk, so its handle and the
    // statements it owns stay alive; sqlite3_next_stmt walks the
    // connection's own list and sqlite3_sql returns text the statement owns.
    unsafe {
        let db = conn.handle();
        let mut stmt = ffi::sqlite3_next_stmt(db, std::ptr::null_mut());
        while !stmt.is_null() {
            let n = ffi::sqlite3_stmt_status(stmt, counter, 0);
            out.push((std::ffi::CStr::from_ptr(ffi::sqlite3_sql(stmt)).to_string_lossy().into_owned(), n));
            stmt = ffi::sqlite3_next_stmt(db, stmt);
        }
    }
    out
}

/// The opcodes of `sql`'s program that build a temporary b-tree: a
/// materialised subquery, an `IN` list of three constants or more, a
/// `RETURNING` clause's rows (`OpenEphemeral`), an index made for one
/// statement (`OpenAutoindex`). Each gets its own pager and page cache,
/// allocated when the statement runs and freed when it resets, which on a
/// statement run per request costs more than the lookup itself. (A sort
/// holds its rows in memory and is not counted.)
pub fn temporary_btrees(conn: &rusqlite::Connection, sql: &str) -> Vec<String> {
    let mut stmt = conn.prepare(&format!("EXPLAIN {sql}")).expect("EXPLAIN prepares");
    // Unbound parameters are NULL, which EXPLAIN never reads.
    let mut rows = stmt.raw_query();
    let mut out = vec![];
    while let Some(row) = rows.next().expect("EXPLAIN runs") {
        let op: String = row.get(1).expect("an opcode");
        if matches!(op.as_str(), "OpenEphemeral" | "OpenAutoindex") {
            out.push(op);
        }
    }
    out
}
