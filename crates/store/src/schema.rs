//! Migrations: only ever appended. `user_version` is the index of the last
//! one applied; each runs in its own transaction.

use crate::{Result, StoreError};
use rusqlite::Connection;
use std::path::Path;

const MIGRATIONS: &[&str] = &[
    // 1: the first schema.
    r#"
    CREATE TABLE inbox (
        id TEXT PRIMARY KEY,
        from_pc TEXT NOT NULL,
        to_pc TEXT NOT NULL,
        kind TEXT NOT NULL,
        subject TEXT NOT NULL,
        body TEXT NOT NULL,
        urgent INTEGER NOT NULL,
        expires_at INTEGER,
        in_reply_to TEXT,
        auto INTEGER NOT NULL,
        hop INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        broadcast_of TEXT,
        received_at INTEGER NOT NULL,
        confirmed_at INTEGER,
        status TEXT NOT NULL,
        status_at INTEGER NOT NULL,
        status_by TEXT,
        fail_reason TEXT,
        reply_to_mine INTEGER NOT NULL DEFAULT 0,
        presented_at INTEGER,
        presented_session TEXT,
        notified_at INTEGER
    );
    CREATE INDEX inbox_unconfirmed ON inbox(received_at) WHERE confirmed_at IS NULL;
    CREATE INDEX inbox_by_status ON inbox(status, created_at);
    CREATE TABLE presented (
        session TEXT NOT NULL,
        id TEXT NOT NULL,
        at INTEGER NOT NULL,
        PRIMARY KEY (session, id)
    ) WITHOUT ROWID;
    CREATE TABLE quarantine (
        id TEXT PRIMARY KEY,
        raw TEXT NOT NULL,
        reason TEXT NOT NULL,
        at INTEGER NOT NULL
    );
    CREATE TABLE outbox (
        id TEXT PRIMARY KEY,
        mail TEXT NOT NULL,
        queued_at INTEGER NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_at INTEGER NOT NULL,
        last_error TEXT,
        regenerated INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE sent (
        id TEXT PRIMARY KEY,
        to_pc TEXT NOT NULL,
        kind TEXT NOT NULL,
        subject TEXT NOT NULL,
        body TEXT NOT NULL,
        urgent INTEGER NOT NULL,
        in_reply_to TEXT,
        created_at INTEGER NOT NULL,
        state TEXT NOT NULL,
        state_at INTEGER NOT NULL,
        timeline TEXT NOT NULL DEFAULT '[]',
        send_error TEXT
    );
    CREATE INDEX sent_by_created ON sent(created_at);
    CREATE TABLE pending_marks (
        mark_id TEXT PRIMARY KEY,
        id TEXT NOT NULL,
        op TEXT NOT NULL,
        at INTEGER NOT NULL,
        by TEXT NOT NULL,
        reason TEXT,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_at INTEGER NOT NULL,
        last_error TEXT
    );
    CREATE TABLE dropped_marks (
        mark_id TEXT PRIMARY KEY,
        id TEXT NOT NULL,
        op TEXT NOT NULL,
        why TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        dropped_at INTEGER NOT NULL
    );
    CREATE TABLE roster_cache (
        label TEXT PRIMARY KEY,
        number INTEGER NOT NULL,
        hostname TEXT NOT NULL
    );
    CREATE TABLE alerts_cache (
        key TEXT PRIMARY KEY,
        json TEXT NOT NULL
    );
    CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    "#,
    // 2: the code map's per-file fingerprints and parsed entries (pcmail map).
    r#"
    CREATE TABLE codemap_files (
        repo TEXT NOT NULL,
        path TEXT NOT NULL,
        size INTEGER NOT NULL,
        mtime_ns INTEGER NOT NULL,
        hash TEXT NOT NULL,
        version INTEGER NOT NULL,
        entry TEXT NOT NULL,
        PRIMARY KEY (repo, path)
    ) WITHOUT ROWID;
    "#,
    // 3: the hook's rank (store/src/hookview.rs: one rank per category and
    // "may wait for the backlog bound"; the same rule as Kind::classify, a
    // test compares them), kept by triggers, and an index over it so the hook
    // reads each category with LIMIT and counts from the index alone (the few
    // mails with an expiry from their own partial index). A real
    // column, not a generated one: SQLite does not treat an index over a
    // virtual column as covering.
    r#"
    ALTER TABLE inbox ADD COLUMN hook_rank INTEGER NOT NULL DEFAULT 5;
    UPDATE inbox SET hook_rank = (CASE
            WHEN kind = 'decision' OR instr(subject, '[判断依頼]') > 0 THEN 0
            WHEN (kind = 'request' OR instr(subject, '[作業依頼]') > 0) AND urgent THEN 1
            WHEN urgent THEN 2
            WHEN kind = 'request' OR instr(subject, '[作業依頼]') > 0 THEN 3
            WHEN reply_to_mine THEN 4
            ELSE 5
        END);
    CREATE TRIGGER inbox_hook_rank_insert AFTER INSERT ON inbox BEGIN
        UPDATE inbox SET hook_rank = (CASE
            WHEN NEW.kind = 'decision' OR instr(NEW.subject, '[判断依頼]') > 0 THEN 0
            WHEN (NEW.kind = 'request' OR instr(NEW.subject, '[作業依頼]') > 0) AND NEW.urgent THEN 1
            WHEN NEW.urgent THEN 2
            WHEN NEW.kind = 'request' OR instr(NEW.subject, '[作業依頼]') > 0 THEN 3
            WHEN NEW.reply_to_mine THEN 4
            ELSE 5
        END) WHERE id = NEW.id;
    END;
    CREATE TRIGGER inbox_hook_rank_update AFTER UPDATE OF kind, subject, urgent, reply_to_mine ON inbox BEGIN
        UPDATE inbox SET hook_rank = (CASE
            WHEN NEW.kind = 'decision' OR instr(NEW.subject, '[判断依頼]') > 0 THEN 0
            WHEN (NEW.kind = 'request' OR instr(NEW.subject, '[作業依頼]') > 0) AND NEW.urgent THEN 1
            WHEN NEW.urgent THEN 2
            WHEN NEW.kind = 'request' OR instr(NEW.subject, '[作業依頼]') > 0 THEN 3
            WHEN NEW.reply_to_mine THEN 4
            ELSE 5
        END) WHERE id = NEW.id;
    END;
    CREATE INDEX inbox_hook ON inbox(hook_rank, status, created_at);
    CREATE INDEX inbox_hook_expiring ON inbox(status, expires_at, hook_rank) WHERE expires_at IS NOT NULL;
    "#,
    // 4: every state change of received and sent mail, who and when (the
    // received timeline is recorded, not rebuilt). One row per (mail,
    // state): the state machine reaches each state at most once. `recorded`
    // says whose record it is: `server` (its own time and actor, from the
    // updates feeds or `status`) or `local` (this PC's, until the server's
    // replaces it). Backfilled from what the inbox and the sent list kept.
    r#"
    CREATE TABLE timeline (
        mail_id TEXT NOT NULL,
        state TEXT NOT NULL,
        at INTEGER NOT NULL,
        by TEXT NOT NULL,
        note TEXT,
        recorded TEXT NOT NULL,
        PRIMARY KEY (mail_id, state)
    ) WITHOUT ROWID;
    INSERT OR IGNORE INTO timeline SELECT id, 'new', created_at, from_pc, NULL, 'server' FROM inbox;
    INSERT OR IGNORE INTO timeline SELECT id, 'delivered', confirmed_at, to_pc, NULL, 'local'
        FROM inbox WHERE confirmed_at IS NOT NULL;
    INSERT OR IGNORE INTO timeline SELECT id, 'seen', presented_at, to_pc || COALESCE('/' || presented_session, ''), NULL, 'local'
        FROM inbox WHERE presented_at IS NOT NULL AND status <> 'new';
    INSERT OR IGNORE INTO timeline SELECT id, status, status_at, COALESCE(status_by, to_pc),
            CASE status WHEN 'failed' THEN fail_reason END, 'local'
        FROM inbox WHERE status NOT IN ('new', 'delivered');
    INSERT OR IGNORE INTO timeline
        SELECT s.id, json_extract(j.value, '$.state'), json_extract(j.value, '$.at'), json_extract(j.value, '$.by'),
            json_extract(j.value, '$.note'), CASE json_extract(j.value, '$.state') WHEN 'new' THEN 'local' ELSE 'server' END
        FROM sent s, json_each(s.timeline) j
        WHERE json_valid(s.timeline) AND json_extract(j.value, '$.state') IS NOT NULL;
    "#,
    // 5: leases. The session registry (a Claude Code process and
    // its current session id: /clear and --resume give the same process a new
    // id, and leases move with the process), this PC's own leases (with the
    // process they follow and releases queued for the poller), the server's
    // lease list as the guard cache, and lost leases to tell their holder once.
    r#"
    CREATE TABLE sessions (
        session TEXT PRIMARY KEY,
        pid INTEGER,
        pid_start INTEGER,
        cwd TEXT,
        repo TEXT,
        branch TEXT,
        started_at INTEGER NOT NULL,
        last_prompt_at INTEGER,
        ended_at INTEGER,
        end_reason TEXT
    );
    CREATE INDEX sessions_by_pid ON sessions(pid, pid_start);
    CREATE TABLE leases_mine (
        claim_id TEXT PRIMARY KEY,
        resource TEXT NOT NULL,
        repo TEXT NOT NULL,
        description TEXT NOT NULL,
        files TEXT NOT NULL,
        mode TEXT NOT NULL,
        session TEXT NOT NULL,
        pid INTEGER,
        pid_start INTEGER,
        ttl_expires_at INTEGER,
        fence INTEGER,
        state TEXT NOT NULL,
        claimed_at INTEGER NOT NULL,
        heartbeat_at INTEGER,
        release_reason TEXT,
        release_queued_at INTEGER,
        release_attempts INTEGER NOT NULL DEFAULT 0,
        release_next_at INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX leases_mine_by_resource ON leases_mine(resource, fence);
    CREATE TABLE lease_cache (
        resource TEXT NOT NULL,
        fence INTEGER NOT NULL,
        repo TEXT NOT NULL,
        mode TEXT NOT NULL,
        holder_pc TEXT NOT NULL,
        holder_session TEXT NOT NULL,
        holder_name TEXT,
        description TEXT NOT NULL,
        files TEXT NOT NULL,
        granted_at INTEGER NOT NULL,
        heartbeat_at INTEGER NOT NULL,
        stale INTEGER NOT NULL,
        json TEXT NOT NULL,
        PRIMARY KEY (resource, fence)
    ) WITHOUT ROWID;
    CREATE INDEX lease_cache_by_repo ON lease_cache(repo, mode);
    CREATE TABLE lease_lost (
        resource TEXT NOT NULL,
        fence INTEGER NOT NULL,
        session TEXT NOT NULL,
        pid INTEGER,
        pid_start INTEGER,
        at INTEGER NOT NULL,
        taken_by TEXT,
        reason TEXT,
        event TEXT NOT NULL,
        told_at INTEGER,
        PRIMARY KEY (resource, fence)
    ) WITHOUT ROWID;
    "#,
    // 6: handoffs and memory: the memory index (FTS5 over the repo's
    // .claude/memory files, keyed by repo, with each file's fingerprint so
    // only changed files are parsed again) and the sessions the Stop hook
    // reminded to write a handoff. `IF NOT EXISTS` throughout: this entry's
    // position among the others is settled at merge time.
    r#"
    CREATE TABLE IF NOT EXISTS memory_files (
        repo TEXT NOT NULL,
        path TEXT NOT NULL,
        size INTEGER NOT NULL,
        mtime_ns INTEGER NOT NULL,
        PRIMARY KEY (repo, path)
    ) WITHOUT ROWID;
    CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(
        text, why, topic,
        repo UNINDEXED, path UNINDEXED, kind UNINDEXED, at UNINDEXED, by UNINDEXED,
        tokenize = 'unicode61 remove_diacritics 2'
    );
    CREATE TABLE IF NOT EXISTS stop_reminders (
        session TEXT PRIMARY KEY,
        at INTEGER NOT NULL,
        transcript_bytes INTEGER NOT NULL
    ) WITHOUT ROWID;
    "#,
    // 7: sessions and names: the names this PC's sessions hold
    // (as the server last said), and for mail to a name the session it is for:
    // the hook and `watch` show it to that session only. Stamped on insert.
    r#"
    CREATE TABLE IF NOT EXISTS names (
        name TEXT PRIMARY KEY,
        session TEXT NOT NULL
    ) WITHOUT ROWID;
    ALTER TABLE inbox ADD COLUMN to_session TEXT;
    CREATE INDEX IF NOT EXISTS inbox_named ON inbox(hook_rank, status, to_session) WHERE to_session IS NOT NULL;
    CREATE TRIGGER IF NOT EXISTS inbox_to_name AFTER INSERT ON inbox
        WHEN EXISTS (SELECT 1 FROM names WHERE name = NEW.to_pc) BEGIN
        UPDATE inbox SET to_session = (SELECT session FROM names WHERE name = NEW.to_pc) WHERE id = NEW.id;
    END;
    "#,
    // 8: jobs, the PC side. `job_runs`: jobs this PC executes,
    // written before the process starts (with its ids once it runs), so a
    // restarted executor finds a run its predecessor left and reports it.
    // `job_reports`: reports queued until the server takes them (idempotent).
    // `jobs_mine`: jobs sessions of this PC submitted or joined (one row per
    // session: a joined job is told to each), and whether the hook has told it.
    r#"
    CREATE TABLE IF NOT EXISTS job_runs (
        job_id TEXT PRIMARY KEY,
        runner TEXT NOT NULL,
        command TEXT NOT NULL,
        subject TEXT NOT NULL,
        read_only INTEGER NOT NULL,
        job TEXT NOT NULL,
        owner_pid INTEGER NOT NULL,
        owner_start INTEGER,
        pid INTEGER,
        pid_start INTEGER,
        started_at INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS job_reports (
        job_id TEXT PRIMARY KEY,
        report TEXT NOT NULL,
        queued_at INTEGER NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        last_error TEXT
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS jobs_mine (
        job_id TEXT NOT NULL,
        session TEXT NOT NULL,
        target TEXT NOT NULL,
        command TEXT NOT NULL,
        submitted_at INTEGER NOT NULL,
        state TEXT NOT NULL,
        job TEXT,
        ended_at INTEGER,
        told_at INTEGER,
        PRIMARY KEY (job_id, session)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS job_chunks (
        command TEXT NOT NULL,
        subject TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        input TEXT NOT NULL,
        ok INTEGER NOT NULL,
        failures INTEGER NOT NULL,
        last_failure_at INTEGER,
        at INTEGER NOT NULL,
        PRIMARY KEY (command, subject, fingerprint)
    ) WITHOUT ROWID;
    "#,
    // 9: mail to several addresses: each received copy keeps the whole list
    // (JSON, the sender's order), so `reply --all` and `read` know who else
    // got it. NULL for mail to one address.
    r#"
    ALTER TABLE inbox ADD COLUMN recipients TEXT;
"#,
    // 10: what every prompt's hook asks (ended jobs and lost leases not yet
    // told to this session) found by index: the tables keep every job and
    // loss until retention, and without these each prompt read all of them.
    r#"
    CREATE INDEX IF NOT EXISTS jobs_mine_untold ON jobs_mine(session, ended_at)
        WHERE ended_at IS NOT NULL AND told_at IS NULL;
    CREATE INDEX IF NOT EXISTS lease_lost_untold ON lease_lost(session, at) WHERE told_at IS NULL;
"#,
    // 11: the sessions not ended, newest first, by index: every poll round
    // lists them (the live sessions ride the poll), and the registry keeps
    // every session this PC ever had.
    r#"
    CREATE INDEX IF NOT EXISTS sessions_open ON sessions(started_at) WHERE ended_at IS NULL;
"#,
    // 12: whether any job this PC's sessions submitted still waits for its
    // end (every poll cycle asks), by index instead of reading the newest
    // jobs whole.
    r#"
    CREATE INDEX IF NOT EXISTS jobs_mine_waiting ON jobs_mine(submitted_at) WHERE ended_at IS NULL;
"#,
    // 13: what a prompt's hook asks of the mail this session was shown (its
    // rank, status and expiry, per mail) answered from this small index: by
    // the mail's row, each of them was a page of the inbox table (bodies
    // included) read from the file, some forty per caught-up prompt after a
    // hundred mails shown, and more the longer the session.
    r#"
    CREATE INDEX IF NOT EXISTS inbox_shown_facts ON inbox(id, hook_rank, status, expires_at);
"#,
];

pub const CURRENT: i64 = MIGRATIONS.len() as i64;

pub fn migrate(conn: &mut Connection, path: &Path) -> Result<()> {
    let found: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if found > CURRENT {
        return Err(StoreError::TooNew { path: path.to_path_buf(), found, known: CURRENT });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        // Another process may have migrated while we waited for the lock.
        let now: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if now > i as i64 {
            continue;
        }
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        tx.commit()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Migration 4 fills the timeline from what a store of schema 3 kept:
    /// received mail from its inbox row, sent mail from its JSON timeline.
    #[test]
    fn the_timeline_table_is_backfilled_from_the_inbox_and_the_sent_list() {
        let mut conn = Connection::open_in_memory().unwrap();
        for sql in &MIGRATIONS[..3] {
            conn.execute_batch(sql).unwrap();
        }
        conn.pragma_update(None, "user_version", 3).unwrap();
        conn.execute_batch(
            r#"
            INSERT INTO inbox (id, from_pc, to_pc, kind, subject, body, urgent, auto, hop, created_at, received_at,
                confirmed_at, status, status_at, status_by, fail_reason, presented_at, presented_session)
            VALUES ('m1', 'pc-a', 'pc-b', 'note', '', 'b', 0, 0, 0, 10, 11, 12, 'failed', 30, 'pc-b/s1', 'disk full', 20, 's1'),
                   ('m2', 'pc-a', 'pc-b', 'note', '', 'b', 0, 0, 0, 40, 41, NULL, 'new', 41, NULL, NULL, NULL, NULL);
            INSERT INTO sent (id, to_pc, kind, subject, body, urgent, created_at, state, state_at, timeline)
            VALUES ('m3', 'pc-c', 'note', '', 'b', 0, 50, 'seen', 70,
                '[{"state":"new","at":50,"by":"pc-b","note":null},{"state":"delivered","at":60,"by":"pc-c"},{"state":"seen","at":70,"by":"pc-c/x"}]'),
                   ('m4', 'pc-c', 'note', '', 'b', 0, 80, 'new', 80, 'not json');
            "#,
        )
        .unwrap();
        migrate(&mut conn, Path::new(":memory:")).unwrap();
        let rows: Vec<(String, String, i64, String, Option<String>, String)> = conn
            .prepare("SELECT mail_id, state, at, by, note, recorded FROM timeline ORDER BY mail_id, at")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        let s = |a: &str| a.to_string();
        assert_eq!(
            rows,
            vec![
                (s("m1"), s("new"), 10, s("pc-a"), None, s("server")),
                (s("m1"), s("delivered"), 12, s("pc-b"), None, s("local")),
                (s("m1"), s("seen"), 20, s("pc-b/s1"), None, s("local")),
                (s("m1"), s("failed"), 30, s("pc-b/s1"), Some(s("disk full")), s("local")),
                (s("m2"), s("new"), 40, s("pc-a"), None, s("server")),
                (s("m3"), s("new"), 50, s("pc-b"), None, s("local")),
                (s("m3"), s("delivered"), 60, s("pc-c"), None, s("server")),
                (s("m3"), s("seen"), 70, s("pc-c/x"), None, s("server")),
            ]
        );
    }
}
