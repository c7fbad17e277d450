//! Lease commands answered by the running daemon: `pcmail-hook lease claim …`
//! and `pcmail-hook lease release …` are a small front that hands its
//! arguments, its folder and who it runs for ([`Caller`]) to the daemon of
//! the same `PCMAIL_HOME` over a Unix socket in that folder
//! ([`crate::config::Paths::command_socket`]), and prints what
//! the daemon answers. The daemon runs the very code `pcmail lease` runs,
//! with its store, its server connection and its statements already open, so
//! a claim costs about a bare process start instead of the whole CLI's start
//! plus two SQLite files opened and read.
//!
//! Whenever the daemon cannot answer (none runs, another version, a command
//! it does not serve, no Unix sockets on this OS) the front runs `pcmail`
//! itself with the same arguments: the answer is the same, only slower.
//! `pcmail lease claim|release` asks the daemon first as well: it saves the
//! two files' opening, not the CLI's own start.
//!
//! Only the PC user's own processes are answered: the socket is created
//! 0600 in the user's pcmail folder, and the daemon checks the peer's uid.

use crate::process::Caller;
use serde::{Deserialize, Serialize};

/// Longer than any answer of a lease command; a request or answer past it is
/// refused, not read on.
pub const MAX_MESSAGE: usize = 1 << 20;

/// What the front sends: one JSON line.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Request {
    /// The front's version: a daemon of another version does not answer
    /// (its commands may differ), and the front runs `pcmail` instead.
    pub version: String,
    /// The arguments after the program name (`lease`, `claim`, …).
    pub args: Vec<String>,
    pub caller: Caller,
    /// [`identity_digest`] of the front's environment: a front that names
    /// another secret or credential than the daemon's is not answered with
    /// the daemon's (`pcmail` run with that environment answers it).
    #[serde(default)]
    pub identity: u64,
}

/// The variables that choose which secret or credential a command presents
/// (pcmail-client's `token::ADMIN_ENV` and `token::credential::ENV`; a test
/// there holds the lists equal).
pub const IDENTITY_ENV: [&str; 3] = ["PCMAIL_ADMIN_TOKEN", "PCMAIL_TOKEN", "PCMAIL_CREDENTIAL"];

/// A digest of this process's [`IDENTITY_ENV`] values (set or not): equal in
/// the front and the daemon when both present the same identity. The values
/// themselves never leave the process. Front and daemon are one version
/// (checked first), so they hash alike.
pub fn identity_digest() -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for name in IDENTITY_ENV {
        std::env::var_os(name).filter(|v| !v.is_empty()).hash(&mut h);
    }
    h.finish()
}

/// What the daemon answers: one JSON line, then it closes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct Reply {
    /// False: not answered here (another version, a command the daemon does
    /// not serve); the front runs `pcmail`, which answers it.
    pub served: bool,
    pub exit: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Reply {
    pub fn not_served() -> Reply {
        Reply::default()
    }
}

/// The arguments the daemon may answer: `lease claim …` and `lease release …`
/// (the other lease commands read or wait, where a process start is not what
/// an agent waits for).
pub fn is_served(args: &[String]) -> bool {
    matches!(args, [lease, action, ..] if lease == "lease" && (action == "claim" || action == "release"))
}

/// How the front's request ended.
#[derive(Debug)]
pub enum Asked {
    Answered(Reply),
    /// Nothing was applied: no daemon, another version, a refused command.
    NotServed,
    /// The request went out and no answer came back (the daemon died or
    /// hung): the command may have been applied, so it is not run again.
    Lost(String),
}

#[cfg(unix)]
pub use unix::{answers, ask, bind, peer_is_this_user, read_request, readable_within, write_reply};

#[cfg(unix)]
mod unix {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::os::unix::net::{UnixListener, UnixStream};
    use std::path::Path;
    use std::time::Duration;

    /// How long the front waits for the answer: longer than the client's own
    /// patience with an unreachable server, so a slow answer is still the
    /// answer.
    const ANSWER_WAIT: Duration = Duration::from_secs(120);

    /// Asks the daemon listening at `socket`.
    pub fn ask(socket: &Path, req: &Request) -> Asked {
        let Ok(mut stream) = UnixStream::connect(socket) else {
            return Asked::NotServed;
        };
        let Ok(mut line) = serde_json::to_vec(req) else {
            return Asked::NotServed;
        };
        line.push(b'\n');
        // A daemon that accepts and never reads cannot hold the front.
        let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
        let sent = stream.write_all(&line).is_ok();
        // A daemon that refuses without reading (a full door) may have
        // answered and closed before the request went out: its answer is
        // still there to read, and nothing was applied.
        let _ = stream.set_read_timeout(Some(if sent { ANSWER_WAIT } else { Duration::from_secs(1) }));
        let (answer, error) = read_line(&mut stream);
        if !sent && !answer.ends_with(b"\n") {
            return Asked::NotServed;
        }
        // A whole line is the whole answer, whatever the socket says after
        // it: a daemon that refuses without reading the request closes with
        // the request unread, which resets the connection behind its answer.
        if answer.ends_with(b"\n") {
            return match serde_json::from_slice::<Reply>(&answer) {
                Ok(r) if r.served => Asked::Answered(r),
                Ok(_) => Asked::NotServed,
                Err(e) => Asked::Lost(format!("the daemon's answer could not be read: {e}")),
            };
        }
        match error {
            Some(e) => Asked::Lost(format!("no answer from the daemon: {e}")),
            None => Asked::Lost("the daemon took the command and closed without a whole answer".into()),
        }
    }

    /// Bytes up to and including the first line end (or the end, or an
    /// error, or [`MAX_MESSAGE`]), and the error that ended the read.
    fn read_line(stream: &mut UnixStream) -> (Vec<u8>, Option<std::io::Error>) {
        let mut line = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match stream.read(&mut buf) {
                Ok(0) => return (line, None),
                Ok(n) => {
                    line.extend_from_slice(&buf[..n]);
                    if line.ends_with(b"\n") || line.len() > MAX_MESSAGE {
                        return (line, None);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return (line, Some(e)),
            }
        }
    }

    /// Whether a daemon answers at `socket` (`pcmail doctor`): a request
    /// it does not serve gets its refusal back at once.
    pub fn answers(socket: &Path) -> bool {
        let probe = Request {
            version: "probe".into(),
            args: vec![],
            caller: Caller { parent: None, cwd: None, session: None, agent_pid: None },
            identity: 0,
        };
        let Ok(mut stream) = UnixStream::connect(socket) else { return false };
        let Ok(mut line) = serde_json::to_vec(&probe) else { return false };
        line.push(b'\n');
        let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        if stream.write_all(&line).is_err() {
            return false;
        }
        let (answer, _) = read_line(&mut stream);
        answer.ends_with(b"\n") && serde_json::from_slice::<Reply>(&answer).is_ok()
    }

    /// The daemon's socket: made afresh (the daemon holds its lock, so a file
    /// left there is a dead daemon's), readable and writable by the user only.
    pub fn bind(socket: &Path) -> std::io::Result<UnixListener> {
        use std::os::unix::fs::PermissionsExt;
        match std::fs::remove_file(socket) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        // Created under a umask that leaves nobody else a moment to connect.
        // SAFETY: umask has no preconditions; it is restored at once.
        let old = unsafe { libc::umask(0o177) };
        let bound = UnixListener::bind(socket);
        // SAFETY: as above.
        unsafe { libc::umask(old) };
        let listener = bound?;
        std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))?;
        Ok(listener)
    }

    /// Whether the process at the other end runs as this process's user.
    pub fn peer_is_this_user(stream: &UnixStream) -> bool {
        use std::os::fd::AsRawFd;
        // SAFETY: getuid has no preconditions.
        let me = unsafe { libc::getuid() };
        peer_uid(stream.as_raw_fd()) == Some(me)
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn peer_uid(fd: std::os::fd::RawFd) -> Option<libc::uid_t> {
        let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: cred and len are valid for writes of the sizes given.
        let r = unsafe {
            libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_PEERCRED, (&mut cred as *mut libc::ucred).cast(), &mut len)
        };
        (r == 0).then_some(cred.uid)
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn peer_uid(fd: std::os::fd::RawFd) -> Option<libc::uid_t> {
        let (mut uid, mut gid) = (0, 0);
        // SAFETY: uid and gid are valid for writes.
        let r = unsafe { libc::getpeereid(fd, &mut uid, &mut gid) };
        (r == 0).then_some(uid)
    }

    /// Whether the connection has something to read within `wait` (a
    /// front writes its request right after it connects).
    pub fn readable_within(stream: &UnixStream, wait: Duration) -> bool {
        use std::os::fd::AsRawFd;
        let mut fd = libc::pollfd { fd: stream.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ms = wait.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: one valid pollfd, its count 1.
        let r = unsafe { libc::poll(&mut fd, 1, ms) };
        r > 0 && fd.revents & libc::POLLIN != 0
    }

    /// The request on an accepted connection: one line, each read waiting
    /// at most `wait` (a connection that sends nothing, or half a line,
    /// cannot hold the daemon).
    pub fn read_request(stream: &UnixStream, wait: Duration) -> Result<Request, String> {
        stream.set_read_timeout(Some(wait)).map_err(|e| e.to_string())?;
        let mut line = Vec::new();
        BufReader::new(stream.take(MAX_MESSAGE as u64 + 1))
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("reading the request: {e}"))?;
        if line.len() > MAX_MESSAGE {
            return Err("the request is too long".into());
        }
        serde_json::from_slice(&line).map_err(|e| format!("the request is not one: {e}"))
    }

    pub fn write_reply(mut stream: &UnixStream, reply: &Reply) -> std::io::Result<()> {
        let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
        let mut line = serde_json::to_vec(reply)?;
        line.push(b'\n');
        stream.write_all(&line)
    }
}

/// Elsewhere no daemon answers: the front always runs `pcmail`.
#[cfg(not(unix))]
pub fn ask(_socket: &std::path::Path, _req: &Request) -> Asked {
    Asked::NotServed
}

#[cfg(not(unix))]
pub fn answers(_socket: &std::path::Path) -> bool {
    false
}

/// `pcmail-hook lease …`: the daemon's answer, or `pcmail` run with the same
/// arguments. Returns the exit code (where the process image is not
/// replaced).
pub fn front_main(args: Vec<std::ffi::OsString>, own_exe: Option<std::path::PathBuf>) -> i32 {
    match answered_by_daemon(&args) {
        Some(exit) => exit,
        None => run_pcmail(args, own_exe),
    }
}

/// The running daemon's answer to these arguments (those after the program
/// name), printed here; its exit code. None: the daemon does not answer them
/// (none runs, another version, a command it does not serve), and nothing
/// was applied. `pcmail lease claim|release` asks this first too.
pub fn answered_by_daemon(args: &[std::ffi::OsString]) -> Option<i32> {
    use std::io::Write;
    let text: Vec<String> = args.iter().map(|a| a.to_str().map(str::to_string)).collect::<Option<_>>()?;
    if !is_served(&text) {
        return None;
    }
    let paths = crate::config::Paths::from_env().ok()?;
    let req = Request {
        version: env!("CARGO_PKG_VERSION").into(),
        args: text,
        caller: Caller::this_process(),
        identity: identity_digest(),
    };
    match ask(&paths.command_socket(), &req) {
        Asked::Answered(r) => {
            let _ = std::io::stdout().lock().write_all(r.stdout.as_bytes());
            let _ = std::io::stderr().lock().write_all(r.stderr.as_bytes());
            Some(r.exit)
        }
        Asked::Lost(why) => {
            let _ = writeln!(
                std::io::stderr().lock(),
                "pcmail: {why}; the command may have been applied: `pcmail lease list` says"
            );
            Some(1)
        }
        Asked::NotServed => None,
    }
}

/// `pcmail` with these arguments, in this process's place where the OS
/// allows it; exit 127 when no `pcmail` is installed.
fn run_pcmail(args: Vec<std::ffi::OsString>, own_exe: Option<std::path::PathBuf>) -> i32 {
    use std::io::Write;
    let Some(pcmail) = crate::hook::find_pcmail(own_exe) else {
        let _ = writeln!(
            std::io::stderr().lock(),
            "pcmail: no `pcmail` program beside pcmail-hook or on PATH to run the command"
        );
        return 127;
    };
    let mut cmd = std::process::Command::new(&pcmail);
    cmd.args(args);
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let e = cmd.exec();
        let _ = writeln!(std::io::stderr().lock(), "pcmail: cannot run {}: {e}", pcmail.display());
        126
    }
    #[cfg(not(unix))]
    match cmd.status() {
        Ok(s) => s.code().unwrap_or(1),
        Err(e) => {
            let _ = writeln!(std::io::stderr().lock(), "pcmail: cannot run {}: {e}", pcmail.display());
            126
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn caller() -> Caller {
        Caller { parent: Some(1), cwd: None, session: None, agent_pid: None }
    }

    #[test]
    fn only_lease_claim_and_release_are_served() {
        let s = |v: &[&str]| is_served(&v.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        assert!(s(&["lease", "claim", "x"]) && s(&["lease", "release", "x"]) && s(&["lease", "claim"]));
        assert!(!s(&["lease", "list"]) && !s(&["send", "claim"]) && !s(&["lease"]) && !s(&[]));
        assert!(!s(&["--json", "lease", "claim", "x"]), "an option first is left to pcmail");
    }

    #[test]
    fn no_daemon_means_not_served_and_a_stranger_socket_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.sock");
        let req =
            Request { version: "0".into(), args: vec!["lease".into(), "claim".into()], caller: caller(), identity: 0 };
        assert!(matches!(ask(&path, &req), Asked::NotServed));
        // A file left by a dead daemon is no listener: still not served, and bind replaces it.
        std::fs::write(&path, b"left over").unwrap();
        assert!(matches!(ask(&path, &req), Asked::NotServed));
        let listener = bind(&path).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let server = std::thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            assert!(peer_is_this_user(&s));
            let got = read_request(&s, std::time::Duration::from_secs(5)).unwrap();
            let reply = Reply { served: true, exit: 10, stdout: got.args.join(" "), stderr: "e\n".into() };
            write_reply(&s, &reply).unwrap();
        });
        match ask(&path, &req) {
            Asked::Answered(r) => {
                assert_eq!((r.exit, r.stdout.as_str(), r.stderr.as_str()), (10, "lease claim", "e\n"))
            }
            other => panic!("{other:?}"),
        }
        server.join().unwrap();
    }

    #[test]
    fn a_daemon_that_closes_without_answering_is_a_lost_answer_not_a_retry() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.sock");
        let listener = bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            read_request(&s, std::time::Duration::from_secs(5)).unwrap();
            drop(s);
            // Another version's refusal: not served.
            let (s, _) = listener.accept().unwrap();
            read_request(&s, std::time::Duration::from_secs(5)).unwrap();
            write_reply(&s, &Reply::not_served()).unwrap();
        });
        let req = Request {
            version: "0".into(),
            args: vec!["lease".into(), "release".into()],
            caller: caller(),
            identity: 0,
        };
        assert!(matches!(ask(&path, &req), Asked::Lost(_)));
        assert!(matches!(ask(&path, &req), Asked::NotServed));
        server.join().unwrap();
    }

    #[test]
    fn the_probe_tells_a_listening_daemon_from_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.sock");
        assert!(!answers(&path));
        let listener = bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            let req = read_request(&s, std::time::Duration::from_secs(5)).unwrap();
            assert!(!is_served(&req.args));
            write_reply(&s, &Reply::not_served()).unwrap();
            // Accepted and never answered: not a daemon that answers.
            let (s, _) = listener.accept().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(2500));
            drop(s);
        });
        assert!(answers(&path));
        assert!(!answers(&path));
        server.join().unwrap();
    }

    #[test]
    fn a_refusal_written_without_reading_the_request_is_still_heard() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.sock");
        let listener = bind(&path).unwrap();
        // The request is still unread when the daemon closes.
        let req =
            Request { version: "0".into(), args: vec!["lease".into(), "claim".into()], caller: caller(), identity: 0 };
        let server = std::thread::spawn(move || {
            for _ in 0..20 {
                let (s, _) = listener.accept().unwrap();
                std::thread::sleep(std::time::Duration::from_millis(5));
                write_reply(&s, &Reply::not_served()).unwrap();
            }
        });
        for _ in 0..20 {
            let asked = ask(&path, &req);
            assert!(matches!(asked, Asked::NotServed), "{asked:?}");
        }
        server.join().unwrap();
    }

    #[test]
    fn a_request_without_its_line_end_or_too_long_is_refused() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let writer = std::thread::spawn(move || {
            use std::io::Write;
            // The reader stops at its limit: the rest may find the socket closed.
            let _ = (&a).write_all(&vec![b'x'; MAX_MESSAGE + 10]);
        });
        assert!(read_request(&b, std::time::Duration::from_secs(5)).unwrap_err().contains("too long"));
        drop(b);
        writer.join().unwrap();
        // Without its line end, what came is still not a request.
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        std::io::Write::write_all(&mut &a, b"{\"version\":").unwrap();
        drop(a);
        assert!(read_request(&b, std::time::Duration::from_secs(5)).is_err());
    }
}
