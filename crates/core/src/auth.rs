//! Who may do what: the admin secret, per-PC credentials, join codes. One
//! decision function, `authenticate`, that the Rust server calls with the
//! facts it looked up; gas/Auth.js follows the same rule (its op classes are
//! checked against the op table), and the vectors in tests/protocol/
//! (`cred-*.json`) hold both to it.

use crate::error::{ErrorCode, ProtoError};
use crate::op_table::ClassRule;
use crate::protocol::Op;
use crate::Millis;

pub use crate::model::limits::{JOIN_CODE_DEFAULT_MS, JOIN_CODE_MAX_MS};
pub use crate::op_table::OpClass;
pub use crate::rules::check_join_secret;

/// Failed join attempts are counted in fixed windows of this length, per
/// label and per peer address (docs/protocol.md, "Join attempts")…
pub const JOIN_WINDOW_MS: Millis = 10 * 60 * 1000;
/// …at most this many failures for one label in a window are checked and
/// logged one by one; past it a failure is `rate_limited`…
pub const JOIN_FAILURES_PER_LABEL: i64 = 10;
/// …and at most this many from one peer (a /64 for IPv6), whatever the label.
pub const JOIN_FAILURES_PER_PEER: i64 = 30;
/// The peer failures are counted under when the server cannot see the
/// address (Apps Script): every caller there shares it, so its limit is one
/// over all labels.
pub const UNKNOWN_PEER: &str = "unknown";

/// What becomes of a failed join attempt. A right code never gets here: it
/// is checked before any limit, so no flood of wrong codes can lock the
/// rightful PC out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinFailure {
    /// Under both limits: answered with its own code, one audit entry of its own.
    Logged,
    /// Over the peer's limit: `rate_limited`, counted in one entry per peer and window.
    PeerLimited,
    /// Over the label's limit: `rate_limited`, counted in one entry per label, peer and window.
    LabelLimited,
}

/// The rule both servers apply; `*_failures` were counted in the current
/// windows before this attempt.
pub fn judge_join_failure(label_failures: i64, peer_failures: i64) -> JoinFailure {
    if peer_failures >= JOIN_FAILURES_PER_PEER {
        JoinFailure::PeerLimited
    } else if label_failures >= JOIN_FAILURES_PER_LABEL {
        JoinFailure::LabelLimited
    } else {
        JoinFailure::Logged
    }
}

/// The audit log gets at most this many rows for failed joins in a window
/// (one each under the limits, one per limit and key past them); the rest
/// of the window's failures are counted in one more.
pub const JOIN_AUDIT_ROWS_PER_WINDOW: i64 = 300;
/// The counting keys of that budget and of the entry that counts past it.
pub const JOIN_ROWS_KEY: &str = "rows:*";
pub const JOIN_OVERFLOW_KEY: &str = "refused:overflow";

/// The `detail` of a window's `join-throttled` entry for a limit.
pub fn join_refused_detail(verdict: JoinFailure, n: i64, now: Millis, label: &str, peer: &str) -> String {
    let why = match verdict {
        JoinFailure::PeerLimited => format!("over {JOIN_FAILURES_PER_PEER} failures from this address"),
        _ => format!("over {JOIN_FAILURES_PER_LABEL} failures for this label"),
    };
    format!(
        "{n} join attempt(s) refused ({why} in {} min), the last at {now} for \"{label}\" from {peer}",
        JOIN_WINDOW_MS / 60_000
    )
}

/// The `detail` of the entry that counts the failures past the window's budget of rows.
pub fn join_overflow_detail(n: i64, now: Millis, label: &str, peer: &str) -> String {
    format!(
        "{n} failed join attempt(s) not logged one by one (over {JOIN_AUDIT_ROWS_PER_WINDOW} rows in {} min), \
         the last at {now} for \"{label}\" from {peer}",
        JOIN_WINDOW_MS / 60_000
    )
}

/// The answers of `join` that count as a failed attempt (a malformed
/// request is refused before any code is looked at, and is not one).
pub fn is_join_failure(code: ErrorCode) -> bool {
    matches!(code, ErrorCode::JoinCodeInvalid | ErrorCode::JoinCodeExpired | ErrorCode::JoinCodeUsed)
}

/// The answer past a limit; `retry_after_ms` until the window that limits ends.
pub fn join_rate_limited(retry_after_ms: Millis) -> ProtoError {
    let minutes = (retry_after_ms.max(1) + 59_999) / 60_000;
    ProtoError::new(
        ErrorCode::RateLimited,
        format!(
            "too many failed join attempts for this label or from this address: try again in {minutes} min \
             (a right join code is always accepted; ask the admin for a new one if yours fails)"
        ),
    )
}

/// The class of an op sent as `pc`, from its row of the op table.
/// `roster.set` of the caller's own label (its hostname, or an old PC's
/// claim) is the PC's own business; taking a label over (`replace`) and
/// every other roster change is the admin's.
pub fn op_class(op: &Op, pc: &str) -> OpClass {
    match op.spec().class {
        ClassRule::Always(class) => class,
        ClassRule::OwnEntryOrAdmin => match op {
            Op::RosterSet { label, replace: false, .. } if label == pc => OpClass::Pc,
            _ => OpClass::Admin,
        },
    }
}

/// What the server found for the credential the caller presented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredFound {
    /// No `cred` in the envelope.
    Absent,
    /// The credential of this (not revoked) roster label.
    Active(String),
    /// The credential of this label, which the admin revoked.
    Revoked(String),
    /// A credential no label holds (never enrolled, or rotated away).
    Unknown,
}

/// The envelope label's entry on the roster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelFound {
    Absent,
    /// On the roster without a credential (an old PC on the shared token).
    Unbound,
    Bound,
    Revoked,
}

/// Everything `authenticate` decides on; the server looks each up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthFacts {
    /// No secret configured: the embedded default (same process, same files).
    pub open: bool,
    /// A `token` was sent…
    pub token_given: bool,
    /// …and it is the admin secret (compared in constant time by the caller).
    pub admin: bool,
    pub cred: CredFound,
    pub label: LabelFound,
    /// `roster.requireCredentials`: the shared token no longer acts as a PC.
    pub require_credentials: bool,
}

/// Who the request is from, once authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// The embedded default: nobody to authenticate.
    Open,
    /// The holder of the admin secret.
    Admin,
    /// The envelope's PC, proven by its own credential.
    Pc,
    /// The envelope's PC on the old shared token (migration; an unbound label).
    LegacyPc,
    /// Nobody yet: the op's join code decides.
    Joining,
}

impl Caller {
    /// How `hello` names it (`auth`): doctor tells a PC still on the shared token.
    pub fn as_str(self) -> &'static str {
        match self {
            Caller::Open => "open",
            Caller::Admin => "admin",
            Caller::Pc => "credential",
            Caller::LegacyPc => "token",
            Caller::Joining => "join",
        }
    }
}

/// The rule. Order: a wrong token, then the credential (revoked, another
/// PC's, unknown), then the op's class against what was proven.
pub fn authenticate(class: OpClass, pc: &str, f: &AuthFacts) -> Result<Caller, ProtoError> {
    if f.open {
        return Ok(Caller::Open);
    }
    let wrong_token = f.token_given && !f.admin;
    if class == OpClass::Join {
        return if wrong_token { Err(unauthorized()) } else { Ok(Caller::Joining) };
    }
    match &f.cred {
        CredFound::Revoked(_) => return Err(revoked(pc)),
        CredFound::Active(owner) if owner != pc => {
            return Err(ProtoError::new(
                ErrorCode::Forbidden,
                format!("this credential belongs to {owner:?}; it cannot act as {pc:?}"),
            ))
        }
        // The credential proves the PC; a stale token beside it does not matter.
        CredFound::Active(_) => {
            return match class {
                OpClass::Admin if f.admin => Ok(Caller::Admin),
                OpClass::Admin if wrong_token => Err(unauthorized()),
                OpClass::Admin => Err(admin_required()),
                _ => Ok(Caller::Pc),
            };
        }
        _ if wrong_token => return Err(unauthorized()),
        CredFound::Unknown if !f.admin => {
            return Err(ProtoError::new(
                ErrorCode::NotEnrolled,
                format!("this credential is not enrolled as {pc:?}: ask the admin for a join code (`pcmail roster add {pc}`), then `pcmail init --join CODE`"),
            ))
        }
        CredFound::Absent if !f.admin => return Err(unauthorized()),
        // The admin secret with no credential of its own (or an unknown one:
        // an older PC mid-claim) goes on to the shared-token rules.
        CredFound::Unknown | CredFound::Absent => {}
    }
    match class {
        OpClass::Admin | OpClass::Any => Ok(Caller::Admin),
        OpClass::Join => Ok(Caller::Joining),
        OpClass::Pc => match f.label {
            // The op answers `unknown_pc` (it comes first, as before).
            LabelFound::Absent => Ok(Caller::LegacyPc),
            LabelFound::Revoked => Err(revoked(pc)),
            LabelFound::Bound => Err(ProtoError::new(
                ErrorCode::LabelTaken,
                format!("label {pc:?} belongs to another installation: pick another label, or replace it"),
            )),
            LabelFound::Unbound if f.require_credentials => Err(ProtoError::new(
                ErrorCode::NotEnrolled,
                format!("this server no longer accepts the shared token for PC operations: enrol {pc:?} with a join code (`pcmail roster add {pc}`, then `pcmail init --join CODE`)"),
            )),
            LabelFound::Unbound => Ok(Caller::LegacyPc),
        },
    }
}

/// The refusals the CLI answers with exit 12 (not enrolled / revoked):
/// who this PC is was not accepted, whatever the op.
pub fn is_identity_refusal(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::LabelTaken
            | ErrorCode::NotEnrolled
            | ErrorCode::Revoked
            | ErrorCode::AdminRequired
            | ErrorCode::JoinCodeInvalid
            | ErrorCode::JoinCodeExpired
            | ErrorCode::JoinCodeUsed
            | ErrorCode::RateLimited
    )
}

fn unauthorized() -> ProtoError {
    ProtoError::new(ErrorCode::Unauthorized, "wrong or missing token")
}

fn revoked(pc: &str) -> ProtoError {
    ProtoError::new(
        ErrorCode::Revoked,
        format!("{pc:?} was revoked by the admin: its mail waits for a PC re-enrolled under that label (`pcmail roster add {pc}`)"),
    )
}

/// A join code replayed by the credential that used it: the same PC retrying
/// a lost answer is answered as joined, unless the admin revoked that PC since
/// (then it is told so, not "already enrolled": the spent code is no way back
/// in). Both servers apply this rule.
pub fn join_replay(label: &str, revoked: bool) -> Result<(), ProtoError> {
    if revoked {
        return Err(ProtoError::new(
            ErrorCode::Revoked,
            format!(
                "{label:?} was revoked by the admin after it joined with this code, which cannot be used again: \
                 ask the admin for a new join code (`pcmail roster add {label}`)"
            ),
        ));
    }
    Ok(())
}

pub fn admin_required() -> ProtoError {
    ProtoError::new(
        ErrorCode::AdminRequired,
        "this needs the admin secret (PCMAIL_ADMIN_TOKEN, or `pcmail token set --admin`)",
    )
}

/// The SHA-256 fingerprint of a certificate (its DER bytes): 64 lower-case
/// hex characters, as `pcmail serve` prints it, join codes carry it and a
/// PC pins it in config.toml.
pub fn cert_fingerprint(der: &[u8]) -> String {
    use sha2::Digest;
    crate::hex::lower(&sha2::Sha256::digest(der))
}

/// A fingerprint as a person may paste it (`AB:CD:…` or plain hex, any
/// case), in the form `cert_fingerprint` writes; None when it is not 32 bytes.
pub fn parse_fingerprint(s: &str) -> Option<String> {
    let hex: String = s.trim().chars().filter(|c| *c != ':').collect::<String>().to_ascii_lowercase();
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(hex)
}

/// What the admin hands to a new PC: its label, the secret and, for a
/// `pcmail serve` on TLS, the SHA-256 fingerprint of its certificate.
/// Written `pcj1:<label>:<secret>[:<fingerprint>]` (`:` is in no label).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinCode {
    pub label: String,
    pub secret: String,
    pub fingerprint: Option<String>,
}

impl JoinCode {
    pub fn new(label: &str, rng: &mut impl rand::Rng, fingerprint: Option<String>) -> JoinCode {
        let mut bytes = [0u8; 16];
        rng.fill_bytes(&mut bytes);
        JoinCode { label: label.to_string(), secret: crate::hex::lower(&bytes), fingerprint }
    }

    pub fn parse(s: &str) -> Result<JoinCode, ProtoError> {
        let bad = || {
            ProtoError::field(
                "code",
                "a join code looks like pcj1:<label>:<32 hex>[:<64 hex>] (from `pcmail roster add`)",
            )
        };
        let mut parts = s.trim().split(':');
        if parts.next() != Some("pcj1") {
            return Err(bad());
        }
        let label = parts.next().ok_or_else(bad)?.to_string();
        let secret = parts.next().ok_or_else(bad)?.to_string();
        let fingerprint = parts.next().map(str::to_string);
        if parts.next().is_some() || !crate::roster::is_valid_label(&label) || check_join_secret(&secret).is_err() {
            return Err(bad());
        }
        let fingerprint = match fingerprint {
            // Colons would split the code: only the plain 64-hex form fits.
            Some(fp) if fp.len() == 64 => Some(parse_fingerprint(&fp).ok_or_else(bad)?),
            Some(_) => return Err(bad()),
            None => None,
        };
        Ok(JoinCode { label, secret, fingerprint })
    }
}

impl std::fmt::Display for JoinCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pcj1:{}:{}", self.label, self.secret)?;
        if let Some(fp) = &self.fingerprint {
            write!(f, ":{fp}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(cred: CredFound, label: LabelFound) -> AuthFacts {
        AuthFacts { open: false, token_given: false, admin: false, cred, label, require_credentials: false }
    }

    fn code(r: Result<Caller, ProtoError>) -> Result<Caller, ErrorCode> {
        r.map_err(|e| e.code)
    }

    #[test]
    fn a_credential_acts_only_as_its_own_pc() {
        let own = facts(CredFound::Active("pc-b".into()), LabelFound::Bound);
        assert_eq!(code(authenticate(OpClass::Pc, "pc-b", &own)), Ok(Caller::Pc));
        assert_eq!(code(authenticate(OpClass::Pc, "pc-c", &own)), Err(ErrorCode::Forbidden));
        assert_eq!(code(authenticate(OpClass::Admin, "pc-b", &own)), Err(ErrorCode::AdminRequired));
        let revoked = facts(CredFound::Revoked("pc-b".into()), LabelFound::Revoked);
        assert_eq!(code(authenticate(OpClass::Any, "pc-b", &revoked)), Err(ErrorCode::Revoked));
        assert_eq!(
            code(authenticate(OpClass::Pc, "pc-b", &facts(CredFound::Unknown, LabelFound::Bound))),
            Err(ErrorCode::NotEnrolled)
        );
        assert_eq!(
            code(authenticate(OpClass::Pc, "pc-b", &facts(CredFound::Absent, LabelFound::Bound))),
            Err(ErrorCode::Unauthorized)
        );
    }

    #[test]
    fn the_shared_token_acts_as_an_unbound_pc_until_credentials_are_required() {
        let mut f = facts(CredFound::Absent, LabelFound::Unbound);
        f.token_given = true;
        f.admin = true;
        assert_eq!(code(authenticate(OpClass::Pc, "pc-a", &f)), Ok(Caller::LegacyPc));
        assert_eq!(code(authenticate(OpClass::Admin, "pc-a", &f)), Ok(Caller::Admin));
        f.label = LabelFound::Bound;
        assert_eq!(code(authenticate(OpClass::Pc, "pc-a", &f)), Err(ErrorCode::LabelTaken));
        f.label = LabelFound::Revoked;
        assert_eq!(code(authenticate(OpClass::Pc, "pc-a", &f)), Err(ErrorCode::Revoked));
        f.label = LabelFound::Unbound;
        f.require_credentials = true;
        assert_eq!(code(authenticate(OpClass::Pc, "pc-a", &f)), Err(ErrorCode::NotEnrolled));
        assert_eq!(code(authenticate(OpClass::Admin, "pc-a", &f)), Ok(Caller::Admin));
        f.admin = false;
        assert_eq!(code(authenticate(OpClass::Any, "pc-a", &f)), Err(ErrorCode::Unauthorized));
    }

    #[test]
    fn the_peer_limit_comes_first_then_the_label_limit() {
        assert_eq!(judge_join_failure(0, 0), JoinFailure::Logged);
        assert_eq!(judge_join_failure(JOIN_FAILURES_PER_LABEL - 1, JOIN_FAILURES_PER_PEER - 1), JoinFailure::Logged);
        assert_eq!(judge_join_failure(JOIN_FAILURES_PER_LABEL, 0), JoinFailure::LabelLimited);
        assert_eq!(judge_join_failure(JOIN_FAILURES_PER_LABEL, JOIN_FAILURES_PER_PEER), JoinFailure::PeerLimited);
        assert_eq!(join_rate_limited(1).code, ErrorCode::RateLimited);
        assert!(join_rate_limited(9 * 60_000 + 1).message.contains("10 min"));
        assert!(is_identity_refusal(ErrorCode::RateLimited), "the CLI exits 12, as for a wrong code");
    }

    #[test]
    fn fingerprints_are_sha256_hex_and_parse_as_pasted() {
        let fp = cert_fingerprint(b"not really DER");
        assert_eq!(fp.len(), 64);
        assert_ne!(fp, cert_fingerprint(b"another certificate"));
        let colons: Vec<String> = fp.as_bytes().chunks(2).map(|c| String::from_utf8_lossy(c).to_uppercase()).collect();
        assert_eq!(parse_fingerprint(&colons.join(":")), Some(fp.clone()));
        assert_eq!(parse_fingerprint(&fp[..62]), None);
        assert_eq!(parse_fingerprint(&format!("{}zz", &fp[..62])), None);
        let code =
            JoinCode::parse(&format!("pcj1:pc-b:0123456789abcdef0123456789abcdef:{}", fp.to_uppercase())).unwrap();
        assert_eq!(code.fingerprint, Some(fp));
    }

    #[test]
    fn join_codes_round_trip_and_refuse_garbage() {
        let c = JoinCode::new("pc-b", &mut rand::rng(), Some("ab".repeat(32)));
        assert_eq!(JoinCode::parse(&c.to_string()), Ok(c.clone()));
        let plain = JoinCode { fingerprint: None, ..c };
        assert_eq!(JoinCode::parse(&plain.to_string()), Ok(plain.clone()));
        for bad in [
            "",
            "pcj1:pc-b",
            "pcj2:pc-b:0123456789abcdef0123456789abcdef",
            "pcj1:PC:0123456789abcdef0123456789abcdef",
            "pcj1:pc-b:0123",
            "pcj1:pc-b:0123456789abcdef0123456789abcdef:abcd",
            "pcj1:pc-b:0123456789abcdef0123456789abcdef:",
        ] {
            assert!(JoinCode::parse(bad).is_err(), "{bad}");
        }
    }
}
