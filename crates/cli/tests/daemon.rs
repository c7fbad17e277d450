//! The poller as a process: seen reaches the sender in about a second while
//! the receiving PC's daemon sits in a long poll, and a daemon
//! whose poll hangs is restarted by its own watchdog.

mod common;
use common::*;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

fn wait_until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < limit, "{what} did not happen within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    t.elapsed()
}

#[test]
fn seen_reaches_the_sender_while_the_receivers_daemon_long_polls() {
    let server = Server::start(Kind::Rust);
    let (a, b) = pair(&server);
    let mut daemon = b.cmd(&["daemon"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    for round in 0..3 {
        let id = a.send(&["pc-b", "--kind", "request", "--body", &format!("look at this ({round})")]);
        let store = b.store();
        wait_until("delivery to pc-b's store", Duration::from_secs(15), || {
            let Ok(c) = rusqlite::Connection::open(&store) else { return false };
            c.query_row("SELECT 1 FROM inbox WHERE id = ?1", [&id], |_| Ok(())).is_ok()
        });
        // Let the daemon settle back into its long poll before the hook runs.
        std::thread::sleep(Duration::from_millis(300));
        let ctx = b.hook(&format!("session-{round}"), "UserPromptSubmit");
        assert!(ctx.contains(&id), "{ctx}");
        let took = wait_until("seen at the sender", Duration::from_secs(5), || a.state_of(&id) == "seen");
        // Before: the mark waited for the 20 s long poll to return.
        assert!(took < Duration::from_secs(3), "seen took {took:?}");
    }
    daemon.kill().unwrap();
    let _ = daemon.wait();
}

#[test]
fn a_daemon_whose_poll_hangs_is_restarted_by_its_watchdog() {
    // A server that accepts and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/api", listener.local_addr().unwrap());
    let accepted = std::thread::spawn(move || {
        let mut held = vec![];
        for s in listener.incoming().take(4) {
            held.push(s);
        }
        std::thread::sleep(Duration::from_secs(30));
        drop(held);
    });
    let home = tempfile::tempdir().unwrap();
    let pc = |args: &[&str]| {
        let mut c = std::process::Command::new(exe());
        c.args(args).env("PCMAIL_HOME", home.path()).env("PCMAIL_TOKEN", TOKEN).env_remove("DBUS_SESSION_BUS_ADDRESS");
        c
    };
    assert!(pc(&["init", "--offline", "--label", "pc-h", "--server", &url]).output().unwrap().status.success());
    let mut daemon =
        pc(&["daemon"]).env("PCMAIL_WATCHDOG_MS", "1500").stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let pid = daemon.id();
    let err = daemon.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut restarts = 0;
    while restarts < 1 && Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            if line.contains("watchdog") && line.contains("restarting") {
                restarts += 1;
            }
        }
    }
    assert!(restarts >= 1, "the watchdog never restarted the hung daemon");
    // Still the one poller: the same process (exec), holding the lock.
    assert!(daemon.try_wait().unwrap().is_none(), "the daemon is gone instead of restarted");
    let lock = std::fs::read_to_string(home.path().join("daemon.lock")).unwrap();
    assert_eq!(lock.trim(), pid.to_string());
    daemon.kill().unwrap();
    let _ = daemon.wait();
    drop(accepted);
}

/// A daemon whose stderr nobody reads any more (a log pipe whose reader
/// died) goes on polling: its lines are lost, never its loop. Its server is
/// unreachable here, so it says something at once and after every failed poll.
/// The home is fresh: the daemon's poller and its pusher create the store
/// at the same moment (which once failed with "database is locked" under
/// load, and the error's own line, unwritable, ended the daemon).
#[cfg(unix)]
#[test]
fn a_daemon_whose_stderr_is_gone_goes_on() {
    let home = tempfile::tempdir().unwrap();
    let pc = |args: &[&str]| {
        let mut c = std::process::Command::new(exe());
        c.args(args).env("PCMAIL_HOME", home.path()).env("PCMAIL_TOKEN", TOKEN).env_remove("DBUS_SESSION_BUS_ADDRESS");
        c
    };
    // A port nothing listens on: every poll fails at once.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/api");
    assert!(pc(&["init", "--offline", "--label", "pc-q", "--server", &url]).output().unwrap().status.success());
    let mut daemon = pc(&["daemon"]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    drop(daemon.stderr.take());
    // Its first line and its first failed poll's line both come well
    // within this (the retry then waits about ten seconds).
    std::thread::sleep(Duration::from_secs(4));
    let ended = daemon.try_wait().unwrap();
    daemon.kill().ok();
    let _ = daemon.wait();
    assert!(ended.is_none(), "the daemon ended when its stderr went away: {ended:?}");
}
