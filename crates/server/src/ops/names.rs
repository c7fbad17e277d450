//! Who holds each session name, and whether that session is live (its PC's
//! last report fresh): the lookups mail to a name, the roster and the
//! session ops share.

use crate::ctx::{Ctx, OpResult};
use crate::store::p;
use crate::store::Optional;
use pcmail_core::sessions::{NameHolder, REPORT_FRESH_MS};

/// The holder of `name`, if it is a name.
pub(crate) fn holder(ctx: &Ctx<'_>, name: &str) -> OpResult<Option<NameHolder>> {
    Ok(ctx
        .tx
        .prepare_cached("SELECT name, pc, session, since FROM name WHERE name = ?1")?
        .query_row(p![name], |r| {
            Ok(NameHolder { name: r.get(0)?, pc: r.get(1)?, session: r.get(2)?, since: r.get(3)? })
        })
        .optional()?)
}

/// The holder of `name` and whether it is live; None for a PC label.
pub(crate) fn holder_live(ctx: &Ctx<'_>, name: &str) -> OpResult<Option<(NameHolder, bool)>> {
    let Some(h) = holder(ctx, name)? else { return Ok(None) };
    let live = is_live(ctx, &h.pc, &h.session)?;
    Ok(Some((h, live)))
}

/// Whether `session` of `pc` is live: in the PC's last report, and that
/// report fresh (the caller's own report always counts).
pub(crate) fn is_live(ctx: &Ctx<'_>, pc: &str, session: &str) -> OpResult<bool> {
    Ok(ctx
        .tx
        .prepare_cached(
            "SELECT 1 FROM live_session l WHERE l.pc = ?1 AND l.session = ?2 AND (l.pc = ?3 OR l.reported_at >= ?4)",
        )?
        .query_row(p![pc, session, ctx.pc, ctx.now - REPORT_FRESH_MS], |_| Ok(()))
        .optional()?
        .is_some())
}

/// Every name, for `unknown_recipient` candidates.
pub(crate) fn all_names(ctx: &Ctx<'_>) -> OpResult<Vec<String>> {
    let mut st = ctx.tx.prepare_cached("SELECT name FROM name ORDER BY name")?;
    let names = st.query_map(p![], |r| r.get(0))?.collect::<crate::store::DbResult<Vec<String>>>()?;
    Ok(names)
}

pub(crate) const HELD_BY_SQL: &str = "SELECT name, pc, session, since FROM name WHERE pc = ?1 ORDER BY name";

pub(crate) fn held_by(ctx: &Ctx<'_>, pc: &str) -> OpResult<Vec<NameHolder>> {
    let mut st = ctx.tx.prepare_cached(HELD_BY_SQL)?;
    let rows = st.query_map(p![pc], |r| {
        Ok(NameHolder { name: r.get(0)?, pc: r.get(1)?, session: r.get(2)?, since: r.get(3)? })
    })?;
    Ok(rows.collect::<crate::store::DbResult<Vec<_>>>()?)
}
