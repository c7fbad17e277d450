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
//! connection of this runtime, those reads go out as one statement (one
//! snapshot, one execution, one answer: `pg_conn::together_sql`); once it is
//! answered the op runs, unchanged, on a [`Db`] that serves exactly those
//! rows. The moment it asks for anything else (another read, any write, the
//! feed lock) the attempt is void, and the request runs again from the
//! start on the pool, where nothing differs from before. Nothing was
//! written, so running it again is idempotent. A [`Db::touch`] (the
//! heartbeat) is written after the read, as on the pool after its COMMIT.

use super::pg_conn::{
    ahead_key, bind, bind_all, drive, first_columns, only_reads, rows_by_read, together_key, together_sql,
    SESSION_SETUP,
};
use super::pg_url::PgTarget;
use super::{to_dollar_params, Db, DbError, DbResult, Dialect, Read, Row, Value, P};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// After a connection could not be opened, how long requests leave this path to the pool.
const RETRY_CONNECT_AFTER: std::time::Duration = std::time::Duration::from_secs(2);

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
    /// By the texts of the reads, in order; None: they cannot be one statement.
    together: HashMap<String, Option<Together>>,
}

/// Gives a connection back to the idle list when dropped, unless it closed;
/// such a one frees its place. A request dropped half way (its caller went
/// away) leaves no transaction open: it never began one. Its statement, if
/// sent, runs to its end and its answer is dropped by the connection before
/// the next request's.
struct Taken<'a> {
    conns: &'a RuntimeConns,
    conn: Option<RuntimeConn>,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        match self.conn.take() {
            Some(c) if !c.client.is_closed() => self.conns.idle.lock().unwrap_or_else(|e| e.into_inner()).push(c),
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
            return Some(Taken { conns: self, conn: Some(c) });
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
        let mut taken = Taken { conns: self, conn: None };
        match self.connect().await {
            Ok(client) => {
                taken.conn = Some(RuntimeConn { client, stmts: HashMap::new(), together: HashMap::new() });
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

    /// Runs `f` on `reads` answered ahead by one statement. None: the
    /// request is not answered here (no connection, the statement failed or
    /// cannot be made, or `f` asked for more than `reads`); nothing of it
    /// was applied, and it must run on the pool.
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
        let conn = taken.conn.as_mut().expect("a taken connection is there until dropped");
        let together = conn.together(reads).await?;
        let params = bind_all(reads);
        let rows = conn.client.query(&together.stmt, &params).await.ok()?;
        drop(params);
        let ahead = reads
            .iter()
            .zip(rows_by_read(rows, reads.len())?)
            .zip(&together.first_column)
            .map(|((r, rows), first)| (ahead_key(&r.sql, &r.params), (*first, rows)))
            .collect();
        let tx = AheadTx { ahead: RefCell::new(ahead), missed: Cell::new(false), touches: RefCell::new(Vec::new()) };
        let result = f(&tx);
        if tx.missed.get() {
            // Void: the pool runs the request again from the start.
            return None;
        }
        let touches = tx.touches.into_inner();
        if !touches.is_empty() {
            // A heartbeat that could not be written (the connection lost
            // with it): the request read only, so the pool runs it again whole.
            write_touches(conn, &touches).await.ok()?;
        }
        Some(result)
    }
}

/// The reads of a request as one statement, prepared on one connection.
#[derive(Clone)]
struct Together {
    stmt: tokio_postgres::Statement,
    /// The column where each read's cells begin (column 0 says which read a row is of).
    first_column: Vec<usize>,
}

impl RuntimeConn {
    /// The statement that runs `reads` at once, prepared the first time
    /// this connection sees that list of statements. None when it cannot be
    /// (a read PostgreSQL refuses to place in a UNION: the request then
    /// runs on the pool, as it does every time after on this connection).
    async fn together(&mut self, reads: &[Read<'_>]) -> Option<Together> {
        let key = together_key(reads);
        if let Some(t) = self.together.get(&key) {
            return t.clone();
        }
        // Each read prepared alone first, once, for the types of its columns.
        let mut new: Vec<&str> = reads.iter().map(|r| &*r.sql).filter(|s| !self.stmts.contains_key(*s)).collect();
        new.sort_unstable();
        new.dedup();
        let texts: Vec<String> = new.iter().map(|s| to_dollar_params(s)).collect();
        let prepared = futures_util::future::join_all(texts.iter().map(|t| self.client.prepare(t))).await;
        for (sql, p) in new.iter().zip(prepared) {
            match p {
                Ok(p) => {
                    self.stmts.insert(sql.to_string(), p);
                }
                // Not remembered: the connection may have gone, and the next one prepares again.
                Err(_) => return None,
            }
        }
        let columns: Vec<&[tokio_postgres::Column]> = reads.iter().map(|r| self.stmts[&*r.sql].columns()).collect();
        let first_column = first_columns(&columns);
        let t = match self.client.prepare(&together_sql(reads, &columns)).await {
            Ok(stmt) => Some(Together { stmt, first_column }),
            Err(e) if e.as_db_error().is_some() => {
                tracing::warn!(error = %super::pg_message(&e), "reads that cannot be sent as one statement: they run on the pool");
                None
            }
            Err(_) => return None,
        };
        self.together.insert(key, t.clone());
        t
    }
}

/// Each [`Db::touch`] as a statement of its own, in one round trip.
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
    let written = futures_util::future::join_all(stmts.iter().zip(&refs).map(|(s, r)| conn.client.execute(s, r))).await;
    written.into_iter().try_for_each(|w| w.map(|_| ()))?;
    Ok(())
}

/// The rows read ahead as a [`Db`]: each read once, as it was sent; anything
/// else voids the attempt.
struct AheadTx {
    /// Each read's rows, by its key, with the column its cells begin at.
    ahead: RefCell<HashMap<String, (usize, Vec<tokio_postgres::Row>)>>,
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
        let Some((first, rows)) = self.ahead.borrow_mut().remove(&ahead_key(sql, params)) else {
            return self.miss("a read");
        };
        for r in &rows {
            if !each(&Row::Pg(r, first))? {
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
        let ahead = self.ahead.borrow();
        if reads.iter().all(|r| ahead.contains_key(&ahead_key(&r.sql, &r.params))) {
            return Ok(());
        }
        drop(ahead);
        self.miss("reads sent ahead later")
    }

    fn touch(&self, sql: &str, params: &[P<'_>]) -> DbResult<()> {
        let owned = params.iter().copied().map(Value::from).collect();
        self.touches.borrow_mut().push((sql.to_string(), owned));
        Ok(())
    }
}
