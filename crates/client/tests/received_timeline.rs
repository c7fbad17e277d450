//! The received timeline is recorded, not rebuilt. A receiving PC
//! learns from the poll's received-updates feed what the server did to mail
//! it holds (a sweep's `expired`) with the server's time, and keeps the same
//! timeline `status` answers. Real server engine on a SQLite file, real PC
//! stores, a clock this test moves.

use pcmail_client::ops::{Draft, Expires};
use pcmail_core::{MarkOp, Millis, State};
use serde_json::json;
use std::path::Path;

mod common;
use common::{advance, clock};

fn sweep(db: &Path, now: Millis) -> serde_json::Value {
    let engine = pcmail_server::Engine::open(db, pcmail_server::EngineConfig::default()).unwrap();
    engine.handle_value(&json!({"v": 1, "op": "sweep", "pc": "pc-a", "args": {}}), now)
}

#[test]
fn a_mail_the_server_expires_reads_expired_on_the_receiving_pc_with_the_servers_time() {
    let common::Two { dir: _dir, db, mut a, mut b } = common::two_pcs(clock);

    let draft = Draft {
        to: "pc-b".into(),
        body: "decide by noon".into(),
        expires: Some(Expires::In(60_000)),
        ..Default::default()
    };
    let id = a.send(draft).unwrap().ids[0].clone();
    let stored_at = advance(100);
    b.sync_once(0).unwrap();
    let m = b.store.inbox_get(&id).unwrap().unwrap();
    assert_eq!(m.status, State::New, "stored, not seen");
    let states: Vec<_> = m.timeline.iter().map(|e| (e.state, e.by.as_str())).collect();
    assert_eq!(states, [(State::New, "pc-a"), (State::Delivered, "pc-b")]);
    assert_eq!(m.timeline[1].at, stored_at, "delivered at the server's time of the confirm");

    // The server's sweep, a while after the expiry; nobody on pc-b touched it.
    let swept_at = advance(120_000);
    assert_eq!(sweep(&db, swept_at)["expired"], json!(1));
    advance(5_000);
    let r = b.sync_once(0).unwrap();
    assert!(r.received_updates >= 1, "{r:?}");

    let m = b.store.inbox_get(&id).unwrap().unwrap();
    assert_eq!(m.status, State::Expired);
    // The server records the expiry at the moment its rule fired (the mail's
    // `expiresAt` by the server's clock), whenever the sweep ran.
    let expired_at = m.expires_at.expect("an expiry");
    assert!(expired_at < swept_at);
    assert_eq!(m.status_at, expired_at, "the server's time, not this PC's");
    assert_eq!(m.status_by.as_deref(), Some("server"));
    let last = m.timeline.last().unwrap();
    assert_eq!((last.state, last.at, last.by.as_str()), (State::Expired, expired_at, "server"));
    // The listing `pcmail inbox --all --json` prints says the same.
    let listed = b.store.inbox_list(&[], 10).unwrap();
    let row = listed.iter().find(|x| x.id == id).unwrap();
    assert_eq!((row.status, row.timeline.clone()), (State::Expired, m.timeline.clone()));

    // `status` asks the server: the same timeline as the store recorded.
    let (mails, _) = b.status(std::slice::from_ref(&id)).unwrap();
    assert_eq!(mails[0].timeline, m.timeline);
}

#[test]
fn a_local_mark_shows_at_once_and_the_servers_record_replaces_it() {
    let common::Two { dir: _dir, db: _, mut a, mut b } = common::two_pcs(clock);
    let id = a.send(Draft { to: "pc-b".into(), body: "x".into(), ..Default::default() }).unwrap().ids[0].clone();
    b.sync_once(0).unwrap();

    let failed_here = advance(1_000);
    b.mark(&id, MarkOp::Fail, Some("disk full"), None).unwrap();
    let m = b.store.inbox_get(&id).unwrap().unwrap();
    let last = m.timeline.last().unwrap();
    assert_eq!((last.state, last.at, last.note.as_deref()), (State::Failed, failed_here, Some("disk full")));

    // The mark reaches the server later; the server records it (clamped, its
    // actor) and the feed brings that record back.
    advance(2_000);
    b.sync_once(0).unwrap();
    let (mails, _) = b.status(std::slice::from_ref(&id)).unwrap();
    let m = b.store.inbox_get(&id).unwrap().unwrap();
    assert_eq!(m.timeline, mails[0].timeline, "the store holds the server's record");
    assert_eq!(m.status, State::Failed);

    // The sender's own record of it, in the same table.
    a.sync_once(0).unwrap();
    let sent = a.store.timeline(&id).unwrap();
    let states: Vec<_> = sent.iter().map(|e| e.state).collect();
    assert_eq!(states, [State::New, State::Delivered, State::Failed]);
}
