//! Runs one job's process: the argv as given (no shell), in its
//! checkout, in a group of its own so the whole tree can be killed at the
//! time limit or on a cancel: a process group on Unix, a Job Object on
//! Windows. stdout and stderr go to one log file, so what it printed
//! survives a killed executor; the result keeps its last 64 KiB.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
#[cfg(not(target_os = "linux"))]
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The output a result carries: the last 64 KiB.
pub const OUTPUT_MAX: usize = 64 * 1024;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The process exited (its code; None when a signal ended it).
    Exited(Option<i32>),
    TimedOut,
    Cancelled,
    /// It could not be started (no such program, no such directory).
    NotStarted,
}

#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub ending: Ending,
    pub duration_ms: i64,
    pub output: String,
    pub truncated: bool,
}

/// What a started process is known by, recorded before anything else so a
/// restarted executor can end a run its predecessor left behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Started {
    pub pid: i64,
    /// The process group (= pid on Unix; the group is killed as a whole).
    pub pgid: i64,
}

/// Runs `argv` in `cwd` with the given environment, output appended to
/// `log`. `on_start` gets the process ids as soon as it runs; `cancel` is
/// looked at every few ms; `limit` ends it as `TimedOut`.
///
/// On Linux the job runs under a keeper process (see `keeper`): its whole
/// tree is ended with it when the leader exits, on a cancel or at the time
/// limit, and also when this executor dies, however it dies; the keeper then
/// leaves an exit record beside the log ([`read_exit_record`]).
pub fn run(
    argv: &[String],
    cwd: &Path,
    env: &[(String, String)],
    log: &Path,
    limit: Duration,
    cancel: &AtomicBool,
    on_start: &mut dyn FnMut(Started),
) -> RunOutcome {
    let t0 = Instant::now();
    let out = |ending, note: Option<String>| {
        if let Some(n) = note {
            let _ = append(log, &n);
        }
        let (output, truncated) = tail(log, OUTPUT_MAX);
        RunOutcome { ending, duration_ms: t0.elapsed().as_millis() as i64, output, truncated }
    };
    let Some(program) = argv.first() else {
        return out(Ending::NotStarted, Some("pcmail: empty argv\n".into()));
    };
    // A record left by an earlier run on the same log is not this run's.
    forget_exit_record(log);
    let file = match open_log(log) {
        Ok(f) => f,
        Err(e) => {
            return out(Ending::NotStarted, Some(format!("pcmail: cannot open the log {}: {e}\n", log.display())))
        }
    };
    let mut proc = match Proc::start(argv, cwd, env, &file, log) {
        Ok(p) => p,
        Err(e) => {
            return out(
                Ending::NotStarted,
                Some(format!("pcmail: cannot start {program:?} in {}: {e}\n", cwd.display())),
            )
        }
    };
    let pid = proc.leader();
    on_start(Started { pid, pgid: pid });
    loop {
        match proc.try_wait() {
            Ok(Some(code)) => return out(Ending::Exited(code), None),
            Ok(None) => {}
            Err(e) => {
                proc.kill();
                return out(Ending::Exited(None), Some(format!("pcmail: lost the process: {e}\n")));
            }
        }
        if cancel.load(Ordering::Relaxed) {
            proc.kill();
            return out(Ending::Cancelled, Some("pcmail: cancelled\n".into()));
        }
        if t0.elapsed() >= limit {
            proc.kill();
            return out(Ending::TimedOut, Some(format!("pcmail: killed at its time limit ({} s)\n", limit.as_secs())));
        }
        // Short jobs (probes) are answered fast; long ones are looked at every 20 ms.
        std::thread::sleep(Duration::from_millis(if t0.elapsed() < Duration::from_millis(200) { 2 } else { 20 }));
    }
}

/// A started job as the run loop sees it: on Linux its keeper.
#[cfg(target_os = "linux")]
struct Proc(super::keeper::Keeper);

#[cfg(target_os = "linux")]
impl Proc {
    fn start(
        argv: &[String],
        cwd: &Path,
        env: &[(String, String)],
        file: &std::fs::File,
        log: &Path,
    ) -> Result<Proc, String> {
        super::keeper::Keeper::spawn(argv, cwd, env, file, log).map(Proc)
    }

    fn leader(&self) -> i64 {
        self.0.leader()
    }

    /// The leader's exit code once the keeper ended the tree (None: a signal).
    fn try_wait(&mut self) -> Result<Option<Option<i32>>, String> {
        Ok(self.0.try_wait())
    }

    fn kill(&mut self) {
        self.0.kill();
        self.0.wait();
    }
}

/// A started job elsewhere: the child in its group (Unix: a process group;
/// Windows: a Job Object).
#[cfg(not(target_os = "linux"))]
struct Proc {
    child: std::process::Child,
    group: Group,
}

#[cfg(not(target_os = "linux"))]
impl Proc {
    fn start(
        argv: &[String],
        cwd: &Path,
        env: &[(String, String)],
        file: &std::fs::File,
        _log: &Path,
    ) -> Result<Proc, String> {
        let (program, rest) = argv.split_first().ok_or("empty argv")?;
        let mut cmd = Command::new(program);
        cmd.args(rest).current_dir(cwd).stdin(Stdio::null());
        match (file.try_clone(), file.try_clone()) {
            (Ok(a), Ok(b)) => {
                cmd.stdout(Stdio::from(a)).stderr(Stdio::from(b));
            }
            _ => {
                cmd.stdout(Stdio::null()).stderr(Stdio::null());
            }
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        own_group(&mut cmd);
        let mut child = cmd.spawn().map_err(|e| e.to_string())?;
        let group = Group::adopt(&mut child)?;
        Ok(Proc { child, group })
    }

    fn leader(&self) -> i64 {
        self.child.id() as i64
    }

    fn try_wait(&mut self) -> Result<Option<Option<i32>>, String> {
        match self.child.try_wait() {
            Ok(Some(status)) => {
                // The leader exited: whatever it left running in its group goes too.
                self.group.kill();
                Ok(Some(status.code()))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    fn kill(&mut self) {
        self.group.kill();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How the keeper saw a run end (the exit record's `cause`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCause {
    /// The job's leader exited by itself (its code or signal is real).
    Exited,
    /// The executor died while the job ran: the keeper ended the tree.
    ExecutorGone,
    /// The executor asked for the kill (a cancel or the time limit).
    Killed,
}

/// What the keeper wrote beside a run's log when the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitRecord {
    /// The leader's exit code; None when a signal ended it.
    pub code: Option<i32>,
    /// The signal that ended the leader, if one did.
    pub signal: Option<i32>,
    pub cause: ExitCause,
    /// When the keeper wrote it (ms since the Unix epoch, the PC's clock).
    pub ended_at_ms: i64,
}

/// Where a run's exit record is kept: `<id>.<step>.exit` beside its log.
pub fn exit_record_path(log: &Path) -> PathBuf {
    log.with_extension("exit")
}

/// The run's exit record, if its keeper wrote a complete one.
pub fn read_exit_record(log: &Path) -> Option<ExitRecord> {
    let text = std::fs::read_to_string(exit_record_path(log)).ok()?;
    parse_exit_record(&text)
}

fn parse_exit_record(text: &str) -> Option<ExitRecord> {
    let mut lines = text.lines();
    if lines.next()? != "pcmail-job-exit 1" || !text.ends_with("\nend\n") {
        return None;
    }
    let mut status: Option<Option<i32>> = None;
    let (mut cause, mut ended) = (None, None);
    for l in lines {
        let (k, v) = l.split_once(' ').unwrap_or((l, ""));
        match k {
            "status" if v == "unknown" => status = Some(None),
            "status" => status = Some(Some(v.parse().ok()?)),
            "cause" => {
                cause = Some(match v {
                    "exited" => ExitCause::Exited,
                    "executor_gone" => ExitCause::ExecutorGone,
                    "killed" => ExitCause::Killed,
                    _ => return None,
                })
            }
            "ended_at_ms" => ended = Some(v.parse().ok()?),
            _ => {}
        }
    }
    let status = status?;
    Some(ExitRecord {
        code: status.and_then(wait_code),
        signal: status.and_then(wait_signal),
        cause: cause?,
        ended_at_ms: ended?,
    })
}

#[cfg(target_os = "linux")]
fn wait_code(status: i32) -> Option<i32> {
    super::keeper::code_of(status)
}

#[cfg(target_os = "linux")]
fn wait_signal(status: i32) -> Option<i32> {
    super::keeper::signal_of(status)
}

#[cfg(not(target_os = "linux"))]
fn wait_code(status: i32) -> Option<i32> {
    Some(status)
}

#[cfg(not(target_os = "linux"))]
fn wait_signal(_: i32) -> Option<i32> {
    None
}

/// Waits (at most `limit`) while the run's keeper is still alive, finishing
/// the tree it ends and its exit record; then the record, if it wrote one.
/// A keeper holds a lock on `<id>.<step>.keeper` for its whole life, so
/// "still finishing" and "gone without a record" are told apart.
pub fn settled_exit_record(log: &Path, limit: Duration) -> Option<ExitRecord> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        if let Ok(f) = std::fs::OpenOptions::new().read(true).open(super::keeper::beside(log, "keeper")) {
            let t0 = Instant::now();
            // SAFETY: flock on a descriptor owned here (released when `f` closes).
            while unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 && t0.elapsed() < limit {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = limit;
    read_exit_record(log)
}

/// Removes a run's exit record and keeper lock (its report is queued, or a
/// new run starts on the same log).
pub fn forget_exit_record(log: &Path) {
    for ext in ["exit", "exit.tmp", "keeper"] {
        let _ = std::fs::remove_file(log.with_extension(ext));
    }
}

/// A short read-only step (verify, read-back): its exit code and output.
pub fn run_step(argv: &[String], cwd: &Path, env: &[(String, String)], log: &Path, limit: Duration) -> RunOutcome {
    let never = AtomicBool::new(false);
    let _ = std::fs::remove_file(log);
    forget_exit_record(log);
    run(argv, cwd, env, log, limit, &never, &mut |_| {})
}

#[cfg(all(unix, not(target_os = "linux")))]
fn own_group(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
}

/// The job's group on Unix: its process group, made at spawn.
#[cfg(all(unix, not(target_os = "linux")))]
struct Group(i64);

#[cfg(all(unix, not(target_os = "linux")))]
impl Group {
    fn adopt(child: &mut std::process::Child) -> Result<Group, String> {
        Ok(Group(child.id() as i64))
    }

    fn kill(&self) {
        kill_group(self.0);
    }
}

/// Kills a job's whole process group (Unix).
#[cfg(unix)]
pub fn kill_group(pgid: i64) {
    if pgid > 1 {
        // SAFETY: a negative pid addresses the process group; no memory is touched.
        unsafe {
            libc::kill(-(pgid as libc::pid_t), libc::SIGKILL);
        }
    }
}

/// Ends what a run left behind when its executor is gone (a daemon killed
/// mid-job, found by the next one): the group, when its leader (`pid` with
/// the recorded start time) still runs. Says whether anything was killed.
#[cfg(unix)]
pub fn kill_orphan(pid: i64, start: Option<i64>) -> bool {
    if (pcmail_local::process::ProcId { pid, start }).alive() {
        kill_group(pid);
        return true;
    }
    false
}

#[cfg(windows)]
fn own_group(cmd: &mut Command) {
    use std::os::windows::process::CommandExt;
    // Suspended until it is in its Job Object, so nothing it starts escapes.
    cmd.creation_flags(win::CREATE_SUSPENDED);
}

#[cfg(windows)]
use win::Group;

/// Ends what a run left behind when its executor is gone. The Job Object
/// was closed with the old daemon, which on Windows already killed the
/// whole job (KILL_ON_JOB_CLOSE); this catches what that missed (a job
/// object that could not be made), even when the leader itself has exited.
#[cfg(windows)]
pub fn kill_orphan(pid: i64, start: Option<i64>) -> bool {
    win::kill_tree(pid, start)
}

#[cfg(windows)]
mod win {
    use pcmail_local::process::{descendants, start_time, ProcId};
    use std::ffi::c_void;
    use std::os::windows::io::AsRawHandle;

    pub const CREATE_SUSPENDED: u32 = 0x4;
    const JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE: u32 = 0x2000;
    const JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS: i32 = 9;
    const TH32CS_SNAPTHREAD: u32 = 4;
    const THREAD_SUSPEND_RESUME: u32 = 0x2;
    const PROCESS_TERMINATE: u32 = 0x1;

    #[repr(C)]
    #[derive(Default)]
    struct BasicLimits {
        per_process_user_time: i64,
        per_job_user_time: i64,
        limit_flags: u32,
        minimum_working_set: usize,
        maximum_working_set: usize,
        active_process_limit: u32,
        affinity: usize,
        priority_class: u32,
        scheduling_class: u32,
    }

    #[repr(C)]
    #[derive(Default)]
    struct IoCounters {
        counts: [u64; 6],
    }

    #[repr(C)]
    #[derive(Default)]
    struct ExtendedLimits {
        basic: BasicLimits,
        io: IoCounters,
        process_memory_limit: usize,
        job_memory_limit: usize,
        peak_process_memory_used: usize,
        peak_job_memory_used: usize,
    }

    #[repr(C)]
    struct ThreadEntry32 {
        size: u32,
        usage: u32,
        tid: u32,
        owner_pid: u32,
        base_pri: i32,
        delta_pri: i32,
        flags: u32,
    }

    #[link(name = "kernel32")]
    extern "system" {
        fn CreateJobObjectW(attrs: *mut c_void, name: *const u16) -> *mut c_void;
        fn SetInformationJobObject(job: *mut c_void, class: i32, info: *mut c_void, len: u32) -> i32;
        fn AssignProcessToJobObject(job: *mut c_void, process: *mut c_void) -> i32;
        fn TerminateJobObject(job: *mut c_void, code: u32) -> i32;
        fn CloseHandle(h: *mut c_void) -> i32;
        fn CreateToolhelp32Snapshot(flags: u32, pid: u32) -> *mut c_void;
        fn Thread32First(h: *mut c_void, e: *mut ThreadEntry32) -> i32;
        fn Thread32Next(h: *mut c_void, e: *mut ThreadEntry32) -> i32;
        fn OpenThread(access: u32, inherit: i32, tid: u32) -> *mut c_void;
        fn ResumeThread(h: *mut c_void) -> u32;
        fn OpenProcess(access: u32, inherit: i32, pid: u32) -> *mut c_void;
        fn TerminateProcess(h: *mut c_void, code: u32) -> i32;
    }

    /// A run's Job Object (KILL_ON_JOB_CLOSE: closing it, or this process
    /// dying, kills everything in it), or, when none could be made (an old
    /// Windows that refuses nested jobs), the leader for a tree kill.
    pub struct Group {
        job: Option<*mut c_void>,
        pid: i64,
        start: Option<i64>,
    }

    impl Group {
        /// Puts the child (spawned suspended) in a new Job Object, then lets
        /// it run: every process it starts is born in the job.
        pub fn adopt(child: &mut std::process::Child) -> Result<Group, String> {
            let pid = child.id() as i64;
            let job = new_job();
            // SAFETY: the child's handle is valid while `child` lives.
            let job = job.filter(|&j| unsafe { AssignProcessToJobObject(j, child.as_raw_handle()) } != 0 || {
                unsafe { CloseHandle(j) };
                false
            });
            if !resume(child.id()) {
                let group = Group { job, pid, start: None };
                group.kill();
                let _ = child.kill();
                let _ = child.wait();
                return Err("it could not be resumed after its Job Object was made".into());
            }
            // Read once it runs (Wine has no real creation time before).
            Ok(Group { job, pid, start: start_time(pid) })
        }

        pub fn kill(&self) {
            match self.job {
                // SAFETY: a job handle this group owns.
                Some(j) => unsafe {
                    TerminateJobObject(j, 1);
                },
                None => {
                    kill_tree(self.pid, self.start);
                }
            }
        }
    }

    impl Drop for Group {
        fn drop(&mut self) {
            if let Some(j) = self.job.take() {
                // SAFETY: closed once; KILL_ON_JOB_CLOSE ends what is left.
                unsafe { CloseHandle(j) };
            }
        }
    }

    fn new_job() -> Option<*mut c_void> {
        // SAFETY: a new unnamed job object with a correctly sized limit structure.
        unsafe {
            let j = CreateJobObjectW(std::ptr::null_mut(), std::ptr::null());
            if j.is_null() {
                return None;
            }
            let mut limits = ExtendedLimits::default();
            limits.basic.limit_flags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
            let ok = SetInformationJobObject(
                j,
                JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS,
                &mut limits as *mut ExtendedLimits as *mut c_void,
                std::mem::size_of::<ExtendedLimits>() as u32,
            );
            if ok == 0 {
                CloseHandle(j);
                return None;
            }
            Some(j)
        }
    }

    /// Resumes the threads of a process started suspended (its one thread).
    fn resume(pid: u32) -> bool {
        let mut resumed = false;
        // SAFETY: a thread snapshot walked with a correctly sized entry; every handle closed.
        unsafe {
            let snap = CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0);
            if snap.is_null() || snap as isize == -1 {
                return false;
            }
            let mut e: ThreadEntry32 = std::mem::zeroed();
            e.size = std::mem::size_of::<ThreadEntry32>() as u32;
            let mut more = Thread32First(snap, &mut e) != 0;
            while more {
                if e.owner_pid == pid {
                    let t = OpenThread(THREAD_SUSPEND_RESUME, 0, e.tid);
                    if !t.is_null() {
                        resumed |= ResumeThread(t) != u32::MAX;
                        CloseHandle(t);
                    }
                }
                more = Thread32Next(snap, &mut e) != 0;
            }
            CloseHandle(snap);
        }
        resumed
    }

    /// Terminates `pid` (when it is still the process that started at
    /// `start`) and its descendants; again until none is left, so a child
    /// started during the kill goes too. Says whether any was killed.
    pub fn kill_tree(pid: i64, start: Option<i64>) -> bool {
        let mut killed = false;
        for _ in 0..5 {
            let mut victims = descendants(pid, start);
            let leader = ProcId { pid, start };
            if start.is_some() && leader.alive() {
                victims.insert(0, leader);
            }
            if victims.is_empty() {
                break;
            }
            for v in victims {
                killed |= terminate(v);
            }
        }
        killed
    }

    fn terminate(p: ProcId) -> bool {
        // SAFETY: a handle opened, checked and closed here.
        unsafe {
            let h = OpenProcess(PROCESS_TERMINATE, 0, p.pid as u32);
            if h.is_null() {
                return false;
            }
            // Still the same process (not a reused PID) at the moment of the kill.
            let ok = p.alive() && TerminateProcess(h, 1) != 0;
            CloseHandle(h);
            ok
        }
    }
}

fn append(log: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    open_log(log)?.write_all(text.as_bytes())
}

/// Opens a job's log for appending: its folder is made here, where every
/// run (plain, chunked, verify, read-back) opens its log, so no path depends
/// on another having run first. Folder 0700, file 0600, like every file
/// pcmail keeps.
pub fn open_log(log: &Path) -> std::io::Result<std::fs::File> {
    if let Some(dir) = log.parent().filter(|d| !d.as_os_str().is_empty()) {
        pcmail_fsmode::create_private_dir_all(dir)?;
    }
    let f = pcmail_fsmode::private_open_options(std::fs::OpenOptions::new().create(true).append(true)).open(log)?;
    pcmail_fsmode::restrict_file(log)?;
    Ok(f)
}

/// The last `max` bytes of a file as UTF-8 (lossy), and whether it was cut.
pub fn tail(path: &Path, max: usize) -> (String, bool) {
    let Ok(mut f) = std::fs::File::open(path) else { return (String::new(), false) };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let cut = len > max as u64;
    if cut {
        let _ = f.seek(SeekFrom::Start(len - max as u64));
    }
    let mut buf = vec![];
    let _ = f.take(max as u64).read_to_end(&mut buf);
    (String::from_utf8_lossy(&buf).into_owned(), cut)
}

/// Where a job's output is kept on this PC.
pub fn log_path(home: &Path, job_id: &str, step: &str) -> PathBuf {
    home.join("jobs").join(format!("{job_id}.{step}.log"))
}

/// The poller's retention for the files under `jobs/` (each run's logs, and
/// an exit record or keeper lock a killed run left): removed once last
/// written before `cutoff` (milliseconds since the epoch), unless their job
/// still runs here (`running`: its id is the file name up to the first dot).
/// Returns how many went. An executor PC would otherwise keep every log of
/// every job it ever ran.
pub fn prune_files(home: &Path, cutoff: pcmail_core::Millis, running: &[String]) -> usize {
    let Ok(dir) = std::fs::read_dir(home.join("jobs")) else { return 0 };
    let mut gone = 0;
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let job_id = name.split('.').next().unwrap_or(name);
        if running.iter().any(|r| r == job_id) {
            continue;
        }
        // The entry itself, never what a symlink points to.
        let Ok(meta) = entry.path().symlink_metadata() else { continue };
        let written = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as i64);
        if meta.is_file() && written.is_some_and(|w| w < cutoff) && std::fs::remove_file(entry.path()).is_ok() {
            gone += 1;
        }
    }
    gone
}

#[cfg(test)]
mod retention_tests {
    use super::*;

    #[test]
    fn files_of_runs_older_than_the_window_go_a_running_jobs_and_recent_ones_stay() {
        let d = tempfile::tempdir().unwrap();
        let jobs = d.path().join("jobs");
        std::fs::create_dir_all(&jobs).unwrap();
        let day = std::time::Duration::from_secs(24 * 60 * 60);
        let now = std::time::SystemTime::now();
        let write = |name: &str, age: std::time::Duration| {
            let f = std::fs::File::create(jobs.join(name)).unwrap();
            f.set_modified(now - age).unwrap();
        };
        write("job-1-aaaaaaaa.run.log", 40 * day);
        write("job-1-aaaaaaaa.verify.log", 40 * day);
        write("job-2-bbbbbbbb.run.log", 40 * day);
        write("job-2-bbbbbbbb.run.keeper", 40 * day);
        write("job-3-cccccccc.run.log", day);
        let now_ms = now.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
        let cutoff = now_ms - 30 * 24 * 60 * 60 * 1000;
        let gone = prune_files(d.path(), cutoff, &["job-2-bbbbbbbb".to_string()]);
        assert_eq!(gone, 2);
        let mut left: Vec<String> =
            std::fs::read_dir(&jobs).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(left, ["job-2-bbbbbbbb.run.keeper", "job-2-bbbbbbbb.run.log", "job-3-cccccccc.run.log"]);
        assert_eq!(prune_files(&d.path().join("nowhere"), cutoff, &[]), 0, "no jobs folder: nothing to do");
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn output_is_kept_and_the_exit_code_reported() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("a.log");
        let never = AtomicBool::new(false);
        let mut started = None;
        let r = run(
            &s(&["sh", "-c", "echo out; echo err >&2; exit 3"]),
            d.path(),
            &[],
            &log,
            Duration::from_secs(30),
            &never,
            &mut |p| started = Some(p),
        );
        assert_eq!(r.ending, Ending::Exited(Some(3)));
        assert!(r.output.contains("out\n") && r.output.contains("err\n"), "{}", r.output);
        assert!(started.is_some());
    }

    #[test]
    fn the_time_limit_kills_the_whole_group() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("a.log");
        let never = AtomicBool::new(false);
        let mut started = None;
        // A child in the background that would outlive its parent.
        let r = run(
            &s(&["sh", "-c", "sleep 30 & echo $! > bg; wait"]),
            d.path(),
            &[],
            &log,
            Duration::from_millis(300),
            &never,
            &mut |p| started = Some(p),
        );
        assert_eq!(r.ending, Ending::TimedOut);
        let bg: i64 = std::fs::read_to_string(d.path().join("bg")).unwrap().trim().parse().unwrap();
        // The group was sent SIGKILL: the background child is gone (or a zombie being reaped).
        let deadline = Instant::now() + Duration::from_secs(10);
        while pcmail_local::process::start_time(bg).is_some() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(pcmail_local::process::start_time(bg).is_none(), "background child {bg} still runs");
    }

    #[test]
    fn a_cancel_ends_it_and_a_missing_program_is_not_started() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("a.log");
        let cancel = AtomicBool::new(true);
        let r = run(&s(&["sleep", "30"]), d.path(), &[], &log, Duration::from_secs(60), &cancel, &mut |_| {});
        assert_eq!(r.ending, Ending::Cancelled);
        let r = run(
            &s(&["/no/such/program"]),
            d.path(),
            &[],
            &d.path().join("b.log"),
            Duration::from_secs(1),
            &cancel,
            &mut |_| {},
        );
        assert_eq!(r.ending, Ending::NotStarted);
        assert!(r.output.contains("cannot start"), "{}", r.output);
    }

    /// A job tree with every way out of a process group: a background
    /// child, a `setsid` one (own session and group) with a child of its
    /// own, and the leader waiting. Each writes its PID to a file.
    const TREE: &str = "sleep 100 & echo $! > a; \
        setsid sh -c 'sleep 100 & echo $! > d; echo $$ > c; wait' & \
        sleep 100 & echo $! > b; echo $$ > leader; wait";

    fn pids(dir: &Path, names: &[&str]) -> Option<Vec<i64>> {
        names.iter().map(|n| std::fs::read_to_string(dir.join(n)).ok()?.trim().parse().ok()).collect()
    }

    fn all_gone_within(pids: &[i64], limit: Duration) -> Result<Duration, Vec<i64>> {
        let t0 = Instant::now();
        loop {
            let alive: Vec<i64> =
                pids.iter().copied().filter(|&p| pcmail_local::process::start_time(p).is_some()).collect();
            if alive.is_empty() {
                return Ok(t0.elapsed());
            }
            if t0.elapsed() > limit {
                // Not left behind for the next test run.
                for &p in &alive {
                    // SAFETY: a signal to a process this test started.
                    unsafe { libc::kill(p as libc::pid_t, libc::SIGKILL) };
                }
                return Err(alive);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
        let t0 = Instant::now();
        loop {
            if let Some(v) = f() {
                return v;
            }
            assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// An executor in a process of its own (this test binary, running the
    /// ignored `executor_process` below): it runs `script` in `dir`.
    fn executor_in_child(dir: &Path, script: &str) -> std::process::Child {
        // The test's name as the harness knows it: this module's path without the crate's name.
        let name = format!("{}::executor_process", module_path!().split_once("::").map_or("", |(_, m)| m));
        std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", &name, "--nocapture", "--test-threads=1"])
            .env("PCMAIL_TEST_EXECUTOR_DIR", dir)
            .env("PCMAIL_TEST_EXECUTOR_SCRIPT", script)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    }

    #[test]
    #[ignore = "the executor process of the tests below"]
    fn executor_process() {
        let (Some(dir), Some(script)) =
            (std::env::var_os("PCMAIL_TEST_EXECUTOR_DIR"), std::env::var("PCMAIL_TEST_EXECUTOR_SCRIPT").ok())
        else {
            return;
        };
        let dir = PathBuf::from(dir);
        let never = AtomicBool::new(false);
        // From a worker thread, as the daemon runs jobs.
        let d = dir.clone();
        let r = std::thread::spawn(move || {
            run(
                &s(&["sh", "-c", &script]),
                &d,
                &[],
                &d.join("job.run.log"),
                Duration::from_secs(300),
                &never,
                &mut |_| {},
            )
        })
        .join()
        .unwrap();
        std::fs::write(dir.join("executor-saw"), format!("{:?}", r.ending)).unwrap();
    }

    /// Killed with -9, the executor takes the job's whole tree with it: the
    /// leader, its background children and what left the group with setsid.
    #[test]
    fn a_killed_executor_takes_the_whole_tree_with_it() {
        let d = tempfile::tempdir().unwrap();
        let mut ex = executor_in_child(d.path(), TREE);
        let tree =
            wait_for("the tree started", Duration::from_secs(20), || pids(d.path(), &["leader", "a", "b", "c", "d"]));
        assert!(tree.iter().all(|&p| pcmail_local::process::start_time(p).is_some()), "{tree:?}");
        ex.kill().unwrap(); // SIGKILL
        ex.wait().unwrap();
        let took = all_gone_within(&tree, Duration::from_secs(3))
            .unwrap_or_else(|alive| panic!("outlived their killed executor: {alive:?} of {tree:?}"));
        eprintln!("the tree was gone {took:?} after the executor's kill -9");
        let rec =
            wait_for("the exit record", Duration::from_secs(5), || read_exit_record(&d.path().join("job.run.log")));
        assert_eq!(rec.cause, ExitCause::ExecutorGone);
        assert_eq!(rec.signal, Some(libc::SIGKILL));
    }

    /// A run that ends while its executor cannot record it (stopped, then
    /// killed) leaves its real exit code beside its log, privately.
    #[test]
    fn a_run_that_ends_unseen_leaves_its_real_exit_code() {
        let d = tempfile::tempdir().unwrap();
        let gate = d.path().join("gate");
        assert!(std::process::Command::new("mkfifo").arg(&gate).status().unwrap().success());
        let mut ex = executor_in_child(d.path(), "echo $$ > leader; read x < gate; echo done; exit 7");
        let leader = wait_for("the job started", Duration::from_secs(20), || pids(d.path(), &["leader"]))[0];
        // SAFETY: signals to a child this test started.
        unsafe { libc::kill(ex.id() as libc::pid_t, libc::SIGSTOP) };
        {
            use std::io::Write;
            std::fs::OpenOptions::new().write(true).open(&gate).unwrap().write_all(b"go\n").unwrap();
        }
        let log = d.path().join("job.run.log");
        let rec = wait_for("the exit record", Duration::from_secs(10), || read_exit_record(&log));
        ex.kill().unwrap();
        ex.wait().unwrap();
        assert!(!d.path().join("executor-saw").exists(), "the executor never saw the end");
        assert_eq!((rec.code, rec.signal, rec.cause), (Some(7), None, ExitCause::Exited));
        assert!(pcmail_local::process::start_time(leader).is_none());
        assert_eq!(settled_exit_record(&log, Duration::from_secs(5)), Some(rec), "the keeper is gone");
        use std::os::unix::fs::PermissionsExt;
        for f in [log.clone(), exit_record_path(&log)] {
            let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{} is {mode:o}", f.display());
        }
        assert!(tail(&log, OUTPUT_MAX).0.contains("done"));
    }

    /// The time limit (and a cancel) end what left the group too.
    #[test]
    fn the_time_limit_ends_what_left_the_group() {
        let d = tempfile::tempdir().unwrap();
        let never = AtomicBool::new(false);
        let dir = d.path().to_path_buf();
        let r = std::thread::scope(|sc| {
            let h = sc.spawn(|| {
                run(&s(&["sh", "-c", TREE]), &dir, &[], &dir.join("a.log"), Duration::from_secs(3), &never, &mut |_| {})
            });
            h.join().unwrap()
        });
        assert_eq!(r.ending, Ending::TimedOut);
        let tree = pids(d.path(), &["leader", "a", "b", "c", "d"]).expect("the tree had started");
        all_gone_within(&tree, Duration::from_secs(2)).unwrap_or_else(|alive| panic!("left running: {alive:?}"));
        let rec = read_exit_record(&d.path().join("a.log")).unwrap();
        assert_eq!(rec.cause, ExitCause::Killed);
    }

    /// Job logs are private, also one that existed with a wider mode.
    #[test]
    fn job_logs_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("old.log");
        std::fs::write(&log, "earlier\n").unwrap();
        std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o644)).unwrap();
        let never = AtomicBool::new(false);
        let r = run(&s(&["echo", "hi"]), d.path(), &[], &log, Duration::from_secs(30), &never, &mut |_| {});
        assert_eq!(r.ending, Ending::Exited(Some(0)));
        assert_eq!(std::fs::metadata(&log).unwrap().permissions().mode() & 0o777, 0o600);
        let fresh = d.path().join("new.log");
        run(&s(&["/no/such/program"]), d.path(), &[], &fresh, Duration::from_secs(30), &never, &mut |_| {});
        assert_eq!(std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn an_exit_record_is_read_only_when_complete() {
        let full = "pcmail-job-exit 1\nleader 5\nstatus 1792\ncause exited\nended_at_ms 9\nend\n";
        let r = parse_exit_record(full).unwrap();
        assert_eq!((r.code, r.cause, r.ended_at_ms), (Some(7), ExitCause::Exited, 9));
        assert_eq!(parse_exit_record(&full[..full.len() - 4]), None, "cut short");
        assert_eq!(parse_exit_record("garbage"), None);
        let sig = parse_exit_record("pcmail-job-exit 1\nstatus 9\ncause executor_gone\nended_at_ms 1\nend\n").unwrap();
        assert_eq!((sig.code, sig.signal), (None, Some(9)));
    }

    #[test]
    fn a_log_in_a_folder_that_does_not_exist_yet_is_made_private() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        // A fresh home: no jobs/ folder yet.
        let log = log_path(&d.path().join("home"), "job-1-0000abcd", "run");
        let never = AtomicBool::new(false);
        let r = run(&s(&["echo", "hi"]), d.path(), &[], &log, Duration::from_secs(30), &never, &mut |_| {});
        assert_eq!(r.ending, Ending::Exited(Some(0)), "{}", r.output);
        assert_eq!(r.output, "hi\n");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(log.parent().unwrap()), 0o700);
        assert_eq!(mode(&log), 0o600);
    }

    #[test]
    fn only_the_last_64_kib_is_kept() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("big");
        let mut text = "x".repeat(OUTPUT_MAX);
        text.push_str("END");
        std::fs::write(&p, &text).unwrap();
        let (t, cut) = tail(&p, OUTPUT_MAX);
        assert!(cut && t.ends_with("END") && t.len() == OUTPUT_MAX);
    }
}

/// Run under Wine by tests/windows/run.sh (the lib's test exe, filtered on
/// `win_tests`). The job's processes are this test exe itself, started on
/// one of the `#[ignore]`d helpers below: `spawner_*` starts a `sleeper`
/// (the grandchild that would outlive its parent) and writes both PIDs.
#[cfg(all(test, windows))]
mod win_tests {
    use super::*;
    use pcmail_local::process::{descendants, ProcId};

    fn me() -> String {
        std::env::current_exe().unwrap().to_string_lossy().into_owned()
    }

    fn helper(name: &str) -> Vec<String> {
        vec![
            me(),
            "--ignored".into(),
            "--exact".into(),
            // The helper's name as the harness knows it: this module's path without the crate's name.
            format!("{}::{name}", module_path!().split_once("::").map_or("", |(_, m)| m)),
            "--test-threads=1".into(),
        ]
    }

    #[test]
    #[ignore = "a job's process in the tests below"]
    fn sleeper() {
        std::thread::sleep(Duration::from_secs(120));
    }

    fn spawn_sleeper_and_note_pids() {
        let child = Command::new(me())
            .args(&helper("sleeper")[1..])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::fs::write("pids.txt", format!("{} {}", std::process::id(), child.id())).unwrap();
        std::mem::forget(child);
    }

    #[test]
    #[ignore = "a job's process in the tests below"]
    fn spawner_stay() {
        spawn_sleeper_and_note_pids();
        std::thread::sleep(Duration::from_secs(120));
    }

    #[test]
    #[ignore = "a job's process in the tests below"]
    fn spawner_exit() {
        spawn_sleeper_and_note_pids();
    }

    /// The two PIDs the spawner wrote, with their start times, once written.
    fn noted(dir: &Path) -> Option<(ProcId, ProcId)> {
        let text = std::fs::read_to_string(dir.join("pids.txt")).ok()?;
        let mut it = text.split_whitespace().filter_map(|p| p.parse::<i64>().ok());
        let (a, b) = (it.next()?, it.next()?);
        Some((ProcId { pid: a, start: None }, ProcId { pid: b, start: None }))
    }

    fn gone(p: i64) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while pcmail_local::process::start_time(p).is_some() {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    #[test]
    fn the_time_limit_kills_the_whole_job() {
        let d = tempfile::tempdir().unwrap();
        let never = AtomicBool::new(false);
        let mut leader = 0;
        let r = run(
            &helper("spawner_stay"),
            d.path(),
            &[],
            &d.path().join("a.log"),
            Duration::from_secs(3),
            &never,
            &mut |p| leader = p.pid,
        );
        assert_eq!(r.ending, Ending::TimedOut, "{}", r.output);
        let (l, g) = noted(d.path()).expect("the spawner ran and wrote both PIDs");
        assert_eq!(l.pid, leader);
        assert!(gone(l.pid), "the job's own process {} still runs", l.pid);
        assert!(gone(g.pid), "the grandchild {} outlived the time limit", g.pid);
    }

    #[test]
    fn what_the_leader_left_running_goes_when_it_exits() {
        let d = tempfile::tempdir().unwrap();
        let never = AtomicBool::new(false);
        let r = run(
            &helper("spawner_exit"),
            d.path(),
            &[],
            &d.path().join("a.log"),
            Duration::from_secs(60),
            &never,
            &mut |_| {},
        );
        assert_eq!(r.ending, Ending::Exited(Some(0)), "{}", r.output);
        let (_, g) = noted(d.path()).expect("the spawner wrote both PIDs");
        assert!(gone(g.pid), "the grandchild {} outlived its job", g.pid);
    }

    #[test]
    fn a_cancel_ends_the_job() {
        let d = tempfile::tempdir().unwrap();
        let cancel = AtomicBool::new(false);
        let flag = &cancel;
        let dir = d.path().to_path_buf();
        let r = std::thread::scope(|s| {
            s.spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(20);
                while noted(&dir).is_none() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
                flag.store(true, Ordering::Relaxed);
            });
            run(
                &helper("spawner_stay"),
                d.path(),
                &[],
                &d.path().join("a.log"),
                Duration::from_secs(60),
                &cancel,
                &mut |_| {},
            )
        });
        assert_eq!(r.ending, Ending::Cancelled, "{}", r.output);
        let (l, g) = noted(d.path()).unwrap();
        assert!(gone(l.pid) && gone(g.pid), "cancelled, yet {l:?} or {g:?} runs");
    }

    /// The fallback for an orphan found after a restart (no Job Object any
    /// more): its descendants by parent PID, even with the leader gone.
    #[test]
    fn an_orphaned_tree_is_killed_by_parent_pid() {
        let d = tempfile::tempdir().unwrap();
        let mut leader = Command::new(me())
            .args(&helper("spawner_stay")[1..])
            .current_dir(d.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while noted(d.path()).is_none() {
            assert!(Instant::now() < deadline, "the spawner did not start its sleeper");
            std::thread::sleep(Duration::from_millis(20));
        }
        let (l, g) = noted(d.path()).unwrap();
        let start = pcmail_local::process::start_time(l.pid);
        // The leader dies first, as when a job's own process is gone.
        leader.kill().unwrap();
        leader.wait().unwrap();
        assert!(gone(l.pid));
        assert!(!gone_now(g.pid), "the sleeper outlives its parent on Windows");
        assert_eq!(descendants(l.pid, start).iter().map(|p| p.pid).collect::<Vec<_>>(), vec![g.pid]);
        assert!(kill_orphan(l.pid, start), "something was killed");
        assert!(gone(g.pid), "the orphaned sleeper {} still runs", g.pid);
        assert!(!kill_orphan(l.pid, start), "nothing left the second time");
    }

    fn gone_now(p: i64) -> bool {
        pcmail_local::process::start_time(p).is_none()
    }
}
