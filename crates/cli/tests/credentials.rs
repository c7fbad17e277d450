//! Per-PC credentials end to end, on both servers: PCs enrolled with join codes act
//! only as themselves, and a revoked PC's mail reaches the PC re-enrolled
//! under its label, once.

mod common;
use common::*;
use serde_json::json;

#[test]
fn a_pc_with_a_valid_credential_cannot_act_as_another() {
    for kind in servers() {
        let server = Server::start(kind);
        let admin = Pc::new(&server, "pc-admin");
        let a = Pc::enrolled(&server, &admin, "pc-a");
        let b = Pc::enrolled(&server, &admin, "pc-b");
        let c = Pc::enrolled(&server, &admin, "pc-c");
        for pc in [&a, &b, &c] {
            pc.ok(&["sync"]);
        }
        let id = a.send(&["pc-b", "--body", "for b only"]);

        // C, with its own valid credential, tries B's mail three ways.
        let poll = server.call_with_cred("pc-b", &c.cred, "poll", json!({}));
        assert_eq!(poll["error"]["code"], json!("forbidden"), "{kind:?}: poll as b: {poll}");
        let mark = server.call_with_cred(
            "pc-c",
            &c.cred,
            "mark",
            json!({"marks": [{"markId": "k1", "id": id, "op": "ack", "at": 1, "by": "pc-c"}]}),
        );
        assert_eq!(mark["results"][0]["code"], json!("forbidden"), "{kind:?}: mark b's mail: {mark}");
        let status = server.call_with_cred("pc-c", &c.cred, "status", json!({"ids": [id]}));
        assert_eq!(status["missing"], json!([id]), "{kind:?}: status of b's mail: {status}");
        let as_b = server.call_with_cred("pc-b", &c.cred, "status", json!({"ids": [id]}));
        assert_eq!(as_b["error"]["code"], json!("forbidden"), "{kind:?}: status as b: {as_b}");
        // …and through the CLI, configured as pc-b with C's credential.
        let impostor = Pc { cred: c.cred.clone(), ..Pc::blank("pc-b", &server.url, false) };
        impostor.ok(&["init", "--label", "pc-b", "--server", &server.url, "--offline"]);
        let out = impostor.run(&["sync"]);
        assert!(!out.status.success(), "{kind:?}: the impostor's sync must fail");
        // Admin-only with a PC's credential: exit 12, the admin secret is needed.
        let out = c.run(&["roster", "revoke", "pc-b"]);
        assert_eq!(out.status.code(), Some(12), "{kind:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("admin secret"), "{kind:?}: {}", stderr(&out));

        // B keeps receiving, and the mark is its own.
        b.ok(&["sync"]);
        let inbox = b.json(&["inbox", "--all"]);
        assert_eq!(inbox[0]["id"], json!(id), "{kind:?}: {inbox}");
        a.ok(&["sync"]);
        assert_eq!(a.state_of(&id), "delivered", "{kind:?}");
    }
}

#[test]
fn a_revoked_pcs_mail_is_delivered_once_to_the_re_enrolled_pc() {
    for kind in servers() {
        let server = Server::start(kind);
        let admin = Pc::new(&server, "pc-admin");
        let a = Pc::enrolled(&server, &admin, "pc-a");
        let b = Pc::enrolled(&server, &admin, "pc-b");
        a.ok(&["sync"]);
        b.ok(&["sync"]);
        let first = a.send(&["pc-b", "--body", "before"]);
        admin.ok(&["roster", "revoke", "pc-b"]);
        let out = b.run(&["sync"]);
        assert_eq!(out.status.code(), Some(12), "{kind:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("revoked"), "{kind:?}: {}", stderr(&out));
        let doctor = String::from_utf8_lossy(&b.run(&["--json", "doctor"]).stdout).to_string();
        assert!(
            doctor.contains("revoked by the admin") && doctor.contains("pcmail roster add pc-b"),
            "{kind:?}: {doctor}"
        );
        let doctor = String::from_utf8_lossy(&a.run(&["--json", "doctor"]).stdout).to_string();
        assert!(doctor.contains("bound to this installation"), "{kind:?}: {doctor}");
        let second = a.send(&["pc-b", "--body", "during"]);
        a.ok(&["sync"]);
        assert_eq!(a.state_of(&first), "new", "{kind:?}: it waits");

        let b2 = Pc::enrolled(&server, &admin, "pc-b");
        b2.ok(&["sync"]);
        b2.ok(&["sync"]);
        let mut got: Vec<String> = b2
            .json(&["inbox", "--all"])
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_string())
            .collect();
        got.sort();
        let mut want = vec![first.clone(), second.clone()];
        want.sort();
        assert_eq!(got, want, "{kind:?}: each mail once");
        a.ok(&["sync"]);
        assert_eq!(a.state_of(&first), "delivered", "{kind:?}");
        // The old installation stays out: its credential is nobody's now.
        let out = b.run(&["sync"]);
        assert_eq!(out.status.code(), Some(12), "{kind:?}: {}", stderr(&out));

        let log = admin.json(&["roster", "log"]);
        let actions: Vec<&str> =
            log["entries"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
        assert_eq!(&actions[..4], ["join", "enrol", "revoke", "join"], "{kind:?}: {log}");
        assert_eq!(log["entries"][2]["by"], json!("admin@pc-admin"), "{kind:?}");
    }
}

#[test]
fn a_pc_on_the_shared_token_moves_to_its_own_credential_on_its_next_poll() {
    for kind in servers() {
        let server = Server::start(kind);
        let admin = Pc::new(&server, "pc-admin");
        // An old PC: configured, not yet registered (it holds only the shared token).
        let old = Pc::blank("pc-old", &server.url, true);
        old.ok(&["init", "--label", "pc-old", "--server", &server.url, "--offline"]);
        let doctor = String::from_utf8_lossy(&old.run(&["--json", "doctor"]).stdout).to_string();
        assert!(doctor.contains("still on the shared token"), "{kind:?}: {doctor}");
        old.ok(&["sync"]); // registers and exchanges the token for its own credential
        let doctor = String::from_utf8_lossy(&old.run(&["--json", "doctor"]).stdout).to_string();
        assert!(doctor.contains("bound to this installation"), "{kind:?}: {doctor}");
        // Another PC registered by the admin directly never moved: require-credentials names it.
        admin.ok(&["roster", "add", "pc-stuck", "--hostname", "stuck", "--number", "40"]);
        let r = admin.json(&["roster", "require-credentials"]);
        assert_eq!(r["unbound"], json!(["pc-stuck"]), "{kind:?}: {r}");
        let refused = server.call("pc-stuck", "poll", json!({}));
        assert_eq!(refused["error"]["code"], json!("not_enrolled"), "{kind:?}: {refused}");
        // The moved PC goes on, with or without the shared token beside its credential.
        let id = admin.send(&["pc-old", "--body", "after the switch"]);
        old.ok(&["sync"]);
        assert_eq!(old.json(&["inbox", "--all"])[0]["id"], json!(id), "{kind:?}");
    }
}

/// Runs `script` with `sh` in a private D-Bus session whose gnome-keyring
/// keeps its data under `home` (so the next call finds the same keyring).
fn in_keyring(home: &std::path::Path, script: &str, env: &[(&str, &str)]) -> std::process::Output {
    let script =
        format!("echo pw | gnome-keyring-daemon --unlock --components=secrets >/dev/null 2>&1 || exit 90\n{script}");
    let mut cmd = std::process::Command::new("dbus-run-session");
    cmd.args(["--", "sh", "-c", &script])
        .env("PCMAIL_HOME", home)
        .env("HOME", home)
        .env("EXE", exe())
        .env_remove("PCMAIL_TOKEN")
        .env_remove("PCMAIL_ADMIN_TOKEN")
        .env_remove("PCMAIL_CREDENTIAL")
        .stdin(std::process::Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("dbus-run-session (package dbus)");
    assert!(
        out.status.success(),
        "exit {:?}\n{}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        stderr(&out)
    );
    out
}

/// `pcmail token rotate` with the credential in the OS keyring (the only
/// place rotation writes): a mark queued and a mail sent before it are both
/// there after it, and a daemon polling across a rotation (its open long
/// poll answered `not_enrolled`) picks the new credential up and keeps
/// receiving.
#[test]
fn token_rotate_loses_no_mail_or_mark_in_flight() {
    let server = Server::start(Kind::Rust);
    let admin = Pc::new(&server, "pc-admin");
    let a = Pc::enrolled(&server, &admin, "pc-a");
    a.ok(&["sync"]);
    let code = admin.json(&["roster", "add", "pc-b"])["code"].as_str().unwrap().to_string();
    let b_home = tempfile::tempdir().unwrap();
    let b = b_home.path();
    let url = server.url.as_str();
    in_keyring(b, r#"$EXE init --join "$CODE" --server "$URL" && $EXE sync"#, &[("CODE", &code), ("URL", url)]);

    let first = a.send(&["pc-b", "--body", "read before the rotation"]);
    // B receives it, and its session is shown it: the hook queues `seen` (not sent yet).
    let hook_input = r#"{"session_id":"s-rot","hook_event_name":"SessionStart","cwd":"/tmp","prompt":"hi"}"#;
    let out = in_keyring(b, r#"$EXE sync && echo "$HOOK" | $EXE hook"#, &[("HOOK", hook_input)]);
    assert!(String::from_utf8_lossy(&out.stdout).contains(&first), "the hook showed it");
    let queued: i64 = rusqlite::Connection::open(b.join("store.db"))
        .unwrap()
        .query_row("SELECT count(*) FROM pending_marks WHERE id = ?1", [&first], |r| r.get(0))
        .unwrap();
    assert_eq!(queued, 1, "the seen mark is in flight");
    let second = a.send(&["pc-b", "--body", "sent before the rotation, not yet polled"]);

    let out = in_keyring(b, "$EXE token rotate && $EXE sync && $EXE --json inbox --all", &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("new credential"), "{text}");
    assert!(text.contains(&first) && text.contains(&second), "both mails after the rotation: {text}");
    a.ok(&["sync"]);
    assert_eq!(a.state_of(&first), "seen", "the mark queued before the rotation arrived");
    assert_eq!(a.state_of(&second), "delivered");

    // A daemon that polls across a rotation picks the new credential up.
    let script = r#"
        $EXE daemon >/dev/null 2>"$HOME/daemon.err" & daemon=$!
        ready=0
        for i in $(seq 1 150); do
            if $EXE doctor 2>/dev/null | grep -q 'poller: running; last successful poll'; then ready=1; break; fi
            sleep 0.2
        done
        [ $ready = 1 ] || { kill $daemon; echo "daemon never polled" >&2; exit 95; }
        $EXE token rotate || { kill $daemon; exit 96; }
        PCMAIL_HOME="$A_HOME" PCMAIL_CREDENTIAL="$A_CRED" $EXE send pc-b --body after-the-second-rotation >/dev/null || { kill $daemon; exit 97; }
        got=0
        for i in $(seq 1 150); do
            if $EXE --json inbox --all 2>/dev/null | grep -q after-the-second-rotation; then got=1; break; fi
            sleep 0.2
        done
        kill $daemon; wait $daemon
        [ $got = 1 ] || { cat "$HOME/daemon.err" >&2; exit 98; }
    "#;
    in_keyring(b, script, &[("A_HOME", a.home.path().to_str().unwrap()), ("A_CRED", &a.cred)]);

    let log = admin.json(&["roster", "log"]);
    let rotations = log["entries"].as_array().unwrap().iter().filter(|e| e["action"] == json!("rotate")).count();
    assert_eq!(rotations, 2, "{log}");
}
