//! The Stop reminder: when a session did real work (its
//! transcript is longer than the configured threshold) and wrote no handoff,
//! Claude Code's Stop hook answers `{"decision":"block","reason":…}` once, so
//! the model writes one before it stops. Never when `stop_hook_active` is
//! true (Claude Code is already continuing because of a Stop hook), never
//! twice for one session (a record in the PC store), off by config.

use crate::repo::Repo;
use crate::{handoffs, names};
use pcmail_store::Store;
use serde_json::Value;
use std::path::PathBuf;

/// The Stop hook's JSON, the fields this reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopInput {
    pub session_id: String,
    pub cwd: Option<PathBuf>,
    pub transcript_path: Option<PathBuf>,
    pub stop_hook_active: bool,
}

impl StopInput {
    /// None for anything but a Stop event with a session id.
    pub fn parse(json: &[u8]) -> Option<StopInput> {
        let v: Value = serde_json::from_slice(json).ok()?;
        if v.get("hook_event_name")?.as_str()? != "Stop" {
            return None;
        }
        let session_id = v.get("session_id")?.as_str()?.trim().to_string();
        if session_id.is_empty() {
            return None;
        }
        let path = |k: &str| v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty()).map(PathBuf::from);
        Some(StopInput {
            session_id,
            cwd: path("cwd"),
            transcript_path: path("transcript_path"),
            // Anything but an explicit false counts as active: never block twice.
            stop_hook_active: v.get("stop_hook_active").map(|a| a.as_bool() != Some(false)).unwrap_or(false),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopConfig {
    pub enabled: bool,
    /// A transcript at least this long (bytes) is "real work".
    pub min_transcript_bytes: u64,
}

/// Why the hook stayed silent (tests and `--json` diagnostics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Block { reason: String },
    Off,
    StopHookActive,
    ShortTranscript { bytes: u64 },
    NoRepo,
    WroteHandoff { name: String },
    AlreadyReminded,
}

impl Outcome {
    /// The hook's stdout for this outcome.
    pub fn output(&self) -> Option<String> {
        match self {
            Outcome::Block { reason } => Some(serde_json::json!({"decision": "block", "reason": reason}).to_string()),
            _ => None,
        }
    }
}

/// The handoff this session wrote in the repo, if any: a name carrying the
/// session's first characters.
pub fn handoff_of_session(repo: &Repo, session: &str) -> Option<String> {
    let s8 = names::session8(session);
    handoffs::names_in(&repo.handoff_dir()).ok()?.into_iter().find(|(_, p)| p.session8 == s8).map(|(n, _)| n)
}

/// A session id as a shell word (Claude Code's are UUIDs; anything else is
/// cut to the safe characters).
fn shell_safe(s: &str) -> String {
    let t: String = s.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')).take(64).collect();
    if t.is_empty() {
        "session".into()
    } else {
        t
    }
}

pub fn reason_text(session: &str, transcript_bytes: u64) -> String {
    format!(
        "pcmail: this session did real work (transcript {} KB) and wrote no handoff. Before stopping, write one for the next \
         session: `PCMAIL_SESSION={} pcmail handoff new --slug SLUG --goal \"…\" --done \"… (with paths)\" --failed \"… and why\" \
         --state working|broken|blocked --next \"…\"` (or pipe the five sections as Markdown on stdin). If nothing is worth \
         handing off, say so and stop: this reminder comes once per session.",
        transcript_bytes / 1024,
        shell_safe(session)
    )
}

/// Every silent outcome that needs no store (config, `stop_hook_active`, a
/// short transcript, no repo, a handoff already written); None: ask the store.
pub fn precheck(input: &StopInput, cfg: StopConfig) -> Option<Outcome> {
    if !cfg.enabled {
        return Some(Outcome::Off);
    }
    if input.stop_hook_active {
        return Some(Outcome::StopHookActive);
    }
    let bytes = transcript_bytes(input);
    if bytes < cfg.min_transcript_bytes || input.transcript_path.is_none() {
        return Some(Outcome::ShortTranscript { bytes });
    }
    let Some(repo) = input.cwd.as_deref().and_then(|c| Repo::find(c).ok()) else {
        return Some(Outcome::NoRepo);
    };
    handoff_of_session(&repo, &input.session_id).map(|name| Outcome::WroteHandoff { name })
}

fn transcript_bytes(input: &StopInput) -> u64 {
    input.transcript_path.as_deref().and_then(|p| std::fs::metadata(p).ok()).map(|m| m.len()).unwrap_or(0)
}

/// Decides, recording the reminder in `store` when it blocks.
pub fn decide(
    store: &mut Store,
    input: &StopInput,
    cfg: StopConfig,
    now_ms: i64,
) -> Result<Outcome, crate::HandoffError> {
    if let Some(o) = precheck(input, cfg) {
        return Ok(o);
    }
    let bytes = transcript_bytes(input);
    if !store.stop_reminder_once(&input.session_id, now_ms, bytes as i64)? {
        return Ok(Outcome::AlreadyReminded);
    }
    Ok(Outcome::Block { reason: reason_text(&input.session_id, bytes) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_reads_the_stop_fields() {
        let j = br#"{"session_id":"abc","hook_event_name":"Stop","cwd":"/r","transcript_path":"/t.jsonl","stop_hook_active":false}"#;
        assert_eq!(
            StopInput::parse(j).unwrap(),
            StopInput {
                session_id: "abc".into(),
                cwd: Some("/r".into()),
                transcript_path: Some("/t.jsonl".into()),
                stop_hook_active: false
            }
        );
        assert!(
            StopInput::parse(br#"{"session_id":"abc","hook_event_name":"Stop","stop_hook_active":true}"#)
                .unwrap()
                .stop_hook_active
        );
        assert!(
            StopInput::parse(br#"{"session_id":"abc","hook_event_name":"Stop","stop_hook_active":"yes"}"#)
                .unwrap()
                .stop_hook_active
        );
        assert!(!StopInput::parse(br#"{"session_id":"abc","hook_event_name":"Stop"}"#).unwrap().stop_hook_active);
        assert_eq!(StopInput::parse(br#"{"session_id":"abc","hook_event_name":"SessionEnd"}"#), None);
        assert_eq!(StopInput::parse(br#"{"session_id":" ","hook_event_name":"Stop"}"#), None);
        assert!(reason_text("a b;$(x)", 2048).contains("PCMAIL_SESSION=abx pcmail handoff new"));
    }
}
