//! The server token lives in the OS keyring (never in config or logs).
//! `PCMAIL_TOKEN` overrides it for CI and headless machines with no keyring.

const SERVICE: &str = "pcmail";

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("no server token: run `pcmail token set` (stored in the OS keyring) or set PCMAIL_TOKEN")]
    Missing,
    #[error("the OS keyring failed: {0} (set PCMAIL_TOKEN instead on machines without a keyring)")]
    Keyring(String),
}

fn entry(server_url: &str) -> Result<keyring::Entry, TokenError> {
    keyring::Entry::new(SERVICE, server_url).map_err(|e| TokenError::Keyring(e.to_string()))
}

pub fn load(server_url: &str) -> Result<String, TokenError> {
    if let Ok(t) = std::env::var("PCMAIL_TOKEN") {
        if !t.is_empty() {
            return Ok(t);
        }
    }
    match entry(server_url)?.get_password() {
        Ok(t) => Ok(t),
        Err(keyring::Error::NoEntry) => Err(TokenError::Missing),
        Err(e) => Err(TokenError::Keyring(e.to_string())),
    }
}

pub fn store(server_url: &str, token: &str) -> Result<(), TokenError> {
    entry(server_url)?.set_password(token).map_err(|e| TokenError::Keyring(e.to_string()))
}

pub fn delete(server_url: &str) -> Result<(), TokenError> {
    match entry(server_url)?.delete_credential() {
        Ok(()) | Err(keyring::Error::NoEntry) => Ok(()),
        Err(e) => Err(TokenError::Keyring(e.to_string())),
    }
}
