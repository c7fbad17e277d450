//! The "no network" promise as a property of the build: nothing that can
//! open a socket is in pcmail-hook's dependency tree.

const FORBIDDEN: &[&str] =
    &["reqwest", "hyper", "tokio", "axum", "keyring", "notify-rust", "pcmail-server", "pcmail-client"];

#[test]
fn pcmail_hook_depends_on_no_network_crate() {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "pcmail-hook",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
            "--manifest-path",
            manifest,
        ])
        .output()
        .expect("cargo tree runs");
    assert!(out.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8(out.stdout).unwrap();
    let names: std::collections::BTreeSet<&str> = tree.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert!(names.contains("pcmail-local") && names.contains("rusqlite"), "the tree was read: {names:?}");
    let found: Vec<&&str> = FORBIDDEN.iter().filter(|f| names.contains(**f)).collect();
    assert!(found.is_empty(), "pcmail-hook links {found:?}; its tree: {names:?}");
}
