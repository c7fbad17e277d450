//! Leases over HTTP: a PC waiting in a long poll hears at once that its lease
//! was taken over (the takeover wakes it), with its own renewal of the first
//! pass kept in the answer.

mod common;

use pcmail_testkit::post;
use serde_json::{json, Value};
use std::time::Duration;

const TOKEN: &str = "lease-http-token";

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
    let server = common::serve_registered(TOKEN, &["pc-a"]).await;
    let url = server.url.clone();
    let r = post(&url, claim("c-1", "s1", None)).await;
    assert_eq!(r["lease"]["fence"], json!(1), "{r}");
    let r = post(&url, json!({"v":1,"op":"poll","pc":"pc-a","token":TOKEN,"args":{"lease":{"known":0}}})).await;
    let known = r["lease"]["version"].as_i64().unwrap();
    assert!(r["lease"]["list"].is_array(), "{r}");

    let waiting = {
        let url = url.clone();
        tokio::spawn(async move {
            post(
                &url,
                json!({"v":1,"op":"poll","pc":"pc-a","token":TOKEN,"args":{"waitMs":20000,
                "lease":{"renew":[{"resource":"staging-deploy","fence":1}],"known":known}}}),
            )
            .await
        })
    };
    // Let the poll settle into its wait (as http.rs's long-poll tests do).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = post(&url, claim("c-2", "s2", Some(json!({"evidence":"process_gone","reason":"s1 exited"})))).await;
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
}

/// Another PC's edit guard hears of a claim and of a release at once: a
/// lease change in a repo wakes the long polls of the PCs that have a live
/// session in that repo (not only the holder's), and their answer carries
/// the new lease list. A PC with no session in the repo is not woken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_change_in_a_repo_wakes_the_long_polls_of_the_pcs_with_sessions_in_it() {
    let server = common::serve_registered(TOKEN, &["pc-a", "pc-b", "pc-c"]).await;
    let url = server.url.clone();
    let repo = "github.com/o/r";
    let session_in = |repo: &str| json!({"live": [{"session": "s-b", "repo": repo, "idleMs": 0, "leases": []}]});
    // pc-b has a session in the repo, pc-c in another one; both report it and learn the version.
    let mut known = 0;
    for (pc, r) in [("pc-b", repo), ("pc-c", "github.com/o/other")] {
        let a = post(
            &url,
            json!({"v":1,"op":"poll","pc":pc,"token":TOKEN,"args":{"lease":{"known":0},"sessions":session_in(r)}}),
        )
        .await;
        known = a["lease"]["version"].as_i64().unwrap();
    }
    let long_poll = |pc: &'static str, r: &'static str, known: i64| {
        let url = url.clone();
        tokio::spawn(async move {
            let t = std::time::Instant::now();
            let a = post(
                &url,
                json!({"v":1,"op":"poll","pc":pc,"token":TOKEN,"args":{"waitMs":6000,"lease":{"known":known},
                    "sessions":{"live":[{"session":"s","repo":r,"idleMs":0,"leases":[]}]}}}),
            )
            .await;
            (a, t.elapsed())
        })
    };
    for (step, body) in [
        (
            "claim",
            json!({"v":1,"op":"lease.claim","pc":"pc-a","token":TOKEN,"args":{"claimId":"c-1","resource":"deploy",
                "repo":repo,"description":"deploy","files":["deploy/"],"mode":"exclusive",
                "holder":{"pc":"pc-a","session":"s1","name":null}}}),
        ),
        (
            "release",
            json!({"v":1,"op":"lease.release","pc":"pc-a","token":TOKEN,"args":{"resource":"deploy","fence":1,"by":"pc-a/s1"}}),
        ),
    ] {
        let b = long_poll("pc-b", "github.com/o/r", known);
        let c = long_poll("pc-c", "github.com/o/other", known);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let r = post(&url, body).await;
        assert_eq!(r["ok"], json!(true), "{step}: {r}");
        let (a, took) = tokio::time::timeout(Duration::from_secs(15), b).await.unwrap().unwrap();
        assert!(took < Duration::from_secs(2), "{step}: pc-b's long poll woke in {took:?}: {a}");
        let list = a["lease"]["list"].as_array().unwrap_or_else(|| panic!("{step}: the new list: {a}"));
        assert_eq!(list.len(), usize::from(step == "claim"), "{step}: {a}");
        known = a["lease"]["version"].as_i64().unwrap();
        let (a, took) = tokio::time::timeout(Duration::from_secs(15), c).await.unwrap().unwrap();
        assert!(took >= Duration::from_secs(5), "{step}: pc-c has no session in the repo: not woken ({took:?}): {a}");
    }
}
