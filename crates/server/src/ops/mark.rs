//! mark (also the `marks` of poll): seen / ack / fail by the recipient.
//! One bad mark never fails the others.

use crate::ctx::{Ctx, OpResult};
use crate::mail::{load_mail, transition};
use pcmail_core::protocol::MarkItem;
use pcmail_core::{MarkOp, MarkResult};

/// Results in request order, each with its `index`; a malformed mark gets its
/// own `bad_request` and the rest (and the poll carrying them) go on.
pub(crate) fn apply_marks(ctx: &mut Ctx<'_>, marks: &[MarkItem]) -> OpResult<Vec<MarkResult>> {
    let mut results = Vec::with_capacity(marks.len());
    for (index, item) in marks.iter().enumerate() {
        let m = match item {
            Ok(m) => m,
            Err(bad) => {
                results.push(bad.to_result());
                continue;
            }
        };
        let item = MarkResult {
            index: Some(index),
            mark_id: Some(m.mark_id.clone()),
            id: Some(m.id.clone()),
            ok: false,
            state: None,
            changed: None,
            code: None,
            field: None,
            message: None,
        };
        let failed = |code: &str, message: &str| MarkResult {
            code: Some(code.into()),
            message: Some(message.into()),
            ..item.clone()
        };
        let Some(mail) = load_mail(ctx, &m.id)? else {
            results.push(failed("not_found", "no such mail"));
            continue;
        };
        if mail.recipient != ctx.pc && !super::sessions::receives(ctx, &mail)? {
            results.push(failed("forbidden", "only the recipient PC may mark a mail"));
            continue;
        }
        let note = match m.op {
            MarkOp::Seen => None,
            MarkOp::Ack => Some("ack".to_string()),
            MarkOp::Fail => m.reason.clone(),
        };
        // When it happened on the PC, but never in the server's future.
        let at = m.at.min(ctx.now);
        let (state, changed) = transition(ctx, &mail, m.op.target(), at, &m.by, note.as_deref())?;
        results.push(MarkResult { ok: true, state: Some(state), changed: Some(changed), ..item });
    }
    Ok(results)
}
