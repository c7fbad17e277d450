//! Retention: final mail (done, failed, expired) older than the retention
//! window is deleted with its timeline, in short bands so a poll never waits
//! long behind it. `VACUUM` is never run here: SQLite reuses the freed pages.

use crate::store::p;
use crate::store::Db;
use pcmail_core::Millis;
use std::time::{Duration, Instant};

/// Default: final mail is kept 90 days after its last transition.
pub const DEFAULT_RETENTION_MS: Millis = 90 * 24 * 60 * 60 * 1000;
/// One band deletes at most this many mails…
pub const BAND_ROWS: usize = 200;
/// …and stops early once it has held the lock this long.
pub const BAND_BUDGET: Duration = Duration::from_millis(8);

/// Deletes one band of final mail whose last transition is before `cutoff`.
/// Returns how many mails went.
pub(crate) fn prune_band(
    tx: &dyn Db,
    cutoff: Millis,
    max_rows: usize,
    budget: Duration,
) -> crate::store::DbResult<usize> {
    let started = Instant::now();
    let ids: Vec<(String, Option<String>)> = tx
        .prepare_cached(concat!(
            "SELECT id, broadcast_of FROM mail WHERE ",
            mail_final_states!(),
            " AND last_at < ?1 ORDER BY last_at LIMIT ?2"
        ))?
        .query_map(p![cutoff, max_rows as i64], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<crate::store::DbResult<_>>()?;
    let mut del_mail = tx.prepare_cached("DELETE FROM mail WHERE id = ?1")?;
    let mut del_events = tx.prepare_cached("DELETE FROM event WHERE mail_id = ?1")?;
    let mut del_original = tx.prepare_cached(
        "DELETE FROM broadcast WHERE id = ?1 AND NOT EXISTS (SELECT 1 FROM mail WHERE broadcast_of = ?1)",
    )?;
    let mut n = 0;
    for (id, original) in &ids {
        del_events.execute(p![id])?;
        del_mail.execute(p![id])?;
        if let Some(o) = original {
            del_original.execute(p![o])?;
        }
        n += 1;
        if started.elapsed() >= budget {
            break;
        }
    }
    Ok(n)
}

/// Counts final mail past the cutoff (for tests and `doctor`-like reports).
pub(crate) fn prunable(tx: &dyn Db, cutoff: Millis) -> crate::store::DbResult<i64> {
    tx.query_row(
        concat!("SELECT count(*) FROM mail WHERE ", mail_final_states!(), " AND last_at < ?1"),
        p![cutoff],
        |r| r.get(0),
    )
}
