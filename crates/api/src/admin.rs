//! The admin's per-PC credential commands (`pcmail roster add` with a
//! join code, `roster revoke`, `roster log`, `roster require-credentials`)
//! and `pcmail token rotate`: one function each, shared by the CLI and the
//! MCP tools. Each asks the server's `hello` first: a server without per-PC
//! credentials is refused at once (exit 5, `unsupported`).

use crate::{features, optional_not_null, ApiError, Result, RosterAddArgs};
use pcmail_client::{Client, ClientError};
use pcmail_core::protocol::{Op, FEATURE_CREDENTIALS};
use pcmail_local::config::ServerConfig;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Exit 5 at once on a server without per-PC credentials: the feature list says so, no
/// request is tried and guessed from its failure.
pub fn require_credentials_feature(client: &Client) -> Result<()> {
    let hello = features::hello(client)?;
    features::require(Some(FEATURE_CREDENTIALS), hello.features.as_deref())
}

fn has_credentials(client: &Client) -> Result<bool> {
    let hello = features::hello(client)?;
    Ok(hello.features.is_some_and(|f| f.iter().any(|x| x == FEATURE_CREDENTIALS)))
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = optional_not_null)]
pub struct RosterEnrolArgs {
    /// The new PC's label: lower-case a-z 0-9 . _ - (max 40).
    pub label: String,
    /// Its hostname (needed on the embedded default or a server without credentials, where the PC is added directly).
    #[serde(default)]
    pub hostname: Option<String>,
    /// A working number: adds the PC directly (no join code).
    #[serde(default)]
    pub number: Option<i64>,
    /// How long the join code stays valid (a duration up to 30d; default 24h).
    #[serde(default)]
    pub expires: Option<String>,
}

/// What `roster add` did.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum RosterEnrolResult {
    /// A one-time join code for the new PC (`pcmail init --join CODE --server SERVER`).
    JoinCode {
        label: String,
        code: String,
        #[serde(rename = "expiresAt")]
        expires_at: i64,
        /// The server's URL, as the new PC gives it to `init --join`.
        server: String,
        /// The SHA-256 of the server's TLS certificate, carried in the code (the new PC pins it); None on plain HTTP.
        #[serde(rename = "tlsFingerprint")]
        tls_fingerprint: Option<String>,
    },
    /// The embedded default, an older server or a given number: a plain
    /// roster entry (the server's answer, with the roster version).
    Added(Value),
}

/// `roster add`: on a server with per-PC credentials, a one-time join code
/// for the label (printed once, stored nowhere); on the embedded default, a
/// server without credentials, or with `number`, a plain roster entry.
pub fn roster_enrol(client: &mut Client, a: &RosterEnrolArgs) -> Result<RosterEnrolResult> {
    let embedded = matches!(client.config.server, ServerConfig::Embedded { .. });
    if embedded || a.number.is_some() || !has_credentials(client)? {
        let Some(hostname) = a.hostname.clone() else {
            if embedded || a.number.is_some() {
                return Err(ClientError::Invalid("--hostname is needed to add a PC directly".into()).into());
            }
            // This server has no join codes (an older pcmail serve or gas deployment): exit 5.
            require_credentials_feature(client)?;
            return Err(ApiError::Unsupported { feature: FEATURE_CREDENTIALS.into() });
        };
        // A bad label is the server's bad_request (exit 5).
        let r = crate::roster_add(client, &RosterAddArgs { label: a.label.clone(), hostname, number: a.number })?;
        return Ok(RosterEnrolResult::Added(r));
    }
    let expires = a.expires.as_deref().unwrap_or("24h");
    let expires_in = match crate::parse_duration("--expires", expires)? {
        ms if ms <= pcmail_core::auth::JOIN_CODE_MAX_MS => ms,
        _ => return Err(ClientError::Invalid(format!("--expires {expires:?}: a duration up to 30d (e.g. 24h)")).into()),
    };
    let (code, expires_at) = pcmail_client::creds::enrol(client, &a.label, a.hostname.as_deref(), expires_in)?;
    Ok(RosterEnrolResult::JoinCode {
        label: a.label.clone(),
        code: code.to_string(),
        expires_at,
        server: client.config.server.url().unwrap_or("URL").to_string(),
        tls_fingerprint: code.fingerprint.clone(),
    })
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RevokeArgs {
    /// The PC whose credential stops working (its mail waits for a PC re-enrolled under the label).
    pub label: String,
}

/// `roster revoke`: the server's answer (`changed`: false when it already was).
pub fn revoke(client: &mut Client, a: &RevokeArgs) -> Result<Value> {
    require_credentials_feature(client)?;
    Ok(client.transport.call(&Op::Revoke { label: a.label.clone() }).map_err(ClientError::from)?)
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct RequireCredentialsArgs {
    /// false: accept the shared token again for PC operations (the CLI's --off).
    #[serde(default = "yes")]
    pub on: bool,
}

fn yes() -> bool {
    true
}

/// `roster require-credentials [--off]`: the server's answer (`unbound`:
/// PCs still on the shared token, refused until enrolled).
pub fn require_credentials(client: &mut Client, a: &RequireCredentialsArgs) -> Result<Value> {
    require_credentials_feature(client)?;
    Ok(client.transport.call(&Op::RequireCredentials { on: a.on }).map_err(ClientError::from)?)
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = optional_not_null)]
pub struct AuditLogArgs {
    /// How many entries, newest first (1–500; default 50).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// `roster log`: the audit log (enrol, join, revoke, rotate, roster changes), newest first.
pub fn audit_log(client: &mut Client, a: &AuditLogArgs) -> Result<Value> {
    require_credentials_feature(client)?;
    let limit = a.limit.unwrap_or(50).clamp(1, 500);
    Ok(client.transport.call(&Op::AuditLog { limit }).map_err(ClientError::from)?)
}

#[derive(Debug, Clone, Serialize)]
pub struct RotateResult {
    pub rotated: bool,
    pub label: String,
}

/// `token rotate`: a new credential for this PC (in the OS keyring); the old one stops working.
pub fn token_rotate(client: &mut Client) -> Result<RotateResult> {
    require_credentials_feature(client)?;
    pcmail_client::creds::rotate(client)?;
    Ok(RotateResult { rotated: true, label: client.config.label.clone() })
}
