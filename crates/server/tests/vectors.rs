//! Runs every protocol vector in `tests/protocol/*.json` (docs/protocol.md,
//! "Vector files") against a fresh engine per file: on SQLite (in memory)
//! and on PostgreSQL (a database copied from a migrated template, in a
//! throwaway cluster this test starts).

use pcmail_pgtest::Postgres;
use pcmail_server::store::pg_url::PgTarget;
use pcmail_server::{Engine, EngineConfig};
use serde_json::{json, Value};
use std::path::PathBuf;

fn vector_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/protocol")
}

/// Subset match: every key of `expect` present and equal; arrays of equal
/// length matched element by element; `"<any>"` matches any present value.
fn subset_match(expect: &Value, actual: &Value, path: &str) -> Result<(), String> {
    if expect == &json!("<any>") {
        return Ok(());
    }
    match (expect, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, ev) in e {
                let p = format!("{path}.{k}");
                match a.get(k) {
                    Some(av) => subset_match(ev, av, &p)?,
                    None => return Err(format!("{p}: missing (expected {ev})")),
                }
            }
            Ok(())
        }
        (Value::Array(e), Value::Array(a)) => {
            if e.len() != a.len() {
                return Err(format!("{path}: expected {} elements, got {}: {actual}", e.len(), a.len()));
            }
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                subset_match(ev, av, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        _ if expect == actual => Ok(()),
        _ => Err(format!("{path}: expected {expect}, got {actual}")),
    }
}

/// Makes the engine a vector file runs on.
type Open<'a> = dyn FnMut(EngineConfig) -> Result<Engine, String> + 'a;

/// Answers one step's request.
type Handle<'a> = dyn Fn(&Engine, &Value, i64) -> Value + 'a;

fn run_file(path: &PathBuf, open: &mut Open<'_>, handle: &Handle<'_>) -> Result<usize, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("read: {e}"))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("not JSON: {e}"))?;
    // "servers": ["gas"] marks a vector for behaviour only gas has so far (docs/protocol.md).
    if let Some(servers) = v["servers"].as_array() {
        if !servers.iter().any(|s| s == "rust") {
            eprintln!("{}: skipped (servers: {})", path.display(), v["servers"]);
            return Ok(0);
        }
    }
    let token = v["token"].as_str().filter(|t| !t.is_empty()).map(str::to_string);
    let engine = open(EngineConfig { token: token.clone(), ..Default::default() })?;
    let steps = v["steps"].as_array().ok_or("no \"steps\" array")?;
    let first_now = steps.first().and_then(|s| s["now"].as_i64()).unwrap_or(0);
    // The roster is seeded with roster.set semantics.
    for pc in v["roster"].as_array().cloned().unwrap_or_default() {
        let req = json!({"v": 1, "op": "roster.set", "pc": pc["label"], "token": token, "args": pc});
        let resp = engine.handle_value(&req, first_now);
        if resp["ok"] != json!(true) {
            return Err(format!("seeding roster with {pc}: {resp}"));
        }
    }
    for (i, step) in steps.iter().enumerate() {
        let now = step["now"].as_i64().ok_or(format!("step {i}: no \"now\""))?;
        let resp = match (step.get("raw"), step.get("request")) {
            (Some(Value::String(raw)), _) => engine.handle_bytes(raw.as_bytes(), now),
            (_, Some(req)) => handle(&engine, req, now),
            _ => return Err(format!("step {i}: neither \"request\" nor \"raw\"")),
        };
        if std::env::var_os("PCMAIL_VECTOR_TRACE").is_some() {
            eprintln!("{} step {i}: {resp}", path.display());
        }
        let what = step.get("note").and_then(Value::as_str).unwrap_or("");
        subset_match(&step["expect"], &resp, "$").map_err(|e| {
            format!(
                "step {i} {what}: {e}\n  request: {}\n  response: {resp}",
                step.get("request").unwrap_or(&step["raw"])
            )
        })?;
        if resp["ok"] == json!(true) && resp["now"] != json!(now) {
            return Err(format!("step {i}: response now {} is not the step's now {now}", resp["now"]));
        }
    }
    Ok(steps.len())
}

fn vector_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(vector_dir())
        .expect("tests/protocol exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no vectors found in {}", vector_dir().display());
    files
}

fn run_all(store: &str, open: &mut Open<'_>) {
    run_all_with(store, open, &|engine, req, now| engine.handle_value(req, now))
}

fn run_all_with(store: &str, open: &mut Open<'_>, handle: &Handle<'_>) {
    let files = vector_files();
    let mut failures = Vec::new();
    let mut steps = 0;
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        match run_file(f, open, handle) {
            Ok(n) => steps += n,
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{store}: {} of {} vector files failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n\n")
    );
    eprintln!("{store}: {} vector files, {steps} steps passed", files.len());
}

#[test]
fn every_protocol_vector_passes() {
    run_all("sqlite", &mut |config| Engine::open_in_memory(config).map_err(|e| format!("engine: {e}")));
}

#[test]
fn every_protocol_vector_passes_on_postgres() {
    let pg = Postgres::start();
    let url = pg.create_database("vectors");
    // One store (its connections and prepared statements), emptied before each file.
    let base = Engine::open_postgres(PgTarget::parse(&url, None).unwrap(), EngineConfig::default()).unwrap();
    run_all("postgres", &mut |config| {
        base.erase_everything_for_tests().map_err(|e| format!("reset: {e}"))?;
        Ok(base.sharing_store(config).expect("a PostgreSQL engine"))
    });
}

/// The same vectors as `pcmail serve` answers them on PostgreSQL: each
/// request first tried on the async runtime from its reads sent ahead
/// (`Engine::answer_on_runtime`), and run as usual only when it needs more.
#[test]
fn every_protocol_vector_passes_on_postgres_answered_on_the_runtime() {
    let pg = Postgres::start();
    let url = pg.create_database("vectors_rt");
    let base = Engine::open_postgres(PgTarget::parse(&url, None).unwrap(), EngineConfig::default()).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    run_all_with(
        "postgres (runtime)",
        &mut |config| {
            base.erase_everything_for_tests().map_err(|e| format!("reset: {e}"))?;
            Ok(base.sharing_store(config).expect("a PostgreSQL engine"))
        },
        &|engine, req, now| {
            if let Ok(parsed) = pcmail_core::protocol::parse_request(req) {
                if let Some(answer) = rt.block_on(engine.answer_on_runtime(&parsed, now)) {
                    return answer;
                }
            }
            engine.handle_value(req, now)
        },
    );
    // Every file's engine shares the one store, and its counters.
    let (answered, handed_on) = base.runtime_answers().unwrap();
    eprintln!("answered on the runtime: {answered}; ran on the pool after all: {handed_on}");
    assert!(answered > 50, "hardly any request was answered on the runtime: {answered}");
    assert!(handed_on > 0, "no request needed more than its reads ahead: the fallback is untested");
}

#[test]
fn subset_match_is_strict_where_it_must_be() {
    assert!(subset_match(&json!({"a": 1}), &json!({"a": 1, "b": 2}), "$").is_ok());
    assert!(subset_match(&json!({"a": 1}), &json!({"a": 2}), "$").is_err());
    assert!(subset_match(&json!({"a": "<any>"}), &json!({}), "$").is_err());
    assert!(subset_match(&json!([1]), &json!([1, 2]), "$").is_err());
    assert!(subset_match(&json!({"a": "<any>"}), &json!({"a": null}), "$").is_ok());
}
