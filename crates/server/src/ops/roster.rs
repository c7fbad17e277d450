//! roster.get / roster.set / roster.remove: working number ⇔ label ⇔ hostname.

use super::{audit, names};
use crate::ctx::{Ctx, OpError, OpResult};
use crate::store::p;
use crate::store::Optional;
use pcmail_core::answers::{RosterAnswer, RosterRemoveAnswer, RosterSetAnswer};
use pcmail_core::{ErrorCode, Pc};

/// A roster that cannot be read: a database that is busy or away (another
/// writer, a restart) answers `busy` like any other transient store failure;
/// anything else fails closed with `roster_unavailable`.
pub(crate) fn unreadable(e: OpError, what: &str) -> OpError {
    match e {
        OpError::Db(db) if db.is_transient() => OpError::Db(db),
        _ => OpError::proto(ErrorCode::RosterUnavailable, format!("the roster cannot be read; nothing was {what}")),
    }
}

pub(crate) const VERSION_SQL: &str = "SELECT value FROM meta WHERE key = 'roster_version'";

pub(crate) fn version(ctx: &Ctx<'_>) -> OpResult<i64> {
    Ok(ctx.tx.prepare_cached(VERSION_SQL)?.query_row(p![], |r| r.get(0))?)
}

fn bump_version(ctx: &Ctx<'_>) -> OpResult<i64> {
    ctx.tx.prepare_cached("UPDATE meta SET value = value + 1 WHERE key = 'roster_version'")?.execute(p![])?;
    version(ctx)
}

/// The whole roster, sorted by number.
pub(crate) fn load_all(ctx: &Ctx<'_>) -> OpResult<Vec<Pc>> {
    let mut stmt = ctx.tx.prepare_cached("SELECT number, label, hostname FROM pc ORDER BY number")?;
    let rows = stmt.query_map(p![], |r| Ok(Pc { number: r.get(0)?, label: r.get(1)?, hostname: r.get(2)? }))?;
    Ok(rows.collect::<crate::store::DbResult<Vec<_>>>()?)
}

pub(crate) fn get(ctx: &mut Ctx<'_>) -> OpResult<RosterAnswer> {
    Ok(RosterAnswer { pcs: load_all(ctx)?, version: version(ctx)? })
}

/// `roster.set` with `claim`: bind the label to this credential.
pub(crate) struct Claim<'a> {
    pub cred: &'a str,
    /// Overwrite another installation's binding (it loses access). Only the
    /// admin secret gets here with it (`pcmail_core::auth::op_class`).
    pub replace: bool,
}

pub(crate) fn set(
    ctx: &mut Ctx<'_>,
    label: &str,
    hostname: &str,
    number: Option<i64>,
    claim: Option<Claim<'_>>,
) -> OpResult<RosterSetAnswer> {
    // Checked before anything changes: a refused claim leaves the row as it was.
    if let Some(c) = &claim {
        if let Some(Some(bound)) = label_binding(ctx.tx, label)? {
            if !c.replace && !cred_matches(Some(&bound), Some(c.cred)) {
                return Err(label_taken(label));
            }
        }
    }
    let pcs = load_all(ctx)?;
    let current = pcs.iter().find(|p| p.label == label);
    if current.is_none() {
        refuse_label_equal_to_name(ctx, label)?;
    }
    if let Some(other) = pcs.iter().find(|p| p.label != label && p.hostname.eq_ignore_ascii_case(hostname)) {
        return Err(OpError::proto(ErrorCode::Conflict, format!("hostname {hostname:?} belongs to {:?}", other.label)));
    }
    if let Some(n) = number {
        if let Some(other) = pcs.iter().find(|p| p.label != label && p.number == n) {
            return Err(OpError::proto(ErrorCode::Conflict, format!("number {n} belongs to {:?}", other.label)));
        }
    }
    let (pc, changed) = match current {
        Some(cur) => {
            let wanted =
                Pc { number: number.unwrap_or(cur.number), label: label.to_string(), hostname: hostname.to_string() };
            let changed = &wanted != cur;
            if changed {
                ctx.tx.prepare_cached("UPDATE pc SET number = ?2, hostname = ?3 WHERE label = ?1")?.execute(p![
                    label,
                    wanted.number,
                    wanted.hostname
                ])?;
            }
            (wanted, changed)
        }
        None => {
            // The next free number is one past the highest, so a removed PC's
            // number in the middle is not silently handed to another machine.
            let n = number.unwrap_or_else(|| pcs.iter().map(|p| p.number).max().unwrap_or(0) + 1);
            ctx.tx
                .prepare_cached("INSERT INTO pc (label, number, hostname) VALUES (?1, ?2, ?3)")?
                .execute(p![label, n, hostname])?;
            (Pc { number: n, label: label.to_string(), hostname: hostname.to_string() }, true)
        }
    };
    let version = if changed { bump_version(ctx)? } else { version(ctx)? };
    if changed && ctx.caller == pcmail_core::auth::Caller::Admin {
        audit::audit(ctx, "roster.set", label, Some(&format!("number {} hostname {}", pc.number, pc.hostname)))?;
    }
    let mut out = RosterSetAnswer { pc, changed, version, bound: None };
    if let Some(c) = claim {
        // Idempotent: the same credential writes the same hash. A replace
        // (admin) also lifts a revoke: that label has a PC again.
        let hash = pcmail_core::protocol::credential_hash(c.cred);
        let rebound = ctx
            .tx
            .prepare_cached("UPDATE pc SET cred_hash = ?2, revoked_at = NULL WHERE label = ?1 AND (cred_hash IS NULL OR cred_hash <> ?2 OR revoked_at IS NOT NULL)")?
            .execute(p![label, hash])?
            > 0;
        if rebound {
            audit::audit(ctx, if c.replace { "replace" } else { "claim" }, label, None)?;
        }
        out.bound = Some(true);
    }
    Ok(out)
}

pub(crate) fn remove(ctx: &mut Ctx<'_>, label: &str) -> OpResult<RosterRemoveAnswer> {
    let removed = ctx.tx.prepare_cached("DELETE FROM pc WHERE label = ?1")?.execute(p![label])? > 0;
    let version = if removed { bump_version(ctx)? } else { version(ctx)? };
    if removed {
        ctx.tx.prepare_cached("DELETE FROM join_code WHERE label = ?1 AND used_at IS NULL")?.execute(p![label])?;
        audit::audit(ctx, "roster.remove", label, None)?;
    }
    Ok(RosterRemoveAnswer { removed, version })
}

/// `None`: the label is not on the roster; `Some(None)`: on it, not bound;
/// `Some(Some(hash))`: bound to the credential with that SHA-256 hex.
pub(crate) fn label_binding(tx: &dyn crate::store::Db, label: &str) -> crate::store::DbResult<Option<Option<String>>> {
    tx.prepare_cached(LABEL_BINDING_SQL)?.query_row(p![label], |r| r.get(0)).optional()
}

pub(crate) const LABEL_BINDING_SQL: &str = "SELECT cred_hash FROM pc WHERE label = ?1";

/// An unbound label accepts anyone (old clients; the next claim binds it);
/// a bound one only its credential, compared in constant time.
pub(crate) fn cred_matches(bound_hash: Option<&str>, cred: Option<&str>) -> bool {
    use subtle::ConstantTimeEq;
    match (bound_hash, cred) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(h), Some(c)) => bool::from(pcmail_core::protocol::credential_hash(c).as_bytes().ct_eq(h.as_bytes())),
    }
}

pub(crate) fn label_taken(label: &str) -> OpError {
    OpError::proto(
        ErrorCode::LabelTaken,
        format!("label {label:?} belongs to another installation: pick another label, or replace it"),
    )
}

/// `roster.set` of a new label: refused when a name is spelled so.
fn refuse_label_equal_to_name(ctx: &Ctx<'_>, label: &str) -> OpResult<()> {
    match names::holder(ctx, label)? {
        Some(h) => Err(OpError::proto(
            ErrorCode::Conflict,
            format!(
                "{label:?} is a session name (held by {}/{}); names and labels share one namespace: pick another label",
                h.pc, h.session
            ),
        )),
        None => Ok(()),
    }
}
