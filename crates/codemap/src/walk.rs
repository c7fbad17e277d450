//! The walk: every file with a mapped extension that git does not ignore.

use crate::model::Lang;
use crate::{Found, MapError, MAX_FILE_BYTES};
use std::path::Path;
use std::time::UNIX_EPOCH;

/// Mapped files sorted by path, and the paths of those over the size limit.
/// `.gitignore`, `.git/info/exclude` and the global excludes are read by the
/// `ignore` crate (no git process); hidden files and folders are skipped.
pub(crate) fn walk(root: &Path) -> Result<(Vec<Found>, Vec<String>), MapError> {
    let mut found = vec![];
    let mut huge = vec![];
    let walker = ignore::WalkBuilder::new(root)
        .hidden(true)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(true)
        .require_git(false)
        .follow_links(false)
        .build();
    for entry in walker {
        let entry = entry.map_err(|e| MapError::Walk { path: root.to_path_buf(), source: e })?;
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(root) else { continue };
        let Some(rel) = rel.to_str() else { continue };
        let rel = rel.replace('\\', "/");
        let Some(lang) = Lang::of_path(&rel) else { continue };
        let Ok(meta) = entry.metadata() else { continue };
        if meta.len() > MAX_FILE_BYTES {
            huge.push(rel);
            continue;
        }
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0);
        found.push(Found { abs: entry.path().to_path_buf(), rel, lang, size: meta.len(), mtime_ns });
    }
    found.sort_by(|a, b| a.rel.cmp(&b.rel));
    huge.sort();
    Ok((found, huge))
}
