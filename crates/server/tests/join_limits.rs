//! Failed join attempts on the Rust engine, with the peer the HTTP layer
//! passes in: limited per peer (an IPv6 /64 as one) and per label, held in
//! the database (two engines on one file share the count), a right code
//! joins through any flood, a flood adds a bounded number of audit rows, and
//! a known label and an unknown one cost the same.

use pcmail_server::{Engine, EngineConfig};
use serde_json::{json, Value};
use std::net::IpAddr;
use std::time::{Duration, Instant};

const T0: i64 = 1_767_225_600_000;
const ADMIN: &str = "adm1n-s3cret";
const CODE: &str = "0123456789abcdef0123456789abcd01";

fn engine_at(path: &std::path::Path) -> Engine {
    Engine::open(path, EngineConfig { token: Some(ADMIN.into()), ..Default::default() }).unwrap()
}

fn admin(e: &Engine, op: &str, args: Value) -> Value {
    let r = e.handle_value(&json!({"v": 1, "op": op, "pc": "pc-admin", "token": ADMIN, "args": args}), T0);
    assert_eq!(r["ok"], json!(true), "{op}: {r}");
    r
}

fn join(e: &Engine, label: &str, code: &str, peer: &str, now: i64) -> Value {
    let req =
        json!({"v": 1, "op": "join", "pc": label, "cred": "e".repeat(64), "args": {"code": code, "hostname": "H"}});
    let req = pcmail_core::protocol::parse_request(&req).unwrap();
    e.handle_request_from(&req, now, Some(peer.parse::<IpAddr>().unwrap()))
}

fn code_of(r: &Value) -> &str {
    r["error"]["code"].as_str().unwrap_or("ok")
}

fn wrong(n: u32) -> String {
    format!("{n:032x}")
}

#[test]
fn each_peer_has_its_own_limit_and_an_ipv6_subscriber_is_one_peer() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine_at(&dir.path().join("serve.db"));
    for i in 0..30u32 {
        assert_eq!(code_of(&join(&e, &format!("pc-l{i}"), &wrong(i + 10), "2001:db8:1:2::1", T0)), "join_code_invalid");
    }
    // The same /64, another address in it: the same peer, over its limit.
    assert_eq!(code_of(&join(&e, "pc-new", &wrong(99), "2001:db8:1:2:ffff::9", T0)), "rate_limited");
    // Another subscriber, and an IPv4 peer: their own limits.
    assert_eq!(code_of(&join(&e, "pc-new", &wrong(98), "2001:db8:1:3::1", T0)), "join_code_invalid");
    assert_eq!(code_of(&join(&e, "pc-new", &wrong(97), "192.0.2.7", T0)), "join_code_invalid");
    let log = admin(&e, "roster.log", json!({"limit": 3}));
    assert_eq!(log["entries"][0]["by"], json!("192.0.2.7"));
    assert_eq!(log["entries"][2]["by"], json!("2001:db8:1:2:ffff::9"), "the log shows the address itself");
    assert_eq!(log["entries"][2]["action"], json!("join-throttled"));
}

#[test]
fn the_limit_is_in_the_database_so_two_engines_on_one_file_share_it() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (engine_at(&dir.path().join("serve.db")), engine_at(&dir.path().join("serve.db")));
    admin(&a, "roster.enrol", json!({"label": "pc-b", "hostname": "B", "code": CODE}));
    for i in 0..10u32 {
        let e = if i % 2 == 0 { &a } else { &b };
        assert_eq!(code_of(&join(e, "pc-b", &wrong(i + 10), &format!("192.0.2.{i}"), T0)), "join_code_invalid");
    }
    assert_eq!(code_of(&join(&b, "pc-b", &wrong(50), "192.0.2.77", T0)), "rate_limited", "10 failures through a and b");
    assert_eq!(code_of(&join(&a, "pc-b", &wrong(51), "192.0.2.78", T0)), "rate_limited");
    // The window ends for both.
    assert_eq!(code_of(&join(&a, "pc-b", &wrong(52), "192.0.2.79", T0 + 600_000)), "join_code_invalid");
}

#[test]
fn a_right_code_joins_through_any_flood_and_the_flood_adds_few_rows() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine_at(&dir.path().join("serve.db"));
    admin(&e, "roster.enrol", json!({"label": "pc-b", "hostname": "B", "code": CODE}));
    let before = e.dump_rows().unwrap().iter().filter(|r| r.starts_with("audit:")).count();
    // One attacker address and many, at one label and at many.
    for i in 0..2_000u32 {
        let peer =
            if i % 2 == 0 { "198.51.100.1".to_string() } else { format!("198.51.{}.{}", 101 + i / 250, i % 250) };
        let label = if i % 3 == 0 { "pc-b".to_string() } else { format!("pc-x{}", i % 400) };
        let r = join(&e, &label, &wrong(1000 + i), &peer, T0 + i64::from(i));
        assert!(matches!(code_of(&r), "join_code_invalid" | "rate_limited"), "{r}");
    }
    let rows = e.dump_rows().unwrap().iter().filter(|r| r.starts_with("audit:")).count() - before;
    // A row each under the limits, one per limit and key past them, within a
    // budget of 300 a window; the rest are counted in one more.
    assert_eq!(rows as i64, pcmail_core::auth::JOIN_AUDIT_ROWS_PER_WINDOW + 1, "audit rows for 2,000 failed joins");
    let log = admin(&e, "roster.log", json!({"limit": 500}));
    let overflow: Vec<&Value> = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["detail"].as_str().is_some_and(|d| d.contains("not logged one by one")))
        .collect();
    assert_eq!(overflow.len(), 1, "one entry counts what the budget left out");
    let counted: i64 = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| matches!(r["action"].as_str(), Some("join-failed" | "join-throttled")))
        .map(|r| match r["action"].as_str() {
            Some("join-failed") => 1,
            _ => r["detail"].as_str().unwrap().split(' ').next().unwrap().parse::<i64>().unwrap(),
        })
        .sum();
    assert_eq!(counted, 2_000, "every failure is in the log, one by one or counted");
    // The right code, from the flooding address, for the flooded label.
    let req =
        json!({"v": 1, "op": "join", "pc": "pc-b", "cred": "b".repeat(64), "args": {"code": CODE, "hostname": "B"}});
    let req = pcmail_core::protocol::parse_request(&req).unwrap();
    let r = e.handle_request_from(&req, T0 + 3_000, Some("198.51.100.1".parse().unwrap()));
    assert_eq!(r["ok"], json!(true), "{r}");
    // The windows end and their rows go with the next failure.
    join(&e, "pc-z", &wrong(7), "203.0.113.1", T0 + 3_000 + 600_000);
    let left = e.dump_rows().unwrap().iter().filter(|r| r.starts_with("join_attempt:")).count();
    assert_eq!(left, 3, "only the new failure's windows are left: its label, its peer, the row budget");
}

/// Each wrong join for an enrolled label and for a label nobody enrolled,
/// interleaved, on a database with 300 enrolled labels: the same answer and
/// (the medians of 300 each) the same time.
#[test]
fn a_known_and_an_unknown_label_answer_alike_and_take_alike() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine_at(&dir.path().join("serve.db"));
    for i in 0..300u32 {
        admin(&e, "roster.enrol", json!({"label": format!("pc-k{i}"), "code": wrong(100_000 + i)}));
    }
    let (mut known, mut unknown) = (Vec::new(), Vec::new());
    for i in 0..300u32 {
        let t = Instant::now();
        let a = join(&e, &format!("pc-k{i}"), &wrong(i + 1), &format!("10.1.{}.{}", i / 200, i % 200), T0);
        known.push(t.elapsed());
        let t = Instant::now();
        let b = join(&e, &format!("pc-u{i}"), &wrong(i + 1), &format!("10.2.{}.{}", i / 200, i % 200), T0);
        unknown.push(t.elapsed());
        assert_eq!(a["error"], b["error"], "attempt {i}");
    }
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let (k, u) = (median(known), median(unknown));
    let ratio = k.as_secs_f64() / u.as_secs_f64();
    eprintln!("wrong join: enrolled label median {k:?}, unknown label median {u:?} (ratio {ratio:.2})");
    assert!((0.67..1.5).contains(&ratio), "known {k:?} vs unknown {u:?}");
}
