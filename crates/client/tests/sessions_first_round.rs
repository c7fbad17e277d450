//! A cycle's live-sessions report rides its first poll only: the poll that
//! follows it by milliseconds to confirm what it brought leaves the report
//! out, and the server keeps the list it had. Real server engine on a SQLite
//! file, real PC stores, the real hook entry point; the PC's requests are
//! recorded on their way to the engine.

mod common;

use common::{clock, Scripted};
use pcmail_client::ops::Draft;
use pcmail_client::transport::{Embedded, Transport};
use pcmail_client::Client;
use pcmail_core::protocol::Op;
use pcmail_local::config::{Config, Paths, ServerConfig};
use pcmail_local::hook;

#[test]
fn the_confirming_poll_leaves_the_sessions_out_and_the_server_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("server.db");
    let pc = |label: &str, t: Box<dyn Transport>| {
        let paths = Paths::at(dir.path().join(label));
        let cfg = Config {
            native_notifications: false,
            ..Config::new(label, ServerConfig::Embedded { db: Some(db.clone()) })
        };
        cfg.save(&paths).unwrap();
        let mut c = Client::with(paths, cfg, t, clock).unwrap();
        c.sync_once(0).unwrap();
        c
    };
    let mut a = pc("pc-a", Box::new(Embedded::open(&db, "pc-a", clock).unwrap()));
    let recorded = Scripted::default();
    let engine = Embedded::open(&db, "pc-b", clock).unwrap();
    *recorded.answer.lock().unwrap() = Some(Box::new(move |op: &Op| engine.call(op)));
    let mut b = pc("pc-b", Box::new(recorded.clone()));
    let input = hook::parse_input(br#"{"session_id": "s-one", "hook_event_name": "UserPromptSubmit", "prompt": "hi"}"#)
        .unwrap();
    hook::dispatch(&b.paths, &input, clock()).unwrap();

    let id = a.send(Draft { to: "pc-b".into(), body: "hello".into(), ..Default::default() }).unwrap().ids[0].clone();
    recorded.calls.lock().unwrap().clear();
    b.sync_once(0).unwrap();
    assert!(b.store.inbox_get(&id).unwrap().is_some(), "the mail arrived");
    let polls: Vec<_> = recorded
        .calls
        .lock()
        .unwrap()
        .iter()
        .filter_map(|op| match op {
            Op::Poll(p) => Some(p.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(polls.len(), 2, "one poll brings the mail, one confirms it: {polls:?}");
    let first = polls[0].sessions.as_ref().expect("the first poll reports the sessions");
    assert_eq!(first.iter().filter_map(|s| s.as_ref().ok()).map(|s| s.session.as_str()).collect::<Vec<_>>(), ["s-one"]);
    assert_eq!(polls[1].confirm, std::slice::from_ref(&id), "the second confirms the mail");
    assert!(polls[1].sessions.is_none(), "and leaves the report out");

    let who = a.who().unwrap();
    let live: Vec<&str> = who.sessions.iter().filter(|s| s.pc == "pc-b").map(|s| s.session.as_str()).collect();
    assert_eq!(live, ["s-one"], "the server kept the list of the first poll");
}
