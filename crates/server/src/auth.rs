//! Who is calling: looks up the facts `pcmail_core::auth::authenticate`
//! decides on — the admin secret, the credential's owner, the label's entry —
//! inside the request's own transaction.

use crate::ctx::OpResult;
use crate::store::p;
use crate::store::{Db, Optional};
use pcmail_core::auth::{op_class, AuthFacts, Caller, CredFound, LabelFound};
use pcmail_core::protocol::{credential_hash, Op, Request};
use subtle::ConstantTimeEq;

/// `secret`: the admin secret; None (the embedded default) accepts anyone.
pub(crate) fn authenticate(tx: &dyn Db, secret: Option<&str>, req: &Request) -> OpResult<Caller> {
    let Some(secret) = secret else {
        return Ok(Caller::Open);
    };
    let token_given = req.token.is_some();
    let admin = req.token.as_deref().is_some_and(|t| bool::from(t.as_bytes().ct_eq(secret.as_bytes())));
    let mut cred = match req.cred.as_deref() {
        None => CredFound::Absent,
        Some(c) => find_cred(tx, &credential_hash(c), &req.pc)?,
    };
    // A rotation whose answer was lost: the retry presents the old
    // credential, which is gone; the new one (already stored) proves the PC.
    if let (CredFound::Unknown, Op::Rotate { new_cred }) = (&cred, &req.op) {
        if find_cred(tx, &credential_hash(new_cred), &req.pc)? == CredFound::Active(req.pc.clone()) {
            cred = CredFound::Active(req.pc.clone());
        }
    }
    let facts = AuthFacts {
        open: false,
        token_given,
        admin,
        cred,
        label: find_label(tx, &req.pc)?,
        require_credentials: require_credentials(tx)?,
    };
    Ok(pcmail_core::auth::authenticate(op_class(&req.op, &req.pc), &req.pc, &facts)?)
}

/// The label holding this credential hash: the caller's own when it holds
/// it (one `PCMAIL_CREDENTIAL` may serve several labels), else any.
/// Compared by index lookup of the hash, which reveals nothing of the secret.
fn find_cred(tx: &dyn Db, hash: &str, pc: &str) -> OpResult<CredFound> {
    let mut stmt =
        tx.prepare_cached("SELECT label, revoked_at FROM pc WHERE cred_hash = ?1 ORDER BY label = ?2 DESC LIMIT 1")?;
    let row: Option<(String, Option<i64>)> = stmt.query_row(p![hash, pc], |r| Ok((r.get(0)?, r.get(1)?))).optional()?;
    Ok(match row {
        None => CredFound::Unknown,
        Some((label, None)) => CredFound::Active(label),
        Some((label, Some(_))) => CredFound::Revoked(label),
    })
}

fn find_label(tx: &dyn Db, label: &str) -> OpResult<LabelFound> {
    let row: Option<(Option<String>, Option<i64>)> = tx
        .prepare_cached("SELECT cred_hash, revoked_at FROM pc WHERE label = ?1")?
        .query_row(p![label], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    Ok(match row {
        None => LabelFound::Absent,
        Some((_, Some(_))) => LabelFound::Revoked,
        Some((None, None)) => LabelFound::Unbound,
        Some((Some(_), None)) => LabelFound::Bound,
    })
}

pub(crate) fn require_credentials(tx: &dyn Db) -> OpResult<bool> {
    let v: Option<i64> = tx
        .prepare_cached("SELECT value FROM meta WHERE key = 'require_credentials'")?
        .query_row(p![], |r| r.get(0))
        .optional()?;
    Ok(v.unwrap_or(0) != 0)
}
