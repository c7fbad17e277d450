//! The admin secret (the old shared server token) lives in the OS keyring
//! (never in config or logs), on PCs that manage the roster and on PCs not
//! yet moved to a credential of their own. `PCMAIL_ADMIN_TOKEN` (or the older
//! `PCMAIL_TOKEN`) overrides it for CI and headless machines with no keyring.

const SERVICE: &str = "pcmail";

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("no credential and no admin secret for this server: enrol this PC with `pcmail init --join CODE --server URL` (the admin makes the code with `pcmail roster add LABEL`), or store the admin secret with `pcmail token set` (or PCMAIL_ADMIN_TOKEN)")]
    Missing,
    #[error("the OS keyring failed: {0} (on machines without a keyring set PCMAIL_CREDENTIAL for this PC's credential, PCMAIL_ADMIN_TOKEN for the admin secret)")]
    Keyring(String),
    /// Registration needs a place for this PC's credential before it is sent.
    #[error("cannot keep this PC's credential: the OS keyring failed ({0}). Set PCMAIL_CREDENTIAL to a long random secret (`openssl rand -hex 32`), kept the same for every pcmail command on this PC")]
    NoCredentialStore(String),
    #[error("PCMAIL_CREDENTIAL: {0}")]
    BadCredential(String),
}

fn entry(server_url: &str) -> Result<keyring::Entry, TokenError> {
    keyring::Entry::new(SERVICE, server_url).map_err(|e| TokenError::Keyring(e.to_string()))
}

/// The environment names of the admin secret, first found wins.
pub const ADMIN_ENV: [&str; 2] = ["PCMAIL_ADMIN_TOKEN", "PCMAIL_TOKEN"];

pub fn load(server_url: &str) -> Result<String, TokenError> {
    for name in ADMIN_ENV {
        if let Ok(t) = std::env::var(name) {
            if !t.is_empty() {
                return Ok(t);
            }
        }
    }
    match entry(server_url)?.get_password() {
        Ok(t) => Ok(t),
        Err(keyring::Error::NoEntry) => Err(TokenError::Missing),
        Err(e) => Err(TokenError::Keyring(e.to_string())),
    }
}

/// The keyring entry of `pcmail serve --db postgres://…`'s password.
pub const DB_PASSWORD_KEY: &str = "serve-db-password";

/// The PostgreSQL password from the OS keyring, if one was stored (`pcmail
/// token set --db`); never from the environment or a file of pcmail's.
pub fn db_password() -> Option<String> {
    entry(DB_PASSWORD_KEY).ok()?.get_password().ok()
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

/// This installation's credential: it binds the label to this installation,
/// and enrolment with a join code and rotation keep theirs in the same
/// keyring entry. The PC makes it itself — 256 random bits — and keeps
/// it in the OS keyring before it is ever sent, so a lost answer can never
/// lock it out of its own label: the retry presents the same secret.
/// `PCMAIL_CREDENTIAL` overrides the keyring (machines without one). It is
/// never printed, logged or written to a file.
pub mod credential {
    use super::TokenError;

    pub const ENV: &str = "PCMAIL_CREDENTIAL";
    const SERVICE: &str = "pcmail-credential";

    /// Where the credential this PC presents comes from (`doctor` says it).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Source {
        Env,
        Keyring,
    }

    impl Source {
        pub fn describe(self) -> &'static str {
            match self {
                Source::Env => "from PCMAIL_CREDENTIAL",
                Source::Keyring => "in the OS keyring",
            }
        }
    }

    /// One keyring entry per server, label and installation: two
    /// `PCMAIL_HOME`s on one machine are two installations.
    fn entry(server_url: &str, label: &str, installation: &str) -> Result<keyring::Entry, TokenError> {
        keyring::Entry::new(SERVICE, &format!("{label}@{server_url}#{installation}"))
            .map_err(|e| TokenError::Keyring(e.to_string()))
    }

    fn from_env() -> Result<Option<String>, TokenError> {
        match std::env::var(ENV) {
            Ok(c) if !c.is_empty() => {
                pcmail_core::protocol::check_credential(&c).map_err(|e| TokenError::BadCredential(e.message))?;
                Ok(Some(c))
            }
            _ => Ok(None),
        }
    }

    /// The credential to present, if this installation has one; never makes one.
    pub fn load(
        server_url: &str,
        label: &str,
        installation: Option<&str>,
    ) -> Result<Option<(String, Source)>, TokenError> {
        if let Some(c) = from_env()? {
            return Ok(Some((c, Source::Env)));
        }
        let Some(installation) = installation else { return Ok(None) };
        match entry(server_url, label, installation)?.get_password() {
            Ok(c) => Ok(Some((c, Source::Keyring))),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(e) => Err(TokenError::Keyring(e.to_string())),
        }
    }

    /// The credential to claim the label with: the one this installation
    /// has, or a new one stored in the keyring (and read back) first.
    pub fn for_claim(server_url: &str, label: &str, installation: &str) -> Result<(String, Source), TokenError> {
        let unavailable = |e: String| TokenError::NoCredentialStore(e);
        if let Some(found) = load(server_url, label, Some(installation)).map_err(|e| match e {
            TokenError::Keyring(m) => unavailable(m),
            other => other,
        })? {
            return Ok(found);
        }
        let made = pcmail_core::protocol::new_credential(&mut rand::rng());
        let e = entry(server_url, label, installation).map_err(|e| unavailable(e.to_string()))?;
        e.set_password(&made).map_err(|e| unavailable(e.to_string()))?;
        // A keyring that accepts and forgets would lock this PC out later: check it kept it.
        match e.get_password() {
            Ok(back) if back == made => Ok((made, Source::Keyring)),
            Ok(_) => Err(unavailable("it gave back something else than it was given".into())),
            Err(err) => Err(unavailable(err.to_string())),
        }
    }

    /// Keeps `cred` as this installation's credential (after a join or a
    /// rotation), read back to be sure the keyring kept it.
    pub fn store(server_url: &str, label: &str, installation: &str, cred: &str) -> Result<(), TokenError> {
        keep(&entry(server_url, label, installation)?, cred)
    }

    fn keep(e: &keyring::Entry, cred: &str) -> Result<(), TokenError> {
        let unavailable = |e: String| TokenError::NoCredentialStore(e);
        e.set_password(cred).map_err(|e| unavailable(e.to_string()))?;
        match e.get_password() {
            Ok(back) if back == cred => Ok(()),
            Ok(_) => Err(unavailable("it gave back something else than it was given".into())),
            Err(err) => Err(unavailable(err.to_string())),
        }
    }

    /// A rotation under way: the new credential is kept here *before* it is
    /// sent, so a lost answer is retried with the same one.
    fn pending_entry(server_url: &str, label: &str, installation: &str) -> Result<keyring::Entry, TokenError> {
        entry(server_url, label, &format!("{installation}#rotating"))
    }

    /// The new credential of a rotation under way, or a new one kept first.
    pub fn pending_rotation(server_url: &str, label: &str, installation: &str) -> Result<String, TokenError> {
        let e = pending_entry(server_url, label, installation)?;
        match e.get_password() {
            Ok(c) => Ok(c),
            Err(keyring::Error::NoEntry) => {
                let made = pcmail_core::protocol::new_credential(&mut rand::rng());
                keep(&e, &made)?;
                Ok(made)
            }
            Err(err) => Err(TokenError::NoCredentialStore(err.to_string())),
        }
    }

    /// The rotation is done: the new credential is the one, the pending entry goes.
    pub fn finish_rotation(server_url: &str, label: &str, installation: &str, cred: &str) -> Result<(), TokenError> {
        store(server_url, label, installation, cred)?;
        match pending_entry(server_url, label, installation)?.delete_credential() {
            Ok(()) | Err(keyring::Error::NoEntry) => Ok(()),
            Err(e) => Err(TokenError::Keyring(e.to_string())),
        }
    }

    /// Forgets this installation's credential for that label (after the label changed).
    pub fn delete(server_url: &str, label: &str, installation: &str) -> Result<(), TokenError> {
        match entry(server_url, label, installation)?.delete_credential() {
            Ok(()) | Err(keyring::Error::NoEntry) => Ok(()),
            Err(e) => Err(TokenError::Keyring(e.to_string())),
        }
    }
}

#[cfg(test)]
mod identity_tests {
    /// The daemon answers the small front only for the identity the front's
    /// environment names: its list of variables must be the ones read here.
    #[test]
    fn the_fronts_identity_variables_are_the_ones_read_here() {
        let mut read: Vec<&str> = super::ADMIN_ENV.to_vec();
        read.push(super::credential::ENV);
        read.sort();
        let mut front = pcmail_local::cmdsock::IDENTITY_ENV.to_vec();
        front.sort();
        assert_eq!(read, front);
    }
}
