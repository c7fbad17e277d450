//! The code map (`pcmail map`): walks a repo (skipping what git ignores),
//! parses Rust, Python, TypeScript/JavaScript and Go with tree-sitter, and
//! writes `.claude/code-map.md` (every file's top-level items with signatures
//! and doc lines, members counted, with a table of contents) and `llms.txt` (a
//! bounded index). [`show`] gives one file in full, every member included.
//!
//! Incremental: each file's fingerprint (size, modification time, content
//! hash) and parsed entry are kept in the PC store; a re-run reads only files
//! whose size or time changed and parses only those whose content changed.
//! The output depends only on the entries, so it is byte-identical to a full run.

mod extract;
pub mod model;
mod render;
mod walk;

pub use extract::{language, Parsers};
pub use model::{FileEntry, Item, Lang, Summary, EXTRACT_VERSION};
pub use render::LLMS_MARKER;

use pcmail_codemap_check::{read_head, write_stamp, Stamp, REFRESH_COMMAND};
use pcmail_store::{CodemapRow, Store};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

pub const DEFAULT_MAP_FILE: &str = ".claude/code-map.md";
pub const DEFAULT_LLMS_FILE: &str = "llms.txt";
pub const DEFAULT_LLMS_BUDGET: usize = 8_000;
/// Below this an `llms.txt` cannot hold its own header and a folder count.
pub const MIN_LLMS_BUDGET: usize = 1_000;
/// Files modified this close to a run are hashed again by the next run.
const RACY_NS: i64 = 2_000_000_000;
/// Files larger than this are skipped (generated or vendored, not worth a map).
pub const MAX_FILE_BYTES: u64 = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum MapError {
    // Paths are printed quoted: one with an escape sequence must not reach the terminal raw.
    #[error("{0:?} is not a directory")]
    NotADirectory(PathBuf),
    #[error("--llms-budget {0}: use at least {MIN_LLMS_BUDGET} characters")]
    BudgetTooSmall(usize),
    #[error("cannot walk {path:?}: {source}")]
    Walk { path: PathBuf, source: ignore::Error },
    #[error("cannot write {path:?}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("{0} exists and was not written by pcmail; so does {1}: move one away")]
    ForeignLlms(PathBuf, PathBuf),
    #[error(transparent)]
    Store(#[from] pcmail_store::StoreError),
}

/// Why `pcmail map --show FILE` gives no detail. It reads only regular files
/// inside the repo, never through a symlink; paths are printed quoted, as above.
#[derive(Debug, thiserror::Error)]
pub enum ShowError {
    #[error("{0:?} is not a directory")]
    NotADirectory(PathBuf),
    #[error("{0:?} looks like an option, not a file (a file of that name: ./{0})")]
    LooksLikeOption(String),
    #[error("{path:?} is not a file inside the repo {repo:?} ({why}): give its path as the map names it")]
    OutsideRepo { path: String, repo: PathBuf, why: &'static str },
    #[error("no such file in the repo: {0:?}")]
    NotFound(String),
    #[error("{0:?} is a folder: give a file as the map names it")]
    Folder(String),
    #[error("{0:?} is not a file the map covers (.rs, .py, .pyi, .ts, .mts, .cts, .tsx, .js, .mjs, .cjs, .jsx, .go)")]
    NotMapped(String),
    #[error("{0:?} is over 1 MiB: the map skips it")]
    TooLarge(String),
    #[error(
        "refused to read {path:?}: {why} (the map reads only regular files inside the repo, never through a symlink)"
    )]
    Refused { path: String, why: String },
    #[error("cannot read {path:?}: {source}")]
    Read { path: String, source: std::io::Error },
}

/// `pcmail map --check` found the map out of date (exit 15).
#[derive(Debug, thiserror::Error)]
#[error("the code map is stale ({}): run `{command}`", reasons.join("; "))]
pub struct StaleMap {
    pub reasons: Vec<String>,
    pub command: String,
}

#[derive(Debug, Clone)]
pub struct Options {
    pub repo: PathBuf,
    /// Relative to the repo root (or absolute).
    pub map_file: String,
    pub llms_file: String,
    pub llms_budget: usize,
}

impl Options {
    pub fn new(repo: impl Into<PathBuf>) -> Options {
        Options {
            repo: repo.into(),
            map_file: DEFAULT_MAP_FILE.into(),
            llms_file: DEFAULT_LLMS_FILE.into(),
            llms_budget: DEFAULT_LLMS_BUDGET,
        }
    }

    /// The command that remakes this map (non-default paths included).
    pub fn refresh_command(&self) -> String {
        let mut c = REFRESH_COMMAND.to_string();
        if self.map_file != DEFAULT_MAP_FILE {
            c.push_str(&format!(" --map-file {}", self.map_file));
        }
        if self.llms_file != DEFAULT_LLMS_FILE {
            c.push_str(&format!(" --llms-file {}", self.llms_file));
        }
        if self.llms_budget != DEFAULT_LLMS_BUDGET {
            c.push_str(&format!(" --llms-budget {}", self.llms_budget));
        }
        c
    }
}

/// What a run did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    pub repo: PathBuf,
    /// Files in the map (parse failures included, binary files not).
    pub files: usize,
    /// Files read and parsed this run (cache misses).
    pub parsed: usize,
    /// Files whose cached entry was used.
    pub reused: usize,
    pub failed: usize,
    pub skipped_binary: usize,
    pub skipped_huge: usize,
    pub map_path: PathBuf,
    /// Where llms.txt went (beside a foreign llms.txt when there is one).
    pub llms_path: PathBuf,
    /// An llms.txt pcmail did not write, left alone.
    pub foreign_llms: Option<PathBuf>,
    pub llms_chars: usize,
    pub inputs: String,
    /// Output files whose content changed (written, or that --check would write).
    pub changed: Vec<PathBuf>,
    /// Why the stamp for the hook could not be written (the map itself was).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stamp_error: Option<String>,
}

/// The outputs of a run, before anything is written.
pub struct Built {
    pub report: Report,
    pub code_map: String,
    pub llms: String,
    stamp: Stamp,
}

/// One file the walk found.
struct Found {
    rel: String,
    abs: PathBuf,
    lang: Lang,
    size: u64,
    mtime_ns: i64,
}

enum Outcome {
    /// Same content as cached: only the fingerprint moves.
    Same,
    New(Summary, String),
    Unreadable(String),
}

fn sha256_hex(bytes: &[u8]) -> String {
    let d = Sha256::digest(bytes);
    let mut s = String::with_capacity(64);
    for b in d {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Reads, hashes and (when the hash is new) parses one file.
fn examine(f: &Found, cached_hash: Option<&str>, parsers: &mut Parsers) -> Outcome {
    let bytes = match std::fs::read(&f.abs) {
        Ok(b) => b,
        Err(e) => return Outcome::Unreadable(format!("cannot read: {e}")),
    };
    let hash = sha256_hex(&bytes);
    if cached_hash == Some(hash.as_str()) {
        return Outcome::Same;
    }
    if bytes.iter().take(8192).any(|&b| b == 0) {
        return Outcome::New(render::summarize(&FileEntry::binary(f.lang)), hash);
    }
    Outcome::New(render::summarize(&parsers.extract(f.lang, &bytes)), hash)
}

/// The files a run maps (absolute paths, sorted by their path in the repo)
/// and their languages, without reading them.
pub fn mapped_files(repo: &Path) -> Result<Vec<(PathBuf, Lang)>, MapError> {
    let root = repo.canonicalize().map_err(|e| MapError::Write { path: repo.to_path_buf(), source: e })?;
    let (found, _) = walk::walk(&root)?;
    Ok(found.into_iter().map(|f| (f.abs, f.lang)).collect())
}

/// Walks, parses what changed, updates the cache and renders both outputs.
pub fn build(opts: &Options, store: Option<&mut Store>) -> Result<Built, MapError> {
    if opts.llms_budget < MIN_LLMS_BUDGET {
        return Err(MapError::BudgetTooSmall(opts.llms_budget));
    }
    if !opts.repo.is_dir() {
        return Err(MapError::NotADirectory(opts.repo.clone()));
    }
    let started_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(i64::MAX);
    let timing = std::env::var_os("PCMAIL_MAP_TIMING").is_some();
    let t0 = std::time::Instant::now();
    let lap = |what: &str| {
        if timing {
            eprintln!("map timing: {what} at {:.1} ms", t0.elapsed().as_secs_f64() * 1e3);
        }
    };
    let root = opts.repo.canonicalize().map_err(|e| MapError::Write { path: opts.repo.clone(), source: e })?;
    let repo_key = root.to_string_lossy().into_owned();
    let (found, huge) = walk::walk(&root)?;
    let skipped_huge = huge.len();

    lap("walk");
    let cached: HashMap<String, CodemapRow> = match store.as_deref() {
        Some(s) => s.codemap_rows(&repo_key)?.into_iter().map(|r| (r.path.clone(), r)).collect(),
        None => HashMap::new(),
    };
    lap("cache rows read");

    // Fingerprint hits are decided here; the rest is read (and maybe parsed) in parallel.
    let mut entries: Vec<Option<(Summary, String)>> = Vec::with_capacity(found.len());
    let mut todo = vec![];
    for (i, f) in found.iter().enumerate() {
        let hit = cached.get(&f.rel).filter(|r| r.version == EXTRACT_VERSION);
        match hit {
            Some(r) if r.size == f.size as i64 && r.mtime_ns == f.mtime_ns => {
                match serde_json::from_str::<Summary>(&r.entry) {
                    Ok(e) => {
                        entries.push(Some((e, r.hash.clone())));
                        continue;
                    }
                    Err(_) => todo.push(i),
                }
            }
            _ => todo.push(i),
        }
        entries.push(None);
    }
    lap("cache loaded and decoded");
    let outcomes = run_parallel(&found, &todo, &cached);
    lap("read and parsed");

    let mut report = Report { repo: root.clone(), skipped_huge, ..Report::default() };
    let mut upserts = vec![];
    for (i, outcome) in todo.iter().zip(outcomes) {
        let f = &found[*i];
        let cached_row = cached.get(&f.rel);
        let (entry, hash) = match outcome {
            Outcome::Same => {
                let r = cached_row.expect("Same only when a row was there");
                match serde_json::from_str::<Summary>(&r.entry) {
                    Ok(e) => (e, r.hash.clone()),
                    // A row that does not decode: parse the file after all.
                    Err(_) => match examine(f, None, &mut Parsers::default()) {
                        Outcome::New(e, h) => {
                            report.parsed += 1;
                            (e, h)
                        }
                        Outcome::Unreadable(why) => (render::summarize(&FileEntry::failed(f.lang, why)), String::new()),
                        Outcome::Same => unreachable!("no cached hash to be the same as"),
                    },
                }
            }
            Outcome::New(e, h) => {
                report.parsed += 1;
                (e, h)
            }
            Outcome::Unreadable(why) => (render::summarize(&FileEntry::failed(f.lang, why)), String::new()),
        };
        if !hash.is_empty() {
            // A file modified just now may change again within the clock's
            // granularity without its size or time moving ("racy git"): its
            // row gets no time, so the next run hashes it again.
            let racy = f.mtime_ns >= started_ns - RACY_NS;
            upserts.push(CodemapRow {
                path: f.rel.clone(),
                size: f.size as i64,
                mtime_ns: if racy { -1 } else { f.mtime_ns },
                hash: hash.clone(),
                version: EXTRACT_VERSION,
                entry: serde_json::to_string(&entry).expect("entries serialise"),
            });
        }
        entries[*i] = Some((entry, hash));
    }
    report.reused = found.len() - report.parsed;

    if let Some(s) = store {
        let present: std::collections::HashSet<&str> = found.iter().map(|f| f.rel.as_str()).collect();
        let removed: Vec<String> = cached.keys().filter(|k| !present.contains(k.as_str())).cloned().collect();
        s.codemap_apply(&repo_key, &upserts, &removed)?;
    }

    lap("cache updated");
    let mut files: Vec<(String, Summary)> = Vec::with_capacity(found.len());
    let mut digest = Sha256::new();
    digest.update(format!("pcmail-map {EXTRACT_VERSION} {}\n", opts.llms_budget));
    for (f, e) in found.iter().zip(entries) {
        let Some((entry, hash)) = e else { continue };
        digest.update(format!("{}\0{}\n", f.rel, hash));
        if entry.binary {
            report.skipped_binary += 1;
            continue;
        }
        if entry.failed {
            report.failed += 1;
        }
        files.push((f.rel.clone(), entry));
    }
    for h in &huge {
        digest.update(format!("huge\0{h}\n"));
    }
    let inputs: String = sha256_hex(&digest.finalize())[..16].to_string();
    report.files = files.len();
    report.inputs = inputs.clone();

    let command = opts.refresh_command();
    let repo_name = root.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "repo".into());
    let data = render::MapData {
        repo_name: &repo_name,
        files: &files,
        skipped_binary: report.skipped_binary,
        skipped_huge: report.skipped_huge,
        inputs: &inputs,
        command: &command,
        map_file: &opts.map_file,
    };
    lap("digest");
    let code_map = render::code_map(&data);
    lap("code-map.md rendered");
    let llms = render::llms(&data, opts.llms_budget).ok_or(MapError::BudgetTooSmall(opts.llms_budget))?;
    lap("llms.txt rendered");
    report.llms_chars = llms.chars().count();
    report.map_path = root.join(&opts.map_file);
    let (llms_path, foreign) = llms_target(&root.join(&opts.llms_file))?;
    report.llms_path = llms_path;
    report.foreign_llms = foreign;
    for (path, content) in [(&report.map_path, &code_map), (&report.llms_path, &llms)] {
        if std::fs::read(path).ok().as_deref() != Some(content.as_bytes()) {
            report.changed.push(path.clone());
        }
    }
    lap("compared with the files");
    let head = read_head(&root).map(|h| h.as_stamp()).unwrap_or_else(|| "none".into());
    let stamp = Stamp { head, inputs, map_file: opts.map_file.clone(), command };
    Ok(Built { report, code_map, llms, stamp })
}

/// Reads and parses `todo` on up to one thread per core.
fn run_parallel(found: &[Found], todo: &[usize], cached: &HashMap<String, CodemapRow>) -> Vec<Outcome> {
    let results: Mutex<Vec<Option<Outcome>>> = Mutex::new((0..todo.len()).map(|_| None).collect());
    let next = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(todo.len().div_ceil(4)).max(1);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut parsers = Parsers::default();
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= todo.len() {
                        break;
                    }
                    let f = &found[todo[k]];
                    let cached_hash =
                        cached.get(&f.rel).filter(|r| r.version == EXTRACT_VERSION).map(|r| r.hash.as_str());
                    let o = examine(f, cached_hash, &mut parsers);
                    results.lock().expect("no worker panics")[k] = Some(o);
                }
            });
        }
    });
    results.into_inner().expect("no worker panics").into_iter().map(|o| o.expect("every index done")).collect()
}

/// Where llms.txt goes: the path itself unless a file pcmail did not write is
/// there; then `<stem>.pcmail.txt` beside it (Some(original) says so).
fn llms_target(path: &Path) -> Result<(PathBuf, Option<PathBuf>), MapError> {
    let ours = |p: &Path| match std::fs::read_to_string(p) {
        Ok(t) => t.lines().any(|l| l == LLMS_MARKER),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    };
    if ours(path) {
        return Ok((path.to_path_buf(), None));
    }
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "llms".into());
    let beside = path.with_file_name(format!("{stem}.pcmail.txt"));
    if ours(&beside) {
        Ok((beside, Some(path.to_path_buf())))
    } else {
        Err(MapError::ForeignLlms(path.to_path_buf(), beside))
    }
}

/// Replaces an output atomically. Inside the repo (the usual place) the
/// write is confined to it (`pcmail_fsmode::confined`: no committed symlink
/// at `.claude/` or at the file carries it elsewhere); an output the user
/// put outside the repo is written where they said.
fn write_atomic(repo: &Path, path: &Path, content: &str) -> Result<(), MapError> {
    let err = |e| MapError::Write { path: path.to_path_buf(), source: e };
    if path.strip_prefix(repo).is_ok() {
        return pcmail_fsmode::confined::replace(repo, path, content.as_bytes(), None).map_err(err);
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    pcmail_fsmode::replace_file(path, content.as_bytes(), None).map_err(err)
}

impl Built {
    /// Writes the outputs that changed, then the stamp the hook reads (a
    /// stamp that cannot be written, say a `.git` file pointing nowhere, is
    /// reported, not fatal: the map itself is good).
    pub fn write(&mut self) -> Result<(), MapError> {
        for path in &self.report.changed {
            let content = if *path == self.report.map_path { &self.code_map } else { &self.llms };
            write_atomic(&self.report.repo, path, content)?;
        }
        if let Err(e) = write_stamp(&self.report.repo, &self.stamp) {
            self.report.stamp_error = Some(format!("cannot write the code map stamp in the git directory: {e}"));
        }
        Ok(())
    }

    /// Why the files on disk are not what this run would write (empty: fresh).
    pub fn stale_reasons(&self) -> Vec<String> {
        self.report
            .changed
            .iter()
            .map(|p| {
                let rel = p.strip_prefix(&self.report.repo).unwrap_or(p).display().to_string();
                if p.exists() {
                    format!("{rel} differs from its inputs")
                } else {
                    format!("{rel} is missing")
                }
            })
            .collect()
    }

    pub fn command(&self) -> &str {
        &self.stamp.command
    }
}

/// `pcmail map --show FILE`: one file of the repo in full (every item and
/// member with its signature and doc line), parsed now, so it is the file as
/// it is on disk even when the map is stale. `file` is relative to the repo
/// root, as the map names it (an absolute path inside the repo works too).
pub fn show(repo: &Path, file: &str) -> Result<String, ShowError> {
    use std::path::Component;
    if file.starts_with('-') {
        return Err(ShowError::LooksLikeOption(file.to_string()));
    }
    if !repo.is_dir() {
        return Err(ShowError::NotADirectory(repo.to_path_buf()));
    }
    let root = repo.canonicalize().map_err(|e| ShowError::Read { path: repo.display().to_string(), source: e })?;
    let outside = |why| ShowError::OutsideRepo { path: file.to_string(), repo: root.clone(), why };
    let given = Path::new(file);
    let rel = if given.is_absolute() {
        given.strip_prefix(&root).or_else(|_| given.strip_prefix(repo)).map_err(|_| outside("not under it"))?
    } else {
        given
    };
    // Lexical first: `..` could climb out before any file is touched.
    let mut clean = PathBuf::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => clean.push(n),
            Component::CurDir => {}
            Component::ParentDir => return Err(outside("`..` leaves it")),
            Component::RootDir | Component::Prefix(_) => return Err(outside("not under it")),
        }
    }
    let Some(rel_str) = clean.to_str().map(|s| s.replace('\\', "/")).filter(|s| !s.is_empty()) else {
        return Err(outside("it names no file"));
    };
    // Each name is looked at, never followed, before anything is read: a
    // symlinked folder or file on the way could lead out of the repo. The
    // read itself re-checks the way (`confined::read`), so a swap in between
    // does not help either.
    let mut abs = root.clone();
    let names: Vec<_> = clean.components().collect();
    let mut meta = None;
    for (i, n) in names.iter().enumerate() {
        abs.push(n);
        let m = match std::fs::symlink_metadata(&abs) {
            Ok(m) => m,
            // A name too long for the file system (or holding a NUL) names
            // no file that could exist: missing, like any other.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound
                        | std::io::ErrorKind::InvalidFilename
                        | std::io::ErrorKind::InvalidInput
                ) =>
            {
                return Err(ShowError::NotFound(rel_str))
            }
            Err(e) => return Err(ShowError::Read { path: rel_str, source: e }),
        };
        let last = i + 1 == names.len();
        if m.file_type().is_symlink() {
            let why = if last { "it is a symlink" } else { "a folder on its way is a symlink" };
            return Err(ShowError::Refused { path: rel_str, why: why.into() });
        }
        if !last && !m.is_dir() {
            return Err(ShowError::NotFound(rel_str));
        }
        meta = Some(m);
    }
    let meta = meta.expect("a path with at least one name");
    if meta.is_dir() {
        return Err(ShowError::Folder(rel_str));
    }
    let Some(lang) = Lang::of_path(&rel_str) else { return Err(ShowError::NotMapped(rel_str)) };
    if meta.len() > MAX_FILE_BYTES {
        return Err(ShowError::TooLarge(rel_str));
    }
    let bytes = match pcmail_fsmode::confined::read(&root, &clean) {
        Ok(Some(b)) => b,
        Ok(None) => return Err(ShowError::NotFound(rel_str)),
        Err(e) if pcmail_fsmode::confined::is_refused(&e) => {
            let why = match e.get_ref().and_then(|i| i.downcast_ref::<pcmail_fsmode::confined::Refused>()) {
                Some(r) => format!("{} ({})", r.why, r.path.strip_prefix(&root).unwrap_or(&r.path).display()),
                None => e.to_string(),
            };
            return Err(ShowError::Refused { path: rel_str, why });
        }
        Err(e) => return Err(ShowError::Read { path: rel_str, source: e }),
    };
    let entry = if bytes.iter().take(8192).any(|&b| b == 0) {
        FileEntry::binary(lang)
    } else {
        Parsers::default().extract(lang, &bytes)
    };
    Ok(render::detail(&rel_str, &entry))
}

/// `pcmail map`: build and write.
pub fn map(opts: &Options, store: Option<&mut Store>) -> Result<Report, MapError> {
    let mut built = build(opts, store)?;
    built.write()?;
    Ok(built.report)
}

/// `pcmail map --check`: build, write nothing, fail with [`StaleMap`] when
/// the files on disk differ from what a run would write.
pub fn check(opts: &Options, store: Option<&mut Store>) -> Result<Result<Report, StaleMap>, MapError> {
    let built = build(opts, store)?;
    let reasons = built.stale_reasons();
    if reasons.is_empty() {
        Ok(Ok(built.report))
    } else {
        Ok(Err(StaleMap { reasons, command: built.stamp.command }))
    }
}
