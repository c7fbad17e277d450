//! One answer type per op: the Rust server serialises it, the client decodes
//! it, so a renamed field fails to compile on both sides. Each carries the
//! op's fields; the envelope's `ok` and `now` travel beside them (`Answer`
//! types ignore them when decoding).
//!
//! Decoding is as lenient as the client has always been with older servers
//! and the Apps Script one: a field a server may not send has a default, and
//! a list whose items are each a PC's own business (the mail of a poll) is
//! decoded item by item ([`Lenient`]), so one malformed item never fails the
//! answer. The lease, job and session answers live beside their rules (in
//! `lease`, `job`, `sessions`); the [`Answer`] impls here tie each to its ops.

use crate::job;
use crate::lease;
use crate::model::{Alert, Mail, MarkResult, Millis, Pc, ReceivedUpdate, Update};
use crate::op_table::OpKind;
use crate::sessions;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// An op's answer type, and the ops it answers.
pub trait Answer: Serialize + DeserializeOwned {
    const OPS: &'static [OpKind];
}

/// An item decoded on its own: the value, or what arrived and why it is not one.
#[derive(Debug, Clone, PartialEq)]
pub enum Lenient<T> {
    Ok(T),
    Bad { raw: Value, error: String },
}

impl<T> Lenient<T> {
    pub fn ok(self) -> Option<T> {
        match self {
            Lenient::Ok(t) => Some(t),
            Lenient::Bad { .. } => None,
        }
    }

    pub fn as_ok(&self) -> Option<&T> {
        match self {
            Lenient::Ok(t) => Some(t),
            Lenient::Bad { .. } => None,
        }
    }
}

impl<T: Default> Default for Lenient<T> {
    fn default() -> Self {
        Lenient::Ok(T::default())
    }
}

impl<T: Serialize> Serialize for Lenient<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Lenient::Ok(t) => t.serialize(s),
            Lenient::Bad { raw, .. } => raw.serialize(s),
        }
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Value::deserialize(d)?;
        Ok(match serde_json::from_value::<T>(raw.clone()) {
            Ok(t) => Lenient::Ok(t),
            Err(e) => Lenient::Bad { raw, error: e.to_string() },
        })
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// `hello`. Older servers send fewer fields: each has a default.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HelloAnswer {
    /// `pcmail-rust`, `pcmail-gas`.
    pub server: String,
    pub protocol: i64,
    pub roster_version: i64,
    /// Absent on servers older than the features list: they speak mail only.
    pub features: Option<Vec<String>>,
    /// How this caller got in: `credential`, `token` (an old PC on the shared
    /// token), `admin`, `open`.
    pub auth: Option<String>,
    pub require_credentials: bool,
    /// Added by `pcmail serve` (the engine does not know them): the SHA-256
    /// of its TLS certificate, or that it serves plain HTTP beyond loopback.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_fingerprint: Option<String>,
    #[serde(skip_serializing_if = "is_false")]
    pub insecure_http: bool,
}

/// `roster.get`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RosterAnswer {
    pub pcs: Vec<Pc>,
    #[serde(default)]
    pub version: i64,
}

/// `roster.set`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RosterSetAnswer {
    pub pc: Pc,
    pub changed: bool,
    pub version: i64,
    /// With `claim`: the label is bound to this installation's credential.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<bool>,
}

/// `roster.remove`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RosterRemoveAnswer {
    pub removed: bool,
    pub version: i64,
}

/// `send`: the ids stored (a broadcast's copies, or one copy per address of
/// a list, in its order), and whether the server already had this exact mail
/// (a retry).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendAnswer {
    pub ids: Vec<String>,
    #[serde(default)]
    pub existing: bool,
}

/// `poll`. Its parts are decoded each on its own (a malformed lease part
/// never keeps a PC's mail from being stored), as is each mail.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PollAnswer {
    /// Mail still new for the caller, oldest first.
    #[serde(default)]
    pub mail: Vec<Lenient<Mail>>,
    #[serde(default)]
    pub confirmed: Vec<String>,
    /// The marks' results; None from a server that ignores marks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marks: Option<Lenient<Vec<MarkResult>>>,
    #[serde(default)]
    pub updates: Lenient<Vec<Update>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<i64>,
    /// The server pruned updates the caller had not read (Apps Script).
    #[serde(default, skip_serializing_if = "is_false")]
    pub cursor_reset: bool,
    #[serde(default)]
    pub more: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roster_version: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lenient<lease::PollLeaseAnswer>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<Lenient<job::PollJobAnswer>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Lenient<sessions::PollSessionsAnswer>>,
    /// Only when the caller asked (`receivedSince`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_updates: Option<Lenient<Vec<ReceivedUpdate>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_cursor: Option<i64>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub received_cursor_reset: bool,
}

/// `mark`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MarkAnswer {
    #[serde(default)]
    pub results: Vec<MarkResult>,
}

/// A mail as `status` answers it: with, for mail to a name nobody live
/// holds, why it waits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusMail {
    #[serde(flatten)]
    pub mail: Mail,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
}

/// `status`: the mails found (a broadcast original as its copies) and the
/// ids not found (or not the caller's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusAnswer {
    pub mails: Vec<StatusMail>,
    #[serde(default)]
    pub missing: Vec<String>,
}

/// What the sweep did (the Rust server's counts).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SweepAnswer {
    pub expired: i64,
    pub alerts: SweptAlerts,
    pub leases: SweptLeases,
    pub jobs: SweptJobs,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SweptAlerts {
    pub opened: i64,
    pub updated: i64,
    pub resolved: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SweptLeases {
    pub stale: usize,
    pub expired: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SweptJobs {
    pub timed_out: i64,
    pub cancelled: i64,
}

/// `alerts`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AlertsAnswer {
    #[serde(default)]
    pub alerts: Vec<Alert>,
}

/// `roster.enrol`: when the join code expires; `existing` for a retry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnrolAnswer {
    pub label: String,
    pub expires_at: Millis,
    #[serde(default)]
    pub existing: bool,
    /// The SHA-256 of the server's TLS certificate, which `pcmail serve` on
    /// TLS adds (the engine does not know it): the join code carries it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_fingerprint: Option<String>,
}

/// `join`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinAnswer {
    pub label: String,
    pub bound: bool,
    #[serde(default)]
    pub existing: bool,
    pub version: i64,
}

/// `roster.revoke`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RevokeAnswer {
    pub revoked: bool,
    pub changed: bool,
    #[serde(default)]
    pub jobs_cancelled: usize,
}

/// `rotate`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RotateAnswer {
    pub rotated: bool,
    pub changed: bool,
}

/// `roster.requireCredentials`: the switch, and the labels still without a credential.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequireCredentialsAnswer {
    pub require_credentials: bool,
    pub changed: bool,
    #[serde(default)]
    pub unbound: Vec<String>,
}

/// One admin action in the audit log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub seq: i64,
    pub at: Millis,
    pub by: String,
    pub action: String,
    pub label: String,
    pub detail: Option<String>,
}

/// `roster.log`, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditLogAnswer {
    pub entries: Vec<AuditEntry>,
}

macro_rules! answers {
    ($($ty:ty => [$($kind:ident),+]),* $(,)?) => {
        $(impl Answer for $ty { const OPS: &'static [OpKind] = &[$(OpKind::$kind),+]; })*
        /// Every answer type's ops, for the test that each op has exactly one.
        #[cfg(test)]
        const ALL_ANSWERS: &[&[OpKind]] = &[$(<$ty as Answer>::OPS),*];
    };
}

answers! {
    HelloAnswer => [Hello],
    RosterAnswer => [RosterGet],
    RosterSetAnswer => [RosterSet],
    RosterRemoveAnswer => [RosterRemove],
    SendAnswer => [Send],
    PollAnswer => [Poll],
    MarkAnswer => [Mark],
    StatusAnswer => [Status],
    SweepAnswer => [Sweep],
    AlertsAnswer => [Alerts],
    EnrolAnswer => [Enrol],
    JoinAnswer => [Join],
    RevokeAnswer => [Revoke],
    RotateAnswer => [Rotate],
    RequireCredentialsAnswer => [RequireCredentials],
    AuditLogAnswer => [AuditLog],
    lease::ClaimAnswer => [LeaseClaim],
    lease::ReleaseAnswer => [LeaseRelease],
    lease::ListAnswer => [LeaseList],
    lease::CheckAnswer => [LeaseCheck],
    job::SubmitAnswer => [JobSubmit],
    job::JobAnswer => [JobStatus, JobCancel, JobStart, JobReport],
    job::ListAnswer => [JobList],
    sessions::TakeAnswer => [NameTake],
    sessions::WhoAnswer => [Who],
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_op_has_exactly_one_answer_type() {
        for k in OpKind::ALL {
            let n = ALL_ANSWERS.iter().filter(|ops| ops.contains(k)).count();
            assert_eq!(n, 1, "{} is answered by {n} types", k.name());
        }
    }

    #[test]
    fn one_malformed_mail_does_not_fail_the_poll() {
        let good =
            json!({"id": "mail-1-0000abcd", "from": "a", "to": "b", "body": "x", "createdAt": 1, "state": "new"});
        let a: PollAnswer =
            serde_json::from_value(json!({"mail": [good, {"id": 7}], "cursor": 3, "lease": {"renewed": "x"}})).unwrap();
        assert!(matches!(&a.mail[0], Lenient::Ok(m) if m.id == "mail-1-0000abcd"));
        assert!(matches!(&a.mail[1], Lenient::Bad { raw, .. } if raw == &json!({"id": 7})));
        assert!(a.lease.as_ref().is_some_and(|l| l.as_ok().is_none()), "a malformed part is kept apart");
        assert_eq!(a.cursor, Some(3));
        // What a Rust server leaves out stays out when it is written again.
        let back = serde_json::to_value(PollAnswer { mail: a.mail, ..PollAnswer::default() }).unwrap();
        assert!(
            back.get("lease").is_none() && back.get("receivedCursor").is_none() && back.get("cursorReset").is_none()
        );
        assert_eq!(back["mail"][1], json!({"id": 7}));
    }
}
