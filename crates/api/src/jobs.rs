//! Jobs: one function per operation, shared by `pcmail job …`
//! and the MCP tools. The session that submits is decided here, once.

use crate::{optional_not_null, ApiError, Exit, Result};
use pcmail_client::jobs::submit::SubmitRequest;
use pcmail_client::{Client, ClientError};
use pcmail_core::job::{Job, JobState, ListArgs};
use pcmail_core::rules::clean_session_id;
use pcmail_local::process;
use pcmail_store::leases as sl;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// Default seconds `wait` waits for a job to end.
pub const DEFAULT_JOB_WAIT_SECS: u64 = 600;

/// A server without jobs answers `unknown_op`: said at once, from the
/// feature list, rather than guessed from a later failure.
fn unsupported(e: ClientError) -> ApiError {
    match e.refused() {
        Some(p) if p.code == pcmail_core::ErrorCode::UnknownOp => ApiError::Unsupported { feature: "jobs".into() },
        _ => ApiError::Client(e),
    }
}

/// The submitting session: `PCMAIL_SESSION`, else the current session of
/// the Claude Code process above the caller, else `pid-<parent>`.
pub fn caller_session(client: &Client) -> String {
    if let Some(s) = std::env::var("PCMAIL_SESSION").ok().and_then(|s| clean_session_id(s.trim())) {
        return s;
    }
    if let Some(c) = process::claude_ancestor() {
        if let Some(s) = sl::session_of_process(client.store.conn(), c.pid, c.start)
            .ok()
            .flatten()
            .and_then(|r| clean_session_id(&r.session))
        {
            return s;
        }
        return format!("claude-{}", c.pid);
    }
    format!("pid-{}", process::parent_pid().unwrap_or(0))
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = optional_not_null)]
pub struct JobRunArgs {
    /// Who executes: a PC label (exact label, number or hostname) or `@server`.
    pub target: String,
    /// A command of the target's whitelist (`pcmail job list` shows what ran; the target's owner configures them).
    pub command: String,
    /// The command's typed arguments by name (strings, integers, booleans).
    #[serde(default)]
    pub args: BTreeMap<String, Value>,
    /// Run even when an identical job is queued, running or just ended, or its artifacts exist.
    #[serde(default)]
    pub force: bool,
    /// This submit re-runs that job (refused when the earlier run's artifacts exist, unless force).
    #[serde(default)]
    pub rerun_of: Option<String>,
    /// Wait until the job ended before answering.
    #[serde(default)]
    pub wait: bool,
    /// Seconds to wait (default 600).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// A name for the submitting session shown to others.
    #[serde(default)]
    pub name: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct JobRunResult {
    /// The same (target, command, args) was queued, running or ended within
    /// the dedup window: this submit joined it and nothing runs twice.
    pub deduped: bool,
    pub job: Job,
    /// With `wait`: false when the time ran out before the job ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended: Option<bool>,
}

/// `job run`: submits (refused: exit 13; unknown target: 4), and with
/// `wait` waits for its end.
pub fn job_run(client: &mut Client, a: &JobRunArgs) -> Result<JobRunResult> {
    if a.target.trim().is_empty() || a.command.trim().is_empty() {
        return Err(ApiError::Usage("a job needs a target and a command".into()));
    }
    let req = SubmitRequest {
        target: a.target.clone(),
        command: a.command.clone(),
        args: a.args.iter().map(|(k, v)| (k.clone(), v.clone())).collect::<Map<String, Value>>(),
        force: a.force,
        rerun_of: a.rerun_of.clone(),
        session: caller_session(client),
        name: a.name.clone(),
    };
    let answer = client.job_submit(&req).map_err(unsupported)?;
    let mut out = JobRunResult { deduped: answer.deduped, job: answer.job, ended: None };
    if a.wait && !out.job.state.is_ended() {
        let timeout = Duration::from_secs(a.timeout_secs.unwrap_or(DEFAULT_JOB_WAIT_SECS));
        let (job, ended) = client.job_wait(&out.job.id, timeout).map_err(unsupported)?;
        out.job = job;
        out.ended = Some(ended);
        if ended {
            // This session saw the end: the hook need not tell it again.
            let now = client.now();
            client.remember_job(&out.job, &req.session, now, true)?;
        }
    } else if a.wait {
        out.ended = Some(true);
    }
    Ok(out)
}

/// The exit code of a job as the CLI ends with it: ok 0; refused before it
/// ran (by the executor: artifacts of an earlier run, submitter) 13;
/// timed_out 14; failed or cancelled 1; not ended 0.
pub fn outcome_exit(job: &Job) -> Option<Exit> {
    match job.state {
        JobState::TimedOut => Some(Exit::JobTimedOut),
        JobState::Failed if job.result.as_ref().is_some_and(|r| !r.ran) => Some(Exit::JobRefused),
        JobState::Failed | JobState::Cancelled => Some(Exit::Error),
        _ => None,
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct JobIdArgs {
    /// The job's id (`job-…`).
    pub job_id: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct JobResultOne {
    pub job: Job,
}

/// `job status`: the job with its timeline (who moved it when, and why it ended).
pub fn job_status(client: &mut Client, a: &JobIdArgs) -> Result<JobResultOne> {
    let job = client.job_status(&a.job_id).map_err(unsupported)?;
    Ok(JobResultOne { job })
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = optional_not_null)]
pub struct JobListArgs {
    /// Only jobs this PC submitted or joined.
    #[serde(default)]
    pub mine: bool,
    /// Only jobs in this state: queued, running, ok, failed, timed_out, cancelled.
    #[serde(default)]
    pub state: Option<String>,
    /// Only jobs for this target.
    #[serde(default)]
    pub target: Option<String>,
    /// At most this many (default 100, max 500).
    #[serde(default)]
    pub limit: Option<usize>,
}

#[derive(Debug, Clone, Serialize)]
pub struct JobListResult {
    pub jobs: Vec<Job>,
}

/// `job list`: newest first, only jobs this PC may see.
pub fn job_list(client: &mut Client, a: &JobListArgs) -> Result<JobListResult> {
    let state = match &a.state {
        None => None,
        Some(s) => Some(JobState::parse(s).ok_or_else(|| {
            ApiError::Usage(format!("--state {s:?}: one of queued, running, ok, failed, timed_out, cancelled"))
        })?),
    };
    let args = ListArgs {
        target: a.target.clone(),
        state,
        mine: a.mine,
        limit: a.limit.unwrap_or(pcmail_core::job::LIST_LIMIT_DEFAULT).min(pcmail_core::job::LIST_LIMIT_MAX),
    };
    let jobs = client.job_list(args).map_err(unsupported)?;
    Ok(JobListResult { jobs })
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = optional_not_null)]
pub struct JobCancelArgs {
    pub job_id: String,
    #[serde(default)]
    pub reason: Option<String>,
}

/// `job cancel`: a queued job ends at once; a running one is killed by its
/// executor at its next poll (the job says `cancelRequested` until then).
pub fn job_cancel(client: &mut Client, a: &JobCancelArgs) -> Result<JobResultOne> {
    let session = caller_session(client);
    job_cancel_as(client, a, &session)
}

/// `job_cancel` by a caller that is not a session (the tray: `tray`), so
/// the timeline names it rather than the process that started it.
pub fn job_cancel_as(client: &mut Client, a: &JobCancelArgs, session: &str) -> Result<JobResultOne> {
    let job = client.job_cancel(&a.job_id, session, a.reason.clone()).map_err(unsupported)?;
    Ok(JobResultOne { job })
}
