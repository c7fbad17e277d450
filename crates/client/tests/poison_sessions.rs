//! A hook fed a session id with a newline once stopped a PC's mail for good:
//! the registry kept the id, every poll reported it in `sessions.live`, and
//! the server refused the whole poll. Now the PC cleans every id with the
//! servers' own rule before it records or sends one, and a server refuses a
//! bad session on its own. Real server engine on a SQLite file, real PC
//! stores and the real hook entry point.

use pcmail_client::ops::Draft;
use pcmail_client::transport::Embedded;
use pcmail_client::Client;
use pcmail_core::Millis;
use pcmail_local::config::{Config, Paths, ServerConfig};
use pcmail_local::hook;
use pcmail_store::leases::{self as sl, SessionRow};
use proptest::prelude::*;
use serde_json::json;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};

static NOW: AtomicI64 = AtomicI64::new(1_800_000_000_000);
fn clock() -> Millis {
    NOW.fetch_add(10, Ordering::SeqCst)
}

struct Two {
    dir: tempfile::TempDir,
    a: Client,
    b: Client,
}

fn pc(root: &Path, db: &Path, label: &str) -> Client {
    let paths = Paths::at(root.join(label));
    let cfg = Config {
        native_notifications: false,
        ..Config::new(label, ServerConfig::Embedded { db: Some(db.to_path_buf()) })
    };
    cfg.save(&paths).unwrap();
    let t = Embedded::open(db, label, clock).unwrap();
    let mut c = Client::with(paths, cfg, Box::new(t), clock).unwrap();
    c.sync_once(0).unwrap();
    c
}

fn two() -> Two {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("server.db");
    let a = pc(dir.path(), &db, "pc-a");
    let b = pc(dir.path(), &db, "pc-b");
    Two { dir, a, b }
}

/// The hook run on pc-b with this JSON on stdin, as Claude Code runs it.
fn hook_on_b(t: &Two, stdin: &[u8]) {
    if let Some(input) = hook::parse_input(stdin) {
        hook::dispatch(&t.b.paths, &input, clock()).unwrap();
    }
}

/// pc-b polls without an error, and mail sent to it now arrives.
fn mail_flows(t: &mut Two) -> Result<(), String> {
    t.b.sync_once(0).map_err(|e| format!("poll failed: {e}"))?;
    let id = t.a.send(Draft { to: "pc-b".into(), body: "still arrives".into(), ..Default::default() }).unwrap().ids[0]
        .clone();
    t.b.sync_once(0).map_err(|e| format!("poll failed: {e}"))?;
    match t.b.store.inbox_get(&id).unwrap() {
        Some(_) => Ok(()),
        None => Err("mail did not arrive".into()),
    }
}

fn raw_row(session: &str, cwd: Option<String>, repo: Option<String>, branch: Option<String>) -> SessionRow {
    let now = clock();
    SessionRow {
        session: session.to_string(),
        cwd,
        repo,
        branch,
        started_at: now,
        last_prompt_at: Some(now),
        ..Default::default()
    }
}

/// The reported case, end to end: hook JSON with `"session_id": "a\nb"` →
/// the registry → a poll against a real server → mail still flows, and the
/// session is live on the server under its cleaned id.
#[test]
fn a_hook_session_id_with_a_newline_never_stops_the_mail() {
    let mut t = two();
    hook_on_b(
        &t,
        br#"{"session_id": "a\nb", "hook_event_name": "UserPromptSubmit", "prompt": "hi", "cwd": "/w/x\ny"}"#,
    );
    let rows = sl::sessions_list(t.b.store.conn(), 10).unwrap();
    assert_eq!(rows.len(), 1);
    assert!(rows[0].session.starts_with("ab~"), "recorded cleaned: {:?}", rows[0].session);
    mail_flows(&mut t).unwrap();
    let who = t.a.who().unwrap();
    let s: Vec<&str> = who.sessions.iter().filter(|s| s.pc == "pc-b").map(|s| s.session.as_str()).collect();
    assert_eq!(s, [rows[0].session.as_str()], "live under the cleaned id");
    // A name taken by that session (as `pcmail name` from inside it) works too.
    t.b.name_take("ani", "a\nb").unwrap();
    assert_eq!(t.b.store.names().unwrap(), [("ani".to_string(), rows[0].session.clone())]);
    mail_flows(&mut t).unwrap();
}

/// A registry an older pcmail filled (the raw id, a NUL, a bidi override)
/// is cleaned when the poll reports it: the PC recovers with no user step.
#[test]
fn a_registry_row_written_before_the_rule_is_cleaned_on_the_way_out() {
    let mut t = two();
    t.b.store
        .write(|tx| {
            for s in ["a\nb", "n\u{0}ul", "\u{202e}evil", "ok"] {
                sl::session_record(tx, &raw_row(s, Some("/w/\u{7}".into()), None, None))?;
            }
            Ok(())
        })
        .unwrap();
    mail_flows(&mut t).unwrap();
    let who = t.a.who().unwrap();
    assert_eq!(who.sessions.iter().filter(|s| s.pc == "pc-b").count(), 4, "{who:?}");
}

/// The servers answer a refused session in `sessions.errors` and apply the
/// rest (an older PC that sends one raw keeps its mail).
#[test]
fn a_raw_bad_session_from_an_older_pc_fails_only_itself() {
    let t = two();
    let db = t.dir.path().join("server.db");
    let engine = pcmail_server::Engine::open(&db, pcmail_server::EngineConfig::default()).unwrap();
    let v = engine.handle_value(
        &json!({"v": 1, "op": "poll", "pc": "pc-b", "args": {"sessions": {"live": [
            {"session": "a\nb"}, {"session": "fine", "cwd": "/w"}, {"session": "x\u{202e}y"}
        ]}}}),
        clock(),
    );
    assert_eq!(v["ok"], json!(true), "{v}");
    let errors = v["sessions"]["errors"].as_array().unwrap();
    let at: Vec<(i64, &str)> =
        errors.iter().map(|e| (e["index"].as_i64().unwrap(), e["field"].as_str().unwrap())).collect();
    assert_eq!(at, [(0, "sessions.live.session"), (2, "sessions.live.session")], "{v}");
    assert_eq!(errors[0]["code"], json!("bad_request"));
    let who = engine.handle_value(&json!({"v": 1, "op": "who", "pc": "pc-a", "args": {}}), clock());
    assert_eq!(who["sessions"].as_array().unwrap().len(), 1, "{who}");
}

fn hostile() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[ \t\n\r\u{1b}\u{0}\u{7f}\u{85}\u{2028}\u{2029}\u{200b}\u{202a}-\u{202e}\u{2066}-\u{2069}\u{feff}a-z]{0,40}",
        (90usize..400).prop_map(|n| "s".repeat(n)),
        (990usize..1200).prop_map(|n| "/".repeat(n)),
        Just(String::new()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    // Whatever a hook sends as session id and cwd, a later poll succeeds and mail flows.
    #[test]
    fn no_hook_input_can_stop_polling(session in hostile(), cwd in hostile(), end in any::<bool>()) {
        let mut t = two();
        let stdin = json!({"session_id": session, "hook_event_name": "UserPromptSubmit", "prompt": "p", "cwd": cwd});
        hook_on_b(&t, stdin.to_string().as_bytes());
        let start = json!({"session_id": session, "hook_event_name": "SessionStart", "source": "startup", "cwd": cwd});
        hook_on_b(&t, start.to_string().as_bytes());
        if end {
            hook_on_b(&t, json!({"session_id": session, "hook_event_name": "SessionEnd", "reason": cwd}).to_string().as_bytes());
        }
        prop_assert_eq!(mail_flows(&mut t), Ok(()));
    }

    // Whatever the registry holds (rows of older versions, any writer) and
    // whatever session a `pcmail name --session` gives, polls succeed.
    #[test]
    fn no_registry_row_or_name_take_can_stop_polling(
        rows in prop::collection::vec((hostile(), prop::option::of(hostile()), prop::option::of(hostile()), prop::option::of(hostile())), 1..4),
        take in hostile(),
    ) {
        let mut t = two();
        t.b.store.write(|tx| {
            for (s, cwd, repo, branch) in &rows {
                sl::session_record(tx, &raw_row(s, cwd.clone(), repo.clone(), branch.clone()))?;
            }
            Ok(())
        }).unwrap();
        // Refused at the command (a blank id) or taken: never queued raw.
        let _ = t.b.name_take("ani", &take);
        prop_assert_eq!(mail_flows(&mut t), Ok(()));
    }
}

/// SessionEnd's `reason` (the hook's own words) rides the queued release
/// of the session's leases: with an escape in it, the release still reaches
/// the server (it once was refused as an item and lost).
#[test]
fn a_session_end_reason_with_control_characters_still_releases_the_lease() {
    use pcmail_client::leases::ClaimRequest;
    use pcmail_core::lease::{ListArgs, Mode};
    let mut t = two();
    hook_on_b(&t, br#"{"session_id": "s\u202e1", "hook_event_name": "UserPromptSubmit", "prompt": "hi"}"#);
    let session = sl::sessions_list(t.b.store.conn(), 1).unwrap()[0].session.clone();
    let req = ClaimRequest {
        resource: "deploy".into(),
        repo: "github.com/o/r".into(),
        description: "deploying".into(),
        files: vec![],
        mode: Mode::Exclusive,
        session: session.clone(),
        name: None,
        follow: None,
        ttl_ms: Some(600_000),
        takeover: None,
    };
    t.b.lease_claim(&req).unwrap();
    let live = |c: &mut Client| {
        let l = c.lease_list(ListArgs { resource: Some("deploy".into()), ..Default::default() }).unwrap();
        l.leases.into_iter().filter(|l| l.state.is_live()).count()
    };
    assert_eq!(live(&mut t.a), 1);
    hook_on_b(&t, br#"{"session_id": "s\u202e1", "hook_event_name": "SessionEnd", "reason": "gone\u001b[31m\u0000"}"#);
    mail_flows(&mut t).unwrap();
    assert_eq!(live(&mut t.a), 0, "the release went through");
}
