//! The hook's reads and writes, shaped so its cost does not grow with the
//! backlog: each (rank, status) pair is read newest first with a LIMIT over
//! the `inbox_hook` index, bodies are cut in SQL, and counts come from the
//! index alone. Everything runs inside the caller's IMMEDIATE transaction, so
//! two hooks of one session never choose the same mail.

use crate::Result;
use pcmail_core::present::Category;
use pcmail_core::{Kind, Millis, State};
use rusqlite::{params, Connection, OptionalExtension};

/// The `hook_rank` column (store migration 3, kept by triggers). Ranks 0–2 never wait for
/// the backlog bound; 3–5 do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HookRank {
    Decision = 0,
    UrgentRequest = 1,
    UrgentNote = 2,
    Request = 3,
    ReplyToMine = 4,
    Note = 5,
}

impl HookRank {
    pub const ALL: [HookRank; 6] = [
        HookRank::Decision,
        HookRank::UrgentRequest,
        HookRank::UrgentNote,
        HookRank::Request,
        HookRank::ReplyToMine,
        HookRank::Note,
    ];

    /// The same rule as the SQL of store migration 3, from the core's classification.
    pub fn of(kind: Kind, subject: &str, urgent: bool, reply_to_mine: bool) -> HookRank {
        match (Kind::classify(kind, subject), urgent) {
            (Kind::Decision, _) => HookRank::Decision,
            (Kind::Request, true) => HookRank::UrgentRequest,
            (Kind::Note, true) => HookRank::UrgentNote,
            (Kind::Request, false) => HookRank::Request,
            (Kind::Note, false) if reply_to_mine => HookRank::ReplyToMine,
            (Kind::Note, false) => HookRank::Note,
        }
    }

    /// The hook's presentation category (order and budget).
    pub fn category(self) -> Category {
        match self {
            HookRank::Decision => Category::Decision,
            HookRank::UrgentRequest | HookRank::UrgentNote | HookRank::Request => Category::RequestOrUrgent,
            HookRank::ReplyToMine => Category::ReplyToMine,
            HookRank::Note => Category::Other,
        }
    }

    /// Decision and urgent mail is never held back by the backlog bound.
    pub fn may_wait(self) -> bool {
        self >= HookRank::Request
    }

    /// Requests stay open (shown to every new session) until answered; notes
    /// only until some session has seen them.
    pub fn open_statuses(self) -> &'static [State] {
        match self {
            HookRank::Decision | HookRank::UrgentRequest | HookRank::Request => &[State::New, State::Seen],
            _ => &[State::New],
        }
    }
}

/// One open mail the hook may show, body already cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookMail {
    pub id: String,
    pub from: String,
    pub kind: Kind,
    pub urgent: bool,
    pub reply_to_mine: bool,
    pub subject: String,
    pub body: String,
    pub created_at: Millis,
    pub rank: HookRank,
}

// `CROSS JOIN` keeps `presented` (this session's rows, few) as the outer
// loop: without statistics SQLite may otherwise walk the whole backlog in
// `inbox_hook` and probe `presented` for each row.

/// What one (rank, status) pair holds for a session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PairView {
    /// Newest first, at most `limit`, not yet shown to the session, not expired.
    pub mails: Vec<HookMail>,
    /// Open, not expired, not shown to the session, including `mails`.
    pub waiting: usize,
}

/// Counts per (rank, status) pair, read once per hook run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PairCounts(Vec<((HookRank, State), usize)>);

impl PairCounts {
    pub fn get(&self, rank: HookRank, status: State) -> usize {
        self.0.iter().find(|(k, _)| *k == (rank, status)).map_or(0, |(_, n)| *n)
    }
    fn read(
        st: &mut rusqlite::CachedStatement,
        p: impl rusqlite::Params,
        fixed_status: Option<State>,
    ) -> Result<PairCounts> {
        let mut out = vec![];
        let mut q = st.query(p)?;
        while let Some(r) = q.next()? {
            let rank: i64 = r.get(0)?;
            let status = match fixed_status {
                Some(s) => s,
                None => State::parse(&r.get::<_, String>(1)?).unwrap_or(State::New),
            };
            let n: i64 = r.get(2)?;
            if let Some(rank) = HookRank::ALL.get(rank as usize) {
                out.push(((*rank, status), n as usize));
            }
        }
        Ok(PairCounts(out))
    }
}

/// Open mail past its expiry, per pair: from the small partial index of mails
/// that have an expiry (two range scans: `new` and `seen`).
pub fn expired_open(tx: &Connection, now: Millis) -> Result<PairCounts> {
    let mut st = tx.prepare_cached(
        "SELECT hook_rank, NULL, count(*) FROM inbox WHERE status = ?1 AND expires_at <= ?2 GROUP BY hook_rank",
    )?;
    let mut all = PairCounts::read(&mut st, params![State::New.as_str(), now], Some(State::New))?;
    all.0.extend(PairCounts::read(&mut st, params![State::Seen.as_str(), now], Some(State::Seen))?.0);
    Ok(all)
}

/// Mail shown to this session before and not expired, per pair. Every
/// prompt asks it of all the mail its session was ever shown: the facts it
/// needs of each come from the small index `inbox_shown_facts`, never from
/// the mail's row (a page of the file each, bodies and all).
const SHOWN_TO_SESSION_SQL: &str = "SELECT i.hook_rank, i.status, count(*)
     FROM presented p CROSS JOIN inbox i INDEXED BY inbox_shown_facts ON i.id = p.id
     WHERE p.session = ?1 AND (i.expires_at IS NULL OR i.expires_at > ?2)
     GROUP BY i.hook_rank, i.status";

pub fn shown_to_session(tx: &Connection, session: &str, now: Millis) -> Result<PairCounts> {
    let mut st = tx.prepare_cached(SHOWN_TO_SESSION_SQL)?;
    PairCounts::read(&mut st, params![session, now], None)
}

/// Reads up to `limit` mails of one (rank, status) pair not yet shown to
/// `session`, newest first, and how many wait in all; `expired` and `shown`
/// are this pair's counts from `expired_open` and `shown_to_session`.
#[allow(clippy::too_many_arguments)]
pub fn pair_view(
    tx: &Connection,
    rank: HookRank,
    status: State,
    session: &str,
    now: Millis,
    body_chars: usize,
    limit: usize,
    expired: usize,
    shown: usize,
) -> Result<PairView> {
    let mut view = PairView::default();
    // count(*) over the index prefix decodes no column.
    let total: i64 = tx
        .prepare_cached("SELECT count(*) FROM inbox WHERE hook_rank = ?1 AND status = ?2")?
        .query_row(params![rank as i64, status.as_str()], |r| r.get(0))?;
    // Nothing left once the expired and the shown are counted out: the
    // caught-up prompt's usual case, where nothing more is read.
    if total as usize <= expired + shown {
        return Ok(view);
    }
    // Mail to a name another session holds is not this session's:
    // a read of the small partial index of mail to names.
    let others: i64 = tx
        .prepare_cached(
            "SELECT count(*) FROM inbox INDEXED BY inbox_named WHERE hook_rank = ?1 AND status = ?2
               AND to_session IS NOT NULL AND to_session <> ?3 AND (expires_at IS NULL OR expires_at > ?4)",
        )?
        .query_row(params![rank as i64, status.as_str(), session, now], |r| r.get(0))?;
    view.waiting = (total as usize).saturating_sub(expired + shown + others as usize);
    if limit == 0 || view.waiting == 0 {
        return Ok(view);
    }
    let mut st = tx.prepare_cached(
        "SELECT id, from_pc, kind, urgent, reply_to_mine, subject, substr(body, 1, ?6), created_at
         FROM inbox i INDEXED BY inbox_hook
         WHERE hook_rank = ?1 AND status = ?2 AND (expires_at IS NULL OR expires_at > ?3)
           AND NOT EXISTS (SELECT 1 FROM presented p WHERE p.session = ?4 AND p.id = i.id)
           AND (to_session IS NULL OR to_session = ?4)
         ORDER BY created_at DESC, id DESC LIMIT ?5",
    )?;
    let mut q = st.query(params![rank as i64, status.as_str(), now, session, limit as i64, body_chars as i64])?;
    while let Some(r) = q.next()? {
        let kind: String = r.get(2)?;
        view.mails.push(HookMail {
            id: r.get(0)?,
            from: r.get(1)?,
            kind: Kind::parse(&kind).unwrap_or_default(),
            urgent: r.get(3)?,
            reply_to_mine: r.get(4)?,
            subject: r.get(5)?,
            body: r.get(6)?,
            created_at: r.get(7)?,
            rank,
        });
    }
    Ok(view)
}

/// Mail that may wait (ranks 3–5) shown to this session after `since`: what
/// the backlog bound counts.
/// By the same index as [`SHOWN_TO_SESSION_SQL`].
const MAY_WAIT_SHOWN_SINCE_SQL: &str = "SELECT count(*)
     FROM presented p CROSS JOIN inbox i INDEXED BY inbox_shown_facts ON i.id = p.id
     WHERE p.session = ?1 AND p.at > ?2 AND i.hook_rank >= ?3";

pub fn may_wait_shown_since(tx: &Connection, session: &str, since: Millis) -> Result<usize> {
    let n: i64 = tx
        .prepare_cached(MAY_WAIT_SHOWN_SINCE_SQL)?
        .query_row(params![session, since, HookRank::Request as i64], |r| r.get(0))?;
    Ok(n as usize)
}

/// Records that `session` was shown `id` at `now`.
pub fn record_presented(tx: &Connection, session: &str, id: &str, now: Millis) -> Result<()> {
    tx.prepare_cached("INSERT OR IGNORE INTO presented (session, id, at) VALUES (?1, ?2, ?3)")?
        .execute(params![session, id, now])?;
    tx.prepare_cached("UPDATE inbox SET presented_at = ?2, presented_session = ?3 WHERE id = ?1")?
        .execute(params![id, now, session])?;
    Ok(())
}

/// A meta value read inside the transaction.
pub fn meta_i64(tx: &Connection, key: &str) -> Result<Option<i64>> {
    let v: Option<String> =
        tx.prepare_cached("SELECT value FROM meta WHERE key = ?1")?.query_row([key], |r| r.get(0)).optional()?;
    Ok(v.and_then(|v| v.parse().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{inbox, Store};
    use pcmail_core::{Mail, DECISION_TAG, REQUEST_TAG};

    fn mail(id: &str, kind: Kind, subject: &str, urgent: bool, created_at: Millis, expires_at: Option<Millis>) -> Mail {
        serde_json::from_value(serde_json::json!({
            "id": id, "from": "pc-a", "to": "pc-b", "kind": kind.as_str(), "subject": subject,
            "body": "b".repeat(1000), "urgent": urgent, "expiresAt": expires_at, "createdAt": created_at, "state": "new",
        }))
        .unwrap()
    }

    /// What a prompt asks of the mail its session was shown is read from
    /// the index alone: the mail's own rows (a page each) stay unread.
    #[test]
    fn the_shown_mails_facts_come_from_the_index_alone() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("store.db")).unwrap();
        let plan = |s: &Store, sql: &str| -> String {
            let mut st = s.conn().prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let rows: Vec<String> =
                st.query_map(params!["s", 0], |r| r.get(3)).unwrap().collect::<rusqlite::Result<_>>().unwrap();
            rows.join("; ")
        };
        for sql in [SHOWN_TO_SESSION_SQL, MAY_WAIT_SHOWN_SINCE_SQL] {
            let p = plan(&s, &sql.replace("?3", "0"));
            assert!(p.contains("COVERING INDEX inbox_shown_facts"), "{p}");
        }
        // And the answers: two mails shown, one of them expired since.
        s.write(|tx| {
            inbox::insert_received(tx, &mail("m1", Kind::Request, "x", false, 1, None), 1)?;
            inbox::insert_received(tx, &mail("m2", Kind::Note, "y", false, 2, Some(50)), 2)?;
            record_presented(tx, "s", "m1", 10)?;
            record_presented(tx, "s", "m2", 10)?;
            Ok(())
        })
        .unwrap();
        s.write(|tx| {
            let shown = shown_to_session(tx, "s", 100)?;
            assert_eq!(shown.get(HookRank::Request, State::New), 1);
            assert_eq!(shown.get(HookRank::Note, State::New), 0, "expired at 50");
            assert_eq!(shown_to_session(tx, "s", 40)?.get(HookRank::Note, State::New), 1);
            assert_eq!(may_wait_shown_since(tx, "s", 5)?, 2);
            assert_eq!(may_wait_shown_since(tx, "s", 10)?, 0);
            assert_eq!(may_wait_shown_since(tx, "other", 5)?, 0);
            Ok(())
        })
        .unwrap();
    }

    #[test]
    fn sql_rank_matches_the_core_rule() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("store.db")).unwrap();
        let mut cases = vec![];
        let mut n = 0;
        for kind in [Kind::Note, Kind::Request, Kind::Decision] {
            for subject in ["plain", DECISION_TAG, REQUEST_TAG] {
                for urgent in [false, true] {
                    for reply in [false, true] {
                        n += 1;
                        cases.push((format!("m{n}"), kind, subject, urgent, reply));
                    }
                }
            }
        }
        s.write(|tx| {
            for (id, kind, subject, urgent, reply) in &cases {
                inbox::insert_received(tx, &mail(id, *kind, subject, *urgent, 1, None), 1)?;
                tx.execute("UPDATE inbox SET reply_to_mine = ?2 WHERE id = ?1", params![id, reply])?;
            }
            Ok(())
        })
        .unwrap();
        for (id, kind, subject, urgent, reply) in &cases {
            let sql: i64 = s.conn().query_row("SELECT hook_rank FROM inbox WHERE id = ?1", [id], |r| r.get(0)).unwrap();
            assert_eq!(
                sql,
                HookRank::of(*kind, subject, *urgent, *reply) as i64,
                "{id} {kind:?} {subject} {urgent} {reply}"
            );
        }
    }

    #[test]
    fn a_pair_is_read_newest_first_with_a_limit_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("store.db")).unwrap();
        s.write(|tx| {
            for i in 0..50 {
                let exp = (i % 10 == 0).then_some(500);
                inbox::insert_received(tx, &mail(&format!("n{i:02}"), Kind::Note, "s", false, i, exp), 1)?;
            }
            record_presented(tx, "s1", "n49", 2)?;
            Ok(())
        })
        .unwrap();
        let v = s
            .write(|tx| {
                let expired = expired_open(tx, 1000)?.get(HookRank::Note, State::New);
                let shown = shown_to_session(tx, "s1", 1000)?.get(HookRank::Note, State::New);
                assert_eq!((expired, shown), (5, 1));
                pair_view(tx, HookRank::Note, State::New, "s1", 1000, 10, 2, expired, shown)
            })
            .unwrap();
        assert_eq!(v.mails.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), ["n48", "n47"]);
        assert_eq!(v.mails[0].body.chars().count(), 10, "body cut in SQL");
        assert_eq!(v.waiting, 50 - 5 - 1);
        let plan = |sql: &str| -> String {
            s.conn().query_row(&format!("EXPLAIN QUERY PLAN {sql}"), [], |r| r.get(3)).unwrap()
        };
        let p = plan("SELECT count(*) FROM inbox WHERE hook_rank = 5 AND status = 'new'");
        assert!(p.contains("COVERING INDEX inbox_hook "), "{p}");
        let p =
            plan("SELECT hook_rank, count(*) FROM inbox WHERE status = 'new' AND expires_at <= 7 GROUP BY hook_rank");
        assert!(p.contains("COVERING INDEX inbox_hook_expiring"), "{p}");
    }
}
