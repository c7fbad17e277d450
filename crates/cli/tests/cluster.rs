//! Several `pcmail serve` instances on one PostgreSQL are one server: real
//! processes of the real binary, a throwaway PostgreSQL, and (for the fault
//! runs) Debian's haproxy with the configuration docs/deploy/haproxy.cfg.

mod common;
use common::{exe, serve_command, Process, TOKEN};
use pcmail_pgtest::Postgres;
use pcmail_testkit::free_port;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One `pcmail serve --db postgres://…` process.
struct Instance {
    process: Process,
    url: String,
    _home: tempfile::TempDir,
}

impl Instance {
    fn start(db_url: &str, listen: &str) -> Instance {
        let home = tempfile::tempdir().unwrap();
        let mut cmd = serve_command(home.path());
        cmd.args(["--listen", listen])
            .env("PCMAIL_DATABASE_URL", db_url)
            .env("HOME", home.path())
            .stderr(Stdio::inherit());
        let process = Process::listening(&mut cmd, Duration::from_secs(30));
        Instance { url: process.url.clone(), process, _home: home }
    }

    fn kill9(&mut self) {
        self.process.kill9();
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

/// Debian's haproxy with the repository's configuration, in front of two instances.
struct Balancer {
    _process: Process,
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
        let url = format!("http://127.0.0.1:{port}/api");
        let process = Process { child, url: url.clone() };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "haproxy did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Balancer { _process: process, url }
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

/// Two instances on one fresh database of their own, and a client.
fn two_instances(db_name: &str) -> (Postgres, Instance, Instance, reqwest::blocking::Client) {
    let pg = Postgres::start();
    let db = pg.create_database(db_name);
    let a = Instance::start(&db, "127.0.0.1:0");
    let b = Instance::start(&db, "127.0.0.1:0");
    let http = reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    (pg, a, b, http)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// One wake-up: `pc`'s long poll (`args`, with `waitMs` added) is held by
/// `a_url`; once it has had time to find nothing and wait, `trigger` commits
/// through the other instance. Returns the poll's answer and how long after
/// the trigger's answer the poll answered.
fn wake_once(
    http: &reqwest::blocking::Client,
    a_url: &str,
    pc: &str,
    mut args: Value,
    trigger: impl FnOnce(),
) -> (Value, Duration) {
    args["waitMs"] = json!(10_000);
    let (a_url, h, pc) = (a_url.to_string(), http.clone(), pc.to_string());
    let poll = std::thread::spawn(move || {
        let r = call(&h, &a_url, &pc, "poll", args);
        (Instant::now(), r)
    });
    // Let the poll reach A, find nothing and start waiting.
    std::thread::sleep(Duration::from_millis(200));
    assert!(!poll.is_finished(), "the long poll answered before anything was committed");
    trigger();
    let done = Instant::now();
    let (woke, r) = poll.join().unwrap();
    assert_eq!(r["ok"], true, "{r}");
    (r, woke.saturating_duration_since(done))
}

/// p50 under 200 ms and the slowest under 1 s.
fn assert_wake_latencies(what: &str, mut lat: Vec<Duration>) {
    lat.sort();
    let (p50, max) = (percentile(&lat, 0.5), percentile(&lat, 1.0));
    eprintln!("cross-instance wake-up on {what}: p50 {p50:?}, max {max:?} over {} commits", lat.len());
    assert!(p50 < Duration::from_millis(200), "{what}: p50 {p50:?}");
    assert!(max < Duration::from_secs(1), "{what}: max {max:?}");
}

const ROUNDS: usize = 10;

/// The sender's long poll on instance A wakes when the recipient marks its
/// mail (seen, then done) through instance B: the update is in the answer.
#[test]
fn a_long_poll_on_one_instance_wakes_for_a_mark_on_its_mail_made_through_another() {
    let (_pg, a, b, http) = two_instances("wake_mark");
    for (pc, host) in [("pc-a", "A"), ("pc-b", "B")] {
        assert_eq!(call(&http, &a.url, pc, "roster.set", json!({"label": pc, "hostname": host}))["ok"], true);
    }
    let mut cursor = 0i64;
    let mut lat = Vec::new();
    for i in 0..ROUNDS {
        let id = format!("mail-1767225600000-{i:08x}");
        let r = call(&http, &a.url, "pc-a", "send", json!({"mail": mail(&id, "pc-a", "pc-b")}));
        assert_eq!(r["ok"], true, "{r}");
        let r = call(&http, &a.url, "pc-b", "poll", json!({"limit": 10}));
        assert_eq!(r["mail"][0]["id"], id.as_str(), "{r}");
        let r = call(&http, &a.url, "pc-b", "poll", json!({"confirm": [id], "limit": 10}));
        assert_eq!(r["confirmed"], json!([id]), "{r}");
        // The sender reads its updates to the end (its mail delivered), as its poller does.
        loop {
            let r = call(&http, &a.url, "pc-a", "poll", json!({"since": cursor}));
            cursor = r["cursor"].as_i64().unwrap();
            if r["more"] != true {
                break;
            }
        }
        for (k, op, state) in [(0, "seen", "seen"), (1, "ack", "done")] {
            let mark = json!({"marks": [{"markId": format!("mk-{i}-{k}"), "id": id, "op": op, "at": now_ms(), "by": "pc-b/s1"}]});
            let (r, took) = wake_once(&http, &a.url, "pc-a", json!({"since": cursor}), || {
                let r = call(&http, &b.url, "pc-b", "mark", mark);
                assert_eq!(r["results"][0]["changed"], true, "{r}");
            });
            let updates = r["updates"].as_array().unwrap();
            assert!(updates.iter().any(|u| u["id"] == id.as_str() && u["state"] == state), "{op}: {r}");
            cursor = r["cursor"].as_i64().unwrap();
            lat.push(took);
        }
    }
    assert_wake_latencies("a mark on mail it sent", lat);
}

/// A PC with a live session in a repository: its long poll on instance A
/// (which asks for the lease list) wakes when a lease in that repository is
/// claimed or released through instance B, with the new list.
#[test]
fn a_long_poll_on_one_instance_wakes_for_a_lease_claimed_or_released_through_another() {
    let (_pg, a, b, http) = two_instances("wake_lease");
    for (pc, host) in [("pc-w", "W"), ("pc-x", "X")] {
        assert_eq!(call(&http, &a.url, pc, "roster.set", json!({"label": pc, "hostname": host}))["ok"], true);
    }
    const REPO: &str = "github.com/acme/app";
    let sessions = json!({"live": [{"session": "w1", "repo": REPO, "branch": "main", "cwd": "/src/app",
                                      "idleMs": 0, "leases": []}]});
    let r = call(
        &http,
        &a.url,
        "pc-w",
        "poll",
        json!({"sessions": sessions, "lease": {"known": 0, "renew": [], "release": []}}),
    );
    assert_eq!(r["ok"], true, "{r}");
    let mut known = r["lease"]["version"].as_i64().unwrap();
    let mut lat = Vec::new();
    for i in 0..ROUNDS {
        // Claimed through B: the list has it.
        let mut fence = 0;
        let args = json!({"sessions": sessions, "lease": {"known": known, "renew": [], "release": []}});
        let (r, took) = wake_once(&http, &a.url, "pc-w", args, || {
            let claim = json!({"claimId": format!("c-{i}"), "resource": "app/db", "repo": REPO, "description": "migrations",
                "files": [], "mode": "exclusive", "holder": {"pc": "pc-x", "session": "x1", "name": null}});
            let r = call(&http, &b.url, "pc-x", "lease.claim", claim);
            assert_eq!(r["ok"], true, "{r}");
            fence = r["lease"]["fence"].as_i64().unwrap();
        });
        let list = r["lease"]["list"].as_array().unwrap_or_else(|| panic!("no lease list: {r}"));
        assert!(list.iter().any(|l| l["resource"] == "app/db" && l["fence"] == fence), "{r}");
        known = r["lease"]["version"].as_i64().unwrap();
        lat.push(took);
        // Released through B: the list no longer has it.
        let args = json!({"sessions": sessions, "lease": {"known": known, "renew": [], "release": []}});
        let (r, took) = wake_once(&http, &a.url, "pc-w", args, || {
            let rel = json!({"resource": "app/db", "fence": fence, "by": "pc-x/x1"});
            let r = call(&http, &b.url, "pc-x", "lease.release", rel);
            assert_eq!(r["released"], true, "{r}");
        });
        let list = r["lease"]["list"].as_array().unwrap_or_else(|| panic!("no lease list: {r}"));
        assert!(!list.iter().any(|l| l["resource"] == "app/db"), "{r}");
        known = r["lease"]["version"].as_i64().unwrap();
        lat.push(took);
    }
    assert_wake_latencies("a lease claimed or released in its repository", lat);
}

/// An executor's long poll on instance A wakes when a job is submitted to
/// it through instance B (offered), and the submitter's long poll on A wakes
/// when the executor reports the job's end through B (finished).
#[test]
fn a_long_poll_on_one_instance_wakes_for_a_job_offered_or_ended_through_another() {
    let (_pg, a, b, http) = two_instances("wake_job");
    for (pc, host) in [("pc-e", "E"), ("pc-s", "S")] {
        assert_eq!(call(&http, &a.url, pc, "roster.set", json!({"label": pc, "hostname": host}))["ok"], true);
    }
    let whitelist = json!({"hash": "wl-1", "allowedSubmitters": ["pc-s"], "checkouts": [],
        "commands": [{"name": "build", "args": [], "subject": null, "timeLimitMs": 60_000, "artifacts": [],
                      "readOnly": false, "chunked": false, "verify": false, "description": "build"}]});
    let r = call(&http, &a.url, "pc-e", "poll", json!({"job": {"whitelist": whitelist, "take": true}}));
    assert_eq!(r["job"]["whitelistHash"], "wl-1", "{r}");
    let (mut offered_lat, mut ended_lat) = (Vec::new(), Vec::new());
    for i in 0..ROUNDS {
        let id = format!("job-1767225600000-{i:08x}");
        let (r, took) = wake_once(&http, &a.url, "pc-e", json!({"job": {"take": true}}), || {
            let submit = json!({"jobId": id, "target": "pc-e", "command": "build", "args": {}, "force": true,
                                "submitter": {"pc": "pc-s", "session": "s1"}});
            let r = call(&http, &b.url, "pc-s", "job.submit", submit);
            assert_eq!(r["job"]["state"], "queued", "{r}");
        });
        assert_eq!(r["job"]["offered"][0]["id"], id.as_str(), "{r}");
        offered_lat.push(took);
        let start = json!({"jobId": id, "runner": "pc-e/1", "startedAt": now_ms()});
        assert_eq!(call(&http, &a.url, "pc-e", "job.start", start)["job"]["state"], "running");
        let (r, took) = wake_once(&http, &a.url, "pc-s", json!({"job": {"take": false}}), || {
            let report = json!({"jobId": id, "runner": "pc-e/1", "state": "ok",
                "result": {"ran": true, "exit": 0, "durationMs": 1, "output": "", "truncated": false, "artifacts": []}});
            let r = call(&http, &b.url, "pc-e", "job.report", report);
            assert_eq!(r["job"]["state"], "ok", "{r}");
        });
        assert_eq!(r["job"]["finished"][0]["id"], id.as_str(), "{r}");
        ended_lat.push(took);
    }
    assert_wake_latencies("a job offered to it", offered_lat);
    assert_wake_latencies("a job ended for it", ended_lat);
}

/// An executor PC: `pcmail daemon` with a `[jobs]` config whose one command
/// appends the job's id to `ran.txt` in its checkout, talking to the balancer
/// first and to each instance after it (a PC's failover addresses).
struct Executor {
    home: tempfile::TempDir,
    work: tempfile::TempDir,
    daemon: Option<Child>,
    cred: String,
}

impl Executor {
    fn new(urls: &[&str]) -> Executor {
        let (home, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let mut e = Executor { home, work, daemon: None, cred: "e".repeat(64) };
        let mut args = vec!["init", "--label", "exec"];
        for u in urls {
            args.extend(["--server", u]);
        }
        let out = e.cmd().args(&args).output().unwrap();
        assert!(out.status.success(), "init: {}", String::from_utf8_lossy(&out.stderr));
        let cfg = e.home.path().join("config.toml");
        let mut text = std::fs::read_to_string(&cfg).unwrap();
        text.push_str(&format!(
            r#"
[jobs]
allowed_submitters = ["sub"]

[jobs.checkouts]
work = {:?}

[[jobs.commands]]
name = "append"
argv = ["sh", "-c", "echo \"$PCMAIL_JOB_ID\" >> ran.txt; sleep 0.2; echo ran"]
cwd = "work"
time_limit_secs = 60
"#,
            e.work.path().display().to_string()
        ));
        std::fs::write(&cfg, text).unwrap();
        e.start();
        e
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new(exe());
        c.env("PCMAIL_HOME", self.home.path())
            .env("HOME", self.home.path())
            .env("PCMAIL_TOKEN", TOKEN)
            .env("PCMAIL_CREDENTIAL", &self.cred)
            .env_remove("PCMAIL_ADMIN_TOKEN")
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .stdin(Stdio::null());
        c
    }

    fn start(&mut self) {
        let d = self.cmd().arg("daemon").stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        self.daemon = Some(d);
    }

    fn kill9(&mut self) {
        if let Some(mut d) = self.daemon.take() {
            let _ = d.kill();
            let _ = d.wait();
        }
    }

    /// How many times each job id was run (lines of `ran.txt`).
    fn runs(&self) -> std::collections::BTreeMap<String, usize> {
        let text = std::fs::read_to_string(self.work.path().join("ran.txt")).unwrap_or_default();
        let mut m = std::collections::BTreeMap::new();
        for l in text.lines() {
            *m.entry(l.trim().to_string()).or_insert(0) += 1;
        }
        m
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Jobs submitted through haproxy while one instance and then the executor
/// are killed with SIGKILL (and started again): every job is stored once,
/// ends once in a state that tells the truth (ok after one run, or
/// timed_out as interrupted by the executor's death), and none ran twice.
#[test]
fn jobs_submitted_while_an_executor_and_an_instance_are_killed_end_once_and_truthfully() {
    let pg = Postgres::start();
    let db = pg.create_database("jobfaults");
    let (addr_a, addr_b) = (format!("127.0.0.1:{}", free_port()), format!("127.0.0.1:{}", free_port()));
    let mut a = Instance::start(&db, &addr_a);
    let _b = Instance::start(&db, &addr_b);
    let lb = Balancer::start(&addr_a, &addr_b);
    let http = reqwest::blocking::Client::builder().timeout(Duration::from_secs(40)).build().unwrap();
    let (r, _) = call_retrying(&http, &lb.url, "sub", "roster.set", json!({"label": "sub", "hostname": "SUB"}));
    assert_eq!(r["ok"], true, "{r}");
    let (url_a, url_b) = (format!("http://{addr_a}/api"), format!("http://{addr_b}/api"));
    let mut exec = Executor::new(&[&lb.url, &url_a, &url_b]);

    const JOBS: usize = 40;
    let ids: Vec<String> = (0..JOBS).map(|n| format!("job-1767225600000-{n:08x}")).collect();
    let submit = |h: &reqwest::blocking::Client, id: &str| {
        let args = json!({"jobId": id, "target": "exec", "command": "append", "args": {}, "force": true,
                          "submitter": {"pc": "sub", "session": "s1"}});
        call_retrying(h, &lb.url, "sub", "job.submit", args)
    };
    // The first submit goes through once the daemon has published its whitelist.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (r, _) = submit(&http, &ids[0]);
        if r["ok"] == true {
            break;
        }
        assert_eq!(r["error"]["reason"], "no_executor", "{r}");
        assert!(Instant::now() < deadline, "the executor never published its whitelist");
        std::thread::sleep(Duration::from_millis(100));
    }
    let submitted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(1));
    let submitter = {
        let (h, ids, submitted) = (http.clone(), ids.clone(), submitted.clone());
        let lb_url = lb.url.clone();
        std::thread::spawn(move || {
            let mut retries = 0;
            for id in &ids[1..] {
                let args = json!({"jobId": id, "target": "exec", "command": "append", "args": {}, "force": true,
                                  "submitter": {"pc": "sub", "session": "s1"}});
                let (r, tries) = call_retrying(&h, &lb_url, "sub", "job.submit", args);
                assert_eq!(r["ok"], true, "{id}: a false error: {r}");
                assert_eq!(r["deduped"], false, "{r}");
                retries += tries;
                submitted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(100));
            }
            retries
        })
    };
    let wait_for = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while submitted.load(std::sync::atomic::Ordering::Relaxed) < n {
            assert!(Instant::now() < deadline, "the submitter stalled");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    wait_for(10);
    a.kill9();
    wait_for(18);
    // Mid-run: the executor runs a job most of the time (each takes 0.2 s).
    let before = exec.runs().len();
    exec.kill9();
    std::thread::sleep(Duration::from_millis(500));
    exec.start();
    wait_for(28);
    let a2 = Instance::start(&db, &addr_a);
    let retries = submitter.join().unwrap();

    // Every job ends; each answered through the balancer.
    let final_states = ["ok", "failed", "timed_out", "cancelled"];
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut jobs = Vec::new();
    for id in &ids {
        loop {
            let (r, _) = call_retrying(&http, &lb.url, "sub", "job.status", json!({"jobId": id}));
            assert_eq!(r["ok"], true, "{r}");
            if final_states.contains(&r["job"]["state"].as_str().unwrap()) {
                jobs.push(r["job"].clone());
                break;
            }
            assert!(Instant::now() < deadline, "{id} never ended: {r}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let runs = exec.runs();
    let mut counts = std::collections::BTreeMap::new();
    for j in &jobs {
        let id = j["id"].as_str().unwrap();
        let state = j["state"].as_str().unwrap();
        *counts.entry(state.to_string()).or_insert(0) += 1;
        let ran = runs.get(id).copied().unwrap_or(0);
        assert!(ran <= 1, "{id} ran {ran} times");
        match state {
            "ok" => {
                assert_eq!(ran, 1, "{id} is ok but did not run: {j}");
                assert_eq!(j["result"]["ran"], true, "{j}");
            }
            // Only the executor's death may end a job here, and it says so.
            "timed_out" => {
                let why = j["reason"].as_str().unwrap_or("");
                assert!(why.contains("executor stopped") || why.contains("outcome unknown"), "{j}");
                if ran == 1 {
                    assert_eq!(j["result"]["ran"], true, "{id} ran but is reported as not run: {j}");
                }
            }
            other => panic!("{id} ended {other}: {j}"),
        }
        // The end is on its timeline once.
        let ends = j["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| final_states.contains(&t["state"].as_str().unwrap()))
            .count();
        assert_eq!(ends, 1, "{j}");
    }
    assert!(runs.keys().all(|id| ids.contains(id)), "a run of an unknown job: {runs:?}");
    // In the database: each job once, each with one end.
    let mut c = pg.connect("jobfaults");
    let n: i64 = c.query_one("SELECT count(*) FROM job", &[]).unwrap().get(0);
    assert_eq!(n, JOBS as i64, "each job stored once");
    let doubled: i64 = c
        .query_one(
            "SELECT count(*) FROM (SELECT job_id FROM job_event WHERE state IN ('ok', 'failed', 'timed_out', 'cancelled') \
             GROUP BY job_id HAVING count(*) > 1) d",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(doubled, 0, "no job ended twice");
    eprintln!(
        "job faults: {JOBS} jobs, {retries} submit retries, ends {counts:?}, {} ran before the executor was killed, \
         instance restarted at {}",
        before, a2.url
    );
}
