//! The PC-side store: one SQLite file per PC user (WAL, busy timeout,
//! migrations only ever added), shared by the hook, the CLI, the daemon and
//! the tray app. The inbox `status` column is the one "processed" marker.

pub mod cache;
pub mod codemap;
pub mod hookview;
pub mod inbox;
pub mod leases;
pub mod marks;
pub mod meta;
pub mod outbox;
pub mod retention;
mod schema;
pub mod sent;
pub mod timeline;
// Handoffs and memory: the memory index and the Stop reminder's record.
pub mod memory;
pub mod reminders;
// Names held by this PC's sessions; mail to a name for its session only.
pub mod names;
// Jobs: runs this PC executes, queued reports, jobs its sessions submitted.
pub mod jobs;

use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use codemap::CodemapRow;
pub use inbox::{InboxMail, LocalStatus};
pub use marks::PendingMark;
pub use outbox::QueuedSend;
pub use sent::SentMail;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("store {path} was written by a newer pcmail (schema {found}, this build knows {known})")]
    TooNew { path: PathBuf, found: i64, known: i64 },
    /// The store file is not a database, is damaged, or cannot be opened:
    /// named, with the way back.
    #[error("this PC's store {} cannot be read ({source}); {}", path.display(), recovery(path))]
    Unreadable { path: PathBuf, source: rusqlite::Error },
    #[error("corrupt row in the store: {0}")]
    Corrupt(String),
    #[error("no such mail {0:?} in this PC's store")]
    NotFound(String),
}

pub type Result<T> = std::result::Result<T, StoreError>;

pub struct Store {
    pub(crate) conn: Connection,
    path: PathBuf,
    /// A short-lived process's connection (the hook's, a `pcmail` command's):
    /// no checkpoint as it goes or at close; emptied as it leaves once long
    /// ([`pcmail_walpolicy`]).
    short_lived: Option<pcmail_walpolicy::ShortLivedWal>,
}

/// Statements through the connection's statement cache. The poller, the
/// MCP server and the tray run the same statements for hours; SQLite's own
/// `execute` and `query_row` compile theirs again at every call (a sixth of
/// the daemon's CPU went to compiling the same few statements).
pub(crate) trait Cached {
    fn exec<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize>;
    fn row<T, P: rusqlite::Params>(
        &self,
        sql: &str,
        params: P,
        f: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T>;
}

impl Cached for Connection {
    fn exec<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize> {
        self.prepare_cached(sql)?.execute(params)
    }
    fn row<T, P: rusqlite::Params>(
        &self,
        sql: &str,
        params: P,
        f: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T> {
        self.prepare_cached(sql)?.query_row(params, f)
    }
}

impl Store {
    /// Opens (and creates or migrates) the store. Used by everything but the hook.
    pub fn open(path: &Path) -> Result<Store> {
        Self::open_with_timeout(path, Duration::from_secs(10))
    }

    pub fn open_with_timeout(path: &Path, busy: Duration) -> Result<Store> {
        make_private(path);
        let opened = (|| -> Result<Store> {
            let conn = Connection::open(path)?;
            conn.busy_timeout(busy)?;
            pcmail_walpolicy::turn_on_wal(&conn, busy)?;
            // No fsync per commit in WAL mode, but the automatic checkpoint
            // syncs the log before it copies frames into the database and the
            // database before the log is reused: at OFF a power cut after a
            // checkpoint could leave the file without pages the log no longer
            // holds (mail the server already counts as delivered here).
            conn.pragma_update(None, "synchronous", "NORMAL")?;
            conn.pragma_update(None, "foreign_keys", "ON")?;
            // The poller, the MCP server and the tray keep one store open for
            // hours: their statements stay in the cache, and SQLite must not
            // compile one again each time a bound value changes (another
            // mail id, another session), which it does without this.
            conn.set_prepared_statement_cache_capacity(256);
            conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
            let mut store = Store { conn, path: path.to_path_buf(), short_lived: None };
            schema::migrate(&mut store.conn, path)?;
            Ok(store)
        })();
        opened.map_err(|e| unreadable(path, e))
    }

    /// What SQLite's quick check finds wrong in the store file (empty when
    /// nothing): `pcmail doctor` names a damaged store.
    pub fn integrity_problems(&self) -> Result<Vec<String>> {
        let mut st = self.conn.prepare("PRAGMA quick_check")?;
        let rows = st.query_map([], |r| r.get::<_, String>(0))?.collect::<rusqlite::Result<Vec<_>>>();
        let rows = rows.map_err(|e| unreadable(&self.path, StoreError::Sqlite(e)))?;
        Ok(rows.into_iter().filter(|r| r != "ok").collect())
    }

    /// Opens an existing store for the hook: never creates a file, and fails
    /// (so the hook stays silent) when the schema is not the one it knows.
    pub fn open_existing(path: &Path, busy: Duration) -> Result<Option<Store>> {
        if !path.exists() {
            return Ok(None);
        }
        let mut conn = Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(busy)?;
        // What the hook writes (presented rows, seen marks) may be lost on a
        // power cut: the mail is then shown once more, nothing worse. So no
        // fsync at all: not at commit, not on a WAL restart (NORMAL would sync
        // the WAL header and its folder there: 2 fsyncs), and no checkpoint
        // from the hook, neither automatic nor on close; the poller, at
        // NORMAL, checkpoints (docs/data-model.md, "What the hook reads and
        // writes"). Only a log that has grown is emptied, as the hook leaves.
        conn.pragma_update(None, "synchronous", "OFF")?;
        let short_lived = pcmail_walpolicy::ShortLivedWal::install(&mut conn)?;
        // Each statement is compiled once, not again at its first step when a
        // bound value could change its plan (SQLite's statistics): in the
        // hook's one-shot process that second compile was 4 % of its time.
        conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
        let v: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        let mut store = Store { conn, path: path.to_path_buf(), short_lived: Some(short_lived) };
        if v < schema::CURRENT {
            // Upgraded pcmail, store not yet migrated: migrating once is cheap.
            schema::migrate(&mut store.conn, path)?;
        } else if v > schema::CURRENT {
            return Err(StoreError::TooNew { path: path.to_path_buf(), found: v, known: schema::CURRENT });
        }
        Ok(Some(store))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// For a process that lives one command (`pcmail lease claim`, `pcmail
    /// send`): no checkpoint as it writes or when it closes, and the log
    /// emptied as it leaves once it has grown ([`pcmail_walpolicy`]).
    pub fn make_short_lived(&mut self) -> Result<()> {
        if self.short_lived.is_none() {
            self.short_lived = Some(pcmail_walpolicy::ShortLivedWal::install(&mut self.conn)?);
        }
        Ok(())
    }

    /// Runs `f` in one IMMEDIATE transaction (writers queue on the busy timeout
    /// instead of failing half-way). Inside a [`Store::batch`] it is a
    /// savepoint of the batch's transaction: an error undoes what `f` did and
    /// nothing else.
    pub fn write<T>(&mut self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        if !self.conn.is_autocommit() {
            let conn = &self.conn;
            pcmail_walpolicy::run_cached(conn, "SAVEPOINT write")?;
            // `f`'s error, or a panic in it: what it did is undone, the batch goes on.
            let undo = UndoSavepoint(conn);
            let out = f(conn)?;
            std::mem::forget(undo);
            pcmail_walpolicy::run_cached(conn, "RELEASE write")?;
            return Ok(out);
        }
        run_batch(self, &|s| s, "BEGIN IMMEDIATE", |s| f(&s.conn), |_| false)
    }

    /// [`Store::write`] for work that usually writes nothing (a caught-up
    /// prompt): it starts as a read, which takes no write lock and adds
    /// nothing to the log. Should `f` write after all while another
    /// connection holds the write lock or has committed since the read
    /// began, SQLite refuses the upgrade (busy) without waiting; everything
    /// `f` did is rolled back and it runs again from the start as a write
    /// (which waits its turn). So `f` must be safe to run twice. Inside a
    /// [`Store::batch`] (which holds the write lock already) it is a write.
    pub fn write_if_needed<T>(&mut self, f: impl Fn(&Connection) -> Result<T>) -> Result<T> {
        if !self.conn.is_autocommit() {
            return self.write(f);
        }
        match run_batch(self, &|s| s, "BEGIN DEFERRED", |s| f(&s.conn), |_| false) {
            Err(e) if e.is_busy() => self.write(f),
            other => other,
        }
    }

    /// After a commit of this thread's outermost transaction: the mark
    /// pusher is woken when it queued work for it ([`want_push`]).
    fn committed(&self) {
        if PUSH_WANTED.with(|w| w.replace(false)) {
            signal_push(&self.path);
        }
    }

    /// Runs `f` in one IMMEDIATE transaction that every write and read of
    /// the store inside it joins (each [`Store::write`] a savepoint), and
    /// commits once, whether `f` succeeded or not: what it wrote before an
    /// error stays written, as it would have with a commit per write. A
    /// long-lived process that makes a dozen small writes in a row (the
    /// poller, after each answer) pays for one commit and one pair of file
    /// locks instead of one per statement. `f` must not wait on anything
    /// but the store (no network): the hook waits for the write lock.
    pub fn batch<T, E: From<StoreError>>(
        &mut self,
        f: impl FnOnce(&mut Store) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        batch_in(self, |s| s, f)
    }

    /// Whether a poll cycle may have work before its first request, in
    /// one read: mail in the outbox, a lease of this PC the server has not
    /// granted yet, a job run recorded here. Each is a superset of what its
    /// own step looks for (that step reads again and decides), so a `false`
    /// never skips work.
    pub fn cycle_start_work(&self) -> Result<CycleStartWork> {
        Ok(self.conn.row(
            "SELECT EXISTS (SELECT 1 FROM outbox), \
                    EXISTS (SELECT 1 FROM leases_mine WHERE fence IS NULL), \
                    EXISTS (SELECT 1 FROM job_runs)",
            [],
            |r| Ok(CycleStartWork { outbox: r.get(0)?, ungranted_leases: r.get(1)?, job_runs: r.get(2)? }),
        )?)
    }

    /// SQLite's data_version: changes whenever another connection commits, so
    /// a UI can watch the store cheaply.
    pub fn data_version(&self) -> Result<i64> {
        Ok(self.conn.row("PRAGMA data_version", [], |r| r.get(0))?)
    }

    pub fn conn(&self) -> &Connection {
        &self.conn
    }
}

/// Undoes a [`Store::write`]'s savepoint when dropped (its work failed or
/// panicked); forgotten once the work succeeded.
struct UndoSavepoint<'c>(&'c Connection);

impl Drop for UndoSavepoint<'_> {
    fn drop(&mut self) {
        let _ = pcmail_walpolicy::run_cached(self.0, "ROLLBACK TO write");
        let _ = pcmail_walpolicy::run_cached(self.0, "RELEASE write");
    }
}

/// [`Store::batch`] for a value that owns the store (`ctx`, whose store
/// `store_of` finds), so that `f` can use the rest of it too.
pub fn batch_in<C: ?Sized, T, E: From<StoreError>>(
    ctx: &mut C,
    store_of: impl Fn(&mut C) -> &mut Store,
    f: impl FnOnce(&mut C) -> std::result::Result<T, E>,
) -> std::result::Result<T, E> {
    if !store_of(ctx).conn.is_autocommit() {
        return f(ctx);
    }
    run_batch(ctx, &store_of, "BEGIN IMMEDIATE", f, |_| true)
}

/// [`batch_in`] for work that usually only reads (what a poll asks): it
/// begins as a read, which takes no write lock and so never waits for
/// another connection's long write (a code map being written). Should it
/// write after all while another connection holds the write lock or has
/// committed since it began, SQLite refuses at once (`is_busy` tells that
/// error from others); everything is rolled back and `f` runs again as
/// [`batch_in`] does. So `f` must be safe to run twice.
pub fn batch_in_read_first<C: ?Sized, T, E: From<StoreError>>(
    ctx: &mut C,
    store_of: impl Fn(&mut C) -> &mut Store,
    is_busy: impl Fn(&E) -> bool,
    f: impl Fn(&mut C) -> std::result::Result<T, E>,
) -> std::result::Result<T, E> {
    if !store_of(ctx).conn.is_autocommit() {
        return f(ctx);
    }
    match run_batch(ctx, &store_of, "BEGIN DEFERRED", &f, |e| !is_busy(e)) {
        Err(e) if is_busy(&e) => run_batch(ctx, &store_of, "BEGIN IMMEDIATE", &f, |_| true),
        other => other,
    }
}

/// [`Store::cycle_start_work`]: what may wait before a poll cycle's first request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CycleStartWork {
    pub outbox: bool,
    pub ungranted_leases: bool,
    pub job_runs: bool,
}

thread_local! {
    /// This thread's transaction queued work for the mark pusher ([`want_push`]).
    static PUSH_WANTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Said by what queues work for the mark pusher (a mark, a lease release):
/// once the transaction it runs in commits, the pusher is woken through
/// [`push_signal_path`], so that it need not look at the store after every
/// other commit (the poller's dozen per mail).
pub(crate) fn want_push() {
    PUSH_WANTED.with(|w| w.set(true));
}

fn push_wanted_forget() {
    PUSH_WANTED.with(|w| w.set(false));
}

/// The file beside the store whose change wakes the mark pusher: written
/// after a commit that queued a mark or a lease release. Only where writes
/// can be watched (Linux); elsewhere the pusher looks on its timer.
pub fn push_signal_path(store: &Path) -> PathBuf {
    let mut name = store.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push("-push");
    store.with_file_name(name)
}

fn signal_push(store: &Path) {
    if cfg!(target_os = "linux") {
        let signal = push_signal_path(store);
        // Only ever a file of its own: a link or a folder in its place is
        // left alone (never written through). Best effort: the pusher also
        // looks once a second without it.
        if std::fs::symlink_metadata(&signal).is_ok_and(|m| !m.file_type().is_file()) {
            return;
        }
        let _ = pcmail_fsmode::write_private(&signal, b"1");
    }
}

thread_local! {
    /// How many transactions of the store this thread is inside ([`in_batch`]).
    static BATCH_DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Whether this thread is inside a transaction of the store (a batch, a
/// write): a caller about to wait on the network checks it (in debug
/// builds), since another process may wait for the store's lock meanwhile.
pub fn in_batch() -> bool {
    BATCH_DEPTH.with(|d| d.get() > 0)
}

/// Counts a transaction open on this thread until dropped (also on a panic).
struct InBatch;

impl InBatch {
    fn enter() -> InBatch {
        BATCH_DEPTH.with(|d| d.set(d.get() + 1));
        InBatch
    }
}

impl Drop for InBatch {
    fn drop(&mut self) {
        BATCH_DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// One transaction begun with `begin` around `f` (every transaction of the
/// store: [`Store::write`], [`Store::write_if_needed`], the batches):
/// committed when `f` succeeds or fails with an error `keep` keeps (what it
/// wrote before stays), rolled back on any other error and on a panic; after
/// a commit that queued work for the mark pusher, the pusher is signalled.
fn run_batch<C: ?Sized, T, E: From<StoreError>>(
    ctx: &mut C,
    store_of: &impl Fn(&mut C) -> &mut Store,
    begin: &str,
    f: impl FnOnce(&mut C) -> std::result::Result<T, E>,
    keep: impl Fn(&E) -> bool,
) -> std::result::Result<T, E> {
    pcmail_walpolicy::run_cached(&store_of(ctx).conn, begin).map_err(StoreError::from)?;
    let inside = InBatch::enter();
    // A panic in `f` must not leave the connection inside the transaction.
    let out = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(ctx))) {
        Ok(out) => out,
        Err(panic) => {
            let conn = &store_of(ctx).conn;
            if !conn.is_autocommit() {
                let _ = pcmail_walpolicy::run_cached(conn, "ROLLBACK");
            }
            push_wanted_forget();
            std::panic::resume_unwind(panic);
        }
    };
    drop(inside);
    let conn = &store_of(ctx).conn;
    let end = match &out {
        Err(e) if !keep(e) => "ROLLBACK",
        _ => "COMMIT",
    };
    // SQLite may have rolled the transaction back itself (a full disk, an I/O error).
    let ended = if conn.is_autocommit() { Ok(()) } else { pcmail_walpolicy::run_cached(conn, end) };
    if ended.is_err() && !conn.is_autocommit() {
        let _ = pcmail_walpolicy::run_cached(conn, "ROLLBACK");
    }
    if end == "COMMIT" && ended.is_ok() {
        store_of(ctx).committed();
    } else {
        push_wanted_forget();
    }
    match (out, ended) {
        (Ok(v), Ok(())) => Ok(v),
        (Ok(_), Err(e)) => Err(E::from(StoreError::from(e))),
        (Err(e), _) => Err(e),
    }
}

impl StoreError {
    /// SQLite's "busy" (also its "busy snapshot": a read that could not
    /// become a write because another connection committed meanwhile).
    pub fn is_busy(&self) -> bool {
        matches!(self, StoreError::Sqlite(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy))
    }
}

/// The store's folder 0700 and its files 0600, also when an older pcmail or a
/// loose umask made them readable. The database file is created private before
/// SQLite opens it, so its -wal and -shm (which copy its mode) are private too.
/// How to get a working store back when this one cannot be read.
pub fn recovery(path: &Path) -> String {
    format!(
        "stop this PC's poller (`pcmail service uninstall`, or end `pcmail daemon` and the tray), move the file aside \
         (`mv {0} {0}.broken`), then run `pcmail sync`: it makes a new store, and the server still has every mail and \
         its timeline (`pcmail status ID`); only mail that waited in this PC's outbox stays in the old file",
        path.display()
    )
}

/// A failure to open the store that is the file's fault (not a database, damaged, unreadable)
/// becomes `Unreadable`, naming it; a busy lock or a newer schema stays what it is.
fn unreadable(path: &Path, e: StoreError) -> StoreError {
    use rusqlite::ErrorCode as C;
    match e {
        StoreError::Sqlite(rusqlite::Error::SqliteFailure(f, m))
            if matches!(
                f.code,
                C::NotADatabase
                    | C::DatabaseCorrupt
                    | C::CannotOpen
                    | C::SystemIoFailure
                    | C::PermissionDenied
                    | C::ReadOnly
            ) =>
        {
            StoreError::Unreadable { path: path.to_path_buf(), source: rusqlite::Error::SqliteFailure(f, m) }
        }
        other => other,
    }
}

fn make_private(path: &Path) {
    if let Some(dir) = path.parent() {
        let _ = pcmail_fsmode::create_private_dir_all(dir);
    }
    let _ = pcmail_fsmode::ensure_private_file(path);
    for suffix in ["-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = pcmail_fsmode::restrict_file(Path::new(&p));
    }
}

impl Store {
    /// For a process that exits right after (the hook): the short-lived
    /// log rule as at drop, and then no SQLite close. With no checkpoint at
    /// close (the rule's setting) and the log already dealt with, the close
    /// would only unmap and free what the exit frees anyway: 2–3 % of a
    /// caught-up prompt. A store that keeps SQLite's defaults closes as usual
    /// (its close is its checkpoint).
    pub fn leave_before_exit(self) {
        match &self.short_lived {
            Some(w) => {
                w.leave(&self.conn);
                std::mem::forget(self);
            }
            None => drop(self),
        }
    }
}

impl Drop for Store {
    /// A short-lived process's store leaves the log as
    /// [`pcmail_walpolicy::ShortLivedWal::leave`] says.
    fn drop(&mut self) {
        if let Some(w) = &self.short_lived {
            w.leave(&self.conn);
        }
    }
}

/// A note from pc-a to pc-b, new, for the store's own tests.
#[cfg(test)]
pub(crate) fn test_mail(id: &str, created_at: pcmail_core::Millis) -> pcmail_core::Mail {
    serde_json::from_value(serde_json::json!({
        "id": id, "from": "pc-a", "to": "pc-b", "kind": "note", "subject": "", "body": format!("body of {id}"),
        "urgent": false, "createdAt": created_at, "state": "new",
    }))
    .expect("a mail")
}

#[cfg(test)]
mod write_if_needed_tests {
    use super::*;
    use std::cell::Cell;

    fn counter(s: &Store) -> i64 {
        s.meta_i64("n").unwrap().unwrap_or(0)
    }

    /// A new store file, its path, and this test's connection to it.
    fn store() -> (tempfile::TempDir, std::path::PathBuf, Store) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let s = Store::open(&path).unwrap();
        (dir, path, s)
    }

    /// The one read before a poll cycle says "maybe" for each kind of work
    /// the moment a row of it exists, and "no" on an empty store.
    #[test]
    fn cycle_start_work_sees_each_kind_of_work() {
        let (_dir, _path, mut s) = store();
        let none = CycleStartWork { outbox: false, ungranted_leases: false, job_runs: false };
        assert_eq!(s.cycle_start_work().unwrap(), none);
        let mail: pcmail_core::model::OutgoingMail =
            serde_json::from_value(serde_json::json!({"id": "m1", "to": "pc-b", "kind": "note", "body": "b"})).unwrap();
        s.outbox_queue(&mail, 1, None).unwrap();
        assert_eq!(s.cycle_start_work().unwrap(), CycleStartWork { outbox: true, ..none });
        s.outbox_remove("m1").unwrap();
        let lease = crate::leases::MyLease {
            claim_id: "c1".into(),
            resource: "r".into(),
            repo: "github.com/o/r".into(),
            description: "d".into(),
            files: vec![],
            mode: "exclusive".into(),
            session: "s".into(),
            pid: None,
            pid_start: None,
            ttl_expires_at: Some(10),
            fence: None,
            state: "unconfirmed".into(),
            claimed_at: 1,
            heartbeat_at: None,
            release_reason: None,
            release_queued_at: None,
        };
        s.lease_mine_put(&lease).unwrap();
        assert_eq!(s.cycle_start_work().unwrap(), CycleStartWork { ungranted_leases: true, ..none });
        s.lease_mine_put(&crate::leases::MyLease { fence: Some(3), state: "held".into(), ..lease }).unwrap();
        assert_eq!(s.cycle_start_work().unwrap(), none, "a granted lease is no work before the poll");
        s.conn()
            .execute(
                "INSERT INTO job_runs (job_id, runner, command, subject, read_only, job, owner_pid, started_at) \
                 VALUES ('j1', 'pc-a/1', 'test', '', 1, '{}', 1, 1)",
                [],
            )
            .unwrap();
        assert!(s.cycle_start_work().unwrap().job_runs);
    }

    /// Work that writes nothing stays a read: no commit another connection
    /// sees. Work that writes commits as one transaction.
    #[test]
    fn a_read_stays_a_read_and_a_write_commits() {
        let (_dir, path, mut s) = store();
        let watcher = Store::open(&path).unwrap();
        let before = watcher.data_version().unwrap();
        let n =
            s.write_if_needed(|tx| Ok(tx.query_row("SELECT count(*) FROM meta", [], |r| r.get::<_, i64>(0))?)).unwrap();
        assert!(n >= 0);
        assert_eq!(watcher.data_version().unwrap(), before, "a read is no commit");
        s.write_if_needed(|tx| {
            tx.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('n', '1')", [])?;
            Ok(())
        })
        .unwrap();
        assert_ne!(watcher.data_version().unwrap(), before, "a write is");
        assert_eq!(counter(&watcher), 1);
    }

    /// Work that finds nothing to write does not wait for another
    /// connection's write lock (a hook's caught-up prompt while the poller
    /// commits; the poller's look for notifications while a hook writes).
    #[test]
    fn a_read_does_not_wait_for_anothers_write_lock() {
        let (_dir, path, mut s) = store();
        let mut holder = Connection::open(&path).unwrap();
        let held = holder.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).unwrap();
        let t = std::time::Instant::now();
        let claimed = s.claim_notifications(1, 20).unwrap();
        assert!(claimed.is_empty());
        let n: i64 = s.write_if_needed(|tx| Ok(tx.query_row("SELECT count(*) FROM inbox", [], |r| r.get(0))?)).unwrap();
        assert_eq!(n, 0);
        assert!(t.elapsed() < std::time::Duration::from_millis(500), "waited {:?} for the write lock", t.elapsed());
        held.rollback().unwrap();
    }

    /// Another connection commits between the work's read and its write: the
    /// read could not become a write, so the work ran again from the start,
    /// as a write, and built on what the other committed (no lost update).
    #[test]
    fn a_write_after_another_commit_runs_again_on_what_it_committed() {
        let (_dir, path, mut s) = store();
        let other = Connection::open(&path).unwrap();
        other.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
        let set = |v: i64| other.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('n', ?1)", [v.to_string()]);
        set(10).unwrap();
        let runs = Cell::new(0);
        s.write_if_needed(|tx| {
            runs.set(runs.get() + 1);
            let n: i64 = tx.query_row("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'n'", [], |r| r.get(0))?;
            if runs.get() == 1 {
                // Between this read and the write below, another connection commits.
                set(20).unwrap();
            }
            tx.execute("UPDATE meta SET value = ?1 WHERE key = 'n'", [(n + 1).to_string()])?;
            Ok(())
        })
        .unwrap();
        assert_eq!(runs.get(), 2, "the first try was refused and rolled back");
        assert_eq!(counter(&s), 21, "the second try read the other's 20");
    }

    fn set(c: &Connection, key: &str, v: &str) -> Result<()> {
        c.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)", [key, v])?;
        Ok(())
    }

    /// A batch is one transaction: another connection sees none of its
    /// writes until it ends, then all of them in one commit.
    #[test]
    fn a_batch_commits_its_writes_once_at_its_end() {
        let (_dir, path, mut s) = store();
        let watcher = Store::open(&path).unwrap();
        let before = watcher.data_version().unwrap();
        s.batch(|s| {
            s.meta_set_i64("a", 1)?;
            s.write(|tx| set(tx, "b", "2"))?;
            s.write_if_needed(|tx| set(tx, "c", "3"))?;
            assert_eq!(watcher.meta_i64("a").unwrap(), None, "seen before the batch ended");
            assert_eq!(watcher.data_version().unwrap(), before);
            Ok::<_, StoreError>(())
        })
        .unwrap();
        assert_ne!(watcher.data_version().unwrap(), before);
        let got: Vec<Option<i64>> = ["a", "b", "c"].iter().map(|k| watcher.meta_i64(k).unwrap()).collect();
        assert_eq!(got, vec![Some(1), Some(2), Some(3)]);
        assert!(s.conn.is_autocommit(), "the batch left its transaction open");
    }

    /// A batch that begins as a read does not wait for another connection's
    /// write lock when it only reads; when it writes meanwhile, it runs again
    /// as a write, which waits its turn, and its writes all land.
    #[test]
    fn a_read_first_batch_waits_for_the_write_lock_only_when_it_writes() {
        let (_dir, path, mut s) = store();
        let busy = |e: &StoreError| e.is_busy();
        // Another connection takes the write lock and lets go 300 ms later.
        let (locked, is_locked) = std::sync::mpsc::channel();
        let holder_path = path.clone();
        let release = std::thread::spawn(move || {
            let mut holder = Connection::open(&holder_path).unwrap();
            let held = holder.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).unwrap();
            locked.send(()).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(300));
            held.commit().unwrap();
        });
        is_locked.recv().unwrap();
        let t = std::time::Instant::now();
        let n: Option<i64> = batch_in_read_first(&mut s, |s| s, busy, |s| s.meta_i64("n")).unwrap();
        assert_eq!(n, None);
        assert!(t.elapsed() < std::time::Duration::from_millis(100), "a read waited {:?}", t.elapsed());
        // The batch that writes waits for the holder.
        let runs = Cell::new(0);
        let t = std::time::Instant::now();
        batch_in_read_first(
            &mut s,
            |s| s,
            busy,
            |s| {
                runs.set(runs.get() + 1);
                // A read first (what a poll asks), then a write (the attempt's time).
                let _ = s.meta_i64("n")?;
                s.meta_set_i64("a", 1)?;
                s.meta_set_i64("b", 2)
            },
        )
        .unwrap();
        release.join().unwrap();
        assert!(t.elapsed() >= std::time::Duration::from_millis(100), "it did not wait: {:?}", t.elapsed());
        assert_eq!(runs.get(), 2, "the read that had to write ran again as a write");
        let watcher = Store::open(&path).unwrap();
        assert_eq!((watcher.meta_i64("a").unwrap(), watcher.meta_i64("b").unwrap()), (Some(1), Some(2)));
        assert!(s.conn.is_autocommit());
    }

    /// A commit that queued a mark or a lease release writes the pusher's
    /// signal (on Linux, where it is watched); one that queued nothing, or
    /// that was rolled back, does not; inside a batch, only the batch's end.
    #[test]
    fn a_commit_that_queues_a_mark_signals_the_pusher_and_no_other() {
        let (_dir, path, mut s) = store();
        let signal = push_signal_path(&path);
        assert_eq!(signal.file_name().unwrap(), "s.db-push");
        let mut signalled = |f: &mut dyn FnMut(&mut Store)| {
            let _ = std::fs::remove_file(&signal);
            f(&mut s);
            signal.exists()
        };
        let on_linux = cfg!(target_os = "linux");
        assert!(!signalled(&mut |s| s.meta_set_i64("a", 1).unwrap()));
        let queue = |tx: &Connection| marks::queue(tx, "mail-1-abcdef12", pcmail_core::MarkOp::Seen, 1, "pc/s", None);
        assert_eq!(signalled(&mut |s| s.write(|tx| queue(tx).map(|_| ())).unwrap()), on_linux);
        assert!(!signalled(&mut |s| {
            let r: Result<()> = s.write(|tx| {
                queue(tx)?;
                Err(StoreError::NotFound("rolled back".into()))
            });
            assert!(r.is_err());
        }));
        assert_eq!(signalled(&mut |s| s.write_if_needed(|tx| queue(tx).map(|_| ())).unwrap()), on_linux);
        assert_eq!(
            signalled(&mut |s| {
                s.batch(|s| {
                    s.write(|tx| queue(tx).map(|_| ()))?;
                    assert!(!push_signal_path(&s.path).exists(), "signalled before the batch committed");
                    Ok::<_, StoreError>(())
                })
                .unwrap()
            }),
            on_linux
        );
        // A link in the signal's place is never written through.
        #[cfg(unix)]
        {
            let target = path.with_file_name("elsewhere");
            std::fs::write(&target, b"keep").unwrap();
            let _ = std::fs::remove_file(&signal);
            std::os::unix::fs::symlink(&target, &signal).unwrap();
            s.write(|tx| queue(tx).map(|_| ())).unwrap();
            assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        }
    }

    /// One write that fails inside a batch undoes only itself; an error the
    /// batch returns keeps what was written before it (as a commit per write
    /// would have); a panic undoes the whole batch and leaves the store usable.
    #[test]
    fn a_failing_write_fails_alone_an_error_keeps_the_rest_a_panic_undoes_all() {
        let (_dir, path, mut s) = store();
        let watcher = Store::open(&path).unwrap();
        let out: std::result::Result<(), StoreError> = s.batch(|s| {
            s.meta_set_i64("kept", 1)?;
            let failed = s.write(|tx| {
                set(tx, "undone", "1")?;
                tx.execute("INSERT INTO no_such_table VALUES (1)", [])?;
                Ok(())
            });
            assert!(failed.is_err());
            s.meta_set_i64("after", 2)?;
            Err(StoreError::NotFound("stop here".into()))
        });
        assert!(out.is_err());
        assert_eq!(watcher.meta_i64("kept").unwrap(), Some(1));
        assert_eq!(watcher.meta_i64("undone").unwrap(), None, "the failed write was kept");
        assert_eq!(watcher.meta_i64("after").unwrap(), Some(2));

        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = s.batch(|s| {
                s.meta_set_i64("lost", 1)?;
                panic!("in the batch");
                #[allow(unreachable_code)]
                Ok::<_, StoreError>(())
            });
        }));
        assert!(panicked.is_err());
        assert!(s.conn.is_autocommit(), "a panic left the transaction open");
        assert_eq!(watcher.meta_i64("lost").unwrap(), None);
        s.meta_set_i64("usable", 1).unwrap();
        assert_eq!(watcher.meta_i64("usable").unwrap(), Some(1));
    }
}

#[cfg(test)]
mod statement_cache_tests {
    use super::*;
    use pcmail_core::State;

    #[test]
    fn a_long_lived_store_does_not_compile_its_statements_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("store.db")).unwrap();
        for i in 0..20i64 {
            let mut mail = test_mail(&format!("mail-{i}-{i:08x}"), i);
            mail.from = format!("pc-{}", i % 3);
            mail.urgent = i % 2 == 0;
            s.write(|tx| crate::inbox::insert_received(tx, &mail, 100 + i)).unwrap();
            s.write(|tx| crate::inbox::advance(tx, &mail.id, State::Seen, 200 + i, "pc-b", None)).unwrap();
            assert!(s.inbox_get(&mail.id).unwrap().is_some());
            s.mark_confirmed(std::slice::from_ref(&mail.id), 300 + i).unwrap();
            s.inbox_list(&[State::New, State::Seen], 10).unwrap();
            s.inbox_counts(400 + i).unwrap();
        }
        let again = pcmail_testkit::statements_compiled_again(s.conn());
        assert!(again.is_empty(), "statements compiled again: {again:#?}");
    }

    /// What the poller does every cycle and its pusher every 40 ms keeps
    /// its statements prepared: each ran every time, none compiled per call.
    #[test]
    fn the_pollers_every_cycle_statements_stay_prepared() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("store.db")).unwrap();
        for i in 0..20i64 {
            s.meta_set_i64(meta::LAST_POLL_OK_AT, i).unwrap();
            s.meta_del(meta::LAST_POLL_ERROR).unwrap();
            s.data_version().unwrap();
            s.outbox_unsent("mail-1-00000001", "down", i).unwrap();
        }
        let kept = pcmail_testkit::statements_kept(s.conn());
        for needle in ["INSERT INTO meta", "DELETE FROM meta", "PRAGMA data_version", "UPDATE outbox"] {
            let runs: i32 = kept.iter().filter(|(sql, _)| sql.contains(needle)).map(|(_, n)| *n).sum();
            assert!(runs >= 20, "{needle}: {runs} runs of a kept statement in 20 cycles; kept: {kept:#?}");
        }
    }
}

#[cfg(test)]
mod savepoint_tests {
    use super::*;

    fn set(tx: &Connection, key: &str, value: &str) -> Result<()> {
        tx.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)", [key, value])?;
        Ok(())
    }

    /// Inside a batch each write is a savepoint: a write whose work fails
    /// half-way is undone whole, the writes before and after it commit, and
    /// so does the batch, with the connection left outside any transaction.
    #[test]
    fn a_failed_write_in_a_batch_undoes_itself_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("s.db")).unwrap();
        s.batch(|s| -> Result<()> {
            s.write(|tx| set(tx, "before", "1"))?;
            let failed = s.write(|tx| {
                set(tx, "half", "1")?;
                tx.execute("INSERT INTO no_such_table VALUES (1)", [])?;
                Ok(())
            });
            assert!(failed.is_err());
            s.write(|tx| set(tx, "outer", "1"))?;
            s.write(|tx| set(tx, "after", "1"))?;
            Ok(())
        })
        .unwrap();
        assert!(s.conn.is_autocommit(), "the batch ended its transaction");
        for (key, kept) in [("before", true), ("half", false), ("outer", true), ("after", true)] {
            assert_eq!(s.meta_get(key).unwrap().is_some(), kept, "{key}");
        }
    }

    /// A write whose work returns its own error (not SQLite's) after
    /// writing: undone, and the batch commits what came before.
    #[test]
    fn a_write_whose_work_returns_an_error_is_undone_and_the_batch_commits() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("s.db")).unwrap();
        s.batch(|s| -> Result<()> {
            s.write(|tx| set(tx, "a", "1"))?;
            Ok(())
        })
        .unwrap();
        s.batch(|s| -> Result<()> {
            s.write(|tx| set(tx, "outer", "1"))?;
            let inner: Result<()> = s.write(|tx| {
                set(tx, "inner", "1")?;
                Err(StoreError::Sqlite(rusqlite::Error::QueryReturnedNoRows))
            });
            assert!(inner.is_err());
            Ok(())
        })
        .unwrap();
        assert_eq!(s.meta_get("outer").unwrap().as_deref(), Some("1"));
        assert_eq!(s.meta_get("inner").unwrap(), None);
    }

    /// A panic inside a write inside a batch rolls the whole batch back and
    /// leaves the connection usable: the next batch begins and commits.
    #[test]
    fn a_panic_in_a_write_rolls_the_batch_back_and_the_store_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("s.db")).unwrap();
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = s.batch(|s| -> Result<()> {
                s.write(|tx| set(tx, "first", "1"))?;
                s.write(|tx| -> Result<()> {
                    set(tx, "second", "1")?;
                    panic!("work that panics");
                })?;
                Ok(())
            });
        }));
        assert!(panicked.is_err());
        assert!(s.conn.is_autocommit(), "no transaction left open");
        assert_eq!(s.meta_get("first").unwrap(), None, "the batch was rolled back");
        s.batch(|s| s.write(|tx| set(tx, "later", "1"))).unwrap();
        assert_eq!(s.meta_get("later").unwrap().as_deref(), Some("1"));
    }
}

#[cfg(test)]
mod first_open_tests {
    use super::*;

    /// A fresh home: the daemon's poller and its pusher, a hook and an MCP
    /// server may all open the store before it exists. Each creates, turns
    /// on the log and migrates at the same moment; every one must get a
    /// migrated store, none "database is locked".
    #[test]
    fn many_first_opens_of_a_new_store_at_once_all_succeed() {
        for round in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("store.db");
            let opened = pcmail_testkit::at_once(6, || {
                Store::open(&path).map(|st| st.meta_get("nothing").unwrap()).map_err(|e| e.to_string())
            });
            for r in opened {
                assert_eq!(r, Ok(None), "round {round}");
            }
        }
    }
}

#[cfg(test)]
mod wal_tests {
    use super::*;

    /// The log's length as the next process to open the store finds it
    /// (and reads it whole, to rebuild its index).
    fn frames_in_log(path: &Path) -> i64 {
        let c = Connection::open(path).unwrap();
        c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get(1)).unwrap()
    }

    #[test]
    fn the_hooks_writes_alone_keep_the_write_ahead_log_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        drop(Store::open(&path).unwrap());
        // One hook process after another, each writing (as a prompt does), nobody else.
        let runs = i64::from(pcmail_walpolicy::CHECKPOINT_FRAMES) * 5 / 2;
        for i in 0..runs {
            let mut hook = Store::open_existing(&path, Duration::from_secs(1)).unwrap().unwrap();
            hook.meta_set_i64("test.prompt", i).unwrap();
        }
        let frames = frames_in_log(&path);
        assert!(
            frames <= i64::from(pcmail_walpolicy::CHECKPOINT_FRAMES) + 8,
            "{runs} hook runs left {frames} frames in the log"
        );
        let hook = Store::open_existing(&path, Duration::from_secs(1)).unwrap().unwrap();
        assert_eq!(hook.meta_get("test.prompt").unwrap(), Some((runs - 1).to_string()), "every write kept");
    }

    /// One `pcmail` command after another (a lease claim, a send), nobody
    /// else with the store open: a command's connection skips SQLite's
    /// checkpoint at close (fsyncs), and SQLite's automatic checkpoint never
    /// empties the log there (each new process rebuilds its index of the log
    /// and forgets how far the last checkpoint got), so the log stays short
    /// only because a command empties it as it leaves once it has grown.
    #[test]
    fn one_command_after_another_keeps_the_log_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        drop(Store::open(&path).unwrap());
        let runs = i64::from(pcmail_walpolicy::CHECKPOINT_FRAMES) * 3;
        for i in 0..runs {
            let mut command = Store::open(&path).unwrap();
            command.make_short_lived().unwrap();
            command.meta_set_i64("test.command", i).unwrap();
            command.meta_set_i64("test.other", -i).unwrap();
            // A command's process ends without closing anything itself.
        }
        let frames = frames_in_log(&path);
        assert!(
            frames <= i64::from(pcmail_walpolicy::CHECKPOINT_FRAMES) + 8,
            "{runs} commands left {frames} frames in the log"
        );
        let s = Store::open(&path).unwrap();
        assert_eq!(s.meta_get("test.command").unwrap(), Some((runs - 1).to_string()), "every write kept");
    }

    /// The poller's, the CLI's and the tray's connections checkpoint safely
    /// (the hook's runs without any sync, and checkpoints only at `NORMAL`).
    #[test]
    fn only_the_hooks_connection_skips_syncs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        let sync = |s: &Store| -> i64 { s.conn.query_row("PRAGMA synchronous", [], |r| r.get(0)).unwrap() };
        let store = Store::open(&path).unwrap();
        assert_eq!(sync(&store), 1, "NORMAL");
        let hook = Store::open_existing(&path, Duration::from_secs(1)).unwrap().unwrap();
        assert_eq!(sync(&hook), 0, "OFF");
    }

    /// Below the bound the hook leaves the log alone: its runs stay free of fsyncs.
    #[test]
    fn below_the_bound_the_hook_does_not_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        drop(Store::open(&path).unwrap());
        for i in 0..20 {
            let mut hook = Store::open_existing(&path, Duration::from_secs(1)).unwrap().unwrap();
            hook.meta_set_i64("test.prompt", i).unwrap();
        }
        assert!(frames_in_log(&path) >= 20, "each run appended to the log and nothing was copied back");
    }
}
