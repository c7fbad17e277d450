//! The floor the hook is measured against: a minimal program that opens a
//! PC's store the way the hook does and makes one SQLite read (a count over
//! the small index of mail not yet confirmed to the server), then prints it. Nothing of pcmail is linked but SQLite, so
//! what the hook costs above this is pcmail's own work.
//!
//! `pcmail-bench-floor STORE.db`. The bench relinks it statically on Linux,
//! as it does the hook: `cargo rustc --release -p pcmail-bench-pc --bin
//! pcmail-bench-floor -- -C target-feature=+crt-static`.

use rusqlite::{Connection, OpenFlags};
use std::time::Duration;

fn main() {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: pcmail-bench-floor STORE.db");
        std::process::exit(2);
    };
    let read = || -> rusqlite::Result<i64> {
        let conn =
            Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
        conn.busy_timeout(Duration::from_secs(5))?;
        conn.query_row("SELECT count(*) FROM inbox WHERE confirmed_at IS NULL", [], |r| r.get(0))
    };
    match read() {
        Ok(n) => println!("{n}"),
        Err(e) => {
            eprintln!("pcmail-bench-floor: {e}");
            std::process::exit(1);
        }
    }
}
