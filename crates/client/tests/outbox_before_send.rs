//! A sender killed after the server took a mail still has a record of it:
//! the mail is in the outbox (and listed by `sent`) before the request goes
//! out, and settled after the answer.

use pcmail_client::ops::Draft;
use pcmail_core::protocol::Op;
use pcmail_core::Pc;
use pcmail_local::config::Paths;
use pcmail_store::Store;
use serde_json::json;
use std::sync::{Arc, Mutex};

mod common;
use common::{advance, clock, scripted_pc, Scripted};

fn roster() -> Vec<Pc> {
    vec![
        Pc { number: 1, label: "pc-a".into(), hostname: "a".into() },
        Pc { number: 2, label: "pc-b".into(), hostname: "b".into() },
    ]
}

/// The server takes the mail; the sender dies before it reads the answer
/// (a panic in the transport stands for the kill: nothing after it runs).
#[test]
fn a_mail_the_server_took_before_the_sender_died_is_listed_and_sent_again_under_its_id() {
    let dir = tempfile::tempdir().unwrap();
    let store_path = Paths::at(dir.path()).store();
    let t = Scripted { name: "scripted", ..Default::default() };
    let server_has: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen_in_store_before: Arc<Mutex<Vec<bool>>> = Arc::default();
    {
        let (server_has, seen) = (server_has.clone(), seen_in_store_before.clone());
        let path = store_path.clone();
        *t.answer.lock().unwrap() = Some(Box::new(move |op| match op {
            Op::Send { mail } => {
                // What another process reading the PC store sees while the request is out.
                let listed = Store::open(&path).unwrap().sent_list(10).unwrap().iter().any(|m| m.id == mail.id);
                seen.lock().unwrap().push(listed);
                let first = !server_has.lock().unwrap().contains(&mail.id);
                server_has.lock().unwrap().push(mail.id.clone());
                if first {
                    panic!("killed after the server took the mail");
                }
                Ok(json!({"ok": true, "ids": [mail.id], "existing": true}))
            }
            Op::Poll(_) => Ok(json!({"ok": true, "now": 0, "mail": [], "confirmed": [], "updates": [],
                                     "cursor": 0, "more": false})),
            _ => Ok(json!({"ok": true, "now": 0, "alerts": []})),
        }));
    }
    let mut c = scripted_pc(dir.path(), "pc-a", &t);
    c.store.roster_replace(&roster(), 1, clock()).unwrap();
    let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        c.send(Draft { to: "pc-b".into(), body: "taken, then the sender died".into(), ..Default::default() })
    }));
    assert!(died.is_err());
    drop(c);
    let id = server_has.lock().unwrap()[0].clone();
    assert_eq!(*seen_in_store_before.lock().unwrap(), [true], "written before the request went out");

    // A fresh process: `sent` lists the mail the server has.
    let store = Store::open(&store_path).unwrap();
    let sent = store.sent_list(10).unwrap();
    assert_eq!(sent.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), [id.as_str()], "{sent:?}");
    assert!(sent[0].queued.is_some(), "listed as not yet confirmed: {sent:?}");
    drop(store);

    // The next poll after the grace sends it again under the same id: one mail, settled.
    advance(10 * 60 * 1000);
    // (A new transport: the first one's lock was held when the sender "died".)
    let t2 = Scripted { name: "scripted", ..Default::default() };
    {
        let server_has = server_has.clone();
        *t2.answer.lock().unwrap() = Some(Box::new(move |op| match op {
            Op::Send { mail } => {
                server_has.lock().unwrap().push(mail.id.clone());
                Ok(json!({"ok": true, "ids": [mail.id], "existing": true}))
            }
            Op::Poll(_) => Ok(json!({"ok": true, "now": 0, "mail": [], "confirmed": [], "updates": [],
                                     "cursor": 0, "more": false})),
            _ => Ok(json!({"ok": true, "now": 0, "alerts": []})),
        }));
    }
    let mut c = scripted_pc(dir.path(), "pc-a", &t2);
    c.sync_once(0).unwrap();
    assert_eq!(*server_has.lock().unwrap(), [id.clone(), id.clone()], "the same id both times");
    let sent = c.store.sent_list(10).unwrap();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].id, id);
    assert!(sent[0].queued.is_none(), "settled: {sent:?}");
    assert!(c.store.outbox_all().unwrap().is_empty() && c.store.outbox_is_empty().unwrap());
}

#[test]
fn a_mail_the_server_answered_leaves_no_outbox_row_and_a_refused_one_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let t = Scripted { name: "scripted", ..Default::default() };
    *t.answer.lock().unwrap() = Some(Box::new(move |op| match op {
        Op::Send { mail } if mail.body == "refused" => Err(pcmail_client::transport::CallError::Server(
            pcmail_core::ProtoError::new(pcmail_core::ErrorCode::BadRequest, "no"),
        )),
        Op::Send { mail } => Ok(json!({"ok": true, "ids": [mail.id], "existing": false})),
        _ => Ok(json!({"ok": true, "now": 0})),
    }));
    let mut c = scripted_pc(dir.path(), "pc-a", &t);
    c.store.roster_replace(&roster(), 1, clock()).unwrap();
    let out = c.send(Draft { to: "pc-b".into(), body: "fine".into(), ..Default::default() }).unwrap();
    assert!(!out.queued);
    assert!(c.send(Draft { to: "pc-b".into(), body: "refused".into(), ..Default::default() }).is_err());
    assert!(c.store.outbox_all().unwrap().is_empty() && c.store.outbox_is_empty().unwrap());
    let sent = c.store.sent_list(10).unwrap();
    assert_eq!(sent.iter().map(|m| (m.id.clone(), m.queued.clone())).collect::<Vec<_>>(), [(out.ids[0].clone(), None)]);
}

/// A caller that answers first (`pcmail mcp`) has the `sent` rows written
/// after its answer: until then the mail is listed as being sent and stays
/// in the outbox; then settled as by a plain send; and a client dropped
/// with rows held back writes them.
#[test]
fn sent_rows_held_back_are_written_after_the_answer_or_when_the_client_goes() {
    let dir = tempfile::tempdir().unwrap();
    let t = Scripted { name: "scripted", ..Default::default() };
    *t.answer.lock().unwrap() = Some(Box::new(move |op| match op {
        Op::Send { mail } => Ok(json!({"ok": true, "ids": [mail.id], "existing": false})),
        _ => Ok(json!({"ok": true, "now": 0})),
    }));
    let mut c = scripted_pc(dir.path(), "pc-a", &t);
    c.store.roster_replace(&roster(), 1, clock()).unwrap();
    c.defer_sent_rows = true;
    let listed =
        |s: &Store| s.sent_list(10).unwrap().into_iter().map(|m| (m.id, m.queued.is_some())).collect::<Vec<_>>();

    let first = c.send(Draft { to: "pc-b".into(), body: "one".into(), ..Default::default() }).unwrap();
    assert!(!first.queued);
    assert_eq!(listed(&c.store), [(first.ids[0].clone(), true)], "still listed as being sent");
    assert_eq!(c.store.outbox_all().unwrap().len(), 1);
    assert!(!c.store.outbox_is_empty().unwrap());
    c.settle_deferred().unwrap();
    assert_eq!(listed(&c.store), [(first.ids[0].clone(), false)], "settled");
    assert!(c.store.outbox_all().unwrap().is_empty() && c.store.outbox_is_empty().unwrap());

    let second = c.send(Draft { to: "pc-b".into(), body: "two".into(), ..Default::default() }).unwrap();
    drop(c);
    let store = Store::open(&Paths::at(dir.path()).store()).unwrap();
    let mut now = listed(&store);
    now.sort();
    let mut want = vec![(first.ids[0].clone(), false), (second.ids[0].clone(), false)];
    want.sort();
    assert_eq!(now, want, "written when the client went");
    assert!(store.outbox_all().unwrap().is_empty());
}
