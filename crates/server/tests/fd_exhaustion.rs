//! Out of file descriptors: `accept` fails with EMFILE. The server must not
//! spin on a listener that stays readable, and must make room for a PC by
//! shedding a stranger. This file holds one test, so its process (and its
//! lowered open-file limit) is its own under any test runner.
#![cfg(target_os = "linux")]

mod common;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket};

const TOKEN: &str = "t0k-fds";

fn set_soft_fd_limit(n: u64) {
    let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl);
        rl.rlim_cur = n;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &rl), 0);
    }
}

/// CPU time (user + system) of this process so far, read through `stat`, the
/// already open /proc/self/stat: opening it while the process is out of
/// descriptors would fail.
fn cpu(stat: &mut std::fs::File) -> Duration {
    use std::io::{Read, Seek};
    stat.rewind().unwrap();
    let mut text = String::new();
    stat.read_to_string(&mut text).unwrap();
    let stat = text;
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_millis(ticks * 1000 / hz)
}

async fn hello(addr: std::net::SocketAddr) -> Option<Value> {
    let s = TcpSocket::new_v4().ok()?;
    let mut c = s.connect(addr).await.ok()?;
    let body = json!({"v": 1, "op": "hello", "pc": "pc-admin", "token": TOKEN, "args": {}}).to_string();
    let req =
        format!("POST /api HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}", body.len());
    c.write_all(req.as_bytes()).await.ok()?;
    let mut out = Vec::new();
    c.read_to_end(&mut out).await.ok()?;
    let text = String::from_utf8_lossy(&out);
    serde_json::from_str(text.split("\r\n\r\n").nth(1)?).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_file_descriptors_the_server_backs_off_and_serves_a_pc() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    // 256 descriptors for this whole process: the server's cap is 176 (256 less the
    // reserve), but the strangers' own sockets below share the same 256.
    set_soft_fd_limit(256);
    let server = common::serve_on(listener, TOKEN);
    let addr = server.addr;
    let mut stat = std::fs::File::open("/proc/self/stat").unwrap();
    assert_eq!(hello(addr).await.expect("served before the flood")["ok"], json!(true));
    // Strangers connect until this process has no descriptor left: the server's
    // accept then fails with EMFILE for the connections still in its backlog.
    let mut strangers = Vec::new();
    loop {
        let Ok(s) = TcpSocket::new_v4() else { break };
        match tokio::time::timeout(Duration::from_secs(1), s.connect(addr)).await {
            Ok(Ok(c)) => strangers.push(c),
            _ => break,
        }
    }
    assert!(strangers.len() > 50, "only {} strangers connected", strangers.len());
    tokio::time::sleep(Duration::from_millis(300)).await;
    // No busy loop: over a second of EMFILE the process uses a fraction of a core.
    let (c0, t0) = (cpu(&mut stat), Instant::now());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let used = (cpu(&mut stat) - c0).as_secs_f64() / t0.elapsed().as_secs_f64();
    eprintln!(
        "{} strangers hold this process's descriptors; {:.0} % of a core used meanwhile",
        strangers.len(),
        used * 100.0
    );
    assert!(used < 0.5, "the process used {:.0} % of a core while out of descriptors", used * 100.0);
    // A PC (one stranger gives its descriptor back for the PC's socket) is served at once.
    drop(strangers.pop());
    let t = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(5), hello(addr)).await.expect("no answer in 5 s");
    assert_eq!(r.expect("the PC was not served")["ok"], json!(true));
    assert!(t.elapsed() < Duration::from_secs(1), "the PC waited {:?}", t.elapsed());
    drop(strangers);
    server.stop().await;
}
