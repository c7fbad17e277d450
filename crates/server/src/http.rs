//! `pcmail serve`: the engine over HTTP (axum). `POST /api` always answers
//! 200 with protocol JSON; `GET /health` is a small JSON. Long-poll waits here,
//! outside the engine, on a per-label watch channel that commits trigger.

use crate::engine::{Engine, EngineConfig};
use crate::webhook;
use anyhow::Context;
use axum::body::Body;
use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use pcmail_core::model::limits;
use pcmail_core::protocol::{parse_request_bytes, Op, PollArgs, Request};
use pcmail_core::{ErrorCode, Millis, ProtoError};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::watch;

pub const DEFAULT_LISTEN: &str = "127.0.0.1:7878";
pub const DEFAULT_BODY_LIMIT: usize = 256 * 1024;

#[derive(Clone)]
pub struct ServeOptions {
    pub db_path: PathBuf,
    /// Loopback unless told otherwise.
    pub listen: SocketAddr,
    /// Required and non-empty: every request must carry it.
    pub token: String,
    pub webhook_url: Option<String>,
    pub body_limit: usize,
}

impl ServeOptions {
    pub fn new(db_path: impl Into<PathBuf>, token: impl Into<String>) -> ServeOptions {
        ServeOptions {
            db_path: db_path.into(),
            listen: DEFAULT_LISTEN.parse().expect("default listen address"),
            token: token.into(),
            webhook_url: None,
            body_limit: DEFAULT_BODY_LIMIT,
        }
    }
}

// The token is never printed, not even by Debug.
impl std::fmt::Debug for ServeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeOptions")
            .field("db_path", &self.db_path)
            .field("listen", &self.listen)
            .field("token", &"<redacted>")
            .field("webhook_url", &self.webhook_url.as_ref().map(|_| "<set>"))
            .field("body_limit", &self.body_limit)
            .finish()
    }
}

pub fn now_ms() -> Millis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as Millis)
        .unwrap_or(0)
}

/// Binds `opts.listen`, prints `listening on http://ADDR/api`, serves until
/// SIGTERM or ctrl-c.
pub async fn serve(opts: ServeOptions) -> anyhow::Result<()> {
    let listener = TcpListener::bind(opts.listen).await.with_context(|| format!("binding {}", opts.listen))?;
    let addr = listener.local_addr()?;
    println!("listening on http://{addr}/api");
    serve_with_listener(listener, opts, shutdown_signal()).await
}

/// `serve` on its own tokio runtime, for the CLI.
pub fn serve_blocking(opts: ServeOptions) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(serve(opts))
}

/// Serves on a bound listener until `shutdown` completes (tests bind port 0
/// and read the address from the listener).
pub async fn serve_with_listener(
    listener: TcpListener,
    opts: ServeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    if opts.token.trim().is_empty() {
        anyhow::bail!("serve needs a non-empty token");
    }
    let engine = Arc::new(
        Engine::open(
            &opts.db_path,
            EngineConfig { token: Some(opts.token.clone()), webhook_url: opts.webhook_url.clone(), busy_timeout: None },
        )
        .with_context(|| format!("opening {}", opts.db_path.display()))?,
    );
    let app = router(engine.clone(), opts.body_limit);
    let sweeper = tokio::spawn(sweep_timer(engine));
    tracing::info!(addr = %listener.local_addr()?, "pcmail server listening");
    let result = axum::serve(listener, app).with_graceful_shutdown(shutdown).await;
    sweeper.abort();
    result.context("http server")
}

/// The routes over an engine (also used by tests that drive an in-memory engine).
pub fn router(engine: Arc<Engine>, body_limit: usize) -> Router {
    let wakers = Arc::new(Wakers::default());
    let w = wakers.clone();
    engine.set_change_listener(Some(Arc::new(move |labels: &[String]| w.wake(labels))));
    let state = AppState { engine, wakers, body_limit, client: webhook_client() };
    Router::new().route("/api", post(api)).route("/health", get(health)).with_state(state)
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

/// Every 10 minutes: sweep with the system clock, then post pending webhooks.
async fn sweep_timer(engine: Arc<Engine>) {
    let client = webhook_client();
    let mut every = tokio::time::interval(Duration::from_millis(limits::SWEEP_EVERY_MS as u64));
    loop {
        every.tick().await;
        let e = engine.clone();
        match tokio::task::spawn_blocking(move || e.run_sweep(now_ms())).await {
            Ok(r) if r["ok"] == json!(true) => tracing::info!(expired = %r["expired"], alerts = %r["alerts"], "sweep"),
            Ok(r) => tracing::warn!(error = %r["error"]["code"], "sweep failed"),
            Err(e) => tracing::error!(error = %e, "sweep task failed"),
        }
        if let Err(e) = webhook::flush(engine.clone(), &client, now_ms()).await {
            tracing::warn!(error = %e, "webhook flush failed");
        }
    }
}

#[derive(Clone)]
struct AppState {
    engine: Arc<Engine>,
    wakers: Arc<Wakers>,
    body_limit: usize,
    client: reqwest::Client,
}

/// One watch channel per label; its counter moves when that label has
/// something new. Subscribing before the first poll closes the race where
/// mail lands between the poll and the wait.
#[derive(Default)]
struct Wakers {
    by_label: Mutex<HashMap<String, watch::Sender<u64>>>,
}

impl Wakers {
    fn subscribe(&self, label: &str) -> watch::Receiver<u64> {
        let mut map = self.by_label.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(label.to_string()).or_insert_with(|| watch::channel(0).0).subscribe()
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

async fn api(State(state): State<AppState>, body: Body) -> Json<Value> {
    let bytes = match axum::body::to_bytes(body, state.body_limit).await {
        Ok(b) => b,
        Err(_) => {
            return Json(
                ProtoError::new(ErrorCode::TooLarge, format!("the request body exceeds {} bytes", state.body_limit))
                    .to_json(),
            )
        }
    };
    let req = match parse_request_bytes(&bytes) {
        Ok(r) => r,
        Err(e) => return Json(e.to_json()),
    };
    tracing::debug!(op = req.op.name(), pc = %req.pc, "request");
    let wait_ms = match &req.op {
        Op::Poll(a) => a.wait_ms,
        _ => 0,
    };
    let is_sweep = matches!(req.op, Op::Sweep);
    let mut wake = (wait_ms > 0).then(|| state.wakers.subscribe(&req.pc));
    let first = handle(&state.engine, req.clone()).await;

    if let (Some(rx), Op::Poll(args)) = (wake.as_mut(), &req.op) {
        if nothing_to_return(&first) {
            if let Some(later) = long_poll(&state.engine, &req, args, rx, Duration::from_millis(wait_ms as u64)).await {
                // The confirms and marks were applied by the first pass; report them from it.
                let mut later = later;
                later["confirmed"] = first["confirmed"].clone();
                later["marks"] = first["marks"].clone();
                return Json(later);
            }
        }
    }
    if is_sweep && first["alerts"]["opened"].as_i64().unwrap_or(0) > 0 {
        let (engine, client) = (state.engine.clone(), state.client.clone());
        tokio::spawn(async move {
            if let Err(e) = webhook::flush(engine, &client, now_ms()).await {
                tracing::warn!(error = %e, "webhook flush failed");
            }
        });
    }
    Json(first)
}

fn nothing_to_return(resp: &Value) -> bool {
    resp["ok"] == json!(true)
        && resp["mail"].as_array().is_some_and(|a| a.is_empty())
        && resp["updates"].as_array().is_some_and(|a| a.is_empty())
}

/// Waits for a wake-up of the caller's label, then polls again (without the
/// confirms and marks, already applied). None when the time ran out.
async fn long_poll(
    engine: &Arc<Engine>,
    req: &Request,
    args: &PollArgs,
    rx: &mut watch::Receiver<u64>,
    wait: Duration,
) -> Option<Value> {
    let deadline = Instant::now() + wait;
    let again = Request {
        pc: req.pc.clone(),
        token: req.token.clone(),
        op: Op::Poll(PollArgs { confirm: vec![], marks: vec![], limit: args.limit, since: args.since, wait_ms: 0 }),
    };
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        match tokio::time::timeout(left, rx.changed()).await {
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
    let engine = engine.clone();
    match tokio::task::spawn_blocking(move || engine.handle_request(&req, now_ms())).await {
        Ok(v) => v,
        Err(e) => {
            tracing::error!(error = %e, "engine task failed");
            ProtoError::new(ErrorCode::Internal, "internal error; nothing was half-stored").to_json()
        }
    }
}
