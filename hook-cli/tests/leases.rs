//! The lease guards as whole processes on a real store and real git repos:
//! `pcmail-hook` on Claude Code's PreToolUse JSON (Edit, Write, MultiEdit,
//! NotebookEdit; absolute paths inside and outside the repo, symlinks,
//! `..`), SessionEnd, and the git pre-commit hook (refuses, chains,
//! respects core.hooksPath).

use pcmail_store::leases::{self as sl, CachedLease, MyLease};
use pcmail_store::Store;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const NOW: i64 = 1_800_000_000_000;

fn hook_exe() -> &'static str {
    env!("CARGO_BIN_EXE_pcmail-hook")
}

/// The guard's command as `hooks install --git` writes it: the hook program, shell-quoted.
fn guard_command() -> String {
    pcmail_core::shell::single_quote(hook_exe())
}

fn git(dir: &Path, args: &[&str]) -> std::process::Output {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@x")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@x")
        .output()
        .unwrap();
    out
}

struct Fixture {
    _dir: tempfile::TempDir,
    home: PathBuf,
    repo: PathBuf,
    outside: PathBuf,
}

impl Fixture {
    /// This PC is pc-a; pc-b's session s2 holds `auth` (src/auth/**) exclusively
    /// in github.com/o/r, and a shared lease on docs/**.
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join("config.toml"), "label = \"pc-a\"\n").unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join("src/auth")).unwrap();
        std::fs::create_dir_all(repo.join("docs")).unwrap();
        assert!(git(&repo, &["init", "-q", "-b", "main"]).status.success());
        git(&repo, &["remote", "add", "origin", "git@github.com:o/r.git"]);
        std::fs::write(repo.join("src/auth/login.rs"), "fn a() {}\n").unwrap();
        std::fs::write(repo.join("src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::write(repo.join("docs/a.md"), "a\n").unwrap();
        git(&repo, &["add", "."]);
        assert!(git(&repo, &["commit", "-qm", "init", "--no-verify"]).status.success());
        let outside = dir.path().join("elsewhere");
        std::fs::create_dir_all(&outside).unwrap();
        let mut s = Store::open(&home.join("store.db")).unwrap();
        s.lease_cache_replace(
            &[lease("auth", 7, "exclusive", &["src/auth/**"]), lease("docs", 2, "shared", &["docs/**"])],
            5,
            NOW,
        )
        .unwrap();
        Fixture { _dir: dir, home, repo, outside }
    }

    fn store(&self) -> Store {
        Store::open(&self.home.join("store.db")).unwrap()
    }

    fn hook(&self, input: Value) -> Option<Value> {
        let mut child = Command::new(hook_exe())
            .env("PCMAIL_HOME", &self.home)
            .env("PCMAIL_CLAUDE_PID", "0") // no Claude Code process above (also when the suite runs inside one)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input.to_string().as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
        (!out.stdout.is_empty()).then(|| serde_json::from_slice(&out.stdout).expect("the hook prints JSON"))
    }

    /// Claude Code's PreToolUse input for a tool.
    fn pre_tool(&self, session: &str, tool: &str, tool_input: Value) -> Option<Value> {
        self.hook(json!({
            "session_id": session,
            "transcript_path": "/tmp/t.jsonl",
            "cwd": self.repo,
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": tool,
            "tool_input": tool_input,
        }))
    }
}

fn lease(resource: &str, fence: i64, mode: &str, files: &[&str]) -> CachedLease {
    CachedLease {
        resource: resource.into(),
        fence,
        repo: "github.com/o/r".into(),
        mode: mode.into(),
        holder_pc: "pc-b".into(),
        holder_session: "s2".into(),
        holder_name: Some("ani".into()),
        description: "refactoring the login flow".into(),
        files: files.iter().map(|s| s.to_string()).collect(),
        granted_at: NOW - 60_000,
        heartbeat_at: NOW - 1_000,
        stale: false,
        json: "{}".into(),
    }
}

fn denied(v: &Option<Value>) -> Option<String> {
    let o = &v.as_ref()?["hookSpecificOutput"];
    assert_eq!(o["hookEventName"], "PreToolUse");
    (o["permissionDecision"] == "deny").then(|| o["permissionDecisionReason"].as_str().unwrap().to_string())
}

#[test]
fn pre_tool_use_denies_edits_under_another_sessions_exclusive_lease_only() {
    let f = Fixture::new();
    let r = &f.repo;
    let login = r.join("src/auth/login.rs");
    // Edit inside the lease: denied, naming the holder and how to reach them.
    let why = denied(&f.pre_tool("s1", "Edit", json!({"file_path": login, "old_string": "a", "new_string": "b"})))
        .expect("denied");
    assert!(why.contains("src/auth/login.rs") && why.contains("`auth`") && why.contains("pc-b/ani"), "{why}");
    assert!(why.contains("pcmail send pc-b"), "{why}");
    // Write of a new file in a new folder under the lease; `..` in the path.
    assert!(denied(&f.pre_tool("s1", "Write", json!({"file_path": r.join("src/auth/new/deep.rs"), "content": "x"})))
        .is_some());
    let dotdot = r.join("src/other/../auth/login.rs");
    assert!(
        denied(&f.pre_tool("s1", "Edit", json!({"file_path": dotdot, "old_string": "a", "new_string": "b"}))).is_some()
    );
    // MultiEdit and NotebookEdit (notebook_path).
    let edits = json!({"file_path": login, "edits": [{"old_string": "a", "new_string": "b"}]});
    assert!(denied(&f.pre_tool("s1", "MultiEdit", edits)).is_some());
    let nb = json!({"notebook_path": r.join("src/auth/n.ipynb"), "new_source": "x", "cell_id": "c1"});
    assert!(denied(&f.pre_tool("s1", "NotebookEdit", nb)).is_some());
    // A symlink from outside the repo into the leased folder: the target counts.
    std::os::unix::fs::symlink(r.join("src/auth"), f.outside.join("link")).unwrap();
    let via_link = f.outside.join("link/login.rs");
    assert!(denied(&f.pre_tool("s1", "Edit", json!({"file_path": via_link, "old_string": "a", "new_string": "b"})))
        .is_some());

    // No decision at all (never "allow"): outside the lease, under a shared
    // lease, outside any repo, another tool (the holder itself: the next test).
    for (session, tool, input) in [
        ("s1", "Edit", json!({"file_path": r.join("src/main.rs"), "old_string": "a", "new_string": "b"})),
        ("s1", "Write", json!({"file_path": r.join("src/authz.rs"), "content": "x"})),
        ("s1", "Edit", json!({"file_path": r.join("docs/a.md"), "old_string": "a", "new_string": "b"})),
        ("s1", "Write", json!({"file_path": f.outside.join("x.rs"), "content": "x"})),
        ("s1", "Read", json!({"file_path": login})),
    ] {
        assert_eq!(f.pre_tool(session, tool, input.clone()), None, "{session} {tool} {input}");
    }
    // Another repo with the same relative path is not under the lease.
    let other = f.outside.join("other");
    std::fs::create_dir_all(other.join("src/auth")).unwrap();
    git(&other, &["init", "-q"]);
    git(&other, &["remote", "add", "origin", "https://github.com/o/other"]);
    assert_eq!(f.pre_tool("s1", "Edit", json!({"file_path": other.join("src/auth/login.rs")})), None);
}

#[test]
fn a_session_edits_under_its_own_lease_also_after_clear() {
    let f = Fixture::new();
    // The lease is pc-a's own, claimed by session s-old; the process's new id is s-new.
    let mut s = f.store();
    let mut cache = lease("auth", 7, "exclusive", &["src/auth/**"]);
    cache.holder_pc = "pc-a".into();
    cache.holder_session = "s-old".into();
    s.lease_cache_replace(&[cache], 6, NOW).unwrap();
    s.lease_mine_put(&MyLease {
        claim_id: "c1".into(),
        resource: "auth".into(),
        repo: "github.com/o/r".into(),
        description: "d".into(),
        files: vec!["src/auth/**".into()],
        mode: "exclusive".into(),
        session: "s-old".into(),
        pid: Some(4242),
        pid_start: Some(1),
        ttl_expires_at: None,
        fence: Some(7),
        state: sl::MINE_HELD.into(),
        claimed_at: NOW,
        heartbeat_at: None,
        release_reason: None,
        release_queued_at: None,
    })
    .unwrap();
    s.write(|tx| {
        sl::session_record(
            tx,
            &sl::SessionRow {
                session: "s-new".into(),
                pid: Some(4242),
                pid_start: Some(1),
                started_at: NOW,
                ..Default::default()
            },
        )
    })
    .unwrap();
    let login = f.repo.join("src/auth/login.rs");
    assert_eq!(f.pre_tool("s-new", "Edit", json!({"file_path": login})), None, "its own lease");
    assert!(
        denied(&f.pre_tool("s-other", "Edit", json!({"file_path": login}))).is_some(),
        "another session on this PC"
    );
}

#[test]
fn an_old_lease_view_adds_one_line_of_context() {
    let f = Fixture::new();
    let mut s = f.store();
    s.meta_set_i64(sl::LEASE_CACHE_AT, 1).unwrap(); // long ago
    let v = f.pre_tool("s1", "Edit", json!({"file_path": f.repo.join("src/main.rs")})).expect("a context line");
    let o = &v["hookSpecificOutput"];
    assert_eq!(o.get("permissionDecision"), None);
    assert!(o["additionalContext"].as_str().unwrap().contains("lease view is"), "{v}");
}

/// Gemini CLI's `BeforeTool` on its file tools (`write_file`, `replace`),
/// with the payload its hooks reference documents: the same guard as Claude
/// Code's Edit/Write, answered in Gemini's shape (top-level `decision` and
/// `reason`; `hookSpecificOutput.permissionDecision` means nothing there).
#[test]
fn gemini_before_tool_on_write_file_and_replace_goes_through_the_same_guard() {
    let f = Fixture::new();
    let gemini = |tool: &str, tool_input: Value| {
        f.hook(json!({
            "session_id": "gemini-7",
            "transcript_path": "/home/kim/.gemini/tmp/abc/chats/session.json",
            "cwd": f.repo,
            "hook_event_name": "BeforeTool",
            "timestamp": "2026-11-30T09:00:00.000Z",
            "tool_name": tool,
            "tool_input": tool_input,
        }))
    };
    let login = f.repo.join("src/auth/login.rs");
    for (tool, input) in [
        ("replace", json!({"file_path": login, "old_string": "fn a() {}", "new_string": "fn b() {}"})),
        ("write_file", json!({"file_path": f.repo.join("src/auth/new.rs"), "content": "x"})),
    ] {
        let v = gemini(tool, input).unwrap_or_else(|| panic!("{tool}: denied"));
        assert_eq!(v["decision"], "deny", "{v}");
        let why = v["reason"].as_str().unwrap();
        assert!(why.contains("`auth`") && why.contains("pc-b/ani") && why.contains("pcmail send pc-b"), "{why}");
        assert_eq!(v.get("hookSpecificOutput"), None, "{v}");
    }
    // Outside the lease, under the shared one, a tool that does not write: no decision.
    for (tool, input) in [
        ("replace", json!({"file_path": f.repo.join("src/main.rs"), "old_string": "a", "new_string": "b"})),
        ("write_file", json!({"file_path": f.repo.join("docs/a.md"), "content": "x"})),
        ("read_file", json!({"path": login})),
        ("run_shell_command", json!({"command": "echo > src/auth/login.rs"})),
    ] {
        assert_eq!(gemini(tool, input.clone()), None, "{tool} {input}");
    }
    // An old lease view: a note for the user (Gemini's BeforeTool has no context field).
    f.store().meta_set_i64(sl::LEASE_CACHE_AT, 1).unwrap();
    let v = gemini("replace", json!({"file_path": f.repo.join("src/main.rs")})).expect("a note");
    assert!(v["systemMessage"].as_str().unwrap().contains("lease view is"), "{v}");
    assert_eq!(v.get("decision"), None);
}
#[test]
fn session_end_queues_the_release_unless_the_process_goes_on() {
    let f = Fixture::new();
    let mut s = f.store();
    for (claim, session) in [("c1", "s-end"), ("c2", "s-clear")] {
        s.lease_mine_put(&MyLease {
            claim_id: claim.into(),
            resource: format!("r-{claim}"),
            repo: String::new(),
            description: "d".into(),
            files: vec![],
            mode: "exclusive".into(),
            session: session.into(),
            pid: None,
            pid_start: None,
            ttl_expires_at: None,
            fence: Some(1),
            state: sl::MINE_HELD.into(),
            claimed_at: NOW,
            heartbeat_at: None,
            release_reason: None,
            release_queued_at: None,
        })
        .unwrap();
    }
    let end = |session: &str, reason: &str| {
        f.hook(json!({"session_id": session, "transcript_path": "/t", "cwd": f.repo, "hook_event_name": "SessionEnd", "reason": reason}))
    };
    assert_eq!(end("s-clear", "clear"), None);
    assert_eq!(end("s-end", "prompt_input_exit"), None);
    let due = f.store().lease_releases_due(i64::MAX).unwrap();
    assert_eq!(due.iter().map(|l| l.claim_id.as_str()).collect::<Vec<_>>(), ["c1"]);
    assert_eq!(due[0].release_reason.as_deref(), Some("session ended (prompt_input_exit)"));
}

#[test]
fn session_start_lists_leases_others_hold_in_this_repo() {
    let f = Fixture::new();
    let v = f
        .hook(json!({"session_id": "s1", "transcript_path": "/t", "cwd": f.repo, "hook_event_name": "SessionStart", "source": "startup"}))
        .expect("the leases are shown");
    let text = v["hookSpecificOutput"]["additionalContext"].as_str().unwrap();
    assert!(text.contains("pcmail: lease auth [src/auth/**] held by pc-b/ani (exclusive"), "{text}");
    assert!(text.contains("pcmail: lease docs [docs/**]"), "{text}");
    // The session is in the registry with its repo and branch.
    let row = sl::session_get(f.store().conn(), "s1").unwrap().unwrap();
    assert_eq!(row.repo.as_deref(), Some("github.com/o/r"));
    assert_eq!(row.branch.as_deref(), Some("main"));
    // Outside the repo: nothing.
    let none =
        f.hook(json!({"session_id": "s3", "cwd": f.outside, "hook_event_name": "SessionStart", "source": "startup"}));
    assert_eq!(none, None);
}

fn commit(dir: &Path, file: &str) -> std::process::Output {
    std::fs::write(dir.join(file), format!("changed {}\n", rand_suffix())).unwrap();
    git(dir, &["add", file]);
    Command::new("git")
        .args(["commit", "-qm", "c"])
        .current_dir(dir)
        .env("PCMAIL_HOME", dir.join("../home"))
        .env("PCMAIL_SESSION", "s1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@x")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@x")
        .output()
        .unwrap()
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

#[test]
fn pre_commit_refuses_a_leased_file_and_chains_the_earlier_hook() {
    let f = Fixture::new();
    // An existing pre-commit hook that leaves a trace.
    let hooks = f.repo.join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let trace = f.repo.join("../chained-ran");
    std::fs::write(hooks.join("pre-commit"), format!("#!/bin/sh\necho ran >> '{}'\n", trace.display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(hooks.join("pre-commit"), std::fs::Permissions::from_mode(0o755)).unwrap();

    let done = pcmail_local::githook::install(&f.repo, &guard_command()).unwrap();
    assert!(done.changed && done.chained.is_some());
    assert!(!pcmail_local::githook::install(&f.repo, &guard_command()).unwrap().changed, "idempotent");

    let refused = commit(&f.repo, "src/auth/login.rs");
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("commit refused") && err.contains("pc-b/ani") && err.contains("--no-verify"), "{err}");
    assert!(!trace.exists(), "the chained hook does not run after a refusal");
    git(&f.repo, &["reset", "-q"]);

    let ok = commit(&f.repo, "src/main.rs");
    assert!(ok.status.success(), "{ok:?}");
    assert_eq!(std::fs::read_to_string(&trace).unwrap(), "ran\n", "the earlier hook still runs");

    // Uninstall puts the earlier hook back.
    assert!(pcmail_local::githook::uninstall(&f.repo).unwrap());
    assert!(std::fs::read_to_string(hooks.join("pre-commit")).unwrap().contains("echo ran"));
}

#[test]
fn pre_commit_respects_core_hooks_path() {
    let f = Fixture::new();
    git(&f.repo, &["config", "core.hooksPath", ".githooks"]);
    let done = pcmail_local::githook::install(&f.repo, &guard_command()).unwrap();
    assert_eq!(done.hook, f.repo.canonicalize().unwrap().join(".githooks/pre-commit"));
    assert!(!commit(&f.repo, "src/auth/login.rs").status.success());
}

/// The guard file the poller writes beside the store (the same function):
/// with it the guard decides without the store, which is then never opened
/// for an edit of another PC's lease, nor made.
fn guard_file(f: &Fixture, leases: &[CachedLease], at: i64) {
    pcmail_local::leases::write_guard_file(&f.home, leases, at, 0, &[]).unwrap();
}

#[test]
fn the_guard_file_denies_and_stays_silent_without_the_store() {
    let f = Fixture::new();
    guard_file(&f, &[lease("auth", 7, "exclusive", &["src/auth/**"]), lease("docs", 2, "shared", &["docs/**"])], NOW);
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(f.home.join(format!("store.db{ext}")));
    }
    let r = &f.repo;
    let login = r.join("src/auth/login.rs");
    let why = denied(&f.pre_tool("s1", "Edit", json!({"file_path": login, "old_string": "a", "new_string": "b"})))
        .expect("denied from the file");
    assert!(why.contains("src/auth/login.rs") && why.contains("`auth`") && why.contains("pc-b/ani"), "{why}");
    assert!(why.contains("pcmail send pc-b") && why.contains("refactoring the login flow"), "{why}");
    assert!(denied(&f.pre_tool("s1", "Write", json!({"file_path": r.join("src/auth/new/deep.rs"), "content": "x"})))
        .is_some());
    let dotdot = r.join("src/other/../auth/login.rs");
    assert!(denied(&f.pre_tool("s1", "Edit", json!({"file_path": dotdot}))).is_some());
    let edits = json!({"file_path": login, "edits": [{"old_string": "a", "new_string": "b"}]});
    assert!(denied(&f.pre_tool("s1", "MultiEdit", edits)).is_some());
    let nb = json!({"notebook_path": r.join("src/auth/n.ipynb"), "new_source": "x", "cell_id": "c1"});
    assert!(denied(&f.pre_tool("s1", "NotebookEdit", nb)).is_some());
    std::os::unix::fs::symlink(r.join("src/auth"), f.outside.join("link")).unwrap();
    assert!(denied(&f.pre_tool("s1", "Edit", json!({"file_path": f.outside.join("link/login.rs")}))).is_some());
    for (tool, input) in [
        ("Edit", json!({"file_path": r.join("src/main.rs")})),
        ("Write", json!({"file_path": r.join("src/authz.rs"), "content": "x"})),
        ("Edit", json!({"file_path": r.join("docs/a.md")})),
        ("Write", json!({"file_path": f.outside.join("x.rs"), "content": "x"})),
        ("Read", json!({"file_path": login})),
    ] {
        assert_eq!(f.pre_tool("s1", tool, input.clone()), None, "{tool} {input}");
    }
    // Gemini CLI's BeforeTool goes through the same file.
    let v = f
        .hook(json!({"session_id": "g", "cwd": r, "hook_event_name": "BeforeTool", "tool_name": "replace",
            "tool_input": {"file_path": login}}))
        .expect("denied");
    assert_eq!(v["decision"], "deny", "{v}");
    assert!(!f.home.join("store.db").exists(), "the guard neither opened nor made a store");

    // An old lease view, from the file's time.
    guard_file(&f, &[], 1);
    let v = f.pre_tool("s1", "Edit", json!({"file_path": r.join("src/main.rs")})).expect("a context line");
    assert!(v["hookSpecificOutput"]["additionalContext"].as_str().unwrap().contains("lease view is"), "{v}");
}

#[test]
fn the_guard_file_decides_over_the_store_and_a_bad_one_falls_back_to_it() {
    let f = Fixture::new();
    let login = f.repo.join("src/auth/login.rs");
    // The poller's file says the lease ended (the store's copy is older): no decision.
    guard_file(&f, &[], NOW);
    assert_eq!(f.pre_tool("s1", "Edit", json!({"file_path": login})), None);
    // A file the guard can't read, or not in its format: the store decides (it holds `auth`).
    for bad in ["", "garbage\n", "pcmail guard-leases 1\n{\"at\":\n"] {
        std::fs::write(f.home.join("guard-leases"), bad).unwrap();
        assert!(denied(&f.pre_tool("s1", "Edit", json!({"file_path": login}))).is_some(), "{bad:?}");
    }
    std::fs::remove_file(f.home.join("guard-leases")).unwrap();
    std::fs::create_dir(f.home.join("guard-leases")).unwrap(); // unreadable as a file
    assert!(denied(&f.pre_tool("s1", "Edit", json!({"file_path": login}))).is_some());
    std::fs::remove_dir(f.home.join("guard-leases")).unwrap();
    // A damaged line (no tabs): the store decides, never a denial from the file.
    guard_file(&f, &[lease("auth", 7, "exclusive", &["src/auth/**"])], NOW);
    let text = std::fs::read_to_string(f.home.join("guard-leases")).unwrap();
    std::fs::write(f.home.join("guard-leases"), text.replace('\t', " ")).unwrap();
    f.store().lease_cache_replace(&[], 6, NOW).unwrap();
    assert_eq!(f.pre_tool("s1", "Edit", json!({"file_path": login})), None);
}

#[test]
fn the_guard_file_lets_a_session_edit_under_its_own_lease_also_after_clear() {
    let f = Fixture::new();
    let mut mine = lease("auth", 7, "exclusive", &["src/auth/**"]);
    mine.holder_pc = "pc-a".into();
    mine.holder_session = "s-old".into();
    guard_file(&f, &[mine], NOW);
    let mut s = f.store();
    s.lease_cache_replace(&[], 6, NOW).unwrap(); // the file, not the store's cache, holds the lease
    s.lease_mine_put(&MyLease {
        claim_id: "c1".into(),
        resource: "auth".into(),
        repo: "github.com/o/r".into(),
        description: "d".into(),
        files: vec!["src/auth/**".into()],
        mode: "exclusive".into(),
        session: "s-old".into(),
        pid: Some(4242),
        pid_start: Some(1),
        ttl_expires_at: None,
        fence: Some(7),
        state: sl::MINE_HELD.into(),
        claimed_at: NOW,
        heartbeat_at: None,
        release_reason: None,
        release_queued_at: None,
    })
    .unwrap();
    s.write(|tx| {
        sl::session_record(
            tx,
            &sl::SessionRow {
                session: "s-new".into(),
                pid: Some(4242),
                pid_start: Some(1),
                started_at: NOW,
                ..Default::default()
            },
        )
    })
    .unwrap();
    let login = f.repo.join("src/auth/login.rs");
    assert_eq!(f.pre_tool("s-old", "Edit", json!({"file_path": login})), None, "the holder");
    assert_eq!(f.pre_tool("s-new", "Edit", json!({"file_path": login})), None, "its own lease after /clear");
    assert!(
        denied(&f.pre_tool("s-other", "Edit", json!({"file_path": login}))).is_some(),
        "another session on this PC"
    );
}

#[test]
fn codex_apply_patch_is_guarded_on_every_path_its_patch_writes() {
    let f = Fixture::new();
    let codex = |patch: &str| {
        f.hook(json!({
            "session_id": "01a2339c-bf2f-7473-aa3f-13e4b12e4f8e",
            "turn_id": "01a2339c-bf4c-7d81-b841-592a8f8c7782",
            "transcript_path": "/home/kim/.codex/sessions/rollout.jsonl",
            "cwd": f.repo,
            "hook_event_name": "PreToolUse",
            "model": "gpt-5.5",
            "permission_mode": "bypassPermissions",
            "tool_name": "apply_patch",
            "tool_input": {"command": patch},
            "tool_use_id": "call_1",
        }))
    };
    // Each header kind, alone in a patch or after a free file: denied with the holder.
    for patch in [
        "*** Begin Patch\n*** Update File: src/auth/login.rs\n@@\n-fn a() {}\n+fn b() {}\n*** End Patch\n",
        "*** Begin Patch\n*** Add File: src/main2.rs\n+x\n*** Add File: src/auth/new.rs\n+y\n*** End Patch\n",
        "*** Begin Patch\n*** Delete File: src/auth/login.rs\n*** End Patch\n",
        "*** Begin Patch\n*** Update File: src/main.rs\n*** Move to: src/auth/main.rs\n@@\n-a\n+b\n*** End Patch\n",
    ] {
        let why = denied(&codex(patch)).unwrap_or_else(|| panic!("denied: {patch}"));
        assert!(why.contains("`auth`") && why.contains("pc-b/ani") && why.contains("pcmail send pc-b"), "{why}");
    }
    // Only free files (and the shared lease): no decision, so Codex's own approval stays in charge.
    assert_eq!(
        codex(
            "*** Begin Patch\n*** Update File: src/main.rs\n@@\n-a\n+b\n*** Add File: docs/b.md\n+b\n*** End Patch\n"
        ),
        None
    );
    // An absolute path in the patch is the same file.
    let abs =
        format!("*** Begin Patch\n*** Update File: {}\n*** End Patch\n", f.repo.join("src/auth/login.rs").display());
    assert!(denied(&codex(&abs)).is_some());
}

/// Ways around the guard that must all map to the leased repo and path:
/// a dangling symlink to a new file under the lease, an origin spelled with
/// other case, a remote not called `origin`, a `.git` made inside the
/// leased folder.
#[test]
fn a_dangling_symlink_to_a_new_leased_file_is_denied() {
    let f = Fixture::new();
    std::os::unix::fs::symlink("src/auth/new.rs", f.repo.join("notes.rs")).unwrap();
    let why = denied(&f.pre_tool("s1", "Write", json!({"file_path": f.repo.join("notes.rs"), "content": "x"})))
        .expect("writing through the link creates src/auth/new.rs");
    assert!(why.contains("src/auth/new.rs"), "{why}");
    // Absolute, from outside the repo, through a symlinked folder on the way.
    std::os::unix::fs::symlink(f.repo.join("src/auth/other.rs"), f.outside.join("dangling")).unwrap();
    assert!(
        denied(&f.pre_tool("s1", "Write", json!({"file_path": f.outside.join("dangling"), "content": "x"}))).is_some()
    );
}

#[test]
fn an_origin_spelled_with_other_case_or_another_remote_name_is_the_same_repo() {
    let f = Fixture::new();
    let login = json!({"file_path": f.repo.join("src/auth/login.rs"), "old_string": "a", "new_string": "b"});
    git(&f.repo, &["remote", "set-url", "origin", "https://GitHub.com/O/R.git"]);
    assert!(denied(&f.pre_tool("s1", "Edit", login.clone())).is_some(), "host and path case on github.com");
    git(&f.repo, &["remote", "rename", "origin", "upstream"]);
    assert!(denied(&f.pre_tool("s1", "Edit", login.clone())).is_some(), "the only remote, not called origin");
    git(&f.repo, &["remote", "add", "zz-fork", "https://github.com/someone/fork"]);
    assert!(denied(&f.pre_tool("s1", "Edit", login)).is_some(), "the first remote by name");
}

#[test]
fn a_nested_git_inside_a_leased_folder_does_not_hide_it() {
    let f = Fixture::new();
    let nested = f.repo.join("src/auth");
    assert!(git(&nested, &["init", "-q", "-b", "main"]).status.success());
    let why = denied(&f.pre_tool("s1", "Edit", json!({"file_path": nested.join("login.rs")}))).expect("denied");
    assert!(why.contains("src/auth/login.rs"), "{why}");
    // The pre-commit guard of the nested repo checks the outer repo's leases too.
    pcmail_local::githook::install(&nested, &guard_command()).unwrap();
    std::fs::write(nested.join("login.rs"), "changed\n").unwrap();
    git(&nested, &["add", "login.rs"]);
    let out = Command::new("git")
        .args(["commit", "-qm", "c"])
        .current_dir(&nested)
        .env("PCMAIL_HOME", &f.home)
        .env("PCMAIL_SESSION", "s1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@x")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@x")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("src/auth/login.rs"), "{err}");
}

/// A hook payload naming a path of 250,000 names is answered at once (a
/// refusal: it cannot be checked within the bounds), far inside Claude
/// Code's 60 s hook timeout.
#[test]
fn an_absurdly_deep_path_is_refused_at_once() {
    let f = Fixture::new();
    let deep = format!("{}/src/auth/{}x.rs", f.repo.display(), "a/".repeat(250_000));
    let t = std::time::Instant::now();
    let why = denied(&f.pre_tool("s1", "Write", json!({"file_path": deep, "content": "x"}))).expect("refused");
    assert!(t.elapsed() < std::time::Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(why.contains("cannot be checked"), "{why}");
    let dots = format!("{}/{}src/auth/x.rs", f.repo.display(), "./".repeat(250_000));
    assert!(denied(&f.pre_tool("s1", "Write", json!({"file_path": dots, "content": "x"}))).is_some());
}

/// A hard link is the same file under another name: an edit through a link
/// inside the repo (another folder) or outside it (a checkout the poller
/// knows from this PC's sessions) is checked as the leased name, with the
/// guard file and without it; a file with one link is not searched for.
#[test]
fn a_hard_link_to_a_leased_file_is_denied_inside_and_outside_the_repo() {
    let f = Fixture::new();
    let login = f.repo.join("src/auth/login.rs");
    let inside = f.repo.join("src/login-copy.rs");
    let outside = f.outside.join("login.rs");
    std::fs::hard_link(&login, &inside).unwrap();
    std::fs::hard_link(&login, &outside).unwrap();
    let edit = |p: &Path| json!({"file_path": p, "old_string": "a", "new_string": "b"});

    // The poller's view: a session of this PC works in the repo, so its
    // checkout is where the guard looks for other names.
    let mut s = f.store();
    let row = pcmail_store::leases::SessionRow {
        session: "s9".into(),
        cwd: Some(f.repo.to_string_lossy().into_owned()),
        repo: Some("github.com/o/r".into()),
        started_at: NOW,
        ..Default::default()
    };
    s.write(|tx| pcmail_store::leases::session_record(tx, &row)).unwrap();
    let leases = [lease("auth", 7, "exclusive", &["src/auth/**"])];
    let checkouts = pcmail_local::leases::lease_checkouts(s.conn(), &leases);
    assert_eq!(checkouts.len(), 1, "{checkouts:?}");
    pcmail_local::leases::write_guard_file(&f.home, &leases, NOW, 0, &checkouts).unwrap();

    let why = denied(&f.pre_tool("s1", "Edit", edit(&inside))).expect("a link inside the repo is the leased file");
    assert!(why.contains("src/auth/login.rs"), "{why}");
    let why = denied(&f.pre_tool("s1", "Edit", edit(&outside))).expect("a link outside the repo too");
    assert!(why.contains("src/auth/login.rs"), "{why}");

    // Once the link count is one again, the other name is a free file.
    std::fs::remove_file(&outside).unwrap();
    std::fs::remove_file(&login).unwrap();
    assert_eq!(denied(&f.pre_tool("s1", "Edit", edit(&inside))), None);
}

/// `core.hooksPath` naming a folder of the repo (`.husky`) that is a
/// committed symlink: the pre-commit hook is refused, never written where
/// the link points; a symlinked pre-commit hook is chained as the link.
#[test]
fn a_hooks_path_through_a_committed_symlink_is_refused() {
    let f = Fixture::new();
    std::os::unix::fs::symlink(&f.outside, f.repo.join(".husky")).unwrap();
    git(&f.repo, &["config", "core.hooksPath", ".husky"]);
    let e = pcmail_local::githook::install(&f.repo, &guard_command()).unwrap_err();
    assert!(e.to_string().contains("symlink"), "{e}");
    assert_eq!(std::fs::read_dir(&f.outside).unwrap().count(), 0, "nothing written outside the repo");

    std::fs::remove_file(f.repo.join(".husky")).unwrap();
    std::fs::create_dir(f.repo.join(".husky")).unwrap();
    let theirs = f.outside.join("their-hook");
    std::fs::write(&theirs, "#!/bin/sh\nexit 0\n").unwrap();
    std::os::unix::fs::symlink(&theirs, f.repo.join(".husky/pre-commit")).unwrap();
    let done = pcmail_local::githook::install(&f.repo, &guard_command()).unwrap();
    assert!(done.changed && done.chained.is_some(), "{done:?}");
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "#!/bin/sh\nexit 0\n", "its target is not written");
    assert!(std::fs::symlink_metadata(f.repo.join(".husky/pcmail-chained-check")).is_err());
    assert!(std::fs::symlink_metadata(f.repo.join(".husky").join(pcmail_local::githook::CHAINED))
        .unwrap()
        .file_type()
        .is_symlink());
}
