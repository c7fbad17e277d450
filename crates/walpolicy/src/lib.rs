//! How pcmail's SQLite files are used, the same for the PC's store and the
//! server's engine: WAL turned on without failing when several openers
//! create a file together ([`turn_on_wal`]), transactions of cached
//! statements ([`Tx`], [`run_cached`]), and how a short-lived process (the
//! hook, one `pcmail` command) leaves a database in WAL mode.
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
//! holds [`CHECKPOINT_FRAMES`] or more while no other process has the file
//! open, or [`SHARED_CHECKPOINT_FRAMES`] while one has (a poller: the index
//! of the log then stays, and the poller's own automatic checkpoint runs at
//! that length too), and otherwise leaves it as it is.

use rusqlite::Connection;
use std::path::Path;
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

/// Frames past which a short-lived process empties the log when another
/// process has the file open: that process keeps SQLite's index of the log,
/// so nobody reads the log again at start, and a long-lived one checkpoints
/// by itself at this length (SQLite's default); a hook or a command then
/// does no fsync but when the other one writes nothing.
pub const SHARED_CHECKPOINT_FRAMES: i32 = 1_000;

/// Puts `conn`'s database in WAL mode (the file keeps it). SQLite answers
/// "database is locked" at once to this change, without waiting as the busy
/// timeout says, while another connection holds the file in the middle of
/// the same change: the processes and threads that open a store which does
/// not exist yet (on a fresh home the daemon's poller and its pusher, a
/// hook, an MCP server) collide exactly there. So it is tried again, with
/// short pauses, until `patience` has passed.
pub fn turn_on_wal(conn: &Connection, patience: Duration) -> rusqlite::Result<()> {
    let started = std::time::Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        match conn.pragma_update(None, "journal_mode", "WAL") {
            Err(e) if is_busy(&e) && started.elapsed() < patience => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            done => return done,
        }
    }
}

/// Runs one statement that returns no rows (`BEGIN IMMEDIATE`, `COMMIT`,
/// `SAVEPOINT w`) from the connection's statement cache. rusqlite's
/// transactions and `execute_batch` compile such a statement from its text
/// at every use: about a dozen times per mail a long-lived poller receives.
pub fn run_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

/// A transaction begun and ended with [`run_cached`] statements; rolled
/// back when dropped before [`Tx::commit`] succeeded (an error, a panic,
/// a failed commit).
pub struct Tx<'c> {
    conn: &'c Connection,
    open: bool,
}

impl<'c> Tx<'c> {
    /// `begin`: `BEGIN DEFERRED` or `BEGIN IMMEDIATE`.
    pub fn begin(conn: &'c Connection, begin: &str) -> rusqlite::Result<Tx<'c>> {
        run_cached(conn, begin)?;
        Ok(Tx { conn, open: true })
    }

    pub fn commit(mut self) -> rusqlite::Result<()> {
        run_cached(self.conn, "COMMIT")?;
        self.open = false;
        Ok(())
    }
}

impl std::ops::Deref for Tx<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        // SQLite may have ended it already (a full disk, an I/O error).
        if self.open && !self.conn.is_autocommit() {
            let _ = run_cached(self.conn, "ROLLBACK");
        }
    }
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked))
}

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
        let frames = self.frames();
        if frames < CHECKPOINT_FRAMES {
            return;
        }
        if frames < SHARED_CHECKPOINT_FRAMES && conn.path().is_some_and(|p| another_process_has_it_open(Path::new(p))) {
            return;
        }
        let _ = conn.pragma_update(None, "synchronous", "NORMAL");
        let _ = conn.busy_timeout(Duration::from_millis(50));
        let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
    }
}

/// Another process has `db` open in WAL mode: SQLite's unix VFS holds a
/// shared lock on byte 128 of the `-shm` file (its "dead-man switch") for as
/// long as a connection has the log's index mapped. Read from `/proc/locks`,
/// never by opening the file: closing any descriptor of a file drops every
/// POSIX lock this process holds on it, SQLite's own included. Elsewhere
/// than Linux: unknown, so `false` (the shorter length applies).
#[cfg(target_os = "linux")]
fn another_process_has_it_open(db: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let mut shm = db.as_os_str().to_owned();
    shm.push("-shm");
    let Ok(inode) = std::fs::metadata(Path::new(&shm)).map(|m| m.ino()) else { return false };
    // Twice: a miss only costs a checkpoint, but the listing is best read whole.
    (0..2).any(|_| proc_locks().is_some_and(|locks| holds_shm_lock(&locks, inode, std::process::id())))
}

/// `/proc/locks` whole. One `read` returns at most a page of it (about 60
/// locks): on a machine with more locks than that, one read missed most of
/// them. Read in pieces, an entry can still be skipped when one listed
/// before it goes away between two pieces; the caller reads it twice.
#[cfg(target_os = "linux")]
fn proc_locks() -> Option<String> {
    use std::io::Read;
    let mut f = std::fs::File::open("/proc/locks").ok()?;
    let mut all = Vec::with_capacity(16 << 10);
    let mut piece = vec![0u8; 16 << 10];
    loop {
        match f.read(&mut piece).ok()? {
            0 => break,
            n => all.extend_from_slice(&piece[..n]),
        }
    }
    String::from_utf8(all).ok()
}

#[cfg(not(target_os = "linux"))]
fn another_process_has_it_open(_db: &Path) -> bool {
    false
}

/// In `/proc/locks` text: a POSIX lock that a process other than `me` holds
/// on inode `inode` and that covers byte 128 (SQLite's dead-man switch).
/// A line is `N: POSIX  ADVISORY  READ PID MAJ:MIN:INODE START END`; a
/// waiter's line has `->` after the number and holds nothing.
#[cfg(any(target_os = "linux", test))]
fn holds_shm_lock(locks: &str, inode: u64, me: u32) -> bool {
    locks.lines().any(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 || f[1] != "POSIX" {
            return false;
        }
        let pid: Option<u32> = f[4].parse().ok();
        let ino: Option<u64> = f[5].rsplit(':').next().and_then(|i| i.parse().ok());
        let start: Option<u64> = f[6].parse().ok();
        let covers_128 = match (start, f[7]) {
            (Some(s), "EOF") => s <= 128,
            (Some(s), end) => s <= 128 && end.parse::<u64>().is_ok_and(|e| e >= 128),
            _ => false,
        };
        pid.is_some_and(|p| p != me) && ino == Some(inode) && covers_128
    })
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
    fn proc_locks_lines_are_read_for_another_processes_dead_man_switch() {
        let locks = "1: POSIX  ADVISORY  READ 4242 fe:00:777 128 128\n\
                     2: POSIX  ADVISORY  WRITE 99 fe:00:777 120 127\n\
                     3: -> POSIX  ADVISORY  WRITE 5 fe:00:777 128 128\n\
                     4: FLOCK  ADVISORY  WRITE 6 fe:00:777 0 EOF\n";
        assert!(holds_shm_lock(locks, 777, 1), "pid 4242 holds byte 128");
        assert!(!holds_shm_lock(locks, 777, 4242), "this process's own lock does not count");
        assert!(!holds_shm_lock(locks, 778, 1), "another file");
        assert!(holds_shm_lock("7: POSIX  ADVISORY  READ 8 08:01:777 100 EOF\n", 777, 1), "a range to the end");
        assert!(!holds_shm_lock("7: POSIX  ADVISORY  READ 8 08:01:777 129 EOF\n", 777, 1), "past byte 128");
    }

    /// A Python child that opens the database (its first argument), says
    /// `ok` and holds it until its stdin closes, then ends without closing it.
    #[cfg(target_os = "linux")]
    const HOLDS_THE_DATABASE: &str = "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('select count(*) from t').fetchall(); print('ok', flush=True); sys.stdin.read(); import os; os._exit(0)";

    /// Starts `python3 -c script arg` and waits for its `ok`: what it holds
    /// is held from then until its stdin is closed.
    #[cfg(target_os = "linux")]
    fn python_holding(script: &str, arg: &Path) -> std::process::Child {
        let mut child = std::process::Command::new("python3")
            .arg("-c")
            .arg(script)
            .arg(arg)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.as_mut().unwrap()), &mut line).unwrap();
        assert_eq!(line.trim(), "ok");
        child
    }

    /// A long-lived process (a poller) has the file open: short-lived ones
    /// leave the log alone until SQLite's own length, and empty it past that.
    #[cfg(target_os = "linux")]
    #[test]
    fn with_another_process_holding_the_file_the_log_is_left_to_the_longer_length() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.db");
        one_process(&db, 1);
        // The other process: a child that opens the file and waits.
        let mut child = python_holding(HOLDS_THE_DATABASE, &db);
        assert!(another_process_has_it_open(&db), "the child's lock is seen");
        for i in 0..20 {
            one_process(&db, 10);
            assert!(another_process_has_it_open(&db), "the child's lock is seen after process {i}");
        }
        let shared = wal_len(&db);
        drop(child.stdin.take());
        child.wait().unwrap();
        assert!(!another_process_has_it_open(&db), "the child is gone");
        // 200 commits of about three frames each (the new leaf page, the
        // root, the header with the file's size): past CHECKPOINT_FRAMES,
        // well below SQLite's own length. The child ends without closing (as a killed
        // poller would), so its close does not empty the log either.
        assert!(shared > CHECKPOINT_FRAMES as u64 * 4096, "left alone while shared: {shared} bytes");
        one_process(&db, 1);
        assert_eq!(wal_len(&db), 0, "emptied once this process is alone with it");
    }

    /// A busy machine holds more locks than one page of `/proc/locks` lists:
    /// the other process's lock is seen among them all the same.
    #[cfg(target_os = "linux")]
    #[test]
    fn another_process_is_seen_among_more_locks_than_a_page_lists() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.db");
        one_process(&db, 1);
        let mut holder = python_holding(HOLDS_THE_DATABASE, &db);
        // Then 300 locks of a third process, each a line of the listing.
        let mut crowd = python_holding(
            "import fcntl,os,sys; fs=[open(os.path.join(sys.argv[1], 'l%d' % i), 'w') for i in range(300)]; [fcntl.lockf(f, fcntl.LOCK_EX) for f in fs]; print('ok', flush=True); sys.stdin.read(); os._exit(0)",
            dir.path(),
        );
        let listing = proc_locks().unwrap();
        assert!(listing.lines().count() > 300, "the whole listing is read: {} lines", listing.lines().count());
        assert!(another_process_has_it_open(&db), "the holder's lock is seen among the crowd's");
        for c in [&mut holder, &mut crowd] {
            drop(c.stdin.take());
            c.wait().unwrap();
        }
    }

    /// A transaction of cached statements: committed when told, rolled
    /// back when dropped before (an error, a panic).
    #[test]
    fn a_cached_transaction_commits_or_rolls_back() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (x INTEGER)").unwrap();
        let count = |c: &Connection| c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0)).unwrap();
        for i in 0..10 {
            let tx = Tx::begin(&conn, "BEGIN IMMEDIATE").unwrap();
            tx.execute("INSERT INTO t VALUES (?1)", [i]).unwrap();
            if i % 2 == 0 {
                tx.commit().unwrap();
            }
        }
        assert!(conn.is_autocommit());
        assert_eq!(count(&conn), 5, "the committed half");
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let tx = Tx::begin(&conn, "BEGIN DEFERRED").unwrap();
            tx.execute("INSERT INTO t VALUES (99)", []).unwrap();
            panic!("work that panics");
        }));
        assert!(unwound.is_err());
        assert!(conn.is_autocommit(), "rolled back as it unwound");
        assert_eq!(count(&conn), 5);
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
