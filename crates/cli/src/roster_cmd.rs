//! The admin's roster commands of issue 14: join codes, revoke, the switch
//! that retires the shared token, the audit log. Each needs the admin secret
//! (`pcmail token set`, or PCMAIL_ADMIN_TOKEN) and a server with `credentials`.

use crate::RosterCmd;
use pcmail_api::features;
use pcmail_client::{Client, ClientError};
use pcmail_core::protocol::{Op, FEATURE_CREDENTIALS};
use serde_json::{json, Value};

/// Exit 5 at once on a server without per-PC credentials (DESIGN.md "Features, not guesses").
pub fn require_credentials_feature(client: &Client) -> anyhow::Result<()> {
    let hello = features::hello(client)?;
    features::require(Some(FEATURE_CREDENTIALS), hello.features.as_deref())?;
    Ok(())
}

fn has_credentials(client: &Client) -> anyhow::Result<bool> {
    let hello = features::hello(client)?;
    Ok(hello
        .features
        .is_some_and(|f| f.iter().any(|x| x == FEATURE_CREDENTIALS)))
}

pub fn run(client: &mut Client, cmd: RosterCmd, json: bool) -> anyhow::Result<()> {
    match cmd {
        RosterCmd::Add {
            label,
            hostname,
            number,
            expires,
        } => add(client, label, hostname, number, &expires, json),
        RosterCmd::Revoke { label } => {
            require_credentials_feature(client)?;
            let r = client
                .transport
                .call(&Op::Revoke {
                    label: label.clone(),
                })
                .map_err(ClientError::from)?;
            print(json, &r, || {
                format!("pcmail: {label:?} is revoked{}: its next request is refused; its mail waits for a PC re-enrolled under that label (`pcmail roster add {label}`)",
                    if r["changed"] == json!(false) { " (it already was)" } else { "" })
            });
            Ok(())
        }
        RosterCmd::RequireCredentials { off } => {
            require_credentials_feature(client)?;
            let r = client
                .transport
                .call(&Op::RequireCredentials { on: !off })
                .map_err(ClientError::from)?;
            let unbound: Vec<String> = r["unbound"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect();
            print(json, &r, || {
                let state = if off {
                    "accepted again for PC operations"
                } else {
                    "no longer accepted for PC operations"
                };
                let left = if unbound.is_empty() {
                    String::new()
                } else {
                    format!(
                        "\npcmail: still on the shared token (refused until enrolled): {}",
                        unbound.join(", ")
                    )
                };
                format!("pcmail: the shared token is {state}{left}")
            });
            Ok(())
        }
        RosterCmd::Log { limit } => {
            require_credentials_feature(client)?;
            let r = client
                .transport
                .call(&Op::AuditLog {
                    limit: limit.clamp(1, 500),
                })
                .map_err(ClientError::from)?;
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
        RosterCmd::Remove { .. } => unreachable!("handled in main"),
    }
}

fn add(
    client: &mut Client,
    label: String,
    hostname: Option<String>,
    number: Option<i64>,
    expires: &str,
    json: bool,
) -> anyhow::Result<()> {
    // A bad label is the server's bad_request (exit 5), as through `pcmail mcp`.
    let embedded = matches!(
        client.config.server,
        pcmail_client::config::ServerConfig::Embedded { .. }
    );
    if embedded || !has_credentials(client)? || number.is_some() {
        // The embedded default (or an older server): a plain roster entry.
        let Some(hostname) = hostname else {
            if embedded || number.is_some() {
                anyhow::bail!(ClientError::Invalid(
                    "--hostname is needed to add a PC directly".into()
                ));
            }
            // Exit 5: this server has no join codes (an older pcmail serve or gas deployment).
            require_credentials_feature(client)?;
            unreachable!("the server has no credentials feature");
        };
        let r = pcmail_api::roster_add(
            client,
            &pcmail_api::RosterAddArgs {
                label,
                hostname,
                number,
            },
        )?;
        println!(
            "{}",
            if json {
                r.to_string()
            } else {
                format!("pcmail: roster now at version {}", r["version"])
            }
        );
        return Ok(());
    }
    let expires_in = match pcmail_api::parse_expires(expires)? {
        pcmail_client::ops::Expires::In(ms) if ms <= pcmail_core::auth::JOIN_CODE_MAX_MS => ms,
        _ => anyhow::bail!(ClientError::Invalid(format!(
            "--expires {expires:?}: a duration up to 30d (e.g. 24h)"
        ))),
    };
    let (code, expires_at) =
        pcmail_client::creds::enrol(client, &label, hostname.as_deref(), expires_in)?;
    let server = client.config.server.url().unwrap_or("URL").to_string();
    if json {
        println!(
            "{}",
            json!({"label": label, "code": code.to_string(), "expiresAt": expires_at, "server": server, "tlsFingerprint": code.fingerprint})
        );
    } else {
        // The code is a one-time secret meant to be handed over: printed once, stored nowhere.
        println!("{code}");
        eprintln!(
            "pcmail: one-time join code for {label:?}, valid until {}. On that PC run:\n  pcmail init --join {code} --server {server}{}",
            crate::print::time(expires_at),
            if server.contains("://127.") || server.contains("://localhost") || server.contains("://[::1]") {
                " (with this server's address on the network instead of loopback)"
            } else {
                ""
            }
        );
        if let Some(fp) = &code.fingerprint {
            eprintln!("pcmail: the code carries the server's TLS certificate fingerprint ({fp}): that PC pins it, no CA needed");
        }
    }
    Ok(())
}

fn print(json: bool, r: &Value, human: impl FnOnce() -> String) {
    if json {
        println!("{r}");
    } else {
        println!("{}", human());
    }
}
