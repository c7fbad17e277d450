//! Jobs end to end, real processes against `pcmail serve`: pc-a
//! submits, pc-b's daemon executes what its `[jobs]` config whitelists.
//! Long work blocks on a FIFO the test opens; nothing sleeps for it.
#![cfg(unix)]

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

fn wait_until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < limit, "{what} did not happen within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn mkfifo(p: &Path) {
    let st = std::process::Command::new("mkfifo").arg(p).status().unwrap();
    assert!(st.success());
}

/// Opens the FIFO for writing (blocks until the job reads it) and lets it go.
fn release(fifo: &Path) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
    f.write_all(b"go\n").unwrap();
}

/// pc-b executes: its config gets a `[jobs]` section with checkouts `app`
/// and `lib` (temp dirs) and the commands below; pc-a may submit.
struct Setup {
    _server: Server,
    a: Pc,
    b: Pc,
    app: tempfile::TempDir,
    lib: tempfile::TempDir,
    daemon: Option<Child>,
}

impl Drop for Setup {
    fn drop(&mut self) {
        if let Some(mut d) = self.daemon.take() {
            let _ = d.kill();
            let _ = d.wait();
        }
    }
}

const COMMANDS: &str = r#"
# Counts its runs, writes its artifact, then waits on the FIFO `gate` (when it exists).
[[jobs.commands]]
name = "build"
argv = ["sh", "-c", "echo $$ > pid; echo run >> runs.txt; mkdir -p out; echo made > \"$PCMAIL_JOB_ARTIFACTS\"; if [ -p gate ]; then read line < gate; fi; echo built in $1", "build", "{checkout}"]
subject = "checkout"
time_limit_secs = 300
artifacts = ["out/{command}-{subject}-{ts}.log"]
[[jobs.commands.args]]
name = "checkout"
type = "checkout"

# Counts its runs; blocks on `gate` when it exists. No artifacts (dedup test).
[[jobs.commands]]
name = "count"
argv = ["sh", "-c", "echo run >> count.txt; if [ -p gate ]; then read line < gate; fi; echo counted"]
cwd = "app"
time_limit_secs = 300

# Makes one file per target; its artifact names the target.
[[jobs.commands]]
name = "make"
argv = ["sh", "-c", "echo $1 >> made.txt; mkdir -p out; echo $1 > \"$PCMAIL_JOB_ARTIFACTS\"", "make", "{target}"]
cwd = "app"
time_limit_secs = 60
artifacts = ["out/{command}-{target}-{ts}.txt"]
[[jobs.commands.args]]
name = "target"
type = "string"

# A tree with every way out of a process group (a background child, a
# setsid one with a child of its own), each PID in a file; waits for all.
[[jobs.commands]]
name = "tree"
argv = ["sh", "-c", "sleep 100 & echo $! > tree.a; setsid sh -c 'sleep 100 & echo $! > tree.d; echo $$ > tree.c; wait' & sleep 100 & echo $! > tree.b; echo $$ > tree.leader; wait"]
cwd = "app"
time_limit_secs = 300

# Blocks on `gate`, then fails with exit 7.
[[jobs.commands]]
name = "fail7"
argv = ["sh", "-c", "echo $$ > fail7.pid; read line < gate; echo failing; exit 7"]
cwd = "app"
time_limit_secs = 300

# Blocks on `gate` past its 1 s time limit.
[[jobs.commands]]
name = "slow"
argv = ["sh", "-c", "echo $$ > slow.pid; read line < gate"]
cwd = "app"
time_limit_secs = 1

# Chunked: one process per file of `in/` (0.8 s each; `bad` fails at once),
# more than its 2 s time limit's 1.4 s start deadline in all.
[[jobs.commands]]
name = "chunk"
argv = ["sh", "-c", "echo $1 >> ran.txt; case $1 in *bad*) exit 1;; esac; sleep 0.8", "chunk", "{input}"]
cwd = "lib"
chunked = true
inputs = "in"
time_limit_secs = 2
input_time_limit_secs = 2

# A probe: prints its argument.
[[jobs.commands]]
name = "probe"
argv = ["echo", "probe:{word}"]
cwd = "app"
read_only = true
[[jobs.commands.args]]
name = "word"
type = "string"

# Every typed argument, each printed as one bracketed argv element.
[[jobs.commands]]
name = "show"
argv = ["sh", "-c", "for a in \"$@\"; do printf '[%s]\\n' \"$a\"; done", "show", "{s}", "{n}", "{b}", "{e}", "{p}", "{c}"]
cwd = "{c}"
[[jobs.commands.args]]
name = "s"
type = "string"
max_len = 1000
[[jobs.commands.args]]
name = "n"
type = "int"
min = 0
max = 10
[[jobs.commands.args]]
name = "b"
type = "bool"
[[jobs.commands.args]]
name = "e"
type = "enum"
values = ["red", "green"]
[[jobs.commands.args]]
name = "p"
type = "path"
[[jobs.commands.args]]
name = "c"
type = "checkout"
"#;

fn setup() -> Setup {
    setup_with(true)
}

/// `warm`: a first job (a probe command) runs before the test; without it
/// the test's own first job is the first this executor ever ran (a fresh
/// `$PCMAIL_HOME`, no `jobs/` folder yet).
fn setup_with(warm: bool) -> Setup {
    let server = Server::start(Kind::Rust);
    let (a, b) = pair(&server);
    let app = tempfile::tempdir().unwrap();
    let lib = tempfile::tempdir().unwrap();
    let jobs = format!(
        "\n[jobs]\nallowed_submitters = [\"pc-a\"]\n\n[jobs.checkouts]\napp = {:?}\nlib = {:?}\n{COMMANDS}",
        app.path().display().to_string(),
        lib.path().display().to_string()
    );
    let cfg = b.home.path().join("config.toml");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str(&jobs);
    std::fs::write(&cfg, text).unwrap();
    let wl = b.ok(&["job", "whitelist"]);
    // The owner's 9 commands and the 4 built-in probes every PC executor has.
    assert!(wl.contains("13 command(s)"), "{wl}");
    assert!(wl.contains("_debug_sessions"), "{wl}");
    let mut s = Setup { _server: server, a, b, app, lib, daemon: None };
    s.start_daemon();
    // The whitelist reaches the server with the daemon's first poll.
    wait_until("pc-b's whitelist on the server", Duration::from_secs(20), || {
        if warm {
            let out = s.a.run(&["--json", "job", "run", "pc-b", "probe", "word=ready", "--wait", "--timeout", "20s"]);
            out.status.success()
        } else {
            // Published, yet nothing run: refused for a missing argument, not for an unknown command.
            let out = s.a.run(&["--json", "job", "run", "pc-b", "probe"]);
            String::from_utf8_lossy(&out.stdout).contains("needs argument")
                || String::from_utf8_lossy(&out.stderr).contains("needs argument")
        }
    });
    assert_eq!(warm, s.b.home.path().join("jobs").exists(), "warm: a job ran; cold: none yet");
    s
}

impl Setup {
    fn start_daemon(&mut self) {
        let d = self.b.cmd(&["daemon"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        self.daemon = Some(d);
    }

    fn kill9_daemon(&mut self) {
        let mut d = self.daemon.take().unwrap();
        // SAFETY: a signal to a child this test started.
        unsafe { libc::kill(d.id() as libc::pid_t, libc::SIGKILL) };
        let _ = d.wait();
    }

    fn status(&self, id: &str) -> Value {
        let out = self.a.run(&["--json", "job", "status", id]);
        serde_json::from_slice::<Value>(&out.stdout)
            .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)))["job"]
            .clone()
    }

    fn state(&self, id: &str) -> String {
        self.status(id)["state"].as_str().unwrap().to_string()
    }

    /// `job run … --json` as pc-a: (exit code, answer).
    fn submit(&self, args: &[&str], session: &str) -> (i32, Value) {
        let mut a = vec!["--json", "job", "run", "pc-b"];
        a.extend_from_slice(args);
        let out = self.a.cmd(&a).env("PCMAIL_SESSION", session).output().unwrap();
        let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (
            out.status.code().unwrap_or(-1),
            if v.is_null() { Value::String(String::from_utf8_lossy(&out.stderr).into()) } else { v },
        )
    }

    fn lines(&self, dir: &Path, file: &str) -> usize {
        std::fs::read_to_string(dir.join(file)).map(|t| t.lines().count()).unwrap_or(0)
    }
}

fn alive(pid: i64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        let state = s.rsplit(')').next().unwrap_or("").split_whitespace().next().unwrap_or("");
        state != "Z" && state != "X"
    })
}

/// Kill -9 the executor mid-job → the job ends
/// `timed_out` with a record and the submitter's `status` says so (exit 14);
/// the run's orphaned process is killed. A plain re-run of the job that died
/// after writing its artifact is refused and names it; a first submit whose
/// artifact exists answers with it without running; `--force` runs.
#[test]
fn a_killed_executor_is_reported_timed_out_and_its_artifacts_are_not_made_twice() {
    let mut s = setup();
    let gate = s.app.path().join("gate");
    mkfifo(&gate);
    let (code, r) = s.submit(&["build", "checkout=app"], "s1");
    assert_eq!(code, 0, "{r}");
    let id = r["job"]["id"].as_str().unwrap().to_string();
    // The run counts itself before it writes its artifact (a `mkdir` apart):
    // the artifact itself is waited for, or a kill in between leaves none.
    let artifact_written = || {
        std::fs::read_dir(s.app.path().join("out"))
            .map(|d| d.flatten().any(|e| e.file_name().to_string_lossy().starts_with("build-app-")))
            .unwrap_or(false)
    };
    wait_until("the job running with its artifact written", Duration::from_secs(20), || {
        s.state(&id) == "running" && s.lines(s.app.path(), "runs.txt") == 1 && artifact_written()
    });
    let pid: i64 = std::fs::read_to_string(s.app.path().join("pid")).unwrap().trim().parse().unwrap();
    assert!(alive(pid));
    s.kill9_daemon();
    // The job does not outlive its executor, even one killed with -9 and not restarted.
    wait_until("the job's process ended with its daemon", Duration::from_secs(3), || !alive(pid));
    s.start_daemon();
    wait_until("the job reported after the restart", Duration::from_secs(20), || s.state(&id) == "timed_out");
    let job = s.status(&id);
    assert!(job["reason"].as_str().unwrap().contains("ended with it"), "{job}");
    assert_eq!(job["result"]["ran"], true);
    assert!(job["timeline"].as_array().unwrap().iter().any(|t| t["state"] == "timed_out"), "{job}");
    // The submitter's status says so, with exit 14.
    let out = s.a.run(&["job", "status", &id]);
    assert_eq!(out.status.code(), Some(14));
    assert!(String::from_utf8_lossy(&out.stdout).contains("timed_out"));

    // A re-run: refused by the executor, naming the artifact the dead run left.
    let _ = std::fs::remove_file(&gate);
    let (code, r) = s.submit(&["build", "checkout=app", "--rerun-of", &id, "--wait", "--timeout", "30s"], "s1");
    assert_eq!(code, 13, "{r}");
    assert_eq!(r["job"]["state"], "failed");
    assert_eq!(r["job"]["result"]["ran"], false);
    let reused = r["job"]["result"]["reused"][0].as_str().unwrap().to_string();
    assert!(reused.starts_with("out/build-app-"), "{r}");
    assert!(r["job"]["reason"].as_str().unwrap().contains(&reused), "{r}");
    assert_eq!(s.lines(s.app.path(), "runs.txt"), 1, "not run again");

    // A first submit whose artifact already exists: answered with it, not run.
    std::fs::create_dir_all(s.lib.path().join("out")).unwrap();
    std::fs::write(s.lib.path().join("out/build-lib-123.log"), "old").unwrap();
    let (code, r) = s.submit(&["build", "checkout=lib", "--wait", "--timeout", "30s"], "s1");
    assert_eq!(code, 0, "{r}");
    assert_eq!((r["job"]["state"].as_str(), r["job"]["result"]["ran"].as_bool()), (Some("ok"), Some(false)), "{r}");
    assert_eq!(r["job"]["result"]["reused"], serde_json::json!(["out/build-lib-123.log"]));
    assert_eq!(s.lines(s.lib.path(), "runs.txt"), 0);

    // --force runs it anyway.
    let (code, r) = s.submit(&["build", "checkout=lib", "--force", "--wait", "--timeout", "30s"], "s1");
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["job"]["result"]["ran"], true);
    assert_eq!(s.lines(s.lib.path(), "runs.txt"), 1);
    assert_eq!(r["job"]["result"]["artifacts"].as_array().unwrap().len(), 1, "{r}");
}

fn pids_in(dir: &Path, names: &[&str]) -> Option<Vec<i64>> {
    names.iter().map(|n| std::fs::read_to_string(dir.join(n)).ok()?.trim().parse().ok()).collect()
}

/// A daemon killed with -9 and not restarted takes its job's whole tree
/// with it, what left the job's process group with `setsid` included; the
/// next daemon reports the run `timed_out`, saying the tree ended with it.
#[test]
fn a_killed_daemon_takes_its_jobs_whole_tree_with_it() {
    let mut s = setup();
    let (code, r) = s.submit(&["tree"], "s1");
    assert_eq!(code, 0, "{r}");
    let id = r["job"]["id"].as_str().unwrap().to_string();
    let names = ["tree.leader", "tree.a", "tree.b", "tree.c", "tree.d"];
    let mut tree = vec![];
    wait_until("the job's tree running", Duration::from_secs(20), || {
        tree = pids_in(s.app.path(), &names).unwrap_or_default();
        tree.len() == names.len() && tree.iter().all(|&p| alive(p))
    });
    let t0 = Instant::now();
    s.kill9_daemon();
    let gone = || tree.iter().all(|&p| !alive(p));
    while !gone() && t0.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let left: Vec<i64> = tree.iter().copied().filter(|&p| alive(p)).collect();
    for &p in &left {
        // SAFETY: not left behind by a failing test.
        unsafe { libc::kill(p as libc::pid_t, libc::SIGKILL) };
    }
    assert!(left.is_empty(), "outlived the daemon's kill -9 by 3 s: {left:?} of {tree:?}");
    eprintln!("the job's tree was gone {:?} after the daemon's kill -9", t0.elapsed());
    s.start_daemon();
    wait_until("the run reported by the next daemon", Duration::from_secs(20), || s.state(&id) == "timed_out");
    let job = s.status(&id);
    let reason = job["reason"].as_str().unwrap();
    assert!(reason.contains("ended with it") && !reason.contains("interrupted"), "{job}");
}

/// A job that ends while its daemon cannot record it (stopped, then killed
/// with -9) is reported with its real exit code by the next daemon.
#[test]
fn a_job_that_ends_while_its_daemon_is_down_is_reported_with_its_real_exit_code() {
    let mut s = setup();
    let gate = s.app.path().join("gate");
    mkfifo(&gate);
    let (code, r) = s.submit(&["fail7"], "s1");
    assert_eq!(code, 0, "{r}");
    let id = r["job"]["id"].as_str().unwrap().to_string();
    wait_until("the job running", Duration::from_secs(20), || {
        s.state(&id) == "running" && s.app.path().join("fail7.pid").exists()
    });
    let daemon = s.daemon.as_ref().unwrap().id() as libc::pid_t;
    // SAFETY: a signal to the daemon this test started.
    unsafe { libc::kill(daemon, libc::SIGSTOP) };
    release(&gate);
    let record = s.b.home.path().join("jobs").join(format!("{id}.run.exit"));
    wait_until("the job's exit record", Duration::from_secs(10), || record.exists());
    s.kill9_daemon();
    assert_eq!(s.state(&id), "running", "nobody reported it yet");
    s.start_daemon();
    wait_until("the run reported by the next daemon", Duration::from_secs(20), || s.state(&id) != "running");
    let job = s.status(&id);
    assert_eq!(job["state"], "failed", "{job}");
    assert_eq!(job["result"]["exit"], 7, "{job}");
    assert!(job["result"]["output"].as_str().unwrap().contains("failing"), "{job}");
    assert!(job["reason"].as_str().unwrap().contains("exit 7"), "{job}");
    wait_until("the exit record consumed", Duration::from_secs(10), || !record.exists());
}

/// While a job blocked on a FIFO runs, a probe job on the
/// same PC and mail both complete; then the FIFO releases the job. The
/// submitting session's hook is told once that its job ended.
#[test]
fn the_poll_loop_goes_on_while_a_job_runs() {
    let s = setup();
    let gate = s.app.path().join("gate");
    mkfifo(&gate);
    let (_, r) = s.submit(&["count"], "waiting-session");
    let id = r["job"]["id"].as_str().unwrap().to_string();
    wait_until("the job running", Duration::from_secs(20), || {
        s.state(&id) == "running" && s.lines(s.app.path(), "count.txt") == 1
    });

    let (code, p) = s.submit(&["probe", "word=alive", "--wait", "--timeout", "20s"], "other");
    assert_eq!(code, 0, "{p}");
    assert!(p["job"]["result"]["output"].as_str().unwrap().contains("probe:alive"), "{p}");
    let mail = s.a.send(&["pc-b", "--body", "during the job"]);
    wait_until("mail delivered during the job", Duration::from_secs(20), || s.a.state_of(&mail) == "delivered");
    assert_eq!(s.state(&id), "running", "the long job is still running");

    release(&gate);
    wait_until("the job done", Duration::from_secs(20), || s.state(&id) == "ok");
    let job = s.status(&id);
    assert!(job["result"]["output"].as_str().unwrap().contains("counted"), "{job}");

    // The submitter's poll hears that it ended; its session is told once.
    wait_until("pc-a told", Duration::from_secs(20), || {
        s.a.ok(&["sync"]);
        let c = rusqlite::Connection::open(s.a.store()).unwrap();
        c.query_row("SELECT ended_at FROM jobs_mine WHERE job_id = ?1", [&id], |r| r.get::<_, Option<i64>>(0))
            .unwrap()
            .is_some()
    });
    let ctx = s.a.hook("waiting-session", "UserPromptSubmit");
    assert!(ctx.contains(&format!("pcmail: job {id} (count on pc-b) ended ok")), "{ctx}");
    let again = s.a.hook("waiting-session", "UserPromptSubmit");
    assert!(!again.contains(&id), "told once: {again}");
}

/// 8 sessions submit the same job at once → one run and 8
/// identical answers; `--force` → a second run.
#[test]
fn eight_sessions_submitting_the_same_job_get_one_run() {
    let s = setup();
    let gate = s.app.path().join("gate");
    mkfifo(&gate);
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let mut c = s.a.cmd(&["--json", "job", "run", "pc-b", "count", "--wait", "--timeout", "60s"]);
            c.env("PCMAIL_SESSION", format!("session-{i}")).stdout(Stdio::piped()).stderr(Stdio::piped());
            c.spawn().unwrap()
        })
        .collect();
    // All 8 submitted (one job, 7 joined) before the job may end.
    let id = loop {
        let list = s.a.json(&["job", "list", "--mine"]);
        let counts: Vec<&Value> = list["jobs"].as_array().unwrap().iter().filter(|j| j["command"] == "count").collect();
        if let Some(j) = counts.first().filter(|j| j["joined"] == 7) {
            assert_eq!(counts.len(), 1, "one job: {list}");
            break j["id"].as_str().unwrap().to_string();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    release(&gate);
    let answers: Vec<Value> = handles
        .into_iter()
        .map(|h| {
            let out = h.wait_with_output().unwrap();
            assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
            serde_json::from_slice(&out.stdout).unwrap()
        })
        .collect();
    assert_eq!(answers.iter().filter(|a| a["deduped"] == false).count(), 1);
    for a in &answers {
        assert_eq!(a["job"]["id"], id.as_str());
        assert_eq!(a["job"]["state"], "ok");
        assert_eq!(a["job"]["result"], answers[0]["job"]["result"], "the same result for every session");
    }
    assert_eq!(s.lines(s.app.path(), "count.txt"), 1, "one run");
    let _ = std::fs::remove_file(&gate);
    // Within the dedup window a plain submit joins the ended job; --force runs again.
    let (code, r) = s.submit(&["count", "--wait"], "late");
    assert_eq!((code, r["deduped"].as_bool()), (0, Some(true)), "{r}");
    assert_eq!(s.lines(s.app.path(), "count.txt"), 1);
    let (code, r) = s.submit(&["count", "--force", "--wait", "--timeout", "30s"], "late");
    assert_eq!((code, r["deduped"].as_bool()), (0, Some(false)), "{r}");
    assert_eq!(s.lines(s.app.path(), "count.txt"), 2, "--force ran it again");
}

/// Security: shell metacharacters reach the command as one argv element
/// each, verbatim, and run nothing; traversal, absolute paths, control
/// characters and oversized values are refused at submit (exit 13, the
/// field named) in every typed argument; nothing leaves the checkout.
#[test]
fn arguments_never_reach_a_shell_nor_leave_the_checkout() {
    let s = setup();
    let marker = s.app.path().join("MARKER");
    let nasty = format!("x; touch {0} && $(touch {0}) `touch {0}` | tee {0} > {0} & echo pwned", marker.display());
    let ok_args = |sv: &str| {
        vec![format!("s={sv}"), "n=3".into(), "b=true".into(), "e=red".into(), "p=src/main.rs".into(), "c=app".into()]
    };
    let run = |args: Vec<String>| {
        let mut a: Vec<&str> = vec!["show"];
        a.extend(args.iter().map(String::as_str));
        a.extend(["--wait", "--timeout", "30s"]);
        s.submit(&a, "sec")
    };
    let (code, r) = run(ok_args(&nasty));
    assert_eq!(code, 0, "{r}");
    let out = r["job"]["result"]["output"].as_str().unwrap();
    assert!(out.contains(&format!("[{nasty}]\n")), "one element, verbatim: {out}");
    assert!(out.contains("[3]\n[true]\n[red]\n[src/main.rs]\n"), "{out}");
    assert!(out.contains(&format!("[{}]", s.app.path().display())), "the checkout's directory: {out}");
    assert!(!marker.exists(), "nothing ran through a shell");

    let refused: Vec<(&str, String)> = vec![
        ("s", "a\u{1}b".into()),
        ("s", "a\nb".into()),
        ("s", "x".repeat(1001)),
        ("n", "11".into()),
        ("n", "3; touch MARKER".into()),
        ("b", "yes".into()),
        ("e", "blue".into()),
        ("p", "../escape".into()),
        ("p", "src/../../escape".into()),
        ("p", "/etc/passwd".into()),
        ("p", "a\tb".into()),
        ("s", "--output=/tmp/x".into()),
        ("s", "-".into()),
        ("p", "--output=/tmp/x".into()),
        ("p", "-x".into()),
        ("p", "y".repeat(5000)),
        ("c", "../app".into()),
        ("c", "/tmp".into()),
    ];
    for (name, bad) in refused {
        let mut args = ok_args("fine");
        args.retain(|a| !a.starts_with(&format!("{name}=")));
        args.push(format!("{name}={bad}"));
        let (code, r) = run(args);
        assert_eq!(code, 13, "{name}={bad:?}: {r}");
        let text = r.to_string();
        assert!(text.contains(&format!("args.{name}")) || text.contains(name), "{name}: the field is named: {text}");
    }
    // NUL cannot be passed through argv: it is refused by the server through the protocol.
    let resp = s._server.call_as(
        &s.a,
        "job.submit",
        serde_json::json!({
        "jobId": "job-1-0000abcd", "target": "pc-b", "command": "show",
        "args": {"s": "a\u{0}b", "n": 1, "b": true, "e": "red", "p": "x", "c": "app"},
        "submitter": {"pc": "pc-a", "session": "sec"}}),
    );
    assert_eq!(resp["ok"], false, "{resp}");
    assert!(resp.to_string().contains("args.s"), "{resp}");
    assert!(!marker.exists());
    let escaped: Vec<PathBuf> = ["escape", "../escape"].iter().map(|p| s.app.path().join(p)).collect();
    assert!(escaped.iter().all(|p| !p.exists()));

    // A path is followed inside the checkout only: a symlink out of it (to a
    // file, through a folder, or to nothing) is refused by the executor, exit 13.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "SECRET-OUTSIDE").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), s.app.path().join("host")).unwrap();
    std::os::unix::fs::symlink(outside.path(), s.app.path().join("ext")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("nothing"), s.app.path().join("dangling")).unwrap();
    std::fs::create_dir(s.app.path().join("src")).unwrap();
    std::os::unix::fs::symlink("src", s.app.path().join("inner")).unwrap();
    for p in ["host", "ext/secret", "ext/new", "dangling"] {
        let mut args = ok_args("fine");
        args.retain(|a| !a.starts_with("p="));
        args.push(format!("p={p}"));
        let (code, r) = run(args);
        assert_eq!(code, 13, "{p}: {r}");
        assert_eq!(r["job"]["result"]["ran"], false, "{p}: {r}");
        assert!(r["job"]["reason"].as_str().unwrap().contains("bad_argument"), "{p}: {r}");
        assert!(!r.to_string().contains("SECRET-OUTSIDE"), "{p}: {r}");
    }
    // A symlink that stays inside, and a file reached as ./-name, run.
    let mut args = ok_args("fine");
    args.retain(|a| !a.starts_with("p="));
    args.push("p=inner/./-x".into());
    let (code, r) = run(args);
    assert_eq!(code, 0, "{r}");

    // The PC checks again before running: a job queued under the old
    // whitelist, for a submitter the PC no longer allows, is refused there.
    let mut s = s;
    s.kill9_daemon();
    let cfg = s.b.home.path().join("config.toml");
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("allowed_submitters = [\"pc-a\"]", "allowed_submitters = [\"pc-z\"]");
    std::fs::write(&cfg, text).unwrap();
    let (code, r) = s.submit(&["probe", "word=late"], "sec");
    assert_eq!(code, 0, "queued under the whitelist the server holds: {r}");
    let id = r["job"]["id"].as_str().unwrap().to_string();
    s.start_daemon();
    wait_until("the job refused", Duration::from_secs(20), || s.state(&id) == "failed");
    let job = s.status(&id);
    assert_eq!(job["result"]["ran"], false, "{job}");
    assert!(job["reason"].as_str().unwrap().contains("submitter_not_allowed"), "{job}");
    let out = s.a.run(&["job", "run", "pc-b", "probe", "word=later"]);
    assert_eq!(out.status.code(), Some(13), "the new whitelist is published: refused at submit");
}

/// An unknown target is exit 4 with candidates; the whitelist's refusals are exit 13.
#[test]
fn unknown_targets_and_commands_are_refused_with_their_exit_codes() {
    let s = setup();
    let out = s.a.run(&["job", "run", "pc-bb", "probe", "word=x"]);
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pc-b"));
    let (code, r) = s.submit(&["nope"], "x");
    assert_eq!(code, 13, "{r}");
    let (code, r) = s.submit(&["probe"], "x");
    assert_eq!(code, 13, "a required argument missing: {r}");
    let out = s.a.run(&["job", "run", "pc-b", "probe", "word"]);
    assert_eq!(out.status.code(), Some(2), "NAME=VALUE");
}

/// A running job is cancelled on request (its executor kills it at its next
/// poll) and killed at its time limit (`timed_out`, exit 14 with `--wait`).
#[test]
fn a_running_job_is_cancelled_on_request_and_killed_at_its_time_limit() {
    let s = setup();
    let gate = s.app.path().join("gate");
    mkfifo(&gate);
    let (_, r) = s.submit(&["count"], "c");
    let id = r["job"]["id"].as_str().unwrap().to_string();
    wait_until("the job running", Duration::from_secs(20), || {
        s.state(&id) == "running" && s.lines(s.app.path(), "count.txt") == 1
    });
    let out = s.a.ok(&["job", "cancel", &id]);
    assert!(out.contains("cancel requested"), "{out}");
    wait_until("the job cancelled", Duration::from_secs(20), || s.state(&id) == "cancelled");
    let job = s.status(&id);
    assert_eq!(job["result"]["ran"], true, "{job}");
    assert!(job["result"]["output"].as_str().unwrap().contains("cancelled"), "{job}");

    let (code, r) = s.submit(&["slow", "--wait", "--timeout", "30s"], "c");
    assert_eq!(code, 14, "{r}");
    assert_eq!(r["job"]["state"], "timed_out");
    assert!(r["job"]["reason"].as_str().unwrap().contains("time limit"), "{r}");
    let pid: i64 = std::fs::read_to_string(s.app.path().join("slow.pid")).unwrap().trim().parse().unwrap();
    wait_until("the timed-out process gone", Duration::from_secs(10), || !alive(pid));
}

/// A server without the `jobs` feature: exit 5 at once, saying so.
#[test]
fn a_server_without_jobs_is_exit_5_at_once() {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/api", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut r = BufReader::new(stream);
            let mut len = 0usize;
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0u8; len];
            let _ = r.read_exact(&mut body);
            let answer = r#"{"ok":false,"error":{"code":"unknown_op","message":"unknown op"}}"#;
            let mut w = r.into_inner();
            let _ = write!(w, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}", answer.len());
        }
    });
    let pc = Pc::blank("pc-a", &url, true);
    let out = pc.run(&["init", "--label", "pc-a", "--server", &url, "--offline"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = pc.run(&["job", "run", "@server", "_debug_roster"]);
    assert_eq!(out.status.code(), Some(5), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("this server does not support jobs"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A chunked job whose work is longer than its time limit
/// finishes over several runs; a new input reuses every other input's result;
/// a failing input is dropped after 3 failures (its expiry after 3 days is
/// proven with a fake clock in pcmail-client's jobs/chunks.rs).
#[test]
fn a_chunked_job_resumes_over_runs_and_keeps_each_inputs_result() {
    let s = setup();
    let inputs = s.lib.path().join("in");
    std::fs::create_dir(&inputs).unwrap();
    for f in ["a", "b", "bad", "c"] {
        std::fs::write(inputs.join(f), f).unwrap();
    }
    let ran = || {
        std::fs::read_to_string(s.lib.path().join("ran.txt"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let (_, r) = s.submit(&["chunk", "--wait", "--timeout", "60s"], "ch");
    let job = &r["job"];
    assert_eq!(job["state"], "failed", "{r}");
    assert_eq!(job["result"]["chunks"], serde_json::json!({"done": 3, "total": 4, "failed": 1, "skipped": 0}), "{r}");
    let id = job["id"].as_str().unwrap();
    let runs = s.status(id)["timeline"].as_array().unwrap().iter().filter(|t| t["state"] == "running").count();
    assert!(runs >= 2, "more work than one run's time limit: {runs} run(s)");
    assert_eq!(ran(), ["in/a", "in/b", "in/bad", "in/c"], "each input once");

    // One new input: only it (and the failing one) run; the others' results are kept.
    std::fs::write(inputs.join("d"), "d").unwrap();
    let (_, r) = s.submit(&["chunk", "--force", "--wait", "--timeout", "60s"], "ch");
    assert_eq!(r["job"]["result"]["chunks"]["done"], 4, "{r}");
    assert_eq!(ran()[4..], ["in/bad", "in/d"]);
    // The third failure drops it: the next job runs nothing.
    let _ = s.submit(&["chunk", "--force", "--wait", "--timeout", "60s"], "ch");
    assert_eq!(ran().len(), 7);
    let (_, r) = s.submit(&["chunk", "--force", "--wait", "--timeout", "60s"], "ch");
    assert_eq!(ran().len(), 7, "dropped after 3 failures");
    assert_eq!(
        r["job"]["result"]["chunks"],
        serde_json::json!({"done": 4, "total": 5, "failed": 0, "skipped": 1}),
        "{r}"
    );
}

/// Every PC executor has built-in read-only probes,
/// published with its whitelist and answered by its daemon in-process (no
/// command runs), under the same submitter rule as its owner's commands.
#[test]
fn a_pc_probe_answers_from_the_executor_and_a_submitter_not_allowed_is_refused() {
    let s = setup();
    // A live session on pc-b, as the hook records it (no process: live while recently prompted).
    let _ = s.b.hook("sess-probe-12345678", "UserPromptSubmit");

    let (code, r) = s.submit(&["_debug_pc", "--wait", "--timeout", "20s"], "x");
    assert_eq!(code, 0, "{r}");
    let job = if r.get("job").is_some() { r["job"].clone() } else { r.clone() };
    assert_eq!(job["state"], "ok", "{r}");
    let data = &job["result"]["data"];
    assert_eq!(data["label"], "pc-b", "{r}");
    assert_eq!(data["server"], "serve", "{r}");
    assert!(data["version"].as_str().is_some_and(|v| !v.is_empty()), "{r}");
    assert!(data["poller"]["lastPollOkAt"].as_i64().is_some(), "the daemon has polled: {r}");
    assert!(data["storeBytes"].as_u64().unwrap() > 0, "{r}");
    assert!(job["result"]["output"].as_str().unwrap().contains("\"label\": \"pc-b\""), "bounded text output too: {r}");

    let (code, r) = s.submit(&["_debug_sessions", "--wait", "--timeout", "20s"], "x");
    assert_eq!(code, 0, "{r}");
    let job = if r.get("job").is_some() { r["job"].clone() } else { r.clone() };
    let sessions = job["result"]["data"]["sessions"].as_array().unwrap().clone();
    assert!(sessions.iter().any(|x| x["session"] == "sess-pro"), "the id prefix only: {job}");
    assert!(sessions.iter().all(|x| x.get("cwd").is_none()), "no cwd: {job}");

    for probe in ["_debug_leases", "_debug_jobs"] {
        let (code, r) = s.submit(&[probe, "--wait", "--timeout", "20s"], "x");
        assert_eq!(code, 0, "{probe}: {r}");
    }

    // Without --json a probe's answer is printed for a person, the server's
    // (which has no text output of its own) and a PC's alike.
    let roster = s.a.ok(&["job", "run", "@server", "_debug_roster"]);
    assert!(roster.contains("\n  answer:\n") && roster.contains("label: pc-b"), "{roster}");
    assert!(roster.contains("requireCredentials: "), "{roster}");
    let pc = s.a.ok(&["job", "run", "pc-b", "_debug_pc", "--wait", "--timeout", "20s"]);
    assert!(pc.contains("    label: pc-b") && pc.contains("    server: serve"), "{pc}");
    assert!(!pc.contains("\"label\""), "the answer, not its JSON text: {pc}");

    // No process ran for any probe: the `count` command's file was never made.
    assert_eq!(s.lines(s.app.path(), "count.txt"), 0);

    // pc-c is on the roster but not in pc-b's allowed_submitters: refused at submit (exit 13).
    let c = Pc::new(&s._server, "pc-c");
    c.ok(&["sync"]);
    let out = c.run(&["--json", "job", "run", "pc-b", "_debug_sessions"]);
    assert_eq!(out.status.code(), Some(13), "{}", String::from_utf8_lossy(&out.stderr));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("submitter_not_allowed") || text.contains("does not run jobs from pc-c"), "{text}");
}

/// A chunked job is the first job a fresh executor ever runs: its log
/// folder is made where the log is opened (0700, the log 0600), so every
/// input runs instead of failing on a log that cannot open.
#[test]
fn a_chunked_job_runs_on_a_fresh_executor_home() {
    use std::os::unix::fs::PermissionsExt;
    let s = setup_with(false);
    let inputs = s.lib.path().join("in");
    std::fs::create_dir(&inputs).unwrap();
    for f in ["a", "b"] {
        std::fs::write(inputs.join(f), f).unwrap();
    }
    let (code, r) = s.submit(&["chunk", "--wait", "--timeout", "60s"], "fresh");
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["job"]["state"], "ok", "{r}");
    assert_eq!(r["job"]["result"]["chunks"], serde_json::json!({"done": 2, "total": 2, "failed": 0, "skipped": 0}));
    let jobs = s.b.home.path().join("jobs");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&jobs), 0o700);
    for e in std::fs::read_dir(&jobs).unwrap() {
        let p = e.unwrap().path();
        assert_eq!(mode(&p), 0o600, "{}", p.display());
    }
}

/// "Already made" is per identity (every argument) and fresh only: another
/// target runs; an artifact of the same target answers without running; a
/// commit after the artifact makes it stale.
#[test]
fn reuse_is_for_the_same_arguments_and_not_past_a_new_commit() {
    let s = setup();
    let made = || s.lines(s.app.path(), "made.txt");
    let (code, r) = s.submit(&["make", "target=core", "--wait", "--timeout", "30s"], "re");
    assert_eq!((code, r["job"]["result"]["ran"].as_bool()), (0, Some(true)), "{r}");
    assert!(r["job"]["result"]["artifacts"][0].as_str().unwrap().starts_with("out/make-core-"), "{r}");
    let (code, r) = s.submit(&["make", "target=server", "--wait", "--timeout", "30s"], "re");
    assert_eq!((code, r["job"]["result"]["ran"].as_bool()), (0, Some(true)), "another argument runs: {r}");
    assert_eq!(made(), 2);
    // An artifact an earlier job left for the same arguments answers it.
    std::fs::create_dir_all(s.app.path().join("out")).unwrap();
    std::fs::write(s.app.path().join("out/make-other-123.txt"), "other").unwrap();
    let (code, r) = s.submit(&["make", "target=other", "--wait", "--timeout", "30s"], "re");
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["job"]["result"]["ran"], false, "{r}");
    assert_eq!(r["job"]["result"]["reused"], serde_json::json!(["out/make-other-123.txt"]), "{r}");
    assert_eq!(made(), 2);
    // A commit after the artifact: stale, it runs again.
    std::fs::write(s.app.path().join("out/make-third-123.txt"), "third").unwrap();
    let git = |args: &[&str]| {
        let st = std::process::Command::new("git")
            .args(args)
            .current_dir(s.app.path())
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@x")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@x")
            .env("GIT_COMMITTER_DATE", "@3786825600 +0000")
            .output()
            .unwrap();
        assert!(st.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&st.stderr));
    };
    git(&["init", "-q"]);
    git(&["commit", "-q", "--allow-empty", "-m", "later"]);
    let (code, r) = s.submit(&["make", "target=third", "--wait", "--timeout", "30s"], "re");
    assert_eq!((code, r["job"]["result"]["ran"].as_bool()), (0, Some(true)), "stale after a commit: {r}");
    assert_eq!(made(), 3);
}

/// The job example, exactly as docs/jobs.md shows it (only the
/// checkout's directory is put in), through a real executor: the `test`
/// command passes with its verify step's output in the result, the `build`
/// command makes its artifact and answers the same build from it, and a
/// value that would be an option is refused.
#[test]
fn readme_job_example_runs_as_written() {
    let readme = std::fs::read_to_string(repo_root().join("docs/jobs.md")).unwrap();
    let start =
        readme.find("```toml\n# config.toml (PCMAIL_HOME) of build-box").expect("the job example of docs/jobs.md");
    let body = &readme[start + "```toml\n".len()..];
    let block = &body[..body.find("\n```").unwrap()];
    assert!(block.contains("app = \"/home/me/src/app\""), "{block}");

    // A small cargo workspace as the checkout: crate `core` with a test, binary `tool`.
    let app = tempfile::tempdir().unwrap();
    let w = |p: &str, t: &str| {
        let f = app.path().join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, t).unwrap();
    };
    w("Cargo.toml", "[workspace]\nmembers = [\"core\", \"tool\"]\nresolver = \"2\"\n");
    w("core/Cargo.toml", "[package]\nname = \"core\"\nversion = \"0.1.0\"\nedition = \"2021\"\n");
    w("core/src/lib.rs", "pub fn two() -> u32 { 2 }\n#[test]\nfn adds() { assert_eq!(two(), 2); }\n");
    w("tool/Cargo.toml", "[package]\nname = \"tool\"\nversion = \"0.1.0\"\nedition = \"2021\"\n");
    w("tool/src/main.rs", "fn main() { println!(\"tool\"); }\n");

    let server = Server::start(Kind::Rust);
    let [laptop, bbox] = synced(&server, ["laptop", "build-box"]);
    let cfg = bbox.home.path().join("config.toml");
    let config = block.replace("\"/home/me/src/app\"", &format!("{:?}", app.path().display().to_string()));
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push('\n');
    text.push_str(&config);
    std::fs::write(&cfg, text).unwrap();
    let wl = bbox.ok(&["job", "whitelist"]);
    assert!(wl.contains("test") && wl.contains("build"), "{wl}");
    // The daemon runs cargo as a user's would: its own target/ in the checkout.
    let mut daemon = bbox
        .cmd(&["daemon"])
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET_DIR")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    struct Kill<'a>(&'a mut Child);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _guard = Kill(&mut daemon);
    wait_until("build-box's whitelist on the server", Duration::from_secs(30), || {
        let out = laptop.run(&["--json", "job", "run", "build-box", "test"]);
        String::from_utf8_lossy(&out.stdout).contains("needs argument")
            || String::from_utf8_lossy(&out.stderr).contains("needs argument")
    });

    // The page's command, in text: exit 0, the verify step's own output shown.
    let out =
        laptop.run(&["job", "run", "build-box", "test", "checkout=app", "crate=core", "--wait", "--timeout", "600s"]);
    let shown = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(shown.contains(" ok on build-box") || shown.contains("ok on build-box"), "{shown}");
    assert!(shown.contains("verify: ok (exit 0)"), "{shown}");
    let verify_at = shown.find("verify: ok").unwrap();
    assert!(shown[verify_at..].contains("test result: ok"), "the verify's output: {shown}");

    // The build: made, then answered from its artifact; another target would run.
    let build = |target: &str| {
        let out = laptop.run(&[
            "--json",
            "job",
            "run",
            "build-box",
            "build",
            "checkout=app",
            &format!("target={target}"),
            "--wait",
            "--timeout",
            "600s",
        ]);
        let v: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code(), v)
    };
    let (code, r) = build("tool");
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(r["job"]["state"], "ok", "{r}");
    assert_eq!(r["job"]["result"]["artifacts"], serde_json::json!(["target/release/tool"]), "{r}");
    assert!(app.path().join("target/release/tool").is_file());
    let (code, r) = build("tool");
    assert_eq!(code, Some(0), "{r}");
    assert!(r["deduped"] == true || r["job"]["result"]["ran"] == false, "the same build is not run twice: {r}");

    // The example's filter cannot smuggle an option to the test binary.
    let out = laptop.run(&["job", "run", "build-box", "test", "checkout=app", "crate=core", "filter=--logfile=/tmp/x"]);
    assert_eq!(out.status.code(), Some(13), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("args.filter")
            || String::from_utf8_lossy(&out.stderr).contains("filter")
    );
}
