//! Leases on this PC: the session registry, this PC's own leases
//! (the process each one follows, releases queued for the poller), the
//! server's lease list kept as the guard cache, and lost leases to tell their
//! holder once. The hook reads and writes these inside its one transaction;
//! the poller and the CLI through `Store`.

use crate::Cached as _;
use crate::{Result, Store};
use pcmail_core::Millis;
use rusqlite::{params, Connection, OptionalExtension, Row};

/// Store meta: the lease list version the cache holds (the poll's `known`).
pub const LEASE_VERSION: &str = "lease_version";
/// Store meta: when the cache was last confirmed by the server (local ms).
pub const LEASE_CACHE_AT: &str = "lease_cache_at";

/// A Claude Code process and its current session id.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct SessionRow {
    pub session: String,
    pub pid: Option<i64>,
    pub pid_start: Option<i64>,
    pub cwd: Option<String>,
    pub repo: Option<String>,
    pub branch: Option<String>,
    pub started_at: Millis,
    pub last_prompt_at: Option<Millis>,
    pub ended_at: Option<Millis>,
    pub end_reason: Option<String>,
}

fn session_of(r: &Row) -> rusqlite::Result<SessionRow> {
    Ok(SessionRow {
        session: r.get(0)?,
        pid: r.get(1)?,
        pid_start: r.get(2)?,
        cwd: r.get(3)?,
        repo: r.get(4)?,
        branch: r.get(5)?,
        started_at: r.get(6)?,
        last_prompt_at: r.get(7)?,
        ended_at: r.get(8)?,
        end_reason: r.get(9)?,
    })
}

const SESSION_COLS: &str =
    "session, pid, pid_start, cwd, repo, branch, started_at, last_prompt_at, ended_at, end_reason";

pub fn session_get(conn: &Connection, session: &str) -> Result<Option<SessionRow>> {
    Ok(conn
        .prepare_cached(&format!("SELECT {SESSION_COLS} FROM sessions WHERE session = ?1"))?
        .query_row([session], session_of)
        .optional()?)
}

/// The newest session of a process (its current id).
pub fn session_of_process(conn: &Connection, pid: i64, pid_start: Option<i64>) -> Result<Option<SessionRow>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {SESSION_COLS} FROM sessions WHERE pid = ?1 AND pid_start IS ?2 ORDER BY started_at DESC LIMIT 1"
        ))?
        .query_row(params![pid, pid_start], session_of)
        .optional()?)
}

pub fn sessions_list(conn: &Connection, limit: usize) -> Result<Vec<SessionRow>> {
    let mut st =
        conn.prepare_cached(&format!("SELECT {SESSION_COLS} FROM sessions ORDER BY started_at DESC LIMIT ?1"))?;
    let rows = st.query_map([limit as i64], session_of)?.collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

/// The sessions not ended, newest first (the poller's live list starts here).
pub fn sessions_open(conn: &Connection, limit: usize) -> Result<Vec<SessionRow>> {
    let mut st = conn.prepare_cached(&format!(
        "SELECT {SESSION_COLS} FROM sessions WHERE ended_at IS NULL ORDER BY started_at DESC LIMIT ?1"
    ))?;
    let rows = st.query_map([limit as i64], session_of)?.collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

/// Sessions found gone without a SessionEnd (their process exited, or one
/// without a process went quiet) are ended with `reason`, so no poll looks
/// at them again. A prompt of the same id later records it anew (the hook
/// takes its full path for an ended session), which clears the end.
pub fn sessions_mark_gone(tx: &Connection, sessions: &[String], reason: &str, now: Millis) -> Result<()> {
    let mut st = tx
        .prepare_cached("UPDATE sessions SET ended_at = ?2, end_reason = ?3 WHERE session = ?1 AND ended_at IS NULL")?;
    for s in sessions {
        st.execute(params![s, now, reason])?;
    }
    Ok(())
}

/// Records a session (new, or seen again). The leases and untold losses of
/// the same process move to this id: `/clear` and `--resume` give a process
/// a new session id, and leases follow the process.
pub fn session_record(tx: &Connection, s: &SessionRow) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO sessions (session, pid, pid_start, cwd, repo, branch, started_at, last_prompt_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT(session) DO UPDATE SET
            pid = COALESCE(excluded.pid, pid), pid_start = COALESCE(excluded.pid_start, pid_start),
            cwd = COALESCE(excluded.cwd, cwd), repo = COALESCE(excluded.repo, repo),
            branch = COALESCE(excluded.branch, branch),
            last_prompt_at = COALESCE(excluded.last_prompt_at, last_prompt_at),
            ended_at = NULL, end_reason = NULL",
    )?
    .execute(params![s.session, s.pid, s.pid_start, s.cwd, s.repo, s.branch, s.started_at, s.last_prompt_at])?;
    if let Some(pid) = s.pid {
        tx.prepare_cached("UPDATE leases_mine SET session = ?1 WHERE pid = ?2 AND pid_start IS ?3 AND session != ?1")?
            .execute(params![s.session, pid, s.pid_start])?;
        tx.prepare_cached(
            "UPDATE lease_lost SET session = ?1 WHERE pid = ?2 AND pid_start IS ?3 AND session != ?1 AND told_at IS NULL",
        )?
        .execute(params![s.session, pid, s.pid_start])?;
    }
    Ok(())
}

/// Only the prompt time (the hook's cheap path when nothing else changed).
pub fn session_prompted(tx: &Connection, session: &str, now: Millis) -> Result<bool> {
    Ok(tx
        .prepare_cached("UPDATE sessions SET last_prompt_at = ?2 WHERE session = ?1")?
        .execute(params![session, now])?
        > 0)
}

/// SessionEnd: records the end; with `release`, queues the release of every
/// lease the session holds (the poller sends it). Returns how many were queued.
pub fn session_end(tx: &Connection, session: &str, reason: &str, now: Millis, release: bool) -> Result<usize> {
    tx.prepare_cached("UPDATE sessions SET ended_at = ?2, end_reason = ?3 WHERE session = ?1")?
        .execute(params![session, now, reason])?;
    if !release {
        return Ok(0);
    }
    let why = format!("session ended ({reason})");
    queue_release_where(tx, "session = ?1", params![session], &why, now)
}

fn queue_release_where(
    tx: &Connection,
    cond: &str,
    p: impl rusqlite::Params,
    reason: &str,
    now: Millis,
) -> Result<usize> {
    let ids: Vec<String> = {
        let mut st =
            tx.prepare_cached(&format!("SELECT claim_id FROM leases_mine WHERE release_queued_at IS NULL AND {cond}"))?;
        let ids = st.query_map(p, |r| r.get(0))?.collect::<rusqlite::Result<Vec<_>>>()?;
        ids
    };
    for id in &ids {
        queue_release(tx, id, reason, now)?;
    }
    Ok(ids.len())
}

/// One of this PC's leases.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MyLease {
    pub claim_id: String,
    pub resource: String,
    pub repo: String,
    pub description: String,
    pub files: Vec<String>,
    pub mode: String,
    pub session: String,
    /// The process the lease follows (None: a `--ttl` lease).
    pub pid: Option<i64>,
    pub pid_start: Option<i64>,
    pub ttl_expires_at: Option<Millis>,
    /// None while unconfirmed (claimed offline).
    pub fence: Option<i64>,
    /// `held` or `unconfirmed`.
    pub state: String,
    pub claimed_at: Millis,
    pub heartbeat_at: Option<Millis>,
    /// Set once a release is queued for the poller.
    pub release_reason: Option<String>,
    pub release_queued_at: Option<Millis>,
}

pub const MINE_HELD: &str = "held";
pub const MINE_UNCONFIRMED: &str = "unconfirmed";

const MINE_COLS: &str = "claim_id, resource, repo, description, files, mode, session, pid, pid_start, ttl_expires_at, fence, state, claimed_at, heartbeat_at, release_reason, release_queued_at";

fn mine_of(r: &Row) -> rusqlite::Result<MyLease> {
    let files: String = r.get(4)?;
    Ok(MyLease {
        claim_id: r.get(0)?,
        resource: r.get(1)?,
        repo: r.get(2)?,
        description: r.get(3)?,
        files: serde_json::from_str(&files).unwrap_or_default(),
        mode: r.get(5)?,
        session: r.get(6)?,
        pid: r.get(7)?,
        pid_start: r.get(8)?,
        ttl_expires_at: r.get(9)?,
        fence: r.get(10)?,
        state: r.get(11)?,
        claimed_at: r.get(12)?,
        heartbeat_at: r.get(13)?,
        release_reason: r.get(14)?,
        release_queued_at: r.get(15)?,
    })
}

pub fn mine_upsert(tx: &Connection, l: &MyLease) -> Result<()> {
    tx.exec(
        &format!("INSERT OR REPLACE INTO leases_mine ({MINE_COLS}) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16)"),
        params![
            l.claim_id,
            l.resource,
            l.repo,
            l.description,
            serde_json::to_string(&l.files).unwrap_or_else(|_| "[]".into()),
            l.mode,
            l.session,
            l.pid,
            l.pid_start,
            l.ttl_expires_at,
            l.fence,
            l.state,
            l.claimed_at,
            l.heartbeat_at,
            l.release_reason,
            l.release_queued_at
        ],
    )?;
    Ok(())
}

pub fn mine_list(conn: &Connection) -> Result<Vec<MyLease>> {
    let mut st = conn.prepare_cached(&format!("SELECT {MINE_COLS} FROM leases_mine ORDER BY claimed_at"))?;
    let rows = st.query_map([], mine_of)?.collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

/// Queues the release of one lease (the poller sends it); an unconfirmed
/// lease the server never granted is simply forgotten.
pub fn queue_release(tx: &Connection, claim_id: &str, reason: &str, now: Millis) -> Result<bool> {
    // The reason may quote a hook's own words (SessionEnd's `reason`): cleaned
    // to what the servers take, so the queued release is never refused for its text.
    let reason = pcmail_core::rules::clean_reason(reason);
    let reason = reason.as_str();
    let fence: Option<Option<i64>> = tx
        .prepare_cached("SELECT fence FROM leases_mine WHERE claim_id = ?1")?
        .query_row([claim_id], |r| r.get(0))
        .optional()?;
    match fence {
        None => Ok(false),
        Some(None) => {
            tx.prepare_cached("DELETE FROM leases_mine WHERE claim_id = ?1")?.execute([claim_id])?;
            Ok(true)
        }
        Some(Some(_)) => {
            tx.prepare_cached(
                "UPDATE leases_mine SET release_reason = ?2, release_queued_at = ?3, release_next_at = 0
                 WHERE claim_id = ?1 AND release_queued_at IS NULL",
            )?
            .execute(params![claim_id, reason, now])?;
            crate::want_push();
            Ok(true)
        }
    }
}

/// Queues the release of every lease that follows this process.
pub fn queue_release_of_process(
    tx: &Connection,
    pid: i64,
    pid_start: Option<i64>,
    reason: &str,
    now: Millis,
) -> Result<usize> {
    queue_release_where(tx, "pid = ?1 AND pid_start IS ?2", params![pid, pid_start], reason, now)
}

impl Store {
    pub fn leases_mine(&self) -> Result<Vec<MyLease>> {
        mine_list(&self.conn)
    }

    /// Releases due to be sent (queued, not in backoff).
    pub fn lease_releases_due(&self, now: Millis) -> Result<Vec<MyLease>> {
        let mut st = self.conn.prepare_cached(&format!(
            "SELECT {MINE_COLS} FROM leases_mine WHERE release_queued_at IS NOT NULL AND release_next_at <= ?1 ORDER BY release_queued_at"
        ))?;
        let rows = st.query_map([now], mine_of)?.collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// How many releases wait (the pusher's cheap check).
    pub fn lease_release_count(&self) -> Result<i64> {
        Ok(self
            .conn
            .prepare_cached("SELECT COUNT(*) FROM leases_mine WHERE release_queued_at IS NOT NULL")?
            .query_row([], |r| r.get(0))?)
    }

    pub fn lease_release_retry(&mut self, claim_id: &str, next_at: Millis) -> Result<()> {
        self.conn.exec(
            "UPDATE leases_mine SET release_attempts = release_attempts + 1, release_next_at = ?2 WHERE claim_id = ?1",
            params![claim_id, next_at],
        )?;
        Ok(())
    }

    pub fn lease_mine_put(&mut self, l: &MyLease) -> Result<()> {
        self.write(|tx| mine_upsert(tx, l))
    }

    pub fn lease_mine_remove(&mut self, claim_id: &str) -> Result<()> {
        self.conn.exec("DELETE FROM leases_mine WHERE claim_id = ?1", [claim_id])?;
        Ok(())
    }

    pub fn lease_queue_release(&mut self, claim_id: &str, reason: &str, now: Millis) -> Result<bool> {
        self.write(|tx| queue_release(tx, claim_id, reason, now))
    }

    /// A heartbeat the server answered for this lease.
    pub fn lease_renewed(&mut self, resource: &str, fence: i64, now: Millis) -> Result<()> {
        self.conn.exec(
            "UPDATE leases_mine SET heartbeat_at = ?3 WHERE resource = ?1 AND fence = ?2",
            params![resource, fence, now],
        )?;
        Ok(())
    }

    /// The server says a lease of this PC is gone (taken over, expired,
    /// released elsewhere): forget it and keep a line for its session.
    pub fn lease_lost(&mut self, lost: &LostLease) -> Result<()> {
        self.write(|tx| {
            let holder: Option<(String, Option<i64>, Option<i64>)> = tx
                .prepare_cached("SELECT session, pid, pid_start FROM leases_mine WHERE resource = ?1 AND fence = ?2")?
                .query_row(params![lost.resource, lost.fence], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()?;
            let Some((session, pid, pid_start)) = holder else { return Ok(()) };
            tx.exec("DELETE FROM leases_mine WHERE resource = ?1 AND fence = ?2", params![lost.resource, lost.fence])?;
            tx.exec(
                "INSERT OR IGNORE INTO lease_lost (resource, fence, session, pid, pid_start, at, taken_by, reason, event)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![lost.resource, lost.fence, session, pid, pid_start, lost.at, lost.taken_by, lost.reason, lost.event],
            )?;
            Ok(())
        })
    }

    /// Replaces the guard cache with the server's list of live leases.
    pub fn lease_cache_replace(&mut self, leases: &[CachedLease], version: i64, now: Millis) -> Result<()> {
        self.write(|tx| {
            tx.exec("DELETE FROM lease_cache", [])?;
            {
                let mut ins = tx.prepare_cached(
                    "INSERT OR REPLACE INTO lease_cache (resource, fence, repo, mode, holder_pc, holder_session, holder_name,
                     description, files, granted_at, heartbeat_at, stale, json) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)",
                )?;
                for l in leases {
                    ins.execute(params![
                        l.resource,
                        l.fence,
                        l.repo,
                        l.mode,
                        l.holder_pc,
                        l.holder_session,
                        l.holder_name,
                        l.description,
                        serde_json::to_string(&l.files).unwrap_or_else(|_| "[]".into()),
                        l.granted_at,
                        l.heartbeat_at,
                        l.stale,
                        l.json
                    ])?;
                }
            }
            set_meta(tx, LEASE_VERSION, version)?;
            set_meta(tx, LEASE_CACHE_AT, now)?;
            Ok(())
        })
    }

    /// The server confirmed the cache is current (its version did not move).
    pub fn lease_cache_confirmed(&mut self, now: Millis) -> Result<()> {
        self.meta_set_i64(LEASE_CACHE_AT, now)
    }

    pub fn lease_cache(&self) -> Result<Vec<CachedLease>> {
        cache_list(&self.conn, None)
    }

    /// True when this PC holds (or waits to release) any lease: the poller
    /// then polls at least every heartbeat period.
    pub fn holds_leases(&self) -> Result<bool> {
        Ok(self.conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM leases_mine)")?.query_row([], |r| r.get(0))?)
    }
}

fn set_meta(tx: &Connection, key: &str, v: i64) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
    )?
    .execute(params![key, v.to_string()])?;
    Ok(())
}

/// A lease in the guard cache (the server's list).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CachedLease {
    pub resource: String,
    pub fence: i64,
    pub repo: String,
    pub mode: String,
    pub holder_pc: String,
    pub holder_session: String,
    pub holder_name: Option<String>,
    pub description: String,
    pub files: Vec<String>,
    pub granted_at: Millis,
    pub heartbeat_at: Millis,
    pub stale: bool,
    /// The server's whole lease object.
    #[serde(skip)]
    pub json: String,
}

fn cached_of(r: &Row) -> rusqlite::Result<CachedLease> {
    let files: String = r.get(8)?;
    Ok(CachedLease {
        resource: r.get(0)?,
        fence: r.get(1)?,
        repo: r.get(2)?,
        mode: r.get(3)?,
        holder_pc: r.get(4)?,
        holder_session: r.get(5)?,
        holder_name: r.get(6)?,
        description: r.get(7)?,
        files: serde_json::from_str(&files).unwrap_or_default(),
        granted_at: r.get(9)?,
        heartbeat_at: r.get(10)?,
        stale: r.get(11)?,
        json: r.get(12)?,
    })
}

/// The cached leases (of one repo, when given), by resource.
pub fn cache_list(conn: &Connection, repo: Option<&str>) -> Result<Vec<CachedLease>> {
    const COLS: &str = "resource, fence, repo, mode, holder_pc, holder_session, holder_name, description, files, granted_at, heartbeat_at, stale, json";
    let rows = match repo {
        Some(r) => conn
            .prepare_cached(&format!("SELECT {COLS} FROM lease_cache WHERE repo = ?1 ORDER BY resource, fence"))?
            .query_map([r], cached_of)?
            .collect::<rusqlite::Result<Vec<_>>>()?,
        None => conn
            .prepare_cached(&format!("SELECT {COLS} FROM lease_cache ORDER BY resource, fence"))?
            .query_map([], cached_of)?
            .collect::<rusqlite::Result<Vec<_>>>()?,
    };
    Ok(rows)
}

/// Exclusive leases of one repo, with only what the guard needs (no JSON
/// of the whole lease, no sort: the hook's hot path).
pub fn cache_exclusive_in_repo(conn: &Connection, repo: &str) -> Result<Vec<CachedLease>> {
    let mut st = conn.prepare_cached(
        "SELECT resource, fence, holder_pc, holder_session, holder_name, description, files, granted_at, heartbeat_at, stale
         FROM lease_cache WHERE repo = ?1 AND mode = 'exclusive'",
    )?;
    let rows = st
        .query_map([repo], |r| {
            let files: String = r.get(6)?;
            Ok(CachedLease {
                resource: r.get(0)?,
                fence: r.get(1)?,
                repo: repo.to_string(),
                mode: "exclusive".to_string(),
                holder_pc: r.get(2)?,
                holder_session: r.get(3)?,
                holder_name: r.get(4)?,
                description: r.get(5)?,
                files: serde_json::from_str(&files).unwrap_or_default(),
                granted_at: r.get(7)?,
                heartbeat_at: r.get(8)?,
                stale: r.get(9)?,
                json: String::new(),
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

/// The claim ids of this PC's leases held by the process of `session`
/// (resource, fence): the guard lets a session edit under its own leases.
pub fn fences_of_session(conn: &Connection, session: &str) -> Result<Vec<(String, i64)>> {
    let mut st = conn.prepare_cached(
        "SELECT resource, fence FROM leases_mine WHERE fence IS NOT NULL AND (session = ?1 OR (pid IS NOT NULL AND
           (pid, pid_start) IN (SELECT pid, pid_start FROM sessions WHERE session = ?1 AND pid IS NOT NULL)))",
    )?;
    let rows = st.query_map([session], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

/// When the cache was last confirmed by the server (local ms), if ever.
pub fn cache_at(conn: &Connection) -> Result<Option<Millis>> {
    let v: Option<String> = conn
        .prepare_cached("SELECT value FROM meta WHERE key = ?1")?
        .query_row([LEASE_CACHE_AT], |r| r.get(0))
        .optional()?;
    Ok(v.and_then(|s| s.parse().ok()))
}

/// A lease this PC lost.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LostLease {
    pub resource: String,
    pub fence: i64,
    pub at: Millis,
    /// `pc/name` (or `pc/session`) of whoever took it, when someone did.
    pub taken_by: Option<String>,
    pub reason: Option<String>,
    /// `taken_over`, `expired` or `released`.
    pub event: String,
}

/// Losses this session (or its process) has not been told yet, marked told.
pub fn lost_take_untold(tx: &Connection, session: &str, now: Millis) -> Result<Vec<LostLease>> {
    let rows: Vec<LostLease> = {
        let mut st = tx.prepare_cached(
            "SELECT resource, fence, at, taken_by, reason, event FROM lease_lost WHERE told_at IS NULL AND session = ?1
             ORDER BY at",
        )?;
        let rows = st
            .query_map([session], |r| {
                Ok(LostLease {
                    resource: r.get(0)?,
                    fence: r.get(1)?,
                    at: r.get(2)?,
                    taken_by: r.get(3)?,
                    reason: r.get(4)?,
                    event: r.get(5)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        rows
    };
    if !rows.is_empty() {
        tx.prepare_cached("UPDATE lease_lost SET told_at = ?2 WHERE told_at IS NULL AND session = ?1")?
            .execute(params![session, now])?;
    }
    Ok(rows)
}

impl Store {
    pub fn meta_lease_version(&self) -> Result<i64> {
        Ok(self.meta_i64(LEASE_VERSION)?.unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("s.db")).unwrap();
        (d, s)
    }

    fn lease(claim: &str, session: &str, pid: i64, fence: Option<i64>) -> MyLease {
        MyLease {
            claim_id: claim.into(),
            resource: format!("r-{claim}"),
            repo: "github.com/o/r".into(),
            description: "d".into(),
            files: vec!["src/**".into()],
            mode: "exclusive".into(),
            session: session.into(),
            pid: Some(pid),
            pid_start: Some(77),
            ttl_expires_at: None,
            fence,
            state: if fence.is_some() { MINE_HELD } else { MINE_UNCONFIRMED }.into(),
            claimed_at: 1,
            heartbeat_at: None,
            release_reason: None,
            release_queued_at: None,
        }
    }

    #[test]
    fn leases_move_with_the_process_and_session_end_queues_their_release() {
        let (_d, mut s) = store();
        s.lease_mine_put(&lease("c1", "old", 42, Some(3))).unwrap();
        s.lease_mine_put(&lease("c2", "old", 42, None)).unwrap();
        s.lease_mine_put(&lease("c3", "other", 43, Some(1))).unwrap();
        // /clear: the same process (pid + start time) gets a new session id.
        s.write(|tx| {
            session_record(
                tx,
                &SessionRow {
                    session: "new".into(),
                    pid: Some(42),
                    pid_start: Some(77),
                    started_at: 5,
                    ..Default::default()
                },
            )
        })
        .unwrap();
        let mine = s.leases_mine().unwrap();
        assert_eq!(mine.iter().filter(|l| l.session == "new").count(), 2);
        assert_eq!(fences_of_session(s.conn(), "new").unwrap(), vec![("r-c1".to_string(), 3)]);
        // A reused PID with another start time is not the same process.
        s.write(|tx| {
            session_record(
                tx,
                &SessionRow {
                    session: "imp".into(),
                    pid: Some(43),
                    pid_start: Some(1),
                    started_at: 6,
                    ..Default::default()
                },
            )
        })
        .unwrap();
        assert!(s.leases_mine().unwrap().iter().any(|l| l.claim_id == "c3" && l.session == "other"));

        let n = s.write(|tx| session_end(tx, "new", "logout", 9, true)).unwrap();
        assert_eq!(n, 2);
        // The unconfirmed one is forgotten; the granted one waits for the poller.
        let due = s.lease_releases_due(10).unwrap();
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].claim_id, "c1");
        assert_eq!(due[0].release_reason.as_deref(), Some("session ended (logout)"));
        assert_eq!(s.lease_release_count().unwrap(), 1);
        assert_eq!(s.push_work().unwrap(), (1, 0), "the pusher sees the release and no mark");
        crate::marks::queue(s.conn(), "mail-1-aaaaaaaa", pcmail_core::model::MarkOp::Seen, 9, "pc-a", None).unwrap();
        assert_eq!(s.push_work().unwrap(), (1, 1));
        // clear/resume: recorded, nothing released.
        assert_eq!(s.write(|tx| session_end(tx, "other", "clear", 9, false)).unwrap(), 0);
    }

    #[test]
    fn a_lost_lease_is_told_once_to_its_process_current_session() {
        let (_d, mut s) = store();
        s.lease_mine_put(&lease("c1", "s1", 42, Some(3))).unwrap();
        s.lease_lost(&LostLease {
            resource: "r-c1".into(),
            fence: 3,
            at: 100,
            taken_by: Some("kim/ani".into()),
            reason: Some("gone".into()),
            event: "taken_over".into(),
        })
        .unwrap();
        assert!(s.leases_mine().unwrap().is_empty());
        s.write(|tx| {
            session_record(
                tx,
                &SessionRow { session: "s2".into(), pid: Some(42), pid_start: Some(77), ..Default::default() },
            )
        })
        .unwrap();
        let told = s.write(|tx| lost_take_untold(tx, "s2", 200)).unwrap();
        assert_eq!(told.len(), 1);
        assert_eq!(told[0].taken_by.as_deref(), Some("kim/ani"));
        assert!(s.write(|tx| lost_take_untold(tx, "s2", 201)).unwrap().is_empty(), "once");
    }
}
