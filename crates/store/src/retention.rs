//! Retention on the PC: final mail (done, failed, expired) is kept for a
//! window (default 30 days), then deleted in bounded bands by the poller,
//! never by the hook and never with `VACUUM` on the hot path; so are the
//! ended jobs and lost leases the hook has told its sessions of, sessions
//! that ended (holding no name or lease) and the Stop hook's reminders.

use crate::Cached as _;
use crate::{Result, Store};
use pcmail_core::Millis;
use rusqlite::params;

/// Default: a PC keeps final mail 30 days after its last change.
pub const DEFAULT_RETENTION_MS: Millis = 30 * 24 * 60 * 60 * 1000;
/// Rows per band (one short transaction each).
pub const BAND_ROWS: i64 = 500;

/// What one pruning pass deleted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Pruned {
    pub inbox: usize,
    pub sent: usize,
    pub other: usize,
}

impl Store {
    /// Deletes final mail older than `now - retention_ms` from the inbox and
    /// the sent list (with what hangs off it), band by band.
    pub fn prune_final(&mut self, now: Millis, retention_ms: Millis) -> Result<Pruned> {
        let cutoff = now - retention_ms;
        let mut out = Pruned::default();
        loop {
            let n = self.write(|tx| {
                let ids: Vec<String> = tx
                    .prepare_cached(
                        "SELECT id FROM inbox WHERE status IN ('done', 'failed', 'expired') AND status_at < ?1 LIMIT ?2",
                    )?
                    .query_map(params![cutoff, BAND_ROWS], |r| r.get(0))?
                    .collect::<rusqlite::Result<_>>()?;
                for id in &ids {
                    tx.exec("DELETE FROM presented WHERE id = ?1", [id])?;
                    tx.exec("DELETE FROM timeline WHERE mail_id = ?1", [id])?;
                    tx.exec("DELETE FROM inbox WHERE id = ?1", [id])?;
                }
                Ok(ids.len())
            })?;
            out.inbox += n;
            if n == 0 {
                break;
            }
        }
        loop {
            let n = self.write(|tx| {
                let band =
                    "SELECT id FROM sent WHERE state IN ('done', 'failed', 'expired') AND state_at < ?1 LIMIT ?2";
                tx.exec(&format!("DELETE FROM timeline WHERE mail_id IN ({band})"), params![cutoff, BAND_ROWS])?;
                Ok(tx.exec(&format!("DELETE FROM sent WHERE id IN ({band})"), params![cutoff, BAND_ROWS])?)
            })?;
            out.sent += n;
            if n == 0 {
                break;
            }
        }
        out.other = self.write(|tx| {
            let q = tx.exec("DELETE FROM quarantine WHERE at < ?1", [cutoff])?;
            let d = tx.exec("DELETE FROM dropped_marks WHERE dropped_at < ?1", [cutoff])?;
            // Jobs this PC's sessions submitted and losses of their leases, once
            // told (the hook's line went out) and older than the window.
            let j = tx.exec("DELETE FROM jobs_mine WHERE told_at IS NOT NULL AND ended_at < ?1", [cutoff])?;
            let l = tx.exec("DELETE FROM lease_lost WHERE told_at IS NOT NULL AND told_at < ?1", [cutoff])?;
            // Sessions that ended before the window, unless one still holds a
            // name or a lease here (a prompt of the same id records it anew),
            // and the Stop hook's reminders of that age.
            let s = tx.exec(
                "DELETE FROM sessions WHERE ended_at IS NOT NULL AND ended_at < ?1
                   AND session NOT IN (SELECT session FROM names) AND session NOT IN (SELECT session FROM leases_mine)",
                [cutoff],
            )?;
            let r = tx.exec("DELETE FROM stop_reminders WHERE at < ?1", [cutoff])?;
            Ok(q + d + j + l + s + r)
        })?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcmail_core::{Kind, Mail, State};

    #[test]
    fn told_jobs_and_losses_past_the_window_go_the_untold_and_recent_stay() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("store.db")).unwrap();
        let day = 24 * 60 * 60 * 1000;
        let now = 100 * day;
        let old = now - 40 * day;
        s.write(|tx| {
            let job = "INSERT INTO jobs_mine (job_id, session, target, command, submitted_at, state, job, ended_at, told_at)
                       VALUES (?1, 's', 'box', 'test', 0, 'ok', NULL, ?2, ?3)";
            tx.exec(job, rusqlite::params!["told-old", old, old])?;
            tx.exec(job, rusqlite::params!["untold-old", old, None::<i64>])?;
            tx.exec(job, rusqlite::params!["told-recent", now - day, now - day])?;
            tx.exec(job, rusqlite::params!["running", None::<i64>, None::<i64>])?;
            let lost = "INSERT INTO lease_lost (resource, fence, session, at, event, told_at) VALUES (?1, 1, 's', ?2, 'expired', ?3)";
            tx.exec(lost, rusqlite::params!["told-old", old, old])?;
            tx.exec(lost, rusqlite::params!["untold-old", old, None::<i64>])?;
            tx.exec(lost, rusqlite::params!["told-recent", now - day, now - day])?;
            Ok(())
        })
        .unwrap();
        s.write(|tx| {
            let session = "INSERT INTO sessions (session, pid, pid_start, cwd, repo, branch, started_at, last_prompt_at, ended_at)
                           VALUES (?1, NULL, NULL, NULL, NULL, NULL, 0, NULL, ?2)";
            tx.exec(session, rusqlite::params!["ended-old", old])?;
            tx.exec(session, rusqlite::params!["ended-old-named", old])?;
            tx.exec(session, rusqlite::params!["ended-recent", now - day])?;
            tx.exec(session, rusqlite::params!["open-old", None::<i64>])?;
            tx.exec("INSERT INTO names (name, session) VALUES ('reviewer', 'ended-old-named')", [])?;
            let reminder = "INSERT INTO stop_reminders (session, at, transcript_bytes) VALUES (?1, ?2, 1)";
            tx.exec(reminder, rusqlite::params!["ended-old", old])?;
            tx.exec(reminder, rusqlite::params!["ended-recent", now - day])?;
            Ok(())
        })
        .unwrap();
        let p = s.prune_final(now, DEFAULT_RETENTION_MS).unwrap();
        assert_eq!(p.other, 4);
        let ids = |sql: &str| -> Vec<String> {
            let mut st = s.conn().prepare(sql).unwrap();
            st.query_map([], |r| r.get(0)).unwrap().collect::<rusqlite::Result<_>>().unwrap()
        };
        assert_eq!(ids("SELECT job_id FROM jobs_mine ORDER BY job_id"), ["running", "told-recent", "untold-old"]);
        assert_eq!(ids("SELECT resource FROM lease_lost ORDER BY resource"), ["told-recent", "untold-old"]);
        assert_eq!(
            ids("SELECT session FROM sessions ORDER BY session"),
            ["ended-old-named", "ended-recent", "open-old"],
            "a session holding a name stays"
        );
        assert_eq!(ids("SELECT session FROM stop_reminders"), ["ended-recent"]);
    }

    fn mail(i: usize) -> Mail {
        Mail {
            id: format!("mail-1-{i:08x}"),
            from: "pc-a".into(),
            to: "pc-b".into(),
            kind: Kind::Note,
            subject: String::new(),
            body: "b".into(),
            urgent: false,
            expires_at: None,
            in_reply_to: None,
            auto: false,
            hop: 0,
            created_at: 1,
            state: State::New,
            broadcast_of: None,
            recipients: None,
            timeline: vec![],
        }
    }

    #[test]
    fn final_mail_past_the_window_goes_open_mail_stays() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("store.db")).unwrap();
        let day = 24 * 60 * 60 * 1000;
        let now = 100 * day;
        s.write(|tx| {
            for i in 0..1200 {
                crate::inbox::insert_received(tx, &mail(i), 0)?;
                if i < 1100 {
                    crate::inbox::advance(tx, &format!("mail-1-{i:08x}"), State::Done, now - 40 * day, "pc-b", None)?;
                }
                tx.exec("INSERT INTO presented (session, id, at) VALUES ('s', ?1, 0)", [format!("mail-1-{i:08x}")])?;
            }
            // recently finished: kept
            crate::inbox::advance(tx, "mail-1-00000476", State::Done, now - day, "pc-b", None)?;
            Ok(())
        })
        .unwrap();
        let p = s.prune_final(now, DEFAULT_RETENTION_MS).unwrap();
        assert_eq!(p.inbox, 1100);
        let left: i64 = s.conn().query_row("SELECT count(*) FROM inbox", [], |r| r.get(0)).unwrap();
        assert_eq!(left, 100, "open mail and the recently finished stay");
        let presented: i64 = s.conn().query_row("SELECT count(*) FROM presented", [], |r| r.get(0)).unwrap();
        assert_eq!(presented, 100);
    }
}
