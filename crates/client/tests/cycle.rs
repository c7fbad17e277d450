//! The poll cycle against scripted servers: quarantine, old servers that
//! don't know an op, notifications once per id, and the hook's writes.

use pcmail_client::transport::{CallError, Embedded};
use pcmail_client::Client;
use pcmail_core::protocol::Op;
use pcmail_core::{ErrorCode, Kind, MarkOp, ProtoError, State};
use pcmail_local::config::{Paths, ServerConfig};
use pcmail_local::hook;
use serde_json::{json, Value};

mod common;
use common::{advance, clock, offline_config, scripted_pc, Scripted};

fn mail(id: &str, to: &str, kind: &str, body: Value) -> Value {
    json!({"id": id, "from": "pc-a", "to": to, "kind": kind, "subject": "", "body": body, "urgent": false,
           "createdAt": 1, "state": "new", "timeline": []})
}

#[test]
fn a_malformed_mail_is_quarantined_and_failed_while_the_rest_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let t = Scripted { name: "scripted", ..Default::default() };
    let mut served = false;
    *t.answer.lock().unwrap() = Some(Box::new(move |op| match op {
        Op::Poll(_) if !served => {
            served = true;
            Ok(json!({"ok": true, "now": 0, "confirmed": [], "updates": [], "cursor": 0, "more": false,
            "mail": [
                mail("mail-1-0000000a", "pc-b", "note", json!("good")),
                mail("mail-1-0000000b", "pc-b", "note", json!(42)),          // body not a string
                mail("mail-1-0000000c", "pc-x", "note", json!("not for me")), // wrong recipient
                mail("mail-1-0000000d", "pc-b", "request", json!("good too")),
            ]}))
        }
        Op::Poll(_) => {
            Ok(json!({"ok": true, "now": 0, "mail": [], "confirmed": ["mail-1-0000000a", "mail-1-0000000d"],
            "marks": [], "updates": [], "cursor": 0, "more": false}))
        }
        _ => Ok(json!({"ok": true, "now": 0, "alerts": []})),
    }));
    let mut c = scripted_pc(dir.path(), "pc-b", &t);
    let r = c.sync_once(0).unwrap();
    assert_eq!(r.stored, ["mail-1-0000000a", "mail-1-0000000d"]);
    assert_eq!(r.quarantined, ["mail-1-0000000b", "mail-1-0000000c"]);
    // The second round confirms only what was stored and carries the fail marks.
    let calls = t.calls.lock().unwrap();
    let Op::Poll(p) = &calls[1] else { panic!("{:?}", calls[1]) };
    assert_eq!(p.confirm, ["mail-1-0000000a", "mail-1-0000000d"]);
    let marks: Vec<&pcmail_core::Mark> = p.marks.iter().map(|m| m.as_ref().unwrap()).collect();
    let fails: Vec<(&str, MarkOp)> = marks.iter().map(|m| (m.id.as_str(), m.op)).collect();
    assert_eq!(fails, [("mail-1-0000000b", MarkOp::Fail), ("mail-1-0000000c", MarkOp::Fail)]);
    assert!(marks[0].reason.as_deref().unwrap().contains("quarantined"));
    assert!(c.store.inbox_get("mail-1-0000000b").unwrap().is_none());
    // The work request wants a notification, the note doesn't; claimed once.
    assert_eq!(r.to_notify.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), ["mail-1-0000000d"]);
    drop(calls);
    let r2 = c.sync_once(0).unwrap();
    assert!(r2.to_notify.is_empty(), "one notification per id");
}

#[test]
fn an_op_the_server_does_not_know_backs_off_an_hour_and_is_dropped_after_five_tries() {
    let dir = tempfile::tempdir().unwrap();
    let t = Scripted { name: "scripted", ..Default::default() };
    *t.answer.lock().unwrap() = Some(Box::new(|op| match op {
        Op::Mark { .. } => Err(CallError::Server(ProtoError::new(ErrorCode::UnknownOp, "unknown op \"mark\""))),
        Op::Poll(_) => Ok(json!({"ok": true, "now": 0, "mail": [mail("mail-1-0000000a", "pc-b", "note", json!("x"))],
            "confirmed": [], "updates": [], "cursor": 0, "more": false})),
        _ => Ok(json!({"ok": true, "now": 0})),
    }));
    let mut c = scripted_pc(dir.path(), "pc-b", &t);
    // Store the mail (this old server keeps handing it out: fine, dedup by id).
    let _ = c.sync_once(0);
    assert!(c.store.inbox_get("mail-1-0000000a").unwrap().is_some());
    c.mark("mail-1-0000000a", MarkOp::Ack, None, None).unwrap();
    assert_eq!(c.store.inbox_get("mail-1-0000000a").unwrap().unwrap().status, State::Done, "done locally at once");
    let marks_sent = || t.calls.lock().unwrap().iter().filter(|o| matches!(o, Op::Mark { .. })).count();
    assert_eq!(marks_sent(), 1);
    // Within the hour nothing is retried.
    advance(30 * 60_000);
    c.flush_marks().unwrap();
    assert_eq!(marks_sent(), 1, "backs off for an hour");
    for _ in 0..4 {
        advance(61 * 60_000);
        c.flush_marks().unwrap();
    }
    assert_eq!(marks_sent(), 5);
    assert_eq!(c.store.pending_mark_count().unwrap(), 0, "dropped after 5 tries");
    let dropped = c.store.dropped_marks().unwrap();
    assert_eq!(dropped.len(), 1);
    assert!(dropped[0].3.contains("unknown_op"), "{dropped:?}");
}

#[test]
fn a_poll_answer_without_mark_results_is_treated_as_an_old_server() {
    let dir = tempfile::tempdir().unwrap();
    let t = Scripted { name: "scripted", ..Default::default() };
    *t.answer.lock().unwrap() = Some(Box::new(|op| match op {
        Op::Poll(_) => Ok(json!({"ok": true, "now": 0, "mail": [], "confirmed": [], "updates": [], "cursor": 0})),
        Op::Mark { .. } => Err(CallError::Transient("down".into())),
        _ => Ok(json!({"ok": true, "now": 0})),
    }));
    let mut c = scripted_pc(dir.path(), "pc-b", &t);
    c.store
        .write(|tx| {
            pcmail_store::marks::queue(tx, "mail-1-0000000a", MarkOp::Seen, clock(), "pc-b", None)?;
            Ok(())
        })
        .unwrap();
    c.sync_once(0).unwrap();
    let pending = c.store.due_marks(clock() + 2 * 3_600_000, 10).unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].attempts, 1);
    assert!(pending[0].next_at >= clock() + 3_600_000, "an hour of backoff");
}

/// The hook over a store filled by a real (embedded) server: a reply to my
/// mail is acked once shown, and everything shown is seen on the server.
#[test]
fn hook_acks_replies_to_my_mail_once_shown() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("server.db");
    let mk = |label: &str| {
        let paths = Paths::at(dir.path().join(label));
        let mut cfg = offline_config(label);
        cfg.server = ServerConfig::Embedded { db: Some(db.clone()) };
        cfg.save(&paths).unwrap();
        let t = Embedded::open(&db, label, clock).unwrap();
        let mut c = Client::with(paths, cfg, Box::new(t), clock).unwrap();
        c.register_self().unwrap();
        c
    };
    let mut a = mk("pc-a");
    let mut b = mk("pc-b");
    a.refresh_roster().unwrap();
    b.refresh_roster().unwrap();
    let q = a
        .send(pcmail_client::ops::Draft {
            to: "pc-b".into(),
            kind: Kind::Request,
            body: "please run it".into(),
            ..Default::default()
        })
        .unwrap();
    b.sync_once(0).unwrap();
    advance(1000);
    let reply = b.reply(&q.ids[0], "ran it: green".into(), false).unwrap();
    a.sync_once(0).unwrap();
    let input = hook::HookInput {
        session_id: "sess-1".into(),
        event: hook::Event::UserPromptSubmit,
        cwd: None,
        ..Default::default()
    };
    let run = hook::run(&a.paths, &input, clock()).unwrap();
    assert_eq!(run.shown, [reply.ids[0].clone()]);
    let ctx = run.output.unwrap();
    assert!(ctx.contains("reply-to-your-mail"), "{ctx}");
    assert_eq!(a.store.inbox_get(&reply.ids[0]).unwrap().unwrap().status, State::Done);
    a.sync_once(0).unwrap();
    let (mails, _) = a.status(&[reply.ids[0].clone()]).unwrap();
    let states: Vec<State> = mails[0].timeline.iter().map(|e| e.state).collect();
    assert_eq!(states, [State::New, State::Delivered, State::Seen, State::Done]);
    assert!(mails[0].timeline[2].by.starts_with("pc-a/sess-1"));
    // The original request was answered by the reply.
    let (orig, _) = a.status(&[q.ids[0].clone()]).unwrap();
    assert_eq!(orig[0].state, State::Done);
    assert_eq!(orig[0].timeline.last().unwrap().note.as_deref(), Some(format!("reply:{}", reply.ids[0]).as_str()));
    // The sender's sent cache followed the updates feed.
    assert_eq!(a.store.sent_get(&q.ids[0]).unwrap().unwrap().state, State::Done);
}
