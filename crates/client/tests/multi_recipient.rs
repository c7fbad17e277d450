//! Mail to several addresses against servers that cannot take it: an older
//! server (its `hello` does not list `multi-recipient`) is told apart before
//! anything is queued, so the user gets a clear error and no send request is
//! made at all (never a mail to one of the addresses); a server that cannot
//! be reached gets the mail queued as a list, which an older one refuses whole.

use pcmail_client::ops::Draft;
use pcmail_client::transport::CallError;
use pcmail_client::ClientError;
use pcmail_core::protocol::Op;
use pcmail_core::{Pc, To};
use serde_json::json;

mod common;
use common::{clock, scripted_pc, Scripted};

fn roster() -> Vec<Pc> {
    ["pc-a", "pc-b", "pc-c"]
        .iter()
        .enumerate()
        .map(|(i, l)| Pc { number: i as i64 + 1, label: l.to_string(), hostname: l.to_uppercase() })
        .collect()
}

fn two() -> Draft {
    Draft { to: To::Many(vec!["pc-b".into(), "PC-C".into()]), body: "release at 5".into(), ..Default::default() }
}

#[test]
fn an_older_server_gets_no_send_and_the_user_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let t = Scripted { name: "scripted", ..Default::default() };
    *t.answer.lock().unwrap() = Some(Box::new(|op| match op {
        // What a server from before lists answers: every feature but this one.
        Op::Hello => Ok(json!({"ok": true, "now": 0, "server": "pcmail-gas", "protocol": 1, "rosterVersion": 1,
                               "features": ["mark-results", "expires-in", "sessions"]})),
        other => panic!("nothing but hello may reach an older server: {other:?}"),
    }));
    let mut c = scripted_pc(dir.path(), "pc-a", &t);
    c.store.roster_replace(&roster(), 1, clock()).unwrap();
    let e = c.send(two()).unwrap_err();
    assert!(matches!(&e, ClientError::Unsupported { feature } if feature == "multi-recipient"), "{e:?}");
    assert!(e.to_string().contains("nothing was sent"), "{e}");
    assert!(c.store.sent_list(10).unwrap().is_empty(), "nothing listed in sent");
    assert!(c.store.outbox_all().unwrap().is_empty(), "nothing queued");
    let calls = t.calls.lock().unwrap().clone();
    assert!(calls.iter().all(|op| matches!(op, Op::Hello)), "{calls:?}");
}

#[test]
fn a_list_to_an_unreachable_server_is_queued_whole_and_an_address_twice_is_one_copy() {
    let dir = tempfile::tempdir().unwrap();
    let t = Scripted { name: "scripted", ..Default::default() };
    *t.answer.lock().unwrap() = Some(Box::new(|_| Err(CallError::Transient("connection refused".into()))));
    let mut c = scripted_pc(dir.path(), "pc-a", &t);
    c.store.roster_replace(&roster(), 1, clock()).unwrap();
    let mut d = two();
    d.to = To::Many(vec!["pc-b".into(), "PC-C".into(), "pc-c".into()]);
    let out = c.send(d).unwrap();
    assert!(out.queued);
    let queued = c.store.outbox_all().unwrap();
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].mail.to, To::Many(vec!["pc-b".into(), "pc-c".into()]), "resolved, each PC once");
    let sent = c.store.sent_list(10).unwrap();
    assert_eq!(sent[0].to, "pc-b, pc-c");
}

#[test]
fn star_in_a_list_is_refused_before_anything_and_every_miss_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let t = Scripted { name: "scripted", ..Default::default() };
    *t.answer.lock().unwrap() = Some(Box::new(|_| Err(CallError::Transient("down".into()))));
    let mut c = scripted_pc(dir.path(), "pc-a", &t);
    c.store.roster_replace(&roster(), 1, clock()).unwrap();
    let mut d = two();
    d.to = To::Many(vec!["pc-b".into(), "*".into()]);
    assert!(matches!(c.send(d).unwrap_err(), ClientError::Invalid(m) if m.contains("cannot be combined")));
    let mut d = two();
    d.to = To::Many(vec!["pc-x".into(), "pc-b".into(), "pc-cc".into()]);
    match c.send(d).unwrap_err() {
        ClientError::UnresolvedMany(m) => {
            let names: Vec<&str> = m.iter().map(|u| u.to.as_str()).collect();
            assert_eq!(names, ["pc-x", "pc-cc"]);
            assert!(m[1].candidates.contains(&"pc-c".to_string()), "{m:?}");
        }
        e => panic!("{e:?}"),
    }
    assert!(c.store.sent_list(10).unwrap().is_empty() && c.store.outbox_all().unwrap().is_empty());
}
