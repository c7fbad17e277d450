//! What the server's clock has already decided, whether or not a sweep ran.
//!
//! Three rules move a row by time alone: mail past its expiry becomes
//! `expired`, a heartbeat lease silent for 6·H becomes `stale` (a TTL lease
//! past its end `expired`), and a running job silent for 6·H (or past twice
//! its time limit) becomes `timed_out`, a queued job never started for 7 days
//! `cancelled`. Each rule is one function here, given the stored row and `now`,
//! answering the state a reader sees and the moment the rule fired. The sweep
//! writes exactly that (same state, same moment), every write op brings the
//! rows it may touch up to `now` first, and every read op shows the stored row
//! through these functions, so no answer depends on when a sweep last ran
//! (the embedded server has no timer: it sweeps only when something polls).

use crate::job::{self, Job, JobState};
use crate::lease::{self, LeaseState};
use crate::{Mail, Millis, State, TimelineEntry};

/// What a time rule decided: the state, the moment it took effect, and why
/// (the reason jobs record; None for mail and leases).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Due<S> {
    pub state: S,
    pub at: Millis,
    pub reason: Option<&'static str>,
}

/// Who the server writes in a timeline for a time rule.
pub const SERVER_ACTOR: &str = "server";

/// Whether a poll at `now` records its time over the recorded one: when none
/// is recorded, when it is `POLL_RECORD_STEP_MS` old, or when it lies ahead of
/// the clock (the clock was set back). Otherwise a caught-up poll writes nothing.
pub fn poll_record_due(recorded: Option<Millis>, now: Millis) -> bool {
    record_due(recorded, now, crate::model::limits::POLL_RECORD_STEP_MS)
}

/// The rule of both: none recorded, one `step` old, or one ahead of the clock.
fn record_due(recorded: Option<Millis>, now: Millis, step: Millis) -> bool {
    recorded.is_none_or(|t| now - t >= step || t > now)
}

/// Whether a session's prompt at `now` records its time over the recorded
/// one: the poll's rule with `PROMPT_RECORD_STEP_MS` (none recorded, a step
/// old, or ahead of the clock).
pub fn prompt_record_due(recorded: Option<Millis>, now: Millis) -> bool {
    record_due(recorded, now, crate::model::limits::PROMPT_RECORD_STEP_MS)
}

/// The oldest recorded poll time at which a PC is still not silent for more
/// than `window` at `now`: a recorded time before it means silent. The step
/// is added because the recorded time may lag the PC's last poll by up to it.
pub fn pc_silent_before(now: Millis, window: Millis) -> Millis {
    now - window - crate::model::limits::POLL_RECORD_STEP_MS
}

/// Whether a PC whose recorded poll time is `recorded` has been silent for
/// more than `window` at `now` (a PC that never polled has not: it has no
/// silence to speak of; callers that need a live PC check `None` themselves).
pub fn pc_silent(recorded: Millis, now: Millis, window: Millis) -> bool {
    recorded < pc_silent_before(now, window)
}

/// Mail: `expired` at its `expiresAt` once `now` reaches it, unless it is
/// already final (done, failed, expired).
pub fn mail(state: State, expires_at: Option<Millis>, now: Millis) -> Option<Due<State>> {
    let at = expires_at?;
    if at <= now && state.advance(State::Expired).is_some() {
        Some(Due { state: State::Expired, at, reason: None })
    } else {
        None
    }
}

/// A mail as a reader sees it at `now`: the expiry the sweep would have
/// written, with its timeline entry (by `server`, at the expiry, never before
/// the previous entry), when no sweep has written it yet.
pub fn mail_as_read(m: &mut Mail, now: Millis) {
    let Some(d) = mail(m.state, m.expires_at, now) else { return };
    let last = m.timeline.last().map_or(d.at, |t| t.at);
    m.state = d.state;
    m.timeline.push(TimelineEntry { state: d.state, at: d.at.max(last), by: SERVER_ACTOR.into(), note: None });
}

/// A lease: a heartbeat lease held and silent for 6·H is `stale` from
/// `heartbeat_at + 6·H`; a TTL lease (held or stale) past its end is `expired`
/// at its end. Other states never move by time.
pub fn lease(
    state: LeaseState,
    heartbeat_at: Millis,
    ttl_expires_at: Option<Millis>,
    now: Millis,
) -> Option<Due<LeaseState>> {
    match (state, ttl_expires_at) {
        (LeaseState::Held, None) if heartbeat_at + lease::STALE_AFTER_MS <= now => {
            Some(Due { state: LeaseState::Stale, at: heartbeat_at + lease::STALE_AFTER_MS, reason: None })
        }
        (LeaseState::Held | LeaseState::Stale, Some(end)) if end <= now => {
            Some(Due { state: LeaseState::Expired, at: end, reason: None })
        }
        _ => None,
    }
}

/// The start of a job's current run (the first run's start, else its submit).
pub fn job_run_start(j: &Job) -> Millis {
    j.run_started_at.or(j.started_at).unwrap_or(j.submitted_at)
}

/// A job: running without a heartbeat for 6·H is `timed_out` at the last
/// heartbeat (or the run's start) + 6·H; running past twice its time limit is
/// `timed_out` at that moment; queued and never started for 7 days is
/// `cancelled`. A running job's first deadline wins.
pub fn job(
    state: JobState,
    heartbeat_at: Option<Millis>,
    run_start: Millis,
    time_limit_ms: Millis,
    submitted_at: Millis,
    now: Millis,
) -> Option<Due<JobState>> {
    match state {
        JobState::Running => {
            let silent = heartbeat_at.unwrap_or(run_start) + job::STALE_AFTER_MS;
            let past = run_start + 2 * time_limit_ms;
            let (at, reason) =
                if silent <= past { (silent, job::REASON_NO_HEARTBEAT) } else { (past, job::REASON_PAST_LIMIT) };
            (at <= now).then_some(Due { state: JobState::TimedOut, at, reason: Some(reason) })
        }
        JobState::Queued => {
            let at = submitted_at + job::QUEUED_MAX_AGE_MS;
            (at <= now).then_some(Due { state: JobState::Cancelled, at, reason: Some(job::REASON_NEVER_STARTED) })
        }
        _ => None,
    }
}

/// `job` for a wire job.
pub fn job_of(j: &Job, now: Millis) -> Option<Due<JobState>> {
    job(j.state, j.heartbeat_at, job_run_start(j), j.time_limit_ms, j.submitted_at, now)
}

/// A job as a reader sees it at `now`: the end the sweep would have written
/// (state, end time, reason, and the timeline entry when the timeline is
/// shown), when no sweep has written it yet. `last_at` is the time of the
/// job's last timeline entry: the end is never recorded before it.
pub fn job_as_read(j: &mut Job, last_at: Millis, now: Millis) {
    let Some(d) = job_of(j, now) else { return };
    let at = d.at.max(last_at);
    j.state = d.state;
    j.ended_at = Some(at);
    j.reason = d.reason.map(str::to_string);
    if let Some(t) = &mut j.timeline {
        t.push(job::TimelineEntry { at, state: d.state, by: job::SERVER_ACTOR.into(), reason: j.reason.clone() });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_prompt_records_its_time_a_step_after_the_last_or_when_the_clock_went_back() {
        let step = crate::model::limits::PROMPT_RECORD_STEP_MS;
        assert!(prompt_record_due(None, 5), "never recorded");
        assert!(!prompt_record_due(Some(1_000), 1_000 + step - 1), "within the step: nothing to write");
        assert!(prompt_record_due(Some(1_000), 1_000 + step), "a step old");
        assert!(prompt_record_due(Some(9_000), 1_000), "recorded ahead of the clock");
    }

    #[test]
    fn mail_expires_at_its_expiry_and_never_over_a_final_state() {
        assert_eq!(mail(State::Delivered, Some(100), 99), None);
        assert_eq!(mail(State::Delivered, Some(100), 100), Some(Due { state: State::Expired, at: 100, reason: None }));
        assert_eq!(mail(State::New, Some(100), 5_000).map(|d| d.at), Some(100), "at the expiry, not at the read");
        assert_eq!(mail(State::Done, Some(100), 5_000), None);
        assert_eq!(mail(State::Failed, Some(100), 5_000), None);
        assert_eq!(mail(State::Seen, None, 5_000), None);
    }

    #[test]
    fn a_silent_job_times_out_at_180_s_whatever_its_limit() {
        let h = job::STALE_AFTER_MS;
        assert_eq!(h, 180_000, "the documented 180 s");
        let d = job(JobState::Running, Some(1_000), 0, 3_600_000, 0, 1_000 + h).unwrap();
        assert_eq!((d.state, d.at, d.reason), (JobState::TimedOut, 1_000 + h, Some(job::REASON_NO_HEARTBEAT)));
        assert_eq!(job(JobState::Running, Some(1_000), 0, 3_600_000, 0, 1_000 + h - 1), None);
        // Never a heartbeat: from the run's start.
        assert_eq!(job(JobState::Running, None, 50, 3_600_000, 0, 50 + h).map(|d| d.at), Some(50 + h));
        // Renewing but past twice the limit.
        let d = job(JobState::Running, Some(9_000), 0, 4_000, 0, 9_000).unwrap();
        assert_eq!((d.at, d.reason), (8_000, Some(job::REASON_PAST_LIMIT)));
        let d = job(JobState::Queued, None, 0, 1_000, 7, 7 + job::QUEUED_MAX_AGE_MS).unwrap();
        assert_eq!(d.state, JobState::Cancelled);
        for s in [JobState::Ok, JobState::Failed, JobState::TimedOut, JobState::Cancelled] {
            assert_eq!(job(s, None, 0, 1, 0, i64::MAX / 4), None);
        }
    }

    #[test]
    fn leases_go_stale_or_expire_at_their_moment() {
        let s = lease::STALE_AFTER_MS;
        assert_eq!(
            lease(LeaseState::Held, 10, None, 10 + s).map(|d| (d.state, d.at)),
            Some((LeaseState::Stale, 10 + s))
        );
        assert_eq!(lease(LeaseState::Held, 10, None, 9 + s), None);
        assert_eq!(lease(LeaseState::Stale, 10, None, i64::MAX / 4), None);
        assert_eq!(lease(LeaseState::Held, 10, Some(500), 500).map(|d| d.state), Some(LeaseState::Expired));
        assert_eq!(lease(LeaseState::Stale, 10, Some(500), 500).map(|d| d.at), Some(500));
        assert_eq!(lease(LeaseState::Released, 10, Some(500), 900), None);
    }

    proptest! {
        // A rule that fired stays fired (reading later never undoes it) and
        // never fires before its moment.
        #[test]
        fn monotone_in_time(exp in 0i64..10_000, hb in 0i64..10_000, limit in 1i64..10_000, now in 0i64..20_000, later in 0i64..20_000) {
            let later = now + later;
            for st in State::ALL {
                if let Some(d) = mail(st, Some(exp), now) {
                    prop_assert!(d.at <= now);
                    prop_assert_eq!(mail(st, Some(exp), later), Some(d));
                }
            }
            if let Some(d) = job(JobState::Running, Some(hb), 0, limit, 0, now) {
                prop_assert!(d.at <= now);
                prop_assert_eq!(job(JobState::Running, Some(hb), 0, limit, 0, later), Some(d));
            }
        }
    }
}
