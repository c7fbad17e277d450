//! The git pre-commit lease guard: `pcmail hooks install --git` writes a
//! `pre-commit` hook (into the folder git uses: `core.hooksPath` respected)
//! that runs `pcmail-hook pre-commit` (or `pcmail hook pre-commit`) and then the hook that was there
//! before (kept beside it as `pre-commit.pcmail-chained`). The check refuses
//! a commit touching a file under another session's exclusive lease, from
//! the local cache only. `git commit --no-verify` skips it.

use crate::config::{Config, Paths};
use crate::leases::{self as lease_view, Me};
use crate::{process, repo};
use pcmail_core::Millis;
use pcmail_store::leases as sl;
use pcmail_store::Store;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The line that marks a pre-commit hook as pcmail's.
pub const MARKER: &str = "# pcmail lease guard (pcmail hooks install --git)";
/// The earlier hook, kept and run after ours.
pub const CHAINED: &str = "pre-commit.pcmail-chained";

#[derive(Debug, thiserror::Error)]
pub enum GitHookError {
    #[error("not inside a git work tree ({0})")]
    NotARepo(String),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{0} already exists and is not pcmail's: move it away first (the existing pre-commit hook is kept there)")]
    ChainTaken(PathBuf),
}

/// What `install` did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Installed {
    pub hook: PathBuf,
    /// The earlier pre-commit hook, now run after ours.
    pub chained: Option<PathBuf>,
    pub changed: bool,
}

/// The hooks folder git uses in `dir`'s repo (`core.hooksPath` respected),
/// as named, not resolved: `git rev-parse --git-path hooks` follows a
/// symlinked `core.hooksPath` folder, which would hide that a committed
/// symlink leads it out of the repo. A relative `core.hooksPath` is taken
/// from the work tree's top, as git runs hooks there.
pub fn hooks_dir(dir: &Path) -> Result<PathBuf, GitHookError> {
    let git = |args: &[&str]| -> Result<Option<String>, GitHookError> {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .map_err(|e| GitHookError::NotARepo(e.to_string()))?;
        Ok(out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim_end_matches('\n').to_string()))
    };
    let not_a_repo = || {
        let out = Command::new("git").args(["rev-parse", "--git-dir"]).current_dir(dir).output();
        GitHookError::NotARepo(out.map(|o| String::from_utf8_lossy(&o.stderr).trim().to_string()).unwrap_or_default())
    };
    if let Some(set) = git(&["config", "--path", "--get", "core.hooksPath"])?.filter(|s| !s.is_empty()) {
        let p = PathBuf::from(&set);
        if p.is_absolute() {
            return Ok(p);
        }
        let top = git(&["rev-parse", "--show-toplevel"])?.filter(|t| !t.is_empty()).ok_or_else(not_a_repo)?;
        return Ok(PathBuf::from(top).join(p));
    }
    let p =
        PathBuf::from(git(&["rev-parse", "--path-format=absolute", "--git-path", "hooks"])?.ok_or_else(not_a_repo)?);
    Ok(if p.is_absolute() { p } else { dir.join(p) })
}

/// `hook_command` is the hook program as one shell command, already quoted
/// (the same one the agent hooks run), to which `pre-commit` is added.
fn script(hook_command: &str) -> String {
    format!(
        "#!/bin/sh\n{MARKER}\n# Refuses a commit touching files under another session's exclusive lease.\n\
         # `git commit --no-verify` commits anyway.\n\
         {hook_command} pre-commit || exit $?\n\
         chained=\"$(dirname \"$0\")/{CHAINED}\"\n\
         if [ -x \"$chained\" ]; then exec \"$chained\" \"$@\"; fi\n"
    )
}

/// The hooks folder, opened for writing: a hooks folder inside the work
/// tree (`core.hooksPath = .husky`) is the repo's content, so every folder
/// from the work tree down to it must be real (a committed symlink at
/// `.husky` is refused, never followed out of the repo); elsewhere it is
/// confined to itself. Made when missing if `create`.
fn open_hooks(hooks: &Path, create: bool) -> Result<pcmail_fsmode::confined::Dir, GitHookError> {
    let io = |source| GitHookError::Io { path: hooks.to_path_buf(), source };
    let probe = hooks.join("pre-commit");
    match pcmail_fsmode::enclosing_work_tree(&probe) {
        Some(tree) => pcmail_fsmode::confined::parent_of(&tree, &probe, create).map(|(d, _)| d).map_err(io),
        None => {
            if create {
                std::fs::create_dir_all(hooks).map_err(io)?;
            }
            pcmail_fsmode::confined::Dir::open(hooks, &[], false).map_err(io)
        }
    }
}

/// Installs (or updates) the guard in `dir`'s repo, chaining an existing
/// pre-commit hook. Idempotent.
pub fn install(dir: &Path, hook_command: &str) -> Result<Installed, GitHookError> {
    let hooks = hooks_dir(dir)?;
    let d = open_hooks(&hooks, true)?;
    let (name, chained_name) = (Path::new("pre-commit"), Path::new(CHAINED));
    let hook = hooks.join(name);
    let chained = hooks.join(CHAINED);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| GitHookError::Io { path, source }
    };
    let want = script(hook_command);
    // A symlinked hook is someone else's (its target is not read): it is
    // chained as the link itself.
    let existing = match d.read(name) {
        Ok(t) => t.map(|b| String::from_utf8_lossy(&b).into_owned()),
        Err(e) if pcmail_fsmode::confined::is_refused(&e) => Some(String::new()),
        Err(e) => return Err(io(&hook)(e)),
    };
    if existing.as_deref() == Some(want.as_str()) {
        return Ok(Installed { hook, chained: d.exists(chained_name).then_some(chained), changed: false });
    }
    if let Some(text) = &existing {
        if !text.contains(MARKER) {
            if d.exists(chained_name) {
                return Err(GitHookError::ChainTaken(chained));
            }
            d.rename_in(name, chained_name).map_err(io(&hook))?;
        }
    }
    d.replace(name, want.as_bytes(), Some(0o755)).map_err(io(&hook))?;
    Ok(Installed { hook, chained: d.exists(chained_name).then_some(chained), changed: true })
}

/// Removes the guard and puts the chained hook back.
pub fn uninstall(dir: &Path) -> Result<bool, GitHookError> {
    let hooks = hooks_dir(dir)?;
    let d = match open_hooks(&hooks, false) {
        Ok(d) => d,
        Err(GitHookError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let (name, chained_name) = (Path::new("pre-commit"), Path::new(CHAINED));
    let hook = hooks.join(name);
    let ours = d.read(name).ok().flatten().is_some_and(|t| String::from_utf8_lossy(&t).contains(MARKER));
    if !ours {
        return Ok(false);
    }
    let io = |path: PathBuf| move |source| GitHookError::Io { path, source };
    if d.exists(chained_name) {
        d.rename_in(chained_name, name).map_err(io(hook.clone()))?;
    } else {
        d.remove_file(name).map_err(io(hook.clone()))?;
    }
    Ok(true)
}

/// The files a commit touches: staged paths (also both sides of a rename).
fn staged_files(dir: &Path) -> Vec<String> {
    let Ok(out) =
        Command::new("git").args(["diff", "--cached", "--name-only", "-z", "--no-renames"]).current_dir(dir).output()
    else {
        return vec![];
    };
    out.stdout.split(|&b| b == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned()).collect()
}

/// The session committing: `PCMAIL_SESSION`, else the current session of
/// the Claude Code process this commit runs under (its Bash tool).
fn committing_session(store: &Store) -> Option<String> {
    if let Some(s) = std::env::var("PCMAIL_SESSION").ok().and_then(|s| pcmail_core::rules::clean_session_id(s.trim())) {
        return Some(s);
    }
    let p = process::claude_ancestor()?;
    sl::session_of_process(store.conn(), p.pid, p.start)
        .ok()
        .flatten()
        .and_then(|r| pcmail_core::rules::clean_session_id(&r.session))
}

/// The check: the refusal text when the commit touches another session's
/// exclusive lease, None to let it through (also on any trouble reading).
pub fn check(paths: &Paths, dir: &Path, now: Millis) -> Option<String> {
    // The repo committed to (it may have no identity yet: a repo made inside
    // a leased folder, before its first commit), and every repo enclosing it
    // (a `.git` made inside a leased folder does not take its files out of
    // the outer repo's leases): each with the prefix that names this work tree.
    let root = repo::work_tree_root(dir)?;
    let enclosing = repo::repo_relative_all(&root).ok()?;
    let store = Store::open_existing(&paths.store(), crate::locks::HOOK_LOCK_BUDGET).ok()??;
    let mut guarded = vec![];
    for (outer, prefix) in enclosing {
        let leases = sl::cache_exclusive_in_repo(store.conn(), &outer.id).ok()?;
        if !leases.is_empty() {
            guarded.push((prefix, leases));
        }
    }
    if guarded.is_empty() {
        return None;
    }
    let config = Config::load(paths).ok()?;
    let session = committing_session(&store).unwrap_or_default();
    let me = Me::load(store.conn(), &config.label, &session);
    let mut lines = vec![];
    for f in staged_files(&root) {
        for (prefix, leases) in &guarded {
            let rel = if prefix.is_empty() { f.clone() } else { format!("{prefix}/{f}") };
            if let Some((l, _)) = lease_view::blocking(leases, &me, &rel) {
                lines.push(lease_view::refusal(l, &rel, now));
                break;
            }
        }
    }
    if lines.is_empty() {
        return None;
    }
    let n = lines.len();
    lines.truncate(5);
    let more = if n > 5 { format!("\npcmail: … and {} more files", n - 5) } else { String::new() };
    Some(format!(
        "pcmail: commit refused: it touches files under another session's exclusive lease.\n{}{more}\n\
         pcmail: `git commit --no-verify` commits anyway.",
        lines.join("\n")
    ))
}

/// `pcmail-hook pre-commit`: exit 1 with the refusal on stderr, else 0.
pub fn pre_commit_main() -> i32 {
    let Ok(paths) = Paths::from_env() else { return 0 };
    let Ok(dir) = std::env::current_dir() else { return 0 };
    match check(&paths, &dir, crate::system_now()) {
        Some(text) => {
            eprintln!("{text}");
            1
        }
        None => 0,
    }
}
