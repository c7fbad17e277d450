//! Processes as leases see them: a process is its PID plus its start time,
//! so a PID the OS reused for another program is not the same process. One
//! `cfg` function per platform for the start time (Linux `/proc/PID/stat`,
//! Windows `GetProcessTimes`), and the walk up the ancestors that finds the
//! Claude Code process a hook or a `pcmail lease claim` runs under.

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
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
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
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat[open + 1..close].to_string();
    let ppid: i64 = stat[close + 2..].split_whitespace().nth(1)?.parse().ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<String> =
        cmdline.split(|&b| b == 0).take(2).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    Some((ppid, format!("{comm}\0{}", args.join("\0"))))
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

/// The Claude Code process this process runs under, looking at most 12
/// ancestors up. `PCMAIL_CLAUDE_PID` names it instead (tests, wrappers;
/// `0`: there is none).
pub fn claude_ancestor() -> Option<ProcId> {
    if let Ok(pid) = std::env::var("PCMAIL_CLAUDE_PID") {
        return pid.trim().parse::<i64>().ok().filter(|&p| p > 0).and_then(ProcId::of);
    }
    let mut pid = std::process::id() as i64;
    for _ in 0..12 {
        let (ppid, _) = parent_and_name(pid)?;
        if ppid <= 1 {
            return None;
        }
        let (_, desc) = parent_and_name(ppid)?;
        if looks_like_claude(&desc) {
            return ProcId::of(ppid);
        }
        pid = ppid;
    }
    None
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
        fn GetProcessTimes(h: *mut c_void, c: *mut FileTime, e: *mut FileTime, k: *mut FileTime, u: *mut FileTime) -> i32;
        fn GetExitCodeProcess(h: *mut c_void, code: *mut u32) -> i32;
        fn CloseHandle(h: *mut c_void) -> i32;
        fn CreateToolhelp32Snapshot(flags: u32, pid: u32) -> *mut c_void;
        fn Process32FirstW(h: *mut c_void, e: *mut ProcessEntry32W) -> i32;
        fn Process32NextW(h: *mut c_void, e: *mut ProcessEntry32W) -> i32;
    }
    const PROCESS_QUERY_LIMITED_INFORMATION: u32 = 0x1000;
    const STILL_ACTIVE: u32 = 259;
    const TH32CS_SNAPPROCESS: u32 = 2;

    pub fn start_time(pid: i64) -> Option<i64> {
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
            (ok && running).then(|| ((c.high as i64) << 32) | c.low as i64)
        }
    }

    pub fn parent_and_name(pid: i64) -> Option<(i64, String)> {
        // SAFETY: a process snapshot walked with a correctly sized entry, then closed.
        unsafe {
            let snap = CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0);
            if snap.is_null() || snap as isize == -1 {
                return None;
            }
            let mut e: ProcessEntry32W = std::mem::zeroed();
            e.size = std::mem::size_of::<ProcessEntry32W>() as u32;
            let mut found = None;
            let mut more = Process32FirstW(snap, &mut e) != 0;
            while more {
                if e.pid as i64 == pid {
                    let len = e.exe.iter().position(|&c| c == 0).unwrap_or(e.exe.len());
                    found = Some((e.ppid as i64, String::from_utf16_lossy(&e.exe[..len])));
                    break;
                }
                more = Process32NextW(snap, &mut e) != 0;
            }
            CloseHandle(snap);
            found
        }
    }
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
    }

    #[test]
    fn the_parent_is_found() {
        // SAFETY: getppid has no preconditions.
        assert_eq!(parent_pid(), Some(unsafe { libc::getppid() } as i64));
    }
}
