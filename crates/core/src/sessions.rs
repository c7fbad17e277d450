//! Sessions and names (docs/protocol.md "Sessions and names"):
//! the live sessions a PC reports on its poll, the `name.take` and `who` ops'
//! arguments and answers, and the one rule for a name. Names and PC labels
//! share one namespace, so a name is spelled as a label is.

use crate::error::{ItemError, NoItemRef, ProtoError};
use crate::roster::is_valid_label;
use crate::rules::{check_session_id, clean_session_id};
use crate::Millis;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Most sessions one PC reports.
pub const SESSIONS_MAX: usize = 200;
/// Longest session id, repo, branch and cwd.
pub const SESSION_MAX_CHARS: usize = crate::rules::SESSION_ID_MAX_CHARS;
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
    /// The reported sessions the server refused, each on its own (the
    /// others were applied and the rest of the poll went on); `list` is
    /// always `live`.
    #[serde(default)]
    pub errors: Vec<ItemError>,
}

/// One entry of a reported list of live sessions: parsed and checked, or
/// refused on its own (one bad session never fails the others or the poll).
pub type LiveItem = Result<LiveSession, BadSession>;

#[derive(Debug, Clone, PartialEq)]
pub struct BadSession {
    pub index: usize,
    pub error: ProtoError,
}

impl BadSession {
    /// The item's entry in the answer's `sessions.errors`.
    pub fn to_error(&self) -> ItemError {
        ItemError::new("live", self.index, NoItemRef {}, &self.error)
    }
}

/// The sessions of a list that parsed.
pub fn good_sessions(items: &[LiveItem]) -> Vec<&LiveSession> {
    items.iter().filter_map(|s| s.as_ref().ok()).collect()
}

type M = Map<String, Value>;

fn text(m: &M, key: &str, field: &str) -> Result<Option<String>, ProtoError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ProtoError::field(field, format!("\"{field}\" must be a string"))),
    }
}

fn check_optional(field: &str, s: &Option<String>, max: usize) -> Result<(), ProtoError> {
    match s {
        Some(s) if s.chars().count() > max || s.chars().any(char::is_control) => Err(ProtoError::field(
            field,
            format!("{field} must be at most {max} characters with no control characters"),
        )),
        _ => Ok(()),
    }
}

/// The one check of a live session as its PC reports it, on the PC before
/// it sends the report and on both servers when they parse it (`at` is the
/// list's field): the id passes [`check_session_id`]; repo, branch and cwd
/// fit and carry no control characters; idle time is not negative; at most
/// 100 leases, each a resource name.
pub fn check_live_session(s: &LiveSession, at: &str) -> Result<(), ProtoError> {
    check_session_id(&format!("{at}.session"), &s.session)?;
    check_optional(&format!("{at}.repo"), &s.repo, REPO_MAX_CHARS)?;
    check_optional(&format!("{at}.branch"), &s.branch, BRANCH_MAX_CHARS)?;
    check_optional(&format!("{at}.cwd"), &s.cwd, CWD_MAX_CHARS)?;
    if s.idle_ms < 0 {
        return Err(ProtoError::field(&format!("{at}.idleMs"), "idleMs must be an integer >= 0"));
    }
    if s.leases.len() > LEASES_MAX {
        return Err(ProtoError::field(
            &format!("{at}.leases"),
            format!("leases must be an array of at most {LEASES_MAX} resources"),
        ));
    }
    if s.leases.iter().any(|r| crate::rules::check_resource(r).is_err()) {
        return Err(ProtoError::field(&format!("{at}.leases"), "leases must be lease resource names"));
    }
    Ok(())
}

/// A live session as the PC reports it, made to pass [`check_live_session`]
/// whatever its registry row holds (rows written before the rule, a folder
/// whose name holds a newline): the id through [`clean_session_id`] (None
/// when there is no id at all), a repo, branch or cwd that does not fit left
/// out, idle time at least 0, only leases that are resource names.
pub fn clean_live_session(s: LiveSession) -> Option<LiveSession> {
    let session = clean_session_id(&s.session)?;
    let keep = |v: Option<String>, max: usize| v.filter(|v| check_optional("x", &Some(v.clone()), max).is_ok());
    let mut leases: Vec<String> =
        s.leases.into_iter().filter(|r| crate::rules::check_resource(r).is_ok()).take(LEASES_MAX).collect();
    leases.dedup();
    Some(LiveSession {
        session,
        repo: keep(s.repo, REPO_MAX_CHARS),
        branch: keep(s.branch, BRANCH_MAX_CHARS),
        cwd: keep(s.cwd, CWD_MAX_CHARS),
        idle_ms: s.idle_ms.max(0),
        leases,
    })
}

/// A PC's whole report, cleaned: each session through [`clean_live_session`],
/// the first of two with the same id kept, at most [`SESSIONS_MAX`]. What it
/// gives is a list both servers take whole.
pub fn clean_live_list(list: impl IntoIterator<Item = LiveSession>) -> Vec<LiveSession> {
    let mut out: Vec<LiveSession> = vec![];
    for s in list.into_iter().filter_map(clean_live_session) {
        if out.len() == SESSIONS_MAX {
            break;
        }
        if !out.iter().any(|o| o.session == s.session) {
            out.push(s);
        }
    }
    out
}

fn one_session(v: &Value, at: &str) -> Result<LiveSession, ProtoError> {
    let m = v.as_object().ok_or_else(|| ProtoError::field(at, format!("each of {at} must be an object")))?;
    let session = match m.get("session") {
        None | Some(Value::Null) => {
            return Err(ProtoError::field(&format!("{at}.session"), format!("missing \"{at}.session\"")))
        }
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            return Err(ProtoError::field(&format!("{at}.session"), format!("\"{at}.session\" must be a string")))
        }
    };
    let repo = text(m, "repo", &format!("{at}.repo"))?;
    let branch = text(m, "branch", &format!("{at}.branch"))?;
    let cwd = text(m, "cwd", &format!("{at}.cwd"))?;
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
        Some(Value::Array(a)) if a.len() <= LEASES_MAX => a
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| ProtoError::field(&format!("{at}.leases"), "leases must be lease resource names"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(ProtoError::field(
                &format!("{at}.leases"),
                format!("leases must be an array of at most {LEASES_MAX} resources"),
            ))
        }
    };
    let s = LiveSession { session, repo, branch, cwd, idle_ms, leases };
    check_live_session(&s, at)?;
    Ok(s)
}

/// The list of live sessions under `field` (the poll's `sessions.live`,
/// `name.take`'s `live`). The list itself must be an array of at most 200
/// (the request's shape); each session is parsed and checked on its own,
/// and a session listed again is refused on its own (the first one counts).
pub fn parse_live(v: &Value, field: &str) -> Result<Vec<LiveItem>, ProtoError> {
    let a = v.as_array().ok_or_else(|| ProtoError::field(field, format!("\"{field}\" must be an array")))?;
    if a.len() > SESSIONS_MAX {
        return Err(ProtoError::field(field, format!("at most {SESSIONS_MAX} sessions in \"{field}\"")));
    }
    let mut out: Vec<LiveItem> = Vec::with_capacity(a.len());
    for (index, x) in a.iter().enumerate() {
        let item = one_session(x, field).and_then(|s| {
            if good_sessions(&out).iter().any(|o| o.session == s.session) {
                Err(ProtoError::field(field, format!("session {:?} is listed twice", s.session)))
            } else {
                Ok(s)
            }
        });
        out.push(item.map_err(|error| BadSession { index, error }));
    }
    Ok(out)
}

/// The poll's `sessions` argument: `{"live": [...]}`, the PC's whole list
/// (its good sessions replace the ones the server had).
pub fn parse_poll_sessions(v: &Value) -> Result<Vec<LiveItem>, ProtoError> {
    let m = v.as_object().ok_or_else(|| ProtoError::field("sessions", "\"sessions\" must be an object"))?;
    match m.get("live") {
        None | Some(Value::Null) => Ok(vec![]),
        Some(l) => parse_live(l, "sessions.live"),
    }
}

/// `name.take`: `{name, session, live?}`.
pub fn parse_take(m: &M) -> Result<(String, String, Option<Vec<LiveItem>>), ProtoError> {
    let name = match m.get("name") {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => return Err(ProtoError::field("name", "missing \"name\"")),
        Some(_) => return Err(ProtoError::field("name", "\"name\" must be a string")),
    };
    check_name("name", &name)?;
    let session = match m.get("session") {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => return Err(ProtoError::field("session", "missing \"session\"")),
        Some(_) => return Err(ProtoError::field("session", "\"session\" must be a string")),
    };
    check_session_id("session", &session)?;
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
    fn live_sessions_are_parsed_strictly_one_by_one() {
        let v = json!({"live": [{"session": "s1", "repo": "r", "idleMs": 5, "leases": ["db"]}, {"session": "s2"}]});
        let l = parse_poll_sessions(&v).unwrap();
        let l = good_sessions(&l);
        assert_eq!(l[0].leases, vec!["db".to_string()]);
        assert_eq!(l[1].idle_ms, 0);
        // A bad session is refused on its own: its index and field; the good ones stay.
        let item = |live: Value| {
            let l = parse_poll_sessions(&json!({ "live": live })).unwrap();
            let bad: Vec<(usize, String)> =
                l.iter().filter_map(|s| s.as_ref().err()).map(|b| (b.index, b.error.field.clone().unwrap())).collect();
            (good_sessions(&l).len(), bad)
        };
        assert_eq!(item(json!([{"session": ""}, {"session": "ok"}])), (1, vec![(0, "sessions.live.session".into())]));
        assert_eq!(item(json!([{"session": "a\nb"}])), (0, vec![(0, "sessions.live.session".into())]));
        assert_eq!(item(json!([{"session": "a\u{202e}b"}])), (0, vec![(0, "sessions.live.session".into())]));
        assert_eq!(item(json!([{"session": "a", "idleMs": -1}])), (0, vec![(0, "sessions.live.idleMs".into())]));
        assert_eq!(item(json!([{"session": "a", "cwd": "/x\ny"}])), (0, vec![(0, "sessions.live.cwd".into())]));
        assert_eq!(item(json!([{"session": "a"}, {"session": "a"}])), (1, vec![(1, "sessions.live".into())]));
        assert_eq!(item(json!([7, {"session": "b"}])), (1, vec![(0, "sessions.live".into())]));
        // The list's own shape is the request's: that still fails it.
        let field = |v: Value| parse_poll_sessions(&v).unwrap_err().field.unwrap();
        assert_eq!(field(json!({"live": 3})), "sessions.live");
        assert_eq!(field(json!({"live": vec![json!({"session": "a"}); SESSIONS_MAX + 1]})), "sessions.live");
        assert_eq!(field(json!([])), "sessions");
    }

    #[test]
    fn name_take_checks_its_session_by_the_one_rule() {
        let m = |v: Value| v.as_object().unwrap().clone();
        assert!(parse_take(&m(json!({"name": "ani", "session": "s1"}))).is_ok());
        for bad in ["", " ", "a\nb", "a\u{202e}b", &"s".repeat(101)] {
            let e = parse_take(&m(json!({"name": "ani", "session": bad}))).unwrap_err();
            assert_eq!(e.field.as_deref(), Some("session"), "{bad:?}");
        }
    }

    proptest::proptest! {
        // What the PC reports, cleaned, is a list both servers take whole:
        // no item refused, whatever the registry held.
        #[test]
        fn a_cleaned_report_is_taken_whole(
            rows in proptest::collection::vec(
                (proptest::prelude::any::<String>(), proptest::option::of(proptest::prelude::any::<String>()),
                 proptest::option::of("[\\PC\n\u{0}\u{202e}]{0,1200}"), proptest::prelude::any::<i64>(),
                 proptest::collection::vec(proptest::prelude::any::<String>(), 0..3)),
                0..12),
        ) {
            let list = rows.into_iter().map(|(session, repo, cwd, idle_ms, leases)| LiveSession {
                session, repo, branch: None, cwd, idle_ms, leases,
            });
            let cleaned = clean_live_list(list);
            let parsed = parse_poll_sessions(&json!({ "live": cleaned })).unwrap();
            proptest::prop_assert!(parsed.iter().all(Result::is_ok), "{:?}", parsed);
            proptest::prop_assert_eq!(parsed.len(), cleaned.len());
        }
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
