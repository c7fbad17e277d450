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
    Db(#[from] crate::store::DbError),
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

/// A store failure as the caller sees it: `busy` (transient: another
/// writer holds the lock, the database restarts, the connection went; the
/// same request again is safe) or `internal`. Never the SQL or its values.
pub(crate) fn db_error_to_proto(e: &crate::store::DbError) -> ProtoError {
    if e.is_transient() {
        let message = match e {
            crate::store::DbError::Sqlite(_) => "the database is locked by another writer; retry",
            _ => {
                tracing::warn!(error = %e, "database busy or unreachable");
                "the database is busy or unreachable; retry"
            }
        };
        ProtoError::new(ErrorCode::Busy, message)
    } else {
        tracing::error!(error = %e, "storage failure");
        ProtoError::new(ErrorCode::Internal, "storage failure; nothing was stored")
    }
}

/// What one op sees: the open transaction, the clock and the caller.
pub(crate) struct Ctx<'a> {
    pub tx: &'a dyn crate::store::Db,
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
    /// The caller's own row as authentication read it, at the start of the
    /// transaction (None when nothing was read: the open embedded server).
    pub facts: Option<CallerRow>,
}

/// What the statement that authenticates a request also reads of the
/// caller's own label, so a caught-up poll needs no statement of its own for
/// it (on PostgreSQL each statement costs both processes CPU). True at the
/// transaction's start: an op that may have changed one reads it again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CallerRow {
    /// The label is on the roster.
    pub on_roster: bool,
    /// Its recorded heartbeat (`pc.last_poll_at`).
    pub last_poll_at: Option<Millis>,
    /// `meta.roster_version`.
    pub roster_version: Option<i64>,
    /// Some name is held by one of its sessions.
    pub holds_names: bool,
}

impl<'a> Ctx<'a> {
    /// The server acting on its own (the sweep, the clock's catch-up before
    /// a write op): the admin, with no caller's row.
    pub(crate) fn server(tx: &'a dyn crate::store::Db, now: Millis, retention_ms: Millis) -> Ctx<'a> {
        Ctx {
            tx,
            now,
            pc: "server",
            cred: None,
            caller: Caller::Admin,
            touched: Vec::new(),
            news: Vec::new(),
            retention_ms,
            facts: None,
        }
    }

    /// After commit, `pc`'s long poll wakes: it has `news`. The op's row of
    /// the op table names the news it may bring (checked in debug builds).
    pub(crate) fn wake(&mut self, news: News, pc: String) {
        if !self.news.contains(&news) {
            self.news.push(news);
        }
        self.touched.push(pc);
    }
}
