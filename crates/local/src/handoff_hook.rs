//! The handoff and memory parts of the hook, kept apart from the mail code: at
//! SessionStart, the handoff and memory lines after everything else in the
//! budget; at Stop, the once-per-session handoff reminder. Both read the
//! repo's files and the PC store only.

use crate::config::{Config, Paths};
use pcmail_core::Millis;
use pcmail_handoff::stop::{self, StopConfig, StopInput};
use pcmail_store::Store;
use std::path::Path;

/// The handoff and memory lines for a session in `cwd`, given the characters
/// the budget has already used (mail, the one-line items, leases). The view
/// of the repo's files is kept in the PC's folder between sessions and used
/// again while none of them changed.
pub fn session_start_part(paths: &Paths, cwd: Option<&str>, used: usize) -> Option<String> {
    pcmail_handoff::viewcache::session_start_text_cached(
        Path::new(cwd?),
        used,
        &paths.hook_view_cache(),
        std::time::SystemTime::now(),
    )
}

/// The Stop hook: `{"decision":"block","reason":…}` once per session that
/// did real work and wrote no handoff, else nothing.
pub fn on_stop(paths: &Paths, raw: &[u8], now: Millis) -> Option<String> {
    stop_outcome(paths, raw, now)?.output()
}

/// What the Stop hook decided (None: not a Stop event, or no store yet).
pub fn stop_outcome(paths: &Paths, raw: &[u8], now: Millis) -> Option<stop::Outcome> {
    let input = StopInput::parse(raw)?;
    let config = Config::load(paths).ok()?;
    let cfg = StopConfig {
        enabled: config.handoffs.stop_reminder,
        min_transcript_bytes: config.handoffs.stop_reminder_min_transcript_kb.saturating_mul(1024),
    };
    if let Some(silent) = stop::precheck(&input, cfg) {
        return Some(silent);
    }
    let mut store = Store::open_existing(&paths.store(), crate::locks::HOOK_LOCK_BUDGET).ok()??;
    stop::decide(&mut store, &input, cfg, now).ok()
}
