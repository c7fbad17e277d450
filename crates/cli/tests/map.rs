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

/// `map --show FILE` prints one file in full, members included, and refuses
/// anything that is not a mapped file inside the repo: a usage error (2) for
/// a path outside it or a value that looks like an option, 7 for a missing
/// file, 9 for a symlink on the way; nothing outside the repo reaches stdout.
#[test]
fn show_prints_one_file_in_full_and_refuses_the_rest() {
    let home = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    let r = repo.to_str().unwrap();
    std::fs::write(
        repo.join("src/lib.rs"),
        "/// A thing.\npub struct Thing;\nimpl Thing {\n    /// Makes one.\n    pub fn make_thing() -> Thing { Thing }\n}\n",
    )
    .unwrap();
    let outside = tmp.path().join("secret.rs");
    std::fs::write(&outside, "pub fn secret_outside() {}\n").unwrap();

    let out = pcmail(home.path(), &["map", "--repo", r]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let map = std::fs::read_to_string(repo.join(".claude/code-map.md")).unwrap();
    assert!(map.contains("- `impl Thing` (1 member)\n") && !map.contains("make_thing"), "{map}");

    let out = pcmail(home.path(), &["map", "--repo", r, "--show", "src/lib.rs"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "### `src/lib.rs`\n\nRust\n\n- `pub struct Thing` — A thing.\n- `impl Thing`\n  - `pub fn make_thing() -> Thing` — Makes one.\n"
    );
    let out = pcmail(home.path(), &["--json", "map", "--repo", r, "--show", "src/lib.rs"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["file"], "src/lib.rs");
    assert!(v["text"].as_str().unwrap().contains("make_thing"));
    // From inside the repo, with no --repo: the repo containing the current folder.
    let out = Command::new(env!("CARGO_BIN_EXE_pcmail"))
        .args(["map", "--show", "src/lib.rs"])
        .env("PCMAIL_HOME", home.path())
        .current_dir(&repo)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    let fails = |args: &[&str], code: i32, says: &str| {
        let mut all = vec!["map", "--repo", r];
        all.extend_from_slice(args);
        let out = pcmail(home.path(), &all);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty() && !stderr.contains("secret_outside"), "{args:?}");
    };
    fails(&["--show", "--full"], 2, "--show");
    fails(&["--show", "--check", "src/lib.rs"], 2, "--show");
    fails(&["--show=-x.rs"], 2, "looks like an option");
    fails(&["--show", "../secret.rs"], 2, "not a file inside the repo");
    fails(&["--show", outside.to_str().unwrap()], 2, "not a file inside the repo");
    fails(&["--show", "src"], 2, "is a folder");
    fails(&["--show", "src/missing.rs"], 7, "no such file in the repo");
    // Longer than any file system allows a name to be: missing too, not an I/O error.
    let long = format!("src/{}.rs", "n".repeat(5_000));
    fails(&["--show", &long], 7, "no such file in the repo");
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&outside, repo.join("src/link.rs")).unwrap();
        std::os::unix::fs::symlink(tmp.path(), repo.join("up")).unwrap();
        fails(&["--show", "src/link.rs"], 9, "symlink");
        fails(&["--show", "up/secret.rs"], 9, "symlink");
    }
}
