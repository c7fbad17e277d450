//! The code map's cache (`pcmail map`): one row per mapped file of a repo, with
//! the fingerprint that says whether the file changed (size, modification time,
//! content hash) and the parsed entry (opaque JSON owned by pcmail-codemap).

use crate::Cached as _;
use crate::{Result, Store};
use rusqlite::params;

/// One cached file. `version` is the extractor's version: a row made by
/// another version is a miss.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodemapRow {
    pub path: String,
    pub size: i64,
    pub mtime_ns: i64,
    pub hash: String,
    pub version: i64,
    pub entry: String,
}

impl Store {
    /// Every cached file of `repo` (the repo's canonical root path).
    pub fn codemap_rows(&self, repo: &str) -> Result<Vec<CodemapRow>> {
        let mut st = self
            .conn
            .prepare_cached("SELECT path, size, mtime_ns, hash, version, entry FROM codemap_files WHERE repo = ?1")?;
        let rows = st.query_map([repo], |r| {
            Ok(CodemapRow {
                path: r.get(0)?,
                size: r.get(1)?,
                mtime_ns: r.get(2)?,
                hash: r.get(3)?,
                version: r.get(4)?,
                entry: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    /// Stores `upserts` and forgets `removed` paths of `repo`, in one transaction.
    pub fn codemap_apply(&mut self, repo: &str, upserts: &[CodemapRow], removed: &[String]) -> Result<()> {
        if upserts.is_empty() && removed.is_empty() {
            return Ok(());
        }
        self.write(|tx| {
            let mut up = tx.prepare_cached(
                "INSERT INTO codemap_files (repo, path, size, mtime_ns, hash, version, entry)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT(repo, path) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns,
                   hash = excluded.hash, version = excluded.version, entry = excluded.entry",
            )?;
            for r in upserts {
                up.execute(params![repo, r.path, r.size, r.mtime_ns, r.hash, r.version, r.entry])?;
            }
            let mut del = tx.prepare_cached("DELETE FROM codemap_files WHERE repo = ?1 AND path = ?2")?;
            for p in removed {
                del.execute(params![repo, p])?;
            }
            Ok(())
        })
    }

    /// Forgets everything cached for `repo`.
    pub fn codemap_clear(&mut self, repo: &str) -> Result<usize> {
        Ok(self.conn.exec("DELETE FROM codemap_files WHERE repo = ?1", [repo])?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(path: &str, hash: &str) -> CodemapRow {
        CodemapRow { path: path.into(), size: 3, mtime_ns: 7, hash: hash.into(), version: 1, entry: "{}".into() }
    }

    #[test]
    fn apply_upserts_removes_and_keeps_repos_apart() {
        let d = tempfile::tempdir().unwrap();
        let mut s = Store::open(&d.path().join("store.db")).unwrap();
        s.codemap_apply("/r1", &[row("a.rs", "h1"), row("b.rs", "h2")], &[]).unwrap();
        s.codemap_apply("/r2", &[row("a.rs", "other")], &[]).unwrap();
        s.codemap_apply("/r1", &[row("a.rs", "h3")], &["b.rs".into()]).unwrap();
        let got = s.codemap_rows("/r1").unwrap();
        assert_eq!(got, vec![row("a.rs", "h3")]);
        assert_eq!(s.codemap_rows("/r2").unwrap(), vec![row("a.rs", "other")]);
        assert_eq!(s.codemap_clear("/r1").unwrap(), 1);
        assert!(s.codemap_rows("/r1").unwrap().is_empty());
    }
}
