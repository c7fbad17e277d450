//! Handoffs, rollups and memory: files
//! in the repo (`.claude/handoffs/`, `.claude/memory/`), Markdown readable
//! without pcmail, append-only with an INDEX, carried between PCs by git; the
//! PC store only indexes them (memory search) and remembers what the hook did
//! (the Stop reminder once per session).
//!
//! Every operation takes the time as a value; nothing here opens a socket
//! (the hook is built on this crate).

pub mod fsutil;
pub mod gitattributes;
pub mod handoffs;
pub mod index;
pub mod memory;
pub mod names;
pub mod repo;
pub mod session;
pub mod stop;
pub mod summary;
pub mod viewcache;

use std::path::PathBuf;

/// What can go wrong; each kind maps to one exit code at the edges
/// (docs/exit-codes.md): usage 2, not found 7, local trouble 9.
#[derive(Debug, thiserror::Error)]
pub enum HandoffError {
    /// Bad input: a slug, a topic, a date, a missing section.
    #[error("{0}")]
    Usage(String),
    /// No handoff / memory topic by that name.
    #[error("{what}{}", candidates_text(.candidates))]
    NotFound { what: String, candidates: Vec<String> },
    /// Not inside a git repository.
    #[error("{} is not inside a git repository: run pcmail from the repo (or pass --repo)", .0.display())]
    NoRepo(PathBuf),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Store(#[from] pcmail_store::StoreError),
}

fn candidates_text(c: &[String]) -> String {
    if c.is_empty() {
        String::new()
    } else {
        format!(" (candidates: {})", c.join(", "))
    }
}

impl HandoffError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> HandoffError {
        HandoffError::Io { path: path.into(), source }
    }
}

pub type Result<T> = std::result::Result<T, HandoffError>;

/// Where handoffs live, relative to the repo root.
pub const HANDOFF_DIR: &str = ".claude/handoffs";
/// The append-only event log beside them.
pub const INDEX_FILE: &str = "INDEX.md";
/// Where memory topics live, relative to the repo root.
pub const MEMORY_DIR: &str = ".claude/memory";
