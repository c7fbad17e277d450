//! `pcmail daemon`: the poller loop (one per PC user), its pusher and its
//! watchdog; it also executes the jobs this PC's `[jobs]` whitelists.

use pcmail_client::{notify, Client};
use pcmail_local::{cmdsock, locks};
use std::time::Duration;

/// How the daemon answers a lease command for the small front (main.rs
/// parses it as `pcmail` does).
pub type FrontAnswer = fn(&mut Client, cmdsock::Request) -> cmdsock::Reply;

pub fn run(answer: FrontAnswer) -> anyhow::Result<()> {
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
    // `pcmail-hook lease claim|release` answered here, with the store and the
    // server connection open.
    #[cfg(unix)]
    spawn_front_door(p.clone(), answer);
    #[cfg(not(unix))]
    let _ = answer;
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

/// The daemon's socket for the small front. A request already there when
/// its connection is taken (a front writes it right after connecting) is
/// read and answered on the door's own thread; a connection with nothing
/// to read yet gets a thread of its own to wait for it (a process that
/// connects and sends nothing holds only that thread, for the read's few
/// seconds). The answers are made one at a time by one client kept open
/// between them (its store connection, its server connection, its prepared
/// statements). Only this user's processes are answered; another version's
/// front, a command not served here, or a request beyond
/// [`FRONT_DOOR_READERS`] waiting at once is told so and runs `pcmail`
/// itself. A failure to listen costs speed, not answers: the front then
/// runs `pcmail`.
#[cfg(unix)]
fn spawn_front_door(paths: pcmail_local::config::Paths, answer: FrontAnswer) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    let socket = paths.command_socket();
    let listener = match cmdsock::bind(&socket) {
        Ok(l) => l,
        Err(e) => {
            say!("pcmail: lease commands are not answered by this daemon ({}: {e})", socket.display());
            return;
        }
    };
    let answerer = Arc::new(Mutex::new(FrontClient { paths, client: None, opened_with: None }));
    let readers = Arc::new(AtomicUsize::new(0));
    let spawned = std::thread::Builder::new().name("front-door".into()).spawn(move || {
        for conn in listener.incoming() {
            let stream = match conn {
                Ok(s) => s,
                Err(_) => {
                    // Out of descriptors, say: try again shortly instead of spinning.
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            if !cmdsock::peer_is_this_user(&stream) {
                // Another user's process (root, say): refused in words, so it
                // never reads "may have been applied" of a command not taken.
                // Its request is read first (briefly), so the refusal is what
                // it finds, not a connection closed under its request.
                let _ = cmdsock::read_request(&stream, Duration::from_millis(100));
                let _ = cmdsock::write_reply(
                    &stream,
                    &cmdsock::Reply {
                        served: true,
                        exit: pcmail_api::Exit::Local as i32,
                        stderr: "pcmail: this PC user's daemon answers only its own user's commands; run pcmail as that user\n"
                            .into(),
                        ..Default::default()
                    },
                );
                continue;
            }
            let answer_one = move |stream: std::os::unix::net::UnixStream, answerer: &Mutex<FrontClient>, wait| {
                if let Ok(req) = cmdsock::read_request(&stream, wait) {
                    let action = req.args.get(1).cloned().unwrap_or_default();
                    let reply = answerer.lock().unwrap_or_else(|p| p.into_inner()).answer(req, answer);
                    tracing::debug!(action, served = reply.served, exit = reply.exit, "front door: lease command");
                    let _ = cmdsock::write_reply(&stream, &reply);
                }
            };
            // A thread started per request would cost a fifth of a claim. A
            // front's request is one small write, whole once readable: a
            // connection that sends half a line is dropped at once.
            if cmdsock::readable_within(&stream, Duration::from_millis(10)) {
                answer_one(stream, &answerer, Duration::from_millis(100));
                continue;
            }
            if readers.fetch_add(1, Ordering::SeqCst) >= FRONT_DOOR_READERS {
                readers.fetch_sub(1, Ordering::SeqCst);
                let _ = cmdsock::write_reply(&stream, &cmdsock::Reply::not_served());
                continue;
            }
            let (answerer, done) = (answerer.clone(), readers.clone());
            let reader = std::thread::Builder::new().name("front-door-request".into()).spawn(move || {
                answer_one(stream, &answerer, Duration::from_secs(5));
                done.fetch_sub(1, Ordering::SeqCst);
            });
            if reader.is_err() {
                readers.fetch_sub(1, Ordering::SeqCst);
            }
        }
    });
    if let Err(e) = spawned {
        say!("pcmail: lease commands are not answered by this daemon ({e})");
    }
}

/// Requests read at once by the front door; one more is told to run
/// `pcmail` itself.
#[cfg(unix)]
const FRONT_DOOR_READERS: usize = 32;

/// The client the front door answers with, opened at the first request and
/// again when the config changed (`pcmail init` run since: another label,
/// another server), so the answer is the one `pcmail` would give now.
#[cfg(unix)]
struct FrontClient {
    paths: pcmail_local::config::Paths,
    client: Option<Client>,
    opened_with: Option<ConfigStamp>,
}

#[cfg(unix)]
type ConfigStamp = (Option<std::time::SystemTime>, u64, i64, i64, u64);

#[cfg(unix)]
impl FrontClient {
    fn config_stamp(&self) -> Option<ConfigStamp> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(self.paths.config()).ok()?;
        Some((m.modified().ok(), m.len(), m.ctime(), m.ctime_nsec(), m.ino()))
    }

    fn answer(&mut self, req: cmdsock::Request, answer: FrontAnswer) -> cmdsock::Reply {
        // Another version, another command, or another secret or credential
        // named in the front's environment: `pcmail` itself answers those.
        if req.version != env!("CARGO_PKG_VERSION")
            || !cmdsock::is_served(&req.args)
            || req.identity != cmdsock::identity_digest()
        {
            return cmdsock::Reply::not_served();
        }
        let stamp = self.config_stamp();
        if self.client.is_none() || stamp != self.opened_with {
            self.client = Client::open(self.paths.clone()).ok();
            self.opened_with = stamp;
        }
        let Some(client) = self.client.as_mut() else {
            // pcmail says why it cannot open.
            return cmdsock::Reply::not_served();
        };
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| answer(client, req))) {
            Ok(r) => r,
            Err(_) => {
                // A fault in the command: a fresh client for the next one.
                self.client = None;
                cmdsock::Reply {
                    served: true,
                    exit: pcmail_api::Exit::Error as i32,
                    stderr: "pcmail: the daemon failed while answering; `pcmail lease list` says what holds\n".into(),
                    ..Default::default()
                }
            }
        }
    }
}
