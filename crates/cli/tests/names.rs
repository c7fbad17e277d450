//! Sessions and names end to end on `pcmail serve`: sessions take names (real hook
//! processes register them, each under its own stand-in Claude Code process),
//! collide, move when their session ends, and mail to a name is shown to the
//! session holding it only; `who` lists every live session.

mod common;

use common::{synced, Kind, Pc, Server};
use serde_json::Value;
use std::io::Write;
use std::process::{Child, Command, Stdio};

/// A Claude Code session: a process standing in for `claude` (the hook and
/// `pcmail name` find it through `PCMAIL_CLAUDE_PID`), and its session id.
struct Session {
    id: String,
    claude: Child,
}

impl Session {
    fn start(pc: &Pc, id: &str) -> Session {
        let claude = Command::new("sleep").arg("600").spawn().unwrap();
        let s = Session { id: id.to_string(), claude };
        s.hook(pc, "SessionStart");
        s
    }

    fn pid(&self) -> String {
        self.claude.id().to_string()
    }

    /// The hook as Claude Code runs it for this session: additionalContext.
    fn hook(&self, pc: &Pc, event: &str) -> String {
        let mut child = pc
            .cmd(&["hook"])
            .env("PCMAIL_CLAUDE_PID", self.pid())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let input = serde_json::json!({"session_id": self.id, "hook_event_name": event, "cwd": "/tmp", "prompt": "hi"});
        child.stdin.take().unwrap().write_all(input.to_string().as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let s = String::from_utf8(out.stdout).unwrap();
        if s.trim().is_empty() {
            return String::new();
        }
        let v: Value = serde_json::from_str(s.trim()).unwrap();
        v["hookSpecificOutput"]["additionalContext"].as_str().unwrap().to_string()
    }

    /// `pcmail ARGS` run from inside this session.
    fn run(&self, pc: &Pc, args: &[&str]) -> std::process::Output {
        pc.cmd(args).env("PCMAIL_CLAUDE_PID", self.pid()).output().unwrap()
    }

    fn end(&mut self) {
        let _ = self.claude.kill();
        let _ = self.claude.wait();
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.end();
    }
}

fn text(o: &std::process::Output) -> (i32, String, String) {
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn names_take_collide_move_and_mail_to_a_name_reaches_its_session_only() {
    let server = Server::start(Kind::Rust);
    let [a, b, c] = synced(&server, ["pc-a", "pc-b", "pc-c"]);

    // Two sessions on pc-b; the first takes `ani`.
    let mut ani = Session::start(&b, "sess-ani-1111");
    let other = Session::start(&b, "sess-other-2222");
    let (code, out, err) = text(&ani.run(&b, &["name", "ani"]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("ani is this session's name now (pc-b/sess-ani-1111)"), "{out}");

    // Take: refused while a live session holds it, naming the holder (exit 5).
    let pc_c_session = Session::start(&c, "sess-c-3333");
    let (code, _, err) = text(&pc_c_session.run(&c, &["name", "ani"]));
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("ani is held by pc-b/sess-ani-1111"), "{err}");
    // Collide with a label (names and labels share one namespace).
    let (code, _, err) = text(&pc_c_session.run(&c, &["name", "pc-a"]));
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("is a PC label"), "{err}");
    // Exact and lower-case: a usage error before anything is sent.
    let (code, _, _) = text(&pc_c_session.run(&c, &["name", "Ani"]));
    assert_eq!(code, 2);
    // And a label equal to a name cannot join the roster.
    let r = server.call("ani", "roster.set", serde_json::json!({"label": "ani", "hostname": "ANI-BOX"}));
    assert_eq!(r["error"]["code"], "conflict", "{r}");

    // Unknown: exit 4 with candidates, names among them.
    let (code, _, err) = text(&a.run(&["send", "anu", "--body", "x"]));
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("candidates: ani"), "{err}");

    // who: every live session on every PC, from the server (pc-b and pc-c have synced through `name`).
    b.ok(&["sync"]);
    c.ok(&["sync"]);
    let w = a.json(&["who"]);
    let sessions = w["sessions"].as_array().unwrap();
    let find =
        |id: &str| sessions.iter().find(|s| s["session"] == id).cloned().unwrap_or_else(|| panic!("{id} in {w}"));
    assert_eq!(find("sess-ani-1111")["name"], "ani");
    assert_eq!(find("sess-ani-1111")["pc"], "pc-b");
    assert_eq!(find("sess-other-2222")["name"], Value::Null);
    assert_eq!(find("sess-c-3333")["pc"], "pc-c");
    assert_eq!(sessions.len(), 3, "{w}");
    let table = a.ok(&["who"]);
    assert!(
        table.lines().next().unwrap().starts_with("NAME") && table.contains("ani") && table.contains("pc-b"),
        "{table}"
    );

    // A lease claimed from the session holding `ani` names it without --name; the other session's does not.
    let (code, out, err) = text(&ani.run(&b, &["--json", "lease", "claim", "module/auth", "-d", "refactor"]));
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = text(&other.run(&b, &["--json", "lease", "claim", "gpu-1", "-d", "train"]));
    assert_eq!(code, 0, "{out}{err}");
    let leases = a.json(&["lease", "list"]);
    let holder = |r: &str| {
        leases["leases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["resource"] == r)
            .unwrap_or_else(|| panic!("{r} in {leases}"))["holder"]
            .clone()
    };
    assert_eq!(holder("module/auth")["name"], "ani", "{leases}");
    assert_eq!(holder("gpu-1")["name"], Value::Null, "{leases}");

    // Mail to the name: shown to the session holding it, never to the other one.
    let first = a.send(&["ani", "--subject", "cmake", "--body", "did you change the libsodium link?"]);
    b.ok(&["sync"]);
    let seen_by_other = other.hook(&b, "UserPromptSubmit");
    assert!(!seen_by_other.contains("libsodium"), "another session saw it: {seen_by_other}");
    let seen_by_ani = ani.hook(&b, "UserPromptSubmit");
    assert!(seen_by_ani.contains("libsodium"), "{seen_by_ani}");
    b.ok(&["sync"]);
    assert_eq!(a.state_of(&first), "seen", "the seen mark of pc-b reached the server");

    // A second mail, delivered to pc-b and not yet seen; then ani's session ends.
    let second = a.send(&["ani", "--body", "second: the CI is red"]);
    b.ok(&["sync"]);
    assert_eq!(a.state_of(&second), "delivered");
    ani.end();
    b.ok(&["sync"]);
    // No live session holds ani: new mail waits, and the sender's status says so.
    let third = a.send(&["ani", "--body", "third: are you there?"]);
    let st = a.json(&["status", &third]);
    assert_eq!(st[0]["state"], "new");
    assert!(st[0]["waiting"].as_str().unwrap().contains("no live session holds ani"), "{st}");
    let (_, out, _) = text(&a.run(&["status", &third]));
    assert!(out.contains("waiting: no live session holds ani"), "{out}");

    // Move: pc-c's session takes ani (its holder ended), with a record; the unseen mail follows.
    let (code, out, err) = text(&pc_c_session.run(&c, &["name", "ani"]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("ani moved here from pc-b/sess-ani-1111"), "{out}");
    assert!(out.contains("1 unseen mail to ani comes here"), "{out}");
    // pc-b withdraws it from its store at its next poll.
    b.ok(&["sync"]);
    let inbox_b = b.json(&["inbox", "--all"]);
    assert!(!inbox_b.to_string().contains(&second), "withdrawn from pc-b: {inbox_b}");
    // pc-c gets the second and the third; only its session holding ani is shown them.
    c.ok(&["sync"]);
    let shown = pc_c_session.hook(&c, "UserPromptSubmit");
    assert!(shown.contains("second: the CI is red") && shown.contains("third: are you there?"), "{shown}");
    c.ok(&["sync"]);
    assert_eq!(a.state_of(&second), "seen", "pc-c may mark mail to the name it holds now");
    assert_eq!(a.state_of(&third), "seen");
    let w = a.json(&["who"]);
    assert_eq!(w["sessions"].as_array().unwrap().iter().find(|s| s["name"] == "ani").unwrap()["pc"], "pc-c", "{w}");
}

/// `pcmail watch` prints mail sent on another PC without any
/// prompt, within a second on `serve` (the receiving daemon long-polls and
/// watch wakes on the store change), never twice; the hook then only counts it.
#[test]
fn watch_prints_new_mail_for_its_session_once_and_the_hook_then_counts_it() {
    use std::io::{BufRead, BufReader};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};
    let server = Server::start(Kind::Rust);
    let [a, b] = synced(&server, ["pc-a", "pc-b"]);
    let session = Session::start(&b, "sess-watch-4444");
    let mut daemon = b.cmd(&["daemon"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let mut watch = b
        .cmd(&["watch"])
        .env("PCMAIL_CLAUDE_PID", session.pid())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    let stdout = watch.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let header = rx.recv_timeout(Duration::from_secs(20)).expect("watch prints its header");
    assert!(header.starts_with("pcmail watch: new mail for this session (pc-b)"), "{header}");

    let mut lines = vec![];
    for (i, body) in ["first: <b>the build is green</b>", "second: please rebase"].iter().enumerate() {
        let sent_at = Instant::now();
        let id = a.send(&["pc-b", "--body", body]);
        // Wait on the line (a deadline, not a timed assertion): it must come.
        let line = loop {
            let l = rx.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| panic!("mail {i} never reached watch"));
            if l.contains(&id) {
                break l;
            }
            lines.push(l);
        };
        eprintln!("watch: mail {i} printed {:?} after send returned", sent_at.elapsed());
        assert!(line.starts_with("<pcmail-mail ") && line.ends_with("</pcmail-mail>"), "one framed line: {line}");
        assert!(line.contains("from=\"pc-a\""), "{line}");
        lines.push(line);
    }
    // Neutralised like the hook's: the sender's markup cannot forge the frame.
    assert!(lines.iter().any(|l| l.contains("‹b›the build is green‹/b›")), "{lines:?}");
    // Never twice: nothing more arrives while the store keeps changing (the
    // daemon pushing watch's seen marks, its polls).
    while let Ok(l) = rx.recv_timeout(Duration::from_millis(1500)) {
        lines.push(l);
    }
    assert_eq!(lines.len(), 2, "each mail exactly once: {lines:?}");
    // The hook of the same session: what watch printed is counted, not shown again.
    let ctx = session.hook(&b, "UserPromptSubmit");
    assert!(!ctx.contains("<pcmail-mail"), "{ctx}");
    assert!(ctx.contains("2 open mail for pc-b already shown earlier in this session"), "{ctx}");

    // EOF on stdin ends it cleanly.
    drop(watch.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = watch.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "watch did not end on EOF");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    reader.join().unwrap();
    daemon.kill().unwrap();
    let _ = daemon.wait();
}

/// `pcmail handoff new` run inside a Claude Code session names the file with
/// the session the hook recorded for that Claude Code process (the PC's
/// registry), not a random id, even with no session id in its environment.
#[test]
fn handoff_new_inside_a_session_names_the_file_with_the_registry_session() {
    let server = Server::start(Kind::Rust);
    let [a] = synced(&server, ["pc-a"]);
    let repo = tempfile::tempdir().unwrap();
    assert!(Command::new("git").args(["init", "-q"]).arg(repo.path()).status().unwrap().success());
    let s = Session::start(&a, "5e55101d-0b0e-4c1a-9d2e-1234567890ab");

    let handoff = |claude_pid: &str| {
        let out = a
            .cmd(&[
                "--json", "handoff", "new", "--slug", "reg-test", "--goal", "g", "--state", "working", "--next", "n",
            ])
            .current_dir(repo.path())
            .env("PCMAIL_CLAUDE_PID", claude_pid)
            .env_remove("PCMAIL_SESSION")
            .env_remove("CLAUDE_SESSION_ID")
            .env_remove("CLAUDE_CODE_SESSION_ID")
            .output()
            .unwrap();
        let (code, stdout, stderr) = text(&out);
        assert_eq!(code, 0, "{stderr}");
        serde_json::from_str::<Value>(&stdout).unwrap()
    };
    let v = handoff(&s.pid());
    assert_eq!(
        v["session"],
        serde_json::json!({"id": "5e55101d-0b0e-4c1a-9d2e-1234567890ab", "source": "registry"}),
        "{v}"
    );
    assert!(v["name"].as_str().unwrap().ends_with("_5e55101d_reg-test"), "{v}");

    // Outside Claude Code (no process above it): a random id for this one command.
    let v = handoff("0");
    assert_eq!(v["session"]["source"], "random", "{v}");
}
