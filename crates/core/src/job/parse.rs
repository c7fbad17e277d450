//! Parsing of the job ops' arguments (both servers' Rust side; gas mirrors it).

use super::check::*;
use super::limits::*;
use super::spec::*;
use super::wire::*;
use crate::error::ProtoError;
use crate::roster::is_valid_label;
use crate::rules::{check_text, ACTOR_MAX_CHARS, REASON_MAX_CHARS};
use serde_json::{Map, Value};

type M = Map<String, Value>;

fn req_str(m: &M, key: &str, field: &str) -> Result<String, ProtoError> {
    match m.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        None | Some(Value::Null) => Err(ProtoError::field(field, format!("missing \"{key}\""))),
        Some(_) => Err(ProtoError::field(field, format!("\"{key}\" must be a string"))),
    }
}

fn opt_str(m: &M, key: &str, field: &str) -> Result<Option<String>, ProtoError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ProtoError::field(field, format!("\"{key}\" must be a string"))),
    }
}

fn opt_int(m: &M, key: &str, field: &str) -> Result<Option<i64>, ProtoError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            n.as_i64().map(Some).ok_or_else(|| ProtoError::field(field, format!("\"{key}\" must be an integer")))
        }
        Some(_) => Err(ProtoError::field(field, format!("\"{key}\" must be an integer"))),
    }
}

fn opt_bool(m: &M, key: &str, field: &str) -> Result<Option<bool>, ProtoError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(ProtoError::field(field, format!("\"{key}\" must be true or false"))),
    }
}

fn obj<'a>(v: &'a Value, field: &str) -> Result<&'a M, ProtoError> {
    v.as_object().ok_or_else(|| ProtoError::field(field, format!("\"{field}\" must be an object")))
}

fn check_job_id(field: &str, id: &str) -> Result<(), ProtoError> {
    if is_valid_job_id(id) {
        Ok(())
    } else {
        Err(ProtoError::field(field, format!("{field} must look like job-<ms>-<8 lower hex>")))
    }
}

fn check_line(field: &str, s: &str, max: usize) -> Result<(), ProtoError> {
    if s.trim().is_empty() {
        return Err(ProtoError::field(field, format!("{field} must not be blank")));
    }
    check_text(field, s, max, false)
}

/// A target: a roster label or `@server`.
pub fn is_valid_target(s: &str) -> bool {
    s == SERVER_TARGET || is_valid_label(s)
}

/// The submitter names the caller's PC (compared with the envelope by the server) and a session.
pub fn check_submitter(s: &Submitter) -> Result<(), ProtoError> {
    if !is_valid_label(&s.pc) {
        return Err(ProtoError::field("submitter.pc", "submitter.pc must be a roster label"));
    }
    crate::rules::check_session_id("submitter.session", &s.session)?;
    if let Some(n) = &s.name {
        check_line("submitter.name", n, SESSION_MAX_CHARS)?;
    }
    Ok(())
}

/// The shape of a submit (the CLI before it sends; the servers when they
/// parse). Whether the command and args fit the target is `check_args`'s.
pub fn check_submit(a: &SubmitArgs) -> Result<(), ProtoError> {
    check_job_id("jobId", &a.job_id)?;
    if !is_valid_target(&a.target) {
        return Err(ProtoError::field("target", "target must be a roster label or @server"));
    }
    let name_ok = is_valid_command_name(&a.command)
        || (a.command.starts_with('_') && a.command.len() > 1 && is_valid_label(&a.command[1..]));
    if !name_ok {
        return Err(ProtoError::field("command", "command must look like a label (lower-case a-z 0-9 . _ -, max 40)"));
    }
    if a.args.len() > ARGS_MAX {
        return Err(ProtoError::field("args", format!("at most {ARGS_MAX} arguments")));
    }
    if let Some(r) = &a.rerun_of {
        check_job_id("rerunOf", r)?;
    }
    check_submitter(&a.submitter)?;
    if let Some(w) = a.dedup_window_ms {
        if !(0..=DEDUP_WINDOW_MAX_MS).contains(&w) {
            return Err(ProtoError::field("dedupWindowMs", "dedupWindowMs must be 0 ms to 1 day"));
        }
    }
    Ok(())
}

pub fn parse_submit(args: &M) -> Result<SubmitArgs, ProtoError> {
    let s = obj(args.get("submitter").unwrap_or(&Value::Null), "submitter")?;
    let a = SubmitArgs {
        job_id: req_str(args, "jobId", "jobId")?,
        target: req_str(args, "target", "target")?,
        command: req_str(args, "command", "command")?,
        args: match args.get("args") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => return Err(ProtoError::field("args", "\"args\" must be an object")),
        },
        force: opt_bool(args, "force", "force")?.unwrap_or(false),
        rerun_of: opt_str(args, "rerunOf", "rerunOf")?,
        submitter: Submitter {
            pc: req_str(s, "pc", "submitter.pc")?,
            session: req_str(s, "session", "submitter.session")?,
            name: opt_str(s, "name", "submitter.name")?,
        },
        dedup_window_ms: opt_int(args, "dedupWindowMs", "dedupWindowMs")?,
    };
    check_submit(&a)?;
    Ok(a)
}

pub fn parse_job_id(args: &M) -> Result<String, ProtoError> {
    let id = req_str(args, "jobId", "jobId")?;
    check_job_id("jobId", &id)?;
    Ok(id)
}

pub fn parse_list(args: &M) -> Result<ListArgs, ProtoError> {
    let target = opt_str(args, "target", "target")?;
    if let Some(t) = &target {
        if !is_valid_target(t) {
            return Err(ProtoError::field("target", "target must be a roster label or @server"));
        }
    }
    let state = match opt_str(args, "state", "state")? {
        None => None,
        Some(s) => Some(JobState::parse(&s).ok_or_else(|| {
            ProtoError::field("state", "state must be queued, running, ok, failed, timed_out or cancelled")
        })?),
    };
    let limit = match opt_int(args, "limit", "limit")? {
        None => LIST_LIMIT_DEFAULT,
        Some(n) if n >= 1 && n as usize <= LIST_LIMIT_MAX => n as usize,
        Some(_) => return Err(ProtoError::field("limit", format!("limit must be 1..{LIST_LIMIT_MAX}"))),
    };
    Ok(ListArgs { target, state, mine: opt_bool(args, "mine", "mine")?.unwrap_or(false), limit })
}

pub fn parse_cancel(args: &M) -> Result<CancelArgs, ProtoError> {
    let c = CancelArgs {
        job_id: parse_job_id(args)?,
        by: req_str(args, "by", "by")?,
        reason: opt_str(args, "reason", "reason")?,
    };
    check_line("by", &c.by, ACTOR_MAX_CHARS)?;
    if let Some(r) = &c.reason {
        check_text("reason", r, REASON_MAX_CHARS, true)?;
    }
    Ok(c)
}

pub fn parse_start(args: &M) -> Result<StartArgs, ProtoError> {
    let s = StartArgs {
        job_id: parse_job_id(args)?,
        runner: req_str(args, "runner", "runner")?,
        started_at: opt_int(args, "startedAt", "startedAt")?
            .ok_or_else(|| ProtoError::field("startedAt", "missing \"startedAt\""))?,
    };
    check_line("runner", &s.runner, RUNNER_MAX_CHARS)?;
    if s.started_at < 0 {
        return Err(ProtoError::field("startedAt", "startedAt must be a time in ms"));
    }
    Ok(s)
}

/// The one check of a report (the PC before it queues one; the servers).
pub fn check_report(r: &ReportArgs) -> Result<(), ProtoError> {
    check_job_id("jobId", &r.job_id)?;
    check_line("runner", &r.runner, RUNNER_MAX_CHARS)?;
    if !r.state.is_ended() {
        return Err(ProtoError::field("state", "a report's state must be ok, failed, cancelled or timed_out"));
    }
    if let Some(reason) = &r.reason {
        check_text("reason", reason, REASON_MAX_CHARS, true)?;
    }
    Ok(())
}

pub fn parse_report(args: &M) -> Result<ReportArgs, ProtoError> {
    let state_s = req_str(args, "state", "state")?;
    let state = JobState::parse(&state_s)
        .filter(|s| s.is_ended())
        .ok_or_else(|| ProtoError::field("state", "a report's state must be ok, failed, cancelled or timed_out"))?;
    let result: JobResult = match args.get("result") {
        Some(v @ Value::Object(_)) => {
            serde_json::from_value(v.clone()).map_err(|e| ProtoError::field("result", format!("result: {e}")))?
        }
        _ => return Err(ProtoError::field("result", "\"result\" must be an object")),
    };
    let r = ReportArgs {
        job_id: parse_job_id(args)?,
        runner: req_str(args, "runner", "runner")?,
        state,
        result,
        reason: opt_str(args, "reason", "reason")?,
    };
    check_report(&r)?;
    Ok(r)
}

fn parse_whitelist(v: &Value) -> Result<Whitelist, ProtoError> {
    let m = obj(v, "job.whitelist")?;
    let hash = req_str(m, "hash", "job.whitelist.hash")?;
    let commands: Vec<CommandSpec> = match m.get("commands") {
        Some(Value::Array(a)) if a.len() <= COMMANDS_MAX => a
            .iter()
            .enumerate()
            .map(|(i, c)| {
                serde_json::from_value(c.clone())
                    .map_err(|e| ProtoError::field(&format!("job.whitelist.commands[{i}]"), format!("{e}")))
            })
            .collect::<Result<_, _>>()?,
        _ => {
            return Err(ProtoError::field(
                "job.whitelist.commands",
                format!("\"commands\" must be an array of at most {COMMANDS_MAX}"),
            ))
        }
    };
    let labels = |key: &str| -> Result<Option<Vec<String>>, ProtoError> {
        let field = format!("job.whitelist.{key}");
        match m.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(a)) if a.len() <= VALUES_MAX => a
                .iter()
                .map(|x| x.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| ProtoError::field(&field, format!("\"{key}\" must be an array of names"))),
            Some(_) => {
                Err(ProtoError::field(&field, format!("\"{key}\" must be an array of at most {VALUES_MAX} names")))
            }
        }
    };
    let allowed_submitters = labels("allowedSubmitters")?;
    let checkouts = labels("checkouts")?.unwrap_or_default();
    let w = Whitelist { hash, commands, allowed_submitters, checkouts };
    check_whitelist(&w)?;
    Ok(w)
}

/// The one check of a published whitelist: the PC runs it before it
/// publishes one (a `[jobs]` config it would refuse is not published, and
/// its polls go on), both servers when they parse it.
pub fn check_whitelist(w: &Whitelist) -> Result<(), ProtoError> {
    check_line("job.whitelist.hash", &w.hash, 128)?;
    if w.commands.len() > COMMANDS_MAX {
        return Err(ProtoError::field(
            "job.whitelist.commands",
            format!("\"commands\" must be an array of at most {COMMANDS_MAX}"),
        ));
    }
    for (i, c) in w.commands.iter().enumerate() {
        check_spec(c).map_err(|e| {
            let f = format!("job.whitelist.commands[{i}].{}", e.field.clone().unwrap_or_default());
            ProtoError { field: Some(f), ..e }
        })?;
        if w.commands[..i].iter().any(|d| d.name == c.name) {
            return Err(ProtoError::field(
                &format!("job.whitelist.commands[{i}].name"),
                format!("command {:?} is published twice", c.name),
            ));
        }
    }
    let names = |key: &str, list: &[String]| -> Result<(), ProtoError> {
        let field = format!("job.whitelist.{key}");
        if list.len() > VALUES_MAX {
            return Err(ProtoError::field(&field, format!("\"{key}\" must be an array of at most {VALUES_MAX} names")));
        }
        if list.iter().any(|s| s.is_empty() || check_text(&field, s, STRING_MAX_LEN_DEFAULT, false).is_err()) {
            return Err(ProtoError::field(&field, format!("\"{key}\" must be an array of names")));
        }
        Ok(())
    };
    if let Some(a) = &w.allowed_submitters {
        names("allowedSubmitters", a)?;
    }
    names("checkouts", &w.checkouts)
}

/// The poll's `job` argument: the lists must be arrays of at most 500 (the
/// request's shape); each report is parsed on its own (one bad item fails only itself).
pub fn parse_poll_job(v: &Value) -> Result<PollJob, ProtoError> {
    let m = obj(v, "job")?;
    let list = |key: &str| -> Result<Vec<Value>, ProtoError> {
        let field = format!("job.{key}");
        match m.get(key) {
            None | Some(Value::Null) => Ok(vec![]),
            Some(Value::Array(a)) if a.len() <= POLL_ITEMS_MAX => Ok(a.clone()),
            Some(Value::Array(_)) => {
                Err(ProtoError::field(&field, format!("at most {POLL_ITEMS_MAX} items in \"{field}\"")))
            }
            Some(_) => Err(ProtoError::field(&field, format!("\"{field}\" must be an array"))),
        }
    };
    let whitelist = match m.get("whitelist") {
        None | Some(Value::Null) => None,
        Some(w) => Some(parse_whitelist(w).map_err(|error| BadItem { index: 0, job_id: None, error })),
    };
    // A malformed heartbeat id is left out like an unknown one.
    let running =
        list("running")?.iter().filter_map(|x| x.as_str().filter(|s| is_valid_job_id(s)).map(str::to_string)).collect();
    let reports = list("reports")?
        .iter()
        .enumerate()
        .map(|(index, v)| {
            let bad = |error: ProtoError| BadItem {
                index,
                job_id: v.get("jobId").and_then(Value::as_str).map(|s| s.chars().take(60).collect()),
                error,
            };
            let m =
                v.as_object().ok_or_else(|| bad(ProtoError::field("job.reports", "each report must be an object")))?;
            parse_report(m).map_err(bad)
        })
        .collect();
    Ok(PollJob { whitelist, take: opt_bool(m, "take", "job.take")?.unwrap_or(false), running, reports })
}
