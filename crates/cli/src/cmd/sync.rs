//! `pcmail sync`: one poll cycle.

use crate::print;

pub fn run(quiet: bool, json: bool) -> anyhow::Result<()> {
    let r = pcmail_api::sync(super::paths()?, quiet)?;
    match (&r.report, &r.skipped) {
        (Some(report), _) if !quiet => print::cycle(report, json),
        // The daemon does the work: the quiet poller leaves silently.
        (None, Some(why)) if !quiet => eprintln!("pcmail: {why}"),
        _ => {}
    }
    Ok(())
}
