//! `pcmail send` and `pcmail reply`: the body from its flag, a file or stdin.

use crate::print;
use anyhow::Context;
use pcmail_api::{MailKind, WaitState};
use pcmail_client::ClientError;
use std::io::{IsTerminal, Read};
use std::path::PathBuf;

/// `pcmail send`'s arguments, as parsed.
pub struct SendOpts {
    pub to: Vec<String>,
    pub kind: MailKind,
    pub subject: Option<String>,
    pub body: Option<String>,
    pub file: Option<PathBuf>,
    pub urgent: bool,
    pub expires: Option<String>,
    pub auto: bool,
    pub wait_for: Option<WaitState>,
    pub timeout: u64,
}

fn body_from(body: Option<String>, file: Option<PathBuf>) -> anyhow::Result<String> {
    if let Some(b) = body {
        return Ok(b);
    }
    if let Some(f) = file {
        return std::fs::read_to_string(&f).with_context(|| format!("cannot read {}", f.display()));
    }
    if std::io::stdin().is_terminal() {
        anyhow::bail!(ClientError::Invalid("no body: pass --body, --file, or pipe it on stdin".into()));
    }
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).context("cannot read the body from stdin")?;
    Ok(s)
}

pub fn send(o: SendOpts, json: bool) -> anyhow::Result<()> {
    let mut client = super::open()?;
    let body = body_from(o.body, o.file)?;
    let to = if o.to.len() == 1 {
        pcmail_api::Addresses::One(o.to.into_iter().next().unwrap_or_default())
    } else {
        pcmail_api::Addresses::Many(o.to)
    };
    let args = pcmail_api::SendArgs {
        to,
        kind: o.kind,
        subject: o.subject,
        body,
        urgent: o.urgent,
        expires: o.expires,
        auto: o.auto,
        wait_for: None,
        timeout_secs: Some(o.timeout),
    };
    let out = pcmail_api::send_only(&mut client, &args)?;
    let Some(state) = o.wait_for else {
        print::send_outcome(&out, json);
        return Ok(());
    };
    if !json {
        print::send_outcome(&out, false);
        if out.queued {
            eprintln!("pcmail: waiting for the server to come back…");
        }
    }
    let mails = pcmail_api::wait_for_sent(&mut client, &out, state, o.timeout)?;
    if json {
        println!("{}", serde_json::to_string(&pcmail_api::SendResult { outcome: out, mails: Some(mails) })?);
    } else {
        print::timelines(&mails, false);
    }
    Ok(())
}

pub fn reply(
    id: String,
    body: Option<String>,
    file: Option<PathBuf>,
    auto: bool,
    all: bool,
    json: bool,
) -> anyhow::Result<()> {
    let mut client = super::open()?;
    // Refuse a reply to a reply before asking for a body.
    pcmail_api::reply_precheck(&client, &id)?;
    let body = body_from(body, file)?;
    let out = pcmail_api::reply(&mut client, &pcmail_api::ReplyArgs { id, body, auto, all })?;
    print::send_outcome(&out, json);
    Ok(())
}
