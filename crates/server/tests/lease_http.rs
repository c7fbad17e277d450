//! Leases over HTTP: a PC waiting in a long poll hears at once that its lease
//! was taken over (the takeover wakes it), with its own renewal of the first
//! pass kept in the answer.

use pcmail_server::{serve_with_listener, ServeOptions};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::net::TcpListener;

const TOKEN: &str = "lease-http-token";

async fn call(url: &str, body: Value) -> Value {
    reqwest::Client::new().post(url).json(&body).send().await.unwrap().json().await.unwrap()
}

fn claim(id: &str, session: &str, takeover: Option<Value>) -> Value {
    let mut args = json!({"claimId": id, "resource": "staging-deploy", "repo": "", "description": "deploy",
        "files": [], "mode": "exclusive", "holder": {"pc": "pc-a", "session": session, "name": null}});
    if let Some(t) = takeover {
        args["takeover"] = t;
    }
    json!({"v":1,"op":"lease.claim","pc":"pc-a","token":TOKEN,"args":args})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_wakes_when_its_lease_is_taken_over() {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/api", listener.local_addr().unwrap());
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve_with_listener(listener, ServeOptions::new(dir.path().join("server.db"), TOKEN), async move {
        let _ = rx.await;
    }));
    let r =
        call(&url, json!({"v":1,"op":"roster.set","pc":"pc-a","token":TOKEN,"args":{"label":"pc-a","hostname":"A"}}))
            .await;
    assert_eq!(r["ok"], json!(true), "{r}");
    let r = call(&url, claim("c-1", "s1", None)).await;
    assert_eq!(r["lease"]["fence"], json!(1), "{r}");
    let r = call(&url, json!({"v":1,"op":"poll","pc":"pc-a","token":TOKEN,"args":{"lease":{"known":0}}})).await;
    let known = r["lease"]["version"].as_i64().unwrap();
    assert!(r["lease"]["list"].is_array(), "{r}");

    let waiting = {
        let url = url.clone();
        tokio::spawn(async move {
            call(
                &url,
                json!({"v":1,"op":"poll","pc":"pc-a","token":TOKEN,"args":{"waitMs":20000,
                "lease":{"renew":[{"resource":"staging-deploy","fence":1}],"known":known}}}),
            )
            .await
        })
    };
    // Let the poll settle into its wait (as http.rs's long-poll tests do).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = call(&url, claim("c-2", "s2", Some(json!({"evidence":"process_gone","reason":"s1 exited"})))).await;
    assert_eq!(r["lease"]["fence"], json!(2), "{r}");

    let r = tokio::time::timeout(Duration::from_secs(15), waiting).await.expect("the long poll woke").unwrap();
    assert_eq!(r["ok"], json!(true), "{r}");
    let lost = r["lease"]["lost"].as_array().unwrap();
    assert_eq!(lost.len(), 1, "{r}");
    assert_eq!(lost[0]["fence"], json!(1));
    assert_eq!(lost[0]["event"], json!("taken_over"));
    assert_eq!(lost[0]["takenBy"]["session"], json!("s2"));
    assert_eq!(r["lease"]["list"][0]["fence"], json!(2), "{r}");
    // The renewal of the first pass took (before the takeover) and is reported.
    assert_eq!(r["lease"]["renewed"], json!([1]), "{r}");
    let _ = stop.send(());
}
