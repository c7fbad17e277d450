//! The three file writes everything here is built on: a new file that never
//! replaces one (O_CREAT|O_EXCL), a line appended in one write(2) on an
//! O_APPEND descriptor (concurrent writers never tear or interleave a line on
//! a local file system), and an atomic replace (temp file + rename) for the
//! one edit an old handoff ever gets.
//!
//! Every write is confined to the repo (`pcmail_fsmode::confined`): the
//! files are the repo's own, so a committed symlink at `.gitattributes`,
//! `.claude/handoffs` or a memory topic must not carry a write elsewhere.
//! Each function takes the repo root and a path under it; a refused path
//! is an I/O error naming why (exit 9 at the edges).

use crate::{HandoffError, Result};
use pcmail_fsmode::confined;
use std::path::Path;

/// Creates `path` with `content`; `Ok(false)` when it already exists (never
/// overwritten). The content goes in with one write.
pub fn create_new(root: &Path, path: &Path, content: &[u8]) -> Result<bool> {
    confined::create_new(root, path, content).map_err(|e| HandoffError::io(path, e))
}

/// Makes sure `path` exists, starting with `header` when this call creates
/// it (no appender can get a line in before the header).
pub fn ensure_with_header(root: &Path, path: &Path, header: &str) -> Result<()> {
    confined::ensure_with_header(root, path, header.as_bytes()).map_err(|e| HandoffError::io(path, e))
}

/// Appends `line` (a newline is added) in a single write(2) on an O_APPEND
/// descriptor: the kernel places each write at the end atomically, so lines
/// from concurrent processes never interleave.
pub fn append_line(root: &Path, path: &Path, line: &str) -> Result<()> {
    let mut buf = String::with_capacity(line.len() + 1);
    buf.push_str(line.trim_end_matches('\n'));
    buf.push('\n');
    append_block(root, path, &buf)
}

/// Appends `block` whole in one write(2) (see [`append_line`]).
pub fn append_block(root: &Path, path: &Path, block: &str) -> Result<()> {
    confined::append(root, path, block.as_bytes()).map_err(|e| HandoffError::io(path, e))
}

/// An append-only file as text, read while others may be appending to it:
/// a read can see another process's write half done (its one write(2) is
/// atomic against other writers, not against readers), which may cut a
/// character in two and failed the whole read. A last line that is not
/// valid UTF-8 is such a write and is left out; the rest is decoded as
/// UTF-8, a stray invalid byte replaced (a hand-edited file's last line
/// without its line end stays). None when the file does not exist.
pub fn read_appended(path: &Path) -> Result<Option<String>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(HandoffError::io(path, e)),
    };
    let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let end = if std::str::from_utf8(&bytes[whole..]).is_ok() { bytes.len() } else { whole };
    Ok(Some(String::from_utf8_lossy(&bytes[..end]).into_owned()))
}

/// Replaces `path` with `content` atomically: a reader sees the old file or
/// the new one, never half of either.
pub fn replace_atomically(root: &Path, path: &Path, content: &str) -> Result<()> {
    confined::replace(root, path, content.as_bytes(), None).map_err(|e| HandoffError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn an_appended_file_read_mid_write_gives_its_whole_lines() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("INDEX.md");
        assert_eq!(read_appended(&p).unwrap(), None);
        // A write seen half done: its last character cut in two, no line end yet.
        let mut torn = "# head\nfirst line\nsecond ".as_bytes().to_vec();
        torn.extend_from_slice(&"é".as_bytes()[..1]);
        fs::write(&p, &torn).unwrap();
        assert_eq!(read_appended(&p).unwrap().as_deref(), Some("# head\nfirst line\n"));
        // A last line without its end that is whole text: kept.
        fs::write(&p, "# head\nlast line, edited by hand").unwrap();
        assert_eq!(read_appended(&p).unwrap().as_deref(), Some("# head\nlast line, edited by hand"));
    }

    #[test]
    fn create_new_never_overwrites_and_header_comes_first() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        let p = r.join("a.md");
        assert!(create_new(r, &p, b"one").unwrap());
        assert!(!create_new(r, &p, b"two").unwrap());
        assert_eq!(fs::read_to_string(&p).unwrap(), "one");

        let idx = r.join("sub/INDEX.md");
        ensure_with_header(r, &idx, "# head\n").unwrap();
        append_line(r, &idx, "x").unwrap();
        ensure_with_header(r, &idx, "# other\n").unwrap();
        append_line(r, &idx, "y\n").unwrap();
        assert_eq!(fs::read_to_string(&idx).unwrap(), "# head\nx\ny\n");
        // No temp files left behind.
        assert_eq!(fs::read_dir(r.join("sub")).unwrap().count(), 1);
    }

    #[test]
    fn replace_is_whole() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("h.md");
        fs::write(&p, "old").unwrap();
        replace_atomically(d.path(), &p, "new").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "new");
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
    }
}
