//! One job's run in its worker thread: its process (or its chunks, one per
//! input), the read-back and verify steps, and sending its report.

use super::jobconf::{self, Plan};
use super::jobrun::{self, Ending};
use crate::transport::CallError;
use pcmail_core::job::{self as cj, CommandSpec, Job, JobResult, JobState, ReportArgs, StartArgs, VerifyOutcome};
use pcmail_core::protocol::Op;
use pcmail_core::{ErrorCode, Millis};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Sends one report; taken (or finally refused) → out of the queue.
pub(super) fn send_report(t: &dyn crate::transport::Transport, store: &mut pcmail_store::Store, r: &ReportArgs) {
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
pub(super) struct Work {
    pub(super) paths: pcmail_local::config::Paths,
    pub(super) config: pcmail_local::config::Config,
    pub(super) clock: fn() -> Millis,
    pub(super) job: Job,
    pub(super) spec: CommandSpec,
    pub(super) plan: Plan,
    pub(super) runner: String,
    pub(super) cancel: Arc<AtomicBool>,
    pub(super) running: Arc<Mutex<HashMap<String, Arc<AtomicBool>>>>,
}

impl Work {
    pub(super) fn run(self) {
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
        use super::chunks::{self, InputState, Todo};
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
