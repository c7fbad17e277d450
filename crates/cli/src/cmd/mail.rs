//! The mailbox: `pcmail inbox`, `sent`, `read`, `ack` and `fail`.

use crate::print;

pub fn inbox(all: bool, limit: usize, json: bool) -> anyhow::Result<()> {
    let p = super::paths()?;
    let r = pcmail_api::inbox(&p, &pcmail_api::InboxArgs { all, limit })?;
    // Expiry and age by the server's clock (this PC's offset from it).
    let now = pcmail_store::Store::open(&p.store())?.server_now(pcmail_local::system_now());
    print::inbox(&r.mails, now, json);
    Ok(())
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
