//! The controller with the real client crate: two PCs on one embedded server
//! (the engine in-process on a SQLite file), no Tauri. PC "pc-a" sends a
//! decision request; PC "pc-b" runs the client's cycle, the controller shows
//! and opens it, the seen mark reaches the server, the reply goes through
//! the client's rules.

use pcmail_client::ops::Draft;
use pcmail_client::Client;
use pcmail_core::{Kind, State};
use pcmail_local::config::{Config, Paths, ServerConfig};
use pcmail_local::locks;
use pcmail_store::Store;
use pcmail_tray::{ClientRemote, Controller, Remote, ReplyError};

fn pc(dir: &std::path::Path, label: &str, db: &std::path::Path) -> Paths {
    let paths = Paths::at(dir.join(label));
    Config {
        poll_interval_secs: 2,
        native_notifications: false,
        ..Config::new(label, ServerConfig::Embedded { db: Some(db.to_path_buf()) })
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
        .send(Draft {
            to: "pc-b".into(),
            kind: Kind::Decision,
            subject: "ship it?".into(),
            body: "<b>yes</b> or no".into(),
            ..Default::default()
        })
        .unwrap();
    let id = sent.ids[0].clone();

    let mut ctl = Controller::new(Store::open(&pb.store()).unwrap(), "pc-b", 2_000);
    ctl.store_changed().unwrap();
    let report = b.sync_once(0).unwrap(); // the app's poller
    assert_eq!(report.stored, vec![id.clone()]);
    assert!(ctl.store_changed().unwrap().is_some(), "the watch sees the poller's commit");
    let now = pcmail_local::system_now();
    let st = ctl.status(now).unwrap();
    assert_eq!((st.counts.unread, st.counts.decisions, st.badge, st.title.as_str()), (1, 1, "attention", "1"));
    let notes = ctl.notifications_for(&report.to_notify);
    assert_eq!(notes.len(), 1);
    assert!(notes[0].title.contains("[decision request] from pc-a"), "{}", notes[0].title);

    // open in the window: seen locally, then the client's flush sends the mark
    let remote = ClientRemote::new(pb.clone());
    let v = ctl.open_mail(&id, now).unwrap();
    assert_eq!(v.state, State::Seen);
    remote.flush_marks();
    assert_eq!(Store::open(&pb.store()).unwrap().pending_mark_count().unwrap(), 0);
    let (mails, _) = a.status(std::slice::from_ref(&id)).unwrap();
    assert_eq!(mails[0].state, State::Seen, "the sender sees it read");
    assert_eq!(mails[0].timeline.last().unwrap().by, "pc-b/ui");

    // reply: the client's fixed id, the original done
    let (reply_id, orig) = ctl.reply(&remote, &id, "no: wait for the fix", now).unwrap();
    assert_eq!(reply_id, pcmail_core::ids::reply_id(&id, "pc-b"));
    assert_eq!(orig.state, State::Done);
    let (mails, _) = a.status(std::slice::from_ref(&id)).unwrap();
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

/// A do-nothing window side: the Ack path must not touch it.
struct NoWindow(std::cell::Cell<u32>);
impl pcmail_tray::TrayUi for NoWindow {
    fn set_title(&self, _: &str) {}
    fn set_badge(&self, _: &pcmail_tray::Badge) {}
    fn notify(&self, _: &pcmail_tray::TrayNotification, _: std::time::Duration) -> Result<(), String> {
        Ok(())
    }
    fn show_window(&self) {
        self.0.set(self.0.get() + 1);
    }
    fn open_mail(&self, _: &str) {
        self.0.set(self.0.get() + 1);
    }
    fn changed(&self, _: i64) {}
    fn set_decisions(&self, _: &[pcmail_tray::MenuDecision]) {}
}

#[test]
fn ack_on_a_notification_is_done_on_the_server_through_the_clis_ack() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("server.db");
    let (pa, pb) = (pc(dir.path(), "pc-a", &db), pc(dir.path(), "pc-b", &db));
    let mut a = Client::open(pa.clone()).unwrap();
    let mut b = Client::open(pb.clone()).unwrap();
    a.sync_once(0).unwrap();
    b.sync_once(0).unwrap();
    let id = a
        .send(Draft {
            to: "pc-b".into(),
            kind: Kind::Request,
            subject: "rotate the logs".into(),
            body: "please".into(),
            ..Default::default()
        })
        .unwrap()
        .ids[0]
        .clone();
    let report = b.sync_once(0).unwrap();
    let ctl = Controller::new(Store::open(&pb.store()).unwrap(), "pc-b", 2_000);
    let notes = ctl.notifications_for(&report.to_notify);
    assert_eq!(
        notes[0].actions,
        vec![pcmail_tray::NoteAction::Open, pcmail_tray::NoteAction::Ack, pcmail_tray::NoteAction::Reply]
    );

    let (ui, remote) = (NoWindow(std::cell::Cell::new(0)), ClientRemote::new(pb.clone()));
    assert_eq!(ctl.notification_action(&ui, &remote, &id, "ack").unwrap(), pcmail_tray::ActionOutcome::Acked);
    assert_eq!(ui.0.get(), 0, "no window");
    // done in this PC's store and already on the server (pcmail_api::ack flushes at once)
    assert_eq!(Store::open(&pb.store()).unwrap().inbox_get(&id).unwrap().unwrap().status, State::Done);
    let (mails, _) = a.status(std::slice::from_ref(&id)).unwrap();
    assert_eq!(mails[0].state, State::Done, "the sender sees it done");
    assert_eq!(mails[0].timeline.last().unwrap().by, "pc-b", "acked as `pcmail ack` on pc-b does");
    // a second Ack sends nothing
    assert_eq!(ctl.notification_action(&ui, &remote, &id, "ack").unwrap(), pcmail_tray::ActionOutcome::AlreadyFinished);
}

/// Release in the Leases view for a lease of this PC goes
/// through `pcmail_api::leases::lease_release` (what `pcmail lease release`
/// runs): the server ends it, and the next poll empties the view.
#[test]
fn release_from_the_leases_view_ends_the_lease_on_the_server() {
    use pcmail_client::leases::{ClaimOutcome, ClaimRequest};
    use pcmail_core::lease::{ListArgs, Mode};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("server.db");
    let pb = pc(dir.path(), "pc-b", &db);
    let mut b = Client::open(pb.clone()).unwrap();
    b.sync_once(0).unwrap();
    let me = pcmail_local::process::ProcId::of(std::process::id() as i64);
    let out = b
        .lease_claim(&ClaimRequest {
            resource: "staging-deploy".into(),
            repo: "github.com/o/r".into(),
            description: "deploying 0.4".into(),
            files: vec!["deploy/**".into()],
            mode: Mode::Exclusive,
            session: "sess-0001".into(),
            name: Some("ani".into()),
            follow: me,
            ttl_ms: None,
            takeover: None,
        })
        .unwrap();
    assert!(matches!(out, ClaimOutcome::Granted { .. }), "{out:?}");
    b.sync_once(0).unwrap(); // the poll fills the lease cache the view reads

    let ctl = Controller::new(Store::open(&pb.store()).unwrap(), "pc-b", 2_000);
    let now = pcmail_local::system_now();
    let v = ctl.leases(now).unwrap();
    assert_eq!(v.leases.len(), 1, "{v:?}");
    let l = &v.leases[0];
    assert_eq!(
        (l.resource.as_str(), l.holder.as_str(), l.mine, l.stale, l.state),
        ("staging-deploy", "pc-b/ani", true, false, "held")
    );

    let remote = ClientRemote::new(pb.clone());
    let r = ctl.release_lease(&remote, "staging-deploy").unwrap();
    assert!(r.released && !r.queued, "{r:?}");
    let live: Vec<_> = b
        .lease_list(ListArgs { resource: Some("staging-deploy".into()), ..Default::default() })
        .unwrap()
        .leases
        .into_iter()
        .filter(|l| l.state.is_live())
        .collect();
    assert!(live.is_empty(), "the server lists no holder: {live:?}");
    b.sync_once(0).unwrap();
    assert!(ctl.leases(pcmail_local::system_now()).unwrap().leases.is_empty());
    // a second release: this PC holds no such lease
    let e = ctl.release_lease(&remote, "staging-deploy").unwrap_err();
    assert_eq!((e.code(), e.to_string().as_str()), ("not_found", "this PC holds no lease of staging-deploy"));
}

/// The Sessions and Jobs views through `ClientRemote` (= `pcmail_api::sessions::who`,
/// `jobs::job_list`, `jobs::job_cancel`) against a real engine: pc-a executes
/// a whitelisted command, pc-b submits a job to it and cancels it from the
/// Jobs view before pc-a polls; pc-a's `job status` says cancelled.
#[test]
fn sessions_and_jobs_views_and_cancel_through_the_clis_functions() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("server.db");
    let (pa, pb) = (pc(dir.path(), "pc-a", &db), pc(dir.path(), "pc-b", &db));
    let work = dir.path().join("checkout");
    std::fs::create_dir_all(&work).unwrap();
    let mut cfg = std::fs::read_to_string(pa.config()).unwrap();
    cfg.push_str(&format!(
        "\n[jobs]\nallowed_submitters = [\"pc-b\"]\n[jobs.checkouts]\nw = {:?}\n[[jobs.commands]]\nname = \"hello\"\nargv = [\"echo\", \"hi\"]\ncwd = \"w\"\nread_only = true\ntime_limit_secs = 30\n",
        work.display().to_string()
    ));
    std::fs::write(pa.config(), cfg).unwrap();
    let mut a = Client::open(pa.clone()).unwrap();
    a.enable_executor();
    a.sync_once(0).unwrap(); // registers
    a.sync_once(0).unwrap(); // publishes its whitelist
    let mut b = Client::open(pb.clone()).unwrap();
    b.sync_once(0).unwrap();

    let remote = ClientRemote::new(pb.clone());
    let mut ctl = Controller::new(Store::open(&pb.store()).unwrap(), "pc-b", 2_000);
    let now = pcmail_local::system_now();
    let v = ctl.sessions(&remote, now);
    assert!(v.freshness.live, "who answered: {:?}", v.freshness.error);

    let run = pcmail_api::jobs::job_run(
        &mut b,
        &pcmail_api::jobs::JobRunArgs { target: "pc-a".into(), command: "hello".into(), ..Default::default() },
    )
    .unwrap();
    let id = run.job.id.clone();
    let v = ctl.jobs(&remote, now).unwrap();
    assert!(v.freshness.live, "{:?}", v.freshness.error);
    let row = v.jobs.iter().find(|j| j.id == id).expect("the submitted job is listed");
    assert_eq!((row.state, row.target.as_str(), row.submitted_here, row.can_cancel), ("queued", "pc-a", true, true));
    // pc-a sees it as the job it runs
    let mut ctl_a = Controller::new(Store::open(&pa.store()).unwrap(), "pc-a", 2_000);
    let va = ctl_a.jobs(&ClientRemote::new(pa.clone()), now).unwrap();
    let row_a = va.jobs.iter().find(|j| j.id == id).expect("listed on its executor");
    assert_eq!((row_a.runs_here, row_a.submitted_here, row_a.can_cancel), (true, false, false));

    let cancelled = ctl.cancel_job(&remote, &id, now).unwrap();
    assert_eq!(cancelled.state, "cancelled");
    let st = pcmail_api::jobs::job_status(&mut a, &pcmail_api::jobs::JobIdArgs { job_id: id.clone() }).unwrap();
    assert_eq!(st.job.state.as_str(), "cancelled");
    let timeline = st.job.timeline.unwrap();
    assert!(timeline.iter().any(|e| e.by == "pc-b/tray"), "cancelled by pc-b's tray: {timeline:?}");
    // a job pc-b did not submit: refused before the server is asked
    assert_eq!(ctl_a.cancel_job(&ClientRemote::new(pa.clone()), &id, now).unwrap_err().code(), "forbidden");
}

/// A server that does not answer: the views say offline (`unreachable`), not "nothing".
#[test]
fn the_live_views_say_offline_when_the_server_does_not_answer() {
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths::at(dir.path().join("pc-b"));
    // a port nobody listens on (outside the range other tests' listeners and connections get)
    let port = pcmail_testkit::free_port();
    let mut cfg = Config::load(&paths).unwrap_or_else(|_| panic!("default config"));
    cfg.label = "pc-b".into();
    cfg.server = ServerConfig::Http { url: format!("http://127.0.0.1:{port}/api") };
    cfg.save(&paths).unwrap();
    std::env::set_var("PCMAIL_TOKEN", "t"); // this test's process only (nextest runs each test alone)
    let remote = ClientRemote::new(paths.clone());
    let mut ctl = Controller::new(Store::open(&paths.store()).unwrap(), "pc-b", 2_000);
    let v = ctl.sessions(&remote, 1_000);
    assert!(!v.freshness.live);
    assert_eq!(v.freshness.error_code.as_deref(), Some("unreachable"), "{:?}", v.freshness.error);
    let j = ctl.jobs(&remote, 1_000).unwrap();
    assert_eq!((j.freshness.live, j.freshness.error_code.as_deref()), (false, Some("unreachable")));
}
