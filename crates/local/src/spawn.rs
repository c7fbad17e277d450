//! Starting a poller detached from the hook. The options come from this one
//! function per OS, and the tests use the same function (a trap met before: a
//! hand-written `detached: true` in a test passed on Linux and broke Windows).

use std::path::Path;
use std::process::{Command, Stdio};

/// What "detached" means on this OS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DetachOptions {
    /// Start a new session (Unix `setsid`): no controlling terminal, not
    /// killed with the hook's process group.
    pub new_session: bool,
    /// Windows creation flags (DETACHED_PROCESS | CREATE_NEW_PROCESS_GROUP | CREATE_NO_WINDOW).
    pub creation_flags: u32,
    /// All three standard streams are closed (/dev/null): Claude Code waits
    /// for the hook's pipes to close, so the child must not inherit them.
    pub null_stdio: bool,
}

pub fn detach_options() -> DetachOptions {
    if cfg!(windows) {
        DetachOptions { new_session: false, creation_flags: 0x0000_0008 | 0x0000_0200 | 0x0800_0000, null_stdio: true }
    } else {
        DetachOptions { new_session: true, creation_flags: 0, null_stdio: true }
    }
}

/// A command for `exe args…` with the detach options applied.
pub fn detached_command(exe: &Path, args: &[&str]) -> Command {
    let opts = detach_options();
    let mut cmd = Command::new(exe);
    cmd.args(args);
    if opts.null_stdio {
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    }
    #[cfg(unix)]
    if opts.new_session {
        use std::os::unix::process::CommandExt;
        // SAFETY: setsid is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    #[cfg(windows)]
    {
        use std::os::windows::process::CommandExt;
        cmd.creation_flags(opts.creation_flags);
    }
    cmd
}

/// Spawns and forgets. The child is reaped by init once the hook exits.
pub fn spawn_detached(exe: &Path, args: &[&str]) -> std::io::Result<u32> {
    #[cfg(windows)]
    stop_std_handles_inheriting();
    let child = detached_command(exe, args).spawn()?;
    Ok(child.id())
}

/// Rust's spawn on Windows passes bInheritHandles=TRUE, so every inheritable
/// handle reaches the child, including this process's own stdout/stderr pipes
/// from Claude Code: Claude Code would then wait for the poller to close them
/// (30 s under Wine in tests/windows). The hook exits right after, so its own
/// handles need not be inheritable.
#[cfg(windows)]
fn stop_std_handles_inheriting() {
    use std::ffi::c_void;
    #[link(name = "kernel32")]
    extern "system" {
        fn GetStdHandle(which: u32) -> *mut c_void;
        fn SetHandleInformation(handle: *mut c_void, mask: u32, flags: u32) -> i32;
    }
    const HANDLE_FLAG_INHERIT: u32 = 1;
    for which in [-10i32 as u32, -11i32 as u32, -12i32 as u32] {
        // SAFETY: plain Win32 calls on this process's own standard handles.
        unsafe {
            let h = GetStdHandle(which);
            if !h.is_null() && h as isize != -1 {
                SetHandleInformation(h, HANDLE_FLAG_INHERIT, 0);
            }
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn detached_child_has_its_own_session_and_no_inherited_streams() {
        let opts = detach_options();
        assert!(opts.new_session && opts.null_stdio);
        let mut child = detached_command(Path::new("/bin/sleep"), &["2"]).spawn().unwrap();
        let pid = child.id();
        std::thread::sleep(std::time::Duration::from_millis(200));
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
        let sid: i32 = fields[3].parse().unwrap();
        assert_eq!(sid, pid as i32, "child leads its own session");
        for fd in 0..3 {
            let target = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).unwrap();
            assert_eq!(target, Path::new("/dev/null"), "fd {fd}");
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
