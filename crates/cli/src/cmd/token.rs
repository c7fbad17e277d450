//! `pcmail token set|clear|rotate`: the secret is read here from stdin;
//! which keyring entry it goes to is pcmail_api::setup's rule.

use crate::exit::as_client;
use pcmail_api::setup;
use pcmail_client::ClientError;

fn stdin_line() -> anyhow::Result<String> {
    let mut t = String::new();
    std::io::stdin().read_line(&mut t)?;
    Ok(t)
}

pub fn run(action: &str, serve: bool, db: bool, json: bool) -> anyhow::Result<()> {
    if db {
        return db_password(action);
    }
    if action == "rotate" {
        return rotate(serve, json);
    }
    let key = setup::token_key(&super::paths()?, serve).map_err(as_client)?;
    if action == "clear" {
        setup::token_clear(&key).map_err(as_client)?;
        println!("pcmail: token removed from the OS keyring");
    } else {
        setup::token_store(&key, &stdin_line()?).map_err(as_client)?;
        println!("pcmail: token stored in the OS keyring for {key}");
    }
    Ok(())
}

/// `--db`: the password `pcmail serve --db postgres://…` logs in with.
fn db_password(action: &str) -> anyhow::Result<()> {
    match action {
        "clear" => {
            setup::db_password_clear().map_err(as_client)?;
            println!("pcmail: the database password is removed from the OS keyring");
        }
        "set" => {
            setup::db_password_store(&stdin_line()?).map_err(as_client)?;
            println!("pcmail: the database password is stored in the OS keyring (pcmail serve reads it there)");
        }
        _ => anyhow::bail!(ClientError::Invalid("the database password is `set` or `clear`ed, not rotated".into())),
    }
    Ok(())
}

/// `rotate`: this PC's own credential.
fn rotate(serve: bool, json: bool) -> anyhow::Result<()> {
    if serve {
        anyhow::bail!(ClientError::Invalid(
            "rotate is for a PC's credential; change the serve secret with `pcmail token set --serve`".into()
        ));
    }
    let mut client = super::open()?;
    let r = pcmail_api::admin::token_rotate(&mut client)?;
    if json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        println!("pcmail: this PC has a new credential (in the OS keyring); the old one no longer works");
    }
    Ok(())
}
