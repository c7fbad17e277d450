//! The server's clock is the truth for expiry. A sender an
//! hour behind used to send an expiry already past (and the server took it); a
//! receiver an hour ahead used to hide a still-valid request. Both PCs run here
//! under libfaketime (installed by scripts/install-deps.sh) against a `pcmail
//! serve` on the real clock.

mod common;
use common::*;
use std::process::{Command, Output, Stdio};

/// `program` with its clock moved by `offset` (e.g. "-1h"): libfaketime
/// preloaded directly. (The `faketime` wrapper names a semaphore after its
/// own PID and refused to start, now and then, when an earlier run's was
/// left with the same name: "sem_open: File exists".)
fn faked(program: impl AsRef<std::ffi::OsStr>, offset: &str) -> Command {
    assert!(std::path::Path::new(LIBFAKETIME).is_file(), "{LIBFAKETIME} is missing (apt-get install faketime)");
    let mut c = Command::new(program);
    c.env("LD_PRELOAD", LIBFAKETIME).env("FAKETIME", offset);
    c
}

/// `pcmail ARGS` for `pc` with its clock moved by `offset` (e.g. "-1h").
fn skewed(pc: &Pc, offset: &str, args: &[&str]) -> Output {
    faked(exe(), offset)
        .args(args)
        .env("PCMAIL_HOME", pc.home.path())
        .env("PCMAIL_TOKEN", TOKEN)
        .env("PCMAIL_CREDENTIAL", &pc.cred)
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .stdin(Stdio::null())
        .output()
        .expect("pcmail runs")
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

#[test]
fn expiry_follows_the_servers_clock_whatever_the_pcs_clocks_say() {
    let server = Server::start(Kind::Rust);
    let (a, b) = pair(&server);
    // The faked clock really is off for a process under libfaketime.
    let probe = faked("date", "-1h").arg("+%s").output().unwrap();
    let faked_now: i64 = String::from_utf8_lossy(&probe.stdout).trim().parse().unwrap();
    assert!((now_ms() / 1000 - faked_now - 3600).abs() < 120, "libfaketime does not move the clock");

    // A sender an hour behind: "--expires 30m" is 30 minutes from the server's now.
    let before = now_ms();
    let out = skewed(
        &a,
        "-1h",
        &["--json", "send", "pc-b", "--kind", "request", "--expires", "30m", "--body", "answer within 30 min"],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let id = serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["ids"][0].as_str().unwrap().to_string();
    let st = a.json(&["status", &id]);
    let expires_at = st[0]["expiresAt"].as_i64().unwrap();
    let want = before + 30 * 60_000;
    assert!((expires_at - want).abs() < 60_000, "expiresAt {expires_at} is not 30 min from the server's now ({want})");

    // A receiver an hour ahead: the request is still valid, shown, not called expired.
    let out = skewed(&b, "+1h", &["sync"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let inbox = skewed(&b, "+1h", &["inbox"]);
    let text = String::from_utf8_lossy(&inbox.stdout);
    assert!(text.contains(&id) && !text.contains("expired"), "{text}");
    let mut hook = faked(exe(), "+1h")
        .arg("hook")
        .env("PCMAIL_HOME", b.home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let input =
            serde_json::json!({"session_id": "skewed-session", "hook_event_name": "UserPromptSubmit", "prompt": "hi"});
        hook.stdin.take().unwrap().write_all(input.to_string().as_bytes()).unwrap();
    }
    let shown = String::from_utf8_lossy(&hook.wait_with_output().unwrap().stdout).to_string();
    assert!(shown.contains(&id), "the receiver an hour ahead hid a valid request: {shown:?}");
}
