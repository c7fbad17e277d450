//! pcmail benchmarks. `pcmail-bench server`: a real `pcmail serve`-equivalent
//! server in a child process on a pre-seeded database, loaded over loopback
//! HTTP with keep-alive clients from this process. `pcmail-bench jobs`: the
//! job queue (jobs.rs).

mod cluster;
mod gates;
mod jobs;

use anyhow::{bail, Context, Result};
use pcmail_core::{Kind, Mail, State, TimelineEntry};
use pcmail_server::{Engine, EngineConfig, ServeOptions};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

const TOKEN: &str = "bench-token-not-secret";
const PCS: usize = 200;
const T0: i64 = 1_767_225_600_000;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("server") => bench_server(),
        Some("server-pg") => cluster::bench_server_pg(),
        Some("seen") => bench_seen(),
        Some("prune") => bench_prune(),
        Some("jobs") => jobs::bench_jobs(),
        Some("who") => bench_who(),
        Some("serve-child") => {
            let db = args.get(2).context("serve-child DB")?;
            let mut opts = ServeOptions::new(db, TOKEN);
            if pcmail_server::store::pg_url::is_postgres_url(db) {
                opts.postgres = Some(pcmail_server::store::pg_url::PgTarget::parse(db, None)?);
            }
            opts.listen = "127.0.0.1:0".parse()?;
            // The seeded history is dated from T0 (1 January 2026): with the
            // default 90 days the server's first maintenance round would prune
            // it, band by band, while the phases measure polls against it.
            opts.retention_ms = Some(3_650 * 24 * 60 * 60 * 1000);
            // `pcmail serve --threads N`, when the bench says so.
            opts.threads = args.get(3).map(|n| n.parse()).transpose().context("serve-child THREADS")?;
            pcmail_server::serve_blocking(opts)
        }
        _ => bail!("usage: pcmail-bench server | server-pg | seen | prune | jobs | who"),
    }
}

struct Settings {
    threads: usize,
    phase: Duration,
    round_trips: usize,
    /// `server-pg`'s paced phase: polls per second offered in all.
    paced_rate: f64,
}

fn bench_server() -> Result<()> {
    let s = Settings {
        threads: env_num("PCMAIL_BENCH_THREADS", 12),
        phase: Duration::from_secs(env_num("PCMAIL_BENCH_SECS", 8) as u64),
        round_trips: env_num("PCMAIL_BENCH_ROUND_TRIPS", 100),
        paced_rate: 0.0,
    };
    // PCMAIL_BENCH_MAILS: the large history (fewer for a quick run that only shows the bench works).
    let large = env_num("PCMAIL_BENCH_MAILS", 100_000);
    // PCMAIL_BENCH_SHORT: the 1,000-mail history alone (the suite's ratio gate);
    // PCMAIL_BENCH_GATE: fail when a ratio misses its limit.
    let short = std::env::var_os("PCMAIL_BENCH_SHORT").is_some();
    let mut gates = gates::Gates::from_env();
    println!(
        "pcmail-bench server: {PCS} PCs with their own credentials, {} client threads (keep-alive), {:?} per phase",
        s.threads, s.phase
    );
    let mut results = Vec::new();
    let histories: &[usize] = if short { &[1_000] } else { &[1_000, large] };
    for &history in histories {
        let dir = tempfile::tempdir()?;
        let db = dir.path().join("server.db");
        let t = Instant::now();
        seed(&db, history)?;
        println!("\nhistory {history} mails: seeded in {:.1} s", t.elapsed().as_secs_f64());
        let server = ServerChild::start(&db)?;
        let cursors = catch_up(&server.url)?;
        // `hello` on the same server and clients first: the floor a caught-up
        // poll is compared with, server CPU from /proc, in the same run.
        let cpu0 = cluster::cpu_ms(server.pid(), false)?;
        let h = load_across(std::slice::from_ref(&server.url), &s, cursors.clone(), Req::Hello)?;
        let cpu1 = cluster::cpu_ms(server.pid(), false)?;
        let r = poll_load(&server.url, &s, cursors)?;
        let cpu2 = cluster::cpu_ms(server.pid(), false)?;
        let (hello_cpu_us, poll_cpu_us) =
            ((cpu1 - cpu0) * 1000.0 / h.count.max(1) as f64, (cpu2 - cpu1) * 1000.0 / r.count.max(1) as f64);
        println!(
            "  hello: {} requests in {:.1} s = {:.0} req/s; p50 {:.2} ms, p99 {:.2} ms; server CPU {:.0} µs/request",
            h.count,
            h.secs,
            h.rps(),
            h.p(0.50),
            h.p(0.99),
            hello_cpu_us
        );
        println!(
            "  poll: {} requests in {:.1} s = {:.0} req/s; latency p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms; errors {}; server CPU {:.0} µs/request",
            r.count,
            r.secs,
            r.rps(),
            r.p(0.50),
            r.p(0.99),
            r.p(1.0),
            r.errors,
            poll_cpu_us
        );
        println!(
            "  caught-up poll / hello: server CPU {:.2}x (target <= 2x), throughput {:.2}x (target >= 0.5x)",
            poll_cpu_us / hello_cpu_us,
            r.rps() / h.rps()
        );
        let (rss, peak) = cluster::rss_mb(server.pid())?;
        println!(
            "  server RSS after both phases: {rss:.1} MB, peak {peak:.1} MB (target <= 60 MB at 200 PCs / 100k mails)"
        );
        if history == 1_000 {
            gates.at_most("caught-up poll CPU / hello CPU", poll_cpu_us / hello_cpu_us, POLL_HELLO_GATE);
        }
        if history == large {
            let lat = send_to_long_poller(&server.url, &server.url, s.round_trips, 0)?;
            println!(
                "  send → delivered+confirmed at a long-polling PC ({} round trips): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
                lat.len(), pct(&lat, 0.50), pct(&lat, 0.99), pct(&lat, 1.0)
            );
        }
        drop(server);
        results.push((history, r));
    }
    if short {
        return gates.finish();
    }
    let (small, big) = (&results[0].1, &results[1].1);
    println!("\nflatness ({large} vs 1,000 mails of history):");
    println!(
        "  throughput ratio {:.2}x (1k/{large}), p50 ratio {:.2}x, p99 ratio {:.2}x (target within 1.3x)",
        small.rps() / big.rps(),
        big.p(0.5) / small.p(0.5),
        big.p(0.99) / small.p(0.99)
    );
    gates.finish()
}

/// The suite's gate on a caught-up poll's server CPU over `hello`'s: the
/// target itself. With every statement compiled once a poll costs 1.1-1.3x
/// `hello`'s on this 2-core machine (docs/benchmarks.md "Ratio gates"), so
/// the target leaves room for the spread of one run.
const POLL_HELLO_GATE: f64 = 2.0;

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// 200 PCs and `history` mails, almost all in final states, in one transaction.
pub(crate) fn seed(db: &Path, history: usize) -> Result<()> {
    let engine = Engine::open(db, EngineConfig::default())?;
    for i in 0..PCS {
        let label = format!("pc-{i:03}");
        // Each PC claims its label with its own credential, as `init --join` leaves it.
        let r = engine.handle_value(
            &json!({"v":1,"op":"roster.set","pc":label,"cred":cred_of(&label),
                "args":{"label":label,"hostname":format!("HOST-{i:03}"),"claim":true}}),
            T0,
        );
        if r["ok"] != json!(true) {
            bail!("roster.set: {r}");
        }
    }
    let mut mails = Vec::with_capacity(history);
    for i in 0..history {
        let (from, to) = (format!("pc-{:03}", i % PCS), format!("pc-{:03}", (i * 7 + 1) % PCS));
        let at = T0 + i as i64 * 1000;
        let mut timeline = vec![
            TimelineEntry { state: State::New, at, by: from.clone(), note: None },
            TimelineEntry { state: State::Delivered, at: at + 100, by: to.clone(), note: None },
        ];
        // 90 % done, 5 % seen, 5 % delivered: history, nothing for polls to return.
        let state = match i % 20 {
            0 => State::Delivered,
            1 => State::Seen,
            _ => State::Done,
        };
        if state >= State::Seen {
            timeline.push(TimelineEntry { state: State::Seen, at: at + 200, by: format!("{to}/s1"), note: None });
        }
        if state == State::Done {
            timeline.push(TimelineEntry { state: State::Done, at: at + 300, by: to.clone(), note: Some("ack".into()) });
        }
        mails.push(Mail {
            id: format!("mail-{at}-{:08x}", i),
            from,
            to,
            kind: Kind::Note,
            subject: format!("history {i}"),
            body: "x".repeat(200),
            urgent: i % 10 == 0,
            expires_at: None,
            in_reply_to: None,
            auto: false,
            hop: 0,
            created_at: at,
            state,
            broadcast_of: None,
            recipients: None,
            timeline,
        });
    }
    engine.import_mail(&mails)?;
    Ok(())
}

struct ServerChild {
    child: Child,
    url: String,
}

impl ServerChild {
    fn start(db: impl AsRef<std::ffi::OsStr>) -> Result<ServerChild> {
        ServerChild::start_with(db, None)
    }

    /// With `threads`: as `pcmail serve --threads N`.
    fn start_with(db: impl AsRef<std::ffi::OsStr>, threads: Option<usize>) -> Result<ServerChild> {
        let mut child = Command::new(std::env::current_exe()?)
            .arg("serve-child")
            .arg(db)
            .args(threads.map(|n| n.to_string()))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let mut out = BufReader::new(child.stdout.take().context("child stdout")?);
        let url = loop {
            let mut line = String::new();
            if out.read_line(&mut line)? == 0 {
                bail!("the server exited before it listened");
            }
            if let Some(u) = line.trim().strip_prefix("listening on ") {
                break u.to_string();
            }
        };
        Ok(ServerChild { child, url })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).pool_max_idle_per_host(4).build().unwrap()
}

fn call(c: &reqwest::blocking::Client, url: &str, body: &Value) -> Result<Value> {
    Ok(c.post(url).json(body).send()?.json()?)
}

/// A seeded PC's own credential (64 hex characters from its label): the
/// server proves each request by its hash, as for a PC that joined.
pub(crate) fn cred_of(pc: &str) -> String {
    let hex = pcmail_core::hex::lower(pc.as_bytes());
    format!("{hex:c<64}")
}

/// `op` from a seeded PC, proved by its own credential (no shared token).
pub(crate) fn pc_req(pc: &str, op: &str, args: Value) -> Value {
    json!({"v":1,"op":op,"pc":pc,"cred":cred_of(pc),"args":args})
}

fn poll_req(pc: &str, since: i64, extra: Value) -> Value {
    let mut args = json!({"since": since});
    if let (Some(a), Value::Object(e)) = (args.as_object_mut(), extra) {
        a.extend(e);
    }
    pc_req(pc, "poll", args)
}

/// Each PC reads its updates feed to the end once, as a running poller would have.
fn catch_up(url: &str) -> Result<Vec<i64>> {
    let c = client();
    let mut cursors = vec![0; PCS];
    for (i, cur) in cursors.iter_mut().enumerate() {
        loop {
            let r = call(&c, url, &poll_req(&format!("pc-{i:03}"), *cur, json!({})))?;
            anyhow::ensure!(r["ok"] == json!(true), "a seeded PC's poll was refused: {r}");
            *cur = r["cursor"].as_i64().context("cursor")?;
            if r["more"] != json!(true) {
                break;
            }
        }
    }
    Ok(cursors)
}

struct Load {
    count: usize,
    errors: usize,
    secs: f64,
    lat_ms: Vec<f64>,
}

impl Load {
    fn rps(&self) -> f64 {
        self.count as f64 / self.secs
    }
    fn p(&self, q: f64) -> f64 {
        pct(&self.lat_ms, q)
    }
}

fn pct(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let mut v = sorted.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// `threads` clients poll as the 200 PCs (each thread owns some) for one phase.
fn poll_load(url: &str, s: &Settings, cursors: Vec<i64>) -> Result<Load> {
    poll_load_across(&[url.to_string()], s, cursors)
}

/// The same, thread `t` sending to `urls[t % urls.len()]` (several instances).
fn poll_load_across(urls: &[String], s: &Settings, cursors: Vec<i64>) -> Result<Load> {
    load_across(urls, s, cursors, Req::Poll)
}

/// What the load's clients ask.
#[derive(Clone, Copy)]
enum Req {
    /// A caught-up poll (nothing new), as each PC's poller makes it.
    Poll,
    /// `hello`: authentication and an answer, no store work to speak of.
    Hello,
}

fn load_across(urls: &[String], s: &Settings, cursors: Vec<i64>, req: Req) -> Result<Load> {
    load_paced(urls, s, cursors, req, None)
}

/// As [`load_across`], but at `rate` requests per second in all when given
/// (open loop): each thread sends on a fixed schedule, and a request's
/// latency counts from when the schedule said to send it, so a server that
/// falls behind is charged the wait of every request queued behind the slow
/// one (no coordinated omission). Without `rate` each thread sends its next
/// request when the last is answered (closed loop: the server's throughput).
fn load_paced(urls: &[String], s: &Settings, cursors: Vec<i64>, req: Req, rate: Option<f64>) -> Result<Load> {
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let every = rate.map(|r| Duration::from_secs_f64(s.threads as f64 / r));
    let handles: Vec<_> = (0..s.threads)
        .map(|t| {
            let (url, stop) = (urls[t % urls.len()].clone(), stop.clone());
            let mine: Vec<(String, i64)> =
                (t..PCS).step_by(s.threads).map(|i| (format!("pc-{i:03}"), cursors[i])).collect();
            // The threads' schedules interleave rather than send together.
            let mut due = every.map(|e| start + e.mul_f64(t as f64 / s.threads as f64));
            std::thread::spawn(move || {
                let c = client();
                let (mut lat, mut errors) = (Vec::new(), 0);
                let mut mine = mine;
                let mut k = 0;
                while !stop.load(Ordering::Relaxed) {
                    let slot = k % mine.len();
                    let (pc, since) = &mut mine[slot];
                    k += 1;
                    let t0 = match (&mut due, every) {
                        (Some(at), Some(e)) => {
                            let now = Instant::now();
                            if *at > now {
                                std::thread::sleep(*at - now);
                            }
                            let t0 = *at;
                            *at += e;
                            t0
                        }
                        _ => Instant::now(),
                    };
                    let body = match req {
                        Req::Poll => poll_req(pc, *since, json!({})),
                        Req::Hello => pc_req(pc, "hello", json!({})),
                    };
                    match call(&c, &url, &body) {
                        Ok(r) if r["ok"] == json!(true) => {
                            if let Some(c) = r["cursor"].as_i64() {
                                *since = c;
                            }
                            lat.push(t0.elapsed().as_secs_f64() * 1000.0);
                        }
                        _ => errors += 1,
                    }
                }
                (lat, errors)
            })
        })
        .collect();
    std::thread::sleep(s.phase);
    stop.store(true, Ordering::Relaxed);
    let mut load = Load { count: 0, errors: 0, secs: 0.0, lat_ms: Vec::new() };
    for h in handles {
        let (lat, errors) = h.join().map_err(|_| anyhow::anyhow!("client thread panicked"))?;
        load.lat_ms.extend(lat);
        load.errors += errors;
    }
    load.secs = start.elapsed().as_secs_f64();
    load.count = load.lat_ms.len();
    Ok(load)
}

/// A PC long-polls at `poll_url`; another client sends through `send_url`
/// (another instance, or the same); the time until the poller has the mail
/// and has confirmed it. `salt` keeps mail ids apart between runs on one store.
fn send_to_long_poller(poll_url: &str, send_url: &str, n: usize, salt: u32) -> Result<Vec<f64>> {
    let (got_tx, got_rx) = mpsc::channel::<(String, Instant)>();
    let url = send_url;
    let poll_url = poll_url.to_string();
    let poller = std::thread::spawn(move || -> Result<()> {
        let c = client();
        let mut since = 0;
        let mut received = 0;
        while received < n {
            let r = call(&c, &poll_url, &poll_req("pc-000", since, json!({"waitMs": 20_000})))?;
            since = r["cursor"].as_i64().unwrap_or(since);
            let ids: Vec<String> = r["mail"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m["id"].as_str().map(str::to_string))
                .collect();
            if ids.is_empty() {
                continue;
            }
            let c2 = call(&c, &poll_url, &poll_req("pc-000", since, json!({"confirm": ids})))?;
            let at = Instant::now();
            for id in c2["confirmed"].as_array().into_iter().flatten() {
                received += 1;
                got_tx.send((id.as_str().unwrap_or("").to_string(), at))?;
            }
        }
        Ok(())
    });
    let c = client();
    let mut lat = Vec::new();
    for i in 0..n {
        std::thread::sleep(Duration::from_millis(30)); // let the poller's next long-poll start waiting
        let id = format!("mail-{}-{:08x}", T0 + 10_000_000, 0xb000_0000u32 + salt * 0x0010_0000 + i as u32);
        let sent_at = Instant::now();
        let r =
            call(&c, url, &pc_req("pc-001", "send", json!({"mail":{"id":id,"to":"pc-000","body":"latency probe"}})))?;
        if r["ok"] != json!(true) {
            bail!("send failed: {r}");
        }
        let (got, at) = got_rx.recv_timeout(Duration::from_secs(10)).context("poller did not get the mail")?;
        if got != id {
            bail!("poller confirmed {got}, expected {id}");
        }
        lat.push(at.duration_since(sent_at).as_secs_f64() * 1000.0);
    }
    poller.join().map_err(|_| anyhow::anyhow!("poller panicked"))??;
    Ok(lat)
}

/// `pcmail-bench seen`: whole processes as a user runs them. `pcmail serve`,
/// PC B's `pcmail daemon` long-polling, PC A sending; once B has stored a mail,
/// B's hook shows it (a `pcmail hook` process), and the clock runs from the
/// hook's exit until A's `status` says `seen` (asked over loopback every 5 ms).
/// Needs the `pcmail` binary: PCMAIL_BIN, else next to this one.
fn bench_seen() -> Result<()> {
    let rounds = env_num("PCMAIL_BENCH_ROUNDS", 40);
    let pcmail = match std::env::var_os("PCMAIL_BIN") {
        Some(p) => std::path::PathBuf::from(p),
        None => std::env::current_exe()?.with_file_name("pcmail"),
    };
    anyhow::ensure!(pcmail.exists(), "no pcmail binary at {} (set PCMAIL_BIN)", pcmail.display());
    let dir = tempfile::tempdir()?;
    let mut serve = Command::new(&pcmail)
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(dir.path().join("serve.db"))
        .env("PCMAIL_TOKEN", TOKEN)
        .env("PCMAIL_HOME", dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut line = String::new();
    BufReader::new(serve.stdout.take().context("serve stdout")?).read_line(&mut line)?;
    let url = line.trim().strip_prefix("listening on ").context("no listening line")?.to_string();
    let run = seen_rounds(&pcmail, dir.path(), &url, &url, rounds)?;
    let (mut delivered_ms, mut seen_ms) = (run.delivered_ms, run.seen_ms);
    let _ = serve.kill();
    let pct = |v: &mut Vec<f64>, p: f64| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[((v.len() as f64 - 1.0) * p).round() as usize]
    };
    println!("pcmail-bench seen: {rounds} rounds, whole processes on pcmail serve");
    println!(
        "  send (CLI) → delivered at a long-polling daemon: p50 {:.0} ms, p99 {:.0} ms",
        pct(&mut delivered_ms, 0.5),
        pct(&mut delivered_ms, 0.99)
    );
    println!(
        "  hook shows mail → sender's status says seen:    p50 {:.0} ms, p99 {:.0} ms (target p50 < 200, p99 < 1000)",
        pct(&mut seen_ms, 0.5),
        pct(&mut seen_ms, 0.99)
    );
    println!(
        "  PC B's daemon, CPU: {:.2} ms per mail received and its seen mark pushed, above its idle {:.2} ms/s (target <= 1 ms); {:.2} ms per round in all",
        run.daemon_ms_per_mail, run.daemon_idle_ms_per_s, run.daemon_ms_per_round
    );
    println!(
        "  PC B's daemon with nothing arriving: {:.1} wake-ups of its threads per second",
        run.daemon_idle_wakeups_per_s
    );
    // The seen path (hook → daemon's mark → server → sender) against one
    // long-poll round trip (send → the daemon's long poll wakes), both here.
    let mut gates = gates::Gates::from_env();
    gates.at_most("seen p50 / send → delivered p50", pct(&mut seen_ms, 0.5) / pct(&mut delivered_ms, 0.5), SEEN_GATE);
    gates.finish()
}

/// Seen latency over one long-poll round trip, p50s of one run: the limit
/// of the suite's gate. On a quiet machine a delivery takes ~15 ms and the
/// pusher looks at the store every 40 ms, so the ratio is 2.2-2.7x (near 1x
/// under load, where both grow); 4x keeps a margin and still fails a seen
/// that waits for the long poll (hundreds of times).
const SEEN_GATE: f64 = 4.0;

/// The rounds of `seen` on running servers: PC A (sender, `status`) talks
/// to `url_a`, PC B (its daemon and hook) to `url_b`; homes under `dir`.
/// Returns the send → delivered and hook → seen latencies (ms) and what
/// PC B's daemon spent on CPU.
pub(crate) fn seen_rounds(pcmail: &Path, dir: &Path, url_a: &str, url_b: &str, rounds: usize) -> Result<SeenRounds> {
    // Each simulated PC's own credential (its label is bound to it on the server).
    let cred = |home: &Path| if home.ends_with("a") { "a".repeat(64) } else { "b".repeat(64) };
    let run = |home: &Path, args: &[&str]| -> Result<std::process::Output> {
        Ok(Command::new(pcmail)
            .args(args)
            .env("PCMAIL_HOME", home)
            .env("PCMAIL_TOKEN", TOKEN)
            .env("PCMAIL_CREDENTIAL", cred(home))
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .stdin(Stdio::null())
            .output()?)
    };
    let (a, b) = (dir.join("a"), dir.join("b"));
    for (home, label, url) in [(&a, "bench-a", url_a), (&b, "bench-b", url_b)] {
        anyhow::ensure!(run(home, &["init", "--label", label, "--server", url])?.status.success(), "init {label}");
        anyhow::ensure!(run(home, &["sync"])?.status.success(), "sync {label}");
    }
    let mut daemon = Command::new(pcmail)
        .arg("daemon")
        .env("PCMAIL_HOME", &b)
        .env("PCMAIL_TOKEN", TOKEN)
        .env("PCMAIL_CREDENTIAL", cred(&b))
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let http = reqwest::blocking::Client::new();
    let state_of = |id: &str| -> Result<String> {
        let v: Value = http
            .post(url_a)
            .json(&json!({"v":1,"op":"status","pc":"bench-a","token":TOKEN,"cred":cred(&a),"args":{"ids":[id]}}))
            .send()?
            .json()?;
        Ok(v["mails"][0]["state"].as_str().unwrap_or("").to_string())
    };
    // PC B's hook, given one event as Claude Code gives it.
    let hook = |input: &Value| -> Result<std::process::Output> {
        use std::io::Write;
        let mut child = Command::new(pcmail)
            .arg("hook")
            .env("PCMAIL_HOME", &b)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        child.stdin.take().context("hook stdin")?.write_all(input.to_string().as_bytes())?;
        Ok(child.wait_with_output()?)
    };
    // The daemon's CPU while nothing arrives (its pusher looks at the store
    // every 40 ms), then over the rounds: each round one mail received and
    // stored, shown by the hook and its seen mark pushed.
    std::thread::sleep(Duration::from_millis(500)); // past its first poll
    let idle_from = (Instant::now(), process_cpu_ns(daemon.id()));
    let runs_from = process_runs(daemon.id());
    std::thread::sleep(Duration::from_secs(2));
    let idle_to = (Instant::now(), process_cpu_ns(daemon.id()));
    let idle_runs = process_runs(daemon.id()).saturating_sub(runs_from);
    let mut delivered_ms = vec![];
    let mut seen_ms = vec![];
    let rounds_from = (Instant::now(), process_cpu_ns(daemon.id()));
    for round in 0..rounds {
        let t = Instant::now();
        let out = run(&a, &["--json", "send", "bench-b", "--kind", "request", "--body", &format!("round {round}")])?;
        let id = serde_json::from_slice::<Value>(&out.stdout)?["ids"][0].as_str().context("send id")?.to_string();
        while state_of(&id)? != "delivered" {
            anyhow::ensure!(t.elapsed() < Duration::from_secs(30), "not delivered");
            std::thread::sleep(Duration::from_millis(2));
        }
        delivered_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        // The daemon is back in its long poll by now; the hook shows the mail.
        std::thread::sleep(Duration::from_millis(100));
        let session = format!("bench-{round}");
        let shown = hook(&json!({"session_id": session, "hook_event_name": "UserPromptSubmit", "prompt": "hi"}))?;
        anyhow::ensure!(String::from_utf8_lossy(&shown.stdout).contains(&id), "the hook did not show {id}");
        let t = Instant::now();
        while state_of(&id)? != "seen" {
            anyhow::ensure!(t.elapsed() < Duration::from_secs(30), "never seen");
            std::thread::sleep(Duration::from_millis(5));
        }
        seen_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        // The round's session ends, as an agent's does. (Left open, each
        // stayed live, since no process of theirs runs here to end them:
        // by the last round every poll carried a hundred sessions, which
        // no PC has, and the daemon's cost per mail grew with the rounds.)
        let ended = hook(&json!({"session_id": session, "hook_event_name": "SessionEnd", "reason": "exit"}))?;
        anyhow::ensure!(ended.status.success(), "SessionEnd failed");
    }
    let rounds_to = (Instant::now(), process_cpu_ns(daemon.id()));
    let _ = daemon.kill();
    let _ = daemon.wait();
    let ms_between =
        |a: &(Instant, u64), b: &(Instant, u64)| (b.1.saturating_sub(a.1) as f64 / 1e6, (b.0 - a.0).as_secs_f64());
    let (idle_cpu_ms, idle_secs) = ms_between(&idle_from, &idle_to);
    let (rounds_cpu_ms, rounds_secs) = ms_between(&rounds_from, &rounds_to);
    let idle_ms_per_s = idle_cpu_ms / idle_secs;
    Ok(SeenRounds {
        delivered_ms,
        seen_ms,
        daemon_idle_ms_per_s: idle_ms_per_s,
        daemon_idle_wakeups_per_s: idle_runs as f64 / idle_secs,
        daemon_ms_per_round: rounds_cpu_ms / rounds as f64,
        daemon_ms_per_mail: (rounds_cpu_ms - idle_ms_per_s * rounds_secs).max(0.0) / rounds as f64,
    })
}

/// What `seen_rounds` measured.
pub(crate) struct SeenRounds {
    pub delivered_ms: Vec<f64>,
    pub seen_ms: Vec<f64>,
    /// The daemon's CPU per second with nothing arriving.
    pub daemon_idle_ms_per_s: f64,
    /// How often its threads woke per second with nothing arriving.
    pub daemon_idle_wakeups_per_s: f64,
    /// Its CPU per round, all of it.
    pub daemon_ms_per_round: f64,
    /// Its CPU per round above what it spends idle over the same time: the
    /// cost of receiving one mail and pushing its seen mark.
    pub daemon_ms_per_mail: f64,
}

/// CPU time a process has used so far, every live thread's (Linux:
/// /proc/PID/task/*/schedstat, nanoseconds; 0 elsewhere).
fn process_cpu_ns(pid: u32) -> u64 {
    schedstat_sum(pid, 0)
}

/// How many times the process's threads were put on a core (each wake-up
/// of a sleeping thread is one), from `/proc/PID/task/*/schedstat`.
fn process_runs(pid: u32) -> u64 {
    schedstat_sum(pid, 2)
}

fn schedstat_sum(pid: u32, field: usize) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return 0 };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().nth(field).and_then(|n| n.parse::<u64>().ok()))
        .sum()
}

/// `pcmail-bench prune`: 100,000 final mails past the retention window are
/// deleted by `Engine::prune` (bands) while another thread polls as fast as
/// it can; prints how long the prune took and the polls' latency meanwhile.
fn bench_prune() -> Result<()> {
    const DAY: i64 = 24 * 60 * 60 * 1000;
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("server.db");
    let engine = Arc::new(Engine::open(&db, EngineConfig::default())?);
    for pc in ["pc-a", "pc-b"] {
        engine.handle_value(&json!({"v":1,"op":"roster.set","pc":pc,"args":{"label":pc,"hostname":pc}}), T0);
    }
    let old = T0 - 100 * DAY;
    // PCMAIL_BENCH_MAILS: fewer for a quick run that only shows the bench works.
    let total = env_num("PCMAIL_BENCH_MAILS", 100_000);
    for chunk in 0..total.div_ceil(10_000) {
        let batch: Vec<Mail> = (0..10_000.min(total - chunk * 10_000))
            .map(|i| {
                let n = chunk * 10_000 + i;
                let created = old + n as i64;
                Mail {
                    id: format!("mail-{created}-{n:08x}"),
                    from: "pc-a".into(),
                    to: "pc-b".into(),
                    kind: Kind::Note,
                    subject: String::new(),
                    body: "old news".into(),
                    urgent: false,
                    expires_at: None,
                    in_reply_to: None,
                    auto: false,
                    hop: 0,
                    created_at: created,
                    state: State::Done,
                    broadcast_of: None,
                    recipients: None,
                    timeline: vec![
                        TimelineEntry { state: State::New, at: created, by: "pc-a".into(), note: None },
                        TimelineEntry { state: State::Done, at: created + 1, by: "pc-b".into(), note: None },
                    ],
                }
            })
            .collect();
        engine.import_mail(&batch)?;
    }
    let done = Arc::new(AtomicBool::new(false));
    let pruner = {
        let (e, done) = (engine.clone(), done.clone());
        std::thread::spawn(move || {
            let t = Instant::now();
            let n = e.prune(T0);
            done.store(true, Ordering::SeqCst);
            (n, t.elapsed())
        })
    };
    let mut waits = vec![];
    // At least one poll, so a prune quicker than one poll still has a figure.
    loop {
        let t = Instant::now();
        engine.handle_value(&json!({"v":1,"op":"poll","pc":"pc-b","args":{}}), T0);
        waits.push(t.elapsed().as_secs_f64() * 1000.0);
        if done.load(Ordering::SeqCst) {
            break;
        }
    }
    let (n, took) = pruner.join().map_err(|_| anyhow::anyhow!("prune thread panicked"))?;
    waits.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let p = |q: f64| waits[((waits.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "pcmail-bench prune: {} final mails pruned in {:.1} s (bands of {} mails or {} ms)",
        n?,
        took.as_secs_f64(),
        pcmail_server::prune::BAND_ROWS,
        pcmail_server::prune::BAND_BUDGET.as_millis()
    );
    println!(
        "  {} polls meanwhile: p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms (target: no poll blocked > 50 ms)",
        waits.len(),
        p(0.5),
        p(0.99),
        p(1.0)
    );
    Ok(())
}

/// `who` with 50 live sessions on 10 PCs on `pcmail serve`: the
/// op over HTTP (keep-alive), and the whole `pcmail who` process (when the
/// `pcmail` binary sits beside this one, or `PCMAIL_BIN`), in one run.
fn bench_who() -> Result<()> {
    let rounds = env_num("PCMAIL_BENCH_ROUNDS", 200);
    let dir = tempfile::tempdir()?;
    let server = ServerChild::start(dir.path().join("serve.db"))?;
    let http = client();
    let call = |pc: &str, op: &str, args: Value| -> Result<Value> {
        let v: Value =
            http.post(&server.url).json(&json!({"v":1,"op":op,"pc":pc,"token":TOKEN,"args":args})).send()?.json()?;
        anyhow::ensure!(v["ok"] == json!(true), "{op}: {v}");
        Ok(v)
    };
    for p in 0..10 {
        let pc = format!("pc-{p:02}");
        call(&pc, "roster.set", json!({"label": pc, "hostname": format!("HOST-{p:02}")}))?;
        let live: Vec<Value> = (0..5)
            .map(|s| json!({"session": format!("{pc}-session-{s}"), "repo": "github.com/kim/app", "branch": format!("feature-{s}"),
                "cwd": "/home/kim/app", "idleMs": s * 60_000, "leases": if s == 0 { json!(["db-migrations"]) } else { json!([]) }}))
            .collect();
        call(&pc, "poll", json!({"sessions": {"live": live}}))?;
        call(&pc, "name.take", json!({"name": format!("name-{p:02}"), "session": format!("{pc}-session-0")}))?;
    }
    let n = call("pc-00", "who", json!({}))?["sessions"].as_array().map(Vec::len).unwrap_or(0);
    anyhow::ensure!(n == 50, "who lists {n} sessions, not 50");
    let mut op_ms = vec![];
    for _ in 0..rounds {
        let t = Instant::now();
        call("pc-00", "who", json!({}))?;
        op_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    println!("pcmail-bench who: 50 live sessions on 10 PCs, pcmail serve on loopback");
    println!(
        "  who op over HTTP ({rounds} calls): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        pct(&op_ms, 0.5),
        pct(&op_ms, 0.99),
        pct(&op_ms, 1.0)
    );
    let pcmail = match std::env::var_os("PCMAIL_BIN") {
        Some(p) => std::path::PathBuf::from(p),
        None => std::env::current_exe()?.with_file_name("pcmail"),
    };
    if !pcmail.exists() {
        println!("  (no pcmail binary at {}: the whole-process figure needs PCMAIL_BIN)", pcmail.display());
        return Ok(());
    }
    let home = dir.path().join("home");
    let run = |args: &[&str]| -> Result<std::process::Output> {
        Ok(Command::new(&pcmail)
            .args(args)
            .env("PCMAIL_HOME", &home)
            .env("PCMAIL_TOKEN", TOKEN)
            .env("PCMAIL_CREDENTIAL", "c".repeat(64))
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .stdin(Stdio::null())
            .output()?)
    };
    anyhow::ensure!(run(&["init", "--label", "pc-00", "--server", &server.url, "--replace"])?.status.success(), "init");
    let mut cli_ms = vec![];
    let mut true_ms = vec![];
    for _ in 0..rounds.min(60) {
        let t = Instant::now();
        let out = run(&["who"])?;
        cli_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        anyhow::ensure!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).lines().count() >= 51,
            "pcmail who failed"
        );
        let t = Instant::now();
        Command::new("/bin/true").status()?;
        true_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    println!(
        "  `pcmail who`, whole process ({} runs): p50 {:.1} ms, p99 {:.1} ms (target <= 50 ms); /bin/true p50 {:.1} ms",
        cli_ms.len(),
        pct(&cli_ms, 0.5),
        pct(&cli_ms, 0.99),
        pct(&true_ms, 0.5)
    );
    Ok(())
}
