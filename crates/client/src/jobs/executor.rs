//! The executor's part of the poll cycle: publishing the whitelist, taking
//! an offered job (checked again by core's rules, its artifacts looked for,
//! `job.start` acknowledged) into a worker, the heartbeat and the queued
//! reports, and the runs a stopped executor left behind.

use super::jobconf::JobsRules;
use super::jobrun;
use super::work::{send_report, Work};
use super::{probes, whitelist_of, WHITELIST_HASH};
use super::{
    REASON_ENDED_BY_SUCCESSOR, REASON_EXECUTOR_GONE, REASON_KILLED_THEN_GONE, REASON_NOT_STARTED,
    REASON_OUTCOME_UNKNOWN,
};
use crate::executor::Executor;
use crate::transport::CallError;
use crate::{Client, ClientError};
use pcmail_core::job::{self as cj, ArgValue, Job, JobResult, JobState, ReportArgs, StartArgs, VerifyOutcome};
use pcmail_core::protocol::Op;
use pcmail_core::{ErrorCode, Millis};
use pcmail_local::process::ProcId;
use pcmail_store::jobs::JobRun;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a restarted executor waits for a keeper still ending a tree.
const KEEPER_SETTLE: Duration = Duration::from_secs(5);

/// Why an offered job is not run: reported `failed` before running.
fn refusal(reason: &str, detail: String) -> (JobState, JobResult, String) {
    let result = JobResult { ran: false, output: detail.clone(), ..Default::default() };
    (JobState::Failed, result, format!("{reason}: {detail}"))
}

fn args_map(job: &Job) -> Map<String, Value> {
    job.args.iter().map(|(k, v)| (k.clone(), serde_json::to_value(v).unwrap_or(Value::Null))).collect()
}

fn args_json(args: &BTreeMap<String, ArgValue>) -> BTreeMap<String, Value> {
    args.iter().map(|(k, v)| (k.clone(), serde_json::to_value(v).unwrap_or(Value::Null))).collect()
}

/// The runner name a job carries: `<pc>/<pid>` of the executor process.
fn runner_of(me: &str) -> String {
    format!("{me}/{}", std::process::id())
}

/// This process as its runs record their owner. Read from `/proc` once: a
/// process's id and start time never change, and the poller asked at every
/// cycle.
fn this_process() -> ProcId {
    static ME: std::sync::OnceLock<ProcId> = std::sync::OnceLock::new();
    *ME.get_or_init(|| {
        ProcId::of(std::process::id() as i64).unwrap_or(ProcId { pid: std::process::id() as i64, start: None })
    })
}

impl Client {
    /// Makes this client an executor: the daemon and the tray's poller (a
    /// one-shot `pcmail sync` never takes jobs: it would exit mid-run).
    pub fn enable_executor(&mut self) {
        if self.executor.is_none() {
            self.executor = Some(Executor::default());
        }
    }

    /// The poll's `job` argument, or None when this PC has nothing to say
    /// about jobs (a server without the feature then never sees one).
    pub(crate) fn job_poll_arg(&mut self) -> Result<Option<cj::PollJob>, ClientError> {
        let executor = self.executor.clone();
        let mut arg = cj::PollJob::default();
        if let Some(ex) = &executor {
            match whitelist_of(&self.config.jobs) {
                Ok(Some(w)) => {
                    arg.take = true;
                    let known = self.store.meta_get(WHITELIST_HASH)?;
                    if known.as_deref() != Some(w.hash.as_str()) {
                        arg.whitelist = Some(Ok(w));
                    }
                }
                Ok(None) => {}
                Err(e) => tracing::warn!("jobs are not taken: {e}"),
            }
            arg.running = ex.running_ids();
        }
        for q in self.store.job_reports(cj::POLL_ITEMS_MAX)? {
            if let Ok(r) = serde_json::from_str::<ReportArgs>(&q.report) {
                arg.reports.push(Ok(r));
            }
        }
        let waiting = self.store.jobs_mine_waiting()?;
        let says_something = arg.take || !arg.running.is_empty() || !arg.reports.is_empty() || waiting;
        Ok(says_something.then_some(arg))
    }

    /// Before a cycle's first poll, on the PC that executes jobs: the
    /// `[jobs]` rules again when config.toml changed ...
    pub(crate) fn job_config_reload(&mut self) {
        if let Some(ex) = self.executor.clone() {
            self.reload_jobs_config(&ex);
        }
    }

    /// ... and, when the store holds runs, those a gone executor left,
    /// reported (which sends the reports: never inside a transaction of
    /// the store).
    pub(crate) fn job_recover_orphans(&mut self, now: Millis) -> Result<(), ClientError> {
        if let Some(ex) = self.executor.clone() {
            self.recover_orphans(&ex, now)?;
        }
        Ok(())
    }

    /// Applies the poll's `job` answer: the whitelist hash, reports taken,
    /// cancels, jobs of this PC's sessions that ended, and offered jobs.
    pub(crate) fn apply_job_answer(
        &mut self,
        answer: Option<cj::PollJobAnswer>,
        sent: Option<&cj::PollJob>,
        now: Millis,
    ) -> Result<(), ClientError> {
        let Some(a) = answer else {
            return Ok(());
        };
        if let Some(h) = &a.whitelist_hash {
            self.store.meta_set(WHITELIST_HASH, h)?;
        }
        // A report answered (ok or finally refused) leaves the queue; an
        // item error (bad shape) too, so it never blocks the others.
        let mut done: Vec<String> = a
            .reported
            .iter()
            .filter(|r| r.ok || r.code.as_deref().is_some_and(|c| c != "unavailable"))
            .map(|r| r.job_id.clone())
            .collect();
        if let Some(s) = sent {
            for e in a.errors.iter().filter(|e| e.list == "reports") {
                if let Some(Ok(r)) = s.reports.get(e.index) {
                    tracing::warn!("job report {} refused: {} {}", r.job_id, e.code, e.message);
                    done.push(r.job_id.clone());
                }
            }
        }
        self.store.job_reports_done(&done)?;
        if let Some(ex) = &self.executor {
            if let Ok(m) = ex.running.lock() {
                for id in &a.cancel {
                    if let Some(flag) = m.get(id) {
                        flag.store(true, Ordering::Relaxed);
                    }
                }
            }
        }
        for j in &a.finished {
            let text = serde_json::to_string(j).unwrap_or_default();
            self.store.job_mine_finished(&j.id, &j.target, &j.command, j.state.as_str(), &text, now)?;
        }
        if let Some(ex) = self.executor.clone() {
            ex.held_back.store(false, Ordering::Relaxed);
            for job in a.offered {
                if let Err(e) = self.take_offered(&ex, job, now) {
                    tracing::warn!("offered job: {e}");
                }
            }
        }
        Ok(())
    }

    fn take_offered(&mut self, ex: &Executor, job: Job, now: Millis) -> Result<(), ClientError> {
        if ex.is_running(&job.id) || self.store.job_run(&job.id)?.is_some() {
            return Ok(());
        }
        if self.store.job_reports(cj::POLL_ITEMS_MAX)?.iter().any(|q| q.job_id == job.id) {
            return Ok(());
        }
        let runner = runner_of(self.me());
        let jobs = self.config.jobs.clone();
        // The same rules the server applied at submit, with this PC's own whitelist.
        let checked = (|| {
            let wl = whitelist_of(&jobs).map_err(|e| refusal(cj::REFUSED_NOT_WHITELISTED, e))?;
            let spec =
                wl.as_ref().and_then(|w| w.commands.iter().find(|c| c.name == job.command).cloned()).ok_or_else(
                    || refusal(cj::REFUSED_NOT_WHITELISTED, format!("{} is not in this PC's whitelist", job.command)),
                )?;
            let args =
                cj::check_args(&spec, &args_map(&job)).map_err(|e| refusal(cj::REFUSED_BAD_ARGUMENT, e.message))?;
            let creds = job.credentials_required.unwrap_or(false);
            if !cj::submitter_allowed(jobs.allowed_submitters.as_deref(), &job.submitter.pc, creds) {
                return Err(refusal(
                    cj::REFUSED_SUBMITTER_NOT_ALLOWED,
                    format!("{} may not submit jobs to this PC ([jobs] allowed_submitters)", job.submitter.pc),
                ));
            }
            // A built-in probe has no argv: it runs in this process.
            if cj::pc_builtin(&job.command).is_some() {
                return Ok((spec, None));
            }
            let plan = jobs
                .plan(&job.command, &args_json(&args), &job.id, job.submitted_at)
                .map_err(|e| refusal(cj::REFUSED_BAD_ARGUMENT, e.to_string()))?;
            Ok((spec, Some(plan)))
        })();
        let (spec, plan) = match checked {
            Ok((spec, Some(plan))) => (spec, plan),
            Ok((_, None)) => return self.run_probe(ex, job, &runner, now),
            Err((state, result, reason)) => {
                return self.queue_report(&job.id, &runner, state, result, Some(reason), now)
            }
        };
        // Heavy work holds its subject: a second job on it waits (offered again).
        if !spec.read_only && !plan.subject.is_empty() {
            let busy = self.store.job_runs()?.iter().any(|r| !r.read_only && r.subject == plan.subject);
            if busy {
                ex.held_back.store(true, Ordering::Relaxed);
                return Ok(());
            }
        }
        // Already made: answered with what exists instead of running again.
        if !spec.read_only && !job.force {
            if let Some(reused) = plan.already_made(now) {
                let result = JobResult { ran: false, reused: reused.clone(), ..Default::default() };
                return match &job.rerun_of {
                    Some(prev) => self.queue_report(
                        &job.id,
                        &runner,
                        JobState::Failed,
                        result,
                        Some(format!(
                            "not run again: {prev} left its artifacts: {} (pass --force to run anyway)",
                            reused.join(", ")
                        )),
                        now,
                    ),
                    None => self.queue_report(
                        &job.id,
                        &runner,
                        JobState::Ok,
                        result,
                        Some(format!("reused: {}", reused.join(", "))),
                        now,
                    ),
                };
            }
        }
        // Written down before the start, so a crash after it is found.
        let owner = this_process();
        let cancel = Arc::new(AtomicBool::new(job.cancel_requested));
        ex.running.lock().map(|mut m| m.insert(job.id.clone(), cancel.clone())).ok();
        self.store.job_run_put(&JobRun {
            job_id: job.id.clone(),
            runner: runner.clone(),
            command: job.command.clone(),
            subject: plan.subject.clone(),
            read_only: spec.read_only,
            job: serde_json::to_string(&job).unwrap_or_default(),
            owner_pid: owner.pid,
            owner_start: owner.start,
            pid: None,
            pid_start: None,
            started_at: now,
        })?;
        let start = StartArgs { job_id: job.id.clone(), runner: runner.clone(), started_at: now };
        match self.transport.call(&Op::JobStart(start)) {
            Ok(_) => {}
            Err(e) => {
                // Not acknowledged: nothing runs (a conflict: cancelled or another runner;
                // unreachable: it is offered again).
                ex.running.lock().map(|mut m| m.remove(&job.id)).ok();
                self.store.job_run_remove(&job.id)?;
                return match e {
                    CallError::Server(p) if p.code == ErrorCode::Conflict => Ok(()),
                    other => Err(other.into()),
                };
            }
        }
        let work = Work {
            paths: self.paths.clone(),
            config: self.config.clone(),
            clock: self.clock,
            job,
            spec,
            plan,
            runner,
            cancel,
            running: ex.running.clone(),
        };
        let h = std::thread::Builder::new()
            .name("pcmail-job".into())
            .spawn(move || work.run())
            .map_err(|e| ClientError::Invalid(e.to_string()))?;
        if let Ok(mut w) = ex.workers.lock() {
            w.retain(|h| !h.is_finished());
            w.push(h);
        }
        Ok(())
    }

    /// A built-in probe (`_debug_pc` …): started like any job (it runs only
    /// once the server acknowledged `job.start`), answered from this process
    /// at once (no command, no shell), its data bounded.
    fn run_probe(&mut self, ex: &Executor, job: Job, runner: &str, now: Millis) -> Result<(), ClientError> {
        let start = StartArgs { job_id: job.id.clone(), runner: runner.to_string(), started_at: now };
        match self.transport.call(&Op::JobStart(start)) {
            Ok(_) => {}
            Err(CallError::Server(p)) if p.code == ErrorCode::Conflict => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        let began = Instant::now();
        let (state, data, reason) = match probes::run(self, ex, &job.command, now) {
            Ok(data) => (JobState::Ok, data, None),
            Err(e) => (JobState::Failed, json!({"error": e.to_string()}), Some(format!("probe {}: {e}", job.command))),
        };
        let text = serde_json::to_string_pretty(&data).unwrap_or_default();
        let (output, truncated) = cj::cap_output(&text);
        let result = JobResult {
            ran: true,
            exit: Some(if state == JobState::Ok { 0 } else { 1 }),
            duration_ms: began.elapsed().as_millis() as Millis,
            output,
            truncated,
            data: Some(data),
            ..Default::default()
        };
        self.queue_report(&job.id, runner, state, result, reason, now)
    }

    /// Queues a report and tries to send it at once.
    fn queue_report(
        &mut self,
        job_id: &str,
        runner: &str,
        state: JobState,
        result: JobResult,
        reason: Option<String>,
        now: Millis,
    ) -> Result<(), ClientError> {
        // The reason may quote a process's own words: cleaned to what the
        // servers take (the one check, `check_report`), so the report is never refused for its text.
        let reason = reason.map(|r| pcmail_core::rules::clean_reason(&r));
        let r = ReportArgs { job_id: job_id.to_string(), runner: runner.to_string(), state, result, reason };
        if let Err(e) = cj::check_report(&r) {
            tracing::warn!("job report {job_id} would be refused ({}): queued for the record", e.message);
        }
        self.store.job_finish(job_id, &serde_json::to_string(&r).unwrap_or_default(), now)?;
        send_report(self.transport.as_ref(), &mut self.store, &r);
        Ok(())
    }

    /// Reads `[jobs]` again when config.toml changed (only that section: the
    /// rest of a running daemon's config stays as it started).
    fn reload_jobs_config(&mut self, ex: &Executor) {
        let mtime = std::fs::metadata(self.paths.config()).and_then(|m| m.modified()).ok();
        let Ok(mut seen) = ex.config_mtime.lock() else { return };
        if *seen == mtime {
            return;
        }
        match pcmail_local::config::Config::load(&self.paths) {
            Ok(c) => {
                self.config.jobs = c.jobs;
                *seen = mtime;
            }
            Err(e) => tracing::warn!("[jobs] not reloaded: {e}"),
        }
    }

    /// Runs left in the store by an executor that is gone (killed, or this
    /// very process before an exec restart): each is reported with what is
    /// known of its end (`orphan_outcome`), and what still runs of it is killed.
    fn recover_orphans(&mut self, ex: &Executor, now: Millis) -> Result<(), ClientError> {
        let me = this_process();
        for r in self.store.job_runs()? {
            let owner = ProcId { pid: r.owner_pid, start: r.owner_start };
            let mine = owner.pid == me.pid && (owner.start == me.start || owner.start.is_none());
            let orphan = if mine { !ex.is_running(&r.job_id) } else { !owner.alive() };
            if !orphan {
                continue;
            }
            let (state, result, reason) = self.orphan_outcome(&r, now);
            self.queue_report(&r.job_id, &r.runner, state, result, Some(reason), now)?;
            for step in ["run", "verify", "read-back"] {
                jobrun::forget_exit_record(&jobrun::log_path(&self.paths.home, &r.job_id, step));
            }
        }
        Ok(())
    }

    /// What is known of the end of a run whose executor is gone. Its keeper
    /// (Linux) wrote an exit record when the run ended: a leader that exited
    /// by itself gives the real outcome (a verify step counts as in a live
    /// run); a tree ended with the executor is `timed_out` saying so. With
    /// no record, a leader that still runs is killed now; one that is gone
    /// ended in a way nobody saw: "outcome unknown".
    fn orphan_outcome(&self, r: &JobRun, now: Millis) -> (JobState, JobResult, String) {
        use jobrun::ExitCause;
        let home = &self.paths.home;
        let log = jobrun::log_path(home, &r.job_id, "run");
        let record = jobrun::settled_exit_record(&log, KEEPER_SETTLE);
        let killed = record.is_none() && r.pid.is_some_and(|pid| jobrun::kill_orphan(pid, r.pid_start));
        let (output, truncated) = jobrun::tail(&log, jobrun::OUTPUT_MAX);
        let mut result = JobResult {
            ran: r.pid.is_some() || record.is_some(),
            output,
            truncated,
            duration_ms: (now - r.started_at).max(0),
            ..Default::default()
        };
        let unknown = |why: &str| format!("{REASON_OUTCOME_UNKNOWN}{why}");
        let Some(rec) = record else {
            return match (killed, r.pid) {
                (true, _) => (JobState::TimedOut, result, REASON_ENDED_BY_SUCCESSOR.to_string()),
                (false, None) => (JobState::TimedOut, result, REASON_NOT_STARTED.to_string()),
                (false, Some(_)) => (JobState::TimedOut, result, unknown("")),
            };
        };
        result.duration_ms = (rec.ended_at_ms - r.started_at).max(0);
        result.exit = rec.code.map(i64::from);
        match rec.cause {
            ExitCause::ExecutorGone => return (JobState::TimedOut, result, REASON_EXECUTOR_GONE.to_string()),
            ExitCause::Killed => return (JobState::TimedOut, result, REASON_KILLED_THEN_GONE.to_string()),
            ExitCause::Exited => {}
        }
        let late = "reported by the restarted executor from the run's exit record";
        // The plan tells whether a verify step was due and where the artifacts are.
        let plan = serde_json::from_str::<Job>(&r.job)
            .ok()
            .and_then(|job| self.config.jobs.plan(&job.command, &args_json(&job.args), &job.id, job.submitted_at).ok());
        if let Some(plan) = &plan {
            result.artifacts = plan.artifacts.iter().filter(|a| plan.cwd.join(a).is_file()).cloned().collect();
            if plan.inputs.is_some() {
                return (
                    JobState::TimedOut,
                    result,
                    "the executor stopped during a chunked job: the inputs done are kept, a rerun does the rest"
                        .to_string(),
                );
            }
        }
        match rec.code {
            Some(0) => {}
            Some(c) => return (JobState::Failed, result, format!("exit {c} ({late})")),
            None => {
                let sig = rec.signal.map(|s| format!(" {s}")).unwrap_or_default();
                return (JobState::Failed, result, format!("ended by signal{sig} ({late})"));
            }
        }
        let Some(plan) = plan else {
            return (JobState::TimedOut, result, unknown(": the run exited 0, but its command is no longer configured here, so its verify step cannot be checked"));
        };
        if plan.read_back.is_some() {
            let rb = jobrun::log_path(home, &r.job_id, "read-back");
            if jobrun::read_exit_record(&rb).is_some() {
                result.read_back = Some(jobrun::tail(&rb, jobrun::OUTPUT_MAX).0);
            }
        }
        if plan.verify.is_some() {
            let v = jobrun::log_path(home, &r.job_id, "verify");
            let Some(vrec) = jobrun::settled_exit_record(&v, KEEPER_SETTLE).filter(|x| x.cause == ExitCause::Exited)
            else {
                return (JobState::TimedOut, result, unknown(": the run exited 0, its verify step did not finish"));
            };
            let ok = vrec.code == Some(0);
            result.verify = Some(VerifyOutcome {
                ok,
                exit: vrec.code.map(i64::from),
                output: jobrun::tail(&v, jobrun::OUTPUT_MAX).0,
            });
            if !ok {
                return (JobState::Failed, result, format!("its verify step failed ({late})"));
            }
        }
        (JobState::Ok, result, format!("exit 0 ({late})"))
    }

    /// While this PC runs jobs: a poll at least every heartbeat period, and
    /// a short pause (no long poll) while offered jobs wait for their subject.
    pub fn job_pause(&self, pause: Duration) -> Duration {
        match &self.executor {
            Some(ex) if ex.held_back() => pause.clamp(Duration::from_millis(500), Duration::from_secs(2)),
            Some(ex) if !ex.running_ids().is_empty() => pause.min(Duration::from_millis(cj::HEARTBEAT_MS as u64)),
            _ => pause,
        }
    }

    /// The long poll's wait, shortened while offered jobs are held back.
    pub(crate) fn job_wait_ms(&self, wait_ms: i64) -> i64 {
        match &self.executor {
            Some(ex) if ex.held_back() => 0,
            Some(ex) if !ex.running_ids().is_empty() => wait_ms.min(cj::HEARTBEAT_MS / 2),
            _ => wait_ms,
        }
    }
}
