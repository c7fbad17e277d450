//! Handoffs and memory through `pcmail-hook` as a whole process, on the hook JSON Claude
//! Code sends: the Stop reminder (once per session, never while
//! `stop_hook_active`, not after a handoff, off by config) and SessionStart's
//! handoff and memory lines after the mail, inside the 1,800-char budget.

use chrono::{TimeZone, Utc};
use pcmail_core::Mail;
use pcmail_handoff::handoffs::{self, Author, Sections};
use pcmail_handoff::memory::{self, MemKind};
use pcmail_handoff::repo::Repo;
use pcmail_store::{inbox, meta, Store};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

struct Pc {
    dir: tempfile::TempDir,
    home: PathBuf,
    repo: PathBuf,
}

impl Pc {
    fn new(config: &str) -> Pc {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join("config.toml"), format!("label = \"pc-b\"\n{config}")).unwrap();
        let mut s = Store::open(&home.join("store.db")).unwrap();
        s.meta_set_i64(meta::LAST_POLL_OK_AT, i64::MAX / 2).unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("src")).unwrap();
        Pc { dir, home, repo }
    }

    fn transcript(&self, session: &str, bytes: usize) -> PathBuf {
        let p = self.dir.path().join(format!("{session}.jsonl"));
        let line = json!({"type": "assistant", "message": {"content": "x".repeat(200)}}).to_string() + "\n";
        std::fs::write(&p, line.repeat(bytes / line.len() + 1)).unwrap();
        p
    }

    /// Runs the hook with `input`; asserts exit 0 and a silent stderr.
    fn run(&self, input: &Value) -> Option<Value> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_pcmail-hook"))
            .env("PCMAIL_HOME", &self.home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input.to_string().as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
        (!out.stdout.is_empty()).then(|| serde_json::from_slice(&out.stdout).expect("the hook prints JSON"))
    }

    /// The Stop event exactly as Claude Code sends it.
    fn stop(&self, session: &str, transcript: &Path, active: bool) -> Option<Value> {
        self.run(&json!({
            "session_id": session,
            "transcript_path": transcript,
            "cwd": self.repo.join("src"),
            "permission_mode": "default",
            "hook_event_name": "Stop",
            "stop_hook_active": active,
        }))
    }

    fn reminded(&self) -> i64 {
        Store::open(&self.home.join("store.db"))
            .unwrap()
            .conn()
            .query_row("SELECT count(*) FROM stop_reminders", [], |r| r.get(0))
            .unwrap()
    }
}

fn assert_blocks(out: Option<Value>, session: &str) {
    let v = out.expect("the reminder");
    assert_eq!(v["decision"], "block", "{v}");
    let reason = v["reason"].as_str().unwrap();
    assert!(reason.contains(&format!("PCMAIL_SESSION={session} pcmail handoff new --slug")), "{reason}");
    assert_eq!(v.as_object().unwrap().len(), 2, "only decision and reason: {v}");
}

const S1: &str = "9f2c4e1a-1111-4222-8333-944455556666";
const S2: &str = "0b7d3c2e-aaaa-4bbb-8ccc-dddddddddddd";

#[test]
fn stop_reminds_once_per_session_and_never_while_stop_hook_active() {
    let pc = Pc::new("");
    let long = pc.transcript(S1, 1500 * 1024);
    // Claude Code continuing because of a Stop hook: never blocks, records nothing.
    assert_eq!(pc.stop(S1, &long, true), None);
    assert_eq!(pc.reminded(), 0);
    assert_blocks(pc.stop(S1, &long, false), S1);
    // The continuation's Stop, then later turns of the same session: silent.
    assert_eq!(pc.stop(S1, &long, true), None);
    assert_eq!(pc.stop(S1, &long, false), None);
    assert_eq!(pc.stop(S1, &long, false), None);
    assert_eq!(pc.reminded(), 1);
    // Another session is reminded on its own.
    let long2 = pc.transcript(S2, 1500 * 1024);
    assert_blocks(pc.stop(S2, &long2, false), S2);
    assert_eq!(pc.reminded(), 2);
}

#[test]
fn no_reminder_for_short_work_a_written_handoff_outside_a_repo_or_when_off() {
    let pc = Pc::new("");
    // Below the default threshold (1 MiB): not real work yet.
    assert_eq!(pc.stop(S1, &pc.transcript(S1, 900 * 1024), false), None);
    // The session wrote its handoff (the name carries its first 8 characters).
    let repo = Repo::at(&pc.repo);
    let s = Sections {
        goal: Some("g".into()),
        done: None,
        failed: None,
        state: Some("working".into()),
        next: Some("n".into()),
    };
    let at = Utc.with_ymd_and_hms(2026, 4, 9, 14, 0, 0).unwrap();
    handoffs::new_handoff(&repo, "done-work", &Author { session: S1, by: "pc-b/9f2c4e1a", at }, &s).unwrap();
    assert_eq!(pc.stop(S1, &pc.transcript(S1, 1500 * 1024), false), None);
    // No repo around the session's directory.
    let out = pc
        .run(&json!({"session_id": S2, "transcript_path": pc.transcript(S2, 1500 * 1024), "cwd": pc.dir.path(),
        "hook_event_name": "Stop", "stop_hook_active": false}));
    assert_eq!(out, None);
    assert_eq!(pc.reminded(), 0);

    // Off by config; and a lower threshold by config.
    let off = Pc::new("[handoffs]\nstop_reminder = false\n");
    assert_eq!(off.stop(S1, &off.transcript(S1, 1500 * 1024), false), None);
    let low = Pc::new("[handoffs]\nstop_reminder_min_transcript_kb = 10\n");
    assert_blocks(low.stop(S1, &low.transcript(S1, 50 * 1024), false), S1);
}

/// The handoff `task-D`, written by pc-a/s on 2026-04-D at 09:00 UTC.
fn write_task(repo: &Repo, d: u32) {
    let at = Utc.with_ymd_and_hms(2026, 4, d, 9, 0, 0).unwrap();
    let s = Sections {
        goal: Some(format!("goal {d}")),
        done: None,
        failed: None,
        state: Some("working".into()),
        next: Some(format!("next {d}")),
    };
    handoffs::new_handoff(repo, &format!("task-{d}"), &Author { session: "s", by: "pc-a/s", at }, &s).unwrap();
}

#[test]
fn session_start_adds_handoffs_and_memory_after_the_mail_within_the_budget() {
    let pc = Pc::new("");
    let repo = Repo::at(&pc.repo);
    let t = |d| Utc.with_ymd_and_hms(2026, 4, d, 9, 0, 0).unwrap();
    for d in 1..=5 {
        write_task(&repo, d);
    }
    handoffs::rollup(&repo, "spring", &Author { session: "r", by: "pc-a/r", at: t(3) }, t(3), "first three").unwrap();
    memory::add(&repo, MemKind::Gotcha, "db/wal", "checkpoint only from the poller", None, "pc-a/s", t(5)).unwrap();
    let start = |session: &str| {
        pc.run(&json!({"session_id": session, "hook_event_name": "SessionStart", "source": "startup", "cwd": pc.repo}))
            .map(|v| v["hookSpecificOutput"]["additionalContext"].as_str().unwrap().to_string())
            .unwrap_or_default()
    };
    let text = start("a");
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with(
            "pcmail handoffs: latest rollup 2026-04-03_09-00_r_rollup_spring (through 2026-04-03 09:00); 2 ACTIVE"
        ),
        "{text}"
    );
    assert_eq!(lines[1], "  rollup says: first three", "{text}");
    assert!(lines[2].starts_with("- 2026-04-05_09-00_s_task-5: goal 5 → next: next 5"), "{text}");
    // No dead end was written ("(nothing recorded)"): no line for it.
    assert!(!text.contains("didn't work"), "{text}");
    assert!(
        lines[4].starts_with("pcmail memory: 1 entries (1 gotchas)")
            && lines[5] == "- [db/wal] checkpoint only from the poller",
        "{text}"
    );

    // With mail filling its part, the handoff part shrinks and the whole stays in budget.
    let mut s = Store::open(&pc.home.join("store.db")).unwrap();
    s.write(|tx| {
        for i in 0..40 {
            let m: Mail = serde_json::from_value(json!({"id": format!("mail-1-{i:08x}"), "from": "pc-a", "to": "pc-b", "kind": "decision",
                "subject": "s", "body": "b".repeat(500), "urgent": true, "createdAt": 1_700_000_000_000i64 + i, "state": "delivered"})).unwrap();
            inbox::insert_received(tx, &m, 1_700_000_000_000)?;
        }
        Ok(())
    })
    .unwrap();
    drop(s);
    let full = start("b");
    assert!(full.contains("<pcmail-mail"), "{full}");
    assert!(full.chars().count() <= pcmail_core::present::TOTAL_CHARS, "{}", full.chars().count());
    let tail = &full[full.rfind("</pcmail-mail>").unwrap()..];
    assert!(
        tail.contains("pcmail") && (tail.contains("pcmail handoff list") || tail.contains("- 2026-04-05")),
        "{full}"
    );
}

#[test]
fn session_start_uses_the_kept_view_while_the_repo_is_unchanged_and_sees_every_change() {
    use pcmail_handoff::viewcache::{self, Source};
    let pc = Pc::new("");
    let repo = Repo::at(&pc.repo);
    let t = |d| Utc.with_ymd_and_hms(2026, 4, d, 9, 0, 0).unwrap();
    let write = |d: u32| write_task(&repo, d);
    write(1);
    memory::add(&repo, MemKind::Gotcha, "db", "the pool leaks", None, "pc-a/s", t(1)).unwrap();
    let start = |session: &str| {
        pc.run(&json!({"session_id": session, "hook_event_name": "SessionStart", "source": "startup", "cwd": pc.repo}))
            .map(|v| v["hookSpecificOutput"]["additionalContext"].as_str().unwrap().to_string())
            .unwrap_or_default()
    };
    // Files written a moment ago: the hook reads them and keeps nothing.
    let read = start("a");
    let cache = pc.home.join("hook-views");
    assert!(!viewcache::cache_path(&cache, &pc.repo).exists());
    assert!(read.contains("- 2026-04-01_09-00_s_task-1: goal 1 → next: next 1"), "{read}");
    assert!(read.contains("- [db] the pool leaks"), "{read}");

    // Kept as if the files had settled (the hook itself keeps a view only of
    // files a few seconds old): the hook then serves it, the same text.
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
    let kept = |expected: Source| {
        let (_, src) = viewcache::view_cached(&Repo::find_unnamed(&pc.repo).unwrap(), &cache, later).unwrap();
        assert_eq!(src, expected);
    };
    kept(Source::ReadAndKept);
    kept(Source::Cache);
    assert_eq!(start("b"), read);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&cache), mode(&viewcache::cache_path(&cache, &pc.repo))), (0o700, 0o600));
    }

    // A new handoff and a memory file rewritten with the same size are seen at once.
    write(2);
    let topic = memory::topic_path(&repo, "db");
    let text = std::fs::read_to_string(&topic).unwrap();
    std::fs::write(&topic, text.replace("the pool leaks", "the pool LEAKS")).unwrap();
    let changed = start("c");
    assert!(changed.contains("- 2026-04-02_09-00_s_task-2: goal 2 → next: next 2"), "{changed}");
    assert!(changed.contains("- [db] the pool LEAKS"), "{changed}");

    // A damaged cache file is ignored.
    kept(Source::ReadAndKept);
    std::fs::write(viewcache::cache_path(&cache, &pc.repo), "{ not json").unwrap();
    assert_eq!(start("d"), changed);
}
