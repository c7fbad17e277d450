//! `pcmail serve --db postgres://… --migrate-from serve.db`: a team's whole
//! SQLite history (roster and credential hashes, join codes, audit log,
//! mail and timelines, leases, sessions and names, jobs, alerts) copied into
//! an empty PostgreSQL database in one transaction, then checked table by
//! table: the same number of rows and the same content digest on both
//! sides, or nothing is committed.
//!
//! The source is read from a snapshot made with SQLite's online backup API,
//! so the copy is consistent even if another process still has the file
//! open; what is written to the old file after the snapshot is not copied,
//! which is why the cutover stops the old server first (docs/deployment.md).

use crate::store::pg_url::PgTarget;
use crate::store::{Cell, Value, P};
use postgres::types::ToSql;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum MigrateFromError {
    #[error("{0}")]
    Source(String),
    #[error("{0}")]
    Target(String),
    #[error(
        "the PostgreSQL database already holds pcmail data ({0}): --migrate-from copies into an empty database only"
    )]
    NotEmpty(String),
    #[error("the copy does not match the source ({0}); nothing was committed")]
    Mismatch(String),
}

/// Rows and digest per table, as checked on both sides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableCount {
    pub table: String,
    pub rows: u64,
}

#[derive(Debug, Clone)]
pub struct MigrateReport {
    pub tables: Vec<TableCount>,
    pub schema_version: usize,
    /// The snapshot the rows came from was taken at this source version.
    pub source_version: i64,
}

impl MigrateReport {
    pub fn total_rows(&self) -> u64 {
        self.tables.iter().map(|t| t.rows).sum()
    }
}

fn src_err(e: impl std::fmt::Display) -> MigrateFromError {
    MigrateFromError::Source(e.to_string())
}

fn pg_err(e: postgres::Error) -> MigrateFromError {
    MigrateFromError::Target(crate::store::pg_message(&e))
}

/// An order-independent digest of a table's rows: the wrapping sum of one
/// hash per row, so the two sides may list rows in any order.
#[derive(Default)]
struct Digest {
    rows: u64,
    sum: u64,
}

impl Digest {
    fn add(&mut self, row: &[Value]) {
        let mut h = std::hash::DefaultHasher::new();
        for v in row {
            match v {
                Value::Null => 0u8.hash(&mut h),
                Value::Int(i) => (1u8, i).hash(&mut h),
                Value::Real(f) => (2u8, f.to_bits()).hash(&mut h),
                Value::Text(s) => (3u8, s).hash(&mut h),
            }
        }
        self.rows += 1;
        self.sum = self.sum.wrapping_add(h.finish());
    }
}

/// Copies `source` (a SQLite serve database) into the empty database at `target`.
pub fn migrate_from_sqlite(source: &Path, target: &PgTarget) -> Result<MigrateReport, MigrateFromError> {
    if !source.is_file() {
        return Err(src_err(format!("{} is not a file", source.display())));
    }
    // The snapshot: the backup API copies a consistent state page by page.
    let dir = tempfile::tempdir().map_err(src_err)?;
    let snap_path = dir.path().join("snapshot.db");
    {
        let live = rusqlite::Connection::open_with_flags(source, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| src_err(format!("opening {}: {e}", source.display())))?;
        live.backup(rusqlite::MAIN_DB, &snap_path, None::<fn(rusqlite::backup::Progress)>)
            .map_err(|e| src_err(format!("snapshot of {}: {e}", source.display())))?;
    }
    let mut snap = rusqlite::Connection::open(&snap_path).map_err(src_err)?;
    let source_version: i64 = snap.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(src_err)?;
    // An older file is brought to this build's schema (on the snapshot, never the original).
    crate::schema::migrate(&mut snap).map_err(|e| src_err(format!("{}: {e}", source.display())))?;

    let store = crate::store::pg::PgStore::open(target.clone()).map_err(|e| MigrateFromError::Target(e.to_string()))?;
    let report = store
        .with_client(|client| Ok(copy(&snap, client, source_version)))
        .map_err(|e| MigrateFromError::Target(e.to_string()))??;
    Ok(report)
}

/// The tables of the source, in dependency-free order (pcmail has no
/// foreign keys), each with its columns.
fn source_tables(snap: &rusqlite::Connection) -> Result<Vec<(String, Vec<String>)>, MigrateFromError> {
    let names: Vec<String> = snap
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(src_err)?;
    let mut out = Vec::new();
    for t in names {
        let cols: Vec<String> = snap
            .prepare(&format!("SELECT name FROM pragma_table_info('{t}') ORDER BY cid"))
            .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
            .map_err(src_err)?;
        out.push((t, cols));
    }
    Ok(out)
}

fn copy(
    snap: &rusqlite::Connection,
    client: &mut postgres::Client,
    source_version: i64,
) -> Result<MigrateReport, MigrateFromError> {
    let tables = source_tables(snap)?;
    let mut tx = client.transaction().map_err(pg_err)?;
    // Empty means: no row anywhere but the settings the first migration seeds.
    let mut held = Vec::new();
    for (t, _) in &tables {
        let n: i64 = tx
            .query_one(&format!("SELECT count(*) FROM {t}{}", if t == "meta" { " WHERE value <> 0" } else { "" }), &[])
            .map_err(pg_err)?
            .get(0);
        if n > 0 {
            held.push(format!("{t}: {n}"));
        }
    }
    if !held.is_empty() {
        return Err(MigrateFromError::NotEmpty(held.join(", ")));
    }
    tx.batch_execute("DELETE FROM meta").map_err(pg_err)?;

    let mut counts = Vec::new();
    for (t, cols) in &tables {
        let list = cols.iter().map(|c| format!("\"{c}\"")).collect::<Vec<_>>().join(", ");
        let marks = (1..=cols.len()).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ");
        let insert = tx.prepare(&format!("INSERT INTO {t} ({list}) VALUES ({marks})")).map_err(pg_err)?;
        let mut src_digest = Digest::default();
        let mut stmt = snap.prepare(&format!("SELECT {list} FROM {t}")).map_err(src_err)?;
        let mut rows = stmt.query([]).map_err(src_err)?;
        while let Some(r) = rows.next().map_err(src_err)? {
            let vals: Vec<Value> =
                (0..cols.len()).map(|i| Value::from_sqlite(r, i)).collect::<Result<_, _>>().map_err(src_err)?;
            src_digest.add(&vals);
            let params: Vec<P<'_>> = vals.iter().map(Value::as_param).collect();
            let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
            tx.execute(&insert, &refs)
                .map_err(|e| MigrateFromError::Target(format!("{t}: {}", crate::store::pg_message(&e))))?;
        }
        // Read back what PostgreSQL now holds and compare.
        let mut dst_digest = Digest::default();
        for r in tx.query(&format!("SELECT {list} FROM {t}"), &[]).map_err(pg_err)? {
            let vals: Vec<Value> = (0..cols.len())
                .map(|i| Value::from_pg(&r, i))
                .collect::<Result<_, _>>()
                .map_err(|e| MigrateFromError::Target(format!("{t}: {e}")))?;
            dst_digest.add(&vals);
        }
        if (src_digest.rows, src_digest.sum) != (dst_digest.rows, dst_digest.sum) {
            return Err(MigrateFromError::Mismatch(format!(
                "{t}: {} rows in the source, {} copied{}",
                src_digest.rows,
                dst_digest.rows,
                if src_digest.rows == dst_digest.rows { ", with different content" } else { "" }
            )));
        }
        counts.push(TableCount { table: t.clone(), rows: src_digest.rows });
    }
    // Identity columns go on past the copied numbers.
    let identities: BTreeMap<String, String> = tx
        .query(
            "SELECT table_name::text, column_name::text FROM information_schema.columns
             WHERE table_schema = current_schema() AND is_identity = 'YES'",
            &[],
        )
        .map_err(pg_err)?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    for (t, c) in &identities {
        tx.batch_execute(&format!(
            "SELECT setval(pg_get_serial_sequence('{t}', '{c}'), COALESCE((SELECT max(\"{c}\") FROM {t}), 0) + 1, false)"
        ))
        .map_err(pg_err)?;
    }
    tx.commit().map_err(pg_err)?;
    // Statistics for the planner now: without them the first requests on a
    // freshly copied history are planned blind (sequential scans of every
    // table) until autovacuum's next round, a minute or more away.
    client.batch_execute("ANALYZE").map_err(pg_err)?;
    Ok(MigrateReport { tables: counts, schema_version: crate::schema::schema_version(), source_version })
}
