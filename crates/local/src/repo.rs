//! Which repo a directory or file is in, as leases name it: the normalised
//! remote URL, else the root commit's hash (docs/data-model.md "Repo
//! identity", the rule in `pcmail_handoff::repo::id_from_git`). Read from
//! the `.git` files; only a repo without a remote costs a `git` process.

use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoInfo {
    /// The work tree's top folder (canonical).
    pub root: PathBuf,
    /// Normalised remote URL, else the root commit hash.
    pub id: String,
    /// The checked-out branch, None when detached.
    pub branch: Option<String>,
}

/// The work tree containing `dir` (which must exist), its git dir and common dir.
fn find_root(dir: &Path) -> Option<(PathBuf, PathBuf, PathBuf)> {
    let mut d = dir.canonicalize().ok()?;
    loop {
        if let Some(found) = root_at(&d) {
            return Some(found);
        }
        if !d.pop() {
            return None;
        }
    }
}

/// `d` as a work tree's top folder (it holds `.git`), its git dir and common dir.
fn root_at(d: &Path) -> Option<(PathBuf, PathBuf, PathBuf)> {
    let dotgit = d.join(".git");
    let meta = std::fs::metadata(&dotgit).ok()?;
    if meta.is_dir() {
        return Some((d.to_path_buf(), dotgit.clone(), dotgit));
    }
    // A linked worktree or submodule: `gitdir: PATH`; shared config in `commondir`.
    let text = std::fs::read_to_string(&dotgit).ok()?;
    let gd = text.strip_prefix("gitdir:")?.trim();
    let gitdir = if Path::new(gd).is_absolute() { PathBuf::from(gd) } else { d.join(gd) };
    let common = match std::fs::read_to_string(gitdir.join("commondir")) {
        Ok(c) => {
            let c = c.trim();
            if Path::new(c).is_absolute() {
                PathBuf::from(c)
            } else {
                gitdir.join(c)
            }
        }
        Err(_) => gitdir.clone(),
    };
    Some((d.to_path_buf(), gitdir, common))
}

/// The top folder of the work tree containing `dir` (canonical), whether or
/// not the repo has an identity yet.
pub fn work_tree_root(dir: &Path) -> Option<PathBuf> {
    find_root(dir).map(|(root, _, _)| root)
}

/// The repo `dir` is in (None outside any repo).
pub fn identify(dir: &Path) -> Option<RepoInfo> {
    let (root, gitdir, common) = find_root(dir)?;
    info_of(root, &gitdir, &common)
}

fn info_of(root: PathBuf, gitdir: &Path, common: &Path) -> Option<RepoInfo> {
    let branch = std::fs::read_to_string(gitdir.join("HEAD"))
        .ok()
        .and_then(|h| h.trim().strip_prefix("ref: refs/heads/").map(str::to_string));
    let id = pcmail_handoff::repo::id_from_git(&root, common)?;
    Some(RepoInfo { root, id, branch })
}

/// At most this many names in a path the guard resolves (after `.` and
/// empty names are dropped): a real path has far fewer (the OS allows 4,096
/// bytes on Linux), and the bound keeps the resolution's cost fixed
/// whatever a hook payload holds.
pub const MAX_PATH_NAMES: usize = 1024;
/// At most this many bytes in such a path (Windows' long-path limit).
pub const MAX_PATH_BYTES: usize = 32 * 1024;
/// Symlinks followed in one resolution before it gives up (Linux's own limit).
const MAX_SYMLINK_HOPS: usize = 40;

/// A path the guard cannot check within its bounds (too long, too deep, a
/// symlink loop): the caller refuses the edit rather than let it through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolvable(pub String);

/// A path as leases name files: relative to its repo's top folder with `/`
/// separators, after resolving symlinks and `..` in the part that exists (a
/// file being created does not exist yet). None outside any repo.
pub fn repo_relative(path: &Path) -> Option<(RepoInfo, String)> {
    repo_relative_all(path).ok()?.into_iter().next()
}

/// Every repo enclosing `path`, innermost first, each with the path relative
/// to its top folder: a `.git` made inside a folder of another repo does not
/// take the file out of the outer repo. The path is resolved as the OS
/// would write it: symlinks (a dangling one too: writing through it creates
/// its target) and `..` after them. Linear in the path's length, and
/// bounded ([`MAX_PATH_NAMES`], [`MAX_PATH_BYTES`]).
pub fn repo_relative_all(path: &Path) -> Result<Vec<(RepoInfo, String)>, Unresolvable> {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        match std::env::current_dir() {
            Ok(d) => d.join(path),
            Err(_) => return Ok(vec![]),
        }
    };
    let full = resolve(&abs)?;
    let mut probe = full.clone();
    while std::fs::symlink_metadata(&probe).map(|m| !m.is_dir()).unwrap_or(true) {
        if !probe.pop() {
            return Ok(vec![]);
        }
    }
    let mut out = vec![];
    for (root, gitdir, common) in find_roots(&probe) {
        let Some(info) = info_of(root, &gitdir, &common) else { continue };
        let Ok(rel) = full.strip_prefix(&info.root) else { continue };
        let rel: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        out.push((info, rel.join("/")));
    }
    Ok(out)
}

/// `abs` resolved one name at a time, each looked at once (lstat): a
/// symlink is replaced by its target's names, `..` drops the last name of
/// what is resolved so far (so `a/link/..` is the link target's parent, as
/// the OS sees it), `.` is dropped. Names past the first missing one are
/// taken as they are (nothing below a missing folder exists).
fn resolve(abs: &Path) -> Result<PathBuf, Unresolvable> {
    use std::ffi::OsString;
    use std::path::Component;
    if abs.as_os_str().len() > MAX_PATH_BYTES {
        return Err(Unresolvable(format!("the path is longer than {MAX_PATH_BYTES} bytes")));
    }
    let mut base = PathBuf::new();
    // The names still to resolve, last first (a stack, so a symlink's target
    // is pushed in front of what follows it).
    let mut todo: Vec<OsString> = vec![];
    for c in abs.components() {
        match c {
            Component::Prefix(_) | Component::RootDir => base.push(c.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir | Component::Normal(_) => todo.push(c.as_os_str().to_os_string()),
        }
        if todo.len() > MAX_PATH_NAMES {
            return Err(Unresolvable(format!("the path has more than {MAX_PATH_NAMES} names")));
        }
    }
    todo.reverse();
    let mut out = base.clone();
    let mut hops = 0;
    let mut missing = false;
    while let Some(name) = todo.pop() {
        if name == ".." {
            if out != base {
                out.pop();
            }
            continue;
        }
        if name == "." || name.is_empty() {
            continue;
        }
        out.push(&name);
        if missing {
            continue;
        }
        match std::fs::symlink_metadata(&out) {
            Ok(m) if m.file_type().is_symlink() => {
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err(Unresolvable("too many symlinks (a loop?)".into()));
                }
                let Ok(target) = std::fs::read_link(&out) else { continue };
                out.pop();
                if target.is_absolute() {
                    out = PathBuf::new();
                }
                let mut names = vec![];
                for c in target.components() {
                    match c {
                        Component::Prefix(_) | Component::RootDir => out.push(c.as_os_str()),
                        Component::CurDir => {}
                        _ => names.push(c.as_os_str().to_os_string()),
                    }
                }
                if todo.len() + names.len() > MAX_PATH_NAMES + MAX_SYMLINK_HOPS * 64 {
                    return Err(Unresolvable(format!("the path has more than {MAX_PATH_NAMES} names")));
                }
                todo.extend(names.into_iter().rev());
            }
            Ok(_) => {}
            Err(_) => missing = true,
        }
    }
    Ok(out)
}

/// Every work tree enclosing `dir` (an existing folder, resolved), innermost
/// first, each with its git dir and common dir.
fn find_roots(dir: &Path) -> Vec<(PathBuf, PathBuf, PathBuf)> {
    let mut out = vec![];
    let mut d = dir.to_path_buf();
    loop {
        if let Some(found) = root_at(&d) {
            out.push(found);
        }
        if !d.pop() {
            return out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resolution is linear and bounded: 250,000 names are refused in well
    /// under a second (a debug build), and a path just inside the bound
    /// resolves as fast.
    #[test]
    fn resolution_of_absurd_paths_is_linear_and_bounded() {
        let d = tempfile::tempdir().unwrap();
        let deep = d.path().join("a/".repeat(250_000)).join("x");
        let t = std::time::Instant::now();
        assert!(resolve(&deep).is_err());
        assert!(resolve(&d.path().join("./".repeat(250_000)).join("x")).is_err());
        assert!(repo_relative_all(&deep).is_err());
        let within = d.path().join("b/../".repeat(500)).join("x");
        assert_eq!(resolve(&within).unwrap(), d.path().canonicalize().unwrap().join("x"));
        let missing_deep = d.path().join("c/".repeat(MAX_PATH_NAMES - 10)).join("x");
        assert!(resolve(&missing_deep).is_ok());
        assert!(t.elapsed() < std::time::Duration::from_millis(500), "{:?}", t.elapsed());
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_are_followed_dangling_ones_too_and_loops_refused() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path().canonicalize().unwrap();
        std::fs::create_dir_all(r.join("src/auth")).unwrap();
        std::os::unix::fs::symlink("src/auth/new.rs", r.join("notes.rs")).unwrap();
        assert_eq!(resolve(&r.join("notes.rs")).unwrap(), r.join("src/auth/new.rs"));
        std::os::unix::fs::symlink(r.join("src"), r.join("s")).unwrap();
        assert_eq!(resolve(&r.join("s/auth/../x")).unwrap(), r.join("src/x"));
        std::os::unix::fs::symlink("loop2", r.join("loop1")).unwrap();
        std::os::unix::fs::symlink("loop1", r.join("loop2")).unwrap();
        assert!(resolve(&r.join("loop1")).is_err());
    }
}
