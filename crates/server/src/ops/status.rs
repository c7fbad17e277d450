//! status: full timelines; a broadcast original (or that of mail to several
//! addresses) expands to its copies.
//! A PC sees only mail it sent or received: anyone else's is
//! answered in `missing`, exactly like an unknown id, so it learns nothing.

use super::send::copy_ids;
use crate::ctx::{Ctx, OpResult};
use crate::mail::{load_mail, timeline};
use crate::store::p;
use crate::store::Optional;
use pcmail_core::answers::{StatusAnswer, StatusMail};

pub(crate) fn status(ctx: &mut Ctx<'_>, ids: &[String]) -> OpResult<StatusAnswer> {
    let mut mails = Vec::new();
    let mut missing = Vec::new();
    for id in ids {
        // Not a mail id at all: missing, like an unknown one (one message, one code).
        if !pcmail_core::ids::is_valid_any_id(id) {
            missing.push(id.clone());
            continue;
        }
        if let Some(m) = load_mail(ctx, id)? {
            if m.sender != ctx.pc && m.recipient != ctx.pc && !super::sessions::receives(ctx, &m)? {
                missing.push(id.clone());
                continue;
            }
            let t = timeline(ctx, &m.id)?;
            // Mail to a name nobody live holds: the sender hears that it waits.
            let waiting = if pcmail_core::due::mail(m.state, m.expires_at, ctx.now).is_some() {
                None
            } else {
                super::sessions::waiting_note(ctx, &m)?
            };
            mails.push(StatusMail { mail: as_read(m.to_mail(t), ctx.now), waiting });
            continue;
        }
        let copies = copy_ids(ctx, id)?;
        let sender: Option<String> = ctx
            .tx
            .prepare_cached("SELECT sender FROM broadcast WHERE id = ?1")?
            .query_row(p![id], |r| r.get(0))
            .optional()?;
        let Some(sender) = sender else {
            missing.push(id.clone());
            continue;
        };
        // The sender sees every copy (even none); a recipient its own.
        let mut seen_any = sender == ctx.pc;
        for c in copies {
            let Some(m) = load_mail(ctx, &c)? else { continue };
            // A copy of mail to several addresses may be to a name this PC holds.
            if m.sender == ctx.pc || m.recipient == ctx.pc || super::sessions::receives(ctx, &m)? {
                seen_any = true;
                let t = timeline(ctx, &m.id)?;
                // A copy to a name nobody live holds says why it waits, as mail to the name alone does.
                let waiting = if pcmail_core::due::mail(m.state, m.expires_at, ctx.now).is_some() {
                    None
                } else {
                    super::sessions::waiting_note(ctx, &m)?
                };
                mails.push(StatusMail { mail: as_read(m.to_mail(t), ctx.now), waiting });
            }
        }
        if !seen_any {
            missing.push(id.clone());
        }
    }
    Ok(StatusAnswer { mails, missing })
}

/// A mail as the server's clock has it now: status is read-only, so an
/// expiry no sweep has written yet is shown as the sweep will write it.
fn as_read(mut m: pcmail_core::Mail, now: pcmail_core::Millis) -> pcmail_core::Mail {
    pcmail_core::due::mail_as_read(&mut m, now);
    m
}
