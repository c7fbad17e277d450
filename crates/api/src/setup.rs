//! Setting a PC up: `pcmail init`'s rules for the config (the label, the
//! server or cluster, the TLS pin, `--replace`), its registration right after,
//! and which OS keyring entry `pcmail token` writes.

use crate::{ApiError, Result};
use pcmail_client::{Client, ClientError};
use pcmail_local::config::{Config, Paths, ServerConfig};
use std::path::PathBuf;

/// What `pcmail init` changes; what is not given stays as it is.
#[derive(Debug, Clone, Default)]
pub struct InitArgs {
    pub label: Option<String>,
    /// `embedded`, a server URL, or several URLs of one `pcmail serve` cluster (first one first).
    pub server: Vec<String>,
    /// The SQLite file of the embedded server.
    pub embedded_db: Option<PathBuf>,
    pub poll_interval: Option<u64>,
    pub webhook: Option<String>,
    /// Take the label over from the installation that holds it.
    pub replace: bool,
    /// The SHA-256 of the https:// server's certificate, trusted with no CA.
    pub tls_fingerprint: Option<String>,
}

/// Applies `args` to this PC's config by the rules below and saves it;
/// returns the config as saved.
pub fn init_config(paths: &Paths, args: &InitArgs) -> Result<Config> {
    let mut c = Config::load(paths)?;
    let old_url = c.server.url().map(str::to_string);
    if let Some(l) = &args.label {
        if !pcmail_core::roster::is_valid_label(l) {
            return Err(ApiError::Usage(format!("label {l:?}: use lower-case a-z 0-9 . _ - (max 40)")));
        }
        c.label = l.clone();
    }
    if let Some((s, more)) = args.server.split_first() {
        c.server = if s == "embedded" {
            ServerConfig::Embedded { db: args.embedded_db.clone() }
        } else {
            ServerConfig::from_url(s)
        };
        if !more.is_empty() && !matches!(c.server, ServerConfig::Http { .. }) {
            return Err(ApiError::Usage(
                "several --server addresses are for a pcmail serve cluster (http:// or https://), not embedded or Apps Script".into(),
            ));
        }
        c.failover_urls = more.to_vec();
    } else if let Some(db) = &args.embedded_db {
        c.server = ServerConfig::Embedded { db: Some(db.clone()) };
    }
    if let Some(fp) = &args.tls_fingerprint {
        let fp = pcmail_core::auth::parse_fingerprint(fp).ok_or_else(|| {
            ApiError::Usage(format!(
                "--tls-fingerprint {fp:?}: 64 hex characters (a SHA-256, colons allowed), as `pcmail serve` prints it"
            ))
        })?;
        if !c.server.url().is_some_and(|u| u.starts_with("https://")) {
            return Err(ApiError::Usage(
                "--tls-fingerprint pins an https:// server: give --server https://HOST:PORT/api".into(),
            ));
        }
        c.tls_fingerprint = Some(fp);
    } else if c.server.url().map(str::to_string) != old_url {
        // A pin belongs to the server it was made for.
        c.tls_fingerprint = None;
    }
    if let Some(n) = args.poll_interval {
        c.poll_interval_secs = n;
    }
    if args.webhook.is_some() {
        c.notify_webhook = args.webhook.clone();
    }
    if args.replace && matches!(c.server, ServerConfig::Embedded { .. }) {
        return Err(ApiError::Usage("--replace is for a shared server; the embedded one binds no labels".into()));
    }
    c.save(paths)?;
    Ok(c)
}

/// How registering right after `init` went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registration {
    /// No server token yet: the PC registers on its first command.
    NoToken,
    /// The label is bound to this installation (taken over with `replace`).
    Bound,
    /// Registered; the server binds no labels to installations.
    Registered,
    /// The server cannot be reached now (why): the PC registers on its first poll.
    Unreachable(String),
}

/// The registration and the hostname note the server left, if any.
#[derive(Debug, Clone)]
pub struct Registered {
    pub registration: Registration,
    pub note: Option<String>,
}

/// Registers this PC (and claims its label) at once, so a label that belongs
/// to another installation is learnt now, not at the first poll.
pub fn register(paths: Paths, replace: bool) -> Result<Registered> {
    let mut client = match Client::open(paths) {
        Err(ClientError::Token(pcmail_client::token::TokenError::Missing)) if !replace => {
            return Ok(Registered { registration: Registration::NoToken, note: None });
        }
        other => other?,
    };
    let registered = client.register_self_as(replace);
    let note = match registered {
        Ok(()) => client.store.meta_get(pcmail_store::meta::HOSTNAME_NOTE).ok().flatten(),
        Err(_) => None,
    };
    let registration = match registered {
        Ok(()) if client.label_claimed() => Registration::Bound,
        Ok(()) => Registration::Registered,
        Err(ClientError::Call(e)) if e.is_transient() && !replace => Registration::Unreachable(e.to_string()),
        Err(e) => return Err(e.into()),
    };
    Ok(Registered { registration, note })
}

/// The OS keyring entry `pcmail token set|clear` writes: the configured
/// server's URL, or `serve` (the secret `pcmail serve` requires) with `serve`
/// or when this PC uses the embedded server.
pub fn token_key(paths: &Paths, serve: bool) -> Result<String> {
    let c = Config::load(paths)?;
    Ok(match &c.server {
        ServerConfig::Http { url } | ServerConfig::AppsScript { url } if !serve => url.clone(),
        _ => "serve".to_string(),
    })
}

/// Keeps the token read from one line in the keyring under `key`.
pub fn token_store(key: &str, line: &str) -> Result<()> {
    let t = line.trim();
    if t.is_empty() {
        return Err(ApiError::Usage("empty token on stdin".into()));
    }
    Ok(pcmail_client::token::store(key, t).map_err(ClientError::from)?)
}

pub fn token_clear(key: &str) -> Result<()> {
    Ok(pcmail_client::token::delete(key).map_err(ClientError::from)?)
}

/// Keeps the password `pcmail serve --db postgres://…` logs in with, read
/// from one line (only its line ending is cut: spaces may be part of it).
pub fn db_password_store(line: &str) -> Result<()> {
    let t = line.trim_end_matches(['\r', '\n']);
    if t.is_empty() {
        return Err(ApiError::Usage("empty password on stdin".into()));
    }
    Ok(pcmail_client::token::store(pcmail_client::token::DB_PASSWORD_KEY, t).map_err(ClientError::from)?)
}

pub fn db_password_clear() -> Result<()> {
    Ok(pcmail_client::token::delete(pcmail_client::token::DB_PASSWORD_KEY).map_err(ClientError::from)?)
}
