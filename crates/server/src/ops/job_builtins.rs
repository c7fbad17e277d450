//! The `@server` built-ins: read-only probes and maintenance, run inside the
//! submit that asks for them.

use super::job_state::{end_job, load, prune_jobs, record, visible_jobs};
use crate::ctx::{Ctx, OpResult};
use crate::store::p;
use pcmail_core::job::{self as cj, ArgValue, CommandSpec, JobResult, JobState, ListArgs};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// `_debug_jobs` lists at most this many.
const DEBUG_JOBS_MAX: usize = 100;

/// Runs a built-in inside the submit: queued → running → ok (or failed with
/// the reason), by `server`; `result.data` holds the answer.
pub(crate) fn run_builtin(
    ctx: &mut Ctx<'_>,
    id: &str,
    spec: &CommandSpec,
    args: &BTreeMap<String, ArgValue>,
) -> OpResult<()> {
    let now = ctx.now;
    ctx.tx
        .prepare_cached(
            "UPDATE job SET state = 'running', started_at = ?2, run_started_at = ?2, runner = 'server', heartbeat_at = ?2, runs = 1 WHERE id = ?1",
        )?
        .execute(p![id, now])?;
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
            if answer.mails.is_empty() {
                return Ok(Err(format!("no mail {id} that {} sent or received", ctx.pc)));
            }
            wire(&answer)
        }
        "_debug_alerts" => wire(&crate::sweep::list_alerts(ctx, true)?),
        "_debug_sweep_plan" => crate::sweep::plan(ctx)?,
        "_debug_jobs" => {
            let state = args.get("state").and_then(|v| JobState::parse(&v.to_arg_string()));
            let l = ListArgs { state, limit: DEBUG_JOBS_MAX, ..Default::default() };
            let mut counts = Map::new();
            let mut stmt = ctx.tx.prepare_cached("SELECT state, count(*) FROM job GROUP BY state ORDER BY state")?;
            for row in stmt.query_map(p![], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))? {
                let (s, n) = row?;
                counts.insert(s, json!(n));
            }
            json!({"counts": counts, "jobs": visible_jobs(ctx, &l)?})
        }
        "sweep" => wire(&crate::sweep::sweep(ctx)?),
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

/// An op's answer as a built-in's data.
fn wire<A: serde::Serialize>(a: &A) -> Value {
    serde_json::to_value(a).unwrap_or(Value::Null)
}

fn debug_roster(ctx: &Ctx<'_>) -> OpResult<Value> {
    let mut stmt = ctx.tx.prepare_cached(
        "SELECT p.number, p.label, p.hostname, p.last_poll_at, p.cred_hash IS NOT NULL, p.revoked_at, \
         e.hash, e.commands, e.allowed_submitters, e.checkouts, e.published_at \
         FROM pc p LEFT JOIN job_executor e ON e.pc = p.label ORDER BY p.number",
    )?;
    let rows = stmt.query_map(p![], |r| {
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
    let pcs = rows.collect::<crate::store::DbResult<Vec<_>>>()?;
    Ok(json!({"pcs": pcs, "requireCredentials": crate::auth::require_credentials(ctx.tx)?}))
}
