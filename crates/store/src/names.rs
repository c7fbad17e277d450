//! Names held by this PC's sessions, as the server's poll
//! answer says, and mail to a name: kept for the session holding the name
//! (`inbox.to_session`), moved with the name between this PC's sessions,
//! and withdrawn when the name moved to another PC.

use crate::Cached as _;
use crate::{Result, Store};
use rusqlite::params;

impl Store {
    /// Replaces the names this PC holds with `held` (name, session), and
    /// points unseen mail to each name at the session holding it now.
    pub fn names_replace(&mut self, held: &[(String, String)]) -> Result<()> {
        // Every poll reports them, nearly always unchanged: nothing to write
        // then (mail stored meanwhile took its session from the table, by trigger).
        // By name, the last of a repeated name winning, as the writes below leave them.
        let wanted: Vec<(String, String)> =
            held.iter().cloned().collect::<std::collections::BTreeMap<_, _>>().into_iter().collect();
        if self.names()? == wanted {
            return Ok(());
        }
        self.write(|tx| {
            tx.exec("DELETE FROM names", [])?;
            for (name, session) in held {
                tx.prepare_cached("INSERT OR REPLACE INTO names (name, session) VALUES (?1, ?2)")?
                    .execute(params![name, session])?;
                tx.prepare_cached(
                    "UPDATE inbox SET to_session = ?2 WHERE to_pc = ?1 AND status = 'new' AND to_session IS NOT ?2",
                )?
                .execute(params![name, session])?;
            }
            Ok(())
        })
    }

    /// The names this PC holds: (name, session), by name.
    pub fn names(&self) -> Result<Vec<(String, String)>> {
        let mut st = self.conn.prepare_cached("SELECT name, session FROM names ORDER BY name")?;
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// Whether `name` is held here (mail to it may be stored).
    pub fn holds_name(&self, name: &str) -> Result<bool> {
        Ok(self.conn.prepare_cached("SELECT 1 FROM names WHERE name = ?1")?.exists([name])?)
    }

    /// Drops mail to a name that moved to another PC (it is re-queued there);
    /// mail already seen here stays. Returns how many went.
    pub fn withdraw(&mut self, ids: &[String]) -> Result<usize> {
        if ids.is_empty() {
            return Ok(0);
        }
        self.write(|tx| {
            let mut n = 0;
            for id in ids {
                n += tx
                    .prepare_cached("DELETE FROM inbox WHERE id = ?1 AND to_session IS NOT NULL AND status = 'new'")?
                    .execute([id])?;
                tx.prepare_cached(
                    "DELETE FROM presented WHERE id = ?1 AND NOT EXISTS (SELECT 1 FROM inbox WHERE id = ?1)",
                )?
                .execute([id])?;
            }
            Ok(n)
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::{inbox, Store};
    use pcmail_core::Mail;

    fn mail(id: &str, to: &str) -> Mail {
        serde_json::from_value(serde_json::json!({
            "id": id, "from": "pc-a", "to": to, "kind": "note", "subject": "", "body": "b",
            "urgent": false, "createdAt": 1, "state": "new",
        }))
        .unwrap()
    }

    fn to_session(s: &Store, id: &str) -> Option<String> {
        s.conn().query_row("SELECT to_session FROM inbox WHERE id = ?1", [id], |r| r.get(0)).unwrap()
    }

    /// What the poller sets every cycle, set again to the same value, is no
    /// commit another connection sees (SQLite's `data_version` stays: it
    /// writes no page whose bytes stay the same, but a delete and insert
    /// again of the names did), and a change still is.
    #[test]
    fn setting_what_is_already_there_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        let mut s = Store::open(&path).unwrap();
        let watcher = Store::open(&path).unwrap();
        let mut changed = {
            let mut last = watcher.data_version().unwrap();
            move || {
                let now = watcher.data_version().unwrap();
                std::mem::replace(&mut last, now) != now
            }
        };
        let held = [("ani".to_string(), "s1".to_string()), ("bo".to_string(), "s2".to_string())];
        s.meta_set("updates_cursor", "17").unwrap();
        s.names_replace(&held).unwrap();
        assert!(changed(), "the first values are written");
        s.meta_set("updates_cursor", "17").unwrap();
        s.names_replace(&[held[1].clone(), held[0].clone()]).unwrap();
        s.mark_confirmed(&[], 5).unwrap();
        s.mark_done(&[]).unwrap();
        s.apply_received_updates(&[]).unwrap();
        assert!(!changed(), "the same values again are no commit");
        s.meta_set("updates_cursor", "18").unwrap();
        assert!(changed(), "a new cursor is");
        s.names_replace(&[("ani".to_string(), "s3".to_string())]).unwrap();
        assert!(changed(), "a name that moved is");
        assert_eq!(s.names().unwrap(), vec![("ani".to_string(), "s3".to_string())]);
    }

    #[test]
    fn mail_to_a_name_is_for_its_session_and_follows_the_name() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("store.db")).unwrap();
        s.names_replace(&[("ani".into(), "s1".into())]).unwrap();
        s.write(|tx| {
            inbox::insert_received(tx, &mail("m1", "ani"), 1)?;
            inbox::insert_received(tx, &mail("m2", "pc-b"), 1)?;
            Ok(())
        })
        .unwrap();
        assert_eq!(to_session(&s, "m1").as_deref(), Some("s1"));
        assert_eq!(to_session(&s, "m2"), None, "mail to the PC is for every session");
        s.names_replace(&[("ani".into(), "s2".into())]).unwrap();
        assert_eq!(to_session(&s, "m1").as_deref(), Some("s2"), "moved with the name");
        assert!(s.holds_name("ani").unwrap() && !s.holds_name("vasya").unwrap());
        assert_eq!(s.withdraw(&["m1".into(), "m2".into()]).unwrap(), 1, "only mail to a name is withdrawn");
        assert!(s.inbox_get("m1").unwrap().is_none() && s.inbox_get("m2").unwrap().is_some());
    }
}
