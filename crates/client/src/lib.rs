//! The receiving PC and the agent's CLI operations: config, transports, the
//! poller cycle, notifications, the hook, and send/reply/ack/read/status.
//! The `pcmail` binary and the tray app are thin layers over this crate.

pub mod backoff;
pub mod creds;
pub mod executor;
pub mod jobs;
pub mod leases;
pub mod notify;
pub mod ops;
pub mod pin;
pub mod pusher;
mod sent_rows;
pub mod sessions;
pub mod sync;
pub mod token;
pub mod transport;
pub mod watchdog;

use pcmail_core::{Millis, ProtoError};
use pcmail_local::config::{Config, ConfigError, Paths, ServerConfig};
use pcmail_local::system_now;
use pcmail_store::{Store, StoreError};
use transport::{CallError, Transport};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Token(#[from] token::TokenError),
    #[error(transparent)]
    Call(CallError),
    /// This PC's label is bound to another installation (`label_taken`).
    #[error("{} (`pcmail init --label NEW` picks another label; `pcmail init --replace` takes this one over and ends the other PC's access)", .0.message)]
    LabelTaken(ProtoError),
    #[error("{query:?} is not an exact PC label, number or hostname on the roster{}", candidates_hint(.candidates))]
    Unresolved { query: String, candidates: Vec<String> },
    /// Several addresses, and some are not exact: nothing was sent.
    #[error("nothing was sent: {}", unresolved_text(.0))]
    UnresolvedMany(Vec<pcmail_core::error::Unresolved>),
    /// The server lacks a feature this needs (its `hello` does not list it).
    #[error("this server does not support {feature} (one mail to several addresses): nothing was sent; redeploy gas/ or update pcmail serve, or send to each address on its own")]
    Unsupported { feature: String },
    #[error("{id} is itself a reply; replying to a reply is refused (it is how mail loops start)")]
    ReplyToReply { id: String },
    #[error("no such mail: {0}")]
    NotFound(String),
    /// A release of a lease this PC does not hold (exit 7, as a missing mail).
    #[error("this PC holds no lease of {resource} (`pcmail lease list`)")]
    LeaseNotHeld { resource: String },
    #[error("{id} did not reach {wanted} within the timeout (it is {state})")]
    Timeout { id: String, wanted: String, state: String },
    #[error("{0}")]
    Invalid(String),
    #[error(
        "nobody else is on the roster to send to (`pcmail roster` lists it; other PCs appear once they have polled)"
    )]
    NobodyElse,
}

impl From<CallError> for ClientError {
    fn from(e: CallError) -> Self {
        match e {
            CallError::Server(p) if p.code == pcmail_core::ErrorCode::LabelTaken => ClientError::LabelTaken(p),
            other => ClientError::Call(other),
        }
    }
}

fn unresolved_text(misses: &[pcmail_core::error::Unresolved]) -> String {
    misses
        .iter()
        .map(|m| {
            format!("{:?} is not an exact PC label, number, hostname or name{}", m.to, candidates_hint(&m.candidates))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn candidates_hint(c: &[String]) -> String {
    if c.is_empty() {
        " (no close match; see `pcmail roster`)".into()
    } else {
        format!("; did you mean: {}", c.join(", "))
    }
}

impl ClientError {
    pub fn refused(&self) -> Option<&ProtoError> {
        match self {
            ClientError::Call(CallError::Server(p)) => Some(p),
            _ => None,
        }
    }
}

/// One PC user's pcmail: its config, its store and its way to the server.
pub struct Client {
    pub paths: Paths,
    pub config: Config,
    pub store: Store,
    pub transport: Box<dyn Transport>,
    pub clock: fn() -> Millis,
    /// Set on the poller that executes jobs (the daemon, the tray's poller).
    pub executor: Option<executor::Executor>,
    /// While true, the `sent` rows of mail the server took are written by
    /// [`Client::settle_deferred`] instead of before `send` returns: a caller
    /// that answers first (`pcmail mcp`) takes that write off the answer's
    /// path. Safe to lose: the mail stays in the outbox as in flight, and
    /// once its grace is over the poller sends it again under its id, which
    /// the server answers with the rows it already has.
    pub defer_sent_rows: bool,
    deferred_sent: Vec<sent_rows::SentRows>,
    /// This client's label claim was found recorded: not read again at
    /// every cycle (the record, once written for this configuration, stays).
    label_claim_seen: bool,
    /// What this client last wrote to the guard file (the poller's).
    guard_written: Option<pcmail_local::leases::GuardWritten>,
}

impl Client {
    /// Runs `f` in one transaction of the PC store ([`pcmail_store::batch_in`]):
    /// one commit for the dozen small writes and reads a poll's answer
    /// brings, instead of one each. Nothing in `f` may wait on the network:
    /// the hook waits for the store's write lock meanwhile.
    pub(crate) fn batch<T>(&mut self, f: impl FnOnce(&mut Client) -> Result<T, ClientError>) -> Result<T, ClientError> {
        pcmail_store::batch_in(self, |c| &mut c.store, f)
    }

    /// [`Client::batch`] for work that usually only reads
    /// ([`pcmail_store::batch_in_read_first`]): it takes the write lock only
    /// when it writes, so another process's long write (a code map) does not
    /// hold it up. `f` may run twice.
    pub(crate) fn batch_read_first<T>(
        &mut self,
        f: impl Fn(&mut Client) -> Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        pcmail_store::batch_in_read_first(
            self,
            |c| &mut c.store,
            |e| matches!(e, ClientError::Store(s) if s.is_busy()),
            f,
        )
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Err(e) = self.settle_deferred() {
            tracing::warn!("sent mail not recorded here: {e} (recorded when the poller sends it again)");
        }
    }
}

impl Client {
    /// Opens everything from the environment (`PCMAIL_HOME`, config, keyring).
    pub fn open(paths: Paths) -> Result<Client, ClientError> {
        let config = Config::load(&paths)?;
        let transport = make_transport(&paths, &config, system_now)?;
        let store = Store::open(&paths.store())?;
        Ok(Client {
            paths,
            config,
            store,
            transport,
            clock: system_now,
            executor: None,
            defer_sent_rows: false,
            deferred_sent: vec![],
            label_claim_seen: false,
            guard_written: None,
        })
    }

    /// For a process that lives one command (`pcmail lease claim`, `pcmail
    /// send`): its store and, on the embedded default, the server file skip
    /// SQLite's checkpoints as they write and at close (fsyncs, 4 at the
    /// close of the last connection), and empty their logs as the process
    /// leaves once they have grown ([`pcmail_walpolicy`]).
    pub fn make_short_lived(&mut self) -> Result<(), ClientError> {
        self.store.make_short_lived()?;
        self.transport.make_short_lived()?;
        Ok(())
    }

    /// For tests and the tray: everything given.
    pub fn with(
        paths: Paths,
        config: Config,
        transport: Box<dyn Transport>,
        clock: fn() -> Millis,
    ) -> Result<Client, ClientError> {
        let store = Store::open(&paths.store())?;
        Ok(Client {
            paths,
            config,
            store,
            transport,
            clock,
            executor: None,
            defer_sent_rows: false,
            deferred_sent: vec![],
            label_claim_seen: false,
            guard_written: None,
        })
    }

    pub fn me(&self) -> &str {
        &self.config.label
    }

    pub fn now(&self) -> Millis {
        (self.clock)()
    }
}

pub fn make_transport(
    paths: &Paths,
    config: &Config,
    clock: fn() -> Millis,
) -> Result<Box<dyn Transport>, ClientError> {
    Ok(match &config.server {
        ServerConfig::Embedded { .. } => {
            let db = config.embedded_db(paths).expect("embedded has a db");
            Box::new(transport::Embedded::open(&db, &config.label, clock)?)
        }
        ServerConfig::Http { url } => Box::new(http_transport(url, config, true)?),
        ServerConfig::AppsScript { url } => Box::new(http_transport(url, config, false)?),
    })
}

/// A PC presents its credential; the admin secret (the old shared token)
/// goes along when this PC has it (it manages, or it has not moved to a
/// credential yet). Neither: `pcmail token set`, or `pcmail init --join`.
fn http_transport(url: &str, config: &Config, long_poll: bool) -> Result<transport::Http, ClientError> {
    let cred = present_credential(url, config)?;
    let tok = match token::load(url) {
        Ok(t) => Some(t),
        // A PC with its own credential needs no admin secret (nor a keyring to hold one).
        Err(_) if cred.is_some() => None,
        Err(e) => return Err(e.into()),
    };
    let (u, label, inst) = (url.to_string(), config.label.clone(), config.installation.clone());
    for more in &config.failover_urls {
        if !(more.starts_with("http://") || more.starts_with("https://")) {
            return Err(ClientError::Invalid(format!(
                "config.toml: failover_urls holds {more:?}, not an http:// or https:// address of a pcmail serve instance"
            )));
        }
    }
    let all_https = url.starts_with("https://") && config.failover_urls.iter().all(|u| u.starts_with("https://"));
    if config.tls_fingerprint.is_some() && !all_https {
        // Never a silent step down from a pinned certificate to plain HTTP.
        return Err(ClientError::Invalid(format!(
            "config.toml pins the server's TLS certificate (tls_fingerprint), but the server URL {url} (or one of \
             failover_urls) is not https://: `pcmail init --server https://…` (the address `pcmail serve` printed)"
        )));
    }
    let mut urls = vec![url.to_string()];
    urls.extend(config.failover_urls.iter().cloned());
    let t =
        transport::Http::connect(&urls, config.tls_fingerprint.as_deref(), tok.as_deref(), &config.label, long_poll)?
            .with_credential_reload(Box::new(move || {
                token::credential::load(&u, &label, inst.as_deref()).ok().flatten().map(|(c, _)| c)
            }));
    t.set_credential(cred);
    Ok(t)
}

/// The credential every request presents, when this installation has one.
/// A keyring that cannot be read only means none (the label stays as it
/// is); a bad PCMAIL_CREDENTIAL is an error.
fn present_credential(url: &str, config: &Config) -> Result<Option<String>, ClientError> {
    match token::credential::load(url, &config.label, config.installation.as_deref()) {
        Ok(found) => Ok(found.map(|(c, _)| c)),
        Err(e @ token::TokenError::BadCredential(_)) => Err(e.into()),
        Err(e) => {
            tracing::warn!("no credential presented: {e}");
            Ok(None)
        }
    }
}
