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
    // Issue 11 (handoffs and memory): the memory index (FTS5 over the repo's
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
