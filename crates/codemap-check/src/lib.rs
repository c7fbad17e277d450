//! Is the code map fresh? The one question the SessionStart hook asks, answered
//! in microseconds without spawning `git` and without tree-sitter: the map
//! writes a stamp (the HEAD it was made at, the digest of its inputs, the map's
//! path and the command that refreshes it) into the repo's git directory, and
//! [`stale_line`] compares that HEAD with the HEAD read from the `.git` files.
//!
//! The stamp lives in the git directory rather than in `code-map.md` so that a
//! committed map does not change on every commit (HEAD is per checkout, and so
//! is the stamp: a worktree has its own).

use std::fs;
use std::path::{Path, PathBuf};

/// File name of the stamp inside the git directory (per worktree).
pub const STAMP_FILE: &str = "pcmail-code-map";

/// The command that refreshes a map written at default paths.
pub const REFRESH_COMMAND: &str = "pcmail map";

/// Where a checkout's git data lives: `git_dir` holds HEAD (per worktree),
/// `common_dir` holds the shared refs and packed-refs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitDirs {
    pub git_dir: PathBuf,
    pub common_dir: PathBuf,
}

/// What HEAD points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Head {
    /// A commit id (hex), on a branch or detached.
    Commit(String),
    /// A branch with no commit yet (a fresh `git init`).
    Unborn(String),
}

impl Head {
    /// The form recorded in the stamp.
    pub fn as_stamp(&self) -> String {
        match self {
            Head::Commit(c) => c.clone(),
            Head::Unborn(r) => format!("unborn:{r}"),
        }
    }
}

/// Finds the git directories of the checkout rooted at `repo_root`: a `.git`
/// directory, or a `.git` file (`gitdir: …`, worktrees and submodules) whose
/// git directory may name a shared one in `commondir`.
pub fn git_dirs(repo_root: &Path) -> Option<GitDirs> {
    let dot_git = repo_root.join(".git");
    let meta = fs::metadata(&dot_git).ok()?;
    let git_dir = if meta.is_dir() {
        dot_git
    } else {
        let text = fs::read_to_string(&dot_git).ok()?;
        let target = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
        let p = Path::new(target);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            repo_root.join(p)
        }
    };
    let common_dir = match fs::read_to_string(git_dir.join("commondir")) {
        Ok(c) => {
            let p = Path::new(c.trim());
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                git_dir.join(p)
            }
        }
        Err(_) => git_dir.clone(),
    };
    Some(GitDirs { git_dir, common_dir })
}

/// The walk up from `start` to the first directory with a `.git` entry.
pub fn find_repo_root(start: &Path) -> Option<PathBuf> {
    start.ancestors().find(|d| d.join(".git").exists()).map(Path::to_path_buf)
}

fn is_hex_id(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A ref's commit: a loose file (per-worktree first, then shared), else a line
/// of packed-refs. Symbolic refs are followed a few levels.
fn resolve_ref(dirs: &GitDirs, name: &str, depth: u8) -> Option<Head> {
    if depth > 5 || name.contains("..") {
        return None;
    }
    for dir in [&dirs.git_dir, &dirs.common_dir] {
        if let Ok(text) = fs::read_to_string(dir.join(name)) {
            let t = text.trim();
            if let Some(next) = t.strip_prefix("ref:") {
                return resolve_ref(dirs, next.trim(), depth + 1);
            }
            if is_hex_id(t) {
                return Some(Head::Commit(t.to_ascii_lowercase()));
            }
            return None;
        }
    }
    if let Ok(packed) = fs::read_to_string(dirs.common_dir.join("packed-refs")) {
        for line in packed.lines() {
            if line.starts_with('#') || line.starts_with('^') {
                continue;
            }
            if let Some((id, r)) = line.split_once(' ') {
                if r.trim() == name && is_hex_id(id) {
                    return Some(Head::Commit(id.to_ascii_lowercase()));
                }
            }
        }
    }
    Some(Head::Unborn(name.to_string()))
}

/// HEAD of the checkout at `repo_root`, from the files only. None when there is
/// no git directory or HEAD is in a form this does not read (reftable).
pub fn read_head(repo_root: &Path) -> Option<Head> {
    let dirs = git_dirs(repo_root)?;
    let text = fs::read_to_string(dirs.git_dir.join("HEAD")).ok()?;
    let t = text.trim();
    if let Some(r) = t.strip_prefix("ref:") {
        let r = r.trim();
        // reftable repositories keep a placeholder HEAD; their refs are not files.
        if r == "refs/heads/.invalid" || !r.starts_with("refs/") {
            return None;
        }
        return resolve_ref(&dirs, r, 0);
    }
    if is_hex_id(t) {
        return Some(Head::Commit(t.to_ascii_lowercase()));
    }
    None
}

/// What the map records about itself for the hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    /// HEAD when the map was written ([`Head::as_stamp`]).
    pub head: String,
    /// Digest of the map's inputs (every mapped file's path and content hash).
    pub inputs: String,
    /// The map file, relative to the repo root, `/`-separated.
    pub map_file: String,
    /// The command that refreshes this map (carries non-default paths).
    pub command: String,
}

impl Stamp {
    pub fn to_text(&self) -> String {
        format!(
            "pcmail-code-map 1\nhead {}\ninputs {}\nmap {}\ncommand {}\n",
            one_line(&self.head),
            one_line(&self.inputs),
            one_line(&self.map_file),
            one_line(&self.command)
        )
    }

    pub fn parse(text: &str) -> Option<Stamp> {
        let mut lines = text.lines();
        if lines.next()? != "pcmail-code-map 1" {
            return None;
        }
        let (mut head, mut inputs, mut map_file, mut command) = (None, None, None, None);
        for line in lines {
            let (k, v) = line.split_once(' ')?;
            let v = Some(v.to_string());
            match k {
                "head" => head = v,
                "inputs" => inputs = v,
                "map" => map_file = v,
                "command" => command = v,
                _ => {}
            }
        }
        Some(Stamp { head: head?, inputs: inputs?, map_file: map_file?, command: command? })
    }
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// Reads the stamp of the checkout at `repo_root` (None: no map made here).
pub fn read_stamp(repo_root: &Path) -> Option<Stamp> {
    let dirs = git_dirs(repo_root)?;
    Stamp::parse(&fs::read_to_string(dirs.git_dir.join(STAMP_FILE)).ok()?)
}

/// Writes the stamp (atomically). Ok(false) when the repo has no git
/// directory, so there is nothing for the hook to compare.
pub fn write_stamp(repo_root: &Path, stamp: &Stamp) -> std::io::Result<bool> {
    let Some(dirs) = git_dirs(repo_root) else { return Ok(false) };
    pcmail_fsmode::replace_file(&dirs.git_dir.join(STAMP_FILE), stamp.to_text().as_bytes(), None)?;
    Ok(true)
}

/// The one line the hook prints when the code map of the checkout at
/// `repo_root` is stale, with the command that refreshes it; None when it is
/// fresh, when no map was ever made here, or when HEAD cannot be read.
pub fn stale_line(repo_root: &Path) -> Option<String> {
    let stamp = read_stamp(repo_root)?;
    if !repo_root.join(&stamp.map_file).is_file() {
        return Some(format!("Code map {} is missing: run `{}`", stamp.map_file, stamp.command));
    }
    let now = read_head(repo_root)?.as_stamp();
    if now == stamp.head {
        return None;
    }
    Some(format!(
        "Code map {} is stale (made at {}, HEAD is now {}): run `{}`",
        stamp.map_file,
        short(&stamp.head),
        short(&now),
        stamp.command
    ))
}

/// [`stale_line`] for the checkout containing `dir` (the hook's cwd may be a
/// subfolder).
pub fn stale_line_from(dir: &Path) -> Option<String> {
    stale_line(&find_repo_root(dir)?)
}

fn short(head: &str) -> &str {
    if is_hex_id(head) {
        &head[..10]
    } else {
        head
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";

    fn write(p: &Path, s: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, s).unwrap();
    }

    /// A repo laid out the way git lays it out, HEAD on main at `A`.
    fn repo() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        write(&d.path().join(".git/HEAD"), "ref: refs/heads/main\n");
        write(&d.path().join(".git/refs/heads/main"), &format!("{A}\n"));
        write(&d.path().join(".claude/code-map.md"), "# Code map\n");
        d
    }

    fn stamp_at(head: &str) -> Stamp {
        Stamp {
            head: head.into(),
            inputs: "abc".into(),
            map_file: ".claude/code-map.md".into(),
            command: REFRESH_COMMAND.into(),
        }
    }

    #[test]
    fn fresh_until_head_moves() {
        let d = repo();
        assert_eq!(read_head(d.path()), Some(Head::Commit(A.into())));
        assert!(write_stamp(d.path(), &stamp_at(A)).unwrap());
        assert_eq!(stale_line(d.path()), None);
        write(&d.path().join(".git/refs/heads/main"), &format!("{B}\n"));
        let line = stale_line(d.path()).expect("stale after a commit");
        assert!(line.contains("stale") && line.contains("2222222222") && line.contains("`pcmail map`"), "{line}");
        assert!(!line.contains('\n'));
    }

    #[test]
    fn no_stamp_means_no_line() {
        let d = repo();
        assert_eq!(stale_line(d.path()), None);
        let plain = tempfile::tempdir().unwrap();
        assert_eq!(stale_line(plain.path()), None);
        assert!(!write_stamp(plain.path(), &stamp_at(A)).unwrap(), "no git dir: nothing to write");
    }

    #[test]
    fn detached_head() {
        let d = repo();
        write_stamp(d.path(), &stamp_at(A)).unwrap();
        write(&d.path().join(".git/HEAD"), &format!("{B}\n"));
        assert_eq!(read_head(d.path()), Some(Head::Commit(B.into())));
        assert!(stale_line(d.path()).is_some());
        write(&d.path().join(".git/HEAD"), &format!("{A}\n"));
        assert_eq!(stale_line(d.path()), None);
    }

    #[test]
    fn packed_ref_and_loose_ref_wins() {
        let d = repo();
        fs::remove_file(d.path().join(".git/refs/heads/main")).unwrap();
        write(
            &d.path().join(".git/packed-refs"),
            &format!("# pack-refs with: peeled fully-peeled sorted\n{B} refs/heads/main\n^{A}\n{A} refs/tags/v1\n"),
        );
        assert_eq!(read_head(d.path()), Some(Head::Commit(B.into())));
        write_stamp(d.path(), &stamp_at(B)).unwrap();
        assert_eq!(stale_line(d.path()), None);
        // A loose ref is newer than the packed one.
        write(&d.path().join(".git/refs/heads/main"), &format!("{A}\n"));
        assert!(stale_line(d.path()).unwrap().contains("1111111111"));
    }

    #[test]
    fn unborn_branch() {
        let d = tempfile::tempdir().unwrap();
        write(&d.path().join(".git/HEAD"), "ref: refs/heads/main\n");
        assert_eq!(read_head(d.path()), Some(Head::Unborn("refs/heads/main".into())));
    }

    #[test]
    fn worktree_git_file_and_commondir() {
        let main = repo();
        let wt = tempfile::tempdir().unwrap();
        let gd = main.path().join(".git/worktrees/wt");
        write(&gd.join("HEAD"), "ref: refs/heads/feature\n");
        write(&gd.join("commondir"), "../..\n");
        write(&main.path().join(".git/packed-refs"), &format!("{B} refs/heads/feature\n"));
        write(&wt.path().join(".git"), &format!("gitdir: {}\n", gd.display()));
        write(&wt.path().join(".claude/code-map.md"), "x");
        assert_eq!(read_head(wt.path()), Some(Head::Commit(B.into())));
        write_stamp(wt.path(), &stamp_at(B)).unwrap();
        assert!(gd.join(STAMP_FILE).is_file(), "the stamp is per worktree");
        assert_eq!(stale_line(wt.path()), None);
        assert_eq!(stale_line(main.path()), None, "the main checkout has no stamp of its own");
        write(&main.path().join(".git/refs/heads/feature"), &format!("{A}\n"));
        assert!(stale_line(wt.path()).is_some());
    }

    #[test]
    fn missing_map_file_is_reported() {
        let d = repo();
        write_stamp(d.path(), &stamp_at(A)).unwrap();
        fs::remove_file(d.path().join(".claude/code-map.md")).unwrap();
        assert!(stale_line(d.path()).unwrap().contains("missing"));
    }

    #[test]
    fn stamp_round_trip_and_garbage() {
        let s = stamp_at(A);
        assert_eq!(Stamp::parse(&s.to_text()), Some(s));
        assert_eq!(Stamp::parse("something else\nhead x\n"), None);
        assert_eq!(Stamp::parse("pcmail-code-map 1\nhead x\n"), None);
    }

    #[test]
    fn find_root_from_a_subdirectory() {
        let d = repo();
        let sub = d.path().join("a/b");
        fs::create_dir_all(&sub).unwrap();
        assert_eq!(find_repo_root(&sub).as_deref(), Some(d.path()));
        write_stamp(d.path(), &stamp_at(B)).unwrap();
        assert!(stale_line_from(&sub).is_some(), "found from a subfolder");
    }
}
