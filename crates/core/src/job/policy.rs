//! What the servers decide about a job besides its arguments: whether a late
//! report may correct its end, a revoked target, who may submit, the dedup
//! key, the whitelist's hash, the output cap, and artifact names and their
//! reuse.

use super::check::placeholders;
use super::limits::*;
use super::spec::{ArgValue, CommandSpec};
use super::wire::{Job, JobResult, JobState};
use crate::error::{ErrorCode, ProtoError};
use crate::Millis;
use serde_json::json;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// Whether a report may replace a job's stored end: only a `timed_out` the
/// server decided for silence (the outcome it could not know), only by the
/// runner that ran it, and only with the run's real exit code (`ran: true`,
/// `exit` set) and a state that is not `cancelled`. Any other ended job keeps
/// its end (a retried report is answered unchanged), and a job corrected once
/// is no longer a silent `timed_out`, so it is corrected at most once.
pub fn late_report_allowed(stored: &Job, runner: &str, state: JobState, report: &JobResult) -> bool {
    stored.state == JobState::TimedOut
        && stored.reason.as_deref() == Some(REASON_NO_HEARTBEAT)
        && stored.runner.as_deref() == Some(runner)
        && report.ran
        && report.exit.is_some()
        && matches!(state, JobState::Ok | JobState::Failed | JobState::TimedOut)
}

/// Why a revoked PC runs no jobs, and how it comes back: the refusal's
/// message at submit, and the reason of a queued job cancelled at revocation.
pub fn revoked_target_reason(target: &str) -> String {
    format!(
        "{target} was revoked by the admin: it runs no jobs until it is enrolled again \
         (the admin runs `pcmail roster add {target}` for a join code, then `pcmail init --join CODE` on that PC)"
    )
}

/// The rule for a job to a revoked PC, on both servers: refused at submit
/// (`job_refused`, reason `target_revoked`), never queued to wait for a PC
/// that cannot poll.
pub fn check_target_not_revoked(target: &str, revoked: bool) -> Result<(), ProtoError> {
    if revoked {
        Err(ProtoError::new(ErrorCode::JobRefused, format!("{}; nothing was queued", revoked_target_reason(target)))
            .with_reason(REFUSED_TARGET_REVOKED))
    } else {
        Ok(())
    }
}

/// Who may submit to a PC executor: the PC's `allowedSubmitters` when it set
/// them; by default (None) nobody, except when the server requires per-PC
/// credentials (then a label proves who submits, and every roster PC may).
pub fn submitter_allowed(allowed: Option<&[String]>, submitter_pc: &str, credentials_required: bool) -> bool {
    match allowed {
        Some(list) => list.iter().any(|l| l == submitter_pc),
        None => credentials_required,
    }
}

/// The dedup key of a submit: SHA-256 (lower hex) of the canonical JSON
/// `[target, command, args]` with the checked args sorted by name, so the
/// order and the string-vs-typed form of the arguments never matter.
pub fn dedup_key(target: &str, command: &str, args: &BTreeMap<String, ArgValue>) -> String {
    let canonical = serde_json::to_string(&json!([target, command, args])).unwrap_or_default();
    crate::hex::lower(&Sha256::digest(canonical.as_bytes()))
}

/// The hash a PC sends with its whitelist: SHA-256 of the canonical JSON of
/// what it publishes (commands, allowedSubmitters, checkouts).
pub fn whitelist_hash(commands: &[CommandSpec], allowed_submitters: Option<&[String]>, checkouts: &[String]) -> String {
    let canonical = serde_json::to_string(&json!([commands, allowed_submitters, checkouts])).unwrap_or_default();
    crate::hex::lower(&Sha256::digest(canonical.as_bytes()))
}

/// Keeps the last 64 KiB of an output, cut on a char boundary; true when cut.
pub fn cap_output(s: &str) -> (String, bool) {
    if s.len() <= OUTPUT_CAP_BYTES {
        return (s.to_string(), false);
    }
    let mut start = s.len() - OUTPUT_CAP_BYTES;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    (s[start..].to_string(), true)
}

/// A value made safe for a file name, one to one (two different values
/// never give the same text, so a name made of them pins what made it):
/// `A-Z a-z 0-9 . _ -` stay, every other byte is `%XX`, a value that is only
/// dots has its dots encoded (never `.` or `..`), the empty value is `%`.
pub fn safe_name_part(value: &str) -> String {
    if value.is_empty() {
        return "%".into();
    }
    let only_dots = value.bytes().all(|b| b == b'.');
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if (b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-') || b == b'.') && !(only_dots && b == b'.') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The identity of a job for "already made" reuse: its command and every
/// checked argument (sorted by name, typed), as 16 lower hex characters of
/// SHA-256. `{args}` in an artifact pattern is this.
pub fn reuse_identity(command: &str, args: &BTreeMap<String, ArgValue>) -> String {
    let canonical = serde_json::to_string(&json!(["reuse", command, args])).unwrap_or_default();
    crate::hex::lower(&Sha256::digest(canonical.as_bytes())[..8])
}

/// True when every artifact name made from `pattern` says which arguments
/// made it: the pattern has `{args}`, or names each argument (the subject's
/// through `{subject}` or its own name). Only such patterns let a job answer
/// with artifacts an earlier job made.
pub fn artifact_pins_identity(pattern: &str, spec_args: &[&str], subject: Option<&str>) -> bool {
    let ph = placeholders(pattern);
    ph.contains(&"args") || spec_args.iter().all(|a| ph.contains(a) || (subject == Some(*a) && ph.contains(&"subject")))
}

/// An artifact pattern made a name: `{command}`, `{subject}` and each
/// `{argument}` (its value through `safe_name_part`, so a value never adds a
/// directory; an optional argument not given is empty), `{args}` (the
/// `reuse_identity`), `{ts}` (`ts_text`: the submit time in ms, or `{ts}`
/// itself for the wildcard of a search). An optional argument not given
/// makes nothing (a given empty value makes `%`, so the two differ).
pub fn artifact_name(
    pattern: &str,
    command: &str,
    subject: &str,
    args: &BTreeMap<String, ArgValue>,
    ts_text: &str,
) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut rest = pattern;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else { break };
        out.push_str(&rest[..open]);
        let name = &rest[open + 1..open + close];
        match name {
            "command" => out.push_str(command),
            "subject" => out.push_str(&safe_name_part(subject)),
            "ts" => out.push_str(ts_text),
            "args" => out.push_str(&reuse_identity(command, args)),
            arg => {
                if let Some(v) = args.get(arg) {
                    out.push_str(&safe_name_part(&v.to_arg_string()));
                }
            }
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    out
}

/// One file found for an artifact pattern, with its modification time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundArtifact {
    pub name: String,
    pub modified: Millis,
}

/// How fresh an earlier job's artifacts must be to answer a job without
/// running it: made within `within_ms` of now, and not before `not_before`
/// (the checkout's HEAD commit time: a commit since makes them stale).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReuseRule {
    pub within_ms: Millis,
    pub not_before: Option<Millis>,
}

/// Default of `ReuseRule::within_ms`: a day.
pub const REUSE_WITHIN_DEFAULT_MS: Millis = 24 * 60 * 60_000;

/// The one "already made" rule (a first submit, a `--rerun-of`, and a retry
/// of a `timed_out` job): `found[i]` are the files matching the i-th
/// artifact pattern of this job's identity (see `artifact_pins_identity`).
/// Reused only when every pattern has a fresh file; the answer is the newest
/// fresh file of each. None: run it.
pub fn reusable(found: &[Vec<FoundArtifact>], rule: ReuseRule, now: Millis) -> Option<Vec<String>> {
    if found.is_empty() || rule.within_ms <= 0 {
        return None;
    }
    let fresh =
        |f: &&FoundArtifact| now - f.modified <= rule.within_ms && rule.not_before.is_none_or(|t| f.modified >= t);
    found
        .iter()
        .map(|fs| fs.iter().filter(fresh).max_by(|a, b| (a.modified, &a.name).cmp(&(b.modified, &b.name))))
        .map(|f| f.map(|f| f.name.clone()))
        .collect()
}
