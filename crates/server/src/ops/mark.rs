//! mark (also the `marks` of poll): seen / ack / fail by the recipient.
//! One bad mark never fails the others.

use super::{load_mail, transition};
use crate::engine::{Ctx, OpResult};
use pcmail_core::{Mark, MarkOp};
use serde_json::{json, Value};

pub(crate) fn apply_marks(ctx: &mut Ctx<'_>, marks: &[Mark]) -> OpResult<Vec<Value>> {
    let mut results = Vec::with_capacity(marks.len());
    for m in marks {
        let failed = |code: &str| json!({"markId": m.mark_id, "id": m.id, "ok": false, "code": code});
        let Some(mail) = load_mail(ctx, &m.id)? else {
            results.push(failed("not_found"));
            continue;
        };
        if mail.recipient != ctx.pc {
            results.push(failed("forbidden"));
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
        results.push(json!({"markId": m.mark_id, "id": m.id, "ok": true, "state": state.as_str(), "changed": changed}));
    }
    Ok(results)
}
