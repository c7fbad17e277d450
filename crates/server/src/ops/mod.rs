//! The ops of docs/protocol.md, and the helpers they share (loading mail,
//! recording a transition with who and when).

pub(crate) mod creds;
pub mod import;
pub(crate) mod job;
pub(crate) mod lease;
mod mark;
mod poll;
mod roster;
mod send;
pub(crate) mod sessions;
mod status;

use crate::engine::{Ctx, OpError, OpResult};
use pcmail_core::protocol::Op;
use pcmail_core::{ErrorCode, Millis, State};
use rusqlite::{params, OptionalExtension, Row};
use serde_json::{json, Map, Value};

pub(crate) fn is_read_only(op: &Op) -> bool {
    matches!(
        op,
        Op::Hello
            | Op::RosterGet
            | Op::Status { .. }
            | Op::Alerts { .. }
            | Op::AuditLog { .. }
            | Op::JobStatus { .. }
            | Op::JobList(_)
            | Op::Who
    )
}

pub(crate) fn dispatch(ctx: &mut Ctx<'_>, op: &Op) -> OpResult<Map<String, Value>> {
    match op {
        Op::Hello => Ok(fields(json!({
            "server": "pcmail-rust",
            "protocol": pcmail_core::PROTOCOL_VERSION,
            "rosterVersion": roster::version(ctx)?,
            "features": pcmail_core::protocol::FEATURES,
            // How this caller got in (`credential`, `token` = an old PC on
            // the shared token, `admin`, `open`): doctor says which.
            "auth": ctx.caller.as_str(),
            "requireCredentials": crate::auth::require_credentials(ctx.tx)?,
        }))),
        Op::RosterGet => roster::get(ctx),
        Op::RosterSet { label, hostname, number, claim, replace } => {
            let claim = match (claim, ctx.cred) {
                (true, Some(cred)) => Some(roster::Claim { cred, replace: *replace }),
                _ => None,
            };
            roster::set(ctx, label, hostname, *number, claim)
        }
        Op::RosterRemove { label } => roster::remove(ctx, label),
        Op::Enrol { label, hostname, code, expires_in } => {
            creds::enrol(ctx, label, hostname.as_deref(), code, *expires_in)
        }
        Op::Join { code, hostname } => creds::join(ctx, code, hostname),
        Op::Revoke { label } => creds::revoke(ctx, label),
        Op::Rotate { new_cred } => {
            require_on_roster(ctx)?;
            creds::rotate(ctx, new_cred)
        }
        Op::RequireCredentials { on } => creds::require_credentials(ctx, *on),
        Op::AuditLog { limit } => creds::log(ctx, *limit),
        Op::Send { mail } => {
            require_on_roster(ctx)?;
            send::send(ctx, mail)
        }
        Op::Poll(args) => {
            require_on_roster(ctx)?;
            poll::poll(ctx, args)
        }
        Op::Mark { marks } => {
            require_on_roster(ctx)?;
            Ok(fields(json!({"results": mark::apply_marks(ctx, marks)?})))
        }
        Op::Status { ids } => {
            require_on_roster(ctx)?;
            status::status(ctx, ids)
        }
        Op::Sweep => crate::sweep::sweep(ctx),
        Op::Alerts { open_only } => crate::sweep::list_alerts(ctx, *open_only),
        Op::LeaseClaim(c) => {
            require_on_roster(ctx)?;
            lease::claim(ctx, c)
        }
        Op::LeaseRelease(r) => {
            require_on_roster(ctx)?;
            lease::release(ctx, r)
        }
        Op::LeaseList(a) => {
            require_on_roster(ctx)?;
            lease::list(ctx, a)
        }
        Op::LeaseCheck { resource, fence } => {
            require_on_roster(ctx)?;
            lease::check(ctx, resource, *fence)
        }
        Op::JobSubmit(a) => {
            require_on_roster(ctx)?;
            job::submit(ctx, a)
        }
        Op::JobStatus { job_id } => {
            require_on_roster(ctx)?;
            job::status(ctx, job_id)
        }
        Op::JobList(a) => {
            require_on_roster(ctx)?;
            job::list(ctx, a)
        }
        Op::JobCancel(a) => {
            require_on_roster(ctx)?;
            job::cancel(ctx, a)
        }
        Op::JobStart(a) => {
            require_on_roster(ctx)?;
            job::start(ctx, a)
        }
        Op::JobReport(a) => {
            require_on_roster(ctx)?;
            job::report(ctx, a)
        }
        Op::NameTake { name, session, live } => {
            require_on_roster(ctx)?;
            sessions::take(ctx, name, session, live.as_deref())
        }
        Op::Who => {
            require_on_roster(ctx)?;
            sessions::who(ctx)
        }
    }
}

pub(crate) fn fields(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// The caller must be on the roster (its credential was checked before the
/// op, `crate::auth`); a roster that cannot be read fails closed.
fn require_on_roster(ctx: &Ctx<'_>) -> OpResult<()> {
    let binding = label_binding(ctx.tx, ctx.pc).map_err(|_| {
        OpError::proto(ErrorCode::RosterUnavailable, "the roster cannot be read; nothing was delivered")
    })?;
    match binding {
        None => Err(OpError::proto(
            ErrorCode::UnknownPc,
            format!("{:?} is not on the roster (register it with roster.set)", ctx.pc),
        )),
        Some(_) => Ok(()),
    }
}

/// `None`: the label is not on the roster; `Some(None)`: on it, not bound;
/// `Some(Some(hash))`: bound to the credential with that SHA-256 hex.
pub(crate) fn label_binding(tx: &rusqlite::Transaction<'_>, label: &str) -> rusqlite::Result<Option<Option<String>>> {
    tx.prepare_cached("SELECT cred_hash FROM pc WHERE label = ?1")?.query_row([label], |r| r.get(0)).optional()
}

/// An unbound label accepts anyone (old clients; the next claim binds it);
/// a bound one only its credential, compared in constant time.
pub(crate) fn cred_matches(bound_hash: Option<&str>, cred: Option<&str>) -> bool {
    use subtle::ConstantTimeEq;
    match (bound_hash, cred) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(h), Some(c)) => bool::from(pcmail_core::protocol::credential_hash(c).as_bytes().ct_eq(h.as_bytes())),
    }
}

pub(crate) fn label_taken(label: &str) -> OpError {
    OpError::proto(
        ErrorCode::LabelTaken,
        format!("label {label:?} belongs to another installation: pick another label, or replace it"),
    )
}

/// A stored mail, all columns.
#[derive(Debug, Clone)]
pub(crate) struct StoredMail {
    pub id: String,
    pub sender: String,
    pub recipient: String,
    pub kind: String,
    pub subject: String,
    pub body: String,
    pub urgent: bool,
    pub expires_at: Option<Millis>,
    pub in_reply_to: Option<String>,
    pub auto: bool,
    pub hop: i64,
    pub created_at: Millis,
    pub state: State,
    pub broadcast_of: Option<String>,
    pub last_at: Millis,
    /// The duration the sender asked for (None for `expiresAt` or no expiry).
    pub expires_in: Option<Millis>,
}

pub(crate) const MAIL_COLUMNS: &str = "id, sender, recipient, kind, subject, body, urgent, expires_at, \
     in_reply_to, auto, hop, created_at, state, broadcast_of, last_at, expires_in";

impl StoredMail {
    pub(crate) fn from_row(r: &Row<'_>) -> rusqlite::Result<StoredMail> {
        let state: String = r.get(12)?;
        Ok(StoredMail {
            id: r.get(0)?,
            sender: r.get(1)?,
            recipient: r.get(2)?,
            kind: r.get(3)?,
            subject: r.get(4)?,
            body: r.get(5)?,
            urgent: r.get(6)?,
            expires_at: r.get(7)?,
            in_reply_to: r.get(8)?,
            auto: r.get(9)?,
            hop: r.get(10)?,
            created_at: r.get(11)?,
            state: State::parse(&state).ok_or_else(|| {
                rusqlite::Error::FromSqlConversionFailure(
                    12,
                    rusqlite::types::Type::Text,
                    format!("bad state {state:?}").into(),
                )
            })?,
            broadcast_of: r.get(13)?,
            last_at: r.get(14)?,
            expires_in: r.get(15)?,
        })
    }

    /// The wire form; `timeline` as given.
    pub(crate) fn to_json(&self, timeline: Vec<Value>) -> Value {
        json!({
            "id": self.id, "from": self.sender, "to": self.recipient, "kind": self.kind,
            "subject": self.subject, "body": self.body, "urgent": self.urgent,
            "expiresAt": self.expires_at, "inReplyTo": self.in_reply_to, "auto": self.auto,
            "hop": self.hop, "createdAt": self.created_at, "state": self.state.as_str(),
            "broadcastOf": self.broadcast_of, "timeline": timeline,
        })
    }
}

pub(crate) fn load_mail(ctx: &Ctx<'_>, id: &str) -> OpResult<Option<StoredMail>> {
    let sql = format!("SELECT {MAIL_COLUMNS} FROM mail WHERE id = ?1");
    Ok(ctx.tx.prepare_cached(&sql)?.query_row([id], StoredMail::from_row).optional()?)
}

pub(crate) fn timeline(ctx: &Ctx<'_>, id: &str) -> OpResult<Vec<Value>> {
    let mut stmt = ctx.tx.prepare_cached("SELECT state, at, by, note FROM event WHERE mail_id = ?1 ORDER BY seq")?;
    let rows = stmt.query_map([id], |r| {
        Ok(json!({
            "state": r.get::<_, String>(0)?, "at": r.get::<_, i64>(1)?,
            "by": r.get::<_, String>(2)?, "note": r.get::<_, Option<String>>(3)?,
        }))
    })?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// Moves `mail` toward `target` if that is forward (the one state machine);
/// records who and when. `at` is clamped to not before the previous entry.
/// Returns the state after and whether it changed.
pub(crate) fn transition(
    ctx: &mut Ctx<'_>,
    mail: &StoredMail,
    target: State,
    at: Millis,
    by: &str,
    note: Option<&str>,
) -> OpResult<(State, bool)> {
    let Some(next) = mail.state.advance(target) else {
        return Ok((mail.state, false));
    };
    let at = at.max(mail.last_at);
    ctx.tx
        .prepare_cached(
            "UPDATE mail SET state = ?2, last_at = ?3, \
             delivered_at = CASE WHEN ?2 = 'delivered' THEN ?3 ELSE delivered_at END WHERE id = ?1",
        )?
        .execute(params![mail.id, next.as_str(), at])?;
    record_event(ctx, &mail.id, &mail.sender, next, at, by, note)?;
    ctx.touched.push(mail.sender.clone());
    // The recipient's long poll wakes too: its received-updates feed has news
    // (a server-side expiry, a mark made through another connection). For mail
    // to a name, the recipient is the PC it was delivered to.
    let feed_pc = received_feed_pc(ctx, &mail.id)?.unwrap_or_else(|| mail.recipient.clone());
    ctx.touched.push(feed_pc);
    Ok((next, true))
}

/// The PC whose received-updates feed hears of `mail_id`: the PC a mail to a
/// name was delivered to (None for mail to a label, or not delivered yet).
pub(crate) fn received_feed_pc(ctx: &Ctx<'_>, mail_id: &str) -> OpResult<Option<String>> {
    Ok(ctx
        .tx
        .prepare_cached("SELECT name_pc FROM mail WHERE id = ?1")?
        .query_row([mail_id], |r| r.get::<_, Option<String>>(0))
        .optional()?
        .flatten())
}

pub(crate) fn record_event(
    ctx: &Ctx<'_>,
    mail_id: &str,
    sender: &str,
    state: State,
    at: Millis,
    by: &str,
    note: Option<&str>,
) -> OpResult<()> {
    record_event_for(ctx, mail_id, sender, state, at, by, note, None)
}

/// `record_event` with the received feed's PC given (`None`: the mail row's:
/// its label, or for mail to a name the PC it was delivered to; the mail row
/// is always written first). The received-updates feed reads that column.
#[allow(clippy::too_many_arguments)]
pub(crate) fn record_event_for(
    ctx: &Ctx<'_>,
    mail_id: &str,
    sender: &str,
    state: State,
    at: Millis,
    by: &str,
    note: Option<&str>,
    feed_pc: Option<&str>,
) -> OpResult<()> {
    ctx.tx
        .prepare_cached(
            "INSERT INTO event (mail_id, sender, state, at, by, note, recipient) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, COALESCE(?7, (SELECT COALESCE(name_pc, recipient) FROM mail WHERE id = ?1)))",
        )?
        .execute(params![mail_id, sender, state.as_str(), at, by, note, feed_pc])?;
    Ok(())
}

pub(crate) fn roster_version(ctx: &Ctx<'_>) -> OpResult<i64> {
    roster::version(ctx)
}
