//! `pcmail demo`, part two: two named sessions on two PCs, through every layer
//! above the mail, run by this binary alone (no repo script): names, mail by
//! name, a lease conflict and its release when the session ends, a handoff
//! picked up by the next session, a rollup, a memory gotcha at SessionStart,
//! `pcmail watch` receiving mail without a prompt, and a job (submitted,
//! accepted, run, a duplicate joined, the result read back).
//!
//! Every step is this binary run as a user would run it, in a temporary
//! folder, against one embedded server file. A session is a stand-in process
//! for `claude` (the hook and pcmail find it through `PCMAIL_CLAUDE_PID`),
//! and every hook run is the real hook with Claude Code's JSON on stdin. The
//! Mermaid diagram at the end is drawn from what the steps answered.

use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Demo {
    exe: PathBuf,
    dir: PathBuf,
    repo: PathBuf,
    pause: bool,
    children: Vec<Child>,
    /// What happened, for the diagram: one `sequenceDiagram` line each.
    lines: Vec<String>,
}

/// A session: its stand-in agent process, its PC and its id.
struct Session {
    pid: u32,
    pc: &'static str,
    id: &'static str,
}

impl Drop for Demo {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Demo {
    fn home(&self, pc: &str) -> PathBuf {
        self.dir.join(pc)
    }

    fn cmd(&self, pc: &str, s: Option<&Session>, args: &[&str]) -> Command {
        let mut c = Command::new(&self.exe);
        c.args(args).env("PCMAIL_HOME", self.home(pc)).current_dir(&self.repo).stdin(Stdio::null());
        for v in ["PCMAIL_SESSION", "PCMAIL_TOKEN", "PCMAIL_CREDENTIAL", "PCMAIL_ADMIN_TOKEN", "CLAUDE_SESSION_ID"] {
            c.env_remove(v);
        }
        if let Some(s) = s {
            c.env("PCMAIL_CLAUDE_PID", s.pid.to_string());
        }
        c
    }

    /// Runs and returns (exit code, stdout, stderr).
    fn run(&self, pc: &str, s: Option<&Session>, args: &[&str]) -> Result<(i32, String, String)> {
        let out = self.cmd(pc, s, args).output().with_context(|| format!("pcmail {args:?}"))?;
        Ok((
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }

    fn ok(&self, pc: &str, s: Option<&Session>, args: &[&str]) -> Result<String> {
        let (code, out, err) = self.run(pc, s, args)?;
        if code != 0 {
            bail!("pcmail {} (on {pc}) exited {code}: {}{}", args.join(" "), out, err);
        }
        Ok(out)
    }

    fn json(&self, pc: &str, s: Option<&Session>, args: &[&str]) -> Result<Value> {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        let out = self.ok(pc, s, &a)?;
        serde_json::from_str(out.trim()).with_context(|| format!("pcmail {args:?}: not JSON: {out}"))
    }

    fn sync(&self, pcs: &[&str]) -> Result<()> {
        for pc in pcs {
            self.ok(pc, None, &["sync"])?;
        }
        Ok(())
    }

    fn start_session(&mut self, pc: &'static str, id: &'static str) -> Result<Session> {
        let child = Command::new("sleep")
            .arg("600")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("a stand-in session process (sleep)")?;
        let pid = child.id();
        self.children.push(child);
        Ok(Session { pid, pc, id })
    }

    fn end_session(&mut self, s: &Session) {
        if let Some(i) = self.children.iter().position(|c| c.id() == s.pid) {
            let mut c = self.children.remove(i);
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The real hook with Claude Code's JSON; returns what the session is shown.
    fn hook(&self, s: &Session, event: &str) -> Result<String> {
        let input = serde_json::json!({
            "session_id": s.id, "hook_event_name": event, "cwd": self.repo, "prompt": "hi",
        });
        let mut child = self
            .cmd(s.pc, Some(s), &["hook"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        child.stdin.take().context("hook stdin")?.write_all(input.to_string().as_bytes())?;
        let out = child.wait_with_output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        Ok(serde_json::from_str::<Value>(text.trim())
            .ok()
            .and_then(|v| v["hookSpecificOutput"]["additionalContext"].as_str().map(str::to_string))
            .unwrap_or_default())
    }

    fn show(&self, what: &str, text: &str) {
        println!("  {what}");
        for l in text.lines() {
            println!("    | {l}");
        }
    }

    fn step(&self, title: &str) {
        if self.pause {
            print!("\n(press Enter for the next step) ");
            let _ = std::io::stdout().flush();
            let mut s = String::new();
            let _ = std::io::stdin().read_line(&mut s);
        }
        println!("\n== {title}");
    }

    fn note(&mut self, line: String) {
        self.lines.push(format!("    {line}"));
    }
}

fn short(id: &str) -> &str {
    &id[id.len().saturating_sub(8)..]
}

fn git(repo: &Path, args: &[&str]) -> Result<()> {
    let st = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["-c", "user.name=demo", "-c", "user.email=demo@example.com"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("git (the demo's repo)")?;
    if !st.success() {
        bail!("git {args:?} failed");
    }
    Ok(())
}

pub fn run(exe: PathBuf, no_pause: bool) -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().to_path_buf();
    let repo = dir.join("app");
    std::fs::create_dir(&repo)?;
    git(&repo, &["init", "-q"])?;
    git(&repo, &["remote", "add", "origin", "https://github.com/kim/app.git"])?;
    std::fs::write(repo.join("README.md"), "# app\n\nThe demo's repo.\nThree lines.\n")?;
    git(&repo, &["add", "README.md"])?;
    git(&repo, &["commit", "-q", "-m", "init"])?;
    let pause = !no_pause && std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let mut d = Demo { exe, dir: dir.clone(), repo: repo.clone(), pause, children: vec![], lines: vec![] };

    let db = dir.join("server.db");
    for pc in ["kim", "lee"] {
        d.ok(pc, None, &["init", "--label", pc, "--server", "embedded", "--embedded-db", db.to_str().unwrap_or("")])?;
    }
    d.sync(&["kim", "lee"])?;

    d.step("two sessions start: ani's on kim, vasya's on lee; each takes its name");
    let ani = d.start_session("kim", "0a1c2e4f-ani-session-1")?;
    let vasya = d.start_session("lee", "5b7d9f1a-vasya-session-1")?;
    d.hook(&ani, "SessionStart")?;
    d.hook(&vasya, "SessionStart")?;
    d.ok("kim", Some(&ani), &["name", "ani"])?;
    d.ok("lee", Some(&vasya), &["name", "vasya"])?;
    d.sync(&["kim", "lee"])?;
    d.note("ani->>S: name ani".into());
    d.note("vasya->>S: name vasya".into());
    println!("$ pcmail who");
    for l in d.ok("kim", None, &["who"])?.lines() {
        println!("    {l}");
    }

    d.step("mail by name: ani asks vasya (addressed to the name, shown to vasya's session only)");
    let v = d.json(
        "kim",
        Some(&ani),
        &["send", "vasya", "--kind", "request", "--subject", "cmake", "--body", "did you change the libsodium link?"],
    )?;
    let mail1 = v["ids"][0].as_str().context("send: no id")?.to_string();
    println!("  ani sent {mail1} to vasya");
    d.sync(&["lee"])?;
    let shown = d.hook(&vasya, "UserPromptSubmit")?;
    if !shown.contains(&mail1) {
        bail!("vasya's session was not shown the mail {mail1}: {shown}");
    }
    d.show("vasya's next prompt shows:", &shown);
    d.ok("lee", Some(&vasya), &["reply", &mail1, "--body", "yes: target_link_libraries(app PRIVATE sodium)"])?;
    d.sync(&["kim"])?;
    let shown = d.hook(&ani, "UserPromptSubmit")?;
    d.show("ani's next prompt shows the reply:", &shown);
    d.note(format!("ani->>S: send vasya \"cmake\" ({})", short(&mail1)));
    d.note("S->>vasya: poll: mail to the name vasya, shown to vasya's session".into());
    d.note("vasya->>S: reply".into());
    d.note("S->>ani: the reply, at ani's next prompt".into());

    d.step("a lease conflict: ani holds db-migrations, vasya's claim is refused (exit 10)");
    d.ok(
        "kim",
        Some(&ani),
        &["lease", "claim", "db-migrations", "-d", "rewriting the session table", "-f", "migrations/**"],
    )?;
    d.sync(&["lee"])?;
    let (code, out, err) = d.run("lee", Some(&vasya), &["lease", "claim", "db-migrations", "-d", "add an index"])?;
    for l in out.lines().chain(err.lines()) {
        println!("    {l}");
    }
    println!("    (exit {code})");
    if code != 10 {
        bail!("vasya's claim should have been refused with exit 10, got {code}");
    }
    d.note("ani->>S: lease claim db-migrations (granted)".into());
    d.note("vasya-xS: lease claim db-migrations: held by kim/ani (exit 10)".into());

    d.step("ani writes a handoff, then her session exits: its lease is released");
    d.ok(
        "kim",
        Some(&ani),
        &[
            "handoff",
            "new",
            "--slug",
            "session-table",
            "--goal",
            "Rewrite the session table",
            "--done",
            "migrations/0007_sessions.sql",
            "--failed",
            "ALTER in place locks the table for minutes",
            "--state",
            "working",
            "--next",
            "Backfill with batches of 10k",
        ],
    )?;
    d.end_session(&ani);
    d.sync(&["kim", "lee"])?;
    d.ok("lee", Some(&vasya), &["lease", "claim", "db-migrations", "-d", "add an index"])?;
    println!("  vasya's claim is granted now");
    d.note("ani->>repo: handoff new session-table (INDEX: ACTIVE)".into());
    d.note("Note over ani: the session exits: its lease is released".into());
    d.note("vasya->>S: lease claim db-migrations (granted)".into());

    d.step("a memory gotcha; a new session on kim sees the handoff, its dead end and the gotcha at SessionStart");
    d.ok(
        "lee",
        Some(&vasya),
        &[
            "memory",
            "add",
            "gotcha",
            "--topic",
            "build/cmake",
            "libsodium must be linked PRIVATE or the plugin loads twice",
            "--why",
            "two copies of sodium_init",
        ],
    )?;
    let ani2 = d.start_session("kim", "3c5e7a9b-ani-session-2")?;
    let shown = d.hook(&ani2, "SessionStart")?;
    if !shown.contains("session-table") || !shown.contains("libsodium") {
        bail!("the new session was not shown the handoff and the gotcha: {shown}");
    }
    d.show("ani's new session starts:", &shown);
    d.ok("kim", Some(&ani2), &["name", "ani"])?;
    d.ok("kim", Some(&ani2), &["handoff", "pickup", "session-table"])?;
    println!("  ani's new session picks the handoff up (PICKED_UP in INDEX.md)");
    d.note("vasya->>repo: memory add gotcha build/cmake".into());
    d.note("repo-->>ani2: SessionStart: handoff session-table, its dead end, the gotcha".into());
    d.note("ani2->>S: name ani (moves from the ended session)".into());

    d.step("a rollup folds the handoffs so far");
    let out = d.ok(
        "kim",
        Some(&ani2),
        &[
            "handoff",
            "rollup",
            "--through",
            "now",
            "--slug",
            "week-1",
            "--body",
            "Session table rewritten; next: backfill.",
        ],
    )?;
    print!("    {out}");
    d.note("ani2->>repo: handoff pickup (PICKED_UP), rollup week-1 (ROLLED_UP)".into());

    d.step("pcmail watch: vasya's session is idle, mail reaches it without a prompt");
    let mut watch = d
        .cmd("lee", Some(&vasya), &["watch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let watch_out = watch.stdout.take().context("watch stdout")?;
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(watch_out).lines().map_while(|l| l.ok()) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let v =
        d.json("kim", Some(&ani2), &["send", "vasya", "--body", "backfill is running: leave db-migrations to me"])?;
    let mail2 = v["ids"][0].as_str().context("send: no id")?.to_string();
    d.sync(&["lee"])?;
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = false;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(line) => {
                println!("    | {line}");
                if line.contains(&mail2) {
                    seen = true;
                    break;
                }
            }
            Err(_) => break,
        }
    }
    drop(watch.stdin.take());
    let _ = watch.kill();
    let _ = watch.wait();
    if !seen {
        bail!("pcmail watch did not print the mail {mail2} within 20 s");
    }
    d.note(format!("ani2->>S: send vasya ({})", short(&mail2)));
    d.note("S->>vasya: pcmail watch prints it, no prompt".into());

    d.step("a job: kim asks lee to count the lines of the repo's README (lee's owner whitelisted it)");
    let config = d.home("lee").join("config.toml");
    let mut text = std::fs::read_to_string(&config)?;
    text.push_str(&format!(
        "\n[jobs]\nallowed_submitters = [\"kim\"]\n\n[jobs.checkouts]\napp = {}\n\n\
         [[jobs.commands]]\nname = \"lines\"\ndescription = \"wc -l of the README\"\n\
         argv = [\"wc\", \"-l\", \"README.md\"]\ncwd = \"{{checkout}}\"\nsubject = \"checkout\"\ntime_limit_secs = 60\n\
         read_only = true\n\n[[jobs.commands.args]]\nname = \"checkout\"\ntype = \"checkout\"\n",
        serde_json::to_string(&repo.to_string_lossy())?
    ));
    std::fs::write(&config, text)?;
    // lee's daemon runs its jobs (and publishes the whitelist with its first poll).
    let daemon = d.cmd("lee", None, &["daemon"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn()?;
    d.children.push(daemon);
    // Until lee's first poll, a submit is refused (exit 13: it never published a whitelist).
    let deadline = Instant::now() + Duration::from_secs(30);
    let first: Value = loop {
        let (code, out, err) = d.run("kim", Some(&ani2), &["--json", "job", "run", "lee", "lines", "checkout=app"])?;
        if code == 0 {
            break serde_json::from_str(out.trim()).with_context(|| format!("job run: not JSON: {out}"))?;
        }
        if code != 13 || !err.contains("never published") || Instant::now() > deadline {
            bail!("job run exited {code}: {out}{err}");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let job = first["jobId"].as_str().or(first["job"]["id"].as_str()).context("job run: no id")?.to_string();
    println!("  submitted {job}: {}", first["state"].as_str().or(first["job"]["state"].as_str()).unwrap_or("queued"));
    let second = d.json("kim", Some(&ani2), &["job", "run", "lee", "lines", "checkout=app"])?;
    let joined = second["jobId"].as_str().or(second["job"]["id"].as_str()).unwrap_or_default().to_string();
    if joined != job {
        bail!("the same job submitted again should have joined {job}, got {second}");
    }
    println!("  the same submit again joins it: {joined}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        d.sync(&["kim"])?;
        let s = d.json("kim", None, &["job", "status", &job])?;
        let state = s["state"].as_str().or(s["job"]["state"].as_str()).unwrap_or_default().to_string();
        if ["ok", "failed", "timed_out", "cancelled"].contains(&state.as_str()) {
            break s;
        }
        if Instant::now() > deadline {
            bail!("the job {job} did not end within 60 s: {s}");
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    let out = d.ok("kim", None, &["job", "status", &job])?;
    for l in out.lines() {
        println!("    {l}");
    }
    let state = status["state"].as_str().or(status["job"]["state"].as_str()).unwrap_or_default();
    if state != "ok" {
        bail!("the job ended {state}: {status}");
    }
    d.note(format!("ani2->>S: job run lee lines ({})", short(&job)));
    d.note("ani2->>S: the same job again: joined".into());
    d.note("S->>lee: poll offers it; job.start accepted, then run".into());
    d.note("lee->>S: result ok (exit 0, output)".into());
    d.note("S->>ani2: job status: ok".into());

    println!("\n== what happened, as a Mermaid diagram (renders on GitHub)");
    println!("```mermaid\nsequenceDiagram");
    for p in [
        "ani as ani (kim, session 1)",
        "ani2 as ani (kim, session 2)",
        "S as server",
        "vasya as vasya (lee)",
        "lee as lee's executor",
        "repo as repo .claude/",
    ] {
        println!("    participant {p}");
    }
    for l in &d.lines {
        println!("{l}");
    }
    println!("```");
    Ok(())
}
