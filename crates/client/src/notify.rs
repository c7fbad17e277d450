//! Notifications for decision requests, work requests and urgent mail: one
//! per id (the store claims them), sent after the cycle, at most 5 s each and
//! 20 s in all, on every channel that is set up (native, webhook, log).

use pcmail_core::present::{kind_badge, neutralise, subject_without_tags, truncate_chars, Lang};
use pcmail_store::InboxMail;
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub const PER_NOTIFICATION: Duration = Duration::from_secs(5);
pub const TOTAL: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    pub id: String,
    pub title: String,
    pub body: String,
}

impl Notification {
    /// In the user's language (`LC_ALL`, `LC_MESSAGES`, `LANG`), as `inbox` and the hook speak.
    pub fn for_mail(m: &InboxMail) -> Notification {
        Notification::for_mail_in(m, pcmail_local::config::user_lang())
    }

    /// The kind once, as the badge in `lang` (`[判断依頼]` under a Japanese
    /// locale, `[decision request]` otherwise), never a Japanese tag before
    /// English words; the body is the subject without the Japanese tags (the
    /// badge says it already), else the body.
    pub fn for_mail_in(m: &InboxMail, lang: Lang) -> Notification {
        let badge = kind_badge(m.effective_kind(), lang);
        let urgent = match (m.urgent, lang) {
            (false, _) => "",
            (true, Lang::En) => "URGENT ",
            (true, Lang::Ja) => "至急 ",
        };
        let from = neutralise(&m.from);
        let title = match (badge, lang) {
            (Some(b), Lang::En) => format!("pcmail: {urgent}{b} from {from}"),
            (Some(b), Lang::Ja) => format!("pcmail: {urgent}{b} {from} から"),
            (None, Lang::En) => format!("pcmail: {urgent}mail from {from}"),
            (None, Lang::Ja) => format!("pcmail: {urgent}{from} からのメール"),
        };
        let subject = subject_without_tags(&m.subject);
        let text = if subject.is_empty() { m.body.as_str() } else { subject.as_str() };
        Notification { id: m.id.clone(), title, body: truncate_chars(&neutralise(text), 160) }
    }
}

pub trait Notifier: Send + Sync {
    fn name(&self) -> &'static str;
    fn send(&self, n: &Notification) -> Result<(), String>;
    /// Sent on the deliverer's own thread, with no thread of its own: a
    /// channel that does no I/O that can wait long (a log line), where the
    /// hand-over to another thread and back cost more than the send.
    fn sends_inline(&self) -> bool {
        false
    }
}

/// Native desktop notification (only where a session bus is present).
pub struct Native;

impl Native {
    pub fn available() -> bool {
        cfg!(any(windows, target_os = "macos")) || std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some()
    }
}

impl Notifier for Native {
    fn name(&self) -> &'static str {
        "native"
    }
    fn send(&self, n: &Notification) -> Result<(), String> {
        notify_rust::Notification::new()
            .appname("pcmail")
            .summary(&n.title)
            .body(&n.body)
            .show()
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// A Discord-style webhook: `{"content": "<one line>"}`.
pub struct Webhook {
    pub url: String,
}

impl Notifier for Webhook {
    fn name(&self) -> &'static str {
        "webhook"
    }
    fn send(&self, n: &Notification) -> Result<(), String> {
        let client =
            reqwest::blocking::Client::builder().timeout(PER_NOTIFICATION).build().map_err(|e| e.to_string())?;
        let content = format!("{} — {} ({})", n.title, n.body, n.id);
        let resp = client.post(&self.url).json(&serde_json::json!({ "content": content })).send().map_err(|e| {
            if e.is_timeout() {
                "timed out".to_string()
            } else {
                "unreachable".to_string()
            }
        })?;
        if resp.status().is_success() {
            Ok(())
        } else {
            Err(format!("HTTP {}", resp.status()))
        }
    }
}

/// The fallback: one log line on stderr.
pub struct LogLine;

impl Notifier for LogLine {
    fn name(&self) -> &'static str {
        "log"
    }
    fn send(&self, n: &Notification) -> Result<(), String> {
        // An error, never a panic (as `eprintln!` would give on a stderr
        // whose reader went away): this runs on the notifier's thread, and
        // on the poller's own when that thread could not start.
        use std::io::Write;
        writeln!(std::io::stderr().lock(), "{} — {} ({})", n.title, n.body, n.id).map_err(|e| format!("stderr: {e}"))
    }
    fn sends_inline(&self) -> bool {
        true
    }
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DeliveryReport {
    pub sent: Vec<(String, &'static str)>,
    pub failed: Vec<(String, &'static str, String)>,
    /// Ids not tried because the 20 s budget ran out.
    pub skipped: Vec<String>,
}

/// Sends each notification on each channel, each attempt bounded by `per`,
/// the whole batch by `total`. A channel that hangs costs at most `per`.
pub fn deliver(
    notifiers: &[std::sync::Arc<dyn Notifier>],
    items: &[Notification],
    per: Duration,
    total: Duration,
) -> DeliveryReport {
    Deliverer::new(notifiers.to_vec()).deliver(items, per, total)
}

/// A notification for a channel's thread, and where its result goes.
type Job = (Notification, mpsc::Sender<Result<(), String>>);

/// A channel, and its kept thread once one runs.
type Lane = (std::sync::Arc<dyn Notifier>, Option<mpsc::Sender<Job>>);

/// The channels with a thread each, kept from one notification to the
/// next: a thread started for every notification cost the daemon more than
/// the notification itself. A channel that does not answer within its slice
/// is left to finish that send on its thread (which then ends), and its
/// next notification gets a new thread.
pub struct Deliverer {
    lanes: Vec<Lane>,
}

impl Deliverer {
    pub fn new(notifiers: Vec<std::sync::Arc<dyn Notifier>>) -> Deliverer {
        Deliverer { lanes: notifiers.into_iter().map(|n| (n, None)).collect() }
    }

    /// As [`deliver`], on the kept threads.
    pub fn deliver(&mut self, items: &[Notification], per: Duration, total: Duration) -> DeliveryReport {
        let start = Instant::now();
        let mut report = DeliveryReport::default();
        for n in items {
            for (ch, worker) in &mut self.lanes {
                let left = total.saturating_sub(start.elapsed());
                if left.is_zero() {
                    if !report.skipped.contains(&n.id) {
                        report.skipped.push(n.id.clone());
                    }
                    continue;
                }
                if ch.sends_inline() {
                    match ch.send(n) {
                        Ok(()) => report.sent.push((n.id.clone(), ch.name())),
                        Err(e) => report.failed.push((n.id.clone(), ch.name(), e)),
                    }
                    continue;
                }
                let (tx, rx) = mpsc::channel();
                let mut job = (n.clone(), tx);
                // A kept thread that ended (its channel panicked) is started again, once.
                let mut taken = false;
                for _ in 0..2 {
                    let lane = worker.get_or_insert_with(|| lane_thread(ch.clone()));
                    match lane.send(job) {
                        Ok(()) => {
                            taken = true;
                            break;
                        }
                        Err(mpsc::SendError(back)) => {
                            job = back;
                            *worker = None;
                        }
                    }
                }
                if !taken {
                    report.failed.push((n.id.clone(), ch.name(), "no thread could be started".into()));
                    continue;
                }
                match rx.recv_timeout(per.min(left)) {
                    Ok(Ok(())) => report.sent.push((n.id.clone(), ch.name())),
                    Ok(Err(e)) => report.failed.push((n.id.clone(), ch.name(), e)),
                    Err(e) => {
                        // Still sending, or its thread ended: the next one goes on a new thread.
                        *worker = None;
                        let why = match e {
                            mpsc::RecvTimeoutError::Timeout => "timed out",
                            mpsc::RecvTimeoutError::Disconnected => "its thread ended",
                        };
                        report.failed.push((n.id.clone(), ch.name(), why.into()));
                    }
                }
            }
        }
        report
    }
}

/// A channel's thread: sends what it is given until its sender is dropped.
fn lane_thread(ch: std::sync::Arc<dyn Notifier>) -> mpsc::Sender<Job> {
    let (tx, rx) = mpsc::channel::<Job>();
    let _ = std::thread::Builder::new().name("pcmail-notify-ch".into()).spawn(move || {
        for (n, answer) in rx {
            let _ = answer.send(ch.send(&n));
        }
    });
    tx
}

/// Notifications on a thread of their own: the poller hands a cycle's
/// batch over and goes back to its long poll at once (a channel that hangs
/// costs up to 5 s a notification), and a slow channel holds up only this
/// thread.
/// A batch the thread cannot take (it could not start) comes back in the
/// `Err` of `send`: deliver it in place.
pub fn spawn_worker(notifiers: Vec<std::sync::Arc<dyn Notifier>>) -> mpsc::Sender<Vec<Notification>> {
    let (tx, rx) = mpsc::channel::<Vec<Notification>>();
    let _ = std::thread::Builder::new().name("pcmail-notify".into()).spawn(move || {
        let mut deliverer = Deliverer::new(notifiers);
        for items in rx {
            let _ = deliverer.deliver(&items, PER_NOTIFICATION, TOTAL);
        }
    });
    tx
}

/// The channels set up on this PC.
pub fn channels(config: &pcmail_local::config::Config) -> Vec<std::sync::Arc<dyn Notifier>> {
    let mut v: Vec<std::sync::Arc<dyn Notifier>> = vec![];
    if config.native_notifications && Native::available() {
        v.push(std::sync::Arc::new(Native));
    }
    if let Some(url) = &config.notify_webhook {
        v.push(std::sync::Arc::new(Webhook { url: url.clone() }));
    }
    if v.is_empty() {
        v.push(std::sync::Arc::new(LogLine));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    struct Slow(Duration, Mutex<Vec<String>>);
    impl Notifier for Slow {
        fn name(&self) -> &'static str {
            "slow"
        }
        fn send(&self, n: &Notification) -> Result<(), String> {
            std::thread::sleep(self.0);
            self.1.lock().unwrap().push(n.id.clone());
            Ok(())
        }
    }

    fn items(n: usize) -> Vec<Notification> {
        (0..n).map(|i| Notification { id: format!("m{i}"), title: "t".into(), body: "b".into() }).collect()
    }

    #[test]
    fn a_hanging_channel_costs_at_most_its_slice_and_the_batch_its_total() {
        // Scaled down: 50 ms per notification, 120 ms in all.
        let slow: Arc<dyn Notifier> = Arc::new(Slow(Duration::from_secs(5), Mutex::new(vec![])));
        let t = Instant::now();
        let r = deliver(&[slow], &items(10), Duration::from_millis(50), Duration::from_millis(120));
        let took = t.elapsed();
        assert!(took < Duration::from_millis(1000), "took {took:?}");
        assert!(r.sent.is_empty());
        assert!(r.failed.len() <= 3, "{:?}", r.failed);
        assert!(r.skipped.len() >= 7, "{:?}", r.skipped);
    }

    /// Records the thread each notification was sent on; the one whose id
    /// is the second field hangs for 300 ms.
    struct Threads(Mutex<Vec<(String, std::thread::ThreadId)>>, &'static str);
    impl Notifier for Threads {
        fn name(&self) -> &'static str {
            "threads"
        }
        fn send(&self, n: &Notification) -> Result<(), String> {
            if n.id == self.1 {
                std::thread::sleep(Duration::from_millis(300));
            }
            self.0.lock().unwrap().push((n.id.clone(), std::thread::current().id()));
            Ok(())
        }
    }

    /// A log line whose stderr is a pipe nobody reads any more is an error
    /// of that channel, not a panic of the thread that sends it (the
    /// poller's own, when the notifier's thread could not start). Run in a
    /// child process of this test binary, whose stderr is such a pipe.
    #[cfg(unix)]
    #[test]
    fn a_log_line_to_a_stderr_nobody_reads_is_an_error_not_a_panic() {
        const CHILD: &str = "PCMAIL_TEST_LOG_LINE_CHILD";
        if std::env::var_os(CHILD).is_some() {
            std::thread::sleep(Duration::from_millis(300)); // the parent closes the pipe's other end
            let sent = LogLine.send(&items(1)[0]);
            std::process::exit(if sent.is_err() { 42 } else { 43 });
        }
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "notify::tests::a_log_line_to_a_stderr_nobody_reads_is_an_error_not_a_panic",
                "--nocapture",
            ])
            .env(CHILD, "1")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stderr.take());
        assert_eq!(child.wait().unwrap().code(), Some(42), "the send did not come back as an error");
    }

    /// A channel that sends inline (the log line) runs on the deliverer's
    /// thread beside one that keeps a thread of its own.
    #[test]
    fn an_inline_channel_sends_on_the_deliverers_thread() {
        struct Inline(Mutex<Vec<std::thread::ThreadId>>);
        impl Notifier for Inline {
            fn name(&self) -> &'static str {
                "inline"
            }
            fn send(&self, _n: &Notification) -> Result<(), String> {
                self.0.lock().unwrap().push(std::thread::current().id());
                Err("refused".into())
            }
            fn sends_inline(&self) -> bool {
                true
            }
        }
        let inline = Arc::new(Inline(Mutex::new(vec![])));
        let threaded = Arc::new(Threads(Mutex::new(vec![]), "none"));
        let mut d = Deliverer::new(vec![inline.clone() as Arc<dyn Notifier>, threaded.clone() as Arc<dyn Notifier>]);
        let r = d.deliver(&items(2), Duration::from_secs(5), Duration::from_secs(20));
        assert_eq!(r.sent, [("m0".to_string(), "threads"), ("m1".to_string(), "threads")]);
        assert_eq!(r.failed.len(), 2, "the inline channel's errors are reported: {:?}", r.failed);
        let me = std::thread::current().id();
        assert_eq!(*inline.0.lock().unwrap(), [me, me]);
        assert!(threaded.0.lock().unwrap().iter().all(|(_, t)| *t != me));
        assert!(LogLine.sends_inline() && !Native.sends_inline());
    }

    /// One thread per channel for every notification, across batches; one
    /// that timed out is left to finish, and the next goes on a new thread.
    #[test]
    fn a_channel_keeps_its_thread_until_it_hangs() {
        let ch = Arc::new(Threads(Mutex::new(vec![]), "m2"));
        let mut d = Deliverer::new(vec![ch.clone() as Arc<dyn Notifier>]);
        let r = d.deliver(&items(2), Duration::from_secs(5), Duration::from_secs(20));
        assert_eq!(r.sent.len(), 2);
        let r = d.deliver(&items(4)[2..], Duration::from_millis(50), Duration::from_secs(20));
        assert_eq!(r.failed, [("m2".to_string(), "threads", "timed out".to_string())]);
        assert_eq!(r.sent, [("m3".to_string(), "threads")]);
        std::thread::sleep(Duration::from_millis(400));
        let seen = ch.0.lock().unwrap().clone();
        let thread_of = |id: &str| seen.iter().find(|(i, _)| i == id).map(|(_, t)| *t).unwrap();
        assert_eq!(thread_of("m0"), thread_of("m1"), "one thread for the channel");
        assert_eq!(thread_of("m0"), thread_of("m2"), "the next batch too");
        assert_ne!(thread_of("m2"), thread_of("m3"), "a new thread after the one that hung");
        assert_ne!(thread_of("m3"), std::thread::current().id());
    }

    #[test]
    fn webhook_posts_discord_shaped_json() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = vec![0u8; 8192];
            let mut got = Vec::new();
            // Read headers + body (small request: one or two reads).
            loop {
                let n = s.read(&mut buf).unwrap();
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got);
                if let Some(h) = text.find("\r\n\r\n") {
                    let len: usize = text
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase().strip_prefix("content-length: ").map(|v| v.trim().parse().unwrap())
                        })
                        .unwrap_or(0);
                    if got.len() >= h + 4 + len {
                        break;
                    }
                }
            }
            s.write_all(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n").unwrap();
            String::from_utf8(got).unwrap()
        });
        let n = Notification {
            id: "mail-1-0000abcd".into(),
            title: "pcmail: decision request from pc-a".into(),
            body: "ship?".into(),
        };
        Webhook { url }.send(&n).unwrap();
        let req = server.join().unwrap();
        let body: serde_json::Value = serde_json::from_str(req.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        let content = body["content"].as_str().unwrap();
        assert!(content.contains("decision request from pc-a") && content.contains("mail-1-0000abcd"), "{content}");
        assert_eq!(body.as_object().unwrap().len(), 1, "only content");
    }

    #[test]
    fn fast_channels_send_everything() {
        let fast = Arc::new(Slow(Duration::ZERO, Mutex::new(vec![])));
        let dynf: Arc<dyn Notifier> = fast.clone();
        let r = deliver(&[dynf], &items(4), PER_NOTIFICATION, TOTAL);
        assert_eq!(r.sent.len(), 4);
        assert_eq!(*fast.1.lock().unwrap(), vec!["m0", "m1", "m2", "m3"]);
    }
}
