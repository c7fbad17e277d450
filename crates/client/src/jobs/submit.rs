//! The submitter's side: submitting a job, its status, the list, cancelling
//! and waiting, and the jobs this PC's sessions submitted.

use crate::transport::CallError;
use crate::{Client, ClientError};
use pcmail_core::job::{self as cj, Job, Submitter};
use pcmail_core::protocol::Op;
use pcmail_core::{ErrorCode, Millis};
use pcmail_store::jobs::MyJob;
use serde_json::{Map, Value};
use std::time::{Duration, Instant};

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
