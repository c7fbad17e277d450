//! `pcmail map` as a process: writes the map, --check exits 0 when fresh and
//! 15 when stale, a bad --repo is a usage error (2).

use std::path::Path;
use std::process::{Command, Output};

fn pcmail(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pcmail")).args(args).env("PCMAIL_HOME", home).output().unwrap()
}

#[test]
fn map_then_check_fresh_then_stale() {
    let home = tempfile::tempdir().unwrap();
    let repo = tempfile::tempdir().unwrap();
    let r = repo.path().to_str().unwrap();
    std::fs::write(repo.path().join("lib.rs"), "/// Hi.\npub fn hi() {}\n").unwrap();

    let out = pcmail(home.path(), &["map", "--repo", r, "--check"]);
    assert_eq!(out.status.code(), Some(15), "no map yet: stale");
    assert!(String::from_utf8_lossy(&out.stderr).contains("run `pcmail map`"));

    let out = pcmail(home.path(), &["map", "--repo", r]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Code map: 1 file (") && stdout.contains("Wrote .claude/code-map.md, llms.txt"),
        "{stdout}"
    );
    let map = std::fs::read_to_string(repo.path().join(".claude/code-map.md")).unwrap();
    assert!(map.contains("`pub fn hi()` — Hi."));
    assert!(home.path().join("store.db").is_file(), "the cache is in the PC store");

    let out = pcmail(home.path(), &["map", "--repo", r, "--check", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((v["files"].as_u64(), v["parsed"].as_u64()), (Some(1), Some(0)), "the second run used the cache");

    std::fs::write(repo.path().join("lib.rs"), "pub fn bye() {}\n").unwrap();
    let out = pcmail(home.path(), &["map", "--repo", r, "--check"]);
    assert_eq!(out.status.code(), Some(15));
    assert!(String::from_utf8_lossy(&out.stderr).contains("code-map.md differs"));

    let out = pcmail(home.path(), &["map", "--repo", repo.path().join("nope").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
}
