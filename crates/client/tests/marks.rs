//! One bad mark once stopped a PC's polling for good. The
//! client refuses what the server would refuse (one rule, in pcmail-core),
//! sanitises actors, and a mark the server refuses is dropped with a record.

use pcmail_client::ops::Draft;
use pcmail_client::ClientError;
use pcmail_core::{MarkOp, Millis, State};
use proptest::prelude::*;
use std::sync::atomic::{AtomicI64, Ordering};

static NOW: AtomicI64 = AtomicI64::new(1_800_000_000_000);
fn clock() -> Millis {
    NOW.fetch_add(10, Ordering::SeqCst)
}

mod common;

use common::Two;

fn two() -> Two {
    common::two_pcs(clock)
}

fn delivered(t: &mut Two, body: &str) -> String {
    let id = t.a.send(Draft { to: "pc-b".into(), body: body.into(), ..Default::default() }).unwrap().ids[0].clone();
    t.b.sync_once(0).unwrap();
    id
}

#[test]
fn the_reported_bad_reasons_are_refused_at_the_command() {
    let mut t = two();
    let id = delivered(&mut t, "x");
    for reason in ["bad \u{1b}[31m red".to_string(), "x".repeat(2146), "   ".into(), "a\u{2028}b".into()] {
        match t.b.mark(&id, MarkOp::Fail, Some(&reason), None) {
            Err(ClientError::Invalid(m)) => assert!(m.contains("reason"), "{m}"),
            other => panic!("{reason:?} → {other:?}"),
        }
    }
    assert_eq!(t.b.store.pending_mark_count().unwrap(), 0, "nothing was queued");
    assert_eq!(t.b.store.inbox_get(&id).unwrap().unwrap().status, State::New, "the local status did not move");
}

#[test]
fn a_session_id_with_a_newline_still_gets_its_seen_through() {
    let mut t = two();
    let id = delivered(&mut t, "x");
    t.b.store
        .write(|tx| pcmail_store::marks::queue(tx, &id, MarkOp::Seen, clock(), "pc-b/ab\ncdefgh", None).map(|_| ()))
        .unwrap();
    t.b.sync_once(0).unwrap();
    let (mails, _) = t.a.status(&[id]).unwrap();
    assert_eq!(mails[0].state, State::Seen);
    assert_eq!(mails[0].timeline.last().unwrap().by, "pc-b/abcdefgh");
}

#[test]
fn a_bad_mark_an_older_pcmail_queued_is_dropped_with_a_record_and_polling_goes_on() {
    let mut t = two();
    let id = delivered(&mut t, "x");
    // As pcmail before the shared rule queued it: raw, with an escape in the reason.
    t.b.store
        .conn()
        .execute(
            "INSERT INTO pending_marks (mark_id, id, op, at, by, reason, next_at) VALUES ('fail:x', ?1, 'fail', 1, 'pc-b', 'bad \u{1b}[31m', 0)",
            [&id],
        )
        .unwrap();
    let r = t.b.sync_once(0).unwrap();
    assert_eq!(r.marks_dropped, 1);
    let dropped = t.b.store.dropped_marks().unwrap();
    assert_eq!(dropped.len(), 1);
    assert!(dropped[0].3.contains("reason"), "{dropped:?}");
    // New mail still arrives.
    let id2 = delivered(&mut t, "second");
    assert!(t.b.store.inbox_get(&id2).unwrap().is_some());
}

#[test]
fn a_mark_the_server_refuses_is_dropped_once_with_a_record() {
    let mut t = two();
    let id = delivered(&mut t, "x");
    // A mark for mail this PC never received: the server answers not_found for that item only.
    t.b.store
        .write(|tx| pcmail_store::marks::queue(tx, "mail-1-0000dead", MarkOp::Ack, clock(), "pc-b", None).map(|_| ()))
        .unwrap();
    t.b.mark(&id, MarkOp::Ack, None, None).unwrap();
    let r = t.b.sync_once(0).unwrap();
    let dropped = t.b.store.dropped_marks().unwrap();
    assert_eq!(dropped.len(), 1, "{r:?}");
    assert!(dropped[0].3.contains("not_found"), "{dropped:?}");
    assert_eq!(t.b.store.pending_mark_count().unwrap(), 0);
    assert_eq!(t.a.status(&[id]).unwrap().0[0].state, State::Done);
}

fn cli_reason() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        any::<String>().prop_map(Some),
        "[ \t\n\r\u{1b}\u{7}\u{0}\u{2028}\u{2029}\u{200b}a-z]{0,40}".prop_map(Some),
        (1990usize..2100).prop_map(|n| Some("y".repeat(n))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    // Random marks from the CLI's input space never make a later poll fail.
    #[test]
    fn no_mark_from_the_cli_can_stop_polling(
        marks in prop::collection::vec((prop::sample::select(vec![MarkOp::Seen, MarkOp::Ack, MarkOp::Fail]), cli_reason()), 1..5)
    ) {
        let mut t = two();
        let id = delivered(&mut t, "x");
        for (op, reason) in marks {
            let _ = t.b.mark(&id, op, reason.as_deref(), None);
        }
        prop_assert!(t.b.sync_once(0).is_ok());
        prop_assert_eq!(t.b.store.pending_mark_count().unwrap(), 0);
        let id2 = delivered(&mut t, "still arrives");
        prop_assert!(t.b.store.inbox_get(&id2).unwrap().is_some());
    }
}
