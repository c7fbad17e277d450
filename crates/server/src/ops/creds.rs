//! Per-PC credentials: join codes, revocation, rotation, the
//! switch that retires the shared token, and the audit log of admin actions.
//! Secrets never reach the database: only SHA-256 of each.

use super::audit::audit;
use super::{job_state, roster};
use crate::ctx::{Ctx, OpError, OpResult};
use crate::store::p;
use crate::store::Optional;
use pcmail_core::answers::{
    AuditEntry, AuditLogAnswer, EnrolAnswer, JoinAnswer, RequireCredentialsAnswer, RevokeAnswer, RotateAnswer,
};
use pcmail_core::op_table::News;
use pcmail_core::protocol::credential_hash;
use pcmail_core::{ErrorCode, Millis};

/// `roster.enrol`: stores the hash of a join code the admin's client made.
/// The same code again (a retry) is answered as before; the PC need not be
/// on the roster yet (it is added at `join` when no hostname is given now).
pub(crate) fn enrol(
    ctx: &mut Ctx<'_>,
    label: &str,
    hostname: Option<&str>,
    code: &str,
    expires_in: Millis,
) -> OpResult<EnrolAnswer> {
    let hash = credential_hash(code);
    let existing: Option<(String, Millis)> = ctx
        .tx
        .prepare_cached("SELECT label, expires_at FROM join_code WHERE hash = ?1")?
        .query_row(p![&hash], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    if let Some((l, expires_at)) = existing {
        if l != label {
            return Err(OpError::proto(
                ErrorCode::Conflict,
                "that join code is already issued for another label; make a new one",
            ));
        }
        return Ok(EnrolAnswer { label: label.to_string(), expires_at, existing: true, tls_fingerprint: None });
    }
    if let Some(h) = hostname {
        // Added to the roster now, so mail can be sent to it before it joins.
        let on_roster = roster::label_binding(ctx.tx, label)?.is_some();
        if !on_roster {
            roster::set(ctx, label, h, None, None)?;
        }
    }
    let expires_at = ctx.now + expires_in;
    ctx.tx
        .prepare_cached(
            "INSERT INTO join_code (hash, label, hostname, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(p![hash, label, hostname, ctx.now, expires_at])?;
    audit(ctx, "enrol", label, Some(&format!("join code expires at {}", pcmail_core::present::utc_time(expires_at))))?;
    Ok(EnrolAnswer { label: label.to_string(), expires_at, existing: false, tls_fingerprint: None })
}

/// `join`: a join code, once, for the envelope's `cred`. The same PC
/// retrying (same credential) is answered ok; anyone else after it is not.
pub(crate) fn join(ctx: &mut Ctx<'_>, code: &str, hostname: &str) -> OpResult<JoinAnswer> {
    let cred = ctx.cred.ok_or_else(|| OpError::Proto(pcmail_core::ProtoError::field("cred", "join needs \"cred\"")))?;
    let cred_hash = credential_hash(cred);
    let row: Option<(String, Option<String>, Millis, Option<String>)> = ctx
        .tx
        .prepare_cached("SELECT label, hostname, expires_at, used_by_hash FROM join_code WHERE hash = ?1")?
        .query_row(p![credential_hash(code)], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .optional()?;
    let Some((label, code_hostname, expires_at, used_by)) = row.filter(|r| r.0 == ctx.pc) else {
        return Err(OpError::proto(
            ErrorCode::JoinCodeInvalid,
            "no such join code for this label: ask the admin for one (`pcmail roster add LABEL`)",
        ));
    };
    match used_by {
        Some(h) if h == cred_hash => {
            let revoked: bool = ctx
                .tx
                .prepare_cached("SELECT revoked_at IS NOT NULL FROM pc WHERE label = ?1")?
                .query_row(p![&label], |r| r.get(0))
                .optional()?
                .unwrap_or(false);
            pcmail_core::auth::join_replay(&label, revoked).map_err(OpError::Proto)?;
            return Ok(JoinAnswer { label, bound: true, existing: true, version: roster::version(ctx)? });
        }
        Some(_) => {
            return Err(OpError::proto(
                ErrorCode::JoinCodeUsed,
                "this join code was already used: ask the admin for a new one",
            ))
        }
        None if expires_at <= ctx.now => {
            return Err(OpError::proto(
                ErrorCode::JoinCodeExpired,
                "this join code has expired: ask the admin for a new one",
            ))
        }
        None => {}
    }
    let on_roster = roster::label_binding(ctx.tx, &label)?.is_some();
    let version = if on_roster {
        // Re-enrolled (after a revoke, or a new machine): the number stays;
        // the hostname follows the new machine unless another PC has it.
        let wanted = code_hostname.as_deref().unwrap_or(hostname);
        match roster::set(ctx, &label, wanted, None, None) {
            Ok(_) => {}
            Err(OpError::Proto(p)) if p.code == ErrorCode::Conflict => {}
            Err(other) => return Err(other),
        }
        roster::version(ctx)?
    } else {
        roster::set(ctx, &label, code_hostname.as_deref().unwrap_or(hostname), None, None)?.version
    };
    ctx.tx
        .prepare_cached("UPDATE pc SET cred_hash = ?2, revoked_at = NULL WHERE label = ?1")?
        .execute(p![label, cred_hash])?;
    ctx.tx.prepare_cached("UPDATE join_code SET used_at = ?2, used_by_hash = ?3 WHERE hash = ?1")?.execute(p![
        credential_hash(code),
        ctx.now,
        cred_hash
    ])?;
    audit(ctx, "join", &label, None)?;
    ctx.wake(News::Mail, label.clone());
    Ok(JoinAnswer { label, bound: true, existing: false, version })
}

/// `roster.revoke`: the PC's next request answers `revoked`; its row stays,
/// so mail to it is kept `new` for a PC re-enrolled under the label.
pub(crate) fn revoke(ctx: &mut Ctx<'_>, label: &str) -> OpResult<RevokeAnswer> {
    let changed = ctx
        .tx
        .prepare_cached("UPDATE pc SET revoked_at = ?2 WHERE label = ?1 AND revoked_at IS NULL")?
        .execute(p![label, ctx.now])?
        > 0;
    if !changed && roster::label_binding(ctx.tx, label)?.is_none() {
        return Err(OpError::proto(ErrorCode::UnknownPc, format!("{label:?} is not on the roster")));
    }
    // Its unused join codes go too: a revoke must not leave a way back in.
    ctx.tx.prepare_cached("DELETE FROM join_code WHERE label = ?1 AND used_at IS NULL")?.execute(p![label])?;
    let jobs_cancelled = if changed { job_state::cancel_queued_for_revoked(ctx, label)? } else { 0 };
    if changed {
        audit(ctx, "revoke", label, None)?;
    }
    Ok(RevokeAnswer { revoked: true, changed, jobs_cancelled })
}

/// `rotate`: the PC's credential becomes `new_cred` (its client stored it
/// first). Mail and marks belong to the label, so nothing in flight is lost.
pub(crate) fn rotate(ctx: &mut Ctx<'_>, new_cred: &str) -> OpResult<RotateAnswer> {
    let hash = credential_hash(new_cred);
    let changed = ctx
        .tx
        .prepare_cached("UPDATE pc SET cred_hash = ?2 WHERE label = ?1 AND (cred_hash IS NULL OR cred_hash <> ?2)")?
        .execute(p![ctx.pc, hash])?
        > 0;
    if changed {
        audit(ctx, "rotate", ctx.pc, None)?;
    }
    Ok(RotateAnswer { rotated: true, changed })
}

/// `roster.requireCredentials`: from now on (or no longer) the shared token
/// does not act as a PC. Answers the labels still without a credential.
pub(crate) fn require_credentials(ctx: &mut Ctx<'_>, on: bool) -> OpResult<RequireCredentialsAnswer> {
    let changed = ctx
        .tx
        .prepare_cached("UPDATE meta SET value = ?1 WHERE key = 'require_credentials' AND value <> ?1")?
        .execute(p![i64::from(on)])?
        > 0;
    if changed {
        audit(ctx, if on { "require-credentials" } else { "allow-shared-token" }, "*", None)?;
    }
    let mut stmt =
        ctx.tx.prepare_cached("SELECT label FROM pc WHERE cred_hash IS NULL AND revoked_at IS NULL ORDER BY number")?;
    let unbound = stmt.query_map(p![], |r| r.get::<_, String>(0))?.collect::<crate::store::DbResult<Vec<_>>>()?;
    Ok(RequireCredentialsAnswer { require_credentials: on, changed, unbound })
}

/// `roster.log`: admin actions, newest first.
pub(crate) fn log(ctx: &mut Ctx<'_>, limit: usize) -> OpResult<AuditLogAnswer> {
    let mut stmt =
        ctx.tx.prepare_cached("SELECT seq, at, by, action, label, detail FROM audit ORDER BY seq DESC LIMIT ?1")?;
    let entries = stmt
        .query_map(p![limit as i64], |r| {
            Ok(AuditEntry {
                seq: r.get(0)?,
                at: r.get(1)?,
                by: r.get(2)?,
                action: r.get(3)?,
                label: r.get(4)?,
                detail: r.get(5)?,
            })
        })?
        .collect::<crate::store::DbResult<Vec<_>>>()?;
    Ok(AuditLogAnswer { entries })
}

/// A failed `join` (its own transaction: the op's was rolled back): counted
/// per label and per peer, in `roster log`, and past a limit answered
/// `rate_limited` (`pcmail_core::auth::judge_join_failure`). Every label
/// string is counted the same way, on the roster or not, so a known label
/// and an unknown one answer alike. `peer` is the address as the log shows
/// it and `peer_key` what the per-peer limit counts by.
pub(crate) fn refused_join(
    tx: &dyn crate::store::Db,
    now: Millis,
    label: &str,
    peer: &str,
    peer_key: &str,
    refusal: &pcmail_core::ProtoError,
) -> OpResult<pcmail_core::ProtoError> {
    use pcmail_core::auth::{self as a, JoinFailure};
    tx.prepare_cached("DELETE FROM join_attempt WHERE window_start <= ?1")?.execute(p![now - a::JOIN_WINDOW_MS])?;
    // (failures so far, when the window started, the audit entry that counts refusals)
    let window = |key: &str| -> crate::store::DbResult<(i64, Millis, Option<i64>)> {
        Ok(tx
            .prepare_cached("SELECT failures, window_start, audit_seq FROM join_attempt WHERE key = ?1")?
            .query_row(p![key], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()?
            .unwrap_or((0, now, None)))
    };
    let count = |key: &str, seq: Option<i64>| -> crate::store::DbResult<()> {
        tx.prepare_cached(
            "INSERT INTO join_attempt (key, window_start, failures, audit_seq) VALUES (?1, ?2, 1, ?3)
             ON CONFLICT (key) DO UPDATE SET failures = join_attempt.failures + 1",
        )?
        .execute(p![key, now, seq])?;
        Ok(())
    };
    let (label_key, peer_bucket) = (format!("label:{label}"), format!("peer:{peer_key}"));
    let (label_failures, label_since, _) = window(&label_key)?;
    let (peer_failures, peer_since, _) = window(&peer_bucket)?;
    count(&label_key, None)?;
    count(&peer_bucket, None)?;
    let verdict = a::judge_join_failure(label_failures, peer_failures);
    let (entry_key, entry_label, answer) = match verdict {
        JoinFailure::Logged => (None, label, refusal.clone()),
        JoinFailure::PeerLimited => {
            (Some(format!("refused:peer:{peer_key}")), "*", a::join_rate_limited(peer_since + a::JOIN_WINDOW_MS - now))
        }
        JoinFailure::LabelLimited => {
            (Some(format!("refused:label:{label}")), label, a::join_rate_limited(label_since + a::JOIN_WINDOW_MS - now))
        }
    };
    let insert_audit = |action: &str, label: &str, detail: &str| -> crate::store::DbResult<i64> {
        tx.prepare_cached(
            "INSERT INTO audit (at, by, action, label, detail) VALUES (?1, ?2, ?3, ?4, ?5) RETURNING seq",
        )?
        .query_row(p![now, peer, action, label, detail], |r| r.get(0))
    };
    let update_audit = |seq: i64, detail: &str| -> crate::store::DbResult<()> {
        tx.prepare_cached("UPDATE audit SET detail = ?2 WHERE seq = ?1")?.execute(p![seq, detail])?;
        Ok(())
    };
    // A window's entry that counts refusals is updated in place: a flood adds one row, not one each.
    if let Some(key) = &entry_key {
        let (refused, _, seq) = window(key)?;
        if let Some(seq) = seq {
            update_audit(seq, &a::join_refused_detail(verdict, refused + 1, now, label, peer))?;
            count(key, Some(seq))?;
            return Ok(answer);
        }
    }
    // A new row, unless the window's budget of rows is spent: then one entry counts the rest.
    let (rows, _, _) = window(a::JOIN_ROWS_KEY)?;
    if rows < a::JOIN_AUDIT_ROWS_PER_WINDOW {
        count(a::JOIN_ROWS_KEY, None)?;
        match &entry_key {
            None => {
                insert_audit("join-failed", entry_label, refusal.code.as_str())?;
            }
            Some(key) => {
                let seq =
                    insert_audit("join-throttled", entry_label, &a::join_refused_detail(verdict, 1, now, label, peer))?;
                count(key, Some(seq))?;
            }
        }
        return Ok(answer);
    }
    let (overflowed, _, seq) = window(a::JOIN_OVERFLOW_KEY)?;
    let detail = a::join_overflow_detail(overflowed + 1, now, label, peer);
    match seq {
        Some(seq) => update_audit(seq, &detail)?,
        None => {
            let seq = insert_audit("join-throttled", "*", &detail)?;
            count(a::JOIN_OVERFLOW_KEY, Some(seq))?;
            return Ok(answer);
        }
    }
    count(a::JOIN_OVERFLOW_KEY, seq)?;
    Ok(answer)
}
