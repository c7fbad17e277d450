use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Error codes travel as data (`{"ok":false,"error":{"code":…}}`), never as HTTP statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    BadJson,
    BadVersion,
    UnknownOp,
    BadRequest,
    TooLarge,
    Unauthorized,
    UnknownPc,
    UnknownRecipient,
    RosterUnavailable,
    DuplicateId,
    LoopRefused,
    HopLimit,
    NotFound,
    Forbidden,
    Conflict,
    Busy,
    Internal,
    /// An Apps Script deployment that was never set up (no spreadsheet).
    NotConfigured,
    /// The caller's label is bound to another installation's credential.
    LabelTaken,
    /// The credential is not one the server knows (issue 14): enrol with a join code.
    NotEnrolled,
    /// The credential (or the label) was revoked by the admin.
    Revoked,
    /// The op needs the admin secret (`PCMAIL_ADMIN_TOKEN`).
    AdminRequired,
    /// A join code that does not exist (or is for another label).
    JoinCodeInvalid,
    /// A join code past its expiry.
    JoinCodeExpired,
    /// A join code already used by another PC.
    JoinCodeUsed,
    /// A lease is held by someone else (the error carries that `lease`).
    Held,
    /// A lease's holder stopped renewing it: taking it needs evidence.
    Stale,
    /// A job the target will not run (issue 13): `error.reason` says why
    /// (`no_executor`, `not_whitelisted`, `bad_argument` + `field`, `submitter_not_allowed`).
    JobRefused,
    /// Too many failed join attempts for a label or from an address; a
    /// right join code is accepted all the same.
    RateLimited,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 29] = [
        ErrorCode::BadJson,
        ErrorCode::BadVersion,
        ErrorCode::UnknownOp,
        ErrorCode::BadRequest,
        ErrorCode::TooLarge,
        ErrorCode::Unauthorized,
        ErrorCode::UnknownPc,
        ErrorCode::UnknownRecipient,
        ErrorCode::RosterUnavailable,
        ErrorCode::DuplicateId,
        ErrorCode::LoopRefused,
        ErrorCode::HopLimit,
        ErrorCode::NotFound,
        ErrorCode::Forbidden,
        ErrorCode::Conflict,
        ErrorCode::Busy,
        ErrorCode::Internal,
        ErrorCode::NotConfigured,
        ErrorCode::LabelTaken,
        ErrorCode::NotEnrolled,
        ErrorCode::Revoked,
        ErrorCode::AdminRequired,
        ErrorCode::JoinCodeInvalid,
        ErrorCode::JoinCodeExpired,
        ErrorCode::JoinCodeUsed,
        ErrorCode::Held,
        ErrorCode::Stale,
        ErrorCode::JobRefused,
        ErrorCode::RateLimited,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadJson => "bad_json",
            ErrorCode::BadVersion => "bad_version",
            ErrorCode::UnknownOp => "unknown_op",
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::UnknownPc => "unknown_pc",
            ErrorCode::UnknownRecipient => "unknown_recipient",
            ErrorCode::RosterUnavailable => "roster_unavailable",
            ErrorCode::DuplicateId => "duplicate_id",
            ErrorCode::LoopRefused => "loop_refused",
            ErrorCode::HopLimit => "hop_limit",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::Conflict => "conflict",
            ErrorCode::Busy => "busy",
            ErrorCode::Internal => "internal",
            ErrorCode::NotConfigured => "not_configured",
            ErrorCode::LabelTaken => "label_taken",
            ErrorCode::NotEnrolled => "not_enrolled",
            ErrorCode::Revoked => "revoked",
            ErrorCode::AdminRequired => "admin_required",
            ErrorCode::JoinCodeInvalid => "join_code_invalid",
            ErrorCode::JoinCodeExpired => "join_code_expired",
            ErrorCode::JoinCodeUsed => "join_code_used",
            ErrorCode::Held => "held",
            ErrorCode::Stale => "stale",
            ErrorCode::JobRefused => "job_refused",
            ErrorCode::RateLimited => "rate_limited",
        }
    }

    pub fn parse(s: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.iter().copied().find(|c| c.as_str() == s)
    }

    /// Transient codes are retried with backoff; the rest are final for that input.
    pub fn is_transient(self) -> bool {
        matches!(self, ErrorCode::RosterUnavailable | ErrorCode::Busy | ErrorCode::Internal)
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A protocol error: a code plus a human message and optional structured extras.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ProtoError {
    pub code: ErrorCode,
    pub message: String,
    /// The offending field for `bad_request`.
    pub field: Option<String>,
    /// Suggestions for `unknown_recipient` (never used to deliver).
    pub candidates: Option<Vec<String>>,
    /// The lease in the way, for `held` and `stale` (its holder, description,
    /// since when, last heartbeat).
    pub lease: Option<Value>,
    /// Why a job was refused (`job_refused`): a word from `core::job::REFUSED_*`.
    pub reason: Option<String>,
    /// `unknown_recipient` for a list of addresses: every address that did
    /// not resolve, each with its own candidates.
    pub unresolved: Option<Vec<Unresolved>>,
}

/// One address of a list that is no exact roster label or name, and what it
/// might have meant (suggestions, never used to deliver).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Unresolved {
    pub to: String,
    pub candidates: Vec<String>,
}

impl ProtoError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ProtoError {
            code,
            message: message.into(),
            field: None,
            candidates: None,
            lease: None,
            reason: None,
            unresolved: None,
        }
    }
    pub fn field(field: &str, message: impl Into<String>) -> Self {
        ProtoError {
            code: ErrorCode::BadRequest,
            message: message.into(),
            field: Some(field.to_string()),
            candidates: None,
            lease: None,
            reason: None,
            unresolved: None,
        }
    }
    pub fn with_lease(mut self, lease: Value) -> Self {
        self.lease = Some(lease);
        self
    }
    pub fn with_reason(mut self, reason: &str) -> Self {
        self.reason = Some(reason.to_string());
        self
    }
    pub fn with_candidates(mut self, c: Vec<String>) -> Self {
        self.candidates = Some(c);
        self
    }
    pub fn with_unresolved(mut self, u: Vec<Unresolved>) -> Self {
        self.unresolved = Some(u);
        self
    }

    /// The wire form: `{"ok":false,"error":{…}}`.
    pub fn to_json(&self) -> Value {
        let mut e = json!({"code": self.code.as_str(), "message": self.message});
        if let Some(f) = &self.field {
            e["field"] = json!(f);
        }
        if let Some(c) = &self.candidates {
            e["candidates"] = json!(c);
        }
        if let Some(l) = &self.lease {
            e["lease"] = l.clone();
        }
        if let Some(r) = &self.reason {
            e["reason"] = json!(r);
        }
        if let Some(u) = &self.unresolved {
            e["unresolved"] = json!(u);
        }
        json!({"ok": false, "error": e})
    }

    /// Reads an error back from a response body (client side).
    pub fn from_json(v: &Value) -> Option<ProtoError> {
        let e = v.get("error")?;
        let code_str = e.get("code")?.as_str()?;
        let code = ErrorCode::parse(code_str)?;
        Some(ProtoError {
            code,
            message: e.get("message").and_then(Value::as_str).unwrap_or("").to_string(),
            field: e.get("field").and_then(Value::as_str).map(str::to_string),
            candidates: e
                .get("candidates")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect()),
            lease: e.get("lease").filter(|l| l.is_object()).cloned(),
            reason: e.get("reason").and_then(Value::as_str).map(str::to_string),
            unresolved: e.get("unresolved").and_then(|u| serde_json::from_value(u.clone()).ok()),
        })
    }
}
