//! `pcmail-hook` as a whole process on a real store.

use pcmail_core::{Mail, Millis};
use pcmail_store::{inbox, meta, Store};
use serde_json::json;
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const NOW: Millis = 1_800_000_000_000;

fn hook_exe() -> &'static str {
    env!("CARGO_BIN_EXE_pcmail-hook")
}

struct Pc {
    _dir: tempfile::TempDir,
    home: PathBuf,
}

impl Pc {
    fn new() -> Pc {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join("config.toml"), "label = \"pc-b\"\n").unwrap();
        let mut s = Store::open(&home.join("store.db")).unwrap();
        // A fresh poll: no poller is started unless a test wants one.
        s.meta_set_i64(meta::LAST_POLL_OK_AT, i64::MAX / 2).unwrap();
        Pc { _dir: dir, home }
    }

    fn store(&self) -> Store {
        Store::open(&self.home.join("store.db")).unwrap()
    }

    /// Stores mails (kind, urgent) created a minute apart, the last newest.
    fn receive(&self, prefix: &str, mails: &[(&str, bool)]) -> Vec<String> {
        let mut s = self.store();
        let mut ids = vec![];
        s.write(|tx| {
            for (i, (kind, urgent)) in mails.iter().enumerate() {
                let id = format!("{prefix}-{i:04}");
                let m: Mail = serde_json::from_value(json!({
                    "id": id, "from": "pc-a", "to": "pc-b", "kind": kind, "subject": format!("s {i}"),
                    "body": "body", "urgent": urgent, "createdAt": NOW - 3_600_000 + i as i64 * 1000, "state": "delivered",
                }))
                .unwrap();
                inbox::insert_received(tx, &m, NOW)?;
                ids.push(id);
            }
            Ok(())
        })
        .unwrap();
        ids
    }

    fn cmd(&self) -> Command {
        self.cmd_in("C.UTF-8")
    }

    /// The hook under `LANG=lang` (and no LC_ALL / LC_MESSAGES over it).
    fn cmd_in(&self, lang: &str) -> Command {
        let mut c = Command::new(hook_exe());
        c.env("PCMAIL_HOME", &self.home)
            .env_remove("LC_ALL")
            .env_remove("LC_MESSAGES")
            .env("LANG", lang)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    fn prompt_in(&self, session: &str, lang: &str) -> String {
        let mut child = self.cmd_in(lang).spawn().unwrap();
        let event = json!({"session_id": session, "hook_event_name": "UserPromptSubmit", "prompt": "hi"});
        child.stdin.take().unwrap().write_all(event.to_string().as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
        context(&out.stdout)
    }

    /// Runs the hook; asserts it is silent on stderr and exits 0; returns the context.
    fn run_raw(&self, stdin: &[u8]) -> String {
        let mut child = self.cmd().spawn().unwrap();
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
        context(&out.stdout)
    }

    fn prompt(&self, session: &str) -> String {
        self.run_raw(
            json!({"session_id": session, "hook_event_name": "UserPromptSubmit", "prompt": "hi"})
                .to_string()
                .as_bytes(),
        )
    }

    fn count(&self, sql: &str) -> i64 {
        self.store().conn().query_row(sql, [], |r| r.get(0)).unwrap()
    }
}

fn context(stdout: &[u8]) -> String {
    if stdout.is_empty() {
        return String::new();
    }
    let v: serde_json::Value = serde_json::from_slice(stdout).expect("hook prints JSON");
    v["hookSpecificOutput"]["additionalContext"].as_str().unwrap().to_string()
}

fn shown_ids(ctx: &str) -> Vec<String> {
    ctx.split("<pcmail-mail id=\"").skip(1).map(|s| s.split('"').next().unwrap().to_string()).collect()
}

#[test]
fn version_starts_and_exits() {
    let out = Command::new(hook_exe()).arg("--version").output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), format!("pcmail-hook {}", env!("CARGO_PKG_VERSION")));
}

/// Stdin that is not the hook JSON of a known event prints
/// nothing and marks nothing; the entry points of later features print nothing.
#[cfg(unix)]
#[test]
fn an_argument_that_is_not_utf8_is_no_panic() {
    use std::os::unix::ffi::OsStrExt;
    let home = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(hook_exe())
        .arg(std::ffi::OsStr::from_bytes(b"\xff"))
        .env("PCMAIL_HOME", home.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty() && out.stderr.is_empty());
}

#[test]
fn anything_but_a_known_event_prints_nothing_and_marks_nothing() {
    let pc = Pc::new();
    pc.receive("m", &[("note", false), ("decision", false), ("request", true)]);
    for input in [
        &b"garbage"[..],
        b"",
        b"{}",
        br#"{"hook_event_name":"UserPromptSubmit"}"#,
        br#"{"session_id":"s1","hook_event_name":"Notification"}"#,
        br#"{"session_id":"s1","hook_event_name":"PreToolUse","tool_name":"Bash"}"#,
        br#"{"session_id":"s1","hook_event_name":"Stop"}"#,
        br#"{"session_id":"s1","hook_event_name":"SessionEnd"}"#,
        br#"{"session_id":"s1","hook_event_name":"BeforeTool","tool_name":"run_shell_command"}"#,
        br#"{"session_id":"s1","hook_event_name":"AfterAgent","prompt":"p","prompt_response":"r"}"#,
        br#"{"session_id":"s1","hook_event_name":"BeforeModel"}"#,
    ] {
        assert_eq!(pc.run_raw(input), "", "{}", String::from_utf8_lossy(input));
    }
    assert_eq!(pc.count("SELECT count(*) FROM presented"), 0);
    assert_eq!(pc.count("SELECT count(*) FROM pending_marks"), 0);
    assert_eq!(pc.count("SELECT count(*) FROM inbox WHERE status <> 'new'"), 0);
    // The same mail does show for a real event.
    assert_eq!(shown_ids(&pc.prompt("s1")).len(), 3);
}

/// Gemini CLI's prompt event is `BeforeAgent` (its documented equivalent of
/// UserPromptSubmit): the same mail, answered under the event name it sent.
#[test]
fn gemini_before_agent_shows_mail_like_user_prompt_submit() {
    let pc = Pc::new();
    let ids = pc.receive("g", &[("request", false), ("decision", false)]);
    // Gemini CLI's payload: base fields plus the prompt.
    let input = json!({"session_id": "gemini-1", "transcript_path": "/tmp/t.json", "cwd": "/tmp",
        "hook_event_name": "BeforeAgent", "timestamp": "2026-11-30T09:00:00.000Z", "prompt": "anything for me?"});
    let mut child = pc.cmd().spawn().unwrap();
    child.stdin.take().unwrap().write_all(input.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["hookSpecificOutput"]["hookEventName"], "BeforeAgent");
    let mut shown = shown_ids(v["hookSpecificOutput"]["additionalContext"].as_str().unwrap());
    shown.sort();
    assert_eq!(shown, ids);
    // Recorded like any prompt: the same session gets the count line next time.
    assert!(pc.prompt("gemini-1").contains("already shown earlier in this session"));
}

/// Hooks of one session started at once never show the same mail twice.
#[test]
fn concurrent_hooks_of_one_session_never_show_a_mail_twice() {
    let pc = Pc::new();
    let mut mails = vec![];
    for i in 0..40 {
        mails.push((["note", "request", "decision"][i % 3], i % 7 == 0));
    }
    pc.receive("m", &mails);
    for trial in 0..20 {
        let session = format!("race-{trial}");
        let input = json!({"session_id": session, "hook_event_name": "UserPromptSubmit"}).to_string();
        // All processes are started first and block on stdin; then all are released together.
        let mut children: Vec<_> = (0..6).map(|_| pc.cmd().spawn().unwrap()).collect();
        let stdins: Vec<_> = children.iter_mut().map(|c| c.stdin.take().unwrap()).collect();
        for mut s in stdins {
            s.write_all(input.as_bytes()).unwrap();
        }
        let mut seen = HashSet::new();
        let mut total = 0;
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success() && out.stderr.is_empty());
            // Mail, or the count of what this session was shown: a hook
            // that lost the race for the write lock tries again, never
            // leaves its prompt with nothing.
            let ctx = context(&out.stdout);
            assert!(!ctx.is_empty(), "trial {trial}: a hook of the race told nothing");
            for id in shown_ids(&ctx) {
                total += 1;
                assert!(seen.insert(id.clone()), "trial {trial}: {id} shown twice to {session}");
            }
        }
        assert!(total > 0, "trial {trial} showed something");
        let recorded = pc.count(&format!("SELECT count(*) FROM presented WHERE session = '{session}'"));
        assert_eq!(recorded as usize, seen.len(), "what was shown is what was recorded");
    }
}

/// The same session's next prompt gets a count line.
#[test]
fn the_same_session_gets_a_count_line_for_mail_it_was_shown() {
    let pc = Pc::new();
    pc.receive("m", &[("note", false)]);
    assert_eq!(shown_ids(&pc.prompt("s1")), ["m-0000"]);
    let again = pc.prompt("s1");
    assert_eq!(
        again,
        "pcmail: 1 open mail for pc-b already shown earlier in this session (not repeated): pcmail inbox"
    );
    // Once acked it is no longer open: nothing to say.
    pc.store().write(|tx| inbox::advance(tx, "m-0000", pcmail_core::State::Done, NOW, "t", None).map(|_| ())).unwrap();
    assert_eq!(pc.prompt("s1"), "");
}

/// The lines that close what the hook adds speak the user's language, as
/// the kind badges and the desktop notifications do.
#[test]
fn the_closing_lines_follow_the_locale() {
    let pc = Pc::new();
    pc.receive("m", &[("note", false); 5]);
    let ja = pc.prompt_in("s1", "ja_JP.UTF-8");
    assert_eq!(shown_ids(&ja).len(), 2, "{ja}");
    assert!(ja.ends_with("\n+ほか 3 件 (期限切れ 0 件は表示せず): pcmail inbox"), "{ja}");
    // Everything shown to s1, then nothing new: the count line, in Japanese too.
    for _ in 0..2 {
        let _ = pc.prompt_in("s1", "ja_JP.UTF-8");
    }
    assert_eq!(
        pc.prompt_in("s1", "ja_JP.UTF-8"),
        "pcmail: pc-b 宛ての未完了のメール 5 件はこのセッションで表示済み (再表示しません): pcmail inbox"
    );
    // Under an English locale, English.
    let en = Pc::new();
    en.receive("m", &[("note", false); 5]);
    let text = en.prompt_in("s2", "en_US.UTF-8");
    assert!(text.ends_with("\n+3 more (0 expired not shown): pcmail inbox"), "{text}");
}

/// After 12 mails that may wait, one count line for the
/// rest; decision and urgent mail never wait; the inbox stamp resets it.
#[test]
fn the_backlog_bound_holds_notes_but_never_decisions_or_urgent_mail() {
    let pc = Pc::new();
    pc.receive("n", &vec![("note", false); 500]);
    let mut shown = 0;
    for _ in 0..6 {
        let ids = shown_ids(&pc.prompt("s1"));
        assert_eq!(ids.len(), 2, "two notes a prompt");
        shown += ids.len();
    }
    assert_eq!(shown, 12);
    for _ in 0..3 {
        assert_eq!(pc.prompt("s1"), "pcmail: 488 more unread notes: pcmail inbox");
    }
    // Another session has its own bound.
    assert_eq!(shown_ids(&pc.prompt("s2")).len(), 2);
    // Decision and urgent mail arrive: shown at once, beside the count line.
    pc.receive("u", &[("decision", false), ("note", true)]);
    let ctx = pc.prompt("s1");
    assert_eq!(shown_ids(&ctx), ["u-0000", "u-0001"], "{ctx}");
    assert!(ctx.ends_with("\npcmail: 486 more unread notes: pcmail inbox"), "{ctx}");
    // `pcmail inbox` stamps the store; the session is fed notes again.
    pc.store().meta_set_i64(meta::INBOX_VIEWED_AT, pcmail_local::system_now()).unwrap();
    let after = pc.prompt("s1");
    assert_eq!(shown_ids(&after).len(), 2, "{after}");
}

#[test]
fn a_zero_limit_means_no_bound() {
    let pc = Pc::new();
    std::fs::write(pc.home.join("config.toml"), "label = \"pc-b\"\nhook_session_mail_limit = 0\n").unwrap();
    pc.receive("n", &vec![("note", false); 40]);
    for _ in 0..10 {
        assert_eq!(shown_ids(&pc.prompt("s1")).len(), 2);
    }
}

/// A stale poll starts `pcmail sync --quiet`, found on PATH when it is not
/// next to pcmail-hook, detached and without waiting for it.
#[test]
fn a_stale_poll_starts_pcmail_sync_found_on_path() {
    let pc = Pc::new();
    pc.store().meta_set_i64(meta::LAST_POLL_OK_AT, 0).unwrap();
    let bin = pc.home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let record = pc.home.join("spawned");
    let fake = bin.join("pcmail");
    std::fs::write(&fake, format!("#!/bin/sh\necho \"$@\" > {}.tmp && mv {0}.tmp {0}\n", record.display())).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // A copy of pcmail-hook with no pcmail beside it (the build dir has one).
    let alone = pc.home.join("alone");
    std::fs::create_dir_all(&alone).unwrap();
    std::fs::copy(hook_exe(), alone.join("pcmail-hook")).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut child = Command::new(alone.join("pcmail-hook"))
        .env("PCMAIL_HOME", &pc.home)
        .env("PATH", path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(br#"{"session_id":"s1","hook_event_name":"SessionStart"}"#).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success() && out.stdout.is_empty() && out.stderr.is_empty());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !record.exists() {
        assert!(std::time::Instant::now() < deadline, "pcmail sync was not started");
        std::thread::yield_now();
    }
    assert_eq!(std::fs::read_to_string(&record).unwrap().trim(), "sync --quiet");
}

#[test]
fn find_pcmail_prefers_the_binary_next_to_the_hook() {
    let dir = tempfile::tempdir().unwrap();
    let next = dir.path().join("next");
    std::fs::create_dir_all(&next).unwrap();
    std::fs::write(next.join("pcmail"), "").unwrap();
    let found = pcmail_local::hook::find_pcmail(Some(next.join("pcmail-hook")));
    assert_eq!(found.as_deref(), Some(Path::new(&next.join("pcmail"))));
}

/// Expiry is judged by the server's clock. With this PC an
/// hour ahead of the server, a mail that expires in 30 minutes by the
/// server's clock is still shown.
#[test]
fn expiry_is_judged_by_the_servers_clock() {
    let pc = Pc::new();
    let now = pcmail_local::system_now();
    let server_now = now - 3_600_000;
    let mut s = pc.store();
    s.write(|tx| {
        let m: Mail = serde_json::from_value(json!({
            "id": "m-exp", "from": "pc-a", "to": "pc-b", "kind": "request", "body": "b",
            "createdAt": server_now - 60_000, "expiresAt": server_now + 30 * 60_000, "state": "delivered",
        }))
        .unwrap();
        inbox::insert_received(tx, &m, now)?;
        Ok(())
    })
    .unwrap();
    assert_eq!(pc.prompt("s0"), "", "by this PC's clock it has expired");
    s.meta_set_i64(meta::SERVER_OFFSET_MS, server_now - now).unwrap();
    let ctx = pc.prompt("s1");
    assert_eq!(shown_ids(&ctx), ["m-exp"], "{ctx}");
    assert!(ctx.contains("age=\"1m\""), "age by the server's clock: {ctx}");
}

/// The plugin's hooks and `pcmail hooks install` both registered: the plugin's
/// run (PCMAIL_HOOK_ORIGIN=plugin) stays silent for the events the settings
/// file has, so the mail is shown once; for the others it acts.
#[test]
fn the_plugins_hook_defers_to_a_settings_entry_for_the_same_event() {
    let f = Pc::new();
    f.receive("mail", &[("request", false)]);
    let config = tempfile::tempdir().unwrap();
    let run = |origin: Option<&str>| {
        let mut c = f.cmd();
        c.env("CLAUDE_CONFIG_DIR", config.path()).env_remove("CLAUDE_PROJECT_DIR");
        if let Some(o) = origin {
            c.env("PCMAIL_HOOK_ORIGIN", o);
        }
        let mut child = c.spawn().unwrap();
        let input = json!({"session_id": "s-plugin", "hook_event_name": "UserPromptSubmit", "prompt": "hi",
            "cwd": config.path()});
        child.stdin.take().unwrap().write_all(input.to_string().as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
        context(&out.stdout)
    };
    let settings = config.path().join("settings.json");
    let register = |event: &str, exe: &str| {
        std::fs::write(
            &settings,
            json!({"hooks": {event: [{"hooks": [{"type": "command", "command": exe, "timeout": 5}]}]}}).to_string(),
        )
        .unwrap();
    };
    // The settings entry registers this event with a program that exists: the plugin is silent.
    register("UserPromptSubmit", hook_exe());
    assert_eq!(run(Some("plugin")), "", "the plugin defers");
    // Another event only, or a program that is gone: the plugin acts.
    register("SessionStart", hook_exe());
    assert!(run(Some("plugin")).contains("mail-0000"), "the plugin acts for an event the settings lack");
    register("UserPromptSubmit", "/nowhere/pcmail-hook");
    assert!(!run(Some("plugin")).is_empty(), "a dead entry does not count");
    // A hook that is not the plugin's never defers.
    register("UserPromptSubmit", hook_exe());
    assert!(run(None).contains("mail"), "the settings entry itself acts");
}

/// Ended jobs of a session are told three at a time with a count of the
/// rest, and each once: the count is read only when the take was full.
#[test]
fn ended_jobs_are_told_three_at_a_time_with_the_rest_counted() {
    let pc = Pc::new();
    let mut s = pc.store();
    for i in 0..5 {
        s.job_mine_record(&pcmail_store::jobs::MyJob {
            job_id: format!("j{i}"),
            session: "s1".into(),
            target: "pc-b".into(),
            command: "test".into(),
            submitted_at: NOW - 10_000,
            state: "succeeded".into(),
            job: None,
            ended_at: Some(NOW - 5_000 + i),
            told_at: None,
        })
        .unwrap();
    }
    drop(s);
    let jobs_in = |ctx: &str| ctx.lines().filter(|l| l.starts_with("pcmail: job ")).count();
    let first = pc.prompt("s1");
    assert_eq!(jobs_in(&first), 3, "{first}");
    assert!(first.contains("pcmail: 2 more job(s) of yours ended"), "{first}");
    let second = pc.prompt("s1");
    assert_eq!(jobs_in(&second), 2, "{second}");
    assert!(!second.contains("more job(s)"), "{second}");
    let third = pc.prompt("s1");
    assert_eq!(jobs_in(&third), 0, "{third}");
}

/// The hook leaves its store to the process's exit (no SQLite close): one
/// prompt after another, each a new session and so a write, keeps the log
/// bounded by the short-lived rule and loses no write.
#[test]
fn prompts_that_leave_without_closing_keep_the_log_bounded_and_every_write() {
    let pc = Pc::new();
    let runs = 300;
    for i in 0..runs {
        pc.prompt(&format!("s{i}"));
    }
    let store = pc.store();
    let frames: i64 = store.conn().query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get(1)).unwrap();
    assert!(frames > 0 && frames <= 256 + 16, "{runs} prompts left {frames} frames in the log");
    let ok: String = store.conn().query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(ok, "ok");
    drop(store);
    assert_eq!(pc.count("SELECT count(*) FROM sessions WHERE session LIKE 's%'"), runs, "every prompt recorded");
}

/// A prompt within a step of the session's last one writes nothing (no
/// commit another connection sees); a step later it records its time.
#[test]
fn a_caught_up_prompt_writes_nothing_until_its_time_is_a_step_old() {
    let pc = Pc::new();
    assert_eq!(pc.prompt("s-quiet"), "", "nothing to show");
    let watcher = pc.store();
    let before = watcher.data_version().unwrap();
    let recorded = || pc.count("SELECT last_prompt_at FROM sessions WHERE session = 's-quiet'");
    let first = recorded();
    assert_eq!(pc.prompt("s-quiet"), "");
    assert_eq!(watcher.data_version().unwrap(), before, "the second prompt, within the step, committed nothing");
    assert_eq!(recorded(), first);

    let step = pcmail_core::model::limits::PROMPT_RECORD_STEP_MS;
    pc.store()
        .conn()
        .execute("UPDATE sessions SET last_prompt_at = last_prompt_at - ?1 WHERE session = 's-quiet'", [step])
        .unwrap();
    let rewound = watcher.data_version().unwrap();
    assert_eq!(pc.prompt("s-quiet"), "");
    assert_ne!(watcher.data_version().unwrap(), rewound, "a step later the prompt records its time");
    assert!(recorded() >= first, "the recorded time moved to this prompt's: {} < {first}", recorded());
}
