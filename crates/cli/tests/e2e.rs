//! The receiving-PC scenarios with real processes, run against both servers.

mod common;
use common::*;
use serde_json::json;

/// The basic definition of done: a note to yourself → delivered within one
/// cycle → a new session's hook shows it first → status says seen → ack
/// makes it done; a partial address exits 4.
#[test]
fn definition_of_done_on_both_servers() {
    for kind in servers() {
        let server = Server::start(kind);
        let [a, _other] = synced(&server, ["kim-laptop", "kim-desktop"]);

        let id = a.send(&["kim-laptop", "--body", "note to self: rerun the flaky test"]);
        assert_eq!(a.state_of(&id), "new", "{kind:?}");
        a.ok(&["sync"]);
        assert_eq!(a.state_of(&id), "delivered", "{kind:?}: delivered within one cycle");

        let ctx = a.hook("session-new-1", "SessionStart");
        let first_block = ctx.find("<pcmail-mail id=").expect("hook shows the mail");
        assert!(ctx[first_block..].starts_with(&format!("<pcmail-mail id=\"{id}\"")), "{kind:?}: shown first\n{ctx}");
        assert!(ctx.contains("note to self: rerun the flaky test"));

        a.ok(&["sync"]); // the hook queued `seen`; the poller pushes it
        assert_eq!(a.state_of(&id), "seen", "{kind:?}");
        let tl = a.json(&["status", &id]);
        let states: Vec<&str> =
            tl[0]["timeline"].as_array().unwrap().iter().map(|e| e["state"].as_str().unwrap()).collect();
        assert_eq!(states, ["new", "delivered", "seen"], "{kind:?}");
        assert!(tl[0]["timeline"][2]["by"].as_str().unwrap().starts_with("kim-laptop/session-"), "{tl}");

        a.ok(&["ack", &id]);
        assert_eq!(a.state_of(&id), "done", "{kind:?}");

        // A partial address is never sent: exit 4 with the candidates.
        let out = a.run(&["send", "kim", "--body", "hi"]);
        assert_eq!(out.status.code(), Some(4), "{kind:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("kim-laptop") && err.contains("kim-desktop"), "{err}");
        // And the same session is not shown the mail again.
        assert_eq!(a.hook("session-new-1", "UserPromptSubmit"), "", "{kind:?}");
    }
}

/// A decision request from PC A is shown on PC B above other mail.
#[test]
fn decision_request_is_shown_first_on_the_other_pc() {
    for kind in servers() {
        let server = Server::start(kind);
        let (a, b) = pair(&server);
        let note1 = a.send(&["pc-b", "--body", "fyi one"]);
        let dec = a.send(&["pc-b", "--kind", "decision", "--subject", "[判断依頼] ship it?", "--body", "yes or no"]);
        let note2 = a.send(&["pc-b", "--body", "fyi two (newest)"]);
        b.ok(&["sync"]);
        let ctx = b.hook("b-session", "UserPromptSubmit");
        let pos = |id: &str| ctx.find(id).unwrap_or_else(|| panic!("{id} not shown:\n{ctx}"));
        assert!(pos(&dec) < pos(&note2) && pos(&note2) < pos(&note1), "{kind:?}:\n{ctx}");
        // The decision stays open for another session until answered…
        let ctx2 = b.hook("b-session-2", "UserPromptSubmit");
        assert!(ctx2.contains(&dec) && !ctx2.contains(&note1), "{kind:?}:\n{ctx2}");
        // …and replying answers it: the original is done on the server.
        b.ok(&["reply", &dec, "--body", "yes"]);
        assert_eq!(a.state_of(&dec), "done", "{kind:?}");
        let ctx3 = b.hook("b-session-3", "UserPromptSubmit");
        assert!(!ctx3.contains(&dec), "{kind:?}: answered decision no longer shown\n{ctx3}");
    }
}

#[test]
fn loop_refusals() {
    for kind in servers() {
        let server = Server::start(kind);
        let (a, b) = pair(&server);
        let q = a.send(&["pc-b", "--body", "question", "--auto"]);
        b.ok(&["sync"]);
        // An auto reply to auto mail is refused by the server (exit 5).
        let out = b.run(&["reply", &q, "--body", "auto answer", "--auto"]);
        assert_eq!(out.status.code(), Some(5), "{kind:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).contains("loop_refused"));
        // A person's reply goes through; the same reply again is the same mail.
        let r1 = b.json(&["reply", &q, "--body", "human answer"]);
        let r1_id = r1["ids"][0].as_str().unwrap().to_string();
        let r1b = b.json(&["reply", &q, "--body", "human answer"]);
        assert_eq!(r1b["ids"][0], r1["ids"][0], "{kind:?}: a retried reply is one mail");
        // A second reply with another body gets a new id.
        let r2 = b.json(&["reply", &q, "--body", "and one more thing"]);
        assert_ne!(r2["ids"][0], r1["ids"][0], "{kind:?}");
        // Replying to a reply is refused by the CLI (exit 3).
        a.ok(&["sync"]);
        let out = a.run(&["reply", &r1_id, "--body", "thanks"]);
        assert_eq!(out.status.code(), Some(3), "{kind:?}");
        // hop ≥ 3 is refused by the server.
        let mail = json!({"id": "mail-1-0000beef", "to": "pc-b", "body": "x", "hop": 3});
        let v = server.call_as(&a, "send", json!({"mail": mail}));
        assert_eq!(v["error"]["code"], "hop_limit", "{kind:?}");
    }
}

#[test]
fn expiry_hides_mail_and_the_sweep_expires_it() {
    for kind in servers() {
        let server = Server::start(kind);
        let (a, b) = pair(&server);
        let id = a.send(&["pc-b", "--body", "only useful for a second", "--expires", "1s"]);
        let keep = a.send(&["pc-b", "--body", "stays"]);
        b.ok(&["sync"]);
        std::thread::sleep(std::time::Duration::from_millis(1200));
        let v = server.call("pc-a", "sweep", json!({}));
        assert_eq!(v["ok"], true, "{v}");
        assert!(v["expired"].as_i64().unwrap() >= 1, "{kind:?}: {v}");
        assert_eq!(a.state_of(&id), "expired", "{kind:?}");
        let ctx = b.hook("s1", "UserPromptSubmit");
        assert!(!ctx.contains(&id) && ctx.contains(&keep), "{kind:?}:\n{ctx}");
        assert!(ctx.contains("(1 expired not shown)"), "{kind:?}:\n{ctx}");
        // Expired never overrides done: acking the kept mail then sweeping leaves it done.
        b.ok(&["ack", &keep]);
        server.call("pc-a", "sweep", json!({}));
        assert_eq!(a.state_of(&keep), "done");
    }
}

/// A poller killed between storing and confirming loses nothing and shows
/// nothing twice: the mail comes again, is deduplicated by id, confirmed.
#[test]
fn poller_killed_mid_cycle_loses_nothing_and_shows_nothing_twice() {
    for kind in servers() {
        let server = Server::start(kind);
        let (a, b) = pair(&server);
        // Two notes and three work requests: all fit the hook's budgets (2 + 3).
        let notes: Vec<String> = (0..2).map(|i| a.send(&["pc-b", "--body", &format!("note {i}")])).collect();
        let reqs: Vec<String> =
            (0..3).map(|i| a.send(&["pc-b", "--kind", "request", "--body", &format!("job {i}")])).collect();
        let ids: Vec<String> = notes.iter().chain(reqs.iter()).cloned().collect();
        // Killed right after storing, before the confirm went out.
        let out = b.cmd(&["sync"]).env("PCMAIL_FAULT", "exit-after-store").output().unwrap();
        assert_eq!(out.status.code(), Some(137), "{kind:?}: fault injection fired");
        for id in &ids {
            assert_eq!(a.state_of(id), "new", "{kind:?}: not confirmed yet");
        }
        let ctx = b.hook("s1", "UserPromptSubmit");
        b.ok(&["sync"]);
        for id in &ids {
            assert_eq!(a.state_of(id), "seen", "{kind:?}: delivered, then seen via the hook");
            assert_eq!(ctx.matches(id.as_str()).count(), 1, "{kind:?}: shown once\n{ctx}");
        }
        let tl = a.json(&["status", &ids[0]]);
        let states: Vec<&str> =
            tl[0]["timeline"].as_array().unwrap().iter().map(|e| e["state"].as_str().unwrap()).collect();
        assert_eq!(states, ["new", "delivered", "seen"], "{kind:?}: delivered once");
        let inbox = b.json(&["inbox", "--all"]);
        assert_eq!(inbox.as_array().unwrap().len(), 5, "{kind:?}: stored once each");
        // A new session: seen notes are not shown again, open work requests are.
        let ctx2 = b.hook("s2", "UserPromptSubmit");
        assert!(notes.iter().all(|n| !ctx2.contains(n.as_str())), "{kind:?}\n{ctx2}");
        assert!(reqs.iter().all(|r| ctx2.contains(r.as_str())), "{kind:?}\n{ctx2}");
        // The same session again: only a count line, which counts the seen
        // notes too (they were skipped before being counted).
        let again = b.hook("s1", "UserPromptSubmit");
        assert!(!again.contains("<pcmail-mail id="), "{kind:?}\n{again}");
        assert!(again.contains("5 open mail"), "{kind:?}\n{again}");
    }
}

/// The hook never touches the network: with the server gone it still
/// answers from the store (and starts no network call of its own).
#[test]
fn hook_works_with_the_server_down() {
    let server = Server::start(Kind::Rust);
    let [a] = synced(&server, ["pc-a"]);
    let id = a.send(&["pc-a", "--body", "hello"]);
    a.ok(&["sync"]);
    drop(server);
    let t = std::time::Instant::now();
    let ctx = a.hook("s1", "UserPromptSubmit");
    assert!(ctx.contains(&id));
    assert!(t.elapsed() < std::time::Duration::from_secs(2));
    // Marks wait in the pending table while the server is down.
    let out = a.run(&["sync"]);
    assert_eq!(out.status.code(), Some(6), "unreachable server exits 6");
    // Sending while down queues locally and says so.
    let out = a.run(&["send", "pc-a", "--body", "later"]);
    // The roster is cached, so the address resolves; the mail is queued.
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("queued"));
}

#[test]
fn bad_input_gets_distinct_exit_codes() {
    let server = Server::start(Kind::Rust);
    let [a] = synced(&server, ["pc-a"]);
    assert_eq!(a.run(&["status", "mail-1-0000abcd"]).status.code(), Some(7), "unknown id");
    assert_eq!(a.run(&["send", "pc-a", "--body", "x", "--expires", "soon"]).status.code(), Some(2));
    assert_eq!(a.run(&["frobnicate"]).status.code(), Some(2));
    assert_eq!(a.run(&["send", "nobody", "--body", "x"]).status.code(), Some(4));
    assert_eq!(a.run(&["ack", "mail-1-0000abcd"]).status.code(), Some(7));
    // The PC's credential proves it (a stale token beside it does not matter); with
    // no credential a wrong token is refused (5), a credential nobody holds is not enrolled (12).
    let bad_token = a.cmd(&["sync"]).env("PCMAIL_TOKEN", "wrong").env_remove("PCMAIL_CREDENTIAL").output().unwrap();
    assert_eq!(bad_token.status.code(), Some(5), "{}", String::from_utf8_lossy(&bad_token.stderr));
    assert!(String::from_utf8_lossy(&bad_token.stderr).contains("unauthorized"));
    let bad_cred =
        a.cmd(&["sync"]).env_remove("PCMAIL_TOKEN").env("PCMAIL_CREDENTIAL", random_credential()).output().unwrap();
    assert_eq!(bad_cred.status.code(), Some(12), "{}", String::from_utf8_lossy(&bad_cred.stderr));
    assert!(String::from_utf8_lossy(&bad_cred.stderr).contains("not enrolled"));
    // Formula and SQL text travels verbatim.
    let id = a.send(&["pc-a", "--subject", "=SUM(A1)", "--body", "'; DROP TABLE mail; -- +1 @x 0123 true"]);
    a.ok(&["sync"]);
    let m = a.json(&["read", &id]);
    assert_eq!(m["subject"], "=SUM(A1)");
    assert_eq!(m["body"], "'; DROP TABLE mail; -- +1 @x 0123 true");
}

/// Google's HTML error pages and lost responses (the script ran, the caller
/// saw an error page): the client treats them as transient, queues, retries
/// with the same id, and the recipient gets the mail exactly once.
#[test]
fn gas_html_pages_and_lost_responses_lose_and_double_nothing() {
    let server = Server::start(Kind::Gas);
    let (a, b) = pair(&server);
    a.ok(&["roster"]); // a's cached roster learns pc-b
    server.fault("lost");
    let out = a.json(&["send", "pc-b", "--body", "sent while responses get lost"]);
    assert_eq!(out["queued"], true, "an HTML page means: queue and retry");
    let id = out["ids"][0].as_str().unwrap().to_string();
    let out = b.run(&["sync"]);
    assert_eq!(out.status.code(), Some(6), "HTML page → transient → exit 6");
    server.fault("throw");
    assert_eq!(a.run(&["sync"]).status.code(), Some(6));
    server.fault("off");
    a.ok(&["sync"]); // resends the queued mail with the same id: the server already has it
    b.ok(&["sync"]);
    let inbox = b.json(&["inbox", "--all"]);
    let ids: Vec<&str> = inbox.as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [id.as_str()], "exactly one copy");
    assert_eq!(a.state_of(&id), "delivered");
    let sent = a.json(&["sent"]);
    assert_eq!(sent.as_array().unwrap().len(), 1, "one sent record: {sent}");
}

fn set_last_poll(pc: &Pc, at: i64) {
    let c = rusqlite::Connection::open(pc.store()).unwrap();
    c.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
    c.execute("UPDATE meta SET value = ?1 WHERE key = 'last_poll_ok_at'", [at.to_string()]).unwrap();
}

/// With the last poll over 3 minutes old and no poller alive, the hook starts
/// a detached `pcmail sync` and returns at once; the sync delivers the mail.
#[test]
fn hook_starts_a_detached_poller_when_the_last_poll_is_stale() {
    let server = Server::start(Kind::Rust);
    let (a, b) = pair(&server);
    let id = a.send(&["pc-b", "--body", "pick me up"]);
    // Fresh poll: the hook starts nothing.
    assert_eq!(b.hook("s0", "UserPromptSubmit"), "");
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(a.state_of(&id), "new", "no poller was started");
    set_last_poll(&b, 0);
    let t = std::time::Instant::now();
    assert_eq!(b.hook("s1", "UserPromptSubmit"), "", "nothing stored yet");
    assert!(t.elapsed() < std::time::Duration::from_secs(1), "the hook does not wait for the poller");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while a.state_of(&id) != "delivered" {
        assert!(std::time::Instant::now() < deadline, "the detached poller never delivered");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(b.hook("s2", "UserPromptSubmit").contains(&id));
}

/// The hook works with no network at all (a network namespace with no
/// interfaces, not even loopback up) and prints nothing on a broken store.
#[test]
fn hook_needs_no_network_and_fails_silently() {
    let server = Server::start(Kind::Rust);
    let [a] = synced(&server, ["pc-a"]);
    let id = a.send(&["pc-a", "--body", "offline read"]);
    a.ok(&["sync"]);
    set_last_poll(&a, 0); // stale: it may try to spawn a poller, which must not hurt
    if unsafe_is_root() {
        use std::io::Write;
        let mut child = std::process::Command::new("unshare")
            .arg("--net")
            .arg(exe())
            .arg("hook")
            .env("PCMAIL_HOME", a.home.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("unshare (util-linux)");
        child.stdin.take().unwrap().write_all(br#"{"session_id":"netless","hook_event_name":"SessionStart"}"#).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).contains(&id), "shown with no network at all");
    } else {
        eprintln!("not root: the no-network namespace part needs CAP_SYS_ADMIN (CI runs as root)");
    }
    // A corrupt store: no output, exit 0, nothing on stderr.
    std::fs::write(a.store(), b"this is not a database").unwrap();
    let _ = std::fs::remove_file(a.home.path().join("store.db-wal"));
    let _ = std::fs::remove_file(a.home.path().join("store.db-shm"));
    assert_eq!(a.hook("s9", "UserPromptSubmit"), "");
    // Garbage on stdin: still silent and successful.
    let out = a.cmd(&["hook"]).stdin(std::process::Stdio::null()).output().unwrap();
    assert!(out.status.success() && out.stdout.is_empty() && out.stderr.is_empty());
}

fn unsafe_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false)
}

#[test]
fn wait_for_returns_when_the_daemon_delivers_and_times_out_with_exit_8() {
    let server = Server::start(Kind::Rust);
    let (a, b) = pair(&server);
    let mut daemon =
        b.cmd(&["daemon"]).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
    let t = std::time::Instant::now();
    let out = a.run(&["--json", "send", "pc-b", "--body", "wait for me", "--wait-for", "delivered", "--timeout", "20"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(t.elapsed() < std::time::Duration::from_secs(10), "long-poll delivered quickly");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(v["mails"][0]["state"], "delivered", "{v}");
    let id = v["ids"][0].as_str().unwrap().to_string();
    let out = a.run(&["status", &id, "--wait-for", "seen", "--timeout", "1"]);
    assert_eq!(out.status.code(), Some(8), "{}", String::from_utf8_lossy(&out.stderr));
    // A second daemon for the same PC user refuses to start.
    let second = b.run(&["daemon"]);
    assert!(second.status.success() && String::from_utf8_lossy(&second.stdout).contains("already running"));
    daemon.kill().unwrap();
    let _ = daemon.wait();
}

/// Unix only: the fake `claude` is a shell script and the hook commands are run through /bin/sh.
#[cfg(unix)]
#[test]
fn hooks_install_and_doctor() {
    let server = Server::start(Kind::Rust);
    let [a] = synced(&server, ["pc-a"]);
    // doctor is ok only with a poller running (and a recent good poll)
    let mut daemon =
        a.cmd(&["daemon"]).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
    let home = tempfile::tempdir().unwrap();
    // a `claude` on PATH that answers --version like Claude Code does
    let bin = tempfile::tempdir().unwrap();
    let claude = bin.path().join("claude");
    std::fs::write(&claude, "#!/bin/sh\n[ \"$1\" = --version ] && echo '2.0.0 (Claude Code)'\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let run = |args: &[&str], path: &std::path::Path| {
        a.cmd(args).env("HOME", home.path()).env_remove("CLAUDE_CONFIG_DIR").env("PATH", path).output().unwrap()
    };
    let doctor = |args: &[&str], expect_ok: bool| {
        let out = run(args, bin.path());
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert_eq!(out.status.success(), expect_ok, "{text}");
        text
    };
    let before = doctor(&["doctor"], false);
    assert!(before.contains("FAIL Claude Code hooks") && before.contains("pcmail hooks install"), "{before}");
    assert!(before.contains("ok   server reachable"), "{before}");
    assert!(before.contains("Claude Code version: 2.0.0 (Claude Code)"), "{before}");
    let out = run(&["hooks", "install"], bin.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let settings_path = home.path().join(".claude/settings.json");
    let settings: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&settings_path).unwrap()).unwrap();
    let pcmail = exe().canonicalize().unwrap();
    for ev in ["SessionStart", "UserPromptSubmit"] {
        let handler = &settings["hooks"][ev][0]["hooks"][0];
        // shell form, no `args`: runs on Claude Code releases that predate `args`
        assert_eq!(handler.get("args"), None, "{handler}");
        let cmd = handler["command"].as_str().unwrap();
        let hook_binary = pcmail.with_file_name(if cfg!(windows) { "pcmail-hook.exe" } else { "pcmail-hook" });
        if hook_binary.is_file() {
            // the separate hook binary beside pcmail: its path alone
            assert!(cmd.contains(hook_binary.to_str().unwrap()) && !cmd.ends_with(" hook"), "{cmd}");
        } else {
            assert!(cmd.ends_with(" hook") && cmd.contains(pcmail.to_str().unwrap()), "{cmd}");
            let out = std::process::Command::new("/bin/sh").arg("-c").arg(format!("{cmd} --help")).output().unwrap();
            assert!(
                out.status.success() && String::from_utf8_lossy(&out.stdout).contains("reads the hook event JSON"),
                "{out:?}"
            );
        }
        assert_eq!(handler["timeout"], 5);
    }
    assert!(!home.path().join(".claude.json").exists(), "never touches ~/.claude.json");
    let after = doctor(&["doctor"], true);
    assert!(after.contains("ok   Claude Code hooks: installed for SessionStart, UserPromptSubmit"), "{after}");
    assert!(after.contains(", shell form") && !after.contains("Installed"), "states in words: {after}");

    // an entry written by the pcmail before (exec form, `args`) is reported, and `--fix` migrates it
    let old = serde_json::json!({"model": "x", "hooks": {
        "SessionStart": [{"matcher": "startup|resume|clear|compact",
                          "hooks": [{"type": "command", "command": pcmail, "args": ["hook"], "timeout": 5}]}],
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": pcmail, "args": ["hook"], "timeout": 5}]}]}});
    std::fs::write(&settings_path, old.to_string()).unwrap();
    let text = doctor(&["doctor"], false);
    assert!(text.contains("old exec form with args: blocks prompts on Claude Code before"), "{text}");
    assert!(text.contains("pcmail doctor --fix"), "{text}");
    let text = doctor(&["doctor", "--fix"], true);
    assert!(
        text.contains("fixed: hooks moved to the shell form") && text.contains("installed for SessionStart"),
        "{text}"
    );
    let migrated: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&settings_path).unwrap()).unwrap();
    assert_eq!(migrated["model"], "x");
    assert_eq!(
        migrated["hooks"]["UserPromptSubmit"][0]["hooks"][0],
        settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]
    );
    assert_eq!(migrated["hooks"]["SessionStart"], settings["hooks"]["SessionStart"]);
    // nothing left to fix: a second --fix changes nothing
    let text = doctor(&["doctor", "--fix"], true);
    assert!(!text.contains("fixed:"), "{text}");

    let out = run(&["hooks", "status"], bin.path());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("installed")
            && String::from_utf8_lossy(&out.stdout).contains("shell form")
    );

    // a Claude Code too old for pcmail's hooks is flagged
    std::fs::write(&claude, "#!/bin/sh\necho '1.0.61 (Claude Code)'\n").unwrap();
    let text = doctor(&["doctor"], false);
    assert!(text.contains("FAIL Claude Code version: 1.0.61 (Claude Code), older than 1.0.62"), "{text}");

    let empty = tempfile::tempdir().unwrap();
    let out = run(&["hooks", "uninstall"], empty.path());
    assert!(out.status.success());
    let out = run(&["doctor"], empty.path());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success() && text.contains("Claude Code version: claude not on PATH"), "{text}");
    daemon.kill().unwrap();
    let _ = daemon.wait();
}

#[test]
fn demo_runs_on_the_embedded_default() {
    let home = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(exe()).arg("demo").env("PCMAIL_HOME", home.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("sequenceDiagram"));
    assert!(text.contains("[判断依頼]"));
    assert_eq!(text.matches("  done ").count(), 3, "note acked, decision answered, reply acked:\n{text}");
    assert!(text.contains("(reply:mail-"));
    // The narrative says when a mail is acked, the diagram
    // labels the reply as a reply, and the 8-character names are explained.
    assert!(text.contains("beta acks the note mail-"), "{text}");
    assert!(text.contains("acked by being shown"), "{text}");
    assert!(text.contains("first 8 characters of its Claude session id"), "{text}");
    let reply_line = text.lines().find(|l| l.contains("beta->>server: reply ")).unwrap_or_else(|| panic!("{text}"));
    assert!(reply_line.contains(" to "), "{reply_line}");
    assert!(text.contains("(answered by reply "), "{text}");
    let pos = |needle: &str| text.find(needle).unwrap_or_else(|| panic!("{needle}: {text}"));
    assert!(
        pos("beta->>server: reply ") < pos("(answered by reply "),
        "the reply is sent before it closes the original"
    );
}

/// The client's token comes from the OS keyring (Secret Service, here
/// gnome-keyring in a private D-Bus session) and is never written to a file;
/// so does the credential the PC makes for its label.
#[test]
fn token_lives_in_the_os_keyring_not_in_files() {
    let server = Server::start(Kind::Rust);
    let home = tempfile::tempdir().unwrap();
    let script = format!(
        "echo pw | gnome-keyring-daemon --unlock --components=secrets >/dev/null 2>&1 || exit 90\n\
         {exe} init --label pc-k --server {url} >/dev/null || exit 91\n\
         echo {token} | {exe} token set || exit 92\n\
         {exe} sync || exit 93\n\
         {exe} doctor | grep 'label \"pc-k\"' || exit 94\n\
         {exe} --json roster\n",
        exe = exe().display(),
        url = server.url,
        token = TOKEN
    );
    let out = std::process::Command::new("dbus-run-session")
        .args(["--", "sh", "-c", &script])
        .env("PCMAIL_HOME", home.path())
        .env_remove("PCMAIL_TOKEN")
        .env_remove("PCMAIL_CREDENTIAL")
        .env("HOME", home.path())
        .output()
        .expect("dbus-run-session (package dbus)");
    assert!(
        out.status.success(),
        "exit {:?}\n{}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\"pc-k\""), "synced with the keyring's token");
    assert!(
        stdout.contains("ok   label \"pc-k\": bound to this installation (credential in the OS keyring)"),
        "the first sync claimed the label with a credential kept in the keyring:\n{stdout}"
    );
    // Nowhere in the PC's files (config, store, logs)…
    for entry in walk(home.path()) {
        if entry.is_file() && !entry.to_string_lossy().contains("keyrings") {
            let bytes = std::fs::read(&entry).unwrap();
            assert!(!bytes.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes()), "the token is in {}", entry.display());
            // The credential is 64 hex characters: no such run in any file.
            let hex_run = bytes.split(|b| !b.is_ascii_hexdigit()).map(<[u8]>::len).max().unwrap_or(0);
            assert!(hex_run < 64, "a credential-like secret is in {}", entry.display());
        }
    }
    // Without the keyring the label's credential cannot be presented: the
    // bound label refuses this PC (exit 12), so no file held the secret.
    let out = std::process::Command::new(exe())
        .arg("sync")
        .env("PCMAIL_HOME", home.path())
        .env("PCMAIL_TOKEN", TOKEN)
        .env_remove("PCMAIL_CREDENTIAL")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .env("HOME", home.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(12), "{}", String::from_utf8_lossy(&out.stderr));
    // …and without the keyring or PCMAIL_TOKEN the client has no token.
    let out = std::process::Command::new(exe())
        .arg("sync")
        .env("PCMAIL_HOME", home.path())
        .env_remove("PCMAIL_TOKEN")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .env("HOME", home.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(9), "{}", String::from_utf8_lossy(&out.stderr));
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A full disk on the receiving PC: nothing is confirmed that was not
/// stored, the store stays intact, and once there is room every mail arrives
/// exactly once. (Root only: it mounts a 1 MiB tmpfs as the PC's directory.)
#[test]
fn full_disk_loses_nothing_and_corrupts_nothing() {
    if !unsafe_is_root() {
        eprintln!("not root: cannot mount a small tmpfs (CI runs as root)");
        return;
    }
    struct Mount(std::path::PathBuf);
    impl Drop for Mount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    let server = Server::start(Kind::Rust);
    let a = Pc::new(&server, "pc-a");
    let b = Pc::new(&server, "pc-b");
    let mnt = tempfile::tempdir().unwrap();
    let st = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(mnt.path())
        .status()
        .unwrap();
    assert!(st.success(), "mount tmpfs");
    let _guard = Mount(mnt.path().to_path_buf());
    // pc-b lives on the tiny filesystem.
    {
        let f = "config.toml";
        std::fs::copy(b.home.path().join(f), mnt.path().join(f)).unwrap();
    }
    let on_b = |args: &[&str]| b.cmd(args).env("PCMAIL_HOME", mnt.path()).output().unwrap();
    assert!(on_b(&["sync"]).status.success());
    a.ok(&["sync"]);
    a.ok(&["roster"]);
    let body = "x".repeat(15_000);
    let ids: Vec<String> = (0..4).map(|_| a.send(&["pc-b", "--body", &body])).collect();
    // Fill the disk.
    let filler = mnt.path().join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0u8; 4096];
        while f.write_all(&chunk).is_ok() {}
        let _ = f.sync_all();
    }
    let out = on_b(&["sync"]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(9), "a full disk is local trouble (exit 9): {err}");
    for id in &ids {
        let st = a.state_of(id);
        if st != "new" {
            // Whatever was confirmed must really be in the store.
            let c = rusqlite::Connection::open(mnt.path().join("store.db")).unwrap();
            let n: i64 = c.query_row("SELECT count(*) FROM inbox WHERE id = ?1", [id], |r| r.get(0)).unwrap();
            assert_eq!(n, 1, "{id} is {st} on the server but not stored; sync said: {err}");
        }
    }
    std::fs::remove_file(&filler).unwrap();
    let out = on_b(&["sync"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for id in &ids {
        assert_eq!(a.state_of(id), "delivered", "{id}");
    }
    let c = rusqlite::Connection::open(mnt.path().join("store.db")).unwrap();
    let ok: String = c.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(ok, "ok");
    let n: i64 = c.query_row("SELECT count(*) FROM inbox", [], |r| r.get(0)).unwrap();
    assert_eq!(n, 4, "each mail stored once");
}

/// Through `pcmail hook`: garbage prints and marks
/// nothing; a reply to my mail is not offered `pcmail reply`; after 12 notes a
/// session gets one count line until `pcmail inbox` is run; decision mail never waits.
#[test]
fn hook_backlog_bound_is_reset_by_pcmail_inbox_and_garbage_marks_nothing() {
    use std::io::Write;
    use std::process::Stdio;
    let server = Server::start(Kind::Rust);
    let (a, b) = pair(&server);
    for i in 0..20 {
        a.send(&["pc-b", "--body", &format!("note {i}")]);
    }
    b.ok(&["sync"]);
    let mut child =
        b.cmd(&["hook"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(b"garbage").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
    let inbox = b.json(&["inbox"]);
    assert!(inbox.as_array().unwrap().iter().all(|m| m["status"] != "seen"), "garbage marked nothing: {inbox}");

    for _ in 0..6 {
        let ctx = b.hook("s1", "UserPromptSubmit");
        assert_eq!(ctx.matches("<pcmail-mail id=").count(), 2, "{ctx}");
        assert!(ctx.contains("Notes: `pcmail ack <id>`") && !ctx.contains("pcmail reply"), "{ctx}");
    }
    assert_eq!(b.hook("s1", "UserPromptSubmit"), "pcmail: 8 more unread notes: pcmail inbox");
    let d = a.send(&["pc-b", "--kind", "decision", "--body", "which way?"]);
    b.ok(&["sync"]);
    let ctx = b.hook("s1", "UserPromptSubmit");
    assert!(ctx.contains(&d) && ctx.ends_with("pcmail: 8 more unread notes: pcmail inbox"), "{ctx}");
    assert!(ctx.contains("answer with `pcmail reply <id>`"), "{ctx}");
    b.ok(&["inbox"]);
    assert_eq!(b.hook("s1", "UserPromptSubmit").matches("<pcmail-mail id=").count(), 2, "fed again after pcmail inbox");

    // A reply to my mail: acknowledged by being shown, and `reply` is not offered for it.
    let mine = b.send(&["pc-a", "--kind", "request", "--body", "please"]);
    a.ok(&["sync"]);
    let v = a.json(&["reply", &mine, "--body", "done"]);
    let answer = v["ids"][0].as_str().or(v["id"].as_str()).unwrap_or_else(|| panic!("{v}")).to_string();
    b.ok(&["sync"]);
    let ctx = b.hook("s-new", "UserPromptSubmit");
    assert!(ctx.contains(&answer) && ctx.contains("Replies to your mail: acknowledged by being shown"), "{ctx}");
    b.ok(&["sync"]);
    assert_eq!(a.state_of(&answer), "done", "acked once shown");
}
