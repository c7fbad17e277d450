//! The job ops' shapes on the wire: job states, a job and its result, each
//! op's arguments and answer, the job part of a poll, and job ids.

use super::limits::*;
use super::spec::{ArgValue, CommandSpec};
use crate::error::{ItemError, NoItemRef, ProtoError};
use crate::Millis;
use rand::{Rng, RngExt};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

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

impl BadItem {
    /// The item's entry in the poll answer's `job.errors`.
    pub fn to_error(&self, list: &str) -> ItemError {
        ItemError::new(list, self.index, NoItemRef {}, &self.error)
    }
}

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
