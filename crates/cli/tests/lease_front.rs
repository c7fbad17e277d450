//! `pcmail-hook lease claim|release`: the small front the running daemon
//! answers. Its answers are `pcmail lease`'s (lines, exit codes, the lease's
//! holder, repo and followed process are the front's, not the daemon's), it
//! needs no `pcmail` to start while a daemon answers, one exclusive lease
//! raced by many fronts is granted once, and without a daemon the front runs
//! `pcmail` with the same arguments.
#![cfg(unix)]

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The pcmail-hook of this build, beside `pcmail` (`cargo build -p pcmail-hook`;
/// `scripts/test.sh` builds it).
fn hook_exe() -> PathBuf {
    let p = exe().with_file_name(if cfg!(windows) { "pcmail-hook.exe" } else { "pcmail-hook" });
    assert!(p.exists(), "these tests need pcmail-hook beside pcmail ({}): cargo build -p pcmail-hook", p.display());
    p
}

/// A git checkout whose origin names the repo `example.com/team/app`.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for args in [&["init", "-q"][..], &["remote", "add", "origin", "https://example.com/team/app.git"]] {
        let ok = Command::new("git").args(args).current_dir(dir.path()).status().unwrap().success();
        assert!(ok, "git {args:?}");
    }
    dir
}

struct Daemon(std::process::Child);

impl Daemon {
    fn start(pc: &Pc) -> Daemon {
        let socket = pc.home.path().join("daemon.sock");
        let child = pc.cmd(&["daemon"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let t = Instant::now();
        while !socket.exists() {
            assert!(t.elapsed() < Duration::from_secs(15), "the daemon made no socket in {}", socket.display());
            std::thread::sleep(Duration::from_millis(20));
        }
        Daemon(child)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `front` run as `pc` in `dir` with `args`, the session named `session`
/// and no agent above it.
fn run(front: &Path, pc: &Pc, dir: &Path, session: &str, args: &[&str]) -> Output {
    let mut c = Command::new(front);
    c.args(args)
        .current_dir(dir)
        .env("PCMAIL_HOME", pc.home.path())
        .env("PCMAIL_CREDENTIAL", &pc.cred)
        .env("PCMAIL_TOKEN", TOKEN)
        .env("PCMAIL_SESSION", session)
        .env("PCMAIL_CLAUDE_PID", "0")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .stdin(Stdio::null());
    c.output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn the_daemon_answers_the_small_front_as_pcmail_would() {
    let server_file = tempfile::tempdir().unwrap();
    let pc = Pc::embedded(&server_file.path().join("server.db"), "pc-a");
    let repo = repo();
    // A copy of the front with no pcmail beside it and nothing on PATH:
    // whatever it answers, the daemon answered.
    let lone = tempfile::tempdir().unwrap();
    let front = lone.path().join("pcmail-hook");
    std::fs::copy(hook_exe(), &front).unwrap();
    let no_pcmail = |args: &[&str], session: &str| {
        let mut c = Command::new(&front);
        c.args(args)
            .current_dir(repo.path())
            .env("PATH", lone.path().join("nothing-here"))
            .env("PCMAIL_HOME", pc.home.path())
            .env("PCMAIL_CREDENTIAL", &pc.cred)
            .env("PCMAIL_TOKEN", TOKEN)
            .env("PCMAIL_SESSION", session)
            .env("PCMAIL_CLAUDE_PID", "0")
            .stdin(Stdio::null());
        c.output().unwrap()
    };
    // No daemon yet: the lone front has nothing to run.
    let out = no_pcmail(&["lease", "claim", "deploy", "--ttl", "10m"], "s-front");
    assert_eq!(out.status.code(), Some(127), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("no `pcmail` program"), "{}", text(&out.stderr));

    let _daemon = Daemon::start(&pc);
    let out = no_pcmail(&["lease", "claim", "deploy", "-d", "ship it", "--ttl", "10m"], "s-front");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("pcmail: holding deploy (fence 1) until "), "{stdout}");
    assert_eq!(lines.last(), Some(&"1"), "the fence alone on the last line: {stdout}");

    // The lease is the front's: its session, its folder's repo.
    let list = pc.json(&["lease", "list", "deploy"]);
    let lease = &list["leases"][0];
    assert_eq!(
        (lease["holder"]["session"].as_str(), lease["repo"].as_str()),
        (Some("s-front"), Some("example.com/team/app"))
    );
    assert_eq!(lease["description"], "ship it");

    // Held: the same exit code and words from the front as from pcmail.
    let direct = run(&exe(), &pc, repo.path(), "s-other", &["lease", "claim", "deploy", "--ttl", "10m"]);
    let fronted = no_pcmail(&["lease", "claim", "deploy", "--ttl", "10m"], "s-other");
    assert_eq!((direct.status.code(), fronted.status.code()), (Some(10), Some(10)));
    for out in [&direct, &fronted] {
        assert!(
            text(&out.stderr).starts_with("pcmail: deploy is held by pc-a/s-front (exclusive) since "),
            "{}",
            text(&out.stderr)
        );
        assert!(out.stdout.is_empty());
    }
    // --json: the same object.
    let fronted = no_pcmail(&["lease", "claim", "deploy", "--ttl", "10m", "--json"], "s-other");
    let direct = run(&exe(), &pc, repo.path(), "s-other", &["lease", "claim", "deploy", "--ttl", "10m", "--json"]);
    let (f, d): (serde_json::Value, serde_json::Value) =
        (serde_json::from_slice(&fronted.stdout).unwrap(), serde_json::from_slice(&direct.stdout).unwrap());
    assert_eq!(
        (f["error"]["code"].clone(), f["error"]["exit"].clone()),
        (d["error"]["code"].clone(), d["error"]["exit"].clone())
    );
    assert_eq!(f["error"]["lease"]["fence"], 1);

    // No process named and no agent above: the lease follows the front's
    // parent (this test), never the daemon's.
    let out = no_pcmail(&["lease", "claim", "build-cache"], "s-front");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let me = std::process::id();
    assert!(text(&out.stdout).contains(&format!("while PID {me} runs")), "{}", text(&out.stdout));
    assert!(text(&out.stderr).contains(&format!("follows its parent process (PID {me})")), "{}", text(&out.stderr));

    // Release: done once, then "no such lease" (exit 7), as from pcmail.
    let out = no_pcmail(&["lease", "release", "deploy", "--reason", "shipped"], "s-front");
    assert_eq!((out.status.code(), text(&out.stdout).trim()), (Some(0), "pcmail: released deploy"));
    let fronted = no_pcmail(&["lease", "release", "deploy"], "s-front");
    let direct = run(&exe(), &pc, repo.path(), "s-front", &["lease", "release", "deploy"]);
    assert_eq!((fronted.status.code(), direct.status.code()), (Some(7), Some(7)));
    assert_eq!(text(&fronted.stderr), text(&direct.stderr));
    assert!(pc.json(&["lease", "list", "deploy"])["leases"].as_array().unwrap().is_empty());

    // What the daemon does not answer (a usage error, another lease command)
    // is left to pcmail: the lone front has none; the one beside pcmail runs it.
    for args in [&["lease", "claim"][..], &["lease", "list"]] {
        let out = no_pcmail(args, "s-front");
        assert_eq!(out.status.code(), Some(127), "{args:?}: {}", text(&out.stderr));
    }
    let out = run(&hook_exe(), &pc, repo.path(), "s-front", &["lease", "claim"]);
    assert_eq!(out.status.code(), Some(2), "clap's usage error, from pcmail: {}", text(&out.stderr));
    let out = run(&hook_exe(), &pc, repo.path(), "s-front", &["lease", "list"]);
    assert!(out.status.success() && text(&out.stdout).contains("build-cache"), "{}", text(&out.stdout));
}

#[test]
fn without_a_daemon_the_front_runs_pcmail_with_the_same_arguments() {
    let server_file = tempfile::tempdir().unwrap();
    let pc = Pc::embedded(&server_file.path().join("server.db"), "pc-b");
    let repo = repo();
    // A socket file a dead daemon left: nobody listens there.
    std::os::unix::net::UnixListener::bind(pc.home.path().join("daemon.sock")).unwrap();
    let out = run(&hook_exe(), &pc, repo.path(), "s-1", &["lease", "claim", "db-migrate", "--ttl", "5m"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("pcmail: holding db-migrate (fence 1)"), "{}", text(&out.stdout));
    let out = run(&hook_exe(), &pc, repo.path(), "s-2", &["lease", "claim", "db-migrate", "--ttl", "5m"]);
    assert_eq!(out.status.code(), Some(10), "{}", text(&out.stderr));
    let out = run(&hook_exe(), &pc, repo.path(), "s-1", &["lease", "release", "db-migrate"]);
    assert_eq!((out.status.code(), text(&out.stdout).trim()), (Some(0), "pcmail: released db-migrate"));
}

#[test]
fn fronts_racing_for_one_exclusive_lease_get_one_grant() {
    let server_file = tempfile::tempdir().unwrap();
    let pc = Pc::embedded(&server_file.path().join("server.db"), "pc-c");
    let repo = repo();
    let _daemon = Daemon::start(&pc);
    let front = hook_exe();
    for round in 0..3 {
        let resource = format!("gpu-{round}");
        let codes: Vec<Option<i32>> = std::thread::scope(|s| {
            let runs: Vec<_> = (0..12)
                .map(|i| {
                    let (front, pc, repo, resource) = (&front, &pc, repo.path(), &resource);
                    s.spawn(move || {
                        run(front, pc, repo, &format!("s-{i}"), &["lease", "claim", resource, "--ttl", "5m"])
                            .status
                            .code()
                    })
                })
                .collect();
            runs.into_iter().map(|r| r.join().unwrap()).collect()
        });
        let granted = codes.iter().filter(|c| **c == Some(0)).count();
        let held = codes.iter().filter(|c| **c == Some(10)).count();
        assert_eq!((granted, held), (1, 11), "round {round}: {codes:?}");
        let list = pc.json(&["lease", "list", &resource]);
        assert_eq!(list["leases"].as_array().unwrap().len(), 1, "{list}");
    }
}

#[test]
fn connections_that_send_nothing_do_not_hold_the_fronts_up() {
    let server_file = tempfile::tempdir().unwrap();
    let pc = Pc::embedded(&server_file.path().join("server.db"), "pc-d");
    let repo = repo();
    let _daemon = Daemon::start(&pc);
    let socket = pc.home.path().join("daemon.sock");
    // A copy with no pcmail beside it: only the daemon can answer it.
    let lone = tempfile::tempdir().unwrap();
    let front = lone.path().join("pcmail-hook");
    std::fs::copy(hook_exe(), &front).unwrap();
    // A stuck script of the same user:
    // connections that never send a request, and some that send half of one.
    let silent: Vec<_> = (0..9)
        .map(|i| {
            let s = std::os::unix::net::UnixStream::connect(&socket).unwrap();
            if i % 3 == 0 {
                std::io::Write::write_all(&mut &s, b"{\"version\":").unwrap();
            }
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    let mut c = Command::new(&front);
    c.args(["lease", "claim", "docs-site", "--ttl", "5m"])
        .current_dir(repo.path())
        .env("PATH", lone.path())
        .env("PCMAIL_HOME", pc.home.path())
        .env("PCMAIL_CREDENTIAL", &pc.cred)
        .env("PCMAIL_TOKEN", TOKEN)
        .env("PCMAIL_CLAUDE_PID", "0");
    let out = c.output().unwrap();
    let took = t.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // Each silent connection would hold the door for the read's 5 s were requests read one by one.
    assert!(took < Duration::from_secs(3), "the daemon answered after {took:?}");
    // More waiting at once than the door reads: the rest are told to run pcmail, which answers.
    let more: Vec<_> = (0..40).map(|_| std::os::unix::net::UnixStream::connect(&socket).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    let out = run(&hook_exe(), &pc, repo.path(), "s-9", &["lease", "release", "docs-site"]);
    assert_eq!(
        (out.status.code(), text(&out.stdout).trim()),
        (Some(0), "pcmail: released docs-site"),
        "{}",
        text(&out.stderr)
    );
    drop((silent, more));
}

#[test]
fn the_plugins_launcher_hands_lease_commands_to_the_front() {
    let server_file = tempfile::tempdir().unwrap();
    let pc = Pc::embedded(&server_file.path().join("server.db"), "pc-e");
    let repo = repo();
    let launcher = repo_root().join("plugins/pcmail/bin/pcmail-hook");
    let bin_dir = hook_exe().parent().unwrap().to_path_buf();
    let empty = tempfile::tempdir().unwrap();
    let through = |dir: &Path, args: &[&str]| {
        let mut c = Command::new(&launcher);
        c.args(args)
            .current_dir(repo.path())
            .env("PCMAIL_BIN_DIR", dir)
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", empty.path())
            .env("PCMAIL_HOME", pc.home.path())
            .env("PCMAIL_CREDENTIAL", &pc.cred)
            .env("PCMAIL_TOKEN", TOKEN)
            .env("PCMAIL_CLAUDE_PID", "0")
            .stdin(Stdio::null());
        c.output().unwrap()
    };
    let out = through(&bin_dir, &["lease", "claim", "release-train", "--ttl", "5m"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("pcmail: holding release-train (fence 1)"), "{}", text(&out.stdout));
    let out = through(&bin_dir, &["lease", "release", "release-train"]);
    assert_eq!((out.status.code(), text(&out.stdout).trim()), (Some(0), "pcmail: released release-train"));
    // Nothing installed where the launcher looks: a lease command fails, never a silent success.
    let out = through(empty.path(), &["lease", "claim", "release-train", "--ttl", "5m"]);
    assert_eq!(out.status.code(), Some(127), "{}", text(&out.stderr));
}
