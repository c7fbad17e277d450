//! Runs one job's process (issue 13): the argv as given (no shell), in its
//! checkout, in a process group of its own so the whole tree can be killed
//! at the time limit or on a cancel. stdout and stderr go to one log file,
//! so what it printed survives a killed executor; the result keeps its last
//! 64 KiB.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The output a result carries: the last 64 KiB.
pub const OUTPUT_MAX: usize = 64 * 1024;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The process exited (its code; None when a signal ended it).
    Exited(Option<i32>),
    TimedOut,
    Cancelled,
    /// It could not be started (no such program, no such directory).
    NotStarted,
}

#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub ending: Ending,
    pub duration_ms: i64,
    pub output: String,
    pub truncated: bool,
}

/// What a started process is known by, recorded before anything else so a
/// restarted executor can end a run its predecessor left behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Started {
    pub pid: i64,
    /// The process group (= pid on Unix; the group is killed as a whole).
    pub pgid: i64,
}

/// Runs `argv` in `cwd` with the given environment, output appended to
/// `log`. `on_start` gets the process ids as soon as it runs; `cancel` is
/// looked at every few ms; `limit` ends it as `TimedOut`.
pub fn run(
    argv: &[String],
    cwd: &Path,
    env: &[(String, String)],
    log: &Path,
    limit: Duration,
    cancel: &AtomicBool,
    on_start: &mut dyn FnMut(Started),
) -> RunOutcome {
    let t0 = Instant::now();
    let out = |ending, note: Option<String>| {
        if let Some(n) = note {
            let _ = append(log, &n);
        }
        let (output, truncated) = tail(log, OUTPUT_MAX);
        RunOutcome { ending, duration_ms: t0.elapsed().as_millis() as i64, output, truncated }
    };
    let Some((program, rest)) = argv.split_first() else {
        return out(Ending::NotStarted, Some("pcmail: empty argv\n".into()));
    };
    let file = match std::fs::OpenOptions::new().create(true).append(true).open(log) {
        Ok(f) => f,
        Err(e) => return out(Ending::NotStarted, Some(format!("pcmail: cannot open the log {}: {e}\n", log.display()))),
    };
    let mut cmd = Command::new(program);
    cmd.args(rest).current_dir(cwd).stdin(Stdio::null());
    match (file.try_clone(), file.try_clone()) {
        (Ok(a), Ok(b)) => {
            cmd.stdout(Stdio::from(a)).stderr(Stdio::from(b));
        }
        _ => {
            cmd.stdout(Stdio::null()).stderr(Stdio::null());
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    own_group(&mut cmd);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return out(Ending::NotStarted, Some(format!("pcmail: cannot start {program:?} in {}: {e}\n", cwd.display()))),
    };
    let pid = child.id() as i64;
    on_start(Started { pid, pgid: pid });
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                // The leader exited: whatever it left running in its group goes too.
                kill_group(pid);
                return out(Ending::Exited(status.code()), None);
            }
            Ok(None) => {}
            Err(e) => {
                kill_group(pid);
                let _ = child.wait();
                return out(Ending::Exited(None), Some(format!("pcmail: lost the process: {e}\n")));
            }
        }
        if cancel.load(Ordering::Relaxed) {
            kill_group(pid);
            let _ = child.kill();
            let _ = child.wait();
            return out(Ending::Cancelled, Some("pcmail: cancelled\n".into()));
        }
        if t0.elapsed() >= limit {
            kill_group(pid);
            let _ = child.kill();
            let _ = child.wait();
            return out(Ending::TimedOut, Some(format!("pcmail: killed at its time limit ({} s)\n", limit.as_secs())));
        }
        // Short jobs (probes) are answered fast; long ones are looked at every 20 ms.
        std::thread::sleep(Duration::from_millis(if t0.elapsed() < Duration::from_millis(200) { 2 } else { 20 }));
    }
}

/// A short read-only step (verify, read-back): its exit code and output.
pub fn run_step(argv: &[String], cwd: &Path, env: &[(String, String)], log: &Path, limit: Duration) -> RunOutcome {
    let never = AtomicBool::new(false);
    let _ = std::fs::remove_file(log);
    run(argv, cwd, env, log, limit, &never, &mut |_| {})
}

#[cfg(unix)]
fn own_group(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
}

#[cfg(not(unix))]
fn own_group(_cmd: &mut Command) {}

/// Kills a job's whole process group (Unix); elsewhere the process alone.
#[cfg(unix)]
pub fn kill_group(pgid: i64) {
    if pgid > 1 {
        // SAFETY: a negative pid addresses the process group; no memory is touched.
        unsafe {
            libc::kill(-(pgid as libc::pid_t), libc::SIGKILL);
        }
    }
}

#[cfg(not(unix))]
pub fn kill_group(pid: i64) {
    let _ = Command::new("taskkill").args(["/F", "/T", "/PID", &pid.to_string()]).stdout(Stdio::null()).stderr(Stdio::null()).status();
}

fn append(log: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::OpenOptions::new().create(true).append(true).open(log)?.write_all(text.as_bytes())
}

/// The last `max` bytes of a file as UTF-8 (lossy), and whether it was cut.
pub fn tail(path: &Path, max: usize) -> (String, bool) {
    let Ok(mut f) = std::fs::File::open(path) else { return (String::new(), false) };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let cut = len > max as u64;
    if cut {
        let _ = f.seek(SeekFrom::Start(len - max as u64));
    }
    let mut buf = vec![];
    let _ = f.take(max as u64).read_to_end(&mut buf);
    (String::from_utf8_lossy(&buf).into_owned(), cut)
}

/// Where a job's output is kept on this PC.
pub fn log_path(home: &Path, job_id: &str, step: &str) -> PathBuf {
    home.join("jobs").join(format!("{job_id}.{step}.log"))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn output_is_kept_and_the_exit_code_reported() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("a.log");
        let never = AtomicBool::new(false);
        let mut started = None;
        let r = run(&s(&["sh", "-c", "echo out; echo err >&2; exit 3"]), d.path(), &[], &log, Duration::from_secs(30), &never, &mut |p| started = Some(p));
        assert_eq!(r.ending, Ending::Exited(Some(3)));
        assert!(r.output.contains("out\n") && r.output.contains("err\n"), "{}", r.output);
        assert!(started.is_some());
    }

    #[test]
    fn the_time_limit_kills_the_whole_group() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("a.log");
        let never = AtomicBool::new(false);
        let mut started = None;
        // A child in the background that would outlive its parent.
        let r = run(&s(&["sh", "-c", "sleep 30 & echo $! > bg; wait"]), d.path(), &[], &log, Duration::from_millis(300), &never, &mut |p| started = Some(p));
        assert_eq!(r.ending, Ending::TimedOut);
        let bg: i64 = std::fs::read_to_string(d.path().join("bg")).unwrap().trim().parse().unwrap();
        // The group was sent SIGKILL: the background child is gone (or a zombie being reaped).
        let deadline = Instant::now() + Duration::from_secs(10);
        while crate::process::start_time(bg).is_some() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(crate::process::start_time(bg).is_none(), "background child {bg} still runs");
    }

    #[test]
    fn a_cancel_ends_it_and_a_missing_program_is_not_started() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("a.log");
        let cancel = AtomicBool::new(true);
        let r = run(&s(&["sleep", "30"]), d.path(), &[], &log, Duration::from_secs(60), &cancel, &mut |_| {});
        assert_eq!(r.ending, Ending::Cancelled);
        let r = run(&s(&["/no/such/program"]), d.path(), &[], &d.path().join("b.log"), Duration::from_secs(1), &cancel, &mut |_| {});
        assert_eq!(r.ending, Ending::NotStarted);
        assert!(r.output.contains("cannot start"), "{}", r.output);
    }

    #[test]
    fn only_the_last_64_kib_is_kept() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("big");
        let mut text = "x".repeat(OUTPUT_MAX);
        text.push_str("END");
        std::fs::write(&p, &text).unwrap();
        let (t, cut) = tail(&p, OUTPUT_MAX);
        assert!(cut && t.ends_with("END") && t.len() == OUTPUT_MAX);
    }
}
