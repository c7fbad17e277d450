//! Small key/value facts about this PC's poller (last poll, cursor, errors).

use crate::Cached as _;
use crate::{Result, Store};
use pcmail_core::Millis;
use rusqlite::{params, OptionalExtension};

pub const LAST_POLL_OK_AT: &str = "last_poll_ok_at";
pub const LAST_POLL_ATTEMPT_AT: &str = "last_poll_attempt_at";
pub const LAST_POLL_ERROR: &str = "last_poll_error";
pub const UPDATES_CURSOR: &str = "updates_cursor";
/// Why this PC is on the roster under another hostname than its own (the
/// real one belongs to another label); absent when it has its own.
pub const HOSTNAME_NOTE: &str = "hostname_note";
/// The cursor of the received-mail feed (`poll.receivedSince`, feature `received-updates`).
pub const RECEIVED_CURSOR: &str = "received_cursor";
pub const ROSTER_VERSION: &str = "roster_version";
pub const ROSTER_FETCHED_AT: &str = "roster_fetched_at";
pub const LAST_SWEEP_AT: &str = "last_sweep_at";
pub const CONSECUTIVE_FAILURES: &str = "consecutive_failures";
pub const LAST_SPAWN_AT: &str = "last_spawn_at";
/// When `pcmail inbox` was last run on this PC: it resets every session's
/// backlog bound (the hook counts mail shown after it).
pub const INBOX_VIEWED_AT: &str = "inbox_viewed_at";
/// The server's clock minus this PC's, from the last answer (ms): expiry is
/// judged by the server's clock.
pub const SERVER_OFFSET_MS: &str = "server_offset_ms";

const SET_SQL: &str =
    "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value";
const DEL_SQL: &str = "DELETE FROM meta WHERE key = ?1";

impl Store {
    pub fn meta_get(&self, key: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .prepare_cached("SELECT value FROM meta WHERE key = ?1")?
            .query_row([key], |r| r.get(0))
            .optional()?)
    }

    pub fn meta_set(&mut self, key: &str, value: &str) -> Result<()> {
        self.conn.exec(SET_SQL, params![key, value])?;
        Ok(())
    }

    pub fn meta_del(&mut self, key: &str) -> Result<()> {
        self.conn.exec(DEL_SQL, [key])?;
        Ok(())
    }

    /// A poll that worked, in one transaction: its time, no failures in a
    /// row, no last error (the poller writes this every cycle; three
    /// commits of their own cost it three lock rounds and three log writes).
    pub fn record_poll_ok(&mut self, now: Millis) -> Result<()> {
        self.write(|tx| {
            tx.exec(SET_SQL, params![LAST_POLL_OK_AT, now.to_string()])?;
            tx.exec(SET_SQL, params![CONSECUTIVE_FAILURES, "0"])?;
            tx.exec(DEL_SQL, [LAST_POLL_ERROR])?;
            Ok(())
        })
    }

    pub fn meta_i64(&self, key: &str) -> Result<Option<i64>> {
        Ok(self.meta_get(key)?.and_then(|v| v.parse().ok()))
    }

    pub fn meta_set_i64(&mut self, key: &str, v: i64) -> Result<()> {
        self.meta_set(key, &v.to_string())
    }

    pub fn last_poll_ok_at(&self) -> Result<Option<Millis>> {
        self.meta_i64(LAST_POLL_OK_AT)
    }

    /// The server's time now, as best this PC knows it.
    pub fn server_now(&self, local_now: Millis) -> Millis {
        local_now + self.meta_i64(SERVER_OFFSET_MS).ok().flatten().unwrap_or(0)
    }
}
