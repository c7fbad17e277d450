//! Every state change of received and sent mail, with who and when (issue
//! 16: recorded, not rebuilt). The server's record (from the updates feeds or
//! `status`) replaces this PC's own; this PC's own stands until it comes, so
//! a mark made offline shows at once. `pcmail status`, `read`, `inbox --json`
//! and the tray window all read this one table.

use crate::{Result, Store};
use pcmail_core::{Mail, Millis, ReceivedUpdate, State, TimelineEntry};
use rusqlite::{params, Connection};

/// Whose record an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// The server's own: its clock, its clamping, its actor.
    Server,
    /// This PC's, written when the change happened here; the server's replaces it.
    Local,
}

impl Recorded {
    fn as_str(self) -> &'static str {
        match self {
            Recorded::Server => "server",
            Recorded::Local => "local",
        }
    }
}

/// Writes one entry. A server entry replaces whatever is there (keeping a
/// note it lacks: the sent feed carries none); a local one never replaces a
/// server one.
pub fn record(tx: &Connection, id: &str, e: &TimelineEntry, recorded: Recorded) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO timeline (mail_id, state, at, by, note, recorded) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (mail_id, state) DO UPDATE SET at = excluded.at, by = excluded.by,
             note = COALESCE(excluded.note, timeline.note),
             recorded = excluded.recorded
         WHERE excluded.recorded = 'server' OR timeline.recorded = 'local'",
    )?
    .execute(params![id, e.state.as_str(), e.at, e.by, e.note, recorded.as_str()])?;
    Ok(())
}

/// The server says a received mail reached `e.state`: recorded with its time,
/// and the inbox follows. A final state the server recorded is the truth: a
/// different final state this PC predicted (an `ack` the server answered
/// after the sweep had expired the mail) gives way to it. `delivered` is only
/// recorded: the inbox keeps `new` for "stored here, not seen yet".
pub fn apply_server_entry(tx: &Connection, id: &str, e: &TimelineEntry) -> Result<bool> {
    let cur: Option<String> = {
        use rusqlite::OptionalExtension;
        tx.prepare_cached("SELECT status FROM inbox WHERE id = ?1")?.query_row([id], |r| r.get(0)).optional()?
    };
    // Not (or no longer) stored here: nothing to hang it on.
    let Some(cur) = cur else { return Ok(false) };
    record(tx, id, e, Recorded::Server)?;
    let cur = State::parse(&cur).unwrap_or(State::New);
    if e.state.is_final() {
        tx.prepare_cached(
            "DELETE FROM timeline WHERE mail_id = ?1 AND state IN ('done', 'failed', 'expired') AND state <> ?2 AND recorded = 'local'",
        )?
        .execute(params![id, e.state.as_str()])?;
        if cur != e.state && !(cur.is_final() && is_server_final(tx, id, cur)?) {
            set_status(tx, id, e)?;
        }
    } else if e.state != State::Delivered && cur.advance(e.state).is_some() {
        set_status(tx, id, e)?;
    }
    Ok(true)
}

fn is_server_final(tx: &Connection, id: &str, s: State) -> Result<bool> {
    let n: i64 = tx
        .prepare_cached("SELECT count(*) FROM timeline WHERE mail_id = ?1 AND state = ?2 AND recorded = 'server'")?
        .query_row(params![id, s.as_str()], |r| r.get(0))?;
    Ok(n > 0)
}

fn set_status(tx: &Connection, id: &str, e: &TimelineEntry) -> Result<()> {
    let reason = if e.state == State::Failed { e.note.as_deref() } else { None };
    tx.prepare_cached(
        "UPDATE inbox SET status = ?2, status_at = ?3, status_by = ?4, fail_reason = COALESCE(?5, fail_reason) WHERE id = ?1",
    )?
    .execute(params![id, e.state.as_str(), e.at, e.by, reason])?;
    Ok(())
}

const RANK_ORDER: &str = "CASE state WHEN 'new' THEN 0 WHEN 'delivered' THEN 1 WHEN 'seen' THEN 2 ELSE 3 END, at";

fn entry_row(r: &rusqlite::Row) -> rusqlite::Result<TimelineEntry> {
    let state: String = r.get(0)?;
    Ok(TimelineEntry {
        state: State::parse(&state).unwrap_or(State::New),
        at: r.get(1)?,
        by: r.get(2)?,
        note: r.get(3)?,
    })
}

impl Store {
    /// One mail's recorded timeline, in state order (the order it happened).
    pub fn timeline(&self, id: &str) -> Result<Vec<TimelineEntry>> {
        let mut st = self.conn.prepare_cached(&format!(
            "SELECT state, at, by, note FROM timeline WHERE mail_id = ?1 ORDER BY {RANK_ORDER}"
        ))?;
        let rows = st.query_map([id], entry_row)?.collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    /// Applies the poll's `receivedUpdates` (the server's record of mail
    /// this PC received). Returns how many named a mail stored here.
    pub fn apply_received_updates(&mut self, updates: &[ReceivedUpdate]) -> Result<usize> {
        if updates.is_empty() {
            return Ok(0);
        }
        self.write(|tx| {
            let mut n = 0;
            for u in updates {
                let e = TimelineEntry { state: u.state, at: u.at, by: u.by.clone(), note: u.note.clone() };
                if apply_server_entry(tx, &u.id, &e)? {
                    n += 1;
                }
            }
            Ok(n)
        })
    }

    /// The server's whole answer (`status`) for a mail this PC received or sent.
    pub fn apply_status_timeline(&mut self, m: &Mail) -> Result<()> {
        self.write(|tx| {
            for e in &m.timeline {
                if !apply_server_entry(tx, &m.id, e)? {
                    // A sent mail (or not stored here): the entries only.
                    let sent: bool = tx
                        .prepare_cached("SELECT count(*) FROM sent WHERE id = ?1")?
                        .query_row([&m.id], |r| r.get::<_, i64>(0))?
                        > 0;
                    if sent {
                        record(tx, &m.id, e, Recorded::Server)?;
                    }
                }
            }
            Ok(())
        })
    }
}

/// When the server recorded nothing yet for a mail this PC has: the local
/// entry, stamped now.
pub fn record_local(tx: &Connection, id: &str, state: State, at: Millis, by: &str, note: Option<&str>) -> Result<()> {
    record(tx, id, &TimelineEntry { state, at, by: by.to_string(), note: note.map(str::to_string) }, Recorded::Local)
}
