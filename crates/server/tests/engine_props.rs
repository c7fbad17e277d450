//! Property test: random sequences of ops against the engine, with the
//! protocol's invariants checked after every step; on SQLite (a fresh
//! in-memory database per case) and on PostgreSQL (one database in a
//! throwaway cluster, emptied before each case).

use pcmail_core::{ErrorCode, State};
use pcmail_server::{Engine, EngineConfig};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};

const PCS: [&str; 3] = ["pc-a", "pc-b", "pc-c"];
const T0: i64 = 1_767_225_600_000;

#[derive(Debug, Clone)]
enum Step {
    Send {
        from: usize,
        to: usize,
        reuse: Option<usize>,
        body: u8,
        auto: bool,
        reply_to: Option<usize>,
        expires: Option<i64>,
    },
    Poll {
        pc: usize,
        confirm_mask: u32,
        limit: usize,
    },
    Mark {
        pc: usize,
        mail: usize,
        op: u8,
        at_offset: i64,
    },
    Sweep,
    Advance(i64),
    Garbage(Vec<u8>),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..4usize, 0..5usize, prop::option::weighted(0.2, 0..50usize), 0..3u8, any::<bool>(),
              prop::option::weighted(0.3, 0..50usize), prop::option::weighted(0.3, 0..4 * 3_600_000i64))
            .prop_map(|(from, to, reuse, body, auto, reply_to, expires)| Step::Send { from, to, reuse, body, auto, reply_to, expires }),
        4 => (0..3usize, any::<u32>(), 1..6usize).prop_map(|(pc, confirm_mask, limit)| Step::Poll { pc, confirm_mask, limit }),
        3 => (0..3usize, 0..50usize, 0..3u8, -100_000..100_000i64).prop_map(|(pc, mail, op, at_offset)| Step::Mark { pc, mail, op, at_offset }),
        1 => Just(Step::Sweep),
        2 => (0..3 * 3_600_000i64).prop_map(Step::Advance),
        1 => prop::collection::vec(any::<u8>(), 0..60).prop_map(Step::Garbage),
    ]
}

fn req(op: &str, pc: &str, args: Value) -> Value {
    json!({"v": 1, "op": op, "pc": pc, "args": args})
}

#[derive(Default)]
struct Model {
    /// Every id the server accepted, with its recipient.
    accepted: Vec<(String, String)>,
    /// Mail ids sent by the client side (for reuse and replies).
    sent: Vec<Value>,
    last_state: HashMap<String, State>,
    /// Ids the recipient confirmed, with whether they were `new` at that time.
    confirmed: HashSet<String>,
    next_id: u32,
}

fn check_shape(resp: &Value) -> Result<(), TestCaseError> {
    if resp["ok"] == json!(true) {
        prop_assert!(resp["now"].is_i64(), "ok response without now: {resp}");
    } else {
        prop_assert_eq!(&resp["ok"], &json!(false), "neither ok nor error: {}", resp);
        let code = resp["error"]["code"].as_str().unwrap_or("");
        prop_assert!(ErrorCode::parse(code).is_some(), "unknown error code in {resp}");
        prop_assert!(!resp["error"]["message"].as_str().unwrap_or("").is_empty());
    }
    Ok(())
}

fn run(steps: Vec<Step>) -> Result<(), TestCaseError> {
    run_on(&Engine::open_in_memory(EngineConfig::default()).unwrap(), steps)
}

fn run_on(engine: &Engine, steps: Vec<Step>) -> Result<(), TestCaseError> {
    for (i, pc) in PCS.iter().enumerate() {
        let r = engine.handle_value(&req("roster.set", pc, json!({"label": pc, "hostname": format!("H{i}")})), T0);
        prop_assert_eq!(&r["ok"], &json!(true));
    }
    let mut now = T0;
    let mut m = Model::default();
    for st in steps {
        match st {
            Step::Advance(ms) => now += ms,
            Step::Garbage(bytes) => {
                let r = engine.handle_bytes(&bytes, now);
                check_shape(&r)?;
                prop_assert_eq!(&r["ok"], &json!(false));
            }
            Step::Sweep => {
                let r = engine.handle_value(&req("sweep", "pc-a", json!({})), now);
                check_shape(&r)?;
                prop_assert_eq!(&r["ok"], &json!(true));
            }
            Step::Send { from, to, reuse, body, auto, reply_to, expires } => {
                let sender = if from < 3 { PCS[from] } else { "pc-zz" };
                let to = match to {
                    0..=2 => PCS[to].to_string(),
                    3 => "*".to_string(),
                    _ => "pc".to_string(),
                };
                let id = match reuse.and_then(|k| m.sent.get(k % m.sent.len().max(1))) {
                    Some(prev) => prev["id"].as_str().unwrap().to_string(),
                    None => {
                        m.next_id += 1;
                        format!("mail-{T0}-{:08x}", m.next_id)
                    }
                };
                let text = ["=SUM(A1)", "'; DROP TABLE mail; --", "hi"][body as usize];
                let mut mail = json!({"id": id, "to": to, "body": text, "auto": auto});
                if let Some(k) = reply_to {
                    if let Some((rid, _)) = m.accepted.get(k % m.accepted.len().max(1)) {
                        mail["inReplyTo"] = json!(rid);
                        mail["hop"] = json!(1);
                    }
                }
                if let Some(e) = expires {
                    mail["expiresAt"] = json!(now + e);
                }
                let r = engine.handle_value(&req("send", sender, json!({"mail": mail})), now);
                check_shape(&r)?;
                if r["ok"] == json!(true) {
                    m.sent.push(mail.clone());
                    for cid in r["ids"].as_array().unwrap() {
                        let cid = cid.as_str().unwrap().to_string();
                        let recipient = match cid.split_once('~') {
                            Some((_, label)) => label.to_string(),
                            None => to.clone(),
                        };
                        if !m.accepted.iter().any(|(a, _)| a == &cid) {
                            prop_assert_eq!(&r["existing"], &json!(false));
                            m.accepted.push((cid, recipient));
                        }
                    }
                }
            }
            Step::Poll { pc, confirm_mask, limit } => {
                let me = PCS[pc];
                let confirm: Vec<String> = m
                    .accepted
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| confirm_mask & (1 << (k % 32)) != 0)
                    .map(|(_, (id, _))| id.clone())
                    .collect();
                let before: HashMap<String, State> = m.last_state.clone();
                let r = engine.handle_value(&req("poll", me, json!({"confirm": confirm, "limit": 500})), now);
                check_shape(&r)?;
                prop_assert_eq!(&r["ok"], &json!(true));
                let confirmed: HashSet<String> =
                    r["confirmed"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
                for id in &confirm {
                    let mine = m.accepted.iter().any(|(a, to)| a == id && to == me);
                    prop_assert_eq!(confirmed.contains(id), mine, "confirm of {} by {}", id, me);
                    if mine && before.get(id) == Some(&State::New) {
                        m.confirmed.insert(id.clone());
                    }
                }
                let returned: HashSet<String> =
                    r["mail"].as_array().unwrap().iter().map(|v| v["id"].as_str().unwrap().to_string()).collect();
                let _ = limit;
                // At least once until confirmed, never after: exactly the mail still new for me.
                let status = status_of(engine, &m, now)?;
                for (id, to) in &m.accepted {
                    let new_for_me = to == me && status[id]["state"] == json!("new");
                    prop_assert_eq!(returned.contains(id), new_for_me, "poll of {} and mail {}", me, id);
                }
                for id in &returned {
                    prop_assert!(!m.confirmed.contains(id), "confirmed mail {} came back", id);
                }
            }
            Step::Mark { pc, mail, op, at_offset } => {
                let Some((id, _)) = m.accepted.get(mail % m.accepted.len().max(1)).cloned() else { continue };
                let op = ["seen", "ack", "fail"][op as usize];
                let mk = json!({"markId": format!("k{mail}"), "id": id, "op": op, "at": now + at_offset, "by": PCS[pc], "reason": "r"});
                let r = engine.handle_value(&req("mark", PCS[pc], json!({"marks": [mk]})), now);
                check_shape(&r)?;
                prop_assert_eq!(&r["ok"], &json!(true));
                let res = &r["results"][0];
                let mine = m.accepted.iter().any(|(a, to)| a == &id && to == PCS[pc]);
                prop_assert_eq!(res["ok"] == json!(true), mine, "mark result {}", res);
            }
        }
        // Invariants over every accepted mail.
        let status = status_of(engine, &m, now)?;
        for (id, to) in &m.accepted {
            let mail = &status[id];
            let state = State::parse(mail["state"].as_str().unwrap()).unwrap();
            if let Some(prev) = m.last_state.get(id) {
                prop_assert!(state.rank() >= prev.rank(), "{id} moved back from {prev} to {state}");
                if prev.is_final() {
                    prop_assert_eq!(state, *prev, "final state of {} changed", id);
                }
            }
            m.last_state.insert(id.clone(), state);
            let tl = mail["timeline"].as_array().unwrap();
            prop_assert_eq!(&tl[0]["state"], &json!("new"));
            prop_assert_eq!(tl.last().unwrap()["state"].as_str().unwrap(), state.as_str());
            let ats: Vec<i64> = tl.iter().map(|e| e["at"].as_i64().unwrap()).collect();
            prop_assert!(ats.windows(2).all(|w| w[0] <= w[1]), "timeline at decreasing: {ats:?}");
            if m.confirmed.contains(id) {
                prop_assert!(
                    tl.iter().any(|e| e["state"] == json!("delivered") && e["by"] == json!(to)),
                    "confirmed {id} has no delivered by {to}: {tl:?}"
                );
            }
        }
    }
    Ok(())
}

/// The status of every accepted id, each asked by its recipient (a PC sees
/// only mail it sent or received); nothing is ever lost.
fn status_of(engine: &Engine, m: &Model, now: i64) -> Result<HashMap<String, Value>, TestCaseError> {
    let mut out = HashMap::new();
    let mut by_recipient: HashMap<&str, Vec<&String>> = HashMap::new();
    for (id, to) in &m.accepted {
        by_recipient.entry(to.as_str()).or_default().push(id);
    }
    for (to, ids) in by_recipient {
        for chunk in ids.chunks(200) {
            let r = engine.handle_value(&req("status", to, json!({"ids": chunk})), now);
            prop_assert_eq!(&r["ok"], &json!(true), "status: {}", r);
            prop_assert_eq!(&r["missing"], &json!([]), "lost mail: {}", r);
            for mail in r["mails"].as_array().unwrap() {
                out.insert(mail["id"].as_str().unwrap().to_string(), mail.clone());
            }
        }
    }
    Ok(out)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn random_op_sequences_keep_the_invariants(steps in prop::collection::vec(step(), 1..40)) {
        run(steps)?;
    }
}

/// The cluster and the engine on it, started once for all cases of this process.
fn postgres_engine() -> &'static Engine {
    static PG: std::sync::OnceLock<(pcmail_pgtest::Postgres, Engine)> = std::sync::OnceLock::new();
    &PG.get_or_init(|| {
        let pg = pcmail_pgtest::Postgres::start();
        let url = pg.create_database("props");
        let target = pcmail_server::store::pg_url::PgTarget::parse(&url, None).unwrap();
        let engine = Engine::open_postgres(target, EngineConfig::default()).unwrap();
        (pg, engine)
    })
    .1
}

proptest! {
    // Fewer cases than SQLite's: each step is a few round trips to PostgreSQL.
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]
    #[test]
    fn random_op_sequences_keep_the_invariants_on_postgres(steps in prop::collection::vec(step(), 1..40)) {
        let engine = postgres_engine();
        engine.erase_everything_for_tests().unwrap();
        run_on(engine, steps)?;
    }
}
