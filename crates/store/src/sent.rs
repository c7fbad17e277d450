//! Mail this PC sent, with the state and timeline the server reported.

use crate::Cached as _;
use crate::{Result, Store};
use pcmail_core::{Kind, Mail, Millis, OutgoingMail, State, TimelineEntry, Update};
use rusqlite::{params, OptionalExtension};

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SentMail {
    pub id: String,
    pub to: String,
    pub kind: Kind,
    pub subject: String,
    pub body: String,
    pub urgent: bool,
    pub in_reply_to: Option<String>,
    pub created_at: Millis,
    pub state: State,
    pub state_at: Millis,
    pub timeline: Vec<TimelineEntry>,
    /// Written but not on the server yet (it waits in the outbox), or why it
    /// never got there.
    pub queued: Option<String>,
}

/// A mail waiting in the outbox shows in `sent` as queued.
pub(crate) fn record_queued(tx: &rusqlite::Transaction, mail: &OutgoingMail, now: Millis, why: &str) -> Result<()> {
    let to = mail.to.display();
    tx.exec(
        "INSERT OR IGNORE INTO sent (id, to_pc, kind, subject, body, urgent, in_reply_to, created_at, state, state_at, timeline, send_error)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'new', ?8, '[]', ?9)",
        params![mail.id, to, mail.kind.as_str(), mail.subject, mail.body, mail.urgent, mail.in_reply_to, now, format!("queued: {why}")],
    )?;
    Ok(())
}

pub(crate) fn record_expired_unsent(tx: &rusqlite::Transaction, mail: &OutgoingMail, now: Millis) -> Result<()> {
    tx.exec(
        "UPDATE sent SET state = 'expired', state_at = ?2, send_error = 'expired in the outbox before the server could take it' WHERE id = ?1",
        params![mail.id, now],
    )?;
    Ok(())
}

impl Store {
    /// Records a mail the server accepted (one row per copy for a broadcast).
    ///
    /// `settles` is the outbox row the send came from (the mail's id before a
    /// regenerated one): it goes in the same transaction, so a send costs
    /// the store one commit after the answer, and a crash leaves either both
    /// or neither.
    pub fn sent_record(
        &mut self,
        mail: &OutgoingMail,
        ids: &[String],
        from: &str,
        now: Millis,
        settles: &str,
    ) -> Result<()> {
        self.write(|tx| {
            // It was listed as queued under its own id; the server's ids replace it.
            tx.exec("DELETE FROM sent WHERE id = ?1 AND send_error IS NOT NULL", [&mail.id])?;
            tx.exec("DELETE FROM outbox WHERE id = ?1", [settles])?;
            tx.exec("DELETE FROM sent WHERE id = ?1 AND send_error IS NOT NULL", [settles])?;
            for id in ids {
                let to = id.split_once('~').map(|(_, l)| l.to_string()).unwrap_or_else(|| mail.to.display());
                let tl = vec![TimelineEntry { state: State::New, at: now, by: from.to_string(), note: None }];
                tx.exec(
                    "INSERT OR IGNORE INTO sent (id, to_pc, kind, subject, body, urgent, in_reply_to, created_at, state, state_at, timeline)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'new', ?8, ?9)",
                    params![
                        id, to, mail.kind.as_str(), mail.subject, mail.body, mail.urgent, mail.in_reply_to, now,
                        serde_json::to_string(&tl).unwrap()
                    ],
                )?;
                crate::timeline::record(tx, id, &tl[0], crate::timeline::Recorded::Local)?;
            }
            Ok(())
        })
    }

    /// Applies one entry of the poll `updates` feed.
    pub fn sent_apply_update(&mut self, u: &Update) -> Result<()> {
        self.write(|tx| {
            let row: Option<(String, String)> = tx
                .query_row("SELECT state, timeline FROM sent WHERE id = ?1", [&u.id], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            let Some((state, tl)) = row else { return Ok(()) };
            let e = TimelineEntry { state: u.state, at: u.at, by: u.by.clone(), note: None };
            crate::timeline::record(tx, &u.id, &e, crate::timeline::Recorded::Server)?;
            let mut tl: Vec<TimelineEntry> = serde_json::from_str(&tl).unwrap_or_default();
            if !tl.iter().any(|e| e.state == u.state) {
                tl.push(TimelineEntry { state: u.state, at: u.at, by: u.by.clone(), note: None });
            }
            let cur = State::parse(&state).unwrap_or(State::New);
            let next = cur.advance(u.state).unwrap_or(cur);
            tx.exec(
                "UPDATE sent SET state = ?2, state_at = CASE WHEN ?2 = state THEN state_at ELSE ?3 END, timeline = ?4 WHERE id = ?1",
                params![u.id, next.as_str(), u.at, serde_json::to_string(&tl).unwrap()],
            )?;
            Ok(())
        })
    }

    /// Replaces the cached state with the server's full answer (from `status`).
    pub fn sent_apply_status(&mut self, m: &Mail) -> Result<()> {
        self.conn.exec(
            "UPDATE sent SET state = ?2, state_at = ?3, timeline = ?4 WHERE id = ?1",
            params![
                m.id,
                m.state.as_str(),
                m.timeline.last().map(|e| e.at).unwrap_or(m.created_at),
                serde_json::to_string(&m.timeline).unwrap()
            ],
        )?;
        Ok(())
    }

    pub fn sent_get(&self, id: &str) -> Result<Option<SentMail>> {
        Ok(self.conn.row(&format!("SELECT {SENT_COLS} FROM sent WHERE id = ?1"), [id], sent_row).optional()?)
    }

    pub fn sent_list(&self, limit: usize) -> Result<Vec<SentMail>> {
        let mut st = self
            .conn
            .prepare_cached(&format!("SELECT {SENT_COLS} FROM sent ORDER BY created_at DESC, id DESC LIMIT ?1"))?;
        let rows = st.query_map([limit as i64], sent_row)?.collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }
}

const SENT_COLS: &str =
    "id, to_pc, kind, subject, body, urgent, in_reply_to, created_at, state, state_at, timeline, send_error";

fn sent_row(r: &rusqlite::Row) -> rusqlite::Result<SentMail> {
    let kind: String = r.get(2)?;
    let state: String = r.get(8)?;
    let tl: String = r.get(10)?;
    Ok(SentMail {
        id: r.get(0)?,
        to: r.get(1)?,
        kind: Kind::parse(&kind).unwrap_or_default(),
        subject: r.get(3)?,
        body: r.get(4)?,
        urgent: r.get(5)?,
        in_reply_to: r.get(6)?,
        created_at: r.get(7)?,
        state: State::parse(&state).unwrap_or(State::New),
        state_at: r.get(9)?,
        timeline: serde_json::from_str(&tl).unwrap_or_default(),
        queued: r.get(11)?,
    })
}
