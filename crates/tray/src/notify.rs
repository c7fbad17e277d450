//! Native notifications within the receiving PC's budget: one per mail id
//! (the store's atomic claim), 5 s per notification, 20 s in all per batch.

use crate::ui::{TrayNotification, TrayUi};
use pcmail_core::Millis;
use std::time::Duration;

pub const NOTIFY_EACH_MS: Millis = 5_000;
pub const NOTIFY_TOTAL_MS: Millis = 20_000;

/// The time source for the budget: the real clock in the app, a value the test
/// moves in the tests.
pub trait Clock {
    fn now_ms(&self) -> Millis;
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// Shown within their time.
    pub shown: Vec<String>,
    /// The platform refused, or it took longer than its 5 s.
    pub failed: Vec<(String, String)>,
    /// Not tried: the 20 s of the batch were used up.
    pub skipped: Vec<String>,
    pub spent_ms: Millis,
}

/// Shows `notes` one after the other. Each call gets at most 5 s and never
/// more than what is left of the 20 s; once the 20 s are spent the rest are
/// skipped (they stay in the inbox, the count and the badge: only the popup
/// is dropped, so a burst never floods the desktop).
pub fn deliver(notes: &[TrayNotification], ui: &dyn TrayUi, clock: &dyn Clock) -> Delivery {
    let start = clock.now_ms();
    let mut out = Delivery::default();
    for n in notes {
        let left = NOTIFY_TOTAL_MS - (clock.now_ms() - start);
        if left <= 0 {
            out.skipped.push(n.id.clone());
            continue;
        }
        let budget = left.min(NOTIFY_EACH_MS);
        let t0 = clock.now_ms();
        let r = ui.notify(n, Duration::from_millis(budget as u64));
        let took = clock.now_ms() - t0;
        match r {
            Ok(()) if took <= budget => out.shown.push(n.id.clone()),
            Ok(()) => out.failed.push((n.id.clone(), format!("took {took} ms of {budget} ms"))),
            Err(e) => out.failed.push((n.id.clone(), e)),
        }
    }
    out.spent_ms = clock.now_ms() - start;
    out
}
