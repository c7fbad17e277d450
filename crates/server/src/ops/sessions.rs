//! Sessions and names (docs/protocol.md "Sessions and names"):
//! the live sessions a poll reports, `name.take`, `who`, and how mail to a
//! name finds the PC holding it (and leaves the one that held it before).
//!
//! A PC's sessions count as live while its report is fresh (made within
//! `REPORT_FRESH_MS`: every poll of a PC that reports sessions renews it); a
//! name's mail goes out only while its holder is live, otherwise it waits.

use super::names::{held_by, holder, is_live};
use super::roster;
use crate::ctx::{Ctx, OpError, OpResult};
use crate::mail::{record_event, MailEvent, StoredMail, MAIL_COLUMNS};
use crate::store::p;
use crate::store::Dialect;
use pcmail_core::op_table::News;
use pcmail_core::sessions::{
    good_sessions, LiveItem, NameHolder, PollSessionsAnswer, TakeAnswer, WhoAnswer, WhoSession, REPORT_FRESH_MS,
};
use pcmail_core::{ErrorCode, Millis, ProtoError};
use serde_json::json;

/// Replaces the caller's list of live sessions with the sessions of `live`
/// that parsed (a refused one is left out on its own).
pub(crate) fn report(ctx: &Ctx<'_>, live: &[LiveItem]) -> OpResult<()> {
    ctx.tx.prepare_cached("DELETE FROM live_session WHERE pc = ?1")?.execute(p![ctx.pc])?;
    let mut ins = ctx.tx.prepare_cached(
        "INSERT INTO live_session (pc, session, repo, branch, cwd, idle_ms, leases, reported_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    for s in good_sessions(live) {
        ins.execute(p![ctx.pc, s.session, s.repo, s.branch, s.cwd, s.idle_ms, json!(s.leases).to_string(), ctx.now])?;
    }
    Ok(())
}

/// Whether the caller may confirm, mark and read `mail` as its recipient:
/// its own label, or a name it holds now or had the mail delivered to it.
pub(crate) fn receives(ctx: &Ctx<'_>, mail: &StoredMail) -> OpResult<bool> {
    if mail.recipient == ctx.pc {
        return Ok(true);
    }
    let Some(h) = holder(ctx, &mail.recipient)? else { return Ok(false) };
    if h.pc == ctx.pc {
        return Ok(true);
    }
    let name_pc: Option<String> =
        ctx.tx.prepare_cached("SELECT name_pc FROM mail WHERE id = ?1")?.query_row(p![&mail.id], |r| r.get(0))?;
    Ok(name_pc.as_deref() == Some(ctx.pc))
}

/// A confirm of mail to a name by the PC holding it: it is there now. Mail
/// re-queued after the name moved is delivered again, here: a timeline entry
/// (so this PC's received feed has it) with the server's time.
pub(crate) fn confirmed_here(ctx: &mut Ctx<'_>, mail: &StoredMail) -> OpResult<()> {
    let requeued: bool =
        ctx.tx.prepare_cached("SELECT requeued FROM mail WHERE id = ?1")?.query_row(p![&mail.id], |r| r.get(0))?;
    ctx.tx.prepare_cached("UPDATE mail SET name_pc = ?2, requeued = 0 WHERE id = ?1")?.execute(p![mail.id, ctx.pc])?;
    if requeued && mail.state == pcmail_core::State::Delivered {
        let at = ctx.now.max(mail.last_at);
        ctx.tx
            .prepare_cached("UPDATE mail SET delivered_at = ?2, last_at = ?2 WHERE id = ?1")?
            .execute(p![mail.id, at])?;
        let note = pcmail_core::sessions::redelivered_note(&mail.recipient);
        let pc = ctx.pc.to_string();
        record_event(
            ctx,
            &MailEvent::new(&mail.id, &mail.sender, pcmail_core::State::Delivered, at, &pc).note(Some(&note)),
        )?;
        ctx.wake(News::Mail, mail.sender.clone());
    }
    Ok(())
}

/// Why mail to a name waits on the server, for `status`: None when it is a
/// PC's mail, or its name has a live holder.
pub(crate) fn waiting_note(ctx: &Ctx<'_>, mail: &StoredMail) -> OpResult<Option<String>> {
    if !matches!(mail.state, pcmail_core::State::New) {
        return Ok(None);
    }
    let Some(h) = holder(ctx, &mail.recipient)? else { return Ok(None) };
    if is_live(ctx, &h.pc, &h.session)? {
        return Ok(None);
    }
    Ok(Some(format!(
        "waiting: no live session holds {} (last held by {}/{}); it goes out when a session takes the name or that one comes back",
        h.name, h.pc, h.session
    )))
}

/// Mail to the names the caller's live sessions hold, still to go to this
/// PC (new, or re-queued after the name moved here), oldest first, at most `limit` + 1.
pub(crate) fn name_mail_for(ctx: &Ctx<'_>, limit: usize) -> OpResult<Vec<(i64, StoredMail)>> {
    let held = held_by(ctx, ctx.pc)?;
    let mut out = Vec::new();
    for h in held {
        if !is_live(ctx, &h.pc, &h.session)? {
            continue;
        }
        // Two partial-index reads: new mail, and mail re-queued after a move.
        let sql = format!(
            "SELECT seq, {MAIL_COLUMNS} FROM mail WHERE recipient = ?1 AND state = 'new' \
             UNION ALL SELECT seq, {MAIL_COLUMNS} FROM mail WHERE recipient = ?1 AND requeued = 1 AND state = 'delivered' \
             ORDER BY seq LIMIT ?2"
        );
        let mut st = ctx.tx.prepare_cached(&sql)?;
        let rows = st.query_map(p![h.name, limit as i64 + 1], |r| {
            let seq: i64 = r.get(0)?;
            Ok((seq, row_mail(r)?))
        })?;
        for m in rows {
            out.push(m?);
        }
    }
    out.sort_by_key(|(seq, _)| *seq);
    Ok(out)
}

/// `StoredMail::from_row` over columns shifted by one (the seq first).
fn row_mail(r: &crate::store::Row<'_>) -> crate::store::DbResult<StoredMail> {
    let state: String = r.get(13)?;
    Ok(StoredMail {
        id: r.get(1)?,
        sender: r.get(2)?,
        recipient: r.get(3)?,
        kind: r.get(4)?,
        subject: r.get(5)?,
        body: r.get(6)?,
        urgent: r.get(7)?,
        expires_at: r.get(8)?,
        in_reply_to: r.get(9)?,
        auto: r.get(10)?,
        hop: r.get(11)?,
        created_at: r.get(12)?,
        state: pcmail_core::State::parse(&state)
            .ok_or_else(|| crate::store::DbError::Decode { col: 13, what: format!("bad state {state:?}") })?,
        broadcast_of: r.get(14)?,
        last_at: r.get(15)?,
        expires_in: r.get(16)?,
        recipients: r.get(17)?,
    })
}

/// The poll's `sessions`: the report applied, then the names this PC holds
/// and the mail it must withdraw (told once).
pub(crate) fn poll_sessions(ctx: &mut Ctx<'_>, live: &[LiveItem]) -> OpResult<PollSessionsAnswer> {
    report(ctx, live)?;
    let names = held_by(ctx, ctx.pc)?;
    let withdrawn: Vec<String> = {
        let mut st = ctx.tx.prepare_cached("SELECT mail_id FROM name_withdraw WHERE pc = ?1 ORDER BY mail_id")?;
        st.query_map(p![ctx.pc], |r| r.get(0))?.collect::<crate::store::DbResult<Vec<String>>>()?
    };
    if !withdrawn.is_empty() {
        ctx.tx.prepare_cached("DELETE FROM name_withdraw WHERE pc = ?1")?.execute(p![ctx.pc])?;
    }
    let errors = live.iter().filter_map(|s| s.as_ref().err()).map(|b| b.to_error()).collect();
    Ok(PollSessionsAnswer { names, withdrawn, errors })
}

fn conflict(message: String) -> OpError {
    OpError::Proto(ProtoError::new(ErrorCode::Conflict, message))
}

/// `name.take`: the caller's `session` takes `name`. Refused when it is a
/// PC label, or another session that is live holds it; otherwise it moves
/// here (recorded), and unseen mail delivered to another PC comes here.
pub(crate) fn take(ctx: &mut Ctx<'_>, name: &str, session: &str, live: Option<&[LiveItem]>) -> OpResult<TakeAnswer> {
    if let Some(l) = live {
        report(ctx, l)?;
    }
    let pcs = roster::load_all(ctx)?;
    if pcs.iter().any(|p| p.label == name) {
        return Err(conflict(format!(
            "{name:?} is a PC label; names and labels share one namespace: pick another name"
        )));
    }
    let mine =
        NameHolder { name: name.to_string(), pc: ctx.pc.to_string(), session: session.to_string(), since: ctx.now };
    let prev = holder(ctx, name)?;
    if let Some(p) = &prev {
        if p.pc == ctx.pc && p.session == session {
            return Ok(TakeAnswer {
                name: name.to_string(),
                holder: p.clone(),
                previous: None,
                changed: false,
                requeued: 0,
            });
        }
        if is_live(ctx, &p.pc, &p.session)? {
            return Err(conflict(format!(
                "{name} is held by {}/{} (a live session, since {}); it moves only when that session has ended",
                p.pc, p.session, p.since
            )));
        }
    }
    ctx.tx
        .prepare_cached(
            "INSERT INTO name (name, pc, session, since) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (name) DO UPDATE SET pc = excluded.pc, session = excluded.session, since = excluded.since",
        )?
        .execute(p![name, ctx.pc, session, ctx.now])?;
    let mut requeued = 0;
    if let Some(p) = prev.as_ref().filter(|p| p.pc != ctx.pc) {
        // Delivered there and not seen yet: back on the server for this PC, and out of that PC's store.
        let ids: Vec<String> = {
            let mut st = ctx
                .tx
                .prepare_cached("SELECT id FROM mail WHERE recipient = ?1 AND state = 'delivered' AND name_pc = ?2")?;
            st.query_map(p![name, p.pc], |r| r.get(0))?.collect::<crate::store::DbResult<Vec<String>>>()?
        };
        let note = pcmail_core::sessions::withdrawn_note(name, ctx.pc);
        for id in &ids {
            ctx.tx.prepare_cached("UPDATE mail SET name_pc = NULL, requeued = 1 WHERE id = ?1")?.execute(p![id])?;
            ctx.tx
                .prepare_cached("INSERT INTO name_withdraw (pc, mail_id) VALUES (?1, ?2) ON CONFLICT DO NOTHING")?
                .execute(p![p.pc, id])?;
            // The old PC's received feed (and the timeline) say it left: still
            // `delivered` on the server, withdrawn from that PC by the server.
            let (sender, last_at): (String, Millis) = ctx
                .tx
                .prepare_cached("SELECT sender, last_at FROM mail WHERE id = ?1")?
                .query_row(p![id], |r| Ok((r.get(0)?, r.get(1)?)))?;
            let at = ctx.now.max(last_at);
            ctx.tx
                .prepare_cached("UPDATE mail SET delivered_at = ?2, last_at = ?2 WHERE id = ?1")?
                .execute(p![id, at])?;
            let event = MailEvent {
                feed_pc: Some(&p.pc),
                ..MailEvent::new(id, &sender, pcmail_core::State::Delivered, at, "server").note(Some(&note))
            };
            record_event(ctx, &event)?;
            ctx.wake(News::Mail, sender);
        }
        requeued = ids.len();
        ctx.wake(News::Mail, p.pc.clone());
    }
    ctx.tx
        .prepare_cached(
            "INSERT INTO name_event (name, at, pc, session, prev_pc, prev_session, requeued) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?
        .execute(p![
            name,
            ctx.now,
            ctx.pc,
            session,
            prev.as_ref().map(|p| &p.pc),
            prev.as_ref().map(|p| &p.session),
            requeued as i64
        ])?;
    let me = ctx.pc.to_string();
    ctx.wake(News::Mail, me);
    Ok(TakeAnswer { name: name.to_string(), holder: mine, previous: prev, changed: true, requeued })
}

/// `who`: every live session on every PC (fresh reports only), with the
/// name it holds, and the names no live session holds.
pub(crate) fn who(ctx: &mut Ctx<'_>) -> OpResult<WhoAnswer> {
    let fresh = ctx.now - REPORT_FRESH_MS;
    let mut st = ctx.tx.prepare_cached(match ctx.tx.dialect() {
        Dialect::Sqlite => {
            "SELECT l.pc, l.session, l.repo, l.branch, l.cwd, l.idle_ms, l.leases, l.reported_at, \
                    (SELECT group_concat(n.name, ' ') FROM name n WHERE n.pc = l.pc AND n.session = l.session) \
             FROM live_session l WHERE l.reported_at >= ?1 OR l.pc = ?2 ORDER BY l.pc, l.session"
        }
        Dialect::Postgres => {
            "SELECT l.pc, l.session, l.repo, l.branch, l.cwd, l.idle_ms, l.leases, l.reported_at, \
                    (SELECT string_agg(n.name, ' ') FROM name n WHERE n.pc = l.pc AND n.session = l.session) \
             FROM live_session l WHERE l.reported_at >= ?1 OR l.pc = ?2 ORDER BY l.pc, l.session"
        }
    })?;
    let now = ctx.now;
    let rows = st.query_map(p![fresh, ctx.pc], |r| {
        let leases: String = r.get(6)?;
        let reported: Millis = r.get(7)?;
        let idle: Millis = r.get(5)?;
        Ok(WhoSession {
            pc: r.get(0)?,
            session: r.get(1)?,
            repo: r.get(2)?,
            branch: r.get(3)?,
            cwd: r.get(4)?,
            idle_ms: idle + (now - reported).max(0),
            leases: serde_json::from_str(&leases).unwrap_or_default(),
            name: r.get(8)?,
        })
    })?;
    let sessions = rows.collect::<crate::store::DbResult<Vec<_>>>()?;
    let mut idle_names = Vec::new();
    let all: Vec<NameHolder> = {
        let mut st = ctx.tx.prepare_cached("SELECT name, pc, session, since FROM name ORDER BY name")?;
        let rows = st.query_map(p![], |r| {
            Ok(NameHolder { name: r.get(0)?, pc: r.get(1)?, session: r.get(2)?, since: r.get(3)? })
        })?;
        rows.collect::<crate::store::DbResult<Vec<_>>>()?
    };
    for h in all {
        if !sessions.iter().any(|s| s.pc == h.pc && s.session == h.session) {
            idle_names.push(h);
        }
    }
    Ok(WhoAnswer { sessions, idle_names })
}
