//! How a PC reaches its server: the engine in-process (embedded default) or
//! one JSON endpoint over HTTP (`pcmail serve` or Apps Script). Both speak the
//! same protocol value; only the carrier differs.

use pcmail_core::answers::Answer;
use pcmail_core::protocol::{request_bytes_with_cred, request_json, Op};
use pcmail_core::{ErrorCode, Millis, ProtoError};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The server answered with a protocol error (data, with a code).
    #[error("server refused: {0}")]
    Server(ProtoError),
    /// Could not get a JSON answer (network, HTML page, timeout): retry later.
    #[error("server unreachable: {0}")]
    Transient(String),
    /// The server's TLS certificate is not the one this PC pinned: nothing
    /// was sent (exit 6, as unreachable; the message names both fingerprints).
    #[error("server not trusted: {0}")]
    Untrusted(String),
}

impl CallError {
    pub fn is_transient(&self) -> bool {
        match self {
            // The poller keeps trying: the admin may put the pinned certificate back.
            CallError::Transient(_) | CallError::Untrusted(_) => true,
            CallError::Server(p) => p.code.is_transient(),
        }
    }
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            CallError::Server(p) => Some(p.code),
            CallError::Transient(_) | CallError::Untrusted(_) => None,
        }
    }
}

/// `v` (a success body) as `op`'s answer type; a body that is not one is a
/// transient failure, as an HTML page instead of JSON is.
pub fn decode<A: Answer>(op: &Op, v: Value) -> Result<A, CallError> {
    debug_assert!(A::OPS.contains(&op.kind()), "{} is not answered by this type", op.name());
    decode_as(v, op.name())
}

/// `v` as the answer of the op named `what`.
pub fn decode_as<T: serde::de::DeserializeOwned>(v: Value, what: &str) -> Result<T, CallError> {
    serde_json::from_value(v)
        .map_err(|e| CallError::Transient(format!("the server's {what} answer is not understood: {e}")))
}

/// Calls `op` and decodes its answer.
pub fn call_as<A: Answer>(t: &dyn Transport, op: &Op) -> Result<A, CallError> {
    decode(op, t.call(op)?)
}

pub trait Transport: Send + Sync {
    /// Sends one request; `Ok` holds the success body (`ok: true`).
    fn call(&self, op: &Op) -> Result<Value, CallError>;
    /// The server can hold a poll open until mail arrives.
    fn long_poll(&self) -> bool;
    /// Short name for logs and `doctor`.
    fn describe(&self) -> String;
    /// Waits up to `pause` before the next timed poll, ending early when the
    /// server may have lease news for this PC's guard (its lease version is
    /// no longer `known_lease_version`). A server that long-polls wakes the
    /// poll itself; the default only sleeps.
    fn wait_for_news(&self, pause: Duration, known_lease_version: i64) {
        let _ = known_lease_version;
        std::thread::sleep(pause);
    }
    /// Every request spends a daily quota (Apps Script's URL fetches): ask
    /// seldom, with growing gaps.
    fn quota_bound(&self) -> bool {
        false
    }
    /// The server binds labels to installations (`cred`; HTTP servers). The
    /// embedded engine binds nothing: same process, same files.
    fn binds_labels(&self) -> bool {
        false
    }
    /// Presents this installation's credential in every request from now on.
    fn set_credential(&self, _cred: Option<String>) {}
    /// Runs the server's retention where the server is this process (the
    /// embedded default has no timer of its own).
    fn prune(&self, _now: Millis) {}
    /// This process lives one command: a server file it holds open is left
    /// as [`pcmail_server::Engine::make_short_lived`] says. Remote servers:
    /// nothing to do.
    fn make_short_lived(&mut self) -> Result<(), CallError> {
        Ok(())
    }
}

/// Reads a response body: JSON with `ok:true`, a protocol error, or garbage
/// (an HTML page from Google on quota/time-out) that is a transient error.
pub fn interpret(body: &[u8]) -> Result<Value, CallError> {
    let v: Value = serde_json::from_slice(body).map_err(|_| {
        let head: String =
            String::from_utf8_lossy(&body[..body.len().min(80)]).chars().filter(|c| !c.is_control()).collect();
        CallError::Transient(format!("the server answered something that is not JSON ({head:?}…)"))
    })?;
    match v.get("ok") {
        Some(Value::Bool(true)) => Ok(v),
        Some(Value::Bool(false)) => Err(match ProtoError::from_json(&v) {
            Some(p) => CallError::Server(p),
            None => CallError::Transient("the server answered an error without a known code".into()),
        }),
        _ => Err(CallError::Transient("the server answered JSON without \"ok\"".into())),
    }
}

/// The engine in-process on a local SQLite file.
pub struct Embedded {
    engine: pcmail_server::Engine,
    pc: String,
    clock: fn() -> Millis,
    db: std::path::PathBuf,
    /// The lease version a wait last ended early for: never twice for the
    /// same one (a poll that did not record it must not spin).
    woken_for: std::sync::Mutex<Option<i64>>,
    /// Writes to the server file, watched from the first wait between polls
    /// (a process that lives one command never waits).
    watch: std::sync::OnceLock<pcmail_local::filewatch::FileWatch>,
}

/// How often the embedded poller looks at the server file between polls
/// where its writes cannot be watched (a `stat` of the database and its
/// write-ahead log; the lease version is read only when one of them
/// changed), and for a while after each write where they can.
pub const FILE_WATCH_EVERY: Duration = Duration::from_millis(20);

/// The database file and its write-ahead log as `stat` sees them (a commit
/// by any process on this PC changes the log's size or time).
pub(crate) fn file_stamp(db: &Path) -> [Option<(std::time::SystemTime, u64)>; 2] {
    let stamp = |p: &Path| std::fs::metadata(p).ok().and_then(|m| Some((m.modified().ok()?, m.len())));
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    [stamp(db), stamp(Path::new(&wal))]
}

impl Embedded {
    pub fn open(db: &Path, pc: &str, clock: fn() -> Millis) -> Result<Embedded, CallError> {
        if let Some(dir) = db.parent() {
            let _ = pcmail_fsmode::create_private_dir_all(dir);
        }
        let engine = pcmail_server::Engine::open(db, pcmail_server::EngineConfig::default())
            .map_err(|e| CallError::Transient(format!("cannot open the embedded server at {}: {e}", db.display())))?;
        Ok(Embedded {
            engine,
            pc: pc.to_string(),
            clock,
            db: db.to_path_buf(),
            woken_for: Default::default(),
            watch: Default::default(),
        })
    }
    pub fn engine(&self) -> &pcmail_server::Engine {
        &self.engine
    }
}

impl Transport for Embedded {
    fn call(&self, op: &Op) -> Result<Value, CallError> {
        let req = request_json(&self.pc, None, op);
        let resp = self.engine.handle_value(&req, (self.clock)());
        let bytes = serde_json::to_vec(&resp).expect("response serialises");
        interpret(&bytes)
    }
    fn long_poll(&self) -> bool {
        false
    }
    fn describe(&self) -> String {
        "embedded".into()
    }
    /// No long poll here: the other PCs write the same file, so a change of
    /// the file whose lease version moved ends the wait (within ~20 ms plus
    /// one read), and the poll that follows refreshes the guard file.
    fn wait_for_news(&self, pause: Duration, known: i64) {
        use pcmail_local::filewatch::FileWatch;
        let deadline = std::time::Instant::now() + pause;
        let watch = self.watch.get_or_init(|| FileWatch::new(&self.db, FILE_WATCH_EVERY));
        // This process's own writes of the poll just made: the first look
        // below covers them.
        watch.forget_pending();
        let events = watch.is_event_driven();
        let mut active_until = std::time::Instant::now();
        let mut stamp = None;
        loop {
            // On the timer, the version is read when a `stat` changed; woken
            // by writes, each time (a write wakes this before its commit is
            // visible, and a `stat` taken then would match the finished one).
            let now_stamp = (!events).then(|| file_stamp(&self.db));
            if events || stamp != now_stamp {
                stamp = now_stamp;
                if let Some(v) = self.engine.lease_version().filter(|v| *v != known) {
                    let mut w = self.woken_for.lock().unwrap_or_else(|e| e.into_inner());
                    if *w != Some(v) {
                        *w = Some(v);
                        return;
                    }
                }
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return;
            }
            watch.next_look(&mut active_until, left, None);
        }
    }
    fn make_short_lived(&mut self) -> Result<(), CallError> {
        self.engine
            .make_short_lived()
            .map_err(|e| CallError::Transient(format!("cannot open the embedded server at {}: {e}", self.db.display())))
    }
    fn prune(&self, now: Millis) {
        if let Err(e) = self.engine.prune(now) {
            tracing::warn!("retention on the embedded server: {e}");
        }
    }
}

/// One JSON endpoint over HTTP. Follows Apps Script's 302 to a GET.
///
/// A `pcmail serve` cluster (several instances on one PostgreSQL) has
/// several addresses for one server: `urls` in order of preference. A
/// request that cannot reach one (connection refused, reset, timed out,
/// HTML from a balancer) goes to the next; the one that answered is used
/// from then on, and the first is tried again after `return_after`, so a
/// PC comes back to its preferred instance once it is up. Every request is
/// idempotent by its ids, so one sent twice (answer lost, then retried
/// elsewhere) is applied once. All addresses share the one pinned
/// certificate: every instance serves the same one.
pub struct Http {
    client: reqwest::Client,
    /// Drives each request on the thread that makes it: a runtime with no
    /// thread of its own. (reqwest's blocking client kept a thread per
    /// client and handed it every request and the caller every answer: two
    /// wake-ups of another thread per request, a quarter of an idle-to-busy
    /// daemon's CPU.) Shut down without waiting when dropped, so a client
    /// dropped on an async runtime's thread does not panic.
    rt: Option<tokio::runtime::Runtime>,
    urls: Vec<String>,
    /// Each of `urls` parsed once (a request parsed its address every time,
    /// international-domain rules included); none for one that does not
    /// parse, which each request then reports.
    parsed: Vec<Option<reqwest::Url>>,
    /// Index into `urls` of the address that last answered.
    current: std::sync::atomic::AtomicUsize,
    /// When a request last moved off the first address.
    moved_at: std::sync::Mutex<Option<std::time::Instant>>,
    return_after: Duration,
    /// The admin secret (the old shared token), on a PC that has it. A PC
    /// enrolled with a join code has none: its credential is enough.
    token: Option<String>,
    pc: String,
    long_poll: bool,
    /// This installation's credential, once it has one (never logged).
    cred: std::sync::RwLock<Option<String>>,
    /// Reads the credential again (from the keyring): after `pcmail token
    /// rotate` in another process, a running daemon's first `not_enrolled`
    /// picks the new one up and retries once.
    reload_cred: Option<Box<dyn Fn() -> Option<String> + Send + Sync>>,
    /// The pinned certificate fingerprint, and where the verifier leaves the
    /// fingerprint of a certificate it refused.
    pin: Pin,
    trust: Trust,
}

/// How long a PC stays on a later address before trying the first again.
pub const DEFAULT_RETURN_AFTER: Duration = Duration::from_secs(60);

fn client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        // pcmail retries what it may itself (`CLOSED_BEFORE_ANSWER_PAUSES`,
        // the outbox); reqwest's own retries (of HTTP/2 refusals, which an
        // HTTP/1.1 server never sends) copied every request in case.
        .retry(reqwest::retry::never().max_retries_per_request(0))
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(60))
        // Dropped before `pcmail serve` closes it (60 s idle), so no request goes out on a closing connection.
        .pool_idle_timeout(Duration::from_secs(50))
        .redirect(reqwest::redirect::Policy::limited(MAX_REDIRECTS))
        .user_agent(concat!("pcmail/", env!("CARGO_PKG_VERSION")))
}

/// reqwest's client, made inside the runtime it will run on.
fn build_in(rt: &tokio::runtime::Runtime, builder: reqwest::ClientBuilder) -> Result<reqwest::Client, CallError> {
    let _in = rt.enter();
    builder.build().map_err(|e| CallError::Transient(e.to_string()))
}

/// Which certificates an HTTP client trusts (chosen by [`Http::connect`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// Plain http:// addresses only: none (building it reads no certificate folder).
    Nothing,
    /// An https:// address without a pin: the system's authorities.
    SystemAuthorities,
    /// The one certificate pinned at enrolment.
    Pinned,
}

/// The pinned fingerprint, and where the verifier leaves the fingerprint of
/// a certificate it refused.
type Pin = Option<(String, std::sync::Arc<std::sync::Mutex<Option<String>>>)>;

/// reqwest's client for `urls`: with `pin`, trusting that certificate only
/// (and following no redirect); for https:// without one, the system's
/// authorities; for plain http:// only, a TLS that trusts nothing (no
/// certificate folder read: a redirect to https:// is refused as untrusted).
fn tls_client(
    rt: &tokio::runtime::Runtime,
    urls: &[String],
    pin: Option<&str>,
) -> Result<(reqwest::Client, Pin, Trust), CallError> {
    if let Some(fingerprint) = pin {
        let (tls, refused) = crate::pin::client_config(fingerprint);
        // Pinned means pinned: no redirect may lead anywhere else.
        let pinned = client_builder().redirect(reqwest::redirect::Policy::none()).tls_backend_preconfigured(tls);
        return Ok((build_in(rt, pinned)?, Some((fingerprint.to_string(), refused)), Trust::Pinned));
    }
    if urls.iter().any(|u| !u.starts_with("http://")) {
        return Ok((build_in(rt, client_builder())?, None, Trust::SystemAuthorities));
    }
    let plain = client_builder()
        .tls_backend_preconfigured(crate::pin::trusting_nothing())
        .redirect(reqwest::redirect::Policy::custom(plain_redirect));
    Ok((build_in(rt, plain)?, None, Trust::Nothing))
}

/// Where a client of plain http:// addresses follows a redirect: to
/// http:// only (as many as any client follows); to https:// it says which
/// address to configure instead of failing on a certificate it cannot check.
fn plain_redirect(attempt: reqwest::redirect::Attempt) -> reqwest::redirect::Action {
    if attempt.url().scheme() != "http" {
        let to = attempt.url().to_string();
        attempt.error(format!("the server redirects to {to}: give pcmail that address (`pcmail init --server {to}`)"))
    } else if attempt.previous().len() >= MAX_REDIRECTS {
        attempt.error("too many redirects")
    } else {
        attempt.follow()
    }
}

/// POST → 302 → GET is how Apps Script serves a result.
const MAX_REDIRECTS: usize = 5;

impl Http {
    pub fn new(url: &str, token: Option<&str>, pc: &str, long_poll: bool) -> Result<Http, CallError> {
        Http::connect(&[url.to_string()], None, token, pc, long_poll)
    }

    /// A client of `urls` (the first, then the others in turn), trusting
    /// only the certificate with the SHA-256 fingerprint `pin` when one is
    /// given (a `pcmail serve` on TLS, pinned at enrolment; every URL
    /// https://). Its TLS is built once, for what the addresses need: the
    /// system's authorities (read from every file of the system's
    /// certificate folder, a millisecond or more) only when an https://
    /// address has no pin; none for plain http://.
    pub fn connect(
        urls: &[String],
        pin: Option<&str>,
        token: Option<&str>,
        pc: &str,
        long_poll: bool,
    ) -> Result<Http, CallError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| CallError::Transient(format!("cannot start the HTTP client: {e}")))?;
        let mut all: Vec<String> = vec![];
        for u in urls {
            if !all.contains(u) {
                all.push(u.clone());
            }
        }
        let (client, pin, trust) = tls_client(&rt, &all, pin)?;
        Ok(Http {
            client,
            trust,
            rt: Some(rt),
            parsed: all.iter().map(|u| reqwest::Url::parse(u).ok()).collect(),
            urls: all,
            current: std::sync::atomic::AtomicUsize::new(0),
            moved_at: std::sync::Mutex::new(None),
            return_after: DEFAULT_RETURN_AFTER,
            token: token.map(str::to_string),
            pc: pc.to_string(),
            long_poll,
            cred: std::sync::RwLock::new(None),
            reload_cred: None,
            pin,
        })
    }

    /// How long a PC stays on a later address before trying the first again
    /// ([`DEFAULT_RETURN_AFTER`] unless told).
    pub fn with_return_after(mut self, return_after: Duration) -> Http {
        self.return_after = return_after;
        self
    }

    /// Which certificates this client trusts.
    pub fn trust(&self) -> Trust {
        self.trust
    }

    /// The address that answered last (the first until one did not).
    pub fn current_url(&self) -> &str {
        &self.urls[self.current.load(std::sync::atomic::Ordering::Relaxed).min(self.urls.len() - 1)]
    }

    pub fn with_credential_reload(mut self, reload: Box<dyn Fn() -> Option<String> + Send + Sync>) -> Http {
        self.reload_cred = Some(reload);
        self
    }

    /// One request, over each address in turn until one answers.
    fn call_any(&self, op: &Op) -> Result<Value, CallError> {
        use std::sync::atomic::Ordering;
        let n = self.urls.len();
        let mut start = self.current.load(Ordering::Relaxed).min(n - 1);
        if start != 0 {
            let mut moved = self.moved_at.lock().unwrap_or_else(|e| e.into_inner());
            if moved.is_none_or(|t| t.elapsed() >= self.return_after) {
                // Time to see whether the first address is back.
                start = 0;
                *moved = None;
            }
        }
        let mut last = None;
        for k in 0..n {
            let i = (start + k) % n;
            match self.call_once(op, i) {
                Err(CallError::Transient(why)) => {
                    if n > 1 {
                        tracing::info!(url = %self.urls[i], %why, "server address unreachable; trying the next");
                    }
                    last = Some(CallError::Transient(format!("{}: {why}", self.urls[i])));
                }
                other => {
                    if self.current.swap(i, Ordering::Relaxed) != i && i != 0 {
                        *self.moved_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::time::Instant::now());
                    }
                    return other;
                }
            }
        }
        Err(last.unwrap_or_else(|| CallError::Transient("no server address".into())))
    }

    fn call_once(&self, op: &Op, i: usize) -> Result<Value, CallError> {
        // A request may wait for seconds: never while this thread holds the
        // PC store's transaction (the hook would wait for its lock).
        debug_assert!(!pcmail_store::in_batch(), "a {} request inside a store transaction", op.name());
        let url = &self.urls[i];
        let body = {
            let cred = self.cred.read().unwrap_or_else(|e| e.into_inner());
            request_bytes_with_cred(&self.pc, self.token.as_deref(), cred.as_deref(), op)
        };

        let wait = match op {
            Op::Poll(p) => Duration::from_millis(p.wait_ms.max(0) as u64),
            _ => Duration::ZERO,
        };
        let rt = self.rt.as_ref().expect("the runtime lives as long as the client");
        // The request and its answer's body in one pass of the runtime
        // (made inside it: the request's timer needs it).
        let exchange = || {
            rt.block_on(async {
                let request = match &self.parsed[i] {
                    Some(parsed) => self.client.post(parsed.clone()),
                    None => self.client.post(url.as_str()),
                };
                let resp = request
                    .timeout(Duration::from_secs(30) + wait)
                    .header(reqwest::header::CONTENT_TYPE, JSON_TYPE)
                    .body(body.clone())
                    .send()
                    .await
                    .map_err(Exchange::Send)?;
                let status = resp.status();
                let answer = resp.bytes().await.map_err(Exchange::Body)?;
                Ok((status, answer))
            })
        };
        let mut done = exchange();
        let mut pauses = CLOSED_BEFORE_ANSWER_PAUSES.iter();
        let (status, answer) = loop {
            let e = match done {
                Ok(answered) => break answered,
                Err(Exchange::Body(e)) => return Err(CallError::Transient(describe_reqwest(&e))),
                Err(Exchange::Send(e)) => e,
            };
            // Once per failure: it takes the certificate a pin refused.
            match (self.send_error(&e, url), pauses.next()) {
                (CallError::Transient(_), Some(pause)) if !e.is_timeout() => {
                    std::thread::sleep(*pause);
                    done = exchange();
                }
                (err, _) => return Err(err),
            }
        };
        if !status.is_success() {
            return Err(CallError::Transient(format!("HTTP {status} from the server")));
        }
        interpret(&answer)
    }
}

/// The type of every request's body.
const JSON_TYPE: reqwest::header::HeaderValue = reqwest::header::HeaderValue::from_static("application/json");

/// Where one request failed: before its answer began, or while its body came.
enum Exchange {
    Send(reqwest::Error),
    Body(reqwest::Error),
}

impl Drop for Http {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// The pauses before each further try of a request whose connection closed
/// before any answer. A server shedding connections it cannot yet tell from
/// a flood's closes a new one at once, and refuses new ones for a moment
/// while the shed ones close; a kept-alive connection may have been timed
/// out just as it was reused. Every op is idempotent by its id, so trying
/// again on a fresh connection is safe: once at once, once more after a
/// pause that outlasts a burst. A time-out or a trust failure is not tried
/// again.
pub const CLOSED_BEFORE_ANSWER_PAUSES: [Duration; 2] = [Duration::ZERO, Duration::from_millis(100)];

impl Http {
    fn send_error(&self, e: &reqwest::Error, url: &str) -> CallError {
        if let Some((pinned, refused)) = &self.pin {
            if let Some(seen) = refused.lock().unwrap_or_else(|e| e.into_inner()).take() {
                return CallError::Untrusted(crate::pin::mismatch_message(url, pinned, &seen));
            }
        }
        if let Some(why) = tls_refusal(e) {
            return CallError::Untrusted(crate::pin::untrusted_message(url, &why));
        }
        CallError::Transient(describe_reqwest(e))
    }
}

/// The TLS reason a request failed for, when it is the server's certificate
/// (or the handshake) that was refused rather than the network: that is a
/// question of trust, never "connection refused".
fn tls_refusal(e: &reqwest::Error) -> Option<String> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(t) = err.downcast_ref::<rustls::Error>() {
            return Some(describe_rustls(t));
        }
        // io::Error's source() skips the error it wraps, and the TLS layer
        // wraps its error in an io::Error inside another: look inside each.
        let mut io = err.downcast_ref::<std::io::Error>();
        while let Some(inner) = io.and_then(|e| e.get_ref()) {
            if let Some(t) = inner.downcast_ref::<rustls::Error>() {
                return Some(describe_rustls(t));
            }
            io = inner.downcast_ref::<std::io::Error>();
        }
        cur = err.source();
    }
    None
}

fn describe_rustls(e: &rustls::Error) -> String {
    match e {
        rustls::Error::InvalidCertificate(c) => match c {
            rustls::CertificateError::UnknownIssuer => {
                "its certificate is not signed by an authority this PC trusts (a self-signed certificate?)".into()
            }
            rustls::CertificateError::Expired | rustls::CertificateError::ExpiredContext { .. } => {
                "its certificate has expired".into()
            }
            rustls::CertificateError::NotValidForName | rustls::CertificateError::NotValidForNameContext { .. } => {
                "its certificate is for another name".into()
            }
            other => format!("its certificate was refused ({other:?})"),
        },
        other => format!("the TLS handshake failed ({other})"),
    }
}

impl Transport for Http {
    fn call(&self, op: &Op) -> Result<Value, CallError> {
        match self.call_any(op) {
            Err(CallError::Server(p)) if p.code == ErrorCode::NotEnrolled => {
                let fresh = self.reload_cred.as_ref().and_then(|r| r());
                let current = self.cred.read().unwrap_or_else(|e| e.into_inner()).clone();
                match fresh {
                    Some(c) if Some(&c) != current.as_ref() => {
                        self.set_credential(Some(c));
                        self.call_any(op)
                    }
                    _ => Err(CallError::Server(p)),
                }
            }
            other => other,
        }
    }
    fn long_poll(&self) -> bool {
        self.long_poll
    }
    fn describe(&self) -> String {
        self.current_url().to_string()
    }
    fn quota_bound(&self) -> bool {
        // The HTTP transport without long-poll is Apps Script.
        !self.long_poll
    }
    fn binds_labels(&self) -> bool {
        true
    }
    fn set_credential(&self, cred: Option<String>) {
        *self.cred.write().unwrap_or_else(|e| e.into_inner()) = cred;
    }
}

fn describe_reqwest(e: &reqwest::Error) -> String {
    // Never includes the body (the token travels in it).
    if e.is_timeout() {
        "timed out".into()
    } else if e.is_connect() {
        "connection refused or no route".into()
    } else {
        let mut s = e.to_string();
        if let Some(src) = std::error::Error::source(e) {
            s.push_str(&format!(" ({src})"));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_and_garbage_are_transient() {
        for body in [&b"<!DOCTYPE html><html>Service unavailable</html>"[..], b"", b"null", b"{\"x\":1}"] {
            assert!(matches!(interpret(body), Err(CallError::Transient(_))), "{:?}", String::from_utf8_lossy(body));
        }
        let e = interpret(br#"{"ok":false,"error":{"code":"unknown_recipient","message":"m","candidates":["a"]}}"#)
            .unwrap_err();
        match e {
            CallError::Server(p) => {
                assert_eq!(p.code, ErrorCode::UnknownRecipient);
                assert_eq!(p.candidates, Some(vec!["a".to_string()]));
            }
            other => panic!("{other:?}"),
        }
        assert!(interpret(br#"{"ok":true,"now":1}"#).is_ok());
    }

    /// A client of plain http:// addresses trusts no certificate, so making
    /// one reads no certificate folder (half of a `pcmail send` process's
    /// CPU against a plain server went there); an https:// address, also a
    /// failover one, gets the system's authorities, and a pin only the pin.
    #[test]
    fn a_client_trusts_what_its_addresses_need_and_no_more() {
        let plain = "http://127.0.0.1:1/api".to_string();
        let tls = "https://127.0.0.1:2/api".to_string();
        let connect = |urls: &[String], pin: Option<&str>| Http::connect(urls, pin, None, "pc", false).unwrap().trust();
        assert_eq!(connect(std::slice::from_ref(&plain), None), Trust::Nothing);
        assert_eq!(connect(&[plain.clone(), plain.clone()], None), Trust::Nothing);
        assert_eq!(connect(std::slice::from_ref(&tls), None), Trust::SystemAuthorities);
        assert_eq!(connect(&[plain.clone(), tls.clone()], None), Trust::SystemAuthorities);
        assert_eq!(connect(std::slice::from_ref(&tls), Some(&"ab".repeat(32))), Trust::Pinned);
    }

    /// No request goes out while this thread is inside a transaction of the
    /// PC store (the hook would wait for its lock for the request's whole
    /// time): debug builds, which the suite runs, stop there.
    #[cfg(debug_assertions)]
    #[test]
    fn a_request_inside_a_store_transaction_is_a_bug_the_suite_catches() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = pcmail_store::Store::open(&dir.path().join("s.db")).unwrap();
        let t = Http::new("http://127.0.0.1:1/api", None, "pc", false).unwrap();
        let caught = pcmail_store::batch_in(
            &mut store,
            |s| s,
            |_| {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| t.call(&Op::Hello)));
                Ok::<_, pcmail_store::StoreError>(r.is_err())
            },
        )
        .unwrap();
        assert!(caught, "a request inside a batch went out");
        assert!(!pcmail_store::in_batch());
        // Outside one it goes out (and finds nobody there).
        assert!(matches!(t.call(&Op::Hello), Err(CallError::Transient(_))));
    }

    /// A plain http:// server that redirects to https:// is told as such
    /// (the address to configure), not as a certificate nobody can check.
    #[test]
    fn a_redirect_from_plain_http_to_https_names_the_address_to_use() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/api", listener.local_addr().unwrap());
        // Every connection gets the redirect (the client tries again after
        // a failure it may have caused by reusing a closed connection).
        std::thread::spawn(move || {
            for mut conn in listener.incoming().map_while(Result::ok) {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf);
                let answer = "HTTP/1.1 308 Permanent Redirect\r\nlocation: https://pcmail.example/api\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
                let _ = conn.write_all(answer.as_bytes());
            }
        });
        let t = Http::new(&url, None, "pc", false).unwrap();
        match t.call(&Op::Hello) {
            Err(CallError::Transient(why)) => {
                assert!(why.contains("redirects to https://pcmail.example/api"), "{why}")
            }
            other => panic!("{other:?}"),
        }
    }
}
