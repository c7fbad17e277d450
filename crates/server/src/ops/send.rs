//! send: fail-closed exact addressing, loop/hop refusals, idempotency by id,
//! broadcast copies, and a reply finishing the original.

use super::{names, roster};
use crate::ctx::{Ctx, OpError, OpResult};
use crate::mail::{load_mail, record_event, transition, MailEvent, StoredMail};
use crate::store::p;
use crate::store::Optional;
use pcmail_core::answers::SendAnswer;
use pcmail_core::error::Unresolved;
use pcmail_core::ids::broadcast_copy_id;
use pcmail_core::model::limits;
use pcmail_core::op_table::News;
use pcmail_core::{ErrorCode, OutgoingMail, ProtoError, State, To};

/// The content a retry must repeat exactly to be "the same mail".
#[derive(Debug, PartialEq)]
struct Content {
    sender: String,
    to: String,
    kind: String,
    subject: String,
    body: String,
    urgent: bool,
    expiry: Expiry,
    in_reply_to: Option<String>,
    auto: bool,
    hop: i64,
}

/// How a mail asked to expire. A retry is the same mail when it repeats the
/// same `expiresIn`, or a shorter one: a PC that queued the mail subtracts the
/// time it waited, so a retry after a lost answer may ask for less.
#[derive(Debug)]
enum Expiry {
    At(Option<i64>),
    In(i64),
}

impl PartialEq for Expiry {
    fn eq(&self, retry: &Expiry) -> bool {
        match (self, retry) {
            (Expiry::At(a), Expiry::At(b)) => a == b,
            (Expiry::In(stored), Expiry::In(again)) => again <= stored,
            _ => false,
        }
    }
}

impl Expiry {
    fn of(expires_at: Option<i64>, expires_in: Option<i64>) -> Expiry {
        match expires_in {
            Some(d) => Expiry::In(d),
            None => Expiry::At(expires_at),
        }
    }
}

impl Content {
    fn of_request(sender: &str, m: &OutgoingMail) -> Content {
        Content {
            sender: sender.to_string(),
            to: m.to.key(),
            kind: m.kind.as_str().to_string(),
            subject: m.subject.clone(),
            body: m.body.clone(),
            urgent: m.urgent,
            expiry: Expiry::of(m.expires_at, m.expires_in),
            in_reply_to: m.in_reply_to.clone(),
            auto: m.auto,
            hop: m.hop,
        }
    }
    fn of_stored(m: &StoredMail) -> Content {
        Content {
            sender: m.sender.clone(),
            to: m.recipient.clone(),
            kind: m.kind.clone(),
            subject: m.subject.clone(),
            body: m.body.clone(),
            urgent: m.urgent,
            expiry: Expiry::of(m.expires_at, m.expires_in),
            in_reply_to: m.in_reply_to.clone(),
            auto: m.auto,
            hop: m.hop,
        }
    }
}

/// A broadcast original, or the original of mail to several addresses
/// (never delivered itself).
fn load_broadcast(ctx: &Ctx<'_>, id: &str) -> OpResult<Option<Content>> {
    Ok(ctx
        .tx
        .prepare_cached(
            "SELECT sender, kind, subject, body, urgent, expires_at, in_reply_to, auto, hop, expires_in, recipients \
             FROM broadcast WHERE id = ?1",
        )?
        .query_row(p![id], |r| {
            Ok(Content {
                sender: r.get(0)?,
                // A list's original keeps its list; a `*` broadcast has none.
                to: r.get::<_, Option<String>>(10)?.unwrap_or_else(|| "*".into()),
                kind: r.get(1)?,
                subject: r.get(2)?,
                body: r.get(3)?,
                urgent: r.get(4)?,
                expiry: Expiry::of(r.get(5)?, r.get(9)?),
                in_reply_to: r.get(6)?,
                auto: r.get(7)?,
                hop: r.get(8)?,
            })
        })
        .optional()?)
}

pub(crate) fn copy_ids(ctx: &Ctx<'_>, original: &str) -> OpResult<Vec<String>> {
    let mut stmt = ctx.tx.prepare_cached("SELECT id FROM mail WHERE broadcast_of = ?1 ORDER BY seq")?;
    let ids = stmt.query_map(p![original], |r| r.get(0))?.collect::<crate::store::DbResult<Vec<String>>>()?;
    Ok(ids)
}

/// What `inReplyTo` points at: the mail it answers (for a broadcast original,
/// the replier's own copy when there is one) and whether it was `auto`.
struct ReplyTarget {
    auto: bool,
    mail: Option<StoredMail>,
}

fn reply_target(ctx: &Ctx<'_>, id: &str, replier: &str) -> OpResult<Option<ReplyTarget>> {
    if let Some(m) = load_mail(ctx, id)? {
        return Ok(Some(ReplyTarget { auto: m.auto, mail: Some(m) }));
    }
    if let Some(b) = load_broadcast(ctx, id)? {
        let copy = load_mail(ctx, &broadcast_copy_id(id, replier))?;
        return Ok(Some(ReplyTarget { auto: b.auto, mail: copy }));
    }
    Ok(None)
}

pub(crate) fn send(ctx: &mut Ctx<'_>, mail: &OutgoingMail) -> OpResult<SendAnswer> {
    // 3. exact addresses only; near misses are suggestions, never deliveries.
    let pcs = roster::load_all(ctx).map_err(|e| super::roster::unreadable(e, "delivered"))?;
    match &mail.to {
        To::One(to) => {
            // A name: the mail stays addressed to it; whoever holds it gets it.
            if to != "*" && !resolves(ctx, &pcs, to)? {
                return Err(OpError::Proto(
                    ProtoError::new(
                        ErrorCode::UnknownRecipient,
                        format!("{to:?} is not an exact roster label; nothing was sent"),
                    )
                    .with_candidates(candidates(ctx, &pcs, to)?),
                ));
            }
        }
        // All or nothing: every address must resolve before anything is stored,
        // and every one that does not is named, each with its own candidates.
        To::Many(list) => {
            let mut misses = Vec::new();
            for to in list {
                if !resolves(ctx, &pcs, to)? {
                    misses.push(Unresolved { to: to.clone(), candidates: candidates(ctx, &pcs, to)? });
                }
            }
            if !misses.is_empty() {
                return Err(OpError::Proto(pcmail_core::recipients::unknown_recipients(misses)));
            }
        }
    }
    // 4. loops and hops.
    if mail.hop >= limits::HOP_LIMIT {
        return Err(OpError::proto(
            ErrorCode::HopLimit,
            format!("hop {} is at or over the limit of {}", mail.hop, limits::HOP_LIMIT),
        ));
    }
    let target = match &mail.in_reply_to {
        None => None,
        Some(orig) => {
            let t = reply_target(ctx, orig, ctx.pc)?
                .ok_or_else(|| OpError::proto(ErrorCode::NotFound, format!("inReplyTo {orig:?} does not exist")))?;
            if mail.auto && t.auto {
                return Err(OpError::proto(ErrorCode::LoopRefused, "an automatic reply to automatic mail is refused"));
            }
            Some(t)
        }
    };
    // 5. idempotent by id.
    let wanted = Content::of_request(ctx.pc, mail);
    let stored = match load_mail(ctx, &mail.id)? {
        Some(m) => Some((Content::of_stored(&m), vec![m.id])),
        None => match load_broadcast(ctx, &mail.id)? {
            Some(c) => Some((c, copy_ids(ctx, &mail.id)?)),
            None => None,
        },
    };
    if let Some((content, ids)) = stored {
        if content == wanted {
            return Ok(SendAnswer { ids, existing: true });
        }
        return Err(OpError::proto(
            ErrorCode::DuplicateId,
            format!("{} already exists with other content; make a new id", mail.id),
        ));
    }

    let ids = match &mail.to {
        To::One(to) if to == "*" => {
            insert_broadcast(ctx, mail, None)?;
            let mut ids = Vec::new();
            let sender = ctx.pc;
            for pc in pcs.iter().filter(|p| p.label != sender) {
                let copy = broadcast_copy_id(&mail.id, &pc.label);
                insert_mail(ctx, mail, &copy, &pc.label, Some(&mail.id), None)?;
                ids.push(copy);
            }
            ids
        }
        To::One(to) => {
            insert_mail(ctx, mail, &mail.id, to, None, None)?;
            vec![mail.id.clone()]
        }
        // Like a broadcast: an original that is never delivered itself, and
        // one copy per address (`<id>~<address>`), each with its own state
        // and timeline, in the sender's order.
        To::Many(list) => {
            let key = mail.to.key();
            insert_broadcast(ctx, mail, Some(&key))?;
            let mut ids = Vec::new();
            for to in list {
                let copy = broadcast_copy_id(&mail.id, to);
                insert_mail(ctx, mail, &copy, to, Some(&mail.id), Some(&key))?;
                ids.push(copy);
            }
            ids
        }
    };

    // A reply from the original's recipient finishes the original.
    if let Some(ReplyTarget { mail: Some(orig), .. }) = target {
        if orig.recipient == ctx.pc {
            let note = format!("reply:{}", mail.id);
            let (now, pc) = (ctx.now, ctx.pc.to_string());
            transition(ctx, &orig, State::Done, now, &pc, Some(&note))?;
        }
    }
    Ok(SendAnswer { ids, existing: false })
}

/// `to` is a roster label, or a name some session holds.
fn resolves(ctx: &Ctx<'_>, pcs: &[pcmail_core::Pc], to: &str) -> OpResult<bool> {
    Ok(pcs.iter().any(|p| p.label == to) || names::holder(ctx, to)?.is_some())
}

/// Labels, then names, that look like `to`.
fn candidates(ctx: &Ctx<'_>, pcs: &[pcmail_core::Pc], to: &str) -> OpResult<Vec<String>> {
    let mut c = pcmail_core::roster::candidates(pcs, to);
    c.extend(name_candidates(&names::all_names(ctx)?, to));
    Ok(c)
}

/// Names that look like `to` (they share the labels' namespace): the same
/// closeness as labels, by treating each name as a PC with that label.
fn name_candidates(names: &[String], to: &str) -> Vec<String> {
    let as_pcs: Vec<pcmail_core::Pc> = names
        .iter()
        .enumerate()
        .map(|(i, n)| pcmail_core::Pc { number: i as i64 + 1, label: n.clone(), hostname: n.clone() })
        .collect();
    pcmail_core::roster::candidates(&as_pcs, to)
}

/// The expiry by the server's clock: `expiresIn` counts from now.
fn expires_at(ctx: &Ctx<'_>, m: &OutgoingMail) -> Option<i64> {
    m.expires_in.map(|d| ctx.now.saturating_add(d)).or(m.expires_at)
}

fn insert_broadcast(ctx: &Ctx<'_>, m: &OutgoingMail, recipients: Option<&str>) -> OpResult<()> {
    ctx.tx
        .prepare_cached(
            "INSERT INTO broadcast (id, sender, kind, subject, body, urgent, expires_at, in_reply_to, auto, hop, created_at, expires_in, recipients) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        )?
        .execute(p![
            m.id, ctx.pc, m.kind.as_str(), m.subject, m.body, m.urgent, expires_at(ctx, m), m.in_reply_to, m.auto, m.hop,
            ctx.now, m.expires_in, recipients
        ])?;
    Ok(())
}

fn insert_mail(
    ctx: &mut Ctx<'_>,
    m: &OutgoingMail,
    id: &str,
    recipient: &str,
    broadcast_of: Option<&str>,
    recipients: Option<&str>,
) -> OpResult<()> {
    ctx.tx
        .prepare_cached(
            "INSERT INTO mail (id, sender, recipient, kind, subject, body, urgent, expires_at, in_reply_to, auto, hop, \
             created_at, state, broadcast_of, last_at, expires_in, recipients) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, 'new', ?13, ?12, ?14, ?15)",
        )?
        .execute(p![
            id, ctx.pc, recipient, m.kind.as_str(), m.subject, m.body, m.urgent, expires_at(ctx, m), m.in_reply_to, m.auto,
            m.hop, ctx.now, broadcast_of, m.expires_in, recipients
        ])?;
    record_event(ctx, &MailEvent::new(id, ctx.pc, State::New, ctx.now, ctx.pc))?;
    ctx.wake(News::Mail, recipient.to_string());
    // Mail to a name wakes the long poll of the PC holding it.
    if let Some(h) = names::holder(ctx, recipient)? {
        ctx.wake(News::Mail, h.pc);
    }
    Ok(())
}
