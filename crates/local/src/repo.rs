//! Which repo a directory or file is in, as leases name it: the normalised
//! origin URL, else the root commit's hash (DESIGN.md "Repos", the rule in
//! `pcmail_handoff::repo::id_from_git`). Read from the
//! `.git` files; only a repo without an origin costs a `git` process.

use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoInfo {
    /// The work tree's top folder (canonical).
    pub root: PathBuf,
    /// Normalised origin URL, else the root commit hash.
    pub id: String,
    /// The checked-out branch, None when detached.
    pub branch: Option<String>,
}

/// The work tree containing `dir` (which must exist), its git dir and common dir.
fn find_root(dir: &Path) -> Option<(PathBuf, PathBuf, PathBuf)> {
    let mut d = dir.canonicalize().ok()?;
    loop {
        let dotgit = d.join(".git");
        if dotgit.is_dir() {
            return Some((d, dotgit.clone(), dotgit));
        }
        if dotgit.is_file() {
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
            return Some((d, gitdir, common));
        }
        if !d.pop() {
            return None;
        }
    }
}

/// The repo `dir` is in (None outside any repo).
pub fn identify(dir: &Path) -> Option<RepoInfo> {
    let (root, gitdir, common) = find_root(dir)?;
    let branch = std::fs::read_to_string(gitdir.join("HEAD"))
        .ok()
        .and_then(|h| h.trim().strip_prefix("ref: refs/heads/").map(str::to_string));
    let id = pcmail_handoff::repo::id_from_git(&root, &common)?;
    Some(RepoInfo { root, id, branch })
}

/// A path as leases name files: relative to its repo's top folder with `/`
/// separators, after resolving symlinks and `..` in the part that exists (a
/// file being created does not exist yet). None outside any repo.
pub fn repo_relative(path: &Path) -> Option<(RepoInfo, String)> {
    let abs = if path.is_absolute() { path.to_path_buf() } else { std::env::current_dir().ok()?.join(path) };
    let full = match abs.canonicalize() {
        Ok(c) => c,
        Err(_) => resolve_partly(&abs)?,
    };
    let start = if full.is_dir() { full.clone() } else { full.parent()?.to_path_buf() };
    let mut probe = start;
    while !probe.exists() {
        if !probe.pop() {
            return None;
        }
    }
    let info = identify(&probe)?;
    let rel = full.strip_prefix(&info.root).ok()?;
    let rel: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    Some((info, rel.join("/")))
}

/// A path that does not (all) exist yet, resolved one component at a time:
/// symlinks in the part that exists, `..` after them (so `a/link/..` is the
/// link target's parent, as the OS sees it), `.` dropped.
fn resolve_partly(abs: &Path) -> Option<PathBuf> {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::Prefix(_) | Component::RootDir => out.push(c.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => {
                out.push(name);
                if let Ok(real) = out.canonicalize() {
                    out = real;
                }
            }
        }
    }
    Some(out)
}
