//! `pcmail roster`: the roster, and the admin's commands for per-PC
//! credentials (join codes, revoke, the switch that retires the shared token,
//! the audit log), each of which needs the admin secret (`pcmail token set`,
//! or PCMAIL_ADMIN_TOKEN) and a server with `credentials`.

use clap::Subcommand;
use pcmail_api::admin::{self, RosterEnrolResult};
use pcmail_client::Client;
use serde_json::{json, Value};

#[derive(Subcommand)]
pub enum RosterCmd {
    /// Admin: a one-time join code for a new PC (`pcmail init --join CODE` on it). With
    /// --hostname the PC is on the roster at once; on a server without credentials it is added.
    Add {
        /// The new PC's label (lower-case a-z 0-9 . _ -).
        label: String,
        /// The PC's hostname (needed to add it directly on the embedded default; optional for a join code).
        #[arg(long)]
        hostname: Option<String>,
        /// Its roster number (adds it directly instead of making a join code) [default: the next free one].
        #[arg(long)]
        number: Option<i64>,
        /// How long the join code lives (30m, 2h, 3d; at most 30 days).
        #[arg(long, default_value = "24h")]
        expires: String,
    },
    /// Admin: take a PC off the roster (its mail is kept).
    Remove {
        /// The PC's label.
        label: String,
    },
    /// Admin: end a PC's access at once; its mail waits for a PC re-enrolled under that label.
    Revoke {
        /// The PC's label.
        label: String,
    },
    /// Admin: stop accepting the shared token for PC operations (after every PC has its credential).
    RequireCredentials {
        /// Accept the shared token again.
        #[arg(long)]
        off: bool,
    },
    /// Admin: the audit log (enrol, join, revoke, rotate, roster changes), newest first.
    Log {
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
}

/// `pcmail roster`: the roster itself, or one of its commands.
pub fn run(action: Option<RosterCmd>, json: bool) -> anyhow::Result<()> {
    let mut client = super::open()?;
    match action {
        None => {
            let r = pcmail_api::roster(&mut client)?;
            if let Some(e) = &r.unreachable {
                eprintln!("pcmail: server unreachable ({e}); showing the cached roster");
            }
            crate::print::roster(&r.pcs, &r.me, json);
            if !json {
                if let Ok(Some(note)) = client.store.meta_get(pcmail_store::meta::HOSTNAME_NOTE) {
                    println!("note: {note}");
                }
            }
        }
        Some(RosterCmd::Remove { label }) => {
            let r = pcmail_api::roster_remove(&mut client, &pcmail_api::RosterRemoveArgs { label })?;
            println!("{}", if json { r.to_string() } else { format!("pcmail: removed: {}", r["removed"]) });
        }
        Some(cmd) => admin_command(&mut client, cmd, json)?,
    }
    Ok(())
}

/// Each command is one pcmail-api function (the MCP tools call the same); this prints.
fn admin_command(client: &mut Client, cmd: RosterCmd, json: bool) -> anyhow::Result<()> {
    match cmd {
        RosterCmd::Add { label, hostname, number, expires } => {
            let r = admin::roster_enrol(
                client,
                &admin::RosterEnrolArgs { label, hostname, number, expires: Some(expires) },
            )?;
            match &r {
                RosterEnrolResult::Added(v) => {
                    println!(
                        "{}",
                        if json { v.to_string() } else { format!("pcmail: roster now at version {}", v["version"]) }
                    )
                }
                RosterEnrolResult::JoinCode { label, code, expires_at, server, tls_fingerprint } => {
                    if json {
                        println!("{}", serde_json::to_string(&r)?);
                    } else {
                        // The code is a one-time secret meant to be handed over: printed once, stored nowhere.
                        println!("{code}");
                        let loopback = server.contains("://127.")
                            || server.contains("://localhost")
                            || server.contains("://[::1]");
                        eprintln!(
                            "pcmail: one-time join code for {label:?}, valid until {}. On that PC run:\n  pcmail init --join {code} --server {server}{}",
                            crate::print::time(*expires_at),
                            if loopback { " (with this server's address on the network instead of loopback)" } else { "" }
                        );
                        if let Some(fp) = tls_fingerprint {
                            eprintln!("pcmail: the code carries the server's TLS certificate fingerprint ({fp}): that PC pins it, no CA needed");
                        }
                    }
                }
            }
            Ok(())
        }
        RosterCmd::Revoke { label } => {
            let r = admin::revoke(client, &admin::RevokeArgs { label: label.clone() })?;
            print(json, &r, || {
                format!("pcmail: {label:?} is revoked{}: its next request is refused; its mail waits for a PC re-enrolled under that label (`pcmail roster add {label}`)",
                    if r["changed"] == json!(false) { " (it already was)" } else { "" })
            });
            Ok(())
        }
        RosterCmd::RequireCredentials { off } => {
            let r = admin::require_credentials(client, &admin::RequireCredentialsArgs { on: !off })?;
            let unbound: Vec<String> =
                r["unbound"].as_array().into_iter().flatten().filter_map(|v| v.as_str().map(str::to_string)).collect();
            print(json, &r, || {
                let state =
                    if off { "accepted again for PC operations" } else { "no longer accepted for PC operations" };
                let left = if unbound.is_empty() {
                    String::new()
                } else {
                    format!("\npcmail: still on the shared token (refused until enrolled): {}", unbound.join(", "))
                };
                format!("pcmail: the shared token is {state}{left}")
            });
            Ok(())
        }
        RosterCmd::Log { limit } => {
            let r = admin::audit_log(client, &admin::AuditLogArgs { limit: Some(limit) })?;
            if json {
                println!("{r}");
            } else {
                for e in r["entries"].as_array().into_iter().flatten() {
                    let at = e["at"].as_i64().map(crate::print::time).unwrap_or_default();
                    let detail = e["detail"]
                        .as_str()
                        .map(|d| format!("  {}", pcmail_core::present::neutralise(d)))
                        .unwrap_or_default();
                    println!(
                        "{at}  {:<20} {:<20} {}{detail}",
                        pcmail_core::present::neutralise(e["by"].as_str().unwrap_or("")),
                        e["action"].as_str().unwrap_or(""),
                        e["label"].as_str().unwrap_or("")
                    );
                }
            }
            Ok(())
        }
        RosterCmd::Remove { .. } => unreachable!("handled in run"),
    }
}

fn print(json: bool, r: &Value, human: impl FnOnce() -> String) {
    if json {
        println!("{r}");
    } else {
        println!("{}", human());
    }
}
