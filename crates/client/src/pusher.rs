//! What the hook queues (a `seen`, and later lease releases and session
//! ends) must reach the server within ~100 ms, also while the poller sits in
//! a 25 s long poll. The poller runs this beside its loop: it watches the
//! store (SQLite's `data_version`, no polling of the server) and sends due
//! marks on a request of its own.

use crate::config::Paths;
use crate::Client;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the store is looked at (a `PRAGMA data_version`, microseconds).
pub const WATCH_EVERY: Duration = Duration::from_millis(40);

/// Runs until `stop` is set. Opens its own client (its own store connection
/// and transport), so a long poll on the poller's never delays it.
pub fn run(paths: Paths, stop: Arc<AtomicBool>) {
    let mut client: Option<Client> = None;
    let mut last_version: Option<i64> = None;
    let mut failures: u32 = 0;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(WATCH_EVERY);
        if client.is_none() {
            match Client::open(paths.clone()) {
                Ok(c) => client = Some(c),
                Err(e) => {
                    tracing::warn!("mark pusher: cannot open the client: {e}");
                    std::thread::sleep(Duration::from_secs(5));
                    continue;
                }
            }
        }
        let c = client.as_mut().expect("opened above");
        let version = c.store.data_version().ok();
        if version.is_some() && version == last_version {
            continue;
        }
        last_version = version;
        if c.store.pending_mark_count().unwrap_or(0) == 0 {
            continue;
        }
        match c.flush_marks() {
            Ok(_) => failures = 0,
            Err(e) => {
                // The poller claimed the label after this client was opened:
                // reopen, so the transport presents the new credential.
                if matches!(e, crate::ClientError::LabelTaken(_)) {
                    client = None;
                }
                // Unreachable: the poller's own cycle retries with backoff;
                // look again after a pause rather than hammer the server.
                failures += 1;
                tracing::debug!("mark pusher: {e}");
                last_version = None;
                std::thread::sleep(Duration::from_millis(500 * u64::from(failures.min(20))));
            }
        }
    }
}

/// Starts [`run`] on a thread; the returned guard stops it when dropped.
pub fn spawn(paths: Paths) -> PusherGuard {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let handle = std::thread::Builder::new().name("pcmail-mark-pusher".into()).spawn(move || run(paths, s)).ok();
    PusherGuard { stop, handle }
}

pub struct PusherGuard {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Drop for PusherGuard {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
