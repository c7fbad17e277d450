//! `pcmail hook` for SessionStart and UserPromptSubmit. On the hot path
//! before every prompt, so it does almost nothing: no network ever, one
//! SQLite file, a few indexed queries; any trouble means no output at all.

use crate::config::{Config, Paths};
use crate::locks;
use pcmail_core::present::{present, PresentMail};
use pcmail_core::{Kind, MarkOp, Millis, State};
use pcmail_store::{inbox, marks, meta, Store};
use rusqlite::params;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::time::Duration;

/// A poll older than this makes the hook start a detached poller.
pub const STALE_POLL_MS: Millis = 3 * 60 * 1000;
/// Don't spawn pollers in a tight loop when they keep failing.
const RESPAWN_GAP_MS: Millis = 60 * 1000;

#[derive(Debug, Default)]
pub struct HookInput {
    pub session_id: String,
    pub event: String,
}

pub fn parse_input(stdin: &[u8]) -> HookInput {
    let v: Value = serde_json::from_slice(stdin).unwrap_or(Value::Null);
    HookInput {
        session_id: v.get("session_id").and_then(Value::as_str).unwrap_or("").to_string(),
        event: v
            .get("hook_event_name")
            .and_then(Value::as_str)
            .filter(|e| matches!(*e, "SessionStart" | "UserPromptSubmit"))
            .unwrap_or("UserPromptSubmit")
            .to_string(),
    }
}

/// What the hook decided; `output` is the JSON to print (None: print nothing).
#[derive(Debug, Default)]
pub struct HookRun {
    pub output: Option<String>,
    pub shown: Vec<String>,
    pub spawn_poller: bool,
}

/// Runs the hook against the store. Never touches the network.
pub fn run(paths: &Paths, input: &HookInput, now: Millis) -> Result<HookRun, Box<dyn std::error::Error>> {
    let config = Config::load(paths)?;
    let me = config.label.clone();
    let Some(mut store) = Store::open_existing(&paths.store(), Duration::from_millis(1500))? else {
        // Never synced yet: get a poller going so there is a store next time.
        return Ok(HookRun { spawn_poller: !locks::poller_alive(paths), ..Default::default() });
    };
    let session = if input.session_id.is_empty() { "unknown".to_string() } else { input.session_id.clone() };
    let actor = format!("{me}/{}", session.chars().take(8).collect::<String>());

    // Open mail: decision and work requests stay open until answered; other
    // mail only until a session has seen it. Bodies are cut in SQL.
    let mut rows: Vec<(PresentMail, State, Option<Millis>)> = vec![];
    {
        let mut st = store.conn().prepare_cached(
            "SELECT id, from_pc, kind, urgent, reply_to_mine, subject, substr(body, 1, 400), created_at, status, expires_at
             FROM inbox WHERE status IN ('new', 'seen')",
        )?;
        let mut q = st.query([])?;
        while let Some(r) = q.next()? {
            let kind_s: String = r.get(2)?;
            let subject: String = r.get(5)?;
            let kind = Kind::classify(Kind::parse(&kind_s).unwrap_or_default(), &subject);
            let status: String = r.get(8)?;
            let status = State::parse(&status).unwrap_or(State::New);
            if status == State::Seen && kind == Kind::Note {
                continue;
            }
            rows.push((
                PresentMail {
                    id: r.get(0)?,
                    from: r.get(1)?,
                    kind,
                    urgent: r.get(3)?,
                    reply_to_mine: r.get(4)?,
                    subject,
                    body: r.get(6)?,
                    created_at: r.get(7)?,
                },
                status,
                r.get(9)?,
            ));
        }
    }
    let shown_before: HashSet<String> = {
        let mut st = store.conn().prepare_cached("SELECT id FROM presented WHERE session = ?1")?;
        let ids = st.query_map([&session], |r| r.get::<_, String>(0))?.collect::<rusqlite::Result<_>>()?;
        ids
    };
    let mut candidates = vec![];
    let mut expired = 0usize;
    let mut already = 0usize;
    for (m, _status, exp) in rows {
        if exp.is_some_and(|e| e <= now) {
            expired += 1;
        } else if shown_before.contains(&m.id) {
            already += 1;
        } else {
            candidates.push(m);
        }
    }
    let reply_ids: HashSet<String> = candidates.iter().filter(|m| m.reply_to_mine && m.kind == Kind::Note).map(|m| m.id.clone()).collect();
    let p = present(&me, &candidates, already, expired, now);

    if !p.shown.is_empty() {
        let shown = p.shown.clone();
        store.write(|tx| {
            for id in &shown {
                tx.execute(
                    "INSERT OR IGNORE INTO presented (session, id, at) VALUES (?1, ?2, ?3)",
                    params![session, id, now],
                )?;
                tx.execute(
                    "UPDATE inbox SET presented_at = ?2, presented_session = ?3 WHERE id = ?1",
                    params![id, now, session],
                )?;
                inbox::advance(tx, id, State::Seen, now, &actor, None)?;
                marks::queue(tx, id, MarkOp::Seen, now, &actor, None)?;
                // A reply to my mail is answered by being read: ack it once shown.
                if reply_ids.contains(id) {
                    inbox::advance(tx, id, State::Done, now, &actor, None)?;
                    marks::queue(tx, id, MarkOp::Ack, now, &actor, None)?;
                }
            }
            Ok(())
        })?;
    }

    let last_poll = store.last_poll_ok_at()?.unwrap_or(0);
    let last_spawn = store.meta_i64(meta::LAST_SPAWN_AT)?.unwrap_or(0);
    let spawn_poller =
        now - last_poll > STALE_POLL_MS && now - last_spawn > RESPAWN_GAP_MS && !locks::poller_alive(paths);
    if spawn_poller {
        let _ = store.meta_set_i64(meta::LAST_SPAWN_AT, now);
    }
    let output = (!p.text.is_empty()).then(|| {
        json!({
            "hookSpecificOutput": {
                "hookEventName": input.event,
                "additionalContext": p.text,
            }
        })
        .to_string()
    });
    Ok(HookRun { output, shown: p.shown, spawn_poller })
}
