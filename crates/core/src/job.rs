//! Jobs: a command queue on the same server, protocol and PCs as
//! the mail. The wire types both servers answer and the PC reads, the limits,
//! and every rule that the submitting CLI, the servers and the executing PC
//! all check (one function each): a command's spec, its typed arguments, who
//! may submit, the dedup key, job ids, the output cap. See docs/protocol.md
//! "Jobs".

use crate::error::{ErrorCode, ItemError, NoItemRef, ProtoError};
use crate::roster::is_valid_label;
use crate::rules::{check_text, ACTOR_MAX_CHARS, REASON_MAX_CHARS};
use crate::Millis;
use rand::{Rng, RngExt};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

// ---- constants ----

/// H: the heartbeat period (the lease's): an executor running a job polls at least this often.
pub const HEARTBEAT_MS: Millis = crate::lease::HEARTBEAT_MS;
/// A running job without a heartbeat for 6·H is timed out by the sweep.
pub const STALE_AFTER_MS: Millis = 6 * HEARTBEAT_MS;
/// A job that ended ok/failed this recently is joined by an identical submit.
pub const DEDUP_WINDOW_DEFAULT_MS: Millis = 5 * 60_000;
/// Longest dedup window a submit may ask for.
pub const DEDUP_WINDOW_MAX_MS: Millis = 24 * 60 * 60_000;
/// A queued job never started this long is cancelled by the sweep.
pub const QUEUED_MAX_AGE_MS: Millis = 7 * 24 * 60 * 60_000;
/// A result's output keeps its last 64 KiB.
pub const OUTPUT_CAP_BYTES: usize = 64 * 1024;
/// A command's time limit: 1 s … 24 h.
pub const TIME_LIMIT_MIN_MS: Millis = 1_000;
pub const TIME_LIMIT_MAX_MS: Millis = 24 * 60 * 60_000;
/// Most arguments a command declares.
pub const ARGS_MAX: usize = 20;
/// Longest string/path value unless the spec says `maxLen`; and the hard cap of `maxLen`.
pub const STRING_MAX_LEN_DEFAULT: usize = 200;
pub const STRING_MAX_LEN_CAP: usize = 4_096;
/// Most commands a whitelist publishes; most artifact patterns per command.
pub const COMMANDS_MAX: usize = 200;
pub const ARTIFACTS_MAX: usize = 20;
pub const ARTIFACT_MAX_CHARS: usize = 400;
pub const DESCRIPTION_MAX_CHARS: usize = 1_000;
/// Most values of an enum (or checkout names).
pub const VALUES_MAX: usize = 500;
/// Longest `pattern` regex source.
pub const PATTERN_MAX_CHARS: usize = 500;
/// Queued jobs offered in one poll answer.
pub const OFFERED_MAX: usize = 20;
/// Most heartbeats and most reports in one poll.
pub const POLL_ITEMS_MAX: usize = 500;
/// `job.list`'s default and largest `limit`.
pub const LIST_LIMIT_DEFAULT: usize = 100;
pub const LIST_LIMIT_MAX: usize = 500;
/// Longest runner (`<pc>/<pid>`), session, name.
pub const RUNNER_MAX_CHARS: usize = 100;
pub const SESSION_MAX_CHARS: usize = crate::rules::SESSION_ID_MAX_CHARS;
/// The target that is the server itself.
pub const SERVER_TARGET: &str = "@server";
/// Who the server writes in a timeline.
pub const SERVER_ACTOR: &str = "server";
/// Chunked commands: a run starts no new input after this share of its time limit…
pub const CHUNK_START_DEADLINE_PERCENT: i64 = 70;
/// …a failing input is dropped after this many failures…
pub const CHUNK_FAILURES_MAX: u32 = 3;
/// …and retried again this long after its last failure.
pub const CHUNK_FAILURE_EXPIRY_MS: Millis = 3 * 24 * 60 * 60_000;
/// Sweep reasons (the same text on both servers).
/// The server cannot know how a run whose executor went silent ended: it
/// says so ("outcome unknown"), never that the run was interrupted.
pub const REASON_NO_HEARTBEAT: &str = "no heartbeat for 180 s (executor gone; outcome unknown)";
pub const REASON_PAST_LIMIT: &str = "running past twice its time limit";
pub const REASON_NEVER_STARTED: &str = "never started";
/// An executor that comes back to a run it started and finds no record of
/// how it ended (no exit code beside the run log): the job ends `timed_out`
/// with this reason. It may have finished, so it is never called interrupted.
pub const REASON_OUTCOME_UNKNOWN: &str =
    "the executor stopped while the job ran; outcome unknown (no exit code was recorded)";
/// The timeline note of a result that arrived after the server had timed the
/// job out for silence: the run's own end replaces the unknown one.
pub const LATE_REPORT_NOTE: &str = "reported by its executor after the server timed it out for silence";

/// Whether a report may replace a job's stored end: only a `timed_out` the
/// server decided for silence (the outcome it could not know), only by the
/// runner that ran it, and only with the run's real exit code (`ran: true`,
/// `exit` set) and a state that is not `cancelled`. Any other ended job keeps
/// its end (a retried report is answered unchanged), and a job corrected once
/// is no longer a silent `timed_out`, so it is corrected at most once.
pub fn late_report_allowed(stored: &Job, runner: &str, state: JobState, report: &JobResult) -> bool {
    stored.state == JobState::TimedOut
        && stored.reason.as_deref() == Some(REASON_NO_HEARTBEAT)
        && stored.runner.as_deref() == Some(runner)
        && report.ran
        && report.exit.is_some()
        && matches!(state, JobState::Ok | JobState::Failed | JobState::TimedOut)
}

/// `error.reason` of `job_refused`.
pub const REFUSED_NO_EXECUTOR: &str = "no_executor";
pub const REFUSED_NOT_WHITELISTED: &str = "not_whitelisted";
pub const REFUSED_BAD_ARGUMENT: &str = "bad_argument";
pub const REFUSED_SUBMITTER_NOT_ALLOWED: &str = "submitter_not_allowed";
/// The target PC was revoked by the admin.
pub const REFUSED_TARGET_REVOKED: &str = "target_revoked";

// ---- types ----

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArgType {
    String,
    Int,
    Bool,
    Enum,
    Path,
    Checkout,
}

/// One typed argument of a command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArgSpec {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: ArgType,
    #[serde(default)]
    pub required: bool,
    /// `string`: a regex the whole value must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// `string`/`path`: longest value in characters (default 200, at most 4 096).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_len: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<i64>,
    /// `enum`: the allowed values; `checkout`: the PC's checkout names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
    /// `string`/`path`: a value may start with `-`. Off by default, because
    /// such a value is read as an option by most programs (`--output=/x`).
    /// The executing PC sets it when its owner opted in for this argument,
    /// or placed it only after an end-of-options `--` the command declares.
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_dash: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// What an executor publishes of one command (never the argv template).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandSpec {
    pub name: String,
    #[serde(default)]
    pub args: Vec<ArgSpec>,
    /// The name of the argument whose value is the job's subject.
    #[serde(default)]
    pub subject: Option<String>,
    pub time_limit_ms: Millis,
    /// Patterns with `{command}`, `{subject}`, `{ts}`, `{args}` and the
    /// command's argument names (`{target}`); see `artifact_name`.
    #[serde(default)]
    pub artifacts: Vec<String>,
    #[serde(default)]
    pub read_only: bool,
    #[serde(default)]
    pub chunked: bool,
    #[serde(default)]
    pub verify: bool,
    #[serde(default)]
    pub description: String,
}

/// A checked argument value. On the wire it is the plain JSON value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ArgValue {
    Bool(bool),
    Int(i64),
    Str(String),
}

impl ArgValue {
    /// The value as one argv element (never through a shell).
    pub fn to_arg_string(&self) -> String {
        match self {
            ArgValue::Bool(b) => b.to_string(),
            ArgValue::Int(n) => n.to_string(),
            ArgValue::Str(s) => s.clone(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Queued,
    Running,
    Ok,
    Failed,
    TimedOut,
    Cancelled,
}

impl JobState {
    pub const ALL: [JobState; 6] =
        [JobState::Queued, JobState::Running, JobState::Ok, JobState::Failed, JobState::TimedOut, JobState::Cancelled];

    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Ok => "ok",
            JobState::Failed => "failed",
            JobState::TimedOut => "timed_out",
            JobState::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<JobState> {
        JobState::ALL.iter().copied().find(|x| x.as_str() == s)
    }

    pub fn is_ended(self) -> bool {
        !matches!(self, JobState::Queued | JobState::Running)
    }

    /// Forward only: queued → running → one end state; queued may end at once
    /// (cancelled, or reported without running); an ended job never moves.
    /// `running → running` is a chunked job's next run.
    pub fn can_move_to(self, next: JobState) -> bool {
        match self {
            JobState::Queued => next != JobState::Queued,
            JobState::Running => next != JobState::Queued,
            _ => false,
        }
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Submitter {
    pub pc: String,
    pub session: String,
    #[serde(default)]
    pub name: Option<String>,
}

/// One state change of a job: who (`pc/runner`, `server`) and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineEntry {
    pub at: Millis,
    pub state: JobState,
    pub by: String,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyOutcome {
    pub ok: bool,
    #[serde(default)]
    pub exit: Option<i64>,
    #[serde(default)]
    pub output: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ChunkCounts {
    pub done: i64,
    pub total: i64,
    pub failed: i64,
    pub skipped: i64,
}

/// What a run produced (or why it did not run).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobResult {
    /// False: answered from existing artifacts, or refused before running.
    pub ran: bool,
    #[serde(default)]
    pub exit: Option<i64>,
    #[serde(default)]
    pub duration_ms: Millis,
    /// The last 64 KiB of stdout+stderr.
    #[serde(default)]
    pub output: String,
    #[serde(default)]
    pub truncated: bool,
    #[serde(default)]
    pub artifacts: Vec<String>,
    #[serde(default)]
    pub reused: Vec<String>,
    #[serde(default)]
    pub read_back: Option<String>,
    #[serde(default)]
    pub verify: Option<VerifyOutcome>,
    #[serde(default)]
    pub chunks: Option<ChunkCounts>,
    #[serde(default)]
    pub data: Option<Value>,
}

/// A job as both servers answer it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Job {
    pub id: String,
    pub target: String,
    pub command: String,
    pub args: BTreeMap<String, ArgValue>,
    pub subject: String,
    pub submitter: Submitter,
    pub force: bool,
    pub rerun_of: Option<String>,
    pub state: JobState,
    pub submitted_at: Millis,
    pub started_at: Option<Millis>,
    /// The start of the current run (= `startedAt` for the first; a chunked job's later runs restamp it).
    #[serde(default)]
    pub run_started_at: Option<Millis>,
    pub runner: Option<String>,
    pub heartbeat_at: Option<Millis>,
    pub ended_at: Option<Millis>,
    pub time_limit_ms: Millis,
    pub cancel_requested: bool,
    /// Submits deduped onto this job.
    pub joined: i64,
    pub result: Option<JobResult>,
    pub reason: Option<String>,
    /// Only in `offered` jobs of a poll answer: the PC re-checks the submitter with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_required: Option<bool>,
    /// In `job.status` and submit answers; left out of lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Vec<TimelineEntry>>,
}

/// `job.submit` arguments. `args` are raw until checked against the target's spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubmitArgs {
    pub job_id: String,
    pub target: String,
    pub command: String,
    #[serde(default)]
    pub args: Map<String, Value>,
    #[serde(default)]
    pub force: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun_of: Option<String>,
    pub submitter: Submitter,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup_window_ms: Option<Millis>,
}

/// `job.submit` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubmitAnswer {
    pub deduped: bool,
    pub job: Job,
}

/// `job.status` answer, and `job.cancel|start|report` answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobAnswer {
    pub job: Job,
}

/// `job.list` arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListArgs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<JobState>,
    #[serde(default)]
    pub mine: bool,
    #[serde(default = "list_limit_default")]
    pub limit: usize,
}

fn list_limit_default() -> usize {
    LIST_LIMIT_DEFAULT
}

impl Default for ListArgs {
    fn default() -> Self {
        ListArgs { target: None, state: None, mine: false, limit: LIST_LIMIT_DEFAULT }
    }
}

/// `job.list` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListAnswer {
    pub jobs: Vec<Job>,
}

/// `job.cancel` arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelArgs {
    pub job_id: String,
    pub by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `job.start` arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartArgs {
    pub job_id: String,
    pub runner: String,
    pub started_at: Millis,
}

/// `job.report` arguments, and one report carried by a poll.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportArgs {
    pub job_id: String,
    pub runner: String,
    pub state: JobState,
    pub result: JobResult,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A PC's published whitelist (carried by its poll when the hash changed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Whitelist {
    pub hash: String,
    pub commands: Vec<CommandSpec>,
    /// None: the default (nobody, unless the server requires per-PC credentials).
    #[serde(default)]
    pub allowed_submitters: Option<Vec<String>>,
    #[serde(default)]
    pub checkouts: Vec<String>,
}

/// A poll item the server could not parse: answered on its own in `job.errors`.
#[derive(Debug, Clone, PartialEq)]
pub struct BadItem {
    pub index: usize,
    pub job_id: Option<String>,
    pub error: ProtoError,
}

pub type ReportItem = Result<ReportArgs, BadItem>;

/// The `job` argument of `poll`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PollJob {
    /// Refused on its own when the server cannot take it (`job.errors`,
    /// list `whitelist`): the rest of the poll still goes through.
    pub whitelist: Option<Result<Whitelist, BadItem>>,
    /// True: this PC executes; offer it queued jobs.
    pub take: bool,
    /// Heartbeats for jobs this PC runs.
    pub running: Vec<String>,
    pub reports: Vec<ReportItem>,
}

impl PollJob {
    pub fn to_json(&self) -> Value {
        let reports: Vec<&ReportArgs> = self.reports.iter().filter_map(|r| r.as_ref().ok()).collect();
        let mut v = json!({"take": self.take, "running": self.running, "reports": reports});
        if let Some(Ok(w)) = &self.whitelist {
            v["whitelist"] = json!(w);
        }
        v
    }
}

/// One poll report, as answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reported {
    pub job_id: String,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The `job` answer of `poll`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PollJobAnswer {
    pub whitelist_hash: Option<String>,
    #[serde(default)]
    pub offered: Vec<Job>,
    #[serde(default)]
    pub cancel: Vec<String>,
    #[serde(default)]
    pub reported: Vec<Reported>,
    #[serde(default)]
    pub finished: Vec<Job>,
    #[serde(default)]
    pub errors: Vec<ItemError>,
}

// ---- ids ----

/// A fresh job id: `job-<ms>-<8 lower hex>`, made by the client (idempotent submits).
pub fn new_job_id(now: Millis, rng: &mut impl Rng) -> String {
    format!("job-{}-{:08x}", now.max(0), rng.random::<u32>())
}

/// True for `job-<ms>-<8 lower hex>` (the mail id's shape).
pub fn is_valid_job_id(id: &str) -> bool {
    let Some(rest) = id.strip_prefix("job-") else { return false };
    let Some((ms, hex)) = rest.split_once('-') else { return false };
    !ms.is_empty()
        && ms.len() <= 15
        && ms.bytes().all(|b| b.is_ascii_digit())
        && hex.len() == 8
        && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

// ---- rules ----

fn refused(reason: &str, message: impl Into<String>) -> ProtoError {
    ProtoError::new(ErrorCode::JobRefused, message).with_reason(reason)
}

fn bad_argument(name: &str, message: impl Into<String>) -> ProtoError {
    let mut e = refused(REFUSED_BAD_ARGUMENT, message);
    e.field = Some(format!("args.{name}"));
    e
}

/// A command name: like a label (`^[a-z0-9][a-z0-9._-]{0,39}$`). Names
/// starting with `_` are the server's built-ins and never pass here.
pub fn is_valid_command_name(s: &str) -> bool {
    is_valid_label(s)
}

/// An argument name: a letter, then letters, digits, `_` or `-`; at most 40.
pub fn is_valid_arg_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 40
        && b[0].is_ascii_alphabetic()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-'))
}

/// The `pattern` of a string argument must match the whole value.
fn compile_pattern(p: &str) -> Result<regex::Regex, String> {
    if p.chars().count() > PATTERN_MAX_CHARS {
        return Err(format!("pattern is longer than {PATTERN_MAX_CHARS} characters"));
    }
    regex::RegexBuilder::new(&format!("^(?:{p})$"))
        .size_limit(1 << 20)
        .build()
        .map_err(|e| format!("pattern is not a regex: {e}"))
}

fn spec_err(field: String, message: impl Into<String>) -> ProtoError {
    ProtoError { field: Some(field), ..ProtoError::new(ErrorCode::BadRequest, message) }
}

/// The one check of a published command (the PC when it loads its config,
/// the server when it stores a whitelist). Errors are `bad_request` with the
/// field inside the spec (`args[1].pattern`, `timeLimitMs` …).
pub fn check_spec(spec: &CommandSpec) -> Result<(), ProtoError> {
    // A PC's built-in probes are the one exception to the label spelling:
    // as core defines them (read-only, no args, no artifacts).
    let pc_probe =
        pc_builtin(&spec.name).is_some() && spec.read_only && spec.args.is_empty() && spec.artifacts.is_empty();
    if !is_valid_command_name(&spec.name) && !pc_probe {
        return Err(spec_err(
            "name".into(),
            format!(
                "command name {:?} must look like a label (lower-case a-z 0-9 . _ -, max 40, not starting with _)",
                spec.name
            ),
        ));
    }
    check_spec_body(spec)
}

fn check_spec_body(spec: &CommandSpec) -> Result<(), ProtoError> {
    if spec.args.len() > ARGS_MAX {
        return Err(spec_err("args".into(), format!("at most {ARGS_MAX} arguments")));
    }
    for (i, a) in spec.args.iter().enumerate() {
        let f = |k: &str| format!("args[{i}].{k}");
        if !is_valid_arg_name(&a.name) {
            return Err(spec_err(
                f("name"),
                format!("argument name {:?}: a letter, then letters, digits, _ or -, max 40", a.name),
            ));
        }
        if spec.args[..i].iter().any(|b| b.name == a.name) {
            return Err(spec_err(f("name"), format!("argument {:?} is declared twice", a.name)));
        }
        if a.pattern.is_some() && a.kind != ArgType::String {
            return Err(spec_err(f("pattern"), "pattern is only for string arguments"));
        }
        if let Some(p) = &a.pattern {
            compile_pattern(p).map_err(|m| spec_err(f("pattern"), m))?;
        }
        if let Some(n) = a.max_len {
            if !matches!(a.kind, ArgType::String | ArgType::Path) {
                return Err(spec_err(f("maxLen"), "maxLen is only for string and path arguments"));
            }
            if !(1..=STRING_MAX_LEN_CAP).contains(&n) {
                return Err(spec_err(f("maxLen"), format!("maxLen must be 1..{STRING_MAX_LEN_CAP}")));
            }
        }
        if a.allow_dash && !matches!(a.kind, ArgType::String | ArgType::Path) {
            return Err(spec_err(f("allowDash"), "allowDash is only for string and path arguments"));
        }
        if (a.min.is_some() || a.max.is_some()) && a.kind != ArgType::Int {
            return Err(spec_err(f("min"), "min and max are only for int arguments"));
        }
        if let (Some(lo), Some(hi)) = (a.min, a.max) {
            if lo > hi {
                return Err(spec_err(f("min"), "min must not be above max"));
            }
        }
        match (&a.values, a.kind) {
            (None, ArgType::Enum) => return Err(spec_err(f("values"), "an enum argument needs its values")),
            (Some(_), k) if !matches!(k, ArgType::Enum | ArgType::Checkout) => {
                return Err(spec_err(f("values"), "values are only for enum and checkout arguments"))
            }
            (Some(vs), _) => {
                if vs.len() > VALUES_MAX {
                    return Err(spec_err(f("values"), format!("at most {VALUES_MAX} values")));
                }
                for v in vs {
                    if v.is_empty() {
                        return Err(spec_err(f("values"), "a value must not be empty"));
                    }
                    check_text(&f("values"), v, STRING_MAX_LEN_DEFAULT, false)?;
                }
            }
            _ => {}
        }
    }
    if let Some(s) = &spec.subject {
        if !spec.args.iter().any(|a| &a.name == s) {
            return Err(spec_err("subject".into(), format!("subject {s:?} is not one of the command's arguments")));
        }
    }
    if !(TIME_LIMIT_MIN_MS..=TIME_LIMIT_MAX_MS).contains(&spec.time_limit_ms) {
        return Err(spec_err("timeLimitMs".into(), "timeLimitMs must be 1 second to 24 hours"));
    }
    if spec.artifacts.len() > ARTIFACTS_MAX {
        return Err(spec_err("artifacts".into(), format!("at most {ARTIFACTS_MAX} artifact patterns")));
    }
    let arg_names: Vec<&str> = spec.args.iter().map(|a| a.name.as_str()).collect();
    for (i, p) in spec.artifacts.iter().enumerate() {
        check_artifact_pattern(p, &arg_names).map_err(|m| spec_err(format!("artifacts[{i}]"), m))?;
    }
    check_text("description", &spec.description, DESCRIPTION_MAX_CHARS, true)?;
    Ok(())
}

/// The placeholders every artifact pattern may use besides the command's
/// argument names.
pub const ARTIFACT_BUILTINS: [&str; 4] = ["command", "subject", "ts", "args"];

/// The `{name}` placeholders of a template, in order (an unclosed `{` ends the list).
pub fn placeholders(template: &str) -> Vec<&str> {
    let mut out = vec![];
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else { break };
        out.push(&after[..close]);
        rest = &after[close + 1..];
    }
    out
}

/// An artifact pattern: a relative path (the `path` rule) whose only braces
/// are placeholders: `{command}`, `{subject}`, `{ts}`, `{args}` or one of the
/// command's argument names.
pub fn check_artifact_pattern(p: &str, arg_names: &[&str]) -> Result<(), String> {
    if p.chars().count() > ARTIFACT_MAX_CHARS {
        return Err(format!("an artifact pattern is longer than {ARTIFACT_MAX_CHARS} characters"));
    }
    if let Some(x) = placeholders(p).into_iter().find(|x| !ARTIFACT_BUILTINS.contains(x) && !arg_names.contains(x)) {
        return Err(format!(
            "{{{x}}} is not a placeholder of artifact patterns ({{command}}, {{subject}}, {{ts}}, {{args}} or an argument name)"
        ));
    }
    let mut plain = String::new();
    let mut rest = p;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else { break };
        plain.push_str(&rest[..open]);
        plain.push('x');
        rest = &rest[open + close + 1..];
    }
    plain.push_str(rest);
    if plain.contains('{') || plain.contains('}') {
        return Err("an artifact pattern has a { or } that is not a placeholder".into());
    }
    check_relative_path(&plain)
}

/// The `path` rule: relative, `/` separators, no `..` segment, no leading `/`
/// or drive letter, no control characters, no backslash (a separator on Windows).
pub fn check_relative_path(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("must not be empty".into());
    }
    if s.chars().any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')) {
        return Err("contains control characters".into());
    }
    if s.contains('\\') {
        return Err("must use / as separator (no backslash)".into());
    }
    if s.starts_with('/') {
        return Err("must be relative (no leading /)".into());
    }
    let b = s.as_bytes();
    if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
        return Err("must be relative (no drive letter)".into());
    }
    if s.split('/').any(|seg| seg == "..") {
        return Err("must not contain a .. segment".into());
    }
    Ok(())
}

/// The job's subject: the value of the spec's subject argument, `""` without one.
pub fn subject_of(spec: &CommandSpec, args: &BTreeMap<String, ArgValue>) -> String {
    spec.subject.as_ref().and_then(|s| args.get(s)).map(ArgValue::to_arg_string).unwrap_or_default()
}

/// Typed arguments → the validated map (the submitting CLI, both servers at
/// submit, and the PC again before it builds the argv). Strings are never
/// interpreted: shell metacharacters are just characters of one argv element;
/// control characters, NUL, oversize, traversal, unknown names are refused
/// with `job_refused` (`reason: bad_argument`, `field: args.<name>`).
/// `int` and `bool` also take their string forms (`"42"`, `"true"`), so a CLI
/// that does not know the spec sends what it was given.
pub fn check_args(spec: &CommandSpec, args: &Map<String, Value>) -> Result<BTreeMap<String, ArgValue>, ProtoError> {
    if let Some(k) = args.keys().find(|k| !spec.args.iter().any(|a| &a.name == *k)) {
        let shown: String = k.chars().take(40).collect();
        let takes = match spec.args.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", ") {
            none if none.is_empty() => "it takes none".to_string(),
            names => format!("it takes: {names}"),
        };
        let mut e = bad_argument(&shown, format!("{:?} is not an argument of {} ({takes})", shown, spec.name));
        if !is_valid_arg_name(k) {
            e.field = Some("args".into());
        }
        return Err(e);
    }
    let mut out = BTreeMap::new();
    for a in &spec.args {
        let v = match args.get(&a.name) {
            None | Some(Value::Null) => {
                if a.required {
                    return Err(bad_argument(&a.name, format!("{} needs argument {:?}", spec.name, a.name)));
                }
                continue;
            }
            Some(v) => v,
        };
        out.insert(a.name.clone(), check_arg(a, v)?);
    }
    Ok(out)
}

fn check_arg(a: &ArgSpec, v: &Value) -> Result<ArgValue, ProtoError> {
    let n = &a.name;
    let string = |v: &Value| -> Result<String, ProtoError> {
        v.as_str().map(str::to_string).ok_or_else(|| bad_argument(n, format!("{n} must be a string")))
    };
    let text = |s: &str, max: usize| -> Result<(), ProtoError> {
        if s.chars().count() > max {
            return Err(bad_argument(n, format!("{n} is longer than {max} characters")));
        }
        if s.chars().any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')) {
            return Err(bad_argument(n, format!("{n} contains control characters")));
        }
        Ok(())
    };
    let max_len = a.max_len.unwrap_or(STRING_MAX_LEN_DEFAULT).min(STRING_MAX_LEN_CAP);
    match a.kind {
        ArgType::String => {
            let s = string(v)?;
            text(&s, max_len)?;
            check_not_an_option(a, &s)?;
            if let Some(p) = &a.pattern {
                let re = compile_pattern(p).map_err(|m| bad_argument(n, m))?;
                if !re.is_match(&s) {
                    return Err(bad_argument(n, format!("{n} does not match the pattern {p}")));
                }
            }
            Ok(ArgValue::Str(s))
        }
        ArgType::Int => {
            let x = match v {
                Value::Number(x) => x.as_i64(),
                Value::String(s) if s.len() <= 20 => s.parse::<i64>().ok().filter(|_| !s.starts_with('+')),
                _ => None,
            }
            .ok_or_else(|| bad_argument(n, format!("{n} must be an integer")))?;
            if a.min.is_some_and(|lo| x < lo) || a.max.is_some_and(|hi| x > hi) {
                let lo = a.min.map(|x| x.to_string()).unwrap_or_default();
                let hi = a.max.map(|x| x.to_string()).unwrap_or_default();
                return Err(bad_argument(n, format!("{n} must be {lo}..{hi}")));
            }
            Ok(ArgValue::Int(x))
        }
        ArgType::Bool => match v {
            Value::Bool(b) => Ok(ArgValue::Bool(*b)),
            Value::String(s) if s == "true" => Ok(ArgValue::Bool(true)),
            Value::String(s) if s == "false" => Ok(ArgValue::Bool(false)),
            _ => Err(bad_argument(n, format!("{n} must be true or false"))),
        },
        ArgType::Enum | ArgType::Checkout => {
            let s = string(v)?;
            text(&s, STRING_MAX_LEN_CAP)?;
            let values = a.values.as_deref().unwrap_or(&[]);
            if !values.contains(&s) {
                let what = if a.kind == ArgType::Checkout { "checkout" } else { "value" };
                return Err(bad_argument(
                    n,
                    format!("{n}: {s:?} is not a published {what} (one of: {})", values.join(", ")),
                ));
            }
            Ok(ArgValue::Str(s))
        }
        ArgType::Path => {
            let s = string(v)?;
            text(&s, max_len)?;
            check_relative_path(&s).map_err(|m| bad_argument(n, format!("{n} {m}")))?;
            check_not_an_option(a, &s)?;
            Ok(ArgValue::Str(s))
        }
    }
}

/// Arguments never become options: a `string` or `path` value that starts
/// with `-` is refused unless its spec allows it (`allowDash`: the owner
/// opted in, or the value only ever follows an end-of-options `--` the
/// command declares). One rule for the submitting CLI, both servers and the
/// executing PC (through `check_args`). A file whose name starts with `-` is
/// still reachable as `./-name`.
pub fn check_not_an_option(a: &ArgSpec, value: &str) -> Result<(), ProtoError> {
    if a.allow_dash || !matches!(a.kind, ArgType::String | ArgType::Path) || !value.starts_with('-') {
        return Ok(());
    }
    let n = &a.name;
    let hint = if a.kind == ArgType::Path { " (write ./-name for a file whose name starts with -)" } else { "" };
    Err(bad_argument(
        n,
        format!(
            "{n} starts with \"-\", which the command would read as an option{hint}; \
             its PC's owner can allow it for this argument (allow_dash = true, or after a declared \"--\")"
        ),
    ))
}

/// Why a revoked PC runs no jobs, and how it comes back: the refusal's
/// message at submit, and the reason of a queued job cancelled at revocation.
pub fn revoked_target_reason(target: &str) -> String {
    format!(
        "{target} was revoked by the admin: it runs no jobs until it is enrolled again \
         (the admin runs `pcmail roster add {target}` for a join code, then `pcmail init --join CODE` on that PC)"
    )
}

/// The rule for a job to a revoked PC, on both servers: refused at submit
/// (`job_refused`, reason `target_revoked`), never queued to wait for a PC
/// that cannot poll.
pub fn check_target_not_revoked(target: &str, revoked: bool) -> Result<(), ProtoError> {
    if revoked {
        Err(ProtoError::new(ErrorCode::JobRefused, format!("{}; nothing was queued", revoked_target_reason(target)))
            .with_reason(REFUSED_TARGET_REVOKED))
    } else {
        Ok(())
    }
}

/// Who may submit to a PC executor: the PC's `allowedSubmitters` when it set
/// them; by default (None) nobody, except when the server requires per-PC
/// credentials (then a label proves who submits, and every roster PC may).
pub fn submitter_allowed(allowed: Option<&[String]>, submitter_pc: &str, credentials_required: bool) -> bool {
    match allowed {
        Some(list) => list.iter().any(|l| l == submitter_pc),
        None => credentials_required,
    }
}

/// The dedup key of a submit: SHA-256 (lower hex) of the canonical JSON
/// `[target, command, args]` with the checked args sorted by name, so the
/// order and the string-vs-typed form of the arguments never matter.
pub fn dedup_key(target: &str, command: &str, args: &BTreeMap<String, ArgValue>) -> String {
    let canonical = serde_json::to_string(&json!([target, command, args])).unwrap_or_default();
    Sha256::digest(canonical.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// The hash a PC sends with its whitelist: SHA-256 of the canonical JSON of
/// what it publishes (commands, allowedSubmitters, checkouts).
pub fn whitelist_hash(commands: &[CommandSpec], allowed_submitters: Option<&[String]>, checkouts: &[String]) -> String {
    let canonical = serde_json::to_string(&json!([commands, allowed_submitters, checkouts])).unwrap_or_default();
    Sha256::digest(canonical.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// Keeps the last 64 KiB of an output, cut on a char boundary; true when cut.
pub fn cap_output(s: &str) -> (String, bool) {
    if s.len() <= OUTPUT_CAP_BYTES {
        return (s.to_string(), false);
    }
    let mut start = s.len() - OUTPUT_CAP_BYTES;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    (s[start..].to_string(), true)
}

/// A value made safe for a file name, one to one (two different values
/// never give the same text, so a name made of them pins what made it):
/// `A-Z a-z 0-9 . _ -` stay, every other byte is `%XX`, a value that is only
/// dots has its dots encoded (never `.` or `..`), the empty value is `%`.
pub fn safe_name_part(value: &str) -> String {
    if value.is_empty() {
        return "%".into();
    }
    let only_dots = value.bytes().all(|b| b == b'.');
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if (b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-') || b == b'.') && !(only_dots && b == b'.') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The identity of a job for "already made" reuse: its command and every
/// checked argument (sorted by name, typed), as 16 lower hex characters of
/// SHA-256. `{args}` in an artifact pattern is this.
pub fn reuse_identity(command: &str, args: &BTreeMap<String, ArgValue>) -> String {
    let canonical = serde_json::to_string(&json!(["reuse", command, args])).unwrap_or_default();
    Sha256::digest(canonical.as_bytes()).iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// True when every artifact name made from `pattern` says which arguments
/// made it: the pattern has `{args}`, or names each argument (the subject's
/// through `{subject}` or its own name). Only such patterns let a job answer
/// with artifacts an earlier job made.
pub fn artifact_pins_identity(pattern: &str, spec_args: &[&str], subject: Option<&str>) -> bool {
    let ph = placeholders(pattern);
    ph.contains(&"args") || spec_args.iter().all(|a| ph.contains(a) || (subject == Some(*a) && ph.contains(&"subject")))
}

/// An artifact pattern made a name: `{command}`, `{subject}` and each
/// `{argument}` (its value through `safe_name_part`, so a value never adds a
/// directory; an optional argument not given is empty), `{args}` (the
/// `reuse_identity`), `{ts}` (`ts_text`: the submit time in ms, or `{ts}`
/// itself for the wildcard of a search). An optional argument not given
/// makes nothing (a given empty value makes `%`, so the two differ).
pub fn artifact_name(
    pattern: &str,
    command: &str,
    subject: &str,
    args: &BTreeMap<String, ArgValue>,
    ts_text: &str,
) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut rest = pattern;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else { break };
        out.push_str(&rest[..open]);
        let name = &rest[open + 1..open + close];
        match name {
            "command" => out.push_str(command),
            "subject" => out.push_str(&safe_name_part(subject)),
            "ts" => out.push_str(ts_text),
            "args" => out.push_str(&reuse_identity(command, args)),
            arg => {
                if let Some(v) = args.get(arg) {
                    out.push_str(&safe_name_part(&v.to_arg_string()));
                }
            }
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    out
}

/// One file found for an artifact pattern, with its modification time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundArtifact {
    pub name: String,
    pub modified: Millis,
}

/// How fresh an earlier job's artifacts must be to answer a job without
/// running it: made within `within_ms` of now, and not before `not_before`
/// (the checkout's HEAD commit time: a commit since makes them stale).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReuseRule {
    pub within_ms: Millis,
    pub not_before: Option<Millis>,
}

/// Default of `ReuseRule::within_ms`: a day.
pub const REUSE_WITHIN_DEFAULT_MS: Millis = 24 * 60 * 60_000;

/// The one "already made" rule (a first submit, a `--rerun-of`, and a retry
/// of a `timed_out` job): `found[i]` are the files matching the i-th
/// artifact pattern of this job's identity (see `artifact_pins_identity`).
/// Reused only when every pattern has a fresh file; the answer is the newest
/// fresh file of each. None: run it.
pub fn reusable(found: &[Vec<FoundArtifact>], rule: ReuseRule, now: Millis) -> Option<Vec<String>> {
    if found.is_empty() || rule.within_ms <= 0 {
        return None;
    }
    let fresh =
        |f: &&FoundArtifact| now - f.modified <= rule.within_ms && rule.not_before.is_none_or(|t| f.modified >= t);
    found
        .iter()
        .map(|fs| fs.iter().filter(fresh).max_by(|a, b| (a.modified, &a.name).cmp(&(b.modified, &b.name))))
        .map(|f| f.map(|f| f.name.clone()))
        .collect()
}

/// The server's built-in commands (target `@server`): read-only probes and
/// maintenance, run inside the submit. Both servers publish these.
pub fn server_builtins() -> Vec<CommandSpec> {
    let probe = |name: &str, args: Vec<ArgSpec>, description: &str, read_only: bool| CommandSpec {
        name: name.into(),
        args,
        subject: None,
        time_limit_ms: 60_000,
        artifacts: vec![],
        read_only,
        chunked: false,
        verify: false,
        description: description.into(),
    };
    let arg = |name: &str, kind: ArgType, required: bool| ArgSpec {
        name: name.into(),
        kind,
        required,
        pattern: None,
        max_len: None,
        min: None,
        max: None,
        values: None,
        allow_dash: false,
    };
    let mail_id = ArgSpec {
        pattern: Some(r"mail-[0-9]{1,15}-[0-9a-f]{8}(~[a-z0-9][a-z0-9._-]{0,39})?".into()),
        max_len: Some(100),
        ..arg("id", ArgType::String, true)
    };
    let state = ArgSpec {
        values: Some(JobState::ALL.iter().map(|s| s.as_str().to_string()).collect()),
        ..arg("state", ArgType::Enum, false)
    };
    vec![
        probe(
            "_debug_roster",
            vec![],
            "the roster with each PC's last poll, credential state and published commands",
            true,
        ),
        probe("_debug_mail", vec![mail_id], "one mail with its timeline and copies", true),
        probe("_debug_alerts", vec![], "open alerts", true),
        probe(
            "_debug_sweep_plan",
            vec![],
            "what the next sweep would time out, cancel, expire or alert, and why",
            true,
        ),
        probe("_debug_jobs", vec![state], "jobs (newest first), optionally in one state", true),
        probe("sweep", vec![], "run the sweep now", false),
        probe("prune", vec![], "prune ended mail, leases and jobs past their retention", false),
    ]
}

/// The spec of a built-in, by name.
pub fn server_builtin(name: &str) -> Option<CommandSpec> {
    server_builtins().into_iter().find(|c| c.name == name)
}

/// Most items a PC probe lists (sessions, leases, jobs): its answer stays
/// small, like any job's bounded output.
pub const PC_PROBE_ITEMS_MAX: usize = 100;

/// The read-only probes every PC executor has besides its owner's commands:
/// published with its whitelist, run in-process by the
/// executor (no command, no shell), under the same submitter rule
/// (`submitter_allowed`). Their names start with `_`, which no owner's
/// command may, so they never collide.
pub fn pc_builtins() -> Vec<CommandSpec> {
    let pc_probe = |name: &str, description: &str| CommandSpec {
        name: name.into(),
        args: vec![],
        subject: None,
        time_limit_ms: 60_000,
        artifacts: vec![],
        read_only: true,
        chunked: false,
        verify: false,
        description: description.into(),
    };
    vec![
        pc_probe(
            "_debug_pc",
            "this PC: label, version, server kind, poller state, last poll, pending marks, store size",
        ),
        pc_probe("_debug_sessions", "this PC's live sessions: id prefix, name, repo, branch, idle time"),
        pc_probe(
            "_debug_leases",
            "the leases in this PC's cache, with their stale flags, and the ones its sessions hold",
        ),
        pc_probe("_debug_jobs", "the jobs running on this PC and its queued reports"),
    ]
}

/// The spec of a PC probe, by name.
pub fn pc_builtin(name: &str) -> Option<CommandSpec> {
    pc_builtins().into_iter().find(|c| c.name == name)
}

// ---- parsing of the ops' arguments (both servers' Rust side; gas mirrors it) ----

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

fn opt_bool(m: &M, key: &str, field: &str) -> Result<Option<bool>, ProtoError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(ProtoError::field(field, format!("\"{key}\" must be true or false"))),
    }
}

fn obj<'a>(v: &'a Value, field: &str) -> Result<&'a M, ProtoError> {
    v.as_object().ok_or_else(|| ProtoError::field(field, format!("\"{field}\" must be an object")))
}

fn check_job_id(field: &str, id: &str) -> Result<(), ProtoError> {
    if is_valid_job_id(id) {
        Ok(())
    } else {
        Err(ProtoError::field(field, format!("{field} must look like job-<ms>-<8 lower hex>")))
    }
}

fn check_line(field: &str, s: &str, max: usize) -> Result<(), ProtoError> {
    if s.trim().is_empty() {
        return Err(ProtoError::field(field, format!("{field} must not be blank")));
    }
    check_text(field, s, max, false)
}

/// A target: a roster label or `@server`.
pub fn is_valid_target(s: &str) -> bool {
    s == SERVER_TARGET || is_valid_label(s)
}

/// The submitter names the caller's PC (compared with the envelope by the server) and a session.
pub fn check_submitter(s: &Submitter) -> Result<(), ProtoError> {
    if !is_valid_label(&s.pc) {
        return Err(ProtoError::field("submitter.pc", "submitter.pc must be a roster label"));
    }
    crate::rules::check_session_id("submitter.session", &s.session)?;
    if let Some(n) = &s.name {
        check_line("submitter.name", n, SESSION_MAX_CHARS)?;
    }
    Ok(())
}

/// The shape of a submit (the CLI before it sends; the servers when they
/// parse). Whether the command and args fit the target is `check_args`'s.
pub fn check_submit(a: &SubmitArgs) -> Result<(), ProtoError> {
    check_job_id("jobId", &a.job_id)?;
    if !is_valid_target(&a.target) {
        return Err(ProtoError::field("target", "target must be a roster label or @server"));
    }
    let name_ok = is_valid_command_name(&a.command)
        || (a.command.starts_with('_') && a.command.len() > 1 && is_valid_label(&a.command[1..]));
    if !name_ok {
        return Err(ProtoError::field("command", "command must look like a label (lower-case a-z 0-9 . _ -, max 40)"));
    }
    if a.args.len() > ARGS_MAX {
        return Err(ProtoError::field("args", format!("at most {ARGS_MAX} arguments")));
    }
    if let Some(r) = &a.rerun_of {
        check_job_id("rerunOf", r)?;
    }
    check_submitter(&a.submitter)?;
    if let Some(w) = a.dedup_window_ms {
        if !(0..=DEDUP_WINDOW_MAX_MS).contains(&w) {
            return Err(ProtoError::field("dedupWindowMs", "dedupWindowMs must be 0 ms to 1 day"));
        }
    }
    Ok(())
}

pub fn parse_submit(args: &M) -> Result<SubmitArgs, ProtoError> {
    let s = obj(args.get("submitter").unwrap_or(&Value::Null), "submitter")?;
    let a = SubmitArgs {
        job_id: req_str(args, "jobId", "jobId")?,
        target: req_str(args, "target", "target")?,
        command: req_str(args, "command", "command")?,
        args: match args.get("args") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => return Err(ProtoError::field("args", "\"args\" must be an object")),
        },
        force: opt_bool(args, "force", "force")?.unwrap_or(false),
        rerun_of: opt_str(args, "rerunOf", "rerunOf")?,
        submitter: Submitter {
            pc: req_str(s, "pc", "submitter.pc")?,
            session: req_str(s, "session", "submitter.session")?,
            name: opt_str(s, "name", "submitter.name")?,
        },
        dedup_window_ms: opt_int(args, "dedupWindowMs", "dedupWindowMs")?,
    };
    check_submit(&a)?;
    Ok(a)
}

pub fn parse_job_id(args: &M) -> Result<String, ProtoError> {
    let id = req_str(args, "jobId", "jobId")?;
    check_job_id("jobId", &id)?;
    Ok(id)
}

pub fn parse_list(args: &M) -> Result<ListArgs, ProtoError> {
    let target = opt_str(args, "target", "target")?;
    if let Some(t) = &target {
        if !is_valid_target(t) {
            return Err(ProtoError::field("target", "target must be a roster label or @server"));
        }
    }
    let state = match opt_str(args, "state", "state")? {
        None => None,
        Some(s) => Some(JobState::parse(&s).ok_or_else(|| {
            ProtoError::field("state", "state must be queued, running, ok, failed, timed_out or cancelled")
        })?),
    };
    let limit = match opt_int(args, "limit", "limit")? {
        None => LIST_LIMIT_DEFAULT,
        Some(n) if n >= 1 && n as usize <= LIST_LIMIT_MAX => n as usize,
        Some(_) => return Err(ProtoError::field("limit", format!("limit must be 1..{LIST_LIMIT_MAX}"))),
    };
    Ok(ListArgs { target, state, mine: opt_bool(args, "mine", "mine")?.unwrap_or(false), limit })
}

pub fn parse_cancel(args: &M) -> Result<CancelArgs, ProtoError> {
    let c = CancelArgs {
        job_id: parse_job_id(args)?,
        by: req_str(args, "by", "by")?,
        reason: opt_str(args, "reason", "reason")?,
    };
    check_line("by", &c.by, ACTOR_MAX_CHARS)?;
    if let Some(r) = &c.reason {
        check_text("reason", r, REASON_MAX_CHARS, true)?;
    }
    Ok(c)
}

pub fn parse_start(args: &M) -> Result<StartArgs, ProtoError> {
    let s = StartArgs {
        job_id: parse_job_id(args)?,
        runner: req_str(args, "runner", "runner")?,
        started_at: opt_int(args, "startedAt", "startedAt")?
            .ok_or_else(|| ProtoError::field("startedAt", "missing \"startedAt\""))?,
    };
    check_line("runner", &s.runner, RUNNER_MAX_CHARS)?;
    if s.started_at < 0 {
        return Err(ProtoError::field("startedAt", "startedAt must be a time in ms"));
    }
    Ok(s)
}

/// The one check of a report (the PC before it queues one; the servers).
pub fn check_report(r: &ReportArgs) -> Result<(), ProtoError> {
    check_job_id("jobId", &r.job_id)?;
    check_line("runner", &r.runner, RUNNER_MAX_CHARS)?;
    if !r.state.is_ended() {
        return Err(ProtoError::field("state", "a report's state must be ok, failed, cancelled or timed_out"));
    }
    if let Some(reason) = &r.reason {
        check_text("reason", reason, REASON_MAX_CHARS, true)?;
    }
    Ok(())
}

pub fn parse_report(args: &M) -> Result<ReportArgs, ProtoError> {
    let state_s = req_str(args, "state", "state")?;
    let state = JobState::parse(&state_s)
        .filter(|s| s.is_ended())
        .ok_or_else(|| ProtoError::field("state", "a report's state must be ok, failed, cancelled or timed_out"))?;
    let result: JobResult = match args.get("result") {
        Some(v @ Value::Object(_)) => {
            serde_json::from_value(v.clone()).map_err(|e| ProtoError::field("result", format!("result: {e}")))?
        }
        _ => return Err(ProtoError::field("result", "\"result\" must be an object")),
    };
    let r = ReportArgs {
        job_id: parse_job_id(args)?,
        runner: req_str(args, "runner", "runner")?,
        state,
        result,
        reason: opt_str(args, "reason", "reason")?,
    };
    check_report(&r)?;
    Ok(r)
}

fn parse_whitelist(v: &Value) -> Result<Whitelist, ProtoError> {
    let m = obj(v, "job.whitelist")?;
    let hash = req_str(m, "hash", "job.whitelist.hash")?;
    let commands: Vec<CommandSpec> = match m.get("commands") {
        Some(Value::Array(a)) if a.len() <= COMMANDS_MAX => a
            .iter()
            .enumerate()
            .map(|(i, c)| {
                serde_json::from_value(c.clone())
                    .map_err(|e| ProtoError::field(&format!("job.whitelist.commands[{i}]"), format!("{e}")))
            })
            .collect::<Result<_, _>>()?,
        _ => {
            return Err(ProtoError::field(
                "job.whitelist.commands",
                format!("\"commands\" must be an array of at most {COMMANDS_MAX}"),
            ))
        }
    };
    let labels = |key: &str| -> Result<Option<Vec<String>>, ProtoError> {
        let field = format!("job.whitelist.{key}");
        match m.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(a)) if a.len() <= VALUES_MAX => a
                .iter()
                .map(|x| x.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| ProtoError::field(&field, format!("\"{key}\" must be an array of names"))),
            Some(_) => {
                Err(ProtoError::field(&field, format!("\"{key}\" must be an array of at most {VALUES_MAX} names")))
            }
        }
    };
    let allowed_submitters = labels("allowedSubmitters")?;
    let checkouts = labels("checkouts")?.unwrap_or_default();
    let w = Whitelist { hash, commands, allowed_submitters, checkouts };
    check_whitelist(&w)?;
    Ok(w)
}

/// The one check of a published whitelist: the PC runs it before it
/// publishes one (a `[jobs]` config it would refuse is not published, and
/// its polls go on), both servers when they parse it.
pub fn check_whitelist(w: &Whitelist) -> Result<(), ProtoError> {
    check_line("job.whitelist.hash", &w.hash, 128)?;
    if w.commands.len() > COMMANDS_MAX {
        return Err(ProtoError::field(
            "job.whitelist.commands",
            format!("\"commands\" must be an array of at most {COMMANDS_MAX}"),
        ));
    }
    for (i, c) in w.commands.iter().enumerate() {
        check_spec(c).map_err(|e| {
            let f = format!("job.whitelist.commands[{i}].{}", e.field.clone().unwrap_or_default());
            ProtoError { field: Some(f), ..e }
        })?;
        if w.commands[..i].iter().any(|d| d.name == c.name) {
            return Err(ProtoError::field(
                &format!("job.whitelist.commands[{i}].name"),
                format!("command {:?} is published twice", c.name),
            ));
        }
    }
    let names = |key: &str, list: &[String]| -> Result<(), ProtoError> {
        let field = format!("job.whitelist.{key}");
        if list.len() > VALUES_MAX {
            return Err(ProtoError::field(&field, format!("\"{key}\" must be an array of at most {VALUES_MAX} names")));
        }
        if list.iter().any(|s| s.is_empty() || check_text(&field, s, STRING_MAX_LEN_DEFAULT, false).is_err()) {
            return Err(ProtoError::field(&field, format!("\"{key}\" must be an array of names")));
        }
        Ok(())
    };
    if let Some(a) = &w.allowed_submitters {
        names("allowedSubmitters", a)?;
    }
    names("checkouts", &w.checkouts)
}

/// The poll's `job` argument: the lists must be arrays of at most 500 (the
/// request's shape); each report is parsed on its own (one bad item fails only itself).
pub fn parse_poll_job(v: &Value) -> Result<PollJob, ProtoError> {
    let m = obj(v, "job")?;
    let list = |key: &str| -> Result<Vec<Value>, ProtoError> {
        let field = format!("job.{key}");
        match m.get(key) {
            None | Some(Value::Null) => Ok(vec![]),
            Some(Value::Array(a)) if a.len() <= POLL_ITEMS_MAX => Ok(a.clone()),
            Some(Value::Array(_)) => {
                Err(ProtoError::field(&field, format!("at most {POLL_ITEMS_MAX} items in \"{field}\"")))
            }
            Some(_) => Err(ProtoError::field(&field, format!("\"{field}\" must be an array"))),
        }
    };
    let whitelist = match m.get("whitelist") {
        None | Some(Value::Null) => None,
        Some(w) => Some(parse_whitelist(w).map_err(|error| BadItem { index: 0, job_id: None, error })),
    };
    // A malformed heartbeat id is left out like an unknown one.
    let running =
        list("running")?.iter().filter_map(|x| x.as_str().filter(|s| is_valid_job_id(s)).map(str::to_string)).collect();
    let reports = list("reports")?
        .iter()
        .enumerate()
        .map(|(index, v)| {
            let bad = |error: ProtoError| BadItem {
                index,
                job_id: v.get("jobId").and_then(Value::as_str).map(|s| s.chars().take(60).collect()),
                error,
            };
            let m =
                v.as_object().ok_or_else(|| bad(ProtoError::field("job.reports", "each report must be an object")))?;
            parse_report(m).map_err(bad)
        })
        .collect();
    Ok(PollJob { whitelist, take: opt_bool(m, "take", "job.take")?.unwrap_or(false), running, reports })
}

impl BadItem {
    /// The item's entry in the poll answer's `job.errors`.
    pub fn to_error(&self, list: &str) -> ItemError {
        ItemError::new(list, self.index, NoItemRef {}, &self.error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> CommandSpec {
        serde_json::from_value(json!({
        "name": "test", "subject": "checkout", "timeLimitMs": 600000,
        "artifacts": ["target/pcmail/{command}-{subject}-{ts}.log"],
        "args": [
            {"name": "checkout", "type": "checkout", "required": true, "values": ["app", "web"]},
            {"name": "crate", "type": "string", "pattern": "[a-z][a-z0-9_-]*", "maxLen": 40},
            {"name": "filter", "type": "string"},
            {"name": "jobs", "type": "int", "min": 1, "max": 16},
            {"name": "release", "type": "bool"},
            {"name": "profile", "type": "enum", "values": ["dev", "ci"]},
            {"name": "file", "type": "path", "maxLen": 100}
        ]}))
        .unwrap()
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn refusal(v: Value) -> (String, Option<String>) {
        let e = check_args(&spec(), &args(v)).unwrap_err();
        assert_eq!(e.code, ErrorCode::JobRefused, "{e:?}");
        assert_eq!(e.reason.as_deref(), Some(REFUSED_BAD_ARGUMENT));
        (e.field.clone().unwrap_or_default(), Some(e.message))
    }

    #[test]
    fn the_example_spec_is_valid_and_its_args_check() {
        check_spec(&spec()).unwrap();
        let m = check_args(
            &spec(),
            &args(json!({"checkout": "app", "crate": "core", "jobs": "4", "release": "true", "file": "src/lib.rs"})),
        )
        .unwrap();
        assert_eq!(m["jobs"], ArgValue::Int(4));
        assert_eq!(m["release"], ArgValue::Bool(true));
        assert_eq!(subject_of(&spec(), &m), "app");
        // The wire form of the checked map is plain JSON values.
        assert_eq!(
            serde_json::to_value(&m).unwrap(),
            json!({"checkout": "app", "crate": "core", "file": "src/lib.rs", "jobs": 4, "release": true})
        );
    }

    #[test]
    fn shell_metacharacters_are_just_characters() {
        for s in ["a; rm -rf /", "$(id)", "`id`", "a && b | c > d < e", "'\"*?[]{}~!#&", "a--help", "x -rf"] {
            let m = check_args(&spec(), &args(json!({"checkout": "app", "filter": s}))).unwrap();
            assert_eq!(m["filter"], ArgValue::Str(s.to_string()), "{s:?} changed");
        }
    }

    #[test]
    fn arguments_never_become_options_unless_the_spec_allows_it() {
        for (name, v) in [
            ("filter", "--output=/tmp/x"),
            ("filter", "-rf"),
            ("filter", "-"),
            ("file", "--output=/tmp/x"),
            ("file", "-x/y"),
            ("file", "-"),
        ] {
            let e = check_args(&spec(), &args(json!({"checkout": "app", name: v}))).unwrap_err();
            assert_eq!(e.code, ErrorCode::JobRefused);
            assert_eq!(e.reason.as_deref(), Some(REFUSED_BAD_ARGUMENT));
            assert_eq!(e.field.as_deref(), Some(format!("args.{name}").as_str()), "{v}");
            assert!(e.message.contains("read as an option"), "{}", e.message);
        }
        // A dash inside the value, or a file reached as ./-name, is fine.
        for (name, v) in [("filter", "a-b"), ("file", "./-x"), ("file", "src/-x")] {
            assert!(check_args(&spec(), &args(json!({"checkout": "app", name: v}))).is_ok(), "{v}");
        }
        // The spec opts in per argument (and only string and path may).
        let mut s = spec();
        s.args[2].allow_dash = true;
        s.args[6].allow_dash = true;
        check_spec(&s).unwrap();
        assert!(check_args(&s, &args(json!({"checkout": "app", "filter": "--x", "file": "-y"}))).is_ok());
        let wire = serde_json::to_value(&s).unwrap();
        assert_eq!(wire["args"][2]["allowDash"], json!(true));
        assert!(wire["args"][1].get("allowDash").is_none(), "left out when false: {wire}");
        s.args[3].allow_dash = true;
        assert_eq!(check_spec(&s).unwrap_err().field.as_deref(), Some("args[3].allowDash"));
        // Other kinds are not affected: an int may be negative.
        let mut s = spec();
        s.args[3].min = Some(-5);
        assert!(check_args(&s, &args(json!({"checkout": "app", "jobs": "-3"}))).is_ok());
    }

    #[test]
    fn the_reuse_identity_holds_every_argument() {
        let s = spec();
        let a = check_args(&s, &args(json!({"checkout": "app", "crate": "core"}))).unwrap();
        let b = check_args(&s, &args(json!({"checkout": "app", "crate": "server"}))).unwrap();
        let a2 = check_args(&s, &args(json!({"crate": "core", "checkout": "app"}))).unwrap();
        assert_eq!(reuse_identity("test", &a), reuse_identity("test", &a2));
        assert_ne!(reuse_identity("test", &a), reuse_identity("test", &b));
        assert_ne!(reuse_identity("test", &a), reuse_identity("build", &a));
        assert_eq!(reuse_identity("test", &a).len(), 16);
        let n = |p: &str, args: &BTreeMap<String, ArgValue>| artifact_name(p, "test", "app", args, "5");
        assert_eq!(n("out/{command}-{subject}-{crate}-{ts}.log", &a), "out/test-app-core-5.log");
        assert_eq!(n("out/{command}-{subject}-{crate}-{ts}.log", &b), "out/test-app-server-5.log");
        assert_eq!(n("out/{args}.log", &a), format!("out/{}.log", reuse_identity("test", &a)));
        // An optional argument not given makes nothing; an empty one `%`.
        assert_eq!(n("out/{filter}.log", &a), "out/.log");
        let mut e = a.clone();
        e.insert("filter".into(), ArgValue::Str(String::new()));
        assert_eq!(n("out/{filter}.log", &e), "out/%.log");
        let names: Vec<&str> = s.args.iter().map(|a| a.name.as_str()).collect();
        assert!(artifact_pins_identity("o/{args}-{ts}", &names, Some("checkout")));
        assert!(!artifact_pins_identity("o/{command}-{subject}-{ts}", &names, Some("checkout")));
        assert!(artifact_pins_identity("o/{subject}", &["checkout"], Some("checkout")));
        assert!(artifact_pins_identity("o/{checkout}-{target}", &["checkout", "target"], None));
        assert!(!artifact_pins_identity("o/{checkout}", &["checkout", "target"], None));
        check_artifact_pattern("o/{crate}-{args}-{ts}", &names).unwrap();
        assert!(check_artifact_pattern("o/{nope}", &names).unwrap_err().contains("{nope}"));
    }

    #[test]
    fn reuse_needs_every_pattern_fresh_and_newer_than_head() {
        let f = |name: &str, modified: Millis| FoundArtifact { name: name.into(), modified };
        let rule = ReuseRule { within_ms: 3_600_000, not_before: None };
        let now = 10_000_000;
        assert_eq!(reusable(&[vec![f("a-1", now - 10), f("a-2", now - 5)]], rule, now), Some(vec!["a-2".into()]));
        // Too old, or older than the checkout's last commit: run again.
        assert_eq!(reusable(&[vec![f("a-1", now - 3_600_001)]], rule, now), None);
        let after_commit = ReuseRule { not_before: Some(now - 100), ..rule };
        assert_eq!(reusable(&[vec![f("a-1", now - 101)]], after_commit, now), None);
        assert_eq!(reusable(&[vec![f("a-1", now - 99)]], after_commit, now), Some(vec!["a-1".into()]));
        // Every pattern must have one; none, or no pattern at all, runs it.
        assert_eq!(reusable(&[vec![f("a", now)], vec![]], rule, now), None);
        assert_eq!(reusable(&[], rule, now), None);
        assert_eq!(reusable(&[vec![f("a", now)]], ReuseRule { within_ms: 0, ..rule }, now), None);
    }

    #[test]
    fn hostile_values_are_refused_with_their_field() {
        let cases = [
            json!({"checkout": "app", "filter": "a\u{0}b"}),
            json!({"checkout": "app", "filter": "a\nb"}),
            json!({"checkout": "app", "filter": "a\u{1b}[2J"}),
            json!({"checkout": "app", "filter": "a\u{2028}b"}),
            json!({"checkout": "app", "filter": "x".repeat(201)}),
            json!({"checkout": "app", "crate": "Core"}),
            json!({"checkout": "app", "crate": "core; id"}),
            json!({"checkout": "app", "file": "../etc/passwd"}),
            json!({"checkout": "app", "file": "src/../../x"}),
            json!({"checkout": "app", "file": "/etc/passwd"}),
            json!({"checkout": "app", "file": "C:/Windows"}),
            json!({"checkout": "app", "file": "c:x"}),
            json!({"checkout": "app", "file": "..\\..\\x"}),
            json!({"checkout": "app", "file": ""}),
            json!({"checkout": "app", "file": "a\u{0}"}),
            json!({"checkout": "app", "file": "a/".repeat(51)}),
            json!({"checkout": "app", "jobs": 0}),
            json!({"checkout": "app", "jobs": 17}),
            json!({"checkout": "app", "jobs": "4; id"}),
            json!({"checkout": "app", "jobs": 1.5}),
            json!({"checkout": "app", "release": "yes"}),
            json!({"checkout": "app", "profile": "prod"}),
        ];
        let names = [
            "filter", "filter", "filter", "filter", "filter", "crate", "crate", "file", "file", "file", "file", "file",
            "file", "file", "file", "file", "jobs", "jobs", "jobs", "jobs", "release", "profile",
        ];
        for (c, n) in cases.into_iter().zip(names) {
            let (field, _) = refusal(c.clone());
            assert_eq!(field, format!("args.{n}"), "{c}");
        }
        // Checkouts: only the published names (never a path).
        for c in ["../app", "app/..", "/", "other", "APP", ""] {
            assert_eq!(refusal(json!({"checkout": c})).0, "args.checkout", "{c:?}");
        }
        assert_eq!(refusal(json!({"crate": "core"})).0, "args.checkout");
        assert_eq!(refusal(json!({"checkout": "app", "nope": 1})).0, "args.nope");
        assert_eq!(refusal(json!({"checkout": "app", "bad name\u{0}": 1})).0, "args");
        // A hard cap even when the spec allows more.
        let mut s = spec();
        s.args[2].max_len = Some(STRING_MAX_LEN_CAP);
        assert!(check_args(&s, &args(json!({"checkout": "app", "filter": "x".repeat(4096)}))).is_ok());
        assert!(check_args(&s, &args(json!({"checkout": "app", "filter": "x".repeat(4097)}))).is_err());
    }

    #[test]
    fn bad_specs_name_their_field() {
        let field = |patch: &dyn Fn(&mut CommandSpec)| {
            let mut s = spec();
            patch(&mut s);
            check_spec(&s).unwrap_err().field.unwrap()
        };
        assert_eq!(field(&|s| s.name = "_debug_x".into()), "name");
        assert_eq!(field(&|s| s.name = "Test".into()), "name");
        assert_eq!(field(&|s| s.subject = Some("nope".into())), "subject");
        assert_eq!(field(&|s| s.time_limit_ms = 999), "timeLimitMs");
        assert_eq!(field(&|s| s.time_limit_ms = TIME_LIMIT_MAX_MS + 1), "timeLimitMs");
        assert_eq!(field(&|s| s.artifacts = vec!["../x".into()]), "artifacts[0]");
        assert_eq!(field(&|s| s.artifacts = vec!["/x/{command}".into()]), "artifacts[0]");
        assert_eq!(field(&|s| s.artifacts = vec!["x/{home}".into()]), "artifacts[0]");
        assert_eq!(field(&|s| s.args[1].pattern = Some("(".into())), "args[1].pattern");
        assert_eq!(field(&|s| s.args[3].pattern = Some("x".into())), "args[3].pattern");
        assert_eq!(field(&|s| s.args[1].max_len = Some(5000)), "args[1].maxLen");
        assert_eq!(field(&|s| s.args[3].min = Some(20)), "args[3].min");
        assert_eq!(field(&|s| s.args[5].values = None), "args[5].values");
        assert_eq!(field(&|s| s.args[1].name = "checkout".into()), "args[1].name");
        assert_eq!(field(&|s| s.args[1].name = "1x".into()), "args[1].name");
        assert_eq!(
            field(&|s| s.args = (0..21).map(|i| ArgSpec { name: format!("a{i}"), ..s.args[2].clone() }).collect()),
            "args"
        );
        for b in server_builtins() {
            check_spec_body(&b).unwrap();
            assert!(check_spec(&b).is_err() || !b.name.starts_with('_'));
        }
    }

    #[test]
    fn builtins_check_their_args() {
        let mail = server_builtin("_debug_mail").unwrap();
        assert!(check_args(&mail, &args(json!({"id": "mail-1-0000abcd"}))).is_ok());
        assert!(check_args(&mail, &args(json!({"id": "mail-1-0000abcd~pc-b"}))).is_ok());
        assert!(check_args(&mail, &args(json!({"id": "x'; DROP"}))).is_err());
        assert!(check_args(&mail, &args(json!({}))).is_err());
        let jobs = server_builtin("_debug_jobs").unwrap();
        assert!(check_args(&jobs, &args(json!({"state": "timed_out"}))).is_ok());
        assert!(check_args(&jobs, &args(json!({"state": "done"}))).is_err());
        let unknown = check_args(&jobs, &args(json!({"x": 1}))).unwrap_err();
        assert!(unknown.message.contains("(it takes: state"), "{}", unknown.message);
        let pc = pc_builtins().into_iter().find(|s| s.name == "_debug_pc").unwrap();
        let none = check_args(&pc, &args(json!({"x": 1}))).unwrap_err();
        assert!(none.message.ends_with("(it takes none)"), "{}", none.message);
    }

    #[test]
    fn states_move_forward_only() {
        use JobState::*;
        for s in JobState::ALL {
            assert!(!s.can_move_to(Queued), "{s} → queued");
            if s.is_ended() {
                assert!(JobState::ALL.iter().all(|n| !s.can_move_to(*n)), "{s} moved");
            }
        }
        assert!(Queued.can_move_to(Running) && Queued.can_move_to(Cancelled) && Queued.can_move_to(Ok));
        assert!(Running.can_move_to(TimedOut) && Running.can_move_to(Running));
        assert_eq!(JobState::parse("timed_out"), Some(TimedOut));
        assert_eq!(serde_json::to_value(TimedOut).unwrap(), json!("timed_out"));
    }

    #[test]
    fn submitters_are_nobody_by_default_until_credentials_are_required() {
        let list = vec!["pc-a".to_string()];
        assert!(!submitter_allowed(None, "pc-a", false));
        assert!(submitter_allowed(None, "pc-a", true));
        assert!(submitter_allowed(Some(&list), "pc-a", false));
        assert!(!submitter_allowed(Some(&list), "pc-b", true));
        assert!(!submitter_allowed(Some(&[]), "pc-a", true));
    }

    #[test]
    fn dedup_keys_ignore_order_and_string_forms() {
        let a = check_args(&spec(), &args(json!({"checkout": "app", "jobs": "4"}))).unwrap();
        let b = check_args(&spec(), &args(json!({"jobs": 4, "checkout": "app"}))).unwrap();
        assert_eq!(dedup_key("box", "test", &a), dedup_key("box", "test", &b));
        assert_ne!(dedup_key("box", "test", &a), dedup_key("box2", "test", &a));
        assert_ne!(dedup_key("box", "test", &a), dedup_key("box", "test2", &a));
        let c = check_args(&spec(), &args(json!({"checkout": "app", "jobs": 5}))).unwrap();
        assert_ne!(dedup_key("box", "test", &a), dedup_key("box", "test", &c));
        // The string "4" of a string argument is not the int 4 of another.
        let mut d = BTreeMap::new();
        d.insert("jobs".to_string(), ArgValue::Str("4".into()));
        d.insert("checkout".to_string(), ArgValue::Str("app".into()));
        assert_ne!(dedup_key("box", "test", &a), dedup_key("box", "test", &d));
        assert_eq!(dedup_key("box", "test", &a).len(), 64);
    }

    #[test]
    fn job_ids_have_the_mail_id_shape() {
        let id = new_job_id(1_767_225_600_123, &mut rand::rng());
        assert!(id.starts_with("job-1767225600123-") && is_valid_job_id(&id), "{id}");
        for bad in [
            "",
            "job-",
            "job-1-",
            "job-1-0000ABCD",
            "job-1-000abcd",
            "job-x-0000abcd",
            "mail-1-0000abcd",
            "job-1-0000abcd~a",
            "job--0000abcd",
            "job-1234567890123456-0000abcd",
        ] {
            assert!(!is_valid_job_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn output_keeps_the_last_64_kib_on_a_char_boundary() {
        let short = "é".repeat(10);
        assert_eq!(cap_output(&short), (short.clone(), false));
        // 'é' is 2 bytes and 'あ' 3: the cut must land on a boundary.
        let long = format!("HEAD{}{}", "é".repeat(20_000), "あ".repeat(20_000)) + "TAIL";
        let (kept, cut) = cap_output(&long);
        assert!(cut);
        assert!(kept.len() <= OUTPUT_CAP_BYTES && kept.len() > OUTPUT_CAP_BYTES - 4);
        assert!(kept.ends_with("あTAIL") && !kept.contains("HEAD"));
        assert!(long.ends_with(&kept));
        let exact = "x".repeat(OUTPUT_CAP_BYTES);
        assert_eq!(cap_output(&exact), (exact.clone(), false));
    }

    #[test]
    fn artifact_names_keep_the_subject_inside_its_directory() {
        let none = BTreeMap::new();
        assert_eq!(
            artifact_name("target/pcmail/{command}-{subject}-{ts}.log", "test", "app", &none, "5"),
            "target/pcmail/test-app-5.log"
        );
        assert_eq!(artifact_name("o/{subject}", "t", "../../x", &none, "5"), "o/..%2F..%2Fx");
        assert_eq!(artifact_name("o/{subject}", "t", "..", &none, "5"), "o/%2E%2E");
        assert!(check_relative_path(&artifact_name("o/{subject}", "t", "..", &none, "5")).is_ok());
        // One to one: values that differ give names that differ.
        let vals = ["a/b", "a_b", "a%2Fb", "", "%", ".", "..", "a b", "é"];
        let made: std::collections::BTreeSet<String> = vals.iter().map(|v| safe_name_part(v)).collect();
        assert_eq!(made.len(), vals.len(), "{made:?}");
        assert!(made.iter().all(|m| check_relative_path(m).is_ok() && !m.contains('/')));
    }

    #[test]
    fn a_job_reads_back_from_its_wire_form() {
        let v = json!({"id": "job-1-0000abcd", "target": "box", "command": "test", "args": {"checkout": "app", "jobs": 4},
            "subject": "app", "submitter": {"pc": "pc-a", "session": "s1", "name": null}, "force": false, "rerunOf": null,
            "state": "ok", "submittedAt": 1, "startedAt": 2, "runStartedAt": 2, "runner": "box/77", "heartbeatAt": 3, "endedAt": 4,
            "timeLimitMs": 1000, "cancelRequested": false, "joined": 7,
            "result": {"ran": true, "exit": 0, "durationMs": 2, "output": "ok", "truncated": false, "artifacts": ["a.log"],
                "reused": [], "readBack": null, "verify": {"ok": true, "exit": 0, "output": ""}, "chunks": null, "data": null},
            "reason": null,
            "timeline": [{"at": 1, "state": "queued", "by": "pc-a/s1", "reason": null}]});
        let j: Job = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(j.args["jobs"], ArgValue::Int(4));
        assert_eq!(serde_json::to_value(&j).unwrap(), v);
    }

    #[test]
    fn one_bad_report_is_refused_on_its_own() {
        let ok = json!({"jobId": "job-1-0000abcd", "runner": "box/1", "state": "ok", "result": {"ran": true}});
        let p = parse_poll_job(&json!({"take": true, "running": ["job-1-0000abcd", "nope", 7],
            "reports": [ok, {"jobId": "job-2-0000abcd", "runner": "box/1", "state": "running", "result": {"ran": true}}, 7]}))
        .unwrap();
        assert!(p.take);
        assert_eq!(p.running, vec!["job-1-0000abcd"]);
        assert!(p.reports[0].is_ok());
        let e = p.reports[1].as_ref().unwrap_err();
        assert_eq!(
            (e.index, e.job_id.as_deref(), e.error.field.as_deref()),
            (1, Some("job-2-0000abcd"), Some("state"))
        );
        assert_eq!(p.reports[2].as_ref().unwrap_err().index, 2);
        assert!(parse_poll_job(&json!({"running": {}})).is_err());
        let bad_wl = json!({"whitelist": {"hash": "h", "commands": [{"name": "x", "timeLimitMs": 5}]}});
        // A bad whitelist is refused on its own: the poll's other parts still count.
        let p = parse_poll_job(&bad_wl).unwrap();
        let e = p.whitelist.unwrap().unwrap_err();
        assert_eq!(e.to_error("whitelist").field.as_deref(), Some("job.whitelist.commands[0].timeLimitMs"));
        // What the PC publishes passes the same check first.
        let w = Whitelist {
            hash: "h".into(),
            commands: vec![],
            allowed_submitters: Some(vec!["pc\u{7}".into()]),
            checkouts: vec![],
        };
        assert_eq!(check_whitelist(&w).unwrap_err().field.as_deref(), Some("job.whitelist.allowedSubmitters"));
        let w = Whitelist { checkouts: vec!["".into()], allowed_submitters: None, ..w };
        assert_eq!(check_whitelist(&w).unwrap_err().field.as_deref(), Some("job.whitelist.checkouts"));
    }

    #[test]
    fn submits_are_checked_when_parsed() {
        let good = json!({"jobId": "job-1-0000abcd", "target": "box", "command": "test", "args": {"checkout": "app"},
            "submitter": {"pc": "pc-a", "session": "s1"}});
        let a = parse_submit(good.as_object().unwrap()).unwrap();
        assert_eq!(parse_submit(serde_json::to_value(&a).unwrap().as_object().unwrap()).unwrap(), a);
        let field = |k: &str, x: Value| {
            let mut v = good.clone();
            v[k] = x;
            parse_submit(v.as_object().unwrap()).unwrap_err().field.unwrap()
        };
        assert_eq!(field("jobId", json!("mail-1-0000abcd")), "jobId");
        assert_eq!(field("target", json!("@elsewhere")), "target");
        assert_eq!(field("command", json!("rm -rf")), "command");
        assert_eq!(field("args", json!([1])), "args");
        assert_eq!(field("submitter", json!({"pc": "pc-a", "session": " "})), "submitter.session");
        assert_eq!(field("dedupWindowMs", json!(-1)), "dedupWindowMs");
        let mut v = good.clone();
        v["target"] = json!("@server");
        v["command"] = json!("_debug_roster");
        assert!(parse_submit(v.as_object().unwrap()).is_ok());
    }

    #[test]
    fn a_revoked_target_is_refused_with_how_to_re_enrol() {
        assert!(check_target_not_revoked("pc-b", false).is_ok());
        let e = check_target_not_revoked("pc-b", true).unwrap_err();
        assert_eq!(e.code, ErrorCode::JobRefused);
        assert_eq!(e.reason.as_deref(), Some(REFUSED_TARGET_REVOKED));
        assert!(e.message.contains("pc-b was revoked"), "{}", e.message);
        assert!(e.message.contains("pcmail roster add pc-b"), "{}", e.message);
    }

    #[test]
    fn pc_probes_pass_the_spec_check_and_no_other_underscore_name_does() {
        for p in pc_builtins() {
            check_spec(&p).unwrap();
            assert!(p.read_only && p.args.is_empty(), "{}", p.name);
        }
        let mut other = pc_builtin("_debug_pc").unwrap();
        other.name = "_debug_shell".into();
        assert!(check_spec(&other).is_err());
        // A probe's name on a spec that is not read-only, or takes args, is refused.
        let mut writes = pc_builtin("_debug_pc").unwrap();
        writes.read_only = false;
        assert!(check_spec(&writes).is_err());
    }
}
