//! The ops of docs/protocol.md: the dispatcher, which reads each op's row of
//! the op table (roster check) and calls the op's module.

pub(crate) mod audit;
mod creds;
pub mod import;
pub(crate) mod job;
mod job_builtins;
pub(crate) mod job_state;
pub(crate) mod lease;
mod mark;
pub(crate) mod names;
mod poll;
pub(crate) mod roster;
mod send;
pub(crate) mod sessions;
pub(crate) mod status;

use crate::ctx::{fields, Ctx, OpError, OpResult};
use pcmail_core::protocol::Op;
use pcmail_core::ErrorCode;
use serde_json::{json, Map, Value};

pub(crate) fn dispatch(ctx: &mut Ctx<'_>, op: &Op) -> OpResult<Map<String, Value>> {
    if op.spec().on_roster {
        require_on_roster(ctx)?;
    }
    match op {
        Op::Hello => Ok(fields(json!({
            "server": "pcmail-rust",
            "protocol": pcmail_core::PROTOCOL_VERSION,
            "rosterVersion": roster::version(ctx)?,
            "features": pcmail_core::protocol::FEATURES,
            // How this caller got in (`credential`, `token` = an old PC on
            // the shared token, `admin`, `open`): doctor says which.
            "auth": ctx.caller.as_str(),
            "requireCredentials": crate::auth::require_credentials(ctx.tx)?,
        }))),
        Op::RosterGet => roster::get(ctx),
        Op::RosterSet { label, hostname, number, claim, replace } => {
            let claim = match (claim, ctx.cred) {
                (true, Some(cred)) => Some(roster::Claim { cred, replace: *replace }),
                _ => None,
            };
            roster::set(ctx, label, hostname, *number, claim)
        }
        Op::RosterRemove { label } => roster::remove(ctx, label),
        Op::Enrol { label, hostname, code, expires_in } => {
            creds::enrol(ctx, label, hostname.as_deref(), code, *expires_in)
        }
        Op::Join { code, hostname } => creds::join(ctx, code, hostname),
        Op::Revoke { label } => creds::revoke(ctx, label),
        Op::Rotate { new_cred } => creds::rotate(ctx, new_cred),
        Op::RequireCredentials { on } => creds::require_credentials(ctx, *on),
        Op::AuditLog { limit } => creds::log(ctx, *limit),
        Op::Send { mail } => send::send(ctx, mail),
        Op::Poll(args) => poll::poll(ctx, args),
        Op::Mark { marks } => Ok(fields(json!({"results": mark::apply_marks(ctx, marks)?}))),
        Op::Status { ids } => status::status(ctx, ids),
        Op::Sweep => crate::sweep::sweep(ctx),
        Op::Alerts { open_only } => crate::sweep::list_alerts(ctx, *open_only),
        Op::LeaseClaim(c) => lease::claim(ctx, c),
        Op::LeaseRelease(r) => lease::release(ctx, r),
        Op::LeaseList(a) => lease::list(ctx, a),
        Op::LeaseCheck { resource, fence } => lease::check(ctx, resource, *fence),
        Op::JobSubmit(a) => job::submit(ctx, a),
        Op::JobStatus { job_id } => job::status(ctx, job_id),
        Op::JobList(a) => job::list(ctx, a),
        Op::JobCancel(a) => job::cancel(ctx, a),
        Op::JobStart(a) => job::start(ctx, a),
        Op::JobReport(a) => job::report(ctx, a),
        Op::NameTake { name, session, live } => sessions::take(ctx, name, session, live.as_deref()),
        Op::Who => sessions::who(ctx),
    }
}

/// The caller must be on the roster (its credential was checked before the
/// op, `crate::auth`); a roster that cannot be read fails closed.
fn require_on_roster(ctx: &Ctx<'_>) -> OpResult<()> {
    let binding = roster::label_binding(ctx.tx, ctx.pc).map_err(|_| {
        OpError::proto(ErrorCode::RosterUnavailable, "the roster cannot be read; nothing was delivered")
    })?;
    match binding {
        None => Err(OpError::proto(
            ErrorCode::UnknownPc,
            format!("{:?} is not on the roster (register it with roster.set)", ctx.pc),
        )),
        Some(_) => Ok(()),
    }
}
