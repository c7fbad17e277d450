//! Which repo: its root (the walk up from the working directory to `.git`)
//! and its identity, the key the PC store uses (`pcmail_core::repo_id`: the
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

    /// The repo containing `dir` with its identity left empty: for readers
    /// of its files that never use it (the hook's view of handoffs and
    /// memory), which then read no `.git/config` (nor start a `git` process,
    /// as a repo with no remote and no reflog from its first commit needs).
    pub fn find_unnamed(dir: &Path) -> Result<Repo> {
        let root = pcmail_codemap_check::find_repo_root(dir).ok_or_else(|| HandoffError::NoRepo(dir.to_path_buf()))?;
        Ok(Repo { root, id: String::new() })
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

/// The repo's identity: the remote URL normalised (`origin`, else the only
/// remote, else the first by name: `pcmail_core::repo_id::remote_url`),
/// else the root commit,
/// else `path:` and the canonical root (a repo with neither is only this
/// checkout). The rules are `pcmail_core::repo_id`'s, as for leases.
pub fn identity(root: &Path) -> String {
    if let Some(dirs) = pcmail_codemap_check::git_dirs(root) {
        if let Some(id) = id_from_git(root, &dirs.common_dir) {
            return id;
        }
    }
    let canon = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    format!("path:{}", canon.display())
}

/// A work tree's id from its git common dir: the normalised remote URL, else the
/// root commit (None for a repo with neither, e.g. no commit yet).
pub fn id_from_git(root: &Path, common_dir: &Path) -> Option<String> {
    std::fs::read_to_string(common_dir.join("config"))
        .ok()
        .and_then(|c| pcmail_core::repo_id::remote_url(&c))
        .map(|u| pcmail_core::repo_id::normalise_origin(&u))
        .filter(|u| !u.is_empty())
        .or_else(|| root_commit(root, common_dir))
}

/// The root commit: from HEAD's reflog when it starts with the first commit
/// (no process), none while HEAD's branch has no commit (no process), else
/// `git rev-list --max-parents=0 HEAD` (a clone's reflog starts at the
/// clone; several roots: the oldest listed, which is stable).
fn root_commit(root: &Path, common_dir: &Path) -> Option<String> {
    let reflog = std::fs::read_to_string(common_dir.join("logs/HEAD")).unwrap_or_default();
    if let Some(c) = reflog.lines().next().and_then(pcmail_core::repo_id::root_commit_from_reflog) {
        return Some(c);
    }
    // A fresh `git init` has no commit: `git` would only fail, and the
    // guard asks at every edit in such a checkout.
    if matches!(pcmail_codemap_check::read_head(root), Some(pcmail_codemap_check::Head::Unborn(_))) {
        return None;
    }
    let out = std::process::Command::new("git")
        .args(["rev-list", "--max-parents=0", "HEAD"])
        .current_dir(root)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().last().map(str::trim).filter(|h| h.len() >= 40).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_prefers_origin_then_root_commit_then_path() {
        let d = tempfile::tempdir().unwrap();
        let git = d.path().join(".git");
        std::fs::create_dir_all(git.join("logs")).unwrap();
        assert!(identity(d.path()).starts_with("path:"));
        let root = "a".repeat(40);
        std::fs::write(
            git.join("logs/HEAD"),
            format!("{} {root} Me <m@x> 1 +0000\tcommit (initial): x\n", "0".repeat(40)),
        )
        .unwrap();
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
