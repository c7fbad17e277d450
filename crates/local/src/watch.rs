//! `pcmail watch`: mail reaches a session that is not typing.
//! A long-running command for Claude Code's Monitor tool: it reads only the
//! PC store (like the hook), wakes when another connection commits to it
//! (the poller storing mail: SQLite's `data_version`, as the mark pusher
//! watches it), and prints one framed line per new mail for this session,
//! with the hook's ranking, framing and neutralising; what it printed is
//! recorded as shown to the session and marked `seen`, so the hook later
//! counts it instead of showing it again.

use crate::config::{Config, Paths};
use pcmail_core::present::{mail_line, PresentMail, PER_MAIL_CHARS};
use pcmail_core::{Kind, MarkOp, Millis, State};
use pcmail_store::hookview::{self, HookRank};
use pcmail_store::{inbox, marks, meta, Store, StoreError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How often `data_version` is read (one PRAGMA, microseconds) — the mark
/// pusher's period: always where writes cannot be watched, else for a while
/// after each write.
pub const WATCH_EVERY: Duration = Duration::from_millis(40);
/// With writes watched and none lately: how often the store is looked at anyway.
const QUIET_LOOK_EVERY: Duration = Duration::from_secs(5);
/// Most mails one pass prints per (rank, status) pair; the rest come on the next pass.
const PASS_LIMIT: usize = 50;

/// One pass: the mail not yet shown to `session`, best rank first, newest
/// first within a rank, as lines; recorded as shown and marked seen in the
/// same transaction (a hook of the same session waits for it, then counts them).
pub fn pass(store: &mut Store, me: &str, session: &str, now: Millis) -> Result<Vec<String>, StoreError> {
    let actor = {
        let a = pcmail_core::rules::actor(me, Some(session));
        if a.contains('/') {
            a
        } else {
            format!("{a}/session")
        }
    };
    let lang = crate::config::user_lang();
    store.write(|tx| {
        let server_now = now + hookview::meta_i64(tx, meta::SERVER_OFFSET_MS)?.unwrap_or(0);
        let expired = hookview::expired_open(tx, server_now)?;
        let shown = hookview::shown_to_session(tx, session, server_now)?;
        let mut lines = vec![];
        for rank in HookRank::ALL {
            for &status in rank.open_statuses() {
                let (exp, seen_here) = (expired.get(rank, status), shown.get(rank, status));
                let v = hookview::pair_view(
                    tx,
                    rank,
                    status,
                    session,
                    server_now,
                    PER_MAIL_CHARS * 2,
                    PASS_LIMIT,
                    exp,
                    seen_here,
                )?;
                for m in v.mails {
                    let pm = PresentMail {
                        kind: Kind::classify(m.kind, &m.subject),
                        id: m.id,
                        from: m.from,
                        urgent: m.urgent,
                        reply_to_mine: m.reply_to_mine,
                        subject: m.subject,
                        body: m.body,
                        created_at: m.created_at,
                    };
                    lines.push(mail_line(&pm, server_now, lang));
                    hookview::record_presented(tx, session, &pm.id, now)?;
                    inbox::advance(tx, &pm.id, State::Seen, now, &actor, None)?;
                    marks::queue(tx, &pm.id, MarkOp::Seen, now, &actor, None)?;
                    // As the hook: a reply to my mail is answered by being read.
                    if pm.reply_to_mine && pm.kind == Kind::Note {
                        inbox::advance(tx, &pm.id, State::Done, now, &actor, None)?;
                        marks::queue(tx, &pm.id, MarkOp::Ack, now, &actor, None)?;
                    }
                }
            }
        }
        Ok(lines)
    })
}

/// Runs until `stop` is set: a pass whenever the store changed, each line
/// handed to `out` (which flushes). Waits for the store to exist.
pub fn run(
    paths: &Paths,
    session: &str,
    stop: &AtomicBool,
    mut out: impl FnMut(&str) -> std::io::Result<()>,
) -> Result<(), Box<dyn std::error::Error>> {
    let config = Config::load(paths)?;
    let me = config.label.clone();
    out(&pcmail_core::present::watch_header(&me))?;
    let mut store = loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        if let Some(s) = Store::open_existing(&paths.store(), crate::locks::HOOK_LOCK_BUDGET)? {
            break s;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut last_version: Option<i64> = None;
    // Woken by writes to the store where the OS tells of them; then looked
    // at on the short period for a while (a write wakes it before its
    // commit is visible), and asleep again until the next write.
    let watch = crate::filewatch::FileWatch::new(&paths.store(), WATCH_EVERY);
    let mut active_until = std::time::Instant::now() + crate::filewatch::FileWatch::ACTIVE_FOR;
    while !stop.load(Ordering::Relaxed) {
        let version = store.data_version().ok();
        if version.is_none() || version != last_version {
            last_version = version;
            for line in pass(&mut store, &me, session, crate::system_now())? {
                out(&line)?;
            }
        }
        watch.next_look(&mut active_until, QUIET_LOOK_EVERY, Some(&|| stop.load(Ordering::Relaxed)));
    }
    Ok(())
}
