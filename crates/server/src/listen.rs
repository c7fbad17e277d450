//! The connection layer of `pcmail serve`: every connection is bounded in
//! time (TLS handshake, request head, request body, idle keep-alive, a
//! response the client does not read) and in number (in total and per peer
//! address), and the server sheds strangers before PCs: a connection that
//! has not yet carried an authenticated request is the first to go when a
//! cap is reached. Out of file descriptors, accept backs off instead of
//! spinning, and the cap is kept below the process's limit with a reserve.

use crate::peer::{self, PeerMode, PeerSource, Prefixed, ProxyHeader};
use axum::Router;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Notify};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

/// Connections held at once, before the file-descriptor limit lowers it.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
/// Connections from one address (a /64 for IPv6). A PC holds one to three
/// (its poller's long poll, the tray, a CLI command): enough for about 80
/// PCs behind one NAT; an office with more raises it.
pub const DEFAULT_MAX_CONNECTIONS_PER_PEER: usize = 256;
/// File descriptors kept free beside the connections: SQLite's database,
/// WAL and shared-memory files (twice, while retention prunes), the
/// webhook's sockets, the runtime's own, stdio, and one to accept a
/// connection at the cap so that the oldest stranger can be shed for it.
pub const FD_RESERVE: u64 = 64;
/// How far past the cap connections may be while shed ones are closing.
const SHED_SLACK: usize = 16;

/// Time and count bounds on connections; `pcmail serve` flags set them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub max_connections: usize,
    pub max_connections_per_peer: usize,
    /// From the connection's start (after TLS) or a request's first byte to its
    /// whole head: a request head is a few hundred bytes.
    pub header_timeout: Duration,
    /// From the head to the whole body (at most the body limit, 256 KiB),
    /// and the bound on a response the client stops reading.
    pub body_timeout: Duration,
    /// A kept-alive connection with no request in flight. An open long poll
    /// is a request in flight, never idle.
    pub idle_timeout: Duration,
    pub handshake_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_peer: DEFAULT_MAX_CONNECTIONS_PER_PEER,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// `10s`, `500ms`, `2m`, or plain seconds (`10`): the one duration parser
/// every pcmail flag uses.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let ms = pcmail_core::duration::parse_ms(s).map_err(|e| format!("{:?}: {e}", s.trim()))?;
    Ok(Duration::from_millis(ms as u64))
}

/// Raises the soft limit on open files to the hard limit (the default soft
/// limit, 1,024 on most Linux systems, is what a slowloris exhausts first).
/// Returns the soft limit in force afterwards; None where there is none.
// `rlim_t` is not u64 on every target.
#[allow(clippy::unnecessary_cast)]
pub fn raise_fd_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit/setrlimit only read and write the struct passed.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
            return None;
        }
        if rl.rlim_cur < rl.rlim_max {
            let mut want = libc::rlimit { rlim_cur: rl.rlim_max, rlim_max: rl.rlim_max };
            // macOS refuses more than OPEN_MAX for an unlimited hard limit.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } != 0 {
                want.rlim_cur = rl.rlim_max.min(10_240);
                if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } != 0 {
                    return Some(rl.rlim_cur as u64);
                }
            }
            return Some(want.rlim_cur as u64);
        }
        Some(rl.rlim_cur as u64)
    }
    #[cfg(not(unix))]
    None
}

/// The soft limit on open files now (None where there is none).
#[allow(clippy::unnecessary_cast)]
pub fn fd_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit only writes the struct passed.
        (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } == 0).then_some(rl.rlim_cur as u64)
    }
    #[cfg(not(unix))]
    None
}

/// The connection cap that fits under the file-descriptor limit with the reserve.
pub fn effective_max_connections(configured: usize, fd_limit: Option<u64>) -> usize {
    let fits = fd_limit.map(|l| l.saturating_sub(FD_RESERVE + SHED_SLACK as u64).max(8)).unwrap_or(u64::MAX);
    configured.min(usize::try_from(fits).unwrap_or(usize::MAX)).max(1)
}

/// Who a request came from, and a handle to mark its connection as one of a PC's.
#[derive(Clone)]
pub(crate) struct ConnInfo {
    /// The TCP peer, or the client a trusted proxy named in its PROXY header.
    pub peer: IpAddr,
    pub handle: ConnHandle,
}

/// Marks a connection as having carried an authenticated request.
#[derive(Clone)]
pub(crate) struct ConnHandle {
    table: Arc<ConnTable>,
    id: u64,
}

impl ConnHandle {
    pub fn prove(&self) {
        self.table.prove(self.id);
    }
}

/// Every open connection: how many, per peer, and which have not yet
/// carried an authenticated request (oldest first: the first to be shed).
pub(crate) struct ConnTable {
    inner: Mutex<Table>,
    max_total: usize,
    max_per_peer: usize,
}

#[derive(Default)]
struct Table {
    next_id: u64,
    total: usize,
    peers: HashMap<IpAddr, PeerConns>,
    /// Unproven connections by id (= age) and the switch that closes each.
    unproven: BTreeMap<u64, Unproven>,
    /// Shed so far (for the log and the tests).
    shed: u64,
}

#[derive(Default)]
struct PeerConns {
    all: usize,
    unproven: BTreeSet<u64>,
}

struct Unproven {
    peer: Option<IpAddr>,
    kill: Arc<Notify>,
}

/// One admitted connection; dropping it frees its place.
pub(crate) struct Slot {
    handle: ConnHandle,
    peer: Option<IpAddr>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.handle.table.release(self.handle.id, self.peer);
    }
}

impl ConnTable {
    pub fn new(max_total: usize, max_per_peer: usize) -> Arc<ConnTable> {
        Arc::new(ConnTable { inner: Mutex::new(Table::default()), max_total, max_per_peer: max_per_peer.max(1) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admits a connection from `peer` (None: a trusted proxy's, counted in
    /// total only), shedding the oldest unproven connection in the scope
    /// that is full. None: full of proven connections; refuse this one.
    pub fn admit(self: &Arc<Self>, peer: Option<IpAddr>) -> Option<(Slot, Arc<Notify>)> {
        let mut t = self.lock();
        if t.total >= self.max_total && (t.total >= self.max_total + SHED_SLACK || !t.shed_oldest(None)) {
            return None;
        }
        if let Some(p) = peer {
            let held = t.peers.get(&p).map_or(0, |c| c.all);
            if held >= self.max_per_peer && (held >= self.max_per_peer + SHED_SLACK || !t.shed_oldest(Some(p))) {
                return None;
            }
        }
        t.next_id += 1;
        let id = t.next_id;
        t.total += 1;
        let kill = Arc::new(Notify::new());
        if let Some(p) = peer {
            let c = t.peers.entry(p).or_default();
            c.all += 1;
            c.unproven.insert(id);
        }
        t.unproven.insert(id, Unproven { peer, kill: kill.clone() });
        drop(t);
        Some((Slot { handle: ConnHandle { table: self.clone(), id }, peer }, kill))
    }

    /// Counts a connection under the peer its proxy named (it was counted
    /// in total only until the PROXY header came). False: that peer is full.
    fn assign_peer(&self, slot: &mut Slot, peer: IpAddr) -> bool {
        let mut guard = self.lock();
        let t = &mut *guard;
        let held = t.peers.get(&peer).map_or(0, |c| c.all);
        if held >= self.max_per_peer && (held >= self.max_per_peer + SHED_SLACK || !t.shed_oldest(Some(peer))) {
            return false;
        }
        let id = slot.handle.id;
        let c = t.peers.entry(peer).or_default();
        c.all += 1;
        if let Some(u) = t.unproven.get_mut(&id) {
            u.peer = Some(peer);
            t.peers.entry(peer).or_default().unproven.insert(id);
        }
        slot.peer = Some(peer);
        true
    }

    fn prove(&self, id: u64) {
        let mut t = self.lock();
        if let Some(u) = t.unproven.remove(&id) {
            if let Some(c) = u.peer.and_then(|p| t.peers.get_mut(&p)) {
                c.unproven.remove(&id);
            }
        }
    }

    fn release(&self, id: u64, peer: Option<IpAddr>) {
        let mut t = self.lock();
        t.total = t.total.saturating_sub(1);
        t.unproven.remove(&id);
        if let Some(p) = peer {
            if let Some(c) = t.peers.get_mut(&p) {
                c.all = c.all.saturating_sub(1);
                c.unproven.remove(&id);
                if c.all == 0 {
                    t.peers.remove(&p);
                }
            }
        }
    }

    /// Out of file descriptors: shed the oldest stranger to free one.
    pub fn shed_any(&self) -> bool {
        self.lock().shed_oldest(None)
    }

    /// (open connections, unproven among them, shed so far).
    pub fn counts(&self) -> (usize, usize, u64) {
        let t = self.lock();
        (t.total, t.unproven.len(), t.shed)
    }
}

impl Table {
    /// Closes the oldest unproven connection (of `peer`, or of anyone). It
    /// stays counted until its task has closed it (see `SHED_SLACK`).
    fn shed_oldest(&mut self, peer: Option<IpAddr>) -> bool {
        let id = match peer {
            Some(p) => self.peers.get(&p).and_then(|c| c.unproven.first().copied()),
            None => self.unproven.keys().next().copied(),
        };
        let Some(id) = id else { return false };
        if let Some(u) = self.unproven.remove(&id) {
            if let Some(c) = u.peer.and_then(|p| self.peers.get_mut(&p)) {
                c.unproven.remove(&id);
            }
            u.kill.notify_one();
            self.shed += 1;
        }
        true
    }
}

/// The listen queue asked of the OS (Linux clamps it to `net.core.somaxconn`,
/// 4,096 by default). A flood of connections that the accept loop sheds
/// keeps this queue busy; once it is full the kernel drops the next SYN,
/// and a PC's connection then waits for its retransmission, a second later.
/// Tokio's default of 1,024 overflowed on a loaded machine under the
/// slowloris test's flood.
pub const LISTEN_BACKLOG: u32 = 4096;

/// Binds `addr` with [`LISTEN_BACKLOG`] (and `SO_REUSEADDR` on Unix, as
/// Tokio's own `bind` does: a restarted server binds while old connections
/// linger in TIME_WAIT).
pub fn bind(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// What every connection task needs.
pub(crate) struct Serving {
    pub router: Router,
    pub limits: Limits,
    pub peers: PeerSource,
    pub tls: Option<TlsAcceptor>,
}

/// Accepts until `shutdown`, then lets open requests finish (long polls
/// answer at once: the router's own switch) for at most 10 s.
pub(crate) async fn serve_connections(
    listener: TcpListener,
    serving: Arc<Serving>,
    table: Arc<ConnTable>,
    shutdown: impl Future<Output = ()>,
) {
    let (stop_tx, stop_rx) = watch::channel(false);
    let (alive_tx, mut alive_rx) = mpsc::channel::<()>(1);
    let mut backoff = Duration::from_millis(5);
    let mut last_warned: Option<Instant> = None;
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            r = listener.accept() => r,
        };
        match accepted {
            Ok((tcp, addr)) => {
                backoff = Duration::from_millis(5);
                let tcp_peer = peer::canonical(addr.ip());
                // A trusted proxy carries many clients: its connections count
                // in total, and under the client its PROXY header names.
                let scope = (!serving.peers.is_trusted(tcp_peer)).then(|| peer::peer_key(tcp_peer));
                let Some((slot, kill)) = table.admit(scope) else {
                    tracing::debug!(peer = %tcp_peer, "connection refused: at the cap with no stranger to shed");
                    continue;
                };
                let _ = tcp.set_nodelay(true);
                tokio::spawn(connection(tcp, tcp_peer, serving.clone(), slot, kill, stop_rx.clone(), alive_tx.clone()));
            }
            Err(e) => {
                // A connection that died in the backlog is its own problem: go on.
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionAborted
                        | std::io::ErrorKind::ConnectionReset
                        | std::io::ErrorKind::Interrupted
                ) {
                    continue;
                }
                // Out of file descriptors (EMFILE, ENFILE) or memory: shed a
                // stranger to free one and wait a little, growing, so a full
                // table never turns into a busy loop on a listener that stays readable.
                let shed = table.shed_any();
                if last_warned.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
                    let (open, unproven, _) = table.counts();
                    tracing::warn!(error = %e, open, unproven, shed, "accept failed; backing off");
                    last_warned = Some(Instant::now());
                }
                tokio::select! {
                    _ = &mut shutdown => break,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_millis(500));
            }
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(alive_tx);
    let _ = tokio::time::timeout(Duration::from_secs(10), alive_rx.recv()).await;
}

/// One connection from accept to close: its PROXY header (from a trusted
/// proxy), its TLS handshake, then HTTP/1.1. Shed at any point by `kill`.
async fn connection(
    tcp: TcpStream,
    tcp_peer: IpAddr,
    serving: Arc<Serving>,
    mut slot: Slot,
    kill: Arc<Notify>,
    stop: watch::Receiver<bool>,
    _alive: mpsc::Sender<()>,
) {
    let table = slot.handle.table.clone();
    let mut stop_early = stop.clone();
    let limits = &serving.limits;
    let run = async {
        let mut tcp = tcp;
        let (prefix, peer) = if serving.peers.mode == PeerMode::ProxyProtocol && serving.peers.is_trusted(tcp_peer) {
            match tokio::time::timeout(limits.header_timeout, peer::read_proxy_header(&mut tcp)).await {
                Ok(Ok((ProxyHeader::Peer(client), rest))) => {
                    let client = peer::canonical(client.ip());
                    if !table.assign_peer(&mut slot, peer::peer_key(client)) {
                        tracing::debug!(peer = %client, "connection refused: this peer is at its cap");
                        return;
                    }
                    (rest, client)
                }
                // The proxy's own connection (a health check): its own address stands.
                Ok(Ok((ProxyHeader::Local, rest))) => (rest, tcp_peer),
                Ok(Err(e)) => {
                    tracing::info!(proxy = %tcp_peer, error = %e, "closed a connection from a trusted proxy");
                    return;
                }
                Err(_) => return,
            }
        } else {
            (Vec::new(), tcp_peer)
        };
        let io = Prefixed::new(tcp, prefix);
        let info = ConnInfo { peer, handle: slot.handle.clone() };
        match &serving.tls {
            Some(acceptor) => {
                let handshake = tokio::select! {
                    r = tokio::time::timeout(limits.handshake_timeout, acceptor.accept(io)) => r,
                    // Shutting down before the connection reached HTTP: nothing to finish.
                    _ = stop_early.wait_for(|s| *s) => return,
                };
                match handshake {
                    Ok(Ok(tls)) => serve_http(tls, info, &serving, stop.clone()).await,
                    // A PC that pinned another certificate ends up here (it refuses ours).
                    Ok(Err(e)) => tracing::info!(%peer, error = %e, "TLS handshake failed"),
                    Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                }
            }
            None => serve_http(io, info, &serving, stop.clone()).await,
        }
    };
    tokio::select! {
        _ = run => {}
        _ = kill.notified() => tracing::debug!(peer = %tcp_peer, "shed an unproven connection"),
    }
}

/// HTTP/1.1 on one connection, with the time bounds of `Limits` kept by a
/// watchdog that reads what the connection is doing.
async fn serve_http<S>(io: S, info: ConnInfo, serving: &Serving, mut stop: watch::Receiver<bool>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let peer = info.peer;
    let state = Arc::new(ConnState::new());
    let io = hyper_util::rt::TokioIo::new(Tracked { inner: io, state: state.clone() });
    let router = serving.router.clone();
    let st = state.clone();
    let service = hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
        let guard = st.begin_request();
        req.extensions_mut().insert(info.clone());
        let router = router.clone();
        async move {
            let resp = tower::ServiceExt::oneshot(router, req.map(axum::body::Body::new)).await;
            drop(guard);
            resp
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.header_read_timeout(None).max_buf_size(64 * 1024).keep_alive(true);
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    let limits = &serving.limits;
    let mut shutting_down = *stop.borrow();
    if shutting_down {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        let deadline = state.deadline(limits);
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(%peer, error = %e, "connection ended");
                }
                return;
            }
            _ = sleep_until(deadline) => {
                if state.deadline(limits).is_some_and(|d| d <= Instant::now()) {
                    tracing::debug!(%peer, what = state.what(), "connection timed out");
                    return;
                }
            }
            _ = state.changed.notified() => {}
            _ = stop.changed(), if !shutting_down => {
                shutting_down = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// What a connection is doing, as the watchdog needs it.
struct ConnState {
    phase: Mutex<Phase>,
    /// Woken when the deadline may have moved earlier (a request ended, a write blocked).
    changed: Notify,
}

struct Phase {
    in_flight: u32,
    served: u64,
    /// The connection's start, or when its last request ended.
    since: Instant,
    /// The first byte of a request head that has not been handed over yet.
    head_since: Option<Instant>,
    /// A write the client is not reading.
    write_blocked_since: Option<Instant>,
}

impl ConnState {
    fn new() -> ConnState {
        ConnState {
            phase: Mutex::new(Phase {
                in_flight: 0,
                served: 0,
                since: Instant::now(),
                head_since: None,
                write_blocked_since: None,
            }),
            changed: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Phase> {
        self.phase.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn begin_request(self: &Arc<Self>) -> InFlight {
        let mut p = self.lock();
        p.in_flight += 1;
        p.served += 1;
        p.head_since = None;
        InFlight(self.clone())
    }

    /// When the connection is to be closed if nothing changes; None: a
    /// request is in flight (its handler bounds the body and the long poll
    /// its wait).
    fn deadline(&self, l: &Limits) -> Option<Instant> {
        let p = self.lock();
        if let Some(w) = p.write_blocked_since {
            return Some(w + l.body_timeout);
        }
        if p.in_flight > 0 {
            return None;
        }
        if p.served == 0 {
            return Some(p.since + l.header_timeout);
        }
        match p.head_since {
            Some(h) => Some(h + l.header_timeout),
            None => Some(p.since + l.idle_timeout),
        }
    }

    fn what(&self) -> &'static str {
        let p = self.lock();
        match (p.write_blocked_since, p.in_flight, p.served, p.head_since) {
            (Some(_), ..) => "response not read",
            (None, 0, 0, _) => "no request head",
            (None, 0, _, Some(_)) => "request head too slow",
            (None, 0, _, None) => "idle",
            _ => "busy",
        }
    }
}

struct InFlight(Arc<ConnState>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut p = self.0.lock();
        p.in_flight = p.in_flight.saturating_sub(1);
        if p.in_flight == 0 {
            p.since = Instant::now();
        }
        drop(p);
        self.0.changed.notify_one();
    }
}

/// The connection's stream, telling its state when a request head starts
/// and when a write blocks.
struct Tracked<S> {
    inner: S,
    state: Arc<ConnState>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            let mut p = self.state.lock();
            if p.in_flight == 0 && p.head_since.is_none() {
                p.head_since = Some(Instant::now());
            }
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> Tracked<S> {
    fn note_write<T>(&self, r: &Poll<T>) {
        let mut p = self.state.lock();
        match r {
            Poll::Pending if p.write_blocked_since.is_none() => {
                p.write_blocked_since = Some(Instant::now());
                drop(p);
                self.state.changed.notify_one();
            }
            Poll::Ready(_) => p.write_blocked_since = None,
            Poll::Pending => {}
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.note_write(&r);
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.note_write(&r);
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.note_write(&r);
        r
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    /// The listening socket's queue is ours, not Tokio's default of 1,024:
    /// `ss` shows a listener's queue length as its Send-Q.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_listener_asks_for_the_long_queue() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let listener = rt.block_on(async { bind("127.0.0.1:0".parse().unwrap()).unwrap() });
        let port = listener.local_addr().unwrap().port();
        let out = std::process::Command::new("ss")
            .args(["-Hltn", &format!("sport = :{port}")])
            .output()
            .expect("ss (iproute2) lists the listener");
        let line = String::from_utf8(out.stdout).unwrap();
        let send_q: u32 = line.split_whitespace().nth(2).and_then(|q| q.parse().ok()).expect(&line);
        let somaxconn: u32 = std::fs::read_to_string("/proc/sys/net/core/somaxconn").unwrap().trim().parse().unwrap();
        assert_eq!(send_q, LISTEN_BACKLOG.min(somaxconn), "{line}");
        assert!(send_q > 1024 || somaxconn <= 1024, "longer than Tokio's default: {line}");
    }

    #[test]
    fn the_cap_sheds_the_oldest_stranger_and_never_a_pc() {
        let t = ConnTable::new(3, 100);
        let (a, ka) = t.admit(ip("192.0.2.1")).unwrap();
        let (b, kb) = t.admit(ip("192.0.2.2")).unwrap();
        a.handle.prove();
        let (_c, _kc) = t.admit(ip("192.0.2.3")).unwrap();
        // Full: the next sheds b (the oldest unproven), never a (proven).
        let (_d, _kd) = t.admit(ip("192.0.2.4")).unwrap();
        assert!(futures_ready(&kb), "the oldest stranger was told to close");
        assert!(!futures_ready(&ka), "a proven connection is never shed");
        drop(b);
        assert_eq!(t.counts().0, 3);
        // Only proven connections left: a new one is refused, not a PC dropped.
        let t = ConnTable::new(1, 100);
        let (p, _) = t.admit(ip("192.0.2.1")).unwrap();
        p.handle.prove();
        assert!(t.admit(ip("192.0.2.9")).is_none());
    }

    #[test]
    fn one_peer_sheds_its_own_strangers_not_others() {
        let t = ConnTable::new(100, 2);
        let (_a, ka) = t.admit(ip("192.0.2.1")).unwrap();
        let (_other, kother) = t.admit(ip("192.0.2.7")).unwrap();
        let (_b, _kb) = t.admit(ip("192.0.2.1")).unwrap();
        let (_c, _kc) = t.admit(ip("192.0.2.1")).unwrap();
        assert!(futures_ready(&ka), "that peer's oldest stranger goes");
        assert!(!futures_ready(&kother), "another peer's connection stays, though it is older");
        // A trusted proxy's connection is counted in total only.
        for _ in 0..10 {
            t.admit(None).unwrap();
        }
    }

    #[test]
    fn the_cap_stays_below_the_fd_limit() {
        assert_eq!(effective_max_connections(4096, Some(1024)), 1024 - 64 - 16);
        assert_eq!(effective_max_connections(100, Some(1_048_576)), 100);
        assert_eq!(effective_max_connections(4096, None), 4096);
        assert!(effective_max_connections(4096, Some(10)) >= 1);
    }

    #[test]
    fn durations_parse_as_the_flags_take_them() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("-1s").is_err());
        // One parser for every pcmail flag: hours are a duration too.
        assert_eq!(parse_duration("10h"), Ok(Duration::from_secs(36_000)));
        assert!(parse_duration("10x").is_err());
    }

    fn futures_ready(n: &Notify) -> bool {
        let f = n.notified();
        tokio::pin!(f);
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        f.as_mut().poll(&mut cx).is_ready()
    }
}
