//! One function per pcmail operation that reads or writes mail, with typed
//! arguments and serialisable results. The `pcmail` CLI and `pcmail mcp` are
//! two thin front ends over these functions, so the same input gives the same
//! result through both (tests in crates/mcp prove it op by op).
//!
//! The argument types derive `JsonSchema`: they are the MCP tools' input
//! schemas. Field names are what an agent passes.

pub mod admin;
pub mod codemap;
mod error;
pub mod export;
pub mod features;
pub mod handoffs;
pub mod jobs;
pub mod lease_checks;
pub mod leases;
pub mod sessions;
pub mod setup;

pub use error::{exit_of_client, ApiError, Exit};

use pcmail_client::ops::{Draft, Expires, SendOutcome};
use pcmail_client::sync::CycleReport;
use pcmail_client::{notify, Client, ClientError};
use pcmail_core::answers::AlertsAnswer;
use pcmail_core::protocol::Op;
use pcmail_core::{Alert, Kind, Mail, MarkOp, Millis, Pc, State};
use pcmail_local::config::Paths;
use pcmail_local::locks;
use pcmail_store::{InboxMail, SentMail, Store};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::Duration;

pub type Result<T> = std::result::Result<T, ApiError>;

/// Default seconds to wait with `wait_for` (the CLI's `--timeout`).
pub const DEFAULT_WAIT_SECS: u64 = 300;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MailKind {
    #[default]
    Note,
    /// A work request (shown as [作業依頼]).
    Request,
    /// A decision request (shown first, as [判断依頼]).
    Decision,
}

impl From<MailKind> for Kind {
    fn from(k: MailKind) -> Kind {
        match k {
            MailKind::Note => Kind::Note,
            MailKind::Request => Kind::Request,
            MailKind::Decision => Kind::Decision,
        }
    }
}

/// A state to wait for (a final one also ends the wait).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WaitState {
    Delivered,
    Seen,
    Done,
}

impl From<WaitState> for State {
    fn from(w: WaitState) -> State {
        match w {
            WaitState::Delivered => State::Delivered,
            WaitState::Seen => State::Seen,
            WaitState::Done => State::Done,
        }
    }
}

/// Whom `send` writes to: one address, or a list of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Addresses {
    One(String),
    Many(Vec<String>),
}

impl Default for Addresses {
    fn default() -> Self {
        Addresses::One(String::new())
    }
}

impl From<&str> for Addresses {
    fn from(a: &str) -> Addresses {
        Addresses::One(a.to_string())
    }
}

impl Addresses {
    /// As the client takes it: a list of one is one address.
    pub fn to(&self) -> Result<pcmail_core::To> {
        match self {
            Addresses::One(a) => Ok(pcmail_core::To::One(a.clone())),
            Addresses::Many(v) if v.is_empty() => Err(ApiError::Usage("send needs at least one address".into())),
            Addresses::Many(v) if v.len() == 1 => Ok(pcmail_core::To::One(v[0].clone())),
            Addresses::Many(v) => Ok(pcmail_core::To::Many(v.clone())),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = optional_not_null)]
pub struct SendArgs {
    /// An exact roster label, number, hostname or session name; `*`: every PC; or a list of them.
    pub to: Addresses,
    #[serde(default)]
    pub kind: MailKind,
    #[serde(default)]
    pub subject: Option<String>,
    pub body: String,
    #[serde(default)]
    pub urgent: bool,
    /// Expiry: a duration (30m, 2h, 3d) or an RFC 3339 time.
    #[serde(default)]
    pub expires: Option<String>,
    /// Written by a program, not at a person's request.
    #[serde(default)]
    pub auto: bool,
    /// Wait until every copy reaches this state before answering.
    #[serde(default)]
    pub wait_for: Option<WaitState>,
    /// Seconds to wait with wait_for (default 300).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SendResult {
    #[serde(flatten)]
    pub outcome: SendOutcome,
    /// With `wait_for`: every copy's timeline once it got there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mails: Option<Vec<Mail>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct IdsArgs {
    /// Mail ids (a broadcast's original id expands to its copies).
    pub ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StatusResult {
    pub mails: Vec<Mail>,
    /// Ids the server does not know (the CLI exits 7 after printing the rest).
    pub missing: Vec<String>,
    /// Mail to a name no live session holds: why it waits (id, note).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<(String, String)>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = optional_not_null)]
pub struct WaitForArgs {
    pub ids: Vec<String>,
    pub state: WaitState,
    /// Give up (timeout) after this many seconds (default 300).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct MailsResult {
    pub mails: Vec<Mail>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = optional_not_null)]
pub struct InboxArgs {
    /// Also done, failed, expired.
    #[serde(default)]
    pub all: bool,
    // At most this many. No doc comment: the schema's `default` says it, and
    // every character of a default tool's schema is paid in every session.
    #[serde(default = "default_inbox_limit")]
    pub limit: usize,
    /// A previous answer's `next`.
    #[serde(default)]
    pub before: Option<String>,
    /// Whole mails, not summaries.
    #[serde(default)]
    pub full: bool,
}

fn default_inbox_limit() -> usize {
    50
}

impl Default for InboxArgs {
    fn default() -> Self {
        InboxArgs { all: false, limit: default_inbox_limit(), before: None, full: false }
    }
}

/// How much of a body a summary shows.
pub const PREVIEW_CHARS: usize = 160;

/// A mail as an inbox page lists it: enough to choose what to read, not the
/// whole body and timeline (`read` gives those), so a page of fifty stays
/// small in an agent's context.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MailSummary {
    pub id: String,
    pub from: String,
    pub kind: Kind,
    pub subject: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub urgent: bool,
    pub status: State,
    pub created_at: Millis,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Millis>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<String>,
    /// The body's first PREVIEW_CHARS characters, with "…" when there is more.
    pub preview: String,
    /// The whole body's length in characters.
    pub body_chars: usize,
}

impl From<&InboxMail> for MailSummary {
    fn from(m: &InboxMail) -> MailSummary {
        // Characters, not bytes: a cut inside a multibyte character would not be text.
        let body_chars = m.body.chars().count();
        let mut preview: String = m.body.chars().take(PREVIEW_CHARS).collect();
        if body_chars > PREVIEW_CHARS {
            preview.push('…');
        }
        MailSummary {
            id: m.id.clone(),
            from: m.from.clone(),
            kind: m.kind,
            subject: m.subject.clone(),
            urgent: m.urgent,
            status: m.status,
            created_at: m.created_at,
            expires_at: m.expires_at,
            in_reply_to: m.in_reply_to.clone(),
            preview,
            body_chars,
        }
    }
}

/// An inbox page's mails: whole (`full`) or summaries.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum InboxMails {
    Full(Vec<InboxMail>),
    Summary(Vec<MailSummary>),
}

impl InboxMails {
    pub fn len(&self) -> usize {
        match self {
            InboxMails::Full(v) => v.len(),
            InboxMails::Summary(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn ids(&self) -> Vec<&str> {
        match self {
            InboxMails::Full(v) => v.iter().map(|m| m.id.as_str()).collect(),
            InboxMails::Summary(v) => v.iter().map(|m| m.id.as_str()).collect(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct InboxResult {
    pub mails: InboxMails,
    /// There is older mail: pass this as `before` for the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SentArgs {
    /// At most this many, newest first (default 30).
    #[serde(default = "default_sent_limit")]
    pub limit: usize,
}

fn default_sent_limit() -> usize {
    30
}

impl Default for SentArgs {
    fn default() -> Self {
        SentArgs { limit: default_sent_limit() }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SentResult {
    pub mails: Vec<SentMail>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct IdArgs {
    pub id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct FailArgs {
    pub id: String,
    /// Why it failed (recorded on the timeline).
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Marked {
    pub id: String,
    pub state: State,
    /// Marks queued locally that the server has not confirmed yet.
    pub pending_marks: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ReplyArgs {
    /// The mail to answer (in this PC's inbox; not itself a reply).
    pub id: String,
    pub body: String,
    #[serde(default)]
    pub auto: bool,
    /// Also answer the mail's other recipients.
    #[serde(default)]
    pub all: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, Default)]
pub struct NoArgs {}

#[derive(Debug, Clone, Serialize)]
pub struct RosterResult {
    pub pcs: Vec<Pc>,
    /// This PC's label.
    pub me: String,
    /// Set when the server was unreachable and this is the cached roster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreachable: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = optional_not_null)]
pub struct RosterAddArgs {
    /// Lower-case a-z 0-9 . _ - (max 40).
    pub label: String,
    pub hostname: String,
    /// A working number (default: the next free one).
    #[serde(default)]
    pub number: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RosterRemoveArgs {
    pub label: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, Default)]
pub struct AlertsArgs {
    /// Include resolved alerts.
    #[serde(default)]
    pub all: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct AlertsResult {
    pub alerts: Vec<Alert>,
    /// Set when the server was unreachable and these are the cached alerts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreachable: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SyncResult {
    /// Why no cycle ran (another sync or the daemon does the work).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    #[serde(flatten)]
    pub report: Option<CycleReport>,
}

/// An optional argument is left out, never `null`: its schema drops the
/// `null` alternative (`"type": ["string", "null"]` or an `anyOf` with a
/// null branch), which tool-schema dialects with one `type` per property
/// (Gemini's function declarations) can't express.
fn optional_not_null(schema: &mut schemars::Schema) {
    let required: Vec<Value> = schema.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
    let Some(Value::Object(props)) = schema.get_mut("properties") else { return };
    for (name, prop) in props.iter_mut() {
        if required.contains(&Value::String(name.clone())) {
            continue;
        }
        let Value::Object(p) = prop else { continue };
        if let Some(Value::Array(types)) = p.get("type") {
            let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
            if kept.len() == 1 {
                p.insert("type".into(), kept[0].clone());
            }
        }
        if let Some(Value::Array(any)) = p.get("anyOf") {
            let kept: Vec<Value> = any.iter().filter(|b| b.get("type").is_none_or(|t| t != "null")).cloned().collect();
            if kept.len() == 1 {
                p.remove("anyOf");
                if let Value::Object(branch) = &kept[0] {
                    for (k, v) in branch {
                        p.insert(k.clone(), v.clone());
                    }
                }
            }
        }
    }
}

/// A duration flag (`--timeout`, `--ttl`, a join code's `--expires`): the
/// one parser of pcmail-core, its refusal naming the flag.
pub fn parse_duration(flag: &str, s: &str) -> Result<Millis> {
    pcmail_core::duration::parse_ms(s).map_err(|e| ApiError::Usage(format!("{flag} {:?}: {e}", s.trim())))
}

/// A mail's `--expires`: a duration as every flag takes it, or an RFC 3339
/// time; the server turns either into an expiry by its own clock.
pub fn parse_expires(s: &str) -> Result<Expires> {
    use pcmail_core::duration::{parse_ms, DurationError};
    let s = s.trim();
    match parse_ms(s) {
        Ok(ms) => return Ok(Expires::In(ms)),
        Err(e @ (DurationError::NotPositive | DurationError::TooLong)) => {
            return Err(ApiError::Usage(format!("--expires {s:?}: {e}")))
        }
        Err(DurationError::NotADuration) => {}
    }
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Ok(Expires::At(t.timestamp_millis()));
    }
    Err(ApiError::Usage(format!("--expires {s:?}: {}, or an RFC 3339 time", pcmail_core::duration::HINT)))
}

/// Sends without waiting (the CLI prints this before it waits).
pub fn send_only(client: &mut Client, args: &SendArgs) -> Result<SendOutcome> {
    let expires = args.expires.as_deref().map(parse_expires).transpose()?;
    let draft = Draft {
        to: args.to.to()?,
        kind: args.kind.into(),
        subject: args.subject.clone().unwrap_or_default(),
        body: args.body.clone(),
        urgent: args.urgent,
        expires,
        auto: args.auto,
    };
    Ok(client.send(draft)?)
}

/// Waits for every copy of what `out` sent (a broadcast's original id expands).
pub fn wait_for_sent(client: &mut Client, out: &SendOutcome, state: WaitState, timeout_secs: u64) -> Result<Vec<Mail>> {
    let originals: BTreeSet<String> = out.ids.iter().map(|i| i.split('~').next().unwrap_or(i).to_string()).collect();
    let mut all = vec![];
    for id in originals {
        all.extend(client.wait_for(&id, state.into(), Duration::from_secs(timeout_secs))?);
    }
    Ok(all)
}

/// `send`: one mail (or a broadcast), and with `wait_for` the timelines once every copy got there.
pub fn send(client: &mut Client, args: &SendArgs) -> Result<SendResult> {
    let outcome = send_only(client, args)?;
    let mails = match args.wait_for {
        Some(w) => {
            // What the wait learns lands on the `sent` rows: they must exist.
            client.settle_deferred()?;
            Some(wait_for_sent(client, &outcome, w, args.timeout_secs.unwrap_or(DEFAULT_WAIT_SECS))?)
        }
        None => None,
    };
    Ok(SendResult { outcome, mails })
}

/// `status`: the server's whole timeline of each id; unknown ids in `missing`.
pub fn status(client: &mut Client, args: &IdsArgs) -> Result<StatusResult> {
    if args.ids.is_empty() {
        return Err(ApiError::Usage("status needs at least one mail id".into()));
    }
    let (mails, missing, waiting) = client.status_noting_waits(&args.ids)?;
    Ok(StatusResult { mails, missing, waiting })
}

/// `status`'s timelines as JSON, each mail to a name no live session holds
/// with why it waits (`waiting`, from `StatusResult::waiting`).
pub fn status_json(mails: &[Mail], waiting: &[(String, String)]) -> Result<Value> {
    let mut v = serde_json::to_value(mails).map_err(|e| ApiError::Local(e.to_string()))?;
    for m in v.as_array_mut().into_iter().flatten() {
        if let Some((_, note)) = waiting.iter().find(|(id, _)| m["id"] == serde_json::json!(id)) {
            m["waiting"] = serde_json::json!(note);
        }
    }
    Ok(v)
}

/// `wait_for`: blocks until every copy of every id reached `state` (or a final state); `timeout` after `timeout_secs`.
pub fn wait_for(client: &mut Client, args: &WaitForArgs) -> Result<MailsResult> {
    if args.ids.is_empty() {
        return Err(ApiError::Usage("wait_for needs at least one mail id".into()));
    }
    let timeout = Duration::from_secs(args.timeout_secs.unwrap_or(DEFAULT_WAIT_SECS));
    let mut mails = vec![];
    for id in &args.ids {
        mails.extend(client.wait_for(id, args.state.into(), timeout)?);
    }
    Ok(MailsResult { mails })
}

/// `inbox`: from the PC store only (no server, no token: works offline).
pub fn inbox(paths: &Paths, args: &InboxArgs) -> Result<InboxResult> {
    inbox_in(&mut Store::open(&paths.store())?, args)
}

/// `inbox` on a store already open (`pcmail mcp` keeps one between calls).
pub fn inbox_in(store: &mut Store, args: &InboxArgs) -> Result<InboxResult> {
    if args.limit == 0 {
        return Err(ApiError::Usage("inbox: limit must be at least 1".into()));
    }
    let filter: &[State] = if args.all { &[] } else { &[State::New, State::Seen] };
    // One row more than asked tells whether older mail exists without counting it.
    let mut rows = store.inbox_page(filter, args.limit.saturating_add(1), args.before.as_deref(), args.full)?;
    let next = if rows.len() > args.limit {
        rows.truncate(args.limit);
        rows.last().map(|m| m.id.clone())
    } else {
        None
    };
    // Every session's backlog bound starts again (the hook counts what it shows after this).
    store.meta_set_i64(pcmail_store::meta::INBOX_VIEWED_AT, pcmail_local::system_now())?;
    let mails = if args.full {
        InboxMails::Full(rows)
    } else {
        InboxMails::Summary(rows.iter().map(MailSummary::from).collect())
    };
    Ok(InboxResult { mails, next })
}

/// `sent`: mail this PC sent, states refreshed from the server where it answers, else cached.
pub fn sent(client: &mut Client, args: &SentArgs) -> Result<SentResult> {
    let _ = client.send_queued();
    let open_ids: Vec<String> =
        client.store.sent_list(args.limit)?.into_iter().filter(|m| !m.state.is_final()).map(|m| m.id).collect();
    for chunk in open_ids.chunks(pcmail_core::model::limits::STATUS_IDS_MAX) {
        if client.status(chunk).is_err() {
            break;
        }
    }
    Ok(SentResult { mails: client.store.sent_list(args.limit)? })
}

/// `read`: the mail, and marks it seen.
pub fn read(client: &mut Client, args: &IdArgs) -> Result<InboxMail> {
    Ok(client.read(&args.id, None)?)
}

fn marked(client: &mut Client, id: &str, op: MarkOp, reason: Option<&str>) -> Result<Marked> {
    let state = client.mark(id, op, reason, None)?;
    Ok(Marked { id: id.to_string(), state, pending_marks: client.store.pending_mark_count()? })
}

/// `ack`: done without a reply.
pub fn ack(client: &mut Client, args: &IdArgs) -> Result<Marked> {
    marked(client, &args.id, MarkOp::Ack, None)
}

/// `fail`: failed, with a reason.
pub fn fail(client: &mut Client, args: &FailArgs) -> Result<Marked> {
    if args.reason.trim().is_empty() {
        return Err(ApiError::Usage("fail needs a reason".into()));
    }
    marked(client, &args.id, MarkOp::Fail, Some(&args.reason))
}

/// Refuses a reply to a reply before the CLI asks for a body.
pub fn reply_precheck(client: &Client, id: &str) -> Result<()> {
    if let Some(m) = client.store.inbox_get(id)? {
        if m.in_reply_to.is_some() {
            return Err(ClientError::ReplyToReply { id: id.into() }.into());
        }
    }
    Ok(())
}

/// `reply`: answers a mail (fixed reply id; `reply_to_reply` when it is itself a reply).
pub fn reply(client: &mut Client, args: &ReplyArgs) -> Result<SendOutcome> {
    reply_precheck(client, &args.id)?;
    Ok(client.reply_to(&args.id, args.body.clone(), args.auto, args.all)?)
}

/// `roster`: the server's roster, or the cached one when it is unreachable.
pub fn roster(client: &mut Client) -> Result<RosterResult> {
    let (mut pcs, unreachable) = match client.refresh_roster() {
        Ok(p) => (p, None),
        Err(e) => (client.store.roster()?, Some(e.to_string())),
    };
    // This PC is on the roster from its first command, not its first poll.
    if unreachable.is_none() && !pcs.iter().any(|p| p.label == client.me()) && client.register_self().is_ok() {
        pcs = client.refresh_roster().unwrap_or(pcs);
    }
    Ok(RosterResult { pcs, me: client.me().to_string(), unreachable })
}

/// `roster add`: the server's answer (`version` …).
pub fn roster_add(client: &mut Client, args: &RosterAddArgs) -> Result<Value> {
    let op = Op::RosterSet {
        label: args.label.clone(),
        hostname: args.hostname.clone(),
        number: args.number,
        claim: false,
        replace: false,
    };
    Ok(client.transport.call(&op)?)
}

/// `roster remove`: the server's answer (`removed` …).
pub fn roster_remove(client: &mut Client, args: &RosterRemoveArgs) -> Result<Value> {
    Ok(client.transport.call(&Op::RosterRemove { label: args.label.clone() })?)
}

/// `alerts`: the server's sweep alerts (open ones cached), or the cache when it is unreachable.
pub fn alerts(client: &mut Client, args: &AlertsArgs) -> Result<AlertsResult> {
    let op = Op::Alerts { open_only: !args.all };
    match client.transport.call(&op) {
        Ok(v) => {
            let a: Vec<Alert> = pcmail_client::transport::decode::<AlertsAnswer>(&op, v).unwrap_or_default().alerts;
            if !args.all {
                let _ = client.store.alerts_replace(&a);
            }
            Ok(AlertsResult { alerts: a, unreachable: None })
        }
        Err(e) => Ok(AlertsResult { alerts: client.store.alerts()?, unreachable: Some(e.to_string()) }),
    }
}

/// `sync`: one poll cycle under the PC's sync lock, notifications delivered.
/// With `skip_if_daemon` (the hook's detached poller) a running daemon does the work.
pub fn sync(paths: Paths, skip_if_daemon: bool) -> Result<SyncResult> {
    if skip_if_daemon && locks::is_held(&paths.daemon_lock()) {
        return Ok(SyncResult { skipped: Some("a daemon is polling for this PC user".into()), report: None });
    }
    let Some(_lock) = locks::try_lock(&paths.sync_lock())
        .map_err(|e| ApiError::Local(format!("cannot take {}: {e}", paths.sync_lock().display())))?
    else {
        return Ok(SyncResult { skipped: Some("another sync is running".into()), report: None });
    };
    let mut client = Client::open(paths)?;
    let report = client.sync_once(0)?;
    let notes: Vec<_> = report.to_notify.iter().map(notify::Notification::for_mail).collect();
    let chans = notify::channels(&client.config);
    let _ = notify::deliver(&chans, &notes, notify::PER_NOTIFICATION, notify::TOTAL);
    Ok(SyncResult { skipped: None, report: Some(report) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expires_takes_durations_and_rfc3339_and_refuses_the_rest() {
        assert_eq!(parse_expires("30m").unwrap(), Expires::In(30 * 60_000));
        assert_eq!(parse_expires("2h").unwrap(), Expires::In(7_200_000));
        assert_eq!(parse_expires("1970-01-01T00:00:01Z").unwrap(), Expires::At(1_000));
        for bad in ["soon", "0m", "-3h", "", "3ü"] {
            let e = parse_expires(bad).unwrap_err();
            assert_eq!(e.exit(), Exit::Usage, "{bad}");
        }
        // Zero is told it must be more than zero, not to "use a duration" it already is.
        let e = parse_expires("0s").unwrap_err().to_string();
        assert!(e.contains("more than zero") && !e.contains("use a duration like"), "{e}");
        // The same units as every other duration flag.
        assert_eq!(parse_expires("90").unwrap(), Expires::In(90_000));
        assert_eq!(parse_duration("--timeout", "5m").unwrap(), 300_000);
        let e = parse_duration("--timeout", "soon").unwrap_err().to_string();
        assert!(e.starts_with("--timeout") && !e.contains("--expires"), "{e}");
    }

    #[test]
    fn argument_defaults_match_the_cli() {
        let a: InboxArgs = serde_json::from_str("{}").unwrap();
        assert_eq!((a.all, a.limit, a.before, a.full), (false, 50, None, false));
        let s: SentArgs = serde_json::from_str("{}").unwrap();
        assert_eq!(s.limit, 30);
        let send: SendArgs = serde_json::from_str(r#"{"to":"pc-a","body":"x"}"#).unwrap();
        assert_eq!(send.kind, MailKind::Note);
        assert!(!send.urgent && !send.auto && send.wait_for.is_none());
        assert!(serde_json::from_str::<SendArgs>(r#"{"to":"pc-a"}"#).is_err(), "body is required");
    }

    #[test]
    fn optional_arguments_have_one_type_and_no_null() {
        let s = serde_json::to_value(schemars::schema_for!(SendArgs)).unwrap();
        let p = &s["properties"];
        assert_eq!(p["subject"]["type"], "string");
        assert_eq!(p["timeout_secs"]["type"], "integer");
        assert!(p["wait_for"].get("anyOf").is_none(), "{}", p["wait_for"]);
        assert!(!s.to_string().contains("\"null\""), "{s}");
        let r = serde_json::to_value(schemars::schema_for!(RosterAddArgs)).unwrap();
        assert_eq!(r["properties"]["number"]["type"], "integer");
        let i = serde_json::to_value(schemars::schema_for!(InboxArgs)).unwrap();
        assert_eq!(i["properties"]["before"]["type"], "string");
        assert!(!i.to_string().contains("\"null\""), "{i}");
    }

    /// A store holding `bodies`, the first the oldest.
    fn store_with(dir: &tempfile::TempDir, bodies: &[String]) -> Store {
        let mut s = Store::open(&dir.path().join("store.db")).unwrap();
        s.write(|tx| {
            for (i, body) in bodies.iter().enumerate() {
                let m: Mail = serde_json::from_value(serde_json::json!({
                    "id": format!("mail-{i}"), "from": "pc-a", "to": "pc-b", "kind": "request",
                    "subject": "s", "body": body, "urgent": i == 0, "createdAt": 1_000 + i as i64, "state": "new",
                }))
                .unwrap();
                pcmail_store::inbox::insert_received(tx, &m, 2_000)?;
            }
            Ok(())
        })
        .unwrap();
        s
    }

    #[test]
    fn a_summary_cuts_the_body_at_160_characters_not_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let long = "日本語のメール".repeat(40); // 280 characters, 840 bytes
        let mut s = store_with(&dir, &[long.clone(), "short".into(), "x".repeat(160)]);
        let r = inbox_in(&mut s, &InboxArgs::default()).unwrap();
        let InboxMails::Summary(m) = &r.mails else { panic!("summaries by default") };
        assert_eq!(m.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), ["mail-2", "mail-1", "mail-0"]);
        // Exactly 160 characters is not cut.
        assert_eq!((m[0].preview.chars().count(), m[0].body_chars), (160, 160));
        assert!(!m[0].preview.ends_with('…'));
        assert_eq!((m[1].preview.as_str(), m[1].body_chars), ("short", 5));
        let cut: String = long.chars().take(160).collect();
        assert_eq!(m[2].preview, format!("{cut}…"));
        assert_eq!(m[2].body_chars, 280);
        // The JSON an agent reads: camelCase, urgent only when set, no body or timeline.
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["mails"][2]["urgent"], true);
        assert!(v["mails"][1].get("urgent").is_none(), "{}", v["mails"][1]);
        assert_eq!(v["mails"][2]["bodyChars"], 280);
        assert_eq!(v["mails"][2]["createdAt"], 1_000);
        assert!(v["mails"][2].get("body").is_none() && v["mails"][2].get("timeline").is_none());
        assert!(v.get("next").is_none(), "no older mail: {v}");
        // full: the whole mails, as the store lists them.
        let full = inbox_in(&mut s, &InboxArgs { full: true, ..Default::default() }).unwrap();
        let want = serde_json::to_value(s.inbox_list(&[State::New, State::Seen], 50).unwrap()).unwrap();
        assert_eq!(serde_json::to_value(&full).unwrap()["mails"], want);
        assert_eq!(want[2]["body"], long.as_str());
    }

    #[test]
    fn next_and_before_page_through_the_inbox() {
        let dir = tempfile::tempdir().unwrap();
        let bodies: Vec<String> = (0..5).map(|i| format!("body {i}")).collect();
        let mut s = store_with(&dir, &bodies);
        let mut args = InboxArgs { limit: 2, ..Default::default() };
        let mut seen = vec![];
        let mut nexts = vec![];
        loop {
            let r = inbox_in(&mut s, &args).unwrap();
            assert!(r.mails.len() <= 2 && !r.mails.is_empty());
            seen.extend(r.mails.ids().into_iter().map(String::from));
            match r.next {
                Some(n) => {
                    // `next` is the last mail listed: the page after starts below it.
                    assert_eq!(seen.last(), Some(&n));
                    nexts.push(n.clone());
                    args.before = Some(n);
                }
                None => break,
            }
        }
        assert_eq!(seen, ["mail-4", "mail-3", "mail-2", "mail-1", "mail-0"]);
        assert_eq!(nexts, ["mail-3", "mail-1"]);
        // A page that ends exactly at the oldest mail has no next.
        let r = inbox_in(&mut s, &InboxArgs { limit: 5, ..Default::default() }).unwrap();
        assert_eq!((r.mails.len(), r.next), (5, None));
        let e = inbox_in(&mut s, &InboxArgs { before: Some("mail-nope".into()), ..Default::default() }).unwrap_err();
        assert_eq!((e.exit(), e.code()), (Exit::NotFound, "not_found"));
        let e = inbox_in(&mut s, &InboxArgs { limit: 0, ..Default::default() }).unwrap_err();
        assert_eq!(e.exit(), Exit::Usage);
    }
}
