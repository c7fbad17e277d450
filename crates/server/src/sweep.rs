//! sweep: expiry, and the watch alerts (unseen, undelivered, stale PC), one
//! row per (subject, kind) updated in place and resolved when the condition
//! clears. Also the `alerts` op.

use crate::ctx::{Ctx, OpResult};
use crate::mail::{transition, StoredMail, MAIL_COLUMNS};
use crate::store::p;
use crate::store::{Optional, Read, P};
use pcmail_core::answers::{AlertsAnswer, SweepAnswer, SweptAlerts, SweptJobs, SweptLeases};
use pcmail_core::model::limits;
use pcmail_core::sessions::{self, NameHolder};
use pcmail_core::{Alert, AlertKind, Millis};
use serde_json::{json, Value};
use std::collections::HashSet;

/// A condition that holds right now and deserves an alert.
struct Condition {
    kind: AlertKind,
    subject: String,
    pc: String,
    message: String,
}

impl Condition {
    fn key(&self) -> String {
        alert_key(&self.subject, self.kind)
    }
}

pub fn alert_key(subject: &str, kind: AlertKind) -> String {
    format!("{subject}|{}", kind.as_str())
}

fn ago(ms: Millis) -> String {
    let mins = ms.max(0) / limits::MIN;
    if mins >= 60 {
        format!("{}h {:02}m", mins / 60, mins % 60)
    } else {
        format!("{mins}m")
    }
}

/// What `catch_up` changed.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct CaughtUp {
    pub expired: i64,
    pub leases: crate::ops::lease::Refreshed,
    pub jobs_timed_out: i64,
    pub jobs_cancelled: i64,
}

/// Writes what the server's clock has already decided (`pcmail_core::due`):
/// mail past its expiry, stale and ended leases, silent and forgotten jobs,
/// each at the moment its rule fired. The sweep runs it, and so does every
/// write op before its own work, so no op acts on a state the clock has
/// already changed; read ops show the same through `pcmail_core::due`.
pub(crate) fn catch_up(ctx: &mut Ctx<'_>) -> OpResult<CaughtUp> {
    let now = ctx.now;
    if ctx.tx.dialect() == crate::store::Dialect::Postgres && !any_candidate(ctx)? {
        return Ok(CaughtUp::default());
    }
    // Mail (the state machine keeps done/failed as they are). The WHERE
    // only narrows to candidates by the index; the rule is `due::mail`.
    let sql = format!(
        concat!(
            "SELECT {} FROM mail WHERE expires_at IS NOT NULL AND ",
            mail_open_states!(),
            " AND expires_at <= ?1 ORDER BY seq"
        ),
        MAIL_COLUMNS
    );
    let expiring = ctx
        .tx
        .prepare_cached(&sql)?
        .query_map(p![now], StoredMail::from_row)?
        .collect::<crate::store::DbResult<Vec<_>>>()?;
    let mut out = CaughtUp::default();
    for m in &expiring {
        let Some(d) = pcmail_core::due::mail(m.state, m.expires_at, now) else { continue };
        if transition(ctx, m, d.state, d.at, pcmail_core::due::SERVER_ACTOR, None)?.1 {
            out.expired += 1;
        }
    }
    // Leases: stale, TTL expiry (alerts in the sweep).
    out.leases = crate::ops::lease::refresh(ctx)?;
    // Jobs: running without a heartbeat or past twice the limit; queued for 7 days.
    (out.jobs_timed_out, out.jobs_cancelled) = crate::ops::job_state::sweep(ctx)?;
    Ok(out)
}

/// Whether any of the catch-up's five reads (below, and in `lease::refresh`
/// and `job_state::due`) would find a candidate row: their WHERE clauses in
/// one statement. On PostgreSQL each statement is a round trip, and nearly
/// every write op finds nothing due; with no candidate the five reads would
/// find nothing and change nothing.
fn any_candidate(ctx: &Ctx<'_>) -> OpResult<bool> {
    let read = candidates_read(ctx.now);
    let found: i64 = ctx.tx.prepare_cached(&read.sql)?.query_row(&read.params, |r| r.get(0))?;
    Ok(found != 0)
}

/// The one statement of [`any_candidate`] at `now`, to send ahead on PostgreSQL.
pub(crate) fn candidates_read(now: pcmail_core::Millis) -> Read<'static> {
    Read::new(
        concat!(
            "SELECT CASE WHEN \
             EXISTS (SELECT 1 FROM mail WHERE expires_at IS NOT NULL AND ",
            mail_open_states!(),
            " AND expires_at <= ?1) \
             OR EXISTS (SELECT 1 FROM lease WHERE state = 'held' AND ttl_expires_at IS NULL AND heartbeat_at <= ?2) \
             OR EXISTS (SELECT 1 FROM lease WHERE state IN ('held', 'stale') AND ttl_expires_at IS NOT NULL \
               AND ttl_expires_at <= ?1) \
             OR EXISTS (SELECT 1 FROM job WHERE state = 'running') \
             OR EXISTS (SELECT 1 FROM job WHERE state = 'queued' AND submitted_at <= ?3) \
             THEN 1 ELSE 0 END"
        ),
        vec![
            P::Int(now),
            P::Int(now - pcmail_core::lease::STALE_AFTER_MS),
            P::Int(now - pcmail_core::job::QUEUED_MAX_AGE_MS),
        ],
    )
}

pub(crate) fn sweep(ctx: &mut Ctx<'_>) -> OpResult<SweepAnswer> {
    let now = ctx.now;
    let CaughtUp { expired, leases, jobs_timed_out, jobs_cancelled } = catch_up(ctx)?;

    let conditions = current_conditions(ctx)?;
    let (mut opened, mut updated, mut resolved) = (0, 0, 0);
    let mut holding = HashSet::new();
    for c in &conditions {
        let key = c.key();
        let existing: Option<Option<Millis>> = ctx
            .tx
            .prepare_cached("SELECT resolved_at FROM alert WHERE key = ?1")?
            .query_row(p![&key], |r| r.get(0))
            .optional()?;
        match existing {
            None => {
                ctx.tx
                    .prepare_cached(
                        "INSERT INTO alert (key, kind, subject, pc, message, opened_at, updated_at, count) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, 1)",
                    )?
                    .execute(p![key, c.kind.as_str(), c.subject, c.pc, c.message, now])?;
                opened += 1;
            }
            Some(Some(_)) => {
                // The same condition again (a PC stale once more): the row reopens and is posted anew.
                ctx.tx
                    .prepare_cached(
                        "UPDATE alert SET resolved_at = NULL, opened_at = ?2, updated_at = ?2, count = count + 1, \
                         message = ?3, pc = ?4, posted = 0, post_tries = 0, last_try_at = NULL, last_error = NULL, next_try_at = NULL \
                         WHERE key = ?1",
                    )?
                    .execute(p![key, now, c.message, c.pc])?;
                opened += 1;
            }
            Some(None) => {
                ctx.tx
                    .prepare_cached("UPDATE alert SET updated_at = ?2, count = count + 1, message = ?3 WHERE key = ?1")?
                    .execute(p![key, now, c.message])?;
                updated += 1;
            }
        }
        holding.insert(key);
    }
    let open_keys = ctx
        .tx
        .prepare_cached("SELECT key FROM alert WHERE resolved_at IS NULL")?
        .query_map(p![], |r| r.get::<_, String>(0))?
        .collect::<crate::store::DbResult<Vec<_>>>()?;
    for key in open_keys.iter().filter(|k| !holding.contains(*k)) {
        ctx.tx.prepare_cached("UPDATE alert SET resolved_at = ?2 WHERE key = ?1")?.execute(p![key, now])?;
        resolved += 1;
    }
    Ok(SweepAnswer {
        expired,
        alerts: SweptAlerts { opened, updated, resolved },
        leases: SweptLeases { stale: leases.stale, expired: leases.expired },
        jobs: SweptJobs { timed_out: jobs_timed_out, cancelled: jobs_cancelled },
    })
}

/// What the next sweep would do, and why, without doing it (`_debug_sweep_plan`):
/// jobs first, then mail to expire, then the alert conditions that hold now.
pub(crate) fn plan(ctx: &Ctx<'_>) -> OpResult<Value> {
    let jobs: Vec<Value> = crate::ops::job_state::due(ctx)?
        .into_iter()
        .map(|(id, state, reason, _)| json!({"id": id, "state": state.as_str(), "reason": reason}))
        .collect();
    let expire: Vec<Value> = ctx
        .tx
        .prepare_cached(concat!(
            "SELECT id, expires_at, state FROM mail WHERE expires_at IS NOT NULL AND ",
            mail_open_states!(),
            " AND expires_at <= ?1 ORDER BY seq"
        ))?
        .query_map(p![ctx.now], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?, crate::mail::state_column(r, 2)?))
        })?
        .collect::<crate::store::DbResult<Vec<_>>>()?
        .into_iter()
        .filter(|(_, at, state)| pcmail_core::due::mail(*state, Some(*at), ctx.now).is_some())
        .map(|(id, at, _)| json!({"id": id, "expiresAt": at, "reason": "past its expiry"}))
        .collect();
    let alerts: Vec<Value> = current_conditions(ctx)?
        .into_iter()
        .map(|c| json!({"kind": c.kind.as_str(), "subject": c.subject, "pc": c.pc, "message": c.message}))
        .collect();
    Ok(json!({"jobs": jobs, "expire": expire, "alerts": alerts}))
}

fn recipient_at(holder: &Option<(NameHolder, bool)>) -> sessions::RecipientAt<'_> {
    match holder {
        Some((h, live)) => sessions::RecipientAt::Name { pc: &h.pc, session: &h.session, live: *live },
        None => sessions::RecipientAt::Label,
    }
}

fn current_conditions(ctx: &Ctx<'_>) -> OpResult<Vec<Condition>> {
    let now = ctx.now;
    let mut out = Vec::new();
    // 2. delivered but not seen for more than 2 h (urgent) / 6 h.
    let mut stmt = ctx.tx.prepare_cached(
        "SELECT id, sender, recipient, urgent, delivered_at FROM mail \
         WHERE state = 'delivered' AND delivered_at < ?1 ORDER BY delivered_at",
    )?;
    let rows = stmt.query_map(p![now - limits::UNSEEN_URGENT_MS], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, bool>(3)?,
            r.get::<_, i64>(4)?,
        ))
    })?;
    let unseen = rows.collect::<crate::store::DbResult<Vec<_>>>()?;
    for (id, from, to, urgent, delivered_at) in unseen {
        let limit = if urgent { limits::UNSEEN_URGENT_MS } else { limits::UNSEEN_MS };
        if now - delivered_at > limit {
            // Mail to a name: the text names the name and the PC holding it.
            let holder = crate::ops::names::holder_live(ctx, &to)?;
            let at = recipient_at(&holder);
            out.push(Condition {
                kind: AlertKind::Unseen,
                message: sessions::unseen_alert_message(&id, &from, &to, &at, urgent, &ago(now - delivered_at)),
                subject: id,
                pc: holder.as_ref().map_or(to.clone(), |(h, _)| h.pc.clone()),
            });
        }
    }
    // 3. new and not delivered for more than 30 min.
    let mut stmt = ctx.tx.prepare_cached(
        "SELECT id, sender, recipient, created_at FROM mail WHERE state = 'new' AND created_at < ?1 ORDER BY seq",
    )?;
    let rows = stmt.query_map(p![now - limits::UNDELIVERED_MS], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?, r.get::<_, i64>(3)?))
    })?;
    let undelivered = rows.collect::<crate::store::DbResult<Vec<_>>>()?;
    for (id, from, to, created_at) in undelivered {
        let holder = crate::ops::names::holder_live(ctx, &to)?;
        let at = recipient_at(&holder);
        out.push(Condition {
            kind: AlertKind::Undelivered,
            message: sessions::undelivered_alert_message(&id, &from, &to, &at, &ago(now - created_at)),
            subject: id,
            pc: holder.as_ref().map_or(to.clone(), |(h, _)| h.pc.clone()),
        });
    }
    // 4. a PC that has polled before but not for more than 10 min (its
    // recorded poll may lag by the record step: `due::pc_silent_before`).
    let mut stmt = ctx.tx.prepare_cached(
        "SELECT label, last_poll_at FROM pc WHERE last_poll_at IS NOT NULL AND last_poll_at < ?1 ORDER BY number",
    )?;
    let rows = stmt.query_map(p![pcmail_core::due::pc_silent_before(now, limits::STALE_PC_MS)], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
    })?;
    for row in rows {
        let (label, last) = row?;
        out.push(Condition {
            kind: AlertKind::StalePc,
            message: format!("pcmail: {label} has not polled for {}", ago(now - last)),
            subject: label.clone(),
            pc: label,
        });
    }
    // 5. a lease stale for over an hour (one alert per resource).
    for (resource, pc, message) in crate::ops::lease::stale_over_an_hour(ctx)? {
        out.push(Condition { kind: AlertKind::StaleLease, subject: resource, pc, message });
    }
    Ok(out)
}

pub(crate) fn list_alerts(ctx: &mut Ctx<'_>, open_only: bool) -> OpResult<AlertsAnswer> {
    let sql = format!(
        "SELECT key, kind, subject, pc, message, opened_at, updated_at, resolved_at, count, posted, post_tries, last_error \
         FROM alert {} \
         ORDER BY updated_at DESC, key LIMIT 500",
        if open_only { "WHERE resolved_at IS NULL" } else { "" }
    );
    let mut stmt = ctx.tx.prepare_cached(&sql)?;
    let rows = stmt.query_map(p![], |r| {
        // Only the sweep writes kinds, each one `AlertKind` knows.
        let kind: String = r.get(1)?;
        Ok(Alert {
            key: r.get(0)?,
            kind: AlertKind::parse(&kind).unwrap_or(AlertKind::Other),
            subject: r.get(2)?,
            pc: r.get(3)?,
            message: r.get(4)?,
            opened_at: r.get(5)?,
            updated_at: r.get(6)?,
            resolved_at: r.get(7)?,
            count: r.get(8)?,
            posted: r.get(9)?,
            post_tries: r.get(10)?,
            last_error: r.get(11)?,
        })
    })?;
    Ok(AlertsAnswer { alerts: rows.collect::<crate::store::DbResult<Vec<_>>>()? })
}
