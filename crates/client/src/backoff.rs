//! How long to wait before trying again: the retry backoff of queued work,
//! and how often `--wait-for` asks (cheap servers often, Apps Script seldom).

use pcmail_core::Millis;
use std::time::Duration;

/// Exponential backoff with jitter: 5 s, 10 s, 20 s … capped at 5 min.
pub fn backoff_ms(attempt: u32) -> Millis {
    let base: Millis = 5_000i64.saturating_mul(1i64 << attempt.min(6)).min(300_000);
    let jitter: f64 = rand::random::<f64>() * 0.5 + 0.75;
    (base as f64 * jitter) as Millis
}

/// How long `--wait-for` waits before asking again: fast where asking is
/// cheap (embedded, `pcmail serve`), from 5 s growing to a minute against Apps
/// Script, whose URL fetches are a daily quota.
pub fn wait_interval(quota_bound: bool, attempt: u32) -> Duration {
    if !quota_bound {
        return Duration::from_millis(250);
    }
    let ms = 5_000f64 * 1.5f64.powi(attempt.min(10) as i32);
    Duration::from_millis(ms.min(60_000.0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    // --wait-for used to ask every 250 ms even against Apps Script, whose
    // daily quota that spent.
    #[test]
    fn waiting_asks_often_where_it_is_cheap_and_seldom_against_apps_script() {
        assert_eq!(wait_interval(false, 0), Duration::from_millis(250));
        assert_eq!(wait_interval(false, 50), Duration::from_millis(250));
        assert_eq!(wait_interval(true, 0), Duration::from_secs(5));
        assert!(wait_interval(true, 1) > wait_interval(true, 0), "it grows");
        assert_eq!(wait_interval(true, 40), Duration::from_secs(60), "capped at a minute");
        // Ten minutes of waiting against Apps Script costs a few dozen requests, not 2,400.
        let mut t = Duration::ZERO;
        let mut asks = 0;
        while t < Duration::from_secs(600) {
            t += wait_interval(true, asks);
            asks += 1;
        }
        assert!(asks < 25, "{asks} requests in 10 minutes");
    }
}
