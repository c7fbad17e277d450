//! Per-PC credentials on the PC: enrolling with a join code, rotating the credential,
//! and the admin's side (making join codes). Every secret is made here, on
//! the PC, and kept in the keyring *before* it is sent, so a lost answer is
//! retried with the same secret and answered as a repeat.

use crate::sync::LABEL_CLAIMED;
use crate::token::credential;
use crate::transport::{call_as, CallError};
use crate::{Client, ClientError};
use pcmail_core::answers::{EnrolAnswer, JoinAnswer, RotateAnswer};
use pcmail_core::auth::JoinCode;
use pcmail_core::protocol::Op;
use pcmail_core::{ErrorCode, Millis};
use pcmail_local::config::{Config, Paths, ServerConfig};

/// What `init --join` did.
#[derive(Debug, Clone)]
pub struct Joined {
    pub label: String,
    pub server: String,
    /// True when the server had already taken this PC's join (a repeat).
    pub existing: bool,
    /// The server certificate's fingerprint, pinned from the code.
    pub tls_fingerprint: Option<String>,
}

fn server_url(config: &Config) -> Result<String, ClientError> {
    match &config.server {
        ServerConfig::Http { url } | ServerConfig::AppsScript { url } => Ok(url.clone()),
        ServerConfig::Embedded { .. } => {
            Err(ClientError::Invalid("the embedded server needs no enrolment (same process, same files)".into()))
        }
    }
}

/// `pcmail init --join CODE --server URL`: this PC becomes the code's label
/// on that server, with a credential made here (256 bits, in the keyring or
/// `PCMAIL_CREDENTIAL`, never in a file).
/// Several addresses: the instances of one `pcmail serve` cluster, the
/// first preferred (`failover_urls` in config.toml).
pub fn join(paths: Paths, code_text: &str, servers: &[String]) -> Result<Joined, ClientError> {
    let code = JoinCode::parse(code_text).map_err(|e| ClientError::Invalid(e.message))?;
    let mut config = Config::load(&paths)?;
    config.label = code.label.clone();
    let (server, more) =
        servers.split_first().ok_or_else(|| ClientError::Invalid("--join needs --server URL".into()))?;
    config.server =
        if server == "embedded" { ServerConfig::Embedded { db: None } } else { ServerConfig::from_url(server) };
    let url = server_url(&config)?;
    if !more.is_empty() && !matches!(config.server, ServerConfig::Http { .. }) {
        return Err(ClientError::Invalid("several --server addresses are for a pcmail serve cluster".into()));
    }
    config.failover_urls = more.to_vec();
    let all = std::iter::once(&url).chain(more.iter());
    match &code.fingerprint {
        // The certificate is pinned now, before the code is spent: the exchange itself goes over it.
        Some(fp) if all.clone().all(|u| u.starts_with("https://")) => config.tls_fingerprint = Some(fp.clone()),
        Some(_) => {
            return Err(ClientError::Invalid(format!(
                "this join code pins the server's TLS certificate, but {} is not https://: use the https:// address `pcmail serve` printed",
                all.clone().find(|u| !u.starts_with("https://")).unwrap_or(&url)
            )))
        }
        // A plain-HTTP server (loopback, or --insecure-http): nothing to pin.
        None if !url.starts_with("https://") => config.tls_fingerprint = None,
        None => {}
    }
    if config.installation.is_none() {
        config.installation = Some(pcmail_core::protocol::new_credential(&mut rand::rng())[..16].to_string());
    }
    let installation = config.installation.clone().expect("set above");
    // Kept before anything is sent: the retry of a lost answer presents it again.
    credential::for_claim(&url, &code.label, &installation)?;
    config.save(&paths)?;
    let mut client = Client::open(paths)?;
    let host = pcmail_local::config::hostname();
    let host: String = host.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')).collect();
    let host = if host.is_empty() { code.label.clone() } else { host };
    let call = |hostname: String| {
        call_as::<JoinAnswer>(client.transport.as_ref(), &Op::Join { code: code.secret.clone(), hostname })
    };
    let resp = match call(host.clone()) {
        // Another PC has this hostname (or a test runs several on one machine).
        Err(CallError::Server(p)) if p.code == ErrorCode::Conflict => call(format!("{host}.{}", code.label))?,
        other => other?,
    };
    // Bound: the poller need not claim the label with the shared token.
    let record = format!("{}\tbound", client.claim_key());
    client.store.meta_set(LABEL_CLAIMED, &record)?;
    Ok(Joined { label: code.label, server: url, existing: resp.existing, tls_fingerprint: code.fingerprint })
}

/// `pcmail token rotate`: a new credential for this PC. The new one is kept
/// (as pending) before it is sent; mail and marks belong to the label, so
/// nothing in flight is lost.
pub fn rotate(client: &mut Client) -> Result<(), ClientError> {
    let url = server_url(&client.config)?;
    let label = client.config.label.clone();
    let installation = client.installation_id()?;
    match credential::load(&url, &label, Some(&installation))? {
        None => {
            return Err(ClientError::Invalid(
                "this PC has no credential to rotate yet: its next poll makes one (or enrol it with `pcmail init --join`)".into(),
            ))
        }
        Some((_, credential::Source::Env)) => {
            return Err(ClientError::Invalid(
                "this PC's credential comes from PCMAIL_CREDENTIAL: rotating it would leave the variable stale; enrol again with a join code and a new PCMAIL_CREDENTIAL instead".into(),
            ))
        }
        Some((current, credential::Source::Keyring)) => client.transport.set_credential(Some(current)),
    }
    let new = credential::pending_rotation(&url, &label, &installation)?;
    call_as::<RotateAnswer>(client.transport.as_ref(), &Op::Rotate { new_cred: new.clone() })?;
    credential::finish_rotation(&url, &label, &installation, &new)?;
    client.transport.set_credential(Some(new));
    Ok(())
}

/// `pcmail roster add LABEL` on a server with credentials: a one-time join
/// code for that label (its secret made here, only its hash on the server).
pub fn enrol(
    client: &mut Client,
    label: &str,
    hostname: Option<&str>,
    expires_in: Millis,
) -> Result<(JoinCode, Millis), ClientError> {
    let mut code = JoinCode::new(label, &mut rand::rng(), None);
    let op = Op::Enrol {
        label: label.to_string(),
        hostname: hostname.map(str::to_string),
        code: code.secret.clone(),
        expires_in,
    };
    let a: EnrolAnswer = call_as(client.transport.as_ref(), &op)?;
    // A `pcmail serve` on TLS names its certificate: the new PC pins it from the code.
    code.fingerprint = a.tls_fingerprint.as_deref().and_then(pcmail_core::auth::parse_fingerprint);
    Ok((code, a.expires_at))
}
