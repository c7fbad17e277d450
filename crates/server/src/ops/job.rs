//! Jobs (issue 13): `job.submit|status|list|cancel|start|report`, the poll's
//! `job` argument, the `@server` built-ins and the sweep's job step. The
//! rules (specs, typed args, who may submit, the dedup key, the output cap)
//! are `pcmail_core::job`'s; this file keeps the states, who and when.

use super::fields;
use crate::engine::{Ctx, OpError, OpResult};
use pcmail_core::job::{
    self as cj, ArgValue, CancelArgs, CommandSpec, Job, JobResult, JobState, ListArgs, PollJob, ReportArgs, StartArgs,
    SubmitArgs, Submitter, TimelineEntry, Whitelist,
};
use pcmail_core::op_table::News;
use pcmail_core::{ErrorCode, Millis, ProtoError};
use rusqlite::{params, OptionalExtension, Row};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Most jobs a poll reports in `finished` at once (the rest in the next poll).
const FINISHED_MAX: i64 = 100;
/// `_debug_jobs` lists at most this many.
const DEBUG_JOBS_MAX: usize = 100;

const JOB_COLUMNS: &str =
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

fn bad_column(i: usize, what: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, what.into())
}

impl StoredJob {
    fn from_row(r: &Row<'_>) -> rusqlite::Result<StoredJob> {
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
    Ok(ctx.tx.prepare_cached(&sql)?.query_row([id], StoredJob::from_row).optional()?)
}

fn timeline(ctx: &Ctx<'_>, id: &str) -> OpResult<Vec<TimelineEntry>> {
    let mut stmt =
        ctx.tx.prepare_cached("SELECT at, state, by, reason FROM job_event WHERE job_id = ?1 ORDER BY seq")?;
    let rows = stmt.query_map([id], |r| {
        let s: String = r.get(1)?;
        Ok(TimelineEntry {
            at: r.get(0)?,
            state: JobState::parse(&s).ok_or_else(|| bad_column(1, format!("bad state {s:?}")))?,
            by: r.get(2)?,
            reason: r.get(3)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// The wire form of a job, with its timeline or without (lists).
fn to_json(ctx: &Ctx<'_>, j: &StoredJob, with_timeline: bool) -> OpResult<Value> {
    let mut job = j.job.clone();
    if with_timeline {
        job.timeline = Some(timeline(ctx, &job.id)?);
    }
    Ok(json!(job))
}

fn record(ctx: &Ctx<'_>, id: &str, state: JobState, at: Millis, by: &str, reason: Option<&str>) -> OpResult<()> {
    ctx.tx
        .prepare_cached("INSERT INTO job_event (job_id, at, state, by, reason) VALUES (?1, ?2, ?3, ?4, ?5)")?
        .execute(params![id, at, state.as_str(), by, reason])?;
    ctx.tx.prepare_cached("UPDATE job SET last_at = max(last_at, ?2) WHERE id = ?1")?.execute(params![id, at])?;
    Ok(())
}

/// The PCs that hear of this job's end (submitter's and joined).
fn watchers(ctx: &Ctx<'_>, id: &str) -> OpResult<Vec<String>> {
    let mut stmt = ctx.tx.prepare_cached("SELECT pc FROM job_watch WHERE job_id = ?1")?;
    let rows = stmt.query_map([id], |r| r.get::<_, String>(0))?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// Ends a job (forward only): state, result, reason, the timeline entry; its
/// watchers are owed a `finished` and their long polls wake.
fn end_job(
    ctx: &mut Ctx<'_>,
    j: &StoredJob,
    state: JobState,
    by: &str,
    reason: Option<&str>,
    result: Option<&JobResult>,
) -> OpResult<bool> {
    if !j.job.state.can_move_to(state) || !state.is_ended() {
        return Ok(false);
    }
    let at = ctx.now.max(j.last_at);
    let result_json = match result {
        Some(r) => Some(serde_json::to_string(r).map_err(|e| OpError::proto(ErrorCode::Internal, e.to_string()))?),
        None => None,
    };
    ctx.tx
        .prepare_cached(
            "UPDATE job SET state = ?2, ended_at = ?3, result = coalesce(?4, result), reason = ?5 WHERE id = ?1",
        )?
        .execute(params![j.job.id, state.as_str(), at, result_json, reason])?;
    record(ctx, &j.job.id, state, at, by, reason)?;
    ctx.tx.prepare_cached("UPDATE job_watch SET tell = 1 WHERE job_id = ?1")?.execute([&j.job.id])?;
    let w = watchers(ctx, &j.job.id)?;
    for pc in w {
        ctx.wake(News::Job, pc);
    }
    ctx.wake(News::Job, j.job.target.clone());
    Ok(true)
}

/// May the caller see this job: the target PC, the submitter's PC, a joined PC.
fn may_see(ctx: &Ctx<'_>, j: &Job) -> OpResult<bool> {
    if j.target == ctx.pc || j.submitter.pc == ctx.pc {
        return Ok(true);
    }
    Ok(ctx
        .tx
        .prepare_cached("SELECT 1 FROM job_watch WHERE job_id = ?1 AND pc = ?2")?
        .query_row(params![j.id, ctx.pc], |_| Ok(()))
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
        .query_row([pc], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
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

pub(crate) fn submit(ctx: &mut Ctx<'_>, a: &SubmitArgs) -> OpResult<Map<String, Value>> {
    if a.submitter.pc != ctx.pc {
        return Err(OpError::proto(
            ErrorCode::Forbidden,
            format!("submitter.pc {:?} is not the caller {:?}: a PC submits in its own name", a.submitter.pc, ctx.pc),
        ));
    }
    let server = a.target == cj::SERVER_TARGET;
    if !server {
        let pcs = super::roster::load_all(ctx).map_err(|_| {
            OpError::proto(ErrorCode::RosterUnavailable, "the roster cannot be read; nothing was queued")
        })?;
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
        .query_row([&a.job_id], |r| Ok((r.get(0)?, r.get(1)?)))
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
        return Ok(fields(json!({"deduped": job_id != a.job_id, "job": to_json(ctx, &j, true)?})));
    }

    // A revoked PC cannot poll: its jobs would only wait (issue 13).
    if !server {
        let revoked: bool = ctx
            .tx
            .prepare_cached("SELECT revoked_at IS NOT NULL FROM pc WHERE label = ?1")?
            .query_row([&a.target], |r| r.get(0))
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
            ctx.tx.prepare_cached("UPDATE job SET joined = joined + 1 WHERE id = ?1")?.execute([&j.job.id])?;
            // Told of the end like the first submitter; a job already ended is answered here (told).
            ctx.tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO job_watch (job_id, pc, session, name, joined_at, tell) VALUES (?1, ?2, ?3, ?4, ?5, 0)",
                )?
                .execute(params![j.job.id, a.submitter.pc, a.submitter.session, a.submitter.name, ctx.now])?;
            insert_submit(ctx, &a.job_id, &j.job.id, &key)?;
            let j = load(ctx, &j.job.id)?.expect("just updated");
            return Ok(fields(json!({"deduped": true, "job": to_json(ctx, &j, true)?})));
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
        .execute(params![
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
        .execute(params![a.job_id, a.submitter.pc, a.submitter.session, a.submitter.name, ctx.now])?;

    if server {
        run_builtin(ctx, &a.job_id, &spec, &args)?;
        // The submit's answer tells the submitter: no `finished` for it later.
        ctx.tx
            .prepare_cached("UPDATE job_watch SET tell = 0 WHERE job_id = ?1 AND pc = ?2")?
            .execute(params![a.job_id, a.submitter.pc])?;
    } else {
        // The target's long poll wakes: it is offered the job at once.
        ctx.wake(News::Job, a.target.clone());
    }
    let j = load(ctx, &a.job_id)?.expect("just inserted");
    Ok(fields(json!({"deduped": false, "job": to_json(ctx, &j, true)?})))
}

fn insert_submit(ctx: &Ctx<'_>, id: &str, job_id: &str, key: &str) -> OpResult<()> {
    ctx.tx
        .prepare_cached("INSERT INTO job_submit (id, job_id, submit_key, pc, at) VALUES (?1, ?2, ?3, ?4, ?5)")?
        .execute(params![id, job_id, key, ctx.pc, ctx.now])?;
    Ok(())
}

/// A job with this dedup key that is queued or running, else the newest that
/// ended ok/failed less than `window` ago.
fn find_same(ctx: &Ctx<'_>, dedup: &str, window: Millis) -> OpResult<Option<StoredJob>> {
    let sql = format!(
        "SELECT {JOB_COLUMNS} FROM job INDEXED BY job_live_by_key WHERE dedup_key = ?1 AND state IN ('queued', 'running') ORDER BY seq DESC LIMIT 1"
    );
    if let Some(j) = ctx.tx.prepare_cached(&sql)?.query_row([dedup], StoredJob::from_row).optional()? {
        return Ok(Some(j));
    }
    if window <= 0 {
        return Ok(None);
    }
    let sql = format!(
        "SELECT {JOB_COLUMNS} FROM job INDEXED BY job_ended_by_key WHERE dedup_key = ?1 AND state IN ('ok', 'failed') \
         AND ended_at > ?2 ORDER BY ended_at DESC LIMIT 1"
    );
    Ok(ctx.tx.prepare_cached(&sql)?.query_row(params![dedup, ctx.now - window], StoredJob::from_row).optional()?)
}

// ---- @server built-ins ----

/// Runs a built-in inside the submit: queued → running → ok (or failed with
/// the reason), by `server`; `result.data` holds the answer.
fn run_builtin(ctx: &mut Ctx<'_>, id: &str, spec: &CommandSpec, args: &BTreeMap<String, ArgValue>) -> OpResult<()> {
    let now = ctx.now;
    ctx.tx
        .prepare_cached(
            "UPDATE job SET state = 'running', started_at = ?2, run_started_at = ?2, runner = 'server', heartbeat_at = ?2, runs = 1 WHERE id = ?1",
        )?
        .execute(params![id, now])?;
    record(ctx, id, JobState::Running, now, cj::SERVER_ACTOR, None)?;
    let outcome = builtin_answer(ctx, &spec.name, args)?;
    let j = load(ctx, id)?.expect("just inserted");
    let (state, data, reason) = match outcome {
        Ok(data) => (JobState::Ok, Some(data), None),
        Err(why) => (JobState::Failed, None, Some(why)),
    };
    let result =
        JobResult { ran: true, exit: Some(if state == JobState::Ok { 0 } else { 1 }), data, ..Default::default() };
    end_job(ctx, &j, state, cj::SERVER_ACTOR, reason.as_deref(), Some(&result))?;
    Ok(())
}

fn builtin_answer(ctx: &mut Ctx<'_>, name: &str, args: &BTreeMap<String, ArgValue>) -> OpResult<Result<Value, String>> {
    Ok(Ok(match name {
        "_debug_roster" => debug_roster(ctx)?,
        "_debug_mail" => {
            let id = args.get("id").map(ArgValue::to_arg_string).unwrap_or_default();
            let answer = super::status::status(ctx, std::slice::from_ref(&id))?;
            if answer.get("mails").and_then(Value::as_array).is_none_or(|a| a.is_empty()) {
                return Ok(Err(format!("no mail {id} that {} sent or received", ctx.pc)));
            }
            Value::Object(answer)
        }
        "_debug_alerts" => Value::Object(crate::sweep::list_alerts(ctx, true)?),
        "_debug_sweep_plan" => crate::sweep::plan(ctx)?,
        "_debug_jobs" => {
            let state = args.get("state").and_then(|v| JobState::parse(&v.to_arg_string()));
            let l = ListArgs { state, limit: DEBUG_JOBS_MAX, ..Default::default() };
            let mut counts = Map::new();
            let mut stmt = ctx.tx.prepare_cached("SELECT state, count(*) FROM job GROUP BY state ORDER BY state")?;
            for row in stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))? {
                let (s, n) = row?;
                counts.insert(s, json!(n));
            }
            json!({"counts": counts, "jobs": visible_jobs(ctx, &l)?})
        }
        "sweep" => Value::Object(crate::sweep::sweep(ctx)?),
        "prune" => {
            let cutoff = ctx.now - ctx.retention_ms;
            let mut mail = 0;
            loop {
                let n = crate::prune::prune_band(
                    ctx.tx,
                    cutoff,
                    crate::prune::BAND_ROWS,
                    std::time::Duration::from_millis(200),
                )?;
                mail += n;
                if n == 0 || mail >= 10 * crate::prune::BAND_ROWS {
                    break;
                }
            }
            json!({"mail": mail, "jobs": prune_jobs(ctx.tx, cutoff, 2_000)?, "cutoff": cutoff})
        }
        other => return Ok(Err(format!("{other} is not a built-in"))),
    }))
}

fn debug_roster(ctx: &Ctx<'_>) -> OpResult<Value> {
    let mut stmt = ctx.tx.prepare_cached(
        "SELECT p.number, p.label, p.hostname, p.last_poll_at, p.cred_hash IS NOT NULL, p.revoked_at, \
         e.hash, e.commands, e.allowed_submitters, e.checkouts, e.published_at \
         FROM pc p LEFT JOIN job_executor e ON e.pc = p.label ORDER BY p.number",
    )?;
    let rows = stmt.query_map([], |r| {
        let commands: Option<String> = r.get(7)?;
        let executor = match commands {
            None => Value::Null,
            Some(c) => {
                let specs: Vec<CommandSpec> = serde_json::from_str(&c).unwrap_or_default();
                let allowed: Option<String> = r.get(8)?;
                let checkouts: String = r.get(9)?;
                json!({
                    "hash": r.get::<_, String>(6)?,
                    "commands": specs.iter().map(|s| s.name.clone()).collect::<Vec<_>>(),
                    "allowedSubmitters": allowed.and_then(|s| serde_json::from_str::<Value>(&s).ok()),
                    "checkouts": serde_json::from_str::<Value>(&checkouts).unwrap_or(Value::Null),
                    "publishedAt": r.get::<_, i64>(10)?,
                })
            }
        };
        Ok(json!({
            "number": r.get::<_, i64>(0)?, "label": r.get::<_, String>(1)?, "hostname": r.get::<_, String>(2)?,
            "lastPollAt": r.get::<_, Option<i64>>(3)?, "bound": r.get::<_, bool>(4)?,
            "revoked": r.get::<_, Option<i64>>(5)?.is_some(), "executor": executor,
        }))
    })?;
    let pcs = rows.collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(json!({"pcs": pcs, "requireCredentials": require_credentials(ctx)?}))
}

// ---- job.status / job.list ----

pub(crate) fn status(ctx: &mut Ctx<'_>, id: &str) -> OpResult<Map<String, Value>> {
    let j = load(ctx, id)?.ok_or_else(|| OpError::proto(ErrorCode::NotFound, format!("no job {id}")))?;
    if !may_see(ctx, &j.job)? {
        return Err(OpError::proto(
            ErrorCode::Forbidden,
            format!("job {id} is neither submitted by, joined by nor targeted at {}", ctx.pc),
        ));
    }
    Ok(fields(json!({"job": to_json(ctx, &j, true)?})))
}

pub(crate) fn list(ctx: &mut Ctx<'_>, a: &ListArgs) -> OpResult<Map<String, Value>> {
    Ok(fields(json!({"jobs": visible_jobs(ctx, a)?})))
}

/// Jobs the caller may see, newest first: targeted at it, or watched by it
/// (submitted or joined); `mine` only the latter.
fn visible_jobs(ctx: &Ctx<'_>, a: &ListArgs) -> OpResult<Vec<Value>> {
    let cols = JOB_COLUMNS.split(", ").map(|c| format!("j.{c}")).collect::<Vec<_>>().join(", ");
    let sql = format!(
        "SELECT {cols} FROM job j WHERE \
         (j.seq IN (SELECT j2.seq FROM job_watch w JOIN job j2 ON j2.id = w.job_id WHERE w.pc = ?1) \
          OR (?2 = 0 AND j.target = ?1)) \
         AND (?3 IS NULL OR j.target = ?3) AND (?4 IS NULL OR j.state = ?4) \
         ORDER BY j.seq DESC LIMIT ?5"
    );
    let mut stmt = ctx.tx.prepare_cached(&sql)?;
    let rows = stmt.query_map(
        params![ctx.pc, a.mine, a.target, a.state.map(|s| s.as_str()), a.limit as i64],
        StoredJob::from_row,
    )?;
    let mut out = Vec::new();
    for j in rows {
        out.push(json!(j?.job));
    }
    Ok(out)
}

// ---- job.cancel ----

pub(crate) fn cancel(ctx: &mut Ctx<'_>, a: &CancelArgs) -> OpResult<Map<String, Value>> {
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
            ctx.tx.prepare_cached("UPDATE job SET cancel_requested = 1 WHERE id = ?1")?.execute([id])?;
            // The executor hears it in its next poll: wake it now.
            ctx.wake(News::Job, j.job.target.clone());
        }
        _ => {}
    }
    let j = load(ctx, id)?.expect("loaded above");
    Ok(fields(json!({"job": to_json(ctx, &j, true)?})))
}

// ---- job.start ----

pub(crate) fn start(ctx: &mut Ctx<'_>, a: &StartArgs) -> OpResult<Map<String, Value>> {
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
                .execute(params![id, at, a.started_at, a.runner, now])?;
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
                .execute(params![id, at, a.started_at, a.runner, now, run])?;
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
    Ok(fields(json!({"job": to_json(ctx, &j, true)?})))
}

// ---- job.report ----

pub(crate) fn report(ctx: &mut Ctx<'_>, r: &ReportArgs) -> OpResult<Map<String, Value>> {
    let id = &r.job_id;
    let j = load(ctx, id)?.ok_or_else(|| OpError::proto(ErrorCode::NotFound, format!("no job {id}")))?;
    if ctx.pc != j.job.target {
        return Err(OpError::proto(ErrorCode::Forbidden, format!("job {id} is for {}, not {}", j.job.target, ctx.pc)));
    }
    if j.job.state.is_ended() {
        // A retried report (or one after the sweep closed it): unchanged.
        return Ok(fields(json!({"job": to_json(ctx, &j, true)?})));
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
    Ok(fields(json!({"job": to_json(ctx, &j, true)?})))
}

// ---- the poll's `job` ----

pub(crate) fn poll_job(ctx: &mut Ctx<'_>, p: &PollJob) -> OpResult<Value> {
    if let Some(w) = &p.whitelist {
        ctx.tx
            .prepare_cached(
                "INSERT INTO job_executor (pc, hash, commands, allowed_submitters, checkouts, published_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
                 ON CONFLICT (pc) DO UPDATE SET hash = ?2, commands = ?3, allowed_submitters = ?4, checkouts = ?5, published_at = ?6",
            )?
            .execute(params![
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
            .execute(params![id, ctx.pc, ctx.now])?;
    }
    let mut reported = Vec::new();
    let mut errors = Vec::new();
    for item in &p.reports {
        match item {
            Ok(r) => match report(ctx, r) {
                Ok(_) => reported.push(json!({"jobId": r.job_id, "ok": true})),
                Err(OpError::Proto(e)) => reported
                    .push(json!({"jobId": r.job_id, "ok": false, "code": e.code.as_str(), "message": e.message})),
                Err(e) => return Err(e),
            },
            Err(bad) => errors.push(json!(bad.to_error("reports"))),
        }
    }
    let hash: Option<String> = ctx
        .tx
        .prepare_cached("SELECT hash FROM job_executor WHERE pc = ?1")?
        .query_row([ctx.pc], |r| r.get(0))
        .optional()?;

    let mut offered = Vec::new();
    if p.take {
        let creds = require_credentials(ctx)?;
        let sql = format!("SELECT {JOB_COLUMNS} FROM job INDEXED BY job_queued WHERE target = ?1 AND state = 'queued' ORDER BY seq LIMIT ?2");
        let mut stmt = ctx.tx.prepare_cached(&sql)?;
        for j in stmt.query_map(params![ctx.pc, cj::OFFERED_MAX as i64], StoredJob::from_row)? {
            let mut job = j?.job;
            job.credentials_required = Some(creds);
            offered.push(json!(job));
        }
    }
    let cancel: Vec<String> = ctx
        .tx
        .prepare_cached("SELECT id FROM job INDEXED BY job_running WHERE target = ?1 AND state = 'running' AND cancel_requested = 1 ORDER BY seq")?
        .query_map([ctx.pc], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;

    // Ended jobs this PC submitted or joined, each told once.
    let told: Vec<String> = ctx
        .tx
        .prepare_cached("SELECT job_id FROM job_watch INDEXED BY job_watch_tell WHERE pc = ?1 AND tell = 1 ORDER BY job_id LIMIT ?2")?
        .query_map(params![ctx.pc, FINISHED_MAX], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut finished = Vec::new();
    for id in &told {
        ctx.tx
            .prepare_cached("UPDATE job_watch SET tell = 0 WHERE job_id = ?1 AND pc = ?2")?
            .execute(params![id, ctx.pc])?;
        if let Some(j) = load(ctx, id)? {
            finished.push(json!(j.job));
        }
    }
    Ok(json!({
        "whitelistHash": hash, "offered": offered, "cancel": cancel, "reported": reported,
        "finished": finished, "errors": errors,
    }))
}

fn to_text<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

/// `roster.revoke`: the PC's queued jobs are cancelled, with why and how it
/// comes back, so their submitters' `status` says so. (Its running jobs end
/// `timed_out` when their heartbeat stops, as any silent executor's.)
pub(crate) fn cancel_queued_for_revoked(ctx: &mut Ctx<'_>, label: &str) -> OpResult<usize> {
    let ids: Vec<String> = {
        let mut st = ctx.tx.prepare_cached("SELECT id FROM job WHERE target = ?1 AND state = 'queued' ORDER BY seq")?;
        let ids = st.query_map([label], |r| r.get(0))?.collect::<rusqlite::Result<Vec<String>>>()?;
        ids
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

/// What the sweep would do to jobs now: (id, the end state, the reason).
pub(crate) fn due(ctx: &Ctx<'_>) -> OpResult<Vec<(String, JobState, &'static str)>> {
    let now = ctx.now;
    let mut out = Vec::new();
    // Running: no heartbeat for 6·H, or past twice the time limit. Both reads
    // are bounded by the running jobs (partial indexes), never by history.
    let mut stmt = ctx.tx.prepare_cached(
        "SELECT id, heartbeat_at, coalesce(run_started_at, started_at, submitted_at), time_limit_ms FROM job \
         INDEXED BY job_heartbeat WHERE state = 'running' ORDER BY seq",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, Option<i64>>(1)?, r.get::<_, i64>(2)?, r.get::<_, i64>(3)?))
    })?;
    for row in rows {
        let (id, heartbeat, run_start, limit) = row?;
        if heartbeat.unwrap_or(run_start) + cj::STALE_AFTER_MS <= now {
            out.push((id, JobState::TimedOut, cj::REASON_NO_HEARTBEAT));
        } else if run_start + 2 * limit <= now {
            out.push((id, JobState::TimedOut, cj::REASON_PAST_LIMIT));
        }
    }
    let mut stmt = ctx
        .tx
        .prepare_cached("SELECT id FROM job INDEXED BY job_queued_age WHERE state = 'queued' AND submitted_at <= ?1 ORDER BY submitted_at")?;
    for id in stmt.query_map([now - cj::QUEUED_MAX_AGE_MS], |r| r.get::<_, String>(0))? {
        out.push((id?, JobState::Cancelled, cj::REASON_NEVER_STARTED));
    }
    Ok(out)
}

/// The sweep's job step: (timed out, cancelled).
pub(crate) fn sweep(ctx: &mut Ctx<'_>) -> OpResult<(i64, i64)> {
    let (mut timed_out, mut cancelled) = (0, 0);
    for (id, state, reason) in due(ctx)? {
        let Some(j) = load(ctx, &id)? else { continue };
        if end_job(ctx, &j, state, cj::SERVER_ACTOR, Some(reason), None)? {
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
pub(crate) fn prune_jobs(tx: &rusqlite::Transaction<'_>, cutoff: Millis, max: usize) -> rusqlite::Result<usize> {
    let ids: Vec<String> = tx
        .prepare_cached("SELECT id FROM job WHERE ended_at IS NOT NULL AND ended_at < ?1 ORDER BY ended_at LIMIT ?2")?
        .query_map(params![cutoff, max as i64], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for id in &ids {
        tx.prepare_cached("DELETE FROM job_event WHERE job_id = ?1")?.execute([id])?;
        tx.prepare_cached("DELETE FROM job_submit WHERE job_id = ?1")?.execute([id])?;
        tx.prepare_cached("DELETE FROM job_watch WHERE job_id = ?1")?.execute([id])?;
        tx.prepare_cached("DELETE FROM job WHERE id = ?1")?.execute([id])?;
    }
    Ok(ids.len())
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
