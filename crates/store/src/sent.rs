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
pub(crate) fn record_queued(tx: &rusqlite::Connection, mail: &OutgoingMail, now: Millis, why: &str) -> Result<()> {
    let to = mail.to.display();
    tx.exec(
        "INSERT OR IGNORE INTO sent (id, to_pc, kind, subject, body, urgent, in_reply_to, created_at, state, state_at, timeline, send_error)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'new', ?8, '[]', ?9)",
        params![mail.id, to, mail.kind.as_str(), mail.subject, mail.body, mail.urgent, mail.in_reply_to, now, format!("queued: {why}")],
    )?;
    Ok(())
}

/// One state the server reported, on the `sent` row of `id`: its state
/// moves forward only, its timeline gets the entry once. False when this
/// PC has no row for `id`.
fn apply_to_row(tx: &rusqlite::Connection, id: &str, e: &TimelineEntry) -> Result<bool> {
    let row: Option<(String, String)> = tx
        .prepare_cached("SELECT state, timeline FROM sent WHERE id = ?1")?
        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let Some((state, tl)) = row else { return Ok(false) };
    let mut tl: Vec<TimelineEntry> = serde_json::from_str(&tl).unwrap_or_default();
    if !tl.iter().any(|t| t.state == e.state) {
        tl.push(e.clone());
    }
    let cur = State::parse(&state).unwrap_or(State::New);
    let next = cur.advance(e.state).unwrap_or(cur);
    tx.exec(
        "UPDATE sent SET state = ?2, state_at = CASE WHEN ?2 = state THEN state_at ELSE ?3 END, timeline = ?4 WHERE id = ?1",
        params![id, next.as_str(), e.at, serde_json::to_string(&tl).unwrap()],
    )?;
    Ok(true)
}

/// `id` (or, for a copy `<id>~<address>`, its original) is in the outbox:
/// sent or being sent, its `sent` rows not written yet.
fn in_flight(tx: &rusqlite::Connection, id: &str) -> Result<bool> {
    let original = id.split('~').next().unwrap_or(id);
    Ok(tx.prepare_cached("SELECT 1 FROM outbox WHERE id = ?1")?.exists([original])?)
}

pub(crate) fn record_expired_unsent(tx: &rusqlite::Connection, mail: &OutgoingMail, now: Millis) -> Result<()> {
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
                // What the server reported before its answer to the send got
                // here (a fast recipient, a sender slow to write): kept in the
                // timeline by `sent_apply_update`, now on the row.
                let early: Vec<TimelineEntry> = tx
                    .prepare_cached(
                        "SELECT state, at, by FROM timeline
                         WHERE mail_id = ?1 AND recorded = 'server' AND state <> 'new' ORDER BY at",
                    )?
                    .query_map([id], |r| {
                        let state: String = r.get(0)?;
                        Ok(TimelineEntry {
                            state: State::parse(&state).unwrap_or(State::New),
                            at: r.get(1)?,
                            by: r.get(2)?,
                            note: None,
                        })
                    })?
                    .collect::<rusqlite::Result<_>>()?;
                for e in &early {
                    apply_to_row(tx, id, e)?;
                }
            }
            Ok(())
        })
    }

    /// Applies one entry of the poll `updates` feed.
    pub fn sent_apply_update(&mut self, u: &Update) -> Result<()> {
        self.write(|tx| {
            let e = TimelineEntry { state: u.state, at: u.at, by: u.by.clone(), note: None };
            if apply_to_row(tx, &u.id, &e)? {
                crate::timeline::record(tx, &u.id, &e, crate::timeline::Recorded::Server)?;
            } else if in_flight(tx, &u.id)? {
                // The update overtook the server's answer to the send: the
                // copies' rows are written from that answer. Kept in the
                // timeline, which `sent_record` folds into them; dropped, the
                // row would say `new` for mail that was delivered.
                crate::timeline::record(tx, &u.id, &e, crate::timeline::Recorded::Server)?;
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A request to `to` (an address, or a list), the rest as the wire's defaults.
    fn outgoing(id: &str, to: serde_json::Value) -> OutgoingMail {
        serde_json::from_value(serde_json::json!({"id": id, "to": to, "kind": "request", "body": "b"})).unwrap()
    }

    fn update(id: &str, state: State, at: Millis) -> Update {
        Update { seq: at, id: id.into(), state, at, by: "pc-b".into() }
    }

    fn states(s: &Store, id: &str) -> (State, Vec<State>) {
        let m = s.sent_get(id).unwrap().unwrap_or_else(|| panic!("{id} listed in sent"));
        (m.state, m.timeline.iter().map(|e| e.state).collect())
    }

    #[test]
    fn an_update_that_overtakes_the_answer_to_the_send_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("store.db")).unwrap();

        // One address: the row that lists the mail as being sent is replaced
        // by the server's; what was reported before stays on it.
        let one = outgoing("m1", serde_json::json!("pc-b"));
        s.outbox_in_flight(&one, 1_000, 2_000).unwrap();
        s.sent_apply_update(&update("m1", State::Delivered, 1_005)).unwrap();
        s.sent_record(&one, &["m1".to_string()], "pc-a", 1_001, "m1").unwrap();
        assert_eq!(states(&s, "m1"), (State::Delivered, vec![State::New, State::Delivered]));

        // Several: a copy's row comes from the answer, so a copy's update
        // found no row at all.
        let many = outgoing("m2", serde_json::json!(["pc-b", "pc-c"]));
        s.outbox_in_flight(&many, 1_010, 2_010).unwrap();
        s.sent_apply_update(&update("m2~pc-b", State::Delivered, 1_012)).unwrap();
        s.sent_apply_update(&update("m2~pc-b", State::Seen, 1_013)).unwrap();
        s.sent_record(&many, &["m2~pc-b".to_string(), "m2~pc-c".to_string()], "pc-a", 1_011, "m2").unwrap();
        assert_eq!(states(&s, "m2~pc-b"), (State::Seen, vec![State::New, State::Delivered, State::Seen]));
        assert_eq!(states(&s, "m2~pc-c"), (State::New, vec![State::New]));

        // Later updates apply as before; an update for mail this PC never
        // sent leaves nothing behind.
        s.sent_apply_update(&update("m2~pc-c", State::Delivered, 1_020)).unwrap();
        assert_eq!(states(&s, "m2~pc-c"), (State::Delivered, vec![State::New, State::Delivered]));
        s.sent_apply_update(&update("stranger", State::Delivered, 1_030)).unwrap();
        let kept: i64 =
            s.conn().query_row("SELECT count(*) FROM timeline WHERE mail_id = 'stranger'", [], |r| r.get(0)).unwrap();
        assert_eq!(kept, 0);
    }
}
