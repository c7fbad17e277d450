//! What the Stop hook remembers: a session it reminded to write a handoff is
//! never reminded again.

use crate::Cached as _;
use crate::{Result, Store};
use rusqlite::params;

impl Store {
    /// Records that `session` was reminded; false when it already was (the
    /// caller then stays silent). One statement: two hooks of one session
    /// racing get one `true`.
    pub fn stop_reminder_once(&mut self, session: &str, at: i64, transcript_bytes: i64) -> Result<bool> {
        let n = self.write(|tx| {
            Ok(tx.exec(
                "INSERT OR IGNORE INTO stop_reminders (session, at, transcript_bytes) VALUES (?1, ?2, ?3)",
                params![session, at, transcript_bytes],
            )?)
        })?;
        Ok(n == 1)
    }

    /// When `session` was reminded, if it was.
    pub fn stop_reminded_at(&self, session: &str) -> Result<Option<i64>> {
        use rusqlite::OptionalExtension;
        Ok(self
            .conn
            .query_row("SELECT at FROM stop_reminders WHERE session = ?1", [session], |r| r.get(0))
            .optional()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_per_session() {
        let d = tempfile::tempdir().unwrap();
        let mut s = Store::open(&d.path().join("store.db")).unwrap();
        assert!(s.stop_reminder_once("s1", 5, 100).unwrap());
        assert!(!s.stop_reminder_once("s1", 6, 200).unwrap());
        assert!(s.stop_reminder_once("s2", 7, 100).unwrap());
        assert_eq!(s.stop_reminded_at("s1").unwrap(), Some(5));
        assert_eq!(s.stop_reminded_at("s3").unwrap(), None);
    }
}
