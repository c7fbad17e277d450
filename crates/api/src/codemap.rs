//! `pcmail map [--check]`: the code map of a repo, one function
//! for the CLI and the MCP tools `map` and `map_check`; `pcmail map --show
//! FILE`: one file of it in full. Works on the repo's files and the PC
//! store's parse cache; no server.

use crate::{optional_not_null, ApiError, Result};
use pcmail_codemap::{MapError, Options, Report};
use pcmail_local::config::Paths;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = optional_not_null)]
pub struct MapArgs {
    /// The repo (default: the one containing the current folder).
    #[serde(default)]
    pub repo: Option<String>,
    /// The map, relative to the repo root (default .claude/code-map.md).
    #[serde(default)]
    pub map_file: Option<String>,
    /// The llms.txt index, relative to the repo root (default llms.txt).
    #[serde(default)]
    pub llms_file: Option<String>,
    /// Maximum size of llms.txt in characters.
    #[serde(default)]
    pub llms_budget: Option<usize>,
    /// Parse every file (ignore the cache in the PC store).
    #[serde(default)]
    pub full: bool,
}

/// The repo named, or the one containing the current folder.
fn repo_of(repo: Option<&str>) -> Result<PathBuf> {
    Ok(match repo {
        Some(r) => PathBuf::from(r),
        None => {
            let cwd = std::env::current_dir()
                .map_err(|e| ApiError::Local(format!("cannot read the current directory: {e}")))?;
            pcmail_codemap_check::find_repo_root(&cwd).unwrap_or(cwd)
        }
    })
}

fn options(a: &MapArgs) -> Result<Options> {
    Ok(Options {
        repo: repo_of(a.repo.as_deref())?,
        map_file: a.map_file.clone().unwrap_or_else(|| pcmail_codemap::DEFAULT_MAP_FILE.to_string()),
        llms_file: a.llms_file.clone().unwrap_or_else(|| pcmail_codemap::DEFAULT_LLMS_FILE.to_string()),
        llms_budget: a.llms_budget.unwrap_or(pcmail_codemap::DEFAULT_LLMS_BUDGET),
    })
}

/// The PC store as the parse cache; None (a full run, said on stderr by
/// the caller's `note`) when it can't be opened.
fn cache(paths: &Paths, full: bool, note: &mut Option<String>) -> Option<pcmail_store::Store> {
    if full {
        return None;
    }
    match pcmail_store::Store::open(&paths.store()) {
        Ok(s) => Some(s),
        Err(e) => {
            *note = Some(format!("no cache for the code map ({e}); parsing every file"));
            None
        }
    }
}

fn map_error(e: MapError) -> ApiError {
    match e {
        MapError::NotADirectory(_) | MapError::BudgetTooSmall(_) => ApiError::Usage(e.to_string()),
        e => ApiError::Local(e.to_string()),
    }
}

/// What a map run did, and a note when it ran without the cache.
#[derive(Debug, Clone, Serialize)]
pub struct MapResult {
    #[serde(flatten)]
    pub report: Report,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// `pcmail map`: writes the map and llms.txt (only what changed).
pub fn map(paths: &Paths, a: &MapArgs) -> Result<MapResult> {
    let opts = options(a)?;
    let mut note = None;
    let mut store = cache(paths, a.full, &mut note);
    let report = pcmail_codemap::map(&opts, store.as_mut()).map_err(map_error)?;
    Ok(MapResult { report, note })
}

/// `pcmail map --check`: writes nothing; the error `map_stale` (exit 15)
/// with the reasons and the command that refreshes it when it is stale.
pub fn map_check(paths: &Paths, a: &MapArgs) -> Result<MapResult> {
    let opts = options(a)?;
    let mut note = None;
    let mut store = cache(paths, a.full, &mut note);
    match pcmail_codemap::check(&opts, store.as_mut()).map_err(map_error)? {
        Ok(report) => Ok(MapResult { report, note }),
        Err(stale) => Err(ApiError::MapStale(stale.to_string())),
    }
}

/// One file of the map in full: its path as the map names it and the text.
#[derive(Debug, Clone, Serialize)]
pub struct MapShow {
    pub repo: PathBuf,
    pub file: String,
    pub text: String,
}

/// `pcmail map --show FILE`: every item and member of one file with its
/// signature and doc line, parsed now. A path that is not a mapped file
/// inside the repo is a usage error (exit 2), a missing file exit 7, a
/// symlink on the way exit 9 (refused, as a write through one is).
pub fn map_show(repo: Option<&str>, file: &str) -> Result<MapShow> {
    use pcmail_codemap::ShowError as S;
    let repo = repo_of(repo)?;
    let text = pcmail_codemap::show(&repo, file).map_err(|e| match e {
        S::NotFound(_) => ApiError::Missing(e.to_string()),
        S::Refused { .. } | S::Read { .. } => ApiError::Local(e.to_string()),
        S::NotADirectory(_)
        | S::LooksLikeOption(_)
        | S::OutsideRepo { .. }
        | S::Folder(_)
        | S::NotMapped(_)
        | S::TooLarge(_) => ApiError::Usage(e.to_string()),
    })?;
    Ok(MapShow { repo, file: file.to_string(), text })
}
