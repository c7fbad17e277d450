//! `[[leases.checks]]`: a resource kind names a command
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

/// How long ago a commit touching a lease's files still counts as work in
/// progress on it.
pub const RECENT_COMMIT_SECS: i64 = 30 * 60;

/// The built-in check of a module lease (one with `files`), run before a
/// takeover when this folder is a checkout of the lease's repo: the leased
/// files themselves show whether someone is working on them. Busy when a
/// commit from the last 30 minutes touches them (any PC's, once fetched), or,
/// when the holder is a session of this PC and so works in a checkout here,
/// when they have uncommitted changes. Ok with what was looked at when
/// neither; None when there is nothing to look at (no files, not in the repo,
/// no git).
pub fn module_activity(
    lease: &pcmail_core::lease::Lease,
    me: &str,
    cwd: &std::path::Path,
    now_secs: i64,
) -> Option<Result<CheckPassed>> {
    if lease.files.is_empty() {
        return None;
    }
    let repo = pcmail_local::repo::identify(cwd)?;
    if repo.id != lease.repo {
        return None;
    }
    let specs: Vec<String> = lease.files.iter().map(|g| format!(":(glob){g}")).collect();
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(&repo.root)
            .args(args)
            .arg("--")
            .args(&specs)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim_end().to_string())
    };
    let holder = holder_of(lease);
    let since = format!("--since=@{}", now_secs - RECENT_COMMIT_SECS);
    let recent = git(&["log", "-1", "--format=%ct %an: %s", &since])?;
    if let Some((at, what)) = recent.trim().split_once(' ') {
        let ago = (now_secs - at.parse::<i64>().unwrap_or(now_secs)).max(0) / 60;
        return Some(Err(ApiError::Busy(format!(
            "{} is still in use: a commit {ago} min ago touches its files ({}). Not taken; ask {holder} or wait, \
             or --force with a reason",
            lease.resource,
            pcmail_core::present::truncate_chars(what, 120)
        ))));
    }
    if lease.holder.pc == me {
        let changed = git(&["status", "--porcelain"])?;
        if !changed.is_empty() {
            let files: Vec<&str> = changed.lines().take(3).map(|l| l.get(3..).unwrap_or(l)).collect();
            return Some(Err(ApiError::Busy(format!(
                "{} is still in use: its files have uncommitted changes in this checkout ({}{}). Not taken; ask \
                 {holder} or wait, or --force with a reason",
                lease.resource,
                files.join(", "),
                if changed.lines().count() > 3 { ", …" } else { "" }
            ))));
        }
    }
    Some(Ok(CheckPassed {
        detail: format!(
            "its files: no commit in the last {} min{}",
            RECENT_COMMIT_SECS / 60,
            if lease.holder.pc == me { ", no uncommitted change here" } else { "" }
        ),
    }))
}

fn holder_of(l: &pcmail_core::lease::Lease) -> String {
    match &l.holder.name {
        Some(n) => format!("{}/{n}", l.holder.pc),
        None => format!("{}/{}", l.holder.pc, l.holder.session.chars().take(8).collect::<String>()),
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

    fn git(dir: &std::path::Path, args: &[&str], date: Option<&str>) {
        let mut c = Command::new("git");
        c.arg("-C").arg(dir).args(["-c", "user.name=holder", "-c", "user.email=h@example.com"]).args(args);
        if let Some(d) = date {
            c.env("GIT_AUTHOR_DATE", d).env("GIT_COMMITTER_DATE", d);
        }
        assert!(c.stdout(Stdio::null()).stderr(Stdio::null()).status().unwrap().success(), "git {args:?}");
    }

    fn lease(repo: &str, pc: &str, files: &[&str]) -> pcmail_core::lease::Lease {
        pcmail_core::lease::Lease {
            resource: "module/auth".into(),
            repo: repo.into(),
            description: "refactor".into(),
            files: files.iter().map(|f| f.to_string()).collect(),
            mode: pcmail_core::lease::Mode::Exclusive,
            holder: pcmail_core::lease::Holder {
                pc: pc.into(),
                session: "0a1c2e4f-aaaa".into(),
                name: Some("ani".into()),
            },
            fence: 1,
            claim_id: "c1".into(),
            granted_at: 0,
            heartbeat_at: 0,
            ttl_expires_at: None,
            state: pcmail_core::lease::LeaseState::Stale,
            stale: true,
            timeline: None,
        }
    }

    /// The leased files themselves: uncommitted changes (when the holder works
    /// in a checkout on this PC) or a recent commit touching them say busy;
    /// an old commit and a clean tree let the takeover go on.
    #[test]
    fn a_module_lease_is_busy_while_its_files_change() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        git(root, &["init", "-q"], None);
        git(root, &["remote", "add", "origin", "https://github.com/o/app.git"], None);
        std::fs::create_dir_all(root.join("src/auth")).unwrap();
        std::fs::write(root.join("src/auth/mod.rs"), "fn a() {}\n").unwrap();
        std::fs::write(root.join("README.md"), "app\n").unwrap();
        git(root, &["add", "."], None);
        git(root, &["commit", "-q", "-m", "old work"], Some("2020-01-01T00:00:00Z"));
        let id = pcmail_local::repo::identify(root).unwrap().id;
        let now = 1_800_000_000;

        // Not a module lease, or another repo: nothing to look at.
        assert!(module_activity(&lease(&id, "pc-a", &[]), "pc-a", root, now).is_none());
        assert!(module_activity(&lease("github.com/o/other", "pc-a", &["src/auth/**"]), "pc-a", root, now).is_none());
        // Clean and old: the takeover may go on, and the timeline says what was looked at.
        let ok = module_activity(&lease(&id, "pc-a", &["src/auth/**"]), "pc-a", root, now).unwrap().unwrap();
        assert!(ok.detail.contains("no commit in the last 30 min") && ok.detail.contains("no uncommitted change"));

        // Uncommitted changes in the leased files, the holder on this PC: busy (exit 10).
        std::fs::write(root.join("src/auth/mod.rs"), "fn a() { todo!() }\n").unwrap();
        let e = module_activity(&lease(&id, "pc-a", &["src/auth/**"]), "pc-a", root, now).unwrap().unwrap_err();
        assert_eq!((e.exit() as i32, e.code()), (10, "held"));
        assert!(e.to_string().contains("uncommitted changes") && e.to_string().contains("src/auth/mod.rs"), "{e}");
        // A change outside the leased files is not the lease's business.
        assert!(module_activity(&lease(&id, "pc-a", &["docs/**"]), "pc-a", root, now).unwrap().is_ok());
        // The holder on another PC: this checkout's changes are the taker's own.
        assert!(module_activity(&lease(&id, "pc-b", &["src/auth/**"]), "pc-a", root, now).unwrap().is_ok());

        // A commit touching them 5 minutes ago: busy whoever holds it.
        git(root, &["commit", "-q", "-am", "auth: half done"], Some("@1799999700 +0000"));
        let e = module_activity(&lease(&id, "pc-b", &["src/auth/**"]), "pc-a", root, now).unwrap().unwrap_err();
        assert!(e.to_string().contains("a commit 5 min ago touches its files (holder: auth: half done)"), "{e}");
        // An hour later it is old.
        assert!(module_activity(&lease(&id, "pc-b", &["src/auth/**"]), "pc-a", root, now + 3600).unwrap().is_ok());
    }

    /// The documented GPU check (README "Leases"): busy while `nvidia-smi`
    /// lists a compute process. A stand-in `nvidia-smi` plays the card here.
    #[test]
    fn the_gpu_check_pattern_reads_nvidia_smi() {
        let d = tempfile::tempdir().unwrap();
        let smi = d.path().join("nvidia-smi");
        let gpu = |busy: bool| {
            std::fs::write(&smi, if busy { "#!/bin/sh\necho 4242\n" } else { "#!/bin/sh\n" }).unwrap();
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
        };
        let script = format!(
            "PATH={}:$PATH; nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -q .",
            d.path().display()
        );
        let c = check(&script, None);
        gpu(true);
        assert_eq!(run(&c, "gpu-0", "pc-b/ani").unwrap_err().exit() as i32, 10);
        gpu(false);
        assert!(run(&c, "gpu-0", "pc-b/ani").unwrap().detail.contains("exited 1 (not busy)"));
    }
}
