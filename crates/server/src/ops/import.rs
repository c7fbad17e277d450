//! Bulk import of mail with timelines (benchmark seeding, moving from another store).

use crate::ctx::OpResult;
use crate::store::p;
use pcmail_core::Mail;

pub(crate) fn import_mail(tx: &dyn crate::store::Db, mails: &[Mail]) -> OpResult<()> {
    let mut ins_mail = tx.prepare_cached(
        "INSERT INTO mail (id, sender, recipient, kind, subject, body, urgent, expires_at, in_reply_to, auto, hop, \
         created_at, state, broadcast_of, delivered_at, last_at, recipients) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
    )?;
    let mut ins_event = tx.prepare_cached(
        "INSERT INTO event (mail_id, sender, state, at, by, note, recipient) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for m in mails {
        let delivered_at = m.timeline.iter().find(|t| t.state == pcmail_core::State::Delivered).map(|t| t.at);
        let last_at = m.timeline.last().map(|t| t.at).unwrap_or(m.created_at);
        ins_mail.execute(p![
            m.id,
            m.from,
            m.to,
            m.kind.as_str(),
            m.subject,
            m.body,
            m.urgent,
            m.expires_at,
            m.in_reply_to,
            m.auto,
            m.hop,
            m.created_at,
            m.state.as_str(),
            m.broadcast_of,
            delivered_at,
            last_at,
            m.recipients.as_ref().map(|r| serde_json::to_string(r).unwrap_or_default())
        ])?;
        for t in &m.timeline {
            ins_event.execute(p![m.id, m.from, t.state.as_str(), t.at, t.by, t.note, m.to])?;
        }
    }
    Ok(())
}
