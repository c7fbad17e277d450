//! Writes inside a folder whose content someone else controls (a repo: its
//! committed files, a clone's hooks folder, a build's output folder) that
//! this content cannot redirect elsewhere. A committed symlink at a file or
//! folder pcmail writes (`.gitattributes`, `.claude/handoffs`, …) would
//! otherwise make a plain `open` write wherever it points.
//!
//! The rule: every folder between the root and the file is a real folder,
//! walked one name at a time with `O_NOFOLLOW` from a descriptor of the one
//! above (so swapping a folder for a symlink halfway does not help either);
//! the file is opened with `O_NOFOLLOW`, must be a regular file, and an
//! existing file is only appended to when it has a single link (a hard link
//! would carry the write to another path). The root itself is the caller's
//! choice and may be reached through symlinks. A refused path is an
//! [`io::Error`] whose inner error is a [`Refused`] ([`is_refused`]).
//!
//! This is the one atomic-replace helper for such folders: a private temp
//! file in the same folder, written and fsync-ed, renamed over the target,
//! then the folder fsync-ed, so a crash leaves the old file or the new one.
//!
//! Unix is proven; elsewhere the same checks are made on paths (symlink
//! metadata of each component), which a racing writer could get around.

use std::ffi::OsStr;
use std::io;
use std::path::{Component, Path, PathBuf};

/// Why a path was refused.
#[derive(Debug)]
pub struct Refused {
    pub path: PathBuf,
    pub why: &'static str,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "refused to write {}: {} (pcmail writes only regular files in real folders inside the repo, \
             never through a symlink or a hard link)",
            self.path.display(),
            self.why
        )
    }
}

impl std::error::Error for Refused {}

fn refused(path: PathBuf, why: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, Refused { path, why })
}

/// Whether `e` is a refusal of this module (a symlink, a hard link, a
/// non-folder, a path leaving the root).
pub fn is_refused(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|i| i.is::<Refused>())
}

/// `path` (absolute, under `root`, or relative to it) split into its folder
/// names below `root` and the file name; `..`, a root or a prefix in the
/// part below `root` is refused.
fn split_under(root: &Path, path: &Path) -> io::Result<(Vec<PathBuf>, PathBuf)> {
    let rel = if path.is_absolute() {
        path.strip_prefix(root).map_err(|_| refused(path.to_path_buf(), "it is not inside the repo"))?
    } else {
        path
    };
    let mut names = vec![];
    for c in rel.components() {
        match c {
            Component::Normal(n) => names.push(PathBuf::from(n)),
            Component::CurDir => {}
            _ => return Err(refused(path.to_path_buf(), "its path leaves the repo")),
        }
    }
    let file = names.pop().ok_or_else(|| refused(path.to_path_buf(), "it names no file"))?;
    Ok((names, file))
}

/// A real folder under a root, opened by walking down from the root.
pub struct Dir {
    path: PathBuf,
    #[cfg(unix)]
    fd: std::os::fd::OwnedFd,
}

/// The folder of `path` under `root` (each folder below `root` real, made
/// when missing if `create`) and the file's name in it.
pub fn parent_of(root: &Path, path: &Path, create: bool) -> io::Result<(Dir, PathBuf)> {
    let (dirs, file) = split_under(root, path)?;
    Ok((Dir::open(root, &dirs, create)?, file))
}

impl Dir {
    /// Walks `names` down from `root`; each must be a folder and not a
    /// symlink. Missing ones are created (mode 0777 less the umask) when
    /// `create`, else the walk fails with NotFound.
    pub fn open(root: &Path, names: &[PathBuf], create: bool) -> io::Result<Dir> {
        #[cfg(unix)]
        {
            use std::os::fd::{FromRawFd, OwnedFd};
            let c = cpath(root.as_os_str())?;
            // SAFETY: a valid C string; the descriptor is owned below.
            let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            let mut dir = Dir { path: root.to_path_buf(), fd: unsafe { OwnedFd::from_raw_fd(fd) } };
            for n in names {
                dir = dir.child(n, create)?;
            }
            Ok(dir)
        }
        #[cfg(not(unix))]
        {
            let mut path = root.to_path_buf();
            for n in names {
                path.push(n);
                match std::fs::symlink_metadata(&path) {
                    Ok(m) if m.file_type().is_symlink() => {
                        return Err(refused(path, "a folder on its way is a symlink"))
                    }
                    Ok(m) if !m.is_dir() => return Err(refused(path, "a folder on its way is not a folder")),
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound && create => std::fs::create_dir(&path)
                        .or_else(|e| if e.kind() == io::ErrorKind::AlreadyExists { Ok(()) } else { Err(e) })?,
                    Err(e) => return Err(e),
                }
            }
            Ok(Dir { path })
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    #[cfg(unix)]
    fn child(&self, name: &Path, create: bool) -> io::Result<Dir> {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        let path = self.path.join(name);
        let c = cpath(name.as_os_str())?;
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        for _ in 0..2 {
            // SAFETY: a valid descriptor and C string.
            let fd = unsafe { libc::openat(self.fd.as_raw_fd(), c.as_ptr(), flags) };
            if fd >= 0 {
                return Ok(Dir { path, fd: unsafe { OwnedFd::from_raw_fd(fd) } });
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::ENOENT) if create => {
                    // SAFETY: as above. EEXIST: made meanwhile; the open decides.
                    if unsafe { libc::mkdirat(self.fd.as_raw_fd(), c.as_ptr(), 0o777) } != 0 {
                        let m = io::Error::last_os_error();
                        if m.raw_os_error() != Some(libc::EEXIST) {
                            return Err(m);
                        }
                    }
                }
                Some(libc::ELOOP) | Some(libc::ENOTDIR) => {
                    let why = if self.lstat(&c).is_some_and(|s| s.st_mode & libc::S_IFMT == libc::S_IFLNK) {
                        "a folder on its way is a symlink"
                    } else {
                        "a folder on its way is not a folder"
                    };
                    return Err(refused(path, why));
                }
                _ => return Err(e),
            }
        }
        Err(io::Error::new(io::ErrorKind::NotFound, format!("{}: could not be made", path.display())))
    }

    #[cfg(unix)]
    fn lstat(&self, name: &std::ffi::CStr) -> Option<libc::stat> {
        use std::os::fd::AsRawFd;
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid descriptor, C string and buffer.
        let r = unsafe { libc::fstatat(self.fd.as_raw_fd(), name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
        (r == 0).then_some(st)
    }

    /// Opens `name` in this folder for writing, never through a symlink;
    /// the result must be a regular file (a FIFO is not waited on).
    fn open_file(&self, name: &Path, flags: i32, mode: u32) -> io::Result<std::fs::File> {
        let path = self.path.join(name);
        #[cfg(unix)]
        let f = {
            use std::os::fd::{AsRawFd, FromRawFd};
            let c = cpath(name.as_os_str())?;
            let all = flags | libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK;
            // SAFETY: valid descriptor and C string; the descriptor is owned below.
            let fd = unsafe { libc::openat(self.fd.as_raw_fd(), c.as_ptr(), all, mode as libc::c_uint) };
            if fd < 0 {
                let e = io::Error::last_os_error();
                return Err(match e.raw_os_error() {
                    Some(libc::ELOOP) => refused(path, "it is a symlink"),
                    Some(libc::EISDIR) => refused(path, "it is a folder"),
                    // A FIFO with no reader (O_NONBLOCK: never waited on).
                    Some(libc::ENXIO) => refused(path, "it is not a regular file"),
                    _ => e,
                });
            }
            unsafe { std::fs::File::from_raw_fd(fd) }
        };
        #[cfg(not(unix))]
        let f = {
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(refused(path, "it is a symlink"));
            }
            let _ = mode;
            let mut o = std::fs::OpenOptions::new();
            o.write(true);
            if flags & O_EXCL != 0 {
                o.create_new(true);
            } else if flags & O_CREAT != 0 {
                o.create(true);
            }
            if flags & O_APPEND != 0 {
                o.append(true);
            }
            o.open(&path)?
        };
        let meta = f.metadata()?;
        if !meta.is_file() {
            return Err(refused(path, "it is not a regular file"));
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            // `ensure_with_header` links its temp file to the name and removes
            // the temp right after: a writer in another process can open the
            // file in between and see two links for that instant. A second
            // link that lasts is refused.
            let mut meta = meta;
            let mut waited = std::time::Duration::ZERO;
            while meta.nlink() > 1 && waited < TRANSIENT_LINK_WAIT {
                std::thread::sleep(std::time::Duration::from_millis(1));
                waited += std::time::Duration::from_millis(1);
                meta = f.metadata()?;
            }
            if meta.nlink() > 1 {
                return Err(refused(path, "it has another hard link"));
            }
        }
        Ok(f)
    }

    /// Creates `name` with `content` (never replacing anything, a dangling
    /// symlink included), file and folder fsync-ed; `Ok(false)` when a file
    /// of that name exists.
    pub fn create_new(&self, name: &Path, content: &[u8]) -> io::Result<bool> {
        use std::io::Write;
        let mut f = match self.open_file(name, O_CREAT | O_EXCL, 0o666) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => return Err(e),
        };
        f.write_all(content)?;
        f.sync_all()?;
        self.sync();
        Ok(true)
    }

    /// Appends `bytes` in one write(2) on an O_APPEND descriptor (so lines
    /// from concurrent writers never interleave), creating the file when
    /// missing.
    pub fn append(&self, name: &Path, bytes: &[u8]) -> io::Result<()> {
        use std::io::Write;
        let mut f = self.open_file(name, O_CREAT | O_APPEND, 0o666)?;
        let n = f.write(bytes)?;
        if n != bytes.len() {
            // Only a full disk or a quota does this to a regular file.
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short append: {n} of {} bytes", bytes.len()),
            ));
        }
        Ok(())
    }

    /// Makes sure `name` exists, starting with `header` when this call
    /// creates it: the header goes to a temp file that is linked into place
    /// (link(2) never replaces, and never writes through a symlink), so no
    /// appender gets a line in before the header.
    pub fn ensure_with_header(&self, name: &Path, header: &[u8]) -> io::Result<()> {
        match self.kind(name) {
            Some(Kind::File) => return Ok(()),
            Some(Kind::Symlink) => return Err(refused(self.path.join(name), "it is a symlink")),
            Some(Kind::Other) => return Err(refused(self.path.join(name), "it is not a regular file")),
            None => {}
        }
        let tmp = temp_name(name);
        self.write_temp(&tmp, header, None, true)?;
        let linked = self.link(&tmp, name);
        self.remove(&tmp);
        match linked {
            Ok(()) => {
                self.sync();
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            // A file system without hard links: create it plainly (a concurrent
            // appender may then get its line in before the header: harmless).
            Err(_) => self.create_new(name, header).map(|_| ()),
        }
    }

    /// Whether `name` exists in this folder (a dangling symlink included).
    pub fn exists(&self, name: &Path) -> bool {
        self.kind(name).is_some()
    }

    /// Renames `from` to `to` inside this folder: a symlink is moved as the
    /// link itself, never followed.
    pub fn rename_in(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.rename(from, to)
    }

    /// Removes `name` (a symlink: the link itself).
    pub fn remove_file(&self, name: &Path) -> io::Result<()> {
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            let c = cpath(name.as_os_str())?;
            // SAFETY: valid descriptor and C string.
            if unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) } != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        }
        #[cfg(not(unix))]
        {
            std::fs::remove_file(self.path.join(name))
        }
    }

    /// The content of `name`, never read through a symlink (refused); None
    /// when it does not exist. Must be a regular file.
    pub fn read(&self, name: &Path) -> io::Result<Option<Vec<u8>>> {
        use std::io::Read;
        match self.kind(name) {
            None => return Ok(None),
            Some(Kind::Symlink) => return Err(refused(self.path.join(name), "it is a symlink")),
            Some(Kind::Other) => return Err(refused(self.path.join(name), "it is not a regular file")),
            Some(Kind::File) => {}
        }
        #[cfg(unix)]
        let mut f = {
            use std::os::fd::{AsRawFd, FromRawFd};
            let c = cpath(name.as_os_str())?;
            let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK;
            // SAFETY: valid descriptor and C string; the descriptor is owned below.
            let fd = unsafe { libc::openat(self.fd.as_raw_fd(), c.as_ptr(), flags) };
            if fd < 0 {
                let e = io::Error::last_os_error();
                return match e.raw_os_error() {
                    Some(libc::ENOENT) => Ok(None),
                    Some(libc::ELOOP) => Err(refused(self.path.join(name), "it is a symlink")),
                    _ => Err(e),
                };
            }
            unsafe { std::fs::File::from_raw_fd(fd) }
        };
        #[cfg(not(unix))]
        let mut f = std::fs::File::open(self.path.join(name))?;
        if !f.metadata()?.is_file() {
            return Err(refused(self.path.join(name), "it is not a regular file"));
        }
        let mut out = vec![];
        f.read_to_end(&mut out)?;
        Ok(Some(out))
    }

    /// Copies `name` to a new file beside it, `NAME.pcmail-backup-SECS` (a
    /// `-N` added when that exists: two runs in one second keep both), with
    /// its permission bits; None when there is no `name`.
    pub fn backup(&self, name: &Path, now_secs: u64) -> io::Result<Option<PathBuf>> {
        let Some(content) = self.read(name)? else { return Ok(None) };
        let mode = self.mode_of(name);
        let base = format!("{}.pcmail-backup-{now_secs}", name.to_string_lossy());
        for n in 0..1000u32 {
            let candidate = PathBuf::from(if n == 0 { base.clone() } else { format!("{base}-{n}") });
            let mut f = match self.open_file(&candidate, O_CREAT | O_EXCL, mode.unwrap_or(0o600)) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            };
            use std::io::Write;
            f.write_all(&content)?;
            f.sync_all()?;
            self.sync();
            return Ok(Some(self.path.join(candidate)));
        }
        Err(io::Error::new(io::ErrorKind::AlreadyExists, format!("{}: 1000 backups this second", base)))
    }

    /// Replaces `name` with `content` atomically (temp file in this folder,
    /// fsync, rename, fsync of the folder): a reader sees the old file or the
    /// new one. The rename replaces a symlink at `name` itself, never its
    /// target. `mode`: the new file's permission bits; None keeps those of
    /// the file replaced (0666 less the umask for a new one).
    pub fn replace(&self, name: &Path, content: &[u8], mode: Option<u32>) -> io::Result<()> {
        self.replace_synced(name, content, mode, true)
    }

    /// [`Dir::replace`] without the two fsyncs: still atomic for readers
    /// while the system runs, but a crash may lose the new content or leave
    /// an empty file. Only for a file that can be built again and whose
    /// reader checks what it reads (a cache): the fsyncs cost more than many
    /// such files save (about 12 ms on a virtual disk).
    pub fn replace_unsynced(&self, name: &Path, content: &[u8], mode: Option<u32>) -> io::Result<()> {
        self.replace_synced(name, content, mode, false)
    }

    fn replace_synced(&self, name: &Path, content: &[u8], mode: Option<u32>, sync: bool) -> io::Result<()> {
        let tmp = temp_name(name);
        let keep = mode.or_else(|| self.mode_of(name));
        self.write_temp(&tmp, content, keep, sync)?;
        let r = self.rename(&tmp, name);
        if r.is_err() {
            self.remove(&tmp);
        }
        r?;
        if sync {
            self.sync();
        }
        Ok(())
    }

    fn write_temp(&self, tmp: &Path, content: &[u8], mode: Option<u32>, sync: bool) -> io::Result<()> {
        use std::io::Write;
        let mut f = self.open_file(tmp, O_CREAT | O_EXCL, mode.unwrap_or(0o666))?;
        let done = (|| {
            #[cfg(unix)]
            if let Some(m) = mode {
                use std::os::unix::fs::PermissionsExt;
                f.set_permissions(std::fs::Permissions::from_mode(m))?;
            }
            f.write_all(content)?;
            if sync {
                f.sync_all()?;
            }
            Ok(())
        })();
        if done.is_err() {
            self.remove(tmp);
        }
        done
    }

    /// What `name` is, not following a symlink; None when missing.
    fn kind(&self, name: &Path) -> Option<Kind> {
        #[cfg(unix)]
        {
            let st = self.lstat(&cpath(name.as_os_str()).ok()?)?;
            Some(match st.st_mode & libc::S_IFMT {
                libc::S_IFREG => Kind::File,
                libc::S_IFLNK => Kind::Symlink,
                _ => Kind::Other,
            })
        }
        #[cfg(not(unix))]
        {
            let m = std::fs::symlink_metadata(self.path.join(name)).ok()?;
            Some(if m.file_type().is_symlink() {
                Kind::Symlink
            } else if m.is_file() {
                Kind::File
            } else {
                Kind::Other
            })
        }
    }

    fn mode_of(&self, name: &Path) -> Option<u32> {
        #[cfg(unix)]
        {
            let st = self.lstat(&cpath(name.as_os_str()).ok()?)?;
            (st.st_mode & libc::S_IFMT == libc::S_IFREG).then_some((st.st_mode & 0o7777) as u32)
        }
        #[cfg(not(unix))]
        {
            let _ = name;
            None
        }
    }

    fn link(&self, from: &Path, to: &Path) -> io::Result<()> {
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            let (a, b) = (cpath(from.as_os_str())?, cpath(to.as_os_str())?);
            let fd = self.fd.as_raw_fd();
            // SAFETY: valid descriptor and C strings; flags 0: no symlink followed.
            if unsafe { libc::linkat(fd, a.as_ptr(), fd, b.as_ptr(), 0) } != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        }
        #[cfg(not(unix))]
        {
            std::fs::hard_link(self.path.join(from), self.path.join(to))
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            let (a, b) = (cpath(from.as_os_str())?, cpath(to.as_os_str())?);
            let fd = self.fd.as_raw_fd();
            // SAFETY: valid descriptor and C strings.
            if unsafe { libc::renameat(fd, a.as_ptr(), fd, b.as_ptr()) } != 0 {
                let e = io::Error::last_os_error();
                if matches!(e.raw_os_error(), Some(libc::EISDIR) | Some(libc::ENOTEMPTY) | Some(libc::EEXIST)) {
                    return Err(refused(self.path.join(to), "it is a folder"));
                }
                return Err(e);
            }
            Ok(())
        }
        #[cfg(not(unix))]
        {
            std::fs::rename(self.path.join(from), self.path.join(to))
        }
    }

    fn remove(&self, name: &Path) {
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            if let Ok(c) = cpath(name.as_os_str()) {
                // SAFETY: valid descriptor and C string.
                unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) };
            }
        }
        #[cfg(not(unix))]
        {
            let _ = std::fs::remove_file(self.path.join(name));
        }
    }

    /// fsync of the folder, so a new name survives a crash (best effort: some
    /// file systems refuse it on a folder).
    fn sync(&self) {
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            // SAFETY: a valid descriptor.
            unsafe { libc::fsync(self.fd.as_raw_fd()) };
        }
    }
}

enum Kind {
    File,
    Symlink,
    Other,
}

/// How long a file opened for writing may have a second hard link before it
/// is refused: long enough for another process's `ensure_with_header` to
/// remove its temp name even when this machine is busy.
#[cfg(unix)]
const TRANSIENT_LINK_WAIT: std::time::Duration = std::time::Duration::from_millis(250);
#[cfg(unix)]
const O_CREAT: i32 = libc::O_CREAT;
#[cfg(unix)]
const O_EXCL: i32 = libc::O_EXCL;
#[cfg(unix)]
const O_APPEND: i32 = libc::O_APPEND;
#[cfg(not(unix))]
const O_CREAT: i32 = 1;
#[cfg(not(unix))]
const O_EXCL: i32 = 2;
#[cfg(not(unix))]
const O_APPEND: i32 = 4;

#[cfg(unix)]
fn cpath(s: &OsStr) -> io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(s.as_bytes()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in a path"))
}

#[cfg(not(unix))]
#[allow(dead_code)]
fn cpath(_: &OsStr) -> io::Result<()> {
    Ok(())
}

fn temp_name(name: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    PathBuf::from(format!(
        ".{}.{}.{}{:08x}.tmp",
        name.to_string_lossy(),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed),
        nanos
    ))
}

/// Creates `path` (under `root`) with `content`, never replacing; see [`Dir::create_new`].
pub fn create_new(root: &Path, path: &Path, content: &[u8]) -> io::Result<bool> {
    let (d, f) = parent_of(root, path, true)?;
    d.create_new(&f, content)
}

/// Appends to `path` (under `root`) in one write; see [`Dir::append`].
pub fn append(root: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
    let (d, f) = parent_of(root, path, true)?;
    d.append(&f, bytes)
}

/// See [`Dir::ensure_with_header`].
pub fn ensure_with_header(root: &Path, path: &Path, header: &[u8]) -> io::Result<()> {
    let (d, f) = parent_of(root, path, true)?;
    d.ensure_with_header(&f, header)
}

/// Reads `path` (under `root`), never through a symlink; see [`Dir::read`].
pub fn read(root: &Path, path: &Path) -> io::Result<Option<Vec<u8>>> {
    let (d, f) = match parent_of(root, path, false) {
        Ok(x) => x,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    d.read(&f)
}

/// Backs `path` (under `root`) up beside it; see [`Dir::backup`].
pub fn backup(root: &Path, path: &Path, now_secs: u64) -> io::Result<Option<PathBuf>> {
    let (d, f) = match parent_of(root, path, false) {
        Ok(x) => x,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    d.backup(&f, now_secs)
}

/// Replaces `path` (under `root`) atomically; see [`Dir::replace`].
pub fn replace(root: &Path, path: &Path, content: &[u8], mode: Option<u32>) -> io::Result<()> {
    let (d, f) = parent_of(root, path, true)?;
    d.replace(&f, content, mode)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, tempfile::TempDir) {
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap())
    }

    #[test]
    fn writes_land_inside_and_leave_no_temp_files() {
        let (repo, _) = setup();
        let r = repo.path();
        let p = r.join("a/b/INDEX.md");
        ensure_with_header(r, &p, b"# h\n").unwrap();
        append(r, &p, b"x\n").unwrap();
        ensure_with_header(r, &p, b"# other\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "# h\nx\n");
        assert!(create_new(r, &r.join("a/n.md"), b"1").unwrap());
        assert!(!create_new(r, &r.join("a/n.md"), b"2").unwrap());
        replace(r, &r.join("a/n.md"), b"3", None).unwrap();
        assert_eq!(std::fs::read_to_string(r.join("a/n.md")).unwrap(), "3");
        assert_eq!(std::fs::read_dir(r.join("a/b")).unwrap().count(), 1);
        assert_eq!(std::fs::read_dir(r.join("a")).unwrap().count(), 2);
    }

    #[test]
    fn symlinked_files_folders_and_hard_links_are_refused() {
        let (repo, out) = setup();
        let (r, o) = (repo.path(), out.path());
        let victim = o.join("victim");
        std::fs::write(&victim, "keep\n").unwrap();

        // A symlinked file, existing target or dangling.
        symlink(&victim, r.join(".gitattributes")).unwrap();
        let e = append(r, &r.join(".gitattributes"), b"x\n").unwrap_err();
        assert!(is_refused(&e), "{e}");
        symlink(o.join("new"), r.join("dangling")).unwrap();
        assert!(is_refused(&append(r, &r.join("dangling"), b"x").unwrap_err()));
        assert!(is_refused(&ensure_with_header(r, &r.join("dangling"), b"x").unwrap_err()));
        assert!(!create_new(r, &r.join("dangling"), b"x").unwrap(), "a dangling symlink is never written through");

        // A symlinked folder on the way, first or deeper.
        symlink(o, r.join(".claude")).unwrap();
        let e = ensure_with_header(r, &r.join(".claude/handoffs/INDEX.md"), b"h").unwrap_err();
        assert!(is_refused(&e) && e.to_string().contains("symlink"), "{e}");
        std::fs::remove_file(r.join(".claude")).unwrap();
        std::fs::create_dir(r.join(".claude")).unwrap();
        symlink(o, r.join(".claude/memory")).unwrap();
        assert!(is_refused(&append(r, &r.join(".claude/memory/t.md"), b"x").unwrap_err()));
        assert!(is_refused(&create_new(r, &r.join(".claude/memory/t.md"), b"x").unwrap_err()));

        // A hard link to a file outside.
        std::fs::hard_link(&victim, r.join("linked.md")).unwrap();
        assert!(is_refused(&append(r, &r.join("linked.md"), b"x").unwrap_err()));
        // A second name that goes away at once (another writer's header
        // being linked into place) is waited out, not refused.
        std::fs::write(r.join("log.md"), "header\n").unwrap();
        std::fs::hard_link(r.join("log.md"), r.join("log.md.tmp")).unwrap();
        let unlinker = {
            let tmp = r.join("log.md.tmp");
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(30));
                std::fs::remove_file(tmp).unwrap();
            })
        };
        append(r, &r.join("log.md"), b"line\n").unwrap();
        unlinker.join().unwrap();
        assert_eq!(std::fs::read_to_string(r.join("log.md")).unwrap(), "header\nline\n");

        // Paths that leave the root.
        assert!(is_refused(&append(r, &r.join("../x"), b"x").unwrap_err()));
        assert!(is_refused(&append(r, &o.join("x"), b"x").unwrap_err()));

        // Nothing outside changed; no stray file was created there.
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep\n");
        let names: Vec<_> = std::fs::read_dir(o).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("victim")]);

        // Replacing a symlink replaces the link, not its target.
        replace(r, &r.join(".gitattributes"), b"new\n", None).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep\n");
        assert!(!std::fs::symlink_metadata(r.join(".gitattributes")).unwrap().file_type().is_symlink());
    }

    #[test]
    fn a_fifo_is_refused_without_waiting() {
        let (repo, _) = setup();
        let p = repo.path().join("fifo");
        let c = cpath(p.as_os_str()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let e = append(repo.path(), &p, b"x").unwrap_err();
        assert!(is_refused(&e), "{e}");
    }
}
