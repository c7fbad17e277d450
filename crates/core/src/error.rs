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
    /// The credential is not one the server knows: enrol with a join code.
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
    /// A job the target will not run: `error.reason` says why
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

/// One item of a batch refused on its own (a session of a poll's `sessions`,
/// a job run or report, a lease renewal or release): the others were applied
/// and the request went on. Which list and index, and the refusal's code,
/// field and message. `T` is what else names the item on the wire, between
/// `index` and `code`: a lease's resource and fence ([`crate::lease::LeaseRef`]);
/// nothing ([`NoItemRef`]) for sessions and jobs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemError<T = NoItemRef> {
    /// Which list of the request: `live`, `running`, `reports`, `renew`, `release`.
    pub list: String,
    pub index: usize,
    #[serde(flatten)]
    pub item: T,
    pub code: String,
    #[serde(default)]
    pub field: Option<String>,
    pub message: String,
}

/// An [`ItemError`] with nothing but its list and index to name the item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NoItemRef {}

impl<T> ItemError<T> {
    /// The entry for item `index` of `list`, refused with `error`.
    pub fn new(list: &str, index: usize, item: T, error: &ProtoError) -> Self {
        ItemError {
            list: list.to_string(),
            index,
            item,
            code: error.code.as_str().to_string(),
            field: error.field.clone(),
            message: error.message.clone(),
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::LeaseRef;

    /// The wire shape both servers answer, key for key and in this order: a
    /// session's or a job's item error has no reference, a lease's has its
    /// resource and fence between `index` and `code` (`null` when unknown).
    #[test]
    fn item_errors_keep_their_wire_shape() {
        let e = ProtoError::field("live.session", "bad session");
        let plain = ItemError::new("live", 2, NoItemRef {}, &e);
        let text = serde_json::to_string(&plain).unwrap();
        assert_eq!(
            text,
            r#"{"list":"live","index":2,"code":"bad_request","field":"live.session","message":"bad session"}"#
        );
        assert_eq!(serde_json::from_str::<ItemError>(&text).unwrap(), plain);
        let no_field = ItemError::new("reports", 0, NoItemRef {}, &ProtoError::new(ErrorCode::NotFound, "gone"));
        assert_eq!(
            serde_json::to_string(&no_field).unwrap(),
            r#"{"list":"reports","index":0,"code":"not_found","field":null,"message":"gone"}"#
        );
        let missing_field: ItemError =
            serde_json::from_str(r#"{"list":"reports","index":0,"code":"not_found","message":"gone"}"#).unwrap();
        assert_eq!(missing_field, no_field);

        let lease = ItemError::new("release", 1, LeaseRef { resource: Some("api".into()), fence: Some(7) }, &e);
        let text = serde_json::to_string(&lease).unwrap();
        assert_eq!(
            text,
            r#"{"list":"release","index":1,"resource":"api","fence":7,"code":"bad_request","field":"live.session","message":"bad session"}"#
        );
        assert_eq!(serde_json::from_str::<ItemError<LeaseRef>>(&text).unwrap(), lease);
        let unknown = ItemError::new("renew", 0, LeaseRef::default(), &e);
        let text = serde_json::to_string(&unknown).unwrap();
        assert_eq!(
            text,
            r#"{"list":"renew","index":0,"resource":null,"fence":null,"code":"bad_request","field":"live.session","message":"bad session"}"#
        );
        assert_eq!(serde_json::from_str::<ItemError<LeaseRef>>(&text).unwrap(), unknown);
    }
}
