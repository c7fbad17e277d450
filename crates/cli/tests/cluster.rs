//! Several `pcmail serve` instances on one PostgreSQL are one server: real
//! processes of the real binary, a throwaway PostgreSQL, and (for the fault
//! runs) Debian's haproxy with the configuration docs/deploy/haproxy.cfg.

use pcmail_pgtest::Postgres;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "cluster-token-0123456789";

fn exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_pcmail"))
}

/// One `pcmail serve --db postgres://…` process.
struct Instance {
    child: Child,
    url: String,
    _home: tempfile::TempDir,
}

impl Instance {
    fn start(db_url: &str, listen: &str) -> Instance {
        let home = tempfile::tempdir().unwrap();
        let mut child = Command::new(exe())
            .args(["serve", "--listen", listen])
            .env("PCMAIL_DATABASE_URL", db_url)
            .env("PCMAIL_TOKEN", TOKEN)
            .env("PCMAIL_HOME", home.path())
            .env("HOME", home.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start pcmail serve");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let deadline = Instant::now() + Duration::from_secs(30);
        let url = loop {
            assert!(Instant::now() < deadline, "pcmail serve did not say where it listens");
            let line = lines.next().expect("pcmail serve exited before listening").unwrap();
            if let Some(rest) = line.split("listening on ").nth(1) {
                break rest.trim().to_string();
            }
        };
        std::thread::spawn(move || for _ in lines {});
        Instance { child, url, _home: home }
    }

    fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn call(http: &reqwest::blocking::Client, url: &str, pc: &str, op: &str, args: Value) -> Value {
    let body = json!({"v": 1, "op": op, "pc": pc, "token": TOKEN, "args": args});
    http.post(url).json(&body).send().and_then(|r| r.json()).unwrap_or_else(|e| panic!("{op} to {url}: {e}"))
}

fn mail(id: &str, from: &str, to: &str) -> Value {
    json!({"id": id, "from": from, "to": to, "kind": "note", "subject": "s", "body": id, "urgent": false,
           "auto": false, "hop": 0, "createdAt": 1, "inReplyTo": null})
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// A long poll held by instance A wakes when mail for its PC is committed
/// through instance B (LISTEN/NOTIFY), well under 200 ms at the median.
#[test]
fn a_long_poll_on_one_instance_wakes_for_mail_sent_through_another() {
    let pg = Postgres::start();
    let db = pg.create_database("cluster");
    let a = Instance::start(&db, "127.0.0.1:0");
    let b = Instance::start(&db, "127.0.0.1:0");
    let http = reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    for (pc, host) in [("pc-a", "A"), ("pc-b", "B")] {
        let r = call(&http, &a.url, pc, "roster.set", json!({"label": pc, "hostname": host}));
        assert_eq!(r["ok"], true, "{r}");
    }
    // The roster written through A is the roster B serves.
    let r = call(&http, &b.url, "pc-a", "roster.get", json!({}));
    assert_eq!(r["pcs"].as_array().unwrap().len(), 2, "{r}");

    let mut latencies = Vec::new();
    for i in 0..20 {
        let (a_url, h) = (a.url.clone(), http.clone());
        let poll = std::thread::spawn(move || {
            let r = call(&h, &a_url, "pc-b", "poll", json!({"waitMs": 10_000, "limit": 10}));
            (Instant::now(), r)
        });
        // Let the poll reach A and find nothing first.
        std::thread::sleep(Duration::from_millis(150));
        let id = format!("mail-1767225600000-{i:08x}");
        let r = call(&http, &b.url, "pc-a", "send", json!({"mail": mail(&id, "pc-a", "pc-b")}));
        let sent = Instant::now();
        assert_eq!(r["ok"], true, "{r}");
        let (woke, polled) = poll.join().unwrap();
        let got: Vec<&str> = polled["mail"].as_array().unwrap().iter().filter_map(|m| m["id"].as_str()).collect();
        assert_eq!(got, vec![id.as_str()], "{polled}");
        latencies.push(woke.saturating_duration_since(sent));
        // Confirm it, through A, so the next round's poll starts empty.
        let r = call(&http, &a.url, "pc-b", "poll", json!({"confirm": [id], "limit": 10}));
        assert_eq!(r["confirmed"], json!([id]), "{r}");
    }
    latencies.sort();
    let (p50, p99) = (percentile(&latencies, 0.5), percentile(&latencies, 0.99));
    eprintln!("cross-instance wake-up: p50 {p50:?}, max {p99:?} over {} sends", latencies.len());
    assert!(p50 < Duration::from_millis(200), "p50 {p50:?}");
    assert!(p99 < Duration::from_secs(1), "p99 {p99:?}");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Debian's haproxy with the repository's configuration, in front of two instances.
struct Balancer {
    child: Child,
    url: String,
}

impl Balancer {
    fn start(a: &str, b: &str) -> Balancer {
        let port = free_port();
        let cfg = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/deploy/haproxy.cfg");
        let child = Command::new("haproxy")
            .arg("-db")
            .arg("-f")
            .arg(&cfg)
            .env("PCMAIL_LB_LISTEN", format!("127.0.0.1:{port}"))
            .env("PCMAIL_INSTANCE_A", a)
            .env("PCMAIL_INSTANCE_B", b)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("haproxy is installed (bash scripts/install-deps.sh)");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "haproxy did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Balancer { child, url: format!("http://127.0.0.1:{port}/api") }
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One request as a PC does it: again with the same ids while the answer is
/// a transport error or a transient code (`busy`, `internal`,
/// `roster_unavailable`: `ErrorCode::is_transient`, what the client retries);
/// anything else is the answer.
fn call_retrying(http: &reqwest::blocking::Client, url: &str, pc: &str, op: &str, args: Value) -> (Value, u32) {
    let body = json!({"v": 1, "op": op, "pc": pc, "token": TOKEN, "args": args});
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut retries = 0;
    loop {
        match http.post(url).json(&body).send().and_then(|r| r.json::<Value>()) {
            Ok(v) if v["ok"] == true => return (v, retries),
            Ok(v) if v["error"]["code"] == "busy" => {}
            // Counted: the stores answer `busy` for a database that is away, never these.
            Ok(v) if v["error"]["code"] == "internal" || v["error"]["code"] == "roster_unavailable" => {
                panic!("{op}: {v} (a database outage must answer busy)")
            }
            Ok(v) => return (v, retries),
            Err(_) => {}
        }
        assert!(Instant::now() < deadline, "{op} never went through");
        retries += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// 2,000 mails from 4 senders through haproxy while one instance is killed
/// with SIGKILL (and started again) and PostgreSQL itself crashes and
/// restarts: every mail is stored once, delivered, and no sender ever saw an
/// error that was not a retry.
#[test]
fn kill_9_of_an_instance_and_a_postgres_restart_lose_and_double_nothing() {
    let mut pg = Postgres::start();
    let db = pg.create_database("faults");
    let (port_a, port_b) = (free_port(), free_port());
    let (addr_a, addr_b) = (format!("127.0.0.1:{port_a}"), format!("127.0.0.1:{port_b}"));
    let mut a = Instance::start(&db, &addr_a);
    let _b = Instance::start(&db, &addr_b);
    let lb = Balancer::start(&addr_a, &addr_b);
    let http = reqwest::blocking::Client::builder().timeout(Duration::from_secs(40)).build().unwrap();
    let senders = ["s1", "s2", "s3", "s4"];
    for (i, pc) in senders.iter().chain(["rcv"].iter()).enumerate() {
        let (r, _) = call_retrying(&http, &lb.url, pc, "roster.set", json!({"label": pc, "hostname": format!("H{i}")}));
        assert_eq!(r["ok"], true, "{r}");
    }
    const PER_SENDER: usize = 500;
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let threads: Vec<_> = senders
        .iter()
        .map(|s| {
            let (h, url, s, sent) = (http.clone(), lb.url.clone(), s.to_string(), sent.clone());
            std::thread::spawn(move || {
                let mut retries = 0;
                let k = s.trim_start_matches('s').parse::<u32>().unwrap();
                for n in 0..PER_SENDER {
                    let id = format!("mail-1767225600000-{k:01x}{n:07x}");
                    let (r, tries) = call_retrying(&h, &url, &s, "send", json!({"mail": mail(&id, &s, "rcv")}));
                    assert_eq!(r["ok"], true, "{id}: a false error: {r}");
                    retries += tries;
                    sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                retries
            })
        })
        .collect();
    // The receiver long-polls through the balancer and confirms what it stored.
    let receiver = {
        let (h, url) = (http.clone(), lb.url.clone());
        std::thread::spawn(move || {
            let mut got = std::collections::BTreeSet::new();
            let mut deliveries = 0usize;
            let mut confirm: Vec<String> = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(120);
            while got.len() < 4 * PER_SENDER || !confirm.is_empty() {
                assert!(Instant::now() < deadline, "received {} of {}", got.len(), 4 * PER_SENDER);
                let (r, _) =
                    call_retrying(&h, &url, "rcv", "poll", json!({"confirm": confirm, "waitMs": 2000, "limit": 200}));
                assert_eq!(r["ok"], true, "{r}");
                confirm = Vec::new();
                for m in r["mail"].as_array().unwrap() {
                    let id = m["id"].as_str().unwrap().to_string();
                    deliveries += 1;
                    got.insert(id.clone());
                    confirm.push(id);
                }
            }
            (got, deliveries)
        })
    };
    let wait_for = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while sent.load(std::sync::atomic::Ordering::Relaxed) < n {
            assert!(
                Instant::now() < deadline,
                "senders stalled at {}",
                sent.load(std::sync::atomic::Ordering::Relaxed)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    wait_for(400);
    a.kill9();
    wait_for(900);
    pg.crash();
    std::thread::sleep(Duration::from_millis(500));
    pg.restart();
    wait_for(1400);
    let a2 = Instance::start(&db, &addr_a);
    let retries: u32 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let (got, deliveries) = receiver.join().unwrap();
    assert_eq!(got.len(), 4 * PER_SENDER, "every mail reached the receiver");

    let mut c = pg.connect("faults");
    let n: i64 = c.query_one("SELECT count(*) FROM mail", &[]).unwrap().get(0);
    assert_eq!(n, (4 * PER_SENDER) as i64, "each mail stored once");
    let doubled: i64 = c
        .query_one(
            "SELECT count(*) FROM (SELECT mail_id, state FROM event GROUP BY mail_id, state HAVING count(*) > 1) d",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(doubled, 0, "no transition recorded twice");
    let undelivered: i64 = c.query_one("SELECT count(*) FROM mail WHERE state = 'new'", &[]).unwrap().get(0);
    assert_eq!(undelivered, 0);
    eprintln!(
        "faults: {} mails, {retries} sender retries, {} deliveries for {} mails (at least once), instance restarted at {}",
        4 * PER_SENDER,
        deliveries,
        got.len(),
        a2.url
    );
}

/// A claim storm on one resource by 4 PCs, each request to either instance
/// in turn: never two exclusive holders, and fences growing by one with
/// every grant, across both instances (the timeline in PostgreSQL is walked).
#[test]
fn a_claim_storm_across_two_instances_keeps_one_holder_and_growing_fences() {
    let pg = Postgres::start();
    let db = pg.create_database("storm");
    let a = Instance::start(&db, "127.0.0.1:0");
    let b = Instance::start(&db, "127.0.0.1:0");
    let http = reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    const CLIENTS: usize = 4;
    const CYCLES: usize = 60;
    for i in 0..CLIENTS {
        let pc = format!("pc-{i}");
        let r = call(&http, &a.url, &pc, "roster.set", json!({"label": pc, "hostname": format!("H{i}")}));
        assert_eq!(r["ok"], true, "{r}");
    }
    let urls = [a.url.clone(), b.url.clone()];
    let threads: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (h, urls) = (http.clone(), urls.clone());
            std::thread::spawn(move || {
                let pc = format!("pc-{i}");
                let mut fences = Vec::new();
                let mut k = i;
                for n in 0..CYCLES {
                    let fence = loop {
                        k += 1;
                        let args = json!({"claimId": format!("c-{i}-{n}"), "resource": "storm/one", "repo": "",
                            "description": "storm", "files": [], "mode": "exclusive",
                            "holder": {"pc": pc, "session": format!("s{i}"), "name": null}});
                        let (r, _) = call_retrying(&h, &urls[k % 2], &pc, "lease.claim", args);
                        if r["ok"] == true {
                            break r["lease"]["fence"].as_i64().unwrap();
                        }
                        assert_eq!(r["error"]["code"], "held", "{r}");
                        std::thread::sleep(Duration::from_millis(2));
                    };
                    k += 1;
                    let args = json!({"resource": "storm/one", "fence": fence, "by": format!("{pc}/s{i}")});
                    let (r, _) = call_retrying(&h, &urls[k % 2], &pc, "lease.release", args);
                    assert_eq!(r["released"], true, "{r}");
                    fences.push(fence);
                }
                fences
            })
        })
        .collect();
    let mut all: Vec<i64> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
    all.sort();
    let n = (CLIENTS * CYCLES) as i64;
    assert_eq!(all, (1..=n).collect::<Vec<_>>(), "every fence handed out once, one more per grant");
    let mut c = pg.connect("storm");
    let mut holder: Option<i64> = None;
    let mut last = 0;
    for r in c.query("SELECT event, fence FROM lease_event WHERE resource = 'storm/one' ORDER BY seq", &[]).unwrap() {
        let (event, fence): (String, i64) = (r.get(0), r.get(1));
        match event.as_str() {
            "granted" => {
                assert_eq!(holder, None, "fence {fence} granted while {holder:?} held it");
                assert!(fence > last, "fence {fence} after {last}");
                last = fence;
                holder = Some(fence);
            }
            "released" => {
                assert_eq!(holder, Some(fence), "released {fence} not held");
                holder = None;
            }
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!(last, n);
}
