//! The Claude Code hook, shared by `pcmail-hook` and `pcmail hook`. On the hot
//! path before every prompt, so it does almost nothing: no network ever, one
//! SQLite file, a few indexed queries whose cost does not grow with the
//! backlog; any trouble means no output at all.

use crate::config::{Config, Paths};
use crate::leases::{self as lease_view, Me};
use crate::{locks, process, repo, spawn};
use pcmail_core::present::{present_in, Counts, PresentMail, PER_MAIL_CHARS};
use pcmail_core::{Kind, MarkOp, Millis, State};
use pcmail_store::hookview::{self, HookRank};
use pcmail_store::leases as sl;
use pcmail_store::{inbox, marks, meta, Store, StoreError};
use serde_json::{json, Value};
use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};

/// A poll older than this makes the hook start a detached poller.
pub const STALE_POLL_MS: Millis = 3 * 60 * 1000;
/// Don't spawn pollers in a tight loop when they keep failing.
const RESPAWN_GAP_MS: Millis = 60 * 1000;
/// Hook input larger than this is not Claude Code's.
const STDIN_MAX: u64 = 1 << 20;

/// The hook events pcmail handles: Claude Code's (Codex CLI sends the same
/// names), and Gemini CLI's names for the same moments (its documented
/// Claude Code → Gemini mapping). Gemini reads the same
/// `hookSpecificOutput.additionalContext`; the output names the event as sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Event {
    SessionStart,
    #[default]
    UserPromptSubmit,
    /// The lease guard (Edit, Write, MultiEdit, NotebookEdit).
    PreToolUse,
    /// The handoff reminder (crate::handoff_hook, called from `main_with`).
    Stop,
    /// Records the session's end and queues the release of its leases.
    SessionEnd,
    /// Gemini CLI's UserPromptSubmit: after the prompt, before planning.
    BeforeAgent,
    /// Gemini CLI's PreToolUse (it answers a refusal with top-level
    /// `decision`/`reason`, not Claude Code's `permissionDecision`).
    BeforeTool,
    /// Gemini CLI's Stop (`decision: "deny"` there asks for another turn).
    AfterAgent,
}

impl Event {
    pub fn parse(s: &str) -> Option<Event> {
        Some(match s {
            "SessionStart" => Event::SessionStart,
            "UserPromptSubmit" => Event::UserPromptSubmit,
            "PreToolUse" => Event::PreToolUse,
            "Stop" => Event::Stop,
            "SessionEnd" => Event::SessionEnd,
            "BeforeAgent" => Event::BeforeAgent,
            "BeforeTool" => Event::BeforeTool,
            "AfterAgent" => Event::AfterAgent,
            _ => return None,
        })
    }
    /// The name as the agent sent it (echoed in `hookEventName`).
    pub fn as_str(self) -> &'static str {
        match self {
            Event::SessionStart => "SessionStart",
            Event::UserPromptSubmit => "UserPromptSubmit",
            Event::PreToolUse => "PreToolUse",
            Event::Stop => "Stop",
            Event::SessionEnd => "SessionEnd",
            Event::BeforeAgent => "BeforeAgent",
            Event::BeforeTool => "BeforeTool",
            Event::AfterAgent => "AfterAgent",
        }
    }
    /// The Claude Code event this one is: what the dispatch does for it.
    pub fn claude(self) -> Event {
        match self {
            Event::BeforeAgent => Event::UserPromptSubmit,
            Event::BeforeTool => Event::PreToolUse,
            Event::AfterAgent => Event::Stop,
            e => e,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HookInput {
    pub session_id: String,
    pub event: Event,
    /// The session's working directory (Claude Code sends it with every event).
    pub cwd: Option<String>,
    /// SessionStart's `source` (startup, resume, clear, compact) or
    /// SessionEnd's `reason` (clear, logout, prompt_input_exit, other …).
    pub source: Option<String>,
    /// PreToolUse: the tool's name.
    pub tool_name: Option<String>,
    /// PreToolUse: the file the tool edits (`file_path`, or `notebook_path`).
    pub file_path: Option<String>,
    /// PreToolUse of Codex's `apply_patch`: every file its patch text adds,
    /// updates, deletes or moves to ([`patch_paths`]).
    pub patch_paths: Vec<String>,
}

/// The files a Codex `apply_patch` patch writes: the paths after `*** Add
/// File: `, `*** Update File: `, `*** Delete File: ` and `*** Move to: `, in
/// order, each once.
pub fn patch_paths(patch: &str) -> Vec<String> {
    const MARKERS: [&str; 4] = ["*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "];
    let mut out: Vec<String> = vec![];
    for line in patch.lines() {
        let line = line.trim_end_matches('\r');
        if let Some(p) = MARKERS.iter().find_map(|m| line.strip_prefix(m)) {
            let p = p.trim();
            if !p.is_empty() && !out.iter().any(|x| x == p) {
                out.push(p.to_string());
            }
        }
    }
    out
}

/// The hook JSON of a known event with a session id, or None: anything else
/// (garbage, an unknown event, no session) prints nothing and marks nothing.
pub fn parse_input(stdin: &[u8]) -> Option<HookInput> {
    let v: Value = serde_json::from_slice(stdin).ok()?;
    let event = Event::parse(v.get("hook_event_name")?.as_str()?)?;
    // An id the servers would refuse (a newline, a NUL, a bidi override, too
    // long) is cleaned here, before anything records it: it travels on in
    // every poll's `sessions.live`, and in lease claims and name takes.
    let session_id = pcmail_core::rules::clean_session_id(v.get("session_id")?.as_str()?.trim())?;
    let text = |v: Option<&Value>| v.and_then(Value::as_str).filter(|c| !c.is_empty()).map(str::to_string);
    let cwd = text(v.get("cwd"));
    let source = text(v.get("source")).or_else(|| text(v.get("reason")));
    let tool_name = text(v.get("tool_name"));
    let tool_input = v.get("tool_input");
    let file_path = tool_input.and_then(|t| text(t.get("file_path")).or_else(|| text(t.get("notebook_path"))));
    // Codex sends apply_patch's patch text as `command` (`input` in some releases).
    let patch_paths = match (tool_name.as_deref(), tool_input) {
        (Some("apply_patch"), Some(t)) => {
            text(t.get("command")).or_else(|| text(t.get("input"))).map(|p| patch_paths(&p)).unwrap_or_default()
        }
        _ => vec![],
    };
    Some(HookInput { session_id, event, cwd, source, tool_name, file_path, patch_paths })
}

/// What the hook decided; `output` is the JSON to print (None: print nothing).
#[derive(Debug, Default)]
pub struct HookRun {
    pub output: Option<String>,
    pub shown: Vec<String>,
    pub spawn_poller: bool,
}

/// The whole hook as both binaries run it: read stdin, dispatch, start a
/// poller if one is due (`pcmail_exe` finds the `pcmail` binary), and return
/// what to print. Silent on any trouble. Once per process, which exits
/// after it: the prompt's store is left to that exit, not closed
/// (`EXITS_AFTER_DISPATCH`); a process that goes on calls [`dispatch`].
pub fn main_with(pcmail_exe: impl FnOnce() -> Option<PathBuf>) -> Option<String> {
    let mut raw = vec![];
    if !std::io::stdin().is_terminal() {
        let _ = std::io::stdin().take(STDIN_MAX).read_to_end(&mut raw);
    }
    let input = parse_input(&raw)?;
    if plugin_defers(&input) {
        return None;
    }
    let paths = Paths::from_env().ok()?;
    if input.event == Event::Stop {
        return crate::handoff_hook::on_stop(&paths, &raw, crate::system_now());
    }
    // Both binaries exit once this returns: the store's close can be left to the exit.
    EXITS_AFTER_DISPATCH.store(true, std::sync::atomic::Ordering::Relaxed);
    let r = dispatch(&paths, &input, crate::system_now()).ok()?;
    if r.spawn_poller {
        if let Some(exe) = pcmail_exe() {
            let _ = spawn::spawn_detached(&exe, &["sync", "--quiet"]);
        }
    }
    r.output
}

/// `PCMAIL_HOOK_ORIGIN` is `plugin` in the commands of the Claude Code plugin's
/// hooks file. A plugin's hooks are static, so when `pcmail hooks install`
/// also registered this event in a settings file Claude Code reads (the
/// user's, the project's or its local one), both run; the plugin's then
/// stays silent and the settings entry acts, once. An entry whose program is
/// gone does not count (it could not act).
pub fn plugin_defers(input: &HookInput) -> bool {
    if std::env::var("PCMAIL_HOOK_ORIGIN").ok().as_deref() != Some("plugin") {
        return false;
    }
    let project =
        std::env::var_os("CLAUDE_PROJECT_DIR").map(PathBuf::from).or_else(|| input.cwd.clone().map(PathBuf::from));
    settings_register(input.event.as_str(), project.as_deref())
}

/// Whether a settings file Claude Code reads registers pcmail's hook for `event`.
pub fn settings_register(event: &str, project: Option<&Path>) -> bool {
    let mut files: Vec<PathBuf> = pcmail_claude_hooks::default_settings_path().into_iter().collect();
    if let Some(p) = project {
        files.push(p.join(".claude").join("settings.json"));
        files.push(p.join(".claude").join("settings.local.json"));
    }
    files
        .iter()
        .any(|f| pcmail_claude_hooks::status(f).is_ok_and(|s| s.hooks.iter().any(|h| h.event == event && h.exe_exists)))
}

/// Set by [`main_with`], whose process exits after it: the prompt's store
/// then leaves without SQLite's close ([`Store::leave_before_exit`]).
/// Callers of [`dispatch`] that go on (tests, a long-lived process) close it.
static EXITS_AFTER_DISPATCH: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// One dispatch on the event.
pub fn dispatch(paths: &Paths, input: &HookInput, now: Millis) -> Result<HookRun, Box<dyn std::error::Error>> {
    match input.event.claude() {
        Event::SessionStart | Event::UserPromptSubmit => run(paths, input, now),
        Event::PreToolUse => Ok(HookRun { output: guard(paths, input, now)?, ..Default::default() }),
        Event::SessionEnd => session_end(paths, input, now),
        // The entry point for handoffs; nothing to say yet.
        Event::Stop => Ok(HookRun::default()),
        // Gemini's names arrive here as Claude Code's (`claude()`).
        _ => Ok(HookRun::default()),
    }
}

/// The actor name marks carry: the one rule in pcmail-core (`label/` and
/// the session id's first 8 safe characters), with `session` standing in when
/// nothing of the id survives.
fn actor(me: &str, session: &str) -> String {
    let a = pcmail_core::rules::actor(me, Some(session));
    if a.contains('/') {
        a
    } else {
        format!("{a}/session")
    }
}

/// Shows this session's mail. Never touches the network.
pub fn run(paths: &Paths, input: &HookInput, now: Millis) -> Result<HookRun, Box<dyn std::error::Error>> {
    let config = Config::load(paths)?;
    let me = config.label.clone();
    let Some(mut store) = Store::open_existing(&paths.store(), crate::locks::HOOK_LOCK_BUDGET)? else {
        // Never synced yet: get a poller going so there is a store next time.
        return Ok(HookRun { spawn_poller: !locks::poller_alive(paths), ..Default::default() });
    };
    let session = input.session_id.as_str();
    let actor = actor(&me, session);
    let limit = config.hook_session_mail_limit;
    let registry = session_row(&store, input, now);

    // Choose and record in ONE transaction: a second hook of this session
    // that must record too waits for this one's commit and then sees what
    // it recorded. A caught-up prompt records nothing, so it begins as a
    // read and stays one; one that must write after another hook's commit
    // runs again as a write from the start.
    let p = store.write_if_needed(|tx| {
        match &registry {
            Registry::Prompted { last } => {
                if pcmail_core::due::prompt_record_due(*last, now) {
                    sl::session_prompted(tx, session, now)?;
                }
            }
            Registry::Record(row) => sl::session_record(tx, row)?,
        }
        let lost = sl::lost_take_untold(tx, session, now)?;
        // Jobs this session submitted that ended: told once.
        let finished = pcmail_store::jobs::finished_take_untold(tx, session, now, FINISHED_JOBS_SHOWN)?;
        // Fewer than asked for: the take left none untold.
        let finished_more = if finished.len() < FINISHED_JOBS_SHOWN {
            0
        } else {
            pcmail_store::jobs::finished_untold_count(tx, session)?
        };
        let viewed_at = hookview::meta_i64(tx, meta::INBOX_VIEWED_AT)?.unwrap_or(0);
        let room = if limit > 0 {
            Some(limit.saturating_sub(hookview::may_wait_shown_since(tx, session, viewed_at)?))
        } else {
            None
        };
        // Expiry and age are judged by the server's clock (this PC's offset
        // from it, kept by the poller); what the hook records uses this PC's.
        let server_now = now + hookview::meta_i64(tx, meta::SERVER_OFFSET_MS)?.unwrap_or(0);
        let mut candidates: Vec<PresentMail> = vec![];
        let mut counts = Counts { room, ..Counts::default() };
        let expired = hookview::expired_open(tx, server_now)?;
        let shown = hookview::shown_to_session(tx, session, server_now)?;
        for rank in HookRank::ALL {
            // Under the backlog bound nothing that may wait is shown, only
            // counted: its mails are not read (a long session's usual prompt).
            let budget = if rank.may_wait() && room == Some(0) { 0 } else { rank.category().budget() };
            for &status in rank.open_statuses() {
                let (exp, seen_here) = (expired.get(rank, status), shown.get(rank, status));
                let v = hookview::pair_view(
                    tx,
                    rank,
                    status,
                    session,
                    server_now,
                    PER_MAIL_CHARS * 2,
                    budget,
                    exp,
                    seen_here,
                )?;
                counts.expired += exp;
                let more = v.waiting - v.mails.len();
                match rank {
                    HookRank::Decision | HookRank::UrgentRequest | HookRank::UrgentNote => counts.more_urgent += more,
                    HookRank::Request => counts.more_requests += more,
                    HookRank::ReplyToMine | HookRank::Note => counts.more_notes += more,
                }
                candidates.extend(v.mails.into_iter().map(|m| PresentMail {
                    kind: Kind::classify(m.kind, &m.subject),
                    id: m.id,
                    from: m.from,
                    urgent: m.urgent,
                    reply_to_mine: m.reply_to_mine,
                    subject: m.subject,
                    body: m.body,
                    created_at: m.created_at,
                }));
            }
        }
        // What this session was shown and is still open: notes it saw count
        // too (they are `seen`, which is not a status the hook shows notes in).
        counts.already_shown = [State::New, State::Seen]
            .iter()
            .map(|&st| HookRank::ALL.iter().map(|&r| shown.get(r, st)).sum::<usize>())
            .sum();
        // The kind badges in the user's language (LANG / LC_MESSAGES).
        let p = present_in(&me, &candidates, &counts, server_now, crate::config::user_lang());
        for id in &p.shown {
            hookview::record_presented(tx, session, id, now)?;
            inbox::advance(tx, id, State::Seen, now, &actor, None)?;
            marks::queue(tx, id, MarkOp::Seen, now, &actor, None)?;
            // A reply to my mail is answered by being read: ack it once shown.
            if candidates.iter().any(|m| &m.id == id && m.reply_to_mine && m.kind == Kind::Note) {
                inbox::advance(tx, id, State::Done, now, &actor, None)?;
                marks::queue(tx, id, MarkOp::Ack, now, &actor, None)?;
            }
        }
        let last_poll = hookview::meta_i64(tx, meta::LAST_POLL_OK_AT)?.unwrap_or(0);
        let last_spawn = hookview::meta_i64(tx, meta::LAST_SPAWN_AT)?.unwrap_or(0);
        Ok::<_, StoreError>((p, last_poll, last_spawn, lost, finished, finished_more))
    })?;
    let (p, last_poll, last_spawn, lost, finished, finished_more) = p;

    let spawn_poller =
        now - last_poll > STALE_POLL_MS && now - last_spawn > RESPAWN_GAP_MS && !locks::poller_alive(paths);
    if spawn_poller {
        let _ = store.meta_set_i64(meta::LAST_SPAWN_AT, now);
    }
    // The shared budget's order, the same for every hook: mail; one line per lost lease
    // and the stale code map; then leases others hold in this repo.
    let mut text = p.text;
    let push = |text: &mut String, line: &str| {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(line);
    };
    for l in &lost {
        let line = lease_view::lost_line(l);
        if text.chars().count() + 1 + line.chars().count() <= pcmail_core::present::TOTAL_CHARS {
            push(&mut text, &line);
        }
    }
    for j in &finished {
        let line = job_line(j);
        if text.chars().count() + 1 + line.chars().count() <= pcmail_core::present::TOTAL_CHARS {
            push(&mut text, &line);
        }
    }
    if finished_more > 0 {
        let line = format!("pcmail: {finished_more} more job(s) of yours ended (`pcmail job list --mine`)");
        if text.chars().count() + 1 + line.chars().count() <= pcmail_core::present::TOTAL_CHARS {
            push(&mut text, &line);
        }
    }
    if input.event == Event::SessionStart {
        if let Some(line) = code_map_line(input.cwd.as_deref(), text.chars().count()) {
            push(&mut text, &line);
        }
        let repo_id = match &registry {
            Registry::Record(row) => row.repo.clone(),
            Registry::Prompted { .. } => None,
        };
        if let Some(repo_id) = repo_id {
            let room = pcmail_core::present::TOTAL_CHARS.saturating_sub(text.chars().count() + 1);
            let leases = sl::cache_list(store.conn(), Some(&repo_id)).unwrap_or_default();
            let mine = Me::load(store.conn(), &me, session);
            if let Some(lines) = lease_view::others_lines(&leases, &mine, now + server_offset(&store), room) {
                push(&mut text, &lines);
            }
        }
        // Handoffs and memory, last in the budget.
        if let Some(part) = crate::handoff_hook::session_start_part(paths, input.cwd.as_deref(), text.chars().count()) {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&part);
        }
    }
    let output = (!text.is_empty()).then(|| {
        json!({
            "hookSpecificOutput": {
                "hookEventName": input.event.as_str(),
                "additionalContext": text,
            }
        })
        .to_string()
    });
    if EXITS_AFTER_DISPATCH.load(std::sync::atomic::Ordering::Relaxed) {
        store.leave_before_exit();
    }
    Ok(HookRun { output, shown: p.shown, spawn_poller })
}

/// Ended jobs told per hook run; the rest become a count.
const FINISHED_JOBS_SHOWN: usize = 3;

/// One line for a job of this session that ended: its outcome, never its
/// output (the executor's text is neutralised and cut short).
pub fn job_line(j: &pcmail_store::jobs::MyJob) -> String {
    use pcmail_core::present::{neutralise, truncate_chars};
    let v: serde_json::Value = j.job.as_deref().and_then(|t| serde_json::from_str(t).ok()).unwrap_or_default();
    let result = &v["result"];
    let mut detail = vec![];
    if let Some(e) = result["exit"].as_i64() {
        detail.push(format!("exit {e}"));
    }
    if result["ran"] == serde_json::json!(false) {
        detail.push("not run".into());
    }
    let list = |k: &str| {
        result[k]
            .as_array()
            .map(|a| a.iter().filter_map(|x| x.as_str()).collect::<Vec<_>>().join(", "))
            .unwrap_or_default()
    };
    let reused = list("reused");
    if !reused.is_empty() {
        detail.push(format!("reused {}", truncate_chars(&neutralise(&reused), 100)));
    }
    let artifacts = list("artifacts");
    if !artifacts.is_empty() {
        detail.push(format!("artifacts {}", truncate_chars(&neutralise(&artifacts), 100)));
    }
    if let Some(r) = v["reason"].as_str() {
        detail.push(truncate_chars(&neutralise(r), 120));
    }
    format!(
        "pcmail: job {} ({} on {}) ended {}{} — `pcmail job status {}`",
        j.job_id,
        truncate_chars(&neutralise(&j.command), 40),
        truncate_chars(&neutralise(&j.target), 40),
        j.state,
        if detail.is_empty() { String::new() } else { format!(": {}", detail.join("; ")) },
        j.job_id
    )
}

/// What this hook run records in the session registry.
enum Registry {
    /// Known process, same folder: only the prompt time (the cheap path),
    /// and that only when the recorded one is a step old.
    Prompted {
        last: Option<Millis>,
    },
    Record(sl::SessionRow),
}

/// The registry row for this run: the Claude Code process the hook runs
/// under (PID + start time), the folder, its repo and branch. The repo is
/// looked up only when the session is new or moved (SessionStart always).
fn session_row(store: &Store, input: &HookInput, now: Millis) -> Registry {
    let proc = process::claude_ancestor();
    let known = sl::session_get(store.conn(), &input.session_id).ok().flatten();
    if let Some(k) = &known {
        let same = k.pid == proc.map(|p| p.pid) && k.pid_start == proc.and_then(|p| p.start) && k.cwd == input.cwd;
        if same && input.event != Event::SessionStart && k.ended_at.is_none() {
            return Registry::Prompted { last: k.last_prompt_at };
        }
    }
    let info = input.cwd.as_deref().and_then(|c| repo::identify(Path::new(c)));
    Registry::Record(sl::SessionRow {
        session: input.session_id.clone(),
        pid: proc.map(|p| p.pid),
        pid_start: proc.and_then(|p| p.start),
        cwd: input.cwd.clone(),
        repo: info.as_ref().map(|i| i.id.clone()),
        branch: info.and_then(|i| i.branch),
        started_at: known.map(|k| k.started_at).unwrap_or(now),
        last_prompt_at: (input.event == Event::UserPromptSubmit).then_some(now),
        ended_at: None,
        end_reason: None,
    })
}

fn server_offset(store: &Store) -> Millis {
    store.meta_i64(meta::SERVER_OFFSET_MS).ok().flatten().unwrap_or(0)
}

/// The tools whose edits the lease guard checks: Claude Code's (Codex CLI
/// sends the same names), and Gemini CLI's file-writing tools (`write_file`,
/// `replace`: its tools reference), which take `file_path` too.
pub const GUARDED_TOOLS: [&str; 7] =
    ["Edit", "Write", "MultiEdit", "NotebookEdit", "write_file", "replace", "apply_patch"];

/// PreToolUse: denies an edit of a file under another session's exclusive
/// lease in the same repo, from the local cache only. Otherwise no decision
/// at all (an `allow` would skip the user's permission prompt); one line of
/// context when the cache is older than 10 minutes.
pub fn guard(paths: &Paths, input: &HookInput, now: Millis) -> Result<Option<String>, Box<dyn std::error::Error>> {
    if !input.tool_name.as_deref().is_some_and(|t| GUARDED_TOOLS.contains(&t)) {
        return Ok(None);
    }
    // Every file the call writes (a patch may touch several): the first refusal wins.
    let mut context = None;
    for file in input.file_path.iter().chain(&input.patch_paths) {
        match guard_file(paths, input, file, now)? {
            Some(GuardSays::Deny(reason)) => return Ok(Some(guard_output(input.event, GuardSays::Deny(reason)))),
            Some(c) if context.is_none() => context = Some(c),
            _ => {}
        }
    }
    Ok(context.map(|c| guard_output(input.event, c)))
}

/// The guard for one file the tool writes.
fn guard_file(
    paths: &Paths,
    input: &HookInput,
    file: &str,
    now: Millis,
) -> Result<Option<GuardSays>, Box<dyn std::error::Error>> {
    let mut path = PathBuf::from(file);
    if path.is_relative() {
        let Some(cwd) = input.cwd.as_deref() else { return Ok(None) };
        path = Path::new(cwd).join(path);
    }
    // The cheap refusals first: outside any repo, no store to open. A path
    // too long or deep to resolve within the bounds is refused, not let
    // through unchecked.
    let mut repos = match repo::repo_relative_all(&path) {
        Ok(r) => r,
        Err(repo::Unresolvable(why)) => {
            return Ok(Some(GuardSays::Deny(format!(
                "pcmail: this path cannot be checked against the repo's leases ({why}); refused"
            ))))
        }
    };
    // A file with other hard links is the same file under other names: each
    // of them in a checkout with leases is checked as well.
    match hard_link_names(paths, &path, &repos) {
        Ok(names) => {
            for name in names {
                for (info, rel) in repo::repo_relative_all(&name).unwrap_or_default() {
                    if !repos.iter().any(|(i, r)| i.id == info.id && *r == rel) {
                        repos.push((info, rel));
                    }
                }
            }
        }
        Err(why) => {
            return Ok(Some(GuardSays::Deny(format!(
                "pcmail: this file has other hard links and {why}, so it cannot be checked against the leases; refused"
            ))))
        }
    }
    // Every enclosing repo (a nested `.git` does not hide a file from the
    // outer repo's leases): the first refusal wins.
    let mut context = None;
    for (info, rel) in &repos {
        match guard_in(paths, input, info, rel, now)? {
            Some(GuardSays::Deny(r)) => return Ok(Some(GuardSays::Deny(r))),
            Some(c) if context.is_none() => context = Some(c),
            _ => {}
        }
    }
    Ok(context)
}

/// At most this many folder entries are looked at to find the other names
/// of a hard-linked file (about a tenth of a second): past it the edit is
/// refused rather than let through unchecked.
pub const LINK_SEARCH_ENTRIES: usize = 200_000;

/// The other names of `path` when it is a regular file with more than one
/// link, in this PC's checkouts of repos with exclusive leases (from the
/// guard file, which the poller writes) and in the repos holding `path`.
/// A single-link file, the usual case, costs one stat; nothing is searched
/// when no exclusive lease is known. Err: the search went past its bound.
fn hard_link_names(paths: &Paths, path: &Path, repos: &[(repo::RepoInfo, String)]) -> Result<Vec<PathBuf>, String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirEntryExt, MetadataExt};
        let Ok(meta) = std::fs::metadata(path) else { return Ok(vec![]) };
        if !meta.is_file() || meta.nlink() <= 1 {
            return Ok(vec![]);
        }
        let Some(file) = lease_view::GuardFile::read(&paths.home) else { return Ok(vec![]) };
        let mut roots: Vec<PathBuf> = file.checkouts.iter().map(|(_, r)| PathBuf::from(r)).collect();
        if roots.is_empty() {
            // No exclusive lease in any repo this PC works in.
            return Ok(vec![]);
        }
        for (info, _) in repos {
            if !roots.contains(&info.root) {
                roots.push(info.root.clone());
            }
        }
        // An outer checkout already covers the folders of one inside it.
        roots.sort();
        roots.dedup_by(|inner, outer| inner.starts_with(outer));
        let (dev, ino) = (meta.dev(), meta.ino());
        let (mut left, mut found) = (LINK_SEARCH_ENTRIES, vec![]);
        let mut stack = roots;
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for e in entries.flatten() {
                left = left.checked_sub(1).ok_or("its checkouts are too large to search for them")?;
                let Ok(kind) = e.file_type() else { continue };
                if kind.is_dir() {
                    if e.file_name() != ".git" {
                        stack.push(e.path());
                    }
                } else if kind.is_file()
                    && e.ino() == ino
                    && e.metadata().is_ok_and(|m| m.dev() == dev && m.ino() == ino)
                {
                    found.push(e.path());
                }
            }
        }
        Ok(found)
    }
    #[cfg(not(unix))]
    {
        let _ = (paths, path, repos);
        Ok(vec![])
    }
}

/// The guard for one file as one repo names it.
fn guard_in(
    paths: &Paths,
    input: &HookInput,
    info: &repo::RepoInfo,
    rel: &str,
    now: Millis,
) -> Result<Option<GuardSays>, Box<dyn std::error::Error>> {
    // The guard file the poller writes: an edit no lease covers opens no
    // SQLite and reads no config. No file (no poll since this version, or a
    // failed write, which removes it), an unreadable or a damaged one: the
    // store below decides, as it did before the file existed.
    if let Some(file) = lease_view::GuardFile::read(&paths.home) {
        if let Some(leases) = file.covering_exclusive(&info.id, rel) {
            if !leases.is_empty() {
                let config = Config::load(paths)?;
                // The session's own fences live in the store: opened only when
                // a covering lease is this PC's under another session id.
                let own = if leases.iter().any(|l| l.holder_pc == config.label && l.holder_session != input.session_id)
                {
                    let Some(store) = Store::open_existing(&paths.store(), crate::locks::HOOK_LOCK_BUDGET)? else {
                        return Ok(None);
                    };
                    sl::fences_of_session(store.conn(), &input.session_id).unwrap_or_default()
                } else {
                    vec![]
                };
                let me = Me { pc: &config.label, session: &input.session_id, own };
                if let Some((l, _)) = lease_view::blocking(&leases, &me, rel) {
                    return Ok(Some(GuardSays::Deny(lease_view::refusal(l, rel, now + file.offset))));
                }
            }
            return Ok(lease_view::age_line(file.at, now).map(GuardSays::Context));
        }
    }
    let Some(store) = Store::open_existing(&paths.store(), crate::locks::HOOK_LOCK_BUDGET)? else { return Ok(None) };
    // Only the leases covering this file are read whole; the config and the
    // session's own leases only when one does.
    let leases = lease_view::covering_exclusive(store.conn(), &info.id, rel)?;
    if !leases.is_empty() {
        let config = Config::load(paths)?;
        let me = Me::load(store.conn(), &config.label, &input.session_id);
        if let Some((l, _)) = lease_view::blocking(&leases, &me, rel) {
            return Ok(Some(GuardSays::Deny(lease_view::refusal(l, rel, now + server_offset(&store)))));
        }
    }
    Ok(lease_view::cache_age_line(store.conn(), now).map(GuardSays::Context))
}

/// What the guard has to say: a refusal, or a line of context.
pub enum GuardSays {
    Deny(String),
    Context(String),
}

/// The guard's answer in the agent's own shape: Claude Code's
/// `hookSpecificOutput.permissionDecision`; Gemini CLI's `BeforeTool` reads
/// a top-level `decision`/`reason` (the reason goes to the model as the
/// tool's error) and has no context for a tool call, so the note about an
/// old lease view goes to the user as its `systemMessage`.
pub fn guard_output(event: Event, says: GuardSays) -> String {
    match (event, says) {
        (Event::BeforeTool, GuardSays::Deny(reason)) => json!({ "decision": "deny", "reason": reason }),
        (Event::BeforeTool, GuardSays::Context(line)) => json!({ "systemMessage": line }),
        (_, GuardSays::Deny(reason)) => json!({ "hookSpecificOutput": {
            "hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": reason } }),
        (_, GuardSays::Context(line)) => json!({ "hookSpecificOutput": {
            "hookEventName": "PreToolUse", "additionalContext": line } }),
    }
    .to_string()
}

/// SessionEnd: records the end; unless the reason is `clear` or `resume`
/// (the process goes on under a new id), queues the release of the
/// session's leases for the poller, and starts one if none runs.
pub fn session_end(paths: &Paths, input: &HookInput, now: Millis) -> Result<HookRun, Box<dyn std::error::Error>> {
    let Some(mut store) = Store::open_existing(&paths.store(), crate::locks::HOOK_LOCK_BUDGET)? else {
        return Ok(HookRun::default());
    };
    let reason = input.source.clone().unwrap_or_else(|| "other".into());
    let release = !matches!(reason.as_str(), "clear" | "resume");
    let proc = if release { process::claude_ancestor() } else { None };
    let queued = store.write(|tx| {
        let mut n = sl::session_end(tx, &input.session_id, &reason, now, release)?;
        if let Some(p) = proc {
            n += sl::queue_release_of_process(tx, p.pid, p.start, &format!("session ended ({reason})"), now)?;
        }
        Ok(n)
    })?;
    Ok(HookRun { spawn_poller: queued > 0 && !locks::poller_alive(paths), ..Default::default() })
}

/// At SessionStart, one line when the repo's code map is stale (read from the
/// `.git` files: no `git` process), within what is left of the 1,800-char
/// budget after the mail; a short form when the full line does not fit.
fn code_map_line(cwd: Option<&str>, used: usize) -> Option<String> {
    let line = pcmail_codemap_check::stale_line_from(Path::new(cwd?))?;
    let full = format!("pcmail: {}", pcmail_core::present::neutralise(&line));
    let short = "pcmail: the code map is stale: pcmail map".to_string();
    let room = pcmail_core::present::TOTAL_CHARS.saturating_sub(used + 1);
    [full, short].into_iter().find(|l| l.chars().count() <= room)
}

/// `pcmail` next to `exe`, else on PATH.
pub fn find_pcmail(exe: Option<PathBuf>) -> Option<PathBuf> {
    let name = if cfg!(windows) { "pcmail.exe" } else { "pcmail" };
    if let Some(dir) = exe.as_ref().and_then(|e| e.parent()) {
        let p = dir.join(name);
        if p.is_file() {
            return Some(p);
        }
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(name)).find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_hook_json_of_a_known_event_is_input() {
        let ok = parse_input(br#"{"session_id":"abc","hook_event_name":"UserPromptSubmit","prompt":"hi"}"#).unwrap();
        assert_eq!(ok, HookInput { session_id: "abc".into(), event: Event::UserPromptSubmit, ..Default::default() });
        for e in ["SessionStart", "PreToolUse", "Stop", "SessionEnd", "BeforeAgent", "BeforeTool", "AfterAgent"] {
            let v = format!(r#"{{"session_id":"s","hook_event_name":"{e}"}}"#);
            assert_eq!(parse_input(v.as_bytes()).unwrap().event.as_str(), e);
        }
        // Gemini CLI's names do what Claude Code's do.
        for (gemini, claude) in
            [("BeforeAgent", "UserPromptSubmit"), ("BeforeTool", "PreToolUse"), ("AfterAgent", "Stop")]
        {
            assert_eq!(Event::parse(gemini).unwrap().claude(), Event::parse(claude).unwrap());
        }
        for bad in [
            &b"garbage"[..],
            b"",
            b"{}",
            br#"{"session_id":"abc"}"#,
            br#"{"hook_event_name":"UserPromptSubmit"}"#,
            br#"{"session_id":"  ","hook_event_name":"UserPromptSubmit"}"#,
            br#"{"session_id":7,"hook_event_name":"UserPromptSubmit"}"#,
            br#"{"session_id":"abc","hook_event_name":"Notification"}"#,
            br#"{"session_id":"abc","hook_event_name":"BeforeModel"}"#,
            br#"["UserPromptSubmit"]"#,
        ] {
            assert_eq!(parse_input(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn apply_patch_input_names_every_file_the_patch_writes() {
        let patch = "*** Begin Patch\n*** Add File: src/new.rs\n+fn x() {}\n*** Update File: src/auth/login.rs\n*** Move to: src/auth/signin.rs\n@@\n-a\n+b\n*** Delete File: old.txt\n*** Update File: src/new.rs\n*** End Patch\n";
        assert_eq!(patch_paths(patch), ["src/new.rs", "src/auth/login.rs", "src/auth/signin.rs", "old.txt"]);
        assert!(patch_paths("*** Begin Patch\n+*** Add File: not-a-header\n*** End Patch").is_empty());
        let v = serde_json::json!({"session_id": "s", "hook_event_name": "PreToolUse", "cwd": "/r",
            "tool_name": "apply_patch", "tool_input": {"command": patch}});
        let i = parse_input(v.to_string().as_bytes()).unwrap();
        assert_eq!(i.patch_paths.len(), 4);
        assert_eq!(i.file_path, None);
        // The same text under another tool is not a patch.
        let v = serde_json::json!({"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash",
            "tool_input": {"command": patch}});
        assert!(parse_input(v.to_string().as_bytes()).unwrap().patch_paths.is_empty());
    }

    #[test]
    fn actor_names_are_sanitised_not_refused() {
        assert_eq!(actor("pc-b", "ab\ncdefghij"), "pc-b/abcdefgh");
        assert_eq!(actor("pc-b", "\u{202e}\n"), "pc-b/session");
    }
}

#[cfg(test)]
mod code_map_tests {
    use super::*;

    fn git_repo(dir: &Path, commit: &str) {
        std::fs::create_dir_all(dir.join(".git/refs/heads")).unwrap();
        std::fs::write(dir.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(dir.join(".git/refs/heads/main"), format!("{commit}\n")).unwrap();
    }

    // SessionStart says in one line that the code map is stale, with
    // the command that refreshes it; nothing when it is fresh.
    #[test]
    fn session_start_names_a_stale_code_map_within_the_budget() {
        let home = tempfile::tempdir().unwrap();
        let repo = tempfile::tempdir().unwrap();
        let paths = Paths::at(home.path());
        Store::open(&paths.store()).unwrap();
        git_repo(repo.path(), &"a".repeat(40));
        std::fs::create_dir_all(repo.path().join(".claude")).unwrap();
        std::fs::write(repo.path().join(".claude/code-map.md"), "# map\n").unwrap();
        let head = pcmail_codemap_check::read_head(repo.path()).unwrap().as_stamp();
        let stamp = pcmail_codemap_check::Stamp {
            head,
            inputs: "x".into(),
            map_file: ".claude/code-map.md".into(),
            command: "pcmail map".into(),
        };
        assert!(pcmail_codemap_check::write_stamp(repo.path(), &stamp).unwrap());
        let input = |event| HookInput {
            session_id: "s1".into(),
            event,
            cwd: Some(repo.path().join(".claude").to_string_lossy().into_owned()),
            ..Default::default()
        };
        let fresh = run(&paths, &input(Event::SessionStart), 1_000).unwrap();
        assert_eq!(fresh.output, None, "a fresh map says nothing");

        git_repo(repo.path(), &"b".repeat(40)); // HEAD moved
        let stale = run(&paths, &input(Event::SessionStart), 2_000).unwrap();
        let out = stale.output.expect("a stale map gets its line");
        let v: Value = serde_json::from_str(&out).unwrap();
        let text = v["hookSpecificOutput"]["additionalContext"].as_str().unwrap();
        assert!(
            text.starts_with("pcmail: Code map .claude/code-map.md is stale") && text.contains("`pcmail map`"),
            "{text}"
        );
        assert!(text.chars().count() <= pcmail_core::present::TOTAL_CHARS);
        // Only at SessionStart, not before every prompt.
        assert_eq!(run(&paths, &input(Event::UserPromptSubmit), 3_000).unwrap().output, None);
        // The short form when the mail left little room.
        assert_eq!(code_map_line(input(Event::SessionStart).cwd.as_deref(), 1_780).as_deref(), None);
        assert!(code_map_line(input(Event::SessionStart).cwd.as_deref(), 1_700).unwrap().contains("pcmail map"));
    }
}
