//! Claim storm: 8 clients × 500 claim/release cycles on one
//! resource, through the HTTP server (`pcmail serve`'s code on a loopback
//! port, a real SQLite file) and through the embedded engine (8 engines on
//! one file, as 8 CLI processes would open it). Afterwards the server's
//! lease timeline (`lease_event`, in commit order) must show never two
//! exclusive holders at once, and fences growing by one with every grant.

mod common;
use pcmail_server::{Engine, EngineConfig};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const CLIENTS: usize = 8;
const CYCLES: usize = 500;
const RESOURCE: &str = "storm/one";
const TOKEN: &str = "storm-token";

fn label(i: usize) -> String {
    format!("pc-{i}")
}

fn claim(i: usize, n: usize) -> Value {
    json!({"v":1,"op":"lease.claim","pc":label(i),"token":TOKEN,"args":{
        "claimId": format!("c-{i}-{n}"), "resource": RESOURCE, "repo": "", "description": "storm",
        "files": [], "mode": "exclusive", "holder": {"pc": label(i), "session": format!("s{i}"), "name": null}}})
}

fn release(i: usize, fence: i64) -> Value {
    json!({"v":1,"op":"lease.release","pc":label(i),"token":TOKEN,"args":{
        "resource": RESOURCE, "fence": fence, "by": format!("{}/s{i}", label(i))}})
}

/// One client's cycles through `call`: claim until granted (a `held` answer
/// is retried after a short backoff, as a script waiting for a lock would),
/// then release. Returns the fences it was granted, in order, and how many
/// requests it made.
fn cycles(i: usize, mut call: impl FnMut(Value) -> Value) -> (Vec<i64>, usize) {
    let mut fences = Vec::with_capacity(CYCLES);
    let mut requests = 0;
    for n in 0..CYCLES {
        let mut tries = 0u64;
        let fence = loop {
            let r = call(claim(i, n));
            requests += 1;
            if r["ok"] == json!(true) {
                break r["lease"]["fence"].as_i64().expect("a granted lease has a fence");
            }
            let code = r["error"]["code"].as_str().unwrap_or("");
            assert!(matches!(code, "held" | "busy"), "client {i} cycle {n}: unexpected answer {r}");
            // Not a wait for work: it keeps 7 contenders from starving the holder's release.
            tries += 1;
            std::thread::sleep(Duration::from_micros(200 * tries.min(10)));
        };
        requests += 1;
        let r = call(release(i, fence));
        assert_eq!(r["released"], json!(true), "client {i} released fence {fence}: {r}");
        fences.push(fence);
    }
    (fences, requests)
}

/// Walks the timeline in commit order: at most one live exclusive holder at
/// any point, every grant's fence one past the previous grant's.
fn check_timeline(db: &Path, results: Vec<(Vec<i64>, usize)>, what: &str, started: Instant) {
    let requests: usize = results.iter().map(|r| r.1).sum();
    eprintln!("{what}: {} cycles, {requests} requests in {:.2?}", CLIENTS * CYCLES, started.elapsed());
    let per_client: Vec<Vec<i64>> = results.into_iter().map(|r| r.0).collect();
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn.prepare("SELECT event, fence FROM lease_event WHERE resource = ?1 ORDER BY seq").unwrap();
    let events: Vec<(String, i64)> =
        stmt.query_map([RESOURCE], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().collect::<Result<_, _>>().unwrap();
    let mut holder: Option<i64> = None;
    let mut last_fence = 0;
    let mut grants = 0;
    for (k, (event, fence)) in events.iter().enumerate() {
        match event.as_str() {
            "granted" => {
                assert!(holder.is_none(), "event {k}: fence {fence} granted while fence {holder:?} was held");
                assert_eq!(*fence, last_fence + 1, "event {k}: fences must grow by one");
                holder = Some(*fence);
                last_fence = *fence;
                grants += 1;
            }
            "released" => {
                assert_eq!(holder, Some(*fence), "event {k}: released fence {fence} that was not the holder");
                holder = None;
            }
            other => panic!("event {k}: unexpected {other} in a storm without takeovers or staleness"),
        }
    }
    assert_eq!(grants, CLIENTS * CYCLES);
    assert!(holder.is_none());
    // Each client saw its own fences strictly increase, and no fence went to two clients.
    let mut all: Vec<i64> = per_client.iter().flatten().copied().collect();
    for f in &per_client {
        assert!(f.windows(2).all(|w| w[0] < w[1]), "a client's fences went backwards");
    }
    all.sort_unstable();
    assert_eq!(all, (1..=(CLIENTS * CYCLES) as i64).collect::<Vec<_>>());
}

fn register(call: &mut impl FnMut(Value) -> Value) {
    for i in 0..CLIENTS {
        let r = call(
            json!({"v":1,"op":"roster.set","pc":label(i),"token":TOKEN,"args":{"label":label(i),"hostname":format!("H{i}")}}),
        );
        assert_eq!(r["ok"], json!(true), "{r}");
    }
}

#[test]
fn embedded_storm_never_has_two_holders() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("server.db");
    let config = || EngineConfig { token: Some(TOKEN.into()), ..Default::default() };
    let first = Engine::open(&db, config()).unwrap();
    register(&mut |v| first.handle_value(&v, pcmail_server::http::now_ms()));
    drop(first);
    // One engine (one connection) per client: the CLI processes of the embedded default.
    let started = Instant::now();
    let handles: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let db = db.clone();
            std::thread::spawn(move || {
                let engine = Engine::open(&db, config()).unwrap();
                cycles(i, |v| engine.handle_value(&v, pcmail_server::http::now_ms()))
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    check_timeline(&db, results, "embedded, 8 engines on one file", started);
}

#[test]
fn http_storm_never_has_two_holders() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("server.db");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    // The database outside the server's own folder: the timeline is read after the server is gone.
    let server = rt.block_on(common::serve_with(TOKEN, |opts, _| opts.db_path = db.clone()));
    let url = server.url.clone();
    let rt = Arc::new(rt);
    let client = reqwest::Client::new();
    let post = {
        let (rt, url, client) = (rt.clone(), url.clone(), client.clone());
        move |v: Value| -> Value {
            rt.block_on(async { client.post(&url).json(&v).send().await.unwrap().json::<Value>().await.unwrap() })
        }
    };
    register(&mut post.clone());
    // 8 client threads, each its own blocking caller over loopback HTTP.
    let started = Instant::now();
    let handles: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let post = post.clone();
            std::thread::spawn(move || cycles(i, post))
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    drop(server);
    check_timeline(&db, results, "HTTP, pcmail serve on loopback", started);
}
