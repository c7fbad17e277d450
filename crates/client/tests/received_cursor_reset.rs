//! Gas prunes its received-mail feed, and a PC whose cursor fell
//! behind the pruned point gets `receivedCursorReset`. The entries in
//! between may be lost, so the PC re-reads the state of its open received
//! mail with `status` (as it does for `cursorReset` on the sent feed).
//! Against a scripted server that records every request.

use pcmail_client::Client;
use pcmail_core::protocol::Op;
use pcmail_core::{Millis, State};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

mod common;
use common::{advance, clock, scripted_pc, Scripted};

const OPEN: &str = "mail-1-0000000a";
const DONE: &str = "mail-1-0000000b";
const CREATED: Millis = 1_799_999_000_000;
const EXPIRED_AT: Millis = 1_799_999_900_000;

fn mail(id: &str, state: &str, timeline: Value) -> Value {
    json!({"id": id, "from": "pc-a", "to": "pc-b", "kind": "request", "subject": "deploy?", "body": "x", "urgent": false,
           "createdAt": CREATED, "state": state, "timeline": timeline})
}

/// Poll 1 hands out two mails (both stored, one acked here after); poll 2
/// answers `receivedCursorReset` (gas pruned the feed) with no entries,
/// while on the server the open one expired meanwhile.
fn script(reset: bool) -> (Scripted, Arc<AtomicBool>) {
    let t = Scripted { name: "scripted gas", ..Default::default() };
    let pruned = Arc::new(AtomicBool::new(false));
    let p = pruned.clone();
    *t.answer.lock().unwrap() = Some(Box::new(move |op| match op {
        Op::Poll(args) => {
            let later = p.load(Ordering::SeqCst);
            let mail_out = if !later && args.confirm.is_empty() {
                vec![mail(OPEN, "new", json!([])), mail(DONE, "new", json!([]))]
            } else {
                vec![]
            };
            let confirmed: Vec<String> = args.confirm.clone();
            let mut a = json!({"ok": true, "now": clock(), "mail": mail_out, "confirmed": confirmed, "updates": [],
                "cursor": 0, "more": false, "receivedUpdates": [], "receivedCursor": if later { 50 } else { 3 }});
            if later && reset {
                a["receivedCursorReset"] = json!(true);
            }
            let marks: Vec<Value> =
                args.marks.iter().enumerate().map(|(i, _)| json!({"index": i, "ok": true})).collect();
            a["marks"] = json!(marks);
            Ok(a)
        }
        Op::Status { ids } => {
            let mails: Vec<Value> = ids
                .iter()
                .filter(|id| id.as_str() == OPEN)
                .map(|id| {
                    mail(
                        id,
                        "expired",
                        json!([{"state": "new", "at": CREATED, "by": "pc-a", "note": null},
                               {"state": "delivered", "at": CREATED + 1_000, "by": "pc-b", "note": null},
                               {"state": "expired", "at": EXPIRED_AT, "by": "server", "note": null}]),
                    )
                })
                .collect();
            Ok(json!({"ok": true, "now": clock(), "mails": mails, "missing": []}))
        }
        _ => Ok(json!({"ok": true, "now": clock()})),
    }));
    (t, pruned)
}

fn status_calls(t: &Scripted) -> Vec<Vec<String>> {
    t.calls
        .lock()
        .unwrap()
        .iter()
        .filter_map(|o| if let Op::Status { ids } = o { Some(ids.clone()) } else { None })
        .collect()
}

fn cycle_twice(dir: &std::path::Path, reset: bool) -> (Client, Scripted, pcmail_client::sync::CycleReport) {
    let (t, pruned) = script(reset);
    let mut c = scripted_pc(dir, "pc-b", &t);
    c.sync_once(0).unwrap();
    assert_eq!(c.store.inbox_get(OPEN).unwrap().unwrap().status, State::New);
    assert!(status_calls(&t).is_empty());
    pruned.store(true, Ordering::SeqCst);
    c.mark(DONE, pcmail_core::MarkOp::Ack, None, None).unwrap();
    advance(60_000);
    let r = c.sync_once(0).unwrap();
    (c, t, r)
}

#[test]
fn received_cursor_reset_rereads_the_open_received_mail_with_status() {
    let dir = tempfile::tempdir().unwrap();
    let (c, t, r) = cycle_twice(dir.path(), true);
    assert!(r.received_cursor_reset, "{r:?}");
    // Only the open mail is asked for (the acked one is final here).
    assert_eq!(status_calls(&t), vec![vec![OPEN.to_string()]]);
    let m = c.store.inbox_get(OPEN).unwrap().unwrap();
    assert_eq!(m.status, State::Expired, "the server's state, learnt through status");
    assert_eq!(m.status_at, EXPIRED_AT, "with the server's time");
    assert_eq!(m.status_by.as_deref(), Some("server"));
    assert_eq!(
        c.store.meta_i64(pcmail_store::meta::RECEIVED_CURSOR).unwrap(),
        Some(50),
        "the cursor goes on from the reset"
    );
}

#[test]
fn without_a_reset_no_status_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    let (c, t, r) = cycle_twice(dir.path(), false);
    assert!(!r.received_cursor_reset);
    assert!(status_calls(&t).is_empty(), "{:?}", status_calls(&t));
    assert_eq!(c.store.inbox_get(OPEN).unwrap().unwrap().status, State::New);
}
