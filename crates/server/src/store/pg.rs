//! [`Db`] on PostgreSQL, for several `pcmail serve` instances on one database.
//!
//! - **Transactions.** A request is one transaction. Writes run at
//!   SERIALIZABLE: PostgreSQL then aborts one of two transactions whose
//!   interleaving no serial order could give (a claim checked and inserted
//!   by two instances at once, two fences from one counter, one job started
//!   twice) with SQLSTATE 40001 or 40P01, and the whole request runs again
//!   from the start on a fresh snapshot. A request has no effect outside its
//!   transaction, so running it again is idempotent. Reads run at
//!   REPEATABLE READ, READ ONLY: one consistent snapshot, like SQLite's.
//! - **Feeds in commit order.** The poll's `updates` and `receivedUpdates`
//!   are read by cursor (`event.seq > since`). A sequence number is handed
//!   out at insert, not at commit: with two writers, seq 11 could commit
//!   before seq 10 and a poller that read 11 would never see 10. So every
//!   transaction that writes `event` holds the feed lock ([`FEED_LOCK`])
//!   from its first `event` row until it commits: such rows are numbered and
//!   committed one transaction at a time, as with SQLite's single writer.
//!   Ops known to write events take it before `BEGIN` (so their snapshot is
//!   taken after the previous holder committed); any other transaction
//!   tries it when it first writes an event and, if it is taken, runs again
//!   holding it from the start. Nobody waits for it while holding a row, so
//!   it adds no deadlock.
//! - **Statements** are prepared once per connection and kept by their text.
//! - **Wake-ups** across instances: a transaction that has news for some
//!   PCs sends `NOTIFY pcmail_wake` (delivered at commit, never for a rolled
//!   back one); every instance listens ([`spawn_listener`]) and wakes its
//!   long polls; after a reconnect it wakes them all, since notifications
//!   sent while it was away are lost and the woken polls re-read by cursor.

use super::pg_conn::{
    ahead_key, bind, bind_all, drive, first_columns, only_reads, rows_by_read, together_key, together_sql,
    SESSION_SETUP,
};
use super::pg_url::PgTarget;
use super::{to_dollar_params, Db, DbError, DbResult, Dialect, Read, Row, P};
use postgres::types::ToSql;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Advisory lock keys (one 64-bit space per database; "pcmail" + a number).
pub(crate) const FEED_LOCK: i64 = 0x7063_6d61_696c_0001;
/// Held by the instance running the cluster's sweep, retention and webhooks.
pub(crate) const MAINTENANCE_LOCK: i64 = 0x7063_6d61_696c_0002;
// 0x7063_6d61_696c_0003 is the migration lock, held by the schema's migrations (schema_pg).

/// The channel of cross-instance wake-ups.
pub(crate) const WAKE_CHANNEL: &str = "pcmail_wake";

/// How many times a request runs before a serialization failure is answered `busy`.
const MAX_ATTEMPTS: u32 = 12;

/// A pooled connection and the statements prepared on it. The client is
/// tokio-postgres's, driven by a runtime of its own while a request waits
/// (as the sync `postgres` client does), because only the async client can
/// send several statements before reading their answers: a request's BEGIN
/// and the reads it is known to make go out together, in one round trip.
pub(crate) struct PgConn {
    rt: tokio::runtime::Runtime,
    /// Always Some until dropped (see `Drop`).
    client: Option<tokio_postgres::Client>,
    /// The task that drives the connection; it ends when the client is dropped.
    driver: Option<tokio::task::JoinHandle<()>>,
    stmts: HashMap<String, postgres::Statement>,
}

impl PgConn {
    fn client(&self) -> &tokio_postgres::Client {
        self.client.as_ref().expect("the client lives as long as the connection")
    }

    /// Waits for `f` on this connection's runtime (which drives the connection meanwhile).
    fn wait<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        self.rt.block_on(f)
    }
}

/// Dropping the client lets the driver send PostgreSQL its goodbye
/// (Terminate) before the runtime stops, so the server logs no lost client.
impl Drop for PgConn {
    fn drop(&mut self) {
        drop(self.client.take());
        if let Some(driver) = self.driver.take() {
            let _ = self.rt.block_on(async { tokio::time::timeout(Duration::from_secs(1), driver).await });
        }
    }
}

pub(crate) struct Manager {
    target: PgTarget,
    tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
}

impl Manager {
    fn new(target: PgTarget) -> Result<Manager, super::pg_url::UrlError> {
        let tls = target.rustls()?;
        Ok(Manager { target, tls })
    }

    /// A sync client of its own (migrations, the wake-up listener, bulk copies).
    fn client(&self) -> Result<postgres::Client, postgres::Error> {
        let cfg: postgres::Config = self.target.config().clone().into();
        match &self.tls {
            Some(t) => cfg.connect(t.clone()),
            None => cfg.connect(postgres::NoTls),
        }
    }

    fn pooled(&self) -> Result<PgConn, DbError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| DbError::Unavailable(format!("a runtime for a PostgreSQL connection: {e}")))?;
        let cfg = self.target.config();
        // The connection's task runs whenever a request waits on this runtime.
        let (client, driver) = match &self.tls {
            Some(t) => {
                let (client, conn) = rt.block_on(cfg.connect(t.clone()))?;
                (client, rt.spawn(drive(conn)))
            }
            None => {
                let (client, conn) = rt.block_on(cfg.connect(tokio_postgres::NoTls))?;
                (client, rt.spawn(drive(conn)))
            }
        };
        let c = PgConn { rt, client: Some(client), driver: Some(driver), stmts: HashMap::new() };
        // A statement or an idle transaction never holds locks for long.
        // Every prepared statement keeps one generic plan: left to choose,
        // PostgreSQL planned some of the hot ones again at every execution
        // (a caught-up poll cost three times the CPU). The ops are written
        // for plans made without the parameters' values already, since
        // SQLite never sees them: a partial index's condition is spelled out
        // in the SQL, never bound.
        c.wait(c.client().batch_execute(SESSION_SETUP))?;
        Ok(c)
    }
}

impl r2d2::ManageConnection for Manager {
    type Connection = PgConn;
    type Error = DbError;

    fn connect(&self) -> Result<PgConn, DbError> {
        self.pooled()
    }

    fn is_valid(&self, c: &mut PgConn) -> Result<(), DbError> {
        c.wait(c.client().simple_query("")).map(|_| ()).map_err(DbError::from)
    }

    fn has_broken(&self, c: &mut PgConn) -> bool {
        c.client().is_closed()
    }
}

/// Read-only (one snapshot) or read-write (SERIALIZABLE), or a request that
/// usually writes nothing: it reads first and writes only if it must.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxKind {
    Read,
    Write,
    /// Runs as a read (REPEATABLE READ, READ ONLY: no predicate locks, no
    /// serialization failures); the first statement that writes makes
    /// PostgreSQL refuse it, and the whole request runs again as a write.
    /// For a caught-up poll, whose heartbeat is due once a step and whose
    /// sweeps rarely find anything due.
    ReadFirst,
}

/// The PostgreSQL store: a pool of connections to one database.
pub(crate) struct PgStore {
    /// Always Some until dropped (see `Drop`).
    pool: Option<r2d2::Pool<Manager>>,
    target: PgTarget,
    /// This process's name in wake-up payloads (its own are not re-delivered).
    pub instance: String,
    /// Requests that ran again after a serialization failure (the bench prints it).
    pub retries: AtomicU64,
    /// Requests that began as [`TxKind::ReadFirst`] and had to write.
    pub upgrades: AtomicU64,
    /// Waits for PostgreSQL's answers inside requests: a round trip each.
    pub round_trips: AtomicU64,
    /// Connections of the server's runtime, for requests answered there.
    pub(crate) runtime: super::pg_runtime::RuntimeConns,
}

#[derive(Debug, thiserror::Error)]
pub enum PgOpenError {
    #[error(transparent)]
    Url(#[from] super::pg_url::UrlError),
    #[error("connecting to {url}: {message}")]
    Connect { url: String, message: String },
    #[error("{0}")]
    Migrate(String),
}

impl PgStore {
    /// Connects, migrates (refusing a schema newer than this build) and makes the pool.
    pub(crate) fn open(target: PgTarget) -> Result<PgStore, PgOpenError> {
        let manager = Manager::new(target.clone())?;
        let url = target.redacted().to_string();
        let mut first =
            manager.client().map_err(|e| PgOpenError::Connect { url: url.clone(), message: super::pg_message(&e) })?;
        crate::schema_pg::migrate(&mut first).map_err(|e| PgOpenError::Migrate(e.to_string()))?;
        drop(first);
        let pool = r2d2::Pool::builder()
            .max_size(target.pool_size)
            .min_idle(Some(1))
            .test_on_check_out(false)
            .connection_timeout(Duration::from_secs(5))
            .error_handler(Box::new(LogErrors))
            .build_unchecked(manager);
        let instance = format!("{:016x}", rand_u64());
        let runtime = super::pg_runtime::RuntimeConns::new(target.clone())?;
        Ok(PgStore {
            runtime,
            pool: Some(pool),
            target,
            instance,
            retries: AtomicU64::new(0),
            upgrades: AtomicU64::new(0),
            round_trips: AtomicU64::new(0),
        })
    }

    pub(crate) fn target(&self) -> &PgTarget {
        &self.target
    }

    fn conn(&self) -> DbResult<r2d2::PooledConnection<Manager>> {
        let pool = self.pool.as_ref().ok_or_else(|| DbError::Unavailable("the store is closing".into()))?;
        pool.get().map_err(|e| DbError::Unavailable(e.to_string()))
    }

    /// Runs `f` in one transaction, again from the start after a
    /// serialization failure (up to [`MAX_ATTEMPTS`]). `feed_lock_first`:
    /// the op writes the feed, so the feed lock is taken before `BEGIN`.
    pub(crate) fn run<T, E>(
        &self,
        kind: TxKind,
        feed_lock_first: bool,
        mut f: impl FnMut(&dyn Db) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<DbError>,
    {
        let mut kind = kind;
        let mut lock_first = feed_lock_first && kind == TxKind::Write;
        let mut attempt = 0;
        let mut stale_left = self.target.pool_size + 1;
        loop {
            attempt += 1;
            let mut conn = self.conn()?;
            let outcome = attempt_once(&mut conn, kind, lock_first, &self.round_trips, &mut f);
            drop(conn);
            match outcome {
                Attempt::Done(r) => return r,
                Attempt::Stale(err) => {
                    // A connection PostgreSQL closed while it sat in the pool
                    // (a restart drops them all): the pool discards it, and the
                    // request runs on the next, nothing of it having been applied.
                    attempt -= 1;
                    stale_left -= 1;
                    if stale_left == 0 {
                        return Err(E::from(err));
                    }
                }
                Attempt::Retry { err: _, needs_write: true, .. } => {
                    // Not a conflict with anyone: no back-off, and not counted against the attempts.
                    attempt -= 1;
                    kind = TxKind::Write;
                    self.upgrades.fetch_add(1, Ordering::Relaxed);
                }
                Attempt::Retry { err, needs_feed_lock, .. } => {
                    if attempt >= MAX_ATTEMPTS {
                        return Err(E::from(err));
                    }
                    lock_first |= needs_feed_lock;
                    self.retries.fetch_add(1, Ordering::Relaxed);
                    // Back off a little, with jitter, so two retrying writers part.
                    let base = 1u64 << attempt.min(6);
                    std::thread::sleep(Duration::from_micros(base * 500 + rand_u64() % (base * 500)));
                }
            }
        }
    }

    /// Runs statements outside any request (maintenance bookkeeping).
    pub(crate) fn with_client<T>(&self, f: impl FnOnce(&mut postgres::Client) -> DbResult<T>) -> DbResult<T> {
        let manager = Manager::new(self.target.clone()).map_err(|e| DbError::Unavailable(e.to_string()))?;
        f(&mut manager.client()?)
    }

    /// Runs `f` only if no other instance is running it: the cluster's sweep,
    /// retention and webhooks, under a session advisory lock held on a
    /// connection of its own for as long as `f` runs (if this process dies,
    /// the connection closes and the lock goes with it). None: another
    /// instance holds it.
    pub(crate) fn exclusively<T>(&self, f: impl FnOnce() -> T) -> DbResult<Option<T>> {
        let conn = self.conn()?;
        let got: bool =
            conn.wait(conn.client().query_one("SELECT pg_try_advisory_lock($1)", &[&MAINTENANCE_LOCK]))?.get(0);
        if !got {
            return Ok(None);
        }
        let out = f();
        let _ = conn.wait(conn.client().query_one("SELECT pg_advisory_unlock($1)", &[&MAINTENANCE_LOCK]));
        Ok(Some(out))
    }
}

/// The sync client blocks when it closes a connection, which an async
/// thread must never do: the pool is closed on a thread of its own.
impl Drop for PgStore {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                let _ = std::thread::Builder::new().name("pcmail-pg-close".into()).spawn(move || drop(pool));
            } else {
                drop(pool);
            }
        }
    }
}

#[derive(Debug)]
struct LogErrors;

impl r2d2::HandleError<DbError> for LogErrors {
    fn handle_error(&self, e: DbError) {
        tracing::warn!(error = %e, "PostgreSQL connection failed");
    }
}

enum Attempt<T, E> {
    Done(Result<T, E>),
    /// The connection was closed before PostgreSQL answered anything of the
    /// attempt: nothing of it was applied.
    Stale(DbError),
    Retry {
        err: DbError,
        needs_feed_lock: bool,
        needs_write: bool,
    },
}

fn attempt_once<T, E: From<DbError>>(
    conn: &mut PgConn,
    kind: TxKind,
    lock_first: bool,
    round_trips: &AtomicU64,
    f: &mut impl FnMut(&dyn Db) -> Result<T, E>,
) -> Attempt<T, E> {
    if lock_first {
        round_trips.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = conn.wait(conn.client().query_one("SELECT pg_advisory_lock($1)", &[&FEED_LOCK])) {
            return if e.is_closed() {
                Attempt::Stale(DbError::Pg(e))
            } else {
                Attempt::Done(Err(E::from(DbError::Pg(e))))
            };
        }
    }
    let begin = match kind {
        TxKind::Write => "START TRANSACTION ISOLATION LEVEL SERIALIZABLE",
        TxKind::Read | TxKind::ReadFirst => "START TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY",
    };
    let PgConn { rt, client, stmts, .. } = conn;
    let client = client.as_ref().expect("the client lives as long as the connection");
    let db = PgTx {
        rt,
        client,
        round_trips,
        stmts: RefCell::new(stmts),
        begin: Cell::new(Some(begin)),
        ahead: RefCell::new(HashMap::new()),
        failed: RefCell::new(None),
        feed_locked: Cell::new(lock_first),
        changes: Cell::new(0),
        read_first: kind == TxKind::ReadFirst,
        read_only: kind != TxKind::Write,
        touches: RefCell::new(Vec::new()),
        answered: Cell::new(false),
    };
    let r = f(&db);
    let failed = db.failed.take();
    let out = match (r, failed) {
        (_, Some(Failure { stale: true, message, .. })) => {
            db.rollback();
            Attempt::Stale(DbError::Unavailable(message))
        }
        // A statement failed: the transaction is void whatever `f` made of it.
        (_, Some(Failure { needs_write: true, message, .. })) if kind == TxKind::ReadFirst => {
            db.rollback();
            Attempt::Retry { err: DbError::Aborted(message), needs_feed_lock: false, needs_write: true }
        }
        (_, Some(Failure { retryable: true, feed_lock, message, .. })) => {
            db.rollback();
            let err = if feed_lock { DbError::NeedsFeedLock } else { DbError::Aborted(message) };
            Attempt::Retry { err, needs_feed_lock: feed_lock, needs_write: false }
        }
        (Ok(_), Some(Failure { message, .. })) => {
            db.rollback();
            Attempt::Done(Err(E::from(DbError::Aborted(message))))
        }
        (Err(e), _) => {
            db.rollback();
            Attempt::Done(Err(e))
        }
        (Ok(v), None) => match db.commit() {
            Ok(()) => Attempt::Done(Ok(v)),
            Err(err) => {
                if err.is_retryable() {
                    Attempt::Retry { err, needs_feed_lock: false, needs_write: false }
                } else {
                    Attempt::Done(Err(E::from(err)))
                }
            }
        },
    };
    if lock_first {
        round_trips.fetch_add(1, Ordering::Relaxed);
        let _ = conn.wait(conn.client().query_one("SELECT pg_advisory_unlock($1)", &[&FEED_LOCK]));
    }
    out
}

struct Failure {
    retryable: bool,
    feed_lock: bool,
    /// A write refused by a read-only transaction (SQLSTATE 25006).
    needs_write: bool,
    /// The connection was closed before PostgreSQL answered anything of
    /// this attempt (see `Attempt::Stale`).
    stale: bool,
    message: String,
}

/// One open PostgreSQL transaction as a [`Db`].
struct PgTx<'c> {
    rt: &'c tokio::runtime::Runtime,
    client: &'c tokio_postgres::Client,
    round_trips: &'c AtomicU64,
    stmts: RefCell<&'c mut HashMap<String, postgres::Statement>>,
    /// The transaction's BEGIN until it is sent, with the first statement:
    /// a transaction costs no round trip of its own to start.
    begin: Cell<Option<&'static str>>,
    /// Answers of reads sent ahead ([`Db::prefetch`]), by statement and
    /// parameters; each is served once, and all are dropped at the first
    /// statement that may write (its answer could differ after it).
    /// Each read's rows come with the column its cells begin at.
    ahead: RefCell<HashMap<String, (usize, Vec<postgres::Row>)>>,
    /// The first statement that failed: PostgreSQL voids the rest of the transaction.
    failed: RefCell<Option<Failure>>,
    feed_locked: Cell<bool>,
    changes: Cell<u64>,
    /// Begun as [`TxKind::ReadFirst`]: a feed write means the request must run as a write.
    read_first: bool,
    /// READ ONLY (a read or a read-first request): nothing it did needs a COMMIT's answer.
    read_only: bool,
    /// [`Db::touch`] writes kept for after a read-only transaction's COMMIT.
    touches: RefCell<Vec<(String, Vec<super::Value>)>>,
    /// PostgreSQL has answered something of this attempt.
    answered: Cell<bool>,
}

impl PgTx<'_> {
    /// Waits for `f`'s answer: one round trip, which carries the
    /// transaction's BEGIN too when it has not been sent yet.
    fn wait<T>(&self, f: impl std::future::Future<Output = Result<T, postgres::Error>>) -> Result<T, postgres::Error> {
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        match self.begin.take() {
            None => self.rt.block_on(f),
            Some(begin) => self.rt.block_on(async {
                // Polled in this order, the two are sent in this order, before either answer is read.
                let (began, out) = futures_util::future::join(self.client.batch_execute(begin), f).await;
                began?;
                out
            }),
        }
    }

    /// A statement's answer: an answer counts as PostgreSQL having
    /// answered something of this attempt; a failure is kept.
    fn note<T>(&self, r: Result<T, postgres::Error>) -> DbResult<T> {
        match r {
            Ok(v) => {
                self.answered.set(true);
                Ok(v)
            }
            Err(e) => Err(self.failure(e)),
        }
    }

    /// Keeps a statement's failure (the first voids the transaction), and
    /// whether the connection was closed before PostgreSQL answered
    /// anything of this attempt. Every statement's own answer passes here
    /// or through [`Self::note`], also of statements sent together.
    fn failure(&self, e: postgres::Error) -> DbError {
        let answered_before = self.answered.get();
        if e.as_db_error().is_some() {
            self.answered.set(true);
        }
        let e = DbError::Pg(e);
        let mut failed = self.failed.borrow_mut();
        if failed.is_none() {
            let needs_write = matches!(&e, DbError::Pg(p) if p.code().is_some_and(|c| c.code() == "25006"));
            let stale = matches!(&e, DbError::Pg(p) if p.is_closed()) && !answered_before;
            *failed = Some(Failure {
                retryable: e.is_retryable(),
                feed_lock: false,
                needs_write,
                stale,
                message: e.to_string(),
            });
        }
        e
    }

    fn statement(&self, sql: &str) -> DbResult<postgres::Statement> {
        if let Some(s) = self.stmts.borrow().get(sql) {
            return Ok(s.clone());
        }
        let text = to_dollar_params(sql);
        let prepared = self.note(self.wait(self.client.prepare(&text)))?;
        self.stmts.borrow_mut().insert(sql.to_string(), prepared.clone());
        Ok(prepared)
    }

    fn rows(&self, stmt: &postgres::Statement, params: &[P<'_>]) -> DbResult<Vec<postgres::Row>> {
        self.note(self.wait(self.client.query(stmt, &bind(params))))
    }

    /// Ends the transaction keeping its writes. Nothing to do when no
    /// statement ran: its BEGIN was never sent. A read-only transaction's
    /// COMMIT changes nothing and cannot fail, so it is sent and not waited
    /// for: its answer is read, and dropped, with the connection's next one.
    fn commit(&self) -> DbResult<()> {
        let touches = self.touches.take();
        if !touches.is_empty() {
            return self.commit_then(&touches);
        }
        match self.begin.take() {
            Some(_) => Ok(()),
            None if self.read_only => {
                let mut commit = std::pin::pin!(self.client.batch_execute("COMMIT"));
                self.rt.block_on(async {
                    // The first poll queues it on the connection; the yield
                    // lets the connection's task write it to the socket.
                    std::future::poll_fn(|cx| {
                        let _ = commit.as_mut().poll(cx);
                        std::task::Poll::Ready(())
                    })
                    .await;
                    tokio::task::yield_now().await;
                });
                Ok(())
            }
            None => {
                self.round_trips.fetch_add(1, Ordering::Relaxed);
                Ok(self.rt.block_on(self.client.batch_execute("COMMIT"))?)
            }
        }
    }

    /// A read-only transaction's COMMIT and then its [`Db::touch`] writes,
    /// each its own statement outside the transaction, in one round trip.
    fn commit_then(&self, touches: &[(String, Vec<super::Value>)]) -> DbResult<()> {
        // Prepared inside the transaction if need be (once per connection); nothing runs there.
        let stmts = touches.iter().map(|(sql, _)| self.statement(sql)).collect::<DbResult<Vec<_>>>()?;
        let params: Vec<Vec<P<'_>>> =
            touches.iter().map(|(_, v)| v.iter().map(super::Value::as_param).collect()).collect();
        let refs: Vec<Vec<&(dyn ToSql + Sync)>> = params.iter().map(|ps| bind(ps)).collect();
        let began = self.begin.take().is_none();
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        self.rt.block_on(async {
            let commit = async {
                if began {
                    self.client.batch_execute("COMMIT").await
                } else {
                    Ok(())
                }
            };
            let writes =
                futures_util::future::join_all(stmts.iter().zip(&refs).map(|(s, r)| self.client.execute(s, r)));
            let (committed, written) = futures_util::future::join(commit, writes).await;
            committed?;
            written.into_iter().try_for_each(|w| w.map(|_| ()))
        })?;
        Ok(())
    }

    /// Ends the transaction dropping everything it did (an error on a
    /// broken connection is moot: the pool drops that connection).
    fn rollback(&self) {
        if self.begin.take().is_some() {
            return;
        }
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        let _ = self.rt.block_on(self.client.batch_execute("ROLLBACK"));
    }

    fn forget_reads_ahead(&self) {
        self.ahead.borrow_mut().clear();
    }
}

impl Db for PgTx<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn execute(&self, sql: &str, params: &[P<'_>]) -> DbResult<usize> {
        self.forget_reads_ahead();
        let stmt = self.statement(sql)?;
        let n = self.note(self.wait(self.client.execute(&stmt, &bind(params))))?;
        self.changes.set(self.changes.get() + n);
        Ok(n as usize)
    }

    fn query(&self, sql: &str, params: &[P<'_>], each: &mut dyn FnMut(&Row<'_>) -> DbResult<bool>) -> DbResult<()> {
        let rows = if !only_reads(sql) {
            self.forget_reads_ahead();
            None
        } else if self.ahead.borrow().is_empty() {
            None
        } else {
            self.ahead.borrow_mut().remove(&ahead_key(sql, params))
        };
        let (first, rows) = match rows {
            Some(ahead) => ahead,
            None => {
                let stmt = self.statement(sql)?;
                (0, self.rows(&stmt, params)?)
            }
        };
        for r in rows {
            if !each(&Row::Pg(&r, first))? {
                break;
            }
        }
        Ok(())
    }

    fn touch(&self, sql: &str, params: &[P<'_>]) -> DbResult<()> {
        if !self.read_only {
            return self.execute(sql, params).map(|_| ());
        }
        let owned = params.iter().copied().map(super::Value::from).collect();
        self.touches.borrow_mut().push((sql.to_string(), owned));
        Ok(())
    }

    fn batch(&self, sql: &str) -> DbResult<()> {
        self.forget_reads_ahead();
        self.note(self.wait(self.client.batch_execute(sql)))
    }

    fn prefetch(&self, reads: &[Read<'_>]) -> DbResult<()> {
        if reads.is_empty() {
            return Ok(());
        }
        // What this connection has not prepared yet is prepared first, all in one round trip.
        let new: Vec<String> = {
            let known = self.stmts.borrow();
            let mut new: Vec<String> =
                reads.iter().filter(|r| !known.contains_key(&*r.sql)).map(|r| r.sql.to_string()).collect();
            new.dedup();
            new
        };
        if !new.is_empty() {
            let texts: Vec<String> = new.iter().map(|sql| to_dollar_params(sql)).collect();
            // Only a failed BEGIN fails the whole; each statement's answer is noted below.
            let prepared = self
                .wait(async { Ok(futures_util::future::join_all(texts.iter().map(|t| self.client.prepare(t))).await) })
                .map_err(|e| self.failure(e))?;
            for (sql, p) in new.into_iter().zip(prepared) {
                let p = self.note(p)?;
                self.stmts.borrow_mut().insert(sql, p);
            }
        }
        let stmts = reads.iter().map(|r| self.statement(&r.sql)).collect::<DbResult<Vec<_>>>()?;
        let columns: Vec<&[postgres::Column]> = stmts.iter().map(|s| s.columns()).collect();
        // The reads as one statement (`pg_conn::together_sql`), prepared once per connection.
        let key = together_key(reads);
        let cached = self.stmts.borrow().get(&key).cloned();
        let together = match cached {
            Some(s) => s,
            None => {
                let prepared = self.note(self.wait(self.client.prepare(&together_sql(reads, &columns))))?;
                self.stmts.borrow_mut().insert(key, prepared.clone());
                prepared
            }
        };
        let rows = self.note(self.wait(self.client.query(&together, &bind_all(reads))))?;
        let of_read = rows_by_read(rows, reads.len())
            .ok_or_else(|| DbError::Decode { col: 0, what: "a row of the reads sent ahead names no read".into() })?;
        let mut ahead = self.ahead.borrow_mut();
        for ((r, rows), first) in reads.iter().zip(of_read).zip(first_columns(&columns)) {
            ahead.insert(ahead_key(&r.sql, &r.params), (first, rows));
        }
        Ok(())
    }

    fn total_changes(&self) -> u64 {
        self.changes.get()
    }

    fn before_feed_write(&self) -> DbResult<()> {
        if self.feed_locked.get() {
            return Ok(());
        }
        if self.read_first {
            *self.failed.borrow_mut() = Some(Failure {
                retryable: true,
                feed_lock: false,
                needs_write: true,
                stale: false,
                message: "a read-first request writes the feed".into(),
            });
            return Err(DbError::NeedsFeedLock);
        }
        self.forget_reads_ahead();
        let stmt = self.statement("SELECT pg_try_advisory_xact_lock(?1)")?;
        let got: bool = self.rows(&stmt, &[P::Int(FEED_LOCK)])?.first().map(|r| r.get(0)).unwrap_or(false);
        if got {
            self.feed_locked.set(true);
            return Ok(());
        }
        // Taken: waiting here, holding rows, could deadlock. Run again holding it from the start.
        *self.failed.borrow_mut() = Some(Failure {
            retryable: true,
            feed_lock: true,
            needs_write: false,
            stale: false,
            message: "the feed lock is taken".into(),
        });
        Err(DbError::NeedsFeedLock)
    }
}

/// What a wake-up tells an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// These labels have news.
    Labels(Vec<String>),
    /// Anything may have changed (after a reconnect): every long poll re-reads.
    All,
}

/// The payload of `pg_notify(WAKE_CHANNEL, …)` for these labels (at most
/// PostgreSQL's 8,000 bytes; more labels than fit wake everyone instead).
pub(crate) fn wake_payload(instance: &str, labels: &[String]) -> String {
    let v = serde_json::json!({"i": instance, "l": labels});
    let s = v.to_string();
    if s.len() < 7_900 {
        s
    } else {
        serde_json::json!({"i": instance, "all": true}).to_string()
    }
}

fn parse_wake(instance: &str, payload: &str) -> Option<Wake> {
    let v: serde_json::Value = serde_json::from_str(payload).ok()?;
    if v["i"].as_str() == Some(instance) {
        // Our own commit: the local listener already woke those polls.
        return None;
    }
    if v["all"] == serde_json::json!(true) {
        return Some(Wake::All);
    }
    let labels = v["l"].as_array()?.iter().filter_map(|l| l.as_str().map(str::to_string)).collect();
    Some(Wake::Labels(labels))
}

/// Listens for other instances' wake-ups on a connection of its own until
/// `stop`, reconnecting with backoff; every (re)connect wakes all.
pub(crate) fn spawn_listener(
    target: PgTarget,
    instance: String,
    on: Arc<dyn Fn(Wake) + Send + Sync>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("pcmail-pg-listen".into())
        .spawn(move || {
            let Ok(manager) = Manager::new(target) else { return };
            let mut backoff = Duration::from_millis(50);
            let mut was_connected = false;
            while !stop.load(Ordering::Relaxed) {
                let mut client = match manager.client() {
                    Ok(c) => c,
                    Err(e) => {
                        if was_connected {
                            tracing::warn!(error = %super::pg_message(&e), "wake-up listener: reconnecting");
                        }
                        std::thread::sleep(backoff);
                        backoff = (backoff * 2).min(Duration::from_secs(2));
                        continue;
                    }
                };
                if client.batch_execute(&format!("LISTEN {WAKE_CHANNEL}")).is_err() {
                    continue;
                }
                backoff = Duration::from_millis(50);
                if was_connected {
                    tracing::info!("wake-up listener reconnected: every long poll re-reads");
                }
                was_connected = true;
                // Whatever was sent while we were away is lost: everyone re-reads by cursor.
                on(Wake::All);
                let mut idle_rounds = 0u32;
                'listen: while !stop.load(Ordering::Relaxed) {
                    use postgres::fallible_iterator::FallibleIterator;
                    let mut woke = Vec::new();
                    {
                        let mut n = client.notifications();
                        // Wait (at most half a second) for the first; then take what is already here.
                        match n.timeout_iter(Duration::from_millis(500)).next() {
                            Ok(Some(note)) => woke.push(note.payload().to_string()),
                            Ok(None) => {}
                            Err(_) => break 'listen,
                        }
                        if !woke.is_empty() {
                            let mut more = n.iter();
                            while let Ok(Some(note)) = more.next() {
                                woke.push(note.payload().to_string());
                                if woke.len() >= 256 {
                                    break;
                                }
                            }
                        }
                    }
                    for p in &woke {
                        if let Some(w) = parse_wake(&instance, p) {
                            on(w);
                        }
                    }
                    // The connection may be dead without an error: check it when idle.
                    if woke_nothing_for_a_while(&mut idle_rounds, &woke)
                        && (client.is_closed() || client.simple_query("").is_err())
                    {
                        break;
                    }
                }
            }
        })
        .expect("spawning the wake-up listener")
}

/// True every few idle rounds (about two seconds), when the listener checks
/// that its connection still answers.
fn woke_nothing_for_a_while(idle_rounds: &mut u32, woke: &[String]) -> bool {
    if !woke.is_empty() {
        *idle_rounds = 0;
        return false;
    }
    *idle_rounds += 1;
    (*idle_rounds).is_multiple_of(4)
}

/// A random number from the OS (instance names, retry jitter).
pub(crate) fn rand_u64() -> u64 {
    let mut b = [0u8; 8];
    if std::fs::File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b)).is_err() {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        return (t as u64) ^ u64::from(std::process::id());
    }
    u64::from_le_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wake_payload_is_not_delivered_to_its_own_instance_and_never_too_long() {
        let p = wake_payload("me", &["pc-a".into(), "pc b".into()]);
        assert_eq!(parse_wake("me", &p), None);
        assert_eq!(parse_wake("other", &p), Some(Wake::Labels(vec!["pc-a".into(), "pc b".into()])));
        let many: Vec<String> = (0..2000).map(|i| format!("label-{i}")).collect();
        let p = wake_payload("me", &many);
        assert!(p.len() < 8000);
        assert_eq!(parse_wake("other", &p), Some(Wake::All));
    }
}

#[cfg(test)]
mod pg_tests {
    use super::*;
    use crate::store::p;
    use crate::store::DbExt;
    use pcmail_pgtest::Postgres;
    use std::sync::{Barrier, Mutex};
    use std::time::Instant;

    fn store(pg: &Postgres, db: &str) -> PgStore {
        let url = pg.create_database(db);
        PgStore::open(PgTarget::parse(&url, None).unwrap()).unwrap()
    }

    #[test]
    fn a_postgres_transaction_runs_the_portable_subset() {
        let pg = Postgres::start();
        let s = store(&pg, "subset");
        let n: i64 = s
            .run(TxKind::Write, false, |db| -> DbResult<i64> {
                db.batch("CREATE TABLE t (k TEXT PRIMARY KEY, n BIGINT NOT NULL, o TEXT)")?;
                assert_eq!(
                    db.execute("INSERT INTO t (k, n, o) VALUES (?1, ?2, ?3)", p!["a", 1i64, None::<String>])?,
                    1
                );
                assert_eq!(
                    db.execute("INSERT INTO t (k, n) VALUES (?1, ?2) ON CONFLICT (k) DO NOTHING", p!["a", 5i64])?,
                    0
                );
                db.query_one(
                    "INSERT INTO t (k, n) VALUES (?1, 1) ON CONFLICT (k) DO UPDATE SET n = t.n + 1 RETURNING n",
                    p!["a"],
                    |r| r.get(0),
                )
            })
            .unwrap();
        assert_eq!(n, 2);
        let rows = s
            .run(TxKind::Read, false, |db| {
                db.query_all("SELECT k, n, o, count(*) OVER () FROM t ORDER BY k", p![], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, Option<String>>(2)?,
                        r.get::<_, i64>(3)?,
                    ))
                })
            })
            .unwrap();
        assert_eq!(rows, vec![("a".to_string(), 2, None, 1)]);
        // A read-only transaction refuses writes.
        let r = s.run(TxKind::Read, false, |db| db.execute("DELETE FROM t WHERE k = ?1", p!["a"]));
        assert!(r.is_err());
    }

    /// Reads sent ahead go out as one statement: each is answered with its
    /// own rows, in its own order, its own columns and types, whatever its
    /// neighbours return (nothing, other shapes, the same text with other
    /// parameters, a record and a void beside them).
    #[test]
    fn reads_sent_ahead_together_are_each_answered_as_alone() {
        let pg = Postgres::start();
        let s = store(&pg, "together");
        s.run(TxKind::Write, false, |db| {
            db.batch(
                "CREATE TABLE t (k TEXT PRIMARY KEY, n BIGINT NOT NULL, f DOUBLE PRECISION, o TEXT); \
                 INSERT INTO t VALUES ('a', 3, 0.5, NULL), ('b', 1, NULL, 'x'), ('c', 2, 1.5, 'y')",
            )
        })
        .unwrap();
        const BY_N: &str = "SELECT k, n FROM t WHERE n >= ?1 ORDER BY n DESC LIMIT ?2";
        const ONE: &str = "SELECT o, f, n = 2 FROM t WHERE k = ?1";
        const COUNT: &str = "SELECT count(*) FROM t WHERE o IS NOT NULL";
        const PAIR: &str = "SELECT ROW(k, n), pg_sleep(0) FROM t WHERE k = ?1";
        let reads = [
            Read::new(BY_N, vec![P::Int(1), P::Int(2)]),
            Read::new(ONE, vec![P::Text("zz")]),
            Read::new(ONE, vec![P::Text("c")]),
            Read::new(COUNT, vec![]),
            Read::new(BY_N, vec![P::Int(2), P::Int(9)]),
        ];
        type Answers = (Vec<(String, i64)>, Vec<(Option<String>, crate::store::Value, bool)>, i64, Vec<(String, i64)>);
        let ask = |db: &dyn Db| -> DbResult<Answers> {
            let by_n = |lo: i64, n: i64| db.query_all(BY_N, p![lo, n], |r| Ok((r.get(0)?, r.get(1)?)));
            let one = |k: &str| db.query_all(ONE, p![k], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)));
            let mut c = one("c")?;
            c.extend(one("zz")?);
            Ok((by_n(1, 2)?, c, db.query_one(COUNT, p![], |r| r.get(0))?, by_n(2, 9)?))
        };
        let alone = s.run(TxKind::Read, false, |db| ask(db)).unwrap();
        let trips = || s.round_trips.load(Ordering::Relaxed);
        let sent_ahead = || {
            let before = trips();
            let answers = s
                .run(TxKind::Read, false, |db| {
                    db.prefetch(&reads)?;
                    ask(db)
                })
                .unwrap();
            (answers, trips() - before)
        };
        let (ahead, first_trips) = sent_ahead();
        assert_eq!(ahead, alone);
        let expected: Answers = (
            vec![("a".into(), 3), ("c".into(), 2)],
            vec![(Some("y".into()), crate::store::Value::Real(1.5), true)],
            2,
            vec![("a".into(), 3), ("c".into(), 2)],
        );
        assert_eq!(ahead, expected);
        // Its first time on this connection: prepared alone, then together, then run; nothing asked later.
        assert!(first_trips <= 4, "{first_trips} round trips");
        assert_eq!(sent_ahead(), (expected, 1), "prepared: one round trip in all");
        // Cells of other types (a record, a void) stand as typed NULLs as well.
        let pair = [Read::new(PAIR, vec![P::Text("a")]), Read::new(COUNT, vec![])];
        let n = s
            .run(TxKind::Read, false, |db| {
                db.prefetch(&pair)?;
                db.query_one(COUNT, p![], |r| r.get::<_, i64>(0))
            })
            .unwrap();
        assert_eq!(n, 2);
    }

    /// A read-first request that only reads runs once, as a read; one that
    /// writes is refused by the read-only transaction and runs again as a
    /// write, even when it swallowed the refusal, and its write is kept.
    #[test]
    fn a_read_first_request_runs_again_as_a_write_only_when_it_writes() {
        let pg = Postgres::start();
        let s = store(&pg, "readfirst");
        s.run(TxKind::Write, false, |db| db.batch("CREATE TABLE t (k TEXT PRIMARY KEY, n BIGINT NOT NULL)")).unwrap();
        s.run(TxKind::Write, false, |db| db.execute("INSERT INTO t (k, n) VALUES ('a', 1)", p![])).unwrap();
        let mut runs = 0;
        let n: i64 = s
            .run(TxKind::ReadFirst, false, |db| {
                runs += 1;
                db.query_one("SELECT n FROM t WHERE k = 'a'", p![], |r| r.get(0))
            })
            .unwrap();
        assert_eq!((n, runs, s.upgrades.load(Ordering::Relaxed)), (1, 1, 0));

        let mut runs = 0;
        let n: i64 = s
            .run(TxKind::ReadFirst, false, |db| {
                runs += 1;
                let n: i64 = db.query_one("SELECT n FROM t WHERE k = 'a'", p![], |r| r.get(0))?;
                // The refusal is swallowed, as an op that tolerates one bad item might.
                let _ = db.execute("UPDATE t SET n = n + 1 WHERE k = 'a'", p![]);
                Ok::<_, DbError>(n)
            })
            .unwrap();
        assert_eq!((n, runs, s.upgrades.load(Ordering::Relaxed)), (1, 2, 1));
        assert_eq!(s.retries.load(Ordering::Relaxed), 0, "an upgrade is not a serialization retry");
        let n: i64 =
            s.run(TxKind::Read, false, |db| db.query_one("SELECT n FROM t WHERE k = 'a'", p![], |r| r.get(0))).unwrap();
        assert_eq!(n, 2, "the write of the second run is kept, once");
    }

    /// PostgreSQL restarted while the pool's connections sat idle: every
    /// one of them is closed, yet the next request runs (on a fresh
    /// connection) instead of failing once per dead one, whether its first
    /// statement goes alone or with reads sent ahead of it.
    #[test]
    fn after_a_postgres_restart_the_next_request_runs() {
        let mut pg = Postgres::start();
        let s = store(&pg, "restart");
        s.run(TxKind::Write, false, |db| db.batch("CREATE TABLE t (k TEXT PRIMARY KEY)")).unwrap();
        let count = "SELECT count(*) FROM t WHERE k > ?1";
        // Several connections in the pool, all idle, each with the count
        // prepared (as a busy server's are), then a restart under them.
        let fill_then_restart = |pg: &mut Postgres| {
            std::thread::scope(|sc| {
                for _ in 0..4 {
                    sc.spawn(|| {
                        s.run(TxKind::Read, false, |db| {
                            std::thread::sleep(Duration::from_millis(100));
                            db.query_one(count, p![""], |r| r.get::<_, i64>(0))
                        })
                        .unwrap()
                    });
                }
            });
            pg.crash();
            pg.restart();
        };
        fill_then_restart(&mut pg);
        for k in ["a", "b", "c"] {
            let r = s.run(TxKind::Write, false, |db| db.execute("INSERT INTO t (k) VALUES (?1)", p![k]));
            assert_eq!(r.unwrap(), 1, "{k}");
        }
        fill_then_restart(&mut pg);
        let n: i64 = s
            .run(TxKind::Read, false, |db| {
                db.prefetch(&[Read::new(count, vec![P::Text("")])])?;
                db.query_one(count, p![""], |r| r.get(0))
            })
            .expect("the first request after the restart, its reads sent ahead");
        assert_eq!(n, 3, "each insert applied once");
    }

    #[test]
    fn a_swallowed_statement_error_never_commits() {
        let pg = Postgres::start();
        let s = store(&pg, "swallow");
        s.run(TxKind::Write, false, |db| db.batch("CREATE TABLE t (k TEXT PRIMARY KEY)")).unwrap();
        let r = s.run(TxKind::Write, false, |db| -> DbResult<()> {
            db.execute("INSERT INTO t (k) VALUES (?1)", p!["x"])?;
            let _ = db.execute("INSERT INTO nowhere (k) VALUES (?1)", p!["y"]);
            Ok(())
        });
        assert!(matches!(r, Err(DbError::Aborted(_))), "{r:?}");
        let n: i64 =
            s.run(TxKind::Read, false, |db| db.query_one("SELECT count(*) FROM t", p![], |r| r.get(0))).unwrap();
        assert_eq!(n, 0, "nothing of the voided transaction is kept");
    }

    /// Two instances check-then-insert the same key at once: SERIALIZABLE
    /// aborts one, which runs again and sees the other's row.
    #[test]
    fn check_then_insert_from_two_writers_keeps_one_row() {
        let pg = Postgres::start();
        let s = Arc::new(store(&pg, "claims"));
        s.run(TxKind::Write, false, |db| db.batch("CREATE TABLE claim (resource TEXT NOT NULL, holder TEXT NOT NULL)"))
            .unwrap();
        let barrier = Arc::new(Barrier::new(2));
        let outcomes = Arc::new(Mutex::new(Vec::new()));
        let threads: Vec<_> = ["a", "b"]
            .into_iter()
            .map(|who| {
                let (s, barrier, outcomes) = (s.clone(), barrier.clone(), outcomes.clone());
                std::thread::spawn(move || {
                    let mut first = true;
                    let got = s
                        .run(TxKind::Write, false, |db| -> DbResult<bool> {
                            let held: i64 =
                                db.query_one("SELECT count(*) FROM claim WHERE resource = ?1", p!["r"], |r| r.get(0))?;
                            if std::mem::take(&mut first) {
                                // Both have read "free" before either writes.
                                barrier.wait();
                            }
                            if held > 0 {
                                return Ok(false);
                            }
                            db.execute("INSERT INTO claim (resource, holder) VALUES (?1, ?2)", p!["r", who])?;
                            Ok(true)
                        })
                        .unwrap();
                    outcomes.lock().unwrap().push(got);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let n: i64 =
            s.run(TxKind::Read, false, |db| db.query_one("SELECT count(*) FROM claim", p![], |r| r.get(0))).unwrap();
        assert_eq!(n, 1, "one holder");
        let mut o = outcomes.lock().unwrap().clone();
        o.sort();
        assert_eq!(o, vec![false, true], "one claim won, the other saw it after running again");
        assert!(s.retries.load(Ordering::Relaxed) >= 1);
    }

    /// A second writer of the feed waits for the first to commit, so rows
    /// become visible in `seq` order.
    #[test]
    fn feed_rows_commit_in_seq_order() {
        let pg = Postgres::start();
        let s = Arc::new(store(&pg, "feed"));
        s.run(TxKind::Write, false, |db| {
            db.batch("CREATE TABLE ev (seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, who TEXT NOT NULL)")
        })
        .unwrap();
        // When a's transaction was last seen still open: its commit comes
        // after this instant, so a b that waited for it returns later. The
        // order in which the two threads get to run after their commits says
        // nothing, so the test compares instants taken where they prove it.
        let a_still_open = Arc::new(Mutex::new(None::<Instant>));
        let inside = Arc::new(Barrier::new(2));
        let a = {
            let (s, a_still_open, inside) = (s.clone(), a_still_open.clone(), inside.clone());
            std::thread::spawn(move || {
                let mut first = true;
                s.run(TxKind::Write, false, |db| -> DbResult<i64> {
                    db.before_feed_write()?;
                    let seq = db.query_one("INSERT INTO ev (who) VALUES ('a') RETURNING seq", p![], |r| r.get(0))?;
                    if std::mem::take(&mut first) {
                        inside.wait();
                    }
                    std::thread::sleep(Duration::from_millis(300));
                    *a_still_open.lock().unwrap() = Some(Instant::now());
                    Ok(seq)
                })
                .unwrap()
            })
        };
        inside.wait();
        let b_seq: i64 = s
            .run(TxKind::Write, false, |db| -> DbResult<i64> {
                db.before_feed_write()?;
                db.query_one("INSERT INTO ev (who) VALUES ('b') RETURNING seq", p![], |r| r.get(0))
            })
            .unwrap();
        let b_returned = Instant::now();
        let a_seq = a.join().unwrap();
        let a_open = a_still_open.lock().unwrap().expect("a ran");
        assert!(b_returned > a_open, "b waited for a's commit");
        assert!(b_seq > a_seq, "the later commit has the larger seq: a {a_seq}, b {b_seq}");
        assert!(s.retries.load(Ordering::Relaxed) >= 1, "b ran again holding the lock from the start");
    }

    #[test]
    fn the_listener_hears_other_instances_and_wakes_all_after_a_reconnect() {
        let pg = Postgres::start();
        let s = store(&pg, "listen");
        let heard = Arc::new(Mutex::new(Vec::<Wake>::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let h = heard.clone();
        let mut target = s.target().clone();
        target.set_application_name_for_tests("pcmail-listen-test");
        let thread =
            spawn_listener(target, s.instance.clone(), Arc::new(move |w| h.lock().unwrap().push(w)), stop.clone());
        let wait_for = |pred: &dyn Fn(&[Wake]) -> bool| {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !pred(&heard.lock().unwrap()) {
                assert!(Instant::now() < deadline, "not heard: {:?}", heard.lock().unwrap());
                std::thread::sleep(Duration::from_millis(10));
            }
        };
        wait_for(&|w| w.contains(&Wake::All));
        heard.lock().unwrap().clear();
        let send = |instance: &str, labels: &[&str]| {
            let labels: Vec<String> = labels.iter().map(|l| l.to_string()).collect();
            let payload = wake_payload(instance, &labels);
            s.run(TxKind::Write, false, |db| db.execute("SELECT pg_notify(?1, ?2)", p![WAKE_CHANNEL, payload]))
                .unwrap();
        };
        send(&s.instance, &["mine"]);
        let t = Instant::now();
        send("another", &["pc-b"]);
        wait_for(&|w| w.contains(&Wake::Labels(vec!["pc-b".into()])));
        assert!(t.elapsed() < Duration::from_millis(600), "heard in {:?}", t.elapsed());
        assert!(!heard.lock().unwrap().contains(&Wake::Labels(vec!["mine".into()])), "its own are not re-delivered");
        heard.lock().unwrap().clear();
        // The listener's connection is cut (a restart, a network blip): it comes back and wakes everyone.
        pg.admin()
            .batch_execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'pcmail-listen-test'",
            )
            .unwrap();
        wait_for(&|w| w.contains(&Wake::All));
        stop.store(true, Ordering::Relaxed);
        thread.join().unwrap();
    }
}

#[cfg(test)]
mod tls_tests {
    use super::*;
    use crate::store::p;
    use crate::store::DbExt;
    use pcmail_pgtest::{Options, Postgres};

    fn tls_url(pg: &Postgres, roots: &std::path::Path, host: &str) -> String {
        format!("postgres://postgres@{host}:{}/postgres?sslmode=require&sslrootcert={}", pg.port(), roots.display())
    }

    #[test]
    fn tls_to_postgres_is_verified_and_the_password_comes_from_the_passfile() {
        let pg =
            Postgres::start_with(Options { tls: true, password: Some("pw-from-file".into()), ..Default::default() });
        let home = tempfile::tempdir().unwrap();
        let pass = home.path().join(".pgpass");
        std::fs::write(&pass, format!("localhost:{}:*:postgres:pw-from-file\n", pg.port())).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&pass, std::fs::Permissions::from_mode(0o600)).unwrap();

        let mut target = PgTarget::parse(&tls_url(&pg, &pg.ca_cert(), "localhost"), Some(home.path())).unwrap();
        target.password_from_passfile(Some(home.path()));
        assert_eq!(target.password_source, "passfile");
        assert!(!format!("{target:?}{}", target.redacted()).contains("pw-from-file"), "never shown");
        let s = PgStore::open(target).unwrap();
        let ssl: bool = s
            .run(TxKind::Read, false, |db| {
                db.query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", p![], |r| r.get(0))
            })
            .unwrap();
        assert!(ssl, "the session is encrypted");

        // Another CA: the server is not the one we trust.
        let other = Postgres::start_with(Options { tls: true, ..Default::default() });
        let mut target = PgTarget::parse(&tls_url(&pg, &other.ca_cert(), "localhost"), None).unwrap();
        target.set_password("pw-from-file");
        let e = PgStore::open(target).err().expect("an unknown CA is refused");
        assert!(e.to_string().contains("connecting to"), "{e}");

        // Clear text is refused by a server that requires TLS, and a wrong password by any.
        let mut target =
            PgTarget::parse(&format!("postgres://postgres@localhost:{}/postgres?sslmode=disable", pg.port()), None)
                .unwrap();
        target.set_password("pw-from-file");
        assert!(PgStore::open(target).is_err());
        let mut target = PgTarget::parse(&tls_url(&pg, &pg.ca_cert(), "localhost"), None).unwrap();
        target.set_password("wrong");
        assert!(PgStore::open(target).is_err());
    }
}
