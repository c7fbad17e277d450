//! The PC's local side with no network in it: config and paths, the poller
//! locks, starting a poller detached, and the Claude Code hook. Both the
//! `pcmail` binary (through pcmail-client) and the small `pcmail-hook` binary
//! are built on it.

pub mod cmdsock;
pub mod config;
pub mod filewatch;
pub mod githook;
pub mod handoff_hook;
pub mod hook;
pub mod jobconf;
pub mod leases;
pub mod locks;
pub mod process;
pub mod repo;
pub mod spawn;
pub mod watch;

use pcmail_core::Millis;

pub fn system_now() -> Millis {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as Millis).unwrap_or(0)
}
