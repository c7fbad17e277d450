//! `pcmail init`: this PC's label and server, and its registration right
//! after (pcmail_api::setup holds the rules); `--join CODE` enrols it.

use crate::exit::as_client;
use pcmail_api::setup::{self, InitArgs, Registration};

/// `pcmail init --join CODE --server URL…`.
pub fn join(code: &str, server: &[String]) -> anyhow::Result<()> {
    let j = pcmail_client::creds::join(super::paths()?, code, server)?;
    println!(
        "pcmail: this PC is {:?} on {}, with its own credential in the OS keyring (or PCMAIL_CREDENTIAL){}",
        j.label,
        j.server,
        if j.existing { " (already enrolled)" } else { "" }
    );
    if let Some(fp) = j.tls_fingerprint {
        println!("pcmail: the server's TLS certificate is pinned (SHA-256 {fp}); a server with another one is refused");
    }
    Ok(())
}

/// `pcmail init`: writes the config, then registers unless `offline` (or embedded).
pub fn run(args: &InitArgs, offline: bool) -> anyhow::Result<()> {
    let p = super::paths()?;
    let c = setup::init_config(&p, args).map_err(as_client)?;
    println!("pcmail: this PC is {:?}, server: {} (config {})", c.label, c.server.describe(), p.config().display());
    if let Some(fp) = &c.tls_fingerprint {
        println!("pcmail: the server's TLS certificate is pinned (SHA-256 {fp})");
    }
    if offline || matches!(c.server, pcmail_local::config::ServerConfig::Embedded { .. }) {
        return Ok(());
    }
    let r = setup::register(p, args.replace).map_err(as_client)?;
    if let Some(note) = &r.note {
        println!("pcmail: {note}");
    }
    match r.registration {
        Registration::NoToken => {
            println!("pcmail: no server token yet: `pcmail token set` (this PC registers on its first command)")
        }
        Registration::Bound => println!(
            "pcmail: label {:?} is bound to this installation{}",
            c.label,
            if args.replace { " (taken over: the PC that held it has lost access)" } else { "" }
        ),
        Registration::Registered => {
            println!("pcmail: registered as {:?} (this server does not bind labels to installations)", c.label)
        }
        Registration::Unreachable(e) => {
            println!("pcmail: the server cannot be reached now ({e}); this PC registers on its first poll")
        }
    }
    Ok(())
}
