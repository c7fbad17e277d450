//! One bad mark once stopped a PC's polling for good; as a user meets it now: a bad `fail --reason` is refused at
//! the command (exit 2, nothing queued) and the PC's mail keeps flowing; a mark
//! that can never be sent is dropped with a record `doctor` and `alerts` show.

mod common;
use common::*;

#[test]
fn a_bad_reason_is_refused_and_a_dropped_mark_is_shown() {
    for kind in servers() {
        let server = Server::start(kind);
        let (a, b) = pair(&server);
        let id = a.send(&["pc-b", "--body", "please look"]);
        b.ok(&["sync"]);
        for reason in ["bad \u{1b}[31m red", "   ", "a\u{2028}b"] {
            let out = b.run(&["fail", &id, "--reason", reason]);
            assert_eq!(out.status.code(), Some(2), "{kind:?} {reason:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        let long = "x".repeat(2146);
        assert_eq!(b.run(&["fail", &id, "--reason", &long]).status.code(), Some(2));
        // A mark an older pcmail queued with an escape in its reason.
        let c = rusqlite::Connection::open(b.store()).unwrap();
        c.execute(
            "INSERT INTO pending_marks (mark_id, id, op, at, by, reason, next_at) VALUES ('fail:old', ?1, 'fail', 1, 'pc-b', 'old \u{1b}[31m', 0)",
            [&id],
        )
        .unwrap();
        drop(c);
        b.ok(&["sync"]);
        // Mail still arrives, and the record is visible.
        let id2 = a.send(&["pc-b", "--body", "still arrives"]);
        b.ok(&["sync"]);
        assert_eq!(a.state_of(&id2), "delivered", "{kind:?}");
        let alerts = b.ok(&["alerts"]);
        assert!(alerts.contains("dropped_mark") && alerts.contains(&id), "{kind:?}: {alerts}");
        let doctor = String::from_utf8(b.run(&["doctor"]).stdout).unwrap();
        assert!(doctor.contains("marks: 1 dropped"), "{kind:?}: {doctor}");
    }
}

// On a fresh embedded default: the PC is on the
// roster from its first command; a note to itself works before any sync;
// `*` with nobody else exits 4; an unknown id is one message, exit 7.
#[test]
fn a_fresh_embedded_default_knows_itself_from_the_first_command() {
    let home = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(exe())
            .args(args)
            .env("PCMAIL_HOME", home.path())
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let roster: serde_json::Value = serde_json::from_slice(&run(&["--json", "roster"]).stdout).unwrap();
    let me = roster[0]["label"].as_str().expect("this PC is on the roster at once").to_string();
    let out = run(&["send", &me, "--body", "note to self"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = run(&["send", "*", "--body", "anyone?"]);
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nobody else"));
    for args in [&["status", "nonexistent"][..], &["read", "mail-1-0000dead"], &["ack", "mail-1-0000dead"]] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(7), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("no such mail"), "{args:?}");
    }
}

// `pcmail status ID | head -1` used to panic with "failed
// printing to stdout: Broken pipe" now and then.
#[cfg(unix)]
#[test]
fn a_closed_pipe_ends_a_command_quietly() {
    let home = tempfile::tempdir().unwrap();
    let exe = exe();
    let run = |cmd: &str| {
        std::process::Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .env("PCMAIL_HOME", home.path())
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .output()
            .unwrap()
    };
    let me = String::from_utf8(run(&format!("{} --json roster", exe.display())).stdout).unwrap();
    let me: serde_json::Value = serde_json::from_str(&me).unwrap();
    let me = me[0]["label"].as_str().unwrap().to_string();
    for i in 0..30 {
        run(&format!(
            "{} send {me} --body 'note {i} with a long enough body to fill a pipe buffer line'",
            exe.display()
        ));
    }
    run(&format!("{} sync", exe.display()));
    for _ in 0..10 {
        for cmd in ["inbox --all", "--json inbox --all", "roster", "sent"] {
            let out = run(&format!("{} {cmd} | head -c 1 >/dev/null", exe.display()));
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{cmd}: {err}");
        }
    }
}
