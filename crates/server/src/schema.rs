//! The server database schema. Migrations are only ever appended: each step
//! runs once, in its own transaction, and bumps `PRAGMA user_version`.

use rusqlite::Connection;

#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error(transparent)]
    Db(#[from] rusqlite::Error),
    /// Serving it could lose what the newer version wrote.
    #[error("the database was written by a newer pcmail (schema {found}; this build knows {known}): update pcmail, or use another --db")]
    TooNew { found: i64, known: i64 },
}

/// Step N (1-based) brings the database to `user_version = N`.
const MIGRATIONS: &[&str] = &[
    // 1: roster, mail, the event log (timelines + updates feed), alerts.
    r#"
    CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value INTEGER NOT NULL
    );
    INSERT INTO meta (key, value) VALUES ('roster_version', 0);

    CREATE TABLE pc (
        label        TEXT PRIMARY KEY,
        number       INTEGER NOT NULL UNIQUE,
        hostname     TEXT NOT NULL UNIQUE COLLATE NOCASE,
        last_poll_at INTEGER
    );

    -- One row per deliverable mail (a broadcast copy is a mail of its own).
    -- `seq` is the insertion order ("oldest first" in poll).
    CREATE TABLE mail (
        seq          INTEGER PRIMARY KEY,
        id           TEXT NOT NULL UNIQUE,
        sender       TEXT NOT NULL,
        recipient    TEXT NOT NULL,
        kind         TEXT NOT NULL,
        subject      TEXT NOT NULL,
        body         TEXT NOT NULL,
        urgent       INTEGER NOT NULL,
        expires_at   INTEGER,
        in_reply_to  TEXT,
        auto         INTEGER NOT NULL,
        hop          INTEGER NOT NULL,
        created_at   INTEGER NOT NULL,
        state        TEXT NOT NULL,
        broadcast_of TEXT,
        delivered_at INTEGER,
        last_at      INTEGER NOT NULL   -- `at` of the newest timeline entry (clamping marks)
    );
    -- Poll: "mail still new for label X", oldest first. Partial: only new mail is in it.
    CREATE INDEX mail_new_by_recipient ON mail (recipient, seq) WHERE state = 'new';
    -- Sweep: unseen alerts look only at delivered mail.
    CREATE INDEX mail_delivered ON mail (delivered_at) WHERE state = 'delivered';
    -- Sweep: expiry looks only at unfinished mail with an expiry.
    CREATE INDEX mail_expiring ON mail (expires_at)
        WHERE expires_at IS NOT NULL AND state IN ('new', 'delivered', 'seen');
    -- Status of a broadcast original expands to its copies.
    CREATE INDEX mail_by_broadcast ON mail (broadcast_of) WHERE broadcast_of IS NOT NULL;

    -- The original of a broadcast (`to: "*"`): kept for idempotent retries,
    -- `inReplyTo` and `status`; it is never delivered itself.
    CREATE TABLE broadcast (
        id          TEXT PRIMARY KEY,
        sender      TEXT NOT NULL,
        kind        TEXT NOT NULL,
        subject     TEXT NOT NULL,
        body        TEXT NOT NULL,
        urgent      INTEGER NOT NULL,
        expires_at  INTEGER,
        in_reply_to TEXT,
        auto        INTEGER NOT NULL,
        hop         INTEGER NOT NULL,
        created_at  INTEGER NOT NULL
    );

    -- Every transition, who and when. The timeline of a mail, and (by sender,
    -- after a seq) the updates feed of poll.
    CREATE TABLE event (
        seq     INTEGER PRIMARY KEY AUTOINCREMENT,
        mail_id TEXT NOT NULL,
        sender  TEXT NOT NULL,
        state   TEXT NOT NULL,
        at      INTEGER NOT NULL,
        by      TEXT NOT NULL,
        note    TEXT
    );
    CREATE INDEX event_by_mail ON event (mail_id, seq);
    -- Updates feed: state changes (not creation) of mail sent by X after seq N.
    CREATE INDEX event_feed ON event (sender, seq) WHERE state <> 'new';

    CREATE TABLE alert (
        key           TEXT PRIMARY KEY,   -- "<subject>|<kind>"
        kind          TEXT NOT NULL,
        subject       TEXT NOT NULL,
        pc            TEXT NOT NULL,
        message       TEXT NOT NULL,
        opened_at     INTEGER NOT NULL,
        updated_at    INTEGER NOT NULL,
        resolved_at   INTEGER,
        count         INTEGER NOT NULL,
        posted        INTEGER NOT NULL DEFAULT 0,
        post_tries    INTEGER NOT NULL DEFAULT 0,
        last_try_at   INTEGER
    );
    CREATE INDEX alert_open ON alert (updated_at) WHERE resolved_at IS NULL;
    CREATE INDEX alert_by_updated ON alert (updated_at);
    "#,
    // 2: `expiresIn` as sent (the retry check compares it; `expires_at` is
    // computed by the server's clock).
    r#"
    ALTER TABLE mail ADD COLUMN expires_in INTEGER;
    ALTER TABLE broadcast ADD COLUMN expires_in INTEGER;
    "#,
    // 3: retention reads final mail oldest first (prune.rs).
    r#"
    CREATE INDEX mail_final ON mail (last_at) WHERE state IN ('done', 'failed', 'expired');
    "#,
    // 4: the webhook outcome on the alert row: the last error, and the
    // time before which no post is tried (a honoured Retry-After).
    r#"
    ALTER TABLE alert ADD COLUMN last_error TEXT;
    ALTER TABLE alert ADD COLUMN next_try_at INTEGER;
    "#,
    // 5: a label bound to one installation: SHA-256 hex
    // of its credential; NULL = not bound (old clients keep working).
    r#"
    ALTER TABLE pc ADD COLUMN cred_hash TEXT;
    "#,
    // 6: per-PC credentials: a revoked PC keeps its row (its mail
    // waits for a re-enrolled PC); join codes by the SHA-256 of their secret;
    // the audit log of admin actions; the switch that retires the shared token.
    r#"
    ALTER TABLE pc ADD COLUMN revoked_at INTEGER;
    CREATE INDEX pc_by_cred ON pc (cred_hash) WHERE cred_hash IS NOT NULL;
    CREATE TABLE join_code (
        hash         TEXT PRIMARY KEY,
        label        TEXT NOT NULL,
        hostname     TEXT,
        created_at   INTEGER NOT NULL,
        expires_at   INTEGER NOT NULL,
        used_at      INTEGER,
        used_by_hash TEXT
    );
    CREATE TABLE audit (
        seq    INTEGER PRIMARY KEY AUTOINCREMENT,
        at     INTEGER NOT NULL,
        by     TEXT NOT NULL,
        action TEXT NOT NULL,
        label  TEXT NOT NULL,
        detail TEXT
    );
    INSERT INTO meta (key, value) VALUES ('require_credentials', 0);
    "#,
    // 7: leases. One row per grant; `lease_fence` keeps the last
    // fence of each resource so a fence is never reused, whatever is deleted.
    r#"
    INSERT INTO meta (key, value) VALUES ('lease_version', 0);
    CREATE TABLE lease (
        id             INTEGER PRIMARY KEY,
        resource       TEXT NOT NULL,
        fence          INTEGER NOT NULL,
        repo           TEXT NOT NULL,
        description    TEXT NOT NULL,
        files          TEXT NOT NULL,      -- JSON array of globs
        mode           TEXT NOT NULL,      -- exclusive | shared
        holder_pc      TEXT NOT NULL,
        holder_session TEXT NOT NULL,
        holder_name    TEXT,
        claim_id       TEXT NOT NULL UNIQUE,
        granted_at     INTEGER NOT NULL,
        heartbeat_at   INTEGER NOT NULL,
        ttl_expires_at INTEGER,
        state          TEXT NOT NULL,      -- held | stale | released | expired
        ended_at       INTEGER,
        UNIQUE (resource, fence)
    );
    -- Live leases by resource (claims, checks, the poll's list).
    CREATE INDEX lease_live ON lease (resource, fence) WHERE state IN ('held', 'stale');
    -- Staleness: heartbeat leases still held, oldest heartbeat first.
    CREATE INDEX lease_heartbeat ON lease (heartbeat_at) WHERE state = 'held' AND ttl_expires_at IS NULL;
    -- The sweep's stale_lease alerts.
    CREATE INDEX lease_stale ON lease (heartbeat_at) WHERE state = 'stale';
    -- Expiry of TTL leases.
    CREATE INDEX lease_ttl ON lease (ttl_expires_at) WHERE state IN ('held', 'stale') AND ttl_expires_at IS NOT NULL;
    -- lease.list with `all`: what ended in the last 24 h.
    CREATE INDEX lease_ended ON lease (ended_at) WHERE ended_at IS NOT NULL;

    CREATE TABLE lease_fence (
        resource TEXT PRIMARY KEY,
        last     INTEGER NOT NULL
    );

    -- The timeline of every lease, in order (`seq`). A taken_over entry has
    -- the old lease's fence and the new one's in `new_fence`.
    CREATE TABLE lease_event (
        seq       INTEGER PRIMARY KEY AUTOINCREMENT,
        resource  TEXT NOT NULL,
        fence     INTEGER NOT NULL,
        new_fence INTEGER,
        at        INTEGER NOT NULL,
        event     TEXT NOT NULL,
        by        TEXT NOT NULL,
        reason    TEXT,
        evidence  TEXT,
        detail    TEXT
    );
    CREATE INDEX lease_event_by_fence ON lease_event (resource, fence, seq);
    CREATE INDEX lease_event_by_new_fence ON lease_event (resource, new_fence) WHERE new_fence IS NOT NULL;

    -- Leases a PC lost by someone else's doing, not yet reported to it
    -- (deleted once a poll of that PC reported them).
    CREATE TABLE lease_lost (
        id       INTEGER PRIMARY KEY,
        pc       TEXT NOT NULL,
        resource TEXT NOT NULL,
        fence    INTEGER NOT NULL,
        taken_by TEXT,                    -- JSON holder, or NULL
        at       INTEGER NOT NULL,
        reason   TEXT,
        event    TEXT NOT NULL
    );
    CREATE INDEX lease_lost_by_pc ON lease_lost (pc, id);
    "#,
    // 8: the received-mail updates feed (feature `received-updates`):
    // each event names the mail's recipient, and a partial index reads
    // "changes of mail received by X after seq N" like event_feed does for senders.
    r#"
    ALTER TABLE event ADD COLUMN recipient TEXT;
    UPDATE event SET recipient = (SELECT recipient FROM mail WHERE mail.id = event.mail_id);
    CREATE INDEX event_received_feed ON event (recipient, seq) WHERE state <> 'new';
    "#,
    // 9: jobs (feature `jobs`). Every read of the poll goes through
    // a partial index of live rows (queued, running, ended-not-yet-told), so
    // its cost stays flat however many jobs have finished.
    r#"
    CREATE TABLE job (
        seq              INTEGER PRIMARY KEY,
        id               TEXT NOT NULL UNIQUE,
        target           TEXT NOT NULL,          -- a PC label or '@server'
        command          TEXT NOT NULL,
        args             TEXT NOT NULL,          -- JSON: the checked, typed arguments
        subject          TEXT NOT NULL,
        dedup_key        TEXT NOT NULL,          -- core::job::dedup_key(target, command, args)
        submitter_pc     TEXT NOT NULL,
        submitter_session TEXT NOT NULL,
        submitter_name   TEXT,
        force            INTEGER NOT NULL,
        rerun_of         TEXT,
        state            TEXT NOT NULL,          -- queued | running | ok | failed | timed_out | cancelled
        submitted_at     INTEGER NOT NULL,
        started_at       INTEGER,
        run_started_at   INTEGER,                -- this run's start (a chunked job has several)
        run_sent_at      INTEGER,                -- this run's startedAt as the executor sent it (idempotent start)
        runs             INTEGER NOT NULL DEFAULT 0,
        runner           TEXT,
        heartbeat_at     INTEGER,
        ended_at         INTEGER,
        time_limit_ms    INTEGER NOT NULL,
        chunked          INTEGER NOT NULL DEFAULT 0,
        cancel_requested INTEGER NOT NULL DEFAULT 0,
        joined           INTEGER NOT NULL DEFAULT 0,
        result           TEXT,                   -- JSON Result
        reason           TEXT,
        last_at          INTEGER NOT NULL        -- `at` of the newest timeline entry (clamping)
    );
    -- Poll: queued jobs offered to their target, oldest first.
    CREATE INDEX job_queued ON job (target, seq) WHERE state = 'queued';
    -- Poll: running jobs of a target (cancel requests); sweep: heartbeats and time limits.
    CREATE INDEX job_running ON job (target, seq) WHERE state = 'running';
    CREATE INDEX job_heartbeat ON job (heartbeat_at) WHERE state = 'running';
    -- Sweep: queued jobs never started.
    CREATE INDEX job_queued_age ON job (submitted_at) WHERE state = 'queued';
    -- Dedup: the live job with the same key, or the newest that ended ok/failed.
    CREATE INDEX job_live_by_key ON job (dedup_key) WHERE state IN ('queued', 'running');
    CREATE INDEX job_ended_by_key ON job (dedup_key, ended_at) WHERE state IN ('ok', 'failed');
    -- job.list: jobs targeted at a PC, newest first; retention: ended jobs oldest first.
    CREATE INDEX job_by_target ON job (target, seq);
    CREATE INDEX job_ended ON job (ended_at) WHERE ended_at IS NOT NULL;

    -- The timeline of every job, in order.
    CREATE TABLE job_event (
        seq    INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id TEXT NOT NULL,
        at     INTEGER NOT NULL,
        state  TEXT NOT NULL,
        by     TEXT NOT NULL,
        reason TEXT
    );
    CREATE INDEX job_event_by_job ON job_event (job_id, seq);

    -- Every jobId a submit used: the job's own, and each deduped submit's
    -- (pointing at the job it joined), with the SHA-256 of what was sent, so
    -- a retried submit is answered the same and a reused id is duplicate_id.
    CREATE TABLE job_submit (
        id         TEXT PRIMARY KEY,
        job_id     TEXT NOT NULL,
        submit_key TEXT NOT NULL,
        pc         TEXT NOT NULL,
        at         INTEGER NOT NULL
    );
    CREATE INDEX job_submit_by_job ON job_submit (job_id);

    -- Who hears of a job's end: its submitter's PC and every joined PC, one
    -- row per (job, PC). `tell` = 1 from the job's end until a poll of that
    -- PC carried it in `finished` (told once).
    CREATE TABLE job_watch (
        job_id    TEXT NOT NULL,
        pc        TEXT NOT NULL,
        session   TEXT NOT NULL,
        name      TEXT,
        joined_at INTEGER NOT NULL,
        tell      INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (job_id, pc)
    );
    CREATE INDEX job_watch_by_pc ON job_watch (pc, job_id);
    CREATE INDEX job_watch_tell ON job_watch (pc, job_id) WHERE tell = 1;

    -- Each PC executor's published whitelist (the poll's job.whitelist).
    CREATE TABLE job_executor (
        pc                 TEXT PRIMARY KEY,
        hash               TEXT NOT NULL,
        commands           TEXT NOT NULL,    -- JSON [CommandSpec]
        allowed_submitters TEXT,             -- JSON [label], NULL = the default
        checkouts          TEXT NOT NULL,    -- JSON [name]
        published_at       INTEGER NOT NULL
    );
    "#,
    // 10 ("sessions and names"):
    // the live sessions each PC reported on its last poll (its whole list
    // replaces the last one), names (one namespace with labels) and their
    // moves, and for mail to a name: the PC it was delivered to, the mail
    // re-queued when the name moved to another PC, and the ids that PC is told
    // to withdraw (once, by its next poll).
    r#"
    CREATE TABLE live_session (
        pc          TEXT NOT NULL,
        session     TEXT NOT NULL,
        repo        TEXT,
        branch      TEXT,
        cwd         TEXT,
        idle_ms     INTEGER NOT NULL,
        leases      TEXT NOT NULL,
        reported_at INTEGER NOT NULL,
        PRIMARY KEY (pc, session)
    ) WITHOUT ROWID;
    CREATE TABLE name (
        name    TEXT PRIMARY KEY,
        pc      TEXT NOT NULL,
        session TEXT NOT NULL,
        since   INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX name_by_pc ON name (pc, session);
    CREATE TABLE name_event (
        seq          INTEGER PRIMARY KEY AUTOINCREMENT,
        name         TEXT NOT NULL,
        at           INTEGER NOT NULL,
        pc           TEXT NOT NULL,
        session      TEXT NOT NULL,
        prev_pc      TEXT,
        prev_session TEXT,
        requeued     INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX name_event_by_name ON name_event (name, seq);
    ALTER TABLE mail ADD COLUMN name_pc TEXT;
    ALTER TABLE mail ADD COLUMN requeued INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX mail_requeued ON mail (recipient, seq) WHERE requeued = 1;
    CREATE TABLE name_withdraw (
        pc      TEXT NOT NULL,
        mail_id TEXT NOT NULL,
        PRIMARY KEY (pc, mail_id)
    ) WITHOUT ROWID;
    "#,
    // 11: failed join attempts, counted per label and per peer in fixed
    // windows (`pcmail_core::auth::JOIN_WINDOW_MS`), in the database so that
    // every instance on one database shares them. `key` is `label:<label>`,
    // `peer:<address>`, or `refused:…` for the audit entry that counts the
    // attempts a limit refused (`audit_seq`).
    r#"
    CREATE TABLE join_attempt (
        key          TEXT PRIMARY KEY,
        window_start INTEGER NOT NULL,
        failures     INTEGER NOT NULL,
        audit_seq    INTEGER
    );
    CREATE INDEX join_attempt_by_window ON join_attempt (window_start);
    "#,
    // 12: mail to several addresses (feature `multi-recipient`). The original
    // keeps its list (a JSON array, in the sender's order; NULL for a `*`
    // broadcast) so a retry is compared with it, and each copy carries the
    // same list, so a recipient sees who else got the mail (`reply --all`).
    r#"
    ALTER TABLE broadcast ADD COLUMN recipients TEXT;
    ALTER TABLE mail ADD COLUMN recipients TEXT;
"#,
    // 13: the two partial indexes on mail's state say it with OR: SQLite
    // tests an index's predicate on every insert and update of the table,
    // and an IN list of three constants builds a temporary b-tree to do it.
    r#"
    DROP INDEX mail_expiring;
    CREATE INDEX mail_expiring ON mail (expires_at)
        WHERE expires_at IS NOT NULL AND (state = 'new' OR state = 'delivered' OR state = 'seen');
    DROP INDEX mail_final;
    CREATE INDEX mail_final ON mail (last_at) WHERE (state = 'done' OR state = 'failed' OR state = 'expired');
"#,
];

pub fn schema_version() -> usize {
    MIGRATIONS.len()
}

/// Applies the missing migrations. Safe when several processes open the same
/// file: each step takes the write lock first and re-reads the version.
pub fn migrate(conn: &mut Connection) -> Result<(), MigrateError> {
    let found: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if found > MIGRATIONS.len() as i64 {
        return Err(MigrateError::TooNew { found, known: MIGRATIONS.len() as i64 });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate() {
        let target = (i + 1) as i64;
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let current: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if current < target {
            tx.execute_batch(sql)?;
            tx.execute_batch(&format!("PRAGMA user_version = {target}"))?;
        }
        tx.commit()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Migration 6 names the recipient of every event already stored, so the
    /// received-updates feed covers history written before it.
    #[test]
    fn events_written_before_migration_6_get_their_recipient() {
        let mut conn = Connection::open_in_memory().unwrap();
        for sql in &MIGRATIONS[..5] {
            conn.execute_batch(sql).unwrap();
        }
        conn.pragma_update(None, "user_version", 5).unwrap();
        conn.execute_batch(
            "INSERT INTO mail (id, sender, recipient, kind, subject, body, urgent, auto, hop, created_at, state, last_at)
             VALUES ('m1', 'pc-a', 'pc-b', 'note', '', 'b', 0, 0, 0, 1, 'delivered', 2);
             INSERT INTO event (mail_id, sender, state, at, by) VALUES ('m1', 'pc-a', 'new', 1, 'pc-a'), ('m1', 'pc-a', 'delivered', 2, 'pc-b');",
        )
        .unwrap();
        migrate(&mut conn).unwrap();
        let r: Vec<String> = conn
            .prepare("SELECT recipient FROM event ORDER BY seq")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(r, ["pc-b", "pc-b"]);
        let plan: String = conn
            .query_row(
                "EXPLAIN QUERY PLAN SELECT seq FROM event WHERE recipient = 'pc-b' AND state <> 'new' AND seq > 0 ORDER BY seq",
                [],
                |r| r.get(3),
            )
            .unwrap();
        assert!(plan.contains("event_received_feed"), "{plan}");
    }

    /// The queries that find mail to expire and final mail to prune say the
    /// state as the partial indexes do, so SQLite uses them; and writing a
    /// mail builds no temporary b-tree to test those predicates.
    #[test]
    fn mails_partial_indexes_serve_their_queries_and_cost_writes_nothing() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        let plan = |sql: &str| -> String {
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let rows = stmt.query_map([], |r| r.get::<_, String>(3)).unwrap();
            rows.map(Result::unwrap).collect::<Vec<_>>().join("; ")
        };
        let expiring = plan(concat!(
            "SELECT id FROM mail WHERE expires_at IS NOT NULL AND ",
            mail_open_states!(),
            " AND expires_at <= 5 ORDER BY seq"
        ));
        assert!(expiring.contains("mail_expiring"), "{expiring}");
        let prunable = plan(concat!("SELECT id FROM mail WHERE ", mail_final_states!(), " AND last_at < 5"));
        assert!(prunable.contains("mail_final"), "{prunable}");
        for write in [
            "INSERT INTO mail (id, sender, recipient, kind, subject, body, urgent, auto, hop, created_at, state, last_at) \
             VALUES ('m', 'a', 'b', 'note', '', '', 0, 0, 0, 1, 'new', 1)",
            "UPDATE mail SET state = 'done', last_at = 2 WHERE id = 'm'",
        ] {
            assert_eq!(pcmail_testkit::temporary_btrees(&conn, write), Vec::<String>::new(), "{write}");
        }
    }
}
