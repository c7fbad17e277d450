//! The bad-input suite again with per-PC credentials — wrong,
//! truncated, another PC's, revoked — for every op a PC sends. Each gets its
//! code, and nothing is stored (not even a heartbeat).

use pcmail_server::{Engine, EngineConfig};
use serde_json::{json, Value};

const T0: i64 = 1_767_225_600_000;
const ADMIN: &str = "adm1n-s3cret";

fn cred(c: char) -> String {
    std::iter::repeat_n(c, 64).collect()
}

fn admin(op: &str, args: Value) -> Value {
    json!({"v": 1, "op": op, "pc": "pc-admin", "token": ADMIN, "args": args})
}

fn as_pc(op: &str, pc: &str, cred: &str, args: Value) -> Value {
    json!({"v": 1, "op": op, "pc": pc, "cred": cred, "args": args})
}

fn ok(r: Value) -> Value {
    assert_eq!(r["ok"], json!(true), "{r}");
    r
}

/// pc-a, pc-b and pc-r enrolled with their own credentials; pc-r revoked.
fn engine() -> Engine {
    let e = Engine::open_in_memory(EngineConfig { token: Some(ADMIN.into()), ..Default::default() }).unwrap();
    for (i, (label, c)) in [("pc-a", 'a'), ("pc-b", 'b'), ("pc-r", 'e')].iter().enumerate() {
        let code = format!("{:032x}", i + 1);
        ok(e.handle_value(&admin("roster.enrol", json!({"label": label, "code": code})), T0));
        ok(e.handle_value(&as_pc("join", label, &cred(*c), json!({"code": code, "hostname": format!("H{i}")})), T0));
    }
    ok(e.handle_value(
        &as_pc("send", "pc-a", &cred('a'), json!({"mail": {"id": "mail-1-0000000a", "to": "pc-b", "body": "b's"}})),
        T0,
    ));
    ok(e.handle_value(&admin("roster.revoke", json!({"label": "pc-r"})), T0));
    e
}

#[test]
fn bad_credentials_get_their_code_and_store_nothing() {
    let e = engine();
    let before = e.dump_rows().unwrap();
    let mark = json!({"marks": [{"markId": "k", "id": "mail-1-0000000a", "op": "ack", "at": T0, "by": "x"}]});
    let ops: Vec<(&str, Value)> = vec![
        ("poll", json!({"confirm": ["mail-1-0000000a"]})),
        ("send", json!({"mail": {"id": "mail-1-0000000c", "to": "pc-a", "body": "x"}})),
        ("mark", mark),
        ("status", json!({"ids": ["mail-1-0000000a"]})),
        ("rotate", json!({"newCred": cred('z')})),
        ("hello", json!({})),
        ("roster.get", json!({})),
    ];
    let b = cred('b');
    let wrong = format!("{}x", &b[..63]);
    let truncated = b[..31].to_string();
    let others = cred('a');
    let revoked = cred('e');
    for (op, args) in &ops {
        for (what, pc, c, want) in [
            ("wrong", "pc-b", wrong.as_str(), "not_enrolled"),
            ("truncated", "pc-b", truncated.as_str(), "bad_request"),
            ("another PC's", "pc-b", others.as_str(), "forbidden"),
            ("revoked", "pc-r", revoked.as_str(), "revoked"),
        ] {
            let r = e.handle_value(&as_pc(op, pc, c, args.clone()), T0 + 1000);
            assert_eq!(r["error"]["code"], json!(want), "{op} with a {what} credential: {r}");
        }
        // A wrong admin secret beside a PC's valid credential changes nothing for a PC op.
        let mut with_token = as_pc(op, "pc-b", &b, args.clone());
        with_token["token"] = json!("not-the-admin-secret");
        if !matches!(*op, "hello" | "roster.get" | "status") {
            continue; // these would store something when accepted
        }
        let r = e.handle_value(&with_token, T0 + 1000);
        assert_eq!(r["ok"], json!(true), "{op} with a valid credential and a stale token: {r}");
    }
    assert_eq!(e.dump_rows().unwrap(), before, "a refused request stored something");
    // Admin-only ops with a PC's credential, or a wrong secret.
    for (op, args) in [
        ("roster.set", json!({"label": "pc-z", "hostname": "Z"})),
        ("roster.remove", json!({"label": "pc-a"})),
        ("roster.enrol", json!({"label": "pc-z", "code": format!("{:032x}", 99)})),
        ("roster.revoke", json!({"label": "pc-a"})),
        ("roster.requireCredentials", json!({})),
        ("roster.log", json!({})),
    ] {
        let r = e.handle_value(&as_pc(op, "pc-b", &b, args.clone()), T0);
        assert_eq!(r["error"]["code"], json!("admin_required"), "{op}: {r}");
        let mut wrong_secret = admin(op, args);
        wrong_secret["token"] = json!("nope");
        let r = e.handle_value(&wrong_secret, T0);
        assert_eq!(r["error"]["code"], json!("unauthorized"), "{op}: {r}");
    }
    assert_eq!(e.dump_rows().unwrap(), before, "a refused admin request stored something");
    // The right PC still gets its mail.
    let r = ok(e.handle_value(&as_pc("poll", "pc-b", &b, json!({})), T0));
    assert_eq!(r["mail"][0]["id"], json!("mail-1-0000000a"));
}

#[test]
fn the_database_keeps_only_hashes_of_secrets() {
    let e = engine();
    let rows = e.dump_rows().unwrap().join("\n");
    for c in ['a', 'b', 'e'] {
        assert!(!rows.contains(&cred(c)), "a credential is stored in clear");
    }
    assert!(!rows.contains(&format!("{:032x}", 1)), "a join code is stored in clear");
    assert!(rows.contains(&pcmail_core::protocol::credential_hash(&cred('a'))));
}
