//! A stranger cannot take `pcmail serve` down: a real `pcmail serve` process
//! whose open-file limit is 1,024 (soft and hard, set before it starts), and
//! an attacker on another loopback address (127.0.0.2) that keeps 2,000
//! half-open connections coming (a request head that never ends; over TLS a
//! handshake that never ends), reconnecting whatever the server sheds. All
//! the while, PCs enrolled with their own credentials on 127.0.0.1 send and
//! poll (on kept-alive and on fresh connections) and `/health` is asked:
//! every answer comes, p99 under 1 s.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use serde_json::{json, Value};
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

const ATTACKERS: usize = 2_000;
const SERVER_FDS: u64 = 1_024;

struct Serve {
    process: Process,
    url: String,
    _dir: tempfile::TempDir,
}

fn serve_with_fd_limit(args: &[&str]) -> Serve {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = serve_command(dir.path());
    cmd.args(["--listen", "127.0.0.1:0", "--db"])
        .arg(dir.path().join("serve.db"))
        .args(args)
        .env("RUST_LOG", std::env::var("PCMAIL_SLOWLORIS_LOG").unwrap_or("warn".into()))
        .stderr(std::env::var_os("PCMAIL_SLOWLORIS_LOG").map_or(Stdio::null(), |_| Stdio::inherit()));
    // SAFETY: only setrlimit between fork and exec (async-signal-safe).
    unsafe {
        cmd.pre_exec(|| {
            let rl = libc::rlimit { rlim_cur: SERVER_FDS, rlim_max: SERVER_FDS };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &rl) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let process = Process::listening(&mut cmd, Duration::from_secs(60));
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", process.child.id())).unwrap();
    let open_files = limits.lines().find(|l| l.starts_with("Max open files")).unwrap().to_string();
    let nums: Vec<&str> = open_files.split_whitespace().filter(|w| w.parse::<u64>().is_ok()).collect();
    assert_eq!(nums, ["1024", "1024"], "the server runs with 1,024 file descriptors: {open_files}");
    Serve { url: process.url.clone(), process, _dir: dir }
}

/// The test process itself holds the attacker's 2,000 sockets.
fn raise_own_fd_limit() {
    let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl);
        rl.rlim_cur = rl.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &rl);
    }
    assert!(rl.rlim_cur >= 3 * ATTACKERS as u64, "this test needs an open-file hard limit of 6,000 or more");
}

fn host_port(url: &str) -> std::net::SocketAddr {
    let rest = url.split("://").nth(1).unwrap();
    rest.split('/').next().unwrap().parse().unwrap()
}

/// Keeps `ATTACKERS` connections from 127.0.0.2 coming: each sends what
/// `opening` holds (a head that never ends, or nothing at all for TLS),
/// trickles a byte a second to look alive, and reconnects one second after
/// the server sheds it, on a runtime of its own (so the PCs' timings are
/// the server's, not this process's). Returns the runtime, the connections
/// opened so far and a counter of those open now.
fn attack(
    addr: std::net::SocketAddr,
    opening: &'static [u8],
    stop: Arc<AtomicBool>,
) -> (tokio::runtime::Runtime, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let (opened, open) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    for _ in 0..ATTACKERS {
        let (opened, open, stop) = (opened.clone(), open.clone(), stop.clone());
        rt.spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let s = tokio::net::TcpSocket::new_v4().unwrap();
                s.bind("127.0.0.2:0".parse().unwrap()).unwrap();
                let Ok(Ok(mut c)) = tokio::time::timeout(Duration::from_secs(2), s.connect(addr)).await else {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                };
                opened.fetch_add(1, Ordering::Relaxed);
                open.fetch_add(1, Ordering::Relaxed);
                let mut alive = c.write_all(opening).await.is_ok();
                while alive && !stop.load(Ordering::Relaxed) {
                    let mut probe = [0u8; 1];
                    // A read that ends (0 bytes or an error) means the server closed it.
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {
                            alive = opening.is_empty() || c.write_all(b"X-a: b\r\n").await.is_ok();
                        }
                        r = tokio::io::AsyncReadExt::read(&mut c, &mut probe) => alive = matches!(r, Ok(n) if n > 0),
                    }
                }
                open.fetch_sub(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
    }
    (rt, opened, open)
}

fn client(tls: bool) -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(5)).danger_accept_invalid_certs(tls).build().unwrap()
}

/// One request as a PC makes it. Until a connection has carried a credential
/// the server cannot tell it from the flood's, so under a flood a PC's brand
/// new connection may be shed before its first request (about 1 in 60 here
/// under 1,000 handshakes a second), or refused while shed ones close. The
/// PC then tries again with pcmail's own HTTP transport's pauses on a
/// connection closed before any answer (requests are idempotent by id), and
/// the time of every try counts toward the p99.
async fn call(c: &reqwest::Client, url: &str, body: &Value) -> Result<Value, String> {
    answer(|| c.post(url).json(body).send()).await
}

/// Sends what `request` makes, trying again on a connection closed before
/// any answer as `call` says, and reads the answer as JSON.
async fn answer<F, R>(request: F) -> Result<Value, String>
where
    F: Fn() -> R,
    R: std::future::Future<Output = reqwest::Result<reqwest::Response>>,
{
    let mut sent = request().await;
    let mut tries = 1;
    for pause in pcmail_client::transport::CLOSED_BEFORE_ANSWER_PAUSES {
        match &sent {
            Err(e) if e.is_connect() || e.is_request() => {
                tokio::time::sleep(pause).await;
                sent = request().await;
                tries += 1;
            }
            _ => break,
        }
    }
    let r = sent.map_err(|e| format!("{e} (try {tries})"))?;
    r.json().await.map_err(|e| format!("{e}"))
}

async fn enrol(c: &reqwest::Client, url: &str, label: &str, n: u8) -> String {
    let code = format!("{n:032x}");
    let cred = format!("{n:02x}").repeat(32);
    let admin = json!({"v": 1, "op": "roster.enrol", "pc": "pc-admin", "token": TOKEN,
                       "args": {"label": label, "hostname": label.to_uppercase(), "code": code}});
    assert_eq!(call(c, url, &admin).await.unwrap()["ok"], json!(true));
    let join = json!({"v": 1, "op": "join", "pc": label, "cred": cred, "args": {"code": code, "hostname": label.to_uppercase()}});
    assert_eq!(call(c, url, &join).await.unwrap()["ok"], json!(true));
    cred
}

/// Under attack: sends from pc-a and polls of pc-b, half on one kept-alive
/// connection and half on a fresh connection each, and /health; every mail
/// sent is polled. Returns the latencies (a failure counts as 5 s) and failures.
async fn pcs_under_attack(url: &str, tls: bool, cred_a: &str, cred_b: &str) -> (Vec<Duration>, Vec<String>) {
    let kept = client(tls);
    let health = url.replace("/api", "/health");
    let (mut lat, mut failures, mut sent, mut got) = (Vec::new(), Vec::new(), 0, 0);
    for i in 0..60u32 {
        let fresh = client(tls);
        let c = if i % 2 == 0 { &kept } else { &fresh };
        let t = Instant::now();
        let r = if i % 3 == 0 {
            let id = format!("mail-1767225600000-{i:08x}");
            let send = json!({"v": 1, "op": "send", "pc": "pc-a", "cred": cred_a,
                              "args": {"mail": {"id": id, "to": "pc-b", "body": format!("under attack {i}")}}});
            let r = call(c, url, &send).await;
            sent += usize::from(r.as_ref().is_ok_and(|v| v["ok"] == json!(true)));
            r
        } else if i % 5 == 1 {
            answer(|| c.get(&health).send()).await
        } else {
            let poll = json!({"v": 1, "op": "poll", "pc": "pc-b", "cred": cred_b, "args": {}});
            let r = call(c, url, &poll).await;
            if let Ok(v) = &r {
                let ids: Vec<Value> =
                    v["mail"].as_array().cloned().unwrap_or_default().iter().map(|m| m["id"].clone()).collect();
                got += ids.len();
                if !ids.is_empty() {
                    let confirm = json!({"v": 1, "op": "poll", "pc": "pc-b", "cred": cred_b, "args": {"confirm": ids}});
                    let _ = call(c, url, &confirm).await;
                }
            }
            r
        };
        let took = t.elapsed();
        match r {
            Ok(v) if v["ok"] == json!(true) => lat.push(took),
            other => {
                failures.push(format!("request {i} after {took:?}: {other:?}"));
                lat.push(Duration::from_secs(5));
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // What was sent is all there for pc-b.
    let poll = json!({"v": 1, "op": "poll", "pc": "pc-b", "cred": cred_b, "args": {}});
    if let Ok(v) = call(&kept, url, &poll).await {
        got += v["mail"].as_array().map_or(0, Vec::len);
    }
    if got != sent {
        failures.push(format!("{sent} mails sent, {got} polled"));
    }
    (lat, failures)
}

fn p99(mut lat: Vec<Duration>) -> Duration {
    lat.sort();
    lat[(lat.len() * 99).div_ceil(100) - 1]
}

async fn run(args: &[&str], tls: bool, opening: &'static [u8]) {
    raise_own_fd_limit();
    let mut s = serve_with_fd_limit(args);
    let c = client(tls);
    let (cred_a, cred_b) = (enrol(&c, &s.url, "pc-a", 1).await, enrol(&c, &s.url, "pc-b", 2).await);
    let stop = Arc::new(AtomicBool::new(false));
    let (attacker, opened, open) = attack(host_port(&s.url), opening, stop.clone());
    // Until all 2,000 have connected once (the server takes them and sheds what it must).
    let t = Instant::now();
    while opened.load(Ordering::Relaxed) < ATTACKERS && t.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let held_at_start = open.load(Ordering::Relaxed);
    let (lat, failures) = pcs_under_attack(&s.url, tls, &cred_a, &cred_b).await;
    let opened_total = opened.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    attacker.shutdown_background();
    let p = p99(lat.clone());
    let p50 = {
        let mut l = lat.clone();
        l.sort();
        l[l.len() / 2]
    };
    eprintln!(
        "slowloris{}: {opened_total} attacker connections opened ({held_at_start} open on the attacker's side when the PCs began); \
         PCs: {} requests, p50 {p50:?}, p99 {p:?}, {} failed",
        if tls { " (TLS)" } else { "" },
        lat.len(),
        failures.len()
    );
    assert!(opened_total >= ATTACKERS, "the attacker never got its 2,000 connections going ({opened_total})");
    assert!(failures.is_empty(), "PCs were not served under attack:\n{}", failures.join("\n"));
    assert!(p < Duration::from_secs(1), "p99 {p:?} under attack");
    assert!(s.process.child.try_wait().unwrap().is_none(), "the server died");
}

/// The per-peer cap: 127.0.0.2 holds at most its 256; 127.0.0.1's PCs are untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_half_open_connections_from_one_address_leave_pcs_served() {
    run(&[], false, b"POST /api HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n").await;
}

/// The total cap: one address may hold any number (per-peer cap lifted), so
/// the attacker fills the whole table, and every PC connection sheds the
/// oldest stranger; over TLS, with handshakes that never finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_unfinished_tls_handshakes_fill_the_table_and_pcs_are_still_served() {
    run(&["--tls", "--max-connections-per-peer", "100000"], true, b"").await;
}
