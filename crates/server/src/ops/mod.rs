//! The ops of docs/protocol.md: the dispatcher, which reads each op's row of
//! the op table (roster check) and calls the op's module.

pub(crate) mod audit;
pub(crate) mod creds;
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

use crate::ctx::{Ctx, OpError, OpResult};
use crate::store::{Read, P};
use pcmail_core::answers::{Answer, HelloAnswer, MarkAnswer};
use pcmail_core::op_table::OpKind;
use pcmail_core::protocol::Op;
use pcmail_core::ErrorCode;
use serde_json::{Map, Value};

/// The reads [`dispatch`] is sure to make for `op`, to send ahead on
/// PostgreSQL (`Db::prefetch`): the roster check, and what a poll that
/// carries nothing to apply reads (one that does writes first, and its
/// reads would be read again after the write). `authenticated`: the
/// caller's row comes with its credential check ([`Ctx::facts`]), so what
/// it holds is not read again.
pub(crate) fn reads_ahead<'a>(op: &Op, pc: &'a str, authenticated: bool) -> Vec<Read<'a>> {
    let mut reads = Vec::new();
    if op.spec().on_roster && !authenticated {
        reads.push(Read::new(roster::LABEL_BINDING_SQL, vec![P::Text(pc)]));
    }
    if let Op::Poll(a) = op {
        if a.confirm.is_empty() && a.marks.is_empty() {
            reads.extend(poll::reads_ahead(pc, a, authenticated));
        }
    }
    reads
}

/// Runs the op; its answer is the object of fields beside `ok` and `now`.
pub(crate) fn dispatch(ctx: &mut Ctx<'_>, op: &Op) -> OpResult<Map<String, Value>> {
    if op.spec().on_roster {
        require_on_roster(ctx)?;
    }
    let kind = op.kind();
    match op {
        Op::Hello => answer(kind, hello(ctx)),
        Op::RosterGet => answer(kind, roster::get(ctx)),
        Op::RosterSet { label, hostname, number, claim, replace } => {
            let claim = match (claim, ctx.cred) {
                (true, Some(cred)) => Some(roster::Claim { cred, replace: *replace }),
                _ => None,
            };
            answer(kind, roster::set(ctx, label, hostname, *number, claim))
        }
        Op::RosterRemove { label } => answer(kind, roster::remove(ctx, label)),
        Op::Enrol { label, hostname, code, expires_in } => {
            answer(kind, creds::enrol(ctx, label, hostname.as_deref(), code, *expires_in))
        }
        Op::Join { code, hostname } => answer(kind, creds::join(ctx, code, hostname)),
        Op::Revoke { label } => answer(kind, creds::revoke(ctx, label)),
        Op::Rotate { new_cred } => answer(kind, creds::rotate(ctx, new_cred)),
        Op::RequireCredentials { on } => answer(kind, creds::require_credentials(ctx, *on)),
        Op::AuditLog { limit } => answer(kind, creds::log(ctx, *limit)),
        Op::Send { mail } => answer(kind, send::send(ctx, mail)),
        Op::Poll(args) => answer(kind, poll::poll(ctx, args)),
        Op::Mark { marks } => answer(kind, mark::apply_marks(ctx, marks).map(|results| MarkAnswer { results })),
        Op::Status { ids } => answer(kind, status::status(ctx, ids)),
        Op::Sweep => answer(kind, crate::sweep::sweep(ctx)),
        Op::Alerts { open_only } => answer(kind, crate::sweep::list_alerts(ctx, *open_only)),
        Op::LeaseClaim(c) => answer(kind, lease::claim(ctx, c)),
        Op::LeaseRelease(r) => answer(kind, lease::release(ctx, r)),
        Op::LeaseList(a) => answer(kind, lease::list(ctx, a)),
        Op::LeaseCheck { resource, fence } => answer(kind, lease::check(ctx, resource, *fence)),
        Op::JobSubmit(a) => answer(kind, job::submit(ctx, a)),
        Op::JobStatus { job_id } => answer(kind, job::status(ctx, job_id)),
        Op::JobList(a) => answer(kind, job::list(ctx, a)),
        Op::JobCancel(a) => answer(kind, job::cancel(ctx, a)),
        Op::JobStart(a) => answer(kind, job::start(ctx, a)),
        Op::JobReport(a) => answer(kind, job::report(ctx, a)),
        Op::NameTake { name, session, live } => answer(kind, sessions::take(ctx, name, session, live.as_deref())),
        Op::Who => answer(kind, sessions::who(ctx)),
    }
}

/// The answer's fields; the answer type must be the one for this op.
fn answer<A: Answer>(kind: OpKind, a: OpResult<A>) -> OpResult<Map<String, Value>> {
    debug_assert!(A::OPS.contains(&kind), "{} answered with another op's type", kind.name());
    match serde_json::to_value(a?) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(OpError::proto(ErrorCode::Internal, "an answer that is not an object")),
        Err(e) => Err(OpError::proto(ErrorCode::Internal, format!("answer not serialisable: {e}"))),
    }
}

fn hello(ctx: &Ctx<'_>) -> OpResult<HelloAnswer> {
    Ok(HelloAnswer {
        server: "pcmail-rust".into(),
        protocol: pcmail_core::PROTOCOL_VERSION,
        roster_version: roster::version(ctx)?,
        features: Some(pcmail_core::protocol::FEATURES.iter().map(|f| f.to_string()).collect()),
        // How this caller got in (`credential`, `token` = an old PC on the
        // shared token, `admin`, `open`): doctor says which.
        auth: Some(ctx.caller.as_str().into()),
        require_credentials: crate::auth::require_credentials(ctx.tx)?,
        tls_fingerprint: None,
        insecure_http: false,
    })
}

/// The caller must be on the roster (its credential was checked before the
/// op, `crate::auth`); a roster that cannot be read fails closed.
fn require_on_roster(ctx: &Ctx<'_>) -> OpResult<()> {
    let on_roster = match ctx.facts {
        Some(row) => row.on_roster,
        None => roster::label_binding(ctx.tx, ctx.pc)
            .map_err(|e| roster::unreadable(OpError::Db(e), "delivered"))?
            .is_some(),
    };
    if on_roster {
        return Ok(());
    }
    Err(OpError::proto(
        ErrorCode::UnknownPc,
        format!("{:?} is not on the roster (register it with roster.set)", ctx.pc),
    ))
}
