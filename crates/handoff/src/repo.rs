//! Which repo: its root (the walk up from the working directory to `.git`)
//! and its identity, the key the PC store uses (DESIGN.md "Repos": the
//! normalised origin URL, else the root commit hash). Read from the `.git`
//! files only, no `git` process, so the hook can afford it.

use crate::{HandoffError, Result};
use std::path::{Path, PathBuf};

/// A checkout: where it is and what repo it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    pub root: PathBuf,
    pub id: String,
}

impl Repo {
    /// The repo containing `dir`.
    pub fn find(dir: &Path) -> Result<Repo> {
        let root = pcmail_codemap_check::find_repo_root(dir).ok_or_else(|| HandoffError::NoRepo(dir.to_path_buf()))?;
        let id = identity(&root);
        Ok(Repo { root, id })
    }

    /// The repo at `root` as given (tests, `--repo`): its root is `root`
    /// even when it has no `.git` yet.
    pub fn at(root: &Path) -> Repo {
        Repo { root: root.to_path_buf(), id: identity(root) }
    }

    pub fn handoff_dir(&self) -> PathBuf {
        self.root.join(crate::HANDOFF_DIR)
    }

    pub fn index_path(&self) -> PathBuf {
        self.handoff_dir().join(crate::INDEX_FILE)
    }

    pub fn memory_dir(&self) -> PathBuf {
        self.root.join(crate::MEMORY_DIR)
    }
}

/// The repo's identity: `origin`'s URL normalised, else the root commit (the
/// first line of HEAD's reflog when it records the first commit), else
/// `path:` and the canonical root (a repo with neither is only this checkout).
pub fn identity(root: &Path) -> String {
    if let Some(dirs) = pcmail_codemap_check::git_dirs(root) {
        if let Some(url) = std::fs::read_to_string(dirs.common_dir.join("config")).ok().and_then(|c| origin_url(&c)) {
            return normalise_url(&url);
        }
        if let Some(c) = root_commit_from_reflog(&dirs.common_dir.join("logs/HEAD")) {
            return c;
        }
    }
    let canon = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    format!("path:{}", canon.display())
}

/// `url` of `[remote "origin"]` in a git config file.
pub fn origin_url(config: &str) -> Option<String> {
    let mut in_origin = false;
    for line in config.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            let inner = l.trim_start_matches('[').trim_end_matches(']').trim();
            in_origin = inner == "remote \"origin\"";
            continue;
        }
        if in_origin {
            if let Some((k, v)) = l.split_once('=') {
                if k.trim().eq_ignore_ascii_case("url") {
                    let v = v.trim().trim_matches('"');
                    if !v.is_empty() {
                        return Some(v.to_string());
                    }
                }
            }
        }
    }
    None
}

/// `git@github.com:Owner/Name.git`, `https://user@github.com/Owner/Name/` and
/// `ssh://git@github.com:22/Owner/Name` all become `github.com/Owner/Name`:
/// no scheme, no user, no port, host lower-cased, no `.git`, no trailing `/`.
pub fn normalise_url(url: &str) -> String {
    let u = url.trim();
    let (rest, scp_like) = match u.split_once("://") {
        Some((_, r)) => (r, false),
        None => (u, true),
    };
    let rest = rest.rsplit_once('@').map(|(_, r)| r).unwrap_or(rest);
    let (host, path) = if scp_like && !rest.starts_with('/') {
        match rest.split_once(':') {
            Some((h, p)) => (h, p),
            None => ("", rest),
        }
    } else {
        match rest.split_once('/') {
            Some((h, p)) => (h, p),
            None => (rest, ""),
        }
    };
    let host = host.split(':').next().unwrap_or(host).to_ascii_lowercase();
    let path = path.trim_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path).trim_end_matches('/');
    if host.is_empty() {
        path.to_string()
    } else if path.is_empty() {
        host
    } else {
        format!("{host}/{path}")
    }
}

fn root_commit_from_reflog(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let first = text.lines().next()?;
    let mut it = first.split(' ');
    let (old, new) = (it.next()?, it.next()?);
    let hex = |s: &str| (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit());
    (hex(old) && hex(new) && old.bytes().all(|b| b == b'0')).then(|| new.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_urls_normalise_to_one_form() {
        for u in [
            "git@github.com:Owner/Name.git",
            "https://github.com/Owner/Name",
            "https://user:tok@GitHub.com/Owner/Name.git/",
            "ssh://git@github.com:22/Owner/Name.git",
        ] {
            assert_eq!(normalise_url(u), "github.com/Owner/Name", "{u}");
        }
        assert_eq!(normalise_url("/srv/git/x.git"), "srv/git/x");
    }

    #[test]
    fn identity_prefers_origin_then_root_commit_then_path() {
        let d = tempfile::tempdir().unwrap();
        let git = d.path().join(".git");
        std::fs::create_dir_all(git.join("logs")).unwrap();
        assert!(identity(d.path()).starts_with("path:"));
        let root = "a".repeat(40);
        std::fs::write(git.join("logs/HEAD"), format!("{} {root} Me <m@x> 1 +0000\tcommit (initial): x\n", "0".repeat(40))).unwrap();
        assert_eq!(identity(d.path()), root);
        std::fs::write(git.join("config"), "[core]\n\tbare = false\n[remote \"upstream\"]\n\turl = git@x.org:a/b\n[remote \"origin\"]\n\turl = git@github.com:o/r.git\n").unwrap();
        assert_eq!(identity(d.path()), "github.com/o/r");
        let sub = d.path().join("a/b");
        std::fs::create_dir_all(&sub).unwrap();
        assert_eq!(Repo::find(&sub).unwrap().root, d.path());
        let none = tempfile::tempdir().unwrap();
        assert!(matches!(Repo::find(none.path()), Err(HandoffError::NoRepo(_))));
    }
}
