//! Who is calling: looks up the facts `pcmail_core::auth::authenticate`
//! decides on — the admin secret, the credential's owner, the label's entry —
//! inside the request's own transaction.

use crate::ctx::{CallerRow, OpResult};
use crate::store::p;
use crate::store::{Db, Optional, Read, P};
use pcmail_core::auth::{op_class, AuthFacts, Caller, CredFound, LabelFound};
use pcmail_core::protocol::{credential_hash, Op, Request};
use subtle::ConstantTimeEq;

/// `secret`: the admin secret; None (the embedded default) accepts anyone.
/// With the caller, what the same statement read of its own row.
pub(crate) fn authenticate(tx: &dyn Db, secret: Option<&str>, req: &Request) -> OpResult<(Caller, Option<CallerRow>)> {
    let Some(secret) = secret else {
        return Ok((Caller::Open, None));
    };
    let token_given = req.token.is_some();
    let admin = req.token.as_deref().is_some_and(|t| bool::from(t.as_bytes().ct_eq(secret.as_bytes())));
    let hash = req.cred.as_deref().map(credential_hash);
    let (cred, label, require_credentials, row) = facts_of(tx, hash.as_deref(), &req.pc)?;
    let mut cred = if hash.is_none() { CredFound::Absent } else { cred };
    // A rotation whose answer was lost: the retry presents the old
    // credential, which is gone; the new one (already stored) proves the PC.
    if let (CredFound::Unknown, Op::Rotate { new_cred }) = (&cred, &req.op) {
        if find_cred(tx, &credential_hash(new_cred), &req.pc)? == CredFound::Active(req.pc.clone()) {
            cred = CredFound::Active(req.pc.clone());
        }
    }
    let facts = AuthFacts { open: false, token_given, admin, cred, label, require_credentials };
    let caller = pcmail_core::auth::authenticate(op_class(&req.op, &req.pc), &req.pc, &facts)?;
    Ok((caller, Some(row)))
}

/// The label holding credential hash ?1: the caller's (?2) own when it
/// holds it (one `PCMAIL_CREDENTIAL` may serve several labels), else the
/// first of the others. Two index lookups: an `ORDER BY … LIMIT 1` here made
/// SQLite build two temporary b-trees on every request.
macro_rules! cred_owner {
    () => {
        "COALESCE((SELECT label FROM pc WHERE label = ?2 AND cred_hash = ?1), \
         (SELECT min(label) FROM pc WHERE cred_hash = ?1))"
    };
}

/// The label holding this credential hash (see [`cred_owner`]). Compared
/// by index lookup of the hash, which reveals nothing of the secret.
fn find_cred(tx: &dyn Db, hash: &str, pc: &str) -> OpResult<CredFound> {
    let mut stmt = tx.prepare_cached(concat!("SELECT label, revoked_at FROM pc WHERE label = ", cred_owner!()))?;
    let row: Option<(String, Option<i64>)> = stmt.query_row(p![hash, pc], |r| Ok((r.get(0)?, r.get(1)?))).optional()?;
    Ok(match row {
        None => CredFound::Unknown,
        Some((label, None)) => CredFound::Active(label),
        Some((label, Some(_))) => CredFound::Revoked(label),
    })
}

const FACTS_SQL: &str = concat!(
    "SELECT c.label, c.revoked_at, l.label, l.cred_hash, l.revoked_at, m.value, \
     l.last_poll_at, v.value, CASE WHEN EXISTS (SELECT 1 FROM name WHERE pc = ?2) THEN 1 ELSE 0 END \
     FROM (SELECT 1 AS one) AS o \
     LEFT JOIN pc AS c ON c.label = ",
    cred_owner!(),
    " LEFT JOIN pc AS l ON l.label = ?2 \
     LEFT JOIN meta AS m ON m.key = 'require_credentials' \
     LEFT JOIN meta AS v ON v.key = 'roster_version'"
);

/// The read [`authenticate`] makes for `req` under an admin secret, to send ahead.
pub(crate) fn reads_ahead<'a>(req: &'a Request, hash: Option<&'a str>) -> Read<'a> {
    Read::new(FACTS_SQL, vec![hash.map_or(P::Null, P::Text), P::Text(&req.pc)])
}

/// The three facts every authenticated request needs, in one statement
/// (on PostgreSQL each statement is a round trip): what [`find_cred`]
/// finds for `hash` (None matches nothing), the label's roster entry, and
/// `roster.requireCredentials`.
fn facts_of(tx: &dyn Db, hash: Option<&str>, pc: &str) -> OpResult<(CredFound, LabelFound, bool, CallerRow)> {
    let mut stmt = tx.prepare_cached(FACTS_SQL)?;
    type Row = (Option<String>, Option<i64>, Option<String>, Option<String>, Option<i64>, Option<i64>);
    let mut row = CallerRow::default();
    let (cred_label, cred_revoked, label, bound, revoked, require): Row = stmt.query_row(p![hash, pc], |r| {
        row = CallerRow {
            on_roster: r.get::<_, Option<String>>(2)?.is_some(),
            last_poll_at: r.get(6)?,
            roster_version: r.get(7)?,
            holds_names: r.get(8)?,
        };
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
    })?;
    let cred = match (cred_label, cred_revoked) {
        (None, _) => CredFound::Unknown,
        (Some(label), None) => CredFound::Active(label),
        (Some(label), Some(_)) => CredFound::Revoked(label),
    };
    let label = match (label, bound, revoked) {
        (None, ..) => LabelFound::Absent,
        (Some(_), _, Some(_)) => LabelFound::Revoked,
        (Some(_), None, None) => LabelFound::Unbound,
        (Some(_), Some(_), None) => LabelFound::Bound,
    };
    Ok((cred, label, require.unwrap_or(0) != 0, row))
}

pub(crate) fn require_credentials(tx: &dyn Db) -> OpResult<bool> {
    let v: Option<i64> = tx
        .prepare_cached("SELECT value FROM meta WHERE key = 'require_credentials'")?
        .query_row(p![], |r| r.get(0))
        .optional()?;
    Ok(v.unwrap_or(0) != 0)
}
