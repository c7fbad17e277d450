//! `pcmail status ID…`: the timelines, or waiting for a state first.

use crate::{exit, print};
use pcmail_api::{Exit, WaitState};
use pcmail_client::ClientError;

pub fn run(ids: Vec<String>, wait_for: Option<WaitState>, timeout: u64, json: bool) -> anyhow::Result<()> {
    let mut client = super::open()?;
    let mut waiting = vec![];
    let (mails, missing) = match wait_for {
        Some(state) => {
            let args = pcmail_api::WaitForArgs { ids, state, timeout_secs: Some(timeout) };
            (pcmail_api::wait_for(&mut client, &args)?.mails, vec![])
        }
        None => {
            let r = pcmail_api::status(&mut client, &pcmail_api::IdsArgs { ids })?;
            waiting = r.waiting;
            (r.mails, r.missing)
        }
    };
    if json && !waiting.is_empty() {
        // Mail to a name nobody live holds: its object says why it waits.
        println!("{}", pcmail_api::status_json(&mails, &waiting)?);
    } else {
        print::timelines(&mails, json);
        for (id, note) in &waiting {
            println!("pcmail: {id}: {note}");
        }
    }
    if !missing.is_empty() {
        let e = ClientError::NotFound(missing.join(", "));
        if json {
            // The timelines found are the answer on stdout; the missing ids are the exit code.
            anyhow::bail!(exit::Shown { exit: Exit::NotFound, message: e.to_string() });
        }
        anyhow::bail!(e);
    }
    Ok(())
}
