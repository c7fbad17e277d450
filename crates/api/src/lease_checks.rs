//! `[[leases.checks]]` (issue 10 point 2): a resource kind names a command
//! that looks at the resource itself (`nvidia-smi` for `gpu-*`, a deploy
//! lock for `staging-*`) before a takeover asks the server. Exit 0 means the
//! resource is still busy: the takeover is refused. Any other exit lets it
//! go on, and what the check said is recorded on the lease's timeline.

use crate::{ApiError, Result};
use pcmail_local::config::LeaseCheck;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The default time a check may take.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// What of a check's output is kept for the timeline and the error.
const OUTPUT_MAX: usize = 300;

/// What a check found that lets the takeover go on (the timeline's detail).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckPassed {
    pub detail: String,
}

/// Runs the check for `resource` (held by `holder`): Ok when it exited
/// non-zero (not busy); Busy when it exited 0; Local when it could not run or
/// did not finish in time (an unverified takeover is refused: fix the config
/// or pass a shorter command).
pub fn run(check: &LeaseCheck, resource: &str, holder: &str) -> Result<CheckPassed> {
    let shown = check.argv.join(" ");
    let Some((exe, args)) = check.argv.split_first() else {
        return Err(ApiError::Local(format!("[[leases.checks]] for {:?} has an empty argv", check.pattern)));
    };
    let mut child = Command::new(exe)
        .args(args)
        .env("PCMAIL_LEASE_RESOURCE", resource)
        .env("PCMAIL_LEASE_HOLDER", holder)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            ApiError::Local(format!(
                "the lease check `{shown}` for {resource} could not start: {e}; the takeover is not made"
            ))
        })?;
    // Read both pipes on threads so a chatty check can't fill one and stall.
    let drain = |p: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = vec![];
            if let Some(mut p) = p {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let err = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let timeout = check.timeout_secs.map(Duration::from_secs).unwrap_or(DEFAULT_TIMEOUT);
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ApiError::Local(format!(
                    "the lease check `{shown}` for {resource} did not finish in {} s; the takeover is not made",
                    timeout.as_secs()
                )));
            }
            Err(e) => return Err(ApiError::Local(format!("the lease check `{shown}` for {resource}: {e}"))),
        }
    };
    let text = |h: std::thread::JoinHandle<Vec<u8>>| {
        let b = h.join().unwrap_or_default();
        pcmail_core::present::truncate_chars(String::from_utf8_lossy(&b).trim(), OUTPUT_MAX)
    };
    let said = [text(out), text(err)].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" / ");
    let said = if said.is_empty() { String::new() } else { format!(": {said}") };
    match status.code() {
        Some(0) => Err(ApiError::Busy(format!(
            "{resource} is still in use: the lease check `{shown}` exited 0 (busy){said}. Not taken; ask {holder} or wait"
        ))),
        Some(n) => Ok(CheckPassed { detail: format!("check `{shown}` exited {n} (not busy){said}") }),
        None => Err(ApiError::Local(format!(
            "the lease check `{shown}` for {resource} was ended by a signal; the takeover is not made"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(script: &str, timeout_secs: Option<u64>) -> LeaseCheck {
        LeaseCheck { pattern: "gpu-*".into(), argv: vec!["sh".into(), "-c".into(), script.into()], timeout_secs }
    }

    #[test]
    fn exit_zero_is_busy_and_refuses() {
        let e =
            run(&check("echo \"pid 4242 on $PCMAIL_LEASE_RESOURCE\"; exit 0", None), "gpu-0", "pc-b/ani").unwrap_err();
        assert_eq!((e.exit() as i32, e.code()), (10, "held"));
        let m = e.to_string();
        assert!(
            m.contains("gpu-0 is still in use") && m.contains("pid 4242 on gpu-0") && m.contains("pc-b/ani"),
            "{m}"
        );
    }

    #[test]
    fn another_exit_lets_the_takeover_go_on_and_says_why() {
        let ok =
            run(&check("echo \"free: $PCMAIL_LEASE_HOLDER gone\" >&2; exit 1", None), "gpu-0", "pc-b/ani").unwrap();
        assert!(
            ok.detail.contains("exited 1 (not busy)") && ok.detail.contains("free: pc-b/ani gone"),
            "{}",
            ok.detail
        );
    }

    #[test]
    fn a_check_that_cannot_run_or_hangs_refuses_as_unverified() {
        let missing =
            LeaseCheck { pattern: "*".into(), argv: vec!["/nonexistent/pcmail-check".into()], timeout_secs: None };
        let e = run(&missing, "gpu-0", "h").unwrap_err();
        assert_eq!(e.exit() as i32, 9, "{e}");
        assert!(e.to_string().contains("could not start"));
        let empty = LeaseCheck { pattern: "*".into(), argv: vec![], timeout_secs: None };
        assert!(run(&empty, "gpu-0", "h").unwrap_err().to_string().contains("empty argv"));
        // `exec` so the kill reaches the sleeping process itself.
        let e = run(&check("exec sleep 30", Some(1)), "gpu-0", "h").unwrap_err();
        assert!(e.to_string().contains("did not finish in 1 s"), "{e}");
    }
}
