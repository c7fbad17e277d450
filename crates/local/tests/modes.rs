//! The PC's data folder is 0700 and every file in it 0600,
//! whatever the umask (Unix; Windows is not proven).
#![cfg(unix)]

use pcmail_local::config::{Config, Paths};
use pcmail_local::locks;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).permissions().mode() & 0o777
}

#[test]
fn data_folder_and_files_are_private_with_umask_022() {
    // SAFETY: this test binary has this one test; the umask is process-wide.
    unsafe { libc::umask(0o022) };
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths::at(dir.path().join("pcmail"));
    let mut config = Config::default_for_this_pc();
    config.label = "pc-b".into();
    config.save(&paths).unwrap();
    let mut store = pcmail_store::Store::open(&paths.store()).unwrap();
    store.meta_set_i64("x", 1).unwrap();
    let _daemon = locks::try_lock(&paths.daemon_lock()).unwrap().unwrap();
    let _sync = locks::try_lock(&paths.sync_lock()).unwrap().unwrap();

    assert_eq!(mode(&paths.home), 0o700, "data folder");
    for f in ["config.toml", "store.db", "store.db-wal", "store.db-shm", "daemon.lock", "sync.lock"] {
        assert_eq!(mode(&paths.home.join(f)), 0o600, "{f}");
    }
    drop(store);

    // What an older pcmail left world-readable is made private on the next open.
    for f in ["store.db", "config.toml", "daemon.lock"] {
        std::fs::set_permissions(paths.home.join(f), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    std::fs::set_permissions(&paths.home, std::fs::Permissions::from_mode(0o755)).unwrap();
    drop(pcmail_store::Store::open(&paths.store()).unwrap());
    config.save(&paths).unwrap();
    drop(_daemon);
    let _again = locks::try_lock(&paths.daemon_lock()).unwrap().unwrap();
    assert_eq!(mode(&paths.home), 0o700);
    for f in ["store.db", "config.toml", "daemon.lock"] {
        assert_eq!(mode(&paths.home.join(f)), 0o600, "{f} after an old version");
    }
}
