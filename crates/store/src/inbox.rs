//! The inbox: mail addressed to this PC, stored durably before it is
//! confirmed to the server. `status` is the single "processed" marker.

use crate::timeline::{self, Recorded};
use crate::Cached as _;
use crate::{Result, Store, StoreError};
use pcmail_core::{Kind, Mail, Millis, State, TimelineEntry};
use rusqlite::{params, Connection, OptionalExtension, Row};

/// The local state of a received mail. Follows the server's rank rule
/// (forward only), so a late mark can never move it back.
pub type LocalStatus = State;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InboxMail {
    pub id: String,
    pub from: String,
    pub to: String,
    pub kind: Kind,
    pub subject: String,
    pub body: String,
    pub urgent: bool,
    pub expires_at: Option<Millis>,
    pub in_reply_to: Option<String>,
    pub auto: bool,
    pub hop: i64,
    pub created_at: Millis,
    pub broadcast_of: Option<String>,
    pub received_at: Millis,
    pub confirmed_at: Option<Millis>,
    pub status: LocalStatus,
    pub status_at: Millis,
    pub status_by: Option<String>,
    pub fail_reason: Option<String>,
    /// This mail answers mail this PC sent.
    pub reply_to_mine: bool,
    pub presented_at: Option<Millis>,
    pub presented_session: Option<String>,
    pub notified_at: Option<Millis>,
    /// Mail sent to several addresses: every address, in the sender's order
    /// (this copy's own among them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recipients: Option<Vec<String>>,
    /// Every state change, who and when, as recorded (store/src/timeline.rs):
    /// filled by `inbox_get` and `inbox_list`, empty from the other reads.
    pub timeline: Vec<TimelineEntry>,
}

impl InboxMail {
    /// The kind that decides ranking and notification (field or subject tag).
    pub fn effective_kind(&self) -> Kind {
        Kind::classify(self.kind, &self.subject)
    }
    pub fn is_expired_at(&self, now: Millis) -> bool {
        self.status == State::Expired || (!self.status.is_final() && self.expires_at.is_some_and(|e| e <= now))
    }
    /// Decision requests, work requests and urgent mail get a notification.
    pub fn wants_notification(&self) -> bool {
        self.urgent || matches!(self.effective_kind(), Kind::Decision | Kind::Request)
    }
}

pub(crate) const COLS: &str = "id, from_pc, to_pc, kind, subject, body, urgent, expires_at, in_reply_to, auto, hop, \
     created_at, broadcast_of, received_at, confirmed_at, status, status_at, status_by, fail_reason, \
     reply_to_mine, presented_at, presented_session, notified_at, recipients";

pub(crate) fn from_row(r: &Row) -> rusqlite::Result<InboxMail> {
    let kind: String = r.get(3)?;
    let status: String = r.get(15)?;
    Ok(InboxMail {
        id: r.get(0)?,
        from: r.get(1)?,
        to: r.get(2)?,
        kind: Kind::parse(&kind).unwrap_or_default(),
        subject: r.get(4)?,
        body: r.get(5)?,
        urgent: r.get(6)?,
        expires_at: r.get(7)?,
        in_reply_to: r.get(8)?,
        auto: r.get(9)?,
        hop: r.get(10)?,
        created_at: r.get(11)?,
        broadcast_of: r.get(12)?,
        received_at: r.get(13)?,
        confirmed_at: r.get(14)?,
        status: State::parse(&status).unwrap_or(State::New),
        status_at: r.get(16)?,
        status_by: r.get(17)?,
        fail_reason: r.get(18)?,
        reply_to_mine: r.get(19)?,
        presented_at: r.get(20)?,
        presented_session: r.get(21)?,
        notified_at: r.get(22)?,
        recipients: r.get::<_, Option<String>>(23)?.and_then(|j| serde_json::from_str(&j).ok()),
        timeline: vec![],
    })
}

/// Stores a mail fetched from the server. Returns false when it was already
/// stored (a re-delivery after a lost confirm): dedup by id.
pub fn insert_received(tx: &Connection, mail: &Mail, now: Millis) -> Result<bool> {
    let reply_to_mine = match &mail.in_reply_to {
        Some(orig) => tx.row("SELECT 1 FROM sent WHERE id = ?1", [orig], |_| Ok(())).optional()?.is_some(),
        None => false,
    };
    let n = tx.exec(
        "INSERT OR IGNORE INTO inbox (id, from_pc, to_pc, kind, subject, body, urgent, expires_at, in_reply_to,
            auto, hop, created_at, broadcast_of, received_at, status, status_at, reply_to_mine, recipients)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, 'new', ?14, ?15, ?16)",
        params![
            mail.id,
            mail.from,
            mail.to,
            mail.kind.as_str(),
            mail.subject,
            mail.body,
            mail.urgent,
            mail.expires_at,
            mail.in_reply_to,
            mail.auto,
            mail.hop,
            mail.created_at,
            mail.broadcast_of,
            now,
            reply_to_mine,
            mail.recipients.as_ref().map(|r| serde_json::to_string(r).unwrap_or_default()),
        ],
    )?;
    if n == 1 {
        // The server's own record of it so far (its creation; more with an old re-delivery).
        if mail.timeline.is_empty() {
            let e = TimelineEntry { state: State::New, at: mail.created_at, by: mail.from.clone(), note: None };
            timeline::record(tx, &mail.id, &e, Recorded::Server)?;
        }
        for e in &mail.timeline {
            timeline::record(tx, &mail.id, e, Recorded::Server)?;
        }
    }
    Ok(n == 1)
}

/// Moves a mail's local status forward (never back). Returns the status after.
pub fn advance(tx: &Connection, id: &str, target: State, at: Millis, by: &str, reason: Option<&str>) -> Result<State> {
    // Cached statements: the hook advances several mails per run.
    let cur: Option<String> =
        tx.prepare_cached("SELECT status FROM inbox WHERE id = ?1")?.query_row([id], |r| r.get(0)).optional()?;
    let cur = cur.ok_or_else(|| StoreError::NotFound(id.to_string()))?;
    let cur = State::parse(&cur).ok_or_else(|| StoreError::Corrupt(format!("status {cur:?} of {id}")))?;
    match cur.advance(target) {
        None => Ok(cur),
        Some(next) => {
            tx.prepare_cached(
                "UPDATE inbox SET status = ?2, status_at = ?3, status_by = ?4, fail_reason = COALESCE(?5, fail_reason) WHERE id = ?1",
            )?
            .execute(params![id, next.as_str(), at, by, reason])?;
            // The note the server will record: the fail reason, `ack` for an ack.
            let note = match (next, reason) {
                (State::Done, None) => Some("ack"),
                (_, r) => r,
            };
            timeline::record_local(tx, id, next, at, by, note)?;
            Ok(next)
        }
    }
}

impl Store {
    pub fn inbox_get(&self, id: &str) -> Result<Option<InboxMail>> {
        let m = self.conn.row(&format!("SELECT {COLS} FROM inbox WHERE id = ?1"), [id], from_row).optional()?;
        match m {
            Some(mut m) => {
                m.timeline = self.timeline(&m.id)?;
                Ok(Some(m))
            }
            None => Ok(None),
        }
    }

    /// Ids stored but not yet confirmed to the server (they go with the next poll).
    pub fn unconfirmed_ids(&self, limit: usize) -> Result<Vec<String>> {
        let mut st = self
            .conn
            .prepare_cached("SELECT id FROM inbox WHERE confirmed_at IS NULL ORDER BY received_at LIMIT ?1")?;
        let ids = st.query_map([limit as i64], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
        Ok(ids)
    }

    pub fn mark_confirmed(&mut self, ids: &[String], now: Millis) -> Result<()> {
        // Most answers confirm nothing: no write transaction for it.
        if ids.is_empty() {
            return Ok(());
        }
        self.write(|tx| {
            let mut st =
                tx.prepare_cached("UPDATE inbox SET confirmed_at = ?2 WHERE id = ?1 AND confirmed_at IS NULL")?;
            // This PC's record of `delivered` until the server's own (the received feed) replaces it.
            let mut tl = tx.prepare_cached(
                "INSERT OR IGNORE INTO timeline (mail_id, state, at, by, note, recorded)
                 SELECT id, 'delivered', ?2, to_pc, NULL, 'local' FROM inbox WHERE id = ?1",
            )?;
            for id in ids {
                if st.execute(params![id, now])? == 1 {
                    tl.execute(params![id, now])?;
                }
            }
            Ok(())
        })
    }

    /// Inbox listing, newest first. `statuses` empty means all.
    pub fn inbox_list(&self, statuses: &[State], limit: usize) -> Result<Vec<InboxMail>> {
        self.inbox_page(statuses, limit, None, true)
    }

    /// One page of the inbox, newest first: at most `limit` mails older than
    /// `before` (a mail id from the previous page), or the newest without it.
    /// The cursor is the `before` mail's (created_at, id), not an offset, so
    /// mail arriving between two pages neither repeats nor skips one; the
    /// `before` mail may have changed status meanwhile, it only marks the place.
    /// `statuses` empty means all; `timelines` false leaves each timeline
    /// empty (a summary needs none, and they cost a query per mail).
    pub fn inbox_page(
        &self,
        statuses: &[State],
        limit: usize,
        before: Option<&str>,
        timelines: bool,
    ) -> Result<Vec<InboxMail>> {
        let mut conds = vec![];
        if !statuses.is_empty() {
            let list: Vec<String> = statuses.iter().map(|s| format!("'{}'", s.as_str())).collect();
            conds.push(format!("status IN ({})", list.join(",")));
        }
        let cursor: Option<(Millis, String)> = match before {
            Some(id) => {
                let at: Option<Millis> =
                    self.conn.row("SELECT created_at FROM inbox WHERE id = ?1", [id], |r| r.get(0)).optional()?;
                let at = at.ok_or_else(|| StoreError::NotFound(id.to_string()))?;
                conds.push("(created_at < ?2 OR (created_at = ?2 AND id < ?3))".into());
                Some((at, id.to_string()))
            }
            None => None,
        };
        let filter = if conds.is_empty() { String::new() } else { format!("WHERE {}", conds.join(" AND ")) };
        let mut st = self
            .conn
            .prepare_cached(&format!("SELECT {COLS} FROM inbox {filter} ORDER BY created_at DESC, id DESC LIMIT ?1"))?;
        let limit = limit.min(i64::MAX as usize) as i64;
        let mut rows: Vec<InboxMail> = match &cursor {
            Some((at, id)) => st.query_map(params![limit, at, id], from_row)?.collect::<rusqlite::Result<_>>()?,
            None => st.query_map(params![limit], from_row)?.collect::<rusqlite::Result<_>>()?,
        };
        if timelines {
            for m in &mut rows {
                m.timeline = self.timeline(&m.id)?;
            }
        }
        Ok(rows)
    }

    pub fn inbox_counts(&self, now: Millis) -> Result<InboxCounts> {
        let mut c = InboxCounts::default();
        let mut st =
            self.conn.prepare_cached("SELECT kind, subject, urgent, expires_at FROM inbox WHERE status = 'new'")?;
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            let kind =
                Kind::classify(Kind::parse(&r.get::<_, String>(0)?).unwrap_or_default(), &r.get::<_, String>(1)?);
            let urgent: bool = r.get(2)?;
            let exp: Option<Millis> = r.get(3)?;
            if exp.is_some_and(|e| e <= now) {
                continue;
            }
            c.unread += 1;
            if kind == Kind::Decision {
                c.decisions += 1;
            }
            if urgent {
                c.urgent += 1;
            }
        }
        Ok(c)
    }

    /// Newly stored mail that wants a notification and has none yet, claimed
    /// atomically so two pollers never notify the same id twice.
    /// Most cycles find nothing to claim: the claim begins as a read and
    /// takes the write lock only when it stamps a row (a hook waiting for
    /// that lock would otherwise wait for every cycle's look).
    pub fn claim_notifications(&mut self, now: Millis, limit: usize) -> Result<Vec<InboxMail>> {
        self.write_if_needed(|tx| {
            let rows: Vec<InboxMail> = {
                let mut st = tx.prepare_cached(&format!(
                    "SELECT {COLS} FROM inbox WHERE notified_at IS NULL AND status = 'new' ORDER BY created_at LIMIT ?1"
                ))?;
                let v = st.query_map([limit as i64 * 4], from_row)?.collect::<rusqlite::Result<Vec<_>>>()?;
                v
            };
            let mut out = vec![];
            for m in rows {
                // Every row gets a stamp so plain notes are not re-scanned each cycle.
                tx.exec("UPDATE inbox SET notified_at = ?2 WHERE id = ?1", params![m.id, now])?;
                if m.wants_notification() && out.len() < limit {
                    out.push(m);
                }
            }
            Ok(out)
        })
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct InboxCounts {
    pub unread: i64,
    pub decisions: i64,
    pub urgent: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[InboxMail]) -> Vec<String> {
        v.iter().map(|m| m.id.clone()).collect()
    }

    #[test]
    fn paging_lists_every_mail_once_in_the_order_of_one_list() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("store.db")).unwrap();
        // Several mails share a created_at, so the id has to break the tie.
        s.write(|tx| {
            for i in 0..23 {
                insert_received(tx, &crate::test_mail(&format!("m{i:02}"), 1_000 + (i / 3) as Millis), 5)?;
            }
            Ok(())
        })
        .unwrap();
        s.write(|tx| advance(tx, "m04", State::Done, 6, "pc-b", None).map(|_| ())).unwrap();
        for statuses in [&[][..], &[State::New, State::Seen][..]] {
            let whole = ids(&s.inbox_list(statuses, 100).unwrap());
            assert_eq!(whole.len(), if statuses.is_empty() { 23 } else { 22 });
            for size in [1, 2, 5, 22, 23] {
                let mut paged = vec![];
                let mut before: Option<String> = None;
                loop {
                    let page = s.inbox_page(statuses, size, before.as_deref(), false).unwrap();
                    assert!(page.len() <= size);
                    assert!(page.iter().all(|m| m.timeline.is_empty()), "no timelines asked for");
                    let Some(last) = page.last() else { break };
                    before = Some(last.id.clone());
                    paged.extend(ids(&page));
                }
                assert_eq!(paged, whole, "pages of {size}, statuses {statuses:?}");
            }
        }
        // The newest first, the tie broken by id.
        assert_eq!(ids(&s.inbox_page(&[], 3, None, true).unwrap()), ["m22", "m21", "m20"]);
        assert!(!s.inbox_page(&[], 1, None, true).unwrap()[0].timeline.is_empty());
        // A cursor mail that left the filter still marks the place.
        assert_eq!(ids(&s.inbox_page(&[State::New], 2, Some("m04"), false).unwrap()), ["m03", "m02"]);
    }

    #[test]
    fn an_unknown_cursor_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("store.db")).unwrap();
        match s.inbox_page(&[], 5, Some("mail-nope"), false) {
            Err(StoreError::NotFound(id)) => assert_eq!(id, "mail-nope"),
            other => panic!("{other:?}"),
        }
    }
}
