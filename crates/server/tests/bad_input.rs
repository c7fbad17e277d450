//! Bad input: clear codes, no panic, and nothing stored half-way.

use pcmail_server::{Engine, EngineConfig};
use serde_json::{json, Value};

const T0: i64 = 1_767_225_600_000;
const TOKEN: &str = "s3cret";

fn engine() -> Engine {
    let e = Engine::open_in_memory(EngineConfig { token: Some(TOKEN.into()), ..Default::default() }).unwrap();
    for (i, pc) in ["pc-a", "pc-b", "pc-c"].iter().enumerate() {
        let r = e.handle_value(&req("roster.set", pc, json!({"label": pc, "hostname": format!("H{i}")})), T0);
        assert_eq!(r["ok"], json!(true), "{r}");
    }
    e
}

fn req(op: &str, pc: &str, args: Value) -> Value {
    json!({"v": 1, "op": op, "pc": pc, "token": TOKEN, "args": args})
}

fn code(r: &Value) -> &str {
    r["error"]["code"].as_str().unwrap_or("<ok>")
}

fn send(e: &Engine, from: &str, mail: Value, now: i64) -> Value {
    e.handle_value(&req("send", from, json!({"mail": mail})), now)
}

#[test]
fn failing_requests_leave_every_row_as_it_was() {
    let e = engine();
    assert_eq!(
        send(&e, "pc-a", json!({"id": "mail-1-0000000a", "to": "pc-b", "body": "auto", "auto": true}), T0)["ok"],
        json!(true)
    );
    assert_eq!(send(&e, "pc-a", json!({"id": "mail-1-0000000b", "to": "*", "body": "all"}), T0)["ok"], json!(true));
    // Jobs: pc-b publishes a whitelist, pc-a queues one job.
    let wl = json!({"hash": "h", "allowedSubmitters": ["pc-a"], "checkouts": ["app"], "commands": [{"name": "test",
        "timeLimitMs": 60000, "args": [{"name": "checkout", "type": "checkout", "required": true, "values": ["app"]}]}]});
    assert_eq!(e.handle_value(&req("poll", "pc-b", json!({"job": {"whitelist": wl}})), T0)["ok"], json!(true));
    let job = |id: &str, pc: &str, args: Value| {
        req(
            "job.submit",
            pc,
            json!({"jobId": id, "target": "pc-b", "command": "test", "args": args, "submitter": {"pc": pc, "session": "s"}}),
        )
    };
    assert_eq!(e.handle_value(&job("job-1-0000000a", "pc-a", json!({"checkout": "app"})), T0)["ok"], json!(true));
    let before = e.dump_rows().unwrap();
    assert!(before.len() > 5);
    let failing: Vec<(Value, &str)> = vec![
        (job("job-1-0000000b", "pc-a", json!({"checkout": "../app"})), "job_refused"),
        (job("job-1-0000000b", "pc-a", json!({"checkout": "app", "x": "\u{0}"})), "job_refused"),
        (job("job-1-0000000b", "pc-c", json!({"checkout": "app"})), "job_refused"),
        (job("job-1-0000000a", "pc-a", json!({"checkout": "app", "extra": 1})), "duplicate_id"),
        (
            req("job.start", "pc-c", json!({"jobId": "job-1-0000000a", "runner": "pc-c/1", "startedAt": T0})),
            "forbidden",
        ),
        (
            req(
                "job.report",
                "pc-b",
                json!({"jobId": "job-1-0000000a", "runner": "pc-b/1", "state": "ok", "result": {"ran": true}}),
            ),
            "conflict",
        ),
        (req("job.cancel", "pc-c", json!({"jobId": "job-1-0000000a", "by": "pc-c"})), "forbidden"),
        (req("job.status", "pc-a", json!({"jobId": "job-1-0000ffff"})), "not_found"),
        (req("send", "pc-zz", json!({"mail": {"id": "mail-1-0000000c", "to": "*", "body": "x"}})), "unknown_pc"),
        (req("send", "pc-a", json!({"mail": {"id": "mail-1-0000000c", "to": "pc", "body": "x"}})), "unknown_recipient"),
        (
            req("send", "pc-a", json!({"mail": {"id": "mail-1-0000000c", "to": "*", "body": "x", "hop": 3}})),
            "hop_limit",
        ),
        (
            req(
                "send",
                "pc-b",
                json!({"mail": {"id": "mail-1-0000000c", "to": "*", "body": "x", "auto": true, "inReplyTo": "mail-1-0000000a"}}),
            ),
            "loop_refused",
        ),
        (
            req(
                "send",
                "pc-b",
                json!({"mail": {"id": "mail-1-0000000c", "to": "*", "body": "x", "inReplyTo": "mail-1-0000ffff"}}),
            ),
            "not_found",
        ),
        (req("send", "pc-a", json!({"mail": {"id": "mail-1-0000000b", "to": "*", "body": "other"}})), "duplicate_id"),
        (
            req(
                "send",
                "pc-a",
                json!({"mail": {"id": "mail-1-0000000a", "to": "pc-b", "body": "auto", "auto": false}}),
            ),
            "duplicate_id",
        ),
        (
            req(
                "send",
                "pc-a",
                json!({"mail": {"id": "mail-1-0000000c", "to": "pc-b", "body": "x", "expiresAt": "soon"}}),
            ),
            "bad_request",
        ),
        (req("roster.set", "pc-a", json!({"label": "pc-d", "hostname": "H1"})), "conflict"),
        (req("roster.set", "pc-a", json!({"label": "pc-d", "hostname": "H9", "number": 2})), "conflict"),
        (req("poll", "pc-zz", json!({})), "unknown_pc"),
        (
            json!({"v": 1, "op": "send", "pc": "pc-a", "token": "wrong", "args": {"mail": {"id": "mail-1-0000000c", "to": "pc-b", "body": "x"}}}),
            "unauthorized",
        ),
        (json!({"v": 3, "op": "send", "pc": "pc-a", "token": TOKEN}), "bad_version"),
        (json!({"v": 1, "op": "drop", "pc": "pc-a", "token": TOKEN}), "unknown_op"),
    ];
    for (r, want) in failing {
        let resp = e.handle_value(&r, T0 + 5);
        assert_eq!(code(&resp), want, "{r} → {resp}");
        assert_eq!(e.dump_rows().unwrap(), before, "{want} stored something");
    }
    for raw in [&b"{"[..], b"", b"null", b"\xff\xfe", b"{\"v\":1,\"op\":\"send\"", b"<html>quota</html>"] {
        let resp = e.handle_bytes(raw, T0 + 6);
        assert_eq!(code(&resp), "bad_json", "{raw:?}");
    }
    assert_eq!(e.dump_rows().unwrap(), before);
}

#[test]
fn mistyped_fields_name_the_field() {
    let e = engine();
    let cases = [
        (req("poll", "pc-a", json!({"limit": "10"})), "limit"),
        (req("poll", "pc-a", json!({"since": 1.5})), "since"),
        (req("poll", "pc-a", json!({"marks": {"a": 1}})), "marks"),
        (req("status", "pc-a", json!({"ids": "mail-1-0000000a"})), "ids"),
        (
            req("send", "pc-a", json!({"mail": {"id": "mail-1-0000000c", "to": "pc-b", "body": "x", "hop": -1}})),
            "mail.hop",
        ),
        (req("alerts", "pc-a", json!({"open": "yes"})), "open"),
        (json!({"v": 1, "op": "hello", "pc": "pc-a", "token": 5}), "token"),
        (json!({"v": 1, "op": "hello", "pc": "pc-a", "token": TOKEN, "args": [1]}), "args"),
    ];
    for (r, field) in cases {
        let resp = e.handle_value(&r, T0);
        assert_eq!(code(&resp), "bad_request", "{r} → {resp}");
        assert_eq!(resp["error"]["field"], json!(field), "{resp}");
    }
}

#[test]
fn an_id_that_is_not_a_mail_id_is_missing() {
    let e = engine();
    let before = e.dump_rows().unwrap();
    let resp = e.handle_value(&req("status", "pc-a", json!({"ids": ["'; DROP TABLE mail; --", "nonexistent"]})), T0);
    assert_eq!(resp["missing"], json!(["'; DROP TABLE mail; --", "nonexistent"]), "{resp}");
    assert_eq!(e.dump_rows().unwrap(), before);
}

#[test]
fn formula_and_sql_text_round_trips_verbatim() {
    let e = engine();
    let texts =
        ["=SUM(A1)", "'; DROP TABLE mail; --", "+1", "-1", "@x", "0123", "true", "2026-01-01", "\"quoted\" \\ back"];
    for (i, t) in texts.iter().enumerate() {
        let r = send(&e, "pc-a", json!({"id": format!("mail-1-{:08x}", i), "to": "pc-b", "subject": t, "body": t}), T0);
        assert_eq!(r["ok"], json!(true), "{r}");
    }
    let r = e.handle_value(&req("poll", "pc-b", json!({})), T0 + 1);
    let got: Vec<&str> = r["mail"].as_array().unwrap().iter().map(|m| m["body"].as_str().unwrap()).collect();
    assert_eq!(got, texts);
    let subjects: Vec<&str> = r["mail"].as_array().unwrap().iter().map(|m| m["subject"].as_str().unwrap()).collect();
    assert_eq!(subjects, texts);
    // The tables are all still there.
    assert_eq!(e.handle_value(&req("roster.get", "pc-a", json!({})), T0)["pcs"].as_array().unwrap().len(), 3);
}

#[test]
fn two_engines_on_one_file_serialize_their_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let first = Engine::open(&path, EngineConfig::default()).unwrap();
    for (i, pc) in ["pc-a", "pc-b"].iter().enumerate() {
        first
            .handle_value(&json!({"v":1,"op":"roster.set","pc":pc,"args":{"label":pc,"hostname":format!("H{i}")}}), T0);
    }
    let handles: Vec<_> = (0..2)
        .map(|t| {
            let path = path.clone();
            std::thread::spawn(move || {
                let e = Engine::open(&path, EngineConfig::default()).unwrap();
                for i in 0..50 {
                    let r = e.handle_value(
                        &json!({"v":1,"op":"send","pc":"pc-a","args":{"mail":{
                        "id": format!("mail-{t}-{i:08x}"), "to": "pc-b", "body": "x"}}}),
                        T0 + i,
                    );
                    assert_eq!(r["ok"], json!(true), "{r}");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let r = first.handle_value(&json!({"v":1,"op":"poll","pc":"pc-b","args":{"limit":500}}), T0 + 100);
    assert_eq!(r["mail"].as_array().unwrap().len(), 100);
}

#[test]
fn reopening_keeps_data_and_does_not_rerun_migrations() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    {
        let e = Engine::open(&path, EngineConfig::default()).unwrap();
        e.handle_value(&json!({"v":1,"op":"roster.set","pc":"pc-a","args":{"label":"pc-a","hostname":"A"}}), T0);
    }
    let e = Engine::open(&path, EngineConfig::default()).unwrap();
    let r = e.handle_value(&json!({"v":1,"op":"roster.get","pc":"pc-a"}), T0);
    assert_eq!(r["version"], json!(1));
    assert_eq!(r["pcs"][0]["label"], json!("pc-a"));
}

// A database written by a newer pcmail (user_version 99) was
// served; now it is refused with a message that says what to do.
#[test]
fn a_database_from_a_newer_pcmail_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    drop(Engine::open(&path, EngineConfig::default()).unwrap());
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.pragma_update(None, "user_version", 99).unwrap();
    }
    let err = match Engine::open(&path, EngineConfig::default()) {
        Ok(_) => panic!("a schema-99 database was opened"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("newer pcmail") && err.contains("99"), "{err}");
    let v: i64 = rusqlite::Connection::open(&path).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(v, 99, "nothing was migrated or changed");
}
