//! `pcmail mcp` figures (docs/benchmarks.md, "MCP server"): the time from
//! starting the process to the `tools/list` answer, and a `send` tool call in
//! a running session, on the embedded default. Speaks newline-delimited
//! JSON-RPC to the real binary over pipes, as an MCP client does.
//!
//! ```text
//! cargo build --release -p pcmail-cli
//! cargo run --release -p pcmail-mcp --example mcp_bench [starts] [sends]
//! ```

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
        let mut child = Command::new(exe)
            .arg("mcp")
            .env("PCMAIL_HOME", home)
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
        assert_eq!(tools["tools"].as_array().map(Vec::len), Some(14));
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
}
