//! The habits of a CLI: shell completions from the parser's own definition,
//! and a man page that is generated, with docs/pcmail.1 kept current.

mod common;

use common::*;
use std::process::Command;

fn pcmail(args: &[&str]) -> std::process::Output {
    Command::new(exe()).args(args).env("PCMAIL_HOME", tempfile::tempdir().unwrap().path()).output().unwrap()
}

#[test]
fn completions_for_every_shell_name_the_commands() {
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let out = pcmail(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        for cmd in ["send", "inbox", "lease", "handoff", "job", "export"] {
            assert!(text.contains(cmd), "{shell} completion names {cmd}");
        }
    }
    // bash loads it and registers the completion for pcmail.
    let script = String::from_utf8(pcmail(&["completions", "bash"]).stdout).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pcmail.bash");
    std::fs::write(&file, script).unwrap();
    let out =
        Command::new("bash").arg("-c").arg(format!("source {}; complete -p pcmail", file.display())).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("_pcmail"), "{out:?}");
    // A shell it does not know is a usage error naming the choices.
    let bad = pcmail(&["completions", "nosh"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("possible values"));
}

/// `pcmail man` is generated from the parser; docs/pcmail.1 is that page as
/// committed (PCMAIL_WRITE_MAN=1 rewrites it when a command changes).
#[test]
fn the_man_page_is_current() {
    let out = pcmail(&["man"]);
    assert!(out.status.success(), "{out:?}");
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.contains(".TH pcmail 1") && page.contains("completions"), "a roff page listing the commands");
    let path = repo_root().join("docs/pcmail.1");
    if std::env::var_os("PCMAIL_WRITE_MAN").is_some() {
        std::fs::write(&path, &page).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == page,
        "docs/pcmail.1 is not the page `pcmail man` prints: PCMAIL_WRITE_MAN=1 cargo test -p pcmail-cli --test habits"
    );
}
