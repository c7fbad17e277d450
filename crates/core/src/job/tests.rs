use super::check::check_spec_body;
use super::*;
use crate::error::ErrorCode;
use crate::Millis;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

fn spec() -> CommandSpec {
    serde_json::from_value(json!({
    "name": "test", "subject": "checkout", "timeLimitMs": 600000,
    "artifacts": ["target/pcmail/{command}-{subject}-{ts}.log"],
    "args": [
        {"name": "checkout", "type": "checkout", "required": true, "values": ["app", "web"]},
        {"name": "crate", "type": "string", "pattern": "[a-z][a-z0-9_-]*", "maxLen": 40},
        {"name": "filter", "type": "string"},
        {"name": "jobs", "type": "int", "min": 1, "max": 16},
        {"name": "release", "type": "bool"},
        {"name": "profile", "type": "enum", "values": ["dev", "ci"]},
        {"name": "file", "type": "path", "maxLen": 100}
    ]}))
    .unwrap()
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn refusal(v: Value) -> (String, Option<String>) {
    let e = check_args(&spec(), &args(v)).unwrap_err();
    assert_eq!(e.code, ErrorCode::JobRefused, "{e:?}");
    assert_eq!(e.reason.as_deref(), Some(REFUSED_BAD_ARGUMENT));
    (e.field.clone().unwrap_or_default(), Some(e.message))
}

#[test]
fn the_example_spec_is_valid_and_its_args_check() {
    check_spec(&spec()).unwrap();
    let m = check_args(
        &spec(),
        &args(json!({"checkout": "app", "crate": "core", "jobs": "4", "release": "true", "file": "src/lib.rs"})),
    )
    .unwrap();
    assert_eq!(m["jobs"], ArgValue::Int(4));
    assert_eq!(m["release"], ArgValue::Bool(true));
    assert_eq!(subject_of(&spec(), &m), "app");
    // The wire form of the checked map is plain JSON values.
    assert_eq!(
        serde_json::to_value(&m).unwrap(),
        json!({"checkout": "app", "crate": "core", "file": "src/lib.rs", "jobs": 4, "release": true})
    );
}

#[test]
fn shell_metacharacters_are_just_characters() {
    for s in ["a; rm -rf /", "$(id)", "`id`", "a && b | c > d < e", "'\"*?[]{}~!#&", "a--help", "x -rf"] {
        let m = check_args(&spec(), &args(json!({"checkout": "app", "filter": s}))).unwrap();
        assert_eq!(m["filter"], ArgValue::Str(s.to_string()), "{s:?} changed");
    }
}

#[test]
fn arguments_never_become_options_unless_the_spec_allows_it() {
    for (name, v) in [
        ("filter", "--output=/tmp/x"),
        ("filter", "-rf"),
        ("filter", "-"),
        ("file", "--output=/tmp/x"),
        ("file", "-x/y"),
        ("file", "-"),
    ] {
        let e = check_args(&spec(), &args(json!({"checkout": "app", name: v}))).unwrap_err();
        assert_eq!(e.code, ErrorCode::JobRefused);
        assert_eq!(e.reason.as_deref(), Some(REFUSED_BAD_ARGUMENT));
        assert_eq!(e.field.as_deref(), Some(format!("args.{name}").as_str()), "{v}");
        assert!(e.message.contains("read as an option"), "{}", e.message);
    }
    // A dash inside the value, or a file reached as ./-name, is fine.
    for (name, v) in [("filter", "a-b"), ("file", "./-x"), ("file", "src/-x")] {
        assert!(check_args(&spec(), &args(json!({"checkout": "app", name: v}))).is_ok(), "{v}");
    }
    // The spec opts in per argument (and only string and path may).
    let mut s = spec();
    s.args[2].allow_dash = true;
    s.args[6].allow_dash = true;
    check_spec(&s).unwrap();
    assert!(check_args(&s, &args(json!({"checkout": "app", "filter": "--x", "file": "-y"}))).is_ok());
    let wire = serde_json::to_value(&s).unwrap();
    assert_eq!(wire["args"][2]["allowDash"], json!(true));
    assert!(wire["args"][1].get("allowDash").is_none(), "left out when false: {wire}");
    s.args[3].allow_dash = true;
    assert_eq!(check_spec(&s).unwrap_err().field.as_deref(), Some("args[3].allowDash"));
    // Other kinds are not affected: an int may be negative.
    let mut s = spec();
    s.args[3].min = Some(-5);
    assert!(check_args(&s, &args(json!({"checkout": "app", "jobs": "-3"}))).is_ok());
}

#[test]
fn the_reuse_identity_holds_every_argument() {
    let s = spec();
    let a = check_args(&s, &args(json!({"checkout": "app", "crate": "core"}))).unwrap();
    let b = check_args(&s, &args(json!({"checkout": "app", "crate": "server"}))).unwrap();
    let a2 = check_args(&s, &args(json!({"crate": "core", "checkout": "app"}))).unwrap();
    assert_eq!(reuse_identity("test", &a), reuse_identity("test", &a2));
    assert_ne!(reuse_identity("test", &a), reuse_identity("test", &b));
    assert_ne!(reuse_identity("test", &a), reuse_identity("build", &a));
    assert_eq!(reuse_identity("test", &a).len(), 16);
    let n = |p: &str, args: &BTreeMap<String, ArgValue>| artifact_name(p, "test", "app", args, "5");
    assert_eq!(n("out/{command}-{subject}-{crate}-{ts}.log", &a), "out/test-app-core-5.log");
    assert_eq!(n("out/{command}-{subject}-{crate}-{ts}.log", &b), "out/test-app-server-5.log");
    assert_eq!(n("out/{args}.log", &a), format!("out/{}.log", reuse_identity("test", &a)));
    // An optional argument not given makes nothing; an empty one `%`.
    assert_eq!(n("out/{filter}.log", &a), "out/.log");
    let mut e = a.clone();
    e.insert("filter".into(), ArgValue::Str(String::new()));
    assert_eq!(n("out/{filter}.log", &e), "out/%.log");
    let names: Vec<&str> = s.args.iter().map(|a| a.name.as_str()).collect();
    assert!(artifact_pins_identity("o/{args}-{ts}", &names, Some("checkout")));
    assert!(!artifact_pins_identity("o/{command}-{subject}-{ts}", &names, Some("checkout")));
    assert!(artifact_pins_identity("o/{subject}", &["checkout"], Some("checkout")));
    assert!(artifact_pins_identity("o/{checkout}-{target}", &["checkout", "target"], None));
    assert!(!artifact_pins_identity("o/{checkout}", &["checkout", "target"], None));
    check_artifact_pattern("o/{crate}-{args}-{ts}", &names).unwrap();
    assert!(check_artifact_pattern("o/{nope}", &names).unwrap_err().contains("{nope}"));
}

#[test]
fn reuse_needs_every_pattern_fresh_and_newer_than_head() {
    let f = |name: &str, modified: Millis| FoundArtifact { name: name.into(), modified };
    let rule = ReuseRule { within_ms: 3_600_000, not_before: None };
    let now = 10_000_000;
    assert_eq!(reusable(&[vec![f("a-1", now - 10), f("a-2", now - 5)]], rule, now), Some(vec!["a-2".into()]));
    // Too old, or older than the checkout's last commit: run again.
    assert_eq!(reusable(&[vec![f("a-1", now - 3_600_001)]], rule, now), None);
    let after_commit = ReuseRule { not_before: Some(now - 100), ..rule };
    assert_eq!(reusable(&[vec![f("a-1", now - 101)]], after_commit, now), None);
    assert_eq!(reusable(&[vec![f("a-1", now - 99)]], after_commit, now), Some(vec!["a-1".into()]));
    // Every pattern must have one; none, or no pattern at all, runs it.
    assert_eq!(reusable(&[vec![f("a", now)], vec![]], rule, now), None);
    assert_eq!(reusable(&[], rule, now), None);
    assert_eq!(reusable(&[vec![f("a", now)]], ReuseRule { within_ms: 0, ..rule }, now), None);
}

#[test]
fn hostile_values_are_refused_with_their_field() {
    let cases = [
        json!({"checkout": "app", "filter": "a\u{0}b"}),
        json!({"checkout": "app", "filter": "a\nb"}),
        json!({"checkout": "app", "filter": "a\u{1b}[2J"}),
        json!({"checkout": "app", "filter": "a\u{2028}b"}),
        json!({"checkout": "app", "filter": "x".repeat(201)}),
        json!({"checkout": "app", "crate": "Core"}),
        json!({"checkout": "app", "crate": "core; id"}),
        json!({"checkout": "app", "file": "../etc/passwd"}),
        json!({"checkout": "app", "file": "src/../../x"}),
        json!({"checkout": "app", "file": "/etc/passwd"}),
        json!({"checkout": "app", "file": "C:/Windows"}),
        json!({"checkout": "app", "file": "c:x"}),
        json!({"checkout": "app", "file": "..\\..\\x"}),
        json!({"checkout": "app", "file": ""}),
        json!({"checkout": "app", "file": "a\u{0}"}),
        json!({"checkout": "app", "file": "a/".repeat(51)}),
        json!({"checkout": "app", "jobs": 0}),
        json!({"checkout": "app", "jobs": 17}),
        json!({"checkout": "app", "jobs": "4; id"}),
        json!({"checkout": "app", "jobs": 1.5}),
        json!({"checkout": "app", "release": "yes"}),
        json!({"checkout": "app", "profile": "prod"}),
    ];
    let names = [
        "filter", "filter", "filter", "filter", "filter", "crate", "crate", "file", "file", "file", "file", "file",
        "file", "file", "file", "file", "jobs", "jobs", "jobs", "jobs", "release", "profile",
    ];
    for (c, n) in cases.into_iter().zip(names) {
        let (field, _) = refusal(c.clone());
        assert_eq!(field, format!("args.{n}"), "{c}");
    }
    // Checkouts: only the published names (never a path).
    for c in ["../app", "app/..", "/", "other", "APP", ""] {
        assert_eq!(refusal(json!({"checkout": c})).0, "args.checkout", "{c:?}");
    }
    assert_eq!(refusal(json!({"crate": "core"})).0, "args.checkout");
    assert_eq!(refusal(json!({"checkout": "app", "nope": 1})).0, "args.nope");
    assert_eq!(refusal(json!({"checkout": "app", "bad name\u{0}": 1})).0, "args");
    // A hard cap even when the spec allows more.
    let mut s = spec();
    s.args[2].max_len = Some(STRING_MAX_LEN_CAP);
    assert!(check_args(&s, &args(json!({"checkout": "app", "filter": "x".repeat(4096)}))).is_ok());
    assert!(check_args(&s, &args(json!({"checkout": "app", "filter": "x".repeat(4097)}))).is_err());
}

#[test]
fn bad_specs_name_their_field() {
    let field = |patch: &dyn Fn(&mut CommandSpec)| {
        let mut s = spec();
        patch(&mut s);
        check_spec(&s).unwrap_err().field.unwrap()
    };
    assert_eq!(field(&|s| s.name = "_debug_x".into()), "name");
    assert_eq!(field(&|s| s.name = "Test".into()), "name");
    assert_eq!(field(&|s| s.subject = Some("nope".into())), "subject");
    assert_eq!(field(&|s| s.time_limit_ms = 999), "timeLimitMs");
    assert_eq!(field(&|s| s.time_limit_ms = TIME_LIMIT_MAX_MS + 1), "timeLimitMs");
    assert_eq!(field(&|s| s.artifacts = vec!["../x".into()]), "artifacts[0]");
    assert_eq!(field(&|s| s.artifacts = vec!["/x/{command}".into()]), "artifacts[0]");
    assert_eq!(field(&|s| s.artifacts = vec!["x/{home}".into()]), "artifacts[0]");
    assert_eq!(field(&|s| s.args[1].pattern = Some("(".into())), "args[1].pattern");
    assert_eq!(field(&|s| s.args[3].pattern = Some("x".into())), "args[3].pattern");
    assert_eq!(field(&|s| s.args[1].max_len = Some(5000)), "args[1].maxLen");
    assert_eq!(field(&|s| s.args[3].min = Some(20)), "args[3].min");
    assert_eq!(field(&|s| s.args[5].values = None), "args[5].values");
    assert_eq!(field(&|s| s.args[1].name = "checkout".into()), "args[1].name");
    assert_eq!(field(&|s| s.args[1].name = "1x".into()), "args[1].name");
    assert_eq!(
        field(&|s| s.args = (0..21).map(|i| ArgSpec { name: format!("a{i}"), ..s.args[2].clone() }).collect()),
        "args"
    );
    for b in server_builtins() {
        check_spec_body(&b).unwrap();
        assert!(check_spec(&b).is_err() || !b.name.starts_with('_'));
    }
}

#[test]
fn builtins_check_their_args() {
    let mail = server_builtin("_debug_mail").unwrap();
    assert!(check_args(&mail, &args(json!({"id": "mail-1-0000abcd"}))).is_ok());
    assert!(check_args(&mail, &args(json!({"id": "mail-1-0000abcd~pc-b"}))).is_ok());
    assert!(check_args(&mail, &args(json!({"id": "x'; DROP"}))).is_err());
    assert!(check_args(&mail, &args(json!({}))).is_err());
    let jobs = server_builtin("_debug_jobs").unwrap();
    assert!(check_args(&jobs, &args(json!({"state": "timed_out"}))).is_ok());
    assert!(check_args(&jobs, &args(json!({"state": "done"}))).is_err());
    let unknown = check_args(&jobs, &args(json!({"x": 1}))).unwrap_err();
    assert!(unknown.message.contains("(it takes: state"), "{}", unknown.message);
    let pc = pc_builtins().into_iter().find(|s| s.name == "_debug_pc").unwrap();
    let none = check_args(&pc, &args(json!({"x": 1}))).unwrap_err();
    assert!(none.message.ends_with("(it takes none)"), "{}", none.message);
}

#[test]
fn states_move_forward_only() {
    use JobState::*;
    for s in JobState::ALL {
        assert!(!s.can_move_to(Queued), "{s} → queued");
        if s.is_ended() {
            assert!(JobState::ALL.iter().all(|n| !s.can_move_to(*n)), "{s} moved");
        }
    }
    assert!(Queued.can_move_to(Running) && Queued.can_move_to(Cancelled) && Queued.can_move_to(Ok));
    assert!(Running.can_move_to(TimedOut) && Running.can_move_to(Running));
    assert_eq!(JobState::parse("timed_out"), Some(TimedOut));
    assert_eq!(serde_json::to_value(TimedOut).unwrap(), json!("timed_out"));
}

#[test]
fn submitters_are_nobody_by_default_until_credentials_are_required() {
    let list = vec!["pc-a".to_string()];
    assert!(!submitter_allowed(None, "pc-a", false));
    assert!(submitter_allowed(None, "pc-a", true));
    assert!(submitter_allowed(Some(&list), "pc-a", false));
    assert!(!submitter_allowed(Some(&list), "pc-b", true));
    assert!(!submitter_allowed(Some(&[]), "pc-a", true));
}

#[test]
fn dedup_keys_ignore_order_and_string_forms() {
    let a = check_args(&spec(), &args(json!({"checkout": "app", "jobs": "4"}))).unwrap();
    let b = check_args(&spec(), &args(json!({"jobs": 4, "checkout": "app"}))).unwrap();
    assert_eq!(dedup_key("box", "test", &a), dedup_key("box", "test", &b));
    assert_ne!(dedup_key("box", "test", &a), dedup_key("box2", "test", &a));
    assert_ne!(dedup_key("box", "test", &a), dedup_key("box", "test2", &a));
    let c = check_args(&spec(), &args(json!({"checkout": "app", "jobs": 5}))).unwrap();
    assert_ne!(dedup_key("box", "test", &a), dedup_key("box", "test", &c));
    // The string "4" of a string argument is not the int 4 of another.
    let mut d = BTreeMap::new();
    d.insert("jobs".to_string(), ArgValue::Str("4".into()));
    d.insert("checkout".to_string(), ArgValue::Str("app".into()));
    assert_ne!(dedup_key("box", "test", &a), dedup_key("box", "test", &d));
    assert_eq!(dedup_key("box", "test", &a).len(), 64);
}

#[test]
fn job_ids_have_the_mail_id_shape() {
    let id = new_job_id(1_767_225_600_123, &mut rand::rng());
    assert!(id.starts_with("job-1767225600123-") && is_valid_job_id(&id), "{id}");
    for bad in [
        "",
        "job-",
        "job-1-",
        "job-1-0000ABCD",
        "job-1-000abcd",
        "job-x-0000abcd",
        "mail-1-0000abcd",
        "job-1-0000abcd~a",
        "job--0000abcd",
        "job-1234567890123456-0000abcd",
    ] {
        assert!(!is_valid_job_id(bad), "{bad:?}");
    }
}

#[test]
fn output_keeps_the_last_64_kib_on_a_char_boundary() {
    let short = "é".repeat(10);
    assert_eq!(cap_output(&short), (short.clone(), false));
    // 'é' is 2 bytes and 'あ' 3: the cut must land on a boundary.
    let long = format!("HEAD{}{}", "é".repeat(20_000), "あ".repeat(20_000)) + "TAIL";
    let (kept, cut) = cap_output(&long);
    assert!(cut);
    assert!(kept.len() <= OUTPUT_CAP_BYTES && kept.len() > OUTPUT_CAP_BYTES - 4);
    assert!(kept.ends_with("あTAIL") && !kept.contains("HEAD"));
    assert!(long.ends_with(&kept));
    let exact = "x".repeat(OUTPUT_CAP_BYTES);
    assert_eq!(cap_output(&exact), (exact.clone(), false));
}

#[test]
fn artifact_names_keep_the_subject_inside_its_directory() {
    let none = BTreeMap::new();
    assert_eq!(
        artifact_name("target/pcmail/{command}-{subject}-{ts}.log", "test", "app", &none, "5"),
        "target/pcmail/test-app-5.log"
    );
    assert_eq!(artifact_name("o/{subject}", "t", "../../x", &none, "5"), "o/..%2F..%2Fx");
    assert_eq!(artifact_name("o/{subject}", "t", "..", &none, "5"), "o/%2E%2E");
    assert!(check_relative_path(&artifact_name("o/{subject}", "t", "..", &none, "5")).is_ok());
    // One to one: values that differ give names that differ.
    let vals = ["a/b", "a_b", "a%2Fb", "", "%", ".", "..", "a b", "é"];
    let made: std::collections::BTreeSet<String> = vals.iter().map(|v| safe_name_part(v)).collect();
    assert_eq!(made.len(), vals.len(), "{made:?}");
    assert!(made.iter().all(|m| check_relative_path(m).is_ok() && !m.contains('/')));
}

#[test]
fn a_job_reads_back_from_its_wire_form() {
    let v = json!({"id": "job-1-0000abcd", "target": "box", "command": "test", "args": {"checkout": "app", "jobs": 4},
        "subject": "app", "submitter": {"pc": "pc-a", "session": "s1", "name": null}, "force": false, "rerunOf": null,
        "state": "ok", "submittedAt": 1, "startedAt": 2, "runStartedAt": 2, "runner": "box/77", "heartbeatAt": 3, "endedAt": 4,
        "timeLimitMs": 1000, "cancelRequested": false, "joined": 7,
        "result": {"ran": true, "exit": 0, "durationMs": 2, "output": "ok", "truncated": false, "artifacts": ["a.log"],
            "reused": [], "readBack": null, "verify": {"ok": true, "exit": 0, "output": ""}, "chunks": null, "data": null},
        "reason": null,
        "timeline": [{"at": 1, "state": "queued", "by": "pc-a/s1", "reason": null}]});
    let j: Job = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(j.args["jobs"], ArgValue::Int(4));
    assert_eq!(serde_json::to_value(&j).unwrap(), v);
}

#[test]
fn one_bad_report_is_refused_on_its_own() {
    let ok = json!({"jobId": "job-1-0000abcd", "runner": "box/1", "state": "ok", "result": {"ran": true}});
    let p = parse_poll_job(&json!({"take": true, "running": ["job-1-0000abcd", "nope", 7],
        "reports": [ok, {"jobId": "job-2-0000abcd", "runner": "box/1", "state": "running", "result": {"ran": true}}, 7]}))
    .unwrap();
    assert!(p.take);
    assert_eq!(p.running, vec!["job-1-0000abcd"]);
    assert!(p.reports[0].is_ok());
    let e = p.reports[1].as_ref().unwrap_err();
    assert_eq!((e.index, e.job_id.as_deref(), e.error.field.as_deref()), (1, Some("job-2-0000abcd"), Some("state")));
    assert_eq!(p.reports[2].as_ref().unwrap_err().index, 2);
    assert!(parse_poll_job(&json!({"running": {}})).is_err());
    let bad_wl = json!({"whitelist": {"hash": "h", "commands": [{"name": "x", "timeLimitMs": 5}]}});
    // A bad whitelist is refused on its own: the poll's other parts still count.
    let p = parse_poll_job(&bad_wl).unwrap();
    let e = p.whitelist.unwrap().unwrap_err();
    assert_eq!(e.to_error("whitelist").field.as_deref(), Some("job.whitelist.commands[0].timeLimitMs"));
    // What the PC publishes passes the same check first.
    let w = Whitelist {
        hash: "h".into(),
        commands: vec![],
        allowed_submitters: Some(vec!["pc\u{7}".into()]),
        checkouts: vec![],
    };
    assert_eq!(check_whitelist(&w).unwrap_err().field.as_deref(), Some("job.whitelist.allowedSubmitters"));
    let w = Whitelist { checkouts: vec!["".into()], allowed_submitters: None, ..w };
    assert_eq!(check_whitelist(&w).unwrap_err().field.as_deref(), Some("job.whitelist.checkouts"));
}

#[test]
fn submits_are_checked_when_parsed() {
    let good = json!({"jobId": "job-1-0000abcd", "target": "box", "command": "test", "args": {"checkout": "app"},
        "submitter": {"pc": "pc-a", "session": "s1"}});
    let a = parse_submit(good.as_object().unwrap()).unwrap();
    assert_eq!(parse_submit(serde_json::to_value(&a).unwrap().as_object().unwrap()).unwrap(), a);
    let field = |k: &str, x: Value| {
        let mut v = good.clone();
        v[k] = x;
        parse_submit(v.as_object().unwrap()).unwrap_err().field.unwrap()
    };
    assert_eq!(field("jobId", json!("mail-1-0000abcd")), "jobId");
    assert_eq!(field("target", json!("@elsewhere")), "target");
    assert_eq!(field("command", json!("rm -rf")), "command");
    assert_eq!(field("args", json!([1])), "args");
    assert_eq!(field("submitter", json!({"pc": "pc-a", "session": " "})), "submitter.session");
    assert_eq!(field("dedupWindowMs", json!(-1)), "dedupWindowMs");
    let mut v = good.clone();
    v["target"] = json!("@server");
    v["command"] = json!("_debug_roster");
    assert!(parse_submit(v.as_object().unwrap()).is_ok());
}

#[test]
fn a_revoked_target_is_refused_with_how_to_re_enrol() {
    assert!(check_target_not_revoked("pc-b", false).is_ok());
    let e = check_target_not_revoked("pc-b", true).unwrap_err();
    assert_eq!(e.code, ErrorCode::JobRefused);
    assert_eq!(e.reason.as_deref(), Some(REFUSED_TARGET_REVOKED));
    assert!(e.message.contains("pc-b was revoked"), "{}", e.message);
    assert!(e.message.contains("pcmail roster add pc-b"), "{}", e.message);
}

#[test]
fn pc_probes_pass_the_spec_check_and_no_other_underscore_name_does() {
    for p in pc_builtins() {
        check_spec(&p).unwrap();
        assert!(p.read_only && p.args.is_empty(), "{}", p.name);
    }
    let mut other = pc_builtin("_debug_pc").unwrap();
    other.name = "_debug_shell".into();
    assert!(check_spec(&other).is_err());
    // A probe's name on a spec that is not read-only, or takes args, is refused.
    let mut writes = pc_builtin("_debug_pc").unwrap();
    writes.read_only = false;
    assert!(check_spec(&writes).is_err());
}
