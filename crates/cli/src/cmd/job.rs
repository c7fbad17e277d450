//! `pcmail job run|status|list|cancel|whitelist`: parses, calls the one
//! function per operation in pcmail-api, prints.

use clap::Subcommand;
use pcmail_api::jobs::{self as api, outcome_exit};
use pcmail_api::ApiError;
use pcmail_api::Exit;
use pcmail_core::job::Job;
use pcmail_core::present::{age, truncate_chars};
use serde_json::{json, Value};
use std::collections::BTreeMap;

#[derive(Subcommand)]
pub enum JobCmd {
    /// Run a whitelisted command on TARGET (a PC label or @server): `pcmail job run build-box test
    /// checkout=app crate=core`. Exit 13: refused; with --wait, 14: it ended timed_out, 8: the wait
    /// ran out. A submit identical to a queued, running or just-ended job joins it (exit 0, says so).
    Run {
        /// Who runs it: a PC label (its `[jobs]` whitelist), or `@server` (the server's probes and maintenance).
        target: String,
        /// The command's name in the target's whitelist (`pcmail job whitelist` on that PC lists them).
        command: String,
        /// The command's arguments as NAME=VALUE (each value is one argument, never a shell word).
        args: Vec<String>,
        /// Run again even when an identical job is queued or just ended, or its artifacts exist.
        #[arg(long)]
        force: bool,
        /// This submit re-runs that job: refused when its artifacts exist (unless --force).
        #[arg(long)]
        rerun_of: Option<String>,
        /// Wait until the job ended; its exit code becomes this command's.
        #[arg(long)]
        wait: bool,
        /// How long --wait waits (30s, 10m, 2h) [default: 10m].
        #[arg(long)]
        timeout: Option<String>,
        /// A name for this session shown to others.
        #[arg(long)]
        name: Option<String>,
    },
    /// A job with its timeline and result (exit 14 when it ended timed_out).
    Status {
        /// The job's id (`job run` prints it).
        job_id: String,
    },
    /// Jobs this PC may see, newest first.
    List {
        /// Only jobs this PC submitted or joined.
        #[arg(long)]
        mine: bool,
        /// Only this state: queued, running, ok, failed, timed_out, cancelled.
        #[arg(long)]
        state: Option<String>,
        /// Only jobs for this target.
        #[arg(long)]
        target: Option<String>,
        /// At most this many (the server's default: 100, at most 500).
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Cancel a job: a queued one at once, a running one at its executor's next poll.
    Cancel {
        /// The job's id.
        job_id: String,
        /// Why, kept on the job's timeline.
        #[arg(long)]
        reason: Option<String>,
    },
    /// What this PC publishes from `[jobs]` in its config.toml (or why it publishes nothing).
    Whitelist,
}

fn parse_args(args: &[String]) -> Result<BTreeMap<String, Value>, ApiError> {
    let mut out = BTreeMap::new();
    for a in args {
        let Some((k, v)) = a.split_once('=') else {
            return Err(ApiError::Usage(format!("{a:?}: arguments are NAME=VALUE")));
        };
        if out.insert(k.to_string(), Value::String(v.to_string())).is_some() {
            return Err(ApiError::Usage(format!("argument {k} given twice")));
        }
    }
    Ok(out)
}

fn secs(d: Option<&str>) -> Result<Option<u64>, ApiError> {
    d.map(|t| pcmail_api::parse_duration("--timeout", t).map(|ms| (ms as u64).div_ceil(1000))).transpose()
}

pub fn run(cmd: JobCmd, json: bool) -> anyhow::Result<()> {
    if let JobCmd::Whitelist = cmd {
        let paths = pcmail_local::config::Paths::from_env()?;
        let config = pcmail_local::config::Config::load(&paths)?;
        let w = pcmail_client::jobs::describe_whitelist(&config.jobs);
        if json {
            println!("{w}");
        } else if w["ok"] == json!(false) {
            anyhow::bail!(ApiError::Usage(format!(
                "{} (nothing is published until it is fixed)",
                w["error"].as_str().unwrap_or("")
            )));
        } else if w["whitelist"].is_null() {
            println!("pcmail: no [jobs] commands in {}: this PC runs no jobs", paths.config().display());
        } else {
            let wl = &w["whitelist"];
            println!(
                "pcmail: this PC publishes {} command(s) (hash {}):",
                wl["commands"].as_array().map_or(0, Vec::len),
                &wl["hash"].as_str().unwrap_or("")[..12]
            );
            for c in wl["commands"].as_array().into_iter().flatten() {
                let args: Vec<String> = c["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|a| format!("{}:{}", a["name"].as_str().unwrap_or(""), a["type"].as_str().unwrap_or("")))
                    .collect();
                println!(
                    "  {} {}  ({} s) {}",
                    c["name"].as_str().unwrap_or(""),
                    args.join(" "),
                    c["timeLimitMs"].as_i64().unwrap_or(0) / 1000,
                    c["description"].as_str().unwrap_or("")
                );
            }
            match wl.get("allowedSubmitters").and_then(Value::as_array) {
                Some(a) => println!(
                    "  allowed submitters: {}",
                    a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")
                ),
                None => {
                    println!("  allowed submitters: none (every roster PC once the server requires per-PC credentials)")
                }
            }
        }
        return Ok(());
    }
    let mut client = super::open()?;
    match cmd {
        JobCmd::Run { target, command, args, force, rerun_of, wait, timeout, name } => {
            let a = api::JobRunArgs {
                target,
                command,
                args: parse_args(&args)?,
                force,
                rerun_of,
                wait,
                timeout_secs: secs(timeout.as_deref())?,
                name,
            };
            let r = api::job_run(&mut client, &a)?;
            if json {
                println!("{}", serde_json::to_string(&r)?);
            } else {
                if r.deduped {
                    println!(
                        "pcmail: joined {} ({} by {}): the same command and arguments; nothing runs twice (--force runs it again)",
                        r.job.id,
                        r.job.state,
                        r.job.submitter.pc
                    );
                } else if !wait || r.job.state.is_ended() {
                    println!("pcmail: job {} {} on {}", r.job.id, r.job.state, r.job.target);
                }
                if r.job.state.is_ended() {
                    print_job(&r.job, false);
                } else if r.ended == Some(false) {
                    println!(
                        "pcmail: {} is still {} (the wait ran out; `pcmail job status {}`)",
                        r.job.id, r.job.state, r.job.id
                    );
                }
            }
            if r.ended == Some(false) {
                std::process::exit(Exit::Timeout as i32);
            }
            if let Some(e) =
                outcome_exit(&r.job).filter(|_| r.job.state.is_ended() && (wait || r.job.target == "@server"))
            {
                std::process::exit(e as i32);
            }
        }
        JobCmd::Status { job_id } => {
            let r = api::job_status(&mut client, &api::JobIdArgs { job_id })?;
            if json {
                println!("{}", serde_json::to_string(&r)?);
            } else {
                print_job(&r.job, true);
            }
            if r.job.state == pcmail_core::job::JobState::TimedOut {
                std::process::exit(Exit::JobTimedOut as i32);
            }
        }
        JobCmd::List { mine, state, target, limit } => {
            let r = api::job_list(&mut client, &api::JobListArgs { mine, state, target, limit })?;
            if json {
                println!("{}", serde_json::to_string(&r)?);
            } else if r.jobs.is_empty() {
                println!("No jobs.");
            } else {
                let now = pcmail_local::system_now();
                for j in &r.jobs {
                    println!(
                        "{}  {:<9} {:<12} {:<10} {}  {}",
                        j.id,
                        j.state.as_str(),
                        truncate_chars(&j.target, 12),
                        truncate_chars(&j.command, 10),
                        age(now - j.submitted_at),
                        truncate_chars(&args_text(j), 60)
                    );
                }
            }
        }
        JobCmd::Cancel { job_id, reason } => {
            let r = api::job_cancel(&mut client, &api::JobCancelArgs { job_id, reason })?;
            if json {
                println!("{}", serde_json::to_string(&r)?);
            } else if r.job.state.is_ended() {
                println!("pcmail: {} is {}", r.job.id, r.job.state);
            } else {
                println!(
                    "pcmail: {} is {}; cancel requested (its executor kills it at its next poll)",
                    r.job.id, r.job.state
                );
            }
        }
        JobCmd::Whitelist => unreachable!("handled above"),
    }
    Ok(())
}

fn args_text(j: &Job) -> String {
    j.args.iter().map(|(k, v)| format!("{k}={}", v.to_arg_string())).collect::<Vec<_>>().join(" ")
}

fn print_job(j: &Job, timeline: bool) {
    println!("{}  {} on {}: {} {}", j.id, j.state, j.target, j.command, args_text(j));
    println!(
        "  submitted by {}/{}{}",
        j.submitter.pc,
        truncate_chars(&j.submitter.session, 12),
        if j.joined > 0 { format!(" (+{} joined)", j.joined) } else { String::new() }
    );
    if let Some(r) = &j.reason {
        println!("  reason: {r}");
    }
    if let Some(res) = &j.result {
        println!(
            "  ran: {}{}{}",
            if res.ran { "yes" } else { "no" },
            res.exit.map(|e| format!(", exit {e}")).unwrap_or_default(),
            if res.ran { format!(", {} ms", res.duration_ms) } else { String::new() }
        );
        if !res.reused.is_empty() {
            println!("  reused (already made, not run again): {}", res.reused.join(", "));
        }
        if !res.artifacts.is_empty() {
            println!("  artifacts: {}", res.artifacts.join(", "));
        }
        if let Some(v) = &res.verify {
            println!(
                "  verify: {}{}",
                if v.ok { "ok" } else { "FAILED" },
                v.exit.map(|e| format!(" (exit {e})")).unwrap_or_default()
            );
            // What the verify step printed: why it passed or failed.
            let lines: Vec<&str> = v.output.lines().collect();
            for l in &lines[lines.len().saturating_sub(10)..] {
                println!("    {}", pcmail_core::present::terminal_text(l));
            }
        }
        if let Some(rb) = &res.read_back {
            println!("  read back: {}", pcmail_core::present::terminal_text(&truncate_chars(rb.trim_end(), 200)));
        }
        // A probe answers data (a PC's also as JSON text in its output): shown for a person.
        let answer = res.data.as_ref().filter(|d| !d.is_null());
        if let Some(d) = answer {
            println!("  answer:");
            for l in crate::print::data_lines(d) {
                println!("    {l}");
            }
        }
        if !res.output.is_empty() && answer.is_none() {
            let lines: Vec<&str> = res.output.lines().collect();
            let from = lines.len().saturating_sub(20);
            println!("  output{}:", if from > 0 || res.truncated { " (last lines)" } else { "" });
            for l in &lines[from..] {
                println!("    {}", pcmail_core::present::terminal_text(l));
            }
        }
    }
    if timeline {
        for t in j.timeline.iter().flatten() {
            println!(
                "  {} {} by {}{}",
                crate::print::time(t.at),
                t.state,
                t.by,
                t.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default()
            );
        }
    }
}
