//! `pcmail mcp` figures (docs/benchmarks.md, "MCP server"): the time from
//! starting the process to the `tools/list` answer, and a `send` tool call in
//! a running session, on the embedded default; then, against a real `pcmail
//! serve` on loopback, a `send` call against one `hello` round trip through
//! the same kind of client (alternated, in one run), and the `inbox` tool's
//! answer as summaries against whole mails. Speaks newline-delimited JSON-RPC
//! to the real binary over pipes, as an MCP client does.
//!
//! ```text
//! cargo build --release -p pcmail-cli
//! cargo run --release -p pcmail-mcp --example mcp_bench [starts] [sends]
//! ```
//!
//! With `PCMAIL_BENCH_GATE=1` it exits 1 when a `send` call's p50 is more
//! than `SEND_HELLO_GATE` `hello` round trips (the suite's ratio gate).

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

fn pcmail() -> PathBuf {
    // target/<profile>/examples/mcp_bench → target/<profile>/pcmail
    let exe = std::env::current_exe().unwrap();
    let p = exe.parent().unwrap().parent().unwrap().join("pcmail");
    assert!(p.exists(), "{} missing: cargo build --release -p pcmail-cli first", p.display());
    p
}

struct Session {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Session {
    fn start(exe: &Path, home: &Path) -> Session {
        Session::start_with(exe, home, &[])
    }

    fn start_with(exe: &Path, home: &Path, env: &[(&str, &str)]) -> Session {
        let mut child = Command::new(exe)
            .arg("mcp")
            .env("PCMAIL_HOME", home)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start pcmail mcp");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Session { child, stdin, stdout, next_id: 1 }
    }

    fn notify(&mut self, method: &str) {
        writeln!(self.stdin, "{}", json!({"jsonrpc": "2.0", "method": method})).unwrap();
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        writeln!(self.stdin, "{}", json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).unwrap();
        self.stdin.flush().unwrap();
        loop {
            let mut line = String::new();
            assert!(self.stdout.read_line(&mut line).unwrap() > 0, "pcmail mcp closed stdout");
            let v: Value = serde_json::from_str(&line).expect("only JSON-RPC on stdout");
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    fn initialize(&mut self) {
        let info = json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "mcp_bench", "version": "0"}});
        self.request("initialize", info);
        self.notify("notifications/initialized");
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn summary(name: &str, mut xs: Vec<f64>, target: Option<f64>) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let (p50, p99) = (pct(&xs, 0.5), pct(&xs, 0.99));
    let verdict =
        target.map(|t| format!("  target ≤ {t} ms: {}", if p50 <= t { "met" } else { "MISSED" })).unwrap_or_default();
    println!(
        "{name:<44} n={:<4} p50 {p50:7.2} ms  p99 {p99:7.2} ms  max {:7.2} ms{verdict}",
        xs.len(),
        xs[xs.len() - 1]
    );
    p50
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let starts: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(50);
    let sends: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(300);
    let exe = pcmail();
    let home = tempfile::tempdir().unwrap();
    let run = |a: &[&str]| {
        let st = Command::new(&exe).args(a).env("PCMAIL_HOME", home.path()).stdout(Stdio::null()).status().unwrap();
        assert!(st.success(), "pcmail {a:?}");
    };
    run(&["init", "--label", "bench"]);
    run(&["sync"]);
    println!("pcmail mcp on the embedded default ({})", exe.display());

    // Process start → initialize → tools/list answered.
    let mut to_list = vec![];
    for _ in 0..starts {
        let t = Instant::now();
        let mut s = Session::start(&exe, home.path());
        s.initialize();
        let tools = s.request("tools/list", json!({}));
        to_list.push(ms(t.elapsed()));
        assert!(tools["tools"].as_array().is_some_and(|t| !t.is_empty()), "{tools}");
    }
    summary("start → tools/list answered", to_list, Some(50.0));

    // `send` tool calls in one running session (the first call also asks `hello`).
    let mut s = Session::start(&exe, home.path());
    s.initialize();
    let call = json!({"name": "send", "arguments": {"to": "bench", "body": "bench mail"}});
    let t = Instant::now();
    let first = s.request("tools/call", call.clone());
    let first_ms = ms(t.elapsed());
    assert_eq!(first["isError"], false, "{first}");
    let mut per_call = vec![];
    for _ in 0..sends {
        let t = Instant::now();
        let r = s.request("tools/call", call.clone());
        per_call.push(ms(t.elapsed()));
        assert_eq!(r["structuredContent"]["queued"], false, "{r}");
    }
    println!("{:<44} {first_ms:.2} ms", "first send call (with hello)");
    let mcp_p50 = summary("send tool call", per_call, Some(10.0));

    // The same work in-process, for the breakdown: opening the PC's client
    // (config, embedded engine, store) and the send itself.
    let paths = pcmail_local::config::Paths::at(home.path());
    let (mut open, mut send) = (vec![], vec![]);
    let args = pcmail_api::SendArgs { to: "bench".into(), body: "bench mail".into(), ..Default::default() };
    for _ in 0..sends.min(100) {
        let t = Instant::now();
        let mut c = pcmail_client::Client::open(paths.clone()).unwrap();
        open.push(ms(t.elapsed()));
        let t = Instant::now();
        pcmail_api::send(&mut c, &args).unwrap();
        send.push(ms(t.elapsed()));
    }
    summary("in-process Client::open", open, None);
    summary("in-process pcmail_api::send", send, None);

    // The same send as a CLI process, for scale (one run, same store).
    let mut cli = vec![];
    for _ in 0..starts.min(30) {
        let t = Instant::now();
        run(&["send", "bench", "--body", "bench mail"]);
        cli.push(ms(t.elapsed()));
    }
    let cli_p50 = summary("`pcmail send` process (for scale)", cli, None);
    println!("send through a running MCP session vs a CLI process: {:.2}× the time", mcp_p50 / cli_p50);

    if !against_a_server(&exe, sends) {
        std::process::exit(1);
    }
}

/// The ratio the suite's gate holds: a `send` tool call in a running session
/// costs at most this many `hello` round trips to the same server. The
/// target is 2x; a call is 2.4-2.9x on 2026-12-07 (the send's own work,
/// in-process, is already about 1.9x a `hello`: the PC store's commit of the
/// outbox row before the request and the server's write; then the JSON-RPC
/// framing and the hand-off to a blocking thread), so the gate guards that
/// level with a margin.
const SEND_HELLO_GATE: f64 = 3.5;
const SEND_HELLO_TARGET: f64 = 2.0;

/// A `pcmail serve` on loopback, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_server(exe: &Path, dir: &Path, token: &str) -> (Server, String) {
    let mut child = Command::new(exe)
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(dir.join("serve.db"))
        .env("PCMAIL_TOKEN", token)
        .env("PCMAIL_HOME", dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start pcmail serve");
    let url = pcmail_testkit::listening_url(&mut child, Duration::from_secs(30), |_| {}).expect("pcmail serve exited");
    (Server(child), url)
}

/// Against a real server: `send` calls alternated with in-process `hello`
/// round trips through a client of the same PC, then `inbox` both ways.
/// Returns whether the gate held.
fn against_a_server(exe: &Path, sends: usize) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let token = "mcp-bench-token";
    // The PC's credential in the environment (CI and containers have no keyring).
    let credential = format!("{:064x}", std::process::id() as u128 * 0x9e37_79b9_7f4a_7c15);
    std::env::set_var("PCMAIL_CREDENTIAL", &credential);
    let (_server, url) = start_server(exe, dir.path(), token);
    let home = dir.path().join("pc");
    let pc = |a: &[&str]| {
        let st = Command::new(exe)
            .args(a)
            .env("PCMAIL_HOME", &home)
            .env("PCMAIL_TOKEN", token)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "pcmail {a:?}");
    };
    pc(&["init", "--label", "bench", "--server", &url]);
    pc(&["sync"]);
    println!("\nagainst pcmail serve on loopback ({url}):");
    let home_str = home.to_string_lossy().into_owned();
    let mut s = Session::start_with(exe, &home, &[("PCMAIL_TOKEN", token), ("PCMAIL_HOME", &home_str)]);
    s.initialize();
    let body = "a mail of some length, as agents write them: ".repeat(12);
    let call = json!({"name": "send", "arguments": {"to": "bench", "body": body}});
    let first = s.request("tools/call", call.clone());
    assert_eq!(first["isError"], false, "{first}");
    let mut client = pcmail_client::Client::open(pcmail_local::config::Paths::at(&home)).unwrap();
    pcmail_api::features::hello(&client).unwrap();
    let args = pcmail_api::SendArgs { to: "bench".into(), body: body.clone(), ..Default::default() };
    let (mut send, mut hello, mut direct, mut ping) = (vec![], vec![], vec![], vec![]);
    for _ in 0..sends {
        let t = Instant::now();
        let r = s.request("tools/call", call.clone());
        send.push(ms(t.elapsed()));
        assert_eq!(r["structuredContent"]["queued"], false, "{r}");
        let t = Instant::now();
        pcmail_api::features::hello(&client).unwrap();
        hello.push(ms(t.elapsed()));
        let t = Instant::now();
        pcmail_api::send(&mut client, &args).unwrap();
        direct.push(ms(t.elapsed()));
        let t = Instant::now();
        s.request("ping", json!({}));
        ping.push(ms(t.elapsed()));
    }
    let send_p50 = summary("send tool call", send, None);
    let hello_p50 = summary("hello round trip (in-process client)", hello, None);
    summary("in-process pcmail_api::send (the call's work)", direct, None);
    summary("MCP ping (the JSON-RPC round trip alone)", ping, None);
    let ratio = send_p50 / hello_p50;
    println!("send call / hello round trip, p50s: {ratio:.2}x (target <= {SEND_HELLO_TARGET}x)");

    pc(&["sync"]);
    let inbox = |s: &mut Session, full: bool| {
        let t = Instant::now();
        let r = s.request("tools/call", json!({"name": "inbox", "arguments": {"full": full}}));
        let took = ms(t.elapsed());
        assert_eq!(r["isError"], false, "{r}");
        let chars = r["content"][0]["text"].as_str().map(|t| t.chars().count()).unwrap_or(0);
        (chars, took, r["structuredContent"]["mails"].as_array().map(Vec::len).unwrap_or(0))
    };
    let (summary_chars, summary_ms, n) = inbox(&mut s, false);
    let (full_chars, full_ms, n_full) = inbox(&mut s, true);
    assert_eq!(n, n_full, "the two shapes list the same mail");
    println!(
        "inbox tool, {n} mails: summaries {summary_chars} characters in {summary_ms:.2} ms, whole mails {full_chars} characters in {full_ms:.2} ms ({:.1}x smaller)",
        full_chars as f64 / summary_chars.max(1) as f64
    );
    if std::env::var_os("PCMAIL_BENCH_GATE").is_some() {
        let ok = ratio <= SEND_HELLO_GATE;
        println!(
            "gate: send call / hello round trip {ratio:.2}x (limit {SEND_HELLO_GATE}x): {}",
            if ok { "ok" } else { "FAILED" }
        );
        return ok;
    }
    true
}
