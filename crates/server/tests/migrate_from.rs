//! `--migrate-from`: every protocol vector's end state, written to a real
//! SQLite serve file, is copied into a fresh PostgreSQL database with the
//! same rows in every table; a second copy into the same database is refused.

use pcmail_pgtest::Postgres;
use pcmail_server::migrate_from::{migrate_from_sqlite, MigrateFromError};
use pcmail_server::store::pg_url::PgTarget;
use pcmail_server::{Engine, EngineConfig};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Vectors that between them leave rows in every table (asserted below).
const VECTORS: &[&str] = &[
    "cred-enrol-join.json",
    "cred-revoke-rotate.json",
    "jobs-dedup.json",
    "jobs-start-report.json",
    "leases-takeover.json",
    "leases-poll.json",
    "mail-lifecycle-new-delivered-seen-done.json",
    "names-mail.json",
    "names-take-move-collide.json",
    "received-updates-feed.json",
    "srv-alert-unseen.json",
    "srv-broadcast.json",
];

fn vectors() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/protocol");
    VECTORS.iter().map(|v| dir.join(v)).collect()
}

/// Runs a vector's steps into a SQLite file (answers are the vector test's business).
fn fill(path: &Path, vector: &Path) -> bool {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(vector).unwrap()).unwrap();
    if v["servers"].as_array().is_some_and(|s| !s.iter().any(|x| x == "rust")) {
        return false;
    }
    let token = v["token"].as_str().filter(|t| !t.is_empty()).map(str::to_string);
    let engine = Engine::open(path, EngineConfig { token: token.clone(), ..Default::default() }).unwrap();
    let steps = v["steps"].as_array().unwrap();
    let first_now = steps.first().and_then(|s| s["now"].as_i64()).unwrap_or(0);
    for pc in v["roster"].as_array().cloned().unwrap_or_default() {
        engine.handle_value(
            &json!({"v": 1, "op": "roster.set", "pc": pc["label"], "token": token, "args": pc}),
            first_now,
        );
    }
    for step in steps {
        let now = step["now"].as_i64().unwrap();
        match (step.get("raw"), step.get("request")) {
            (Some(Value::String(raw)), _) => engine.handle_bytes(raw.as_bytes(), now),
            (_, Some(req)) => engine.handle_value(req, now),
            _ => continue,
        };
    }
    true
}

fn sqlite_counts(path: &Path) -> Vec<(String, i64)> {
    let c = rusqlite::Connection::open(path).unwrap();
    let tables: Vec<String> = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    tables
        .into_iter()
        .map(|t| {
            let n: i64 = c.query_row(&format!("SELECT count(*) FROM {t}"), [], |r| r.get(0)).unwrap();
            (t, n)
        })
        .collect()
}

#[test]
fn every_vectors_state_is_copied_whole_and_a_second_copy_is_refused() {
    let pg = Postgres::start();
    // One database with the schema made, copied for each vector (its own migration is then a no-op).
    let tpl = pg.create_database("tpl");
    pcmail_server::prepare_postgres(&PgTarget::parse(&tpl, None).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut copied_rows = 0u64;
    let mut tables_seen = std::collections::BTreeSet::new();
    for (i, vector) in vectors().iter().enumerate() {
        let file = dir.path().join(format!("v{i}.db"));
        if !fill(&file, vector) {
            continue;
        }
        let url = pg.create_database_from(&format!("v{i}"), "tpl");
        let target = PgTarget::parse(&url, None).unwrap();
        let report = migrate_from_sqlite(&file, &target).unwrap_or_else(|e| panic!("{}: {e}", vector.display()));
        let expected = sqlite_counts(&file);
        let got: Vec<(String, i64)> = report.tables.iter().map(|t| (t.table.clone(), t.rows as i64)).collect();
        assert_eq!(got, expected, "{}", vector.display());
        // Counted again from PostgreSQL itself, not from the report.
        let mut c = pg.connect(&format!("v{i}"));
        for (t, n) in &expected {
            let m: i64 = c.query_one(&format!("SELECT count(*) FROM {t}"), &[]).unwrap().get(0);
            assert_eq!(m, *n, "{}: table {t}", vector.display());
            if *n > 0 {
                tables_seen.insert(t.clone());
            }
        }
        copied_rows += report.total_rows();
        // The identity counters go on past the copied rows.
        let max_seq: Option<i64> = c.query_one("SELECT max(seq) FROM event", &[]).unwrap().get(0);
        if let Some(max) = max_seq {
            let next: i64 = c
                .query_one(
                    "INSERT INTO event (mail_id, sender, state, at, by) VALUES ('x', 'x', 'done', 0, 'x') RETURNING seq",
                    &[],
                )
                .unwrap()
                .get(0);
            assert!(next > max, "{}: new seq {next} after copied {max}", vector.display());
        }
        drop(c);
        if i == 0 {
            let again = migrate_from_sqlite(&file, &target);
            assert!(matches!(again, Err(MigrateFromError::NotEmpty(_))), "{}: {again:?}", vector.display());
        }
    }
    // The vectors between them fill every table pcmail has but the ones only timers write.
    for t in [
        "pc",
        "mail",
        "event",
        "broadcast",
        "alert",
        "join_code",
        "audit",
        "lease",
        "lease_event",
        "job",
        "job_event",
        "name",
        "live_session",
    ] {
        assert!(tables_seen.contains(t), "no vector left rows in {t}: the copy of {t} is untested");
    }
    assert!(copied_rows > 150, "copied {copied_rows} rows");
}
