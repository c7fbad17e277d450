//! `pcmail export DIR`: what this PC knows, as files readable without pcmail.

use std::path::Path;

pub fn run(dir: &Path, json: bool) -> anyhow::Result<()> {
    let r = pcmail_api::export::export(&super::paths()?, dir, pcmail_local::system_now())?;
    if json {
        println!("{}", serde_json::to_string(&r)?);
        return Ok(());
    }
    println!(
        "pcmail: exported {} received and {} sent mails, {} leases, {} names, {} sessions and {} jobs to {} ({} files; README.md lists them)",
        r.received, r.sent, r.leases, r.names, r.sessions, r.jobs, pcmail_api::export::shown(&r.dir), r.files
    );
    Ok(())
}
