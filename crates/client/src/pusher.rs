//! What the hook queues (a `seen`, a lease release at SessionEnd) must reach
//! the server within ~100 ms, also while the poller sits in a 25 s long
//! poll. The poller runs this beside its loop: it is woken by what queues a
//! mark or a lease release (the store writes a signal file after such a
//! commit, [`pcmail_store::push_signal_path`], watched where the OS says so,
//! [`FileWatch`]; elsewhere a timer looks at the store), looks at SQLite's
//! `data_version` and the queues (also once a second without a signal; no
//! polling of the server), and sends due marks and lease releases on
//! requests of its own. Every few seconds it also checks that
//! the processes this PC's leases follow still live, and queues the release
//! of those that exited (so a killed session's lease ends within one
//! heartbeat period).

use crate::Client;
use pcmail_local::config::Paths;
use pcmail_local::filewatch::FileWatch;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the store is looked at (a `stat` of its files; SQLite's
/// `PRAGMA data_version` when they changed): always where writes cannot be
/// watched, else for a while after each write.
pub const WATCH_EVERY: Duration = Duration::from_millis(40);

/// How often `data_version` is asked even when the files look unchanged: a
/// commit lands in the write-ahead log, which changes its size or its time,
/// but a time kept to a few milliseconds with a log restarted at the same
/// size could hide one; this bounds how late it is seen then.
const VERSION_AT_LEAST_EVERY: Duration = Duration::from_secs(1);

/// How long the pusher sleeps at most without a signal before it looks at
/// the store anyway.
const MISSED_SIGNAL_LOOK: Duration = Duration::from_secs(1);

/// How often the lease holders' processes are checked (well within H).
pub const LIVENESS_EVERY: Duration = Duration::from_secs(3);

/// Runs until `stop` is set. Opens its own client (its own store connection
/// and transport), so a long poll on the poller's never delays it.
pub fn run(paths: Paths, stop: Arc<AtomicBool>) {
    run_with(paths, stop, LIVENESS_EVERY)
}

/// [`run`] with the liveness period given (tests use a short one).
pub fn run_with(paths: Paths, stop: Arc<AtomicBool>, liveness_every: Duration) {
    let mut client: Option<Client> = None;
    let mut last_version: Option<i64> = None;
    let mut failures: u32 = 0;
    let mut last_liveness = std::time::Instant::now();
    // A read transaction of SQLite (file locks, the log's index) 25 times a
    // second was most of an idle daemon's CPU; a `stat` of two files is
    // less, and sleeping until the store is written least of all.
    let store_path = paths.store();
    // Woken by what queues a mark or a lease release (it writes the push
    // signal after its commit), not by every commit of the store: the
    // poller's own bookkeeping made most of this thread's looks. Where
    // nothing can be watched, the timer of WATCH_EVERY looks at the store.
    let watch = FileWatch::one_file(&pcmail_store::push_signal_path(&store_path), WATCH_EVERY);
    let mut active_until = std::time::Instant::now() + FileWatch::ACTIVE_FOR;
    let mut last_stamp = None;
    let mut last_version_at = std::time::Instant::now();
    let stopped = || stop.load(Ordering::Relaxed);
    while !stopped() {
        // Nothing written lately: asleep until a write, the next look at the
        // lease holders' processes, or the stop (no client yet: at once).
        // A writer that does not signal (an older pcmail) is seen within
        // MISSED_SIGNAL_LOOK.
        let quiet_for = match client {
            Some(_) => liveness_every.saturating_sub(last_liveness.elapsed()).min(MISSED_SIGNAL_LOOK),
            None => Duration::ZERO,
        };
        let signalled = watch.next_look(&mut active_until, quiet_for, Some(&stopped)) && watch.is_event_driven();
        if stopped() {
            break;
        }
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
        if last_liveness.elapsed() >= liveness_every {
            last_liveness = std::time::Instant::now();
            let now = c.now();
            match c.lease_liveness(now) {
                // Our own write does not move data_version: look now.
                Ok(n) if n > 0 => last_version = None,
                Ok(_) => {}
                Err(e) => tracing::debug!("lease liveness: {e}"),
            }
        }
        // On the timer, a `stat` first. Woken by writes, the version is read
        // each time: a write wakes the pusher before its commit is visible,
        // and a `stat` taken then would match the finished commit's.
        if !watch.is_event_driven() {
            let stamp = crate::transport::file_stamp(&store_path);
            if last_version.is_some() && Some(stamp) == last_stamp && last_version_at.elapsed() < VERSION_AT_LEAST_EVERY
            {
                continue;
            }
            last_stamp = Some(stamp);
        }
        last_version_at = std::time::Instant::now();
        if signalled {
            // A signal is written after a commit that queued work: the
            // queues are read at once, with no look at the version first
            // (the next look without a signal reads it afresh).
            last_version = None;
        } else {
            let version = c.store.data_version().ok();
            if version.is_some() && version == last_version {
                continue;
            }
            last_version = version;
        }
        let (releases, marks) = c.store.push_work().unwrap_or((0, 0));
        if marks == 0 && releases == 0 {
            continue;
        }
        let flushed = if releases > 0 { c.flush_lease_releases().map(|_| ()) } else { Ok(()) };
        let sent = flushed.and_then(|()| c.flush_marks().map(|_| ()));
        // What this thread writes (the results of what it sent) queues
        // nothing and signals nothing; a signal that came meanwhile is
        // still pending and wakes the next wait at once.
        match sent {
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
    spawn_with(paths, LIVENESS_EVERY)
}

/// [`spawn`] with the liveness period given.
pub fn spawn_with(paths: Paths, liveness_every: Duration) -> PusherGuard {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let handle = std::thread::Builder::new()
        .name("pcmail-mark-pusher".into())
        .spawn(move || run_with(paths, s, liveness_every))
        .ok();
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
