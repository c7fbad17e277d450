//! Errors say what happened: a damaged PC store is named with the way back,
//! a revoked PC replaying its join code is told it is revoked, a takeover
//! of a lease that is still renewed is a held lease (exit 10), and every
//! failing command under `--json` prints one JSON error object on stdout.

mod common;
use common::*;
use serde_json::Value;
use std::process::Output;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

fn json_error(out: &Output) -> Value {
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is one JSON object ({e}): {:?} / {}", text(&out.stdout), text(&out.stderr)));
    assert!(v["error"].is_object(), "{v}");
    v
}

#[test]
fn a_damaged_store_is_named_by_every_command_and_doctor_says_how_to_recover() {
    let db = tempfile::tempdir().unwrap();
    let (a, _b) = embedded_pair(&db.path().join("server.db"));
    let store = a.store();
    for f in ["store.db-wal", "store.db-shm"] {
        let _ = std::fs::remove_file(a.home.path().join(f));
    }
    std::fs::write(&store, b"this is not a database, it was overwritten by something else").unwrap();

    let out = a.run(&["inbox"]);
    assert_eq!(out.status.code(), Some(9), "a local problem: {}", text(&out.stderr));
    let msg = text(&out.stderr);
    assert!(msg.contains(&store.display().to_string()), "names the file: {msg}");
    assert!(msg.contains("pcmail sync") && msg.contains(".broken"), "says how to recover: {msg}");

    let out = a.run(&["--json", "doctor"]);
    assert!(!out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"].as_str().unwrap().starts_with("PC store"))
        .unwrap_or_else(|| panic!("doctor has a PC store check: {v}"))
        .clone();
    assert_eq!(check["ok"], Value::Bool(false), "{check}");
    assert!(check["check"].as_str().unwrap().contains("store.db"), "{check}");
    assert!(check["fix"].as_str().unwrap().contains("mv "), "{check}");
}

#[test]
fn a_revoked_pc_replaying_its_join_code_is_told_it_is_revoked() {
    for kind in servers() {
        let server = Server::start(kind);
        let admin = Pc::new(&server, "pc-admin");
        let code = admin.json(&["roster", "add", "pc-b"])["code"].as_str().unwrap().to_string();
        let b = Pc::blank("pc-b", &server.url, false);
        b.ok(&["init", "--join", &code, "--server", &server.url]);
        // A lost answer retried by the same PC is still fine.
        let again = b.ok(&["init", "--join", &code, "--server", &server.url]);
        assert!(again.contains("already enrolled"), "{kind:?}: {again}");
        admin.ok(&["roster", "revoke", "pc-b"]);
        let out = b.run(&["init", "--join", &code, "--server", &server.url]);
        let (msg, stdout) = (text(&out.stderr), text(&out.stdout));
        assert_eq!(out.status.code(), Some(12), "{kind:?}: not enrolled / revoked: {msg} {stdout}");
        assert!(msg.contains("revoked"), "{kind:?}: {msg}");
        assert!(!stdout.contains("already enrolled"), "{kind:?}: {stdout}");
    }
}

#[test]
fn a_takeover_of_a_lease_that_is_still_renewed_exits_10() {
    let db = tempfile::tempdir().unwrap();
    let (a, b) = embedded_pair(&db.path().join("server.db"));
    a.ok(&["lease", "claim", "gpu-0", "--ttl", "30m", "--description", "training"]);
    b.ok(&["sync"]);
    let out = b.run(&["lease", "takeover", "gpu-0", "--reason", "looks idle"]);
    assert_eq!(out.status.code(), Some(10), "held, not a usage error: {}", text(&out.stderr));
    let out = b.run(&["--json", "lease", "takeover", "gpu-0", "--reason", "looks idle"]);
    assert_eq!(out.status.code(), Some(10));
    assert_eq!(json_error(&out)["error"]["exit"], Value::from(10));
}

/// `pcmail sync` with the locale set to `lang` (LC_ALL and LC_MESSAGES unset).
fn sync_in(pc: &Pc, lang: &str) -> String {
    let out = pc.cmd(&["sync"]).env_remove("LC_ALL").env_remove("LC_MESSAGES").env("LANG", lang).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stderr)
}

#[test]
fn the_sync_notification_speaks_the_locale_and_says_the_kind_once() {
    let db = tempfile::tempdir().unwrap();
    let (a, b) = embedded_pair(&db.path().join("server.db"));
    a.send(&["pc-b", "--kind", "decision", "--subject", "ship it?", "--body", "x"]);
    let en = sync_in(&b, "en_US.UTF-8");
    assert!(en.contains("[decision request] from pc-a"), "{en}");
    assert!(!en.contains("判断依頼"), "no Japanese tag under an English locale: {en}");

    // The sender typed the Japanese tag into the subject: the kind still shows once.
    a.send(&["pc-b", "--kind", "decision", "--subject", "[判断依頼] drop the old API?", "--body", "x"]);
    let ja = sync_in(&b, "ja_JP.UTF-8");
    assert_eq!(ja.matches("判断依頼").count(), 1, "{ja}");
    assert!(ja.contains("drop the old API?"), "{ja}");
}

#[test]
fn a_config_with_only_the_readmes_handoffs_table_works_on_the_embedded_default() {
    let pc = Pc::blank("", "", true);
    std::fs::write(pc.home.path().join("config.toml"), "[handoffs]\nstop_reminder = false\n").unwrap();
    pc.ok(&["sync"]);
    pc.ok(&["inbox"]);
    let me = pc.json(&["roster"]);
    assert_eq!(me.as_array().map(Vec::len), Some(1), "this PC, under the label from its hostname: {me}");
}

#[test]
fn every_duration_flag_takes_the_same_durations() {
    let db = tempfile::tempdir().unwrap();
    let (a, _b) = embedded_pair(&db.path().join("server.db"));
    // `send --timeout 5m` as `job run --timeout 5m`; a bare number is seconds everywhere.
    a.ok(&["send", "pc-b", "--body", "x", "--timeout", "5m"]);
    a.ok(&["send", "pc-b", "--body", "x", "--timeout", "300"]);
    for bad in [vec!["send", "pc-b", "--body", "x", "--expires", "0s"], vec!["lease", "claim", "r", "--ttl", "0"]] {
        let out = a.run(&bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        let msg = text(&out.stderr);
        assert!(msg.contains("more than zero") && !msg.contains("use a duration like"), "{bad:?}: {msg}");
    }
    let out = a.run(&["job", "run", "pc-b", "build", "--timeout", "soon"]);
    assert_eq!(out.status.code(), Some(2));
    let msg = text(&out.stderr);
    assert!(msg.contains("--timeout") && !msg.contains("--expires"), "{msg}");
}

#[test]
fn json_errors_are_one_object_on_stdout_for_every_exit_code() {
    let db = tempfile::tempdir().unwrap();
    let (a, _b) = embedded_pair(&db.path().join("server.db"));
    let cases: Vec<(Vec<&str>, i32)> = vec![
        (vec!["send", "pc-nobody", "--body", "x"], 4),
        (vec!["read", "mail-1-00000000"], 7),
        (vec!["send", "pc-b", "--body", "x", "--timeout", "soon"], 2),
        (vec!["status"], 2),
    ];
    for (args, code) in cases {
        let mut full = vec!["--json"];
        full.extend(args.iter().copied());
        let out = a.run(&full);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", text(&out.stderr));
        let v = json_error(&out);
        assert_eq!(v["error"]["exit"], Value::from(code), "{args:?}: {v}");
        assert!(v["error"]["code"].is_string() && v["error"]["message"].is_string(), "{v}");
        assert_eq!(text(&out.stdout).trim().lines().count(), 1, "one object: {}", text(&out.stdout));
    }
    // `map --check` on a stale map: exit 15 with its object.
    let repo = tempfile::tempdir().unwrap();
    std::fs::write(repo.path().join("lib.rs"), "pub fn f() {}\n").unwrap();
    let out = a.run(&["--json", "map", "--check", "--repo", repo.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(15), "{}", text(&out.stderr));
    assert_eq!(json_error(&out)["error"]["exit"], Value::from(15));
}

#[test]
fn hooks_status_names_the_events_in_words_and_answers_json() {
    let home = tempfile::tempdir().unwrap();
    let settings = home.path().join("settings.json");
    let s = settings.to_str().unwrap();
    let pc = Pc::blank("pc-a", "", true);
    let out = pc.ok(&["hooks", "status", "--settings", s]);
    assert!(out.contains("not installed") && !out.contains("NotInstalled"), "{out}");
    pc.ok(&["hooks", "install", "--settings", s]);
    let out = pc.ok(&["hooks", "status", "--settings", s]);
    assert!(out.contains("hooks installed for SessionStart, UserPromptSubmit, PreToolUse, Stop"), "{out}");
    let v = pc.json(&["hooks", "status", "--settings", s]);
    assert_eq!(v["state"], "installed", "{v}");
    assert!(v["events"].as_array().unwrap().iter().any(|e| e == "Stop"), "{v}");
    let help = text(&pc.run(&["hooks", "--help"]).stdout);
    assert!(help.contains("PreToolUse") && help.contains("Stop"), "{help}");
}
