//! Marks for the server (seen / ack / fail) wait here until the server has
//! taken them; they go with the next poll. Idempotent by mark id.

use crate::Cached as _;
use crate::{Result, Store};
use pcmail_core::{rules, Mark, MarkOp, Millis};
use rusqlite::{params, Connection};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingMark {
    pub mark: Mark,
    pub attempts: i64,
    pub next_at: Millis,
    pub last_error: Option<String>,
}

/// One mark per (op, mail): repeating it (two sessions seeing the same mail)
/// is the same mark.
pub fn mark_id(op: MarkOp, id: &str) -> String {
    format!("{}:{}", op.as_str(), id)
}

/// Queues a mark. The callers that take text from a person check it first
/// (`pcmail_core::rules::check_mark_text`, refusing with a usage error); here
/// the actor is sanitised and a reason is cleaned, so that nothing queued can
/// be a mark the server refuses for its text.
pub fn queue(tx: &Connection, id: &str, op: MarkOp, at: Millis, by: &str, reason: Option<&str>) -> Result<String> {
    let mid = mark_id(op, id);
    let by = rules::sanitize_actor(by);
    let reason = match (op, reason) {
        (MarkOp::Fail, r) => Some(rules::clean_reason(r.unwrap_or(""))),
        (_, r) => r.map(rules::clean_reason),
    };
    tx.exec(
        "INSERT OR IGNORE INTO pending_marks (mark_id, id, op, at, by, reason, next_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?4)",
        params![mid, id, op.as_str(), at, by, reason],
    )?;
    crate::want_push();
    Ok(mid)
}

impl Store {
    pub fn due_marks(&self, now: Millis, limit: usize) -> Result<Vec<PendingMark>> {
        let mut st = self.conn.prepare_cached(
            "SELECT mark_id, id, op, at, by, reason, attempts, next_at, last_error FROM pending_marks
             WHERE next_at <= ?1 ORDER BY at LIMIT ?2",
        )?;
        let rows = st
            .query_map(params![now, limit as i64], |r| {
                let op: String = r.get(2)?;
                Ok(PendingMark {
                    mark: Mark {
                        mark_id: r.get(0)?,
                        id: r.get(1)?,
                        op: MarkOp::parse(&op).unwrap_or(MarkOp::Seen),
                        at: r.get(3)?,
                        by: r.get(4)?,
                        reason: r.get(5)?,
                    },
                    attempts: r.get(6)?,
                    next_at: r.get(7)?,
                    last_error: r.get(8)?,
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    /// Drops, with a record, queued marks the server would refuse for their
    /// text (queued by an older pcmail before the rules were shared): they
    /// must never hold up a poll. Returns how many were dropped.
    pub fn drop_invalid_marks(&mut self, now: Millis) -> Result<usize> {
        let bad: Vec<(String, String)> = {
            let mut st = self.conn.prepare_cached("SELECT mark_id, op, by, reason FROM pending_marks")?;
            let rows = st.query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Option<String>>(3)?,
                ))
            })?;
            let mut bad = vec![];
            for row in rows {
                let (mid, op, by, reason) = row?;
                let check = match MarkOp::parse(&op) {
                    Some(op) => rules::check_mark_text(op, &by, reason.as_deref()).map_err(|e| e.message),
                    None => Err(format!("unknown op {op:?}")),
                };
                if let Err(why) = check {
                    bad.push((mid, why));
                }
            }
            bad
        };
        for (mid, why) in &bad {
            self.drop_mark(mid, &format!("refused here before sending: {why}"), now)?;
        }
        Ok(bad.len())
    }

    pub fn pending_mark_count(&self) -> Result<i64> {
        Ok(self.conn.row("SELECT count(*) FROM pending_marks", [], |r| r.get(0))?)
    }

    /// What waits for the mark pusher, in one read: the lease releases
    /// queued and the marks pending.
    pub fn push_work(&self) -> Result<(i64, i64)> {
        Ok(self.conn.row(
            "SELECT (SELECT count(*) FROM leases_mine WHERE release_queued_at IS NOT NULL), \
                    (SELECT count(*) FROM pending_marks)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?)
    }

    pub fn mark_done(&mut self, mark_ids: &[String]) -> Result<()> {
        if mark_ids.is_empty() {
            return Ok(());
        }
        self.write(|tx| {
            for m in mark_ids {
                tx.exec("DELETE FROM pending_marks WHERE mark_id = ?1", [m])?;
            }
            Ok(())
        })
    }

    /// Records a failed attempt; after `max_attempts` the mark is dropped with
    /// a record (an old server that will never know the op must not block us).
    pub fn mark_retry_later(
        &mut self,
        mark_id: &str,
        err: &str,
        next_at: Millis,
        max_attempts: i64,
        now: Millis,
    ) -> Result<bool> {
        self.write(|tx| {
            tx.exec(
                "UPDATE pending_marks SET attempts = attempts + 1, next_at = ?2, last_error = ?3 WHERE mark_id = ?1",
                params![mark_id, next_at, err],
            )?;
            let attempts: i64 = tx
                .query_row("SELECT attempts FROM pending_marks WHERE mark_id = ?1", [mark_id], |r| r.get(0))
                .unwrap_or(0);
            if attempts >= max_attempts {
                drop_in(tx, mark_id, &format!("gave up after {attempts} tries: {err}"), now)?;
                return Ok(true);
            }
            Ok(false)
        })
    }

    pub fn drop_mark(&mut self, mark_id: &str, why: &str, now: Millis) -> Result<()> {
        self.write(|tx| drop_in(tx, mark_id, why, now))
    }

    pub fn dropped_marks(&self) -> Result<Vec<(String, String, String, String)>> {
        let mut st = self.conn.prepare_cached("SELECT mark_id, id, op, why FROM dropped_marks ORDER BY dropped_at")?;
        let rows =
            st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?.collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }
}

fn drop_in(tx: &Connection, mark_id: &str, why: &str, now: Millis) -> Result<()> {
    tx.exec(
        "INSERT OR REPLACE INTO dropped_marks (mark_id, id, op, why, attempts, dropped_at)
         SELECT mark_id, id, op, ?2, attempts, ?3 FROM pending_marks WHERE mark_id = ?1",
        params![mark_id, why, now],
    )?;
    tx.exec("DELETE FROM pending_marks WHERE mark_id = ?1", [mark_id])?;
    Ok(())
}
