//! `pcmail daemon`: the poller loop (one per PC user), its pusher and its
//! watchdog; it also executes the jobs this PC's `[jobs]` whitelists.

use pcmail_client::{notify, Client};
use pcmail_local::locks;
use std::time::Duration;

pub fn run() -> anyhow::Result<()> {
    let p = super::paths()?;
    // A daemon restarted by its watchdog waits briefly for its predecessor's lock.
    let restarted = std::env::var_os("PCMAIL_DAEMON_RESTARTED").is_some();
    let mut lock = locks::try_lock(&p.daemon_lock())?;
    for _ in 0..50 {
        if lock.is_some() || !restarted {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        lock = locks::try_lock(&p.daemon_lock())?;
    }
    let Some(_lock) = lock else {
        println!("pcmail: a daemon is already running for this PC user ({})", p.daemon_lock().display());
        return Ok(());
    };
    // Marks the hook queues go out within ~100 ms, also during a long poll.
    let _pusher = pcmail_client::pusher::spawn(p.clone());
    let progress = pcmail_client::watchdog::Progress::default();
    progress.mark(pcmail_local::system_now());
    {
        let store_path = p.store();
        pcmail_client::watchdog::spawn(
            progress.clone(),
            pcmail_client::watchdog::threshold_ms(),
            pcmail_local::system_now,
            move || pcmail_store::Store::open(&store_path).ok().and_then(|s| s.last_poll_ok_at().ok().flatten()),
            restart_daemon,
        );
    }
    let mut client = Client::open(p)?;
    // The daemon executes jobs this PC's [jobs] whitelists (workers beside the poll loop).
    client.enable_executor();
    let interval = client.config.poll_interval();
    let wait_ms = if client.transport.long_poll() { 20_000 } else { 0 };
    let chans = notify::channels(&client.config);
    let notifier = notify::spawn_worker(chans.clone());
    say!("pcmail: daemon for {} polling {}", client.me(), client.config.server.describe());
    let mut failures: u32 = 0;
    loop {
        progress.mark(pcmail_local::system_now());
        let cycle = client.sync_once(wait_ms);
        progress.mark(pcmail_local::system_now());
        match cycle {
            Ok(report) => {
                failures = 0;
                if !report.stored.is_empty() {
                    tracing::info!("stored {} mail", report.stored.len());
                }
                let notes: Vec<_> = report.to_notify.iter().map(notify::Notification::for_mail).collect();
                if !notes.is_empty() {
                    if let Err(std::sync::mpsc::SendError(notes)) = notifier.send(notes) {
                        let _ = notify::deliver(&chans, &notes, notify::PER_NOTIFICATION, notify::TOTAL);
                    }
                }
                // While this PC holds leases: at least one poll per heartbeat
                // period; sooner when another PC's lease changed.
                client.wait_before_next_poll(interval);
            }
            Err(e) => {
                failures += 1;
                let wait = pcmail_client::backoff::backoff_ms(failures);
                say!("pcmail: poll failed ({e}); retrying in {} s", wait / 1000);
                std::thread::sleep(Duration::from_millis(wait as u64));
            }
        }
    }
}

/// The watchdog's way out of a hung poll: the same daemon, started afresh,
/// polls at once. On Unix the process image is replaced (same PID; the lock
/// file closes on exec, so the new image takes it); elsewhere a detached
/// successor starts and this process exits.
fn restart_daemon() {
    say!("pcmail: watchdog: no good poll and no progress for too long; restarting the daemon");
    let Ok(exe) = std::env::current_exe() else { std::process::exit(75) };
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let err = std::process::Command::new(&exe).arg("daemon").env("PCMAIL_DAEMON_RESTARTED", "1").exec();
        say!("pcmail: watchdog: restart failed: {err}");
        std::process::exit(75);
    }
    #[cfg(not(unix))]
    {
        let mut cmd = pcmail_local::spawn::detached_command(&exe, &["daemon"]);
        cmd.env("PCMAIL_DAEMON_RESTARTED", "1");
        let _ = cmd.spawn();
        std::process::exit(0);
    }
}
