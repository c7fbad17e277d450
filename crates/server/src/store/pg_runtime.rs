//! Requests answered on the server's own async runtime, from reads sent ahead.
//!
//! A request on the pool ([`super::pg::PgStore::run`]) runs on a blocking
//! thread: the connection's task hands the op to that thread and takes its
//! answer back, two wake-ups of another thread per request, which cost a
//! caught-up poll about a quarter of the server's CPU, and more when an
//! instance has fewer requests to keep its threads awake. Most requests of
//! a PC that is up to date (its polls, `hello`) read only what the engine
//! knows they will read before they begin (`Engine::reads_ahead`). Such a
//! request is answered here instead, without leaving the runtime: on a
//! connection of this runtime, its BEGIN and those reads go out together;
//! once they are answered the op runs, unchanged, on a [`Db`] that serves
//! exactly those rows. The moment it asks for anything else (another read,
//! any write, the feed lock) the attempt is void: it is rolled back and the
//! request runs again from the start on the pool, where nothing differs
//! from before. Nothing was written, so running it again is idempotent. A
//! [`Db::touch`] (the heartbeat) is written after the read transaction's
//! COMMIT, as on the pool.

use super::pg_conn::{ahead_key, bind, drive, only_reads, SESSION_SETUP};
use super::pg_url::PgTarget;
use super::{to_dollar_params, Db, DbError, DbResult, Dialect, Read, Row, Value, P};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// After a connection could not be opened, how long requests leave this path to the pool.
const RETRY_CONNECT_AFTER: std::time::Duration = std::time::Duration::from_secs(2);

const BEGIN_READ: &str = "START TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY";

/// Connections driven by the runtime that serves requests, opened as
/// requests need them (up to `max`) and kept.
pub(crate) struct RuntimeConns {
    target: PgTarget,
    tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
    idle: Mutex<Vec<RuntimeConn>>,
    open: AtomicUsize,
    max: usize,
    /// When a connection could last not be opened: for a while after, no
    /// request waits for another attempt (the pool reports the outage).
    failed_at: Mutex<Option<std::time::Instant>>,
    /// Requests answered here.
    pub answered: AtomicU64,
    /// Requests that asked for more than was read ahead and ran on the pool.
    pub handed_on: AtomicU64,
}

struct RuntimeConn {
    client: tokio_postgres::Client,
    stmts: HashMap<String, tokio_postgres::Statement>,
}

/// Gives a connection back to the idle list when dropped, unless it closed
/// or is inside a transaction; such a one is closed and frees its place.
struct Taken<'a> {
    conns: &'a RuntimeConns,
    conn: Option<RuntimeConn>,
    /// Its BEGIN was sent and its COMMIT or ROLLBACK not yet. A request is
    /// dropped half way when its caller goes away (the HTTP connection
    /// closed): the next request's BEGIN would then run inside this one's
    /// transaction, on its snapshot. Closing the connection ends it.
    in_tx: bool,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        match self.conn.take() {
            Some(c) if !self.in_tx && !c.client.is_closed() => {
                self.conns.idle.lock().unwrap_or_else(|e| e.into_inner()).push(c)
            }
            _ => {
                self.conns.open.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

impl RuntimeConns {
    pub(crate) fn new(target: PgTarget) -> Result<RuntimeConns, super::pg_url::UrlError> {
        let tls = target.rustls()?;
        let max = target.pool_size as usize;
        Ok(RuntimeConns {
            target,
            tls,
            idle: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            max,
            failed_at: Mutex::new(None),
            answered: AtomicU64::new(0),
            handed_on: AtomicU64::new(0),
        })
    }

    /// An idle connection, or a new one while fewer than `max` are open;
    /// None when none can be had now (the request then runs on the pool,
    /// which waits for a connection and reports what fails).
    async fn take(&self) -> Option<Taken<'_>> {
        if let Some(c) = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Some(Taken { conns: self, conn: Some(c), in_tx: false });
        }
        let failed_lately = |at: &Option<std::time::Instant>| at.is_some_and(|t| t.elapsed() < RETRY_CONNECT_AFTER);
        if failed_lately(&self.failed_at.lock().unwrap_or_else(|e| e.into_inner())) {
            return None;
        }
        if self.open.fetch_add(1, Ordering::Relaxed) >= self.max {
            self.open.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        // Counted as open from here: a failed connect gives its place back.
        let mut taken = Taken { conns: self, conn: None, in_tx: false };
        match self.connect().await {
            Ok(client) => {
                taken.conn = Some(RuntimeConn { client, stmts: HashMap::new() });
                Some(taken)
            }
            Err(e) => {
                tracing::debug!(error = %super::pg_message(&e), "a connection for the runtime: not now");
                *self.failed_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::time::Instant::now());
                None
            }
        }
    }

    async fn connect(&self) -> Result<tokio_postgres::Client, postgres::Error> {
        let cfg = self.target.config();
        let client = match &self.tls {
            Some(t) => {
                let (client, conn) = cfg.connect(t.clone()).await?;
                tokio::spawn(drive(conn));
                client
            }
            None => {
                let (client, conn) = cfg.connect(tokio_postgres::NoTls).await?;
                tokio::spawn(drive(conn));
                client
            }
        };
        client.batch_execute(SESSION_SETUP).await?;
        Ok(client)
    }

    /// Runs `f` on `reads` answered ahead in one read transaction. None: the
    /// request is not answered here (no connection, a read or the BEGIN
    /// failed, or `f` asked for more than `reads`); nothing of it was
    /// applied, and it must run on the pool.
    pub(crate) async fn answer<T, E>(
        &self,
        reads: &[Read<'_>],
        f: impl FnOnce(&dyn Db) -> Result<T, E>,
    ) -> Option<Result<T, E>> {
        let out = self.try_answer(reads, f).await;
        match &out {
            Some(_) => self.answered.fetch_add(1, Ordering::Relaxed),
            None => self.handed_on.fetch_add(1, Ordering::Relaxed),
        };
        out
    }

    async fn try_answer<T, E>(
        &self,
        reads: &[Read<'_>],
        f: impl FnOnce(&dyn Db) -> Result<T, E>,
    ) -> Option<Result<T, E>> {
        let mut taken = self.take().await?;
        let Taken { conn, in_tx, .. } = &mut taken;
        let conn = conn.as_mut().expect("a taken connection is there until dropped");
        // What this connection has not prepared yet, prepared first, in one round trip.
        let mut new: Vec<&str> = reads.iter().map(|r| &*r.sql).filter(|s| !conn.stmts.contains_key(*s)).collect();
        new.sort_unstable();
        new.dedup();
        if !new.is_empty() {
            let texts: Vec<String> = new.iter().map(|s| to_dollar_params(s)).collect();
            let prepared = futures_util::future::join_all(texts.iter().map(|t| conn.client.prepare(t))).await;
            for (sql, p) in new.iter().zip(prepared) {
                conn.stmts.insert(sql.to_string(), p.ok()?);
            }
        }
        let stmts: Vec<tokio_postgres::Statement> = reads.iter().map(|r| conn.stmts[&*r.sql].clone()).collect();
        let params: Vec<Vec<&(dyn postgres::types::ToSql + Sync)>> = reads.iter().map(|r| bind(&r.params)).collect();
        // Polled in this order, the BEGIN and the reads are sent in this order, before any answer is read.
        *in_tx = true;
        let (began, answers) = futures_util::future::join(
            conn.client.batch_execute(BEGIN_READ),
            futures_util::future::join_all(stmts.iter().zip(&params).map(|(s, p)| conn.client.query(s, p))),
        )
        .await;
        drop(params);
        if began.is_err() {
            // No transaction began (or the connection is gone: closed with it).
            *in_tx = false;
            return None;
        }
        let mut rows = HashMap::with_capacity(reads.len());
        let mut failed = false;
        for (r, answer) in reads.iter().zip(answers) {
            match answer {
                Ok(a) => {
                    rows.insert(ahead_key(&r.sql, &r.params), a);
                }
                Err(_) => failed = true,
            }
        }
        let (result, touches) = if failed {
            (None, Vec::new())
        } else {
            let tx = AheadTx { rows: RefCell::new(rows), missed: Cell::new(false), touches: RefCell::new(Vec::new()) };
            let r = f(&tx);
            if tx.missed.get() {
                (None, Vec::new())
            } else {
                (Some(r), tx.touches.into_inner())
            }
        };
        let Some(result) = result else {
            // Void: the pool runs the request again from the start.
            conn.client.batch_execute("ROLLBACK").await.ok()?;
            *in_tx = false;
            return None;
        };
        if touches.is_empty() {
            // A read-only COMMIT changes nothing and cannot fail: sent, not
            // waited for; its answer is read, and dropped, with the
            // connection's next one (the connection sends in order).
            let mut commit = std::pin::pin!(conn.client.batch_execute("COMMIT"));
            std::future::poll_fn(|cx| {
                let _ = std::future::Future::poll(commit.as_mut(), cx);
                std::task::Poll::Ready(())
            })
            .await;
            *in_tx = false;
            return Some(result);
        }
        // A heartbeat that could not be written (the connection lost with
        // it): the request read only, so the pool runs it again whole.
        write_touches(conn, &touches).await.ok()?;
        *in_tx = false;
        Some(result)
    }
}

/// The read transaction's COMMIT, then each [`Db::touch`] as a statement of
/// its own, in one round trip.
async fn write_touches(conn: &mut RuntimeConn, touches: &[(String, Vec<Value>)]) -> DbResult<()> {
    for (sql, _) in touches {
        if !conn.stmts.contains_key(sql) {
            let p = conn.client.prepare(&to_dollar_params(sql)).await?;
            conn.stmts.insert(sql.clone(), p);
        }
    }
    let stmts: Vec<tokio_postgres::Statement> = touches.iter().map(|(sql, _)| conn.stmts[sql].clone()).collect();
    let params: Vec<Vec<P<'_>>> = touches.iter().map(|(_, v)| v.iter().map(Value::as_param).collect()).collect();
    let refs: Vec<Vec<&(dyn postgres::types::ToSql + Sync)>> = params.iter().map(|ps| bind(ps)).collect();
    let (committed, written) = futures_util::future::join(
        conn.client.batch_execute("COMMIT"),
        futures_util::future::join_all(stmts.iter().zip(&refs).map(|(s, r)| conn.client.execute(s, r))),
    )
    .await;
    committed?;
    written.into_iter().try_for_each(|w| w.map(|_| ()))?;
    Ok(())
}

/// The rows read ahead as a [`Db`]: each read once, as it was sent; anything
/// else voids the attempt.
struct AheadTx {
    rows: RefCell<HashMap<String, Vec<tokio_postgres::Row>>>,
    missed: Cell<bool>,
    touches: RefCell<Vec<(String, Vec<Value>)>>,
}

impl AheadTx {
    fn miss<T>(&self, what: &str) -> DbResult<T> {
        self.missed.set(true);
        Err(DbError::Unavailable(format!("{what}: not read ahead (the request runs again on the pool)")))
    }
}

impl Db for AheadTx {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn execute(&self, _sql: &str, _params: &[P<'_>]) -> DbResult<usize> {
        self.miss("a write")
    }

    fn query(&self, sql: &str, params: &[P<'_>], each: &mut dyn FnMut(&Row<'_>) -> DbResult<bool>) -> DbResult<()> {
        if !only_reads(sql) {
            return self.miss("a statement that may write");
        }
        let Some(rows) = self.rows.borrow_mut().remove(&ahead_key(sql, params)) else {
            return self.miss("a read");
        };
        for r in &rows {
            if !each(&Row::Pg(r))? {
                break;
            }
        }
        Ok(())
    }

    fn batch(&self, _sql: &str) -> DbResult<()> {
        self.miss("a batch")
    }

    fn total_changes(&self) -> u64 {
        0
    }

    fn before_feed_write(&self) -> DbResult<()> {
        self.miss("the feed lock")
    }

    fn prefetch(&self, reads: &[Read<'_>]) -> DbResult<()> {
        let rows = self.rows.borrow();
        if reads.iter().all(|r| rows.contains_key(&ahead_key(&r.sql, &r.params))) {
            return Ok(());
        }
        drop(rows);
        self.miss("reads sent ahead later")
    }

    fn touch(&self, sql: &str, params: &[P<'_>]) -> DbResult<()> {
        let owned = params.iter().copied().map(Value::from).collect();
        self.touches.borrow_mut().push((sql.to_string(), owned));
        Ok(())
    }
}
