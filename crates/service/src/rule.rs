//! The self-healing rule for the receiving poller: not "has it ever
//! run", but re-register and poll once when the task's last result is not 0
//! (running and not-yet-run are normal) or the last good poll is older than
//! 10 minutes.

/// Last good poll older than this: the poller is dead or hung.
pub const POLL_STALE_MS: i64 = 10 * 60 * 1000;
/// SCHED_S_TASK_RUNNING: the task is running now.
pub const RUNNING: u32 = 0x41301;
/// SCHED_S_TASK_HAS_NOT_RUN: registered, not started yet.
pub const NOT_YET_RUN: u32 = 0x41303;

/// Whether a Task Scheduler `LastTaskResult` is a healthy one.
pub fn last_result_is_normal(code: u32) -> bool {
    matches!(code, 0 | RUNNING | NOT_YET_RUN)
}

/// What the service manager says about the poller's registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registration {
    /// No unit / task / agent is registered.
    Missing,
    /// Registered and, as far as the manager knows, fine (its own word for the state).
    Healthy(String),
    /// Registered but failed or stopped (why).
    Unhealthy(String),
}

impl Registration {
    /// From `schtasks /Query`: the last result decides.
    pub fn from_task(info: &crate::TaskInfo) -> Registration {
        match info.last_result {
            Some(code) if !last_result_is_normal(code) => {
                Registration::Unhealthy(format!("LastTaskResult 0x{code:X} ({code})"))
            }
            Some(code) => Registration::Healthy(format!("{} (LastTaskResult 0x{code:X})", info.status)),
            None => Registration::Unhealthy(format!("{}, no LastTaskResult", info.status)),
        }
    }

    /// From `systemctl --user is-active`: active (or on its way) is fine.
    pub fn from_is_active(state: &str) -> Registration {
        let state = state.trim();
        match state {
            "active" | "activating" | "reloading" => Registration::Healthy(state.to_string()),
            _ => Registration::Unhealthy(if state.is_empty() { "unknown".into() } else { state.to_string() }),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Healthy,
    /// Re-register the service and poll once, for these reasons.
    Repair(Vec<String>),
}

/// The rule. `last_poll_ok_at` is the PC store's last good poll (ms), `now`
/// the current time (ms).
pub fn judge(reg: &Registration, last_poll_ok_at: Option<i64>, now: i64) -> Verdict {
    let mut why = vec![];
    match reg {
        Registration::Missing => why.push("the service is not registered".to_string()),
        Registration::Unhealthy(s) => why.push(format!("the service is not healthy: {s}")),
        Registration::Healthy(_) => {}
    }
    match last_poll_ok_at {
        None => why.push("no good poll recorded yet".to_string()),
        Some(t) if now - t > POLL_STALE_MS => {
            why.push(format!("the last good poll was {} min ago (limit 10)", (now - t) / 60_000))
        }
        Some(_) => {}
    }
    if why.is_empty() {
        Verdict::Healthy
    } else {
        Verdict::Repair(why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const NOW: i64 = 1_800_000_000_000;

    #[test]
    fn running_and_not_yet_run_are_normal_other_codes_are_not() {
        for c in [0, 0x41301, 267009, 0x41303, 267011] {
            assert!(last_result_is_normal(c), "{c}");
        }
        for c in [1, 0x41306, 0x8007_0002, 0xC000_013A, 0x41302] {
            assert!(!last_result_is_normal(c), "{c:x}");
        }
    }

    #[test]
    fn a_fresh_poll_and_a_healthy_task_need_nothing() {
        let reg = Registration::Healthy("Running".into());
        assert_eq!(judge(&reg, Some(NOW - 60_000), NOW), Verdict::Healthy);
        assert_eq!(judge(&reg, Some(NOW - POLL_STALE_MS), NOW), Verdict::Healthy, "exactly 10 min is not older");
    }

    #[test]
    fn a_stale_poll_needs_repair_even_when_the_task_looks_fine() {
        let reg = Registration::Healthy("Running".into());
        let Verdict::Repair(why) = judge(&reg, Some(NOW - POLL_STALE_MS - 1), NOW) else { panic!() };
        assert_eq!(why.len(), 1);
        assert!(why[0].contains("10 min ago"), "{why:?}");
        assert!(matches!(judge(&reg, None, NOW), Verdict::Repair(_)));
    }

    #[test]
    fn a_failed_or_missing_task_needs_repair_even_with_a_fresh_poll() {
        for reg in [Registration::Missing, Registration::Unhealthy("LastTaskResult 0x1".into())] {
            assert!(matches!(judge(&reg, Some(NOW), NOW), Verdict::Repair(_)), "{reg:?}");
        }
    }

    #[test]
    fn systemd_states_map_to_health() {
        assert_eq!(Registration::from_is_active("active\n"), Registration::Healthy("active".into()));
        assert_eq!(Registration::from_is_active("failed\n"), Registration::Unhealthy("failed".into()));
        assert_eq!(Registration::from_is_active("inactive"), Registration::Unhealthy("inactive".into()));
    }
}
