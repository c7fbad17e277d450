//! Webhook posts of newly opened alerts: each one once, a failed post retried
//! on later sweeps, at most `MAX_TRIES` times. Never on the request path.

use crate::engine::{Engine, OpResult};
use pcmail_core::Millis;
use rusqlite::params;
use std::sync::Arc;
use std::time::Duration;

pub const MAX_TRIES: i64 = 5;
pub const POST_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) fn pending(tx: &rusqlite::Transaction<'_>, _now: Millis) -> OpResult<Vec<(String, String)>> {
    let mut stmt = tx.prepare_cached(
        "SELECT key, message FROM alert WHERE posted = 0 AND post_tries < ?1 AND resolved_at IS NULL ORDER BY opened_at, key",
    )?;
    let rows = stmt.query_map([MAX_TRIES], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

pub(crate) fn record(tx: &rusqlite::Transaction<'_>, key: &str, ok: bool, now: Millis) -> OpResult<()> {
    tx.prepare_cached(
        "UPDATE alert SET posted = CASE WHEN ?2 THEN 1 ELSE posted END, post_tries = post_tries + 1, last_try_at = ?3 \
         WHERE key = ?1",
    )?
    .execute(params![key, ok, now])?;
    Ok(())
}

/// Posts every pending alert once; returns how many posts succeeded.
pub async fn flush(engine: Arc<Engine>, client: &reqwest::Client, now: Millis) -> anyhow::Result<usize> {
    let Some(url) = engine.config().webhook_url.clone() else { return Ok(0) };
    let e = engine.clone();
    let pending = tokio::task::spawn_blocking(move || e.pending_webhook_posts(now)).await??;
    let mut posted = 0;
    for (key, content) in pending {
        let result = client
            .post(&url)
            .timeout(POST_TIMEOUT)
            .json(&serde_json::json!({ "content": content }))
            .send()
            .await;
        let ok = matches!(&result, Ok(r) if r.status().is_success());
        if !ok {
            tracing::warn!(alert = %key, "webhook post failed; retried on a later sweep");
        }
        posted += usize::from(ok);
        let e = engine.clone();
        tokio::task::spawn_blocking(move || e.record_webhook_result(&key, ok, now)).await??;
    }
    Ok(posted)
}
