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
