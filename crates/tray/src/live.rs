//! The two views read from the server rather than the store: Sessions (who
//! is alive on every PC: `pcmail who`) and Jobs (what this PC submitted and
//! what it runs: `pcmail job list`). Each asks through [`Remote`] (the same
//! `pcmail_api` functions as the CLI) when the window opens the view and at
//! each poll; when the server cannot be reached, the view says so and shows
//! the last answer as what it was then (`live: false`, `asOf`), never as live.

use crate::controller::{Controller, Result, TrayError};
use crate::poll::{Remote, RemoteFailure};
use pcmail_core::job::{Job, JobState};
use pcmail_core::sessions::{WhoAnswer, WhoSession};
use pcmail_core::Millis;
use pcmail_store::meta;
use serde::Serialize;

/// Characters of a job's output the Jobs view carries (its tail).
pub const OUTPUT_TAIL_CHARS: usize = 4_000;

/// Whether what a live view shows is the server's answer now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Freshness {
    /// The server answered now: the rows are live.
    pub live: bool,
    /// When the rows were the server's answer (this PC's clock); None: never.
    pub as_of: Option<Millis>,
    /// Why the server did not answer now: `unreachable` (offline),
    /// `unsupported`, … (the CLI's codes).
    pub error_code: Option<String>,
    pub error: Option<String>,
    pub now: Millis,
}

impl Freshness {
    fn of(failure: Option<&RemoteFailure>, as_of: Option<Millis>, now: Millis) -> Freshness {
        Freshness {
            live: failure.is_none(),
            as_of,
            error_code: failure.map(|f| f.code.clone()),
            error: failure.map(|f| f.message.clone()),
            now,
        }
    }
}

/// One live session in the Sessions view: `who`'s row (its fields at the
/// top level of the JSON the window reads) and whether it is this PC's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionView {
    #[serde(flatten)]
    pub who: WhoSession,
    /// A session of this PC.
    pub mine: bool,
}

/// A name without a live session, and who held it last.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IdleNameView {
    pub name: String,
    pub pc: String,
    pub since: Millis,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionsView {
    /// This PC's sessions first, then by PC, name, session.
    pub sessions: Vec<SessionView>,
    pub idle_names: Vec<IdleNameView>,
    #[serde(flatten)]
    pub freshness: Freshness,
}

/// One job in the Jobs view.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobView {
    pub id: String,
    /// The executor: a PC label or `@server`.
    pub target: String,
    pub command: String,
    /// The typed arguments as `name=value`, in name order (as `pcmail job run` takes them).
    pub args: Vec<String>,
    /// The CLI's names: queued, running, ok, failed, timed_out, cancelled.
    pub state: &'static str,
    /// `pc/pid` of the executor process, once it started.
    pub runner: Option<String>,
    /// `pc/name` (or `pc/` and the session's first 8 characters).
    pub submitter: String,
    /// This PC submitted it (or joined it).
    pub submitted_here: bool,
    /// This PC executes it.
    pub runs_here: bool,
    pub submitted_at: Millis,
    pub started_at: Option<Millis>,
    pub ended_at: Option<Millis>,
    /// The run's duration (the result's), or how long it has been running.
    pub duration_ms: Option<Millis>,
    pub exit: Option<i64>,
    /// The last [`OUTPUT_TAIL_CHARS`] characters of its output.
    pub output_tail: String,
    /// Output was cut (by the executor's 64 KiB or here).
    pub output_truncated: bool,
    pub artifacts: Vec<String>,
    /// Artifacts of an earlier run it answered with instead of running.
    pub reused: Vec<String>,
    pub reason: Option<String>,
    pub cancel_requested: bool,
    /// Cancel is offered: this PC submitted it and it is queued or running.
    pub can_cancel: bool,
    /// Submits joined onto it (deduped).
    pub joined: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobsView {
    pub jobs: Vec<JobView>,
    #[serde(flatten)]
    pub freshness: Freshness,
}

impl Controller {
    /// The Sessions view: asks the server (`Remote::who` = `pcmail who`).
    /// Holds no lock of its own: the app calls [`Self::sessions_from`] with
    /// an answer it got outside the controller's lock.
    pub fn sessions(&mut self, remote: &dyn Remote, now: Millis) -> SessionsView {
        self.sessions_from(remote.who(), now)
    }

    /// The Sessions view from `who`'s answer, or from the last answer when
    /// the server did not answer (then marked not live, as of its time).
    pub fn sessions_from(
        &mut self,
        answer: std::result::Result<WhoAnswer, RemoteFailure>,
        now: Millis,
    ) -> SessionsView {
        let failure = match answer {
            Ok(a) => {
                self.live.who = Some((a, now));
                None
            }
            Err(f) => Some(f),
        };
        let (who, as_of) = match &self.live.who {
            Some((a, at)) => (Some(a), Some(*at)),
            None => (None, None),
        };
        let me = self.pc().to_string();
        let mut sessions: Vec<SessionView> = who
            .map(|a| a.sessions.iter().map(|s| SessionView { mine: s.pc == me, who: s.clone() }).collect())
            .unwrap_or_default();
        sessions.sort_by(|a, b| {
            let (x, y) = (&a.who, &b.who);
            b.mine
                .cmp(&a.mine)
                .then_with(|| x.pc.cmp(&y.pc))
                .then_with(|| x.name.cmp(&y.name))
                .then_with(|| x.session.cmp(&y.session))
        });
        let idle_names = who
            .map(|a| {
                a.idle_names
                    .iter()
                    .map(|n| IdleNameView { name: n.name.clone(), pc: n.pc.clone(), since: n.since })
                    .collect()
            })
            .unwrap_or_default();
        SessionsView { sessions, idle_names, freshness: Freshness::of(failure.as_ref(), as_of, now) }
    }

    /// The Jobs view: asks the server (`Remote::jobs` = `pcmail job list`).
    pub fn jobs(&mut self, remote: &dyn Remote, now: Millis) -> Result<JobsView> {
        self.jobs_from(remote.jobs(), now)
    }

    /// The Jobs view from `job.list`'s answer, or from the last answer when
    /// the server did not answer (marked not live). Before any answer, the
    /// jobs this PC's store knows (submitted here, running here) stand in.
    pub fn jobs_from(&mut self, answer: std::result::Result<Vec<Job>, RemoteFailure>, now: Millis) -> Result<JobsView> {
        let failure = match answer {
            Ok(jobs) => {
                self.live.jobs = Some((jobs, now));
                None
            }
            Err(f) => Some(f),
        };
        let (jobs, as_of) = match &self.live.jobs {
            Some((j, at)) => (j.clone(), Some(*at)),
            None => (self.jobs_in_store()?, None),
        };
        let offset = self.store().meta_i64(meta::SERVER_OFFSET_MS)?.unwrap_or(0);
        let views = jobs.iter().map(|j| self.job_view(j, offset, now)).collect();
        Ok(JobsView { jobs: views, freshness: Freshness::of(failure.as_ref(), as_of, now) })
    }

    /// What the store knows of jobs without the server: those this PC's
    /// sessions submitted (as last answered) and those it runs now.
    fn jobs_in_store(&self) -> Result<Vec<Job>> {
        let mut out: Vec<Job> = vec![];
        for r in self.store().job_runs()? {
            if let Ok(mut j) = serde_json::from_str::<Job>(&r.job) {
                j.state = JobState::Running;
                j.runner = Some(r.runner.clone());
                j.started_at = j.started_at.or(Some(r.started_at));
                out.push(j);
            }
        }
        for m in self.store().jobs_mine(crate::remote::JOBS_LISTED)? {
            if out.iter().any(|j| j.id == m.job_id) {
                continue;
            }
            if let Some(j) = m.job.as_deref().and_then(|s| serde_json::from_str::<Job>(s).ok()) {
                out.push(j);
            }
        }
        out.sort_by(|a, b| b.submitted_at.cmp(&a.submitted_at).then_with(|| b.id.cmp(&a.id)));
        Ok(out)
    }

    fn job_view(&self, j: &Job, offset: Millis, now: Millis) -> JobView {
        let local = |t: Millis| t - offset;
        let submitted_here = j.submitter.pc == self.pc();
        let running = matches!(j.state, JobState::Queued | JobState::Running);
        let (exit, output_tail, output_truncated, artifacts, reused, ran_for) = match &j.result {
            Some(r) => {
                let (tail, cut) = tail_chars(&r.output, OUTPUT_TAIL_CHARS);
                (r.exit, tail, cut || r.truncated, r.artifacts.clone(), r.reused.clone(), Some(r.duration_ms))
            }
            None => (None, String::new(), false, vec![], vec![], None),
        };
        let started_at = j.started_at.map(local);
        let duration_ms = ran_for.or_else(|| match (j.state, started_at) {
            (JobState::Running, Some(s)) => Some((now - s).max(0)),
            _ => None,
        });
        JobView {
            id: j.id.clone(),
            target: j.target.clone(),
            command: j.command.clone(),
            args: j.args.iter().map(|(k, v)| format!("{k}={}", v.to_arg_string())).collect(),
            state: j.state.as_str(),
            runner: j.runner.clone(),
            submitter: match &j.submitter.name {
                Some(n) if !n.is_empty() => format!("{}/{n}", j.submitter.pc),
                _ => format!("{}/{}", j.submitter.pc, j.submitter.session.chars().take(8).collect::<String>()),
            },
            submitted_here,
            runs_here: j.target == self.pc(),
            submitted_at: local(j.submitted_at),
            started_at,
            ended_at: j.ended_at.map(local),
            duration_ms,
            exit,
            output_tail,
            output_truncated,
            artifacts,
            reused,
            reason: j.reason.clone(),
            cancel_requested: j.cancel_requested,
            can_cancel: submitted_here && running && !j.cancel_requested,
            joined: j.joined,
        }
    }

    /// Cancel from the Jobs view, for a queued or running job this PC
    /// submitted: `pcmail job cancel` (`Remote::job_cancel`). Anything else is
    /// refused here (the server would let the target cancel too; the view
    /// offers it to the submitter only).
    pub fn cancel_job(&mut self, remote: &dyn Remote, job_id: &str, now: Millis) -> Result<JobView> {
        self.check_cancel(job_id)?;
        let job = remote.job_cancel(job_id).map_err(|f| TrayError::Remote { code: f.code, message: f.message })?;
        self.after_cancel(job, now)
    }

    /// The refusal [`Self::cancel_job`] gives before asking the server.
    pub fn check_cancel(&self, job_id: &str) -> Result<()> {
        let known = match &self.live.jobs {
            Some((jobs, _)) => jobs.iter().find(|j| j.id == job_id).cloned(),
            None => self.jobs_in_store()?.into_iter().find(|j| j.id == job_id),
        };
        let j = known.ok_or_else(|| TrayError::Missing(format!("no job {job_id} is known on this PC")))?;
        if j.submitter.pc != self.pc() {
            return Err(TrayError::Remote {
                code: "forbidden".into(),
                message: format!("job {job_id} was submitted by {}, not this PC", j.submitter.pc),
            });
        }
        if j.state.is_ended() {
            return Err(TrayError::Remote {
                code: "ended".into(),
                message: format!("job {job_id} already ended {}", j.state.as_str()),
            });
        }
        Ok(())
    }

    /// The job the cancel answered, put in the last answer, as a view.
    pub fn after_cancel(&mut self, job: Job, now: Millis) -> Result<JobView> {
        if let Some((jobs, _)) = self.live.jobs.as_mut() {
            if let Some(slot) = jobs.iter_mut().find(|j| j.id == job.id) {
                *slot = job.clone();
            }
        }
        let offset = self.store().meta_i64(meta::SERVER_OFFSET_MS)?.unwrap_or(0);
        Ok(self.job_view(&job, offset, now))
    }
}

/// The last `max` characters of `s`, and whether it was cut.
fn tail_chars(s: &str, max: usize) -> (String, bool) {
    let n = s.chars().count();
    if n <= max {
        return (s.to_string(), false);
    }
    (s.chars().skip(n - max).collect(), true)
}
