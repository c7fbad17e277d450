//! The webhook against a local receiver that answers like Discord does from
//! Google's addresses: 429 with Retry-After, errors, then success.

mod common;

use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use common::{engine_with_open_alert, MIN, T0};
use pcmail_server::Engine;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

/// A receiver that answers from `script` in order (then 204); records each body.
async fn receiver(script: Vec<(u16, Option<&'static str>, &'static str)>) -> (String, Arc<Mutex<Vec<Value>>>) {
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let script = Arc::new(Mutex::new(script.into_iter().collect::<std::collections::VecDeque<_>>()));
    let b = bodies.clone();
    let app = Router::new().route(
        "/hook",
        post(move |body: axum::Json<Value>| {
            let (b, script) = (b.clone(), script.clone());
            async move {
                b.lock().unwrap().push(body.0);
                let next = script.lock().unwrap().pop_front();
                let (code, retry, text) = next.unwrap_or((204, None, ""));
                let mut headers = HeaderMap::new();
                if let Some(r) = retry {
                    headers.insert("retry-after", r.parse().unwrap());
                }
                (StatusCode::from_u16(code).unwrap(), headers, text.to_string())
            }
        }),
    );
    let url = common::serve_app(app).await;
    (format!("{url}/hook"), bodies)
}

fn the_alert(e: &Engine, now: i64) -> Value {
    let r = e.handle_value(&json!({"v":1,"op":"alerts","pc":"pc-a"}), now);
    assert_eq!(r["alerts"].as_array().map(Vec::len), Some(1), "{r}");
    r["alerts"][0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_is_honoured_without_using_up_a_try_and_the_error_is_on_the_alert() {
    let (url, bodies) = receiver(vec![(429, Some("600"), "error code: 1015")]).await;
    let e = engine_with_open_alert(&url);
    let client = reqwest::Client::new();
    assert_eq!(pcmail_server::webhook::flush(e.clone(), &client, T0 + 31 * MIN).await.unwrap(), 0);
    let a = the_alert(&e, T0 + 31 * MIN);
    assert_eq!((a["posted"].clone(), a["postTries"].clone()), (json!(false), json!(0)));
    assert_eq!(a["lastError"], json!("HTTP 429 (retry after 600 s): error code: 1015"));
    // Before Retry-After has passed nothing is posted.
    assert_eq!(pcmail_server::webhook::flush(e.clone(), &client, T0 + 35 * MIN).await.unwrap(), 0);
    assert_eq!(bodies.lock().unwrap().len(), 1);
    assert_eq!(pcmail_server::webhook::flush(e.clone(), &client, T0 + 42 * MIN).await.unwrap(), 1);
    let a = the_alert(&e, T0 + 42 * MIN);
    assert_eq!(
        (a["posted"].clone(), a["postTries"].clone(), a["lastError"].clone()),
        (json!(true), json!(1), Value::Null)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_five_failures_the_alert_stays_listed_with_its_last_error() {
    let (url, bodies) = receiver(vec![(500, None, "boom"); 8]).await;
    let e = engine_with_open_alert(&url);
    let client = reqwest::Client::new();
    for i in 0..7 {
        pcmail_server::webhook::flush(e.clone(), &client, T0 + (32 + i) * MIN).await.unwrap();
    }
    assert_eq!(bodies.lock().unwrap().len(), 5);
    let a = the_alert(&e, T0 + 40 * MIN);
    assert_eq!(a["resolvedAt"], Value::Null);
    assert_eq!((a["posted"].clone(), a["postTries"].clone()), (json!(false), json!(5)));
    assert_eq!(a["lastError"], json!("HTTP 500: boom"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_shape_by_url_fragment_and_discord_by_default() {
    let (url, bodies) = receiver(vec![]).await;
    let e = engine_with_open_alert(&format!("{url}#slack"));
    assert_eq!(pcmail_server::webhook::flush(e, &reqwest::Client::new(), T0 + 31 * MIN).await.unwrap(), 1);
    let e = engine_with_open_alert(&url);
    assert_eq!(pcmail_server::webhook::flush(e, &reqwest::Client::new(), T0 + 31 * MIN).await.unwrap(), 1);
    let b = bodies.lock().unwrap();
    let keys: Vec<Vec<&String>> = b.iter().map(|v| v.as_object().unwrap().keys().collect()).collect();
    assert_eq!(keys, vec![vec!["text"], vec!["content"]]);
    assert!(b[0]["text"].as_str().unwrap().contains("mail-1-00000009"));
}
