//! A poller that hangs is as bad as a dead one: it keeps the daemon lock, so
//! the hook's fallback never starts another, and senders see a stale
//! `delivered`. The rule: when the last good poll is older than 10
//! minutes, restart and poll once. The daemon's loop marks its progress; a
//! watchdog thread restarts it when neither moved for that long.

use pcmail_core::Millis;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// 10 minutes: far above any poll interval, well below a lost workday.
pub const HUNG_AFTER_MS: Millis = 10 * 60 * 1000;

/// The threshold in force: 10 minutes, or `PCMAIL_WATCHDOG_MS` (tests only).
pub fn threshold_ms() -> Millis {
    std::env::var("PCMAIL_WATCHDOG_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|v: &Millis| *v > 0)
        .unwrap_or(HUNG_AFTER_MS)
}

/// Hung: the loop has not moved and no poll succeeded for `threshold` (a
/// loop that keeps failing against a down server is alive: it backs off).
pub fn is_hung(now: Millis, last_progress: Millis, last_poll_ok: Option<Millis>, threshold: Millis) -> bool {
    let poll_stale = last_poll_ok.is_none_or(|t| now - t > threshold);
    now - last_progress > threshold && poll_stale
}

/// Where the loop records that it moved.
#[derive(Clone, Default)]
pub struct Progress(Arc<AtomicI64>);

impl Progress {
    pub fn mark(&self, now: Millis) {
        self.0.store(now, Ordering::Relaxed);
    }
    pub fn last(&self) -> Millis {
        self.0.load(Ordering::Relaxed)
    }
}

/// Checks every `threshold / 10` (at most a minute); calls `on_hung` once
/// when the loop is hung. `last_poll_ok` reads the store's record.
pub fn spawn(
    progress: Progress,
    threshold: Millis,
    clock: fn() -> Millis,
    last_poll_ok: impl Fn() -> Option<Millis> + Send + 'static,
    on_hung: impl FnOnce() + Send + 'static,
) {
    let every = Duration::from_millis((threshold / 10).clamp(50, 60_000) as u64);
    let _ = std::thread::Builder::new().name("pcmail-watchdog".into()).spawn(move || loop {
        std::thread::sleep(every);
        if is_hung(clock(), progress.last(), last_poll_ok(), threshold) {
            on_hung();
            return;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_rule() {
        let t = HUNG_AFTER_MS;
        // stuck in one call for 11 minutes, no good poll: hung
        assert!(is_hung(100 * t, 100 * t - 11 * 60_000, Some(100 * t - 11 * 60_000), t));
        // failing (the loop moves) against a down server: alive
        assert!(!is_hung(100 * t, 100 * t - 1_000, Some(100 * t - 60 * 60_000), t));
        // a long poll in progress with a recent good poll: alive
        assert!(!is_hung(100 * t, 100 * t - 20_000, Some(100 * t - 25_000), t));
        // never polled, stuck since the start: hung
        assert!(is_hung(100 * t, 100 * t - t - 1, None, t));
    }
}
