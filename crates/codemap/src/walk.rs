//! The walk: every file with a mapped extension that git does not ignore.

use crate::model::Lang;
use crate::{Found, MapError, MAX_FILE_BYTES};
use std::path::Path;
use std::sync::Mutex;
use std::time::UNIX_EPOCH;

/// Mapped files sorted by path, and the paths of those over the size limit.
/// `.gitignore`, `.git/info/exclude` and the global excludes are read by the
/// `ignore` crate (no git process); hidden files and folders are skipped.
pub(crate) fn walk(root: &Path) -> Result<(Vec<Found>, Vec<String>), MapError> {
    let found = Mutex::new(vec![]);
    let huge = Mutex::new(vec![]);
    let error = Mutex::new(None);
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(4);
    ignore::WalkBuilder::new(root)
        .hidden(true)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(true)
        .require_git(false)
        .follow_links(false)
        .threads(threads)
        .build_parallel()
        .run(|| {
            Box::new(|entry| {
                let entry = match entry {
                    Ok(e) => e,
                    Err(e) => {
                        *error.lock().expect("no walker panics") = Some(e);
                        return ignore::WalkState::Quit;
                    }
                };
                if !entry.file_type().is_some_and(|t| t.is_file()) {
                    return ignore::WalkState::Continue;
                }
                let Ok(rel) = entry.path().strip_prefix(root) else { return ignore::WalkState::Continue };
                let Some(rel) = rel.to_str() else { return ignore::WalkState::Continue };
                let rel = rel.replace('\\', "/");
                let Some(lang) = Lang::of_path(&rel) else { return ignore::WalkState::Continue };
                let Ok(meta) = entry.metadata() else { return ignore::WalkState::Continue };
                if meta.len() > MAX_FILE_BYTES {
                    huge.lock().expect("no walker panics").push(rel);
                    return ignore::WalkState::Continue;
                }
                let mtime_ns = meta
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                    .map(|d| d.as_nanos() as i64)
                    .unwrap_or(0);
                let f = Found { abs: entry.path().to_path_buf(), rel, lang, size: meta.len(), mtime_ns };
                found.lock().expect("no walker panics").push(f);
                ignore::WalkState::Continue
            })
        });
    if let Some(e) = error.into_inner().expect("no walker panics") {
        return Err(MapError::Walk { path: root.to_path_buf(), source: e });
    }
    let mut found = found.into_inner().expect("no walker panics");
    let mut huge = huge.into_inner().expect("no walker panics");
    found.sort_by(|a, b| a.rel.cmp(&b.rel));
    huge.sort();
    Ok((found, huge))
}
