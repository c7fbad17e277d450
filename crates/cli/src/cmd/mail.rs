//! The mailbox: `pcmail inbox`, `sent`, `read`, `ack` and `fail`.

use crate::print;

pub fn inbox(all: bool, limit: usize, before: Option<String>, summary: bool, json: bool) -> anyhow::Result<()> {
    let mut store = super::open_store()?;
    let args = pcmail_api::InboxArgs { all, limit, before, full: !summary };
    let r = pcmail_api::inbox_in(&mut store, &args)?;
    let pcmail_api::InboxMails::Full(mails) = &r.mails else {
        // Summaries exist to be read by a program: always JSON, `next` included.
        println!("{}", serde_json::to_string(&r)?);
        return Ok(());
    };
    // Expiry and age by the server's clock (this PC's offset from it).
    let now = store.server_now(pcmail_local::system_now());
    // `--json` stays the bare array it always was; the way to older mail is for people.
    let older = r.next.as_deref().map(|next| older_mail_command(all, limit, next));
    print::inbox(mails, now, json, older.as_deref());
    Ok(())
}

/// The command that lists the page after this one.
fn older_mail_command(all: bool, limit: usize, next: &str) -> String {
    let mut c = String::from("pcmail inbox");
    if all {
        c.push_str(" --all");
    }
    if limit != pcmail_api::InboxArgs::default().limit {
        c.push_str(&format!(" --limit {limit}"));
    }
    c.push_str(&format!(" --before {next}"));
    c
}

pub fn sent(limit: usize, json: bool) -> anyhow::Result<()> {
    let r = pcmail_api::sent(&mut super::open()?, &pcmail_api::SentArgs { limit })?;
    print::sent(&r.mails, json);
    Ok(())
}

pub fn read(id: String, json: bool) -> anyhow::Result<()> {
    let m = pcmail_api::read(&mut super::open()?, &pcmail_api::IdArgs { id })?;
    print::one_mail(&m, json);
    Ok(())
}

pub fn ack(id: String, json: bool) -> anyhow::Result<()> {
    let m = pcmail_api::ack(&mut super::open()?, &pcmail_api::IdArgs { id })?;
    print::marked(&m, json);
    Ok(())
}

pub fn fail(id: String, reason: String, json: bool) -> anyhow::Result<()> {
    let m = pcmail_api::fail(&mut super::open()?, &pcmail_api::FailArgs { id, reason })?;
    print::marked(&m, json);
    Ok(())
}
