//! The request envelope and typed op arguments, parsed strictly: anything
//! malformed becomes a `ProtoError` with a code (and the field), never a panic.

use crate::error::{ErrorCode, ProtoError};
use crate::ids::{is_valid_any_id, is_valid_mail_id};
use crate::job::{
    parse_cancel, parse_job_id, parse_poll_job, parse_report, parse_start, parse_submit, CancelArgs, PollJob,
    ReportArgs, StartArgs, SubmitArgs,
};
use crate::lease::{
    parse_check, parse_claim, parse_list, parse_poll_lease, parse_release, Claim, ListArgs, PollLease, Release,
};
use crate::model::{limits, Kind, Mark, MarkOp, MarkResult, Millis, OutgoingMail, To, PROTOCOL_VERSION};
use crate::op_table::{OpKind, OpSpec};
use crate::roster::{is_valid_hostname, is_valid_label};
use crate::rules::{check_mark_text, check_text};
use crate::sessions::{good_sessions, parse_poll_sessions, parse_take, LiveItem};
use serde_json::{json, Map, Value};

#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub pc: String,
    pub token: Option<String>,
    /// This installation's credential: binds the `pc`
    /// label to one installation. Never logged.
    pub cred: Option<String>,
    pub op: Op,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Hello,
    RosterGet,
    /// `claim`: bind `label` (the caller's own) to the envelope's `cred`;
    /// `replace`: take a label bound to another installation over.
    RosterSet {
        label: String,
        hostname: String,
        number: Option<i64>,
        claim: bool,
        replace: bool,
    },
    RosterRemove {
        label: String,
    },
    Send {
        mail: OutgoingMail,
    },
    Poll(PollArgs),
    Mark {
        marks: Vec<MarkItem>,
    },
    Status {
        ids: Vec<String>,
    },
    Sweep,
    Alerts {
        open_only: bool,
    },
    /// Admin: a one-time join code for `label`. `code` is the
    /// secret part, made by the admin's client (a retry presents it again).
    Enrol {
        label: String,
        hostname: Option<String>,
        code: String,
        expires_in: Millis,
    },
    /// A new PC exchanges a join code for its credential (the envelope's `cred`).
    Join {
        code: String,
        hostname: String,
    },
    /// Admin: ends a PC's access; its mail waits for a re-enrolled PC.
    Revoke {
        label: String,
    },
    /// A PC replaces its credential with `new_cred`.
    Rotate {
        new_cred: String,
    },
    /// Admin: refuse (or accept again) the shared token for PC ops.
    RequireCredentials {
        on: bool,
    },
    /// Admin: the audit log, newest first.
    AuditLog {
        limit: usize,
    },
    LeaseClaim(Claim),
    LeaseRelease(Release),
    LeaseList(ListArgs),
    LeaseCheck {
        resource: String,
        fence: i64,
    },
    /// Jobs.
    JobSubmit(SubmitArgs),
    JobStatus {
        job_id: String,
    },
    JobList(crate::job::ListArgs),
    JobCancel(CancelArgs),
    JobStart(StartArgs),
    JobReport(ReportArgs),
    /// A session of the caller's PC takes a name (feature `sessions`);
    /// `live`: the PC's live sessions now, applied first (as a poll's).
    NameTake {
        name: String,
        session: String,
        live: Option<Vec<LiveItem>>,
    },
    /// Every live session on every PC, with its name.
    Who,
}

impl Op {
    /// The op's row of the op table.
    pub fn spec(&self) -> OpSpec {
        self.kind().spec()
    }

    /// The wire name.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// Which op this is, without its arguments (exhaustive: a new op needs its row).
    pub fn kind(&self) -> OpKind {
        match self {
            Op::Hello => OpKind::Hello,
            Op::RosterGet => OpKind::RosterGet,
            Op::RosterSet { .. } => OpKind::RosterSet,
            Op::RosterRemove { .. } => OpKind::RosterRemove,
            Op::Send { .. } => OpKind::Send,
            Op::Poll(_) => OpKind::Poll,
            Op::Mark { .. } => OpKind::Mark,
            Op::Status { .. } => OpKind::Status,
            Op::Sweep => OpKind::Sweep,
            Op::Alerts { .. } => OpKind::Alerts,
            Op::Enrol { .. } => OpKind::Enrol,
            Op::Join { .. } => OpKind::Join,
            Op::Revoke { .. } => OpKind::Revoke,
            Op::Rotate { .. } => OpKind::Rotate,
            Op::RequireCredentials { .. } => OpKind::RequireCredentials,
            Op::AuditLog { .. } => OpKind::AuditLog,
            Op::LeaseClaim(_) => OpKind::LeaseClaim,
            Op::LeaseRelease(_) => OpKind::LeaseRelease,
            Op::LeaseList(_) => OpKind::LeaseList,
            Op::LeaseCheck { .. } => OpKind::LeaseCheck,
            Op::JobSubmit(_) => OpKind::JobSubmit,
            Op::JobStatus { .. } => OpKind::JobStatus,
            Op::JobList(_) => OpKind::JobList,
            Op::JobCancel(_) => OpKind::JobCancel,
            Op::JobStart(_) => OpKind::JobStart,
            Op::JobReport(_) => OpKind::JobReport,
            Op::NameTake { .. } => OpKind::NameTake,
            Op::Who => OpKind::Who,
        }
    }

    /// The `args` object of this op, as a client sends it.
    pub fn args_json(&self) -> Value {
        match self {
            Op::Hello | Op::RosterGet | Op::Sweep | Op::Who => json!({}),
            Op::NameTake { name, session, live } => {
                let mut v = json!({"name": name, "session": session});
                if let Some(l) = live {
                    v["live"] = json!(good_sessions(l));
                }
                v
            }
            Op::RosterSet { label, hostname, number, claim, replace } => {
                let mut v = json!({"label": label, "hostname": hostname});
                if let Some(n) = number {
                    v["number"] = json!(n);
                }
                if *claim {
                    v["claim"] = json!(true);
                }
                if *replace {
                    v["replace"] = json!(true);
                }
                v
            }
            Op::RosterRemove { label } => json!({"label": label}),
            Op::Send { mail } => json!({"mail": mail}),
            Op::Poll(p) => {
                let mut v =
                    json!({"confirm": p.confirm, "marks": good_marks(&p.marks), "limit": p.limit, "since": p.since});
                if p.wait_ms > 0 {
                    v["waitMs"] = json!(p.wait_ms);
                }
                if let Some(l) = &p.lease {
                    v["lease"] = l.to_json();
                }
                if let Some(r) = p.received_since {
                    v["receivedSince"] = json!(r);
                }
                if let Some(j) = &p.job {
                    v["job"] = j.to_json();
                }
                if let Some(s) = &p.sessions {
                    v["sessions"] = json!({"live": good_sessions(s)});
                }
                v
            }
            Op::Mark { marks } => json!({"marks": good_marks(marks)}),
            Op::Status { ids } => json!({"ids": ids}),
            Op::Alerts { open_only } => json!({"open": open_only}),
            Op::Enrol { label, hostname, code, expires_in } => {
                json!({"label": label, "hostname": hostname, "code": code, "expiresIn": expires_in})
            }
            Op::Join { code, hostname } => json!({"code": code, "hostname": hostname}),
            Op::Revoke { label } => json!({"label": label}),
            Op::Rotate { new_cred } => json!({"newCred": new_cred}),
            Op::RequireCredentials { on } => json!({"on": on}),
            Op::AuditLog { limit } => json!({"limit": limit}),
            Op::LeaseClaim(c) => json!(c),
            Op::LeaseRelease(r) => json!(r),
            Op::LeaseList(l) => json!(l),
            Op::LeaseCheck { resource, fence } => json!({"resource": resource, "fence": fence}),
            Op::JobSubmit(a) => json!(a),
            Op::JobStatus { job_id } => json!({"jobId": job_id}),
            Op::JobList(a) => json!(a),
            Op::JobCancel(a) => json!(a),
            Op::JobStart(a) => json!(a),
            Op::JobReport(a) => json!(a),
        }
    }
}

/// One entry of a batch of marks: parsed, or refused on its own (its index in
/// the request, and whatever of `markId`/`id` could be read) so that one bad
/// mark never fails the others or the poll that carries them.
pub type MarkItem = Result<Mark, BadMark>;

#[derive(Debug, Clone, PartialEq)]
pub struct BadMark {
    pub index: usize,
    pub mark_id: Option<String>,
    pub id: Option<String>,
    pub error: ProtoError,
}

impl BadMark {
    /// The item's entry in the answer's results.
    pub fn to_result(&self) -> MarkResult {
        MarkResult {
            index: Some(self.index),
            mark_id: self.mark_id.clone(),
            id: self.id.clone(),
            ok: false,
            state: None,
            changed: None,
            code: Some(self.error.code.as_str().to_string()),
            field: self.error.field.clone(),
            message: Some(self.error.message.clone()),
        }
    }
}

fn good_marks(items: &[MarkItem]) -> Vec<&Mark> {
    items.iter().filter_map(|m| m.as_ref().ok()).collect()
}

#[derive(Debug, Clone, PartialEq)]
pub struct PollArgs {
    pub confirm: Vec<String>,
    pub marks: Vec<MarkItem>,
    pub limit: usize,
    pub since: i64,
    pub wait_ms: i64,
    /// Heartbeats and releases of leases (feature `leases`).
    pub lease: Option<PollLease>,
    /// The cursor of the received-mail feed (feature `received-updates`);
    /// None: the caller does not ask for it (older clients).
    pub received_since: Option<i64>,
    /// Jobs taken, heartbeats, reports, the whitelist (feature `jobs`);
    /// None: this poll changes no job and hears of none.
    pub job: Option<PollJob>,
    /// This PC's live sessions (feature `sessions`): None from a client
    /// that does not report them (its sessions and names are left as they were).
    /// Each reported session is parsed on its own: a bad one is refused alone.
    pub sessions: Option<Vec<LiveItem>>,
}

impl Default for PollArgs {
    fn default() -> Self {
        PollArgs {
            confirm: vec![],
            marks: vec![],
            limit: limits::POLL_LIMIT_DEFAULT,
            since: 0,
            wait_ms: 0,
            lease: None,
            received_since: None,
            job: None,
            sessions: None,
        }
    }
}

pub use crate::op_table::{
    FEATURES, FEATURE_CREDENTIALS, FEATURE_EXPIRES_IN, FEATURE_JOBS, FEATURE_LABEL_BINDING, FEATURE_LEASES,
    FEATURE_MARK_RESULTS, FEATURE_MULTI_RECIPIENT, FEATURE_RECEIVED_UPDATES, FEATURE_SESSIONS,
};

/// A credential: 32 to 512 printable ASCII characters without spaces. PCs
/// make 64 hex characters (256 random bits); `PCMAIL_CREDENTIAL` may be any
/// long secret. Checked by the client before use and by both servers.
pub fn check_credential(cred: &str) -> Result<(), ProtoError> {
    let n = cred.len();
    if (32..=512).contains(&n) && cred.bytes().all(|b| b.is_ascii_graphic()) {
        Ok(())
    } else {
        Err(ProtoError::field(
            "cred",
            "cred must be 32-512 printable ASCII characters without spaces (e.g. `openssl rand -hex 32`)",
        ))
    }
}

/// A new credential: 256 random bits as 64 lower-case hex characters.
pub fn new_credential(rng: &mut impl rand::Rng) -> String {
    let mut bytes = [0u8; 32];
    rng.fill_bytes(&mut bytes);
    crate::hex::lower(&bytes)
}

/// What a server stores of a credential: SHA-256, lower-case hex (the same
/// on both servers, so a database and a spreadsheet agree).
pub fn credential_hash(cred: &str) -> String {
    use sha2::Digest;
    crate::hex::lower(&sha2::Sha256::digest(cred.as_bytes()))
}

/// Builds the wire form of a request.
pub fn request_json(pc: &str, token: Option<&str>, op: &Op) -> Value {
    request_json_with_cred(pc, token, None, op)
}

/// The wire form of a request that presents this installation's credential.
pub fn request_json_with_cred(pc: &str, token: Option<&str>, cred: Option<&str>, op: &Op) -> Value {
    let mut v = json!({"v": PROTOCOL_VERSION, "op": op.name(), "pc": pc, "args": op.args_json()});
    if let Some(t) = token {
        v["token"] = json!(t);
    }
    if let Some(c) = cred {
        v["cred"] = json!(c);
    }
    v
}

/// The wire form of a request as bytes. A poll (every cycle of every PC's
/// poller) is written straight from its arguments; every other op goes
/// through [`request_json_with_cred`]. The JSON is the same either way
/// (`tests::a_poll_written_straight_is_the_poll_of_the_json_form`): building
/// a poll's tree of values first, its sessions and marks each a map of
/// their own, was a tenth of the daemon's work per received mail.
pub fn request_bytes_with_cred(pc: &str, token: Option<&str>, cred: Option<&str>, op: &Op) -> Vec<u8> {
    let written = match op {
        Op::Poll(p) => serde_json::to_vec(&WireRequest {
            v: PROTOCOL_VERSION,
            op: op.name(),
            pc,
            args: WirePoll::of(p),
            token,
            cred,
        }),
        _ => serde_json::to_vec(&request_json_with_cred(pc, token, cred, op)),
    };
    written.expect("a request serialises")
}

#[derive(serde::Serialize)]
struct WireRequest<'a, A: serde::Serialize> {
    v: i64,
    op: &'a str,
    pc: &'a str,
    args: A,
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cred: Option<&'a str>,
}

/// A poll's arguments as [`Op::args_json`] writes them.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct WirePoll<'a> {
    confirm: &'a [String],
    marks: Vec<&'a Mark>,
    limit: usize,
    since: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    wait_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease: Option<WireLease<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    received_since: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    job: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sessions: Option<WireSessions<'a>>,
}

#[derive(serde::Serialize)]
struct WireLease<'a> {
    renew: Vec<&'a crate::lease::Renew>,
    release: Vec<&'a crate::lease::Release>,
    known: i64,
}

#[derive(serde::Serialize)]
struct WireSessions<'a> {
    live: Vec<&'a crate::sessions::LiveSession>,
}

impl<'a> WirePoll<'a> {
    fn of(p: &'a PollArgs) -> WirePoll<'a> {
        WirePoll {
            confirm: &p.confirm,
            marks: good_marks(&p.marks),
            limit: p.limit,
            since: p.since,
            wait_ms: (p.wait_ms > 0).then_some(p.wait_ms),
            lease: p.lease.as_ref().map(|l| WireLease {
                renew: l.renew.iter().filter_map(|r| r.as_ref().ok()).collect(),
                release: l.release.iter().filter_map(|r| r.as_ref().ok()).collect(),
                known: l.known,
            }),
            received_since: p.received_since,
            // Only on a cycle's first poll, and small: the JSON form's.
            job: p.job.as_ref().map(|j| j.to_json()),
            sessions: p.sessions.as_ref().map(|s| WireSessions { live: good_sessions(s) }),
        }
    }
}

/// Parses a raw request body.
pub fn parse_request_bytes(body: &[u8]) -> Result<Request, ProtoError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ProtoError::new(ErrorCode::BadJson, format!("request body is not JSON: {e}")))?;
    parse_request(&v)
}

/// Parses a request that is already JSON.
pub fn parse_request(v: &Value) -> Result<Request, ProtoError> {
    let obj = v.as_object().ok_or_else(|| ProtoError::new(ErrorCode::BadJson, "request body must be a JSON object"))?;
    match obj.get("v") {
        Some(Value::Number(n)) if n.as_i64() == Some(PROTOCOL_VERSION) => {}
        Some(other) => {
            return Err(ProtoError::new(
                ErrorCode::BadVersion,
                format!("protocol version {other} is not supported; this server speaks v{PROTOCOL_VERSION}"),
            ))
        }
        None => {
            return Err(ProtoError::new(
                ErrorCode::BadVersion,
                format!("missing protocol version \"v\"; this server speaks v{PROTOCOL_VERSION}"),
            ))
        }
    }
    let op_name = req_str(obj, "op")?;
    let token = match obj.get("token") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(ProtoError::field("token", "\"token\" must be a string")),
    };
    let cred = match obj.get("cred") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(ProtoError::field("cred", "\"cred\" must be a string")),
    };
    let pc = req_str(obj, "pc")?;
    let empty = Map::new();
    let args = match obj.get("args") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(m)) => m,
        Some(_) => return Err(ProtoError::field("args", "\"args\" must be an object")),
    };
    let kind = OpKind::from_name(&op_name)
        .ok_or_else(|| ProtoError::new(ErrorCode::UnknownOp, format!("unknown op {op_name:?}")))?;
    let op = match kind {
        OpKind::Hello => Op::Hello,
        OpKind::RosterGet => Op::RosterGet,
        OpKind::RosterSet => {
            let label = req_str(args, "label")?;
            check_label("label", &label)?;
            let hostname = req_str(args, "hostname")?;
            if !is_valid_hostname(&hostname) {
                return Err(ProtoError::field("hostname", "hostname must be 1-253 characters of A-Z a-z 0-9 . _ -"));
            }
            let number = opt_int(args, "number")?;
            if let Some(n) = number {
                if !(1..=1_000_000).contains(&n) {
                    return Err(ProtoError::field("number", "number must be between 1 and 1000000"));
                }
            }
            let claim = opt_bool(args, "claim")?.unwrap_or(false);
            let replace = opt_bool(args, "replace")?.unwrap_or(false);
            if replace && !claim {
                return Err(ProtoError::field("replace", "replace is only allowed with \"claim\": true"));
            }
            Op::RosterSet { label, hostname, number, claim, replace }
        }
        OpKind::RosterRemove => {
            let label = req_str(args, "label")?;
            check_label("label", &label)?;
            Op::RosterRemove { label }
        }
        OpKind::Send => {
            let m = args
                .get("mail")
                .ok_or_else(|| ProtoError::field("mail", "missing \"mail\""))?
                .as_object()
                .ok_or_else(|| ProtoError::field("mail", "\"mail\" must be an object"))?;
            Op::Send { mail: parse_mail(m)? }
        }
        OpKind::Poll => {
            // A malformed id is left out like an unknown one: one bad id never fails the poll.
            let confirm: Vec<String> = opt_str_array(args, "confirm", limits::POLL_LIMIT_MAX)?
                .into_iter()
                .filter(|id| is_valid_any_id(id))
                .collect();
            let marks = match args.get("marks") {
                None | Some(Value::Null) => vec![],
                Some(v) => parse_marks(v)?,
            };
            let limit = match opt_int(args, "limit")? {
                None => limits::POLL_LIMIT_DEFAULT,
                Some(n) if n >= 1 && n as usize <= limits::POLL_LIMIT_MAX => n as usize,
                Some(_) => {
                    return Err(ProtoError::field("limit", format!("limit must be 1..{}", limits::POLL_LIMIT_MAX)))
                }
            };
            let since = opt_int(args, "since")?.unwrap_or(0);
            if since < 0 {
                return Err(ProtoError::field("since", "since must be >= 0"));
            }
            let wait_ms = opt_int(args, "waitMs")?.unwrap_or(0);
            if !(0..=limits::WAIT_MS_MAX).contains(&wait_ms) {
                return Err(ProtoError::field("waitMs", format!("waitMs must be 0..{}", limits::WAIT_MS_MAX)));
            }
            let lease = match args.get("lease") {
                None | Some(Value::Null) => None,
                Some(v) => Some(parse_poll_lease(v)?),
            };
            let received_since = opt_int(args, "receivedSince")?;
            if received_since.is_some_and(|r| r < 0) {
                return Err(ProtoError::field("receivedSince", "receivedSince must be >= 0"));
            }
            let job = match args.get("job") {
                None | Some(Value::Null) => None,
                Some(v) => Some(parse_poll_job(v)?),
            };
            let sessions = match args.get("sessions") {
                None | Some(Value::Null) => None,
                Some(v) => Some(parse_poll_sessions(v)?),
            };
            Op::Poll(PollArgs { confirm, marks, limit, since, wait_ms, lease, received_since, job, sessions })
        }
        OpKind::Mark => {
            let v = args.get("marks").ok_or_else(|| ProtoError::field("marks", "missing \"marks\""))?;
            Op::Mark { marks: parse_marks(v)? }
        }
        OpKind::Status => {
            // An id that is not a mail id is answered as missing, like an unknown one.
            let ids = opt_str_array(args, "ids", limits::STATUS_IDS_MAX)?;
            if ids.is_empty() {
                return Err(ProtoError::field("ids", "\"ids\" must list 1 to 200 mail ids"));
            }
            Op::Status { ids }
        }
        OpKind::Sweep => Op::Sweep,
        OpKind::Alerts => Op::Alerts { open_only: opt_bool(args, "open")?.unwrap_or(true) },
        OpKind::Enrol => {
            let label = req_str(args, "label")?;
            check_label("label", &label)?;
            let hostname = opt_str(args, "hostname")?;
            if let Some(h) = &hostname {
                if !is_valid_hostname(h) {
                    return Err(ProtoError::field(
                        "hostname",
                        "hostname must be 1-253 characters of A-Z a-z 0-9 . _ -",
                    ));
                }
            }
            let code = req_str(args, "code")?;
            crate::rules::check_join_secret(&code)?;
            let expires_in = opt_int(args, "expiresIn")?.unwrap_or(limits::JOIN_CODE_DEFAULT_MS);
            if !(1..=limits::JOIN_CODE_MAX_MS).contains(&expires_in) {
                return Err(ProtoError::field("expiresIn", "expiresIn must be 1 ms to 30 days"));
            }
            Op::Enrol { label, hostname, code, expires_in }
        }
        OpKind::Join => {
            let code = req_str(args, "code")?;
            crate::rules::check_join_secret(&code)?;
            let hostname = req_str(args, "hostname")?;
            if !is_valid_hostname(&hostname) {
                return Err(ProtoError::field("hostname", "hostname must be 1-253 characters of A-Z a-z 0-9 . _ -"));
            }
            Op::Join { code, hostname }
        }
        OpKind::Revoke => {
            let label = req_str(args, "label")?;
            check_label("label", &label)?;
            Op::Revoke { label }
        }
        OpKind::Rotate => {
            let new_cred = req_str(args, "newCred")?;
            check_credential(&new_cred).map_err(|e| ProtoError::field("newCred", e.message))?;
            Op::Rotate { new_cred }
        }
        OpKind::RequireCredentials => Op::RequireCredentials { on: opt_bool(args, "on")?.unwrap_or(true) },
        OpKind::AuditLog => {
            let limit = match opt_int(args, "limit")? {
                None => 100,
                Some(n) if (1..=500).contains(&n) => n as usize,
                Some(_) => return Err(ProtoError::field("limit", "limit must be 1..500")),
            };
            Op::AuditLog { limit }
        }
        OpKind::LeaseClaim => Op::LeaseClaim(parse_claim(args)?),
        OpKind::LeaseRelease => Op::LeaseRelease(parse_release(args)?),
        OpKind::LeaseList => Op::LeaseList(parse_list(args)?),
        OpKind::NameTake => {
            let (name, session, live) = parse_take(args)?;
            Op::NameTake { name, session, live }
        }
        OpKind::Who => Op::Who,
        OpKind::LeaseCheck => {
            let (resource, fence) = parse_check(args)?;
            Op::LeaseCheck { resource, fence }
        }
        OpKind::JobSubmit => Op::JobSubmit(parse_submit(args)?),
        OpKind::JobStatus => Op::JobStatus { job_id: parse_job_id(args)? },
        OpKind::JobList => Op::JobList(crate::job::parse_list(args)?),
        OpKind::JobCancel => Op::JobCancel(parse_cancel(args)?),
        OpKind::JobStart => Op::JobStart(parse_start(args)?),
        OpKind::JobReport => Op::JobReport(parse_report(args)?),
    };
    // The caller's label is checked after the op so `unknown_op` wins over a bad label.
    check_label("pc", &pc)?;
    if let Some(c) = &cred {
        check_credential(c)?;
    }
    if let Op::RosterSet { label, claim: true, .. } = &op {
        if *label != pc {
            return Err(ProtoError::field("claim", "a PC may only claim its own label (label must equal pc)"));
        }
        if cred.is_none() {
            return Err(ProtoError::field("cred", "claim needs \"cred\": this installation's credential"));
        }
    }
    if matches!(op, Op::Join { .. } | Op::Rotate { .. }) && cred.is_none() {
        return Err(ProtoError::field("cred", format!("{} needs \"cred\": this PC's credential", op.name())));
    }
    Ok(Request { pc, token, cred, op })
}

fn parse_mail(m: &Map<String, Value>) -> Result<OutgoingMail, ProtoError> {
    let id = req_str(m, "id")?;
    if !is_valid_mail_id(&id) {
        return Err(ProtoError::field("mail.id", "mail.id must look like mail-<ms>-<8 lower hex>"));
    }
    let to = match m.get("to") {
        // A list of addresses (feature `multi-recipient`): one copy each.
        Some(Value::Array(items)) => {
            let list =
                items.iter().map(|a| a.as_str().map(str::to_string)).collect::<Option<Vec<String>>>().ok_or_else(
                    || ProtoError::field(crate::recipients::FIELD, "mail.to must be a string or an array of strings"),
                )?;
            crate::recipients::check_list(&list)?;
            To::Many(list)
        }
        _ => {
            let to = req_str(m, "to")?;
            if to != "*" && !is_valid_label(&to) {
                return Err(ProtoError::new(
                    ErrorCode::UnknownRecipient,
                    format!("{to:?} is not a roster label (labels are lower-case a-z 0-9 . _ -)"),
                )
                .with_candidates(vec![]));
            }
            To::One(to)
        }
    };
    let kind = match m.get("kind") {
        None | Some(Value::Null) => Kind::Note,
        Some(Value::String(s)) => Kind::parse(s)
            .ok_or_else(|| ProtoError::field("mail.kind", "mail.kind must be note, request or decision"))?,
        Some(_) => return Err(ProtoError::field("mail.kind", "mail.kind must be a string")),
    };
    let subject = opt_str(m, "subject")?.unwrap_or_default();
    check_text("mail.subject", &subject, limits::SUBJECT_MAX_CHARS, false)?;
    let body = req_str(m, "body")?;
    check_text("mail.body", &body, limits::BODY_MAX_CHARS, true)?;
    if body.trim().is_empty() {
        return Err(ProtoError::field("mail.body", "mail.body must not be empty"));
    }
    let urgent = opt_bool(m, "urgent")?.unwrap_or(false);
    let expires_at = opt_int(m, "expiresAt")?;
    if let Some(e) = expires_at {
        if e < 0 {
            return Err(ProtoError::field("mail.expiresAt", "mail.expiresAt must be a time in ms"));
        }
    }
    let expires_in = opt_int(m, "expiresIn")?;
    if let Some(e) = expires_in {
        if !(1..=limits::EXPIRES_IN_MAX_MS).contains(&e) {
            return Err(ProtoError::field("mail.expiresIn", "mail.expiresIn must be 1 ms to 366 days"));
        }
        if expires_at.is_some() {
            return Err(ProtoError::field("mail.expiresIn", "send either mail.expiresIn or mail.expiresAt, not both"));
        }
    }
    let in_reply_to = opt_str(m, "inReplyTo")?;
    if let Some(r) = &in_reply_to {
        check_any_id("mail.inReplyTo", r)?;
    }
    let auto = opt_bool(m, "auto")?.unwrap_or(false);
    let hop = opt_int(m, "hop")?.unwrap_or(0);
    if !(0..=1000).contains(&hop) {
        return Err(ProtoError::field("mail.hop", "mail.hop must be 0..1000"));
    }
    Ok(OutgoingMail { id, to, kind, subject, body, urgent, expires_at, expires_in, in_reply_to, auto, hop })
}

/// A batch of marks: the batch itself must be an array of at most 500 (that is
/// the request's shape); each item is parsed on its own.
fn parse_marks(v: &Value) -> Result<Vec<MarkItem>, ProtoError> {
    let arr = v.as_array().ok_or_else(|| ProtoError::field("marks", "\"marks\" must be an array"))?;
    if arr.len() > limits::MARKS_MAX {
        return Err(ProtoError::field("marks", format!("at most {} marks per request", limits::MARKS_MAX)));
    }
    Ok(arr.iter().enumerate().map(|(index, m)| parse_mark(index, m)).collect())
}

fn parse_mark(index: usize, v: &Value) -> MarkItem {
    let bad = |error: ProtoError| {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        BadMark { index, mark_id: s("markId"), id: s("id"), error }
    };
    let m = v.as_object().ok_or_else(|| bad(ProtoError::field("marks", "each mark must be an object")))?;
    let item = (|| {
        let mark_id = req_str(m, "markId")?;
        if mark_id.is_empty() || mark_id.chars().count() > 100 || mark_id.chars().any(char::is_control) {
            return Err(ProtoError::field("markId", "markId must be 1-100 characters with no control characters"));
        }
        let id = req_str(m, "id")?;
        check_any_id("id", &id)?;
        let op_s = req_str(m, "op")?;
        let op = MarkOp::parse(&op_s).ok_or_else(|| ProtoError::field("op", "mark op must be seen, ack or fail"))?;
        let at: Millis = opt_int(m, "at")?.ok_or_else(|| ProtoError::field("at", "missing \"at\""))?;
        let by = req_str(m, "by")?;
        let reason = opt_str(m, "reason")?;
        check_mark_text(op, &by, reason.as_deref())?;
        Ok(Mark { mark_id, id, op, at, by, reason })
    })();
    item.map_err(bad)
}

fn req_str(m: &Map<String, Value>, key: &str) -> Result<String, ProtoError> {
    match m.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        None | Some(Value::Null) => Err(ProtoError::field(key, format!("missing \"{key}\""))),
        Some(_) => Err(ProtoError::field(key, format!("\"{key}\" must be a string"))),
    }
}

fn opt_str(m: &Map<String, Value>, key: &str) -> Result<Option<String>, ProtoError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ProtoError::field(key, format!("\"{key}\" must be a string"))),
    }
}

fn opt_int(m: &Map<String, Value>, key: &str) -> Result<Option<i64>, ProtoError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            n.as_i64().map(Some).ok_or_else(|| ProtoError::field(key, format!("\"{key}\" must be an integer")))
        }
        Some(_) => Err(ProtoError::field(key, format!("\"{key}\" must be an integer"))),
    }
}

fn opt_bool(m: &Map<String, Value>, key: &str) -> Result<Option<bool>, ProtoError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(ProtoError::field(key, format!("\"{key}\" must be true or false"))),
    }
}

fn opt_str_array(m: &Map<String, Value>, key: &str, max: usize) -> Result<Vec<String>, ProtoError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(vec![]),
        Some(Value::Array(a)) => {
            if a.len() > max {
                return Err(ProtoError::field(key, format!("at most {max} entries in \"{key}\"")));
            }
            a.iter()
                .map(|x| {
                    x.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| ProtoError::field(key, format!("\"{key}\" must be an array of strings")))
                })
                .collect()
        }
        Some(_) => Err(ProtoError::field(key, format!("\"{key}\" must be an array of strings"))),
    }
}

fn check_label(field: &str, s: &str) -> Result<(), ProtoError> {
    if is_valid_label(s) {
        Ok(())
    } else {
        Err(ProtoError::field(field, format!("{field} {s:?} is not a valid label (lower-case a-z 0-9 . _ -, max 40)")))
    }
}

fn check_any_id(field: &str, id: &str) -> Result<(), ProtoError> {
    if is_valid_any_id(id) {
        Ok(())
    } else {
        Err(ProtoError::field(field, format!("{id:?} is not a mail id")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The poll written straight and the poll's JSON form are the same
    /// request, bad items (left out by both) and absent parts included.
    #[test]
    fn a_poll_written_straight_is_the_poll_of_the_json_form() {
        let full = br#"{"v":1,"op":"poll","pc":"pc-b","args":{
            "confirm":["mail-1-0000abcd","mail-2-0000abcd"],
            "marks":[{"markId":"m1","id":"mail-1-0000abcd","op":"seen","at":5,"by":"pc-b/s1"},
                     {"markId":"m2","id":"mail-1-0000abcd","op":"fail","at":6,"by":"pc-b","reason":"no"},
                     {"markId":7}],
            "limit":50,"since":12,"waitMs":20000,
            "lease":{"renew":[{"resource":"r1","fence":3},{"resource":7}],
                     "release":[{"resource":"r2","fence":4,"by":"pc-b/s1","reason":"done"}],"known":9},
            "receivedSince":33,
            "job":{"take":true,"running":["job-1"],"reports":[]},
            "sessions":{"live":[{"session":"s1","repo":"github.com/a/b","branch":"main","cwd":"/w","idleMs":10,"leases":["r1"]},
                                {"session":"bad\nid","idleMs":-1}]}}}"#;
        let bare = br#"{"v":1,"op":"poll","pc":"pc-b","args":{}}"#;
        for body in [&full[..], &bare[..]] {
            let op = parse_request_bytes(body).unwrap().op;
            assert!(matches!(op, Op::Poll(_)));
            for (token, cred) in [(Some("t"), Some("c")), (None, None)] {
                let straight: Value =
                    serde_json::from_slice(&request_bytes_with_cred("pc-b", token, cred, &op)).unwrap();
                assert_eq!(straight, request_json_with_cred("pc-b", token, cred, &op));
            }
        }
        let op = parse_request_bytes(full).unwrap().op;
        let written: Value = serde_json::from_slice(&request_bytes_with_cred("pc-b", None, None, &op)).unwrap();
        assert_eq!(written["args"]["marks"].as_array().map(Vec::len), Some(2), "the bad mark left out");
        assert_eq!(written["args"]["sessions"]["live"].as_array().map(Vec::len), Some(1), "the bad session left out");
        assert_eq!(written["args"]["waitMs"], json!(20000));
    }

    fn code(body: &str) -> ErrorCode {
        parse_request_bytes(body.as_bytes()).unwrap_err().code
    }

    #[test]
    fn envelope_errors_have_codes() {
        assert_eq!(code("{"), ErrorCode::BadJson);
        assert_eq!(code("[1]"), ErrorCode::BadJson);
        assert_eq!(code(r#"{"op":"hello","pc":"a"}"#), ErrorCode::BadVersion);
        assert_eq!(code(r#"{"v":2,"op":"hello","pc":"a"}"#), ErrorCode::BadVersion);
        assert_eq!(code(r#"{"v":"1","op":"hello","pc":"a"}"#), ErrorCode::BadVersion);
        assert_eq!(code(r#"{"v":1,"op":"nuke","pc":"a"}"#), ErrorCode::UnknownOp);
        assert_eq!(code(r#"{"v":1,"op":"hello"}"#), ErrorCode::BadRequest);
        assert_eq!(code(r#"{"v":1,"op":"hello","pc":"A B"}"#), ErrorCode::BadRequest);
        assert_eq!(code(r#"{"v":1,"op":"status","pc":"a","args":{"ids":[]}}"#), ErrorCode::BadRequest);
        let e = parse_request_bytes(br#"{"v":1,"op":"send","pc":"a","args":{"mail":{"id":"mail-1-0000abcd","to":"b","body":"x","urgent":"yes"}}}"#).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadRequest);
        assert_eq!(e.field.as_deref(), Some("urgent"));
    }

    #[test]
    fn a_bad_mark_is_refused_on_its_own() {
        let r = parse_request_bytes(
            br#"{"v":1,"op":"mark","pc":"a","args":{"marks":[
            {"markId":"m1","id":"mail-1-0000abcd","op":"fail","at":1,"by":"a"},
            {"markId":"m2","id":"mail-1-0000abcd","op":"seen","at":1,"by":"a"},
            {"markId":7},
            "x"]}}"#,
        )
        .unwrap();
        let Op::Mark { marks } = r.op else { panic!() };
        assert_eq!(marks.len(), 4);
        let e = marks[0].as_ref().unwrap_err();
        assert_eq!((e.index, e.error.field.as_deref(), e.mark_id.as_deref()), (0, Some("reason"), Some("m1")));
        assert!(marks[1].is_ok());
        let e = marks[2].as_ref().unwrap_err();
        assert_eq!((e.index, e.mark_id.as_deref()), (2, None));
        assert_eq!(marks[3].as_ref().unwrap_err().index, 3);
    }

    #[test]
    fn round_trip_of_client_requests() {
        let mail = OutgoingMail {
            id: "mail-5-0000abcd".into(),
            to: "pc-b".into(),
            kind: Kind::Decision,
            subject: "=SUM(A1)".into(),
            body: "@here +1 -1".into(),
            urgent: true,
            expires_at: None,
            expires_in: Some(99),
            in_reply_to: None,
            auto: false,
            hop: 0,
        };
        let op = Op::Send { mail: mail.clone() };
        let v = request_json("pc-a", Some("tok"), &op);
        let back = parse_request(&v).unwrap();
        assert_eq!(back, Request { pc: "pc-a".into(), token: Some("tok".into()), cred: None, op });
        // A list of addresses travels as an array (an older server refuses it
        // whole instead of reading one address out of it) and comes back a list.
        let list = OutgoingMail { to: To::Many(vec!["pc-b".into(), "ani".into()]), ..mail };
        let op = Op::Send { mail: list };
        let v = request_json("pc-a", None, &op);
        assert_eq!(v["args"]["mail"]["to"], json!(["pc-b", "ani"]));
        assert_eq!(parse_request(&v).unwrap().op, op);
    }

    #[test]
    fn claims_are_checked_when_parsed() {
        let cred = new_credential(&mut rand::rng());
        assert_eq!(cred.len(), 64);
        check_credential(&cred).unwrap();
        let claim = |label: &str| Op::RosterSet {
            label: label.into(),
            hostname: "H".into(),
            number: None,
            claim: true,
            replace: false,
        };
        let back = parse_request(&request_json_with_cred("pc-a", None, Some(&cred), &claim("pc-a"))).unwrap();
        assert_eq!(back.cred.as_deref(), Some(cred.as_str()));
        assert_eq!(back.op, claim("pc-a"));
        // Someone else's label, no credential, a short one, replace without claim.
        let field = |v: Value| parse_request(&v).unwrap_err().field;
        assert_eq!(field(request_json_with_cred("pc-a", None, Some(&cred), &claim("pc-b"))).as_deref(), Some("claim"));
        assert_eq!(field(request_json_with_cred("pc-a", None, None, &claim("pc-a"))).as_deref(), Some("cred"));
        assert_eq!(field(request_json_with_cred("pc-a", None, Some("short"), &Op::Hello)).as_deref(), Some("cred"));
        assert_eq!(field(json!({"v":1,"op":"hello","pc":"a","cred":7})).as_deref(), Some("cred"));
        assert_eq!(
            field(json!({"v":1,"op":"roster.set","pc":"a","args":{"label":"a","hostname":"H","replace":true}}))
                .as_deref(),
            Some("replace")
        );
        assert_eq!(credential_hash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    proptest! {
        // Random bytes and random JSON never panic the parser.
        #[test]
        fn parser_never_panics_on_bytes(body in prop::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse_request_bytes(&body);
        }

        #[test]
        fn parser_never_panics_on_json_shapes(
            op in prop::sample::select(vec!["hello","send","poll","mark","status","sweep","alerts","roster.set","roster.remove","x"]),
            field in "[a-zA-Z.]{0,12}",
            val in prop_oneof![Just(json!(null)), Just(json!(1)), Just(json!("s")), Just(json!([1])), Just(json!({"a":1})), Just(json!(true)), any::<i64>().prop_map(|n| json!(n))],
        ) {
            let mut args = Map::new();
            args.insert(field.clone(), val.clone());
            args.insert("mail".into(), json!({"id":"mail-1-0000abcd","to":"b","body":"x", field.clone(): val.clone()}));
            let req = json!({"v":1,"op":op,"pc":"pc-a","args":args});
            match parse_request(&req) {
                Ok(_) => {}
                Err(e) => prop_assert!(!e.message.is_empty()),
            }
        }
    }
}
