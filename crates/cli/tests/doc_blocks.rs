//! The docs are tests: every fenced block in README.md and docs/*.md is one of
//!
//! - **run**: a `sh`/`bash` block runs as one script (`set -eo pipefail`) and
//!   must exit 0; a `console` block is a list of `$ ` commands, each followed by
//!   the output the docs show, which must match (`…` or `[..]` stand for any
//!   text within a line, a line `...` for any number of lines, a last line
//!   `[exit N]` for the exit code; without it the command must exit 0);
//! - **not run**, with the reason in a comment right before it:
//!   `<!-- not run: needs a second machine -->`;
//! - **shown for reading**: any other language (`toml`, `json`, `text`, …). A
//!   block with no language fails, and so does a reading block whose lines look
//!   like commands, so a shell example cannot slip through untested.
//!
//! Each run block gets a fresh sandbox: its own `HOME` and `PCMAIL_HOME`, the
//! `pcmail` and `pcmail-hook` of this build first on `PATH` (and as
//! `PCMAIL_BIN`), no inherited `PCMAIL_*` variable, English messages, and as
//! its working directory a fresh git repository (origin
//! `https://github.com/kim/app`, one commit), as a session's project would be.
//! `<!-- run: OPTIONS -->` right before a block adjusts that, options split
//! by spaces:
//!
//! - `continue`: the sandbox of the previous run block of the same file, so a
//!   page can build an example up over several blocks;
//! - `repo`: the working directory is this repository (scripts in it);
//! - `NAME=VALUE`: an environment variable (a short mode for a benchmark);
//! - `timeout=SECS`: the block's time limit (default 30 s);
//! - `bench`: the benchmark programs (`pcmail-bench`, `pcmail-bench-pc`) of
//!   this build beside `pcmail` on `PATH`, built once (debug) when a page
//!   needs them. A benchmark block runs in a short mode (its own arguments or
//!   `NAME=VALUE` knobs) to show that it works; its figures are never
//!   compared. Under `cargo test` (which holds the build folder's lock while
//!   tests run) such a block is counted as not run; `cargo nextest` runs it.
//!
//! Relative links between these pages are checked too: the file exists and,
//! with `#anchor`, so does the heading, so moving a section cannot leave a
//! dead link behind.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// README.md and every Markdown page directly under docs/.
fn doc_files(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

#[derive(Debug, Clone, PartialEq)]
enum Directive {
    NotRun(String),
    Run(Vec<String>),
}

#[derive(Debug)]
struct Block {
    file: String,
    line: usize,
    lang: String,
    text: String,
    directive: Option<Directive>,
    /// A benchmark's recorded output (scripts/bench-record.sh): read, never
    /// taken for a command someone would type.
    recorded: bool,
}

/// The HTML comments right before line `at` (blank lines between allowed).
fn directives_before(lines: &[&str], at: usize) -> Result<Option<Directive>, String> {
    let mut found = None;
    let mut i = at;
    while i > 0 {
        i -= 1;
        let l = lines[i].trim();
        if l.is_empty() {
            continue;
        }
        let Some(inner) = l.strip_prefix("<!--").and_then(|r| r.strip_suffix("-->")) else {
            break;
        };
        let inner = inner.trim();
        let d = if let Some(reason) = inner.strip_prefix("not run:") {
            let reason = reason.trim();
            if reason.is_empty() {
                return Err("`not run:` without a reason".into());
            }
            Directive::NotRun(reason.to_string())
        } else if let Some(opts) = inner.strip_prefix("run:") {
            Directive::Run(opts.split_whitespace().map(str::to_string).collect())
        } else {
            continue; // another comment
        };
        if found.is_some() {
            return Err("two run/not-run comments before one block".into());
        }
        found = Some(d);
    }
    Ok(found)
}

fn parse_blocks(file: &str, text: &str) -> Result<Vec<Block>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    // Inside `<!-- bench:NAME begin -->` … `end`: what a benchmark printed,
    // written by scripts/bench-record.sh and guarded by its hash.
    let mut recorded = false;
    while i < lines.len() {
        let l = lines[i];
        let trimmed = l.trim_start();
        if trimmed.starts_with("<!-- bench:") {
            recorded = trimmed.ends_with(" begin -->");
        }
        if let Some(info) = trimmed.strip_prefix("```") {
            let indent = l.len() - trimmed.len();
            let lang = info.split_whitespace().next().unwrap_or("").to_string();
            let directive = directives_before(&lines, i).map_err(|e| format!("{file}:{}: {e}", i + 1))?;
            let start = i;
            let mut body = String::new();
            i += 1;
            loop {
                let Some(l) = lines.get(i) else {
                    return Err(format!("{file}:{}: the block is never closed", start + 1));
                };
                if l.trim() == "```" {
                    break;
                }
                let cut = l.len() - l.trim_start().len();
                body.push_str(&l[cut.min(indent)..]);
                body.push('\n');
                i += 1;
            }
            blocks.push(Block { file: file.to_string(), line: start + 1, lang, text: body, directive, recorded });
        }
        i += 1;
    }
    Ok(blocks)
}

const SHELL: &[&str] = &["sh", "bash", "shell"];

/// A line of a reading block that is a command someone would type.
fn looks_like_command(line: &str) -> bool {
    let l = line.trim_start().trim_start_matches("$ ");
    [
        "pcmail ",
        "pcmail-hook ",
        "cargo ",
        "bash ",
        "sudo ",
        "npm ",
        "npx ",
        "node ",
        "claude ",
        "echo ",
        "cd ",
        "git ",
        "tar ",
        "curl ",
    ]
    .iter()
    .any(|c| l.starts_with(c))
}

// ---------------------------------------------------------------- running

struct Bins {
    dir: PathBuf,
}

fn bins() -> Bins {
    let pcmail = PathBuf::from(env!("CARGO_BIN_EXE_pcmail"));
    let dir = pcmail.parent().unwrap().to_path_buf();
    assert!(
        dir.join("pcmail-hook").exists(),
        "the doc blocks need pcmail-hook beside pcmail in {}: cargo build -p pcmail-hook",
        dir.display()
    );
    Bins { dir }
}

#[derive(Clone)]
enum BenchBins {
    Built,
    Skipped(String),
    Failed(String),
}

/// Builds the benchmark programs beside this build's `pcmail` (debug, the
/// same target folder: only their own crates are new), once per run.
fn bench_bins() -> BenchBins {
    static ONCE: std::sync::OnceLock<BenchBins> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| {
        // cargo test keeps the build folder locked while its tests run: a build from here would wait forever.
        if std::env::var_os("NEXTEST").is_none() {
            return BenchBins::Skipped(
                "a benchmark: its programs are built from here only under cargo nextest (cargo test holds the build lock)"
                    .into(),
            );
        }
        let dir = bins().dir;
        let target = dir.parent().expect("the target folder above debug/");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let out = Command::new(cargo)
            .args(["build", "-q", "-p", "pcmail-bench", "-p", "pcmail-bench-pc", "--target-dir"])
            .arg(target)
            .current_dir(repo_root())
            .stdin(Stdio::null())
            .output();
        match out {
            Ok(o) if o.status.success() && dir.join("pcmail-bench").is_file() && dir.join("pcmail-bench-pc").is_file() => {
                BenchBins::Built
            }
            Ok(o) => BenchBins::Failed(format!(
                "cargo build -p pcmail-bench -p pcmail-bench-pc: {}\n{}",
                o.status,
                String::from_utf8_lossy(&o.stderr)
            )),
            Err(e) => BenchBins::Failed(format!("cannot run cargo: {e}")),
        }
    })
    .clone()
}

struct Sandbox {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Sandbox {
    fn new() -> Sandbox {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        for d in ["home", "pcmail", "work"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let sb = Sandbox { _tmp: tmp, root };
        let git = |args: &[&str]| {
            let out = sb.command("git").args(args).current_dir(sb.root.join("work")).output().unwrap();
            assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        };
        git(&["init", "-q", "-b", "main"]);
        git(&["remote", "add", "origin", "https://github.com/kim/app"]);
        std::fs::write(sb.root.join("work/README.md"), "app\n").unwrap();
        git(&["add", "README.md"]);
        git(&["commit", "-q", "-m", "start"]);
        sb
    }

    /// A command in this sandbox's environment: nothing of the caller's
    /// pcmail setup leaks in.
    fn command(&self, program: &str) -> Command {
        let bins = bins();
        let mut c = Command::new(program);
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy().into_owned();
            if k.starts_with("PCMAIL_") || k.starts_with("LC_") || k.starts_with("XDG_") || k == "CLAUDE_SESSION_ID" {
                c.env_remove(&k);
            }
        }
        let path = std::env::var("PATH").unwrap_or_default();
        c.env("HOME", self.root.join("home"))
            .env("PCMAIL_HOME", self.root.join("pcmail"))
            .env("PCMAIL_BIN", bins.dir.join("pcmail"))
            .env("PATH", format!("{}:{path}", bins.dir.display()))
            .env("LANG", "C.UTF-8")
            .env("GIT_AUTHOR_NAME", "kim")
            .env("GIT_AUTHOR_EMAIL", "kim@example.com")
            .env("GIT_COMMITTER_NAME", "kim")
            .env("GIT_COMMITTER_EMAIL", "kim@example.com")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(Stdio::null());
        c
    }
}

struct Outcome {
    output: String,
    code: Option<i32>,
    timed_out: bool,
}

/// Runs `script` with bash in its own process group, output to a file (a
/// background process a block starts cannot hold a pipe open), and kills the
/// whole group when it ends or runs past `limit`.
fn run_script(sb: &Sandbox, cwd: &Path, env: &[(String, String)], script: &str, limit: Duration) -> Outcome {
    use std::os::unix::process::CommandExt;
    let script_path = sb.root.join("block.sh");
    let out_path = sb.root.join("block.out");
    std::fs::write(&script_path, script).unwrap();
    let out = std::fs::File::create(&out_path).unwrap();
    let mut cmd = sb.command("bash");
    cmd.arg(&script_path).current_dir(cwd).stdout(out.try_clone().unwrap()).stderr(out).process_group(0);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let pgid = child.id() as i32;
    let start = Instant::now();
    let (code, timed_out) = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break (status.code(), false);
        }
        if start.elapsed() > limit {
            break (None, true);
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // SAFETY: signals the process group this block started, nothing else.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    let _ = child.wait();
    let output = String::from_utf8_lossy(&std::fs::read(&out_path).unwrap()).into_owned();
    Outcome { output, code, timed_out }
}

/// One `$ ` command of a console block and the output the docs show for it.
struct Step {
    command: String,
    expected: Vec<String>,
    exit: i32,
}

fn console_steps(text: &str) -> Result<Vec<Step>, String> {
    let mut steps: Vec<Step> = Vec::new();
    let mut continued = false;
    for line in text.lines() {
        if continued {
            let s = steps.last_mut().unwrap();
            s.command.push('\n');
            s.command.push_str(line);
            continued = line.ends_with('\\');
        } else if let Some(cmd) = line.strip_prefix("$ ") {
            steps.push(Step { command: cmd.to_string(), expected: Vec::new(), exit: 0 });
            continued = cmd.ends_with('\\');
        } else {
            let Some(s) = steps.last_mut() else {
                return Err(format!("output before the first `$ ` command: {line:?}"));
            };
            s.expected.push(line.to_string());
        }
    }
    for s in &mut steps {
        while s.expected.last().is_some_and(|l| l.trim().is_empty()) {
            s.expected.pop();
        }
        if let Some(code) =
            s.expected.last().and_then(|l| l.trim().strip_prefix("[exit ")?.strip_suffix(']')?.parse().ok())
        {
            s.exit = code;
            s.expected.pop();
        }
    }
    if steps.is_empty() {
        return Err("a console block with no `$ ` command".into());
    }
    Ok(steps)
}

/// Does `line` match `pattern`, where `…` and `[..]` stand for any text?
fn line_matches(pattern: &str, line: &str) -> bool {
    let pattern = pattern.trim_end().replace("[..]", "…");
    let line = line.trim_end();
    let parts: Vec<&str> = pattern.split('…').collect();
    if parts.len() == 1 {
        return pattern == line;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !line.starts_with(first) || line.len() < first.len() + last.len() || !line.ends_with(last) {
        return false;
    }
    let mut rest = &line[first.len()..line.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(at) => rest = &rest[at + mid.len()..],
            None => return false,
        }
    }
    true
}

/// Expected lines against actual ones; a pattern line `...` takes any number
/// of lines (it tries the shortest first).
fn lines_match(expected: &[String], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((e, rest)) if e.trim() == "..." => (0..=actual.len()).any(|n| lines_match(rest, &actual[n..])),
        Some((e, rest)) => actual.split_first().is_some_and(|(a, more)| line_matches(e, a) && lines_match(rest, more)),
    }
}

const MARK: &str = "@@doc-block-step";

fn run_console(
    sb: &Sandbox,
    cwd: &Path,
    env: &[(String, String)],
    steps: &[Step],
    limit: Duration,
) -> Result<(), String> {
    let mut script = String::from("exec 2>&1\n");
    for (i, s) in steps.iter().enumerate() {
        writeln!(script, "printf '%s\\n' '{MARK} {i}'\n{}\nprintf '\\n{MARK}-rc %d\\n' $?", s.command).unwrap();
    }
    let out = run_script(sb, cwd, env, &script, limit);
    if out.timed_out {
        return Err(format!("timed out after {limit:?}; output:\n{}", out.output));
    }
    let mut segments: Vec<(Vec<&str>, Option<i32>)> = Vec::new();
    for line in out.output.lines() {
        if line.starts_with(&format!("{MARK} ")) {
            segments.push((Vec::new(), None));
        } else if let Some(rc) = line.strip_prefix(&format!("{MARK}-rc ")) {
            if let Some(s) = segments.last_mut() {
                s.1 = rc.trim().parse().ok();
            }
        } else if let Some(s) = segments.last_mut() {
            s.0.push(line);
        }
    }
    for (i, step) in steps.iter().enumerate() {
        let Some((lines, rc)) = segments.get_mut(i) else {
            return Err(format!("`{}` never ran; output:\n{}", step.command, out.output));
        };
        while lines.last().is_some_and(|l| l.trim().is_empty()) {
            lines.pop();
        }
        let shown = lines.join("\n");
        if *rc != Some(step.exit) {
            return Err(format!("`{}` exited {rc:?}, the docs say {}; its output:\n{shown}", step.command, step.exit));
        }
        if !lines_match(&step.expected, lines) {
            return Err(format!(
                "`{}` printed:\n{shown}\n--- the docs show:\n{}",
                step.command,
                step.expected.join("\n")
            ));
        }
    }
    Ok(())
}

#[derive(Default)]
struct Tally {
    executed: Vec<String>,
    not_run: Vec<(String, String)>,
    reading: BTreeMap<String, usize>,
    failures: Vec<String>,
}

fn run_file(root: &Path, blocks: &[Block]) -> Tally {
    let mut t = Tally::default();
    let mut sandbox: Option<Sandbox> = None;
    for b in blocks {
        let at = format!("{}:{}", b.file, b.line);
        let shell = SHELL.contains(&b.lang.as_str());
        let console = b.lang == "console";
        if b.lang.is_empty() {
            t.failures.push(format!(
                "{at}: a block without a language: `sh`/`console` to run it, `text`, `toml`, … to show it"
            ));
            continue;
        }
        if !shell && !console {
            if let Some(l) = b.text.lines().find(|l| !(b.recorded && b.lang == "text") && looks_like_command(l)) {
                t.failures.push(format!("{at}: a command in a `{}` block ({l:?}): make it `sh` or `console`", b.lang));
            } else if b.directive.is_some() {
                t.failures.push(format!("{at}: a run/not-run comment on a `{}` block, which is never run", b.lang));
            } else {
                *t.reading.entry(b.lang.clone()).or_default() += 1;
            }
            continue;
        }
        let opts = match &b.directive {
            Some(Directive::NotRun(reason)) => {
                t.not_run.push((at, reason.clone()));
                continue;
            }
            Some(Directive::Run(opts)) => opts.clone(),
            None => Vec::new(),
        };
        let mut env = Vec::new();
        let mut limit = Duration::from_secs(30);
        let (mut keep, mut in_repo, mut bench) = (false, false, false);
        for o in &opts {
            match o.as_str() {
                "continue" => keep = true,
                "repo" => in_repo = true,
                "bench" => bench = true,
                _ => {
                    if let Some(secs) = o.strip_prefix("timeout=") {
                        limit = Duration::from_secs(secs.parse().expect("timeout=SECS"));
                    } else if let Some((k, v)) = o.split_once('=') {
                        env.push((k.to_string(), v.to_string()));
                    } else {
                        t.failures.push(format!("{at}: unknown run option {o:?}"));
                    }
                }
            }
        }
        if bench {
            match bench_bins() {
                BenchBins::Built => {}
                BenchBins::Skipped(why) => {
                    t.not_run.push((at, why));
                    continue;
                }
                BenchBins::Failed(e) => {
                    t.failures.push(format!("{at}: {e}"));
                    continue;
                }
            }
        }
        if !keep || sandbox.is_none() {
            sandbox = Some(Sandbox::new());
        }
        let sb = sandbox.as_ref().unwrap();
        let cwd = if in_repo { root.to_path_buf() } else { sb.root.join("work") };
        let started = Instant::now();
        let result = if console {
            console_steps(&b.text).and_then(|steps| run_console(sb, &cwd, &env, &steps, limit))
        } else {
            let out = run_script(sb, &cwd, &env, &format!("set -eo pipefail\n{}", b.text), limit);
            match (out.timed_out, out.code) {
                (true, _) => Err(format!("timed out after {limit:?}; output:\n{}", out.output)),
                (false, Some(0)) => Ok(()),
                (false, code) => Err(format!("exited {code:?}; output:\n{}", out.output)),
            }
        };
        match result {
            Ok(()) => t.executed.push(format!("{at} ({} ms)", started.elapsed().as_millis())),
            Err(e) => t.failures.push(format!("{at}: {e}")),
        }
    }
    t
}

// ---------------------------------------------------------------- links

/// GitHub's anchor for a heading: lower-case, punctuation dropped, spaces to
/// `-`; a repeated heading gets `-1`, `-2`, ….
fn anchors(text: &str) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    let mut in_block = false;
    for l in text.lines() {
        if l.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block || !l.starts_with('#') {
            continue;
        }
        let title = l.trim_start_matches('#').trim();
        let slug: String = title
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let n = seen.entry(slug.clone()).or_default();
        out.push(if *n == 0 { slug.clone() } else { format!("{slug}-{n}") });
        *n += 1;
    }
    out
}

fn check_links(root: &Path, file: &Path, text: &str) -> Vec<String> {
    let mut bad = Vec::new();
    let mut in_block = false;
    for (n, l) in text.lines().enumerate() {
        if l.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            continue;
        }
        let mut rest = l;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = &rest[..end];
            rest = &rest[end..];
            if target.contains("://") || target.starts_with("mailto:") || target.contains(' ') {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
            let dest = if path.is_empty() { file.to_path_buf() } else { file.parent().unwrap().join(path) };
            let at = format!("{}:{}", file.strip_prefix(root).unwrap().display(), n + 1);
            if !dest.exists() {
                bad.push(format!("{at}: link to {target}: no such file"));
                continue;
            }
            if !anchor.is_empty() && dest.extension().is_some_and(|e| e == "md") {
                let body = std::fs::read_to_string(&dest).unwrap();
                if !anchors(&body).iter().any(|a| a == anchor) {
                    bad.push(format!("{at}: link to {target}: no such heading"));
                }
            }
        }
    }
    bad
}

// ---------------------------------------------------------------- the test

#[test]
fn every_doc_block_runs_or_says_why_not() {
    let started = Instant::now();
    let root = repo_root();
    let mut per_file = Vec::new();
    let mut failures = Vec::new();
    for f in doc_files(&root) {
        let name = f.strip_prefix(&root).unwrap().display().to_string();
        let text = std::fs::read_to_string(&f).unwrap();
        failures.extend(check_links(&root, &f, &text));
        match parse_blocks(&name, &text) {
            Ok(blocks) => per_file.push(blocks),
            Err(e) => failures.push(e),
        }
    }
    // One thread per page: blocks mostly wait on the processes they start.
    let tallies: Vec<Tally> = std::thread::scope(|s| {
        let handles: Vec<_> = per_file.iter().map(|blocks| s.spawn(|| run_file(&root, blocks))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut total = Tally::default();
    for t in tallies {
        total.executed.extend(t.executed);
        total.not_run.extend(t.not_run);
        for (k, v) in t.reading {
            *total.reading.entry(k).or_default() += v;
        }
        failures.extend(t.failures);
    }
    println!("doc blocks executed: {}", total.executed.len());
    for e in &total.executed {
        println!("  ran  {e}");
    }
    println!("doc blocks not run: {}", total.not_run.len());
    for (at, why) in &total.not_run {
        println!("  not run  {at}: {why}");
    }
    println!(
        "doc blocks shown for reading: {} ({})",
        total.reading.values().sum::<usize>(),
        total.reading.iter().map(|(k, v)| format!("{v} {k}")).collect::<Vec<_>>().join(", ")
    );
    println!("doc blocks took {:.1} s", started.elapsed().as_secs_f64());
    assert!(failures.is_empty(), "{} doc block problem(s):\n\n{}", failures.len(), failures.join("\n\n"));
}

// ---------------------------------------------------------------- the runner's own rules

#[test]
fn wildcards_match_what_they_should_and_nothing_else() {
    assert!(line_matches("sent mail-…", "sent mail-1796194715440-b478ca41"));
    assert!(line_matches("a [..] c", "a bbb c"));
    assert!(line_matches("x…y…z", "x1y2z"));
    assert!(!line_matches("x…y…z", "x1z"));
    assert!(!line_matches("sent", "sent mail"));
    assert!(!line_matches("ab…ba", "aba"));
    let e = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(lines_match(&e(&["a", "...", "d"]), &["a", "b", "c", "d"]));
    assert!(lines_match(&e(&["a", "...", "d"]), &["a", "d"]));
    assert!(!lines_match(&e(&["a", "d"]), &["a", "b", "d"]));
    assert!(!lines_match(&e(&["a"]), &["a", "b"]));
}

#[test]
fn console_blocks_split_into_commands_outputs_and_exit_codes() {
    let steps = console_steps("$ a \\\n  --x\nout\n\n$ b\n[exit 4]\n").unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0].command, "a \\\n  --x");
    assert_eq!(steps[0].expected, vec!["out"]);
    assert_eq!((steps[1].exit, steps[1].expected.len()), (4, 0));
    assert!(console_steps("output first\n$ a\n").is_err());
}

#[test]
fn a_failing_or_mismatching_block_fails_and_an_unmarked_one_is_caught() {
    let root = repo_root();
    let page = "<!-- not run: needs a GPU -->\n```sh\nnvidia-smi\n```\n\n```sh\nexit 3\n```\n\n```console\n$ echo hi\nho\n```\n\n```console\n$ (exit 4)\n[exit 4]\n$ echo 'id 42'\nid …\n```\n\n```\nbare\n```\n\n```text\npcmail send x\n```\n\n<!-- bench:b begin -->\nRecorded by …\n\n```text\npcmail mcp on the embedded default\n```\n<!-- bench:b end sha256=0 -->\n";
    let blocks = parse_blocks("t.md", page).unwrap();
    let t = run_file(&root, &blocks);
    assert_eq!(t.not_run, vec![("t.md:2".to_string(), "needs a GPU".to_string())]);
    assert_eq!(t.executed.len(), 1, "{:?} {:?}", t.executed, t.failures);
    assert!(t.executed[0].starts_with("t.md:15 "));
    assert_eq!(t.failures.len(), 4, "{:#?}", t.failures);
    assert!(t.failures[0].starts_with("t.md:6: exited Some(3)"));
    assert!(t.failures[1].starts_with("t.md:10: `echo hi` printed:"));
    assert!(t.failures[2].contains("without a language"));
    assert!(t.failures[3].contains("a command in a `text` block"));
    // A benchmark's recorded output is read, not taken for a command.
    assert!(blocks.last().unwrap().recorded && !blocks[blocks.len() - 2].recorded);
}

#[test]
fn links_to_missing_pages_and_headings_are_caught() {
    let root = repo_root();
    let readme = root.join("README.md");
    let bad = check_links(&root, &readme, "[a](docs/nope.md) [b](README.md#no-such-heading) [c](docs/agents.md)\n");
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert_eq!(anchors("# Leases (part 10)\n## A b\n## A b\n"), vec!["leases-part-10", "a-b", "a-b-1"]);
}
