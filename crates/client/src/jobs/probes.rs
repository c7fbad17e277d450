//! The PC's built-in probes (`pcmail_core::job::pc_builtins`): read-only
//! views of this PC's store and registry, each list at most
//! `PC_PROBE_ITEMS_MAX` items. Session ids are cut to 8 characters and no
//! cwd is given: the whole id and the paths stay on the PC.

use crate::executor::Executor;
use crate::{Client, ClientError};
use pcmail_core::job::PC_PROBE_ITEMS_MAX;
use pcmail_core::Millis;
use pcmail_local::config::ServerConfig;
use pcmail_store::jobs::JobRun;
use pcmail_store::meta;
use serde_json::{json, Value};

fn prefix(id: &str) -> String {
    id.chars().take(8).collect()
}

pub(super) fn run(c: &mut Client, ex: &Executor, command: &str, now: Millis) -> Result<Value, ClientError> {
    match command {
        "_debug_pc" => pc(c, ex),
        "_debug_sessions" => sessions(c, now),
        "_debug_leases" => leases(c, now),
        "_debug_jobs" => jobs(c, ex),
        other => Err(ClientError::Invalid(format!("{other} is not a probe of this PC"))),
    }
}

fn pc(c: &mut Client, ex: &Executor) -> Result<Value, ClientError> {
    let kind = match &c.config.server {
        ServerConfig::Embedded { .. } => "embedded",
        ServerConfig::Http { .. } => "serve",
        ServerConfig::AppsScript { .. } => "apps_script",
    };
    let store = c.paths.store();
    let size = |p: std::path::PathBuf| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let mut wal = store.clone().into_os_string();
    wal.push("-wal");
    Ok(json!({
        "label": c.me(),
        "version": env!("CARGO_PKG_VERSION"),
        "server": kind,
        "poller": {
            "executor": true,
            "runningJobs": ex.running_ids().len(),
            "lastPollOkAt": c.store.meta_i64(meta::LAST_POLL_OK_AT)?,
            "lastPollAttemptAt": c.store.meta_i64(meta::LAST_POLL_ATTEMPT_AT)?,
            "lastPollError": c.store.meta_get(meta::LAST_POLL_ERROR)?,
            "consecutiveFailures": c.store.meta_i64(meta::CONSECUTIVE_FAILURES)?.unwrap_or(0),
        },
        "pendingMarks": c.store.pending_mark_count()?,
        "outbox": c.store.outbox_all()?.len(),
        "storeBytes": size(store.clone()) + size(wal.into()),
    }))
}

fn sessions(c: &mut Client, now: Millis) -> Result<Value, ClientError> {
    let names = c.store.names()?;
    let live = c.live_sessions(now)?;
    let total = live.len();
    let items: Vec<Value> = live
        .into_iter()
        .take(PC_PROBE_ITEMS_MAX)
        .map(|s| {
            let name = names.iter().find(|(_, sess)| *sess == s.session).map(|(n, _)| n.clone());
            json!({"session": prefix(&s.session), "name": name, "repo": s.repo, "branch": s.branch,
                   "idleMs": s.idle_ms, "leases": s.leases.len()})
        })
        .collect();
    Ok(json!({"sessions": items, "total": total}))
}

/// Also what a takeover elsewhere asks (`pcmail_core::lease::holder_runs_per_probe`):
/// whether each lease's process still runs, and which sessions do.
fn leases(c: &mut Client, now: Millis) -> Result<Value, ClientError> {
    use pcmail_core::lease::{probe_session, ProbeHeld};
    let cache = c.store.lease_cache()?;
    let total = cache.len();
    let items: Vec<Value> = cache
        .into_iter()
        .take(PC_PROBE_ITEMS_MAX)
        .map(|l| {
            json!({"resource": l.resource, "fence": l.fence, "mode": l.mode, "holderPc": l.holder_pc,
                   "holderSession": prefix(&l.holder_session), "holderName": l.holder_name,
                   "heartbeatAt": l.heartbeat_at, "stale": l.stale})
        })
        .collect();
    let mine = c.store.leases_mine()?;
    let held: Vec<ProbeHeld> = mine
        .iter()
        .take(PC_PROBE_ITEMS_MAX)
        .map(|l| ProbeHeld {
            resource: l.resource.clone(),
            session: probe_session(&l.session),
            confirmed: l.fence.is_some(),
            release_queued: l.release_queued_at.is_some(),
            fence: l.fence.filter(|f| *f > 0),
            process_running: l.pid.map(|pid| pcmail_local::process::ProcId { pid, start: l.pid_start }.alive()),
        })
        .collect();
    let live: Vec<String> =
        c.live_sessions(now)?.iter().take(PC_PROBE_ITEMS_MAX).map(|s| probe_session(&s.session)).collect();
    Ok(json!({"cache": items, "cacheTotal": total, "heldHere": held, "heldHereTotal": mine.len(),
              "liveSessions": live}))
}

fn jobs(c: &mut Client, ex: &Executor) -> Result<Value, ClientError> {
    let runs: Vec<JobRun> = c.store.job_runs()?;
    let running: Vec<Value> = runs
        .iter()
        .take(PC_PROBE_ITEMS_MAX)
        .map(|r| {
            json!({"jobId": r.job_id, "command": r.command, "subject": r.subject, "readOnly": r.read_only,
                        "startedAt": r.started_at, "inThisProcess": ex.running_ids().contains(&r.job_id)})
        })
        .collect();
    let reports = c.store.job_reports(PC_PROBE_ITEMS_MAX)?;
    let queued: Vec<Value> = reports
        .iter()
        .map(|q| {
            let state = serde_json::from_str::<Value>(&q.report).ok().and_then(|v| v.get("state").cloned());
            json!({"jobId": q.job_id, "state": state, "queuedAt": q.queued_at, "attempts": q.attempts})
        })
        .collect();
    Ok(json!({"running": running, "reportsQueued": queued}))
}
