//! Processes as leases see them: a process is its PID plus its start time,
//! so a PID the OS reused for another program is not the same process. One
//! `cfg` function per platform for the start time (Linux `/proc/PID/stat`,
//! Windows `GetProcessTimes`), and the walk up the ancestors that finds the
//! agent process (Claude Code, Codex CLI or Gemini CLI) a hook or a `pcmail
//! lease claim` runs under: the session lives as long as that process.

/// A process: PID and start time (platform units: clock ticks since boot on
/// Linux, FILETIME on Windows; only ever compared for equality).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ProcId {
    pub pid: i64,
    pub start: Option<i64>,
}

impl ProcId {
    /// This PID with its current start time, if the process exists.
    pub fn of(pid: i64) -> Option<ProcId> {
        start_time(pid).map(|s| ProcId { pid, start: Some(s) })
    }

    /// True while the same process runs: the PID exists and started at the
    /// recorded time (a reused PID started later). Without a recorded start
    /// time only the PID is checked.
    pub fn alive(&self) -> bool {
        match (start_time(self.pid), self.start) {
            (Some(now), Some(then)) => now == then,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }
}

/// The start time of `pid`, or None when no such process runs.
#[cfg(target_os = "linux")]
pub fn start_time(pid: i64) -> Option<i64> {
    let stat = String::from_utf8(read_proc(&format!("/proc/{pid}/stat"), PROC_STAT_MAX)?).ok()?;
    // Fields after the command name (which may hold spaces and parentheses).
    let rest = &stat[stat.rfind(')')? + 2..];
    // rest starts at field 3 (state); starttime is field 22.
    let f: Vec<&str> = rest.split_whitespace().collect();
    if f.first() == Some(&"Z") || f.first() == Some(&"X") {
        return None; // a zombie has exited
    }
    f.get(19)?.parse().ok()
}

#[cfg(windows)]
pub fn start_time(pid: i64) -> Option<i64> {
    win::start_time(pid)
}

/// Elsewhere (macOS, BSD): only whether the PID exists (no start time).
#[cfg(all(unix, not(target_os = "linux")))]
pub fn start_time(pid: i64) -> Option<i64> {
    // SAFETY: signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    (r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)).then_some(0)
}

/// The parent PID and a short description (command name and first two
/// arguments) used to recognise Claude Code.
#[cfg(target_os = "linux")]
fn parent_and_name(pid: i64) -> Option<(i64, String)> {
    look_at(pid).map(|(ppid, desc, _)| (ppid, desc))
}

#[cfg(windows)]
fn parent_and_name(pid: i64) -> Option<(i64, String)> {
    win::parent_and_name(pid)
}

#[cfg(all(unix, not(target_os = "linux")))]
fn parent_and_name(pid: i64) -> Option<(i64, String)> {
    if pid as u32 == std::process::id() {
        // SAFETY: getppid has no preconditions.
        return Some((unsafe { libc::getppid() } as i64, String::new()));
    }
    None
}

/// This process's parent.
#[cfg(unix)]
pub fn parent_pid() -> Option<i64> {
    // SAFETY: getppid has no preconditions and cannot fail.
    Some(unsafe { libc::getppid() } as i64)
}

#[cfg(windows)]
pub fn parent_pid() -> Option<i64> {
    parent_and_name(std::process::id() as i64).map(|(p, _)| p)
}

/// Whether a process description names Claude Code: the native binary
/// (`claude`) or the Node script of older releases (`…/claude-code/cli.js`).
pub fn looks_like_claude(desc: &str) -> bool {
    desc.split('\0').any(|part| {
        let base = part.rsplit(['/', '\\']).next().unwrap_or(part).to_ascii_lowercase();
        let base = base.strip_suffix(".exe").unwrap_or(&base);
        base == "claude" || part.contains("claude-code") || part.contains("@anthropic-ai")
    })
}

/// Whether a process description names an agent a session runs in: Claude
/// Code ([`looks_like_claude`]), Codex CLI (its native `codex` binary, which
/// runs the hooks and MCP servers, or the npm package's `codex.js`
/// launcher), or Gemini CLI (Node running the npm package's `gemini.js`,
/// or the `gemini` command).
pub fn looks_like_agent(desc: &str) -> bool {
    looks_like_claude(desc)
        || desc.split('\0').any(|part| {
            let base = part.rsplit(['/', '\\']).next().unwrap_or(part).to_ascii_lowercase();
            let base = base.strip_suffix(".exe").unwrap_or(&base);
            matches!(base, "codex" | "codex.js" | "gemini" | "gemini.js")
                || part.contains("@openai/codex")
                || part.contains("@google/gemini-cli")
        })
}

/// Whether `pid` is Claude Code rather than another agent: false only for a
/// process seen to be Codex or Gemini CLI (where a process cannot be read,
/// or `PCMAIL_CLAUDE_PID` names it, it counts as Claude Code, as before).
pub fn is_claude(pid: i64) -> bool {
    parent_and_name(pid).is_none_or(|(_, desc)| looks_like_claude(&desc) || !looks_like_agent(&desc))
}

/// The agent process this process runs under (see [`agent_ancestor`]).
pub fn claude_ancestor() -> Option<ProcId> {
    agent_ancestor()
}

/// Who a command runs for, as far as it decides which session holds a lease
/// and which process the lease follows: the caller's parent, folder and the
/// two variables that name a session or its agent. A command answered in its
/// own process reads them there ([`Caller::this_process`]); one the daemon
/// answers for the small front (`pcmail-hook lease …`) is given the front's,
/// so the answer is the one `pcmail` itself would have given.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Caller {
    /// The caller's parent process: the agent is looked for from there up,
    /// and a lease with no agent above follows it.
    pub parent: Option<i64>,
    /// The caller's working folder: its repo is the lease's.
    pub cwd: Option<std::path::PathBuf>,
    /// `PCMAIL_SESSION`: the session outside an agent.
    pub session: Option<String>,
    /// `PCMAIL_CLAUDE_PID`: the agent process, named (tests, wrappers; `0`: none).
    pub agent_pid: Option<String>,
}

impl Caller {
    /// This process as the caller.
    pub fn this_process() -> Caller {
        Caller {
            parent: parent_pid(),
            cwd: std::env::current_dir().ok(),
            session: std::env::var("PCMAIL_SESSION").ok(),
            agent_pid: std::env::var("PCMAIL_CLAUDE_PID").ok(),
        }
    }

    /// The agent process (Claude Code, Codex CLI, Gemini CLI) the caller runs
    /// under, looking at most 12 ancestors up from its parent; the nearest one
    /// wins (a Node launcher above the native Codex binary is not the
    /// session). `PCMAIL_CLAUDE_PID` names it instead.
    pub fn agent(&self) -> Option<ProcId> {
        match &self.agent_pid {
            Some(pid) => named_agent(pid),
            None => ancestor_agent_from(self.parent?),
        }
    }
}

/// The agent process this process runs under ([`Caller::agent`] of
/// [`Caller::this_process`], reading only what it needs).
pub fn agent_ancestor() -> Option<ProcId> {
    match std::env::var("PCMAIL_CLAUDE_PID") {
        Ok(pid) => named_agent(&pid),
        Err(_) => ancestor_agent_from(parent_pid()?),
    }
}

/// The agent process `PCMAIL_CLAUDE_PID` names (`0` or no number: none).
fn named_agent(pid: &str) -> Option<ProcId> {
    pid.trim().parse::<i64>().ok().filter(|&p| p > 0).and_then(ProcId::of)
}

/// The nearest agent process among `pid` and at most 11 of its ancestors.
fn ancestor_agent_from(mut pid: i64) -> Option<ProcId> {
    // The hook runs this on every prompt: each ancestor is looked at once.
    for _ in 0..12 {
        if pid <= 1 {
            return None;
        }
        let (ppid, desc, start) = look_at(pid)?;
        if looks_like_agent(&desc) {
            return start.map(|s| ProcId { pid, start: Some(s) }).or_else(|| ProcId::of(pid));
        }
        pid = ppid;
    }
    None
}

/// A process's parent, description ([`parent_and_name`]) and, where one read
/// gives it, its start time (None for a zombie).
#[cfg(target_os = "linux")]
fn look_at(pid: i64) -> Option<(i64, String, Option<i64>)> {
    let stat = String::from_utf8(read_proc(&format!("/proc/{pid}/stat"), PROC_STAT_MAX)?).ok()?;
    let (open, close) = (stat.find('(')?, stat.rfind(')')?);
    let comm = &stat[open + 1..close];
    // Fields from 3 on (state, ppid, …, starttime at 22).
    let f: Vec<&str> = stat[close + 2..].split_whitespace().collect();
    let ppid: i64 = f.get(1)?.parse().ok()?;
    let start =
        if matches!(f.first(), Some(&"Z") | Some(&"X")) { None } else { f.get(19).and_then(|s| s.parse().ok()) };
    if names_no_agent(comm) {
        return Some((ppid, comm.to_string(), start));
    }
    // The command and its first two arguments are what is compared; a
    // command line longer than this (a launcher's whole environment as
    // arguments) is cut, never the start of it.
    let cmdline = read_proc(&format!("/proc/{pid}/cmdline"), PROC_CMDLINE_MAX).unwrap_or_default();
    let args: Vec<String> =
        cmdline.split(|&b| b == 0).take(2).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    Some((ppid, format!("{comm}\0{}", args.join("\0")), start))
}

/// Process names whose command line is not read: shells and the like that
/// stand between an agent and its hook (Claude Code runs a hook's command
/// under `sh -c`, whose first two arguments are `sh -c`). An agent is the
/// program they start, never one of them: one file less per such ancestor
/// on every prompt.
#[cfg(target_os = "linux")]
fn names_no_agent(comm: &str) -> bool {
    matches!(
        comm,
        "sh" | "bash" | "dash" | "zsh" | "fish" | "ksh" | "mksh" | "tcsh" | "csh" | "sshd" | "login" | "sudo" | "su"
    )
}

/// More than any `/proc/PID/stat` holds (52 numbers and a 16-byte name).
#[cfg(target_os = "linux")]
const PROC_STAT_MAX: usize = 4096;
/// Of a command line, the part read.
#[cfg(target_os = "linux")]
const PROC_CMDLINE_MAX: usize = 4096;

/// At most `max` bytes of a `/proc` file, read straight into one buffer.
/// `std::fs::read` asks for the size first, which procfs gives as 0, and
/// then reads in growing steps (six reads for a `stat`); the hook reads two
/// such files for every ancestor it looks at, on every prompt.
#[cfg(target_os = "linux")]
fn read_proc(path: &str, max: usize) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).ok()?;
    let mut out = vec![0u8; max];
    let mut n = 0;
    while n < max {
        match file.read(&mut out[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    out.truncate(n);
    Some(out)
}

#[cfg(not(target_os = "linux"))]
fn look_at(pid: i64) -> Option<(i64, String, Option<i64>)> {
    parent_and_name(pid).map(|(ppid, desc)| (ppid, desc, None))
}

#[cfg(windows)]
mod win {
    use std::ffi::c_void;

    #[repr(C)]
    #[derive(Default, Clone, Copy)]
    struct FileTime {
        low: u32,
        high: u32,
    }

    #[repr(C)]
    struct ProcessEntry32W {
        size: u32,
        usage: u32,
        pid: u32,
        default_heap: usize,
        module: u32,
        threads: u32,
        ppid: u32,
        pri: i32,
        flags: u32,
        exe: [u16; 260],
    }

    #[link(name = "kernel32")]
    extern "system" {
        fn OpenProcess(access: u32, inherit: i32, pid: u32) -> *mut c_void;
        fn GetProcessTimes(
            h: *mut c_void,
            c: *mut FileTime,
            e: *mut FileTime,
            k: *mut FileTime,
            u: *mut FileTime,
        ) -> i32;
        fn GetExitCodeProcess(h: *mut c_void, code: *mut u32) -> i32;
        fn CloseHandle(h: *mut c_void) -> i32;
        fn GetSystemTimeAsFileTime(t: *mut FileTime);
        fn CreateToolhelp32Snapshot(flags: u32, pid: u32) -> *mut c_void;
        fn Process32FirstW(h: *mut c_void, e: *mut ProcessEntry32W) -> i32;
        fn Process32NextW(h: *mut c_void, e: *mut ProcessEntry32W) -> i32;
    }
    const PROCESS_QUERY_LIMITED_INFORMATION: u32 = 0x1000;
    const STILL_ACTIVE: u32 = 259;
    const TH32CS_SNAPPROCESS: u32 = 2;

    /// The creation time, once it is a real one. Wine reports a placeholder
    /// (0x5555…, its server's fill for memory not yet written, years in the
    /// future) for a process that has not finished starting: a start time
    /// read then would never match a later one and the process would look
    /// dead. So a value later than now is read again for up to 1 s; a
    /// process that never finishes starting counts as not running.
    pub fn start_time(pid: i64) -> Option<i64> {
        for _ in 0..200 {
            let created = created_if_running(pid)?;
            if created > 0 && created <= now() + 10_000_000 {
                return Some(created);
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        None
    }

    fn now() -> i64 {
        let mut t = FileTime::default();
        // SAFETY: writes one FILETIME.
        unsafe { GetSystemTimeAsFileTime(&mut t) };
        ((t.high as i64) << 32) | t.low as i64
    }

    fn created_if_running(pid: i64) -> Option<i64> {
        // SAFETY: plain Win32 calls on a handle this function opens and closes.
        unsafe {
            let h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid as u32);
            if h.is_null() {
                return None;
            }
            let (mut c, mut e, mut k, mut u) = Default::default();
            let ok = GetProcessTimes(h, &mut c, &mut e, &mut k, &mut u) != 0;
            let mut code = 0u32;
            let running = GetExitCodeProcess(h, &mut code) != 0 && code == STILL_ACTIVE;
            CloseHandle(h);
            let c: FileTime = c;
            (ok && running).then_some(((c.high as i64) << 32) | c.low as i64)
        }
    }

    pub fn parent_and_name(pid: i64) -> Option<(i64, String)> {
        snapshot().into_iter().find(|e| e.pid == pid).map(|e| (e.ppid, e.exe))
    }

    /// One process of a snapshot: PID, parent PID (which Windows never
    /// rewrites, so it may name a process that has exited) and exe name.
    pub struct Entry {
        pub pid: i64,
        pub ppid: i64,
        pub exe: String,
    }

    /// Every process, from one Toolhelp snapshot.
    pub fn snapshot() -> Vec<Entry> {
        let mut all = vec![];
        // SAFETY: a process snapshot walked with a correctly sized entry, then closed.
        unsafe {
            let snap = CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0);
            if snap.is_null() || snap as isize == -1 {
                return all;
            }
            let mut e: ProcessEntry32W = std::mem::zeroed();
            e.size = std::mem::size_of::<ProcessEntry32W>() as u32;
            let mut more = Process32FirstW(snap, &mut e) != 0;
            while more {
                let len = e.exe.iter().position(|&c| c == 0).unwrap_or(e.exe.len());
                all.push(Entry {
                    pid: e.pid as i64,
                    ppid: e.ppid as i64,
                    exe: String::from_utf16_lossy(&e.exe[..len]),
                });
                more = Process32NextW(snap, &mut e) != 0;
            }
            CloseHandle(snap);
        }
        all
    }
}

/// The live descendants of a process, found by parent PID in one snapshot,
/// whether or not the process itself still runs (Windows keeps a dead
/// parent's PID in its children, and does not reparent them). A PID is only
/// followed down to processes started after it (`start`), and not to the
/// children of a later process that reused a dead parent's PID, so a reused
/// PID never pulls in a stranger's processes.
#[cfg(windows)]
pub fn descendants(pid: i64, start: Option<i64>) -> Vec<ProcId> {
    let procs = win::snapshot().into_iter().map(|e| {
        let s = start_time(e.pid);
        (e, s)
    });
    let procs: Vec<_> = procs.collect();
    let holder_now = |p: i64| procs.iter().find(|(e, _)| e.pid == p).and_then(|(_, s)| *s);
    let mut found: Vec<ProcId> = vec![];
    let mut frontier = vec![(pid, start)];
    while let Some((parent, parent_start)) = frontier.pop() {
        let holder = holder_now(parent);
        for (e, s) in &procs {
            let Some(s) = *s else { continue };
            if e.ppid != parent || e.pid == parent || e.pid == pid || found.iter().any(|f| f.pid == e.pid) {
                continue;
            }
            if parent_start.is_some_and(|ps| s < ps) {
                continue; // older than the parent: the PID's earlier owner's child
            }
            if let (Some(h), Some(ps)) = (holder, parent_start) {
                if h != ps && s >= h {
                    continue; // a child of the process that reused the PID
                }
            }
            let child = ProcId { pid: e.pid, start: Some(s) };
            found.push(child);
            frontier.push((child.pid, child.start));
        }
    }
    found
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_its_pid_and_start_time() {
        let me = ProcId::of(std::process::id() as i64).expect("this process exists");
        assert!(me.alive());
        assert_eq!(ProcId::of(me.pid), Some(me), "the start time is stable");
        // The same PID with another start time is a reused PID: not alive.
        assert!(!ProcId { pid: me.pid, start: me.start.map(|s| s + 1) }.alive());
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let c = ProcId::of(child.id() as i64).unwrap();
        assert!(c.alive());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!c.alive(), "a killed and reaped process is gone");
    }

    #[test]
    fn claude_is_recognised_by_name_or_script() {
        assert!(looks_like_claude("claude\0claude\0-p"));
        assert!(looks_like_claude("node\0node\0/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js"));
        assert!(looks_like_claude("claude.exe"));
        assert!(!looks_like_claude("bash\0/bin/bash\0-c"));
        assert!(!looks_like_claude("claudette\0x"));
        // Codex CLI and Gemini CLI as their npm packages start them.
        for agent in [
            "codex\0/home/u/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex\0exec",
            "node\0node\0/home/u/node_modules/@openai/codex/bin/codex.js",
            "node\0node\0/home/u/node_modules/@google/gemini-cli/bundle/gemini.js",
            "node\0node\0/usr/local/bin/gemini",
            "claude\0claude\0-p",
        ] {
            assert!(looks_like_agent(agent), "{agent}");
        }
        for other in ["bash\0/bin/bash\0-c", "codexify\0x", "node\0node\0/srv/gemini-notes/app.js", "sh\0sh\0-c"] {
            assert!(!looks_like_agent(other), "{other}");
        }
    }

    #[test]
    fn the_parent_is_found() {
        // SAFETY: getppid has no preconditions.
        assert_eq!(parent_pid(), Some(unsafe { libc::getppid() } as i64));
    }

    /// A child whose command line is longer than what is read: its parent
    /// and start time are right, and its description is its command line's
    /// start, cut.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_long_command_line_is_read_from_its_start() {
        use std::os::unix::process::CommandExt;
        let long = format!("claude-code{}", "x".repeat(3 * PROC_CMDLINE_MAX));
        let mut child = std::process::Command::new("sleep")
            .arg0(&long)
            .arg("30")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // `spawn` returns once the child has begun its exec, which names it
        // before it lays out its arguments: until then its command line reads empty.
        let seen = look_until(&child, |desc| desc.split('\0').nth(1).is_some_and(|a| !a.is_empty()));
        let _ = child.kill();
        let _ = child.wait();
        let (ppid, desc, start) = seen.expect("the child is looked at");
        assert_eq!(ppid, i64::from(std::process::id()));
        assert!(start.is_some());
        let parts: Vec<&str> = desc.split('\0').collect();
        assert_eq!(parts[0], "sleep", "the name");
        assert!(parts[1].starts_with("claude-code") && parts[1].len() <= PROC_CMDLINE_MAX, "cut: {}", parts[1].len());
        assert!(looks_like_claude(&desc), "recognised from the start of its command line");
    }

    /// `look_at` of `child` until `done` holds of its description (at most 10 s).
    #[cfg(target_os = "linux")]
    fn look_until(child: &std::process::Child, done: impl Fn(&str) -> bool) -> Option<(i64, String, Option<i64>)> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let seen = look_at(i64::from(child.id()));
            if seen.as_ref().is_some_and(|(_, desc, _)| done(desc)) || std::time::Instant::now() > deadline {
                return seen;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// A shell between the agent and the hook is known by its name alone; any
    /// other process is described with its command line.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_shell_is_described_by_its_name_and_others_by_their_command_line() {
        // `read` is built in: the shell waits on its own, with no child.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "read line"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let seen = look_until(&child, |desc| desc.starts_with("sh"));
        let _ = child.kill();
        let _ = child.wait();
        let (ppid, desc, start) = seen.expect("the shell is looked at");
        assert_eq!((ppid, desc.as_str()), (i64::from(std::process::id()), "sh"));
        assert!(start.is_some());
        let (_, mine, _) = look_at(i64::from(std::process::id())).expect("this test process");
        assert!(mine.split('\0').count() >= 2, "a test binary is described with its arguments: {mine:?}");
    }
}

/// Run under Wine by tests/windows/run.sh (the lib's test exe, filtered on
/// `win_tests`): real Windows processes, no fakes.
#[cfg(all(test, windows))]
mod win_tests {
    use super::*;
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    /// cmd.exe reading a pipe this test holds open: a process that waits.
    /// `nested`: an outer cmd.exe whose child, an inner one, does the reading.
    fn waiting_cmd(nested: bool) -> Child {
        let mut c = Command::new("cmd.exe");
        if nested {
            c.args(["/c", "cmd.exe"]);
        }
        c.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap()
    }

    fn until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(v) = f() {
                return v;
            }
            assert!(Instant::now() < deadline, "{what}: not within 20 s");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn a_process_is_its_pid_and_start_time() {
        let me = ProcId::of(std::process::id() as i64).expect("this process exists");
        assert!(me.start.is_some_and(|s| s > 0), "a FILETIME: {me:?}");
        assert!(me.alive());
        assert_eq!(ProcId::of(me.pid), Some(me), "the start time is stable across calls");
        assert!(
            !ProcId { pid: me.pid, start: me.start.map(|s| s + 1) }.alive(),
            "another start time is another process"
        );
        // Read at once after the spawn (Wine: before the child finished
        // starting), the start time must be the one every later read gives.
        let mut fresh: Vec<(Child, ProcId)> = (0..4)
            .map(|_| {
                let ch = waiting_cmd(false);
                let p = ProcId::of(ch.id() as i64).expect("the child runs");
                (ch, p)
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        for (_, p) in &fresh {
            assert_eq!(ProcId::of(p.pid), Some(*p), "the start time read at spawn is the real one");
        }
        for (ch, _) in fresh.iter_mut() {
            let _ = ch.kill();
            let _ = ch.wait();
        }
        let mut child = waiting_cmd(false);
        let c = ProcId::of(child.id() as i64).expect("the child runs");
        assert_ne!(c.start, me.start, "a different process, a different start time");
        assert_eq!(ProcId::of(c.pid), Some(c));
        assert!(c.alive());
        child.kill().unwrap();
        child.wait().unwrap();
        // The handle std holds is closed by now; Wine may keep the process
        // object for an instant, so give it a moment.
        until("the killed process is gone", || (!c.alive()).then_some(()));
        assert_eq!(start_time(c.pid), None, "no start time for a dead PID");
        assert_eq!(start_time(0x7ffffff0), None, "nor for a PID that never ran");
    }

    #[test]
    fn parents_and_ancestors_come_from_the_snapshot() {
        let me = std::process::id() as i64;
        let mut child = waiting_cmd(false);
        let (ppid, name) = parent_and_name(child.id() as i64).expect("the child is in the snapshot");
        assert_eq!(ppid, me, "its parent is this process");
        assert!(name.eq_ignore_ascii_case("cmd.exe"), "{name}");
        // PCMAIL_CLAUDE_PID names the Claude Code process (the suite tests
        // the real walk up through a claude.exe); a dead one is none.
        std::env::set_var("PCMAIL_CLAUDE_PID", child.id().to_string());
        let found = claude_ancestor();
        std::env::remove_var("PCMAIL_CLAUDE_PID");
        assert_eq!(found, ProcId::of(child.id() as i64));
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn descendants_are_found_after_their_parent_exited_but_not_through_a_reused_pid() {
        let is_cmd = |p: &ProcId| parent_and_name(p.pid).is_some_and(|(_, n)| n.eq_ignore_ascii_case("cmd.exe"));
        // Wine sometimes ends the orphaned inner cmd.exe a moment after its
        // parent (their console goes with the parent), which says nothing
        // about the walk: a try counts only when the inner one outlived the
        // snapshot the walk read, and one such try must find it.
        for attempt in 1..=5 {
            let mut outer = waiting_cmd(true);
            let o = ProcId::of(outer.id() as i64).unwrap();
            let inner = until("the inner cmd.exe started", || descendants(o.pid, o.start).into_iter().find(is_cmd));
            assert!(inner.alive());
            outer.kill().unwrap();
            outer.wait().unwrap();
            until("the outer cmd.exe is gone", || (!o.alive()).then_some(()));
            let after = descendants(o.pid, o.start);
            if !inner.alive() {
                eprintln!("try {attempt}: the inner cmd.exe ended with its parent; again");
                continue;
            }
            assert!(
                after.contains(&inner),
                "found by the dead parent's PID: {after:?}, snapshot: {:?}",
                win::snapshot().iter().map(|e| (e.pid, e.ppid, e.exe.clone())).collect::<Vec<_>>()
            );
            // Had the PID belonged to a process started after the inner one,
            // the inner one could not be its child.
            let later = inner.start.map(|s| s + 1);
            assert!(descendants(o.pid, later).is_empty(), "a later owner of the PID has no such child");
            drop(outer.stdin.take()); // EOF: the inner cmd.exe ends
            until("the inner cmd.exe ends at EOF", || (!inner.alive()).then_some(()));
            return;
        }
        panic!("in 5 tries the inner cmd.exe never outlived its parent's kill");
    }
}
