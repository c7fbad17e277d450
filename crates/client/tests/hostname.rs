//! A PC is on the roster under its machine's real
//! hostname. Hostnames are unique on the roster, so a second label on the
//! same machine follows the documented rule (`<hostname>.<label>`) and says
//! so, naming the label that holds the real one.

use pcmail_client::sync::roster_hostname;
use pcmail_core::Millis;
use pcmail_store::meta;

fn clock() -> Millis {
    1_800_000_000_000
}

mod common;

#[test]
fn the_first_label_gets_the_real_hostname_and_a_second_one_on_the_machine_is_told_why_not() {
    let common::Two { dir: _dir, db: _, a, mut b } = common::two_pcs(clock);
    let real = roster_hostname(&pcmail_local::config::hostname(), "x");

    let roster = b.refresh_roster().unwrap();
    let host_of = |l: &str| roster.iter().find(|p| p.label == l).unwrap().hostname.clone();
    assert_eq!(host_of("pc-a"), real, "the machine's own hostname, nothing invented");
    assert_eq!(host_of("pc-b"), format!("{real}.pc-b"), "the documented rule");
    assert_eq!(a.store.meta_get(meta::HOSTNAME_NOTE).unwrap(), None);
    let note = b.store.meta_get(meta::HOSTNAME_NOTE).unwrap().expect("pc-b is told");
    assert!(note.contains(&format!("{real:?} is already on the roster for pc-a")), "{note}");
    assert!(note.contains(&format!("listed as \"{real}.pc-b\"")), "{note}");
}

#[test]
fn a_hostname_keeps_only_the_rosters_characters() {
    assert_eq!(roster_hostname("KIM-LT", "kim"), "KIM-LT");
    assert_eq!(roster_hostname("kim's laptop", "kim"), "kimslaptop");
    assert_eq!(roster_hostname("ノート", "kim"), "kim");
}
