//! Which repo a directory or file is in, as leases name it: the normalised
//! origin URL, else the root commit's hash (DESIGN.md "Repos"). Read from the
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
    let id = std::fs::read_to_string(common.join("config"))
        .ok()
        .and_then(|c| origin_url(&c))
        .map(|u| normalise_origin(&u))
        .filter(|u| !u.is_empty())
        .or_else(|| root_commit(&root))?;
    Some(RepoInfo { root, id, branch })
}

/// The `url` of `[remote "origin"]` in a git config file.
pub fn origin_url(config: &str) -> Option<String> {
    let mut in_origin = false;
    for line in config.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            let compact: String = l.chars().filter(|c| !c.is_whitespace()).collect();
            in_origin = compact == "[remote\"origin\"]";
            continue;
        }
        if in_origin {
            if let Some((k, v)) = l.split_once('=') {
                if k.trim() == "url" {
                    return Some(v.trim().trim_matches('"').to_string());
                }
            }
        }
    }
    None
}

/// One spelling per repo: `https://github.com/O/R.git`, `git@github.com:O/R`
/// and `ssh://git@github.com/O/R/` all give `github.com/O/R` (host lowercase,
/// no user, port, scheme or `.git`).
pub fn normalise_origin(url: &str) -> String {
    let u = url.trim();
    let (host, path) = if let Some((_, rest)) = u.split_once("://") {
        if u.starts_with("file://") {
            return strip_git(rest.trim_end_matches('/')).to_string();
        }
        let (hostpart, path) = rest.split_once('/').unwrap_or((rest, ""));
        (hostpart.to_string(), path.to_string())
    } else if let Some((hostpart, path)) = u.split_once(':').filter(|(h, _)| !h.contains('/') && h.len() > 1) {
        // scp-like `user@host:path` (a one-letter "host" is a Windows drive).
        (hostpart.to_string(), path.to_string())
    } else {
        return strip_git(u.trim_end_matches(['/', '\\'])).to_string();
    };
    let host = host.rsplit('@').next().unwrap_or(&host);
    let host = host.split(':').next().unwrap_or(host).to_ascii_lowercase();
    let path = strip_git(path.trim_matches('/'));
    format!("{host}/{path}")
}

fn strip_git(s: &str) -> &str {
    s.strip_suffix(".git").unwrap_or(s).trim_end_matches('/')
}

fn root_commit(root: &Path) -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["rev-list", "--max-parents=0", "HEAD"])
        .current_dir(root)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    // Several roots (merged histories): the last listed, the oldest, is stable.
    text.lines().last().map(str::trim).filter(|h| h.len() >= 40).map(str::to_string)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_spellings_normalise_to_one() {
        for u in [
            "https://github.com/Owner/Repo.git",
            "git@github.com:Owner/Repo.git",
            "ssh://git@GitHub.com:22/Owner/Repo/",
            "https://user:pw@github.com/Owner/Repo",
        ] {
            assert_eq!(normalise_origin(u), "github.com/Owner/Repo", "{u}");
        }
        assert_eq!(normalise_origin("/srv/git/proj.git"), "/srv/git/proj");
        assert_eq!(normalise_origin("file:///srv/git/proj.git"), "/srv/git/proj");
    }

    #[test]
    fn origin_is_read_from_the_config() {
        let c = "[core]\n\tbare = false\n[remote \"upstream\"]\n\turl = https://x/y\n[remote \"origin\"]\n\turl = git@h.com:a/b.git\n";
        assert_eq!(origin_url(c).as_deref(), Some("git@h.com:a/b.git"));
        assert_eq!(origin_url("[core]\n"), None);
    }
}
