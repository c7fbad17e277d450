//! `pcmail handoff …` and `pcmail memory …` as real processes in a real git
//! repo: flags and stdin, names, exit codes, rollup stamping,
//! memory search, `--announce` through a real `pcmail serve`, and the same
//! result from the MCP tools as from the CLI's `--json`.

mod common;

use common::*;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn git_repo() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    assert!(Command::new("git").args(["init", "-q"]).arg(d.path()).status().unwrap().success());
    std::fs::write(
        d.path().join(".git/config"),
        "[core]\n\trepositoryformatversion = 0\n[remote \"origin\"]\n\turl = git@github.com:Owner/Proj.git\n",
    )
    .unwrap();
    d
}

/// Runs in `repo` with `stdin`; returns (exit code, stdout, stderr).
fn run_in(pc: &Pc, repo: &Path, session: &str, args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut c = pc.cmd(args);
    c.current_dir(repo)
        .env("PCMAIL_SESSION", session)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.code().unwrap(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

fn ok_json(pc: &Pc, repo: &Path, session: &str, args: &[&str], stdin: &str) -> Value {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    let (code, out, err) = run_in(pc, repo, session, &a, stdin);
    assert_eq!(code, 0, "pcmail {args:?}: {err}");
    serde_json::from_str(&out).unwrap()
}

fn handoff_files(repo: &Path) -> Vec<String> {
    match std::fs::read_dir(repo.join(".claude/handoffs")) {
        Ok(d) => d
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".md") && n != "INDEX.md")
            .collect(),
        Err(_) => vec![],
    }
}

/// A caller that retries a failed command must not make a second handoff:
/// an address that cannot be resolved fails before anything is written
/// (exit 4), and a notice the server refuses after the write is a warning
/// (exit 0) with the command that sends the notice alone.
#[test]
fn an_announce_that_fails_never_leaves_a_retry_to_write_a_second_handoff() {
    let server = Server::start(Kind::Rust);
    let (a, _b) = pair(&server);
    let repo = git_repo();
    let new = |to: &str| {
        run_in(
            &a,
            repo.path(),
            "5e55a0aa-1",
            &[
                "handoff",
                "new",
                "--slug",
                "fix",
                "--goal",
                "Fix it",
                "--state",
                "working",
                "--next",
                "n",
                "--announce",
                to,
            ],
            "",
        )
    };

    // Not an address at all: refused before the write.
    let (code, _, err) = new("Not A Label!");
    assert_eq!(code, 4, "{err}");
    assert!(handoff_files(repo.path()).is_empty(), "a refused announce left {:?}", handoff_files(repo.path()));

    // Spelled as a label, so only the server can say it is nobody: written,
    // the warning names the refusal and how to send the notice again.
    let (code, out, err) = new("pc-nobody");
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(handoff_files(repo.path()).len(), 1);
    assert!(out.contains("pcmail: wrote "), "{out}");
    assert!(err.contains("warning: written, but the announce was not sent (unknown_address)"), "{err}");
    let name = handoff_files(repo.path())[0].trim_end_matches(".md").to_string();
    assert!(
        err.contains(&format!("pcmail send pc-nobody --subject handoff --auto --body 'handoff {name}: Fix it'")),
        "{err}"
    );

    // The same in --json: the result, with announce_failed, and exit 0.
    let (code, out, err) = run_in(
        &a,
        repo.path(),
        "5e55a0aa-2",
        &[
            "--json",
            "handoff",
            "new",
            "--slug",
            "fix2",
            "--goal",
            "g",
            "--state",
            "working",
            "--next",
            "n",
            "--announce",
            "pc-nobody",
        ],
        "",
    );
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["announce_failed"]["code"], "unknown_address", "{v}");
    assert!(v["announced"].is_null() && v["name"].as_str().is_some(), "{v}");
    assert_eq!(handoff_files(repo.path()).len(), 2);
}

#[test]
fn handoffs_and_memory_through_the_cli_and_the_same_through_mcp() {
    let server = Server::start(Kind::Rust);
    let (a, b) = pair(&server);
    let repo = git_repo();
    let sub = repo.path().join("src/deep");
    std::fs::create_dir_all(&sub).unwrap();

    // From flags, found from a subdirectory, announced to pc-b.
    let v = ok_json(
        &a,
        &sub,
        "373d1618-aaaa",
        &[
            "handoff",
            "new",
            "--slug",
            "auth-fix",
            "--goal",
            "Fix the race",
            "--done",
            "src/auth.rs",
            "--failed",
            "a global lock deadlocks",
            "--state",
            "working",
            "--next",
            "add the test",
            "--announce",
            "pc-b",
        ],
        "",
    );
    let name = v["name"].as_str().unwrap().to_string();
    assert!(name.ends_with("_373d1618_auth-fix"), "{name}");
    assert_eq!(v["session"], json!({"id": "373d1618-aaaa", "source": "env"}));
    assert_eq!(v["gitattributes_changed"], true);
    assert!(repo.path().join(format!(".claude/handoffs/{name}.md")).is_file());
    b.ok(&["sync"]);
    let inbox = b.json(&["inbox"]);
    assert!(
        inbox
            .as_array()
            .or(inbox["mails"].as_array())
            .unwrap()
            .iter()
            .any(|m| m.to_string().contains(&format!("handoff {name}: Fix the race"))),
        "{inbox}"
    );

    // From Markdown on stdin (a session's Bash tool has no terminal).
    let md = "## Goal\nShip the tray\n\n## Done\n- ui/app.js\n\n## What didn't work\nwebkit on CI\n\n## State\nblocked: no display\n\n## Next step\nxvfb\n";
    let v = ok_json(&a, repo.path(), "b858f500", &["handoff", "new", "--slug", "tray"], md);
    let tray = v["name"].as_str().unwrap().to_string();
    let text = std::fs::read_to_string(repo.path().join(format!(".claude/handoffs/{tray}.md"))).unwrap();
    assert!(text.contains("## State\nblocked: no display") && text.contains("state: blocked"), "{text}");

    // Bad input: exit 2 with what is wrong; unknown names exit 7; outside a repo exit 2.
    let (code, _, err) = run_in(
        &a,
        repo.path(),
        "s",
        &["handoff", "new", "--slug", "Bad_Slug", "--goal", "g", "--state", "working", "--next", "n"],
        "",
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("slug \"Bad_Slug\""), "{err}");
    let (code, _, err) = run_in(&a, repo.path(), "s", &["handoff", "new", "--slug", "empty"], "");
    assert_eq!(code, 2);
    assert!(err.contains("goal (--goal)") && err.contains("next step (--next)"), "{err}");
    let (code, _, err) = run_in(&a, repo.path(), "s", &["handoff", "show", "no-such"], "");
    assert_eq!(code, 7, "{err}");
    let outside = tempfile::tempdir().unwrap();
    let (code, _, err) = run_in(&a, outside.path(), "s", &["handoff", "list"], "");
    assert_eq!(code, 2);
    assert!(err.contains("is not inside a git repository"), "{err}");

    // Pickup and close are INDEX lines by this PC and session.
    let (code, shown, err) = run_in(&a, repo.path(), "c0ffee00", &["handoff", "pickup", "auth-fix"], "");
    assert_eq!(code, 0, "{err}");
    assert!(shown.contains("## Next step\nadd the test"), "{shown}");
    let index = std::fs::read_to_string(repo.path().join(".claude/handoffs/INDEX.md")).unwrap();
    assert!(index.contains(&format!("PICKED_UP {name} by pc-a/c0ffee00")), "{index}");
    ok_json(&a, repo.path(), "c0ffee00", &["handoff", "close", "tray", "--note", "moved to the tray work"], "");

    // A rollup through now covers both; each gets its stamp.
    let r = ok_json(
        &a,
        repo.path(),
        "d00d0000",
        &["handoff", "rollup", "--through", "now", "--slug", "week"],
        "Two sessions: race fixed, tray blocked.",
    );
    assert_eq!(r["covers"].as_array().unwrap().len(), 2);
    let rollup = r["name"].as_str().unwrap();
    assert!(rollup.contains("_rollup_week"));
    assert!(std::fs::read_to_string(repo.path().join(format!(".claude/handoffs/{name}.md")))
        .unwrap()
        .contains(&format!("rolled_up_into: {rollup}")));
    let (code, _, _) =
        run_in(&a, repo.path(), "x", &["handoff", "rollup", "--through", "now", "--slug", "again"], "nothing");
    assert_eq!(code, 7, "nothing left to fold");

    // Memory: add, show, search (through the FTS index in the PC store).
    ok_json(
        &a,
        &sub,
        "s",
        &[
            "memory",
            "add",
            "gotcha",
            "--topic",
            "auth/session",
            "Tokens outlive the proxy cache",
            "--why",
            "the proxy caches 10 min",
        ],
        "",
    );
    ok_json(&a, &sub, "s", &["memory", "add", "decision", "--topic", "db", "WAL everywhere"], "");
    let (code, _, _) = run_in(&a, &sub, "s", &["memory", "add", "gotcha", "--topic", "../x", "t"], "");
    assert_eq!(code, 2);
    let shown = ok_json(&a, &sub, "s", &["memory", "show", "auth"], "");
    assert_eq!(shown["repo"], "github.com/owner/proj");
    assert_eq!(shown["entries"][0]["why"], "the proxy caches 10 min");
    let hits = ok_json(&a, &sub, "s", &["memory", "search", "proxy", "token"], "");
    assert_eq!(hits["entries"].as_array().unwrap().len(), 1);
    let (code, _, _) = run_in(&a, &sub, "s", &["memory", "show", "nope"], "");
    assert_eq!(code, 7);

    // The MCP tools give what the CLI's --json gives.
    let cli_list = ok_json(&a, repo.path(), "s", &["handoff", "list", "--all"], "");
    let cli_search = ok_json(&a, repo.path(), "s", &["memory", "search", "wal"], "");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let repo_arg = repo.path().to_str().unwrap().to_string();
    rt.block_on(async {
        let mut cmd = tokio::process::Command::new(exe());
        cmd.args(["mcp", "--tools", "all"])
            .env("PCMAIL_HOME", a.home.path())
            .env("PCMAIL_TOKEN", TOKEN)
            .env("PCMAIL_CREDENTIAL", &a.cred);
        let (transport, _) = TokioChildProcess::builder(cmd).stderr(Stdio::null()).spawn().unwrap();
        let client = ().serve(transport).await.unwrap();
        let call = |tool: &str, args: Value| {
            let Value::Object(args) = args else { unreachable!() };
            client.call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args))
        };
        let list = call("handoff_list", json!({"all": true, "repo": repo_arg})).await.unwrap();
        assert_eq!(list.structured_content.unwrap(), cli_list);
        let search = call("memory_search", json!({"words": ["wal"], "repo": repo_arg})).await.unwrap();
        assert_eq!(search.structured_content.unwrap(), cli_search);
        let missing = call("handoff_show", json!({"name": "no-such", "repo": repo_arg})).await.unwrap();
        assert_eq!(missing.is_error, Some(true));
        assert_eq!(missing.structured_content.unwrap()["error"]["exit"], 7);
        let added =
            call("memory_add", json!({"kind": "gotcha", "topic": "mcp", "text": "from a tool", "repo": repo_arg}))
                .await
                .unwrap();
        assert_eq!(added.structured_content.unwrap()["entry"]["text"], "from a tool");
        client.cancel().await.unwrap();
    });
    assert_eq!(ok_json(&a, repo.path(), "s", &["memory", "search", "tool"], "")["entries"][0]["topic"], "mcp");
    let attrs = std::fs::read_to_string(repo.path().join(".gitattributes")).unwrap();
    assert_eq!(attrs.matches("merge=union").count(), 2, "{attrs}");
}

/// A repo's handoff and memory files are its committers' text: printed for a
/// person, an escape sequence in them (colour, cursor, title, clipboard)
/// arrives as a visible `�`, never as bytes the terminal acts on; line
/// breaks stay. `--json` keeps the text as stored.
#[test]
fn escape_sequences_in_a_repos_files_never_reach_the_terminal() {
    let server = Server::start(Kind::Rust);
    let a = Pc::new(&server, "pc-a");
    let repo = git_repo();
    let hostile = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J";
    let dir = repo.path().join(".claude/handoffs");
    std::fs::create_dir_all(&dir).unwrap();
    let name = "2026-12-01_09-00_abcd1234_evil";
    std::fs::write(
        dir.join(format!("{name}.md")),
        format!("---\ntype: handoff\n---\n# evil\n\n## Goal\nlook {hostile}here\n\n## Next step\nmore\n"),
    )
    .unwrap();
    // A memory entry as pcmail writes it, then edited by a committer.
    let (code, _, err) =
        run_in(&a, repo.path(), "s", &["memory", "add", "gotcha", "--topic", "auth", "tokens MARK leak"], "");
    assert_eq!(code, 0, "{err}");
    let mem = repo.path().join(".claude/memory/auth.md");
    let text = std::fs::read_to_string(&mem).unwrap();
    assert!(text.contains("MARK"), "{text}");
    std::fs::write(&mem, text.replace("MARK", hostile)).unwrap();

    for args in [
        vec!["handoff", "show", name],
        vec!["handoff", "rollup", "--through", "now", "--slug", "r", "--draft"],
        vec!["memory", "show", "auth"],
    ] {
        let (code, out, err) = run_in(&a, repo.path(), "s", &args, "");
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(!out.contains('\x1b') && !out.contains('\x07'), "{args:?} printed an escape: {out:?}");
        assert!(out.contains('\u{FFFD}') && out.contains('\n'), "{args:?}: {out:?}");
    }
    let v = ok_json(&a, repo.path(), "s", &["handoff", "show", name], "");
    assert!(v.to_string().contains("\\u001b]52"), "--json keeps the text as stored: {v}");
}
