//! Jobs over HTTP, on a real server on 127.0.0.1 port 0 with a
//! real database file: eight sessions submitting the same job at once get
//! one job (seven joined), `force` makes a second; a submit wakes the
//! executor's long poll with the job offered; the submitter hears of the end
//! once.

mod common;

use pcmail_testkit::{call, Loopback};
use serde_json::{json, Value};
use std::time::Duration;

const TOKEN: &str = "jobs-http-token";

fn req(pc: &str, op: &str, args: Value) -> Value {
    pcmail_testkit::req(pc, op, TOKEN, args)
}

fn whitelist() -> Value {
    json!({"hash": "wl-1", "allowedSubmitters": ["pc-a", "pc-c"], "checkouts": ["app"], "commands": [
        {"name": "test", "subject": "checkout", "timeLimitMs": 600000, "artifacts": [], "readOnly": false,
         "chunked": false, "verify": false, "description": "",
         "args": [{"name": "checkout", "type": "checkout", "required": true, "values": ["app"]}]}]})
}

fn submit(id: &str, pc: &str, session: &str, force: bool) -> Value {
    req(
        pc,
        "job.submit",
        json!({"jobId": id, "target": "pc-b", "command": "test", "args": {"checkout": "app"},
        "force": force, "submitter": {"pc": pc, "session": session}}),
    )
}

/// The server with `pc-a`, `pc-b` and `pc-c` on its roster, `pc-b` taking
/// jobs under the whitelist.
async fn server() -> Loopback {
    let s = common::serve_registered(TOKEN, &["pc-a", "pc-b", "pc-c"]).await;
    let r = call(&s.url, req("pc-b", "poll", json!({"job": {"whitelist": whitelist(), "take": true}}))).await;
    assert_eq!(r["job"]["whitelistHash"], json!("wl-1"), "{r}");
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_concurrent_submits_make_one_job_and_force_a_second() {
    let server = server().await;
    let url = server.url.clone();
    let r = call(&url, req("pc-a", "hello", json!({}))).await;
    assert!(r["features"].as_array().unwrap().contains(&json!("jobs")), "{r}");

    let submits = (0..8).map(|i| {
        let url = url.clone();
        let pc = if i % 2 == 0 { "pc-a" } else { "pc-c" };
        tokio::spawn(async move { call(&url, submit(&format!("job-1-0000000{i}"), pc, &format!("s{i}"), false)).await })
    });
    let answers: Vec<Value> = futures_join(submits).await;
    let ids: Vec<&Value> = answers.iter().map(|a| &a["job"]["id"]).collect();
    assert!(answers.iter().all(|a| a["ok"] == json!(true)), "{answers:?}");
    assert!(ids.iter().all(|id| *id == ids[0]), "one job for all: {ids:?}");
    assert_eq!(answers.iter().filter(|a| a["deduped"] == json!(false)).count(), 1, "{answers:?}");
    let id = ids[0].as_str().unwrap().to_string();
    let r = call(&url, req("pc-a", "job.status", json!({"jobId": id}))).await;
    assert_eq!(r["job"]["joined"], json!(7), "{r}");
    assert_eq!(r["job"]["state"], json!("queued"), "{r}");

    // --force always runs again.
    let r = call(&url, submit("job-2-0000000f", "pc-a", "s9", true)).await;
    assert_eq!(r["deduped"], json!(false), "{r}");
    assert_ne!(r["job"]["id"], json!(id), "{r}");
    let r = call(&url, req("pc-b", "poll", json!({"job": {"take": true}}))).await;
    assert_eq!(r["job"]["offered"].as_array().unwrap().len(), 2, "two jobs offered: {r}");

    // One run: both submitting PCs hear of the end once.
    let r = call(&url, req("pc-b", "job.start", json!({"jobId": id, "runner": "pc-b/1", "startedAt": 1}))).await;
    assert_eq!(r["job"]["state"], json!("running"), "{r}");
    let r = call(
        &url,
        req(
            "pc-b",
            "job.report",
            json!({"jobId": id, "runner": "pc-b/1", "state": "ok",
        "result": {"ran": true, "exit": 0, "durationMs": 1, "output": "x".repeat(70_000) + "END"}}),
        ),
    )
    .await;
    assert_eq!(r["job"]["result"]["truncated"], json!(true), "the server caps output too");
    assert_eq!(r["job"]["result"]["output"].as_str().unwrap().len(), 64 * 1024);
    assert!(r["job"]["result"]["output"].as_str().unwrap().ends_with("END"));
    for pc in ["pc-a", "pc-c"] {
        let r = call(&url, req(pc, "poll", json!({"job": {}}))).await;
        let finished = r["job"]["finished"].as_array().unwrap();
        assert_eq!(finished.len(), 1, "{pc}: {r}");
        assert_eq!(finished[0]["id"], json!(id));
        let r = call(&url, req(pc, "poll", json!({"job": {}}))).await;
        assert_eq!(r["job"]["finished"], json!([]), "told once: {r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submit_wakes_the_executors_long_poll_with_the_job_offered() {
    let server = server().await;
    let url = server.url.clone();
    let waiting = {
        let url = url.clone();
        tokio::spawn(
            async move { call(&url, req("pc-b", "poll", json!({"waitMs": 20000, "job": {"take": true}}))).await },
        )
    };
    // Whether the submit lands before or during the wait, the poll answers with the job.
    let r = call(&url, submit("job-3-00000001", "pc-a", "s1", false)).await;
    assert_eq!(r["ok"], json!(true), "{r}");
    let r = tokio::time::timeout(Duration::from_secs(15), waiting).await.expect("the long poll woke").unwrap();
    assert_eq!(r["job"]["offered"][0]["id"], json!("job-3-00000001"), "{r}");
    assert_eq!(r["job"]["whitelistHash"], json!("wl-1"), "{r}");

    // A cancel request wakes it too.
    let r =
        call(&url, req("pc-b", "job.start", json!({"jobId": "job-3-00000001", "runner": "pc-b/1", "startedAt": 1})))
            .await;
    assert_eq!(r["ok"], json!(true), "{r}");
    let waiting = {
        let url = url.clone();
        tokio::spawn(async move {
            call(
                &url,
                req("pc-b", "poll", json!({"waitMs": 20000, "job": {"take": true, "running": ["job-3-00000001"]}})),
            )
            .await
        })
    };
    let r = call(&url, req("pc-a", "job.cancel", json!({"jobId": "job-3-00000001", "by": "pc-a/s1"}))).await;
    assert_eq!(r["job"]["cancelRequested"], json!(true), "{r}");
    let r = tokio::time::timeout(Duration::from_secs(15), waiting).await.expect("the long poll woke").unwrap();
    assert_eq!(r["job"]["cancel"], json!(["job-3-00000001"]), "{r}");
}

async fn futures_join(tasks: impl Iterator<Item = tokio::task::JoinHandle<Value>>) -> Vec<Value> {
    let handles: Vec<_> = tasks.collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}
