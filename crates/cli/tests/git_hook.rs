//! `pcmail hooks install --git` chooses its hook program by the same rule
//! as `pcmail hooks install`: `pcmail-hook` beside `pcmail`, else `pcmail
//! hook`. A `pcmail` alone (no `pcmail-hook` beside it or on PATH) used to
//! refuse with exit 2.

mod common;

use common::*;
use std::path::Path;
use std::process::{Command, Output};

/// `pcmail` alone in a folder of its own: a hard link (no copy of a large
/// debug binary), a copy where the filesystem has no links across.
fn lone_pcmail(dir: &Path) -> std::path::PathBuf {
    let to = dir.join("pcmail");
    if std::fs::hard_link(exe(), &to).is_err() {
        std::fs::copy(exe(), &to).unwrap();
    }
    to
}

fn run(pcmail: &Path, home: &Path, cwd: &Path, args: &[&str]) -> Output {
    Command::new(pcmail)
        .args(args)
        .current_dir(cwd)
        .env("PCMAIL_HOME", home)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .output()
        .unwrap()
}

fn git(repo: &Path, args: &[&str]) -> Output {
    Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .output()
        .unwrap()
}

/// The script's line that runs the guard (the path quoted only when it needs it).
fn guard_line(script: &str) -> String {
    script.lines().find(|l| l.ends_with("pre-commit || exit $?")).unwrap_or_default().to_string()
}

#[test]
fn the_git_guard_falls_back_to_pcmail_hook_like_the_agent_hooks() {
    let bin = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let repo = tempfile::tempdir().unwrap();
    let pcmail = lone_pcmail(bin.path());
    assert!(!bin.path().join("pcmail-hook").exists());
    assert!(git(repo.path(), &["init", "-q"]).status.success());

    let out = run(&pcmail, home.path(), repo.path(), &["hooks", "install", "--git"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let script = std::fs::read_to_string(repo.path().join(".git/hooks/pre-commit")).unwrap();
    let canonical = pcmail.canonicalize().unwrap();
    let runs = guard_line(&script);
    assert!(
        runs.contains(&canonical.display().to_string()) && runs.ends_with(" hook pre-commit || exit $?"),
        "{script}"
    );

    // The guard runs through `pcmail hook pre-commit`: nothing is leased, the commit goes in.
    std::fs::write(repo.path().join("a.txt"), "a").unwrap();
    assert!(git(repo.path(), &["add", "a.txt"]).status.success());
    let c = Command::new("git")
        .arg("-C")
        .arg(repo.path())
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "a"])
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("PCMAIL_HOME", home.path())
        .output()
        .unwrap();
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));

    // With `pcmail-hook` beside it, both kinds of hook name that binary.
    let hook_bin = Path::new(env!("CARGO_BIN_EXE_pcmail")).with_file_name("pcmail-hook");
    if hook_bin.is_file() {
        if std::fs::hard_link(&hook_bin, bin.path().join("pcmail-hook")).is_err() {
            std::fs::copy(&hook_bin, bin.path().join("pcmail-hook")).unwrap();
        }
        let out = run(&pcmail, home.path(), repo.path(), &["hooks", "install", "--git"]);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let script = std::fs::read_to_string(repo.path().join(".git/hooks/pre-commit")).unwrap();
        let beside = bin.path().canonicalize().unwrap().join("pcmail-hook");
        let runs = guard_line(&script);
        assert!(
            runs.contains(&beside.display().to_string()) && runs.ends_with("pcmail-hook pre-commit || exit $?"),
            "{script}"
        );
    }
}

/// The PreToolUse guard names the repo of every file an agent edits. In a
/// checkout with no commit yet (a fresh `git init`) it starts no `git`
/// process to look for a root commit there is none of (it did at every
/// edit); where the reflog does not name the first commit it still asks
/// `git`, which shows the recording `git` below works.
#[test]
fn the_guard_starts_no_git_in_a_checkout_with_no_commit() {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().unwrap();
    let repo = tempfile::tempdir().unwrap();
    let fake = tempfile::tempdir().unwrap();
    assert!(git(repo.path(), &["init", "-q"]).status.success());
    let real = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v git"])
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let calls = fake.path().join("calls");
    let script = format!("#!/bin/sh\necho \"$@\" >> '{}'\nexec '{}' \"$@\"\n", calls.display(), real.trim());
    std::fs::write(fake.path().join("git"), script).unwrap();
    std::fs::set_permissions(fake.path().join("git"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let pcmail = exe();
    assert!(run(&pcmail, home.path(), repo.path(), &["init", "--label", "guarded"]).status.success());
    let guard = || {
        let mut child = Command::new(&pcmail)
            .arg("hook")
            .current_dir(repo.path())
            .env("PCMAIL_HOME", home.path())
            .env("PATH", format!("{}:/usr/local/bin:/usr/bin:/bin", fake.path().display()))
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let file = repo.path().join("src/a.rs");
        let input = serde_json::json!({"session_id": "s1", "hook_event_name": "PreToolUse", "tool_name": "Edit",
            "tool_input": {"file_path": file}, "cwd": repo.path()});
        child.stdin.take().unwrap().write_all(input.to_string().as_bytes()).unwrap();
        assert!(child.wait_with_output().unwrap().status.success());
    };
    guard();
    assert!(!calls.exists(), "git ran: {}", std::fs::read_to_string(&calls).unwrap_or_default());

    // A commit whose reflog is gone: the root commit can only come from `git`.
    let c = Command::new("git")
        .arg("-C")
        .arg(repo.path())
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "--allow-empty", "-m", "a"])
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    std::fs::remove_file(repo.path().join(".git/logs/HEAD")).unwrap();
    guard();
    let seen = std::fs::read_to_string(&calls).unwrap_or_default();
    assert!(seen.contains("rev-list --max-parents=0 HEAD"), "{seen:?}");
}
