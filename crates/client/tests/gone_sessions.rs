//! A session killed with its terminal never sees SessionEnd: its registry
//! row stayed "not ended" for ever, and every poll round looked its process
//! up in /proc again (and sorted every session this PC ever had). The poll's
//! live list now ends such a row once, and a prompt of the same id later
//! records it anew. Real server engine on a SQLite file, a real PC store and
//! the real hook entry point.

use pcmail_client::transport::Embedded;
use pcmail_client::Client;
use pcmail_core::Millis;
use pcmail_local::config::{Config, Paths, ServerConfig};
use pcmail_local::hook;
use pcmail_local::process::ProcId;
use pcmail_store::leases::{self as sl, SessionRow};
use std::sync::atomic::{AtomicI64, Ordering};

static NOW: AtomicI64 = AtomicI64::new(1_800_000_000_000);
fn clock() -> Millis {
    NOW.fetch_add(10, Ordering::SeqCst)
}

fn row(session: &str, pid: Option<ProcId>, last_prompt_at: Millis) -> SessionRow {
    SessionRow {
        session: session.into(),
        pid: pid.map(|p| p.pid),
        pid_start: pid.and_then(|p| p.start),
        cwd: Some("/work".into()),
        repo: None,
        branch: None,
        started_at: last_prompt_at,
        last_prompt_at: Some(last_prompt_at),
        ended_at: None,
        end_reason: None,
    }
}

// Linux: a process's start time tells a pid's earlier process from its current one.
#[cfg(target_os = "linux")]
#[test]
fn sessions_gone_without_session_end_are_ended_once_and_a_new_prompt_brings_one_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("server.db");
    let paths = Paths::at(dir.path().join("pc-a"));
    let cfg =
        Config { native_notifications: false, ..Config::new("pc-a", ServerConfig::Embedded { db: Some(db.clone()) }) };
    cfg.save(&paths).unwrap();
    let t = Embedded::open(&db, "pc-a", clock).unwrap();
    let mut c = Client::with(paths.clone(), cfg, Box::new(t), clock).unwrap();
    c.sync_once(0).unwrap();

    let now = clock();
    let me = ProcId {
        pid: i64::from(std::process::id()),
        start: pcmail_local::process::start_time(i64::from(std::process::id())),
    };
    // A process that ran and exited: this PC's pid with another start time.
    let gone = ProcId { pid: me.pid, start: Some(me.start.unwrap_or(0) + 12_345) };
    c.store
        .write(|tx| {
            sl::session_record(tx, &row("s-live", Some(me), now))?;
            sl::session_record(tx, &row("s-killed", Some(gone), now - 1_000))?;
            sl::session_record(tx, &row("s-no-process-recent", None, now - 60_000))?;
            sl::session_record(tx, &row("s-no-process-quiet", None, now - 2 * 60 * 60_000))?;
            Ok(())
        })
        .unwrap();

    let live: Vec<String> = c.live_sessions(now).unwrap().into_iter().map(|s| s.session).collect();
    assert_eq!(live, ["s-live", "s-no-process-recent"]);
    let ended = |c: &Client| -> Vec<(String, Option<String>)> {
        let mut v: Vec<_> = sl::sessions_list(c.store.conn(), 10)
            .unwrap()
            .into_iter()
            .filter(|r| r.ended_at.is_some())
            .map(|r| (r.session, r.end_reason))
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        ended(&c),
        [
            ("s-killed".to_string(), Some("process gone".to_string())),
            ("s-no-process-quiet".into(), Some("quiet".into()))
        ]
    );
    // The next round reads only what is not ended.
    let open: Vec<String> = sl::sessions_open(c.store.conn(), 10).unwrap().into_iter().map(|r| r.session).collect();
    assert_eq!(open, ["s-live", "s-no-process-recent"]);
    assert_eq!(c.live_sessions(now + 1).unwrap().len(), 2);

    // The quiet session prompts again (the hook, as Claude Code runs it): live again.
    let stdin =
        br#"{"hook_event_name":"UserPromptSubmit","session_id":"s-no-process-quiet","cwd":"/work","prompt":"hi"}"#;
    let input = hook::parse_input(stdin).unwrap();
    hook::dispatch(&paths, &input, clock()).unwrap();
    let back = sl::session_get(c.store.conn(), "s-no-process-quiet").unwrap().unwrap();
    assert_eq!(back.ended_at, None, "a prompt records an ended session anew");
}

#[test]
fn the_open_sessions_are_found_by_index() {
    let dir = tempfile::tempdir().unwrap();
    let s = pcmail_store::Store::open(&dir.path().join("store.db")).unwrap();
    let plan: String = s
        .conn()
        .query_row(
            "EXPLAIN QUERY PLAN SELECT session FROM sessions WHERE ended_at IS NULL ORDER BY started_at DESC LIMIT 5",
            [],
            |r| r.get(3),
        )
        .unwrap();
    assert!(plan.contains("INDEX sessions_open"), "{plan}");
}
