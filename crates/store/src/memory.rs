//! The memory index: an FTS5 table over the repo's
//! `.claude/memory/**/*.md` entries, keyed by repo, with each file's size and
//! modification time so that only changed files are parsed again. The files
//! are the truth; this is a cache that never goes into the repo.

use crate::Cached as _;
use crate::{Result, Store};
use rusqlite::params;

/// One entry as indexed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryRow {
    pub topic: String,
    pub kind: String,
    /// Milliseconds since the epoch (UTC).
    pub at: i64,
    pub by: String,
    pub text: String,
    pub why: String,
}

/// One indexed file's fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryFile {
    pub path: String,
    pub size: i64,
    pub mtime_ns: i64,
}

/// A file to (re)index with its entries.
#[derive(Debug, Clone)]
pub struct MemoryUpsert {
    pub file: MemoryFile,
    pub rows: Vec<MemoryRow>,
}

impl Store {
    /// The fingerprints of `repo`'s indexed files.
    pub fn memory_files(&self, repo: &str) -> Result<Vec<MemoryFile>> {
        let mut st = self.conn.prepare_cached("SELECT path, size, mtime_ns FROM memory_files WHERE repo = ?1")?;
        let rows =
            st.query_map([repo], |r| Ok(MemoryFile { path: r.get(0)?, size: r.get(1)?, mtime_ns: r.get(2)? }))?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    /// Re-indexes `upserts` and forgets `removed` paths, in one transaction.
    pub fn memory_apply(&mut self, repo: &str, upserts: &[MemoryUpsert], removed: &[String]) -> Result<()> {
        if upserts.is_empty() && removed.is_empty() {
            return Ok(());
        }
        self.write(|tx| {
            let mut del_rows = tx.prepare_cached("DELETE FROM memory_fts WHERE repo = ?1 AND path = ?2")?;
            let mut del_file = tx.prepare_cached("DELETE FROM memory_files WHERE repo = ?1 AND path = ?2")?;
            for p in removed {
                del_rows.execute(params![repo, p])?;
                del_file.execute(params![repo, p])?;
            }
            let mut ins = tx.prepare_cached(
                "INSERT INTO memory_fts (text, why, topic, repo, path, kind, at, by) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?;
            let mut file = tx.prepare_cached(
                "INSERT INTO memory_files (repo, path, size, mtime_ns) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(repo, path) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns",
            )?;
            for u in upserts {
                del_rows.execute(params![repo, u.file.path])?;
                for r in &u.rows {
                    ins.execute(params![r.text, r.why, r.topic, repo, u.file.path, r.kind, r.at, r.by])?;
                }
                file.execute(params![repo, u.file.path, u.file.size, u.file.mtime_ns])?;
            }
            Ok(())
        })
    }

    /// Entries of `repo` matching the FTS5 `query` (best first, then newest),
    /// and, when `substrings` is not empty, entries containing every one of
    /// them (for scripts the tokenizer keeps as one run, like Japanese).
    pub fn memory_search(
        &self,
        repo: &str,
        query: &str,
        substrings: &[String],
        limit: usize,
    ) -> Result<Vec<MemoryRow>> {
        let map = |r: &rusqlite::Row| {
            Ok(MemoryRow {
                text: r.get(0)?,
                why: r.get(1)?,
                topic: r.get(2)?,
                kind: r.get(3)?,
                at: r.get(4)?,
                by: r.get(5)?,
            })
        };
        let mut out: Vec<MemoryRow> = vec![];
        if !query.trim().is_empty() {
            let mut st = self.conn.prepare_cached(
                "SELECT text, why, topic, kind, at, by FROM memory_fts WHERE memory_fts MATCH ?1 AND repo = ?2
                 ORDER BY bm25(memory_fts), at DESC LIMIT ?3",
            )?;
            out = st.query_map(params![query, repo, limit as i64], map)?.collect::<std::result::Result<_, _>>()?;
        }
        if !substrings.is_empty() && out.len() < limit {
            let mut st = self.conn.prepare_cached(
                "SELECT text, why, topic, kind, at, by FROM memory_fts WHERE repo = ?1 ORDER BY at DESC",
            )?;
            let all: Vec<MemoryRow> = st.query_map(params![repo], map)?.collect::<std::result::Result<_, _>>()?;
            for r in all {
                let hay = format!("{} {} {}", r.text, r.why, r.topic).to_lowercase();
                if substrings.iter().all(|s| hay.contains(&s.to_lowercase())) && !out.contains(&r) {
                    out.push(r);
                    if out.len() >= limit {
                        break;
                    }
                }
            }
        }
        Ok(out)
    }

    /// How many entries `repo` has indexed.
    pub fn memory_count(&self, repo: &str) -> Result<i64> {
        Ok(self.conn.row("SELECT count(*) FROM memory_fts WHERE repo = ?1", [repo], |r| r.get(0))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(text: &str, at: i64) -> MemoryRow {
        MemoryRow {
            topic: "auth/session".into(),
            kind: "gotcha".into(),
            at,
            by: "pc-a".into(),
            text: text.into(),
            why: String::new(),
        }
    }

    #[test]
    fn fts5_is_compiled_in_and_the_index_follows_the_files() {
        let d = tempfile::tempdir().unwrap();
        let mut s = Store::open(&d.path().join("store.db")).unwrap();
        let opts: Vec<String> = s
            .conn
            .prepare("PRAGMA compile_options")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<std::result::Result<_, _>>()
            .unwrap();
        assert!(opts.iter().any(|o| o == "ENABLE_FTS5"), "{opts:?}");

        let f = |path: &str, mtime| MemoryFile { path: path.into(), size: 10, mtime_ns: mtime };
        s.memory_apply(
            "r1",
            &[MemoryUpsert {
                file: f("a.md", 1), rows: vec![row("token refresh races", 1), row("認証が失敗する", 2)]
            }],
            &[],
        )
        .unwrap();
        s.memory_apply("r2", &[MemoryUpsert { file: f("a.md", 1), rows: vec![row("token elsewhere", 1)] }], &[])
            .unwrap();
        assert_eq!(s.memory_count("r1").unwrap(), 2);
        assert_eq!(s.memory_search("r1", "\"token\"*", &[], 10).unwrap().len(), 1);
        assert_eq!(s.memory_search("r1", "", &["認証".into()], 10).unwrap()[0].text, "認証が失敗する");
        // Re-indexing a file replaces its rows; removing forgets them.
        s.memory_apply("r1", &[MemoryUpsert { file: f("a.md", 2), rows: vec![row("only this", 3)] }], &[]).unwrap();
        assert_eq!(s.memory_count("r1").unwrap(), 1);
        assert_eq!(s.memory_files("r1").unwrap(), vec![f("a.md", 2)]);
        s.memory_apply("r1", &[], &["a.md".into()]).unwrap();
        assert_eq!(s.memory_count("r1").unwrap(), 0);
        assert_eq!(s.memory_count("r2").unwrap(), 1);
    }
}
