//! The engine: one database (a SQLite file, or PostgreSQL shared by several
//! `pcmail serve` instances), one entry point (`handle_value`) that the HTTP
//! server, the embedded default and the vector tests all call. Each request
//! is one transaction; the clock is a value passed in. The ops see only the
//! store interface (`crate::store::Db`), so each is written once.

use crate::ctx::{Ctx, OpError, OpResult};
use crate::ops;
use crate::schema;
use crate::store::pg::PgStore;
use crate::store::pg_url::PgTarget;
use crate::store::Db;
use pcmail_core::auth::Caller;
use pcmail_core::protocol::{parse_request, parse_request_bytes, Op, Request};
use pcmail_core::{Millis, ProtoError};
use rusqlite::{Connection, OpenFlags};
use serde_json::{json, Map, Value};
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

#[derive(Debug, Clone, Default)]
pub struct EngineConfig {
    /// The admin secret (the old shared token, `PCMAIL_ADMIN_TOKEN`); `None`
    /// (the embedded default) accepts any request. PCs prove themselves with
    /// their own credential (`cred`); the shared token still acts
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
    #[error(transparent)]
    Postgres(#[from] crate::store::pg::PgOpenError),
}

/// Read-only (one snapshot, no write lock) or read-write.
pub(crate) use crate::store::pg::TxKind as Mode;

/// How a request runs (`Engine::plan`).
struct Plan {
    mode: Mode,
    writes_feed: bool,
    read_only: bool,
    /// A write op brings the clock's rules up to now first.
    catches_up: bool,
    /// The credential's hash, read ahead with the caller's row (PostgreSQL).
    cred_hash: Option<String>,
}

/// Where the engine keeps its data.
enum Backend {
    Sqlite {
        conn: Mutex<Connection>,
        /// The database file (None in memory): maintenance opens its own connection.
        path: Option<std::path::PathBuf>,
        /// The embedded server in a process that lives one command: no
        /// checkpoint at close, the log emptied as it leaves once long.
        short_lived: Option<pcmail_walpolicy::ShortLivedWal>,
    },
    Postgres(Arc<PgStore>),
}

/// Called with the labels another instance woke (`None`: every long poll).
pub type WakeFn = Arc<dyn Fn(Option<&[String]>) + Send + Sync>;

/// Called after a commit with the labels that have something new.
pub type ChangeListener = Arc<dyn Fn(&[String]) + Send + Sync>;

pub struct Engine {
    backend: Backend,
    config: EngineConfig,
    listener: RwLock<Option<ChangeListener>>,
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Backend::Sqlite { conn, short_lived: Some(w), .. } = &mut self.backend {
            w.leave(conn.get_mut().unwrap_or_else(|e| e.into_inner()));
        }
    }
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
        if let Backend::Sqlite { path: p, .. } = &mut e.backend {
            *p = Some(path.to_path_buf());
        }
        Ok(e)
    }

    /// For the embedded server in a process that lives one command (`pcmail
    /// lease claim`): SQLite's checkpoints as it writes and at close left
    /// out, the log emptied as the process leaves once it has grown
    /// ([`pcmail_walpolicy`]). PostgreSQL: nothing to do.
    pub fn make_short_lived(&mut self) -> Result<(), EngineError> {
        if let Backend::Sqlite { conn, short_lived: s @ None, .. } = &mut self.backend {
            let conn = conn.get_mut().unwrap_or_else(|e| e.into_inner());
            *s = Some(pcmail_walpolicy::ShortLivedWal::install(conn)?);
        }
        Ok(())
    }

    /// Connects to PostgreSQL (`pcmail serve --db postgres://…`), migrates
    /// the schema (refusing one newer than this build) and pools connections.
    pub fn open_postgres(target: PgTarget, config: EngineConfig) -> Result<Engine, EngineError> {
        let store = PgStore::open(target)?;
        Ok(Engine { backend: Backend::Postgres(Arc::new(store)), config, listener: RwLock::new(None) })
    }

    /// Another engine on the same PostgreSQL store (its pool and prepared
    /// statements) with another configuration: tests that run many short
    /// scenarios. SQLite: None.
    pub fn sharing_store(&self, config: EngineConfig) -> Option<Engine> {
        let Backend::Postgres(pg) = &self.backend else { return None };
        Some(Engine { backend: Backend::Postgres(pg.clone()), config, listener: RwLock::new(None) })
    }

    /// Deletes every row of every table and resets the counters, leaving the
    /// schema: the per-case reset of tests on PostgreSQL. Never called by
    /// pcmail itself.
    #[doc(hidden)]
    pub fn erase_everything_for_tests(&self) -> anyhow::Result<()> {
        let Backend::Postgres(pg) = &self.backend else { anyhow::bail!("only for PostgreSQL") };
        pg.with_client(|c| {
            // DELETE and setval, not TRUNCATE: tens of times faster on small tables.
            let mut sql = String::from("BEGIN;");
            for r in c.query(
                "SELECT table_name::text FROM information_schema.tables WHERE table_schema = current_schema() \
                 AND table_name NOT IN ('pcmail_schema', 'meta')",
                &[],
            )? {
                sql.push_str(&format!("DELETE FROM {};", r.get::<_, String>(0)));
            }
            for r in c.query(
                "SELECT table_name::text, column_name::text FROM information_schema.columns \
                 WHERE table_schema = current_schema() AND is_identity = 'YES'",
                &[],
            )? {
                let (t, col): (String, String) = (r.get(0), r.get(1));
                sql.push_str(&format!("SELECT setval(pg_get_serial_sequence('{t}', '{col}'), 1, false);"));
            }
            sql.push_str(
                "DELETE FROM meta WHERE key NOT IN ('roster_version', 'require_credentials', 'lease_version'); \
                 UPDATE meta SET value = 0; COMMIT;",
            );
            c.batch_execute(&sql)?;
            Ok(())
        })
        .map_err(|e| anyhow::anyhow!("{e}"))
    }

    /// `sqlite` or `postgres`.
    pub fn store_kind(&self) -> &'static str {
        match self.backend {
            Backend::Sqlite { .. } => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }

    /// The database as logs and `doctor` may show it (no secret).
    pub fn describe_store(&self) -> String {
        match &self.backend {
            Backend::Sqlite { path: Some(p), .. } => p.display().to_string(),
            Backend::Sqlite { path: None, .. } => "in memory".into(),
            Backend::Postgres(pg) => pg.target().redacted().to_string(),
        }
    }

    /// Requests that ran again after a serialization failure (PostgreSQL).
    pub fn retries(&self) -> u64 {
        match &self.backend {
            Backend::Postgres(pg) => pg.retries.load(std::sync::atomic::Ordering::Relaxed),
            Backend::Sqlite { .. } => 0,
        }
    }

    /// Requests that began as a read and ran again as a write because they
    /// had something to write (PostgreSQL; see `Mode::ReadFirst`).
    pub fn read_first_upgrades(&self) -> u64 {
        match &self.backend {
            Backend::Postgres(pg) => pg.upgrades.load(std::sync::atomic::Ordering::Relaxed),
            Backend::Sqlite { .. } => 0,
        }
    }

    /// Requests answered on the async runtime from their reads sent ahead,
    /// and requests tried there that ran on the pool after all (PostgreSQL).
    pub fn runtime_answers(&self) -> Option<(u64, u64)> {
        match &self.backend {
            Backend::Postgres(pg) => Some((
                pg.runtime.answered.load(std::sync::atomic::Ordering::Relaxed),
                pg.runtime.handed_on.load(std::sync::atomic::Ordering::Relaxed),
            )),
            Backend::Sqlite { .. } => None,
        }
    }

    /// Waits for PostgreSQL's answers inside requests so far, a round trip
    /// each (0 on SQLite, which reads in process).
    pub fn round_trips(&self) -> u64 {
        match &self.backend {
            Backend::Postgres(pg) => pg.round_trips.load(std::sync::atomic::Ordering::Relaxed),
            Backend::Sqlite { .. } => 0,
        }
    }

    /// PostgreSQL: listens for what other instances commit and calls `wake`
    /// (`None`: wake every long poll, after a reconnect) until `stop`.
    /// SQLite: one process owns the file's server; nothing to listen to.
    pub fn spawn_wake_listener(
        &self,
        wake: WakeFn,
        stop: Arc<std::sync::atomic::AtomicBool>,
    ) -> Option<std::thread::JoinHandle<()>> {
        let Backend::Postgres(pg) = &self.backend else { return None };
        let on = Arc::new(move |w: crate::store::pg::Wake| match w {
            crate::store::pg::Wake::All => wake(None),
            crate::store::pg::Wake::Labels(l) => wake(Some(&l)),
        });
        Some(crate::store::pg::spawn_listener(pg.target().clone(), pg.instance.clone(), on, stop))
    }

    /// The timer's work (sweep, retention, webhooks), once per period for the
    /// whole cluster: under the maintenance lock, and skipped when any
    /// instance did it less than half a period ago (`meta.maintenance_at`).
    /// False: skipped. With SQLite it always runs.
    pub fn maintenance(self: &Arc<Self>, now: Millis, f: impl FnOnce(&Arc<Engine>)) -> anyhow::Result<bool> {
        let Backend::Postgres(_) = &self.backend else {
            f(self);
            return Ok(true);
        };
        let ran = self.exclusively(|| -> anyhow::Result<bool> {
            let half = pcmail_core::model::limits::SWEEP_EVERY_MS / 2;
            let last: Option<i64> = self
                .with_tx(Mode::Read, |tx| {
                    Ok(tx
                        .prepare_cached("SELECT value FROM meta WHERE key = 'maintenance_at'")?
                        .query_row(crate::store::p![], |r| r.get(0))
                        .map(Some)
                        .or_else(|e| if matches!(e, crate::store::DbError::NoRow) { Ok(None) } else { Err(e) })?)
                })
                .map_err(|e| anyhow::anyhow!("{}", e.into_proto().message))?;
            if last.is_some_and(|t| now - t < half && now >= t) {
                return Ok(false);
            }
            f(self);
            self.with_tx(Mode::Write, |tx| {
                tx.prepare_cached(
                    "INSERT INTO meta (key, value) VALUES ('maintenance_at', ?1) \
                     ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                )?
                .execute(crate::store::p![now])?;
                Ok(())
            })
            .map_err(|e| anyhow::anyhow!("{}", e.into_proto().message))?;
            Ok(true)
        })?;
        ran.unwrap_or(Ok(false))
    }

    /// Runs `f` unless another instance runs it now (the cluster's sweep,
    /// retention and webhooks); with SQLite this process is the only one.
    pub fn exclusively<T>(&self, f: impl FnOnce() -> T) -> anyhow::Result<Option<T>> {
        match &self.backend {
            Backend::Sqlite { .. } => Ok(Some(f())),
            Backend::Postgres(pg) => pg.exclusively(f).map_err(|e| anyhow::anyhow!("{e}")),
        }
    }

    pub fn open_in_memory(config: EngineConfig) -> Result<Engine, EngineError> {
        Engine::from_connection(Connection::open_in_memory()?, config, false)
    }

    fn from_connection(mut conn: Connection, config: EngineConfig, wal: bool) -> Result<Engine, EngineError> {
        let busy = config.busy_timeout.unwrap_or(Duration::from_secs(5));
        conn.busy_timeout(busy)?;
        if wal {
            // WAL: readers never block the writer; NORMAL is durable across
            // process crashes (only an OS crash may lose the last commits).
            pcmail_walpolicy::turn_on_wal(&conn, busy)?;
        }
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        // Room for every statement the ops prepare (about 160 sites, some
        // shaped by their arguments): with fewer, a poll's statements evict
        // each other and are compiled again on the hot path.
        conn.set_prepared_statement_cache_capacity(512);
        // Without the query planner stability guarantee SQLite compiles a
        // cached statement again whenever a bound value it could plan on
        // changes (every poll binds another PC, every send another id), so
        // the cache saved nothing on the hot path; with it, a statement keeps
        // the plan it was first given, which for these indexed lookups is the
        // plan any value would get.
        conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
        schema::migrate(&mut conn)?;
        Ok(Engine {
            backend: Backend::Sqlite { conn: Mutex::new(conn), path: None, short_lived: None },
            config,
            listener: RwLock::new(None),
        })
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
        self.with_tx(Mode::Write, |tx| ops::creds::refused_join(tx, now, &req.pc, &shown, &key, &e))
            .unwrap_or_else(OpError::into_proto)
    }

    /// True when `req` may hold a long poll open: it authenticates as the
    /// PC it names and that PC is on the roster. Read-only; a stranger is
    /// answered without anything kept for it.
    pub fn may_long_poll(&self, req: &Request) -> bool {
        self.with_tx(Mode::Read, |tx| {
            let (caller, facts) = crate::auth::authenticate(tx, self.config.token.as_deref(), req)?;
            let on_roster = match facts {
                Some(row) => row.on_roster,
                None => ops::roster::label_binding(tx, &req.pc)?.is_some(),
            };
            Ok(caller != Caller::Admin && on_roster)
        })
        .unwrap_or(false)
    }

    /// [`Engine::may_long_poll`] answered on the async runtime from the
    /// caller's facts read ahead (PostgreSQL, a server with a secret); None:
    /// ask `may_long_poll` (on a blocking thread).
    pub async fn may_long_poll_on_runtime(&self, req: &Request) -> Option<bool> {
        let Backend::Postgres(pg) = &self.backend else { return None };
        self.config.token.as_ref()?;
        let hash = req.cred.as_deref().map(pcmail_core::protocol::credential_hash);
        let reads = [crate::auth::reads_ahead(req, hash.as_deref())];
        let out = pg
            .runtime
            .answer(&reads, |tx| {
                let (caller, facts) = crate::auth::authenticate(tx, self.config.token.as_deref(), req)?;
                // The facts say whether the label is on the roster; without them it is read (on the pool).
                Ok::<_, OpError>(facts.map(|row| caller != Caller::Admin && row.on_roster))
            })
            .await?;
        match out {
            Ok(may) => may,
            // Refused (as `may_long_poll` says of any failure).
            Err(_) => Some(false),
        }
    }

    /// The version of the live leases (`meta.lease_version`, moved by every
    /// claim, release, takeover and end), read without a write lock: the
    /// embedded PC's poller compares it with the one it knows to poll at once
    /// when another PC's lease changed.
    pub fn lease_version(&self) -> Option<i64> {
        self.with_tx(Mode::Read, |tx| {
            Ok(tx
                .prepare_cached("SELECT value FROM meta WHERE key = 'lease_version'")?
                .query_row(crate::store::p![], |r| r.get(0))?)
        })
        .ok()
    }

    /// The sweep as the server's own timer runs it (no envelope, no token).
    pub fn run_sweep(&self, now: Millis) -> Value {
        let out = self.with_tx_feed(Mode::Write, true, |tx| {
            let mut ctx = Ctx::server(tx, now, self.retention_ms());
            ops::dispatch(&mut ctx, &Op::Sweep)
        });
        match out {
            Ok(fields) => ok_response(now, fields),
            Err(e) => e.into_proto().to_json(),
        }
    }

    /// How a request runs: its transaction's kind, and what it does first.
    fn plan(&self, req: &Request) -> Plan {
        let spec = req.op.spec();
        // A read-only op takes no write lock: it runs in a deferred (read) transaction.
        let mode = if spec.read_only {
            Mode::Read
        } else if reads_first(&req.op) {
            Mode::ReadFirst
        } else {
            Mode::Write
        };
        let postgres = matches!(self.backend, Backend::Postgres(_));
        Plan {
            mode,
            writes_feed: writes_feed(&req.op, &spec),
            read_only: spec.read_only,
            catches_up: !spec.read_only && !runs_its_own_sweep(&req.op),
            cred_hash: req.cred.as_deref().filter(|_| postgres).map(pcmail_core::protocol::credential_hash),
        }
    }

    /// The reads a request is sure to make, sent ahead in the round trip that begins it (PostgreSQL).
    fn reads_ahead<'r>(&self, req: &'r Request, now: Millis, plan: &'r Plan) -> Vec<crate::store::Read<'r>> {
        let mut reads = Vec::new();
        if self.config.token.is_some() {
            reads.push(crate::auth::reads_ahead(req, plan.cred_hash.as_deref()));
        }
        if plan.catches_up {
            reads.push(crate::sweep::candidates_read(now));
        }
        reads.extend(ops::reads_ahead(&req.op, &req.pc, self.config.token.is_some()));
        reads
    }

    fn run(&self, req: &Request, now: Millis) -> Result<Map<String, Value>, ProtoError> {
        let plan = self.plan(req);
        let postgres = matches!(self.backend, Backend::Postgres(_));
        let (fields, touched) = self
            .with_tx_feed(plan.mode, plan.writes_feed, |tx| {
                if postgres {
                    tx.prefetch(&self.reads_ahead(req, now, &plan))?;
                }
                self.request_in(tx, req, now, &plan)
            })
            .map_err(OpError::into_proto)?;
        self.tell_listener(&touched);
        Ok(fields)
    }

    /// Answers `req` on the calling async runtime when the reads sent ahead
    /// are all it needs (PostgreSQL; `store::pg_runtime`). None: it was not
    /// answered there, nothing of it was applied, and it must run as usual
    /// ([`Engine::handle_request_from`], on a blocking thread).
    ///
    /// Tried for the requests whose reads ahead are, as a rule, all they
    /// read: a poll that carries nothing to write (a PC's caught-up poll, the
    /// most frequent request there is). Another op tried here would pay a
    /// round trip for nothing whenever it read more.
    pub async fn answer_on_runtime(&self, req: &Request, now: Millis) -> Option<Value> {
        let Backend::Postgres(pg) = &self.backend else { return None };
        let plan = self.plan(req);
        if plan.mode != Mode::ReadFirst {
            return None;
        }
        let reads = self.reads_ahead(req, now, &plan);
        let out = pg.runtime.answer(&reads, |tx| self.request_in(tx, req, now, &plan)).await?;
        Some(match out.map_err(OpError::into_proto) {
            Ok((fields, touched)) => {
                self.tell_listener(&touched);
                ok_response(now, fields)
            }
            Err(e) => e.to_json(),
        })
    }

    /// What a request does inside its transaction: authenticates, brings the
    /// clock's rules up to `now` (a write op), runs the op, and tells other
    /// instances of the news (PostgreSQL). The fields of its answer and the
    /// labels it woke.
    fn request_in(
        &self,
        tx: &dyn Db,
        req: &Request,
        now: Millis,
        plan: &Plan,
    ) -> OpResult<(Map<String, Value>, Vec<String>)> {
        let (caller, facts) = crate::auth::authenticate(tx, self.config.token.as_deref(), req)?;
        let retention_ms = self.retention_ms();
        // A write op first writes what the clock has already decided
        // (expiry, stale leases, silent jobs), so it never acts on a
        // state the sweep would have changed; the sweep does it itself.
        let mut caught_up = Vec::new();
        if plan.catches_up {
            let mut c = Ctx::server(tx, now, retention_ms);
            crate::sweep::catch_up(&mut c)?;
            caught_up = c.touched;
        }
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
            facts,
        };
        let fields = ops::dispatch(&mut ctx, &req.op)?;
        ctx.touched.extend(caught_up);
        debug_assert!(
            !plan.read_only || tx.total_changes() == changes_before,
            "{} is read-only in the op table but wrote",
            req.op.name()
        );
        debug_assert!(
            ctx.news.iter().all(|n| req.op.spec().wakes.contains(n)),
            "{} woke polls with {:?} news; its row in the op table says {:?}",
            req.op.name(),
            ctx.news,
            req.op.spec().wakes
        );
        if !ctx.touched.is_empty() && tx.dialect() == crate::store::Dialect::Postgres {
            // Delivered at commit to every instance's listener (never for a rollback).
            notify_instances(self, tx, &ctx.touched)?;
        }
        Ok((fields, ctx.touched))
    }

    /// This instance's long polls hear of the labels a committed request woke.
    fn tell_listener(&self, touched: &[String]) {
        if !touched.is_empty() {
            if let Some(l) = self.listener.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
                l(touched);
            }
        }
    }

    /// Runs `f` in one transaction: committed when it returns Ok, rolled back
    /// otherwise. On PostgreSQL `f` may run more than once (a serialization
    /// failure runs the request again from the start): it must have no effect
    /// outside the transaction.
    pub(crate) fn with_tx<T>(&self, mode: Mode, f: impl FnMut(&dyn Db) -> OpResult<T>) -> OpResult<T> {
        self.with_tx_feed(mode, false, f)
    }

    /// `with_tx`, saying whether the op writes the poll's feeds (PostgreSQL
    /// then takes the feed lock before it begins; see `store::pg`).
    pub(crate) fn with_tx_feed<T>(
        &self,
        mode: Mode,
        writes_feed: bool,
        mut f: impl FnMut(&dyn Db) -> OpResult<T>,
    ) -> OpResult<T> {
        match &self.backend {
            Backend::Sqlite { conn, .. } => {
                // One connection serves every request here, so reading first
                // would save nothing: a read-first request takes the write lock.
                let begin = match mode {
                    Mode::Read => "BEGIN DEFERRED",
                    Mode::Write | Mode::ReadFirst => "BEGIN IMMEDIATE",
                };
                let conn = conn.lock().unwrap_or_else(|e| e.into_inner());
                let tx = pcmail_walpolicy::Tx::begin(&conn, begin).map_err(crate::store::DbError::from)?;
                let out = f(&*tx)?;
                tx.commit().map_err(crate::store::DbError::from)?;
                Ok(out)
            }
            Backend::Postgres(pg) => pg.run(mode, writes_feed, f),
        }
    }

    /// Deletes final mail past the retention window, band by band (each its
    /// own short transaction, so polls go in between). Returns how many went.
    pub fn prune(&self, now: Millis) -> anyhow::Result<usize> {
        let cutoff = now - self.config.retention_ms.unwrap_or(crate::prune::DEFAULT_RETENTION_MS);
        let checkpointer = match &self.backend {
            Backend::Sqlite { path: Some(p), .. } => Connection::open(p).ok(),
            _ => None,
        };
        let mut total = 0;
        loop {
            let n = self
                .with_tx(Mode::Write, |tx| {
                    Ok(crate::prune::prune_band(tx, cutoff, crate::prune::BAND_ROWS, crate::prune::BAND_BUDGET)?)
                })
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            // Ended jobs past the same window, in the same bands.
            let jobs = self
                .with_tx(Mode::Write, |tx| Ok(crate::ops::job_state::prune_jobs(tx, cutoff, crate::prune::BAND_ROWS)?))
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
        self.with_tx(Mode::Read, |tx| Ok(crate::prune::prunable(tx, cutoff)?)).map_err(|e| anyhow::anyhow!("{e}"))
    }

    /// Alerts whose webhook post is still due: `(key, content)`.
    pub fn pending_webhook_posts(&self, now: Millis) -> anyhow::Result<Vec<(String, String)>> {
        if self.config.webhook_url.is_none() {
            return Ok(vec![]);
        }
        self.with_tx(Mode::Read, |tx| crate::alert_posts::pending(tx, now)).map_err(|e| anyhow::anyhow!("{e}"))
    }

    /// Records the outcome of one webhook post.
    pub fn record_webhook_result(&self, key: &str, ok: bool, now: Millis) -> anyhow::Result<()> {
        self.with_tx(Mode::Write, |tx| crate::alert_posts::record(tx, key, ok, now)).map_err(|e| anyhow::anyhow!("{e}"))
    }

    /// Bulk import of mail with its timeline in one transaction (benchmarks,
    /// migrations from another store). Ids must be new.
    pub fn import_mail(&self, mails: &[pcmail_core::Mail]) -> anyhow::Result<()> {
        self.with_tx(Mode::Write, |tx| ops::import::import_mail(tx, mails)).map_err(|e| anyhow::anyhow!("{e}"))
    }

    /// Every row of every table, for tests that prove a failed request stored nothing.
    pub fn dump_rows(&self) -> anyhow::Result<Vec<String>> {
        use crate::store::Value;
        self.with_tx(Mode::Read, |tx| {
            let mut out = Vec::new();
            for (table, order) in DUMP_TABLES {
                let sql = format!("SELECT * FROM {table} ORDER BY {order}");
                let mut rows = Vec::new();
                tx.query(&sql, &[], &mut |r| {
                    let mut cells = Vec::new();
                    let mut i = 0;
                    while let Ok(v) = r.get::<_, Value>(i) {
                        cells.push(format!("{v:?}"));
                        i += 1;
                    }
                    rows.push(format!("{table}: {}", cells.join(" | ")));
                    Ok(true)
                })?;
                out.extend(rows);
            }
            Ok(out)
        })
        .map_err(|e| anyhow::anyhow!("{e}"))
    }
}

/// The tables `dump_rows` lists, each in a stable order both stores share.
const DUMP_TABLES: &[(&str, &str)] = &[
    ("meta", "key"),
    ("pc", "label"),
    ("mail", "seq"),
    ("broadcast", "id"),
    ("event", "seq"),
    ("alert", "key"),
    ("join_code", "hash"),
    ("audit", "seq"),
    ("lease", "id"),
    ("lease_fence", "resource"),
    ("lease_event", "seq"),
    ("lease_lost", "id"),
    ("job", "seq"),
    ("job_event", "seq"),
    ("job_submit", "id"),
    ("job_watch", "job_id, pc"),
    ("job_executor", "pc"),
    ("join_attempt", "key"),
];

/// PostgreSQL: tells the other instances which PCs' long polls to wake.
fn notify_instances(engine: &Engine, tx: &dyn Db, labels: &[String]) -> OpResult<()> {
    let Backend::Postgres(pg) = &engine.backend else { return Ok(()) };
    let mut unique: Vec<String> = labels.to_vec();
    unique.sort();
    unique.dedup();
    let payload = crate::store::pg::wake_payload(&pg.instance, &unique);
    tx.prepare_cached("SELECT pg_notify(?1, ?2)")?
        .execute(crate::store::p![crate::store::pg::WAKE_CHANNEL, payload])?;
    Ok(())
}

/// The sweep, and a `job.submit` to the server itself (its built-ins are the
/// sweep and its plan): they bring the time rules up to `now` themselves.
fn runs_its_own_sweep(op: &Op) -> bool {
    match op {
        Op::Sweep => true,
        Op::JobSubmit(a) => a.target == pcmail_core::job::SERVER_TARGET,
        _ => false,
    }
}

/// Whether an op is known to write the poll's feeds (`event` rows): it moves
/// mail. PostgreSQL takes the feed lock before such a transaction begins;
/// any other that turns out to write one takes it when it does.
/// A poll that carries nothing to apply (no confirms, marks, session
/// report, lease renewals or releases, job business) usually changes
/// nothing: its heartbeat is written once a step and the clock's catch-up
/// rarely finds anything due. On PostgreSQL it runs as a read and again as
/// a write only when it must.
fn reads_first(op: &Op) -> bool {
    matches!(op, Op::Poll(a) if a.confirm.is_empty()
        && a.marks.is_empty()
        && a.sessions.is_none()
        && a.lease.as_ref().is_none_or(|l| l.renew.is_empty() && l.release.is_empty())
        && a.job.is_none())
}

fn writes_feed(op: &Op, spec: &pcmail_core::op_table::OpSpec) -> bool {
    use pcmail_core::op_table::News;
    if spec.read_only || !spec.wakes.contains(&News::Mail) {
        return false;
    }
    match op {
        Op::Poll(a) => !a.confirm.is_empty() || !a.marks.is_empty(),
        Op::JobSubmit(_) => false,
        _ => true,
    }
}

fn ok_response(now: Millis, fields: Map<String, Value>) -> Value {
    let mut m = Map::with_capacity(fields.len() + 2);
    m.insert("ok".into(), json!(true));
    m.insert("now".into(), json!(now));
    m.extend(fields);
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Millis = 1_800_000_000_000;

    fn ok(engine: &Engine, req: Value, now: Millis) -> Value {
        let r = engine.handle_value(&req, now);
        assert_eq!(r["ok"], json!(true), "{req} -> {r}");
        r
    }

    const ADMIN: &str = "adm1n-s3cret";

    /// Six PCs, each joined with its own credential and holding a lease,
    /// send, poll, confirm, ack, renew the lease and report sessions in turn, so each statement of
    /// the hot path runs with many different values. Returns the engine and
    /// how many times each statement kept prepared had run before the hot
    /// path started (enrolment's statements are not the hot path).
    fn hot_path(dir: &std::path::Path) -> (Engine, std::collections::HashMap<String, i32>) {
        let engine =
            Engine::open(dir.join("serve.db"), EngineConfig { token: Some(ADMIN.into()), ..Default::default() })
                .unwrap();
        let pcs: Vec<String> = (0..6).map(|i| format!("pc-{i}")).collect();
        let cred = |i: usize| format!("{:064x}", i + 1);
        for (i, pc) in pcs.iter().enumerate() {
            let code = format!("{:032x}", i + 1);
            let enrol = json!({"v": 1, "op": "roster.enrol", "pc": "pc-admin", "token": ADMIN,
                "args": {"label": pc, "code": code}});
            ok(&engine, enrol, T0);
            let join = json!({"v": 1, "op": "join", "pc": pc, "cred": cred(i),
                "args": {"code": code, "hostname": format!("host-{i}")}});
            ok(&engine, join, T0);
        }
        let req =
            |op: &str, i: usize, args: Value| json!({"v": 1, "op": op, "pc": pcs[i], "cred": cred(i), "args": args});
        let fences: Vec<Value> = (0..pcs.len())
            .map(|i| {
                let claim = json!({"claimId": format!("c-{i}"), "resource": format!("res-{i}"), "repo": "",
                    "description": "d", "files": [], "mode": "exclusive",
                    "holder": {"pc": pcs[i], "session": format!("s-{i}"), "name": null}});
                ok(&engine, req("lease.claim", i, claim), T0)["lease"]["fence"].clone()
            })
            .collect();
        let before = {
            let Backend::Sqlite { conn, .. } = &engine.backend else { unreachable!() };
            pcmail_testkit::statements_kept(&conn.lock().unwrap()).into_iter().collect()
        };
        for round in 0..4i64 {
            for (i, fence) in fences.iter().enumerate() {
                let now = T0 + 20_000 * (round + 1) + i as i64;
                let to = (i + 1) % pcs.len();
                let id = format!("mail-{now}-{:08x}", i);
                ok(&engine, req("send", i, json!({"mail": {"id": id, "to": pcs[to], "body": "b"}})), now);
                let live =
                    json!({"live": [{"session": format!("s-{to}"), "repo": "r", "branch": "main", "cwd": "/r"}]});
                let r = ok(&engine, req("poll", to, json!({"lease": {"known": 0}, "sessions": live})), now + 1);
                let ids: Vec<Value> =
                    r["mails"].as_array().map(|m| m.iter().map(|m| m["id"].clone()).collect()).unwrap_or_default();
                ok(&engine, req("poll", to, json!({"confirm": ids})), now + 2);
                let ack = json!({"marks": [{"markId": format!("k-{now}"), "id": id, "op": "ack", "at": now + 3, "by": pcs[to]}]});
                ok(&engine, req("mark", to, ack), now + 3);
                ok(&engine, req("poll", i, json!({})), now + 3);
                ok(&engine, req("hello", i, json!({})), now + 3);
                let renew = json!({"lease": {"known": 0, "renew": [{"resource": format!("res-{i}"), "fence": fence}]}});
                let r = ok(&engine, req("poll", i, renew), now + 5);
                assert_eq!(r["lease"]["renewed"].as_array().map(Vec::len), Some(1), "{r}");
            }
        }
        (engine, before)
    }

    /// The embedded server's file on a fresh home: two commands (two lease
    /// claims, the daemon and a hook's poller) may create it at the same
    /// moment; each must get a migrated engine, none "database is locked".
    #[test]
    fn many_first_opens_of_a_new_server_file_at_once_all_succeed() {
        for round in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("serve.db");
            let opened = pcmail_testkit::at_once(6, || {
                Engine::open(&path, EngineConfig::default()).map(drop).map_err(|e| e.to_string())
            });
            for r in opened {
                assert_eq!(r, Ok(()), "round {round}");
            }
        }
    }

    /// The embedded server in one `pcmail lease claim` after another, no
    /// poller holding the file: each process ends without SQLite's
    /// close-time checkpoint, and the log stays short only because a process
    /// empties it as it leaves once it has grown (`make_short_lived`).
    #[test]
    fn one_short_lived_process_after_another_keeps_the_servers_log_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.db");
        let first = Engine::open(&path, EngineConfig::default()).unwrap();
        let roster = json!({"v": 1, "op": "roster.set", "pc": "pc-a", "args": {"label": "pc-a", "hostname": "H"}});
        ok(&first, roster, T0);
        drop(first);
        let frames_in_log = || -> i64 {
            let c = Connection::open(&path).unwrap();
            c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get(1)).unwrap()
        };
        let runs = 200;
        for i in 0..runs {
            let mut engine = Engine::open(&path, EngineConfig::default()).unwrap();
            engine.make_short_lived().unwrap();
            let claim = json!({"v": 1, "op": "lease.claim", "pc": "pc-a", "args": {"claimId": format!("c-{i}"),
                "resource": "res", "repo": "", "description": "d", "files": [], "mode": "exclusive",
                "holder": {"pc": "pc-a", "session": "s", "name": null}}});
            let fence = ok(&engine, claim, T0 + i)["lease"]["fence"].as_i64().unwrap();
            let release = json!({"v": 1, "op": "lease.release", "pc": "pc-a", "args": {"resource": "res", "fence": fence, "by": "holder"}});
            ok(&engine, release, T0 + i);
            drop(engine);
            if i == 0 {
                // SQLite's own close would have checkpointed and deleted it (fsyncs).
                assert!(frames_in_log() > 0, "the first process left its log as it was");
            }
        }
        let frames = frames_in_log();
        assert!(
            frames <= i64::from(pcmail_walpolicy::CHECKPOINT_FRAMES) + 40,
            "{runs} processes left {frames} frames in the log"
        );
        let engine = Engine::open(&path, EngineConfig::default()).unwrap();
        let claim = json!({"v": 1, "op": "lease.claim", "pc": "pc-a", "args": {"claimId": "last",
            "resource": "res", "repo": "", "description": "d", "files": [], "mode": "exclusive",
            "holder": {"pc": "pc-a", "session": "s", "name": null}}});
        assert_eq!(ok(&engine, claim, T0 + runs)["lease"]["fence"], json!(runs + 1), "every claim kept");
    }

    #[test]
    fn cached_statements_are_not_compiled_again_when_their_values_change() {
        let dir = tempfile::tempdir().unwrap();
        let (engine, _) = hot_path(dir.path());
        let Backend::Sqlite { conn, .. } = &engine.backend else { unreachable!() };
        let again = pcmail_testkit::statements_compiled_again(&conn.lock().unwrap());
        assert!(again.is_empty(), "statements compiled again on the hot path: {again:#?}");
    }

    /// A temporary b-tree (a materialised subquery, a sort) costs a page
    /// cache allocated and freed on every run: on the credential lookup
    /// every request makes, that was a tenth of the server's CPU.
    #[test]
    fn the_hot_paths_statements_build_no_temporary_btrees() {
        let dir = tempfile::tempdir().unwrap();
        let (engine, before) = hot_path(dir.path());
        let Backend::Sqlite { conn, .. } = &engine.backend else { unreachable!() };
        let conn = conn.lock().unwrap();
        let hot: Vec<String> = pcmail_testkit::statements_kept(&conn)
            .into_iter()
            .filter(|(sql, runs)| before.get(sql).is_none_or(|b| runs > b))
            .map(|(sql, _)| sql)
            .collect();
        assert!(hot.len() >= 10, "the hot path's statements are kept prepared: {hot:#?}");
        let temporary: Vec<(String, Vec<String>)> = hot
            .into_iter()
            .map(|sql| {
                let ops = pcmail_testkit::temporary_btrees(&conn, &sql);
                (sql, ops)
            })
            .filter(|(_, ops)| !ops.is_empty())
            .collect();
        assert!(temporary.is_empty(), "hot-path statements with temporary b-trees: {temporary:#?}");
    }

    /// On PostgreSQL a caught-up poll runs as a read (no predicate locks, no
    /// serialization failures) and again as a write only when it must: its
    /// first heartbeat, the next one a step later, or the clock's catch-up
    /// finding mail to expire.
    #[test]
    fn a_caught_up_poll_on_postgres_runs_as_a_read_until_it_has_something_to_write() {
        let pg = pcmail_pgtest::Postgres::start();
        let url = pg.create_database("readfirst");
        let target = crate::store::pg_url::PgTarget::parse(&url, None).unwrap();
        let engine = Engine::open_postgres(target, EngineConfig::default()).unwrap();
        for pc in ["pc-a", "pc-b"] {
            ok(&engine, json!({"v": 1, "op": "roster.set", "pc": pc, "args": {"label": pc, "hostname": pc}}), T0);
        }
        let poll = |args: Value, now: Millis| {
            ok(&engine, json!({"v": 1, "op": "poll", "pc": "pc-a", "args": args}), now);
            engine.read_first_upgrades()
        };
        let mut db = pg.connect("readfirst");
        let mut heartbeat =
            || -> Option<i64> { db.query_one("SELECT last_poll_at FROM pc WHERE label = 'pc-a'", &[]).unwrap().get(0) };
        // The heartbeat is written after the read's COMMIT, on its own: the poll stays a read.
        assert_eq!((poll(json!({}), T0 + 1), heartbeat()), (0, Some(T0 + 1)), "the first heartbeat");
        assert_eq!((poll(json!({}), T0 + 2), heartbeat()), (0, Some(T0 + 1)));
        assert_eq!(poll(json!({"lease": {"known": 0}}), T0 + 3), 0, "a lease version check writes nothing");
        let step = pcmail_core::model::limits::POLL_RECORD_STEP_MS;
        assert_eq!((poll(json!({}), T0 + 1 + step), heartbeat()), (0, Some(T0 + 1 + step)), "a step later");
        assert_eq!(poll(json!({}), T0 + 2 + step), 0);

        // Mail that expires: the poll after its expiry writes the expiry, then reads as before.
        let id = format!("mail-{}-0000e001", T0 + 3 + step);
        let send = json!({"v": 1, "op": "send", "pc": "pc-b",
            "args": {"mail": {"id": id, "to": "pc-a", "body": "b", "expiresIn": 60_000}}});
        ok(&engine, send, T0 + 3 + step);
        let r = ok(&engine, json!({"v": 1, "op": "poll", "pc": "pc-a", "args": {}}), T0 + 4 + step);
        assert_eq!(r["mail"][0]["id"], json!(id), "{r}");
        assert_eq!(engine.read_first_upgrades(), 0, "reading new mail writes nothing");
        assert_eq!(poll(json!({}), T0 + 3 + step + 60_001), 1, "the expiry is written");
        let status = json!({"v": 1, "op": "status", "pc": "pc-b", "args": {"ids": [id]}});
        let status = ok(&engine, status, T0 + 5 + step + 60_000);
        assert_eq!(status["mails"][0]["state"], json!("expired"), "{status}");
        assert_eq!(engine.retries(), 0);
    }

    /// A throwaway PostgreSQL, an engine on database `db` with an admin
    /// secret, and PCs that claimed their labels with their credentials.
    fn pg_engine(db: &str, pcs: &[(&str, &str)]) -> (pcmail_pgtest::Postgres, Engine) {
        let pg = pcmail_pgtest::Postgres::start();
        let url = pg.create_database(db);
        let target = crate::store::pg_url::PgTarget::parse(&url, None).unwrap();
        let config = EngineConfig { token: Some(PG_ADMIN.into()), ..Default::default() };
        let engine = Engine::open_postgres(target, config).unwrap();
        for (pc, cred) in pcs {
            let claim = json!({"v": 1, "op": "roster.set", "pc": pc, "token": PG_ADMIN, "cred": cred,
                "args": {"label": pc, "hostname": pc, "claim": true}});
            ok(&engine, claim, T0);
        }
        (pg, engine)
    }

    const PG_ADMIN: &str = "admin-secret-0123456789";

    /// Within `within`, no connection to database `db` idles inside a transaction.
    fn no_transaction_left_open(pg: &pcmail_pgtest::Postgres, db: &str, within: std::time::Duration) {
        let mut admin = pg.connect(db);
        let sql = "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND state = 'idle in transaction'";
        let deadline = std::time::Instant::now() + within;
        loop {
            let open: i64 = admin.query_one(sql, &[&db]).unwrap().get(0);
            if open == 0 {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "{open} connections left inside a transaction in {db}");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// What a request answered on the async runtime says is what the pool
    /// says of the same request: a caught-up poll, a poll bringing mail, a
    /// stranger's poll, and whether each may hold a long poll.
    #[test]
    fn answers_on_the_runtime_are_the_pools() {
        let cred = "c".repeat(64);
        let (_pg, engine) = pg_engine("on_runtime", &[("pc-a", &cred), ("pc-b", &"b".repeat(64))]);
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let poll = json!({"v": 1, "op": "poll", "pc": "pc-a", "cred": cred, "args": {"since": 0, "receivedSince": 0}});
        let both = |req: &Value, now: Millis| {
            let parsed = pcmail_core::protocol::parse_request(req).unwrap();
            let on_runtime = rt.block_on(engine.answer_on_runtime(&parsed, now));
            (on_runtime, engine.handle_value(req, now))
        };
        // Its first poll writes the heartbeat on the runtime too; then caught up.
        let (first, _) = both(&poll, T0 + 1);
        assert_eq!(first.expect("a read-first poll is tried there")["ok"], json!(true));
        let (on_runtime, pool) = both(&poll, T0 + 2);
        assert_eq!(on_runtime.as_ref(), Some(&pool));
        let id = format!("mail-{}-0000e003", T0 + 3);
        let send = json!({"v": 1, "op": "send", "pc": "pc-b", "cred": "b".repeat(64),
            "args": {"mail": {"id": id, "to": "pc-a", "body": "b"}}});
        ok(&engine, send, T0 + 3);
        let (on_runtime, pool) = both(&poll, T0 + 4);
        assert_eq!(pool["mail"][0]["id"], json!(id), "{pool}");
        assert_eq!(on_runtime.as_ref(), Some(&pool));
        let stranger = json!({"v": 1, "op": "poll", "pc": "pc-a", "cred": "s".repeat(64), "args": {}});
        let (on_runtime, pool) = both(&stranger, T0 + 5);
        assert_eq!(pool["ok"], json!(false), "{pool}");
        assert_eq!(on_runtime.as_ref(), Some(&pool));
        // A poll that confirms writes: never tried there.
        let confirm = json!({"v": 1, "op": "poll", "pc": "pc-a", "cred": cred, "args": {"confirm": [id]}});
        let parsed = pcmail_core::protocol::parse_request(&confirm).unwrap();
        assert_eq!(rt.block_on(engine.answer_on_runtime(&parsed, T0 + 6)), None);
        let (answered, _) = engine.runtime_answers().unwrap();
        assert_eq!(answered, 4);

        let may = |req: Value| {
            let parsed = pcmail_core::protocol::parse_request(&req).unwrap();
            (rt.block_on(engine.may_long_poll_on_runtime(&parsed)), engine.may_long_poll(&parsed))
        };
        assert_eq!(may(poll.clone()), (Some(true), true));
        assert_eq!(may(stranger), (Some(false), false));
        let admin = json!({"v": 1, "op": "poll", "pc": "pc-a", "token": PG_ADMIN, "args": {}});
        assert_eq!(may(admin), (Some(false), false));
        let off_roster = json!({"v": 1, "op": "poll", "pc": "pc-z", "cred": cred, "args": {}});
        assert_eq!(may(off_roster), (Some(false), false));
    }

    /// A request answered on the runtime is dropped half way when its caller
    /// goes away: its connection goes back to the others with its statement
    /// still running, and must leave no transaction open (the next request
    /// would read that transaction's snapshot) nor hand the dropped
    /// request's rows to the next one.
    #[test]
    fn a_poll_dropped_half_way_on_the_runtime_leaves_no_transaction_open() {
        let cred = "c".repeat(64);
        let (pg, engine) = pg_engine("dropped", &[("pc-a", &cred)]);
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let poll = json!({"v": 1, "op": "poll", "pc": "pc-a", "cred": cred, "args": {"since": 0}});
        let parsed = pcmail_core::protocol::parse_request(&poll).unwrap();
        // Its statements prepared, so one poll of the next request sends its reads.
        assert!(rt.block_on(engine.answer_on_runtime(&parsed, T0 + 1)).is_some());
        // Polled once and dropped while it waits for PostgreSQL's answer. On
        // a loaded machine the answer can be back within that one poll (the
        // connection's task runs on another thread): then it is asked again.
        let dropped_waiting = (0..50).any(|_| {
            rt.block_on(async {
                let mut half = std::pin::pin!(engine.answer_on_runtime(&parsed, T0 + 2));
                std::future::poll_fn(|cx| {
                    std::task::Poll::Ready(std::future::Future::poll(half.as_mut(), cx).is_pending())
                })
                .await
            })
        });
        assert!(dropped_waiting, "no request was ever waiting for PostgreSQL's answer after one poll");
        // Long enough for its statement to have reached PostgreSQL and run.
        std::thread::sleep(std::time::Duration::from_millis(300));
        no_transaction_left_open(&pg, "dropped", std::time::Duration::from_secs(3));
        // The next request is answered there as before, and as the pool answers it.
        let on_runtime = rt.block_on(engine.answer_on_runtime(&parsed, T0 + 3));
        assert_eq!(on_runtime, Some(engine.handle_value(&poll, T0 + 3)));
    }

    /// A caught-up poll by a PC with its own credential is one round trip on
    /// PostgreSQL: its BEGIN with every read it makes (the credential, the
    /// roster, the clock's catch-up, the heartbeat, mail, names, both feeds,
    /// the roster version); its COMMIT is sent without waiting, yet no
    /// connection is left inside a transaction. What it answers is what it read.
    #[test]
    fn a_caught_up_poll_on_postgres_is_one_round_trip() {
        let cred = "c".repeat(64);
        let (pg, engine) = pg_engine("trips", &[("pc-a", &cred), ("pc-b", &"b".repeat(64))]);
        let poll = |args: Value, now: Millis| {
            let before = engine.round_trips();
            let r = ok(&engine, json!({"v": 1, "op": "poll", "pc": "pc-a", "cred": cred, "args": args}), now);
            (r, engine.round_trips() - before)
        };
        let (_, trips) = poll(json!({}), T0 + 1);
        assert!(trips > 2, "the first heartbeat writes: {trips} round trips");
        // The first of its kind on a connection also prepares its statements.
        poll(json!({"since": 0, "receivedSince": 0}), T0 + 2);
        let (r, trips) = poll(json!({"since": 0, "receivedSince": 0}), T0 + 2);
        assert_eq!(trips, 1, "{r}");
        assert_eq!(r["mail"], json!([]), "{r}");

        let id = format!("mail-{}-0000e002", T0 + 3);
        let send = json!({"v": 1, "op": "send", "pc": "pc-b", "cred": "b".repeat(64),
            "args": {"mail": {"id": id, "to": "pc-a", "body": "b"}}});
        ok(&engine, send, T0 + 3);
        let (r, trips) = poll(json!({"since": 0}), T0 + 4);
        assert_eq!((r["mail"][0]["id"].clone(), trips), (json!(id), 1), "{r}");
        // Confirming writes: its reads after the write are read again, and see it.
        let (r, _) = poll(json!({"confirm": [id]}), T0 + 5);
        assert_eq!((r["confirmed"].clone(), r["mail"].clone()), (json!([id]), json!([])), "{r}");
        let (r, trips) = poll(json!({}), T0 + 6);
        assert_eq!((r["mail"].clone(), trips), (json!([]), 1), "{r}");
        // The COMMITs not waited for reached PostgreSQL: no connection idles inside a transaction.
        no_transaction_left_open(&pg, "trips", std::time::Duration::from_secs(2));
        // A stranger's credential is refused, from the facts read ahead.
        let stranger = json!({"v": 1, "op": "poll", "pc": "pc-a", "cred": "s".repeat(64), "args": {}});
        let r = engine.handle_value(&stranger, T0 + 7);
        assert_eq!(r["ok"], json!(false), "{r}");
    }
}
