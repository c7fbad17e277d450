//! Human and `--json` output of the CLI.

use pcmail_client::ops::SendOutcome;
use pcmail_client::sync::CycleReport;
use pcmail_core::present::{age, neutralise, truncate_chars};
use pcmail_core::{Alert, Mail, Millis, Pc};
use pcmail_store::{InboxMail, SentMail};
use serde_json::json;

pub fn time(ms: Millis) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3fZ").to_string())
        .unwrap_or_else(|| ms.to_string())
}

pub fn send_outcome(o: &SendOutcome, json: bool) {
    if json {
        println!("{}", serde_json::to_string(o).unwrap());
    } else if o.queued {
        println!("queued {} — the server is unreachable; it will be sent by the next poll (pcmail sync)", o.ids.join(" "));
    } else if o.existing {
        println!("sent {} (the server already had it)", o.ids.join(" "));
    } else {
        println!("sent {}", o.ids.join(" "));
    }
}

pub fn timelines(mails: &[Mail], json: bool) {
    if json {
        println!("{}", serde_json::to_string(mails).unwrap());
        return;
    }
    for m in mails {
        println!("{}  {} → {}  [{}]  {}", m.id, m.from, m.to, m.state, neutralise(&truncate_chars(&m.subject, 60)));
        for e in &m.timeline {
            let note = e.note.as_deref().map(|n| format!("  ({})", neutralise(n))).unwrap_or_default();
            println!("  {:<9} {}  by {}{}", e.state.as_str(), time(e.at), e.by, note);
        }
    }
}

pub fn inbox(rows: &[InboxMail], now: Millis, json: bool) {
    if json {
        println!("{}", serde_json::to_string(rows).unwrap());
        return;
    }
    if rows.is_empty() {
        println!("no open mail");
        return;
    }
    for m in rows {
        let tag = match m.effective_kind() {
            pcmail_core::Kind::Decision => "[判断依頼]",
            pcmail_core::Kind::Request => "[作業依頼]",
            pcmail_core::Kind::Note => "",
        };
        let urgent = if m.urgent { " URGENT" } else { "" };
        let expired = if m.is_expired_at(now) { " (expired)" } else { "" };
        let text = if m.subject.is_empty() { &m.body } else { &m.subject };
        println!(
            "{}  {:<9} {:>4} ago  from {}{}{} {} {}",
            m.id,
            m.status.as_str(),
            age(now - m.created_at),
            m.from,
            urgent,
            expired,
            tag,
            neutralise(&truncate_chars(text, 70))
        );
    }
}

pub fn sent(rows: &[SentMail], json: bool) {
    if json {
        println!("{}", serde_json::to_string(rows).unwrap());
        return;
    }
    for m in rows {
        let text = if m.subject.is_empty() { &m.body } else { &m.subject };
        println!("{}  → {:<12} [{}]  {}", m.id, m.to, m.state, neutralise(&truncate_chars(text, 60)));
    }
}

pub fn one_mail(m: &InboxMail, json: bool) {
    if json {
        println!("{}", serde_json::to_string(m).unwrap());
        return;
    }
    println!("id:      {}", m.id);
    println!("from:    {}", m.from);
    println!("kind:    {}{}", m.effective_kind().as_str(), if m.urgent { " (urgent)" } else { "" });
    println!("sent:    {}", time(m.created_at));
    if let Some(r) = &m.in_reply_to {
        println!("reply to: {r}");
    }
    if !m.subject.is_empty() {
        println!("subject: {}", neutralise(&m.subject));
    }
    println!();
    // Printed as-is for a person; escape sequences were refused by the server.
    println!("{}", m.body);
}

pub fn marked(m: &pcmail_api::Marked, json: bool) {
    if json {
        println!("{}", serde_json::to_string(m).unwrap());
    } else {
        let pending = m.pending_marks;
        let tail = if pending > 0 { format!(" ({pending} mark(s) wait for the server)") } else { String::new() };
        println!("{} is {}{tail}", m.id, m.state);
    }
}

pub fn roster(pcs: &[Pc], me: &str, json: bool) {
    if json {
        println!("{}", serde_json::to_string(pcs).unwrap());
        return;
    }
    for p in pcs {
        let mark = if p.label == me { "  (this PC)" } else { "" };
        println!("{:>3}  {:<24} {}{}", p.number, p.label, p.hostname, mark);
    }
}

pub fn alerts(a: &[Alert], json: bool) {
    if json {
        println!("{}", serde_json::to_string(a).unwrap());
        return;
    }
    if a.is_empty() {
        println!("no alerts");
    }
    for x in a {
        let resolved = x.resolved_at.map(|t| format!(" resolved {}", time(t))).unwrap_or_default();
        println!("{:<12} {:<10} {}  ×{}  {}{}", x.kind.as_str(), x.pc, x.subject, x.count, neutralise(&x.message), resolved);
    }
}

pub fn cycle(r: &CycleReport, json: bool) {
    if json {
        println!("{}", serde_json::to_string(r).unwrap());
    } else {
        println!(
            "synced: {} new, {} confirmed, {} marks sent, {} queued mail sent, {} updates ({} round trips){}",
            r.stored.len(),
            r.confirmed,
            r.marks_sent,
            r.outbox_sent.len(),
            r.updates,
            r.round_trips,
            if r.quarantined.is_empty() { String::new() } else { format!(", {} quarantined", r.quarantined.len()) }
        );
    }
}

pub fn doctor(json: bool) -> anyhow::Result<()> {
    use pcmail_client::config::{Config, Paths};
    let mut checks: Vec<(String, bool, String)> = vec![];
    let paths = Paths::from_env()?;
    let config = match Config::load(&paths) {
        Ok(c) => {
            checks.push((format!("config: PC {:?}, server {}", c.label, c.server.describe()), true, String::new()));
            Some(c)
        }
        Err(e) => {
            checks.push((format!("config: {e}"), false, format!("fix or remove {}, then `pcmail init`", paths.config().display())));
            None
        }
    };
    if let Some(c) = &config {
        match pcmail_client::make_transport(&paths, c, pcmail_client::system_now) {
            Ok(t) => match t.call(&pcmail_core::protocol::Op::Hello) {
                Ok(v) => checks.push((format!("server reachable: {} ({})", t.describe(), v["server"].as_str().unwrap_or("?")), true, String::new())),
                Err(e) => checks.push((format!("server: {e}"), false, "check the URL (`pcmail init --server`), the token (`pcmail token set`), and that the server runs".into())),
            },
            Err(e) => checks.push((format!("server: {e}"), false, "`pcmail token set` or PCMAIL_TOKEN".into())),
        }
    }
    let now = pcmail_client::system_now();
    let alive = pcmail_client::locks::poller_alive(&paths);
    let last = pcmail_store::Store::open(&paths.store()).ok().and_then(|s| s.last_poll_ok_at().ok().flatten());
    let fresh = last.is_some_and(|t| now - t < pcmail_client::hook::STALE_POLL_MS);
    checks.push((
        format!(
            "poller: {}; last successful poll {}",
            if alive { "running" } else { "not running" },
            last.map(|t| format!("{} ago", age(now - t))).unwrap_or_else(|| "never".into())
        ),
        alive || fresh,
        "start `pcmail daemon` (or the tray app); the hook also starts a one-shot poll when the last is over 3 min old".into(),
    ));
    match pcmail_claude_hooks::default_settings_path().map(|p| pcmail_claude_hooks::status(&p)) {
        Some(Ok(s)) => {
            let exec = s.hooks.iter().all(|h| h.exec_form);
            let ok = s.level() == pcmail_claude_hooks::InstallLevel::Installed && s.all_exes_exist() && exec;
            let form = if s.hooks.is_empty() { "" } else if exec { ", exec form" } else { ", old shell form" };
            checks.push((format!("Claude Code hooks: {:?}{form}", s.level()), ok, "`pcmail hooks install` (re-run it to move to the exec form)".into()));
        }
        Some(Err(e)) => checks.push((format!("Claude Code hooks: {e}"), false, "fix ~/.claude/settings.json, then `pcmail hooks install`".into())),
        None => checks.push(("Claude Code hooks: no home directory".into(), false, "set HOME".into())),
    }
    let all_ok = checks.iter().all(|c| c.1);
    if json {
        let v: Vec<_> = checks.iter().map(|(w, ok, fix)| json!({"check": w, "ok": ok, "fix": fix})).collect();
        println!("{}", json!({"ok": all_ok, "checks": v}));
    } else {
        for (what, ok, fix) in &checks {
            println!("{} {}", if *ok { "ok  " } else { "FAIL" }, what);
            if !ok {
                println!("     fix: {fix}");
            }
        }
    }
    if all_ok {
        Ok(())
    } else {
        anyhow::bail!("some checks failed")
    }
}
