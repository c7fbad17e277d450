//! The receiving PC's poller, in the app: at most one per PC user. The app
//! takes the client crate's daemon lock; when a `pcmail daemon` already holds
//! it, the app only watches the store (the daemon polls) and tries again every
//! 30 s, so it takes over when the daemon stops.

use crate::state::AppState;
use pcmail_client::{config::Paths, locks, Client};
use pcmail_tray::{deliver, next_step, Clock, PollStep, Remote, ReplyError};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

pub struct SystemClock;
impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        pcmail_client::system_now()
    }
}

/// `Remote` over `pcmail-client`: one `Client` for the window's operations
/// (the poll loop has its own, so a long-poll never blocks a reply).
pub struct ClientRemote {
    pub paths: Paths,
    ops: std::sync::Mutex<Option<Client>>,
}

impl ClientRemote {
    pub fn new(paths: Paths) -> ClientRemote {
        ClientRemote { paths, ops: std::sync::Mutex::new(None) }
    }
    /// Settings changed: open the client again on next use.
    pub fn reset(&self) {
        *self.ops.lock().unwrap() = None;
    }
    fn with<T>(&self, f: impl FnOnce(&mut Client) -> Result<T, String>) -> Result<T, String> {
        let mut g = self.ops.lock().unwrap();
        if g.is_none() {
            *g = Some(Client::open(self.paths.clone()).map_err(|e| e.to_string())?);
        }
        f(g.as_mut().unwrap())
    }
    /// Sends pending marks now (after ack/seen) instead of waiting for the
    /// poller's next round.
    pub fn flush_marks(&self) {
        let _ = self.with(|c| c.flush_marks().map(|_| ()).map_err(|e| e.to_string()));
    }
}

impl Remote for ClientRemote {
    fn sync_once(&self) -> Result<(), String> {
        self.with(|c| c.sync_once(0).map(|_| ()).map_err(|e| e.to_string()))
    }
    fn other_poller_alive(&self) -> bool {
        locks::poller_alive(&self.paths)
    }
    fn reply(&self, original: &str, body: &str) -> Result<String, ReplyError> {
        let mut g = self.ops.lock().unwrap();
        if g.is_none() {
            *g = Some(Client::open(self.paths.clone()).map_err(|e| ReplyError::Offline { queued: false, message: e.to_string() })?);
        }
        let c = g.as_mut().unwrap();
        match c.reply(original, body.to_string(), false) {
            Ok(out) => Ok(out.ids.into_iter().next().unwrap_or_default()),
            Err(pcmail_client::ClientError::ReplyToReply { .. }) => Err(ReplyError::ReplyToReply),
            Err(pcmail_client::ClientError::NotFound(_)) => Err(ReplyError::NotFound),
            Err(e) => match e.refused() {
                Some(p) => Err(ReplyError::Refused { code: p.code.as_str().to_string(), message: p.message.clone() }),
                None => Err(ReplyError::Offline { queued: false, message: e.to_string() }),
            },
        }
    }
    /// The hook point for lease heartbeats (seed 001): called once per loop
    /// turn while this app is the poller. Nothing to do until leases exist.
    fn lease_heartbeat(&self, _now: i64) {}
}

/// The loop. `poke` wakes it for "Poll now" or after a settings change.
pub fn run(state: Arc<AppState>, poke: Receiver<()>) {
    let clock = SystemClock;
    let mut lock: Option<locks::HeldLock> = None;
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
        let daemon = lock.is_none();
        state.controller.lock().unwrap().set_daemon_polls(daemon);
        let now = clock.now_ms();
        let interval = state.interval_ms.load(Ordering::Relaxed);
        let wait = match next_step(now, last_cycle, interval, daemon, asked) {
            PollStep::Daemon { recheck_ms } => recheck_ms,
            PollStep::Wait { ms } => ms,
            PollStep::Cycle => {
                asked = false;
                state.remote.lease_heartbeat(now);
                if client.is_none() {
                    match Client::open(state.paths.clone()) {
                        Ok(c) => client = Some(c),
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
                                tracing::info!("notifications: {} shown, {} failed, {} skipped", d.shown.len(), d.failed.len(), d.skipped.len());
                            }
                            // webhook channel, as the daemon does (native went through the tray above)
                            if let Some(url) = c.config.notify_webhook.clone() {
                                let items: Vec<_> = report.to_notify.iter().map(pcmail_tray::Notification::for_mail).collect();
                                let hook: Arc<dyn pcmail_client::notify::Notifier> = Arc::new(pcmail_client::notify::Webhook { url });
                                pcmail_client::notify::deliver(&[hook], &items, pcmail_client::notify::PER_NOTIFICATION, pcmail_client::notify::TOTAL);
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
                    pcmail_client::ops::backoff_ms(failures).min(interval.max(2_000)).max(1_000)
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

/// The store watch: every 250 ms a `PRAGMA data_version`; on a change the
/// tray and the window are brought up to date (the 1 s target) and due
/// notifications are claimed and shown outside the controller's lock.
pub fn watch(state: Arc<AppState>) {
    use pcmail_tray::TrayUi;
    let clock = SystemClock;
    let mut last_sig = String::new();
    let mut turns: u64 = 0;
    loop {
        if state.quit.load(Ordering::Relaxed) {
            return;
        }
        turns += 1;
        // every 5 s even without a commit: "offline" is also a matter of time passing
        let forced = state.refresh_now.swap(false, Ordering::Relaxed) || turns % 20 == 0;
        let outcome = {
            let mut c = state.controller.lock().unwrap();
            let now = clock.now_ms();
            match c.store_changed() {
                Ok(v) if v.is_some() || forced => c
                    .refresh(&state.ui, now)
                    .and_then(|notes| Ok((v.unwrap_or(0), notes, c.signature(now)?))),
                Ok(_) => {
                    std::thread::sleep(Duration::from_millis(250));
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
        std::thread::sleep(Duration::from_millis(250));
    }
}
