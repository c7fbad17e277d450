//! The op table and every limit both servers (and the tray window) share,
//! as one JSON document: `tests/protocol/generated/op-table.json` is this
//! value written out (a test in this crate fails when the file differs), and
//! the Apps Script tests and the tray window read that file.

use crate::op_table::{OpKind, FEATURES};
use crate::{job, lease, model::limits, rules, sessions};
use serde_json::{json, Map, Value};

/// Names and values of constants, for the shared table.
macro_rules! consts {
    ($($path:path),* $(,)?) => {{
        let mut m = Map::new();
        $( m.insert(last_segment(stringify!($path)).to_string(), json!($path)); )*
        Value::Object(m)
    }};
}

fn last_segment(path: &str) -> &str {
    path.rsplit("::").next().unwrap_or(path).trim()
}

/// The table and every limit both servers (and the tray window) share, as
/// `tests/protocol/generated/op-table.json` holds it.
/// Objects' keys are sorted, whichever order serde_json keeps (the
/// workspace builds it with `preserve_order`), so the file is the same from
/// every build.
pub fn shared_table() -> Value {
    sorted(table())
}

fn sorted(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut pairs: Vec<(String, Value)> = m.into_iter().collect();
            pairs.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(pairs.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(sorted).collect()),
        other => other,
    }
}

fn table() -> Value {
    let ops: Vec<Value> = OpKind::ALL
        .iter()
        .map(|k| {
            let s = k.spec();
            json!({
                "name": s.name,
                "class": s.class.as_str(),
                "readOnly": s.read_only,
                "onRoster": s.on_roster,
                "feature": s.feature,
                "gasLock": s.gas_lock,
                "wakes": s.wakes,
            })
        })
        .collect();
    let names = |specs: Vec<job::CommandSpec>| specs.into_iter().map(|c| c.name).collect::<Vec<_>>();
    json!({
        "protocolVersion": crate::model::PROTOCOL_VERSION,
        "features": FEATURES,
        "ops": ops,
        "limits": consts!(
            limits::SUBJECT_MAX_CHARS,
            limits::BODY_MAX_CHARS,
            limits::BODY_BYTES_MAX,
            limits::HOP_LIMIT,
            limits::POLL_LIMIT_DEFAULT,
            limits::POLL_LIMIT_MAX,
            limits::UPDATES_MAX,
            limits::STATUS_IDS_MAX,
            limits::MARKS_MAX,
            limits::WAIT_MS_MAX,
            limits::MIN,
            limits::UNSEEN_URGENT_MS,
            limits::UNSEEN_MS,
            limits::UNDELIVERED_MS,
            limits::STALE_PC_MS,
            limits::POLL_RECORD_STEP_MS,
            limits::SWEEP_EVERY_MS,
            limits::EXPIRES_IN_MAX_MS,
            limits::JOIN_CODE_DEFAULT_MS,
            limits::JOIN_CODE_MAX_MS,
            limits::RECIPIENTS_MAX,
            rules::ACTOR_MAX_CHARS,
            rules::REASON_MAX_CHARS,
        ),
        "lease": consts!(
            lease::HEARTBEAT_MS,
            lease::STALE_AFTER_MS,
            lease::STALE_ALERT_MS,
            lease::ENDED_WINDOW_MS,
            lease::TTL_MIN_MS,
            lease::TTL_MAX_MS,
            rules::FILES_MAX,
            rules::GLOB_MAX_CHARS,
            rules::RESOURCE_MAX_CHARS,
            lease::DESCRIPTION_MAX_CHARS,
            lease::REPO_MAX_CHARS,
            lease::CLAIM_ID_MAX_CHARS,
            lease::SESSION_MAX_CHARS,
            lease::POLL_ITEMS_MAX,
        ),
        "job": consts!(
            job::HEARTBEAT_MS,
            job::STALE_AFTER_MS,
            job::DEDUP_WINDOW_DEFAULT_MS,
            job::DEDUP_WINDOW_MAX_MS,
            job::QUEUED_MAX_AGE_MS,
            job::OUTPUT_CAP_BYTES,
            job::TIME_LIMIT_MIN_MS,
            job::TIME_LIMIT_MAX_MS,
            job::ARGS_MAX,
            job::STRING_MAX_LEN_DEFAULT,
            job::STRING_MAX_LEN_CAP,
            job::COMMANDS_MAX,
            job::ARTIFACTS_MAX,
            job::ARTIFACT_MAX_CHARS,
            job::DESCRIPTION_MAX_CHARS,
            job::VALUES_MAX,
            job::PATTERN_MAX_CHARS,
            job::OFFERED_MAX,
            job::POLL_ITEMS_MAX,
            job::LIST_LIMIT_DEFAULT,
            job::LIST_LIMIT_MAX,
            job::RUNNER_MAX_CHARS,
            job::SESSION_MAX_CHARS,
            job::SERVER_TARGET,
            job::SERVER_ACTOR,
            job::CHUNK_START_DEADLINE_PERCENT,
            job::CHUNK_FAILURES_MAX,
            job::CHUNK_FAILURE_EXPIRY_MS,
            job::PC_PROBE_ITEMS_MAX,
            job::REASON_NO_HEARTBEAT,
            job::REASON_PAST_LIMIT,
            job::REASON_NEVER_STARTED,
            job::REFUSED_NO_EXECUTOR,
            job::REFUSED_NOT_WHITELISTED,
            job::REFUSED_BAD_ARGUMENT,
            job::REFUSED_SUBMITTER_NOT_ALLOWED,
            job::REFUSED_TARGET_REVOKED,
        ),
        "jobBuiltins": {
            "server": names(job::server_builtins()),
            "pc": names(job::pc_builtins()),
        },
        "sessions": consts!(
            sessions::SESSIONS_MAX,
            sessions::SESSION_MAX_CHARS,
            sessions::REPO_MAX_CHARS,
            sessions::BRANCH_MAX_CHARS,
            sessions::CWD_MAX_CHARS,
            sessions::LEASES_MAX,
            sessions::REPORT_FRESH_MS,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_are_named_by_their_own_names() {
        let t = shared_table();
        assert_eq!(t["limits"]["SUBJECT_MAX_CHARS"], json!(200));
        assert_eq!(t["job"]["SERVER_TARGET"], json!("@server"));
        assert_eq!(t["ops"].as_array().unwrap().len(), OpKind::ALL.len());
        assert_eq!(
            t["ops"][0],
            json!({"name": "hello", "class": "any", "readOnly": true, "onRoster": false,
                "feature": null, "gasLock": "unlocked", "wakes": []})
        );
    }
}
