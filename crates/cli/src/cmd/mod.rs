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

/// The client of a command that ends with its answer: its SQLite files are
/// left as a short-lived process should leave them ([`Client::make_short_lived`]).
pub fn open() -> anyhow::Result<Client> {
    let mut client = Client::open(paths()?)?;
    client.make_short_lived()?;
    Ok(client)
}
