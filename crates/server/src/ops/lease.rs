//! Leases (docs/protocol.md "Leases"): claim, release, list, check,
//! and the heartbeats and releases a poll carries. Every op first brings the
//! leases up to `now` (stale after 6·H, TTL leases expired), so an answer
//! never depends on when the sweep last ran.

use crate::ctx::{Ctx, OpError, OpResult};
use crate::store::p;
use crate::store::{Optional, Row};
use pcmail_core::error::ItemError;
use pcmail_core::lease::{
    self, CheckAnswer, Claim, ClaimAnswer, Event, Evidence, Holder, Lease, LeaseState, ListAnswer, ListArgs, Lost,
    Mode, PollLease, PollLeaseAnswer, Release, ReleaseAnswer, Released, TimelineEntry, ENDED_WINDOW_MS, STALE_AFTER_MS,
    STALE_ALERT_MS,
};
use pcmail_core::op_table::News;
use pcmail_core::{ErrorCode, Millis, ProtoError};
use serde_json::json;

/// A lease row.
#[derive(Debug, Clone)]
pub(crate) struct StoredLease {
    resource: String,
    fence: i64,
    repo: String,
    description: String,
    files: Vec<String>,
    mode: Mode,
    holder: Holder,
    claim_id: String,
    granted_at: Millis,
    heartbeat_at: Millis,
    ttl_expires_at: Option<Millis>,
    state: LeaseState,
}

const COLUMNS: &str = "resource, fence, repo, description, files, mode, holder_pc, holder_session, holder_name, \
     claim_id, granted_at, heartbeat_at, ttl_expires_at, state";

fn bad_column(i: usize, what: &str) -> crate::store::DbError {
    crate::store::DbError::Decode { col: i, what: what.to_string() }
}

impl StoredLease {
    fn from_row(r: &Row<'_>) -> crate::store::DbResult<StoredLease> {
        let files: String = r.get(4)?;
        let mode: String = r.get(5)?;
        let state: String = r.get(13)?;
        Ok(StoredLease {
            resource: r.get(0)?,
            fence: r.get(1)?,
            repo: r.get(2)?,
            description: r.get(3)?,
            files: serde_json::from_str(&files).map_err(|_| bad_column(4, "files is not a JSON array"))?,
            mode: Mode::parse(&mode).ok_or_else(|| bad_column(5, "bad mode"))?,
            holder: Holder { pc: r.get(6)?, session: r.get(7)?, name: r.get(8)? },
            claim_id: r.get(9)?,
            granted_at: r.get(10)?,
            heartbeat_at: r.get(11)?,
            ttl_expires_at: r.get(12)?,
            state: LeaseState::parse(&state).ok_or_else(|| bad_column(13, "bad state"))?,
        })
    }

    fn to_lease(&self, timeline: Option<Vec<TimelineEntry>>) -> Lease {
        Lease {
            resource: self.resource.clone(),
            repo: self.repo.clone(),
            description: self.description.clone(),
            files: self.files.clone(),
            mode: self.mode,
            holder: self.holder.clone(),
            fence: self.fence,
            claim_id: self.claim_id.clone(),
            granted_at: self.granted_at,
            heartbeat_at: self.heartbeat_at,
            ttl_expires_at: self.ttl_expires_at,
            state: self.state,
            stale: self.state == LeaseState::Stale,
            timeline,
        }
    }
}

/// The timeline actor of a holder: `pc/session` (the session cut as mail actors are).
fn actor(h: &Holder) -> String {
    pcmail_core::rules::actor(&h.pc, Some(&h.session))
}

fn query_leases(ctx: &Ctx<'_>, where_sql: &str, p: &[crate::store::P<'_>]) -> OpResult<Vec<StoredLease>> {
    let sql = format!("SELECT {COLUMNS} FROM lease WHERE {where_sql}");
    let mut stmt = ctx.tx.prepare_cached(&sql)?;
    let rows = stmt.query_map(p, StoredLease::from_row)?;
    Ok(rows.collect::<crate::store::DbResult<Vec<_>>>()?)
}

fn load(ctx: &Ctx<'_>, resource: &str, fence: i64) -> OpResult<Option<StoredLease>> {
    Ok(query_leases(ctx, "resource = ?1 AND fence = ?2", p![resource, fence])?.into_iter().next())
}

fn live_on(ctx: &Ctx<'_>, resource: &str) -> OpResult<Vec<StoredLease>> {
    query_leases(ctx, "resource = ?1 AND state IN ('held', 'stale') ORDER BY fence", p![resource])
}

pub(crate) fn version(ctx: &Ctx<'_>) -> OpResult<i64> {
    Ok(ctx.tx.prepare_cached("SELECT value FROM meta WHERE key = 'lease_version'")?.query_row(p![], |r| r.get(0))?)
}

/// The live leases changed in `repo`: the version moves, and the long polls
/// of every PC with a live session in that repo wake, so their guard files
/// hear of a claim or a release at once (not at their next timed poll).
fn bump(ctx: &mut Ctx<'_>, repo: &str) -> OpResult<()> {
    ctx.tx.prepare_cached("UPDATE meta SET value = value + 1 WHERE key = 'lease_version'")?.execute(p![])?;
    let fresh = ctx.now - pcmail_core::sessions::REPORT_FRESH_MS;
    let pcs = ctx
        .tx
        .prepare_cached("SELECT DISTINCT pc FROM live_session WHERE repo = ?1 AND reported_at >= ?2 ORDER BY pc")?
        .query_map(p![repo, fresh], |r| r.get::<_, String>(0))?
        .collect::<crate::store::DbResult<Vec<_>>>()?;
    for pc in pcs {
        ctx.wake(News::Lease, pc);
    }
    Ok(())
}

fn set_state(ctx: &mut Ctx<'_>, l: &StoredLease, state: LeaseState, ended_at: Option<Millis>) -> OpResult<()> {
    ctx.tx
        .prepare_cached("UPDATE lease SET state = ?3, ended_at = ?4 WHERE resource = ?1 AND fence = ?2")?
        .execute(p![l.resource, l.fence, state.as_str(), ended_at])?;
    bump(ctx, &l.repo)
}

struct Entry<'a> {
    at: Millis,
    event: Event,
    by: &'a str,
    new_fence: Option<i64>,
    reason: Option<&'a str>,
    evidence: Option<Evidence>,
    detail: Option<&'a str>,
}

impl<'a> Entry<'a> {
    fn new(at: Millis, event: Event, by: &'a str) -> Entry<'a> {
        Entry { at, event, by, new_fence: None, reason: None, evidence: None, detail: None }
    }
}

fn record(ctx: &Ctx<'_>, l: &StoredLease, e: Entry<'_>) -> OpResult<()> {
    ctx.tx
        .prepare_cached(
            "INSERT INTO lease_event (resource, fence, new_fence, at, event, by, reason, evidence, detail) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?
        .execute(p![
            l.resource,
            l.fence,
            e.new_fence,
            e.at,
            e.event.as_str(),
            e.by,
            e.reason,
            e.evidence.map(Evidence::as_str),
            e.detail
        ])?;
    Ok(())
}

/// Queues a `lost` report for the holder's PC (sent once, by its next poll).
fn queue_lost(ctx: &mut Ctx<'_>, l: &StoredLease, lost: &Lost) -> OpResult<()> {
    let taken_by = lost.taken_by.as_ref().map(|h| json!(h).to_string());
    ctx.tx
        .prepare_cached(
            "INSERT INTO lease_lost (pc, resource, fence, taken_by, at, reason, event) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?
        .execute(p![l.holder.pc, l.resource, l.fence, taken_by, lost.at, lost.reason, lost.event.as_str()])?;
    // Wake that PC's long poll, so it hears of it now.
    ctx.wake(News::Lease, l.holder.pc.clone());
    Ok(())
}

/// A lease's timeline: its own entries, and the takeover that granted it.
fn timeline(ctx: &Ctx<'_>, resource: &str, fence: i64) -> OpResult<Vec<TimelineEntry>> {
    // Two index seeks, not one OR (which would scan the resource's whole history).
    let mut stmt = ctx.tx.prepare_cached(
        "SELECT seq, at, event, by, fence, reason, evidence, detail FROM lease_event WHERE resource = ?1 AND fence = ?2 \
         UNION ALL \
         SELECT seq, at, event, by, fence, reason, evidence, detail FROM lease_event WHERE resource = ?1 AND new_fence = ?2 \
         ORDER BY seq",
    )?;
    let rows = stmt.query_map(p![resource, fence], |r| {
        let event: String = r.get(2)?;
        let evidence: Option<String> = r.get(6)?;
        Ok(TimelineEntry {
            at: r.get(1)?,
            event: Event::parse(&event).ok_or_else(|| bad_column(2, "bad event"))?,
            by: r.get(3)?,
            fence: Some(r.get(4)?),
            reason: r.get(5)?,
            evidence: evidence.as_deref().and_then(Evidence::parse),
            detail: r.get(7)?,
        })
    })?;
    Ok(rows.collect::<crate::store::DbResult<Vec<_>>>()?)
}

/// What `refresh` changed.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Refreshed {
    pub stale: usize,
    pub expired: usize,
}

/// Brings every lease up to `now`: heartbeat leases silent for 6·H become
/// stale (at the moment they did), TTL leases past their end expire (and
/// their holder's PC is told).
pub(crate) fn refresh(ctx: &mut Ctx<'_>) -> OpResult<Refreshed> {
    let now = ctx.now;
    let mut out = Refreshed::default();
    // The WHERE clauses are spelled as the partial indexes'.
    let going_stale = query_leases(
        ctx,
        "state = 'held' AND ttl_expires_at IS NULL AND heartbeat_at <= ?1 ORDER BY heartbeat_at",
        p![now - STALE_AFTER_MS],
    )?;
    for l in &going_stale {
        let Some(d) = pcmail_core::due::lease(l.state, l.heartbeat_at, l.ttl_expires_at, now) else { continue };
        set_state(ctx, l, d.state, None)?;
        record(ctx, l, Entry::new(d.at, Event::Stale, "server"))?;
        out.stale += 1;
    }
    let ending = query_leases(
        ctx,
        "state IN ('held', 'stale') AND ttl_expires_at IS NOT NULL AND ttl_expires_at <= ?1 ORDER BY ttl_expires_at",
        p![now],
    )?;
    for l in &ending {
        let Some(d) = pcmail_core::due::lease(l.state, l.heartbeat_at, l.ttl_expires_at, now) else { continue };
        let at = d.at;
        set_state(ctx, l, d.state, Some(at))?;
        let reason = "its ttl ran out";
        record(ctx, l, Entry { reason: Some(reason), ..Entry::new(at, Event::Expired, "server") })?;
        let lost = Lost {
            resource: l.resource.clone(),
            fence: l.fence,
            taken_by: None,
            at,
            reason: Some(reason.into()),
            event: Event::Expired,
        };
        queue_lost(ctx, l, &lost)?;
        out.expired += 1;
    }
    Ok(out)
}

fn require_own_pc(ctx: &Ctx<'_>, holder: &Holder) -> OpResult<()> {
    if holder.pc == ctx.pc {
        Ok(())
    } else {
        Err(OpError::proto(ErrorCode::Forbidden, format!("holder.pc {:?} is not the caller {:?}", holder.pc, ctx.pc)))
    }
}

fn with_lease(code: ErrorCode, message: String, l: &StoredLease) -> OpError {
    OpError::Proto(ProtoError::new(code, message).with_lease(json!(l.to_lease(None))))
}

fn since(l: &StoredLease, now: Millis) -> String {
    pcmail_core::present::lease_since(l.fence, l.granted_at, l.heartbeat_at, now)
}

fn who(l: &StoredLease) -> String {
    let mut s = format!("{}/{}", l.holder.pc, l.holder.session);
    if let Some(n) = &l.holder.name {
        s.push_str(&format!(" ({n})"));
    }
    s
}

/// Why the server cannot accept `evidence` for taking `l`, if it cannot.
fn refuse_takeover(ctx: &Ctx<'_>, l: &StoredLease, evidence: Evidence) -> OpResult<Option<String>> {
    let stale = l.state == LeaseState::Stale;
    Ok(match evidence {
        Evidence::ProcessGone if l.holder.pc != ctx.pc => Some(format!(
            "process_gone can only be checked on the holder's PC {:?}; from here use session_ended or force",
            l.holder.pc
        )),
        Evidence::ProcessGone => pcmail_core::lease::process_gone_refusal(l.ttl_expires_at, ctx.now),
        Evidence::SessionEnded if !stale => Some("session_ended needs a stale lease; it is still renewed".into()),
        Evidence::SessionEnded => {
            let last: Option<Millis> = ctx
                .tx
                .prepare_cached("SELECT last_poll_at FROM pc WHERE label = ?1")?
                .query_row(p![&l.holder.pc], |r| r.get(0))
                .optional()?
                .flatten();
            match last {
                Some(t) if !pcmail_core::due::pc_silent(t, ctx.now, STALE_AFTER_MS) => None,
                _ => Some(format!(
                    "session_ended needs the holder's PC {:?} to be polling; it is silent, so only force (with a reason) may take it",
                    l.holder.pc
                )),
            }
        }
        Evidence::Force if !stale => Some("force needs a stale lease; this one is still renewed".into()),
        Evidence::Force => None,
    })
}

/// The next fence of a resource: never one handed out before.
fn next_fence(ctx: &Ctx<'_>, resource: &str) -> OpResult<i64> {
    Ok(ctx
        .tx
        .prepare_cached(
            "INSERT INTO lease_fence (resource, last) VALUES (?1, 1) \
             ON CONFLICT (resource) DO UPDATE SET last = lease_fence.last + 1 RETURNING last",
        )?
        .query_row(p![resource], |r| r.get(0))?)
}

fn grant(ctx: &mut Ctx<'_>, c: &Claim, fence: i64) -> OpResult<StoredLease> {
    let now = ctx.now;
    let l = StoredLease {
        resource: c.resource.clone(),
        fence,
        repo: c.repo.clone(),
        description: c.description.clone(),
        files: c.files.clone(),
        mode: c.mode,
        holder: c.holder.clone(),
        claim_id: c.claim_id.clone(),
        granted_at: now,
        heartbeat_at: now,
        ttl_expires_at: c.ttl_ms.map(|t| now + t),
        state: LeaseState::Held,
    };
    ctx.tx
        .prepare_cached(
            "INSERT INTO lease (resource, fence, repo, description, files, mode, holder_pc, holder_session, holder_name, \
             claim_id, granted_at, heartbeat_at, ttl_expires_at, state) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11, ?12, 'held')",
        )?
        .execute(p![
            l.resource,
            l.fence,
            l.repo,
            l.description,
            json!(l.files).to_string(),
            l.mode.as_str(),
            l.holder.pc,
            l.holder.session,
            l.holder.name,
            l.claim_id,
            now,
            l.ttl_expires_at
        ])?;
    bump(ctx, &l.repo)?;
    let by = actor(&l.holder);
    record(ctx, &l, Entry::new(now, Event::Granted, &by))?;
    Ok(l)
}

fn claim_answer(ctx: &Ctx<'_>, l: &StoredLease) -> OpResult<ClaimAnswer> {
    let tl = timeline(ctx, &l.resource, l.fence)?;
    Ok(ClaimAnswer { granted: true, lease: l.to_lease(Some(tl)) })
}

fn renew(ctx: &mut Ctx<'_>, l: &mut StoredLease) -> OpResult<()> {
    ctx.tx
        .prepare_cached("UPDATE lease SET heartbeat_at = ?3, state = 'held' WHERE resource = ?1 AND fence = ?2")?
        .execute(p![l.resource, l.fence, ctx.now])?;
    l.heartbeat_at = ctx.now;
    if l.state == LeaseState::Stale {
        // Back to held: the PCs' caches must hear of it.
        l.state = LeaseState::Held;
        bump(ctx, &l.repo)?;
    }
    Ok(())
}

pub(crate) fn claim(ctx: &mut Ctx<'_>, c: &Claim) -> OpResult<ClaimAnswer> {
    require_own_pc(ctx, &c.holder)?;
    refresh(ctx)?;
    // 1. A retried claim is answered with what it got the first time.
    if let Some(prev) = query_leases(ctx, "claim_id = ?1", p![c.claim_id])?.into_iter().next() {
        if prev.resource != c.resource || prev.holder.pc != c.holder.pc {
            return Err(OpError::proto(
                ErrorCode::DuplicateId,
                format!("claimId {:?} was used for another claim (resource {:?})", c.claim_id, prev.resource),
            ));
        }
        return claim_answer(ctx, &prev);
    }
    let live = live_on(ctx, &c.resource)?;
    // 2. The session already holding it gets its lease (renewed).
    if let Some(mine) = live.iter().find(|l| l.holder.pc == c.holder.pc && l.holder.session == c.holder.session) {
        let mut mine = mine.clone();
        renew(ctx, &mut mine)?;
        return claim_answer(ctx, &mine);
    }
    let conflicts: Vec<&StoredLease> = live.iter().filter(|l| c.mode.conflicts_with(l.mode)).collect();
    if !conflicts.is_empty() {
        let Some(t) = &c.takeover else {
            // 4. Refused: held while anyone conflicting still renews, else stale.
            return Err(match conflicts.iter().find(|l| l.state == LeaseState::Held) {
                Some(l) => with_lease(
                    ErrorCode::Held,
                    format!("{} is held by {}: {:?} ({})", c.resource, who(l), l.description, since(l, ctx.now)),
                    l,
                ),
                None => {
                    let l = conflicts[0];
                    with_lease(
                        ErrorCode::Stale,
                        format!(
                            "{} is held by {} but stale (no heartbeat for 3 minutes; {}): take it over with evidence",
                            c.resource,
                            who(l),
                            since(l, ctx.now)
                        ),
                        l,
                    )
                }
            });
        };
        // 5. Every conflicting lease must accept the evidence, before anything changes.
        for l in &conflicts {
            if let Some(why) = refuse_takeover(ctx, l, t.evidence)? {
                return Err(with_lease(
                    ErrorCode::Forbidden,
                    format!("cannot take {} from {}: {why}", c.resource, who(l)),
                    l,
                ));
            }
        }
        let taken: Vec<StoredLease> = conflicts.into_iter().cloned().collect();
        // The takeover entries come first on the timeline, then the grant.
        let fence = next_fence(ctx, &c.resource)?;
        let by = actor(&c.holder);
        for old in &taken {
            set_state(ctx, old, LeaseState::Released, Some(ctx.now))?;
            record(
                ctx,
                old,
                Entry {
                    new_fence: Some(fence),
                    reason: Some(&t.reason),
                    evidence: Some(t.evidence),
                    detail: t.detail.as_deref(),
                    ..Entry::new(ctx.now, Event::TakenOver, &by)
                },
            )?;
            let lost = Lost {
                resource: old.resource.clone(),
                fence: old.fence,
                taken_by: Some(c.holder.clone()),
                at: ctx.now,
                reason: Some(t.reason.clone()),
                event: Event::TakenOver,
            };
            queue_lost(ctx, old, &lost)?;
        }
        let new = grant(ctx, c, fence)?;
        return claim_answer(ctx, &new);
    }
    // 3. Free (or only shared holders and a shared claim).
    let fence = next_fence(ctx, &c.resource)?;
    let l = grant(ctx, c, fence)?;
    claim_answer(ctx, &l)
}

/// Releases (resource, fence) for the caller's PC: `(released, lease)`.
fn release_one(ctx: &mut Ctx<'_>, r: &Release) -> OpResult<(bool, StoredLease)> {
    let Some(mut l) = load(ctx, &r.resource, r.fence)? else {
        return Err(OpError::proto(ErrorCode::NotFound, format!("no lease {} with fence {}", r.resource, r.fence)));
    };
    if l.holder.pc != ctx.pc {
        return Err(with_lease(
            ErrorCode::Forbidden,
            format!("only the holder's PC {:?} may release {} fence {}", l.holder.pc, r.resource, r.fence),
            &l,
        ));
    }
    if !l.state.is_live() {
        return Ok((false, l));
    }
    set_state(ctx, &l, LeaseState::Released, Some(ctx.now))?;
    record(ctx, &l, Entry { reason: r.reason.as_deref(), ..Entry::new(ctx.now, Event::Released, &r.by) })?;
    l.state = LeaseState::Released;
    Ok((true, l))
}

pub(crate) fn release(ctx: &mut Ctx<'_>, r: &Release) -> OpResult<ReleaseAnswer> {
    refresh(ctx)?;
    let (released, l) = release_one(ctx, r)?;
    Ok(ReleaseAnswer { released, lease: l.to_lease(None) })
}

pub(crate) fn list(ctx: &mut Ctx<'_>, a: &ListArgs) -> OpResult<ListAnswer> {
    refresh(ctx)?;
    let mut leases = query_leases(
        ctx,
        "(CAST(?1 AS TEXT) IS NULL OR resource = ?1) AND (CAST(?2 AS TEXT) IS NULL OR repo = ?2) AND state IN ('held', 'stale') ORDER BY resource, fence",
        p![a.resource, a.repo],
    )?;
    if a.all {
        leases.extend(query_leases(
            ctx,
            "(CAST(?2 AS TEXT) IS NULL OR resource = ?2) AND (CAST(?3 AS TEXT) IS NULL OR repo = ?3) \
             AND ended_at IS NOT NULL AND ended_at >= ?1",
            p![ctx.now - ENDED_WINDOW_MS, a.resource, a.repo],
        )?);
        leases.sort_by(|x, y| (&x.resource, x.fence).cmp(&(&y.resource, y.fence)));
    }
    let mut out = Vec::with_capacity(leases.len());
    for l in &leases {
        let tl = if a.timeline { Some(timeline(ctx, &l.resource, l.fence)?) } else { None };
        out.push(l.to_lease(tl));
    }
    Ok(ListAnswer { leases: out, version: version(ctx)? })
}

pub(crate) fn check(ctx: &mut Ctx<'_>, resource: &str, fence: i64) -> OpResult<CheckAnswer> {
    refresh(ctx)?;
    let newest = live_on(ctx, resource)?.last().map(|l| l.fence);
    let l = load(ctx, resource, fence)?;
    let current = l.as_ref().is_some_and(|l| l.state.is_live());
    Ok(CheckAnswer { current, fence: newest, lease: l.map(|l| l.to_lease(None)) })
}

/// Why a lease the caller renewed is not its own any more.
fn lost_of(ctx: &Ctx<'_>, resource: &str, fence: i64, l: Option<&StoredLease>) -> OpResult<Lost> {
    let gone = |reason: &str| Lost {
        resource: resource.to_string(),
        fence,
        taken_by: None,
        at: ctx.now,
        reason: Some(reason.to_string()),
        event: Event::Released,
    };
    let Some(l) = l else { return Ok(gone("the server has no such lease")) };
    if l.state.is_live() {
        return Ok(gone(&format!("held by another PC ({})", l.holder.pc)));
    }
    let end: Option<(Millis, String, Option<String>, Option<i64>)> = ctx
        .tx
        .prepare_cached(
            "SELECT at, event, reason, new_fence FROM lease_event WHERE resource = ?1 AND fence = ?2 \
             AND event IN ('released', 'expired', 'taken_over') ORDER BY seq DESC LIMIT 1",
        )?
        .query_row(p![resource, fence], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .optional()?;
    let Some((at, event, reason, new_fence)) = end else { return Ok(gone("it ended")) };
    let taken_by = match new_fence {
        Some(f) => load(ctx, resource, f)?.map(|n| n.holder),
        None => None,
    };
    Ok(Lost {
        resource: resource.to_string(),
        fence,
        taken_by,
        at,
        reason,
        event: Event::parse(&event).unwrap_or(Event::Released),
    })
}

/// The poll's `lease` argument: releases, then renewals, then what this PC
/// lost meanwhile (once), the version and, when it moved, the live list.
pub(crate) fn poll_lease(ctx: &mut Ctx<'_>, p: &PollLease) -> OpResult<PollLeaseAnswer> {
    refresh(ctx)?;
    let mut errors = Vec::new();
    let mut released = Vec::new();
    for (index, item) in p.release.iter().enumerate() {
        let r = match item {
            Ok(r) => r,
            Err(bad) => {
                errors.push(bad.to_error("release"));
                continue;
            }
        };
        match release_one(ctx, r) {
            Ok((did, _)) => released.push(Released { resource: r.resource.clone(), fence: r.fence, released: did }),
            Err(OpError::Proto(e)) => errors.push(ItemError::new(
                "release",
                index,
                lease::LeaseRef { resource: Some(r.resource.clone()), fence: Some(r.fence) },
                &e,
            )),
            Err(e) => return Err(e),
        }
    }
    let mut renewed = Vec::new();
    let mut lost: Vec<Lost> = Vec::new();
    for item in &p.renew {
        let r = match item {
            Ok(r) => r,
            Err(bad) => {
                errors.push(bad.to_error("renew"));
                continue;
            }
        };
        let l = load(ctx, &r.resource, r.fence)?;
        match l {
            Some(mut l) if l.state.is_live() && l.holder.pc == ctx.pc => {
                renew(ctx, &mut l)?;
                renewed.push(r.fence);
            }
            other => {
                let x = lost_of(ctx, &r.resource, r.fence, other.as_ref())?;
                if !lost.iter().any(|y| y.resource == x.resource && y.fence == x.fence) {
                    lost.push(x);
                }
            }
        }
    }
    // What this PC lost by others' doing since its last poll: reported once.
    let queued: Vec<(i64, Lost)> = {
        let mut stmt = ctx.tx.prepare_cached(
            "SELECT id, resource, fence, taken_by, at, reason, event FROM lease_lost WHERE pc = ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map(p![ctx.pc], |r| {
            let taken_by: Option<String> = r.get(3)?;
            let event: String = r.get(6)?;
            Ok((
                r.get::<_, i64>(0)?,
                Lost {
                    resource: r.get(1)?,
                    fence: r.get(2)?,
                    taken_by: taken_by.and_then(|t| serde_json::from_str(&t).ok()),
                    at: r.get(4)?,
                    reason: r.get(5)?,
                    event: Event::parse(&event).unwrap_or(Event::Released),
                },
            ))
        })?;
        rows.collect::<crate::store::DbResult<Vec<_>>>()?
    };
    let had_queued = !queued.is_empty();
    let mut reported: Vec<Lost> = Vec::new();
    for (_, x) in queued {
        if !reported.iter().any(|y| y.resource == x.resource && y.fence == x.fence) {
            reported.push(x);
        }
    }
    // A renewal answered in `lost` also settles the queued report of the same lease.
    for x in lost {
        if let Some(y) = reported.iter_mut().find(|y| y.resource == x.resource && y.fence == x.fence) {
            if y.taken_by.is_none() {
                y.taken_by = x.taken_by;
            }
        } else {
            reported.push(x);
        }
    }
    // Only when there was something: a poll with nothing to report writes nothing.
    if had_queued {
        ctx.tx.prepare_cached("DELETE FROM lease_lost WHERE pc = ?1")?.execute(p![ctx.pc])?;
    }
    let v = version(ctx)?;
    let list = if v != p.known {
        let live = query_leases(ctx, "state IN ('held', 'stale') ORDER BY resource, fence", p![])?;
        Some(live.iter().map(|l| l.to_lease(None)).collect())
    } else {
        None
    };
    Ok(PollLeaseAnswer { renewed, released, lost: reported, errors, version: v, list })
}

/// For the sweep: `(resource, holder pc, message)` of every lease stale for
/// over an hour, one per resource.
pub(crate) fn stale_over_an_hour(ctx: &Ctx<'_>) -> OpResult<Vec<(String, String, String)>> {
    let cut = ctx.now - STALE_AFTER_MS - STALE_ALERT_MS;
    let mut leases = query_leases(ctx, "state = 'stale' AND heartbeat_at < ?1", p![cut])?;
    leases.sort_by(|x, y| (&x.resource, x.fence).cmp(&(&y.resource, y.fence)));
    let mut out: Vec<(String, String, String)> = Vec::new();
    for l in leases {
        if out.iter().any(|(r, _, _)| *r == l.resource) {
            continue;
        }
        let mins = (ctx.now - l.heartbeat_at) / 60_000;
        let message = format!(
            "pcmail: lease {} held by {} is stale: no heartbeat for {}h {:02}m ({:?})",
            l.resource,
            who(&l),
            mins / 60,
            mins % 60,
            l.description
        );
        out.push((l.resource.clone(), l.holder.pc.clone(), message));
    }
    Ok(out)
}
