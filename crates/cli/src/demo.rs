//! `pcmail demo`: two simulated PCs on the embedded default (one shared
//! server file in a temporary directory) exchange a note, a decision request
//! and its reply; prints each mail's timeline and a Mermaid sequence diagram.

use crate::print;
use pcmail_client::config::{Config, Paths, ServerConfig};
use pcmail_client::ops::Draft;
use pcmail_client::{hook, system_now, transport, Client};
use pcmail_core::{Kind, Mail, MarkOp};

fn pc(dir: &std::path::Path, label: &str, server_db: &std::path::Path) -> anyhow::Result<Client> {
    let paths = Paths::at(dir.join(label));
    let config = Config {
        label: label.into(),
        server: ServerConfig::Embedded { db: Some(server_db.to_path_buf()) },
        poll_interval_secs: 0,
        notify_webhook: None,
        native_notifications: false,
        hook_session_mail_limit: pcmail_client::config::DEFAULT_HOOK_SESSION_MAIL_LIMIT,
        installation: None,
        retention_days: None,
        handoffs: Default::default(),
    };
    config.save(&paths)?;
    let t = transport::Embedded::open(server_db, label, system_now)?;
    let mut c = Client::with(paths, config, Box::new(t), system_now)?;
    c.register_self()?;
    Ok(c)
}

fn show_hook(c: &Client, session: &str) -> anyhow::Result<()> {
    let input = hook::HookInput { session_id: session.into(), event: hook::Event::UserPromptSubmit, cwd: None };
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

pub fn run(json: bool) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server_db = dir.path().join("server.db");
    let mut alpha = pc(dir.path(), "alpha", &server_db)?;
    let mut beta = pc(dir.path(), "beta", &server_db)?;
    alpha.refresh_roster()?;
    beta.refresh_roster()?;
    println!("== two PCs, alpha and beta, on one embedded server ({})\n", server_db.display());

    // 1. A note: delivered by beta's poll, seen by beta's hook, acked.
    let note = alpha.send(Draft { to: "beta".into(), body: "Build is green on main; go ahead and rebase.".into(), ..Default::default() })?;
    println!("alpha → beta: note {}", note.ids[0]);
    beta.sync_once(0)?;
    show_hook(&beta, "beta-session-1")?;
    beta.sync_once(0)?; // pushes the `seen` mark
    beta.mark(&note.ids[0], MarkOp::Ack, None, None)?;

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
    show_hook(&beta, "beta-session-2")?;
    beta.sync_once(0)?;
    let reply = beta.reply(&dec.ids[0], "Yes — drop it; I'll update both callers.".into(), false)?;
    println!("\nbeta → alpha: reply {}", reply.ids[0]);
    alpha.sync_once(0)?;
    show_hook(&alpha, "alpha-session-1")?;
    alpha.sync_once(0)?;
    beta.sync_once(0)?;

    let ids: Vec<String> = vec![note.ids[0].clone(), dec.ids[0].clone(), reply.ids[0].clone()];
    let (mails, _) = alpha.status(&ids)?;
    println!("\n== timelines");
    print::timelines(&mails, json);
    println!("\n== Mermaid\n```mermaid\n{}```", mermaid(&mails));
    Ok(())
}

/// A sequence diagram of every transition, in time order.
pub fn mermaid(mails: &[Mail]) -> String {
    let mut events: Vec<(i64, String)> = vec![];
    for m in mails {
        let short = &m.id[m.id.len().saturating_sub(8)..];
        for e in &m.timeline {
            let actor = e.by.split('/').next().unwrap_or(&e.by).to_string();
            let line = match e.state.as_str() {
                "new" => format!("    {}->>server: send {} ({})", m.from, short, m.kind.as_str()),
                "delivered" => format!("    server->>{}: delivered {}", m.to, short),
                "seen" => format!("    {actor}-->>server: seen {short}"),
                "done" => format!("    {actor}-->>server: done {short}{}", e.note.as_deref().map(|n| format!(" ({n})")).unwrap_or_default()),
                s => format!("    {actor}-->>server: {s} {short}"),
            };
            events.push((e.at, line));
        }
    }
    events.sort_by_key(|e| e.0);
    let mut out = String::from("sequenceDiagram\n    participant alpha\n    participant server\n    participant beta\n");
    for (_, l) in events {
        out.push_str(&l);
        out.push('\n');
    }
    out
}
