//! The daemon's poller against `pcmail serve` (HTTP on 127.0.0.1): a cycle
//! that brings new mail ends once it is stored, and the confirm goes out
//! with the next cycle's long poll, which the server applies at once and
//! then waits on. One request per mail received instead of two, and the
//! sender still sees `delivered` as soon as the mail is stored.

mod common;

use common::{serve_at, served_pc};
use pcmail_client::ops::Draft;
use pcmail_client::Client;
use pcmail_testkit::Loopback;
use std::time::{Duration, Instant};

const TOKEN: &str = "daemon-confirms-token";
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
fn the_daemon_confirms_what_it_stored_with_its_next_long_poll() {
    let (_server, _dir, mut a, mut b) = two_served();
    b.confirm_with_next_poll = true;

    let first = send(&mut a, "first");
    let report = b.sync_once(WAIT_MS).unwrap();
    assert_eq!(report.stored, vec![first.clone()]);
    assert_eq!((report.round_trips, report.confirmed), (1, 0), "{report:?}");
    assert_eq!(state(&mut a, &first), "new", "not confirmed before the next cycle");

    let poller = std::thread::spawn(move || (b.sync_once(WAIT_MS).unwrap(), Instant::now()));
    let started = Instant::now();
    while state(&mut a, &first) != "delivered" {
        assert!(started.elapsed() < Duration::from_secs(5), "the next cycle never confirmed it");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(!poller.is_finished(), "the confirming poll answered at once instead of waiting");

    let second = send(&mut a, "second");
    let sent_at = Instant::now();
    let (report, got_at) = poller.join().unwrap();
    assert!(got_at.duration_since(sent_at) < Duration::from_secs(1), "woken after {:?}", got_at - sent_at);
    assert_eq!(report.stored, vec![second]);
    assert_eq!((report.round_trips, report.confirmed), (1, 1), "{report:?}");
}

#[test]
fn a_poller_that_pauses_between_cycles_confirms_in_the_same_cycle() {
    let (_server, _dir, mut a, mut b) = two_served();

    let id = send(&mut a, "hello");
    let report = b.sync_once(WAIT_MS).unwrap();
    assert_eq!(report.stored, vec![id.clone()]);
    assert_eq!((report.round_trips, report.confirmed), (2, 1), "{report:?}");
    assert_eq!(state(&mut a, &id), "delivered");
}
