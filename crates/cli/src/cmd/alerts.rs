//! `pcmail alerts`: the server's alerts, then the marks this PC gave up on.

use crate::print;

pub fn run(all: bool, json: bool) -> anyhow::Result<()> {
    let r = pcmail_api::alerts(&mut super::open()?, &pcmail_api::AlertsArgs { all })?;
    if let Some(e) = &r.unreachable {
        eprintln!("pcmail: server unreachable ({e}); showing cached alerts");
    }
    print::alerts(&r.alerts, json);
    // Marks this PC gave up on (refused by the server, or unsendable text from an
    // older pcmail): this PC's own record, beside the server's alerts.
    if !json {
        let dropped = super::open_store()?.dropped_marks()?;
        for (_, id, op, why) in &dropped {
            println!("{:<12} {:<10} {id}  {}", "dropped_mark", op, pcmail_core::present::neutralise(why));
        }
    }
    Ok(())
}
