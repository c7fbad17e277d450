//! The mail model as it travels on the wire (camelCase JSON, see docs/protocol.md).

use crate::state::State;
use serde::{Deserialize, Serialize};

/// Unix epoch milliseconds. Time is always a value passed in, never read here.
pub type Millis = i64;

/// The protocol version every request carries (`"v"`).
pub const PROTOCOL_VERSION: i64 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    #[default]
    Note,
    /// `[作業依頼]` a work request.
    Request,
    /// `[判断依頼]` a decision request.
    Decision,
}

pub const DECISION_TAG: &str = "[判断依頼]";
pub const REQUEST_TAG: &str = "[作業依頼]";

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Note => "note",
            Kind::Request => "request",
            Kind::Decision => "decision",
        }
    }
    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "note" => Some(Kind::Note),
            "request" => Some(Kind::Request),
            "decision" => Some(Kind::Decision),
            _ => None,
        }
    }
    /// The Japanese subject tag for this kind (`[判断依頼]`, `[作業依頼]`).
    pub fn subject_tag(self) -> Option<&'static str> {
        match self {
            Kind::Decision => Some(DECISION_TAG),
            Kind::Request => Some(REQUEST_TAG),
            Kind::Note => None,
        }
    }
    /// The subject a PC that asks for tags (`subject_tags = "ja"`) sends:
    /// the kind's tag in front, unless the subject has it already.
    pub fn tagged_subject(self, subject: &str) -> String {
        match self.subject_tag() {
            Some(tag) if !subject.contains(tag) => format!("{tag} {subject}").trim_end().to_string(),
            _ => subject.to_string(),
        }
    }
    /// The kind a receiving PC acts on: the field, or the Japanese subject tags
    /// (mail from older senders only carries the tag).
    pub fn classify(kind: Kind, subject: &str) -> Kind {
        if kind == Kind::Decision || subject.contains(DECISION_TAG) {
            Kind::Decision
        } else if kind == Kind::Request || subject.contains(REQUEST_TAG) {
            Kind::Request
        } else {
            Kind::Note
        }
    }
}

/// A roster entry: working number ⇔ label ⇔ hostname.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pc {
    pub number: i64,
    pub label: String,
    pub hostname: String,
}

/// A mail as the client sends it (`send` args.mail).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutgoingMail {
    pub id: String,
    pub to: To,
    #[serde(default)]
    pub kind: Kind,
    #[serde(default)]
    pub subject: String,
    pub body: String,
    #[serde(default)]
    pub urgent: bool,
    /// An absolute expiry (older clients). New clients send `expires_in`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Millis>,
    /// Expiry as a duration from the server's receipt: the server clock is
    /// the truth, so a sender whose clock is off cannot expire mail early.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in: Option<Millis>,
    #[serde(default)]
    pub in_reply_to: Option<String>,
    #[serde(default)]
    pub auto: bool,
    #[serde(default)]
    pub hop: i64,
}

/// Whom a mail is for, as its sender wrote it: one address (a roster label,
/// a session's name, or `*` for every other PC), or a list of at least two
/// exact addresses (feature `multi-recipient`), each of which gets a copy of
/// its own with its own state and timeline. On the wire one address is a
/// string and a list an array, so a server that predates lists refuses the
/// array (`bad_request`) instead of delivering to one of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum To {
    One(String),
    Many(Vec<String>),
}

impl To {
    /// Every address, in the sender's order (`*` stays `*`).
    pub fn addresses(&self) -> &[String] {
        match self {
            To::One(a) => std::slice::from_ref(a),
            To::Many(list) => list,
        }
    }
    /// The one address, when it is not a list.
    pub fn single(&self) -> Option<&str> {
        match self {
            To::One(a) => Some(a),
            To::Many(_) => None,
        }
    }
    pub fn is_broadcast(&self) -> bool {
        self.single() == Some("*")
    }
    pub fn is_list(&self) -> bool {
        matches!(self, To::Many(_))
    }
    /// The form a retry is compared by (and a store keeps): the address, or
    /// the list as a JSON array in the sender's order.
    pub fn key(&self) -> String {
        match self {
            To::One(a) => a.clone(),
            To::Many(list) => serde_json::to_string(list).unwrap_or_default(),
        }
    }
    /// For people: `pc-b` or `pc-b, pc-c`.
    pub fn display(&self) -> String {
        self.addresses().join(", ")
    }
}

impl From<&str> for To {
    fn from(a: &str) -> To {
        To::One(a.to_string())
    }
}

impl From<String> for To {
    fn from(a: String) -> To {
        To::One(a)
    }
}

impl PartialEq<&str> for To {
    fn eq(&self, other: &&str) -> bool {
        self.single() == Some(*other)
    }
}

/// One step of a mail's timeline: who moved it to which state, when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineEntry {
    pub state: State,
    pub at: Millis,
    pub by: String,
    #[serde(default)]
    pub note: Option<String>,
}

/// A mail as the server returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Mail {
    pub id: String,
    pub from: String,
    pub to: String,
    #[serde(default)]
    pub kind: Kind,
    #[serde(default)]
    pub subject: String,
    pub body: String,
    #[serde(default)]
    pub urgent: bool,
    #[serde(default)]
    pub expires_at: Option<Millis>,
    #[serde(default)]
    pub in_reply_to: Option<String>,
    #[serde(default)]
    pub auto: bool,
    #[serde(default)]
    pub hop: i64,
    pub created_at: Millis,
    pub state: State,
    #[serde(default)]
    pub broadcast_of: Option<String>,
    /// Every address of a mail sent to several (feature `multi-recipient`),
    /// in the sender's order, on each copy: who else got it (`reply --all`).
    /// None for mail to one address or to `*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipients: Option<Vec<String>>,
    #[serde(default)]
    pub timeline: Vec<TimelineEntry>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MarkOp {
    Seen,
    Ack,
    Fail,
}

impl MarkOp {
    pub fn as_str(self) -> &'static str {
        match self {
            MarkOp::Seen => "seen",
            MarkOp::Ack => "ack",
            MarkOp::Fail => "fail",
        }
    }
    pub fn parse(s: &str) -> Option<MarkOp> {
        match s {
            "seen" => Some(MarkOp::Seen),
            "ack" => Some(MarkOp::Ack),
            "fail" => Some(MarkOp::Fail),
            _ => None,
        }
    }
    pub fn target(self) -> State {
        match self {
            MarkOp::Seen => State::Seen,
            MarkOp::Ack => State::Done,
            MarkOp::Fail => State::Failed,
        }
    }
}

/// A recipient's mark on a mail, idempotent by `markId`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Mark {
    pub mark_id: String,
    pub id: String,
    pub op: MarkOp,
    pub at: Millis,
    pub by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MarkResult {
    /// The mark's position in the request (servers with `mark-results`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    /// Null when the server could not read it from a malformed mark.
    #[serde(default)]
    pub mark_id: Option<String>,
    #[serde(default)]
    pub id: Option<String>,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<State>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The field a refused mark was refused for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A state change of mail the caller received (`poll.receivedUpdates`,
/// feature `received-updates`): the timeline entry as the server recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceivedUpdate {
    pub seq: i64,
    pub id: String,
    pub state: State,
    pub at: Millis,
    pub by: String,
    #[serde(default)]
    pub note: Option<String>,
}

/// A state change of mail the caller sent (the `poll` updates feed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Update {
    pub seq: i64,
    pub id: String,
    pub state: State,
    pub at: Millis,
    pub by: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    Unseen,
    Undelivered,
    StalePc,
    /// Apps Script: the time trigger runs other code than the deployed web app.
    StaleDeploy,
    /// A lease stale for over an hour (subject: the resource; pc: the holder's).
    StaleLease,
    /// A kind this build does not know (a newer server): still listed.
    #[serde(other)]
    Other,
}

impl AlertKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AlertKind::Unseen => "unseen",
            AlertKind::Undelivered => "undelivered",
            AlertKind::StalePc => "stale_pc",
            AlertKind::StaleDeploy => "stale_deploy",
            AlertKind::StaleLease => "stale_lease",
            AlertKind::Other => "other",
        }
    }
    pub fn parse(s: &str) -> Option<AlertKind> {
        match s {
            "unseen" => Some(AlertKind::Unseen),
            "undelivered" => Some(AlertKind::Undelivered),
            "stale_pc" => Some(AlertKind::StalePc),
            "stale_deploy" => Some(AlertKind::StaleDeploy),
            "stale_lease" => Some(AlertKind::StaleLease),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Alert {
    pub key: String,
    pub kind: AlertKind,
    pub subject: String,
    pub pc: String,
    pub message: String,
    pub opened_at: Millis,
    pub updated_at: Millis,
    pub resolved_at: Option<Millis>,
    pub count: i64,
    pub posted: bool,
    /// Webhook posts tried so far, and the last one's error (the alert stays
    /// listed whatever the webhook does).
    #[serde(default)]
    pub post_tries: i64,
    #[serde(default)]
    pub last_error: Option<String>,
}

/// Limits shared by both servers and the CLI (docs/protocol.md).
pub mod limits {
    pub const SUBJECT_MAX_CHARS: usize = 200;
    pub const BODY_MAX_CHARS: usize = 20_000;
    pub const HOP_LIMIT: i64 = 3;
    pub const POLL_LIMIT_DEFAULT: usize = 100;
    pub const POLL_LIMIT_MAX: usize = 500;
    pub const UPDATES_MAX: usize = 200;
    pub const STATUS_IDS_MAX: usize = 200;
    pub const MARKS_MAX: usize = 500;
    pub const WAIT_MS_MAX: i64 = 25_000;
    pub const MIN: i64 = 60_000;
    pub const UNSEEN_URGENT_MS: i64 = 2 * 60 * MIN;
    pub const UNSEEN_MS: i64 = 6 * 60 * MIN;
    pub const UNDELIVERED_MS: i64 = 30 * MIN;
    pub const STALE_PC_MS: i64 = 10 * MIN;
    /// A poll records its time on the server only when the recorded one is
    /// at least this old, so a caught-up poll writes nothing; a PC counts as
    /// silent only once its recorded poll is older than the window plus this
    /// step (`due::pc_silent`), so the lag never makes a polling PC look silent.
    pub const POLL_RECORD_STEP_MS: i64 = 10_000;
    /// A session's prompt records its time in the PC's store only when the
    /// recorded one is at least this old, so a caught-up prompt writes
    /// nothing (the hook then takes no write lock and adds nothing to the
    /// log); the idle time `pcmail who` shows may lag by up to this step.
    pub const PROMPT_RECORD_STEP_MS: i64 = 10_000;
    pub const SWEEP_EVERY_MS: i64 = 10 * MIN;
    /// Longest `expiresIn` a mail may ask for (a year).
    pub const EXPIRES_IN_MAX_MS: i64 = 366 * 24 * 60 * MIN;
    /// Largest request body a server reads (bytes).
    pub const BODY_BYTES_MAX: usize = 256 * 1024;
    /// A join code lives 24 hours unless the admin says otherwise…
    pub const JOIN_CODE_DEFAULT_MS: i64 = 24 * 60 * MIN;
    /// …and at most 30 days.
    pub const JOIN_CODE_MAX_MS: i64 = 30 * 24 * 60 * MIN;
    /// Most addresses one mail may list (feature `multi-recipient`).
    pub const RECIPIENTS_MAX: usize = 20;
}
