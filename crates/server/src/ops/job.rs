//! Jobs: `job.submit|status|list|cancel|start|report` and the poll's `job`
//! argument (the rows are `job_state`'s, the `@server` built-ins `job_builtins`'). The
//! rules (specs, typed args, who may submit, the dedup key, the output cap)
//! are `pcmail_core::job`'s; this file keeps the states, who and when.

use super::job_builtins::run_builtin;
use super::job_state::{end_job, load, record, to_wire, visible_jobs, StoredJob, JOB_COLUMNS};
use crate::ctx::{Ctx, OpError, OpResult};
use crate::store::p;
use crate::store::Dialect;
use crate::store::Optional;
use pcmail_core::job::{
    self as cj, CancelArgs, CommandSpec, Job, JobAnswer, JobState, ListAnswer, ListArgs, PollJob, PollJobAnswer,
    ReportArgs, Reported, StartArgs, SubmitAnswer, SubmitArgs, Whitelist,
};
use pcmail_core::op_table::News;
use pcmail_core::{ErrorCode, Millis, ProtoError};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Most jobs a poll reports in `finished` at once (the rest in the next poll).
const FINISHED_MAX: i64 = 100;

/// May the caller see this job: the target PC, the submitter's PC, a joined PC.
fn may_see(ctx: &Ctx<'_>, j: &Job) -> OpResult<bool> {
    if j.target == ctx.pc || j.submitter.pc == ctx.pc {
        return Ok(true);
    }
    Ok(ctx
        .tx
        .prepare_cached("SELECT 1 FROM job_watch WHERE job_id = ?1 AND pc = ?2")?
        .query_row(p![j.id, ctx.pc], |_| Ok(()))
        .optional()?
        .is_some())
}

fn require_credentials(ctx: &Ctx<'_>) -> OpResult<bool> {
    crate::auth::require_credentials(ctx.tx)
}

/// What a submit sent, hashed: a retry with the same jobId must send the same.
fn submit_key(a: &SubmitArgs) -> String {
    let args: BTreeMap<&String, &Value> = a.args.iter().collect();
    let canonical = json!([a.target, a.command, args, a.force, a.rerun_of, a.submitter.pc, a.submitter.session]);
    pcmail_core::protocol::credential_hash(&canonical.to_string())
}

fn refused(reason: &str, message: String) -> OpError {
    OpError::Proto(ProtoError::new(ErrorCode::JobRefused, message).with_reason(reason))
}

/// The published whitelist of a PC.
fn executor(ctx: &Ctx<'_>, pc: &str) -> OpResult<Option<Whitelist>> {
    let row: Option<(String, String, Option<String>, String)> = ctx
        .tx
        .prepare_cached("SELECT hash, commands, allowed_submitters, checkouts FROM job_executor WHERE pc = ?1")?
        .query_row(p![pc], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .optional()?;
    let Some((hash, commands, allowed, checkouts)) = row else { return Ok(None) };
    let bad = |e: serde_json::Error| OpError::proto(ErrorCode::Internal, format!("stored whitelist of {pc}: {e}"));
    Ok(Some(Whitelist {
        hash,
        commands: serde_json::from_str(&commands).map_err(bad)?,
        allowed_submitters: match allowed {
            None => None,
            Some(s) => Some(serde_json::from_str(&s).map_err(bad)?),
        },
        checkouts: serde_json::from_str(&checkouts).map_err(bad)?,
    }))
}

// ---- job.submit ----

pub(crate) fn submit(ctx: &mut Ctx<'_>, a: &SubmitArgs) -> OpResult<SubmitAnswer> {
    if a.submitter.pc != ctx.pc {
        return Err(OpError::proto(
            ErrorCode::Forbidden,
            format!("submitter.pc {:?} is not the caller {:?}: a PC submits in its own name", a.submitter.pc, ctx.pc),
        ));
    }
    let server = a.target == cj::SERVER_TARGET;
    if !server {
        let pcs = super::roster::load_all(ctx).map_err(|e| super::roster::unreadable(e, "queued"))?;
        if !pcs.iter().any(|p| p.label == a.target) {
            return Err(OpError::Proto(
                ProtoError::new(
                    ErrorCode::UnknownRecipient,
                    format!("{:?} is not an exact roster label (nor @server); nothing was queued", a.target),
                )
                .with_candidates(pcmail_core::roster::candidates(&pcs, &a.target)),
            ));
        }
    }
    // A jobId already used: the same submit again is answered as it is now.
    let key = submit_key(a);
    let known: Option<(String, String)> = ctx
        .tx
        .prepare_cached("SELECT job_id, submit_key FROM job_submit WHERE id = ?1")?
        .query_row(p![&a.job_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    if let Some((job_id, stored_key)) = known {
        if stored_key != key {
            return Err(OpError::proto(
                ErrorCode::DuplicateId,
                format!("job id {} was used for another submit; make a fresh id", a.job_id),
            ));
        }
        let j = load(ctx, &job_id)?
            .ok_or_else(|| OpError::proto(ErrorCode::NotFound, format!("job {job_id} was pruned")))?;
        return Ok(SubmitAnswer { deduped: job_id != a.job_id, job: to_wire(ctx, &j, true)? });
    }

    // A revoked PC cannot poll: its jobs would only wait.
    if !server {
        let revoked: bool = ctx
            .tx
            .prepare_cached("SELECT revoked_at IS NOT NULL FROM pc WHERE label = ?1")?
            .query_row(p![&a.target], |r| r.get(0))
            .optional()?
            .unwrap_or(false);
        cj::check_target_not_revoked(&a.target, revoked).map_err(OpError::Proto)?;
    }

    // The command and its arguments, against the target's published whitelist.
    let spec: CommandSpec = if server {
        cj::server_builtin(&a.command).ok_or_else(|| {
            refused(
                cj::REFUSED_NOT_WHITELISTED,
                format!(
                    "@server has no command {:?} (it has: {})",
                    a.command,
                    cj::server_builtins().iter().map(|c| c.name.clone()).collect::<Vec<_>>().join(", ")
                ),
            )
        })?
    } else {
        let Some(w) = executor(ctx, &a.target)? else {
            return Err(refused(
                cj::REFUSED_NO_EXECUTOR,
                format!("{} runs no jobs: it never published a whitelist (its config has no [jobs] commands, or its daemon is not running)", a.target),
            ));
        };
        let Some(spec) = w.commands.iter().find(|c| c.name == a.command).cloned() else {
            return Err(refused(
                cj::REFUSED_NOT_WHITELISTED,
                format!(
                    "{} has no command {:?} in its whitelist (it has: {})",
                    a.target,
                    a.command,
                    w.commands.iter().map(|c| c.name.clone()).collect::<Vec<_>>().join(", ")
                ),
            ));
        };
        spec
    };
    let args = cj::check_args(&spec, &a.args).map_err(OpError::Proto)?;
    if !server {
        let w = executor(ctx, &a.target)?.expect("read above");
        if !cj::submitter_allowed(w.allowed_submitters.as_deref(), &a.submitter.pc, require_credentials(ctx)?) {
            return Err(refused(
                cj::REFUSED_SUBMITTER_NOT_ALLOWED,
                format!(
                    "{} does not run jobs from {} (its allowed_submitters; the default is nobody until the server requires per-PC credentials)",
                    a.target, a.submitter.pc
                ),
            ));
        }
    }

    // The same command already queued, running, or just finished: join it.
    // `@server` built-ins are never joined: each submit runs (they are cheap
    // and a probe must answer what is true now).
    let dedup = cj::dedup_key(&a.target, &a.command, &args);
    if !a.force && !server {
        let window = a.dedup_window_ms.unwrap_or(cj::DEDUP_WINDOW_DEFAULT_MS);
        if let Some(j) = find_same(ctx, &dedup, window)? {
            ctx.tx.prepare_cached("UPDATE job SET joined = joined + 1 WHERE id = ?1")?.execute(p![&j.job.id])?;
            // Told of the end like the first submitter; a job already ended is answered here (told).
            ctx.tx
                .prepare_cached(
                    "INSERT INTO job_watch (job_id, pc, session, name, joined_at, tell) VALUES (?1, ?2, ?3, ?4, ?5, 0) \
                     ON CONFLICT DO NOTHING",
                )?
                .execute(p![j.job.id, a.submitter.pc, a.submitter.session, a.submitter.name, ctx.now])?;
            insert_submit(ctx, &a.job_id, &j.job.id, &key)?;
            let j = load(ctx, &j.job.id)?.expect("just updated");
            return Ok(SubmitAnswer { deduped: true, job: to_wire(ctx, &j, true)? });
        }
    }

    let subject = cj::subject_of(&spec, &args);
    let args_json = serde_json::to_string(&args).map_err(|e| OpError::proto(ErrorCode::Internal, e.to_string()))?;
    ctx.tx
        .prepare_cached(
            "INSERT INTO job (id, target, command, args, subject, dedup_key, submitter_pc, submitter_session, submitter_name, \
             force, rerun_of, state, submitted_at, time_limit_ms, chunked, last_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 'queued', ?12, ?13, ?14, ?12)",
        )?
        .execute(p![
            a.job_id, a.target, a.command, args_json, subject, dedup, a.submitter.pc, a.submitter.session, a.submitter.name,
            a.force, a.rerun_of, ctx.now, spec.time_limit_ms, spec.chunked
        ])?;
    let by = pcmail_core::rules::actor(&a.submitter.pc, Some(&a.submitter.session));
    record(ctx, &a.job_id, JobState::Queued, ctx.now, &by, None)?;
    insert_submit(ctx, &a.job_id, &a.job_id, &key)?;
    ctx.tx
        .prepare_cached(
            "INSERT INTO job_watch (job_id, pc, session, name, joined_at, tell) VALUES (?1, ?2, ?3, ?4, ?5, 0)",
        )?
        .execute(p![a.job_id, a.submitter.pc, a.submitter.session, a.submitter.name, ctx.now])?;

    if server {
        run_builtin(ctx, &a.job_id, &spec, &args)?;
        // The submit's answer tells the submitter: no `finished` for it later.
        ctx.tx
            .prepare_cached("UPDATE job_watch SET tell = 0 WHERE job_id = ?1 AND pc = ?2")?
            .execute(p![a.job_id, a.submitter.pc])?;
    } else {
        // The target's long poll wakes: it is offered the job at once.
        ctx.wake(News::Job, a.target.clone());
    }
    let j = load(ctx, &a.job_id)?.expect("just inserted");
    Ok(SubmitAnswer { deduped: false, job: to_wire(ctx, &j, true)? })
}

fn insert_submit(ctx: &Ctx<'_>, id: &str, job_id: &str, key: &str) -> OpResult<()> {
    ctx.tx
        .prepare_cached("INSERT INTO job_submit (id, job_id, submit_key, pc, at) VALUES (?1, ?2, ?3, ?4, ?5)")?
        .execute(p![id, job_id, key, ctx.pc, ctx.now])?;
    Ok(())
}

/// A job with this dedup key that is queued or running, else the newest that
/// ended ok/failed less than `window` ago.
fn find_same(ctx: &Ctx<'_>, dedup: &str, window: Millis) -> OpResult<Option<StoredJob>> {
    let sql = match ctx.tx.dialect() {
        Dialect::Sqlite => format!(
            "SELECT {JOB_COLUMNS} FROM job INDEXED BY job_live_by_key WHERE dedup_key = ?1 AND state IN ('queued', 'running') ORDER BY seq DESC LIMIT 1"
        ),
        Dialect::Postgres => format!(
            "SELECT {JOB_COLUMNS} FROM job WHERE dedup_key = ?1 AND state IN ('queued', 'running') ORDER BY seq DESC LIMIT 1"
        ),
    };
    if let Some(j) = ctx.tx.prepare_cached(&sql)?.query_row(p![dedup], StoredJob::from_row).optional()? {
        return Ok(Some(j));
    }
    if window <= 0 {
        return Ok(None);
    }
    let sql = match ctx.tx.dialect() {
        Dialect::Sqlite => format!(
            "SELECT {JOB_COLUMNS} FROM job INDEXED BY job_ended_by_key WHERE dedup_key = ?1 AND state IN ('ok', 'failed') \
             AND ended_at > ?2 ORDER BY ended_at DESC LIMIT 1"
        ),
        Dialect::Postgres => format!(
            "SELECT {JOB_COLUMNS} FROM job WHERE dedup_key = ?1 AND state IN ('ok', 'failed') \
             AND ended_at > ?2 ORDER BY ended_at DESC LIMIT 1"
        ),
    };
    Ok(ctx.tx.prepare_cached(&sql)?.query_row(p![dedup, ctx.now - window], StoredJob::from_row).optional()?)
}

// ---- job.status / job.list ----

pub(crate) fn status(ctx: &mut Ctx<'_>, id: &str) -> OpResult<JobAnswer> {
    let j = load(ctx, id)?.ok_or_else(|| OpError::proto(ErrorCode::NotFound, format!("no job {id}")))?;
    if !may_see(ctx, &j.job)? {
        return Err(OpError::proto(
            ErrorCode::Forbidden,
            format!("job {id} is neither submitted by, joined by nor targeted at {}", ctx.pc),
        ));
    }
    Ok(JobAnswer { job: to_wire(ctx, &j, true)? })
}

pub(crate) fn list(ctx: &mut Ctx<'_>, a: &ListArgs) -> OpResult<ListAnswer> {
    Ok(ListAnswer { jobs: visible_jobs(ctx, a)? })
}

// ---- job.cancel ----

pub(crate) fn cancel(ctx: &mut Ctx<'_>, a: &CancelArgs) -> OpResult<JobAnswer> {
    let id = &a.job_id;
    let j = load(ctx, id)?.ok_or_else(|| OpError::proto(ErrorCode::NotFound, format!("no job {id}")))?;
    if ctx.pc != j.job.submitter.pc && ctx.pc != j.job.target {
        return Err(OpError::proto(
            ErrorCode::Forbidden,
            format!("only {} (its submitter) or {} (its target) may cancel job {id}", j.job.submitter.pc, j.job.target),
        ));
    }
    let by = pcmail_core::rules::sanitize_actor(&a.by);
    let reason = a.reason.clone().unwrap_or_else(|| format!("cancelled by {by}"));
    match j.job.state {
        JobState::Queued => {
            end_job(ctx, &j, JobState::Cancelled, &by, Some(&reason), None)?;
        }
        JobState::Running if !j.job.cancel_requested => {
            ctx.tx.prepare_cached("UPDATE job SET cancel_requested = 1 WHERE id = ?1")?.execute(p![id])?;
            // The executor hears it in its next poll: wake it now.
            ctx.wake(News::Job, j.job.target.clone());
        }
        _ => {}
    }
    let j = load(ctx, id)?.expect("loaded above");
    Ok(JobAnswer { job: to_wire(ctx, &j, true)? })
}

// ---- job.start ----

pub(crate) fn start(ctx: &mut Ctx<'_>, a: &StartArgs) -> OpResult<JobAnswer> {
    let id = &a.job_id;
    let j = load(ctx, id)?.ok_or_else(|| OpError::proto(ErrorCode::NotFound, format!("no job {id}")))?;
    if ctx.pc != j.job.target {
        return Err(OpError::proto(ErrorCode::Forbidden, format!("job {id} is for {}, not {}", j.job.target, ctx.pc)));
    }
    let now = ctx.now;
    // The executor's clock, clamped between the previous entry and now.
    let at = a.started_at.clamp(j.last_at, now.max(j.last_at));
    let by = pcmail_core::rules::sanitize_actor(&a.runner);
    match j.job.state {
        JobState::Queued => {
            ctx.tx
                .prepare_cached(
                    "UPDATE job SET state = 'running', started_at = ?2, run_started_at = ?2, run_sent_at = ?3, runner = ?4, \
                     heartbeat_at = ?5, runs = 1 WHERE id = ?1",
                )?
                .execute(p![id, at, a.started_at, a.runner, now])?;
            record(ctx, id, JobState::Running, at, &by, None)?;
        }
        JobState::Running
            if j.job.runner.as_deref() == Some(a.runner.as_str()) && j.run_sent_at == Some(a.started_at) =>
        {
            // The same start again (its answer was lost): unchanged.
        }
        JobState::Running if j.chunked && !j.job.cancel_requested => {
            // A chunked job's next run.
            let run = j.runs + 1;
            ctx.tx
                .prepare_cached(
                    "UPDATE job SET run_started_at = ?2, run_sent_at = ?3, runner = ?4, heartbeat_at = ?5, runs = ?6 WHERE id = ?1",
                )?
                .execute(p![id, at, a.started_at, a.runner, now, run])?;
            record(ctx, id, JobState::Running, at, &by, Some(&format!("run {run}")))?;
        }
        s => {
            let why = match s {
                JobState::Running if j.job.cancel_requested => "running with a cancel requested".to_string(),
                JobState::Running => format!("already running under {}", j.job.runner.clone().unwrap_or_default()),
                s => format!("it is {s}"),
            };
            return Err(OpError::proto(ErrorCode::Conflict, format!("job {id} cannot start: {why}; do not run it")));
        }
    }
    let j = load(ctx, id)?.expect("loaded above");
    Ok(JobAnswer { job: to_wire(ctx, &j, true)? })
}

// ---- job.report ----

pub(crate) fn report(ctx: &mut Ctx<'_>, r: &ReportArgs) -> OpResult<JobAnswer> {
    let id = &r.job_id;
    let j = load(ctx, id)?.ok_or_else(|| OpError::proto(ErrorCode::NotFound, format!("no job {id}")))?;
    if ctx.pc != j.job.target {
        return Err(OpError::proto(ErrorCode::Forbidden, format!("job {id} is for {}, not {}", j.job.target, ctx.pc)));
    }
    if j.job.state.is_ended() {
        if cj::late_report_allowed(&j.job, &r.runner, r.state, &r.result) {
            // The server timed it out for silence, not knowing how the run
            // ended; its executor, back, knows: its end replaces the unknown one.
            correct_late(ctx, &j, r)?;
            let j = load(ctx, id)?.expect("loaded above");
            return Ok(JobAnswer { job: to_wire(ctx, &j, true)? });
        }
        // A retried report (or one after the sweep closed it): unchanged.
        return Ok(JobAnswer { job: to_wire(ctx, &j, true)? });
    }
    if j.job.state == JobState::Queued && r.result.ran {
        return Err(OpError::proto(
            ErrorCode::Conflict,
            format!("job {id} was never started (job.start) and cannot report a run; only a result with ran: false"),
        ));
    }
    if j.job.state == JobState::Running && j.job.runner.as_deref() != Some(r.runner.as_str()) {
        return Err(OpError::proto(
            ErrorCode::Conflict,
            format!("job {id} runs under {}, not {}", j.job.runner.clone().unwrap_or_default(), r.runner),
        ));
    }
    let mut result = r.result.clone();
    let (output, cut) = cj::cap_output(&result.output);
    result.output = output;
    result.truncated |= cut;
    let by = pcmail_core::rules::sanitize_actor(&r.runner);
    end_job(ctx, &j, r.state, &by, r.reason.as_deref(), Some(&result))?;
    let j = load(ctx, id)?.expect("loaded above");
    Ok(JobAnswer { job: to_wire(ctx, &j, true)? })
}

/// Records the real end of a run the server had timed out for silence
/// (`late_report_allowed`): state, result and reason are the executor's, the
/// timeline keeps the server's `timed_out` and adds this end after it, and
/// the watchers hear of the job again.
fn correct_late(ctx: &mut Ctx<'_>, j: &StoredJob, r: &ReportArgs) -> OpResult<()> {
    let mut result = r.result.clone();
    let (output, cut) = cj::cap_output(&result.output);
    result.output = output;
    result.truncated |= cut;
    let result_json = serde_json::to_string(&result).map_err(|e| OpError::proto(ErrorCode::Internal, e.to_string()))?;
    let at = ctx.now.max(j.last_at);
    let reason = match &r.reason {
        Some(x) => format!("{x} ({})", cj::LATE_REPORT_NOTE),
        None => cj::LATE_REPORT_NOTE.to_string(),
    };
    let reason: String = reason.chars().take(pcmail_core::rules::REASON_MAX_CHARS).collect();
    ctx.tx
        .prepare_cached("UPDATE job SET state = ?2, ended_at = ?3, result = ?4, reason = ?5 WHERE id = ?1")?
        .execute(p![j.job.id, r.state.as_str(), at, result_json, reason])?;
    let by = pcmail_core::rules::sanitize_actor(&r.runner);
    record(ctx, &j.job.id, r.state, at, &by, Some(&reason))?;
    ctx.tx.prepare_cached("UPDATE job_watch SET tell = 1 WHERE job_id = ?1")?.execute(p![&j.job.id])?;
    let watchers: Vec<String> = {
        let mut st = ctx.tx.prepare_cached("SELECT pc FROM job_watch WHERE job_id = ?1")?;
        st.query_map(p![&j.job.id], |r| r.get(0))?.collect::<crate::store::DbResult<Vec<String>>>()?
    };
    for pc in watchers {
        ctx.wake(News::Job, pc);
    }
    Ok(())
}

// ---- the poll's `job` ----

pub(crate) fn poll_job(ctx: &mut Ctx<'_>, p: &PollJob) -> OpResult<PollJobAnswer> {
    let mut errors = Vec::new();
    if let Some(Err(bad)) = &p.whitelist {
        errors.push(bad.to_error("whitelist"));
    }
    if let Some(Ok(w)) = &p.whitelist {
        ctx.tx
            .prepare_cached(
                "INSERT INTO job_executor (pc, hash, commands, allowed_submitters, checkouts, published_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
                 ON CONFLICT (pc) DO UPDATE SET hash = ?2, commands = ?3, allowed_submitters = ?4, checkouts = ?5, published_at = ?6",
            )?
            .execute(p![
                ctx.pc,
                w.hash,
                to_text(&w.commands),
                w.allowed_submitters.as_ref().map(to_text),
                to_text(&w.checkouts),
                ctx.now
            ])?;
    }
    for id in &p.running {
        ctx.tx
            .prepare_cached("UPDATE job SET heartbeat_at = ?3 WHERE id = ?1 AND target = ?2 AND state = 'running'")?
            .execute(p![id, ctx.pc, ctx.now])?;
    }
    let mut reported = Vec::new();
    for item in &p.reports {
        match item {
            Ok(r) => match report(ctx, r) {
                Ok(_) => reported.push(Reported { job_id: r.job_id.clone(), ok: true, code: None, message: None }),
                Err(OpError::Proto(e)) => reported.push(Reported {
                    job_id: r.job_id.clone(),
                    ok: false,
                    code: Some(e.code.as_str().into()),
                    message: Some(e.message),
                }),
                Err(e) => return Err(e),
            },
            Err(bad) => errors.push(bad.to_error("reports")),
        }
    }
    let hash: Option<String> = ctx
        .tx
        .prepare_cached("SELECT hash FROM job_executor WHERE pc = ?1")?
        .query_row(p![ctx.pc], |r| r.get(0))
        .optional()?;

    let mut offered = Vec::new();
    if p.take {
        let creds = require_credentials(ctx)?;
        let sql = match ctx.tx.dialect() {
            Dialect::Sqlite => format!("SELECT {JOB_COLUMNS} FROM job INDEXED BY job_queued WHERE target = ?1 AND state = 'queued' ORDER BY seq LIMIT ?2"),
            Dialect::Postgres => format!("SELECT {JOB_COLUMNS} FROM job WHERE target = ?1 AND state = 'queued' ORDER BY seq LIMIT ?2"),
        };
        let mut stmt = ctx.tx.prepare_cached(&sql)?;
        for j in stmt.query_map(p![ctx.pc, cj::OFFERED_MAX as i64], StoredJob::from_row)? {
            let mut job = j?.job;
            job.credentials_required = Some(creds);
            offered.push(job);
        }
    }
    let cancel: Vec<String> = ctx
        .tx
        .prepare_cached(match ctx.tx.dialect() {
            Dialect::Sqlite => "SELECT id FROM job INDEXED BY job_running WHERE target = ?1 AND state = 'running' AND cancel_requested = 1 ORDER BY seq",
            Dialect::Postgres => "SELECT id FROM job WHERE target = ?1 AND state = 'running' AND cancel_requested = 1 ORDER BY seq",
        })?
        .query_map(p![ctx.pc], |r| r.get(0))?
        .collect::<crate::store::DbResult<_>>()?;

    // Ended jobs this PC submitted or joined, each told once.
    let told: Vec<String> = ctx
        .tx
        .prepare_cached(match ctx.tx.dialect() {
            Dialect::Sqlite => "SELECT job_id FROM job_watch INDEXED BY job_watch_tell WHERE pc = ?1 AND tell = 1 ORDER BY job_id LIMIT ?2",
            Dialect::Postgres => "SELECT job_id FROM job_watch WHERE pc = ?1 AND tell = 1 ORDER BY job_id LIMIT ?2",
        })?
        .query_map(p![ctx.pc, FINISHED_MAX], |r| r.get(0))?
        .collect::<crate::store::DbResult<_>>()?;
    let mut finished = Vec::new();
    for id in &told {
        ctx.tx
            .prepare_cached("UPDATE job_watch SET tell = 0 WHERE job_id = ?1 AND pc = ?2")?
            .execute(p![id, ctx.pc])?;
        if let Some(j) = load(ctx, id)? {
            finished.push(j.job);
        }
    }
    Ok(PollJobAnswer { whitelist_hash: hash, offered, cancel, reported, finished, errors })
}

fn to_text<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

#[cfg(test)]
mod tests {
    /// The poll's job reads (and the sweep's, and dedup) go through partial
    /// indexes of live rows only, so their cost does not grow with the
    /// finished jobs (pcmail-bench jobs measures it). The queries name their
    /// index (`INDEXED BY`): with no statistics SQLite would pick the full
    /// `job_by_target (target, seq)` for the poll's offer, whose scan grows
    /// with every job ever sent to that PC. These are the queries' own clauses:
    /// a partial index that no longer fits makes the statement fail to prepare.
    #[test]
    fn the_polls_job_reads_use_partial_indexes() {
        let mut conn = rusqlite::Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut conn).unwrap();
        let plan = |sql: &str| -> String {
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let rows = stmt.query_map([], |r| r.get::<_, String>(3)).unwrap();
            rows.map(Result::unwrap).collect::<Vec<_>>().join("; ")
        };
        for (sql, index) in [
            ("SELECT id FROM job INDEXED BY job_queued WHERE target = 'b' AND state = 'queued' ORDER BY seq LIMIT 20", "job_queued"),
            ("SELECT id FROM job INDEXED BY job_running WHERE target = 'b' AND state = 'running' AND cancel_requested = 1 ORDER BY seq", "job_running"),
            ("SELECT job_id FROM job_watch INDEXED BY job_watch_tell WHERE pc = 'a' AND tell = 1 ORDER BY job_id LIMIT 100", "job_watch_tell"),
            ("SELECT id FROM job INDEXED BY job_live_by_key WHERE dedup_key = 'k' AND state IN ('queued', 'running') ORDER BY seq DESC LIMIT 1", "job_live_by_key"),
            ("SELECT id FROM job INDEXED BY job_ended_by_key WHERE dedup_key = 'k' AND state IN ('ok', 'failed') AND ended_at > 5 ORDER BY ended_at DESC LIMIT 1", "job_ended_by_key"),
            ("SELECT id FROM job INDEXED BY job_heartbeat WHERE state = 'running' ORDER BY seq", "job_heartbeat"),
            ("SELECT id FROM job INDEXED BY job_queued_age WHERE state = 'queued' AND submitted_at <= 5 ORDER BY submitted_at", "job_queued_age"),
        ] {
            let p = plan(sql);
            // A partial index (never a scan of the whole table).
            assert!(p.contains(index), "{sql}: {p}");
        }
    }
}
