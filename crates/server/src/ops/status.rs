//! status: full timelines; a broadcast original expands to its copies.

use super::{fields, load_mail, send::copy_ids, timeline};
use crate::engine::{Ctx, OpResult};
use serde_json::{json, Map, Value};

pub(crate) fn status(ctx: &mut Ctx<'_>, ids: &[String]) -> OpResult<Map<String, Value>> {
    let mut mails = Vec::new();
    let mut missing = Vec::new();
    for id in ids {
        // Not a mail id at all: missing, like an unknown one (one message, one code).
        if !pcmail_core::ids::is_valid_any_id(id) {
            missing.push(id.clone());
            continue;
        }
        if let Some(m) = load_mail(ctx, id)? {
            let t = timeline(ctx, &m.id)?;
            mails.push(m.to_json(t));
            continue;
        }
        let copies = copy_ids(ctx, id)?;
        let is_broadcast = ctx.tx.prepare_cached("SELECT 1 FROM broadcast WHERE id = ?1")?.exists([id])?;
        if !is_broadcast {
            missing.push(id.clone());
            continue;
        }
        for c in copies {
            if let Some(m) = load_mail(ctx, &c)? {
                let t = timeline(ctx, &m.id)?;
                mails.push(m.to_json(t));
            }
        }
    }
    Ok(fields(json!({"mails": mails, "missing": missing})))
}
