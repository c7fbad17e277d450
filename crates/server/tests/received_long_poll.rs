//! A receiving PC's long poll (with `receivedSince`) wakes when the
//! server changes mail it received on its own (the sweep's `expired`), so
//! the PC records the server's time at once. HTTP on 127.0.0.1 port 0.

mod common;

use pcmail_testkit::call;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const TOKEN: &str = "received-long-poll-token";

fn req(pc: &str, op: &str, args: Value) -> Value {
    pcmail_testkit::req(pc, op, TOKEN, args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_asking_for_received_updates_wakes_on_a_server_side_expiry() {
    let server = common::serve_registered(TOKEN, &["pc-a", "pc-b"]).await;
    let url = server.url.clone();
    let id = "mail-1-0000e001";
    // Long enough to confirm it first (a poll after expiry would find it expired already).
    let r =
        call(&url, req("pc-a", "send", json!({"mail": {"id": id, "to": "pc-b", "body": "x", "expiresIn": 800}}))).await;
    let sent_at = Instant::now();
    assert_eq!(r["ok"], json!(true), "{r}");
    let r = call(&url, req("pc-b", "poll", json!({"confirm": [id], "receivedSince": 0}))).await;
    assert_eq!(r["receivedUpdates"][0]["state"], json!("delivered"), "{r}");
    let cursor = r["receivedCursor"].as_i64().unwrap();

    // An older client's long poll (no receivedSince) is not woken by it.
    let u = url.clone();
    let plain = tokio::spawn(async move { call(&u, req("pc-b", "poll", json!({"waitMs": 1500}))).await });
    let u = url.clone();
    let waiting = tokio::spawn(async move {
        let r = call(&u, req("pc-b", "poll", json!({"waitMs": 10000, "receivedSince": cursor}))).await;
        (r, Instant::now())
    });
    tokio::time::sleep_until((sent_at + Duration::from_millis(900)).into()).await;
    let swept_at = Instant::now();
    let r = call(&url, req("pc-a", "sweep", json!({}))).await;
    assert_eq!(r["expired"], json!(1), "{r}");

    let (r, got_at) = waiting.await.unwrap();
    let u = &r["receivedUpdates"][0];
    assert_eq!((&u["id"], &u["state"], &u["by"]), (&json!(id), &json!("expired"), &json!("server")), "{r}");
    assert!(r["receivedCursor"].as_i64().unwrap() > cursor);
    assert!(got_at.duration_since(swept_at) < Duration::from_secs(1), "took {:?}", got_at.duration_since(swept_at));

    let r = plain.await.unwrap();
    assert_eq!(r["ok"], json!(true));
    assert!(r.get("receivedUpdates").is_none(), "an older client's answer is unchanged: {r}");
}

/// A long poll is not woken by what its own PC did through another request
/// (the daemon's mark pusher): its store recorded the mark already, and a
/// wake-up would cost the PC a poll cycle for each mail it reads. The feed
/// entry comes with its next answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pcs_own_mark_does_not_wake_its_long_poll_and_comes_with_the_next_answer() {
    let server = common::serve_registered(TOKEN, &["pc-a", "pc-b"]).await;
    let url = server.url.clone();
    let id = "mail-1-0000e002";
    let r = call(&url, req("pc-a", "send", json!({"mail": {"id": id, "to": "pc-b", "body": "x"}}))).await;
    assert_eq!(r["ok"], json!(true), "{r}");
    let r = call(&url, req("pc-b", "poll", json!({"confirm": [id], "receivedSince": 0}))).await;
    let cursor = r["receivedCursor"].as_i64().unwrap();

    let u = url.clone();
    let waiting = tokio::spawn(async move {
        let started = Instant::now();
        let r = call(&u, req("pc-b", "poll", json!({"waitMs": 1500, "receivedSince": cursor}))).await;
        (r, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mark = json!({"markId": "m-seen-1", "id": id, "op": "seen", "at": 1, "by": "pc-b"});
    let r = call(&url, req("pc-b", "mark", json!({"marks": [mark]}))).await;
    assert_eq!(r["results"][0]["ok"], json!(true), "{r}");
    let (r, waited) = waiting.await.unwrap();
    assert!(waited >= Duration::from_millis(1400), "woken after {waited:?} by its own mark: {r}");

    let r = call(&url, req("pc-b", "poll", json!({"receivedSince": cursor}))).await;
    let u = &r["receivedUpdates"][0];
    assert_eq!((&u["id"], &u["state"], &u["by"]), (&json!(id), &json!("seen"), &json!("pc-b")), "{r}");
}
