//! The daemon's poller against `pcmail serve` (HTTP on 127.0.0.1): a cycle
//! that brings new mail confirms it before it ends, so both the sender
//! (`delivered` on the server) and this PC's own view (`confirmedAt`, which
//! the tray shows as `delivered`) say so at once, not when the next long
//! poll returns.

mod common;

use common::{serve_at, served_pc};
use pcmail_client::ops::Draft;
use pcmail_client::Client;
use pcmail_testkit::Loopback;

const TOKEN: &str = "daemon-cycle-token";
/// The daemon's long poll.
const WAIT_MS: i64 = 20_000;

/// `pcmail serve` on loopback and two PCs on it that have polled once.
fn two_served() -> (Loopback, tempfile::TempDir, Client, Client) {
    // No keyring here: the PCs' secret comes from the environment (nextest
    // runs each test in a process of its own).
    std::env::set_var("PCMAIL_TOKEN", TOKEN);
    let dir = tempfile::tempdir().unwrap();
    let addr = pcmail_testkit::free_addr();
    let server = serve_at(addr, &dir.path().join("server.db"), TOKEN, 2);
    let url = format!("http://{addr}/api");
    let (mut a, mut b) = (served_pc(dir.path(), &url, TOKEN, "pc-a"), served_pc(dir.path(), &url, TOKEN, "pc-b"));
    a.sync_once(0).unwrap();
    b.sync_once(0).unwrap();
    (server, dir, a, b)
}

fn state(a: &mut Client, id: &str) -> String {
    let (mails, _) = a.status(&[id.to_string()]).unwrap();
    mails[0].state.as_str().to_string()
}

fn send(a: &mut Client, body: &str) -> String {
    a.send(Draft { to: "pc-b".into(), body: body.into(), ..Default::default() }).unwrap().ids[0].clone()
}

#[test]
fn a_long_polling_cycle_confirms_what_it_stored_before_it_ends() {
    let (_server, _dir, mut a, mut b) = two_served();
    let id = send(&mut a, "hello");
    let report = b.sync_once(WAIT_MS).unwrap();
    assert_eq!(report.stored, vec![id.clone()]);
    assert_eq!((report.round_trips, report.confirmed), (2, 1), "{report:?}");
    assert_eq!(state(&mut a, &id), "delivered");
    let row = b.store.inbox_get(&id).unwrap().expect("stored");
    assert!(row.confirmed_at.is_some(), "this PC's view says delivered too: {row:?}");
}
