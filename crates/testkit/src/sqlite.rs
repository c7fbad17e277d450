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
