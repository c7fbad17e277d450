//! Leases on the PC: claim, release, list, check and takeover
//! against the server; what rides the poll (renewals of leases whose
//! process still lives, queued releases, the guard cache's version); and the
//! liveness sweep that queues the release of a lease whose process exited.

use crate::transport::CallError;
use crate::{Client, ClientError};
use pcmail_core::lease::{
    CheckAnswer, Claim, ClaimAnswer, Evidence, Holder, Lease, ListAnswer, ListArgs, Mode, PollLease, PollLeaseAnswer,
    Release, ReleaseAnswer, Renew, Takeover, HEARTBEAT_MS,
};
use pcmail_core::protocol::Op;
use pcmail_core::{ErrorCode, Millis};
use pcmail_local::process::ProcId;
use pcmail_store::leases::{self as sl, CachedLease, LostLease, MyLease};
use serde_json::Value;
use std::time::Duration;

/// What a claim asks for. `follow` is the process the lease lives with
/// (None with a `ttl_ms`: the lease simply expires).
#[derive(Debug, Clone)]
pub struct ClaimRequest {
    pub resource: String,
    pub repo: String,
    pub description: String,
    pub files: Vec<String>,
    pub mode: Mode,
    pub session: String,
    pub name: Option<String>,
    pub follow: Option<ProcId>,
    pub ttl_ms: Option<Millis>,
    pub takeover: Option<Takeover>,
}

#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "lowercase")]
pub enum ClaimOutcome {
    /// The server granted it (with its fencing token).
    Granted { lease: Lease },
    /// The server could not be reached: kept here as unconfirmed; the poller
    /// claims it again (same claim id) when the server answers.
    Unconfirmed { lease: MyLease, error: String },
}

/// A lease's holder as people read it: `pc/name`, else `pc/` and the
/// session id's first 8 characters.
pub fn holder_label(h: &Holder) -> String {
    match &h.name {
        Some(n) if !n.is_empty() => format!("{}/{}", h.pc, n),
        _ => format!("{}/{}", h.pc, h.session.chars().take(8).collect::<String>()),
    }
}

fn cached(l: &Lease) -> CachedLease {
    CachedLease {
        resource: l.resource.clone(),
        fence: l.fence,
        repo: l.repo.clone(),
        mode: l.mode.as_str().to_string(),
        holder_pc: l.holder.pc.clone(),
        holder_session: l.holder.session.clone(),
        holder_name: l.holder.name.clone(),
        description: l.description.clone(),
        files: l.files.clone(),
        granted_at: l.granted_at,
        heartbeat_at: l.heartbeat_at,
        stale: l.stale,
        json: serde_json::to_string(l).unwrap_or_default(),
    }
}

fn answer<T: serde::de::DeserializeOwned>(v: Value, what: &str) -> Result<T, ClientError> {
    Ok(crate::transport::decode_as(v, what)?)
}

impl Client {
    /// A lease op; a PC the server does not know yet (no poll since `init`)
    /// registers and asks again.
    fn call_registered(&mut self, op: &Op) -> Result<Value, CallError> {
        match self.transport.call(op) {
            Err(CallError::Server(p)) if p.code == ErrorCode::UnknownPc => {
                self.register_self().map_err(|e| match e {
                    ClientError::Call(c) => c,
                    other => CallError::Transient(other.to_string()),
                })?;
                self.transport.call(op)
            }
            other => other,
        }
    }

    /// `lease.claim`. Granted: kept as this PC's, following `follow`.
    /// Unreachable: kept as unconfirmed (the poller retries with the same
    /// claim id). Refused `held`/`stale`: the server's error (with the lease).
    pub fn lease_claim(&mut self, req: &ClaimRequest) -> Result<ClaimOutcome, ClientError> {
        let now = self.now();
        let claim_id = pcmail_core::protocol::new_credential(&mut rand::rng())[..20].to_string();
        let claim = Claim {
            claim_id: claim_id.clone(),
            resource: req.resource.clone(),
            repo: req.repo.clone(),
            description: req.description.clone(),
            files: req.files.clone(),
            mode: req.mode,
            holder: Holder { pc: self.me().to_string(), session: req.session.clone(), name: req.name.clone() },
            ttl_ms: req.ttl_ms,
            takeover: req.takeover.clone(),
        };
        pcmail_core::lease::check_claim(&claim).map_err(|e| ClientError::Invalid(e.message))?;
        let mut mine = MyLease {
            claim_id,
            resource: req.resource.clone(),
            repo: req.repo.clone(),
            description: req.description.clone(),
            files: req.files.clone(),
            mode: req.mode.as_str().to_string(),
            session: req.session.clone(),
            pid: req.follow.map(|p| p.pid),
            pid_start: req.follow.and_then(|p| p.start),
            ttl_expires_at: req.ttl_ms.map(|t| now + t),
            fence: None,
            state: sl::MINE_UNCONFIRMED.to_string(),
            claimed_at: now,
            heartbeat_at: None,
            release_reason: None,
            release_queued_at: None,
        };
        match self.call_registered(&Op::LeaseClaim(claim)) {
            Ok(v) => {
                let a: ClaimAnswer = answer(v, "lease.claim")?;
                mine.fence = Some(a.lease.fence);
                mine.state = sl::MINE_HELD.to_string();
                mine.heartbeat_at = Some(now);
                mine.ttl_expires_at = a.lease.ttl_expires_at.map(|t| t - self.server_offset());
                self.store.lease_mine_put(&mine)?;
                Ok(ClaimOutcome::Granted { lease: a.lease })
            }
            Err(e) if e.is_transient() && req.takeover.is_none() => {
                self.store.lease_mine_put(&mine)?;
                Ok(ClaimOutcome::Unconfirmed { lease: mine, error: e.to_string() })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// This PC's offset from the server's clock (the server's now = this PC's + it).
    pub fn server_offset(&self) -> Millis {
        self.store.meta_i64(pcmail_store::meta::SERVER_OFFSET_MS).ok().flatten().unwrap_or(0)
    }

    /// Releases this PC's lease(s) of `resource` (of `session` when given).
    /// Unreachable: the release is queued and the poller sends it.
    pub fn lease_release(
        &mut self,
        resource: &str,
        session: Option<&str>,
        reason: Option<&str>,
    ) -> Result<Vec<ReleaseDone>, ClientError> {
        let now = self.now();
        let mine: Vec<MyLease> = self
            .store
            .leases_mine()?
            .into_iter()
            .filter(|l| l.resource == resource && session.is_none_or(|s| s == l.session))
            .collect();
        if mine.is_empty() {
            return Err(ClientError::LeaseNotHeld { resource: resource.to_string() });
        }
        let mut out = vec![];
        for l in mine {
            let Some(fence) = l.fence else {
                // Never granted: nothing to tell the server.
                self.store.lease_mine_remove(&l.claim_id)?;
                out.push(ReleaseDone { resource: l.resource, fence: None, released: true, queued: false });
                continue;
            };
            let rel = Release {
                resource: l.resource.clone(),
                fence,
                by: self.actor_of(&l.session),
                reason: reason.map(str::to_string),
            };
            // The servers' own check, before it is sent or queued for a poll.
            pcmail_core::lease::check_release(&rel).map_err(|e| ClientError::Invalid(e.message))?;
            match self.call_registered(&Op::LeaseRelease(rel)) {
                Ok(v) => {
                    let a: ReleaseAnswer = answer(v, "lease.release")?;
                    self.store.lease_mine_remove(&l.claim_id)?;
                    out.push(ReleaseDone {
                        resource: l.resource,
                        fence: Some(fence),
                        released: a.released,
                        queued: false,
                    });
                }
                Err(CallError::Server(p)) if matches!(p.code, ErrorCode::NotFound | ErrorCode::Forbidden) => {
                    // Not ours any more on the server: nothing left to release.
                    self.store.lease_mine_remove(&l.claim_id)?;
                    out.push(ReleaseDone { resource: l.resource, fence: Some(fence), released: false, queued: false });
                }
                Err(e) if e.is_transient() => {
                    self.store.lease_queue_release(&l.claim_id, reason.unwrap_or("released"), now)?;
                    out.push(ReleaseDone { resource: l.resource, fence: Some(fence), released: false, queued: true });
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(out)
    }

    fn actor_of(&self, session: &str) -> String {
        pcmail_core::rules::actor(self.me(), Some(session))
    }

    /// `lease.list` from the server.
    pub fn lease_list(&mut self, args: ListArgs) -> Result<ListAnswer, ClientError> {
        let v = self.call_registered(&Op::LeaseList(args))?;
        answer(v, "lease.list")
    }

    /// `lease.check`: asks the server, never a cache.
    pub fn lease_check(&mut self, resource: &str, fence: i64) -> Result<CheckAnswer, ClientError> {
        let v = self.call_registered(&Op::LeaseCheck { resource: resource.to_string(), fence })?;
        answer(v, "lease.check")
    }

    /// The evidence this PC can offer to take `lease` over: on the holder's
    /// own PC, the holder's process is gone (PID + start time, from this
    /// PC's record of it); else that the lease is stale (its session ended)
    /// or, with `force`, a person's decision.
    pub fn takeover_evidence(&self, lease: &Lease, force: bool) -> Result<(Evidence, Option<String>), ClientError> {
        if force {
            return Ok((Evidence::Force, None));
        }
        if lease.holder.pc == self.me() {
            let mine = self
                .store
                .leases_mine()?
                .into_iter()
                .find(|l| l.resource == lease.resource && l.fence == Some(lease.fence));
            // A `--ttl` lease follows no process: while its time runs it is
            // held whatever process made it (only its end or a release give
            // it up), so "no process" is no evidence.
            if let Some(l) = mine.as_ref().filter(|l| l.pid.is_none()) {
                let server_now = self.now() + self.server_offset();
                let end = lease.ttl_expires_at.or(l.ttl_expires_at);
                if let Some(why) = pcmail_core::lease::process_gone_refusal(end, server_now) {
                    return Err(ClientError::Invalid(format!(
                        "cannot take {} from {}: {why}",
                        lease.resource,
                        holder_label(&lease.holder)
                    )));
                }
            }
            return match mine.as_ref().and_then(|l| l.pid.map(|pid| ProcId { pid, start: l.pid_start })) {
                Some(p) if p.alive() => Err(ClientError::Invalid(format!(
                    "the holder's process (PID {}) still runs on this PC: ask it to release, or end it first",
                    p.pid
                ))),
                Some(p) => Ok((Evidence::ProcessGone, Some(format!("PID {} (start {:?}) is gone", p.pid, p.start)))),
                None => Ok((Evidence::ProcessGone, Some("this PC no longer tracks the holder's process".into()))),
            };
        }
        if lease.stale {
            Ok((Evidence::SessionEnded, None))
        } else {
            Err(ClientError::Invalid(format!(
                "{} still renews {} (last heartbeat {} ago): ask them to release it",
                holder_label(&lease.holder),
                lease.resource,
                pcmail_core::present::age(self.now() + self.server_offset() - lease.heartbeat_at)
            )))
        }
    }

    /// The liveness sweep (the poller, every few seconds and before each
    /// poll): queues the release of every lease whose process exited, and
    /// forgets TTL leases past their end. Returns how many were queued.
    pub fn lease_liveness(&mut self, now: Millis) -> Result<usize, ClientError> {
        let mut dead = vec![];
        for l in self.store.leases_mine()? {
            if l.release_queued_at.is_some() {
                continue;
            }
            if let Some(pid) = l.pid {
                if !(ProcId { pid, start: l.pid_start }).alive() {
                    dead.push((l.claim_id, format!("holder process {pid} exited")));
                }
            } else if l.ttl_expires_at.is_some_and(|t| t <= now) {
                self.store.lease_mine_remove(&l.claim_id)?;
            }
        }
        for (id, why) in &dead {
            self.store.lease_queue_release(id, why, now)?;
        }
        Ok(dead.len())
    }

    /// Sends queued releases now (the pusher, within ~100 ms of the hook
    /// or the liveness sweep queuing one). Returns how many went.
    pub fn flush_lease_releases(&mut self) -> Result<usize, ClientError> {
        let now = self.now();
        let due = self.store.lease_releases_due(now)?;
        let mut sent = 0;
        for l in due {
            let Some(fence) = l.fence else {
                self.store.lease_mine_remove(&l.claim_id)?;
                continue;
            };
            let rel = Release {
                resource: l.resource.clone(),
                fence,
                by: self.actor_of(&l.session),
                reason: l.release_reason.as_deref().map(pcmail_core::rules::clean_reason),
            };
            match self.call_registered(&Op::LeaseRelease(rel)) {
                Ok(_) => {
                    self.store.lease_mine_remove(&l.claim_id)?;
                    sent += 1;
                }
                Err(CallError::Server(p)) if !p.code.is_transient() => {
                    // not_found / forbidden: nothing of ours left to release.
                    self.store.lease_mine_remove(&l.claim_id)?;
                }
                Err(e) => {
                    self.store.lease_release_retry(&l.claim_id, now + crate::backoff::backoff_ms(2))?;
                    return Err(e.into());
                }
            }
        }
        Ok(sent)
    }

    /// Claims again what was claimed offline (same claim id: idempotent).
    /// Refused: the session is told once that it does not hold it.
    pub(crate) fn confirm_unconfirmed(&mut self) -> Result<(), ClientError> {
        let now = self.now();
        for l in self.store.leases_mine()?.into_iter().filter(|l| l.fence.is_none() && l.release_queued_at.is_none()) {
            let claim = Claim {
                claim_id: l.claim_id.clone(),
                resource: l.resource.clone(),
                repo: l.repo.clone(),
                description: l.description.clone(),
                files: l.files.clone(),
                mode: Mode::parse(&l.mode).unwrap_or_default(),
                holder: Holder { pc: self.me().to_string(), session: l.session.clone(), name: None },
                ttl_ms: l.ttl_expires_at.map(|t| (t - now).max(pcmail_core::lease::TTL_MIN_MS)),
                takeover: None,
            };
            match self.call_registered(&Op::LeaseClaim(claim)) {
                Ok(v) => {
                    let a: ClaimAnswer = answer(v, "lease.claim")?;
                    let mut held = l.clone();
                    held.fence = Some(a.lease.fence);
                    held.state = sl::MINE_HELD.to_string();
                    held.heartbeat_at = Some(now);
                    self.store.lease_mine_put(&held)?;
                }
                Err(CallError::Server(p)) if !p.code.is_transient() => {
                    let holder = p.lease.as_ref().and_then(|v| serde_json::from_value::<Lease>(v.clone()).ok());
                    // Keep the row long enough to record the loss for its session.
                    let mut marked = l.clone();
                    marked.fence = Some(-1);
                    self.store.lease_mine_put(&marked)?;
                    // A server without leases never had it to lose: say that,
                    // not "taken over" (the answer says what the server lacks, not a guess).
                    let (reason, event) = if p.code == ErrorCode::UnknownOp {
                        (
                            format!("claimed while offline; the server has no leases: {}", p.message),
                            pcmail_local::leases::LOST_UNSUPPORTED,
                        )
                    } else {
                        (format!("claimed while offline, refused on reconnect: {}", p.message), "taken_over")
                    };
                    self.store.lease_lost(&LostLease {
                        resource: l.resource.clone(),
                        fence: -1,
                        at: now,
                        taken_by: holder.as_ref().map(|h| holder_label(&h.holder)),
                        reason: Some(reason),
                        event: event.into(),
                    })?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// The poll's `lease` argument: renewals for the leases whose process
    /// still lives, the releases due, the guard cache's version.
    pub(crate) fn lease_poll_arg(&mut self, now: Millis) -> Result<(PollLease, Vec<MyLease>), ClientError> {
        self.lease_liveness(now)?;
        let mine = self.store.leases_mine()?;
        let renew = mine
            .iter()
            .filter(|l| l.release_queued_at.is_none() && l.ttl_expires_at.is_none())
            .filter_map(|l| l.fence.filter(|f| *f > 0).map(|fence| Ok(Renew { resource: l.resource.clone(), fence })))
            .collect();
        let releasing = self.store.lease_releases_due(now)?;
        let release = releasing
            .iter()
            .filter_map(|l| {
                l.fence.map(|fence| {
                    Ok(Release {
                        resource: l.resource.clone(),
                        fence,
                        by: self.actor_of(&l.session),
                        // Queued by an older pcmail, maybe with what the servers refuse.
                        reason: l.release_reason.as_deref().map(pcmail_core::rules::clean_reason),
                    })
                })
            })
            .collect();
        let known = self.store.meta_lease_version()?;
        Ok((PollLease { renew, release, known }, releasing))
    }

    /// Applies the poll's `lease` answer: heartbeats, releases done, leases
    /// lost, and the server's list into the guard cache.
    pub(crate) fn apply_lease_answer(
        &mut self,
        answer: Option<PollLeaseAnswer>,
        sent_releases: &[MyLease],
        now: Millis,
    ) -> Result<(), ClientError> {
        let Some(a) = answer else {
            return Ok(());
        };
        for l in sent_releases {
            self.store.lease_mine_remove(&l.claim_id)?;
        }
        // This PC's leases, read only when the server renewed any.
        let mine = if a.renewed.is_empty() { vec![] } else { self.store.leases_mine()? };
        for fence in &a.renewed {
            for l in mine.iter().filter(|l| l.fence == Some(*fence)) {
                self.store.lease_renewed(&l.resource, *fence, now)?;
            }
        }
        for lost in &a.lost {
            self.store.lease_lost(&LostLease {
                resource: lost.resource.clone(),
                fence: lost.fence,
                at: lost.at - self.server_offset(),
                taken_by: lost.taken_by.as_ref().map(holder_label),
                reason: lost.reason.clone(),
                event: lost.event.as_str().to_string(),
            })?;
        }
        let live = match &a.list {
            Some(list) => {
                let live: Vec<CachedLease> = list.iter().filter(|l| l.state.is_live()).map(cached).collect();
                self.store.lease_cache_replace(&live, a.version, now)?;
                live
            }
            None => {
                self.store.lease_cache_confirmed(now)?;
                self.store.lease_cache()?
            }
        };
        self.write_guard_file(&live, now);
        Ok(())
    }

    /// The PreToolUse guard's file beside the store, rewritten after every
    /// poll (its time is the cache's). Best effort: when it can't be written
    /// it is removed, so the guard reads the store instead of an old file.
    fn write_guard_file(&mut self, cache: &[CachedLease], now: Millis) {
        let home = &self.paths.home;
        let checkouts = pcmail_local::leases::lease_checkouts(self.store.conn(), cache);
        let offset = self.server_offset();
        if pcmail_local::leases::write_guard_file_kept(home, cache, now, offset, &checkouts, &mut self.guard_written)
            .is_err()
        {
            let _ = std::fs::remove_file(pcmail_local::leases::guard_file(home));
        }
    }

    /// The pause before the next poll: while this PC holds leases, at most
    /// one heartbeat period, on every transport.
    pub fn poll_pause(&self, interval: Duration) -> Duration {
        // The store is asked only when the answer can shorten the pause (a
        // long-polling daemon's is zero).
        let heartbeat = Duration::from_millis(HEARTBEAT_MS as u64);
        let pause =
            if interval > heartbeat && self.store.holds_leases().unwrap_or(false) { heartbeat } else { interval };
        // Jobs running here: their heartbeats ride the poll too.
        self.job_pause(pause)
    }

    /// The daemon's wait between polls (`poll_pause`), ended early when the
    /// server's leases moved past what this PC's guard file knows (on the
    /// embedded server: a change of the shared database file).
    pub fn wait_before_next_poll(&self, interval: Duration) {
        let pause = self.poll_pause(interval);
        if pause.is_zero() {
            return;
        }
        let known = self.store.meta_lease_version().unwrap_or(0);
        self.transport.wait_for_news(pause, known);
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct ReleaseDone {
    pub resource: String,
    pub fence: Option<i64>,
    /// The server ended the lease now (false: it was no longer held).
    pub released: bool,
    /// The server was unreachable: the poller sends the release.
    pub queued: bool,
}
