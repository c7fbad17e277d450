//! The HTTP server on 127.0.0.1 port 0, driven by a reqwest client; the
//! webhook against a tiny local receiver.

mod common;

use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use common::{engine_with_open_alert, MIN, T0};
use pcmail_server::{serve_with_listener, ServeOptions};
use pcmail_testkit::{call, Loopback};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

const TOKEN: &str = "http-test-token";

/// The server with `pc-a` and `pc-b` on its roster.
async fn start() -> Loopback {
    common::serve_registered(TOKEN, &["pc-a", "pc-b"]).await
}

fn send_req(id: &str) -> Value {
    json!({"v":1,"op":"send","pc":"pc-a","token":TOKEN,"args":{"mail":{"id":id,"to":"pc-b","body":"=SUM(A1)"}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_poll_status_round_trip() {
    let s = start().await;
    let r = call(&s.url, send_req("mail-1-00000001")).await;
    assert_eq!(r["ids"], json!(["mail-1-00000001"]));
    let r = call(&s.url, json!({"v":1,"op":"poll","pc":"pc-b","token":TOKEN})).await;
    assert_eq!(r["mail"][0]["body"], json!("=SUM(A1)"));
    let r =
        call(&s.url, json!({"v":1,"op":"poll","pc":"pc-b","token":TOKEN,"args":{"confirm":["mail-1-00000001"]}})).await;
    assert_eq!(r["confirmed"], json!(["mail-1-00000001"]));
    let r =
        call(&s.url, json!({"v":1,"op":"status","pc":"pc-a","token":TOKEN,"args":{"ids":["mail-1-00000001"]}})).await;
    assert_eq!(r["mails"][0]["state"], json!("delivered"));
    assert_eq!(r["mails"][0]["timeline"][1]["by"], json!("pc-b"));
    let health: Value = reqwest::get(format!("{}/health", s.base)).await.unwrap().json().await.unwrap();
    assert_eq!(health["ok"], json!(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_poll_gets_mail_sent_while_waiting() {
    let s = start().await;
    let url = s.url.clone();
    let started = Instant::now();
    let waiting = tokio::spawn(async move {
        let r = call(&url, json!({"v":1,"op":"poll","pc":"pc-b","token":TOKEN,"args":{"waitMs":10000}})).await;
        (r, Instant::now())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent_at = Instant::now();
    assert_eq!(call(&s.url, send_req("mail-1-00000002")).await["ok"], json!(true));
    let (r, got_at) = waiting.await.unwrap();
    assert_eq!(r["mail"][0]["id"], json!("mail-1-00000002"), "{r}");
    assert!(got_at.duration_since(sent_at) < Duration::from_secs(1), "took {:?}", got_at.duration_since(sent_at));
    assert!(got_at.duration_since(started) >= Duration::from_millis(300), "answered before the mail existed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_poll_times_out_with_an_empty_answer() {
    let s = start().await;
    let t = Instant::now();
    let r = call(&s.url, json!({"v":1,"op":"poll","pc":"pc-b","token":TOKEN,"args":{"waitMs":400}})).await;
    assert_eq!(r["ok"], json!(true));
    assert_eq!(r["mail"], json!([]));
    assert!(t.elapsed() >= Duration::from_millis(400) && t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bad_and_unauthorized_bodies_answer_json() {
    let s = start().await;
    let big = format!(
        "{{\"v\":1,\"op\":\"hello\",\"pc\":\"pc-a\",\"token\":\"{TOKEN}\",\"pad\":\"{}\"}}",
        "x".repeat(300 * 1024)
    );
    let r = reqwest::Client::new().post(&s.url).body(big).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], json!("too_large"));

    let r = call(&s.url, json!({"v":1,"op":"hello","pc":"pc-a","token":"nope"})).await;
    assert_eq!(r["error"]["code"], json!("unauthorized"));
    let r = call(
        &s.url,
        json!({"v":1,"op":"send","pc":"pc-a","args":{"mail":{"id":"mail-1-00000003","to":"pc-b","body":"x"}}}),
    )
    .await;
    assert_eq!(r["error"]["code"], json!("unauthorized"));

    let r = reqwest::Client::new().post(&s.url).body("<html>").send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["code"], json!("bad_json"));
}

#[tokio::test]
async fn serve_refuses_an_empty_token() {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let err = serve_with_listener(listener, ServeOptions::new(dir.path().join("x.db"), " "), async {}).await;
    assert!(err.is_err());
}

/// A receiver that fails the first `fail_first` posts, then accepts.
async fn receiver(fail_first: usize) -> (String, Arc<AtomicUsize>, Arc<std::sync::Mutex<Vec<Value>>>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let bodies = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (h, b) = (hits.clone(), bodies.clone());
    let app = Router::new().route(
        "/hook",
        post(move |body: axum::Json<Value>| {
            let (h, b) = (h.clone(), b.clone());
            async move {
                let n = h.fetch_add(1, Ordering::SeqCst);
                b.lock().unwrap().push(body.0);
                if n < fail_first {
                    StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    StatusCode::NO_CONTENT
                }
            }
        }),
    );
    let url = common::serve_app(app).await;
    (format!("{url}/hook"), hits, bodies)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_retries_a_failed_post_then_posts_once() {
    let (url, hits, bodies) = receiver(1).await;
    let e = engine_with_open_alert(&url);
    let client = reqwest::Client::new();
    assert_eq!(pcmail_server::webhook::flush(e.clone(), &client, T0 + 31 * MIN).await.unwrap(), 0);
    let alerts = e.handle_value(&json!({"v":1,"op":"alerts","pc":"pc-a"}), T0 + 32 * MIN);
    assert_eq!(alerts["alerts"][0]["posted"], json!(false));
    // A later sweep updates the row in place; it is still one pending post.
    assert_eq!(e.run_sweep(T0 + 41 * MIN)["alerts"]["updated"], json!(1));
    assert_eq!(pcmail_server::webhook::flush(e.clone(), &client, T0 + 41 * MIN).await.unwrap(), 1);
    assert_eq!(pcmail_server::webhook::flush(e.clone(), &client, T0 + 51 * MIN).await.unwrap(), 0);
    assert_eq!(hits.load(Ordering::SeqCst), 2, "one failure, one success, then nothing");
    let alerts = e.handle_value(&json!({"v":1,"op":"alerts","pc":"pc-a"}), T0 + 52 * MIN);
    assert_eq!(alerts["alerts"][0]["posted"], json!(true));
    let b = bodies.lock().unwrap();
    let content = b[1]["content"].as_str().unwrap();
    assert!(content.contains("mail-1-00000009") && !content.contains('\n'), "{content}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_gives_up_after_five_tries() {
    let (url, hits, _) = receiver(usize::MAX).await;
    let e = engine_with_open_alert(&url);
    let client = reqwest::Client::new();
    for i in 0..8 {
        pcmail_server::webhook::flush(e.clone(), &client, T0 + (32 + i) * MIN).await.unwrap();
    }
    assert_eq!(hits.load(Ordering::SeqCst), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_webhook_does_not_block_the_sweep() {
    // Nothing listens on this port: the post fails fast and is recorded.
    let e = engine_with_open_alert("http://127.0.0.1:9/hook");
    let t = Instant::now();
    assert_eq!(pcmail_server::webhook::flush(e.clone(), &reqwest::Client::new(), T0 + 32 * MIN).await.unwrap(), 0);
    assert!(t.elapsed() < Duration::from_secs(6));
    assert_eq!(e.run_sweep(T0 + 42 * MIN)["ok"], json!(true));
}
