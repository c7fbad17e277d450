//! `pcmail mcp` driven by the official Rust SDK's client (rmcp) as a real
//! child process, against a real `pcmail serve` on loopback with one
//! PCMAIL_HOME per PC: every tool answers, the CLI's `--json` and the MCP
//! tool give the same result for the same input (one test per operation),
//! errors carry the CLI's exit codes, and mail sent through MCP reaches the
//! other PC's hook and shows `seen` in the sender's `status` tool.

mod common;

use common::*;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};
use std::process::Stdio;

/// The default profile (`pcmail mcp` with no `--tools`).
const DEFAULT_TOOLS: [&str; 12] = [
    "ack",
    "handoff_new",
    "handoff_pickup",
    "inbox",
    "lease_claim",
    "lease_list",
    "lease_release",
    "read",
    "reply",
    "send",
    "wait_for",
    "who",
];

const TOOLS: [&str; 41] = [
    "ack",
    "alerts",
    "fail",
    "handoff_close",
    "handoff_list",
    "handoff_new",
    "handoff_pickup",
    "handoff_rollup",
    "handoff_show",
    "inbox",
    "job_cancel",
    "job_list",
    "job_run",
    "job_status",
    "lease_check",
    "lease_claim",
    "lease_list",
    "lease_release",
    "lease_takeover",
    "map",
    "map_check",
    "memory_add",
    "memory_search",
    "memory_show",
    "name",
    "read",
    "reply",
    "roster",
    "roster_add",
    "roster_enrol",
    "roster_log",
    "roster_remove",
    "roster_require_credentials",
    "roster_revoke",
    "send",
    "sent",
    "status",
    "sync",
    "token_rotate",
    "wait_for",
    "who",
];

struct Mcp {
    rt: tokio::runtime::Runtime,
    client: Option<RunningService<RoleClient, ()>>,
}

impl Mcp {
    fn start(pc: &Pc) -> Mcp {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut cmd = tokio::process::Command::new(exe());
        cmd.args(["mcp", "--tools", "all"])
            .env("PCMAIL_HOME", pc.home.path())
            .env("PCMAIL_CREDENTIAL", &pc.cred)
            .env("PCMAIL_TOKEN", TOKEN)
            .env_remove("DBUS_SESSION_BUS_ADDRESS");
        let client = rt.block_on(async {
            let (transport, _) = TokioChildProcess::builder(cmd).stderr(Stdio::null()).spawn().unwrap();
            ().serve(transport).await.expect("MCP initialize")
        });
        Mcp { rt, client: Some(client) }
    }

    fn tools(&self) -> Vec<rmcp::model::Tool> {
        self.rt.block_on(self.client.as_ref().unwrap().list_all_tools()).unwrap()
    }

    /// Calls a tool; `Ok(structuredContent)` or `Err(structuredContent.error)`.
    fn call(&self, tool: &str, args: Value) -> Result<Value, Value> {
        let Value::Object(args) = args else { panic!("arguments are an object") };
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args);
        let r = self.rt.block_on(self.client.as_ref().unwrap().call_tool(params)).unwrap();
        let v = r.structured_content.clone().unwrap_or_else(|| panic!("{tool}: no structured content: {r:?}"));
        // The text content carries the same JSON for clients that read only text.
        let text = r.content[0].as_text().expect("text content").text.clone();
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), v, "{tool}");
        if r.is_error == Some(true) {
            Err(v["error"].clone())
        } else {
            Ok(v)
        }
    }

    fn ok(&self, tool: &str, args: Value) -> Value {
        self.call(tool, args.clone()).unwrap_or_else(|e| panic!("{tool} {args}: {e}"))
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        if let Some(c) = self.client.take() {
            let _ = self.rt.block_on(c.cancel());
        }
    }
}

/// The CLI's exit code and stderr for a failing command.
fn cli_err(pc: &Pc, args: &[&str]) -> (i32, String) {
    let out = pc.run(args);
    assert!(!out.status.success(), "{args:?} succeeded");
    (out.status.code().unwrap(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The same error through both front ends: exit code, code string, message.
fn same_error(pc: &Pc, mcp: &Mcp, cli: &[&str], tool: &str, args: Value) -> Value {
    let (code, stderr) = cli_err(pc, cli);
    let e = mcp.call(tool, args).expect_err("the tool fails too");
    assert_eq!(e["exit"], code, "{tool}: {e} vs CLI stderr {stderr}");
    let msg = e["message"].as_str().unwrap();
    assert!(stderr.contains(msg), "{tool}: CLI says {stderr:?}, MCP says {msg:?}");
    e
}

fn rust_pair() -> (Server, Pc, Pc) {
    let server = Server::start(Kind::Rust);
    let (a, b) = pair(&server);
    (server, a, b)
}

#[test]
fn tools_list_has_one_tool_per_operation_with_input_schemas() {
    let (_s, a, _b) = rust_pair();
    let mcp = Mcp::start(&a);
    let tools = mcp.tools();
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort();
    assert_eq!(names, TOOLS);
    for t in &tools {
        assert_eq!(t.input_schema.get("type"), Some(&json!("object")), "{}", t.name);
        assert!(t.description.as_deref().is_some_and(|d| d.len() > 20), "{} has a description", t.name);
    }
    let send = tools.iter().find(|t| t.name == "send").unwrap();
    let required = send.input_schema["required"].as_array().unwrap();
    assert!(required.contains(&json!("to")) && required.contains(&json!("body")), "{required:?}");
    let info = mcp.client.as_ref().unwrap().peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().map(|i| i.name.as_str()), Some("pcmail"));
}

/// A missing, mistyped or unknown argument is a structured usage error (exit
/// 2, as the CLI's for a bad option) naming the argument, on every tool; and
/// nothing is sent.
#[test]
fn bad_arguments_are_structured_usage_errors_naming_the_field_and_send_nothing() {
    let (_s, a, _b) = rust_pair();
    let mcp = Mcp::start(&a);
    let cases = [
        ("send", json!({"to": "pc-b"}), "body"),
        ("send", json!({"to": "pc-b", "body": "x", "urgent": "yes"}), "urgent"),
        ("send", json!({"to": "pc-b", "body": "x", "kind": "memo"}), "kind"),
        ("send", json!({"to": "pc-b", "bdy": "x"}), "bdy"),
        ("send", json!({"to": 7, "body": "x"}), "to"),
        ("read", json!({}), "id"),
        ("ack", json!({"id": ["m"]}), "id"),
        ("reply", json!({"id": "m"}), "body"),
        ("fail", json!({"id": "m"}), "reason"),
        ("status", json!({"ids": "m"}), "ids"),
        ("wait_for", json!({"ids": ["m"], "state": "read"}), "state"),
        ("inbox", json!({"limit": -1}), "limit"),
        ("sent", json!({"limit": "ten"}), "limit"),
        ("roster", json!({"verbose": true}), "verbose"),
        ("roster_add", json!({"hostname": "h"}), "label"),
        ("roster_remove", json!({}), "label"),
        ("alerts", json!({"all": "yes"}), "all"),
        ("sync", json!({"now": true}), "now"),
        ("lease_claim", json!({"description": "d"}), "resource"),
        ("lease_claim", json!({"resource": "r", "mode": "solo"}), "mode"),
        ("lease_release", json!({}), "resource"),
        ("lease_list", json!({"all": "yes"}), "all"),
        ("lease_check", json!({"resource": "r"}), "fence"),
        ("job_run", json!({"target": "pc-b"}), "command"),
        ("job_status", json!({}), "job_id"),
        ("job_list", json!({"mine": [1]}), "mine"),
        ("job_cancel", json!({"reason": "r"}), "job_id"),
        ("lease_takeover", json!({"resource": "r"}), "reason"),
        ("handoff_new", json!({"goal": "g"}), "slug"),
        ("handoff_list", json!({"every": true}), "every"),
        ("handoff_show", json!({}), "name"),
        ("handoff_pickup", json!({"name": 3}), "name"),
        ("handoff_close", json!({}), "name"),
        ("handoff_rollup", json!({"slug": "s", "body": "b"}), "through"),
        ("memory_add", json!({"kind": "rumour", "topic": "t", "text": "x"}), "kind"),
        ("memory_show", json!({"topic": 5}), "topic"),
        ("memory_search", json!({"words": "x"}), "words"),
        ("name", json!({}), "name"),
        ("name", json!({"name": "ani", "as": "x"}), "as"),
        ("who", json!({"all": true}), "all"),
        ("map", json!({"llms_budget": "big"}), "llms_budget"),
        ("map_check", json!({"repo": 7}), "repo"),
        ("roster_enrol", json!({"hostname": "h"}), "label"),
        ("roster_revoke", json!({}), "label"),
        ("roster_log", json!({"limit": -1}), "limit"),
        ("roster_require_credentials", json!({"on": "off"}), "on"),
        ("token_rotate", json!({"force": true}), "force"),
    ];
    let mut tools_seen: Vec<&str> = cases.iter().map(|c| c.0).collect();
    tools_seen.sort();
    tools_seen.dedup();
    assert_eq!(tools_seen, TOOLS, "every tool is covered");
    // The CLI's exit code for a bad option value.
    let (cli_usage, _) = cli_err(&a, &["send", "pc-b", "--kind", "memo", "--body", "x"]);
    assert_eq!(cli_usage, 2);
    for (tool, args, field) in cases {
        let e = mcp.call(tool, args.clone()).expect_err("a usage error");
        assert_eq!(
            (e["code"].as_str(), e["exit"].as_i64(), e["field"].as_str()),
            (Some("usage"), Some(2), Some(field)),
            "{tool} {args}: {e}"
        );
        assert!(e["message"].as_str().unwrap().contains(field), "{tool}: {e}");
    }
    assert!(a.json(&["sent"]).as_array().unwrap().is_empty(), "nothing was sent");
}

/// The admin's credential commands through both front ends, on
/// a server with per-PC credentials and the admin secret.
#[test]
fn credential_admin_same_result_through_cli_and_mcp() {
    let (_s, a, _b) = rust_pair();
    let mcp = Mcp::start(&a);
    // roster add → a one-time join code: the same shape (the codes are random).
    let c = a.json(&["roster", "add", "pc-x", "--expires", "2h"]);
    let m = mcp.ok("roster_enrol", json!({"label": "pc-y", "expires": "2h"}));
    assert_eq!(c.as_object().unwrap().keys().collect::<Vec<_>>(), m.as_object().unwrap().keys().collect::<Vec<_>>());
    assert_eq!((c["label"].as_str(), m["label"].as_str()), (Some("pc-x"), Some("pc-y")));
    assert_eq!(c["server"], m["server"]);
    assert_eq!(c["code"].as_str().unwrap().len(), m["code"].as_str().unwrap().len());
    assert_ne!(c["code"], m["code"]);
    // With a number: a plain roster entry both ways.
    let c = a.json(&["roster", "add", "pc-n1", "--hostname", "h1", "--number", "61"]);
    let m = mcp.ok("roster_enrol", json!({"label": "pc-n2", "hostname": "h2", "number": 62}));
    assert_eq!(c.as_object().unwrap().keys().collect::<Vec<_>>(), m.as_object().unwrap().keys().collect::<Vec<_>>());
    // A bad expiry: exit 2 both ways.
    same_error(
        &a,
        &mcp,
        &["roster", "add", "pc-z", "--expires", "90d"],
        "roster_enrol",
        json!({"label": "pc-z", "expires": "90d"}),
    );
    // revoke: the first says changed, the repeat (either way) that it already was.
    // (A join code puts no one on the roster until it is used: revoke a PC added directly.)
    assert_eq!(a.json(&["roster", "revoke", "pc-n1"])["changed"], true);
    // The server's answers carry its clock (`now`): the rest is the same.
    let same = |mut v: Value| {
        v.as_object_mut().unwrap().remove("now");
        v
    };
    let m = mcp.ok("roster_revoke", json!({"label": "pc-n1"}));
    assert_eq!(same(m.clone()), same(a.json(&["roster", "revoke", "pc-n1"])));
    assert_eq!(m["changed"], false);
    // The audit log: the same entries.
    let m = mcp.ok("roster_log", json!({"limit": 20}));
    assert_eq!(same(m.clone()), same(a.json(&["roster", "log", "--limit", "20"])));
    let actions: Vec<&str> = m["entries"].as_array().unwrap().iter().filter_map(|e| e["action"].as_str()).collect();
    assert!(actions.iter().any(|x| x.contains("revoke")), "{m}");
    // require-credentials --off is idempotent: the same answer.
    let m = mcp.ok("roster_require_credentials", json!({"on": false}));
    assert_eq!(same(m), same(a.json(&["roster", "require-credentials", "--off"])));
    // token rotate: this PC's credential comes from PCMAIL_CREDENTIAL, refused (exit 2) both ways.
    let e = same_error(&a, &mcp, &["token", "rotate"], "token_rotate", json!({}));
    assert_eq!(e["code"], "usage");
}

/// The code map through both front ends: the same report, and a
/// stale map is exit 15 both ways.
#[test]
fn map_and_map_check_same_result_through_cli_and_mcp() {
    let (_s, a, _b) = rust_pair();
    let mcp = Mcp::start(&a);
    let repo = tempfile::tempdir().unwrap();
    let r = repo.path().to_str().unwrap();
    std::fs::write(repo.path().join("lib.rs"), "/// Hi.\npub fn hi() {}\n").unwrap();
    let e = same_error(&a, &mcp, &["map", "--repo", r, "--check"], "map_check", json!({"repo": r}));
    assert_eq!((e["code"].as_str(), e["exit"].as_i64()), (Some("map_stale"), Some(15)));
    let m = mcp.ok("map", json!({"repo": r}));
    assert_eq!(m["files"], 1);
    assert!(!m["changed"].as_array().unwrap().is_empty(), "written: {m}");
    // Fresh now: the CLI's --check and the tool give the same report.
    assert_eq!(mcp.ok("map_check", json!({"repo": r})), a.json(&["map", "--repo", r, "--check"]));
    // A second `map` writes nothing, both ways alike.
    let m = mcp.ok("map", json!({"repo": r}));
    assert_eq!(m, a.json(&["map", "--repo", r]));
    assert_eq!(m["changed"], json!([]));
    std::fs::write(repo.path().join("lib.rs"), "pub fn bye() {}\n").unwrap();
    same_error(&a, &mcp, &["map", "--repo", r, "--check"], "map_check", json!({"repo": r}));
    // Not a folder: exit 2 both ways.
    let nope = repo.path().join("nope");
    let nope = nope.to_str().unwrap();
    same_error(&a, &mcp, &["map", "--repo", nope], "map", json!({"repo": nope}));
}

#[test]
fn send_same_result_through_cli_and_mcp() {
    let (_s, a, b) = rust_pair();
    let mcp = Mcp::start(&a);
    let cli =
        a.json(&["send", "pc-b", "--kind", "request", "--subject", "s", "--body", "x", "--urgent", "--expires", "2h"]);
    let m = mcp.ok(
        "send",
        json!({"to": "pc-b", "kind": "request", "subject": "s", "body": "x", "urgent": true, "expires": "2h"}),
    );
    // Fresh ids each time; everything else is the same.
    assert_eq!((cli["queued"].clone(), cli["existing"].clone()), (m["queued"].clone(), m["existing"].clone()));
    assert_eq!(cli.as_object().unwrap().keys().collect::<Vec<_>>(), m.as_object().unwrap().keys().collect::<Vec<_>>());
    b.ok(&["sync"]);
    let inbox = b.json(&["inbox"]);
    let got: Vec<_> = inbox
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["kind"].clone(), x["urgent"].clone(), x["subject"].clone()))
        .collect();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0], got[1], "the same mail arrived both ways");
    // An inexact address: exit 4 with the same candidates.
    a.ok(&["roster", "add", "kim-laptop", "--hostname", "kl"]);
    a.ok(&["roster", "add", "kim-desktop", "--hostname", "kd"]);
    let e = same_error(&a, &mcp, &["send", "kim", "--body", "x"], "send", json!({"to": "kim", "body": "x"}));
    assert_eq!(e["code"], "unknown_address");
    let c: Vec<&str> = e["candidates"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    assert!(c.contains(&"kim-laptop") && c.contains(&"kim-desktop"), "{e}");
    // A bad expiry: exit 2.
    let e = same_error(
        &a,
        &mcp,
        &["send", "pc-b", "--body", "x", "--expires", "soon"],
        "send",
        json!({"to": "pc-b", "body": "x", "expires": "soon"}),
    );
    assert_eq!(e["code"], "usage");
}

#[test]
fn inbox_read_ack_fail_same_result_through_cli_and_mcp() {
    let (_s, a, b) = rust_pair();
    let mcp = Mcp::start(&b);
    let ids: Vec<String> = (0..3).map(|i| a.send(&["pc-b", "--body", &format!("mail {i}")])).collect();
    b.ok(&["sync"]);
    for all in [false, true] {
        let mut args = vec!["inbox", "--limit", "2"];
        if all {
            args.push("--all");
        }
        // `--json` is the whole mails, as the tool's `full`.
        let full = mcp.ok("inbox", json!({"all": all, "limit": 2, "full": true}));
        assert_eq!(b.json(&args), full["mails"], "inbox all={all}");
        // `--summary` is the tool's default answer, `next` included (three mails, two listed).
        args.push("--summary");
        let summary = mcp.ok("inbox", json!({"all": all, "limit": 2}));
        assert_eq!(b.json(&args), summary, "inbox --summary all={all}");
        assert_eq!(summary["next"], full["mails"][1]["id"]);
        assert_eq!(summary["mails"][0]["preview"], full["mails"][0]["body"]);
    }
    // read: the mail as stored, then seen (so compare two reads after the first).
    b.json(&["read", &ids[0]]);
    let m = mcp.ok("read", json!({"id": ids[0]}));
    assert_eq!(m, b.json(&["read", &ids[0]]));
    assert_eq!(m["status"], "seen");
    // ack and fail: the same answer for the same id (marks are idempotent).
    let c = b.json(&["ack", &ids[1]]);
    assert_eq!(mcp.ok("ack", json!({"id": ids[1]})), c);
    assert_eq!(c["state"], "done");
    let c = b.json(&["fail", &ids[2], "--reason", "cannot"]);
    assert_eq!(mcp.ok("fail", json!({"id": ids[2], "reason": "cannot"})), c);
    assert_eq!(c["state"], "failed");
    assert_eq!(b.json(&["inbox", "--all"]), mcp.ok("inbox", json!({"all": true, "full": true}))["mails"]);
    // Unknown ids: exit 7 both ways.
    for (cli, tool) in [("read", "read"), ("ack", "ack")] {
        let e = same_error(&b, &mcp, &[cli, "mail-1-0000abcd"], tool, json!({"id": "mail-1-0000abcd"}));
        assert_eq!(e["code"], "not_found");
    }
}

/// An agent pages through long mail with `next` and gets summaries unless it
/// asks for whole mails; the CLI pages the same way.
#[test]
fn the_inbox_tool_pages_with_next_and_answers_summaries() {
    let (_s, a, b) = rust_pair();
    let mcp = Mcp::start(&b);
    for i in 0..5 {
        // 2,000 characters, most of them three bytes in UTF-8.
        let body = format!("{i:04}{}", "あいうえお".repeat(399)) + "x";
        assert_eq!(body.chars().count(), 2_000);
        a.send(&["pc-b", "--body", &body]);
    }
    b.ok(&["sync"]);
    let cli = b.json(&["inbox"]);
    let order: Vec<&str> = cli.as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(order.len(), 5);

    let mut paged = vec![];
    let mut pages = 0;
    let mut before: Option<String> = None;
    loop {
        let mut args = json!({"limit": 2});
        if let Some(id) = &before {
            args["before"] = json!(id);
        }
        let page = mcp.ok("inbox", args);
        pages += 1;
        let mails = page["mails"].as_array().unwrap();
        assert!(!mails.is_empty() && mails.len() <= 2, "{page}");
        for m in mails {
            assert_eq!(m["bodyChars"], 2_000, "{m}");
            assert_eq!(m["preview"].as_str().unwrap().chars().count(), 161, "160 characters and …: {m}");
            assert!(m.get("body").is_none() && m.get("timeline").is_none(), "{m}");
            paged.push(m["id"].as_str().unwrap().to_string());
        }
        match page.get("next") {
            Some(next) => before = Some(next.as_str().unwrap().to_string()),
            None => break,
        }
    }
    assert_eq!((pages, paged), (3, order.iter().map(|s| s.to_string()).collect::<Vec<_>>()));

    // What an agent pays for the same five mails.
    let summary = mcp.ok("inbox", json!({})).to_string().chars().count();
    let full = mcp.ok("inbox", json!({"full": true})).to_string().chars().count();
    assert!(summary * 4 <= full, "summaries {summary} characters, whole mails {full}");

    // The CLI: the same page after the same cursor, and the command for older mail.
    let page = b.json(&["inbox", "--limit", "2", "--before", order[1]]);
    let ids: Vec<&str> = page.as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, order[2..4]);
    let human = b.ok(&["inbox", "--limit", "2"]);
    assert!(
        human.trim_end().ends_with(&format!("older mail: pcmail inbox --limit 2 --before {}", order[1])),
        "{human}"
    );
    let last = b.ok(&["inbox", "--limit", "2", "--before", order[3]]);
    assert_eq!(last.lines().count(), 1, "the oldest page names no older mail: {last}");

    // The kept store sees mail another process stored since the last call.
    let newest = a.send(&["pc-b", "--body", "newest"]);
    b.ok(&["sync"]);
    assert_eq!(mcp.ok("inbox", json!({"limit": 1}))["mails"][0]["id"], json!(newest));

    // An unknown cursor and a zero limit: the same errors both ways.
    let nope = "mail-1-0000abcd";
    let e = same_error(&b, &mcp, &["inbox", "--before", nope], "inbox", json!({"before": nope}));
    assert_eq!((e["code"].as_str(), e["exit"].as_i64()), (Some("not_found"), Some(7)), "{e}");
    let e = same_error(&b, &mcp, &["inbox", "--limit", "0"], "inbox", json!({"limit": 0}));
    assert_eq!(e["code"], "usage");
    // The store stays usable after an error.
    assert_eq!(mcp.ok("inbox", json!({"limit": 1}))["mails"][0]["id"], json!(newest));
}

#[test]
fn reply_same_result_and_loop_rules_through_cli_and_mcp() {
    let (_s, a, b) = rust_pair();
    let mcp_b = Mcp::start(&b);
    let q = a.send(&["pc-b", "--body", "question", "--auto"]);
    b.ok(&["sync"]);
    // An auto reply to auto mail: refused by the server, rule loop_refused.
    let e = same_error(
        &b,
        &mcp_b,
        &["reply", &q, "--body", "auto", "--auto"],
        "reply",
        json!({"id": q, "body": "auto", "auto": true}),
    );
    assert_eq!(
        (e["code"].as_str(), e["rule"].as_str(), e["exit"].as_i64()),
        (Some("refused"), Some("loop_refused"), Some(5))
    );
    // The same reply through both: one mail (fixed reply id).
    let c = b.json(&["reply", &q, "--body", "human answer"]);
    let m = mcp_b.ok("reply", json!({"id": q, "body": "human answer"}));
    assert_eq!(m["ids"], c["ids"]);
    assert_eq!(m["existing"], true, "the server already had it");
    // Replying to a reply: exit 3, rule reply_to_reply.
    a.ok(&["sync"]);
    let mcp_a = Mcp::start(&a);
    let r = c["ids"][0].as_str().unwrap();
    let e = same_error(&a, &mcp_a, &["reply", r, "--body", "thanks"], "reply", json!({"id": r, "body": "thanks"}));
    assert_eq!(
        (e["code"].as_str(), e["rule"].as_str(), e["exit"].as_i64()),
        (Some("reply_to_reply"), Some("reply_to_reply"), Some(3))
    );
}

#[test]
fn status_wait_for_sent_same_result_through_cli_and_mcp() {
    let (_s, a, b) = rust_pair();
    let mcp = Mcp::start(&a);
    let id = a.send(&["pc-b", "--body", "x"]);
    let id2 = a.send(&["pc-b", "--body", "y"]);
    b.ok(&["sync"]);
    assert_eq!(a.json(&["status", &id, &id2]), mcp.ok("status", json!({"ids": [id, id2]}))["mails"]);
    let c = a.json(&["status", &id, "--wait-for", "delivered", "--timeout", "5"]);
    assert_eq!(c, mcp.ok("wait_for", json!({"ids": [id], "state": "delivered", "timeout_secs": 5}))["mails"]);
    assert_eq!(c[0]["state"], "delivered");
    assert_eq!(a.json(&["sent"]), mcp.ok("sent", json!({}))["mails"]);
    assert_eq!(a.json(&["sent", "--limit", "1"]), mcp.ok("sent", json!({"limit": 1}))["mails"]);
    // Nobody reads it: the wait runs out, exit 8 both ways.
    let e = same_error(
        &a,
        &mcp,
        &["status", &id, "--wait-for", "seen", "--timeout", "0"],
        "wait_for",
        json!({"ids": [id], "state": "seen", "timeout_secs": 0}),
    );
    assert_eq!(e["code"], "timeout");
    // An unknown id: exit 7; the tool names what is missing and still gives the rest.
    let (code, _) = cli_err(&a, &["status", &id, "mail-1-0000abcd"]);
    let e = mcp.call("status", json!({"ids": [id, "mail-1-0000abcd"]})).unwrap_err();
    assert_eq!((e["exit"].as_i64(), e["code"].as_str()), (Some(code as i64), Some("not_found")));
    assert_eq!(e["missing"], json!(["mail-1-0000abcd"]));
    assert_eq!(e["mails"][0]["id"], json!(id));
    // send with wait_for: sent, then the wait runs out with nobody polling (exit 8, as the CLI's --wait-for).
    let e = mcp
        .call("send", json!({"to": "pc-a", "body": "to myself", "wait_for": "delivered", "timeout_secs": 0}))
        .unwrap_err();
    assert_eq!((e["exit"].as_i64(), e["code"].as_str()), (Some(8), Some("timeout")), "{e}");
    let (code, _) = cli_err(&a, &["send", "pc-a", "--body", "to myself", "--wait-for", "delivered", "--timeout", "0"]);
    assert_eq!(code, 8);
}

#[test]
fn roster_alerts_sync_same_result_through_cli_and_mcp() {
    let (server, a, _b) = rust_pair();
    let mcp = Mcp::start(&a);
    let cli = a.json(&["roster"]);
    let m = mcp.ok("roster", json!({}));
    assert_eq!(m["pcs"], cli);
    assert_eq!(m["me"], "pc-a");
    // A direct add (`--number`): without it the CLI makes a join code instead (tests/credentials.rs).
    let c = a.json(&["roster", "add", "pc-x", "--hostname", "hx", "--number", "50"]);
    let m = mcp.ok("roster_add", json!({"label": "pc-y", "hostname": "hy"}));
    assert_eq!(c.as_object().unwrap().keys().collect::<Vec<_>>(), m.as_object().unwrap().keys().collect::<Vec<_>>());
    assert!(m["version"].as_i64() > c["version"].as_i64(), "{c} then {m}");
    assert_eq!(a.json(&["roster"]), mcp.ok("roster", json!({}))["pcs"]);
    let c = a.json(&["roster", "remove", "pc-x"]);
    let m = mcp.ok("roster_remove", json!({"label": "pc-y"}));
    assert_eq!((c["removed"].clone(), c["ok"].clone()), (m["removed"].clone(), m["ok"].clone()));
    // A bad label: refused by the server, exit 5 both ways.
    let e = same_error(
        &a,
        &mcp,
        &["roster", "add", "Bad Label", "--hostname", "h"],
        "roster_add",
        json!({"label": "Bad Label", "hostname": "h"}),
    );
    assert_eq!(e["code"], "refused");
    // Alerts: the sweep raises one for mail nobody picks up.
    server.call("pc-a", "sweep", json!({}));
    for all in [false, true] {
        let mut args = vec!["alerts"];
        if all {
            args.push("--all");
        }
        assert_eq!(a.json(&args), mcp.ok("alerts", json!({"all": all}))["alerts"], "alerts all={all}");
    }
    // Sync with nothing to do: the same cycle report.
    a.ok(&["sync"]);
    let c = a.json(&["sync"]);
    assert_eq!(mcp.ok("sync", json!({})), c);
    assert_eq!(c["stored"], json!([]));
}

#[test]
fn mail_sent_through_mcp_reaches_the_other_pcs_hook_and_status_shows_seen() {
    let (_s, a, b) = rust_pair();
    let mcp = Mcp::start(&a);
    let sent = mcp.ok(
        "send",
        json!({"to": "pc-b", "kind": "decision", "subject": "merge?", "body": "merge the branch via MCP?"}),
    );
    let id = sent["ids"][0].as_str().unwrap().to_string();
    assert_eq!(mcp.ok("status", json!({"ids": [id]}))["mails"][0]["state"], "new");
    b.ok(&["sync"]);
    let ctx = b.hook("session-b-1", "UserPromptSubmit");
    assert!(ctx.contains(&format!("<pcmail-mail id=\"{id}\"")) && ctx.contains("merge the branch via MCP?"), "{ctx}");
    // The hook queues `seen`; the next poll pushes it.
    b.ok(&["sync"]);
    let st = mcp.ok("status", json!({"ids": [id]}));
    let m = &st["mails"][0];
    assert_eq!(m["state"], "seen", "{st}");
    let states: Vec<&str> = m["timeline"].as_array().unwrap().iter().map(|e| e["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["new", "delivered", "seen"]);
    assert!(m["timeline"][2]["by"].as_str().unwrap().starts_with("pc-b/session-"), "{m}");
    // And the sender's wait_for returns at once now.
    assert_eq!(
        mcp.ok("wait_for", json!({"ids": [id], "state": "seen", "timeout_secs": 5}))["mails"][0]["state"],
        "seen"
    );
}

#[test]
fn an_unreachable_server_is_exit_6_and_the_inbox_still_works_offline() {
    let (server, a, b) = rust_pair();
    let id = a.send(&["pc-b", "--body", "x"]);
    b.ok(&["sync"]);
    let mcp = Mcp::start(&b);
    drop(server);
    let e = same_error(&b, &mcp, &["status", &id], "status", json!({"ids": [id]}));
    assert_eq!(e["code"], "unreachable");
    assert_eq!(mcp.ok("inbox", json!({}))["mails"][0]["id"], json!(id));
    // A send while the server is down is queued, as the CLI does.
    let m = mcp.ok("send", json!({"to": "pc-a", "body": "later"}));
    assert_eq!(m["queued"], true);
}

/// Starts what an agent's config says (command + args) with rmcp and lists its tools.
fn tools_of_configured_server(command: &str, args: &[Value], pc: &Pc) -> Vec<String> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args.iter().map(|a| a.as_str().unwrap()))
        .env("PCMAIL_HOME", pc.home.path())
        .env("PCMAIL_TOKEN", TOKEN)
        .env("PCMAIL_CREDENTIAL", &pc.cred);
    rt.block_on(async {
        let (transport, _) = TokioChildProcess::builder(cmd).stderr(Stdio::null()).spawn().unwrap();
        let client = ().serve(transport).await.unwrap();
        let mut names: Vec<String> =
            client.list_all_tools().await.unwrap().into_iter().map(|t| t.name.to_string()).collect();
        names.sort();
        let _ = client.cancel().await;
        names
    })
}

#[test]
fn mcp_install_writes_configs_that_start_a_working_server_and_uninstall_removes_them() {
    let (_s, a, _b) = rust_pair();
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        a.cmd(args)
            .env("HOME", home.path())
            .env_remove("CODEX_HOME")
            // No `claude` on this PATH: the documented fallbacks apply.
            .env("PATH", "/usr/bin:/bin")
            .current_dir(project.path())
            .output()
            .unwrap()
    };
    let ok = |args: &[&str]| {
        let out = run(args);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let exe = exe().canonicalize().unwrap();

    // Codex: [mcp_servers.pcmail] in ~/.codex/config.toml.
    assert!(ok(&["mcp", "install", "--client", "codex", "--tools", "all"]).contains("installed"));
    let codex = home.path().join(".codex/config.toml");
    let v: toml::Value = toml::from_str(&std::fs::read_to_string(&codex).unwrap()).unwrap();
    let s = &v["mcp_servers"]["pcmail"];
    assert_eq!(s["command"].as_str(), exe.to_str());
    let args: Vec<Value> = s["args"].as_array().unwrap().iter().map(|x| json!(x.as_str().unwrap())).collect();
    assert_eq!(tools_of_configured_server(s["command"].as_str().unwrap(), &args, &a), TOOLS);
    assert!(ok(&["mcp", "install", "--client", "codex", "--tools", "all"]).contains("already installed"));

    // Gemini CLI: mcpServers.pcmail in ~/.gemini/settings.json (and in the project's .gemini/).
    for (scope, file) in
        [("user", home.path().join(".gemini/settings.json")), ("project", project.path().join(".gemini/settings.json"))]
    {
        ok(&["mcp", "install", "--client", "gemini", "--scope", scope]);
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let s = &v["mcpServers"]["pcmail"];
        // A project's file is shared: `pcmail` from PATH, no path of this PC.
        let command = match scope {
            "project" => {
                assert_eq!(s["command"], json!("pcmail"), "{s}");
                exe.to_str().unwrap()
            }
            _ => s["command"].as_str().unwrap(),
        };
        assert_eq!(tools_of_configured_server(command, s["args"].as_array().unwrap(), &a), DEFAULT_TOOLS);
    }

    // Claude Code without `claude` on PATH: .mcp.json for a project; the user scope says what to run.
    ok(&["mcp", "install", "--client", "claude", "--scope", "project"]);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(project.path().join(".mcp.json")).unwrap()).unwrap();
    let s = &v["mcpServers"]["pcmail"];
    assert_eq!(s["command"], json!("pcmail"), "no path of this PC in the shared .mcp.json: {s}");
    assert_eq!(tools_of_configured_server(exe.to_str().unwrap(), s["args"].as_array().unwrap(), &a), DEFAULT_TOOLS);
    let out = run(&["mcp", "install"]);
    assert_eq!(out.status.code(), Some(9));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("claude mcp add --scope user pcmail -- ") && err.contains(" mcp"), "{err}");
    assert!(!home.path().join(".claude.json").exists());
    assert_eq!(run(&["mcp", "install", "--client", "codex", "--scope", "project"]).status.code(), Some(2));

    // Uninstall takes every entry out again.
    ok(&["mcp", "uninstall", "--client", "codex"]);
    assert!(toml::from_str::<toml::Value>(&std::fs::read_to_string(&codex).unwrap())
        .unwrap()
        .get("mcp_servers")
        .is_none());
    ok(&["mcp", "uninstall", "--client", "gemini"]);
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(home.path().join(".gemini/settings.json")).unwrap()).unwrap();
    assert!(v.get("mcpServers").is_none(), "{v}");
    ok(&["mcp", "uninstall", "--client", "claude", "--scope", "project"]);
    assert!(ok(&["mcp", "uninstall", "--client", "claude", "--scope", "project"]).contains("was not installed"));
}

/// Codex CLI and Gemini CLI send SessionStart with the same fields pcmail's hook
/// reads (docs/agents.md "Other agents"): the hook answers them with the mail.
#[test]
fn codex_and_gemini_session_start_payloads_get_the_mail_from_pcmail_hook() {
    use std::io::Write;
    let (_s, a, b) = rust_pair();
    // A work request stays open (shown to every session) until answered.
    let id = a.send(&["pc-b", "--kind", "request", "--body", "hello from pc-a"]);
    b.ok(&["sync"]);
    let payloads = [
        // Codex CLI (hooks.json, SessionStart)
        json!({"session_id": "codex-1", "transcript_path": null, "cwd": "/tmp", "hook_event_name": "SessionStart", "model": "gpt-5", "source": "startup"}),
        // Gemini CLI (settings.json hooks, SessionStart)
        json!({"session_id": "gemini-1", "transcript_path": "/tmp/t.json", "cwd": "/tmp", "hook_event_name": "SessionStart", "timestamp": "2026-11-30T00:00:00Z", "source": "startup"}),
    ];
    for p in payloads {
        let mut child =
            b.cmd(&["hook"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        child.stdin.take().unwrap().write_all(p.to_string().as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success() && out.stderr.is_empty());
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let ctx = v["hookSpecificOutput"]["additionalContext"].as_str().unwrap();
        assert!(ctx.contains(&id), "{p}: {ctx}");
    }
}

/// Raw JSON-RPC on the pipes with every log level on: stdout carries only
/// protocol messages, the logs go to stderr.
#[test]
fn stdout_carries_only_the_protocol_even_with_debug_logs() {
    use std::io::{BufRead, BufReader, Write};
    let (_s, a, _b) = rust_pair();
    // The trace logs go to a file: a pipe nobody reads fills up and stalls the server.
    let logs = tempfile::NamedTempFile::new().unwrap();
    let mut child = a
        .cmd(&["mcp", "--tools", "all"])
        .env("PCMAIL_LOG", "trace")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(logs.reopen().unwrap())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut request = |id: u64, method: &str, params: Value| -> Value {
        writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).unwrap();
        if method == "initialize" {
            writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap();
        }
        loop {
            let line = lines.next().expect("an answer").unwrap();
            let v: Value = serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON-RPC on stdout: {line:?}"));
            assert_eq!(v["jsonrpc"], "2.0", "{line}");
            if v["id"] == id {
                return v;
            }
        }
    };
    let init =
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}});
    assert_eq!(request(1, "initialize", init)["result"]["serverInfo"]["name"], "pcmail");
    assert_eq!(request(2, "tools/list", json!({}))["result"]["tools"].as_array().unwrap().len(), TOOLS.len());
    let r = request(3, "tools/call", json!({"name": "send", "arguments": {"to": "pc-b", "body": "x"}}));
    assert_eq!(r["result"]["isError"], false, "{r}");
    let r = request(4, "tools/call", json!({"name": "sync", "arguments": {}}));
    assert_eq!(r["result"]["isError"], false, "{r}");
    let r = request(5, "tools/call", json!({"name": "read", "arguments": {"id": "mail-1-0000abcd"}}));
    assert_eq!(r["result"]["structuredContent"]["error"]["exit"], 7, "{r}");
    drop(stdin);
    for line in lines {
        let line = line.unwrap();
        assert!(serde_json::from_str::<Value>(&line).is_ok(), "not JSON-RPC on stdout: {line:?}");
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "pcmail mcp exits 0 when the client closes stdin");
    assert!(std::fs::metadata(logs.path()).unwrap().len() > 0, "the trace logs went to stderr");
}

#[test]
fn alerts_same_result_through_cli_and_mcp_with_an_open_alert() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared-server.db");
    // Two PCs on one embedded server file (the default, no `pcmail serve`).
    let (a, b) = (Pc::embedded(&db, "pc-a"), Pc::embedded(&db, "pc-b"));
    b.ok(&["sync"]);
    // pc-b last polled long ago: the next sweep (due on pc-a's first sync) opens a stale-PC alert.
    let conn = rusqlite::Connection::open(&db).unwrap();
    assert_eq!(conn.execute("UPDATE pc SET last_poll_at = 1 WHERE label = 'pc-b'", []).unwrap(), 1);
    drop(conn);
    a.ok(&["sync"]);
    let mcp = Mcp::start(&a);
    let cli = a.json(&["alerts"]);
    assert_eq!(cli.as_array().unwrap().len(), 1, "{cli}");
    assert_eq!(cli[0]["pc"], "pc-b");
    assert_eq!(mcp.ok("alerts", json!({}))["alerts"], cli);
    assert_eq!(mcp.ok("alerts", json!({"all": true}))["alerts"], a.json(&["alerts", "--all"]));
    // And the rest of the surface works on the embedded default too.
    let id = mcp.ok("send", json!({"to": "pc-b", "body": "embedded"}))["ids"][0].as_str().unwrap().to_string();
    b.ok(&["sync"]);
    assert_eq!(mcp.ok("status", json!({"ids": [id]}))["mails"], a.json(&["status", &id]));
}
