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

/// A running `pcmail daemon` of `pc`, its stderr (debug lines of the front
/// door included) in a file; killed when dropped.
struct Daemon {
    child: std::process::Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Daemon {
    fn start(pc: &Pc) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("daemon.log");
        let socket = pc.home.path().join("daemon.sock");
        let child = pc
            .cmd(&["daemon"])
            .env("PCMAIL_LOG", "warn,pcmail=debug")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let t = Instant::now();
        while !socket.exists() {
            assert!(t.elapsed() < Duration::from_secs(15), "the daemon made no socket in {}", socket.display());
            std::thread::sleep(Duration::from_millis(20));
        }
        Daemon { child, log, _dir: dir }
    }

    /// How many lease commands the daemon answered itself.
    fn answered(&self) -> usize {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        log.lines().filter(|l| l.contains("front door: lease command") && l.contains("served=true")).count()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `front` run as `pc` in `dir` with `args`, the session named `session`
/// and no agent above it.
fn run(front: &Path, pc: &Pc, dir: &Path, session: &str, args: &[&str]) -> Output {
    front_command(front, pc, dir, session, args).output().unwrap()
}

/// The copy of the front in `lone` ([`lone_front`]), with `PATH` there: no
/// `pcmail` to run in the daemon's place.
fn run_lone(lone: &Path, pc: &Pc, dir: &Path, session: &str, args: &[&str]) -> Output {
    front_command(&lone.join("pcmail-hook"), pc, dir, session, args).env("PATH", lone).output().unwrap()
}

fn front_command(front: &Path, pc: &Pc, dir: &Path, session: &str, args: &[&str]) -> Command {
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
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A copy of the front in a folder of its own, with no `pcmail` beside it:
/// run with `PATH` there ([`run_lone`]), whatever it answers the daemon answered.
fn lone_front() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(hook_exe(), dir.path().join("pcmail-hook")).unwrap();
    dir
}

/// The lease commands of one session's day, each as (session, arguments).
const DAY: &[(&str, &[&str])] = &[
    ("s-front", &["lease", "claim", "deploy", "-d", "ship it", "--ttl", "10m"]),
    ("s-other", &["lease", "claim", "deploy", "--ttl", "10m"]),
    ("s-other", &["lease", "claim", "deploy", "--ttl", "10m", "--json"]),
    ("s-front", &["lease", "claim", "build-cache"]),
    ("s-front", &["lease", "release", "deploy", "--reason", "shipped"]),
    ("s-front", &["lease", "release", "deploy"]),
    ("s-front", &["lease", "release", "deploy", "--json"]),
];

/// Exit code, stdout and stderr of each command of [`DAY`] on a fresh PC of
/// its own, run by `runner`, with every number made `N` (times, ages, ids
/// and the PID differ from run to run; fences and codes are compared apart).
fn day(
    runner: impl Fn(&Pc, &Path, &str, &[&str]) -> Output,
    with_daemon: bool,
) -> (Vec<(Option<i32>, String, String)>, usize) {
    let server_file = tempfile::tempdir().unwrap();
    let pc = Pc::embedded(&server_file.path().join("server.db"), "pc-a");
    let repo = repo();
    let daemon = with_daemon.then(|| Daemon::start(&pc));
    let numbers = |t: String| {
        let mut out = String::new();
        let mut last_digit = false;
        for c in t.chars() {
            if c.is_ascii_digit() {
                if !last_digit {
                    out.push('N');
                }
                last_digit = true;
            } else {
                out.push(c);
                last_digit = false;
            }
        }
        out
    };
    // A claim's id is random too.
    let claim_ids = |t: String| match t.split_once("\"claimId\":\"") {
        Some((head, rest)) => format!("{head}\"claimId\":\"ID{}", &rest[rest.find('"').unwrap_or(0)..]),
        None => t,
    };
    let outs = DAY
        .iter()
        .map(|(session, args)| {
            let out = runner(&pc, repo.path(), session, args);
            (out.status.code(), numbers(claim_ids(text(&out.stdout))), numbers(text(&out.stderr)))
        })
        .collect();
    // The lease is the caller's: its session, its folder's repo.
    let list = pc.json(&["lease", "list", "build-cache"]);
    let lease = &list["leases"][0];
    assert_eq!(
        (lease["holder"]["session"].as_str(), lease["repo"].as_str()),
        (Some("s-front"), Some("example.com/team/app"))
    );
    (outs, daemon.map(|d| d.answered()).unwrap_or(0))
}

#[test]
fn the_daemon_answers_the_small_front_as_pcmail_would() {
    // pcmail itself, no daemon: the answers to match.
    let (local, _) = day(|pc, dir, session, args| run(&exe(), pc, dir, session, args), false);
    let codes: Vec<Option<i32>> = local.iter().map(|(c, _, _)| *c).collect();
    assert_eq!(codes, [Some(0), Some(10), Some(10), Some(0), Some(0), Some(7), Some(7)], "{local:#?}");
    assert!(local[0].1.starts_with("pcmail: holding deploy (fence N) until "), "{local:#?}");
    assert!(local[1].2.starts_with("pcmail: deploy is held by pc-a/s-front (exclusive) since "), "{local:#?}");
    // No process named and no agent above: the lease follows the caller's parent (this test).
    assert!(
        local[3].1.contains("while PID N runs") && local[3].2.contains("follows its parent process (PID N)"),
        "{local:#?}"
    );
    assert_eq!(local[5].2, "pcmail: this PC holds no lease of deploy (`pcmail lease list`)\n");

    // The lone front, the daemon answering every command.
    let lone = lone_front();
    let fronted = |pc: &Pc, dir: &Path, session: &str, args: &[&str]| run_lone(lone.path(), pc, dir, session, args);
    let (through_front, answered) = day(fronted, true);
    assert_eq!(through_front, local, "the front's answers are pcmail's");
    assert_eq!(answered, DAY.len(), "the daemon answered each command");
    // `pcmail lease claim|release` itself asks the daemon first: the same answers again.
    let (through_pcmail, answered) = day(|pc, dir, session, args| run(&exe(), pc, dir, session, args), true);
    assert_eq!(through_pcmail, local);
    assert_eq!(answered, DAY.len(), "the daemon answered each command");

    // Without a daemon the lone front has nothing to run; what the daemon
    // does not answer (a usage error, another lease command) is left to
    // pcmail, which the front beside it runs.
    let server_file = tempfile::tempdir().unwrap();
    let pc = Pc::embedded(&server_file.path().join("server.db"), "pc-a");
    let repo = repo();
    let out = fronted(&pc, repo.path(), "s-front", &["lease", "claim", "deploy", "--ttl", "10m"]);
    assert_eq!(out.status.code(), Some(127), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("no `pcmail` program"), "{}", text(&out.stderr));
    let _daemon = Daemon::start(&pc);
    for args in [&["lease", "claim"][..], &["lease", "list"]] {
        let out = fronted(&pc, repo.path(), "s-front", args);
        assert_eq!(out.status.code(), Some(127), "{args:?}: {}", text(&out.stderr));
    }
    // A front naming another credential than the daemon's is not answered with the daemon's.
    let out = run_lone(lone.path(), &pc, repo.path(), "s-front", &["lease", "claim", "x", "--ttl", "5m"]);
    assert_eq!(out.status.code(), Some(0), "the same identity: answered: {}", text(&out.stderr));
    let other =
        front_command(&lone.path().join("pcmail-hook"), &pc, repo.path(), "s-front", &["lease", "release", "x"])
            .env("PATH", lone.path())
            .env("PCMAIL_CREDENTIAL", random_credential())
            .output()
            .unwrap();
    assert_eq!(other.status.code(), Some(127), "another credential: left to pcmail: {}", text(&other.stderr));
    let out = run(&hook_exe(), &pc, repo.path(), "s-front", &["lease", "claim"]);
    assert_eq!(out.status.code(), Some(2), "clap's usage error, from pcmail: {}", text(&out.stderr));
    run(&hook_exe(), &pc, repo.path(), "s-front", &["lease", "claim", "build-cache", "--ttl", "5m"]);
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
    let lone = lone_front();
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
    let out = run_lone(lone.path(), &pc, repo.path(), "s-8", &["lease", "claim", "docs-site", "--ttl", "5m"]);
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

#[test]
fn doctor_says_whether_the_running_poller_answers_lease_commands() {
    let server_file = tempfile::tempdir().unwrap();
    let pc = Pc::embedded(&server_file.path().join("server.db"), "pc-f");
    let line = |pc: &Pc| {
        let out = pc.run(&["--json", "doctor"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["check"].as_str().unwrap_or("").starts_with("lease commands:"))
            .map(|c| (c["level"].as_str().unwrap().to_string(), c["check"].as_str().unwrap().to_string()))
    };
    assert_eq!(line(&pc), None, "no poller runs: nothing to say about it");
    let daemon = Daemon::start(&pc);
    let (level, check) = line(&pc).expect("a line about lease commands");
    assert_eq!(level, "ok", "{check}");
    assert!(check.contains("the daemon answers them"), "{check}");
    drop(daemon);
    // A poller that holds the lock but answers nothing (the tray app, an older daemon): a warning.
    let lock = pcmail_local::locks::try_lock(&pcmail_local::config::Paths::at(pc.home.path()).daemon_lock())
        .unwrap()
        .expect("the daemon's lock is free again");
    let (level, check) = line(&pc).expect("a line about lease commands");
    assert_eq!(level, "warn", "{check}");
    assert!(check.contains("does not answer them"), "{check}");
    drop(lock);
}

/// Another user's process reaching the daemon's socket (root can: the file
/// mode does not stop it) is refused in words and told nothing was applied.
/// Run as root (as CI runs): the daemon runs as `nobody` in a home of its own.
#[test]
fn another_users_front_is_refused_in_words() {
    // SAFETY: getuid has no preconditions.
    assert_eq!(unsafe { libc::getuid() }, 0, "this test runs the daemon as nobody: run it as root, as CI does");
    let home = tempfile::tempdir_in("/tmp").unwrap();
    let status = |c: &mut Command| c.status().unwrap().success();
    assert!(status(Command::new("chown").args(["nobody", home.path().to_str().unwrap()])));
    // The test binary's folder and pcmail must be reachable by nobody.
    let as_nobody = |args: &[&str]| {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
            .arg(exe())
            .args(args)
            .env("PCMAIL_HOME", home.path())
            .env("HOME", home.path())
            .env("PCMAIL_TOKEN", TOKEN)
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .stdin(Stdio::null());
        c
    };
    let init = as_nobody(&["init", "--label", "pc-n", "--offline"]).output().unwrap();
    assert!(init.status.success(), "{}", text(&init.stderr));
    let mut daemon = as_nobody(&["daemon"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let socket = home.path().join("daemon.sock");
    let t = Instant::now();
    while !socket.exists() && t.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = Command::new(hook_exe())
        .args(["lease", "claim", "deploy", "--ttl", "5m"])
        .env("PCMAIL_HOME", home.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let _ = daemon.kill();
    let _ = daemon.wait();
    assert!(socket.exists(), "the daemon made no socket");
    assert_eq!(out.status.code(), Some(9), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("answers only its own user's commands"), "{}", text(&out.stderr));
}
