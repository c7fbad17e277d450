//! One module per command: each parses nothing (clap did, in main.rs), calls
//! pcmail-api (or the crate that does the work) and prints the answer.

pub mod alerts;
pub mod daemon;
pub mod export;
pub mod handoff;
pub mod hooks;
pub mod init;
pub mod job;
pub mod lease;
pub mod mail;
pub mod map;
pub mod mcp;
pub mod roster;
pub mod send;
pub mod serve;
pub mod serve_net;
pub mod service;
pub mod session;
pub mod status;
pub mod sync;
pub mod token;

use pcmail_client::Client;
use pcmail_local::config::Paths;

pub fn paths() -> anyhow::Result<Paths> {
    Ok(Paths::from_env()?)
}

/// This PC's store for a command that ends with its answer and needs no
/// server (`inbox`): left as a short-lived process should leave it.
pub fn open_store() -> anyhow::Result<pcmail_store::Store> {
    let path = paths()?.store();
    let open = || -> Result<pcmail_store::Store, pcmail_store::StoreError> {
        let mut store = pcmail_store::Store::open(&path)?;
        store.make_short_lived()?;
        Ok(store)
    };
    // As the API's error, for its exit code (a damaged store: its own).
    Ok(open().map_err(pcmail_api::ApiError::from)?)
}

/// The client of a command that ends with its answer: its SQLite files are
/// left as a short-lived process should leave them ([`Client::make_short_lived`]).
pub fn open() -> anyhow::Result<Client> {
    let mut client = Client::open(paths()?)?;
    client.make_short_lived()?;
    Ok(client)
}
