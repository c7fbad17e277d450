//! `pcmail lease claim|release|list|check|takeover`: parses, calls the one
//! function per operation in pcmail-api, prints.

use clap::Subcommand;
use pcmail_api::leases::{self as api, LeaseMode};
use pcmail_api::ApiError;
use pcmail_api::Exit;
use pcmail_client::leases::{holder_label, ClaimOutcome};
use pcmail_client::Client;
use pcmail_core::lease::Lease;
use pcmail_core::present::{age, truncate_chars};
use pcmail_local::process::Caller;
use std::io::Write;

/// A line into a stream that may be gone (a closed pipe, the front that
/// stopped waiting): dropped, never a panic.
macro_rules! line {
    ($w:expr, $($arg:tt)*) => {{
        let _ = writeln!($w, $($arg)*);
    }};
}

#[derive(Subcommand)]
pub enum LeaseCmd {
    /// Hold a resource (exit 10: someone holds it; 11: its holder went silent: `takeover`).
    Claim {
        /// The resource: like a PC label plus `/` and `:` (`staging-deploy`, `module/auth`, `gpu-host-a:2`).
        resource: String,
        /// Why, for whoever finds it held.
        #[arg(long, short = 'd', default_value = "")]
        description: String,
        /// Repo-relative globs the lease covers (repeat or comma-separate): `src/auth/**`.
        #[arg(long, short = 'f', value_delimiter = ',')]
        files: Vec<String>,
        /// Others may hold it shared at the same time (exclusive is the default).
        #[arg(long)]
        shared: bool,
        /// The repo (normalised origin URL) [default: the current folder's]
        #[arg(long)]
        repo: Option<String>,
        /// Follow this process (the lease ends when it exits) instead of the Claude Code process above.
        #[arg(long, conflicts_with = "ttl")]
        pid: Option<i64>,
        /// A lease without a process that ends after this long (30m, 2h).
        #[arg(long)]
        ttl: Option<String>,
        /// A name for the holder shown to others.
        #[arg(long)]
        name: Option<String>,
    },
    /// Release this PC's lease of a resource (queued for the poller when the server is unreachable).
    Release {
        /// The resource this PC holds.
        resource: String,
        /// Why, kept on the lease's timeline.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Who holds what: holder, description, files, age, last heartbeat, stale flag.
    List {
        /// Only this repo (normalised origin URL).
        #[arg(long)]
        repo: Option<String>,
        /// Only leases of the current folder's repo.
        #[arg(long, conflicts_with = "repo")]
        here: bool,
        /// Also leases that ended in the last 24 hours.
        #[arg(long)]
        all: bool,
        /// Each lease's timeline.
        #[arg(long)]
        timeline: bool,
        /// Only this resource.
        resource: Option<String>,
    },
    /// Exit 0 only while FENCE is the resource's current fencing token (asks the server; unreachable: exit 6).
    Check {
        /// The resource.
        resource: String,
        /// The fencing token your claim was granted (`lease claim` prints it).
        #[arg(long)]
        fence: i64,
    },
    /// Take a lease someone else holds, with evidence: its process is gone (same PC), its session
    /// ended (stale lease, its PC still polls), or --force when its PC is silent too. Recorded.
    Takeover {
        /// The resource to take.
        resource: String,
        /// Why (recorded on the lease's timeline; the old holder is told it).
        #[arg(long, required = true)]
        reason: String,
        /// The holder's PC is silent too: take a stale lease on your word, recorded as `force`.
        #[arg(long)]
        force: bool,
        /// What you will do with it [default: the old lease's description].
        #[arg(long, short = 'd')]
        description: Option<String>,
        /// Repo-relative globs the new lease covers (repeat or comma-separate) [default: the old lease's].
        #[arg(long, short = 'f', value_delimiter = ',')]
        files: Option<Vec<String>>,
        /// Follow this process (the lease ends when it exits) instead of the Claude Code process above.
        #[arg(long, conflicts_with = "ttl")]
        pid: Option<i64>,
        /// A lease without a process that ends after this long (30m, 2h).
        #[arg(long)]
        ttl: Option<String>,
        /// A name for the holder shown to others.
        #[arg(long)]
        name: Option<String>,
    },
}

/// Says a held or stale lease once, as a person reads it (ages, not epoch
/// milliseconds), with the next step; under --json the error object (with
/// the lease) is printed by main. `takeover`: the refused command was a
/// takeover (`Some(forced)`), so the hint never repeats it.
fn explain(e: ApiError, json: bool, takeover: Option<bool>) -> anyhow::Error {
    if json {
        return e.into();
    }
    let Some(l) = e.to_json().get("lease").and_then(|v| serde_json::from_value::<Lease>(v.clone()).ok()) else {
        return e.into();
    };
    let now = pcmail_local::system_now();
    let line = format!(
        "{} is held by {} ({}) since {} ago, last heartbeat {} ago{}: {}",
        l.resource,
        holder_label(&l.holder),
        l.mode.as_str(),
        age(now - l.granted_at),
        age(now - l.heartbeat_at),
        if l.stale { ", STALE" } else { "" },
        l.description
    );
    let hint = match (takeover, l.stale) {
        (None, true) => {
            Some(format!("check the resource itself, then `pcmail lease takeover {} --reason \"…\"`", l.resource))
        }
        (Some(false), true) => Some(format!(
            "if you checked {} yourself and it is free, only --force (with the reason) takes it",
            l.resource
        )),
        (Some(_), false) => Some(format!(
            "its holder still renews it: ask {} to release it, or wait until it is stale (3 minutes without a heartbeat)",
            holder_label(&l.holder)
        )),
        _ => None,
    };
    let held_or_stale = matches!(e.exit(), Exit::LeaseHeld | Exit::LeaseStale);
    // The server's own words add its reason when it refused a takeover.
    let message = if held_or_stale { line } else { format!("{e}\npcmail: {line}") };
    let message = match hint {
        Some(h) => format!("{message}\npcmail: {h}"),
        None => message,
    };
    crate::exit::Shown { exit: e.exit(), message }.into()
}

pub fn run(cmd: LeaseCmd, json: bool) -> anyhow::Result<()> {
    if matches!(cmd, LeaseCmd::Claim { .. } | LeaseCmd::Release { .. }) {
        // The running daemon answers with its files already open; without
        // one (or for a form it leaves to pcmail) it is done here.
        let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
        if let Some(exit) = pcmail_local::cmdsock::answered_by_daemon(&args) {
            std::process::exit(exit);
        }
    }
    let mut client = super::open()?;
    let (mut out, mut err) = (std::io::stdout().lock(), std::io::stderr().lock());
    match cmd {
        cmd @ (LeaseCmd::Claim { .. } | LeaseCmd::Release { .. }) => {
            claim_or_release(&mut client, cmd, &Caller::this_process(), json, &mut out, &mut err)?;
        }
        LeaseCmd::Takeover { resource, reason, force, description, files, pid, ttl, name } => {
            let args = api::LeaseTakeoverArgs { resource, reason, force, description, files, pid, ttl, name };
            let r = api::lease_takeover(&mut client, &args).map_err(|e| explain(e, json, Some(force)))?;
            print_claim(&r, json, &mut out, &mut err);
        }
        LeaseCmd::List { repo, here, all, timeline, resource } => {
            let repo = if here {
                let dir = std::env::current_dir()?;
                Some(
                    pcmail_local::repo::identify(&dir)
                        .map(|i| i.id)
                        .ok_or_else(|| ApiError::Usage("--here: the current folder is not in a git repo".into()))?,
                )
            } else {
                repo
            };
            let r = api::lease_list(&mut client, &api::LeaseListArgs { repo, resource, all, timeline })?;
            if json {
                println!("{}", serde_json::to_string(&r)?);
            } else {
                if let Some(e) = &r.unreachable {
                    eprintln!(
                        "pcmail: server unreachable ({e}); showing the lease view of the last poll{}",
                        r.cache_at
                            .map(|t| format!(", {} old", age(pcmail_local::system_now() - t)))
                            .unwrap_or_default()
                    );
                }
                print_table(&r, client.me(), timeline);
            }
        }
        LeaseCmd::Check { resource, fence } => {
            let a = api::lease_check(&mut client, &api::LeaseCheckArgs { resource: resource.clone(), fence })?;
            if json {
                println!("{}", serde_json::to_string(&a)?);
            } else if a.current {
                println!("pcmail: fence {fence} is current for {resource}");
            } else {
                match a.fence {
                    Some(f) => println!("pcmail: fence {fence} is NOT current for {resource} (current: {f})"),
                    None => println!("pcmail: fence {fence} is NOT current for {resource} (nobody holds it)"),
                }
            }
            if !a.current {
                // Another holder: 10; nobody holds it: 7.
                std::process::exit(if a.fence.is_some() { Exit::LeaseHeld as i32 } else { Exit::NotFound as i32 });
            }
        }
    }
    Ok(())
}

/// `lease claim` and `lease release`, the two the daemon also answers for the
/// small front (`pcmail-hook lease …`): the same code either way, for the
/// `caller` given, its lines into `out` and `err`. Other commands: unreachable.
pub fn claim_or_release(
    client: &mut Client,
    cmd: LeaseCmd,
    caller: &Caller,
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<()> {
    match cmd {
        LeaseCmd::Claim { resource, description, files, shared, repo, pid, ttl, name } => {
            let args = api::LeaseClaimArgs {
                resource,
                description,
                files,
                mode: if shared { LeaseMode::Shared } else { LeaseMode::Exclusive },
                repo,
                cwd: None,
                pid,
                ttl,
                name,
            };
            let r = api::lease_claim_for(client, &args, caller).map_err(|e| explain(e, json, None))?;
            print_claim(&r, json, out, err);
        }
        LeaseCmd::Release { resource, reason } => {
            let r = api::lease_release(client, &api::LeaseReleaseArgs { resource, reason })?;
            if json {
                line!(out, "{}", serde_json::to_string(&r)?);
            } else {
                for d in &r.released {
                    match (d.queued, d.released) {
                        (true, _) => line!(
                            out,
                            "pcmail: {}: server unreachable; the release is queued and the poller sends it",
                            d.resource
                        ),
                        (false, true) => line!(out, "pcmail: released {}", d.resource),
                        (false, false) => {
                            line!(out, "pcmail: {} was no longer held by this PC (forgotten here)", d.resource)
                        }
                    }
                }
            }
        }
        _ => unreachable!("only claim and release come here"),
    }
    Ok(())
}

fn print_claim(r: &api::LeaseClaimResult, json: bool, out: &mut dyn Write, err: &mut dyn Write) {
    if json {
        line!(out, "{}", serde_json::to_string(r).unwrap_or_default());
        return;
    }
    if let Some(n) = &r.follows.note {
        line!(err, "pcmail: {n}");
    }
    match &r.outcome {
        ClaimOutcome::Granted { lease } => {
            let follows = match (r.follows.how, r.follows.pid) {
                (_, None) => format!("until {}", lease.ttl_expires_at.map(crate::print::time).unwrap_or_default()),
                ("claude", Some(p)) => format!("while this Claude Code session (PID {p}) runs"),
                ("agent", Some(p)) => format!("while this agent session (PID {p}) runs"),
                (_, Some(p)) => format!("while PID {p} runs"),
            };
            line!(
                out,
                "pcmail: holding {} (fence {}) {follows}; `pcmail lease release {}` when done",
                lease.resource,
                lease.fence,
                lease.resource
            );
            // The fencing token alone on stdout's last line, for scripts.
            line!(out, "{}", lease.fence);
        }
        ClaimOutcome::Unconfirmed { lease, error } => {
            line!(
                out,
                "pcmail: server unreachable ({error}): {} is kept here as UNCONFIRMED; you may not hold it. \
                 The poller claims it when the server answers and says so if someone else got it first.",
                lease.resource
            );
        }
    }
}

fn print_table(r: &api::LeaseListResult, me: &str, timeline: bool) {
    if r.leases.is_empty() && r.mine.iter().all(|m| m.fence.is_some()) {
        println!("No leases.");
        return;
    }
    let rows: Vec<[String; 7]> = r
        .leases
        .iter()
        .map(|l| {
            let mine = if l.holder.pc == me { "*" } else { "" };
            let state = if l.stale { "STALE".to_string() } else { l.state.as_str().to_string() };
            [
                format!("{}{}", l.resource, mine),
                format!("{} ({})", holder_label(&l.holder), l.mode.as_str()),
                state,
                age(r.now - l.granted_at),
                if l.ttl_expires_at.is_some() { "ttl".into() } else { age(r.now - l.heartbeat_at) },
                truncate_chars(&l.files.join(","), 30),
                truncate_chars(&l.description, 50),
            ]
        })
        .chain(r.mine.iter().filter(|m| m.fence.is_none()).map(|m| {
            [
                format!("{}*", m.resource),
                format!("{}/{} ({})", me, m.session.chars().take(8).collect::<String>(), m.mode),
                "UNCONFIRMED".into(),
                age(pcmail_local::system_now() - m.claimed_at),
                "-".into(),
                truncate_chars(&m.files.join(","), 30),
                truncate_chars(&m.description, 50),
            ]
        }))
        .collect();
    let head = ["RESOURCE", "HOLDER", "STATE", "AGE", "HEARTBEAT", "FILES", "DESCRIPTION"];
    let mut w = head.map(|h| h.chars().count());
    for row in &rows {
        for (i, c) in row.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<width$}  ", width = w[i]));
            }
        }
        println!("{}", s.trim_end());
    };
    line(head.to_vec());
    for row in &rows {
        line(row.iter().map(String::as_str).collect());
    }
    println!("(* this PC's; HEARTBEAT = time since the last renewal; STALE after 3 min without one)");
    if timeline {
        for line in timeline_lines(&r.leases) {
            println!("{line}");
        }
    }
}

/// The timeline under the table: each event once (the leases of one resource
/// share its history, so a takeover is on both the old and the new lease),
/// oldest first, with the evidence and what was checked.
fn timeline_lines(leases: &[Lease]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let mut rows: Vec<(&str, &pcmail_core::lease::TimelineEntry)> = vec![];
    for l in leases {
        for t in l.timeline.iter().flatten() {
            if seen.insert((l.resource.clone(), t.at, t.event.as_str(), t.by.clone())) {
                rows.push((&l.resource, t));
            }
        }
    }
    rows.sort_by_key(|(r, t)| (r.to_string(), t.at));
    rows.into_iter()
        .map(|(resource, t)| {
            let mut s = format!("  {} {} {} by {}", resource, crate::print::time(t.at), t.event.as_str(), t.by);
            if let Some(f) = t.fence {
                s.push_str(&format!(" (fence {f})"));
            }
            if let Some(e) = t.evidence {
                s.push_str(&format!(", evidence: {}", e.as_str()));
            }
            if let Some(x) = &t.reason {
                s.push_str(&format!(": {x}"));
            }
            if let Some(d) = &t.detail {
                s.push_str(&format!(" [{d}]"));
            }
            s
        })
        .collect()
}
