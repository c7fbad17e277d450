//! `pcmail demo`: two simulated PCs on the embedded default (one shared
//! server file in a temporary directory) exchange a note, a decision request
//! and its reply; prints each mail's timeline and a Mermaid sequence diagram.

use crate::print;
use pcmail_client::ops::Draft;
use pcmail_client::{transport, Client};
use pcmail_core::{Kind, Mail, MarkOp};
use pcmail_local::config::{Config, Paths, ServerConfig};
use pcmail_local::{hook, system_now};

fn pc(dir: &std::path::Path, label: &str, server_db: &std::path::Path) -> anyhow::Result<Client> {
    let paths = Paths::at(dir.join(label));
    let config = Config {
        native_notifications: false,
        ..Config::new(label, ServerConfig::Embedded { db: Some(server_db.to_path_buf()) })
    };
    config.save(&paths)?;
    let t = transport::Embedded::open(server_db, label, system_now)?;
    let mut c = Client::with(paths, config, Box::new(t), system_now)?;
    c.register_self()?;
    Ok(c)
}

fn show_hook(c: &Client, session: &str) -> anyhow::Result<()> {
    let input = hook::HookInput {
        session_id: session.into(),
        event: hook::Event::UserPromptSubmit,
        cwd: None,
        ..Default::default()
    };
    let r = hook::run(&c.paths, &input, system_now()).map_err(|e| anyhow::anyhow!("hook: {e}"))?;
    println!("--- {}'s next Claude session sees (hook additionalContext):", c.me());
    match r.output {
        Some(o) => {
            let v: serde_json::Value = serde_json::from_str(&o)?;
            println!("{}", v["hookSpecificOutput"]["additionalContext"].as_str().unwrap_or(""));
        }
        None => println!("(nothing)"),
    }
    Ok(())
}

// Claude session ids are UUIDs; marks carry their first 8 characters.
const SESSION_BETA_1: &str = "4f1c2a9e-6b0d-4c1e-9a53-0d2f8e7b1c44";
const SESSION_BETA_2: &str = "9a1b7c3d-2e4f-4a6b-8c0d-1e2f3a4b5c6d";
const SESSION_ALPHA_1: &str = "77aa0e12-5c3b-4d2a-b1e0-6f7d8c9b0a1e";

pub fn run(json: bool) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server_db = dir.path().join("server.db");
    let mut alpha = pc(dir.path(), "alpha", &server_db)?;
    let mut beta = pc(dir.path(), "beta", &server_db)?;
    alpha.refresh_roster()?;
    beta.refresh_roster()?;
    println!("== two PCs, alpha and beta, on one embedded server ({})", server_db.display());
    println!("   (mail ids are shown whole here; the Mermaid diagram at the end names each mail by the last 8");
    println!("   characters of its id. A session is named by the first 8 characters of its Claude session id,");
    println!("   like a short git hash: `beta/4f1c2a9e` is beta's session 4f1c2a9e-….)\n");

    // 1. A note: delivered by beta's poll, seen by beta's hook, acked.
    let note = alpha.send(Draft {
        to: "beta".into(),
        body: "Build is green on main; go ahead and rebase.".into(),
        ..Default::default()
    })?;
    println!("alpha → beta: note {}", note.ids[0]);
    beta.sync_once(0)?;
    show_hook(&beta, SESSION_BETA_1)?;
    beta.sync_once(0)?; // pushes the `seen` mark
    beta.mark(&note.ids[0], MarkOp::Ack, None, None)?;
    println!("beta acks the note {} (`pcmail ack`): it is done", note.ids[0]);

    // 2. A decision request, shown first, answered with a reply.
    let dec = alpha.send(Draft {
        to: "beta".into(),
        kind: Kind::Decision,
        subject: "[判断依頼] drop the legacy sync API?".into(),
        body: "Two callers left, both ours. Reply yes/no.".into(),
        urgent: true,
        ..Default::default()
    })?;
    println!("\nalpha → beta: decision request {}", dec.ids[0]);
    beta.sync_once(0)?;
    show_hook(&beta, SESSION_BETA_2)?;
    beta.sync_once(0)?;
    let reply = beta.reply(&dec.ids[0], "Yes — drop it; I'll update both callers.".into(), false)?;
    println!("\nbeta → alpha: reply {} — answering closes the decision request: done (reply:…)", reply.ids[0]);
    alpha.sync_once(0)?;
    show_hook(&alpha, SESSION_ALPHA_1)?;
    println!("alpha's session was shown the reply: a reply to your mail is acked by being shown (done)");
    alpha.sync_once(0)?;
    beta.sync_once(0)?;

    let ids: Vec<String> = vec![note.ids[0].clone(), dec.ids[0].clone(), reply.ids[0].clone()];
    let (mails, _) = alpha.status(&ids)?;
    println!("\n== timelines");
    print::timelines(&mails, json);
    println!("\n== Mermaid\n```mermaid\n{}```", mermaid(&mails));
    Ok(())
}

/// The last 8 characters of a mail id: enough to tell the demo's mails apart.
fn short_id(id: &str) -> &str {
    &id[id.len().saturating_sub(8)..]
}

/// A sequence diagram of every transition, in time order. Mails are named
/// by the last 8 characters of their ids; a reply says what it answers.
pub fn mermaid(mails: &[Mail]) -> String {
    // (time, a send first within one millisecond, line): a reply is sent in
    // the same instant it closes the original, and reads better first.
    let mut events: Vec<(i64, u8, String)> = vec![];
    for m in mails {
        let short = short_id(&m.id);
        for e in &m.timeline {
            let actor = e.by.split('/').next().unwrap_or(&e.by).to_string();
            let line = match e.state.as_str() {
                "new" => match &m.in_reply_to {
                    Some(orig) => format!("    {}->>server: reply {} to {}", m.from, short, short_id(orig)),
                    None => format!("    {}->>server: send {} ({})", m.from, short, m.kind.as_str()),
                },
                "delivered" => format!("    server->>{}: delivered {}", m.to, short),
                "seen" => format!("    {actor}-->>server: seen {short}"),
                "done" => {
                    let why = match e.note.as_deref() {
                        Some(n) if n.starts_with("reply:") => format!(" (answered by reply {})", short_id(n)),
                        Some(n) => format!(" ({n})"),
                        None => String::new(),
                    };
                    format!("    {actor}-->>server: done {short}{why}")
                }
                s => format!("    {actor}-->>server: {s} {short}"),
            };
            events.push((e.at, u8::from(e.state.as_str() != "new"), line));
        }
    }
    events.sort_by_key(|e| (e.0, e.1));
    let mut out =
        String::from("sequenceDiagram\n    participant alpha\n    participant server\n    participant beta\n");
    for (_, _, l) in events {
        out.push_str(&l);
        out.push('\n');
    }
    out
}
