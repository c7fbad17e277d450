//! What every op sees and returns: the request's transaction, clock and
//! caller (`Ctx`), and why an op failed (`OpError`: a protocol error for the
//! caller, or storage trouble).

use pcmail_core::auth::Caller;
use pcmail_core::op_table::News;
use pcmail_core::{ErrorCode, Millis, ProtoError};

/// Why an op failed: a protocol error for the caller, or storage trouble.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OpError {
    #[error(transparent)]
    Proto(#[from] ProtoError),
    #[error("database: {0}")]
    Db(#[from] rusqlite::Error),
}

pub(crate) type OpResult<T> = Result<T, OpError>;

impl OpError {
    pub(crate) fn proto(code: ErrorCode, message: impl Into<String>) -> OpError {
        OpError::Proto(ProtoError::new(code, message))
    }

    pub(crate) fn into_proto(self) -> ProtoError {
        match self {
            OpError::Proto(p) => p,
            OpError::Db(e) => db_error_to_proto(&e),
        }
    }
}

pub(crate) fn db_error_to_proto(e: &rusqlite::Error) -> ProtoError {
    if is_busy(e) {
        ProtoError::new(ErrorCode::Busy, "the database is locked by another writer; retry")
    } else {
        tracing::error!(error = %e, "storage failure");
        ProtoError::new(ErrorCode::Internal, "storage failure; nothing was stored")
    }
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseBusy) | Some(rusqlite::ErrorCode::DatabaseLocked))
}

/// What one op sees: the open transaction, the clock and the caller.
pub(crate) struct Ctx<'a> {
    pub tx: &'a rusqlite::Transaction<'a>,
    pub now: Millis,
    pub pc: &'a str,
    /// The credential the caller presented (`cred`), if any.
    pub cred: Option<&'a str>,
    /// Who the caller proved to be (`pcmail_core::auth::authenticate`).
    pub caller: Caller,
    /// Labels whose long-polls should wake after commit (new mail for them,
    /// or a state change of mail they sent), and what news each wake is.
    /// Filled by `wake`.
    pub touched: Vec<String>,
    pub news: Vec<News>,
    /// How long final mail and ended jobs are kept (the `prune` built-in).
    pub retention_ms: Millis,
}

impl Ctx<'_> {
    /// After commit, `pc`'s long poll wakes: it has `news`. The op's row of
    /// the op table names the news it may bring (checked in debug builds).
    pub(crate) fn wake(&mut self, news: News, pc: String) {
        if !self.news.contains(&news) {
            self.news.push(news);
        }
        self.touched.push(pc);
    }
}
