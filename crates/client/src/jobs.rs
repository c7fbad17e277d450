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

use crate::transport::CallError;
use crate::{Client, ClientError};
use pcmail_core::job::{
    self as cj, ArgValue, CommandSpec, Job, JobResult, JobState, ReportArgs, StartArgs, Submitter, VerifyOutcome,
    Whitelist,
};
use pcmail_core::protocol::Op;
use pcmail_core::{ErrorCode, Millis};
use pcmail_local::jobconf::{self, JobsConfig, Plan};
use pcmail_local::jobrun::{self, Ending};
use pcmail_local::process::ProcId;
use pcmail_store::jobs::{JobRun, MyJob};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
/// How long a restarted executor waits for a keeper still ending a tree.
const KEEPER_SETTLE: Duration = Duration::from_secs(5);

use crate::executor::Executor;

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

fn this_process() -> ProcId {
    ProcId::of(std::process::id() as i64).unwrap_or(ProcId { pid: std::process::id() as i64, start: None })
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
    pub(crate) fn job_poll_arg(&mut self, now: Millis) -> Result<Option<cj::PollJob>, ClientError> {
        let executor = self.executor.clone();
        let mut arg = cj::PollJob::default();
        if let Some(ex) = &executor {
            self.reload_jobs_config(ex);
            self.recover_orphans(ex, now)?;
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
        let waiting = self.store.jobs_mine(500)?.iter().any(|j| j.ended_at.is_none());
        let says_something = arg.take || !arg.running.is_empty() || !arg.reports.is_empty() || waiting;
        Ok(says_something.then_some(arg))
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

/// Sends one report; taken (or finally refused) → out of the queue.
fn send_report(t: &dyn crate::transport::Transport, store: &mut pcmail_store::Store, r: &ReportArgs) {
    match t.call(&Op::JobReport(r.clone())) {
        Ok(v) => {
            // A report after the server closed the job (its sweep: no heartbeat)
            // leaves the job as it is; the real outcome stays in this PC's log.
            let kept = v.get("job").and_then(|j| j.get("state")).and_then(|s| s.as_str()).map(str::to_string);
            if let Some(kept) = kept.filter(|k| k != r.state.as_str()) {
                tracing::warn!(
                    "job {}: the server had already ended it {kept}; its outcome here was {} ({})",
                    r.job_id,
                    r.state.as_str(),
                    r.reason.clone().unwrap_or_default()
                );
            }
            let _ = store.job_reports_done(std::slice::from_ref(&r.job_id));
        }
        Err(CallError::Server(p)) if !p.code.is_transient() && p.code != ErrorCode::UnknownPc => {
            tracing::warn!("job report {} refused: {}", r.job_id, p.message);
            let _ = store.job_reports_done(std::slice::from_ref(&r.job_id));
        }
        Err(e) => {
            let _ = store.job_report_failed(&r.job_id, &e.to_string());
        }
    }
}

/// One job's run, in its worker thread.
struct Work {
    paths: pcmail_local::config::Paths,
    config: pcmail_local::config::Config,
    clock: fn() -> Millis,
    job: Job,
    spec: CommandSpec,
    plan: Plan,
    runner: String,
    cancel: Arc<AtomicBool>,
    running: Arc<Mutex<HashMap<String, Arc<AtomicBool>>>>,
}

impl Work {
    fn run(self) {
        let id = self.job.id.clone();
        let report = self.execute();
        // Its own store connection and transport: the poller may sit in a long poll.
        let now = (self.clock)();
        match pcmail_store::Store::open(&self.paths.store()) {
            Ok(mut store) => {
                let text = serde_json::to_string(&report).unwrap_or_default();
                match store.job_finish(&id, &text, now) {
                    // Recorded: the keepers' exit records have served.
                    Ok(()) => {
                        for step in ["run", "verify", "read-back"] {
                            jobrun::forget_exit_record(&jobrun::log_path(&self.paths.home, &id, step));
                        }
                    }
                    Err(e) => tracing::warn!("job {id}: cannot queue its report: {e}"),
                }
                if let Ok(t) = crate::make_transport(&self.paths, &self.config, self.clock) {
                    send_report(t.as_ref(), &mut store, &report);
                }
            }
            Err(e) => tracing::warn!("job {id}: cannot open the store: {e}"),
        }
        self.running.lock().map(|mut m| m.remove(&id)).ok();
    }

    fn execute(&self) -> ReportArgs {
        if let Some(dir) = self.plan.inputs.clone() {
            return self.execute_chunked(&dir);
        }
        let home = &self.paths.home;
        let log = jobrun::log_path(home, &self.job.id, "run");
        let env: Vec<(String, String)> = vec![
            ("PCMAIL_JOB_ID".into(), self.job.id.clone()),
            ("PCMAIL_JOB_TS".into(), self.job.submitted_at.to_string()),
            ("PCMAIL_JOB_SUBJECT".into(), self.plan.subject.clone()),
            ("PCMAIL_JOB_ARTIFACTS".into(), self.plan.artifacts.join("\n")),
        ];
        let limit = Duration::from_millis(self.spec.time_limit_ms.max(1) as u64);
        let store_path = self.paths.store();
        let id = self.job.id.clone();
        let mut on_start = |s: jobrun::Started| {
            if let Ok(mut st) = pcmail_store::Store::open(&store_path) {
                let _ = st.job_run_started(&id, s.pid, pcmail_local::process::start_time(s.pid));
            }
        };
        let t0 = Instant::now();
        let out = jobrun::run(&self.plan.argv, &self.plan.cwd, &env, &log, limit, &self.cancel, &mut on_start);
        let artifacts: Vec<String> =
            self.plan.artifacts.iter().filter(|a| self.plan.cwd.join(a).is_file()).cloned().collect();
        let mut result = JobResult {
            ran: out.ending != Ending::NotStarted,
            exit: match out.ending {
                Ending::Exited(c) => c.map(i64::from),
                _ => None,
            },
            duration_ms: out.duration_ms,
            output: out.output.clone(),
            truncated: out.truncated,
            artifacts,
            ..Default::default()
        };
        let (mut state, mut reason) = match out.ending {
            Ending::Exited(Some(0)) => (JobState::Ok, None),
            Ending::Exited(Some(c)) => (JobState::Failed, Some(format!("exit {c}"))),
            Ending::Exited(None) => (JobState::Failed, Some("ended by a signal".to_string())),
            Ending::TimedOut => (JobState::TimedOut, Some(format!("killed at its time limit ({} s)", limit.as_secs()))),
            Ending::Cancelled => (JobState::Cancelled, Some("cancelled on request".to_string())),
            Ending::NotStarted => (JobState::Failed, Some("could not start the command".to_string())),
        };
        if state == JobState::Ok {
            let left = limit.saturating_sub(t0.elapsed()).max(Duration::from_secs(5)).min(Duration::from_secs(300));
            // `{log}` in a step is the run's own output.
            let log_text = log.to_string_lossy().into_owned();
            let with_log = |t: &Vec<String>| -> Vec<String> {
                t.iter().map(|a| a.replace(jobconf::LOG_SLOT, &log_text)).collect()
            };
            if let Some(rb) = &self.plan.read_back {
                let o = jobrun::run_step(
                    &with_log(rb),
                    &self.plan.cwd,
                    &env,
                    &jobrun::log_path(home, &self.job.id, "read-back"),
                    left,
                );
                result.read_back = Some(o.output);
            }
            if let Some(v) = &self.plan.verify {
                let o = jobrun::run_step(
                    &with_log(v),
                    &self.plan.cwd,
                    &env,
                    &jobrun::log_path(home, &self.job.id, "verify"),
                    left,
                );
                let ok = o.ending == Ending::Exited(Some(0));
                result.verify = Some(VerifyOutcome {
                    ok,
                    exit: match o.ending {
                        Ending::Exited(c) => c.map(i64::from),
                        _ => None,
                    },
                    output: o.output,
                });
                if !ok {
                    state = JobState::Failed;
                    reason = Some("its verify step failed".into());
                }
            }
        }
        ReportArgs { job_id: self.job.id.clone(), runner: self.runner.clone(), state, result, reason }
    }
}

impl Work {
    /// A chunked job: one process per input still to do, until the run's
    /// start deadline (70 % of the time limit); then the next run (a new
    /// `job.start`, "run N") at once, until every input is done or dropped
    /// after N failures. Progress is kept per input fingerprint in the store,
    /// so a new or changed input never discards the others' results.
    fn execute_chunked(&self, dir: &str) -> ReportArgs {
        use pcmail_local::chunks::{self, InputState, Todo};
        let home = &self.paths.home;
        let log = jobrun::log_path(home, &self.job.id, "run");
        let limit = self.spec.time_limit_ms.max(1);
        let input_limit = Duration::from_millis(self.plan.input_limit_ms.clamp(1, limit) as u64);
        let (command, subject) = (self.job.command.clone(), self.plan.subject.clone());
        let mut store = match pcmail_store::Store::open(&self.paths.store()) {
            Ok(s) => s,
            Err(e) => {
                let result = JobResult { ran: false, output: e.to_string(), ..Default::default() };
                return ReportArgs {
                    job_id: self.job.id.clone(),
                    runner: self.runner.clone(),
                    state: JobState::Failed,
                    result,
                    reason: Some("cannot open the store".into()),
                };
            }
        };
        let state_of = |store: &pcmail_store::Store| -> Vec<InputState> {
            store
                .chunk_rows(&command, &subject)
                .unwrap_or_default()
                .into_iter()
                .map(|r| InputState {
                    fingerprint: r.fingerprint,
                    input: r.input,
                    ok: r.ok,
                    failures: r.failures,
                    last_failure_at: r.last_failure_at,
                })
                .collect()
        };
        let t0 = Instant::now();
        let mut run_started = (self.clock)();
        let mut runs = 1;
        let mut exits = vec![];
        let mut cancelled = false;
        let inputs = loop {
            let inputs = chunks::list_inputs(&self.plan.cwd.join(dir), dir);
            let states = state_of(&store);
            let todo: Vec<&(String, String)> = inputs
                .iter()
                .filter(|(_, fp)| {
                    chunks::todo(states.iter().find(|s| &s.fingerprint == fp), (self.clock)()) == Todo::Run
                })
                .collect();
            let deadline = chunks::start_deadline(run_started, limit);
            let mut left = false;
            for (n, (input, fp)) in todo.iter().enumerate() {
                // Never a new input past the deadline (each run does at least one: no spinning).
                if n > 0 && (self.clock)() >= deadline {
                    left = true;
                    break;
                }
                if self.cancel.load(Ordering::Relaxed) {
                    cancelled = true;
                    break;
                }
                let argv: Vec<String> = self.plan.argv.iter().map(|a| a.replace(jobconf::INPUT_SLOT, input)).collect();
                let env = vec![
                    ("PCMAIL_JOB_ID".to_string(), self.job.id.clone()),
                    ("PCMAIL_JOB_TS".to_string(), self.job.submitted_at.to_string()),
                    ("PCMAIL_JOB_SUBJECT".to_string(), subject.clone()),
                    ("PCMAIL_JOB_INPUT".to_string(), input.clone()),
                ];
                let store_path = self.paths.store();
                let id = self.job.id.clone();
                let mut on_start = |s: jobrun::Started| {
                    if let Ok(mut st) = pcmail_store::Store::open(&store_path) {
                        let _ = st.job_run_started(&id, s.pid, pcmail_local::process::start_time(s.pid));
                    }
                };
                let out = jobrun::run(&argv, &self.plan.cwd, &env, &log, input_limit, &self.cancel, &mut on_start);
                if out.ending == Ending::Cancelled {
                    cancelled = true;
                    break;
                }
                let ok = out.ending == Ending::Exited(Some(0));
                exits.push(out.ending);
                let prev = states.iter().find(|s| &s.fingerprint == fp);
                let st = chunks::record(prev, fp, input, ok, (self.clock)());
                let row = pcmail_store::jobs::ChunkRow {
                    fingerprint: st.fingerprint,
                    input: st.input,
                    ok: st.ok,
                    failures: st.failures,
                    last_failure_at: st.last_failure_at,
                };
                let _ = store.chunk_put(&command, &subject, &row, (self.clock)());
            }
            if cancelled || !left {
                break inputs;
            }
            // The next run, at once: acknowledged by the server first, like the first.
            runs += 1;
            run_started = (self.clock)();
            let start = StartArgs { job_id: self.job.id.clone(), runner: self.runner.clone(), started_at: run_started };
            let acknowledged = crate::make_transport(&self.paths, &self.config, self.clock)
                .map(|t| t.call(&Op::JobStart(start)).is_ok());
            if !matches!(acknowledged, Ok(true)) {
                break inputs;
            }
        };
        let counts = chunks::counts(&inputs, &state_of(&store), (self.clock)());
        let (output, truncated) = jobrun::tail(&log, jobrun::OUTPUT_MAX);
        let result = JobResult {
            ran: !exits.is_empty(),
            exit: None,
            duration_ms: t0.elapsed().as_millis() as i64,
            output,
            truncated,
            chunks: Some(counts),
            ..Default::default()
        };
        let (state, reason) = if cancelled {
            (JobState::Cancelled, Some("cancelled on request".to_string()))
        } else if counts.done == counts.total {
            (JobState::Ok, Some(format!("{} input(s) done in {runs} run(s)", counts.done)))
        } else {
            (
                JobState::Failed,
                Some(format!(
                    "{} of {} input(s) done in {runs} run(s); {} failing, {} dropped after {} failures (retried {} days after the last)",
                    counts.done,
                    counts.total,
                    counts.failed,
                    counts.skipped,
                    cj::CHUNK_FAILURES_MAX,
                    cj::CHUNK_FAILURE_EXPIRY_MS / 86_400_000
                )),
            )
        };
        ReportArgs { job_id: self.job.id.clone(), runner: self.runner.clone(), state, result, reason }
    }
}

// ---- the submitter's side ----

/// A submit as the CLI and the MCP tool make it.
#[derive(Debug, Clone)]
pub struct SubmitRequest {
    pub target: String,
    pub command: String,
    pub args: Map<String, Value>,
    pub force: bool,
    pub rerun_of: Option<String>,
    pub session: String,
    pub name: Option<String>,
}

impl Client {
    fn call_job_as<A: pcmail_core::answers::Answer>(&mut self, op: &Op) -> Result<A, ClientError> {
        let v = self.call_job(op)?;
        Ok(crate::transport::decode(op, v)?)
    }

    fn call_job(&mut self, op: &Op) -> Result<Value, ClientError> {
        match self.transport.call(op) {
            Err(CallError::Server(p)) if p.code == ErrorCode::UnknownPc => {
                self.register_self()?;
                Ok(self.transport.call(op)?)
            }
            other => Ok(other?),
        }
    }

    /// `job.submit`; the job is recorded for the hook (told once when it ends).
    pub fn job_submit(&mut self, req: &SubmitRequest) -> Result<cj::SubmitAnswer, ClientError> {
        let now = self.now();
        let target =
            if req.target == cj::SERVER_TARGET { req.target.clone() } else { self.resolve_recipient(&req.target)? };
        if target == "*" {
            return Err(ClientError::Invalid("a job has one target: a PC label or @server".into()));
        }
        let args = cj::SubmitArgs {
            job_id: cj::new_job_id(now, &mut rand::rng()),
            target: target.clone(),
            command: req.command.clone(),
            args: req.args.clone(),
            force: req.force,
            rerun_of: req.rerun_of.clone(),
            submitter: Submitter { pc: self.me().to_string(), session: req.session.clone(), name: req.name.clone() },
            dedup_window_ms: None,
        };
        cj::check_submitter(&args.submitter).map_err(|e| ClientError::Invalid(e.message))?;
        let a: cj::SubmitAnswer = self.call_job_as(&Op::JobSubmit(args))?;
        self.remember_job(&a.job, &req.session, now, true)?;
        Ok(a)
    }

    /// Records a job of `session` for the hook. `told`: the session has its
    /// end already (a probe answered at once, a `--wait` that saw the end).
    pub fn remember_job(&mut self, j: &Job, session: &str, now: Millis, told: bool) -> Result<(), ClientError> {
        let ended = j.state.is_ended();
        self.store.job_mine_record(&MyJob {
            job_id: j.id.clone(),
            session: session.to_string(),
            target: j.target.clone(),
            command: j.command.clone(),
            submitted_at: now,
            state: j.state.as_str().to_string(),
            job: serde_json::to_string(j).ok(),
            ended_at: ended.then_some(now),
            told_at: (ended && told).then_some(now),
        })?;
        Ok(())
    }

    pub fn job_status(&mut self, job_id: &str) -> Result<Job, ClientError> {
        let a: cj::JobAnswer = self.call_job_as(&Op::JobStatus { job_id: job_id.to_string() })?;
        Ok(a.job)
    }

    pub fn job_list(&mut self, args: cj::ListArgs) -> Result<Vec<Job>, ClientError> {
        let a: cj::ListAnswer = self.call_job_as(&Op::JobList(args))?;
        Ok(a.jobs)
    }

    pub fn job_cancel(&mut self, job_id: &str, session: &str, reason: Option<String>) -> Result<Job, ClientError> {
        let by = pcmail_core::rules::actor(self.me(), Some(session));
        let a: cj::JobAnswer =
            self.call_job_as(&Op::JobCancel(cj::CancelArgs { job_id: job_id.to_string(), by, reason }))?;
        Ok(a.job)
    }

    /// Asks until the job ended or `timeout` passed (then the job as it is, and false).
    pub fn job_wait(&mut self, job_id: &str, timeout: Duration) -> Result<(Job, bool), ClientError> {
        let start = Instant::now();
        let quota_bound = self.transport.quota_bound();
        let mut attempt = 0u32;
        loop {
            let job = match self.job_status(job_id) {
                Ok(j) => j,
                Err(ClientError::Call(e)) if e.is_transient() && start.elapsed() < timeout => {
                    std::thread::sleep(Duration::from_millis(500));
                    continue;
                }
                Err(e) => return Err(e),
            };
            if job.state.is_ended() {
                return Ok((job, true));
            }
            if start.elapsed() >= timeout {
                return Ok((job, false));
            }
            let step =
                if quota_bound { crate::backoff::wait_interval(true, attempt) } else { Duration::from_millis(50) };
            std::thread::sleep(step.min(timeout.saturating_sub(start.elapsed()).max(Duration::from_millis(1))));
            attempt += 1;
        }
    }
}

/// `{"ok": …}` of a whitelist for `pcmail job whitelist` and doctor.
pub fn describe_whitelist(jobs: &JobsConfig) -> Value {
    match whitelist_of(jobs) {
        Ok(Some(w)) => json!({"ok": true, "whitelist": w}),
        Ok(None) => json!({"ok": true, "whitelist": null}),
        Err(e) => json!({"ok": false, "error": e}),
    }
}

/// The PC's built-in probes (`pcmail_core::job::pc_builtins`): read-only
/// views of this PC's store and registry, each list at most
/// `PC_PROBE_ITEMS_MAX` items. Session ids are cut to 8 characters and no
/// cwd is given: the whole id and the paths stay on the PC.
mod probes {
    use super::{Executor, JobRun};
    use crate::{Client, ClientError};
    use pcmail_core::job::PC_PROBE_ITEMS_MAX;
    use pcmail_core::Millis;
    use pcmail_local::config::ServerConfig;
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
}
