//! Mail rows: loading one, its timeline, and the one state-machine step
//! (`transition`) every op that moves a mail goes through.

use crate::ctx::{Ctx, OpResult};
use crate::store::p;
use crate::store::{Optional, Row};
use pcmail_core::op_table::News;
use pcmail_core::{Kind, Mail, Millis, State, TimelineEntry};

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
    /// A copy of mail to several addresses: every address, as a JSON array.
    pub recipients: Option<String>,
}

pub(crate) const MAIL_COLUMNS: &str = "id, sender, recipient, kind, subject, body, urgent, expires_at, \
     in_reply_to, auto, hop, created_at, state, broadcast_of, last_at, expires_in, recipients";

/// A state column; anything else is a storage error (never a wrong answer).
pub(crate) fn parse_state(i: usize, s: &str) -> crate::store::DbResult<State> {
    State::parse(s).ok_or_else(|| crate::store::DbError::Decode { col: i, what: format!("bad state {s:?}") })
}

pub(crate) fn state_column(r: &Row<'_>, i: usize) -> crate::store::DbResult<State> {
    parse_state(i, &r.get::<_, String>(i)?)
}

impl StoredMail {
    pub(crate) fn from_row(r: &Row<'_>) -> crate::store::DbResult<StoredMail> {
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
            state: parse_state(12, &state)?,
            broadcast_of: r.get(13)?,
            last_at: r.get(14)?,
            expires_in: r.get(15)?,
            recipients: r.get(16)?,
        })
    }

    /// The wire form; `timeline` as given. (`send` stores only the kinds it
    /// parsed, so every stored kind is one of them.)
    pub(crate) fn to_mail(&self, timeline: Vec<TimelineEntry>) -> Mail {
        Mail {
            id: self.id.clone(),
            from: self.sender.clone(),
            to: self.recipient.clone(),
            kind: Kind::parse(&self.kind).unwrap_or_default(),
            subject: self.subject.clone(),
            body: self.body.clone(),
            urgent: self.urgent,
            expires_at: self.expires_at,
            in_reply_to: self.in_reply_to.clone(),
            auto: self.auto,
            hop: self.hop,
            created_at: self.created_at,
            state: self.state,
            broadcast_of: self.broadcast_of.clone(),
            recipients: self.recipients.as_deref().and_then(|r| serde_json::from_str(r).ok()),
            timeline,
        }
    }
}

pub(crate) fn load_mail(ctx: &Ctx<'_>, id: &str) -> OpResult<Option<StoredMail>> {
    let sql = format!("SELECT {MAIL_COLUMNS} FROM mail WHERE id = ?1");
    Ok(ctx.tx.prepare_cached(&sql)?.query_row(p![id], StoredMail::from_row).optional()?)
}

pub(crate) fn timeline(ctx: &Ctx<'_>, id: &str) -> OpResult<Vec<TimelineEntry>> {
    let mut stmt = ctx.tx.prepare_cached("SELECT state, at, by, note FROM event WHERE mail_id = ?1 ORDER BY seq")?;
    let rows = stmt.query_map(p![id], |r| {
        Ok(TimelineEntry { state: state_column(r, 0)?, at: r.get(1)?, by: r.get(2)?, note: r.get(3)? })
    })?;
    Ok(rows.collect::<crate::store::DbResult<Vec<_>>>()?)
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
        .execute(p![mail.id, next.as_str(), at])?;
    record_event(ctx, &MailEvent::new(&mail.id, &mail.sender, next, at, by).note(note))?;
    ctx.wake(News::Mail, mail.sender.clone());
    // The recipient's long poll wakes too: its received-updates feed has news
    // (a server-side expiry, the sender's cancel). For mail to a name, the
    // recipient is the PC it was delivered to.
    let feed_pc = received_feed_pc(ctx, &mail.id)?.unwrap_or_else(|| mail.recipient.clone());
    if !own_news(ctx, &feed_pc, by) {
        ctx.wake(News::Mail, feed_pc);
    }
    Ok((next, true))
}

/// A change the recipient made itself (its confirm, its marks, its reply)
/// is no news to its own long poll: its store recorded it before the
/// request went out, and the feed's entry comes with its next answer.
/// Waking it would cost the PC a whole poll cycle for every mail it reads.
/// What the server does on its own (`server`) is news to every PC.
fn own_news(ctx: &Ctx<'_>, feed_pc: &str, by: &str) -> bool {
    feed_pc == ctx.pc && by != pcmail_core::due::SERVER_ACTOR
}

/// The PC whose received-updates feed hears of `mail_id`: the PC a mail to a
/// name was delivered to (None for mail to a label, or not delivered yet).
pub(crate) fn received_feed_pc(ctx: &Ctx<'_>, mail_id: &str) -> OpResult<Option<String>> {
    Ok(ctx
        .tx
        .prepare_cached("SELECT name_pc FROM mail WHERE id = ?1")?
        .query_row(p![mail_id], |r| r.get::<_, Option<String>>(0))
        .optional()?
        .flatten())
}

/// One entry of a mail's timeline.
pub(crate) struct MailEvent<'a> {
    pub mail_id: &'a str,
    pub sender: &'a str,
    pub state: State,
    pub at: Millis,
    pub by: &'a str,
    pub note: Option<&'a str>,
    /// The PC whose received-updates feed hears of it; None: the mail row's
    /// (its label, or for mail to a name the PC it was delivered to; the mail
    /// row is always written first).
    pub feed_pc: Option<&'a str>,
}

impl<'a> MailEvent<'a> {
    /// An entry the mail row's own recipient hears of.
    pub(crate) fn new(mail_id: &'a str, sender: &'a str, state: State, at: Millis, by: &'a str) -> MailEvent<'a> {
        MailEvent { mail_id, sender, state, at, by, note: None, feed_pc: None }
    }

    pub(crate) fn note(self, note: Option<&'a str>) -> MailEvent<'a> {
        MailEvent { note, ..self }
    }
}

/// Writes a timeline entry; the received-updates feed reads its recipient column.
pub(crate) fn record_event(ctx: &Ctx<'_>, e: &MailEvent<'_>) -> OpResult<()> {
    ctx.tx
        .prepare_cached(
            "INSERT INTO event (mail_id, sender, state, at, by, note, recipient) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, COALESCE(?7, (SELECT COALESCE(name_pc, recipient) FROM mail WHERE id = ?1)))",
        )?
        .execute(p![e.mail_id, e.sender, e.state.as_str(), e.at, e.by, e.note, e.feed_pc])?;
    Ok(())
}
