//! The alert rows' webhook bookkeeping: which posts are due, and what each
//! attempt did (the poster itself, `webhook`, runs off the request path).

use crate::ctx::OpResult;
use crate::store::p;
use pcmail_core::Millis;

/// Tries in all for one alert's post.
pub const MAX_TRIES: i64 = 5;

/// What one post attempt did, as recorded on the alert row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub ok: bool,
    /// Whether it uses up one of the `MAX_TRIES` (a rate-limited answer does not).
    pub counts: bool,
    pub error: Option<String>,
    pub next_try_at: Option<Millis>,
}

pub(crate) fn pending(tx: &dyn crate::store::Db, now: Millis) -> OpResult<Vec<(String, String)>> {
    let mut stmt = tx.prepare_cached(
        "SELECT key, message FROM alert WHERE posted = 0 AND post_tries < ?1 AND resolved_at IS NULL \
         AND (next_try_at IS NULL OR next_try_at <= ?2) ORDER BY opened_at, key",
    )?;
    let rows = stmt.query_map(p![MAX_TRIES, now], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<crate::store::DbResult<Vec<_>>>()?)
}

pub(crate) fn record(tx: &dyn crate::store::Db, key: &str, ok: bool, now: Millis) -> OpResult<()> {
    let error = (!ok).then(|| "post failed".to_string());
    record_outcome(tx, key, &Outcome { ok, counts: true, error, next_try_at: None }, now)
}

pub(crate) fn record_outcome(tx: &dyn crate::store::Db, key: &str, o: &Outcome, now: Millis) -> OpResult<()> {
    tx.prepare_cached(
        "UPDATE alert SET posted = CASE WHEN ?2 THEN 1 ELSE posted END, \
         post_tries = post_tries + CASE WHEN ?3 THEN 1 ELSE 0 END, last_try_at = ?4, \
         last_error = CASE WHEN ?2 THEN NULL ELSE COALESCE(?5, last_error) END, next_try_at = ?6 \
         WHERE key = ?1",
    )?
    .execute(p![key, o.ok, o.counts, now, o.error, o.next_try_at])?;
    Ok(())
}
