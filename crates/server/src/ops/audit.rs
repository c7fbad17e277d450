//! The audit log of admin actions (and a PC's own credential changes).

use crate::ctx::{Ctx, OpResult};
use crate::store::p;
use pcmail_core::auth::Caller;

/// Who did it, as the audit log shows: `admin@<the managing PC>` or the PC itself.
pub(crate) fn actor(ctx: &Ctx<'_>) -> String {
    match ctx.caller {
        Caller::Admin => format!("admin@{}", ctx.pc),
        _ => ctx.pc.to_string(),
    }
}

pub(crate) fn audit(ctx: &Ctx<'_>, action: &str, label: &str, detail: Option<&str>) -> OpResult<()> {
    ctx.tx
        .prepare_cached("INSERT INTO audit (at, by, action, label, detail) VALUES (?1, ?2, ?3, ?4, ?5)")?
        .execute(p![ctx.now, actor(ctx), action, label, detail])?;
    Ok(())
}
