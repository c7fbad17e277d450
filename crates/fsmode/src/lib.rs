//! Files holding mail, config or locks are readable by their owner only:
//! folders 0700, files 0600, whatever the process umask. Each concern is one
//! function with its `cfg` inside, so callers never write platform code.
//!
//! Unix only is proven. On Windows these functions create the same files and
//! folders and rely on the user profile's inherited ACLs (not proven here).

pub mod confined;

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

/// Mode of a private folder on Unix.
pub const DIR_MODE: u32 = 0o700;
/// Mode of a private file on Unix.
pub const FILE_MODE: u32 = 0o600;

/// Creates `dir` and its missing parents; the folders it creates and `dir`
/// itself end up private (0700). Parents that already existed are left alone.
pub fn create_private_dir_all(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        std::fs::DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir)?;
        // The umask may have cut bits off, and an older pcmail made it 0755.
        let meta = std::fs::metadata(dir)?;
        if meta.permissions().mode() & 0o777 != DIR_MODE {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DIR_MODE))?;
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir)
    }
}

/// Makes an existing file private (0600). A missing file is not an error.
pub fn restrict_file(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        match std::fs::metadata(path) {
            Ok(m) if m.permissions().mode() & 0o777 != FILE_MODE => {
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(FILE_MODE))
            }
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(())
    }
}

/// Sets the creation mode of `opts` to private (0600 on Unix, before the umask,
/// which can only take bits away).
pub fn private_open_options(opts: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(FILE_MODE)
    }
    #[cfg(not(unix))]
    {
        opts
    }
}

/// Opens (creating if needed) a private file for writing, without truncating;
/// a file an older version left readable by others is made private.
pub fn open_private_rw(path: &Path) -> io::Result<File> {
    let f = private_open_options(OpenOptions::new().create(true).truncate(false).read(true).write(true)).open(path)?;
    restrict_file(path)?;
    Ok(f)
}

/// Replaces the file at `path` atomically, the one way pcmail replaces a
/// whole file: a temp file in the same folder, written and fsync-ed, renamed
/// over `path`, then the folder fsync-ed, so a crash leaves the old file or
/// the new one and a reader never sees half of it. `mode`: the new file's
/// permission bits; None keeps those of the file replaced (0666 less the
/// umask for a new one). The folder must exist; it may be reached through
/// symlinks (it is the caller's choice), but a symlink at `path` itself is
/// replaced, never written through. For a folder whose content someone else
/// controls (a repo), use [`confined::replace`] with the repo as its root.
pub fn replace_file(path: &Path, content: &[u8], mode: Option<u32>) -> io::Result<()> {
    let (dir, name) = split_file(path)?;
    confined::Dir::open(dir, &[], false)?.replace(name, content, mode)
}

/// [`replace_file`] with the file private (0600) whatever it was before.
pub fn replace_private(path: &Path, content: &[u8]) -> io::Result<()> {
    replace_file(path, content, Some(FILE_MODE))
}

/// [`replace_private`] without its fsyncs ([`confined::Dir::replace_unsynced`]):
/// for a private cache file that a crash may lose and whose reader ignores a
/// damaged one.
pub fn replace_private_unsynced(path: &Path, content: &[u8]) -> io::Result<()> {
    let (dir, name) = split_file(path)?;
    confined::Dir::open(dir, &[], false)?.replace_unsynced(name, content, Some(FILE_MODE))
}

/// The folder of `path` (`.` for a bare name) and its file name.
fn split_file(path: &Path) -> io::Result<(&Path, &Path)> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("{}: not a file path", path.display())))?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    Ok((dir, Path::new(name)))
}

/// The outermost git work tree holding `path` (a folder above it with a
/// `.git` folder or file), looked up by name without following the path's
/// own symlinks, so a committed symlink inside a repo cannot make its target
/// look like the root; None outside any. A file pcmail writes inside a work
/// tree is the repo's content, and is written with [`confined`] below this
/// root: the outermost one, because every folder below it must then be real.
pub fn enclosing_work_tree(path: &Path) -> Option<std::path::PathBuf> {
    let abs = if path.is_absolute() { path.to_path_buf() } else { std::env::current_dir().ok()?.join(path) };
    let mut found = None;
    let mut dir = abs.parent();
    while let Some(d) = dir {
        if std::fs::symlink_metadata(d.join(".git")).is_ok() {
            found = Some(d.to_path_buf());
        }
        dir = d.parent();
    }
    found
}

/// Writes `bytes` to a new private file at `path` (replacing it).
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut f = private_open_options(OpenOptions::new().create(true).truncate(true).write(true)).open(path)?;
    restrict_file(path)?;
    f.write_all(bytes)?;
    Ok(())
}

/// Creates an empty private file if none exists (e.g. before SQLite creates a
/// database, so its -wal and -shm, which copy the database's mode, are private
/// too); an existing file is only chmod-ed, never opened: closing a
/// descriptor of a SQLite database would drop the POSIX locks that this
/// process's connections hold on it.
pub fn ensure_private_file(path: &Path) -> io::Result<()> {
    match private_open_options(OpenOptions::new().write(true).create_new(true)).open(path) {
        Ok(f) => {
            drop(f);
            restrict_file(path)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => restrict_file(path),
        Err(e) => Err(e),
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn modes_are_private_under_a_permissive_umask_and_fix_old_files() {
        // SAFETY: umask is process-wide; this test binary's other tests do not create files.
        let old = unsafe { libc::umask(0o022) };
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a/b");
        create_private_dir_all(&nested).unwrap();
        assert_eq!(mode(&dir.path().join("a")), 0o700);
        assert_eq!(mode(&nested), 0o700);

        let f = nested.join("f");
        write_private(&f, b"x").unwrap();
        assert_eq!(mode(&f), 0o600);
        let g = nested.join("g");
        ensure_private_file(&g).unwrap();
        assert_eq!(mode(&g), 0o600);

        // What an older pcmail left behind is tightened.
        let old_dir = dir.path().join("old");
        std::fs::create_dir(&old_dir).unwrap();
        std::fs::set_permissions(&old_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let old_file = old_dir.join("config.toml");
        std::fs::write(&old_file, "x").unwrap();
        assert_eq!(mode(&old_file), 0o644);
        create_private_dir_all(&old_dir).unwrap();
        restrict_file(&old_file).unwrap();
        assert_eq!(mode(&old_dir), 0o700);
        assert_eq!(mode(&old_file), 0o600);
        restrict_file(&old_dir.join("missing")).unwrap();
        unsafe { libc::umask(old) };
    }

    #[test]
    fn an_unsynced_replace_is_whole_private_and_never_writes_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("cache.json");
        std::fs::write(&f, "old").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        replace_private_unsynced(&f, b"new").unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"new");
        assert_eq!(mode(&f), 0o600);

        let target = dir.path().join("target");
        std::fs::write(&target, "keep").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        replace_private_unsynced(&link, b"cache").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        assert!(!std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read(&link).unwrap(), b"cache");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 3, "no temp file left: {names:?}");
    }
}
