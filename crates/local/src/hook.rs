//! The Claude Code hook, shared by `pcmail-hook` and `pcmail hook`. On the hot
//! path before every prompt, so it does almost nothing: no network ever, one
//! SQLite file, a few indexed queries whose cost does not grow with the
//! backlog; any trouble means no output at all.

use crate::config::{Config, Paths};
use crate::{locks, spawn};
use pcmail_core::present::{present, Counts, PresentMail, PER_MAIL_CHARS};
use pcmail_core::{Kind, MarkOp, Millis, State};
use pcmail_store::hookview::{self, HookRank};
use pcmail_store::{inbox, marks, meta, Store, StoreError};
use serde_json::{json, Value};
use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A poll older than this makes the hook start a detached poller.
pub const STALE_POLL_MS: Millis = 3 * 60 * 1000;
/// Don't spawn pollers in a tight loop when they keep failing.
const RESPAWN_GAP_MS: Millis = 60 * 1000;
/// The longest the hook waits for the store's write lock.
pub const LOCK_BUDGET: Duration = Duration::from_millis(1500);
/// Hook input larger than this is not Claude Code's.
const STDIN_MAX: u64 = 1 << 20;

/// The Claude Code hook events pcmail handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    SessionStart,
    UserPromptSubmit,
    /// The lease guard will run here (nothing yet).
    PreToolUse,
    /// The handoff reminder (crate::handoff_hook, called from `main_with`).
    Stop,
    /// Leases will be released here (nothing yet).
    SessionEnd,
}

impl Event {
    pub fn parse(s: &str) -> Option<Event> {
        Some(match s {
            "SessionStart" => Event::SessionStart,
            "UserPromptSubmit" => Event::UserPromptSubmit,
            "PreToolUse" => Event::PreToolUse,
            "Stop" => Event::Stop,
            "SessionEnd" => Event::SessionEnd,
            _ => return None,
        })
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Event::SessionStart => "SessionStart",
            Event::UserPromptSubmit => "UserPromptSubmit",
            Event::PreToolUse => "PreToolUse",
            Event::Stop => "Stop",
            Event::SessionEnd => "SessionEnd",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookInput {
    pub session_id: String,
    pub event: Event,
    /// The session's working directory (Claude Code sends it with every event).
    pub cwd: Option<String>,
}

/// The hook JSON of a known event with a session id, or None: anything else
/// (garbage, an unknown event, no session) prints nothing and marks nothing.
pub fn parse_input(stdin: &[u8]) -> Option<HookInput> {
    let v: Value = serde_json::from_slice(stdin).ok()?;
    let event = Event::parse(v.get("hook_event_name")?.as_str()?)?;
    let session_id = v.get("session_id")?.as_str()?.trim();
    if session_id.is_empty() {
        return None;
    }
    let cwd = v.get("cwd").and_then(Value::as_str).filter(|c| !c.is_empty()).map(str::to_string);
    Some(HookInput { session_id: session_id.to_string(), event, cwd })
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
/// what to print. Silent on any trouble.
pub fn main_with(pcmail_exe: impl FnOnce() -> Option<PathBuf>) -> Option<String> {
    let mut raw = vec![];
    if !std::io::stdin().is_terminal() {
        let _ = std::io::stdin().take(STDIN_MAX).read_to_end(&mut raw);
    }
    let input = parse_input(&raw)?;
    let paths = Paths::from_env().ok()?;
    if input.event == Event::Stop {
        return crate::handoff_hook::on_stop(&paths, &raw, crate::system_now());
    }
    let r = dispatch(&paths, &input, crate::system_now()).ok()?;
    if r.spawn_poller {
        if let Some(exe) = pcmail_exe() {
            let _ = spawn::spawn_detached(&exe, &["sync", "--quiet"]);
        }
    }
    r.output
}

/// One dispatch on the event.
pub fn dispatch(paths: &Paths, input: &HookInput, now: Millis) -> Result<HookRun, Box<dyn std::error::Error>> {
    match input.event {
        Event::SessionStart | Event::UserPromptSubmit => run(paths, input, now),
        // Entry points for leases and handoffs; nothing to say yet.
        Event::PreToolUse | Event::Stop | Event::SessionEnd => Ok(HookRun::default()),
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
    let Some(mut store) = Store::open_existing(&paths.store(), LOCK_BUDGET)? else {
        // Never synced yet: get a poller going so there is a store next time.
        return Ok(HookRun { spawn_poller: !locks::poller_alive(paths), ..Default::default() });
    };
    let session = input.session_id.as_str();
    let actor = actor(&me, session);
    let limit = config.hook_session_mail_limit;

    // Choose and record in ONE write transaction: a second hook of this
    // session waits here and then sees what this one recorded.
    let p = store.write(|tx| {
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
            let budget = rank.category().budget();
            for &status in rank.open_statuses() {
                let (exp, seen_here) = (expired.get(rank, status), shown.get(rank, status));
                let v =
                    hookview::pair_view(tx, rank, status, session, server_now, PER_MAIL_CHARS * 2, budget, exp, seen_here)?;
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
        let p = present(&me, &candidates, &counts, server_now);
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
        Ok::<_, StoreError>((p, last_poll, last_spawn))
    })?;
    let (p, last_poll, last_spawn) = p;

    let spawn_poller =
        now - last_poll > STALE_POLL_MS && now - last_spawn > RESPAWN_GAP_MS && !locks::poller_alive(paths);
    if spawn_poller {
        let _ = store.meta_set_i64(meta::LAST_SPAWN_AT, now);
    }
    let mut text = p.text;
    if input.event == Event::SessionStart {
        if let Some(line) = code_map_line(input.cwd.as_deref(), text.chars().count()) {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&line);
        }
        // Issue 11: handoffs and memory, last in the budget.
        if let Some(part) = crate::handoff_hook::session_start_part(input.cwd.as_deref(), text.chars().count()) {
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
    Ok(HookRun { output, shown: p.shown, spawn_poller })
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
        assert_eq!(ok, HookInput { session_id: "abc".into(), event: Event::UserPromptSubmit, cwd: None });
        for e in ["SessionStart", "PreToolUse", "Stop", "SessionEnd"] {
            let v = format!(r#"{{"session_id":"s","hook_event_name":"{e}"}}"#);
            assert_eq!(parse_input(v.as_bytes()).unwrap().event.as_str(), e);
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
            br#"["UserPromptSubmit"]"#,
        ] {
            assert_eq!(parse_input(bad), None, "{}", String::from_utf8_lossy(bad));
        }
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

    // Issue 15: SessionStart says in one line that the code map is stale, with
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
        };
        let fresh = run(&paths, &input(Event::SessionStart), 1_000).unwrap();
        assert_eq!(fresh.output, None, "a fresh map says nothing");

        git_repo(repo.path(), &"b".repeat(40)); // HEAD moved
        let stale = run(&paths, &input(Event::SessionStart), 2_000).unwrap();
        let out = stale.output.expect("a stale map gets its line");
        let v: Value = serde_json::from_str(&out).unwrap();
        let text = v["hookSpecificOutput"]["additionalContext"].as_str().unwrap();
        assert!(text.starts_with("pcmail: Code map .claude/code-map.md is stale") && text.contains("`pcmail map`"), "{text}");
        assert!(text.chars().count() <= pcmail_core::present::TOTAL_CHARS);
        // Only at SessionStart, not before every prompt.
        assert_eq!(run(&paths, &input(Event::UserPromptSubmit), 3_000).unwrap().output, None);
        // The short form when the mail left little room.
        assert_eq!(code_map_line(input(Event::SessionStart).cwd.as_deref(), 1_780).as_deref(), None);
        assert!(code_map_line(input(Event::SessionStart).cwd.as_deref(), 1_700).unwrap().contains("pcmail map"));
    }
}
