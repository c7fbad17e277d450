//! poll: heartbeat, confirm → delivered, marks, then the mail still new for
//! the caller (at least once) and the updates feed of mail it sent. Both reads
//! go through partial indexes, so their cost does not grow with history; so
//! does the feed of mail it received, when it asks (`receivedSince`).

use super::{mark::apply_marks, roster};
use crate::ctx::{Ctx, OpResult};
use crate::mail::{load_mail, state_column, transition, StoredMail, MAIL_COLUMNS};
use crate::store::{p, Optional, Read, P};
use pcmail_core::answers::{Lenient, PollAnswer};
use pcmail_core::model::limits;
use pcmail_core::protocol::PollArgs;
use pcmail_core::{Mail, ReceivedUpdate, State, TimelineEntry, Update};
use std::sync::LazyLock;

const LAST_POLL_SQL: &str = "SELECT last_poll_at FROM pc WHERE label = ?1";
/// `state = 'new'` is written out literally so the partial index applies.
static NEW_MAIL_SQL: LazyLock<String> = LazyLock::new(|| {
    format!("SELECT {MAIL_COLUMNS}, seq FROM mail WHERE recipient = ?1 AND state = 'new' ORDER BY seq LIMIT ?2")
});
const UPDATES_SQL: &str =
    "SELECT seq, mail_id, state, at, by FROM event WHERE sender = ?1 AND state <> 'new' AND seq > ?2 ORDER BY seq LIMIT ?3";
const RECEIVED_UPDATES_SQL: &str = "SELECT seq, mail_id, state, at, by, note FROM event \
     WHERE recipient = ?1 AND state <> 'new' AND seq > ?2 ORDER BY seq LIMIT ?3";

/// What a poll that carries nothing to apply reads, in the order it reads
/// it, to send ahead on PostgreSQL (see `Db::prefetch`).
/// `authenticated`: the caller's row came with its credential check
/// (`Ctx::facts`), and the heartbeat, the names and the roster version with it.
pub(crate) fn reads_ahead<'a>(pc: &'a str, args: &PollArgs, authenticated: bool) -> Vec<Read<'a>> {
    let updates_limit = P::Int(limits::UPDATES_MAX as i64 + 1);
    let mut reads = vec![
        Read::new(NEW_MAIL_SQL.as_str(), vec![P::Text(pc), P::Int(args.limit as i64 + 1)]),
        Read::new(UPDATES_SQL, vec![P::Text(pc), P::Int(args.since), updates_limit]),
    ];
    if !authenticated {
        reads.push(Read::new(LAST_POLL_SQL, vec![P::Text(pc)]));
        reads.push(Read::new(super::names::HELD_BY_SQL, vec![P::Text(pc)]));
        reads.push(Read::new(roster::VERSION_SQL, vec![]));
    }
    if let Some(since) = args.received_since {
        reads.push(Read::new(RECEIVED_UPDATES_SQL, vec![P::Text(pc), P::Int(since), updates_limit]));
    }
    reads
}

pub(crate) fn poll(ctx: &mut Ctx<'_>, args: &PollArgs) -> OpResult<PollAnswer> {
    record_poll(ctx)?;

    let mut confirmed = Vec::new();
    for id in &args.confirm {
        // Unknown or someone else's: left out, never an error.
        let Some(mail) = load_mail(ctx, id)? else { continue };
        if mail.recipient != ctx.pc {
            // Mail to a name this PC holds: it is here now.
            if !super::sessions::receives(ctx, &mail)? {
                continue;
            }
            super::sessions::confirmed_here(ctx, &mail)?;
        }
        let (now, pc) = (ctx.now, ctx.pc.to_string());
        transition(ctx, &mail, State::Delivered, now, &pc, None)?;
        confirmed.push(mail.id);
    }
    let marks = apply_marks(ctx, &args.marks)?;
    let lease = match &args.lease {
        Some(l) => Some(super::lease::poll_lease(ctx, l)?),
        None => None,
    };

    // The report first: mail to a name goes out only while its holder is live.
    let sessions = match &args.sessions {
        Some(live) => Some(super::sessions::poll_sessions(ctx, live)?),
        None => None,
    };
    let (mail, more_mail) = new_mail_for(ctx, args.limit, sessions.is_some())?;
    let (updates, more_updates) = updates_for(ctx, args.since)?;
    let cursor = updates.last().map(|u| u.seq).unwrap_or(args.since);
    let mut out = PollAnswer {
        mail: mail.into_iter().map(Lenient::Ok).collect(),
        confirmed,
        marks: Some(Lenient::Ok(marks)),
        updates: Lenient::Ok(updates),
        cursor: Some(cursor),
        more: more_mail || more_updates,
        roster_version: Some(match ctx.facts.and_then(|row| row.roster_version) {
            Some(v) => v,
            None => roster::version(ctx)?,
        }),
        lease: lease.map(Lenient::Ok),
        sessions: sessions.map(Lenient::Ok),
        ..PollAnswer::default()
    };
    // Jobs (feature `jobs`): only a poll that carries `job` takes, reports or hears of any.
    if let Some(j) = &args.job {
        out.job = Some(Lenient::Ok(super::job::poll_job(ctx, j)?));
    }
    // Only a caller that asks gets the second feed: an older client sees the answer it knows.
    if let Some(since) = args.received_since {
        let (received, more_received) = received_updates_for(ctx, since)?;
        out.received_cursor = Some(received.last().map(|u| u.seq).unwrap_or(since));
        out.received_updates = Some(Lenient::Ok(received));
        out.more |= more_received;
    }
    Ok(out)
}

/// The heartbeat: written only when the recorded one is a step old, so a
/// caught-up poll changes nothing and writes nothing.
fn record_poll(ctx: &Ctx<'_>) -> OpResult<()> {
    let recorded: Option<i64> = match ctx.facts {
        Some(row) => row.last_poll_at,
        None => ctx.tx.prepare_cached(LAST_POLL_SQL)?.query_row(p![ctx.pc], |r| r.get(0)).optional()?.flatten(),
    };
    if pcmail_core::due::poll_record_due(recorded, ctx.now) {
        ctx.tx.touch("UPDATE pc SET last_poll_at = ?2 WHERE label = ?1", p![ctx.pc, ctx.now])?;
    }
    Ok(())
}

/// Mail still `new` for the caller, oldest first; true when `limit` cut it.
fn new_mail_for(ctx: &Ctx<'_>, limit: usize, reported: bool) -> OpResult<(Vec<Mail>, bool)> {
    let mut stmt = ctx.tx.prepare_cached(&NEW_MAIL_SQL)?;
    let rows =
        stmt.query_map(p![ctx.pc, limit as i64 + 1], |r| Ok((r.get::<_, i64>(17)?, StoredMail::from_row(r)?)))?;
    let mut all = rows.collect::<crate::store::DbResult<Vec<_>>>()?;
    // Mail to the names this PC's live sessions hold, in the same order. A
    // session report earlier in this poll may have changed which it holds.
    let may_hold = reported || ctx.facts.is_none_or(|row| row.holds_names);
    let named = if may_hold { super::sessions::name_mail_for(ctx, limit)? } else { Vec::new() };
    if !named.is_empty() {
        all.extend(named);
        all.sort_by_key(|(seq, _)| *seq);
    }
    let mut out = Vec::new();
    for (_, m) in all {
        // A mail still `new` has exactly one timeline entry: its creation
        // (a re-queued one is sent with it too: the PC records delivery itself).
        let created = TimelineEntry { state: State::New, at: m.created_at, by: m.sender.clone(), note: None };
        out.push(m.to_mail(vec![created]));
    }
    let more = out.len() > limit;
    out.truncate(limit);
    Ok((out, more))
}

/// State changes of mail the caller received, after `since`, oldest first,
/// with the note the timeline has (fail reason, `ack`, `reply:<id>`).
fn received_updates_for(ctx: &Ctx<'_>, since: i64) -> OpResult<(Vec<ReceivedUpdate>, bool)> {
    let mut stmt = ctx.tx.prepare_cached(RECEIVED_UPDATES_SQL)?;
    let rows = stmt.query_map(p![ctx.pc, since, limits::UPDATES_MAX as i64 + 1], |r| {
        Ok(ReceivedUpdate {
            seq: r.get(0)?,
            id: r.get(1)?,
            state: state_column(r, 2)?,
            at: r.get(3)?,
            by: r.get(4)?,
            note: r.get(5)?,
        })
    })?;
    let mut out = rows.collect::<crate::store::DbResult<Vec<_>>>()?;
    let more = out.len() > limits::UPDATES_MAX;
    out.truncate(limits::UPDATES_MAX);
    Ok((out, more))
}

/// State changes of mail the caller sent, after `since`, oldest first.
fn updates_for(ctx: &Ctx<'_>, since: i64) -> OpResult<(Vec<Update>, bool)> {
    let mut stmt = ctx.tx.prepare_cached(UPDATES_SQL)?;
    let rows = stmt.query_map(p![ctx.pc, since, limits::UPDATES_MAX as i64 + 1], |r| {
        Ok(Update { seq: r.get(0)?, id: r.get(1)?, state: state_column(r, 2)?, at: r.get(3)?, by: r.get(4)? })
    })?;
    let mut out = rows.collect::<crate::store::DbResult<Vec<_>>>()?;
    let more = out.len() > limits::UPDATES_MAX;
    out.truncate(limits::UPDATES_MAX);
    Ok((out, more))
}
