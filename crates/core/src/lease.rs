//! Leases: the wire types both servers answer and the CLI reads,
//! the limits, and the parsing of the lease ops' arguments. The text rules
//! (resource names, file globs) live in [`crate::rules`] so the CLI checks
//! them before it sends. See docs/protocol.md "Leases".

use crate::error::{ItemError, ProtoError};
use crate::model::Millis;
use crate::roster::is_valid_label;
use crate::rules::{check_lease_files, check_resource, check_text, ACTOR_MAX_CHARS, REASON_MAX_CHARS};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// Heartbeat period H: a PC holding leases polls at least this often.
pub const HEARTBEAT_MS: Millis = 30_000;
/// A lease without a heartbeat for 6·H is stale.
pub const STALE_AFTER_MS: Millis = 6 * HEARTBEAT_MS;
/// The sweep alerts `stale_lease` for a lease stale this long.
pub const STALE_ALERT_MS: Millis = 60 * 60_000;
/// `lease.list` with `all` shows ended leases of this window.
pub const ENDED_WINDOW_MS: Millis = 24 * 60 * 60_000;
/// Shortest and longest `ttlMs`.
pub const TTL_MIN_MS: Millis = 1_000;
pub const TTL_MAX_MS: Millis = 7 * 24 * 60 * 60_000;
pub use crate::rules::{FILES_MAX, GLOB_MAX_CHARS, RESOURCE_MAX_CHARS};
pub const DESCRIPTION_MAX_CHARS: usize = 1_000;
pub const REPO_MAX_CHARS: usize = 500;
pub const CLAIM_ID_MAX_CHARS: usize = 100;
pub const SESSION_MAX_CHARS: usize = crate::rules::SESSION_ID_MAX_CHARS;
/// Most renewals and most releases in one poll.
pub const POLL_ITEMS_MAX: usize = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Exclusive,
    Shared,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Exclusive => "exclusive",
            Mode::Shared => "shared",
        }
    }
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "exclusive" => Some(Mode::Exclusive),
            "shared" => Some(Mode::Shared),
            _ => None,
        }
    }
    /// Two live holders may coexist only when both are shared.
    pub fn conflicts_with(self, other: Mode) -> bool {
        !(self == Mode::Shared && other == Mode::Shared)
    }
}

/// `held` and `stale` are live; `released` and `expired` are ended (a
/// taken-over lease ends `released`, its timeline says by whom).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LeaseState {
    Held,
    Stale,
    Released,
    Expired,
}

impl LeaseState {
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseState::Held => "held",
            LeaseState::Stale => "stale",
            LeaseState::Released => "released",
            LeaseState::Expired => "expired",
        }
    }
    pub fn parse(s: &str) -> Option<LeaseState> {
        match s {
            "held" => Some(LeaseState::Held),
            "stale" => Some(LeaseState::Stale),
            "released" => Some(LeaseState::Released),
            "expired" => Some(LeaseState::Expired),
            _ => None,
        }
    }
    pub fn is_live(self) -> bool {
        matches!(self, LeaseState::Held | LeaseState::Stale)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    Granted,
    Stale,
    Released,
    Expired,
    TakenOver,
}

impl Event {
    pub fn as_str(self) -> &'static str {
        match self {
            Event::Granted => "granted",
            Event::Stale => "stale",
            Event::Released => "released",
            Event::Expired => "expired",
            Event::TakenOver => "taken_over",
        }
    }
    pub fn parse(s: &str) -> Option<Event> {
        match s {
            "granted" => Some(Event::Granted),
            "stale" => Some(Event::Stale),
            "released" => Some(Event::Released),
            "expired" => Some(Event::Expired),
            "taken_over" => Some(Event::TakenOver),
            _ => None,
        }
    }
}

/// What a claimant offers to take a lease someone else holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Evidence {
    /// The holder's process is gone (checked on the holder's own PC by PID
    /// and start time): only a claimant on the holder's PC may offer it.
    ProcessGone,
    /// The lease is stale while its PC still polls: that session ended.
    SessionEnded,
    /// The lease is stale and its PC silent: a person or agent decides, with a reason.
    Force,
}

impl Evidence {
    pub fn as_str(self) -> &'static str {
        match self {
            Evidence::ProcessGone => "process_gone",
            Evidence::SessionEnded => "session_ended",
            Evidence::Force => "force",
        }
    }
    pub fn parse(s: &str) -> Option<Evidence> {
        match s {
            "process_gone" => Some(Evidence::ProcessGone),
            "session_ended" => Some(Evidence::SessionEnded),
            "force" => Some(Evidence::Force),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Holder {
    pub pc: String,
    pub session: String,
    #[serde(default)]
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Takeover {
    pub evidence: Evidence,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// One entry of a lease's timeline. `fence` names the lease it belongs to
/// (a `taken_over` entry ends the old fence and shows on the new lease too).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineEntry {
    pub at: Millis,
    pub event: Event,
    pub by: String,
    #[serde(default)]
    pub fence: Option<i64>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub evidence: Option<Evidence>,
    /// A takeover's `detail` (what was checked), else null.
    #[serde(default)]
    pub detail: Option<String>,
}

/// A lease as both servers answer it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    pub resource: String,
    pub repo: String,
    pub description: String,
    pub files: Vec<String>,
    pub mode: Mode,
    pub holder: Holder,
    pub fence: i64,
    pub claim_id: String,
    pub granted_at: Millis,
    pub heartbeat_at: Millis,
    pub ttl_expires_at: Option<Millis>,
    pub state: LeaseState,
    /// `state == stale`, for readers that only want the flag.
    pub stale: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Vec<TimelineEntry>>,
}

impl Lease {
    /// When a heartbeat lease goes stale (a TTL lease never does).
    pub fn stale_at(&self) -> Option<Millis> {
        match self.ttl_expires_at {
            Some(_) => None,
            None => Some(self.heartbeat_at + STALE_AFTER_MS),
        }
    }
}

/// The PC probe a takeover asks the holder's PC (docs/jobs.md): its answer
/// lists the leases that PC's sessions hold (`heldHere`, [`ProbeHeld`]) and
/// its live sessions (`liveSessions`, id prefixes).
pub const HOLDER_PROBE: &str = "_debug_leases";
/// A session id in a probe's answer: its first characters only (the whole id stays on its PC).
pub const PROBE_SESSION_CHARS: usize = 8;

/// `id` as a probe answers it.
pub fn probe_session(id: &str) -> String {
    id.chars().take(PROBE_SESSION_CHARS).collect()
}

/// A lease one of a PC's sessions holds, as that PC's [`HOLDER_PROBE`]
/// answers it (`heldHere`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbeHeld {
    pub resource: String,
    /// [`probe_session`] of the holding session.
    pub session: String,
    pub confirmed: bool,
    pub release_queued: bool,
    #[serde(default)]
    pub fence: Option<i64>,
    /// Whether the process the lease follows still runs (None: a `--ttl`
    /// lease, which follows none; or an older PC that does not say).
    #[serde(default)]
    pub process_running: Option<bool>,
}

/// What the holder's PC answered about `lease` (its [`HOLDER_PROBE`]):
/// `Some(what runs)` when the process the lease follows, or the holder's
/// session, still runs there, so the lease is not abandoned however stale
/// it looks from the server; `None` when nothing of the holder runs there.
/// The one rule the takeover applies to the answer the PC side builds.
pub fn holder_runs_per_probe(lease: &Lease, held: &[ProbeHeld], live_sessions: &[String]) -> Option<String> {
    let session = probe_session(&lease.holder.session);
    let tracked = held
        .iter()
        .find(|h| h.resource == lease.resource && h.session == session && h.fence.is_none_or(|f| f == lease.fence));
    if let Some(h) = tracked.filter(|h| h.process_running == Some(true) && !h.release_queued) {
        return Some(format!("the process {} follows (session {}) still runs there", h.resource, h.session));
    }
    if live_sessions.contains(&session) {
        return Some(format!("the holder's session {session} still runs there"));
    }
    None
}

/// `lease.claim` arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Claim {
    pub claim_id: String,
    pub resource: String,
    pub repo: String,
    pub description: String,
    pub files: Vec<String>,
    pub mode: Mode,
    pub holder: Holder,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<Millis>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub takeover: Option<Takeover>,
}

/// `lease.release` arguments, and one release carried by a poll.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Release {
    pub resource: String,
    pub fence: i64,
    pub by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `lease.list` arguments.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ListArgs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    #[serde(default)]
    pub all: bool,
    #[serde(default)]
    pub timeline: bool,
}

/// One renewal carried by a poll.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Renew {
    pub resource: String,
    pub fence: i64,
}

/// A renewal or release the server could not parse: answered on its own in
/// the poll's `lease.errors`, the rest of the batch goes on.
#[derive(Debug, Clone, PartialEq)]
pub struct BadItem {
    pub index: usize,
    pub resource: Option<String>,
    pub fence: Option<i64>,
    pub error: ProtoError,
}

pub type RenewItem = Result<Renew, BadItem>;
pub type ReleaseItem = Result<Release, BadItem>;

/// The `lease` argument of `poll`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PollLease {
    pub renew: Vec<RenewItem>,
    pub release: Vec<ReleaseItem>,
    /// The lease `version` the PC has (0 at first).
    pub known: i64,
}

impl PollLease {
    pub fn to_json(&self) -> Value {
        let renew: Vec<&Renew> = self.renew.iter().filter_map(|r| r.as_ref().ok()).collect();
        let release: Vec<&Release> = self.release.iter().filter_map(|r| r.as_ref().ok()).collect();
        json!({"renew": renew, "release": release, "known": self.known})
    }
}

/// A lease this PC held that ended by someone else's doing (or that it
/// renewed after it ended), reported in the poll's `lease.lost`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lost {
    pub resource: String,
    pub fence: i64,
    pub taken_by: Option<Holder>,
    pub at: Millis,
    pub reason: Option<String>,
    pub event: Event,
}

/// One release carried by a poll, as answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Released {
    pub resource: String,
    pub fence: i64,
    /// False: it was already not held.
    pub released: bool,
}

/// What names a renewal or release in the poll's `lease.errors` besides its
/// list (`renew` or `release`) and index: its resource and fence, `null`
/// when the item did not carry them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LeaseRef {
    pub resource: Option<String>,
    pub fence: Option<i64>,
}

/// The `lease` answer of `poll`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct PollLeaseAnswer {
    /// Fences of the renewals that took, in request order.
    pub renewed: Vec<i64>,
    #[serde(default)]
    pub released: Vec<Released>,
    pub lost: Vec<Lost>,
    #[serde(default)]
    pub errors: Vec<ItemError<LeaseRef>>,
    pub version: i64,
    /// Every live lease; present only when `version` differs from `known`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list: Option<Vec<Lease>>,
}

/// `lease.claim` answer (ok).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimAnswer {
    pub granted: bool,
    pub lease: Lease,
}

/// `lease.release` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseAnswer {
    pub released: bool,
    pub lease: Lease,
}

/// `lease.list` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListAnswer {
    pub leases: Vec<Lease>,
    pub version: i64,
}

/// `lease.check` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckAnswer {
    pub current: bool,
    pub fence: Option<i64>,
    pub lease: Option<Lease>,
}

// ---- parsing (both servers' Rust side; gas/Validate.js mirrors it) ----

type M = Map<String, Value>;

fn req_str(m: &M, key: &str, field: &str) -> Result<String, ProtoError> {
    match m.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        None | Some(Value::Null) => Err(ProtoError::field(field, format!("missing \"{key}\""))),
        Some(_) => Err(ProtoError::field(field, format!("\"{key}\" must be a string"))),
    }
}

fn opt_str(m: &M, key: &str, field: &str) -> Result<Option<String>, ProtoError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ProtoError::field(field, format!("\"{key}\" must be a string"))),
    }
}

fn opt_int(m: &M, key: &str, field: &str) -> Result<Option<i64>, ProtoError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            n.as_i64().map(Some).ok_or_else(|| ProtoError::field(field, format!("\"{key}\" must be an integer")))
        }
        Some(_) => Err(ProtoError::field(field, format!("\"{key}\" must be an integer"))),
    }
}

fn req_int(m: &M, key: &str, field: &str) -> Result<i64, ProtoError> {
    opt_int(m, key, field)?.ok_or_else(|| ProtoError::field(field, format!("missing \"{key}\"")))
}

fn opt_bool(m: &M, key: &str) -> Result<Option<bool>, ProtoError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(ProtoError::field(key, format!("\"{key}\" must be true or false"))),
    }
}

fn obj<'a>(v: &'a Value, field: &str) -> Result<&'a M, ProtoError> {
    v.as_object().ok_or_else(|| ProtoError::field(field, format!("\"{field}\" must be an object")))
}

fn check_fence(field: &str, fence: i64) -> Result<(), ProtoError> {
    if fence >= 1 {
        Ok(())
    } else {
        Err(ProtoError::field(field, "fence must be a positive integer"))
    }
}

fn check_single_line(field: &str, s: &str, max: usize, not_blank: bool) -> Result<(), ProtoError> {
    if not_blank && s.trim().is_empty() {
        return Err(ProtoError::field(field, format!("{field} must not be blank")));
    }
    check_text(field, s, max, false)
}

/// The holder names the caller's own PC (checked by the server against the
/// envelope), a session (1–100 characters) and maybe the session's name.
/// Why the end of the holder's process is no evidence for taking a lease
/// over, if it is not: a lease claimed for a fixed time (`ttlMs`) follows
/// no process, so while its time runs it is held whatever process made it
/// (only its end or a release give it up). The same rule on the holder's PC
/// (before it asks) and on the server (which decides). `ttl_expires_at` and
/// `now` are on the server's clock.
pub fn process_gone_refusal(ttl_expires_at: Option<Millis>, now: Millis) -> Option<String> {
    let end = ttl_expires_at.filter(|end| *end > now)?;
    Some(format!(
        "it is held for a fixed time (--ttl) that ends in {}, whatever process made it, so process_gone is no \
         evidence: ask the holder to release it, or wait",
        crate::present::age(end - now)
    ))
}

pub fn check_holder(h: &Holder) -> Result<(), ProtoError> {
    if !is_valid_label(&h.pc) {
        return Err(ProtoError::field("holder.pc", "holder.pc must be a roster label"));
    }
    crate::rules::check_session_id("holder.session", &h.session)?;
    if let Some(n) = &h.name {
        check_single_line("holder.name", n, SESSION_MAX_CHARS, true)?;
    }
    Ok(())
}

/// A takeover's reason: text like a mark's; `force` needs one that is not blank.
pub fn check_takeover(t: &Takeover) -> Result<(), ProtoError> {
    check_text("takeover.reason", &t.reason, REASON_MAX_CHARS, true)?;
    if let Some(d) = &t.detail {
        check_text("takeover.detail", d, REASON_MAX_CHARS, true)?;
    }
    if t.evidence == Evidence::Force && t.reason.trim().is_empty() {
        return Err(ProtoError::field("takeover.reason", "a forced takeover needs a reason that is not blank"));
    }
    Ok(())
}

/// The one check of a claim, made by the CLI before it sends and by the
/// server when it parses (the envelope's `pc` is the server's to compare).
pub fn check_claim(c: &Claim) -> Result<(), ProtoError> {
    if c.claim_id.is_empty()
        || c.claim_id.chars().count() > CLAIM_ID_MAX_CHARS
        || c.claim_id.chars().any(char::is_control)
    {
        return Err(ProtoError::field("claimId", "claimId must be 1-100 characters with no control characters"));
    }
    check_resource(&c.resource)?;
    check_text("repo", &c.repo, REPO_MAX_CHARS, false)?;
    check_text("description", &c.description, DESCRIPTION_MAX_CHARS, false)?;
    check_lease_files(&c.files)?;
    check_holder(&c.holder)?;
    if let Some(ttl) = c.ttl_ms {
        if !(TTL_MIN_MS..=TTL_MAX_MS).contains(&ttl) {
            return Err(ProtoError::field("ttlMs", "ttlMs must be 1 second to 7 days"));
        }
    }
    if let Some(t) = &c.takeover {
        check_takeover(t)?;
    }
    Ok(())
}

/// The one check of a release's text (CLI, poll items, `lease.release`).
pub fn check_release(r: &Release) -> Result<(), ProtoError> {
    check_resource(&r.resource)?;
    check_fence("fence", r.fence)?;
    check_single_line("by", &r.by, ACTOR_MAX_CHARS, true)?;
    if let Some(reason) = &r.reason {
        check_text("reason", reason, REASON_MAX_CHARS, true)?;
    }
    Ok(())
}

pub fn parse_claim(args: &M) -> Result<Claim, ProtoError> {
    let files = match args.get("files") {
        None | Some(Value::Null) => vec![],
        Some(Value::Array(a)) => {
            if a.len() > FILES_MAX {
                return Err(ProtoError::field("files", format!("at most {FILES_MAX} globs in \"files\"")));
            }
            a.iter()
                .map(|x| x.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| ProtoError::field("files", "\"files\" must be an array of strings"))?
        }
        Some(_) => return Err(ProtoError::field("files", "\"files\" must be an array of strings")),
    };
    let mode = match opt_str(args, "mode", "mode")? {
        None => Mode::Exclusive,
        Some(s) => Mode::parse(&s).ok_or_else(|| ProtoError::field("mode", "mode must be exclusive or shared"))?,
    };
    let h = obj(args.get("holder").unwrap_or(&Value::Null), "holder")?;
    let holder = Holder {
        pc: req_str(h, "pc", "holder.pc")?,
        session: req_str(h, "session", "holder.session")?,
        name: opt_str(h, "name", "holder.name")?,
    };
    let takeover = match args.get("takeover") {
        None | Some(Value::Null) => None,
        Some(v) => {
            let t = obj(v, "takeover")?;
            let ev = req_str(t, "evidence", "takeover.evidence")?;
            Some(Takeover {
                evidence: Evidence::parse(&ev).ok_or_else(|| {
                    ProtoError::field(
                        "takeover.evidence",
                        "takeover.evidence must be process_gone, session_ended or force",
                    )
                })?,
                reason: req_str(t, "reason", "takeover.reason")?,
                detail: opt_str(t, "detail", "takeover.detail")?,
            })
        }
    };
    let c = Claim {
        claim_id: req_str(args, "claimId", "claimId")?,
        resource: req_str(args, "resource", "resource")?,
        repo: opt_str(args, "repo", "repo")?.unwrap_or_default(),
        description: opt_str(args, "description", "description")?.unwrap_or_default(),
        files,
        mode,
        holder,
        ttl_ms: opt_int(args, "ttlMs", "ttlMs")?,
        takeover,
    };
    check_claim(&c)?;
    Ok(c)
}

pub fn parse_release(args: &M) -> Result<Release, ProtoError> {
    let r = Release {
        resource: req_str(args, "resource", "resource")?,
        fence: req_int(args, "fence", "fence")?,
        by: req_str(args, "by", "by")?,
        reason: opt_str(args, "reason", "reason")?,
    };
    check_release(&r)?;
    Ok(r)
}

pub fn parse_list(args: &M) -> Result<ListArgs, ProtoError> {
    let resource = opt_str(args, "resource", "resource")?;
    if let Some(r) = &resource {
        check_resource(r)?;
    }
    let repo = opt_str(args, "repo", "repo")?;
    if let Some(r) = &repo {
        check_text("repo", r, REPO_MAX_CHARS, false)?;
    }
    Ok(ListArgs {
        repo,
        resource,
        all: opt_bool(args, "all")?.unwrap_or(false),
        timeline: opt_bool(args, "timeline")?.unwrap_or(false),
    })
}

/// `lease.check`: (resource, fence).
pub fn parse_check(args: &M) -> Result<(String, i64), ProtoError> {
    let resource = req_str(args, "resource", "resource")?;
    check_resource(&resource)?;
    let fence = req_int(args, "fence", "fence")?;
    check_fence("fence", fence)?;
    Ok((resource, fence))
}

/// The poll's `lease` argument: the lists must be arrays of at most 500
/// (the request's shape); each item is parsed on its own.
pub fn parse_poll_lease(v: &Value) -> Result<PollLease, ProtoError> {
    let m = obj(v, "lease")?;
    let list = |key: &str| -> Result<Vec<Value>, ProtoError> {
        let field = format!("lease.{key}");
        match m.get(key) {
            None | Some(Value::Null) => Ok(vec![]),
            Some(Value::Array(a)) if a.len() <= POLL_ITEMS_MAX => Ok(a.clone()),
            Some(Value::Array(_)) => {
                Err(ProtoError::field(&field, format!("at most {POLL_ITEMS_MAX} items in \"{field}\"")))
            }
            Some(_) => Err(ProtoError::field(&field, format!("\"{field}\" must be an array"))),
        }
    };
    let known = opt_int(m, "known", "lease.known")?.unwrap_or(0);
    if known < 0 {
        return Err(ProtoError::field("lease.known", "lease.known must be >= 0"));
    }
    let renew = list("renew")?
        .iter()
        .enumerate()
        .map(|(i, v)| {
            item(i, v, |m| {
                let r = Renew { resource: req_str(m, "resource", "resource")?, fence: req_int(m, "fence", "fence")? };
                check_resource(&r.resource)?;
                check_fence("fence", r.fence)?;
                Ok(r)
            })
        })
        .collect();
    let release = list("release")?.iter().enumerate().map(|(i, v)| item(i, v, parse_release)).collect();
    Ok(PollLease { renew, release, known })
}

fn item<T>(index: usize, v: &Value, parse: impl FnOnce(&M) -> Result<T, ProtoError>) -> Result<T, BadItem> {
    let bad = |error: ProtoError| BadItem {
        index,
        resource: v.get("resource").and_then(Value::as_str).map(str::to_string),
        fence: v.get("fence").and_then(Value::as_i64),
        error,
    };
    let m = v.as_object().ok_or_else(|| bad(ProtoError::field("lease", "each item must be an object")))?;
    parse(m).map_err(bad)
}

impl BadItem {
    /// The item's entry in the poll answer's `lease.errors`.
    pub fn to_error(&self, list: &str) -> ItemError<LeaseRef> {
        ItemError::new(list, self.index, LeaseRef { resource: self.resource.clone(), fence: self.fence }, &self.error)
    }
}

#[cfg(test)]
mod tests {
    use super::{holder_runs_per_probe, ProbeHeld};

    #[test]
    fn a_holder_pcs_probe_decides_whether_the_holder_still_runs() {
        let lease: super::Lease = serde_json::from_value(serde_json::json!({
            "resource": "gpu-0", "repo": "", "description": "", "files": [], "mode": "exclusive",
            "holder": {"pc": "pc-b", "session": "0123456789abcdef"}, "fence": 3, "claimId": "c",
            "grantedAt": 0, "heartbeatAt": 0, "state": "stale", "stale": true
        }))
        .unwrap();
        let held = |running: Option<bool>, fence: Option<i64>| ProbeHeld {
            resource: "gpu-0".into(),
            session: "01234567".into(),
            confirmed: true,
            release_queued: false,
            fence,
            process_running: running,
        };
        assert!(holder_runs_per_probe(&lease, &[held(Some(true), Some(3))], &[]).is_some());
        assert!(holder_runs_per_probe(&lease, &[held(Some(false), Some(3))], &[]).is_none());
        assert!(holder_runs_per_probe(&lease, &[held(Some(true), Some(2))], &[]).is_none(), "another grant");
        assert!(holder_runs_per_probe(&lease, &[], &["01234567".into()]).is_some(), "its session runs");
        assert!(holder_runs_per_probe(&lease, &[], &["89abcdef".into()]).is_none());
    }

    use super::*;

    fn claim_json() -> Value {
        json!({"claimId": "c1", "resource": "staging-deploy", "repo": "github.com/a/b", "description": "deploy",
               "files": ["src/**/*.rs"], "mode": "exclusive", "holder": {"pc": "pc-a", "session": "s1", "name": null}})
    }

    #[test]
    fn a_claim_round_trips_through_its_wire_form() {
        let c = parse_claim(claim_json().as_object().unwrap()).unwrap();
        let back = parse_claim(serde_json::to_value(&c).unwrap().as_object().unwrap()).unwrap();
        assert_eq!(c, back);
        assert_eq!(c.mode, Mode::Exclusive);
    }

    #[test]
    fn bad_claims_name_their_field() {
        let field = |patch: Value| {
            let mut v = claim_json();
            for (k, x) in patch.as_object().unwrap() {
                v[k] = x.clone();
            }
            parse_claim(v.as_object().unwrap()).unwrap_err().field.unwrap()
        };
        assert_eq!(field(json!({"resource": "Staging"})), "resource");
        assert_eq!(field(json!({"files": ["../etc/passwd"]})), "files");
        assert_eq!(field(json!({"mode": "both"})), "mode");
        assert_eq!(field(json!({"holder": {"pc": "pc-a"}})), "holder.session");
        assert_eq!(field(json!({"ttlMs": 5})), "ttlMs");
        assert_eq!(field(json!({"takeover": {"evidence": "force", "reason": "  "}})), "takeover.reason");
        assert_eq!(field(json!({"takeover": {"evidence": "vibes", "reason": "x"}})), "takeover.evidence");
        assert_eq!(field(json!({"claimId": ""})), "claimId");
    }

    #[test]
    fn one_bad_poll_item_is_refused_on_its_own() {
        let p = parse_poll_lease(&json!({"renew": [{"resource": "a", "fence": 1}, {"resource": "B!", "fence": 2}, 7],
            "release": [{"resource": "a", "fence": 0, "by": "pc-a"}], "known": 3}))
        .unwrap();
        assert!(p.renew[0].is_ok());
        let e = p.renew[1].as_ref().unwrap_err();
        assert_eq!((e.index, e.resource.as_deref(), e.fence), (1, Some("B!"), Some(2)));
        assert_eq!(p.renew[2].as_ref().unwrap_err().index, 2);
        assert_eq!(p.release[0].as_ref().unwrap_err().error.field.as_deref(), Some("fence"));
        assert_eq!(p.known, 3);
        assert!(parse_poll_lease(&json!({"renew": {}})).is_err());
    }

    #[test]
    fn a_lease_reads_back_from_its_wire_form() {
        let v = json!({"resource": "gpu-a:2", "repo": "", "description": "", "files": [], "mode": "shared",
            "holder": {"pc": "pc-a", "session": "s", "name": "ani"}, "fence": 4, "claimId": "c",
            "grantedAt": 1, "heartbeatAt": 2, "ttlExpiresAt": null, "state": "stale", "stale": true,
            "timeline": [{"at": 1, "event": "taken_over", "by": "pc-b/s", "fence": 3, "reason": "gone", "evidence": "process_gone", "detail": null}]});
        let l: Lease = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(l.timeline.as_ref().unwrap()[0].evidence, Some(Evidence::ProcessGone));
        assert_eq!(serde_json::to_value(&l).unwrap(), v);
        assert_eq!(l.stale_at(), Some(2 + STALE_AFTER_MS));
    }
}
