//! Job rows: loading a job, its timeline, recording a step, ending it (the
//! watchers are told and their long polls wake), the jobs a PC may see, and
//! the job steps of the sweep, a revoke and retention.

use crate::ctx::{Ctx, OpError, OpResult};
use crate::store::p;
use crate::store::Dialect;
use crate::store::{Optional, Row};
use pcmail_core::job::{self as cj, ArgValue, Job, JobResult, JobState, ListArgs, Submitter, TimelineEntry};
use pcmail_core::op_table::News;
use pcmail_core::{ErrorCode, Millis};
use std::collections::BTreeMap;

pub(crate) const JOB_COLUMNS: &str =
    "id, target, command, args, subject, submitter_pc, submitter_session, submitter_name, force, \
     rerun_of, state, submitted_at, started_at, run_started_at, runner, heartbeat_at, ended_at, time_limit_ms, \
     cancel_requested, joined, result, reason, chunked, runs, run_sent_at, last_at";

/// A stored job, all columns.
#[derive(Debug, Clone)]
pub(crate) struct StoredJob {
    pub job: Job,
    pub chunked: bool,
    pub runs: i64,
    pub run_sent_at: Option<Millis>,
    pub last_at: Millis,
}

pub(crate) fn bad_column(i: usize, what: String) -> crate::store::DbError {
    crate::store::DbError::Decode { col: i, what }
}

impl StoredJob {
    pub(crate) fn from_row(r: &Row<'_>) -> crate::store::DbResult<StoredJob> {
        let args_s: String = r.get(3)?;
        let args: BTreeMap<String, ArgValue> =
            serde_json::from_str(&args_s).map_err(|e| bad_column(3, format!("args: {e}")))?;
        let state_s: String = r.get(10)?;
        let state = JobState::parse(&state_s).ok_or_else(|| bad_column(10, format!("bad state {state_s:?}")))?;
        let result: Option<String> = r.get(20)?;
        let result: Option<JobResult> = match result {
            None => None,
            Some(s) => Some(serde_json::from_str(&s).map_err(|e| bad_column(20, format!("result: {e}")))?),
        };
        Ok(StoredJob {
            job: Job {
                id: r.get(0)?,
                target: r.get(1)?,
                command: r.get(2)?,
                args,
                subject: r.get(4)?,
                submitter: Submitter { pc: r.get(5)?, session: r.get(6)?, name: r.get(7)? },
                force: r.get(8)?,
                rerun_of: r.get(9)?,
                state,
                submitted_at: r.get(11)?,
                started_at: r.get(12)?,
                run_started_at: r.get(13)?,
                runner: r.get(14)?,
                heartbeat_at: r.get(15)?,
                ended_at: r.get(16)?,
                time_limit_ms: r.get(17)?,
                cancel_requested: r.get(18)?,
                joined: r.get(19)?,
                result,
                reason: r.get(21)?,
                credentials_required: None,
                timeline: None,
            },
            chunked: r.get(22)?,
            runs: r.get(23)?,
            run_sent_at: r.get(24)?,
            last_at: r.get(25)?,
        })
    }
}

pub(crate) fn load(ctx: &Ctx<'_>, id: &str) -> OpResult<Option<StoredJob>> {
    let sql = format!("SELECT {JOB_COLUMNS} FROM job WHERE id = ?1");
    Ok(ctx.tx.prepare_cached(&sql)?.query_row(p![id], StoredJob::from_row).optional()?)
}

pub(crate) fn timeline(ctx: &Ctx<'_>, id: &str) -> OpResult<Vec<TimelineEntry>> {
    let mut stmt =
        ctx.tx.prepare_cached("SELECT at, state, by, reason FROM job_event WHERE job_id = ?1 ORDER BY seq")?;
    let rows = stmt.query_map(p![id], |r| {
        let s: String = r.get(1)?;
        Ok(TimelineEntry {
            at: r.get(0)?,
            state: JobState::parse(&s).ok_or_else(|| bad_column(1, format!("bad state {s:?}")))?,
            by: r.get(2)?,
            reason: r.get(3)?,
        })
    })?;
    Ok(rows.collect::<crate::store::DbResult<Vec<_>>>()?)
}

/// The wire form of a job, with its timeline or without (lists).
pub(crate) fn to_wire(ctx: &Ctx<'_>, j: &StoredJob, with_timeline: bool) -> OpResult<Job> {
    let mut job = j.job.clone();
    if with_timeline {
        job.timeline = Some(timeline(ctx, &job.id)?);
    }
    // A read shows what the clock has decided even when no sweep wrote it.
    pcmail_core::due::job_as_read(&mut job, j.last_at, ctx.now);
    Ok(job)
}

pub(crate) fn record(
    ctx: &Ctx<'_>,
    id: &str,
    state: JobState,
    at: Millis,
    by: &str,
    reason: Option<&str>,
) -> OpResult<()> {
    ctx.tx
        .prepare_cached("INSERT INTO job_event (job_id, at, state, by, reason) VALUES (?1, ?2, ?3, ?4, ?5)")?
        .execute(p![id, at, state.as_str(), by, reason])?;
    let sql = match ctx.tx.dialect() {
        Dialect::Sqlite => "UPDATE job SET last_at = max(last_at, ?2) WHERE id = ?1",
        Dialect::Postgres => "UPDATE job SET last_at = GREATEST(last_at, ?2) WHERE id = ?1",
    };
    ctx.tx.prepare_cached(sql)?.execute(p![id, at])?;
    Ok(())
}

/// The PCs that hear of this job's end (submitter's and joined).
fn watchers(ctx: &Ctx<'_>, id: &str) -> OpResult<Vec<String>> {
    let mut stmt = ctx.tx.prepare_cached("SELECT pc FROM job_watch WHERE job_id = ?1")?;
    let rows = stmt.query_map(p![id], |r| r.get::<_, String>(0))?;
    Ok(rows.collect::<crate::store::DbResult<Vec<_>>>()?)
}

/// Ends a job (forward only): state, result, reason, the timeline entry; its
/// watchers are owed a `finished` and their long polls wake.
pub(crate) fn end_job(
    ctx: &mut Ctx<'_>,
    j: &StoredJob,
    state: JobState,
    by: &str,
    reason: Option<&str>,
    result: Option<&JobResult>,
) -> OpResult<bool> {
    let now = ctx.now;
    end_job_at(ctx, j, state, by, reason, result, now)
}

/// `end_job` at a given moment (a time rule's, which may be before `now`);
/// never before the job's last timeline entry.
pub(crate) fn end_job_at(
    ctx: &mut Ctx<'_>,
    j: &StoredJob,
    state: JobState,
    by: &str,
    reason: Option<&str>,
    result: Option<&JobResult>,
    at: Millis,
) -> OpResult<bool> {
    if !j.job.state.can_move_to(state) || !state.is_ended() {
        return Ok(false);
    }
    let at = at.max(j.last_at);
    let result_json = match result {
        Some(r) => Some(serde_json::to_string(r).map_err(|e| OpError::proto(ErrorCode::Internal, e.to_string()))?),
        None => None,
    };
    ctx.tx
        .prepare_cached(
            "UPDATE job SET state = ?2, ended_at = ?3, result = coalesce(?4, result), reason = ?5 WHERE id = ?1",
        )?
        .execute(p![j.job.id, state.as_str(), at, result_json, reason])?;
    record(ctx, &j.job.id, state, at, by, reason)?;
    ctx.tx.prepare_cached("UPDATE job_watch SET tell = 1 WHERE job_id = ?1")?.execute(p![&j.job.id])?;
    let w = watchers(ctx, &j.job.id)?;
    for pc in w {
        ctx.wake(News::Job, pc);
    }
    ctx.wake(News::Job, j.job.target.clone());
    Ok(true)
}

/// Jobs the caller may see, newest first: targeted at it, or watched by it
/// (submitted or joined); `mine` only the latter.
pub(crate) fn visible_jobs(ctx: &Ctx<'_>, a: &ListArgs) -> OpResult<Vec<Job>> {
    let cols = JOB_COLUMNS.split(", ").map(|c| format!("j.{c}")).collect::<Vec<_>>().join(", ");
    let sql = format!(
        "SELECT {cols} FROM job j WHERE \
         (j.seq IN (SELECT j2.seq FROM job_watch w JOIN job j2 ON j2.id = w.job_id WHERE w.pc = ?1) \
          OR (?2 = 0 AND j.target = ?1)) \
         AND (CAST(?3 AS TEXT) IS NULL OR j.target = ?3) AND (CAST(?4 AS TEXT) IS NULL OR j.state = ?4 OR j.state = ?6) \
         ORDER BY j.seq DESC LIMIT ?5"
    );
    // A filter on an end state also reads the live rows the clock may
    // already have ended (a silent running job is `timed_out` to a reader);
    // each row is then shown as read and filtered on what it shows.
    let may_become = match a.state {
        Some(JobState::TimedOut) => Some(JobState::Running.as_str()),
        Some(JobState::Cancelled) => Some(JobState::Queued.as_str()),
        _ => None,
    };
    let mut stmt = ctx.tx.prepare_cached(&sql)?;
    let rows = stmt.query_map(
        p![ctx.pc, a.mine, a.target, a.state.map(|s| s.as_str()), a.limit as i64, may_become],
        StoredJob::from_row,
    )?;
    let mut out = Vec::new();
    for j in rows {
        let j = j?;
        let mut job = j.job;
        pcmail_core::due::job_as_read(&mut job, j.last_at, ctx.now);
        if a.state.is_none_or(|s| s == job.state) {
            out.push(job);
        }
    }
    Ok(out)
}

/// `roster.revoke`: the PC's queued jobs are cancelled, with why and how it
/// comes back, so their submitters' `status` says so. (Its running jobs end
/// `timed_out` when their heartbeat stops, as any silent executor's.)
pub(crate) fn cancel_queued_for_revoked(ctx: &mut Ctx<'_>, label: &str) -> OpResult<usize> {
    let ids: Vec<String> = {
        let mut st = ctx.tx.prepare_cached("SELECT id FROM job WHERE target = ?1 AND state = 'queued' ORDER BY seq")?;
        st.query_map(p![label], |r| r.get(0))?.collect::<crate::store::DbResult<Vec<String>>>()?
    };
    let reason = cj::revoked_target_reason(label);
    let mut n = 0;
    for id in ids {
        let Some(j) = load(ctx, &id)? else { continue };
        if end_job(ctx, &j, JobState::Cancelled, cj::SERVER_ACTOR, Some(&reason), None)? {
            n += 1;
        }
    }
    Ok(n)
}

// ---- sweep ----

/// What the server's clock has decided for jobs (`pcmail_core::due::job`):
/// (id, the end state, the reason, the moment). The reads narrow to the
/// running and the old queued jobs (partial indexes), never the history.
pub(crate) fn due(ctx: &Ctx<'_>) -> OpResult<Vec<(String, JobState, &'static str, Millis)>> {
    let now = ctx.now;
    let mut out = Vec::new();
    let mut stmt = ctx.tx.prepare_cached(match ctx.tx.dialect() {
        Dialect::Sqlite => {
            "SELECT id, heartbeat_at, coalesce(run_started_at, started_at, submitted_at), time_limit_ms, submitted_at FROM job \
             INDEXED BY job_heartbeat WHERE state = 'running' ORDER BY seq"
        }
        Dialect::Postgres => {
            "SELECT id, heartbeat_at, coalesce(run_started_at, started_at, submitted_at), time_limit_ms, submitted_at FROM job \
             WHERE state = 'running' ORDER BY seq"
        }
    })?;
    let rows = stmt.query_map(p![], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, Option<i64>>(1)?,
            r.get::<_, i64>(2)?,
            r.get::<_, i64>(3)?,
            r.get::<_, i64>(4)?,
        ))
    })?;
    for row in rows {
        let (id, heartbeat, run_start, limit, submitted) = row?;
        if let Some(d) = due_rule(JobState::Running, heartbeat, run_start, limit, submitted, now) {
            out.push((id, d.state, d.reason.unwrap_or(cj::REASON_NO_HEARTBEAT), d.at));
        }
    }
    let mut stmt = ctx.tx.prepare_cached(match ctx.tx.dialect() {
        Dialect::Sqlite => "SELECT id, submitted_at FROM job INDEXED BY job_queued_age WHERE state = 'queued' AND submitted_at <= ?1 ORDER BY submitted_at",
        Dialect::Postgres => "SELECT id, submitted_at FROM job WHERE state = 'queued' AND submitted_at <= ?1 ORDER BY submitted_at",
    })?;
    for row in stmt.query_map(p![now - cj::QUEUED_MAX_AGE_MS], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))? {
        let (id, submitted) = row?;
        if let Some(d) = due_rule(JobState::Queued, None, submitted, 0, submitted, now) {
            out.push((id, d.state, d.reason.unwrap_or(cj::REASON_NEVER_STARTED), d.at));
        }
    }
    Ok(out)
}

use pcmail_core::due::job as due_rule;

/// The sweep's job step (and every write op's catch-up): (timed out, cancelled).
pub(crate) fn sweep(ctx: &mut Ctx<'_>) -> OpResult<(i64, i64)> {
    let (mut timed_out, mut cancelled) = (0, 0);
    for (id, state, reason, at) in due(ctx)? {
        let Some(j) = load(ctx, &id)? else { continue };
        if end_job_at(ctx, &j, state, cj::SERVER_ACTOR, Some(reason), None, at)? {
            if state == JobState::TimedOut {
                timed_out += 1;
            } else {
                cancelled += 1;
            }
        }
    }
    Ok((timed_out, cancelled))
}

/// Retention: ended jobs whose end is before `cutoff`, with their timeline,
/// submits and watches, at most `max` of them. Returns how many went.
pub(crate) fn prune_jobs(tx: &dyn crate::store::Db, cutoff: Millis, max: usize) -> crate::store::DbResult<usize> {
    let ids: Vec<String> = tx
        .prepare_cached("SELECT id FROM job WHERE ended_at IS NOT NULL AND ended_at < ?1 ORDER BY ended_at LIMIT ?2")?
        .query_map(p![cutoff, max as i64], |r| r.get(0))?
        .collect::<crate::store::DbResult<_>>()?;
    for id in &ids {
        tx.prepare_cached("DELETE FROM job_event WHERE job_id = ?1")?.execute(p![id])?;
        tx.prepare_cached("DELETE FROM job_submit WHERE job_id = ?1")?.execute(p![id])?;
        tx.prepare_cached("DELETE FROM job_watch WHERE job_id = ?1")?.execute(p![id])?;
        tx.prepare_cached("DELETE FROM job WHERE id = ?1")?.execute(p![id])?;
    }
    Ok(ids.len())
}
