//! The receiving PC's poller, in the app: at most one per PC user. The app
//! takes the client crate's daemon lock; when a `pcmail daemon` already holds
//! it, the app only watches the store (the daemon polls) and tries again every
//! 30 s, so it takes over when the daemon stops.

use crate::state::AppState;
use pcmail_client::Client;
use pcmail_local::locks;
use pcmail_tray::{deliver, next_step, Clock, PollStep, Remote};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

pub struct SystemClock;
impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        pcmail_local::system_now()
    }
}

/// The loop. `poke` wakes it for "Poll now" or after a settings change.
pub fn run(state: Arc<AppState>, poke: Receiver<()>) {
    let clock = SystemClock;
    let mut lock: Option<locks::HeldLock> = None;
    // While this app is the poller, marks the hook queues go out within ~100 ms.
    let mut pusher: Option<pcmail_client::pusher::PusherGuard> = None;
    let mut client: Option<Client> = None;
    let mut last_cycle: Option<i64> = None;
    let mut failures: u32 = 0;
    let mut asked = false;
    loop {
        if state.quit.load(Ordering::Relaxed) {
            return;
        }
        if state.reload.swap(false, Ordering::Relaxed) {
            client = None;
        }
        if lock.is_none() {
            lock = locks::try_lock(&state.paths.daemon_lock()).ok().flatten();
        }
        if lock.is_some() && pusher.is_none() {
            pusher = Some(pcmail_client::pusher::spawn(state.paths.clone()));
        }
        let daemon = lock.is_none();
        state.controller.lock().unwrap().set_daemon_polls(daemon);
        let now = clock.now_ms();
        // While this PC holds leases: a cycle at least every heartbeat period.
        let interval = state.interval_ms.load(Ordering::Relaxed);
        let interval = match client.as_ref() {
            Some(c) => c.poll_pause(Duration::from_millis(interval.max(0) as u64)).as_millis() as i64,
            None => interval,
        };
        let wait = match next_step(now, last_cycle, interval, daemon, asked) {
            PollStep::Daemon { recheck_ms } => recheck_ms,
            PollStep::Wait { ms } => ms,
            PollStep::Cycle => {
                asked = false;
                state.remote.lease_heartbeat(now);
                if client.is_none() {
                    match Client::open(state.paths.clone()) {
                        Ok(mut c) => {
                            // The tray's poller runs jobs this PC's [jobs] whitelists, as the daemon does
                            // (it polls only when no daemon holds the lock).
                            c.enable_executor();
                            client = Some(c)
                        }
                        Err(e) => tracing::warn!("cannot open the client: {e}"),
                    }
                }
                if let Some(c) = client.as_mut() {
                    let long = if c.transport.long_poll() { 25_000 } else { 0 };
                    match c.sync_once(long) {
                        Ok(report) => {
                            failures = 0;
                            if !report.stored.is_empty() {
                                tracing::info!("stored {} new mail", report.stored.len());
                            }
                            let notes = state.controller.lock().unwrap().notifications_for(&report.to_notify);
                            if !notes.is_empty() {
                                let d = deliver(&notes, &state.ui, &clock);
                                tracing::info!(
                                    "notifications: {} shown, {} failed, {} skipped",
                                    d.shown.len(),
                                    d.failed.len(),
                                    d.skipped.len()
                                );
                            }
                            // webhook channel, as the daemon does (native went through the tray above)
                            if let Some(url) = c.config.notify_webhook.clone() {
                                let items: Vec<_> =
                                    report.to_notify.iter().map(pcmail_tray::Notification::for_mail).collect();
                                let hook: Arc<dyn pcmail_client::notify::Notifier> =
                                    Arc::new(pcmail_client::notify::Webhook { url });
                                pcmail_client::notify::deliver(
                                    &[hook],
                                    &items,
                                    pcmail_client::notify::PER_NOTIFICATION,
                                    pcmail_client::notify::TOTAL,
                                );
                            }
                        }
                        Err(e) => {
                            failures += 1;
                            tracing::warn!("poll failed: {e}");
                        }
                    }
                }
                last_cycle = Some(clock.now_ms());
                if failures > 0 {
                    // back off (the client's schedule), capped so a server that comes back is seen soon
                    pcmail_client::backoff::backoff_ms(failures).clamp(1_000, interval.max(30_000))
                } else {
                    interval
                }
            }
        };
        match poke.recv_timeout(Duration::from_millis(wait.max(50) as u64)) {
            Ok(()) => asked = true,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// The store watch: a `PRAGMA data_version` when the store was written (on
/// Linux the writes wake it; elsewhere every 250 ms); on a change the tray and
/// the window are brought up to date (the 1 s target) and due notifications
/// are claimed and shown outside the controller's lock.
pub fn watch(state: Arc<AppState>) {
    use pcmail_local::filewatch::FileWatch;
    use pcmail_tray::TrayUi;
    const TURN: Duration = Duration::from_millis(250);
    // Every 5 s even without a commit: "offline" is also a matter of time passing.
    const FORCED_EVERY: Duration = Duration::from_secs(5);
    let clock = SystemClock;
    let mut last_sig = String::new();
    let store_watch = FileWatch::new(&state.paths.store(), TURN);
    let mut last_forced = std::time::Instant::now();
    let mut active_until = last_forced;
    // Until the next forced turn, a write, a quit, or a refresh asked for.
    let asked = || state.quit.load(Ordering::Relaxed) || state.refresh_now.load(Ordering::Relaxed);
    let wait = |last_forced: std::time::Instant, active_until: &mut std::time::Instant| {
        store_watch.next_look(active_until, FORCED_EVERY.saturating_sub(last_forced.elapsed()), Some(&asked));
    };
    loop {
        if state.quit.load(Ordering::Relaxed) {
            return;
        }
        let forced = state.refresh_now.swap(false, Ordering::Relaxed) || last_forced.elapsed() >= FORCED_EVERY;
        if forced {
            last_forced = std::time::Instant::now();
        }
        let outcome = {
            let mut c = state.controller.lock().unwrap();
            let now = clock.now_ms();
            match c.store_changed() {
                Ok(v) if v.is_some() || forced => {
                    c.refresh(&state.ui, now).and_then(|notes| Ok((v.unwrap_or(0), notes, c.signature(now)?)))
                }
                Ok(_) => {
                    drop(c);
                    wait(last_forced, &mut active_until);
                    continue;
                }
                Err(e) => Err(e),
            }
        };
        match outcome {
            Ok((v, notes, sig)) => {
                if sig != last_sig {
                    last_sig = sig;
                    state.ui.changed(v);
                }
                if !notes.is_empty() {
                    deliver(&notes, &state.ui, &clock);
                }
            }
            Err(e) => tracing::warn!("store watch: {e}"),
        }
        wait(last_forced, &mut active_until);
    }
}
