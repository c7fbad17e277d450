//! The engine: one SQLite database, one entry point (`handle_value`) that the
//! HTTP server, the embedded default and the vector tests all call. Each
//! request is one transaction; the clock is a value passed in.

use crate::ctx::{Ctx, OpError, OpResult};
use crate::ops;
use crate::schema;
use pcmail_core::auth::Caller;
use pcmail_core::protocol::{parse_request, parse_request_bytes, Op, Request};
use pcmail_core::{Millis, ProtoError};
use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use serde_json::{json, Map, Value};
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

#[derive(Debug, Clone, Default)]
pub struct EngineConfig {
    /// The admin secret (the old shared token, `PCMAIL_ADMIN_TOKEN`); `None`
    /// (the embedded default) accepts any request. PCs prove themselves with
    /// their own credential (`cred`, issue 14); the shared token still acts
    /// as an unbound PC until `roster.requireCredentials`.
    pub token: Option<String>,
    /// Where newly opened alerts are posted (`{"content": "…"}`).
    pub webhook_url: Option<String>,
    /// How long a write waits for another process's lock before `busy`.
    pub busy_timeout: Option<Duration>,
    /// How long final mail is kept (default 90 days; `prune`).
    pub retention_ms: Option<Millis>,
}

/// Internal failures of the engine itself (opening, migrating).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("database: {0}")]
    Db(#[from] rusqlite::Error),
    #[error(transparent)]
    Schema(#[from] crate::schema::MigrateError),
}

/// Called after a commit with the labels that have something new.
pub type ChangeListener = Arc<dyn Fn(&[String]) + Send + Sync>;

pub struct Engine {
    conn: Mutex<Connection>,
    config: EngineConfig,
    listener: RwLock<Option<ChangeListener>>,
    /// The database file (None in memory): maintenance opens its own connection.
    path: Option<std::path::PathBuf>,
}

impl Engine {
    /// Opens (creating if needed) the database file and migrates it.
    pub fn open(path: impl AsRef<Path>, config: EngineConfig) -> Result<Engine, EngineError> {
        // Private whatever the umask: the file holds every mail body. Made
        // before SQLite creates it, so its -wal and -shm (which copy the
        // database's mode) are private too; an existing file is only chmod-ed.
        let path = path.as_ref();
        let _ = pcmail_fsmode::ensure_private_file(path);
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        let mut e = Engine::from_connection(conn, config, true)?;
        e.path = Some(path.to_path_buf());
        Ok(e)
    }

    pub fn open_in_memory(config: EngineConfig) -> Result<Engine, EngineError> {
        Engine::from_connection(Connection::open_in_memory()?, config, false)
    }

    fn from_connection(mut conn: Connection, config: EngineConfig, wal: bool) -> Result<Engine, EngineError> {
        conn.busy_timeout(config.busy_timeout.unwrap_or(Duration::from_secs(5)))?;
        if wal {
            // WAL: readers never block the writer; NORMAL is durable across
            // process crashes (only an OS crash may lose the last commits).
            conn.pragma_update(None, "journal_mode", "WAL")?;
        }
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.set_prepared_statement_cache_capacity(64);
        schema::migrate(&mut conn)?;
        Ok(Engine { conn: Mutex::new(conn), config, listener: RwLock::new(None), path: None })
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    fn retention_ms(&self) -> Millis {
        self.config.retention_ms.unwrap_or(crate::prune::DEFAULT_RETENTION_MS)
    }

    /// Installs the hook the HTTP layer uses to wake long-polls.
    pub fn set_change_listener(&self, listener: Option<ChangeListener>) {
        *self.listener.write().unwrap_or_else(|e| e.into_inner()) = listener;
    }

    /// Handles a raw request body: the full response JSON, success or error.
    pub fn handle_bytes(&self, body: &[u8], now: Millis) -> Value {
        match parse_request_bytes(body) {
            Ok(req) => self.handle_request(&req, now),
            Err(e) => e.to_json(),
        }
    }

    /// Handles a request that is already JSON.
    pub fn handle_value(&self, req: &Value, now: Millis) -> Value {
        match parse_request(req) {
            Ok(req) => self.handle_request(&req, now),
            Err(e) => e.to_json(),
        }
    }

    /// Handles a parsed request: who the caller is, then the op, in one transaction.
    pub fn handle_request(&self, req: &Request, now: Millis) -> Value {
        self.handle_request_from(req, now, None)
    }

    /// The same, from a caller at `peer` (None: an address the server cannot
    /// see, e.g. in-process): failed join attempts are limited per peer.
    pub fn handle_request_from(&self, req: &Request, now: Millis, peer: Option<std::net::IpAddr>) -> Value {
        match self.run(req, now) {
            Ok(fields) => ok_response(now, fields),
            Err(e) if matches!(req.op, Op::Join { .. }) && pcmail_core::auth::is_join_failure(e.code) => {
                self.refused_join(req, now, peer, e).to_json()
            }
            Err(e) => e.to_json(),
        }
    }

    /// Records a failed join (counted, in the audit log) in a transaction of
    /// its own, the op's having been rolled back, and answers it.
    fn refused_join(&self, req: &Request, now: Millis, peer: Option<std::net::IpAddr>, e: ProtoError) -> ProtoError {
        let (shown, key) = match peer {
            Some(ip) => (crate::peer::canonical(ip).to_string(), crate::peer::peer_key(ip).to_string()),
            None => (pcmail_core::auth::UNKNOWN_PEER.to_string(), pcmail_core::auth::UNKNOWN_PEER.to_string()),
        };
        self.with_tx(TransactionBehavior::Immediate, |tx| ops::creds::refused_join(tx, now, &req.pc, &shown, &key, &e))
            .unwrap_or_else(OpError::into_proto)
    }

    /// True when `req` may hold a long poll open: it authenticates as the
    /// PC it names and that PC is on the roster. Read-only; a stranger is
    /// answered without anything kept for it.
    pub fn may_long_poll(&self, req: &Request) -> bool {
        self.with_tx(TransactionBehavior::Deferred, |tx| {
            let caller = crate::auth::authenticate(tx, self.config.token.as_deref(), req)?;
            Ok(caller != Caller::Admin && ops::roster::label_binding(tx, &req.pc)?.is_some())
        })
        .unwrap_or(false)
    }

    /// The sweep as the server's own timer runs it (no envelope, no token).
    pub fn run_sweep(&self, now: Millis) -> Value {
        let out = self.with_tx(TransactionBehavior::Immediate, |tx| {
            let mut ctx = Ctx {
                tx,
                now,
                pc: "server",
                cred: None,
                caller: Caller::Admin,
                touched: Vec::new(),
                news: Vec::new(),
                retention_ms: self.retention_ms(),
            };
            ops::dispatch(&mut ctx, &Op::Sweep)
        });
        match out {
            Ok(fields) => ok_response(now, fields),
            Err(e) => e.into_proto().to_json(),
        }
    }

    fn run(&self, req: &Request, now: Millis) -> Result<Map<String, Value>, ProtoError> {
        let spec = req.op.spec();
        // A read-only op takes no write lock: it runs in a deferred (read) transaction.
        let behavior = if spec.read_only { TransactionBehavior::Deferred } else { TransactionBehavior::Immediate };
        let (fields, touched) = self
            .with_tx(behavior, |tx| {
                let caller = crate::auth::authenticate(tx, self.config.token.as_deref(), req)?;
                let retention_ms = self.retention_ms();
                let changes_before = tx.total_changes();
                let mut ctx = Ctx {
                    tx,
                    now,
                    pc: &req.pc,
                    cred: req.cred.as_deref(),
                    caller,
                    touched: Vec::new(),
                    news: Vec::new(),
                    retention_ms,
                };
                let fields = ops::dispatch(&mut ctx, &req.op)?;
                debug_assert!(
                    !spec.read_only || tx.total_changes() == changes_before,
                    "{} is read-only in the op table but wrote",
                    spec.name
                );
                debug_assert!(
                    ctx.news.iter().all(|n| spec.wakes.contains(n)),
                    "{} woke polls with {:?} news; its row in the op table says {:?}",
                    spec.name,
                    ctx.news,
                    spec.wakes
                );
                Ok((fields, ctx.touched))
            })
            .map_err(OpError::into_proto)?;
        if !touched.is_empty() {
            if let Some(l) = self.listener.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
                l(&touched);
            }
        }
        Ok(fields)
    }

    /// Runs `f` in one transaction: committed when it returns Ok, rolled back otherwise.
    pub(crate) fn with_tx<T>(
        &self,
        behavior: TransactionBehavior,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> OpResult<T>,
    ) -> OpResult<T> {
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        let tx = conn.transaction_with_behavior(behavior)?;
        let out = f(&tx)?;
        tx.commit()?;
        Ok(out)
    }

    /// Deletes final mail past the retention window, band by band (each its
    /// own short transaction, so polls go in between). Returns how many went.
    pub fn prune(&self, now: Millis) -> anyhow::Result<usize> {
        let cutoff = now - self.config.retention_ms.unwrap_or(crate::prune::DEFAULT_RETENTION_MS);
        let checkpointer = self.path.as_ref().and_then(|p| Connection::open(p).ok());
        let mut total = 0;
        loop {
            let n = self
                .with_tx(TransactionBehavior::Immediate, |tx| {
                    Ok(crate::prune::prune_band(tx, cutoff, crate::prune::BAND_ROWS, crate::prune::BAND_BUDGET)?)
                })
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            // Ended jobs past the same window, in the same bands.
            let jobs = self
                .with_tx(TransactionBehavior::Immediate, |tx| {
                    Ok(crate::ops::job_state::prune_jobs(tx, cutoff, crate::prune::BAND_ROWS)?)
                })
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            total += n + jobs;
            if n == 0 && jobs == 0 {
                break;
            }
            // Keep the log short so no commit (a poll's included) pays for a
            // large automatic checkpoint: checkpoint from a connection of its
            // own, outside the engine's lock (PASSIVE never blocks others).
            if let Some(c) = &checkpointer {
                let _ = c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
            }
            // Let a waiting poll take the lock between bands.
            std::thread::yield_now();
        }
        if total > 0 {
            tracing::info!(pruned = total, "retention: final mail past the window deleted");
        }
        Ok(total)
    }

    /// Final mail past the retention window that `prune` would delete.
    pub fn prunable(&self, now: Millis) -> anyhow::Result<i64> {
        let cutoff = now - self.config.retention_ms.unwrap_or(crate::prune::DEFAULT_RETENTION_MS);
        self.with_tx(TransactionBehavior::Deferred, |tx| Ok(crate::prune::prunable(tx, cutoff)?))
            .map_err(|e| anyhow::anyhow!("{e}"))
    }

    /// Alerts whose webhook post is still due: `(key, content)`.
    pub fn pending_webhook_posts(&self, now: Millis) -> anyhow::Result<Vec<(String, String)>> {
        if self.config.webhook_url.is_none() {
            return Ok(vec![]);
        }
        self.with_tx(TransactionBehavior::Deferred, |tx| crate::alert_posts::pending(tx, now))
            .map_err(|e| anyhow::anyhow!("{e}"))
    }

    /// Records the outcome of one webhook post.
    pub fn record_webhook_result(&self, key: &str, ok: bool, now: Millis) -> anyhow::Result<()> {
        self.with_tx(TransactionBehavior::Immediate, |tx| crate::alert_posts::record(tx, key, ok, now))
            .map_err(|e| anyhow::anyhow!("{e}"))
    }

    /// Bulk import of mail with its timeline in one transaction (benchmarks,
    /// migrations from another store). Ids must be new.
    pub fn import_mail(&self, mails: &[pcmail_core::Mail]) -> anyhow::Result<()> {
        self.with_tx(TransactionBehavior::Immediate, |tx| ops::import::import_mail(tx, mails))
            .map_err(|e| anyhow::anyhow!("{e}"))
    }

    /// Every row of every table, for tests that prove a failed request stored nothing.
    pub fn dump_rows(&self) -> anyhow::Result<Vec<String>> {
        let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        for table in [
            "meta",
            "pc",
            "mail",
            "broadcast",
            "event",
            "alert",
            "join_code",
            "audit",
            "lease",
            "lease_fence",
            "lease_event",
            "lease_lost",
            "job",
            "job_event",
            "job_submit",
            "job_watch",
            "job_executor",
            "join_attempt",
        ] {
            let mut stmt = conn.prepare(&format!("SELECT * FROM {table} ORDER BY rowid"))?;
            let n = stmt.column_count();
            let mut rows = stmt.query([])?;
            while let Some(r) = rows.next()? {
                let cells: Vec<String> = (0..n)
                    .map(|i| {
                        let cell = r.get_ref(i).ok().and_then(|v| rusqlite::types::Value::try_from(v).ok());
                        format!("{:?}", cell.unwrap_or(rusqlite::types::Value::Null))
                    })
                    .collect();
                out.push(format!("{table}: {}", cells.join(" | ")));
            }
        }
        Ok(out)
    }
}

fn ok_response(now: Millis, fields: Map<String, Value>) -> Value {
    let mut m = Map::with_capacity(fields.len() + 2);
    m.insert("ok".into(), json!(true));
    m.insert("now".into(), json!(now));
    m.extend(fields);
    Value::Object(m)
}
