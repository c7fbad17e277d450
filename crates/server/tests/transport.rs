//! `pcmail serve`'s connection layer against raw sockets: each time bound
//! (request head, body, idle keep-alive) cuts what it must and spares an
//! open long poll; the per-peer and total caps shed strangers, never a PC;
//! the real peer comes from a PROXY header or a forwarded header only when
//! the TCP peer is a trusted proxy (the audit log of failed joins shows
//! which address the server believed).

mod common;

use pcmail_server::listen::Limits;
use pcmail_server::peer::{parse_trusted, PeerMode, PeerSource};
use pcmail_testkit::Loopback;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

const TOKEN: &str = "t0k-transport";
const CODE: &str = "0123456789abcdef0123456789abcd01";

/// The server with `pc-b` enrolled, and the address the tests connect to.
struct Server {
    addr: SocketAddr,
    serving: Loopback,
}

impl Server {
    async fn start(limits: Limits, peers: PeerSource) -> Server {
        let proxy_protocol = peers.mode == PeerMode::ProxyProtocol;
        let serving = common::serve_with(TOKEN, |opts, _| {
            opts.limits = limits;
            opts.peers = peers;
        })
        .await;
        let s = Server { addr: serving.addr, serving };
        let enrol = admin("roster.enrol", json!({"label": "pc-b", "hostname": "B", "code": CODE}));
        let mut c = s.connect_from("127.0.0.1").await;
        if proxy_protocol {
            c.write_all(b"PROXY UNKNOWN\r\n").await.unwrap();
        }
        let r = post(&mut c, &enrol, "").await.unwrap();
        assert_eq!(r["ok"], json!(true), "{r}");
        s
    }

    async fn stop(self) {
        self.serving.stop().await;
    }

    async fn connect_from(&self, from: &str) -> TcpStream {
        connect_at(self.addr, from).await
    }

    async fn call_from(&self, from: &str, body: &Value, extra_headers: &str) -> Value {
        call_at(self.addr, from, body, extra_headers).await
    }

    /// The peer the audit log names for the newest failed join.
    async fn last_refusal_by(&self) -> String {
        let r = self.call_from("127.0.0.1", &admin("roster.log", json!({"limit": 1})), "").await;
        let e = &r["entries"][0];
        assert!(matches!(e["action"].as_str(), Some("join-failed" | "join-throttled")), "{r}");
        e["by"].as_str().unwrap().to_string()
    }
}

/// A connection from `from` (any 127.0.0.0/8 address is this machine).
async fn connect_at(addr: SocketAddr, from: &str) -> TcpStream {
    let s = TcpSocket::new_v4().unwrap();
    s.bind(format!("{from}:0").parse().unwrap()).unwrap();
    s.connect(addr).await.unwrap()
}

async fn call_at(addr: SocketAddr, from: &str, body: &Value, extra_headers: &str) -> Value {
    let mut c = connect_at(addr, from).await;
    post(&mut c, body, extra_headers).await.expect("an answer")
}

fn admin(op: &str, args: Value) -> Value {
    json!({"v": 1, "op": op, "pc": "pc-admin", "token": TOKEN, "args": args})
}

fn wrong_join(label: &str, n: u32) -> Value {
    json!({"v": 1, "op": "join", "pc": label, "cred": "e".repeat(64),
           "args": {"code": format!("{n:032x}"), "hostname": "H"}})
}

fn request_bytes(body: &Value, extra_headers: &str) -> Vec<u8> {
    let body = body.to_string();
    format!(
        "POST /api HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra_headers}\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// One request on a kept-alive connection; None when the server closed it instead.
async fn post(c: &mut TcpStream, body: &Value, extra_headers: &str) -> Option<Value> {
    c.write_all(&request_bytes(body, extra_headers)).await.ok()?;
    read_response(c).await
}

async fn read_response(c: &mut TcpStream) -> Option<Value> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n =
            tokio::time::timeout(Duration::from_secs(10), c.read(&mut chunk)).await.expect("an answer in 10 s").ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let len: usize =
        head.lines().find_map(|l| l.strip_prefix("content-length:")).map(|v| v.trim().parse().unwrap()).unwrap_or(0);
    while buf.len() < head_end + len {
        let n = c.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    serde_json::from_slice(&buf[head_end..head_end + len]).ok()
}

/// How long until the server closes `c` (reading and dropping what comes); None: still open after `within`.
async fn closed_within(c: &mut TcpStream, within: Duration) -> Option<Duration> {
    let t = Instant::now();
    let mut chunk = [0u8; 1024];
    loop {
        let left = within.checked_sub(t.elapsed())?;
        match tokio::time::timeout(left, c.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Some(t.elapsed()),
            Ok(Ok(_)) => continue,
            Err(_) => return None,
        }
    }
}

fn short() -> Limits {
    Limits {
        header_timeout: Duration::from_millis(400),
        body_timeout: Duration::from_millis(400),
        idle_timeout: Duration::from_millis(400),
        handshake_timeout: Duration::from_millis(400),
        ..Limits::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_head_that_never_ends_is_cut_at_the_header_timeout() {
    let s = Server::start(short(), PeerSource::default()).await;
    // Silent from the start, and a head trickled a header at a time (slowloris).
    let mut silent = s.connect_from("127.0.0.2").await;
    let mut trickle = s.connect_from("127.0.0.2").await;
    trickle.write_all(b"POST /api HTTP/1.1\r\nHost: t\r\n").await.unwrap();
    let feeder = async {
        for i in 0..20 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if trickle.write_all(format!("X-{i}: y\r\n").as_bytes()).await.is_err() {
                break;
            }
        }
    };
    let silent_closed = async { closed_within(&mut silent, Duration::from_secs(3)).await };
    let (_, took) = tokio::join!(feeder, silent_closed);
    let took = took.expect("a silent connection stays open past 3 s (no header timeout)");
    assert!(took >= Duration::from_millis(350), "closed before its time: {took:?}");
    let trickled = closed_within(&mut trickle, Duration::from_secs(1)).await;
    assert!(trickled.is_some(), "a head trickled byte by byte is still open after 3 s");
    // A PC's request after them is answered.
    let r = s.call_from("127.0.0.1", &admin("hello", json!({})), "").await;
    assert_eq!(r["ok"], json!(true));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_stops_coming_is_answered_and_cut_at_the_body_timeout() {
    let s = Server::start(short(), PeerSource::default()).await;
    let mut c = s.connect_from("127.0.0.2").await;
    c.write_all(
        b"POST /api HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"v\":1,",
    )
    .await
    .unwrap();
    let t = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(3), read_response(&mut c))
        .await
        .expect("no answer in 3 s to a body that stopped (no body timeout)")
        .expect("an answer, not a cut");
    assert_eq!(r["error"]["code"], json!("bad_request"), "{r}");
    assert!(r["error"]["message"].as_str().unwrap().contains("did not arrive"), "{r}");
    assert!(t.elapsed() >= Duration::from_millis(350), "answered before its time: {:?}", t.elapsed());
    assert!(closed_within(&mut c, Duration::from_secs(1)).await.is_some(), "the connection is closed after it");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_is_closed_but_an_open_long_poll_is_not_idle() {
    let s = Server::start(short(), PeerSource::default()).await;
    let r = s.call_from("127.0.0.1", &admin("roster.set", json!({"label": "pc-a", "hostname": "A"})), "").await;
    assert_eq!(r["ok"], json!(true), "{r}");
    let mut c = s.connect_from("127.0.0.1").await;
    let hello = admin("hello", json!({}));
    assert_eq!(post(&mut c, &hello, "").await.unwrap()["ok"], json!(true));
    let idle = closed_within(&mut c, Duration::from_secs(3)).await.expect("an idle connection stays open past 3 s");
    assert!(idle >= Duration::from_millis(350), "closed before its time: {idle:?}");
    // A long poll of 1.5 s (past the 0.4 s idle bound) is answered, and the connection serves on.
    let mut c = s.connect_from("127.0.0.1").await;
    let poll = json!({"v": 1, "op": "poll", "pc": "pc-a", "token": TOKEN, "args": {"waitMs": 1500}});
    let t = Instant::now();
    let r = post(&mut c, &poll, "").await.expect("the long poll was cut");
    assert_eq!(r["ok"], json!(true), "{r}");
    assert!(t.elapsed() >= Duration::from_millis(1400), "{:?}", t.elapsed());
    assert_eq!(post(&mut c, &hello, "").await.expect("kept alive after the long poll")["ok"], json!(true));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_holds_at_most_its_share_and_pcs_are_never_shed() {
    let limits = Limits { max_connections: 12, max_connections_per_peer: 5, ..Limits::default() };
    let s = Server::start(limits, PeerSource::default()).await;
    // A PC's kept-alive connection, proven by an authenticated request.
    let mut pc = s.connect_from("127.0.0.1").await;
    assert_eq!(post(&mut pc, &admin("hello", json!({})), "").await.unwrap()["ok"], json!(true));
    let mut strangers = Vec::new();
    for _ in 0..10 {
        strangers.push(s.connect_from("127.0.0.2").await);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut open = 0;
    for (i, c) in strangers.iter_mut().enumerate() {
        let gone = closed_within(c, Duration::from_millis(300)).await.is_some();
        if i < 5 {
            assert!(gone, "stranger {i} (the oldest of 127.0.0.2's) should have been shed");
        } else {
            open += usize::from(!gone);
        }
    }
    assert_eq!(open, 5, "127.0.0.2 keeps its share of 5");
    // The total cap (12): strangers from many addresses shed each other, never the PC.
    let mut crowd = Vec::new();
    for i in 0..20 {
        crowd.push(s.connect_from(&format!("127.0.1.{}", i + 1)).await);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        post(&mut pc, &admin("hello", json!({})), "").await.expect("the PC's connection was shed")["ok"],
        json!(true)
    );
    // A new PC still gets in: it sheds the oldest stranger.
    let r = s.call_from("127.0.0.3", &admin("hello", json!({})), "").await;
    assert_eq!(r["ok"], json!(true));
    s.stop().await;
}

fn proxied(mode: PeerMode, trusted: &str) -> PeerSource {
    PeerSource::new(mode, vec![parse_trusted(trusted).unwrap()]).unwrap()
}

fn proxy_v2(src: [u8; 4], port: u16) -> Vec<u8> {
    let mut v = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    v.extend_from_slice(&[0x21, 0x11, 0, 12]);
    v.extend_from_slice(&src);
    v.extend_from_slice(&[127, 0, 0, 1]);
    v.extend_from_slice(&port.to_be_bytes());
    v.extend_from_slice(&7878u16.to_be_bytes());
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_protocol_is_believed_only_from_a_trusted_proxy() {
    let s = Server::start(Limits::default(), proxied(PeerMode::ProxyProtocol, "127.0.0.1")).await;
    // v1 and v2 from the trusted proxy name the client.
    let mut c = s.connect_from("127.0.0.1").await;
    c.write_all(b"PROXY TCP4 203.0.113.7 127.0.0.1 40000 7878\r\n").await.unwrap();
    assert_eq!(post(&mut c, &wrong_join("pc-b", 2), "").await.unwrap()["error"]["code"], json!("join_code_invalid"));
    assert_eq!(s.last_refusal_by_proxy().await, "203.0.113.7");
    let mut c = s.connect_from("127.0.0.1").await;
    c.write_all(&proxy_v2([198, 51, 100, 9], 4711)).await.unwrap();
    assert_eq!(post(&mut c, &wrong_join("pc-b", 3), "").await.unwrap()["error"]["code"], json!("join_code_invalid"));
    assert_eq!(s.last_refusal_by_proxy().await, "198.51.100.9");
    // From the trusted proxy without the header: closed, not served as the proxy.
    let mut c = s.connect_from("127.0.0.1").await;
    assert!(
        post(&mut c, &admin("hello", json!({})), "").await.is_none(),
        "a trusted proxy's connection without a PROXY header was served"
    );
    // From anyone else a PROXY header is not believed (it is not HTTP either), and plain requests name the TCP peer.
    let mut c = s.connect_from("127.0.0.2").await;
    c.write_all(b"PROXY TCP4 203.0.113.99 127.0.0.1 40000 7878\r\n").await.unwrap();
    let spoofed = post(&mut c, &wrong_join("pc-b", 4), "").await;
    assert!(spoofed.as_ref().is_none_or(|r| r["ok"] != json!(true)), "{spoofed:?}");
    let r = s.call_from("127.0.0.2", &wrong_join("pc-b", 5), "").await;
    assert_eq!(r["error"]["code"], json!("join_code_invalid"));
    assert_eq!(s.last_refusal_by_proxy().await, "127.0.0.2", "an untrusted peer is its own address");
    // The per-peer join limit counts the client the proxy named, not the proxy.
    for i in 0..40u32 {
        let mut c = s.connect_from("127.0.0.1").await;
        c.write_all(b"PROXY TCP4 203.0.113.50 127.0.0.1 40000 7878\r\n").await.unwrap();
        let r = post(&mut c, &wrong_join(&format!("pc-x{i}"), 100 + i), "").await.unwrap();
        let want = if i < 30 { "join_code_invalid" } else { "rate_limited" };
        assert_eq!(r["error"]["code"], json!(want), "attempt {i}: {r}");
    }
    let mut c = s.connect_from("127.0.0.1").await;
    c.write_all(b"PROXY TCP4 203.0.113.51 127.0.0.1 40000 7878\r\n").await.unwrap();
    let r = post(&mut c, &wrong_join("pc-x99", 999), "").await.unwrap();
    assert_eq!(
        r["error"]["code"],
        json!("join_code_invalid"),
        "another client behind the same proxy is not limited: {r}"
    );
    // The right code joins from the limited client all the same.
    let mut c = s.connect_from("127.0.0.1").await;
    c.write_all(b"PROXY TCP4 203.0.113.50 127.0.0.1 40000 7878\r\n").await.unwrap();
    let join =
        json!({"v": 1, "op": "join", "pc": "pc-b", "cred": "b".repeat(64), "args": {"code": CODE, "hostname": "B"}});
    assert_eq!(post(&mut c, &join, "").await.unwrap()["ok"], json!(true));
    s.stop().await;
}

impl Server {
    /// `last_refusal_by` through the trusted proxy (a PROXY server closes its header-less connections).
    async fn last_refusal_by_proxy(&self) -> String {
        let mut c = self.connect_from("127.0.0.1").await;
        c.write_all(b"PROXY UNKNOWN\r\n").await.unwrap();
        let r = post(&mut c, &admin("roster.log", json!({"limit": 1})), "").await.unwrap();
        r["entries"][0]["by"].as_str().unwrap().to_string()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_header_is_believed_only_from_a_trusted_proxy() {
    let s = Server::start(Limits::default(), proxied(PeerMode::XForwardedFor, "127.0.0.1")).await;
    let r = s.call_from("127.0.0.1", &wrong_join("pc-b", 2), "X-Forwarded-For: 203.0.113.9\r\n").await;
    assert_eq!(r["error"]["code"], json!("join_code_invalid"));
    assert_eq!(s.last_refusal_by().await, "203.0.113.9");
    // A client's own header, with the proxy's appended: the nearest untrusted hop.
    let r = s.call_from("127.0.0.1", &wrong_join("pc-b", 3), "X-Forwarded-For: 6.6.6.6, 203.0.113.10\r\n").await;
    assert_eq!(r["error"]["code"], json!("join_code_invalid"));
    assert_eq!(s.last_refusal_by().await, "203.0.113.10");
    // Spoofed by a peer that is not a trusted proxy: ignored.
    let r = s.call_from("127.0.0.2", &wrong_join("pc-b", 4), "X-Forwarded-For: 203.0.113.11\r\n").await;
    assert_eq!(r["error"]["code"], json!("join_code_invalid"));
    assert_eq!(s.last_refusal_by().await, "127.0.0.2");
    s.stop().await;
    let s = Server::start(Limits::default(), proxied(PeerMode::Forwarded, "127.0.0.1")).await;
    s.call_from("127.0.0.1", &wrong_join("pc-b", 2), "Forwarded: for=\"[2001:db8::7]:4711\";proto=https\r\n").await;
    assert_eq!(s.last_refusal_by().await, "2001:db8::7");
    s.call_from("127.0.0.1", &wrong_join("pc-b", 3), "X-Forwarded-For: 203.0.113.12\r\n").await;
    assert_eq!(s.last_refusal_by().await, "127.0.0.1", "only the configured header is read");
    s.stop().await;
    // By default nobody is trusted: the header from loopback itself is ignored.
    let s = Server::start(Limits::default(), PeerSource::default()).await;
    s.call_from(
        "127.0.0.1",
        &wrong_join("pc-b", 2),
        "X-Forwarded-For: 203.0.113.13\r\nForwarded: for=203.0.113.14\r\n",
    )
    .await;
    assert_eq!(s.last_refusal_by().await, "127.0.0.1");
    s.stop().await;
}

/// A real haproxy (Debian's package) in front: TCP mode with `send-proxy`
/// (v1) and `send-proxy-v2`, and HTTP mode with `option forwardfor`. The
/// client connects from 127.0.0.5 (or .6, .7); haproxy reaches the server
/// from 127.0.0.1, which the server trusts: the audit log names the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_real_haproxy_the_client_is_the_peer() {
    let pp = Server::start(Limits::default(), proxied(PeerMode::ProxyProtocol, "127.0.0.1")).await;
    let xff = Server::start(Limits::default(), proxied(PeerMode::XForwardedFor, "127.0.0.1")).await;
    let ports: Vec<u16> = (0..3).map(|_| pcmail_testkit::free_port()).collect();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("haproxy.cfg");
    std::fs::write(
        &cfg,
        format!(
            "global\n  maxconn 200\ndefaults\n  timeout connect 2s\n  timeout client 10s\n  timeout server 10s\n\
             frontend v1\n  mode tcp\n  bind 127.0.0.1:{p0}\n  default_backend v1\n\
             backend v1\n  mode tcp\n  server s {pp} send-proxy\n\
             frontend v2\n  mode tcp\n  bind 127.0.0.1:{p1}\n  default_backend v2\n\
             backend v2\n  mode tcp\n  server s {pp} send-proxy-v2\n\
             frontend web\n  mode http\n  option forwardfor\n  bind 127.0.0.1:{p2}\n  default_backend web\n\
             backend web\n  mode http\n  server s {xff}\n",
            p0 = ports[0],
            p1 = ports[1],
            p2 = ports[2],
            pp = pp.addr,
            xff = xff.addr
        ),
    )
    .unwrap();
    let mut haproxy = std::process::Command::new("haproxy")
        .arg("-db")
        .arg("-f")
        .arg(&cfg)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("haproxy is not installed (scripts/install-deps.sh installs it)");
    let deadline = Instant::now() + Duration::from_secs(10);
    while ports.iter().any(|p| std::net::TcpStream::connect(("127.0.0.1", *p)).is_err()) {
        assert!(Instant::now() < deadline, "haproxy did not start listening");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for (port, from, server) in
        [(ports[0], "127.0.0.5", &pp), (ports[1], "127.0.0.6", &pp), (ports[2], "127.0.0.7", &xff)]
    {
        let front = SocketAddr::from(([127, 0, 0, 1], port));
        let r = call_at(front, from, &wrong_join("pc-b", 7), "").await;
        assert_eq!(r["error"]["code"], json!("join_code_invalid"), "through haproxy port {port}: {r}");
        let by =
            if server.addr == pp.addr { server.last_refusal_by_proxy().await } else { server.last_refusal_by().await };
        assert_eq!(by, from, "through haproxy port {port}");
        // A client's own forwarded header through haproxy does not make it someone else.
        let r = call_at(front, from, &wrong_join("pc-b", 8), "X-Forwarded-For: 203.0.113.66\r\n").await;
        assert_eq!(r["error"]["code"], json!("join_code_invalid"));
        let by =
            if server.addr == pp.addr { server.last_refusal_by_proxy().await } else { server.last_refusal_by().await };
        assert_eq!(by, from, "a spoofed header through haproxy port {port}");
    }
    let _ = haproxy.kill();
    let _ = haproxy.wait();
    pp.stop().await;
    xff.stop().await;
}

/// Over TLS a connection that never finishes its handshake is closed at the
/// handshake timeout (and the closing counts from the TCP accept, not from a
/// request that never comes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_handshake_that_never_finishes_is_cut_at_the_handshake_timeout() {
    let server = common::serve_with(TOKEN, |opts, dir| {
        opts.transport = pcmail_server::tls::ServeTransport::SelfSigned { dir: dir.to_path_buf() };
        opts.limits = Limits { handshake_timeout: Duration::from_millis(400), ..Limits::default() };
    })
    .await;
    let addr = server.addr;
    let mut silent = connect_at(addr, "127.0.0.2").await;
    let mut partial = connect_at(addr, "127.0.0.2").await;
    // The first bytes of a ClientHello record, and no more.
    partial.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01]).await.unwrap();
    let t0 = Instant::now();
    for c in [&mut silent, &mut partial] {
        closed_within(c, Duration::from_secs(3)).await.expect("an unfinished handshake is open after 3 s");
        assert!(t0.elapsed() >= Duration::from_millis(300), "closed before its time: {:?}", t0.elapsed());
    }
    server.stop().await;
}
