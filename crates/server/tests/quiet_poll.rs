//! A caught-up poll writes nothing: its heartbeat is recorded only once the
//! recorded one is a step old, so hundreds of idle PCs polling cost the
//! database no commits. Watched from a second connection through SQLite's
//! `data_version`, which moves only when another connection commits a change.

use pcmail_core::model::limits::POLL_RECORD_STEP_MS;
use pcmail_server::{Engine, EngineConfig};
use serde_json::json;

const T0: i64 = 1_800_000_000_000;

fn ok(engine: &Engine, req: serde_json::Value, now: i64) -> serde_json::Value {
    let r = engine.handle_value(&req, now);
    assert_eq!(r["ok"], json!(true), "{r}");
    r
}

fn poll(pc: &str, args: serde_json::Value) -> serde_json::Value {
    json!({"v": 1, "op": "poll", "pc": pc, "args": args})
}

#[test]
fn a_caught_up_poll_commits_no_change_until_its_heartbeat_is_a_step_old() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("serve.db");
    let engine = Engine::open(&db, EngineConfig::default()).unwrap();
    for pc in ["pc-a", "pc-b"] {
        ok(&engine, json!({"v": 1, "op": "roster.set", "pc": pc, "args": {"label": pc, "hostname": pc}}), T0);
    }
    let watcher = rusqlite::Connection::open(&db).unwrap();
    let version = || -> i64 { watcher.query_row("PRAGMA data_version", [], |r| r.get(0)).unwrap() };

    ok(&engine, poll("pc-a", json!({})), T0); // the first poll records its time
    let v0 = version();
    ok(&engine, poll("pc-a", json!({})), T0 + 1_000);
    ok(&engine, poll("pc-a", json!({})), T0 + POLL_RECORD_STEP_MS - 1);
    assert_eq!(version(), v0, "a caught-up poll within the record step changed the database");

    // A step later the heartbeat is written again…
    ok(&engine, poll("pc-a", json!({})), T0 + POLL_RECORD_STEP_MS);
    let v1 = version();
    assert_ne!(v1, v0, "the heartbeat a step old was not recorded");

    // …and a poll that has something to do still writes it (mail confirmed).
    let id = format!("mail-{T0}-0000beef");
    ok(
        &engine,
        json!({"v": 1, "op": "send", "pc": "pc-b", "args": {"mail": {"id": id, "to": "pc-a", "body": "b"}}}),
        T0 + 10_001,
    );
    let v2 = version();
    let r = ok(&engine, poll("pc-a", json!({"confirm": [id]})), T0 + 10_002);
    assert_eq!(r["confirmed"], json!([id]));
    assert_ne!(version(), v2);

    // A clock set back below the recorded time records the earlier one.
    let v3 = version();
    ok(&engine, poll("pc-a", json!({})), T0 - 60_000);
    assert_ne!(version(), v3, "a recorded poll ahead of the clock was kept");
}
