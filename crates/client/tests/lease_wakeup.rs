//! How soon another PC's edit guard hears of a lease: PC A claims (then
//! releases) a lease on files of a repo in which PC B has a live session; we
//! time how long until B's guard file (`$PCMAIL_HOME/guard-leases`, written by
//! B's poller after each poll) denies (then allows) an edit there. Through
//! `pcmail serve` the claim wakes B's long poll; on the embedded server (one
//! SQLite file, no long poll) B's poller wakes on the file's change. Prints
//! p50 and p99 over 100 claims each (docs/benchmarks.md) and holds p99 < 1 s.

mod common;

use common::{serve_at, served_pc};
use pcmail_client::leases::{ClaimOutcome, ClaimRequest};
use pcmail_client::transport::{Embedded, Transport};
use pcmail_client::Client;
use pcmail_core::lease::Mode;
use pcmail_local::config::{Config, Paths, ServerConfig};
use pcmail_local::leases::GuardFile;
use pcmail_local::system_now;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TOKEN: &str = "wakeup-token-0123";
const REPO: &str = "github.com/o/r";
const CLAIMS: usize = 100;

fn client(root: &Path, label: &str, server: ServerConfig, t: Box<dyn Transport>) -> Client {
    let paths = Paths::at(root.join(label));
    std::fs::create_dir_all(&paths.home).unwrap();
    let cfg = Config { native_notifications: false, ..Config::new(label, server) };
    cfg.save(&paths).unwrap();
    Client::with(paths, cfg, t, system_now).unwrap()
}

/// B has a live session in the repo (as its hook records one).
fn session_in_repo(b: &mut Client) {
    let now = system_now();
    let row = pcmail_store::leases::SessionRow {
        session: "s-b".into(),
        pid: None,
        pid_start: None,
        cwd: None,
        repo: Some(REPO.into()),
        branch: None,
        started_at: now,
        last_prompt_at: Some(now),
        ended_at: None,
        end_reason: None,
    };
    b.store.write(|tx| pcmail_store::leases::session_record(tx, &row)).unwrap();
}

fn denies(home: &Path) -> bool {
    GuardFile::read(home).and_then(|g| g.covering_exclusive(REPO, "deploy/run.sh")).is_some_and(|l| !l.is_empty())
}

fn wait_for(what: &str, home: &Path, want: bool) {
    let start = Instant::now();
    while denies(home) != want {
        assert!(start.elapsed() < Duration::from_secs(20), "B's guard never {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p).div_ceil(100).saturating_sub(1)]
}

/// Runs B's poller (as `pcmail daemon` does) while A claims and releases
/// CLAIMS times; answers the claim → deny and release → allow latencies.
fn measure(mut a: Client, mut b: Client, wait_ms: i64, interval: Duration) -> (Vec<Duration>, Vec<Duration>) {
    session_in_repo(&mut b);
    a.sync_once(0).unwrap();
    b.sync_once(0).unwrap();
    let home = b.paths.home.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let poller = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                if b.sync_once(wait_ms).is_err() {
                    std::thread::sleep(Duration::from_millis(50));
                }
                b.wait_before_next_poll(interval);
            }
        })
    };
    // Let B's poller settle into its wait.
    std::thread::sleep(Duration::from_millis(300));
    let req = ClaimRequest {
        resource: "deploy".into(),
        repo: REPO.into(),
        description: "deploying".into(),
        files: vec!["deploy/**".into()],
        mode: Mode::Exclusive,
        session: "s-a".into(),
        name: None,
        follow: None,
        ttl_ms: None,
        takeover: None,
    };
    let (mut claims, mut releases) = (vec![], vec![]);
    for _ in 0..CLAIMS {
        let t = Instant::now();
        assert!(matches!(a.lease_claim(&req).unwrap(), ClaimOutcome::Granted { .. }));
        wait_for("denied after the claim", &home, true);
        claims.push(t.elapsed());
        let t = Instant::now();
        a.lease_release("deploy", Some("s-a"), None).unwrap();
        wait_for("allowed after the release", &home, false);
        releases.push(t.elapsed());
    }
    stop.store(true, Ordering::SeqCst);
    // B's poller ends after its current wait (at most one long poll).
    let _ = poller.join();
    claims.sort();
    releases.sort();
    (claims, releases)
}

fn report(server: &str, claims: &[Duration], releases: &[Duration]) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "lease wake-up via {server}, {CLAIMS} claims: claim -> B's guard denies p50 {:.1} ms, p99 {:.1} ms; \
         release -> B's guard allows p50 {:.1} ms, p99 {:.1} ms",
        ms(percentile(claims, 50)),
        ms(percentile(claims, 99)),
        ms(percentile(releases, 50)),
        ms(percentile(releases, 99)),
    );
    for (what, v) in [("claim", claims), ("release", releases)] {
        assert!(percentile(v, 99) < Duration::from_secs(1), "{server}: {what} p99 {:?}", percentile(v, 99));
    }
}

#[test]
fn another_pcs_guard_hears_of_a_claim_within_a_second_through_pcmail_serve() {
    // No keyring here: the PCs' secret comes from the environment (nextest
    // runs each test in a process of its own).
    std::env::set_var("PCMAIL_TOKEN", TOKEN);
    let dir = tempfile::tempdir().unwrap();
    let addr = pcmail_testkit::free_addr();
    let _server = serve_at(addr, &dir.path().join("server.db"), TOKEN, 2);
    let url = format!("http://{addr}/api");
    let (a, b) = (served_pc(dir.path(), &url, TOKEN, "pc-a"), served_pc(dir.path(), &url, TOKEN, "pc-b"));
    // The daemon's long poll (20 s) and its pause between polls against `pcmail serve` (none).
    let (claims, releases) = measure(a, b, 20_000, Duration::ZERO);
    report("pcmail serve", &claims, &releases);
}

#[test]
fn another_pcs_guard_hears_of_a_claim_within_a_second_on_the_embedded_server() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("server.db");
    let embedded = |label: &str| {
        let t = Embedded::open(&db, label, system_now).unwrap();
        client(dir.path(), label, ServerConfig::Embedded { db: Some(db.clone()) }, Box::new(t))
    };
    let (a, b) = (embedded("pc-a"), embedded("pc-b"));
    // The daemon's pause between polls on the embedded server (2 s by default).
    let (claims, releases) = measure(a, b, 0, Duration::from_secs(2));
    report("the embedded server", &claims, &releases);
}
