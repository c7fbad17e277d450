//! The three file writes everything here is built on: a new file that never
//! replaces one (O_CREAT|O_EXCL), a line appended in one write(2) on an
//! O_APPEND descriptor (concurrent writers never tear or interleave a line on
//! a local file system), and an atomic replace (temp file + rename) for the
//! one edit an old handoff ever gets.

use crate::{HandoffError, Result};
use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

/// Creates `path` with `content`; `Ok(false)` when it already exists (never
/// overwritten). The content goes in with one write.
pub fn create_new(path: &Path, content: &[u8]) -> Result<bool> {
    let mut f = match OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::AlreadyExists => return Ok(false),
        Err(e) => return Err(HandoffError::io(path, e)),
    };
    f.write_all(content).map_err(|e| HandoffError::io(path, e))?;
    Ok(true)
}

/// Makes sure `path` exists, starting with `header` when this call creates
/// it. The header is written to a private temp file first and linked into
/// place (link(2) never replaces), so no appender can get a line in before
/// the header.
pub fn ensure_with_header(path: &Path, header: &str) -> Result<()> {
    if path.exists() {
        return Ok(());
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(|e| HandoffError::io(dir, e))?;
    let tmp = temp_beside(path);
    fs::write(&tmp, header).map_err(|e| HandoffError::io(&tmp, e))?;
    let linked = fs::hard_link(&tmp, path);
    let _ = fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
        // A file system without hard links: create it plainly (a concurrent
        // appender may then get its line in before the header: harmless).
        Err(_) => create_new(path, header.as_bytes()).map(|_| ()),
    }
}

/// Appends `line` (a newline is added) in a single write(2) on an O_APPEND
/// descriptor: the kernel places each write at the end atomically, so lines
/// from concurrent processes never interleave.
pub fn append_line(path: &Path, line: &str) -> Result<()> {
    let mut buf = String::with_capacity(line.len() + 1);
    buf.push_str(line.trim_end_matches('\n'));
    buf.push('\n');
    append_block(path, &buf)
}

/// Appends `block` whole in one write(2) (see [`append_line`]).
pub fn append_block(path: &Path, block: &str) -> Result<()> {
    let mut f = OpenOptions::new().append(true).create(true).open(path).map_err(|e| HandoffError::io(path, e))?;
    let n = f.write(block.as_bytes()).map_err(|e| HandoffError::io(path, e))?;
    if n != block.len() {
        // Only a full disk or a quota does this to a regular file.
        return Err(HandoffError::io(
            path,
            std::io::Error::new(ErrorKind::WriteZero, format!("short append: {n} of {} bytes", block.len())),
        ));
    }
    Ok(())
}

/// Replaces `path` with `content` atomically: a reader sees the old file or
/// the new one, never half of either.
pub fn replace_atomically(path: &Path, content: &str) -> Result<()> {
    let tmp = temp_beside(path);
    fs::write(&tmp, content).map_err(|e| HandoffError::io(&tmp, e))?;
    if let Ok(m) = fs::metadata(path) {
        let _ = fs::set_permissions(&tmp, m.permissions());
    }
    fs::rename(&tmp, path).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        HandoffError::io(path, e)
    })
}

fn temp_beside(path: &Path) -> PathBuf {
    use rand::RngExt;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.{:08x}.tmp", std::process::id(), rand::rng().random::<u32>()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_new_never_overwrites_and_header_comes_first() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.md");
        assert!(create_new(&p, b"one").unwrap());
        assert!(!create_new(&p, b"two").unwrap());
        assert_eq!(fs::read_to_string(&p).unwrap(), "one");

        let idx = d.path().join("sub/INDEX.md");
        ensure_with_header(&idx, "# head\n").unwrap();
        append_line(&idx, "x").unwrap();
        ensure_with_header(&idx, "# other\n").unwrap();
        append_line(&idx, "y\n").unwrap();
        assert_eq!(fs::read_to_string(&idx).unwrap(), "# head\nx\ny\n");
        // No temp files left behind.
        assert_eq!(fs::read_dir(d.path().join("sub")).unwrap().count(), 1);
    }

    #[test]
    fn replace_is_whole() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("h.md");
        fs::write(&p, "old").unwrap();
        replace_atomically(&p, "new").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "new");
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
    }
}
