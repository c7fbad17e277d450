//! Jobs on the PC: the executor that rides the poll cycle, and
//! the submitter's calls.
//!
//! Executor: the poll publishes this PC's whitelist (only when the server's
//! hash differs) and takes jobs. An offered job is checked again here with
//! core's rules (whitelist, arguments, submitter), then its artifacts are
//! looked for; only then `job.start`, and the process starts only after the
//! server acknowledged it. The process runs in a worker thread (the poll
//! loop goes on: mail keeps arriving); its heartbeat rides the poll. The
//! report is queued in the store, sent at once, and retried by the poll.
//! A run left by an executor that died is found in the store: when it ended
//! by itself (its keeper's exit record says so) its real outcome is
//! reported; otherwise `timed_out` with what is known (its tree ended with
//! the executor, ended now, or "outcome unknown").
//!
//! The executor's side is in `executor` (the poll's part) and `work` (one
//! job's run in its worker thread); the probes every PC has in `probes`; the
//! submitter's calls in `submit`.

mod chunks;
mod executor;
mod jobconf;
pub(crate) mod jobrun;
#[cfg(target_os = "linux")]
mod keeper;
mod probes;
pub mod submit;
mod work;

use jobconf::{CommandRules, JobsRules};
use pcmail_core::job::{self as cj, CommandSpec, Whitelist};
use pcmail_local::jobconf::JobsConfig;
use serde_json::{json, Value};

/// Store meta: the whitelist hash the server last answered.
pub const WHITELIST_HASH: &str = "job_whitelist_hash";

/// Reasons a run left behind by a stopped executor is reported with: what is
/// known of its end, never a guess. A run that ended by itself is reported
/// with its real outcome instead (its keeper's exit record).
pub const REASON_EXECUTOR_GONE: &str =
    "the executor stopped while the job ran: its whole process tree was ended with it";
pub const REASON_ENDED_BY_SUCCESSOR: &str =
    "the executor stopped while the job ran: the restarted executor ended what was left of it";
pub const REASON_KILLED_THEN_GONE: &str =
    "the executor was ending the job (a cancel or its time limit) when it stopped: its process tree was ended";
pub const REASON_NOT_STARTED: &str = "the executor stopped before the job's process started: it did not run";
pub const REASON_OUTCOME_UNKNOWN: &str =
    "outcome unknown: the executor stopped while the job ran and no exit record was left";

/// This PC's whitelist as published: every command checked (this PC's
/// rules, then core's `check_spec`). An invalid `[jobs]` publishes nothing.
/// Its built-in read-only probes (`pcmail_core::job::pc_builtins`) follow the
/// owner's commands: a PC with `[jobs]` commands or `allowed_submitters` has them.
pub fn whitelist_of(jobs: &JobsConfig) -> Result<Option<Whitelist>, String> {
    if jobs.commands.is_empty() && jobs.allowed_submitters.is_none() {
        return Ok(None);
    }
    jobs.check().map_err(|e| e.to_string())?;
    let mut commands = vec![];
    for c in &jobs.commands {
        let spec: CommandSpec = serde_json::from_value(c.spec_json(&jobs.checkouts))
            .map_err(|e| format!("[jobs] command {}: {e}", c.name))?;
        cj::check_spec(&spec).map_err(|e| {
            format!(
                "[jobs] command {}: {}{}",
                c.name,
                e.message,
                e.field.map(|f| format!(" ({f})")).unwrap_or_default()
            )
        })?;
        commands.push(spec);
    }
    commands.extend(cj::pc_builtins());
    let checkouts: Vec<String> = jobs.checkouts.keys().cloned().collect();
    let allowed = jobs.allowed_submitters.clone();
    let hash = cj::whitelist_hash(&commands, allowed.as_deref(), &checkouts);
    let w = Whitelist { hash, commands, allowed_submitters: allowed, checkouts };
    // The servers' own check: a config they would refuse is not published
    // (said in the log), and the polls carry on without it.
    cj::check_whitelist(&w)
        .map_err(|e| format!("[jobs]: {}{}", e.message, e.field.map(|f| format!(" ({f})")).unwrap_or_default()))?;
    Ok(Some(w))
}

/// `{"ok": …}` of a whitelist for `pcmail job whitelist` and doctor.
pub fn describe_whitelist(jobs: &JobsConfig) -> Value {
    match whitelist_of(jobs) {
        Ok(Some(w)) => json!({"ok": true, "whitelist": w}),
        Ok(None) => json!({"ok": true, "whitelist": null}),
        Err(e) => json!({"ok": false, "error": e}),
    }
}
