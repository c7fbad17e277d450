//! A label bound to one installation, on the HTTP server: a bound label's long poll needs its
//! credential — the wrong one is answered at once and keeps no waiter, the
//! right one waits and is woken (the re-poll after the wake carries it too).

mod common;

use pcmail_core::protocol::parse_request;
use pcmail_server::{Engine, EngineConfig};
use pcmail_testkit::{post, register};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const TOKEN: &str = "label-test-token";
const CRED_B: &str = "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2";
const CRED_X: &str = "0000000000000000000000000000000000000000000000000000000000000000";

fn poll(cred: Option<&str>, wait_ms: i64) -> Value {
    json!({"v":1,"op":"poll","pc":"pc-b","token":TOKEN,"cred":cred,"args":{"waitMs":wait_ms}})
}

#[test]
fn only_the_bound_credential_may_hold_a_long_poll() {
    let e = Engine::open_in_memory(EngineConfig { token: Some(TOKEN.into()), ..Default::default() }).unwrap();
    let may = |cred: Option<&str>| e.may_long_poll(&parse_request(&poll(cred, 1000)).unwrap());
    let set = |args: Value, cred: Option<&str>| {
        e.handle_value(&json!({"v":1,"op":"roster.set","pc":"pc-b","token":TOKEN,"cred":cred,"args":args}), 1)
    };
    assert_eq!(set(json!({"label":"pc-b","hostname":"B"}), None)["ok"], json!(true));
    assert!(may(None) && may(Some(CRED_X)), "an unbound label waits as before");
    assert_eq!(set(json!({"label":"pc-b","hostname":"B","claim":true}), Some(CRED_B))["bound"], json!(true));
    assert!(may(Some(CRED_B)));
    assert!(!may(None) && !may(Some(CRED_X)), "another installation keeps no waiter");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_label_long_polls_with_its_credential() {
    let server = common::serve(TOKEN).await;
    let url = server.url.clone();
    let claim = json!({"v":1,"op":"roster.set","pc":"pc-b","token":TOKEN,"cred":CRED_B,"args":{"label":"pc-b","hostname":"B","claim":true}});
    assert_eq!(post(&url, claim).await["bound"], json!(true));
    register(&url, TOKEN, &["pc-a"]).await;

    // The wrong credential is refused at once, not after the wait.
    let t = Instant::now();
    let r = post(&url, poll(Some(CRED_X), 20_000)).await;
    assert_eq!(r["error"]["code"], json!("label_taken"), "{r}");
    assert!(t.elapsed() < Duration::from_secs(10), "answered without waiting");

    // The owner waits and is woken by new mail.
    let waiting = tokio::spawn({
        let url = url.clone();
        async move { post(&url, poll(Some(CRED_B), 20_000)).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let send = json!({"v":1,"op":"send","pc":"pc-a","token":TOKEN,"args":{"mail":{"id":"mail-1-0000ab01","to":"pc-b","body":"hi"}}});
    assert_eq!(post(&url, send).await["ok"], json!(true));
    let r = waiting.await.unwrap();
    assert_eq!(r["mail"][0]["id"], json!("mail-1-0000ab01"), "{r}");
}
