//! `pcmail serve`: the engine over HTTP (axum). `POST /api` always answers
//! 200 with protocol JSON; `GET /health` is a small JSON. Long-poll waits here,
//! outside the engine, on a per-label watch channel that commits trigger.

use crate::engine::{Engine, EngineConfig};
use crate::listen::{ConnInfo, Limits};
use crate::peer::PeerSource;
use crate::tls::ServeTransport;
use crate::webhook;
use anyhow::Context;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use pcmail_core::job::PollJob;
use pcmail_core::lease::PollLease;
use pcmail_core::model::limits;
use pcmail_core::protocol::{parse_request_bytes, Op, PollArgs, Request};
use pcmail_core::{ErrorCode, Millis, ProtoError};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::watch;

pub const DEFAULT_LISTEN: &str = "127.0.0.1:7878";
pub const DEFAULT_BODY_LIMIT: usize = pcmail_core::model::limits::BODY_BYTES_MAX;

#[derive(Clone)]
pub struct ServeOptions {
    pub db_path: PathBuf,
    /// PostgreSQL instead of the SQLite file at `db_path` (`--db postgres://…`):
    /// this instance is one of any number on that database.
    pub postgres: Option<crate::store::pg_url::PgTarget>,
    /// Loopback unless told otherwise.
    pub listen: SocketAddr,
    /// Required and non-empty: every request must carry it.
    pub token: String,
    pub webhook_url: Option<String>,
    pub body_limit: usize,
    /// How long final mail is kept (None: the default, 90 days).
    pub retention_ms: Option<Millis>,
    /// Plain HTTP on loopback, TLS beyond it (see `tls::decide`).
    pub transport: ServeTransport,
    /// Bounds on connections: time (head, body, idle, handshake) and number.
    pub limits: Limits,
    /// Where the real peer comes from behind a balancer (by default: the TCP peer).
    pub peers: PeerSource,
    /// Threads of the async runtime that answers requests (None: one per
    /// core). Ops that wait on a database run on threads of their own, so
    /// instances sharing a host split its cores: more runtime threads than
    /// cores only take turns waking each other.
    pub threads: Option<usize>,
}

impl ServeOptions {
    pub fn new(db_path: impl Into<PathBuf>, token: impl Into<String>) -> ServeOptions {
        ServeOptions {
            db_path: db_path.into(),
            postgres: None,
            listen: DEFAULT_LISTEN.parse().expect("default listen address"),
            token: token.into(),
            webhook_url: None,
            body_limit: DEFAULT_BODY_LIMIT,
            retention_ms: None,
            transport: ServeTransport::Plain,
            limits: Limits::default(),
            peers: PeerSource::default(),
            threads: None,
        }
    }
}

// The token is never printed, not even by Debug.
impl std::fmt::Debug for ServeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeOptions")
            .field("db_path", &self.db_path)
            .field("postgres", &self.postgres.as_ref().map(|t| t.redacted().to_string()))
            .field("listen", &self.listen)
            .field("token", &"<redacted>")
            .field("webhook_url", &self.webhook_url.as_ref().map(|_| "<set>"))
            .field("body_limit", &self.body_limit)
            .field("transport", &self.transport)
            .field("limits", &self.limits)
            .field("peers", &self.peers)
            .finish()
    }
}

pub fn now_ms() -> Millis {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as Millis).unwrap_or(0)
}

/// Checks the options and opens the database (creating its folder), so that
/// nothing is announced before the server can really serve.
fn open_engine(opts: &ServeOptions) -> anyhow::Result<Arc<Engine>> {
    if opts.token.trim().is_empty() {
        anyhow::bail!(
            "serve needs a token that is not blank (`echo TOKEN | pcmail token set --serve`, or PCMAIL_TOKEN)"
        );
    }
    let config = EngineConfig {
        token: Some(opts.token.clone()),
        webhook_url: opts.webhook_url.clone(),
        busy_timeout: None,
        retention_ms: opts.retention_ms,
    };
    if let Some(target) = &opts.postgres {
        let engine =
            Engine::open_postgres(target.clone(), config).with_context(|| format!("opening {}", target.redacted()))?;
        tracing::info!(db = %target.redacted(), "database: PostgreSQL");
        return Ok(Arc::new(engine));
    }
    if let Some(dir) = opts.db_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        pcmail_fsmode::create_private_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let engine = Engine::open(&opts.db_path, config).with_context(|| format!("opening {}", opts.db_path.display()))?;
    Ok(Arc::new(engine))
}

/// `open_engine` off the async threads: the PostgreSQL client blocks.
async fn open_engine_blocking(opts: &ServeOptions) -> anyhow::Result<Arc<Engine>> {
    let opts = opts.clone();
    tokio::task::spawn_blocking(move || open_engine(&opts)).await.context("opening the database")?
}

/// Binds `opts.listen`, prints the certificate's fingerprint (TLS) and then
/// `listening on http(s)://ADDR/api`, serves until SIGTERM or ctrl-c.
pub async fn serve(opts: ServeOptions) -> anyhow::Result<()> {
    // Before anything opens a file: the default soft limit (1,024) is what a
    // slowloris would exhaust, and the connection cap is kept below it.
    let fds = crate::listen::raise_fd_limit();
    let engine = open_engine_blocking(&opts).await?;
    let identity = crate::tls::identity(&opts.transport)?;
    let listener = crate::listen::bind(opts.listen).with_context(|| format!("binding {}", opts.listen))?;
    let addr = listener.local_addr()?;
    let max = crate::listen::effective_max_connections(opts.limits.max_connections, fds);
    if max < opts.limits.max_connections {
        say(
            std::io::stderr(),
            format_args!(
                "pcmail: at most {max} connections (not {}): the open-file limit is {} and {} stay in reserve \
             (raise the hard limit, e.g. LimitNOFILE= in the systemd unit)",
                opts.limits.max_connections,
                fds.unwrap_or(0),
                crate::listen::FD_RESERVE
            ),
        );
    }
    let Some(identity) = identity else {
        if opts.transport == ServeTransport::InsecureHttp {
            say(std::io::stderr(), format_args!(
                "pcmail: WARNING --insecure-http: plain HTTP on {addr}, reachable from other machines: the admin secret \
                 and every PC's credential cross the network in clear (`pcmail doctor` flags it on every PC)"
            ));
        }
        say(std::io::stdout(), format_args!("listening on http://{addr}/api"));
        let info =
            if opts.transport == ServeTransport::InsecureHttp { json!({"insecureHttp": true}) } else { json!({}) };
        return run(listener, engine, &opts, None, info, shutdown_signal()).await;
    };
    say(
        std::io::stdout(),
        format_args!(
            "TLS certificate {} ({}), SHA-256 fingerprint {}",
            identity.cert_path.display(),
            if identity.made_now { "self-signed, made now" } else { "kept" },
            identity.fingerprint
        ),
    );
    say(std::io::stdout(), format_args!("listening on https://{addr}/api"));
    let info = json!({"tlsFingerprint": identity.fingerprint});
    run(listener, engine, &opts, Some(identity.config), info, shutdown_signal()).await
}

/// A line of the server's own that never panics: `println!` panics when
/// its stream fails (a terminal closed behind `pcmail serve &`, `pcmail
/// serve | head -1`), which would end the server as it starts. A line
/// nobody reads is dropped.
fn say(mut to: impl std::io::Write, line: std::fmt::Arguments) {
    let _ = writeln!(to, "{line}");
}

/// `serve` on its own tokio runtime, for the CLI.
pub fn serve_blocking(opts: ServeOptions) -> anyhow::Result<()> {
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = opts.threads {
        rt.worker_threads(n.max(1));
    }
    rt.enable_all().build()?.block_on(serve(opts))
}

/// Serves on a bound listener until `shutdown` completes (tests bind port 0
/// and read the address from the listener), with `opts`' transport and limits.
pub async fn serve_with_listener(
    listener: TcpListener,
    opts: ServeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let engine = open_engine_blocking(&opts).await?;
    let identity = crate::tls::identity(&opts.transport)?;
    let info = identity.as_ref().map(|i| json!({"tlsFingerprint": i.fingerprint})).unwrap_or_else(|| json!({}));
    run(listener, engine, &opts, identity.map(|i| i.config), info, shutdown).await
}

/// `transport_info` is merged into `hello` and `enrol` answers: the
/// certificate's fingerprint (the admin's `roster add` puts it in the join
/// code) or `insecureHttp` (which `doctor` flags).
async fn run(
    listener: TcpListener,
    engine: Arc<Engine>,
    opts: &ServeOptions,
    tls: Option<Arc<rustls::ServerConfig>>,
    transport_info: Value,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let (app, stopping, wakers) = app(engine.clone(), opts.body_limit, opts.limits.body_timeout, opts.peers.clone());
    let app = app.layer(axum::Extension(TransportInfo(Arc::new(transport_info))));
    // Other instances on the same PostgreSQL: their commits wake our long polls.
    let stop_listening = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let heard = {
        let w = wakers.clone();
        Arc::new(move |labels: Option<&[String]>| match labels {
            Some(labels) => w.wake(labels),
            None => w.wake_all(),
        })
    };
    let listener_thread = engine.spawn_wake_listener(heard, stop_listening.clone());
    let sweeper = tokio::spawn(sweep_timer(engine));
    let max = crate::listen::effective_max_connections(opts.limits.max_connections, crate::listen::fd_limit());
    let table = crate::listen::ConnTable::new(max, opts.limits.max_connections_per_peer);
    tracing::info!(addr = %listener.local_addr()?, max_connections = max, "pcmail server listening");
    let serving = Arc::new(crate::listen::Serving {
        router: app,
        limits: opts.limits.clone(),
        peers: opts.peers.clone(),
        tls: tls.map(tokio_rustls::TlsAcceptor::from),
    });
    // On shutdown, open long polls answer at once (with what they have) so
    // the graceful shutdown does not wait out their 25 s.
    let shutdown = async move {
        shutdown.await;
        let _ = stopping.send(true);
    };
    crate::listen::serve_connections(listener, serving, table, shutdown).await;
    sweeper.abort();
    stop_listening.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(t) = listener_thread {
        let _ = tokio::task::spawn_blocking(move || t.join()).await;
    }
    Ok(())
}

/// The routes over an engine (also used by tests that drive an in-memory engine).
pub fn router(engine: Arc<Engine>, body_limit: usize) -> Router {
    app(engine, body_limit, Limits::default().body_timeout, PeerSource::default()).0
}

/// The routes, the switch that ends open long polls, and the waiters.
fn app(
    engine: Arc<Engine>,
    body_limit: usize,
    body_timeout: Duration,
    peers: PeerSource,
) -> (Router, watch::Sender<bool>, Arc<Wakers>) {
    let wakers = Arc::new(Wakers::default());
    let w = wakers.clone();
    engine.set_change_listener(Some(Arc::new(move |labels: &[String]| w.wake(labels))));
    let (stop_tx, stopping) = watch::channel(false);
    let state = AppState {
        engine,
        wakers: wakers.clone(),
        body_limit,
        body_timeout,
        peers: Arc::new(peers),
        client: webhook_client(),
        stopping,
    };
    (Router::new().route("/api", post(api)).route("/health", get(health)).with_state(state), stop_tx, wakers)
}

fn webhook_client() -> reqwest::Client {
    reqwest::Client::builder().timeout(webhook::POST_TIMEOUT).build().unwrap_or_default()
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutting down");
}

/// Every 10 minutes: sweep with the system clock, then retention, then post
/// pending webhooks. On PostgreSQL every instance has this timer, and the
/// work runs once for the cluster: under the maintenance lock, and only when
/// no instance has done it in the last period (`Engine::maintenance`).
async fn sweep_timer(engine: Arc<Engine>) {
    let client = webhook_client();
    let mut every = tokio::time::interval(Duration::from_millis(limits::SWEEP_EVERY_MS as u64));
    loop {
        every.tick().await;
        let (e, c, rt) = (engine.clone(), client.clone(), tokio::runtime::Handle::current());
        match tokio::task::spawn_blocking(move || e.maintenance(now_ms(), |e| maintain(e, &c, &rt))).await {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => tracing::debug!("maintenance: another instance ran it this period"),
            Ok(Err(err)) => tracing::warn!(error = %err, "maintenance failed"),
            Err(err) => tracing::error!(error = %err, "maintenance task failed"),
        }
    }
}

/// One round of the timer's work (on a blocking thread, under the lock).
fn maintain(engine: &Arc<Engine>, client: &reqwest::Client, rt: &tokio::runtime::Handle) {
    let r = engine.run_sweep(now_ms());
    if r["ok"] == json!(true) {
        tracing::info!(expired = %r["expired"], alerts = %r["alerts"], "sweep");
    } else {
        tracing::warn!(error = %r["error"]["code"], "sweep failed");
    }
    if let Err(err) = engine.prune(now_ms()) {
        tracing::warn!(error = %err, "retention prune failed");
    }
    if let Err(e) = rt.block_on(webhook::flush(engine.clone(), client, now_ms())) {
        tracing::warn!(error = %e, "webhook flush failed");
    }
}

/// What `hello` and `enrol` add about the carrier (see `run`).
#[derive(Clone)]
struct TransportInfo(Arc<Value>);

#[derive(Clone)]
struct AppState {
    engine: Arc<Engine>,
    wakers: Arc<Wakers>,
    body_limit: usize,
    /// The whole body must arrive within this (a slow sender holds a connection).
    body_timeout: Duration,
    peers: Arc<PeerSource>,
    client: reqwest::Client,
    /// Turns true when the server is shutting down.
    stopping: watch::Receiver<bool>,
}

/// At most this many labels have long-poll waiters at once; past it a poll is
/// answered at once instead of waiting (the roster is far smaller).
const MAX_WAITING_LABELS: usize = 10_000;

/// One watch channel per label; its counter moves when that label has
/// something new. Subscribing before the first poll closes the race where
/// mail lands between the poll and the wait. Only an authorised caller on the
/// roster subscribes, and the entry goes when its last waiter does.
#[derive(Default)]
struct Wakers {
    by_label: Mutex<HashMap<String, watch::Sender<u64>>>,
}

/// A long-poll's subscription; removes the label's entry when it was the last.
struct Waiter {
    wakers: Arc<Wakers>,
    label: String,
    rx: Option<watch::Receiver<u64>>,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        drop(self.rx.take());
        let mut map = self.wakers.by_label.lock().unwrap_or_else(|e| e.into_inner());
        if map.get(&self.label).is_some_and(|tx| tx.receiver_count() == 0) {
            map.remove(&self.label);
        }
    }
}

impl Wakers {
    fn subscribe(self: &Arc<Self>, label: &str) -> Option<Waiter> {
        let mut map = self.by_label.lock().unwrap_or_else(|e| e.into_inner());
        if !map.contains_key(label) && map.len() >= MAX_WAITING_LABELS {
            return None;
        }
        let rx = map.entry(label.to_string()).or_insert_with(|| watch::channel(0).0).subscribe();
        Some(Waiter { wakers: self.clone(), label: label.to_string(), rx: Some(rx) })
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_label.lock().unwrap().len()
    }

    /// Every waiter re-reads: what woke it may have been missed (another
    /// instance's notifications while the listener was reconnecting).
    fn wake_all(&self) {
        let map = self.by_label.lock().unwrap_or_else(|e| e.into_inner());
        for tx in map.values() {
            tx.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    fn wake(&self, labels: &[String]) {
        let map = self.by_label.lock().unwrap_or_else(|e| e.into_inner());
        for l in labels {
            if let Some(tx) = map.get(l) {
                tx.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
    }
}

async fn health() -> Json<Value> {
    Json(json!({"ok": true, "server": "pcmail-rust", "protocol": pcmail_core::PROTOCOL_VERSION}))
}

async fn api(
    State(state): State<AppState>,
    info: Option<axum::Extension<TransportInfo>>,
    conn: Option<axum::Extension<ConnInfo>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let conn = conn.map(|axum::Extension(c)| c);
    // The peer of this request: its connection's, or what a trusted proxy's header says.
    let peer = conn.as_ref().map(|c| {
        let values = crate::peer::header_name(state.peers.mode)
            .map(|name| headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).collect::<Vec<_>>())
            .unwrap_or_default();
        state.peers.request_peer(c.peer, values.into_iter())
    });
    let bytes = match tokio::time::timeout(state.body_timeout, axum::body::to_bytes(body, state.body_limit)).await {
        Ok(Ok(b)) => b,
        Ok(Err(_)) => {
            return Json(
                ProtoError::new(ErrorCode::TooLarge, format!("the request body exceeds {} bytes", state.body_limit))
                    .to_json(),
            )
            .into_response()
        }
        Err(_) => {
            // The rest of the body may still come: the connection cannot carry another request.
            let e = ProtoError::new(
                ErrorCode::BadRequest,
                format!("the request body did not arrive within {} s", state.body_timeout.as_secs_f64()),
            );
            return ([(axum::http::header::CONNECTION, "close")], Json(e.to_json())).into_response();
        }
    };
    let answer = api_answer(&state, info.map(|axum::Extension(TransportInfo(i))| i), conn.as_ref(), peer, &bytes).await;
    Json(answer).into_response()
}

async fn api_answer(
    state: &AppState,
    transport_info: Option<Arc<Value>>,
    conn: Option<&ConnInfo>,
    peer: Option<IpAddr>,
    bytes: &[u8],
) -> Value {
    let req = match parse_request_bytes(bytes) {
        Ok(r) => r,
        Err(e) => return e.to_json(),
    };
    tracing::debug!(op = req.op.name(), pc = %req.pc, "request");
    let wait_ms = match &req.op {
        Op::Poll(a) => a.wait_ms,
        _ => 0,
    };
    let is_sweep = matches!(req.op, Op::Sweep);
    let tells_transport = matches!(req.op, Op::Hello | Op::Enrol { .. });
    // Only a caller with the token and on the roster may wait: a stranger's
    // poll must not leave anything behind (it once grew the server by 280 MB).
    let mut waiter = None;
    if wait_ms > 0 && !*state.stopping.borrow() && may_wait(&state.engine, &req).await {
        // A PC's long poll: its connection is one to keep when strangers are shed.
        if let Some(c) = conn {
            c.handle.prove();
        }
        waiter = state.wakers.subscribe(&req.pc);
    }
    let first = handle_from(&state.engine, req.clone(), peer).await;
    if first["ok"] == json!(true) {
        // Only an authenticated caller is answered ok (serve always has a secret).
        if let Some(c) = conn {
            c.handle.prove();
        }
    }

    if let (Some(w), Op::Poll(args)) = (waiter.as_mut(), &req.op) {
        if nothing_to_return(&first) {
            let rx = w.rx.as_mut().expect("a live waiter has its receiver");
            let mut stopping = state.stopping.clone();
            let mut args = args.clone();
            if let (Some(l), Some(v)) = (args.lease.as_mut(), first["lease"]["version"].as_i64()) {
                l.known = v;
            }
            if let Some(later) =
                long_poll(&state.engine, &req, &args, rx, &mut stopping, Duration::from_millis(wait_ms as u64)).await
            {
                // The confirms, marks and lease renewals were applied by the first pass; report them from it.
                let mut later = later;
                later["confirmed"] = first["confirmed"].clone();
                later["marks"] = first["marks"].clone();
                merge_lease(&first, &mut later);
                merge_job(&first, &mut later);
                return later;
            }
        }
    }
    if is_sweep && first["alerts"]["opened"].as_i64().unwrap_or(0) > 0 {
        let (engine, client) = (state.engine.clone(), state.client.clone());
        let rt = tokio::runtime::Handle::current();
        // Posted once for the cluster: under the maintenance lock (if another
        // instance holds it, that instance posts what is due).
        tokio::task::spawn_blocking(move || {
            let e = engine.clone();
            let posted = engine.exclusively(|| rt.block_on(webhook::flush(e, &client, now_ms())));
            match posted {
                Ok(Some(Err(e))) | Err(e) => tracing::warn!(error = %e, "webhook flush failed"),
                _ => {}
            }
        });
    }
    let mut first = first;
    if let (true, Some(info), Some(obj)) =
        (tells_transport, transport_info.as_ref().and_then(|i| i.as_object()), first.as_object_mut())
    {
        if obj.get("ok") == Some(&json!(true)) {
            obj.extend(info.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    first
}

fn nothing_to_return(resp: &Value) -> bool {
    resp["ok"] == json!(true)
        && resp["mail"].as_array().is_some_and(|a| a.is_empty())
        && resp["updates"].as_array().is_some_and(|a| a.is_empty())
        // A lease lost, or the leases changed: the PC's guard cache must hear of it now.
        && resp["lease"]["lost"].as_array().is_none_or(|a| a.is_empty())
        && resp["lease"].get("list").is_none()
        && resp.get("receivedUpdates").and_then(Value::as_array).is_none_or(|a| a.is_empty())
        // A job offered, a cancel to act on, a job that finished: answer now.
        && ["offered", "cancel", "finished"].iter().all(|k| resp["job"][*k].as_array().is_none_or(|a| a.is_empty()))
}

/// The long poll's later pass carried no whitelist, heartbeats or reports:
/// what the first pass did with them is reported from it.
fn merge_job(first: &Value, later: &mut Value) {
    let Some(f) = first.get("job") else { return };
    match later.get_mut("job") {
        Some(l) => {
            for k in ["whitelistHash", "reported", "errors"] {
                l[k] = f[k].clone();
            }
        }
        None => later["job"] = f.clone(),
    }
}

/// The long poll's later pass saw only what changed since the first: the
/// first pass's renewals, releases, errors and lost reports come from it.
fn merge_lease(first: &Value, later: &mut Value) {
    let Some(f) = first.get("lease") else { return };
    let Some(l) = later.get_mut("lease") else {
        later["lease"] = f.clone();
        return;
    };
    for k in ["renewed", "released", "errors"] {
        l[k] = f[k].clone();
    }
    let mut lost = f["lost"].as_array().cloned().unwrap_or_default();
    lost.extend(l["lost"].as_array().cloned().unwrap_or_default());
    l["lost"] = Value::Array(lost);
}

/// Waits for a wake-up of the caller's label, then polls again (without the
/// confirms and marks, already applied). None when the time ran out.
async fn may_wait(engine: &Arc<Engine>, req: &Request) -> bool {
    if let Some(may) = engine.may_long_poll_on_runtime(req).await {
        return may;
    }
    let engine = engine.clone();
    let req = req.clone();
    tokio::task::spawn_blocking(move || engine.may_long_poll(&req)).await.unwrap_or(false)
}

async fn long_poll(
    engine: &Arc<Engine>,
    req: &Request,
    args: &PollArgs,
    rx: &mut watch::Receiver<u64>,
    stopping: &mut watch::Receiver<bool>,
    wait: Duration,
) -> Option<Value> {
    let deadline = Instant::now() + wait;
    let again = Request {
        pc: req.pc.clone(),
        token: req.token.clone(),
        cred: req.cred.clone(),
        op: Op::Poll(PollArgs {
            confirm: vec![],
            marks: vec![],
            limit: args.limit,
            since: args.since,
            wait_ms: 0,
            // Only to hear of leases lost or changed since the first pass (nothing renewed twice).
            lease: args.lease.as_ref().map(|l| PollLease { renew: vec![], release: vec![], known: l.known }),
            received_since: args.received_since,
            // Only to hear of jobs offered, cancelled or finished since the first pass.
            job: args.job.as_ref().map(|j| PollJob { take: j.take, ..Default::default() }),
            // The report was applied by the first pass; the names come again.
            sessions: args.sessions.clone(),
        }),
    };
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        let woke = tokio::select! {
            r = tokio::time::timeout(left, rx.changed()) => r,
            // Shutting down: answer now with the first pass.
            _ = stopping.wait_for(|s| *s) => return None,
        };
        match woke {
            Ok(Ok(())) => {
                rx.borrow_and_update();
                let resp = handle(engine, again.clone()).await;
                if !nothing_to_return(&resp) {
                    return Some(resp);
                }
            }
            // Time is up, or the channel is gone: answer with the first pass.
            _ => return None,
        }
    }
}

async fn handle(engine: &Arc<Engine>, req: Request) -> Value {
    handle_from(engine, req, None).await
}

/// `peer`: the caller's address, where the op needs it (join attempts are limited per peer).
async fn handle_from(engine: &Arc<Engine>, req: Request, peer: Option<IpAddr>) -> Value {
    // On PostgreSQL, a request that needs only the reads sent ahead is
    // answered here, without handing it to a blocking thread and back.
    if let Some(v) = engine.answer_on_runtime(&req, now_ms()).await {
        return v;
    }
    let engine = engine.clone();
    match tokio::task::spawn_blocking(move || engine.handle_request_from(&req, now_ms(), peer)).await {
        Ok(v) => v,
        Err(e) => {
            tracing::error!(error = %e, "engine task failed");
            ProtoError::new(ErrorCode::Internal, "internal error; nothing was half-stored").to_json()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    const TOKEN: &str = "t0k-wakers";

    fn engine() -> Arc<Engine> {
        let e = Engine::open_in_memory(EngineConfig { token: Some(TOKEN.into()), ..Default::default() }).unwrap();
        let r = e.handle_value(
            &json!({"v":1,"op":"roster.set","pc":"pc-b","token":TOKEN,"args":{"label":"pc-b","hostname":"B"}}),
            1,
        );
        assert_eq!(r["ok"], json!(true));
        Arc::new(e)
    }

    async fn post_json(app: &Router, body: Value) -> Value {
        let req = axum::http::Request::post("/api").body(Body::from(body.to_string())).unwrap();
        let resp = app.clone().oneshot(req).await.unwrap();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20).await.unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    fn rss_kib() -> i64 {
        let s = std::fs::read_to_string("/proc/self/statm").unwrap();
        let pages: i64 = s.split_whitespace().nth(1).unwrap().parse().unwrap();
        pages * 4
    }

    // A wrong token with a fresh label each time used to
    // leave a waiter per label behind (11.8 MB → 295 MB after ~1M requests).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn strangers_leave_no_waiters_and_no_memory_behind() {
        let (app, _stop, wakers) = app(engine(), DEFAULT_BODY_LIMIT, Duration::from_secs(30), PeerSource::default());
        let poll = |pc: String, token: &str| json!({"v":1,"op":"poll","pc":pc,"token":token,"args":{"waitMs":25000}});
        // warm up allocator and caches before measuring
        for i in 0..2_000 {
            let r = post_json(&app, poll(format!("x{i}"), "wrong")).await;
            assert_eq!(r["error"]["code"], "unauthorized");
        }
        let before = rss_kib();
        // 30,000 strangers: the waiter that once stayed per label (~280 bytes)
        // would grow RSS by ~8 MB, twice the bound below.
        for i in 0..30_000 {
            let r = post_json(&app, poll(format!("stranger-{i}"), "wrong")).await;
            assert_eq!(r["error"]["code"], "unauthorized");
        }
        // Right token, a label not on the roster: refused, and nothing kept either.
        for i in 0..1_000 {
            let r = post_json(&app, poll(format!("ghost-{i}"), TOKEN)).await;
            assert_eq!(r["error"]["code"], "unknown_pc");
        }
        assert_eq!(wakers.len(), 0, "no waiter is kept for a caller that may not wait");
        let grew = rss_kib() - before;
        println!("RSS grew by {grew} KiB over 30k unauthorised polls");
        assert!(grew < 4 * 1024, "RSS grew by {grew} KiB over 30k unauthorised polls");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_waiter_goes_when_its_long_poll_ends() {
        let (app, _stop, wakers) = app(engine(), DEFAULT_BODY_LIMIT, Duration::from_secs(30), PeerSource::default());
        let a = app.clone();
        let pending = tokio::spawn(async move {
            post_json(&a, json!({"v":1,"op":"poll","pc":"pc-b","token":TOKEN,"args":{"waitMs":400}})).await
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        while wakers.len() == 0 {
            assert!(Instant::now() < deadline, "the roster PC's long poll never subscribed");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let r = pending.await.unwrap();
        assert_eq!(r["ok"], json!(true));
        assert_eq!(wakers.len(), 0, "the entry is removed with its last waiter");
    }

    // SIGTERM with PCs long-polling used to take 13.6 s: each open long poll
    // was waited out instead of being answered at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shutdown_ends_open_long_polls_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let opts = ServeOptions::new(dir.path().join("a/b/serve.db"), TOKEN);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/api", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve_with_listener(listener, opts, async move {
            let _ = stopped.await;
        }));
        let client = reqwest::Client::new();
        let r: Value = client
            .post(&url)
            .json(&json!({"v":1,"op":"roster.set","pc":"pc-b","token":TOKEN,"args":{"label":"pc-b","hostname":"B"}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(r["ok"], json!(true), "{r}");
        let polls: Vec<_> = (0..2)
            .map(|_| {
                let (c, u) = (client.clone(), url.clone());
                tokio::spawn(async move {
                    c.post(&u)
                        .json(&json!({"v":1,"op":"poll","pc":"pc-b","token":TOKEN,"args":{"waitMs":25000}}))
                        .send()
                        .await
                        .unwrap()
                        .json::<Value>()
                        .await
                        .unwrap()
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let t = Instant::now();
        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
        let took = t.elapsed();
        #[cfg(unix)]
        {
            // The data folder pcmail serve made and its database are private.
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&dir.path().join("a/b")), 0o700);
            assert_eq!(mode(&dir.path().join("a/b/serve.db")), 0o600);
            for side in ["serve.db-wal", "serve.db-shm"] {
                let p = dir.path().join("a/b").join(side);
                if p.exists() {
                    assert_eq!(mode(&p), 0o600, "{side}");
                }
            }
        }
        for p in polls {
            assert_eq!(p.await.unwrap()["ok"], json!(true), "an open long poll is answered, not cut");
        }
        assert!(took < Duration::from_secs(3), "shutdown took {took:?} with two long polls open");
    }
}
