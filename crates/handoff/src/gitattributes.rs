//! `.gitattributes` entries that let git merge the append-only files between
//! PCs without conflicts (`merge=union`: both sides' lines kept).

use crate::fsutil;
use crate::{HandoffError, Result};
use std::path::Path;

pub const LINES: &[&str] = &[".claude/handoffs/INDEX.md merge=union", ".claude/memory/**/*.md merge=union"];

/// Adds whichever of [`LINES`] is missing (idempotent: a second call writes
/// nothing). Returns whether the file changed.
pub fn ensure(repo_root: &Path) -> Result<bool> {
    let path = repo_root.join(".gitattributes");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(HandoffError::io(&path, e)),
    };
    let have = |want: &str| text.lines().any(|l| l.split_whitespace().eq(want.split_whitespace()));
    let missing: Vec<&str> = LINES.iter().copied().filter(|l| !have(l)).collect();
    if missing.is_empty() {
        return Ok(false);
    }
    let mut block = String::new();
    if !text.is_empty() && !text.ends_with('\n') {
        block.push('\n');
    }
    if text.is_empty() || !text.contains("# pcmail") {
        block.push_str("# pcmail: append-only handoff INDEX and memory files merge by keeping both sides\n");
    }
    for l in missing {
        block.push_str(l);
        block.push('\n');
    }
    fsutil::append_block(repo_root, &path, &block)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_once_and_keeps_what_was_there() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(".gitattributes");
        std::fs::write(&p, "*.png binary").unwrap();
        assert!(ensure(d.path()).unwrap());
        assert!(!ensure(d.path()).unwrap());
        let t = std::fs::read_to_string(&p).unwrap();
        assert!(t.starts_with("*.png binary\n# pcmail"), "{t}");
        for l in LINES {
            assert_eq!(t.lines().filter(|x| x == l).count(), 1, "{t}");
        }
    }
}
