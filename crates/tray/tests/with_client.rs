//! The controller with the real client crate: two PCs on one embedded server
//! (the engine in-process on a SQLite file), no Tauri. PC "pc-a" sends a
//! decision request; PC "pc-b" runs the client's cycle, the controller shows
//! and opens it, the seen mark reaches the server, the reply goes through
//! the client's rules.

use pcmail_client::config::{Config, Paths, ServerConfig};
use pcmail_client::ops::Draft;
use pcmail_client::{locks, Client};
use pcmail_core::{Kind, State};
use pcmail_store::Store;
use pcmail_tray::{ClientRemote, Controller, Remote, ReplyError};

fn pc(dir: &std::path::Path, label: &str, db: &std::path::Path) -> Paths {
    let paths = Paths::at(dir.join(label));
    Config {
        label: label.into(),
        server: ServerConfig::Embedded { db: Some(db.to_path_buf()) },
        poll_interval_secs: 2,
        notify_webhook: None,
        native_notifications: false,
        hook_session_mail_limit: pcmail_client::config::DEFAULT_HOOK_SESSION_MAIL_LIMIT,
        installation: None,
        retention_days: None,
        handoffs: Default::default(),
    }
    .save(&paths)
    .unwrap();
    paths
}

#[test]
fn decision_request_from_another_pc_seen_and_answered_through_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("server.db");
    let (pa, pb) = (pc(dir.path(), "pc-a", &db), pc(dir.path(), "pc-b", &db));
    let mut a = Client::open(pa.clone()).unwrap();
    let mut b = Client::open(pb.clone()).unwrap();
    a.sync_once(0).unwrap(); // both register on the roster
    b.sync_once(0).unwrap();

    let sent = a
        .send(Draft { to: "pc-b".into(), kind: Kind::Decision, subject: "ship it?".into(), body: "<b>yes</b> or no".into(), ..Default::default() })
        .unwrap();
    let id = sent.ids[0].clone();

    let mut ctl = Controller::new(Store::open(&pb.store()).unwrap(), "pc-b", 2_000);
    ctl.store_changed().unwrap();
    let report = b.sync_once(0).unwrap(); // the app's poller
    assert_eq!(report.stored, vec![id.clone()]);
    assert!(ctl.store_changed().unwrap().is_some(), "the watch sees the poller's commit");
    let now = pcmail_client::system_now();
    let st = ctl.status(now).unwrap();
    assert_eq!((st.counts.unread, st.counts.decisions, st.badge, st.title.as_str()), (1, 1, "attention", "1"));
    let notes = ctl.notifications_for(&report.to_notify);
    assert_eq!(notes.len(), 1);
    assert!(notes[0].title.contains("decision request from pc-a"), "{}", notes[0].title);

    // open in the window: seen locally, then the client's flush sends the mark
    let remote = ClientRemote::new(pb.clone());
    let v = ctl.open_mail(&id, now).unwrap();
    assert_eq!(v.state, State::Seen);
    remote.flush_marks();
    assert_eq!(Store::open(&pb.store()).unwrap().pending_mark_count().unwrap(), 0);
    let (mails, _) = a.status(&[id.clone()]).unwrap();
    assert_eq!(mails[0].state, State::Seen, "the sender sees it read");
    assert_eq!(mails[0].timeline.last().unwrap().by, "pc-b/ui");

    // reply: the client's fixed id, the original done
    let (reply_id, orig) = ctl.reply(&remote, &id, "no: wait for the fix", now).unwrap();
    assert_eq!(reply_id, pcmail_core::ids::reply_id(&id, "pc-b"));
    assert_eq!(orig.state, State::Done);
    let (mails, _) = a.status(&[id.clone()]).unwrap();
    assert_eq!(mails[0].state, State::Done);

    // pc-a gets the reply; replying to it is refused by the client crate itself
    a.sync_once(0).unwrap();
    let got = a.store.inbox_get(&reply_id).unwrap().expect("the reply arrived");
    assert_eq!(got.in_reply_to.as_deref(), Some(id.as_str()));
    let remote_a = ClientRemote::new(pa.clone());
    assert_eq!(remote_a.reply(&reply_id, "thanks").unwrap_err(), ReplyError::ReplyToReply);
    assert_eq!(remote_a.reply("mail-1-00000000", "x").unwrap_err(), ReplyError::NotFound);
}

#[test]
fn a_running_poller_is_seen_through_the_clients_locks() {
    let dir = tempfile::tempdir().unwrap();
    let paths = pc(dir.path(), "pc-b", &dir.path().join("server.db"));
    let remote = ClientRemote::new(paths.clone());
    assert!(!remote.other_poller_alive());
    let held = locks::try_lock(&paths.daemon_lock()).unwrap().expect("free");
    assert!(remote.other_poller_alive(), "a daemon holds the lock: the app must not start a second poller");
    drop(held);
    assert!(!remote.other_poller_alive());
}
