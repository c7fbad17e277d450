//! Mail written while the server was unreachable: queued here, sent by the
//! next cycle, with the same id so a retry is never a second mail.

use crate::Cached as _;
use crate::{Result, Store};
use pcmail_core::{Millis, OutgoingMail};
use rusqlite::params;

#[derive(Debug, Clone, PartialEq)]
pub struct QueuedSend {
    pub mail: OutgoingMail,
    pub queued_at: Millis,
    pub attempts: i64,
    pub last_error: Option<String>,
    /// The id was already regenerated once after `duplicate_id`.
    pub regenerated: bool,
}

impl Store {
    /// Queues a mail the server could not take now. It is listed by `sent`
    /// as queued until the server has it.
    pub fn outbox_queue(&mut self, mail: &OutgoingMail, now: Millis, err: Option<&str>) -> Result<()> {
        let json = serde_json::to_string(mail).expect("mail serialises");
        let err = err.unwrap_or("the server was unreachable");
        self.write(|tx| {
            tx.exec(
                "INSERT OR IGNORE INTO outbox (id, mail, queued_at, next_at, last_error) VALUES (?1, ?2, ?3, ?3, ?4)",
                params![mail.id, json, now, err],
            )?;
            crate::sent::record_queued(tx, mail, now, err)?;
            Ok(())
        })
    }

    /// Records a mail before its `send` request goes out, so a sender killed
    /// after the server took it still lists it in `sent` (as sending) and the
    /// next poll sends it again under the same id (the server answers that
    /// retry as the same mail). `next_at` leaves the sender time to settle it
    /// before a poller picks it up.
    pub fn outbox_in_flight(&mut self, mail: &OutgoingMail, now: Millis, next_at: Millis) -> Result<()> {
        let json = serde_json::to_string(mail).expect("mail serialises");
        let why = "sending (no answer from the server yet)";
        self.write(|tx| {
            tx.exec(
                "INSERT OR IGNORE INTO outbox (id, mail, queued_at, next_at, last_error) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![mail.id, json, now, next_at, why],
            )?;
            crate::sent::record_queued(tx, mail, now, why)?;
            Ok(())
        })
    }

    /// A mail written with `outbox_in_flight` that the server could not take
    /// now: it waits in the outbox for the next poll, and `sent` says why.
    pub fn outbox_unsent(&mut self, id: &str, err: &str, next_at: Millis) -> Result<()> {
        self.write(|tx| {
            tx.exec("UPDATE outbox SET next_at = ?2, last_error = ?3 WHERE id = ?1", params![id, next_at, err])?;
            tx.exec(
                "UPDATE sent SET send_error = ?2 WHERE id = ?1 AND send_error IS NOT NULL",
                params![id, format!("queued: {err}")],
            )?;
            Ok(())
        })
    }

    /// Settles a mail of the outbox: the server took it (its own rows are in
    /// `sent` by then) or refused it for good. Its outbox row and the row that
    /// listed it as queued under this id go.
    pub fn outbox_settle(&mut self, id: &str) -> Result<()> {
        self.write(|tx| {
            tx.exec("DELETE FROM outbox WHERE id = ?1", [id])?;
            tx.exec("DELETE FROM sent WHERE id = ?1 AND send_error IS NOT NULL", [id])?;
            Ok(())
        })
    }

    /// A queued mail whose expiry passed before it could be sent: out of the
    /// outbox, and `sent` says so (it never reached the server).
    pub fn outbox_expired(&mut self, mail: &OutgoingMail, now: Millis) -> Result<()> {
        self.write(|tx| {
            tx.exec("DELETE FROM outbox WHERE id = ?1", [&mail.id])?;
            crate::sent::record_expired_unsent(tx, mail, now)?;
            Ok(())
        })
    }

    pub fn outbox_due(&self, now: Millis) -> Result<Vec<QueuedSend>> {
        self.outbox_query("WHERE next_at <= ?1", now)
    }

    pub fn outbox_all(&self) -> Result<Vec<QueuedSend>> {
        self.outbox_query("WHERE ?1 = ?1", 0)
    }

    /// Whether nothing waits to be sent (asked after every poll answer:
    /// no row is read, let alone parsed).
    pub fn outbox_is_empty(&self) -> Result<bool> {
        Ok(self.conn.row("SELECT NOT EXISTS (SELECT 1 FROM outbox)", [], |r| r.get(0))?)
    }

    fn outbox_query(&self, filter: &str, now: Millis) -> Result<Vec<QueuedSend>> {
        let mut st = self.conn.prepare_cached(&format!(
            "SELECT mail, queued_at, attempts, last_error, regenerated FROM outbox {filter} ORDER BY queued_at"
        ))?;
        let rows = st
            .query_map([now], |r| {
                let json: String = r.get(0)?;
                Ok((json, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })?
            .collect::<rusqlite::Result<Vec<(String, Millis, i64, Option<String>, bool)>>>()?;
        Ok(rows
            .into_iter()
            .filter_map(|(json, queued_at, attempts, last_error, regenerated)| {
                serde_json::from_str(&json).ok().map(|mail| QueuedSend {
                    mail,
                    queued_at,
                    attempts,
                    last_error,
                    regenerated,
                })
            })
            .collect())
    }

    pub fn outbox_remove(&mut self, id: &str) -> Result<()> {
        self.conn.exec("DELETE FROM outbox WHERE id = ?1", [id])?;
        Ok(())
    }

    pub fn outbox_retry_later(&mut self, id: &str, err: &str, next_at: Millis) -> Result<()> {
        self.conn.exec(
            "UPDATE outbox SET attempts = attempts + 1, next_at = ?2, last_error = ?3 WHERE id = ?1",
            params![id, next_at, err],
        )?;
        Ok(())
    }

    /// Swaps a queued mail's id after `duplicate_id` (done at most once).
    pub fn outbox_replace_id(&mut self, old: &str, mail: &OutgoingMail) -> Result<()> {
        let json = serde_json::to_string(mail).expect("mail serialises");
        self.conn
            .exec("UPDATE outbox SET id = ?2, mail = ?3, regenerated = 1 WHERE id = ?1", params![old, mail.id, json])?;
        Ok(())
    }
}
