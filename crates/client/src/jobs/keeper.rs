//! The keeper of one job's process tree on Linux: a small process, forked
//! from the executor, that is the job's parent and makes sure nothing of the
//! job outlives the executor, even when the executor is killed with -9.
//!
//! Why this design and not another:
//! - `PR_SET_PDEATHSIG` on the job alone reaches only its direct child, and
//!   fires when the *thread* that forked it exits, not the executor process:
//!   a job started from a worker thread would be killed when that thread
//!   ends, and a grandchild never.
//! - A process-group kill misses a descendant that called `setsid` (or
//!   `setpgid`) and so left the group.
//! - A cgroup would hold, but needs a delegated cgroup subtree (systemd user
//!   slices, root, or cgroup v2 delegation), which a plain `pcmail daemon`
//!   started from a shell does not have.
//!
//! So the executor forks a keeper (no exec: it runs the code below, which
//! only makes async-signal-safe system calls and allocates nothing, as
//! required after a fork in a threaded process). The keeper marks itself a
//! child subreaper (`PR_SET_CHILD_SUBREAPER`): every orphan of the job,
//! whatever session or group it moved to, is reparented to it rather than to
//! init, so the keeper can always find what is left. It starts the job in a
//! process group of its own, then waits for one of: the job's leader exits,
//! the executor asks it to kill the job (one byte on a pipe), or the
//! executor is gone, seen as end-of-file on that pipe: the executor holds
//! the only write end, and the kernel closes it however the executor dies.
//! Then it kills the job's group and, one by one, every process reparented
//! to it (each with its own group), until it has no child left; it writes
//! the leader's real wait status, atomically and 0600, beside the run's log
//! (the exit record), reports it on a second pipe, and exits.
//!
//! The keeper holds an `flock` on `<log>.keeper` for its whole life, so an
//! executor that restarts can tell "the keeper is still finishing" (wait)
//! from "the keeper is gone without a record" (the outcome is unknown).

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

const TAG_STARTED: i32 = 1;
const TAG_NOT_STARTED: i32 = 2;
const TAG_ENDED: i32 = 3;
/// A wait status that cannot be a real one: the leader's end is not known.
const STATUS_UNKNOWN: i32 = -1;

/// Why the keeper ended the tree (written in the exit record).
const CAUSE_EXITED: &[u8] = b"exited";
const CAUSE_EXECUTOR_GONE: &[u8] = b"executor_gone";
const CAUSE_KILLED: &[u8] = b"killed";

/// A running keeper, as its executor sees it.
pub(crate) struct Keeper {
    pid: libc::pid_t,
    leader: libc::pid_t,
    /// The write end of the life pipe: closing it (or dying) ends the job.
    life: Option<OwnedFd>,
    info: OwnedFd,
    reaped: bool,
}

/// Everything the keeper and the job need, made before the fork: after it
/// nothing may allocate.
struct Prepared {
    candidates: Vec<CString>,
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: CString,
    exit_tmp: CString,
    exit_final: CString,
    lock: CString,
    life_r: OwnedFd,
    info_w: OwnedFd,
    null: OwnedFd,
    log: OwnedFd,
}

fn cstr(b: &[u8], what: &str) -> Result<CString, String> {
    CString::new(b).map_err(|_| format!("{what} holds a NUL byte"))
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    // SAFETY: both descriptors were just made and are owned here only.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A descriptor numbered 3 or above (close-on-exec), so that putting the
/// job's stdin, stdout and stderr in place never overwrites it.
fn above_stdio(fd: OwnedFd) -> Result<OwnedFd, String> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: duplicates a descriptor owned here.
    let n = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if n < 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    // SAFETY: `n` is a new descriptor owned here only.
    Ok(unsafe { OwnedFd::from_raw_fd(n) })
}

/// Where the program may be, in the order `execvp` tries them: itself when
/// it holds a `/`, else each directory of the job's `PATH`.
fn candidates(program: &str, env: &[(String, String)]) -> Result<Vec<CString>, String> {
    if program.contains('/') {
        return Ok(vec![cstr(program.as_bytes(), "the program")?]);
    }
    let path = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| std::ffi::OsString::from(v))
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let mut out = vec![];
    for dir in std::env::split_paths(&path) {
        let dir = if dir.as_os_str().is_empty() { std::path::PathBuf::from(".") } else { dir };
        out.push(cstr(dir.join(program).as_os_str().as_bytes(), "PATH")?);
    }
    Ok(out)
}

/// `<log>` with its extension replaced: the exit record and the lock.
pub(crate) fn beside(log: &Path, ext: &str) -> std::path::PathBuf {
    log.with_extension(ext)
}

impl Keeper {
    /// Forks the keeper, which starts `argv` in `cwd` with the executor's
    /// environment plus `env`, stdin empty, stdout and stderr on `log_file`.
    /// Answers once the job's program runs (or could not be started: the
    /// reason, as the OS said it).
    pub(crate) fn spawn(
        argv: &[String],
        cwd: &Path,
        env: &[(String, String)],
        log_file: &std::fs::File,
        log: &Path,
    ) -> Result<Keeper, String> {
        let program = argv.first().ok_or("empty argv")?;
        let mut vars: Vec<(std::ffi::OsString, std::ffi::OsString)> =
            std::env::vars_os().filter(|(k, _)| !env.iter().any(|(n, _)| k.as_bytes() == n.as_bytes())).collect();
        vars.extend(env.iter().map(|(k, v)| (k.into(), v.into())));
        let mut envp = vec![];
        for (k, v) in &vars {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            // An inherited variable that cannot be passed is left out, as std does.
            if let Ok(c) = CString::new(kv) {
                envp.push(c);
            }
        }
        let (life_r, life_w) = pipe()?;
        let (info_r, info_w) = pipe()?;
        let null = std::fs::File::open("/dev/null").map_err(|e| format!("/dev/null: {e}"))?;
        let log_fd = log_file.try_clone().map_err(|e| e.to_string())?;
        let p = Prepared {
            candidates: candidates(program, env)?,
            argv: argv.iter().map(|a| cstr(a.as_bytes(), "an argument")).collect::<Result<_, _>>()?,
            envp,
            cwd: cstr(cwd.as_os_str().as_bytes(), "the folder")?,
            exit_tmp: cstr(beside(log, "exit.tmp").as_os_str().as_bytes(), "the log path")?,
            exit_final: cstr(beside(log, "exit").as_os_str().as_bytes(), "the log path")?,
            lock: cstr(beside(log, "keeper").as_os_str().as_bytes(), "the log path")?,
            life_r: above_stdio(life_r)?,
            info_w: above_stdio(info_w)?,
            null: above_stdio(OwnedFd::from(null))?,
            log: above_stdio(OwnedFd::from(log_fd))?,
        };
        let mut argv_p: Vec<*const libc::c_char> = p.argv.iter().map(|c| c.as_ptr()).collect();
        argv_p.push(std::ptr::null());
        let mut envp_p: Vec<*const libc::c_char> = p.envp.iter().map(|c| c.as_ptr()).collect();
        envp_p.push(std::ptr::null());
        // SAFETY: fork; the child runs `keeper_main`, which never returns and
        // only makes async-signal-safe calls on data prepared above.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
        if pid == 0 {
            // SAFETY: in the forked child; see `keeper_main`.
            unsafe { keeper_main(&p, &argv_p, &envp_p) }
        }
        drop(p); // the executor keeps only its ends of the pipes
        let mut k = Keeper { pid, leader: 0, life: Some(life_w), info: info_r, reaped: false };
        match k.read_msg() {
            Some((TAG_STARTED, leader)) => {
                k.leader = leader;
                Ok(k)
            }
            Some((TAG_NOT_STARTED, errno)) => {
                k.wait();
                Err(std::io::Error::from_raw_os_error(errno).to_string())
            }
            _ => {
                k.wait();
                Err("its keeper process ended before the job started".into())
            }
        }
    }

    /// The job's leader (its process group has the same id).
    pub(crate) fn leader(&self) -> i64 {
        self.leader as i64
    }

    fn read_msg(&self) -> Option<(i32, i32)> {
        let mut buf = [0u8; 8];
        let mut got = 0;
        while got < buf.len() {
            // SAFETY: reads into the rest of a buffer owned here.
            let n = unsafe {
                libc::read(self.info.as_raw_fd(), buf[got..].as_mut_ptr() as *mut libc::c_void, buf.len() - got)
            };
            if n < 0 && last_errno() == libc::EINTR {
                continue;
            }
            if n <= 0 {
                return None;
            }
            got += n as usize;
        }
        let tag = i32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]);
        let val = i32::from_ne_bytes([buf[4], buf[5], buf[6], buf[7]]);
        Some((tag, val))
    }

    /// Asks the keeper to kill the whole tree now (a cancel, the time limit).
    pub(crate) fn kill(&mut self) {
        if let Some(w) = &self.life {
            // SAFETY: writes one byte to a pipe owned here.
            unsafe { libc::write(w.as_raw_fd(), b"k".as_ptr() as *const libc::c_void, 1) };
        }
    }

    /// The leader's exit code (None: a signal, or not known) once the keeper
    /// has ended the tree and exited; None while it runs.
    pub(crate) fn try_wait(&mut self) -> Option<Option<i32>> {
        self.wait_flags(libc::WNOHANG)
    }

    /// Waits for the keeper (after `kill`: a few ms).
    pub(crate) fn wait(&mut self) -> Option<i32> {
        self.wait_flags(0).flatten()
    }

    fn wait_flags(&mut self, flags: libc::c_int) -> Option<Option<i32>> {
        if self.reaped {
            return Some(None);
        }
        let mut st = 0;
        loop {
            // SAFETY: waits for this keeper, a child of this process.
            let r = unsafe { libc::waitpid(self.pid, &mut st, flags) };
            if r == 0 {
                return None;
            }
            if r < 0 && last_errno() == libc::EINTR {
                continue;
            }
            self.reaped = true;
            self.life = None;
            return Some(match self.read_msg() {
                Some((TAG_ENDED, status)) if status != STATUS_UNKNOWN => code_of(status),
                _ => None,
            });
        }
    }
}

impl Drop for Keeper {
    /// An executor that drops a running keeper (a panic in its worker) ends
    /// the job: closing the life pipe is the keeper's signal.
    fn drop(&mut self) {
        if !self.reaped {
            self.life = None;
            self.wait();
        }
    }
}

/// The exit code of a wait status; None when a signal ended the process.
pub(crate) fn code_of(status: i32) -> Option<i32> {
    libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status))
}

/// The signal of a wait status, when one ended the process.
pub(crate) fn signal_of(status: i32) -> Option<i32> {
    libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status))
}

// ---- the keeper process: async-signal-safe from here on ----

/// A fixed buffer that text is appended to without allocating.
struct Buf<const N: usize> {
    b: [u8; N],
    len: usize,
}

impl<const N: usize> Buf<N> {
    fn new() -> Self {
        Buf { b: [0; N], len: 0 }
    }
    fn push(&mut self, s: &[u8]) {
        for &c in s {
            if self.len < N {
                self.b[self.len] = c;
                self.len += 1;
            }
        }
    }
    fn num(&mut self, v: i64) {
        let mut digits = [0u8; 20];
        let mut n = v.unsigned_abs();
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 || i == 0 {
                break;
            }
        }
        if v < 0 {
            self.push(b"-");
        }
        self.push(&digits[i..]);
    }
    /// NUL-terminated, for a path.
    fn c(&mut self) -> *const libc::c_char {
        if self.len >= N {
            self.len = N - 1;
        }
        self.b[self.len] = 0;
        self.b.as_ptr() as *const libc::c_char
    }
}

unsafe fn send(fd: RawFd, tag: i32, val: i32) {
    let mut m = [0u8; 8];
    m[..4].copy_from_slice(&tag.to_ne_bytes());
    m[4..].copy_from_slice(&val.to_ne_bytes());
    libc::write(fd, m.as_ptr() as *const libc::c_void, 8);
}

unsafe fn errno() -> i32 {
    *libc::__errno_location()
}

/// Closes every descriptor above 2 but those in `keep`.
unsafe fn close_others(keep: &mut [RawFd]) {
    keep.sort_unstable();
    let mut from: libc::c_uint = 3;
    for &k in keep.iter() {
        if k as libc::c_uint >= from {
            if k as libc::c_uint > from {
                close_range(from, k as libc::c_uint - 1);
            }
            from = k as libc::c_uint + 1;
        }
    }
    close_range(from, libc::c_uint::MAX);
}

unsafe fn close_range(first: libc::c_uint, last: libc::c_uint) {
    if libc::syscall(libc::SYS_close_range, first, last, 0) == 0 {
        return;
    }
    // Before Linux 5.9: one by one, up to a bound no executor reaches.
    let mut fd = first;
    while fd <= last && fd < 65_536 {
        libc::close(fd as RawFd);
        fd += 1;
    }
}

/// The keeper: never returns.
unsafe fn keeper_main(p: &Prepared, argv: &[*const libc::c_char], envp: &[*const libc::c_char]) -> ! {
    // A process group of its own: a Ctrl-C meant for a foreground daemon
    // reaches the daemon, whose end then ends the job through the pipe.
    libc::setpgid(0, 0);
    for sig in 1..32 {
        if sig != libc::SIGKILL && sig != libc::SIGSTOP {
            libc::signal(sig, libc::SIG_DFL);
        }
    }
    // Writing to a gone executor must not kill the keeper before it cleaned up.
    libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    let mut set: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut set);
    libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    let (life, info) = (p.life_r.as_raw_fd(), p.info_w.as_raw_fd());
    // Copies of other jobs' life pipes (and the daemon's files) would keep
    // those pipes open after the executor died: only what the keeper needs stays.
    close_others(&mut [life, info, p.null.as_raw_fd(), p.log.as_raw_fd()]);
    let lock = libc::open(p.lock.as_ptr(), libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC | libc::O_NOFOLLOW, 0o600);
    if lock >= 0 {
        libc::fchmod(lock, 0o600);
        libc::flock(lock, libc::LOCK_EX | libc::LOCK_NB);
    }
    libc::prctl(
        libc::PR_SET_CHILD_SUBREAPER,
        1 as libc::c_ulong,
        0 as libc::c_ulong,
        0 as libc::c_ulong,
        0 as libc::c_ulong,
    );
    let mut ep = [0 as RawFd; 2];
    if libc::pipe2(ep.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
        send(info, TAG_NOT_STARTED, errno());
        libc::_exit(1);
    }
    let me = libc::getpid();
    let leader = libc::fork();
    if leader == 0 {
        job_main(p, argv, envp, ep[1], me);
    }
    if leader < 0 {
        send(info, TAG_NOT_STARTED, errno());
        libc::_exit(1);
    }
    // Set on both sides, so the group exists before anything kills it.
    libc::setpgid(leader, leader);
    libc::close(ep[1]);
    let mut e = [0u8; 4];
    let mut got = 0usize;
    while got < 4 {
        let n = libc::read(ep[0], e[got..].as_mut_ptr() as *mut libc::c_void, 4 - got);
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        if n <= 0 {
            break;
        }
        got += n as usize;
    }
    libc::close(ep[0]);
    if got == 4 {
        let mut st = 0;
        libc::waitpid(leader, &mut st, 0);
        send(info, TAG_NOT_STARTED, i32::from_ne_bytes(e));
        libc::_exit(1);
    }
    send(info, TAG_STARTED, leader);

    let pidfd = libc::syscall(libc::SYS_pidfd_open, leader, 0) as RawFd;
    let mut status: Option<i32> = None;
    let cause;
    loop {
        reap(leader, &mut status);
        if status.is_some() {
            cause = CAUSE_EXITED;
            break;
        }
        let mut fds = [
            libc::pollfd { fd: life, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: pidfd, events: libc::POLLIN, revents: 0 },
        ];
        let nfds = if pidfd >= 0 { 2 } else { 1 };
        // With a pidfd the leader's end wakes the poll; the timeout only reaps
        // orphans. Without one (before Linux 5.3), a short period.
        let r = libc::poll(fds.as_mut_ptr(), nfds, if pidfd >= 0 { 500 } else { 20 });
        if r > 0 && fds[0].revents != 0 {
            let mut b = [0u8; 1];
            let n = libc::read(life, b.as_mut_ptr() as *mut libc::c_void, 1);
            if n == 1 {
                cause = CAUSE_KILLED;
                break;
            }
            if n == 0 || (errno() != libc::EINTR && errno() != libc::EAGAIN) {
                cause = CAUSE_EXECUTOR_GONE;
                break;
            }
        }
    }
    kill_tree(leader, &mut status);
    write_exit(p, leader, status, cause);
    send(info, TAG_ENDED, status.unwrap_or(STATUS_UNKNOWN));
    libc::_exit(0);
}

/// The job's leader: its own group, dies with the keeper, then the program.
unsafe fn job_main(
    p: &Prepared,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
    err: RawFd,
    keeper: libc::pid_t,
) -> ! {
    libc::setpgid(0, 0);
    // Only the keeper's own death (it is single-threaded, so no thread-exit
    // surprise): the leader then goes too, the rest is found by the next executor.
    libc::prctl(
        libc::PR_SET_PDEATHSIG,
        libc::SIGKILL as libc::c_ulong,
        0 as libc::c_ulong,
        0 as libc::c_ulong,
        0 as libc::c_ulong,
    );
    if libc::getppid() != keeper {
        libc::_exit(1);
    }
    libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    if libc::dup2(p.null.as_raw_fd(), 0) < 0
        || libc::dup2(p.log.as_raw_fd(), 1) < 0
        || libc::dup2(p.log.as_raw_fd(), 2) < 0
    {
        exec_failed(err, errno());
    }
    if libc::chdir(p.cwd.as_ptr()) != 0 {
        exec_failed(err, errno());
    }
    let mut last = libc::ENOENT;
    for c in &p.candidates {
        libc::execve(c.as_ptr(), argv.as_ptr(), envp.as_ptr());
        let e = errno();
        // As execvp: a missing file tries the next directory; any other
        // error is remembered (and tried on, like EACCES).
        if e != libc::ENOENT && e != libc::ENOTDIR {
            last = e;
        }
    }
    exec_failed(err, last)
}

unsafe fn exec_failed(err: RawFd, e: i32) -> ! {
    let b = e.to_ne_bytes();
    libc::write(err, b.as_ptr() as *const libc::c_void, 4);
    libc::_exit(127)
}

/// Reaps every child that has ended; the leader's status is kept.
unsafe fn reap(leader: libc::pid_t, status: &mut Option<i32>) -> bool {
    loop {
        let mut st = 0;
        let r = libc::waitpid(-1, &mut st, libc::WNOHANG);
        if r == leader {
            *status = Some(st);
        }
        if r == 0 {
            return true; // children remain
        }
        if r < 0 {
            if errno() == libc::EINTR {
                continue;
            }
            return false; // none left (ECHILD)
        }
    }
}

/// Kills the job's group, then each process reparented to the keeper (and
/// its group), until the keeper has no child left.
unsafe fn kill_tree(leader: libc::pid_t, status: &mut Option<i32>) {
    libc::kill(-leader, libc::SIGKILL);
    // A process stuck in the kernel may take a while to die: bounded at 30 s.
    for _ in 0..3000 {
        if !reap(leader, status) {
            return;
        }
        each_child(&mut |c| {
            libc::kill(-c, libc::SIGKILL);
            libc::kill(c, libc::SIGKILL);
        });
        let mut none: [libc::pollfd; 0] = [];
        libc::poll(none.as_mut_ptr(), 0, 10);
    }
}

/// Calls `f` for each child of this (single-threaded) process: from
/// `/proc/thread-self/children`, else by scanning `/proc/*/stat`.
unsafe fn each_child(f: &mut dyn FnMut(libc::pid_t)) {
    let fd = libc::open(c"/proc/thread-self/children".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
    if fd >= 0 {
        let mut b = [0u8; 4096];
        let mut n: i64 = 0;
        loop {
            let r = libc::read(fd, b.as_mut_ptr() as *mut libc::c_void, b.len());
            if r <= 0 {
                break;
            }
            let mut i = 0usize;
            while i < r as usize {
                let c = b[i];
                if c.is_ascii_digit() {
                    n = n * 10 + (c - b'0') as i64;
                } else if n > 0 {
                    f(n as libc::pid_t);
                    n = 0;
                }
                i += 1;
            }
        }
        if n > 0 {
            f(n as libc::pid_t);
        }
        libc::close(fd);
        return;
    }
    scan_proc(libc::getpid(), f);
}

unsafe fn scan_proc(me: libc::pid_t, f: &mut dyn FnMut(libc::pid_t)) {
    let dir = libc::open(c"/proc".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC);
    if dir < 0 {
        return;
    }
    let mut b = [0u8; 8192];
    loop {
        let n = libc::syscall(libc::SYS_getdents64, dir, b.as_mut_ptr(), b.len());
        if n <= 0 {
            break;
        }
        let mut off = 0usize;
        while off + 19 < n as usize {
            // linux_dirent64: ino (8), off (8), reclen (2), type (1), name.
            let reclen = u16::from_ne_bytes([b[off + 16], b[off + 17]]) as usize;
            if reclen == 0 {
                break;
            }
            let mut pid: i64 = 0;
            let mut j = off + 19;
            let mut numeric = true;
            while j < off + reclen && j < n as usize && b[j] != 0 {
                if !b[j].is_ascii_digit() || pid > 1 << 40 {
                    numeric = false;
                    break;
                }
                pid = pid * 10 + (b[j] - b'0') as i64;
                j += 1;
            }
            if numeric && pid > 0 && ppid_of(pid) == Some(me as i64) {
                f(pid as libc::pid_t);
            }
            off += reclen;
        }
    }
    libc::close(dir);
}

unsafe fn ppid_of(pid: i64) -> Option<i64> {
    let mut path = Buf::<64>::new();
    path.push(b"/proc/");
    path.num(pid);
    path.push(b"/stat");
    let fd = libc::open(path.c(), libc::O_RDONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return None;
    }
    let mut b = [0u8; 1024];
    let n = libc::read(fd, b.as_mut_ptr() as *mut libc::c_void, b.len());
    libc::close(fd);
    if n <= 0 {
        return None;
    }
    let s = &b[..n as usize];
    // After the last ')': " S PPID ..."
    let close = s.iter().rposition(|&c| c == b')')?;
    let mut fields = s[close + 1..].split(|&c| c == b' ').filter(|f| !f.is_empty());
    fields.next()?;
    let mut v: i64 = 0;
    for &c in fields.next()? {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (c - b'0') as i64;
    }
    Some(v)
}

/// The exit record, written to a temporary file, synced, then renamed.
unsafe fn write_exit(p: &Prepared, leader: libc::pid_t, status: Option<i32>, cause: &[u8]) {
    let mut t: libc::timespec = std::mem::zeroed();
    libc::clock_gettime(libc::CLOCK_REALTIME, &mut t);
    let mut b = Buf::<256>::new();
    b.push(b"pcmail-job-exit 1\nleader ");
    b.num(leader as i64);
    b.push(b"\nstatus ");
    match status {
        Some(s) => b.num(s as i64),
        None => b.push(b"unknown"),
    }
    b.push(b"\ncause ");
    b.push(cause);
    b.push(b"\nended_at_ms ");
    b.num(t.tv_sec * 1000 + t.tv_nsec / 1_000_000);
    b.push(b"\nend\n");
    let fd = libc::open(
        p.exit_tmp.as_ptr(),
        libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC | libc::O_NOFOLLOW,
        0o600,
    );
    if fd < 0 {
        return;
    }
    libc::fchmod(fd, 0o600);
    let mut off = 0usize;
    while off < b.len {
        let n = libc::write(fd, b.b[off..b.len].as_ptr() as *const libc::c_void, b.len - off);
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        if n <= 0 {
            libc::close(fd);
            return;
        }
        off += n as usize;
    }
    libc::fsync(fd);
    libc::close(fd);
    libc::rename(p.exit_tmp.as_ptr(), p.exit_final.as_ptr());
}
