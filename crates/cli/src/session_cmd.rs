//! `pcmail name` and `pcmail who` (issue 11 §1): thin over pcmail-api.

use pcmail_api::sessions::{self as api, NameArgs, WhoArgs};
use pcmail_core::sessions::{idle_text, WhoAnswer};

pub fn name(name: String, session: Option<String>, json: bool) -> anyhow::Result<()> {
    let mut client = crate::open()?;
    let r = api::name(&mut client, &NameArgs { name, session })?;
    if json {
        println!("{}", serde_json::to_string(&r)?);
        return Ok(());
    }
    let t = &r.taken;
    match (&t.previous, t.changed) {
        (_, false) => println!("pcmail: this session already holds {}", t.name),
        (None, true) => println!("pcmail: {} is this session's name now ({}/{})", t.name, t.holder.pc, t.holder.session),
        (Some(p), true) => {
            println!("pcmail: {} moved here from {}/{} (that session has ended)", t.name, p.pc, p.session);
            if t.requeued > 0 {
                println!("pcmail: {} unseen mail to {} comes here", t.requeued, t.name);
            }
        }
    }
    Ok(())
}

pub fn who(json: bool) -> anyhow::Result<()> {
    let mut client = crate::open()?;
    let w = api::who(&mut client, &WhoArgs {})?;
    if json {
        println!("{}", serde_json::to_string(&w)?);
    } else {
        print!("{}", who_text(&w));
    }
    Ok(())
}

/// One line per live session, then the names nobody live holds.
pub fn who_text(w: &WhoAnswer) -> String {
    let mut out = String::new();
    if w.sessions.is_empty() {
        out.push_str("pcmail: no live sessions on any PC\n");
    } else {
        let rows: Vec<[String; 6]> = w
            .sessions
            .iter()
            .map(|s| {
                let short: String = s.session.chars().take(8).collect();
                [
                    s.name.clone().unwrap_or_else(|| format!("({short})")),
                    s.pc.clone(),
                    s.repo.clone().unwrap_or_else(|| "-".into()),
                    s.branch.clone().unwrap_or_else(|| "-".into()),
                    idle_text(s.idle_ms),
                    if s.leases.is_empty() { "-".into() } else { s.leases.join(",") },
                ]
            })
            .collect();
        let head = ["NAME", "PC", "REPO", "BRANCH", "IDLE", "LEASES"];
        let width: Vec<usize> =
            (0..6).map(|i| rows.iter().map(|r| r[i].chars().count()).chain([head[i].len()]).max().unwrap_or(0)).collect();
        let line = |cells: &[&str]| {
            let mut l = String::new();
            for (i, c) in cells.iter().enumerate() {
                if i == 5 {
                    l.push_str(c);
                } else {
                    l.push_str(&format!("{c:<w$}  ", w = width[i]));
                }
            }
            l.trim_end().to_string() + "\n"
        };
        out.push_str(&line(&head));
        for r in &rows {
            out.push_str(&line(&r.iter().map(String::as_str).collect::<Vec<_>>()));
        }
    }
    for n in &w.idle_names {
        out.push_str(&format!("pcmail: {} has no live session (last {}/{}); mail to it waits\n", n.name, n.pc, n.session));
    }
    out
}
