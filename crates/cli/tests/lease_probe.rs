//! A stale lease is no proof that its holder is gone. pc-b's store lost
//! track of its lease (so its poller, which still runs, no longer renews
//! it) while the session holding it runs on: a takeover from pc-a asks pc-b
//! through its read-only probe and is refused; once the session ended, the
//! same takeover goes through with pc-b's answer on the lease's timeline.
//! The server's clock is moved past the 3 minutes that make a lease stale
//! with libfaketime (installed by scripts/install-deps.sh).

mod common;

use common::*;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A child killed when the test ends, passed or not (no `sleep 600` or
/// daemon left behind by a failure).
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_stale_lease_whose_holder_still_runs_on_a_polling_pc_is_not_taken() {
    assert!(Path::new(LIBFAKETIME).is_file(), "{LIBFAKETIME} is missing (apt-get install faketime)");
    let clock_dir = tempfile::tempdir().unwrap();
    let clock = clock_dir.path().join("offset");
    std::fs::write(&clock, "+0\n").unwrap();
    let server = Server::start_with_env(
        Kind::Rust,
        &[
            ("LD_PRELOAD", LIBFAKETIME),
            ("FAKETIME_TIMESTAMP_FILE", clock.to_str().unwrap()),
            ("FAKETIME_NO_CACHE", "1"),
            // Timers and timeouts keep real time; only the clock the server reads moves.
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
        ],
    );
    let (a, b) = pair(&server);
    // pc-b runs jobs for pc-a: it publishes the read-only probes.
    let cfg = b.home.path().join("config.toml");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("\n[jobs]\nallowed_submitters = [\"pc-a\"]\n");
    std::fs::write(&cfg, text).unwrap();

    // The holding session: a process standing for Claude Code on pc-b, its
    // hook recording the session, its claim following that process.
    let mut holder = Reaped(Command::new("sleep").arg("600").spawn().unwrap());
    let hp = holder.0.id().to_string();
    let session = "5e55b0b0-holder";
    let mut hook = b.cmd(&["hook"]).env("PCMAIL_CLAUDE_PID", &hp).stdin(Stdio::piped()).spawn().unwrap();
    let event = serde_json::json!({"session_id": session, "hook_event_name": "SessionStart", "cwd": "/tmp"});
    hook.stdin.take().unwrap().write_all(event.to_string().as_bytes()).unwrap();
    assert!(hook.wait().unwrap().success());
    let out = b.cmd(&["lease", "claim", "gpu-0", "-d", "training"]).env("PCMAIL_CLAUDE_PID", &hp).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // pc-b's store loses track of the lease: its poller no longer renews it.
    let db = rusqlite::Connection::open(b.store()).unwrap();
    assert_eq!(db.execute("DELETE FROM leases_mine", []).unwrap(), 1);
    drop(db);
    let _daemon = Reaped(b.cmd(&["daemon"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap());
    let probe_ok =
        || a.run(&["job", "run", "pc-b", "_debug_pc", "--force", "--wait", "--timeout", "20s"]).status.success();
    wait_until("pc-b's probes on the server", Duration::from_secs(30), probe_ok);

    // Four minutes later by the server's clock: no heartbeat for the lease,
    // while pc-b still polls (it answers a probe after the jump).
    std::fs::write(&clock, "+4m\n").unwrap();
    assert!(probe_ok(), "pc-b answers after the jump");
    let list = a.json(&["lease", "list"]);
    assert!(list.to_string().contains("\"stale\":true"), "{list}");

    let takeover = || {
        a.cmd(&["lease", "takeover", "gpu-0", "--reason", "looks abandoned", "--ttl", "10m"])
            .env("PCMAIL_CLAUDE_PID", "0")
            .output()
            .unwrap()
    };
    let out = takeover();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(10), "{err}");
    assert!(err.contains("pc-b answered that the holder's session 5e55b0b0 still runs there"), "{err}");

    // The session ends: pc-b says so, and the takeover is made with that on the timeline.
    holder.0.kill().unwrap();
    holder.0.wait().unwrap();
    let out = takeover();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let timeline = a.json(&["lease", "list", "--all", "--timeline"]).to_string();
    assert!(timeline.contains("pc-b answered that nothing of the holder runs there"), "{timeline}");
}
