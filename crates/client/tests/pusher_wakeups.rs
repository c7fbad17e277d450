//! The mark pusher beside every poller used to look at the store 25 times a
//! second for the life of the PC. It now sleeps until the store is written
//! (Linux: inotify), and a `seen` the hook queues still goes out at once.
#![cfg(target_os = "linux")]

use pcmail_client::ops::Draft;
use pcmail_client::Client;
use pcmail_core::{MarkOp, State};
use pcmail_local::config::{Config, Paths, ServerConfig};
use std::path::Path;
use std::time::{Duration, Instant};

fn pc(root: &Path, label: &str) -> (Client, Paths) {
    let paths = Paths::at(root.join(label));
    std::fs::create_dir_all(&paths.home).unwrap();
    let config = Config {
        native_notifications: false,
        ..Config::new(label, ServerConfig::Embedded { db: Some(root.join("server.db")) })
    };
    config.save(&paths).unwrap();
    (Client::open(paths.clone()).unwrap(), paths)
}

/// How many times this process's thread named `name` was put on a core.
fn runs_of(name: &str) -> Option<u64> {
    for t in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        if std::fs::read_to_string(t.path().join("comm")).ok()?.trim() == name {
            let s = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
            return s.split_whitespace().nth(2)?.parse().ok();
        }
    }
    None
}

#[test]
fn an_idle_pusher_sleeps_and_a_seen_still_goes_out_at_once() {
    let root = tempfile::tempdir().unwrap();
    let (mut a, _) = pc(root.path(), "pc-a");
    let (mut b, b_paths) = pc(root.path(), "pc-b");
    b.sync_once(0).unwrap(); // on the roster
    let id = a.send(Draft { to: "pc-b".into(), body: "hello".into(), ..Default::default() }).unwrap().ids[0].clone();
    b.sync_once(0).unwrap();
    assert_eq!(a.status(std::slice::from_ref(&id)).unwrap().0[0].state, State::Delivered);

    let _pusher = pcmail_client::pusher::spawn(b_paths);
    std::thread::sleep(Duration::from_millis(700));
    let before = runs_of("pcmail-mark-pus").expect("the pusher's thread");
    std::thread::sleep(Duration::from_secs(2));
    let woke = runs_of("pcmail-mark-pus").unwrap() - before;
    // Looking every 40 ms it woke some 50 times here; asleep until a write,
    // it wakes to see whether it should stop (4 times a second).
    assert!(woke <= 20, "the idle pusher woke {woke} times in 2 s");

    // The hook's part: the mail shown, `seen` queued (another connection).
    let now = pcmail_local::system_now();
    b.store
        .write(|tx| {
            pcmail_store::inbox::advance(tx, &id, State::Seen, now, "pc-b/sess", None)?;
            pcmail_store::marks::queue(tx, &id, MarkOp::Seen, now, "pc-b/sess", None).map(|_| ())
        })
        .unwrap();
    let t = Instant::now();
    while a.status(std::slice::from_ref(&id)).unwrap().0[0].state != State::Seen {
        assert!(t.elapsed() < Duration::from_secs(2), "the seen mark did not go out");
        std::thread::sleep(Duration::from_millis(2));
    }
}
