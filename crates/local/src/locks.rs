//! At most one poller per PC user: the daemon holds `daemon.lock` for its
//! life, a one-shot `sync` holds `sync.lock` for its cycle. The OS drops the
//! lock when the process dies, so a killed poller never blocks the next one.

use std::fs::{File, OpenOptions};
use std::path::Path;
use std::time::Duration;

/// The longest a hook (or another reader that must not stall a session)
/// waits for the store's write lock.
pub const HOOK_LOCK_BUDGET: Duration = Duration::from_millis(1500);

pub struct HeldLock {
    _file: File,
}

/// Takes the lock at `path` without waiting; None when another process has it.
pub fn try_lock(path: &Path) -> std::io::Result<Option<HeldLock>> {
    if let Some(dir) = path.parent() {
        pcmail_fsmode::create_private_dir_all(dir)?;
    }
    let file = pcmail_fsmode::open_private_rw(path)?;
    match file.try_lock() {
        Ok(()) => {
            let _ = file.set_len(0);
            let _ = std::io::Write::write_all(&mut &file, std::process::id().to_string().as_bytes());
            Ok(Some(HeldLock { _file: file }))
        }
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// True when some process holds the lock at `path` right now.
pub fn is_held(path: &Path) -> bool {
    let Ok(file) = OpenOptions::new().read(true).write(true).open(path) else { return false };
    match file.try_lock() {
        Ok(()) => {
            let _ = file.unlock();
            false
        }
        Err(std::fs::TryLockError::WouldBlock) => true,
        Err(_) => false,
    }
}

pub fn poller_alive(paths: &crate::config::Paths) -> bool {
    is_held(&paths.daemon_lock()) || is_held(&paths.sync_lock())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_taker_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.lock");
        assert!(!is_held(&p));
        let first = try_lock(&p).unwrap().expect("first takes it");
        assert!(is_held(&p));
        assert!(try_lock(&p).unwrap().is_none());
        drop(first);
        assert!(!is_held(&p));
        assert!(try_lock(&p).unwrap().is_some());
    }
}
