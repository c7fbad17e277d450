//! Leases: one function per operation, shared by `pcmail lease …`
//! and the MCP tools. Which process a lease follows and which session holds
//! it is decided here, once, for both front ends.

use crate::{optional_not_null, ApiError, Result};
use pcmail_client::leases::{holder_label, ClaimOutcome, ClaimRequest, ReleaseDone};
use pcmail_client::{Client, ClientError};
use pcmail_core::lease::{CheckAnswer, Evidence, Lease, ListArgs, Mode, Takeover};
use pcmail_core::rules::clean_session_id;
use pcmail_local::process::{self, ProcId};
use pcmail_store::leases::{self as sl, MyLease};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LeaseMode {
    #[default]
    Exclusive,
    Shared,
}

impl From<LeaseMode> for Mode {
    fn from(m: LeaseMode) -> Mode {
        match m {
            LeaseMode::Exclusive => Mode::Exclusive,
            LeaseMode::Shared => Mode::Shared,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = optional_not_null)]
pub struct LeaseClaimArgs {
    /// What is held (a module, staging-deploy, gpu:0; a-z 0-9 . _ - / :).
    pub resource: String,
    /// Why, for whoever finds it held.
    #[serde(default)]
    pub description: String,
    /// Repo-relative globs it covers (src/auth/**).
    #[serde(default)]
    pub files: Vec<String>,
    #[serde(default)]
    pub mode: LeaseMode,
    /// The repo (its origin URL; default: that of cwd).
    #[serde(default)]
    pub repo: Option<String>,
    /// A folder of the repo (default: the current one).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Follow this process, not the agent's above the caller.
    #[serde(default)]
    pub pid: Option<i64>,
    /// No process: end after this long (30m, 2h).
    #[serde(default)]
    pub ttl: Option<String>,
    /// A name for the holder shown to others.
    #[serde(default)]
    pub name: Option<String>,
}

/// How the holder was decided.
#[derive(Debug, Clone, Serialize)]
pub struct Follow {
    pub session: String,
    /// The process the lease lives with (None: a TTL lease).
    pub pid: Option<i64>,
    /// `claude` (the Claude Code process above), `agent` (a Codex or Gemini CLI process above),
    /// `pid` (--pid), `ttl`, `parent` (the caller's parent).
    pub how: &'static str,
    /// Said to the caller when the lease follows something short-lived.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LeaseClaimResult {
    #[serde(flatten)]
    pub outcome: ClaimOutcome,
    pub follows: Follow,
}

/// Which process a lease follows and which session holds it: the agent
/// process above the caller (`claude` for Claude Code, `agent` for Codex or
/// Gemini CLI; its session from the registry the hooks keep), `pid`, a TTL,
/// or the caller's parent (said in `note`). `PCMAIL_SESSION` names the
/// session outside an agent. All of it is the `caller`'s: this process's, or
/// the small front's the daemon answers for.
pub fn resolve_follow(
    client: &Client,
    pid: Option<i64>,
    ttl: bool,
    caller: &process::Caller,
) -> Result<(Option<ProcId>, Follow)> {
    let claude = caller.agent();
    let env_session = caller.session.as_deref().and_then(|s| clean_session_id(s.trim()));
    let (proc, how, note) = if let Some(p) = pid {
        let proc = ProcId::of(p).ok_or_else(|| ApiError::Usage(format!("--pid {p}: no such process")))?;
        (Some(proc), "pid", None)
    } else if ttl {
        (None, "ttl", None)
    } else if let Some(c) = claude {
        (Some(c), if process::is_claude(c.pid) { "claude" } else { "agent" }, None)
    } else {
        let parent = caller
            .parent
            .and_then(ProcId::of)
            .ok_or_else(|| ApiError::Local("cannot find this command's parent process".into()))?;
        let note = format!(
            "no Claude Code process above this command: the lease follows its parent process (PID {}) and ends when that exits; \
             pass --pid PID or --ttl DUR to choose",
            parent.pid
        );
        (Some(parent), "parent", Some(note))
    };
    let registry = claude.and_then(|c| sl::session_of_process(client.store.conn(), c.pid, c.start).ok().flatten());
    let session =
        env_session.or(registry.and_then(|r| clean_session_id(&r.session))).unwrap_or_else(|| match (claude, proc) {
            (Some(c), _) => format!("claude-{}", c.pid),
            (None, Some(p)) => format!("pid-{}", p.pid),
            (None, None) => format!("ttl-{}", client.now()),
        });
    Ok((proc, Follow { session, pid: proc.map(|p| p.pid), how, note }))
}

/// A server without leases answers `unknown_op`: say so at once, from the
/// feature list, instead of a confusing refusal.
fn unsupported(e: ClientError) -> ApiError {
    match e.refused() {
        Some(p) if p.code == pcmail_core::ErrorCode::UnknownOp => ApiError::Unsupported { feature: "leases".into() },
        _ => ApiError::Client(e),
    }
}

fn repo_of(args_repo: Option<&str>, cwd: Option<&str>, caller: &process::Caller) -> String {
    if let Some(r) = args_repo {
        return r.to_string();
    }
    let dir = cwd.map(PathBuf::from).or_else(|| caller.cwd.clone());
    dir.and_then(|d| pcmail_local::repo::identify(&d)).map(|i| i.id).unwrap_or_default()
}

fn ttl_ms(ttl: Option<&str>) -> Result<Option<i64>> {
    ttl.map(|t| crate::parse_duration("--ttl", t)).transpose()
}

fn request(
    client: &Client,
    a: &LeaseClaimArgs,
    takeover: Option<Takeover>,
    caller: &process::Caller,
) -> Result<(ClaimRequest, Follow)> {
    let ttl = ttl_ms(a.ttl.as_deref())?;
    let (proc, follow) = resolve_follow(client, a.pid, ttl.is_some(), caller)?;
    let req = ClaimRequest {
        resource: a.resource.clone(),
        repo: repo_of(a.repo.as_deref(), a.cwd.as_deref(), caller),
        description: a.description.clone(),
        files: a.files.clone(),
        mode: a.mode.into(),
        session: follow.session.clone(),
        // Without --name, the name this session holds, so others see `ani`, not an id.
        name: a.name.clone().or_else(|| held_name(client, &follow.session)),
        follow: proc,
        ttl_ms: ttl,
        takeover,
    };
    Ok((req, follow))
}

/// The name `session` holds on this PC, as the server's last poll said.
fn held_name(client: &Client, session: &str) -> Option<String> {
    client.store.names().ok()?.into_iter().find(|(_, s)| s == session).map(|(name, _)| name)
}

/// `lease claim`: granted (exit 0), held (exit 10), stale (exit 11),
/// or kept unconfirmed while the server is unreachable.
pub fn lease_claim(client: &mut Client, a: &LeaseClaimArgs) -> Result<LeaseClaimResult> {
    lease_claim_for(client, a, &process::Caller::this_process())
}

/// [`lease_claim`] for a caller other than this process (the daemon
/// answering the small front).
pub fn lease_claim_for(client: &mut Client, a: &LeaseClaimArgs, caller: &process::Caller) -> Result<LeaseClaimResult> {
    let (req, follows) = request(client, a, None, caller)?;
    let outcome = client.lease_claim(&req).map_err(unsupported)?;
    Ok(LeaseClaimResult { outcome, follows })
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = optional_not_null)]
pub struct LeaseTakeoverArgs {
    pub resource: String,
    /// Why (recorded on the lease's timeline and told to the old holder).
    pub reason: String,
    /// The holder's PC is silent too: take it on this decision alone (recorded).
    #[serde(default)]
    pub force: bool,
    /// Defaults: the old lease's description, files, mode and repo.
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub files: Option<Vec<String>>,
    #[serde(default)]
    pub pid: Option<i64>,
    #[serde(default)]
    pub ttl: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
}

/// `lease takeover`: takes a resource someone else holds, only with evidence
/// (the holder's process is gone on this PC; its session ended; or `force`).
/// Held by several `shared` holders, every one of them must accept the same
/// evidence (the server checks each; this says first which one would not).
/// A `[[leases.checks]]` command matching the resource runs first: exit 0
/// (busy) refuses the takeover before the server is asked.
pub fn lease_takeover(client: &mut Client, a: &LeaseTakeoverArgs) -> Result<LeaseClaimResult> {
    if a.reason.trim().is_empty() {
        return Err(ApiError::Usage("a takeover needs --reason".into()));
    }
    let list = client
        .lease_list(ListArgs { resource: Some(a.resource.clone()), ..Default::default() })
        .map_err(unsupported)?;
    // The takeover claims exclusively: every live lease of the resource is in the way.
    let current: Vec<Lease> = list.leases.into_iter().filter(|l| l.state.is_live()).collect();
    let mut args = LeaseClaimArgs {
        resource: a.resource.clone(),
        description: a.description.clone().unwrap_or_default(),
        files: a.files.clone().unwrap_or_default(),
        pid: a.pid,
        ttl: a.ttl.clone(),
        name: a.name.clone(),
        ..Default::default()
    };
    let takeover = match current.first() {
        None => None,
        Some(first) => {
            if a.description.is_none() {
                args.description = first.description.clone();
            }
            if a.files.is_none() {
                let mut files: Vec<String> = current.iter().flat_map(|l| l.files.iter().cloned()).collect();
                files.dedup();
                args.files = files;
            }
            args.repo = Some(first.repo.clone());
            let holders = current.iter().map(|l| holder_label(&l.holder)).collect::<Vec<_>>().join(", ");
            let check = match client.config.leases.check_for(&a.resource) {
                Some(c) => Some(crate::lease_checks::run(c, &a.resource, &holders)?),
                None => None,
            };
            // A module lease: its files say whether someone is still at work on
            // them (a person's --force decides over it).
            let mut module = None;
            if !a.force {
                let cwd = std::env::current_dir().ok();
                let now_secs = pcmail_local::system_now() / 1000;
                for l in &current {
                    if let Some(r) =
                        cwd.as_deref().and_then(|d| crate::lease_checks::module_activity(l, client.me(), d, now_secs))
                    {
                        module = Some(r?.detail);
                    }
                }
            }
            // A stale lease of another PC that still polls: that PC says whether its holder still runs.
            let mut asked = vec![];
            if !a.force {
                for l in &current {
                    asked.extend(ask_holder_pc(client, l)?);
                }
            }
            let (evidence, detail) = common_evidence(client, &current, a.force)?;
            let asked = (!asked.is_empty()).then(|| asked.join("; "));
            let detail =
                [detail, asked, check.map(|c| c.detail), module].into_iter().flatten().collect::<Vec<_>>().join("; ");
            Some(Takeover { evidence, reason: a.reason.clone(), detail: (!detail.is_empty()).then_some(detail) })
        }
    };
    let (req, follows) = request(client, &args, takeover, &process::Caller::this_process())?;
    let outcome = client.lease_claim(&req).map_err(unsupported)?;
    Ok(LeaseClaimResult { outcome, follows })
}

/// How long a takeover waits for the holder's PC to answer its probe.
pub const HOLDER_PROBE_WAIT_SECS: u64 = 15;

/// A stale lease is no proof that its holder is gone: a PC whose store lost
/// track of a lease still polls without renewing it, while the process the
/// lease follows runs on. When the holder's PC still polls, it is asked
/// through its read-only probe (`pcmail_core::lease::HOLDER_PROBE`, the job
/// queue) and a holder that still runs there refuses the takeover (exit 10).
/// Returns what was asked and answered, for the lease's timeline (or why it
/// could not be asked: the PC runs no jobs, this PC may not submit there,
/// no answer in time; the takeover then goes on on the server's evidence).
fn ask_holder_pc(client: &mut Client, l: &Lease) -> Result<Option<String>> {
    use crate::jobs::{job_cancel, job_run, JobCancelArgs, JobRunArgs};
    use pcmail_core::lease::{holder_runs_per_probe, ProbeHeld, HOLDER_PROBE, STALE_AFTER_MS};
    if l.holder.pc == client.me() || !l.stale || l.ttl_expires_at.is_some() {
        return Ok(None);
    }
    let pc = l.holder.pc.clone();
    // Only a PC that still polls can answer; a silent one needs --force anyway (the server's rule).
    let roster = job_run(
        client,
        &JobRunArgs { target: "@server".into(), command: "_debug_roster".into(), force: true, ..Default::default() },
    );
    let last_poll = roster.ok().and_then(|r| r.job.result).and_then(|res| res.data).and_then(|d| {
        d["pcs"].as_array()?.iter().find(|p| p["label"] == pc.as_str()).and_then(|p| p["lastPollAt"].as_i64())
    });
    let server_now = client.now() + client.server_offset();
    if last_poll.is_none_or(|t| pcmail_core::due::pc_silent(t, server_now, STALE_AFTER_MS)) {
        return Ok(None);
    }
    let probe = JobRunArgs {
        target: pc.clone(),
        command: HOLDER_PROBE.into(),
        // A fresh answer, never an earlier probe's joined.
        force: true,
        wait: true,
        timeout_secs: Some(HOLDER_PROBE_WAIT_SECS),
        ..Default::default()
    };
    let r = match job_run(client, &probe) {
        Ok(r) => r,
        Err(e) => return Ok(Some(format!("{pc} could not be asked whether the holder still runs: {e}"))),
    };
    if r.ended != Some(true) || r.job.state != pcmail_core::job::JobState::Ok {
        if !r.job.state.is_ended() {
            let reason = Some("the takeover stopped waiting for the answer".to_string());
            let _ = job_cancel(client, &JobCancelArgs { job_id: r.job.id.clone(), reason });
        }
        return Ok(Some(format!(
            "{pc} did not answer whether the holder still runs ({} after {HOLDER_PROBE_WAIT_SECS} s)",
            r.job.state
        )));
    }
    let data = r.job.result.and_then(|x| x.data).unwrap_or_default();
    let Some(live) = data.get("liveSessions") else {
        return Ok(Some(format!("{pc} answered without saying whether processes run (an older pcmail)")));
    };
    let held: Vec<ProbeHeld> = serde_json::from_value(data["heldHere"].clone()).unwrap_or_default();
    let live: Vec<String> = serde_json::from_value(live.clone()).unwrap_or_default();
    match holder_runs_per_probe(l, &held, &live) {
        Some(what) => Err(ApiError::Busy(format!(
            "{} has no heartbeat, but {pc} answered that {what}: not taken; ask {} to release it, or --force with a reason",
            l.resource,
            holder_label(&l.holder)
        ))),
        None => Ok(Some(format!("{pc} answered that nothing of the holder runs there ({})", r.job.id))),
    }
}

/// One piece of evidence every current holder accepts: `force` when asked;
/// else each holder's own (process gone on this PC, session ended across
/// PCs), which must agree, or `session_ended` when every lease is stale.
fn common_evidence(client: &Client, current: &[Lease], force: bool) -> Result<(Evidence, Option<String>)> {
    let mut each = vec![];
    for l in current {
        // A holder that still runs or renews is a held lease (exit 10, as for
        // `claim`), not a usage mistake.
        let (e, d) = client.takeover_evidence(l, force).map_err(|e| match e {
            // Name the holder when several hold it.
            ClientError::Invalid(m) if current.len() > 1 => {
                ApiError::Busy(format!("{m} (one of {} holders; every one must be gone)", current.len()))
            }
            ClientError::Invalid(m) => ApiError::Busy(m),
            e => e.into(),
        })?;
        each.push((e, d));
    }
    let first = each[0].0;
    let details = each.iter().filter_map(|(_, d)| d.clone()).collect::<Vec<_>>().join("; ");
    let details = (!details.is_empty()).then_some(details);
    if each.iter().all(|(e, _)| *e == first) {
        return Ok((first, details));
    }
    // Some holders on this PC (process gone), some elsewhere (session ended):
    // one kind of evidence for all only when all are stale.
    if current.iter().all(|l| l.stale) {
        return Ok((Evidence::SessionEnded, details));
    }
    let fresh: Vec<String> = current.iter().filter(|l| !l.stale).map(|l| holder_label(&l.holder)).collect();
    Err(ApiError::Busy(format!(
        "the holders of {} need different evidence (a process gone on this PC, a session ended elsewhere) and {} \
         still renews: wait until its lease is stale (3 minutes), or --force with a reason",
        current[0].resource,
        fresh.join(", ")
    )))
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = optional_not_null)]
pub struct LeaseReleaseArgs {
    pub resource: String,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LeaseReleaseResult {
    pub released: Vec<ReleaseDone>,
}

/// `lease release`: this PC's lease of the resource (queued when offline).
pub fn lease_release(client: &mut Client, a: &LeaseReleaseArgs) -> Result<LeaseReleaseResult> {
    let released = client.lease_release(&a.resource, None, a.reason.as_deref()).map_err(unsupported)?;
    Ok(LeaseReleaseResult { released })
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = optional_not_null)]
pub struct LeaseListArgs {
    /// Only this repo's leases (normalised origin URL).
    #[serde(default)]
    pub repo: Option<String>,
    /// Only this resource.
    #[serde(default)]
    pub resource: Option<String>,
    /// Also leases that ended in the last 24 hours.
    #[serde(default)]
    pub all: bool,
    /// Each lease's timeline.
    #[serde(default)]
    pub timeline: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct LeaseListResult {
    pub leases: Vec<Lease>,
    /// This PC's own leases as it tracks them (with unconfirmed and releasing ones).
    pub mine: Vec<MyLease>,
    /// The server was unreachable: `leases` is the guard cache (of `cacheAt`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreachable: Option<String>,
    #[serde(rename = "cacheAt", skip_serializing_if = "Option::is_none")]
    pub cache_at: Option<i64>,
    /// The server's time of the answer (ages are counted from it).
    pub now: i64,
}

/// `lease list`: the server's view; the guard cache when it can't be reached.
pub fn lease_list(client: &mut Client, a: &LeaseListArgs) -> Result<LeaseListResult> {
    let mine = client.store.leases_mine()?;
    let offset = client.store.meta_i64(pcmail_store::meta::SERVER_OFFSET_MS)?.unwrap_or(0);
    let args = ListArgs { repo: a.repo.clone(), resource: a.resource.clone(), all: a.all, timeline: a.timeline };
    match client.lease_list(args) {
        Ok(l) => Ok(LeaseListResult {
            leases: l.leases,
            mine,
            unreachable: None,
            cache_at: None,
            now: client.now() + offset,
        }),
        Err(ClientError::Call(e)) if e.is_transient() => {
            let leases = client
                .store
                .lease_cache()?
                .into_iter()
                .filter(|l| {
                    a.repo.as_ref().is_none_or(|r| *r == l.repo) && a.resource.as_ref().is_none_or(|r| *r == l.resource)
                })
                .filter_map(|l| serde_json::from_str::<Lease>(&l.json).ok())
                .collect();
            let cache_at = sl::cache_at(client.store.conn())?;
            Ok(LeaseListResult { leases, mine, unreachable: Some(e.to_string()), cache_at, now: client.now() + offset })
        }
        Err(e) => Err(unsupported(e)),
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct LeaseCheckArgs {
    pub resource: String,
    /// The fencing token to check.
    pub fence: i64,
}

/// `lease check`: is `fence` the current token of `resource`? Asks the
/// server; never answers from a cache (unreachable: an error, exit 6).
pub fn lease_check(client: &mut Client, a: &LeaseCheckArgs) -> Result<CheckAnswer> {
    client.lease_check(&a.resource, a.fence).map_err(unsupported)
}
