//! Waking when a SQLite database is written, instead of looking at it on a
//! timer. The poller's mark pusher, the embedded poller's wait between polls
//! and `pcmail watch` each looked at a file 25 to 50 times a second for the
//! whole life of a session or a PC: a `stat` or a SQLite read each time, and
//! as many wake-ups of a core that could otherwise sleep.
//!
//! On Linux the folder holding the database is watched with inotify: a write
//! to the database file or to its write-ahead log by any process of this
//! machine (SQLite appends every commit to the log) ends the wait. What the
//! waiter then reads (a `stat`, SQLite's `data_version`) still decides
//! whether anything it cares about changed, so a wake-up for nothing costs
//! one look. A commit wakes the waiter as its first page is written, while
//! the writer still holds the database and before readers see it: the wait
//! ends once the writes have stopped for 2 ms, and callers look once more a
//! period later ([`FileWatch::ACTIVE_FOR`]) in case that was not the end of
//! the commit. Elsewhere, or when inotify is refused (its
//! per-user limits), [`FileWatch::wait`] sleeps the old period and says the
//! file may have changed, which is the timer the callers had.

use std::path::Path;
use std::time::{Duration, Instant};

/// While nothing is written, how soon a waiter with a stop flag sees it.
pub const STOP_SLICE: Duration = Duration::from_millis(250);

pub struct FileWatch {
    #[cfg(target_os = "linux")]
    inotify: Option<linux::Inotify>,
    /// The fallback timer's period.
    every: Duration,
}

impl FileWatch {
    /// How long a caller keeps looking on its short period after a write:
    /// one more look.
    pub const ACTIVE_FOR: Duration = Duration::from_millis(50);

    /// Watches `db` and its write-ahead log; `every` is the period of the
    /// timer used where writes cannot be watched.
    pub fn new(db: &Path, every: Duration) -> FileWatch {
        #[cfg(not(target_os = "linux"))]
        let _ = db;
        FileWatch {
            #[cfg(target_os = "linux")]
            inotify: linux::Inotify::new(db),
            every,
        }
    }

    /// Watches one file alone (a signal another process writes and closes
    /// after the change it tells of), made empty and private when missing;
    /// `every` as for [`FileWatch::new`]. Each writer's close wakes the
    /// waiter once, at once, and [`FileWatch::next_look`] asks for no second
    /// look after it: unlike a database's first page, the signal comes
    /// after what it signals.
    pub fn one_file(file: &Path, every: Duration) -> FileWatch {
        #[cfg(not(target_os = "linux"))]
        let _ = file;
        FileWatch {
            #[cfg(target_os = "linux")]
            inotify: linux::Inotify::single(file),
            every,
        }
    }

    /// Whether writes wake [`FileWatch::wait`] (false: it is a timer).
    pub fn is_event_driven(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            self.inotify.is_some()
        }
        #[cfg(not(target_os = "linux"))]
        {
            false
        }
    }

    /// Waits until the database or its log is written, or `timeout` passes.
    /// True when a write was seen (or, on the timer, after one period: maybe);
    /// false when the time passed with no write.
    pub fn wait(&self, timeout: Duration) -> bool {
        #[cfg(target_os = "linux")]
        if let Some(i) = &self.inotify {
            return i.wait(timeout);
        }
        std::thread::sleep(timeout.min(self.every));
        true
    }

    /// Forgets the writes seen so far (the caller is about to look anyway).
    pub fn forget_pending(&self) {
        #[cfg(target_os = "linux")]
        if let Some(i) = &self.inotify {
            i.drain();
        }
    }

    /// Waits before a caller's next look at the file. While a write was seen
    /// less than [`FileWatch::ACTIVE_FOR`] ago (`active_until`, the caller's,
    /// which each write moves on), and where writes are not watched, one
    /// period; otherwise until a write, with `stop` (when there is one) seen
    /// within [`STOP_SLICE`]. Never longer than `quiet_for`. True when a write
    /// was seen (on the timer: maybe).
    pub fn next_look(&self, active_until: &mut Instant, quiet_for: Duration, stop: Option<&dyn Fn() -> bool>) -> bool {
        let quiet = self.is_event_driven() && Instant::now() >= *active_until;
        let written = match (quiet, stop) {
            (true, Some(stop)) => self.wait_unless(quiet_for, STOP_SLICE, stop),
            (true, None) => self.wait(quiet_for),
            (false, _) => self.wait(self.every.min(quiet_for)),
        };
        if written && self.is_event_driven() && !self.is_signal() {
            *active_until = Instant::now() + Self::ACTIVE_FOR;
        }
        written
    }

    /// Whether this watches one signal file written after the change it
    /// tells of (so its wake-up needs no second look), not a database.
    fn is_signal(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            self.inotify.as_ref().is_some_and(|i| i.is_single())
        }
        #[cfg(not(target_os = "linux"))]
        {
            false
        }
    }

    /// [`FileWatch::wait`] for a waiter that also stops on a flag: waits in
    /// slices of at most `slice` so `stop` is seen within one.
    pub fn wait_unless(&self, timeout: Duration, slice: Duration, stop: impl Fn() -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || stop() {
                return false;
            }
            if self.wait(left.min(slice)) {
                return true;
            }
        }
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::OsString;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;
    use std::time::{Duration, Instant};

    /// Quiet this long after a write: the commit is done.
    const SETTLE: Duration = Duration::from_millis(2);
    const SETTLE_MAX: Duration = Duration::from_millis(20);

    pub(super) struct Inotify {
        fd: OwnedFd,
        /// The database's file name and its log's, watched in their folder.
        names: Vec<OsString>,
        /// Or one file watched by itself (its events carry no name): the
        /// file, made when missing, and watched again after it went away.
        single: Option<(std::ffi::CString, std::sync::atomic::AtomicBool)>,
    }

    /// What a single file's watch asks for: a writer closing it (one event
    /// per signal, after its bytes: its truncation, mode and write would be
    /// three), and the file going away (the watch then ends and is set up
    /// again; IN_IGNORED, which every watch gets, says so).
    const SINGLE_MASK: u32 = libc::IN_CLOSE_WRITE | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF;

    /// A new inotify descriptor, non-blocking, closed on exec.
    fn inotify_fd() -> Option<OwnedFd> {
        // SAFETY: plain system call; the descriptor is owned below.
        let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if raw < 0 {
            return None;
        }
        // SAFETY: `raw` is a new descriptor nothing else owns.
        Some(unsafe { OwnedFd::from_raw_fd(raw) })
    }

    impl Inotify {
        /// Watches `file` itself (not its folder, whose other files may be
        /// written all the time): created empty and private when missing.
        pub(super) fn single(file: &Path) -> Option<Inotify> {
            // A link or a folder in its place is not followed: no watch (the
            // caller's timer looks instead).
            if std::fs::symlink_metadata(file).is_ok_and(|m| !m.file_type().is_file()) {
                return None;
            }
            let _ = pcmail_fsmode::ensure_private_file(file);
            let fd = inotify_fd()?;
            let path = std::ffi::CString::new(file.as_os_str().as_bytes()).ok()?;
            // SAFETY: valid descriptor and NUL-terminated path.
            if unsafe { libc::inotify_add_watch(fd.as_raw_fd(), path.as_ptr(), SINGLE_MASK) } < 0 {
                return None;
            }
            Some(Inotify { fd, names: vec![], single: Some((path, std::sync::atomic::AtomicBool::new(true))) })
        }

        pub(super) fn is_single(&self) -> bool {
            self.single.is_some()
        }

        /// A single file's watch that ended (the file was removed or
        /// replaced) is set up again once the file is back.
        fn rewatch(&self) {
            use std::sync::atomic::Ordering::Relaxed;
            if let Some((path, live)) = &self.single {
                // SAFETY: valid descriptor and NUL-terminated path.
                if !live.load(Relaxed)
                    && unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), path.as_ptr(), SINGLE_MASK) } >= 0
                {
                    live.store(true, Relaxed);
                }
            }
        }

        /// Watches `db` and its write-ahead log, in their folder.
        pub(super) fn new(db: &Path) -> Option<Inotify> {
            let dir = match db.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            let name = db.file_name()?.to_os_string();
            let mut wal = name.clone();
            wal.push("-wal");
            let names = vec![name, wal];
            let fd = inotify_fd()?;
            let dir_c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
            // Writes (a truncation too), and a log created or moved into
            // place (SQLite makes a new one after the old is deleted). Not
            // IN_CLOSE_WRITE: SQLite opens its files for writing even to
            // read, so every reader's exit would wake the waiter.
            let mask = libc::IN_MODIFY | libc::IN_CREATE | libc::IN_MOVED_TO;
            // SAFETY: valid descriptor and NUL-terminated path.
            if unsafe { libc::inotify_add_watch(fd.as_raw_fd(), dir_c.as_ptr(), mask) } < 0 {
                return None;
            }
            Some(Inotify { fd, names, single: None })
        }

        pub(super) fn wait(&self, timeout: Duration) -> bool {
            self.rewatch();
            let deadline = Instant::now() + timeout;
            loop {
                if self.drain() {
                    // A signal file is written after the commit it tells
                    // of, and closed once: nothing to wait out.
                    if self.single.is_none() {
                        self.settle();
                    }
                    return true;
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return false;
                }
                if !self.poll(left) {
                    // The watch broke: say "maybe" after a pause, as a timer would.
                    std::thread::sleep(left.min(Duration::from_millis(40)));
                    return true;
                }
            }
        }

        /// Waits for the writes to stop for [`SETTLE`] (at most
        /// [`SETTLE_MAX`]): the first page of a commit wakes the waiter
        /// while the writer still holds the database, and a waiter that
        /// looked then would wait on SQLite's lock with its backoff (up to 20
        /// ms measured), or look before the commit is visible.
        /// It sleeps rather than polls: a commit is many writes, and a poll
        /// would wake for each of them.
        fn settle(&self) {
            let until = Instant::now() + SETTLE_MAX;
            while Instant::now() < until {
                std::thread::sleep(SETTLE);
                if !self.drain() {
                    return;
                }
            }
        }

        /// Waits up to `timeout` for an event to read; false when polling failed.
        fn poll(&self, timeout: Duration) -> bool {
            let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // Rounded up: a wait rounded down ends just short of its time and polls again for nothing.
            let ms = timeout.as_micros().div_ceil(1000).clamp(1, i32::MAX as u128) as i32;
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut pfd, 1, ms) };
            n >= 0 || std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
        }

        /// Reads every pending event; true when one names a watched file
        /// (or events were lost: the queue overflowed).
        pub(super) fn drain(&self) -> bool {
            let mut hit = false;
            let mut buf = [0u8; 4096];
            loop {
                // SAFETY: the buffer is valid for its length.
                let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
                if n <= 0 {
                    return hit;
                }
                hit |= self.names_a_watched_file(&buf[..n as usize]);
            }
        }

        fn names_a_watched_file(&self, mut events: &[u8]) -> bool {
            const HEAD: usize = std::mem::size_of::<libc::inotify_event>();
            let mut hit = false;
            while events.len() >= HEAD {
                // SAFETY: at least HEAD bytes; read unaligned.
                let ev: libc::inotify_event = unsafe { std::ptr::read_unaligned(events.as_ptr().cast()) };
                let len = ev.len as usize;
                let Some(raw_name) = events.get(HEAD..HEAD + len) else { break };
                let name = raw_name.split(|&b| b == 0).next().unwrap_or(&[]);
                if let Some((_, live)) = &self.single {
                    // Every event of a single file's watch is about that file.
                    if ev.mask & libc::IN_IGNORED != 0 {
                        live.store(false, std::sync::atomic::Ordering::Relaxed);
                    }
                    hit = true;
                } else if ev.mask & libc::IN_Q_OVERFLOW != 0 || self.names.iter().any(|n| n.as_bytes() == name) {
                    hit = true;
                }
                events = &events[HEAD + len..];
            }
            hit
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_to_the_log_ends_the_wait_and_other_files_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("store.db");
        std::fs::write(&db, b"x").unwrap();
        let w = FileWatch::new(&db, Duration::from_millis(40));
        if !cfg!(target_os = "linux") {
            assert!(!w.is_event_driven());
            return;
        }
        assert!(w.is_event_driven());
        // Nothing written: the whole timeout passes.
        let t = Instant::now();
        assert!(!w.wait(Duration::from_millis(150)));
        assert!(t.elapsed() >= Duration::from_millis(140));
        // Another file in the folder: still nothing.
        let other = dir.path().join("guard-leases");
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            std::fs::write(other, b"y").unwrap();
        });
        assert!(!w.wait(Duration::from_millis(150)));
        writer.join().unwrap();
        // The log, written by another process: at once.
        let wal = dir.path().join("store.db-wal");
        let t = Instant::now();
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("sleep 0.05; printf z >> '{}'", wal.display()))
            .spawn()
            .unwrap();
        assert!(w.wait(Duration::from_secs(5)));
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        child.wait().unwrap();
        // The database file itself, written in place.
        let t = Instant::now();
        let db2 = db.clone();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            use std::io::Write;
            std::fs::OpenOptions::new().append(true).open(db2).unwrap().write_all(b"w").unwrap();
        });
        assert!(w.wait(Duration::from_secs(5)));
        assert!(t.elapsed() < Duration::from_secs(2));
        writer.join().unwrap();
    }

    #[test]
    fn a_stop_flag_ends_a_sliced_wait() {
        let dir = tempfile::tempdir().unwrap();
        let w = FileWatch::new(&dir.path().join("store.db"), Duration::from_millis(40));
        let stop = std::sync::atomic::AtomicBool::new(false);
        let t = Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(100));
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            });
            let woke = w.wait_unless(Duration::from_secs(30), Duration::from_millis(50), || {
                stop.load(std::sync::atomic::Ordering::Relaxed)
            });
            // On the timer fallback a slice says "maybe": either way it ends early.
            assert!(!woke || !w.is_event_driven());
        });
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }

    /// One file watched by itself: made when missing; its writes end the
    /// wait, the writes of the folder's other files (a busy database beside
    /// it) do not; removed and made again, it is watched again.
    #[test]
    fn one_file_wakes_for_its_own_writes_only_and_after_it_was_made_again() {
        let dir = tempfile::tempdir().unwrap();
        let signal = dir.path().join("store.db-push");
        let w = FileWatch::one_file(&signal, Duration::from_millis(40));
        if !cfg!(target_os = "linux") {
            assert!(!w.is_event_driven());
            return;
        }
        assert!(w.is_event_driven() && signal.exists());
        let write_later = |path: std::path::PathBuf| {
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                std::fs::write(path, b"1").unwrap();
            })
        };
        let other = write_later(dir.path().join("store.db-wal"));
        assert!(!w.wait(Duration::from_millis(200)), "a write of another file woke it");
        other.join().unwrap();
        let own = write_later(signal.clone());
        let t = Instant::now();
        assert!(w.wait(Duration::from_secs(5)));
        assert!(t.elapsed() < Duration::from_secs(2));
        own.join().unwrap();
        // A signal as the store writes it (truncate, restrict, write,
        // close) wakes the waiter once, with no wait for more writes and no
        // second look asked for.
        // The quickest of five (a loaded machine may preempt any one): a
        // settling wait sleeps 2 ms every time.
        let mut quickest = Duration::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            pcmail_fsmode::write_private(&signal, b"1").unwrap();
            let mut active_until = Instant::now();
            assert!(w.next_look(&mut active_until, Duration::from_secs(5), None));
            quickest = quickest.min(t.elapsed());
            assert!(active_until <= Instant::now(), "asked for a second look");
            assert!(!w.wait(Duration::from_millis(100)), "one signal woke it twice");
        }
        assert!(quickest < Duration::from_millis(2), "waited after the signal: {quickest:?}");
        std::fs::remove_file(&signal).unwrap();
        let _ = w.wait(Duration::from_millis(50));
        std::fs::write(&signal, b"").unwrap();
        let again = write_later(signal.clone());
        assert!(w.wait(Duration::from_secs(5)), "not watched again once made again");
        again.join().unwrap();
        // A link in its place is not followed: no watch, the timer instead.
        #[cfg(unix)]
        {
            let target = dir.path().join("elsewhere");
            std::fs::write(&target, b"").unwrap();
            let linked = dir.path().join("linked-push");
            std::os::unix::fs::symlink(&target, &linked).unwrap();
            assert!(!FileWatch::one_file(&linked, Duration::from_millis(40)).is_event_driven());
        }
    }
}
