//! Local copies of server facts the CLI needs offline: the roster (for exact
//! address resolution before sending) and the open alerts.

use crate::Cached as _;
use crate::{meta, Result, Store};
use pcmail_core::{Alert, Millis, Pc};
use rusqlite::params;

impl Store {
    pub fn roster_replace(&mut self, pcs: &[Pc], version: i64, now: Millis) -> Result<()> {
        self.write(|tx| {
            tx.exec("DELETE FROM roster_cache", [])?;
            for p in pcs {
                tx.exec(
                    "INSERT INTO roster_cache (label, number, hostname) VALUES (?1, ?2, ?3)",
                    params![p.label, p.number, p.hostname],
                )?;
            }
            for (k, v) in [(meta::ROSTER_VERSION, version), (meta::ROSTER_FETCHED_AT, now)] {
                tx.exec(
                    "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    params![k, v.to_string()],
                )?;
            }
            Ok(())
        })
    }

    pub fn roster(&self) -> Result<Vec<Pc>> {
        let mut st = self.conn.prepare_cached("SELECT number, label, hostname FROM roster_cache ORDER BY number")?;
        let rows = st
            .query_map([], |r| Ok(Pc { number: r.get(0)?, label: r.get(1)?, hostname: r.get(2)? }))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    pub fn alerts_replace(&mut self, alerts: &[Alert]) -> Result<()> {
        self.write(|tx| {
            tx.exec("DELETE FROM alerts_cache", [])?;
            for a in alerts {
                tx.exec(
                    "INSERT OR REPLACE INTO alerts_cache (key, json) VALUES (?1, ?2)",
                    params![a.key, serde_json::to_string(a).unwrap()],
                )?;
            }
            Ok(())
        })
    }

    pub fn alerts(&self) -> Result<Vec<Alert>> {
        let mut st = self.conn.prepare_cached("SELECT json FROM alerts_cache")?;
        let mut v: Vec<Alert> = st
            .query_map([], |r| r.get::<_, String>(0))?
            .filter_map(|j| j.ok().and_then(|j| serde_json::from_str(&j).ok()))
            .collect();
        v.sort_by_key(|a| std::cmp::Reverse(a.updated_at));
        Ok(v)
    }
}
