//! How a short-lived process (the hook, one `pcmail` command) leaves a SQLite
//! database in WAL mode.
//!
//! SQLite's defaults suit a process that keeps its connection: an automatic
//! checkpoint as the log fills, and at the close of the last connection one
//! more checkpoint and the log deleted. For a process that lives a few
//! milliseconds both cost fsyncs (the close alone: the log, the database, and
//! the log created again by the next process with its folder), and neither
//! keeps the log short when nothing else has the file open: the next process
//! that opens it finds no other connection, so SQLite rebuilds its index of
//! the log by reading every frame, and with that index it also loses how far
//! the last checkpoint got, so the log is never started again from its first
//! frame. A log that only grows makes each new process read all of it.
//!
//! [`ShortLivedWal::install`] turns both off and records the log's length
//! after each commit; [`ShortLivedWal::leave`], called just before the
//! connection closes, empties the log (one `TRUNCATE` checkpoint) once it
//! holds [`CHECKPOINT_FRAMES`] or more, and otherwise leaves it as it is.

use rusqlite::Connection;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Frames in the log past which a short-lived process empties it as it
/// leaves. Every process that opens the file while no other has it open
/// reads the whole log first (about 1 ms per 200 frames here, at every
/// start), while emptying it costs two fsyncs once: 256 frames (1 MiB) keeps
/// the read short and the fsyncs rare (a lease claim writes about 20 frames,
/// a prompt of the hook a few).
pub const CHECKPOINT_FRAMES: i32 = 256;

/// The log's length as the last commit of this connection left it.
pub struct ShortLivedWal {
    frames: Arc<AtomicI32>,
}

impl ShortLivedWal {
    /// No automatic checkpoint and none at close on `conn`; records the log's
    /// length after each commit.
    pub fn install(conn: &mut Connection) -> rusqlite::Result<ShortLivedWal> {
        conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
        let frames = Arc::new(AtomicI32::new(0));
        let seen = frames.clone();
        // Set after the pragma above, which installs SQLite's own callback.
        conn.wal_hook(Some(move |_: &mut rusqlite::hooks::Wal, n: std::ffi::c_int| {
            seen.store(n, Ordering::Relaxed);
            Ok(())
        }))?;
        Ok(ShortLivedWal { frames })
    }

    /// The log's length after this connection's last commit (0 before any).
    pub fn frames(&self) -> i32 {
        self.frames.load(Ordering::Relaxed)
    }

    /// Called just before `conn` closes: past [`CHECKPOINT_FRAMES`], one
    /// checkpoint that copies the log into the database and empties it, at
    /// `NORMAL` so that the copied pages are on disk before the log is cut
    /// (a connection may run at `OFF`, as the hook's does). It waits at most
    /// a moment for another reader or writer; when one is still there, the
    /// next process to leave tries again, and that other process, if it
    /// lives long, checkpoints on its own.
    pub fn leave(&self, conn: &Connection) {
        if self.frames() < CHECKPOINT_FRAMES {
            return;
        }
        let _ = conn.pragma_update(None, "synchronous", "NORMAL");
        let _ = conn.busy_timeout(Duration::from_millis(50));
        let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wal_len(db: &std::path::Path) -> u64 {
        let mut p = db.as_os_str().to_owned();
        p.push("-wal");
        std::fs::metadata(std::path::Path::new(&p)).map(|m| m.len()).unwrap_or(0)
    }

    /// One short-lived process: opens, writes `rows` rows of 3 KiB (about a
    /// frame each), leaves, closes.
    fn one_process(db: &std::path::Path, rows: usize) {
        let mut conn = Connection::open(db).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        let wal = ShortLivedWal::install(&mut conn).unwrap();
        conn.execute("CREATE TABLE IF NOT EXISTS t (v BLOB)", []).unwrap();
        for _ in 0..rows {
            conn.execute("INSERT INTO t VALUES (zeroblob(3000))", []).unwrap();
        }
        wal.leave(&conn);
        drop(conn);
    }

    #[test]
    fn short_lived_processes_keep_the_log_short() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.db");
        let mut longest = 0;
        for _ in 0..100 {
            one_process(&db, 10);
            longest = longest.max(wal_len(&db));
        }
        // 1,000 commits of a frame or two each: without the checkpoint the
        // log would hold them all (over 4 MB); with it, never much more than
        // CHECKPOINT_FRAMES of 4 KiB pages.
        let bound = (CHECKPOINT_FRAMES as u64 + 40) * 4200;
        assert!(longest <= bound, "the log reached {longest} bytes (bound {bound})");
        let conn = Connection::open(&db).unwrap();
        let n: i64 = conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 1000, "every row of every process is there");
    }

    #[test]
    fn a_short_log_is_left_as_it_is_and_nothing_checkpoints_at_close() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.db");
        one_process(&db, 5);
        // SQLite's close would have checkpointed and deleted the log.
        assert!(wal_len(&db) > 0, "the log is still there");
        let conn = Connection::open(&db).unwrap();
        let n: i64 = conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 5);
    }
}
