//! Sessions and names (issue 11 §1, docs/protocol.md "Sessions and names"):
//! the live sessions a PC reports on its poll, the `name.take` and `who` ops'
//! arguments and answers, and the one rule for a name. Names and PC labels
//! share one namespace, so a name is spelled as a label is.

use crate::error::ProtoError;
use crate::roster::is_valid_label;
use crate::Millis;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Most sessions one PC reports.
pub const SESSIONS_MAX: usize = 200;
/// Longest session id, repo, branch and cwd.
pub const SESSION_MAX_CHARS: usize = 100;
pub const REPO_MAX_CHARS: usize = 500;
pub const BRANCH_MAX_CHARS: usize = 250;
pub const CWD_MAX_CHARS: usize = 1_000;
/// Most lease resources listed per session.
pub const LEASES_MAX: usize = 100;
/// A PC's report counts while it is this recent (each poll renews it): a PC
/// that stopped polling has no live sessions (its daemon polls every few
/// seconds and a long poll waits at most 25 s).
pub const REPORT_FRESH_MS: Millis = 3 * 60_000;

/// The one rule for a name, on the CLI and both servers: a label's spelling
/// (lower-case a-z 0-9 . _ -, 1 to 40, starting with a letter or digit).
/// Exact: nothing is folded or trimmed (`Ani` is refused, not lower-cased).
pub fn check_name(field: &str, name: &str) -> Result<(), ProtoError> {
    if is_valid_label(name) {
        Ok(())
    } else {
        Err(ProtoError::field(
            field,
            format!("{field} {name:?} is not a valid name (names are spelled as PC labels: lower-case a-z 0-9 . _ -, max 40)"),
        ))
    }
}

/// One live session as its PC reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct LiveSession {
    pub session: String,
    #[serde(default)]
    pub repo: Option<String>,
    #[serde(default)]
    pub branch: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    /// Milliseconds since its last prompt (or its start), by the PC's clock.
    #[serde(default)]
    pub idle_ms: Millis,
    /// Resources of the leases it holds.
    #[serde(default)]
    pub leases: Vec<String>,
}

/// A session in `who`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WhoSession {
    pub pc: String,
    pub session: String,
    pub name: Option<String>,
    pub repo: Option<String>,
    pub branch: Option<String>,
    pub cwd: Option<String>,
    /// Idle time now: the reported idle time plus the time since the report.
    pub idle_ms: Millis,
    pub leases: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WhoAnswer {
    pub sessions: Vec<WhoSession>,
    /// Names without a live session, with their last holder.
    #[serde(default)]
    pub idle_names: Vec<NameHolder>,
}

/// Who holds a name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NameHolder {
    pub name: String,
    pub pc: String,
    pub session: String,
    #[serde(default)]
    pub since: Millis,
}

/// The answer of `name.take`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TakeAnswer {
    pub name: String,
    pub holder: NameHolder,
    /// The holder before, when the name moved.
    pub previous: Option<NameHolder>,
    pub changed: bool,
    /// Unseen mail to the name that now goes to this PC.
    #[serde(default)]
    pub requeued: usize,
}

/// The poll's `sessions` answer: the names this PC's sessions hold, and the
/// mail to a name that moved away (to be dropped from this PC's store).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct PollSessionsAnswer {
    pub names: Vec<NameHolder>,
    #[serde(default)]
    pub withdrawn: Vec<String>,
}

type M = Map<String, Value>;

fn text(m: &M, key: &str, field: &str, max: usize, required: bool) -> Result<Option<String>, ProtoError> {
    match m.get(key) {
        None | Some(Value::Null) if !required => Ok(None),
        None | Some(Value::Null) => Err(ProtoError::field(field, format!("missing \"{field}\""))),
        Some(Value::String(s)) => {
            if s.chars().count() > max || s.chars().any(char::is_control) || (required && s.is_empty()) {
                return Err(ProtoError::field(
                    field,
                    format!("{field} must be 1-{max} characters with no control characters"),
                ));
            }
            Ok(Some(s.clone()))
        }
        Some(_) => Err(ProtoError::field(field, format!("\"{field}\" must be a string"))),
    }
}

fn one_session(v: &Value, at: &str) -> Result<LiveSession, ProtoError> {
    let m = v.as_object().ok_or_else(|| ProtoError::field(at, format!("each of {at} must be an object")))?;
    let session = text(m, "session", &format!("{at}.session"), SESSION_MAX_CHARS, true)?.unwrap_or_default();
    let repo = text(m, "repo", &format!("{at}.repo"), REPO_MAX_CHARS, false)?;
    let branch = text(m, "branch", &format!("{at}.branch"), BRANCH_MAX_CHARS, false)?;
    let cwd = text(m, "cwd", &format!("{at}.cwd"), CWD_MAX_CHARS, false)?;
    let idle_ms = match m.get("idleMs") {
        None | Some(Value::Null) => 0,
        Some(Value::Number(n)) => n
            .as_i64()
            .filter(|&x| x >= 0)
            .ok_or_else(|| ProtoError::field(&format!("{at}.idleMs"), "idleMs must be an integer >= 0"))?,
        Some(_) => return Err(ProtoError::field(&format!("{at}.idleMs"), "idleMs must be an integer >= 0")),
    };
    let leases = match m.get("leases") {
        None | Some(Value::Null) => vec![],
        Some(Value::Array(a)) if a.len() <= LEASES_MAX => {
            a.iter()
                .map(|x| {
                    x.as_str().filter(|s| crate::rules::check_resource(s).is_ok()).map(str::to_string).ok_or_else(
                        || ProtoError::field(&format!("{at}.leases"), "leases must be lease resource names"),
                    )
                })
                .collect::<Result<_, _>>()?
        }
        Some(_) => {
            return Err(ProtoError::field(
                &format!("{at}.leases"),
                format!("leases must be an array of at most {LEASES_MAX} resources"),
            ))
        }
    };
    Ok(LiveSession { session, repo, branch, cwd, idle_ms, leases })
}

/// The list of live sessions under `field` (the poll's `sessions.live`, `name.take`'s `live`).
pub fn parse_live(v: &Value, field: &str) -> Result<Vec<LiveSession>, ProtoError> {
    let a = v.as_array().ok_or_else(|| ProtoError::field(field, format!("\"{field}\" must be an array")))?;
    if a.len() > SESSIONS_MAX {
        return Err(ProtoError::field(field, format!("at most {SESSIONS_MAX} sessions in \"{field}\"")));
    }
    let out: Vec<LiveSession> = a.iter().map(|x| one_session(x, field)).collect::<Result<_, _>>()?;
    for (i, s) in out.iter().enumerate() {
        if out[..i].iter().any(|o| o.session == s.session) {
            return Err(ProtoError::field(field, format!("session {:?} is listed twice", s.session)));
        }
    }
    Ok(out)
}

/// The poll's `sessions` argument: `{"live": [...]}`, the PC's whole list
/// (it replaces the one the server had).
pub fn parse_poll_sessions(v: &Value) -> Result<Vec<LiveSession>, ProtoError> {
    let m = v.as_object().ok_or_else(|| ProtoError::field("sessions", "\"sessions\" must be an object"))?;
    match m.get("live") {
        None | Some(Value::Null) => Ok(vec![]),
        Some(l) => parse_live(l, "sessions.live"),
    }
}

/// `name.take`: `{name, session, live?}`.
pub fn parse_take(m: &M) -> Result<(String, String, Option<Vec<LiveSession>>), ProtoError> {
    let name = text(m, "name", "name", 40, true)?.unwrap_or_default();
    check_name("name", &name)?;
    let session = text(m, "session", "session", SESSION_MAX_CHARS, true)?.unwrap_or_default();
    let live = match m.get("live") {
        None | Some(Value::Null) => None,
        Some(l) => Some(parse_live(l, "live")?),
    };
    Ok((name, session, live))
}

/// Idle time as people read it: `12s`, `4m`, `3h05m`, `2d`.
pub fn idle_text(ms: Millis) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=86_399 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d", s / 86_400),
    }
}

/// The note of the timeline entry (`delivered`, by `server`) that tells the
/// PC a mail to `name` was delivered to that it left: the name moved to `to_pc`.
pub fn withdrawn_note(name: &str, to_pc: &str) -> String {
    format!("withdrawn: the name {name} moved to {to_pc}")
}

/// The note of the `delivered` entry when mail re-queued after its name
/// moved reaches the PC the name moved to.
pub fn redelivered_note(name: &str) -> String {
    format!("delivered again: the name {name} moved here")
}

/// Where mail addressed to a name is, for alert and webhook text: the name
/// is never presented as a PC label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecipientAt<'a> {
    /// Mail to a PC label.
    Label,
    /// Mail to a name: its holder, and whether that session is live.
    Name { pc: &'a str, session: &'a str, live: bool },
}

/// The recipient as alert text names it: the label, or the name with the PC
/// holding it ("ani (held by pc-b/t1)") or that no live session holds it.
pub fn recipient_text(to: &str, at: &RecipientAt<'_>) -> String {
    match at {
        RecipientAt::Label => to.to_string(),
        RecipientAt::Name { pc, session, live: true } => format!("the name {to} (held by {pc}/{session})"),
        RecipientAt::Name { pc, session, live: false } => {
            format!("the name {to} (no live session holds it; last held by {pc}/{session})")
        }
    }
}

/// The `unseen` alert's message (both servers word it so).
pub fn unseen_alert_message(id: &str, from: &str, to: &str, at: &RecipientAt<'_>, urgent: bool, ago: &str) -> String {
    format!(
        "pcmail: {}mail {id} from {from} to {} was delivered {ago} ago and nobody has read it",
        if urgent { "urgent " } else { "" },
        recipient_text(to, at)
    )
}

/// The `undelivered` alert's message: the poller to check is the label's,
/// or the PC holding the name; with no live holder, the mail waits for one.
pub fn undelivered_alert_message(id: &str, from: &str, to: &str, at: &RecipientAt<'_>, ago: &str) -> String {
    let hint = match at {
        RecipientAt::Label => format!("is the poller on {to} running?"),
        RecipientAt::Name { pc, live: true, .. } => format!("is the poller on {pc} running?"),
        RecipientAt::Name { live: false, .. } => format!("it waits until a session takes {to}"),
    };
    format!("pcmail: mail {id} from {from} to {} is not delivered after {ago} ({hint})", recipient_text(to, at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_name_is_spelled_as_a_label_exactly() {
        for ok in ["ani", "vasya", "a1", "build.bot", "x_y-z"] {
            check_name("name", ok).unwrap();
        }
        for bad in ["Ani", "", " ani", "ani ", "-ani", "*", "a/b", &"a".repeat(41)] {
            assert_eq!(check_name("name", bad).unwrap_err().field.as_deref(), Some("name"), "{bad:?}");
        }
    }

    #[test]
    fn live_sessions_are_parsed_strictly() {
        let v = json!({"live": [{"session": "s1", "repo": "r", "idleMs": 5, "leases": ["db"]}, {"session": "s2"}]});
        let l = parse_poll_sessions(&v).unwrap();
        assert_eq!(l[0].leases, vec!["db".to_string()]);
        assert_eq!(l[1].idle_ms, 0);
        let field = |v: Value| parse_poll_sessions(&v).unwrap_err().field.unwrap();
        assert_eq!(field(json!({"live": [{"session": ""}]})), "sessions.live.session");
        assert_eq!(field(json!({"live": [{"session": "a", "idleMs": -1}]})), "sessions.live.idleMs");
        assert_eq!(field(json!({"live": [{"session": "a"}, {"session": "a"}]})), "sessions.live");
        assert_eq!(field(json!({"live": 3})), "sessions.live");
        assert_eq!(field(json!([])), "sessions");
    }

    #[test]
    fn idle_reads_well() {
        assert_eq!(idle_text(12_000), "12s");
        assert_eq!(idle_text(4 * 60_000), "4m");
        assert_eq!(idle_text(3 * 3_600_000 + 5 * 60_000), "3h05m");
        assert_eq!(idle_text(3 * 86_400_000), "3d");
    }

    #[test]
    fn alert_text_names_the_name_and_its_pc_never_the_name_as_a_pc() {
        let label = unseen_alert_message("m1", "pc-a", "pc-b", &RecipientAt::Label, false, "6h 01m");
        assert_eq!(label, "pcmail: mail m1 from pc-a to pc-b was delivered 6h 01m ago and nobody has read it");
        let live = RecipientAt::Name { pc: "pc-b", session: "t1", live: true };
        let text = unseen_alert_message("m1", "pc-a", "ani", &live, true, "2h 01m");
        assert!(text.contains("to the name ani (held by pc-b/t1)"), "{text}");
        let gone = RecipientAt::Name { pc: "pc-b", session: "t1", live: false };
        let text = undelivered_alert_message("m2", "pc-a", "ani", &gone, "31m");
        assert!(text.contains("no live session holds it"), "{text}");
        assert!(!text.contains("poller on ani"), "{text}");
        let text = undelivered_alert_message("m2", "pc-a", "ani", &live, "31m");
        assert!(text.ends_with("(is the poller on pc-b running?)"), "{text}");
    }
}
