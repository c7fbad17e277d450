//! The controller without Tauri: a real store (SQLite in a temp dir), a
//! recording fake for the GUI side, time passed in as values.

use pcmail_core::{Alert, AlertKind, Kind, Mail, Millis, State, TimelineEntry};
use pcmail_store::leases::{CachedLease, LostLease, MyLease};
use pcmail_store::{meta, Store};
use pcmail_tray::{
    deliver, menu_item_id, next_step, ActionOutcome, Badge, Clock, ConnState, Controller, Lang, LeaseReleased,
    MenuDecision, NoteAction, PollStep, Remote, ReplyError, TrayNotification, TrayUi, LEASE_LOST_NOTE_MS,
    MENU_DECISIONS_MAX, NOTIFY_EACH_MS, NOTIFY_TOTAL_MS,
};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::time::Duration;

const T0: Millis = 1_767_225_600_000;
const MIN: Millis = 60_000;

#[derive(Debug, Clone, PartialEq)]
enum Ev {
    Title(String),
    Badge(Badge),
    Notify(String, Duration),
    ShowWindow,
    OpenMail(String),
    Changed(i64),
    Decisions(Vec<MenuDecision>),
}

/// Records every call; `notify` takes `took` ms of the test clock (capped at
/// the timeout it is given, as the shell's waiting thread is) or fails.
struct FakeUi<'a> {
    clock: &'a FakeClock,
    events: RefCell<Vec<Ev>>,
    took: RefCell<HashMap<String, Millis>>,
    fail: RefCell<Vec<String>>,
    /// the buttons each notification carried
    actions: RefCell<HashMap<String, Vec<NoteAction>>>,
    /// the last tooltip (kept apart from the events most tests compare)
    tooltip: RefCell<String>,
    /// the last notification of each id
    notes: RefCell<HashMap<String, TrayNotification>>,
}

impl<'a> FakeUi<'a> {
    fn new(clock: &'a FakeClock) -> Self {
        FakeUi {
            clock,
            events: RefCell::new(vec![]),
            took: RefCell::new(HashMap::new()),
            fail: RefCell::new(vec![]),
            actions: RefCell::new(HashMap::new()),
            tooltip: RefCell::new(String::new()),
            notes: RefCell::new(HashMap::new()),
        }
    }
    fn take(&self) -> Vec<Ev> {
        std::mem::take(&mut *self.events.borrow_mut())
    }
    /// The events without the menu's decision list (most tests are about the rest).
    fn take_but_menu(&self) -> Vec<Ev> {
        self.take().into_iter().filter(|e| !matches!(e, Ev::Decisions(_))).collect()
    }
    fn notified(&self) -> Vec<String> {
        self.events
            .borrow()
            .iter()
            .filter_map(|e| if let Ev::Notify(id, _) = e { Some(id.clone()) } else { None })
            .collect()
    }
}

impl TrayUi for FakeUi<'_> {
    fn set_title(&self, t: &str) {
        self.events.borrow_mut().push(Ev::Title(t.into()));
    }
    fn set_badge(&self, b: &Badge) {
        self.events.borrow_mut().push(Ev::Badge(b.clone()));
    }
    fn set_tooltip(&self, t: &str) {
        *self.tooltip.borrow_mut() = t.to_string();
    }
    fn notify(&self, n: &TrayNotification, timeout: Duration) -> Result<(), String> {
        self.events.borrow_mut().push(Ev::Notify(n.id.clone(), timeout));
        self.actions.borrow_mut().insert(n.id.clone(), n.actions.clone());
        self.notes.borrow_mut().insert(n.id.clone(), n.clone());
        let took = *self.took.borrow().get(&n.id).unwrap_or(&100);
        self.clock.advance(took.min(timeout.as_millis() as Millis + 1));
        if self.fail.borrow().contains(&n.id) {
            return Err("refused".into());
        }
        Ok(())
    }
    fn show_window(&self) {
        self.events.borrow_mut().push(Ev::ShowWindow);
    }
    fn open_mail(&self, id: &str) {
        self.events.borrow_mut().push(Ev::OpenMail(id.into()));
    }
    fn changed(&self, v: i64) {
        self.events.borrow_mut().push(Ev::Changed(v));
    }
    fn set_decisions(&self, d: &[MenuDecision]) {
        self.events.borrow_mut().push(Ev::Decisions(d.to_vec()));
    }
}

struct FakeClock(Cell<Millis>);
impl FakeClock {
    fn at(t: Millis) -> Self {
        FakeClock(Cell::new(t))
    }
    fn advance(&self, ms: Millis) {
        self.0.set(self.0.get() + ms);
    }
}
impl Clock for FakeClock {
    fn now_ms(&self) -> Millis {
        self.0.get()
    }
}

fn mail(id: &str, kind: Kind, urgent: bool, subject: &str) -> Mail {
    Mail {
        id: id.into(),
        from: "pc-a".into(),
        to: "pc-b".into(),
        kind,
        subject: subject.into(),
        body: format!("body of {id}"),
        urgent,
        expires_at: None,
        in_reply_to: None,
        auto: false,
        hop: 0,
        created_at: T0 - 10 * MIN,
        state: State::New,
        broadcast_of: None,
        recipients: None,
        timeline: vec![TimelineEntry { state: State::New, at: T0 - 10 * MIN, by: "pc-a".into(), note: None }],
    }
}

struct Env {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        Env { _dir: dir, path }
    }
    /// The poller's connection (a second connection, like the daemon's).
    fn poller(&self) -> Store {
        Store::open(&self.path).unwrap()
    }
    fn controller(&self) -> Controller {
        let mut c = Controller::new(Store::open(&self.path).unwrap(), "pc-b", 120_000);
        c.set_daemon_polls(false);
        c
    }
    fn deliver(&self, mails: &[Mail], now: Millis) {
        let mut s = self.poller();
        s.write(|tx| {
            for m in mails {
                pcmail_store::inbox::insert_received(tx, m, now)?;
            }
            Ok(())
        })
        .unwrap();
        let ids: Vec<String> = mails.iter().map(|m| m.id.clone()).collect();
        s.mark_confirmed(&ids, now).unwrap();
        s.meta_set_i64(meta::LAST_POLL_ATTEMPT_AT, now).unwrap();
        s.meta_set_i64(meta::LAST_POLL_OK_AT, now).unwrap();
    }
}

fn id(n: u32) -> String {
    format!("mail-{}-{:08x}", T0 - 10 * MIN, n)
}

#[test]
fn unread_count_sets_title_and_unread_badge() {
    let env = Env::new();
    let mut c = env.controller();
    let clock = FakeClock::at(T0);
    let ui = FakeUi::new(&clock);
    env.deliver(&[], T0);
    c.refresh(&ui, T0).unwrap();
    assert_eq!(ui.take_but_menu(), vec![Ev::Title("".into()), Ev::Badge(Badge::None)]);

    env.deliver(&[mail(&id(1), Kind::Note, false, "hi"), mail(&id(2), Kind::Note, false, "yo")], T0 + 1000);
    c.refresh(&ui, T0 + 1000).unwrap();
    assert_eq!(ui.take_but_menu(), vec![Ev::Title("2".into()), Ev::Badge(Badge::Unread(2))]);

    // nothing changed: nothing re-sent to the tray
    c.refresh(&ui, T0 + 2000).unwrap();
    assert_eq!(ui.take_but_menu(), vec![]);
    let st = c.status(T0 + 2000).unwrap();
    assert_eq!((st.counts.unread, st.badge, st.title.as_str()), (2, "unread", "2"));
}

#[test]
fn decision_or_urgent_gives_the_attention_badge() {
    let env = Env::new();
    let mut c = env.controller();
    let clock = FakeClock::at(T0);
    let ui = FakeUi::new(&clock);
    env.deliver(&[mail(&id(1), Kind::Note, false, "plain")], T0);
    c.refresh(&ui, T0).unwrap();
    assert!(ui.take().contains(&Ev::Badge(Badge::Unread(1))));

    // the subject tag alone makes a decision request (older senders)
    env.deliver(&[mail(&id(2), Kind::Note, false, "[判断依頼] ship it?")], T0 + 1);
    c.refresh(&ui, T0 + 1).unwrap();
    assert!(ui.take().contains(&Ev::Badge(Badge::Attention(2))));

    let env2 = Env::new();
    let mut c2 = env2.controller();
    env2.deliver(&[mail(&id(3), Kind::Note, true, "disk full")], T0);
    c2.refresh(&ui, T0).unwrap();
    assert!(ui.take().contains(&Ev::Badge(Badge::Attention(1))));

    // once seen, the badge calms down
    c2.open_mail(&id(3), T0 + 5).unwrap();
    c2.refresh(&ui, T0 + 5).unwrap();
    assert_eq!(ui.take_but_menu(), vec![Ev::Title("".into()), Ev::Badge(Badge::None)]);
}

#[test]
fn offline_and_failing_give_the_offline_badge() {
    let env = Env::new();
    let mut c = env.controller();
    let clock = FakeClock::at(T0);
    let ui = FakeUi::new(&clock);
    assert_eq!(c.connection(T0).unwrap().state, ConnState::Unknown);
    env.deliver(&[mail(&id(1), Kind::Decision, false, "q")], T0);
    assert_eq!(c.connection(T0).unwrap().state, ConnState::Online);

    // a long poll in progress (attempt stamped, success not yet) is not a failure
    let mut p = env.poller();
    p.meta_set_i64(meta::LAST_POLL_ATTEMPT_AT, T0 + 30_000).unwrap();
    assert_eq!(c.connection(T0 + 50_000).unwrap().state, ConnState::Online);

    // one failed attempt after a good poll: failing
    p.meta_set_i64(meta::LAST_POLL_ATTEMPT_AT, T0 + 60_000).unwrap();
    p.meta_set_i64(meta::CONSECUTIVE_FAILURES, 1).unwrap();
    p.meta_set(meta::LAST_POLL_ERROR, "connection refused").unwrap();
    let conn = c.connection(T0 + 60_000).unwrap();
    assert_eq!(conn.state, ConnState::Failing);
    assert_eq!(conn.last_error.as_deref(), Some("connection refused"));
    c.refresh(&ui, T0 + 60_000).unwrap();
    assert!(ui.take().contains(&Ev::Badge(Badge::Offline)), "failing shows the offline badge, over the decision");

    // three failures in a row: offline
    p.meta_set_i64(meta::CONSECUTIVE_FAILURES, 3).unwrap();
    assert_eq!(c.connection(T0 + 61_000).unwrap().state, ConnState::Offline);

    // back: a good poll clears it
    p.meta_set_i64(meta::LAST_POLL_ATTEMPT_AT, T0 + 120_000).unwrap();
    p.meta_set_i64(meta::LAST_POLL_OK_AT, T0 + 120_000).unwrap();
    p.meta_set_i64(meta::CONSECUTIVE_FAILURES, 0).unwrap();
    c.refresh(&ui, T0 + 120_000).unwrap();
    assert!(ui.take().contains(&Ev::Badge(Badge::Attention(1))));

    // a poller that went silent (nobody polls for > 10 min): offline
    assert_eq!(c.connection(T0 + 120_000 + 11 * MIN).unwrap().state, ConnState::Offline);
}

#[test]
fn one_notification_per_id_across_cycles_and_only_for_decision_request_urgent() {
    let env = Env::new();
    let mut c = env.controller();
    let clock = FakeClock::at(T0);
    let ui = FakeUi::new(&clock);
    env.deliver(
        &[
            mail(&id(1), Kind::Decision, false, "d"),
            mail(&id(2), Kind::Request, false, "r"),
            mail(&id(3), Kind::Note, true, "u"),
            mail(&id(4), Kind::Note, false, "plain note: no popup"),
            mail(&id(5), Kind::Note, false, "[作業依頼] tagged"),
        ],
        T0,
    );
    let d = c.refresh_and_notify(&ui, &clock).unwrap();
    let mut shown = d.shown.clone();
    shown.sort();
    assert_eq!(shown, vec![id(1), id(2), id(3), id(5)]);

    // next cycles: same mails, no second notification
    for _ in 0..3 {
        let d = c.refresh_and_notify(&ui, &clock).unwrap();
        assert!(d.shown.is_empty());
    }
    // a new one in a later cycle gets its own
    env.deliver(&[mail(&id(6), Kind::Decision, false, "d2")], T0 + 1);
    let d = c.refresh_and_notify(&ui, &clock).unwrap();
    assert_eq!(d.shown, vec![id(6)]);
    assert_eq!(ui.notified().len(), 5);

    // a second tray/daemon on the same store does not announce them again
    let mut other = env.controller();
    assert!(other.refresh_and_notify(&ui, &clock).unwrap().shown.is_empty());
}

#[test]
fn budget_5s_each_20s_in_all() {
    let clock = FakeClock::at(T0);
    let ui = FakeUi::new(&clock);
    let notes: Vec<TrayNotification> = (1..=8)
        .map(|n| TrayNotification {
            note: pcmail_tray::Notification { id: id(n), title: "t".into(), body: "b".into() },
            actions: vec![],
            lang: Lang::En,
        })
        .collect();
    // 1 is quick, 2 hangs (the shell gives up after 5 s), 3 fails, the rest take 4 s each
    ui.took.borrow_mut().insert(id(1), 200);
    ui.took.borrow_mut().insert(id(2), 60_000);
    ui.fail.borrow_mut().push(id(3));
    for n in 4..=8 {
        ui.took.borrow_mut().insert(id(n), 4_000);
    }
    let d = deliver(&notes, &ui, &clock);
    // every call was given at most 5 s, and never more than what was left of 20 s
    for e in ui.events.borrow().iter() {
        if let Ev::Notify(_, t) = e {
            assert!(t.as_millis() as Millis <= NOTIFY_EACH_MS && t.as_millis() as Millis <= NOTIFY_TOTAL_MS);
        }
    }
    assert_eq!(d.shown[0], id(1));
    assert!(d.failed.iter().any(|(i, _)| *i == id(2)), "the hung one counts as failed: {d:?}");
    assert!(d.failed.iter().any(|(i, _)| *i == id(3)));
    // 0.2 + 5.001 (the hung one, given up on) + 0.1 + 4 + 4 + 4 = 17.301 s, then mail 7 gets the 2.699 s left (and overruns), 8 is skipped
    assert_eq!(d.shown, vec![id(1), id(4), id(5), id(6)]);
    assert!(d.failed.iter().any(|(i, _)| *i == id(7)));
    assert_eq!(d.skipped, vec![id(8)]);
    assert!(d.spent_ms <= NOTIFY_TOTAL_MS + 1, "spent {}", d.spent_ms);
    let last_timeout = ui
        .events
        .borrow()
        .iter()
        .filter_map(|e| if let Ev::Notify(i, t) = e { (*i == id(7)).then_some(*t) } else { None })
        .next()
        .unwrap();
    assert_eq!(last_timeout, Duration::from_millis(2_699));
}

#[test]
fn pause_stops_popups_but_not_the_count_and_paused_mail_is_not_announced_later() {
    let env = Env::new();
    let mut c = env.controller();
    let clock = FakeClock::at(T0);
    let ui = FakeUi::new(&clock);
    c.set_paused(true);
    env.deliver(&[mail(&id(1), Kind::Decision, false, "d")], T0);
    let d = c.refresh_and_notify(&ui, &clock).unwrap();
    assert!(d.shown.is_empty());
    let ev = ui.take_but_menu();
    assert!(ev.contains(&Ev::Title("1".into())) && ev.contains(&Ev::Badge(Badge::Attention(1))));
    assert!(c.status(T0).unwrap().paused);
    c.set_paused(false);
    assert!(c.refresh_and_notify(&ui, &clock).unwrap().shown.is_empty());
    env.deliver(&[mail(&id(2), Kind::Request, false, "r")], T0 + 1);
    assert_eq!(c.refresh_and_notify(&ui, &clock).unwrap().shown, vec![id(2)]);

    // mail claimed by this app's own poll cycle (CycleReport::to_notify)
    let m = env.poller().inbox_get(&id(2)).unwrap().unwrap();
    assert_eq!(c.notifications_for(std::slice::from_ref(&m)).len(), 1);
    c.set_paused(true);
    assert!(c.notifications_for(&[m]).is_empty());
}

#[test]
fn a_notification_click_opens_that_mail_and_open_marks_it_seen() {
    let env = Env::new();
    let mut c = env.controller();
    let clock = FakeClock::at(T0);
    let ui = FakeUi::new(&clock);
    env.deliver(&[mail(&id(1), Kind::Decision, false, "d"), mail(&id(2), Kind::Note, false, "n")], T0);
    c.notification_clicked(&ui, &id(1));
    assert_eq!(ui.take(), vec![Ev::OpenMail(id(1))]);
    // the window then opens it: seen, locally and queued for the server
    let v = c.open_mail(&id(1), T0 + 5_000).unwrap();
    assert_eq!(v.state, State::Seen);
    assert!(v.pending);
    assert_eq!(v.body.as_deref(), Some(format!("body of {}", id(1)).as_str()));
    let states: Vec<State> = v.timeline.iter().map(|e| e.state).collect();
    assert_eq!(states, vec![State::New, State::Delivered, State::Seen]);
    assert_eq!(v.timeline[2].by, "pc-b/ui");
    let marks = env.poller().due_marks(Millis::MAX, 10).unwrap();
    assert_eq!(marks.len(), 1);
    assert_eq!((marks[0].mark.id.as_str(), marks[0].mark.op), (id(1).as_str(), pcmail_core::MarkOp::Seen));
    // opening again changes nothing and queues nothing more
    c.open_mail(&id(1), T0 + 9_000).unwrap();
    assert_eq!(env.poller().due_marks(Millis::MAX, 10).unwrap().len(), 1);
    assert_eq!(c.status(T0).unwrap().counts.unread, 1);

    // "Open" in the menu: the window (no single urgent mail left)
    c.open_clicked(&ui, T0).unwrap();
    assert_eq!(ui.take(), vec![Ev::ShowWindow]);
    // exactly one decision waiting: straight to it
    env.deliver(&[mail(&id(3), Kind::Decision, false, "d3")], T0);
    c.open_clicked(&ui, T0).unwrap();
    assert_eq!(ui.take(), vec![Ev::OpenMail(id(3))]);
}

#[test]
fn ack_makes_it_done_and_seen_after_done_stays_done() {
    let env = Env::new();
    let mut c = env.controller();
    env.deliver(&[mail(&id(1), Kind::Request, false, "r")], T0);
    let v = c.ack(&id(1), T0 + 1_000).unwrap();
    assert_eq!(v.state, State::Done);
    assert_eq!(v.timeline.last().unwrap().note.as_deref(), Some("ack"));
    let v = c.open_mail(&id(1), T0 + 2_000).unwrap();
    assert_eq!(v.state, State::Done, "seen after done stays done");
    let ops: Vec<_> = env.poller().due_marks(Millis::MAX, 10).unwrap().into_iter().map(|m| m.mark.op).collect();
    assert_eq!(ops, vec![pcmail_core::MarkOp::Ack]);
    // gone from the open list, still in "all"
    assert!(c.list_inbox(false, T0 + 3_000).unwrap().is_empty());
    assert_eq!(c.list_inbox(true, T0 + 3_000).unwrap().len(), 1);
    assert_eq!(c.status(T0 + 3_000).unwrap().counts.unread, 0);
    assert!(matches!(c.ack("mail-1-deadbeef", T0), Err(e) if e.code() == "not_found"));
}

struct FakeRemote;
impl Remote for FakeRemote {
    fn sync_once(&self) -> Result<(), String> {
        Ok(())
    }
    fn other_poller_alive(&self) -> bool {
        false
    }
    fn ack(&self, _id: &str) -> Result<(), String> {
        Err("FakeRemote does not ack".into())
    }
    fn reply(&self, original: &str, _body: &str) -> Result<String, ReplyError> {
        Ok(pcmail_core::ids::reply_id(original, "pc-b"))
    }
}

#[test]
fn reply_to_a_reply_is_refused_before_the_client_is_asked() {
    let env = Env::new();
    let mut c = env.controller();
    let mut r = mail(&id(1), Kind::Note, false, "Re: x");
    r.in_reply_to = Some(id(9));
    env.deliver(&[r, mail(&id(2), Kind::Decision, false, "d")], T0);
    let e = c.reply(&FakeRemote, &id(1), "thanks", T0).unwrap_err();
    assert_eq!(e.code(), "reply_to_reply");
    let (rid, _) = c.reply(&FakeRemote, &id(2), "yes", T0).unwrap();
    assert_eq!(rid, pcmail_core::ids::reply_id(&id(2), "pc-b"));
}

#[test]
fn store_watch_sees_the_pollers_commits() {
    let env = Env::new();
    let mut c = env.controller();
    assert!(c.store_changed().unwrap().is_some(), "first look");
    assert!(c.store_changed().unwrap().is_none());
    env.deliver(&[mail(&id(1), Kind::Note, false, "n")], T0);
    assert!(c.store_changed().unwrap().is_some(), "another connection committed");
    assert!(c.store_changed().unwrap().is_none());
}

#[test]
fn views_sent_alerts_and_expiry() {
    let env = Env::new();
    let c = env.controller();
    let mut m = mail(&id(1), Kind::Note, false, "old");
    m.expires_at = Some(T0 + MIN);
    env.deliver(&[m], T0);
    let v = &c.list_inbox(true, T0 + 2 * MIN).unwrap()[0];
    assert_eq!(v.state, State::Expired);
    assert_eq!(v.timeline.last().unwrap().by, "server");
    assert_eq!(c.status(T0 + 2 * MIN).unwrap().counts.unread, 0, "expired mail is not unread");

    let mut p = env.poller();
    let out = pcmail_core::OutgoingMail {
        id: id(7),
        to: "pc-c".into(),
        kind: Kind::Request,
        subject: "do it".into(),
        body: "x".repeat(500),
        urgent: false,
        expires_at: None,
        expires_in: None,
        in_reply_to: None,
        auto: false,
        hop: 0,
    };
    p.sent_record(&out, &[id(7)], "pc-b", T0, &out.id).unwrap();
    p.sent_apply_update(&pcmail_core::Update {
        seq: 1,
        id: id(7),
        state: State::Seen,
        at: T0 + 5,
        by: "pc-c/s1".into(),
    })
    .unwrap();
    let s = c.list_sent().unwrap();
    assert_eq!(s[0].state, State::Seen);
    assert_eq!(s[0].timeline.len(), 2);
    assert!(s[0].body.is_none() && s[0].preview.chars().count() == 161);
    assert_eq!(c.get_sent(&id(7)).unwrap().body.unwrap().len(), 500);

    p.alerts_replace(&[Alert {
        key: "k|unseen".into(),
        kind: AlertKind::Unseen,
        subject: id(1),
        pc: "pc-b".into(),
        message: "unseen 2 h".into(),
        opened_at: T0,
        updated_at: T0,
        resolved_at: None,
        count: 1,
        posted: false,
        post_tries: 0,
        last_error: None,
    }])
    .unwrap();
    assert_eq!(c.alerts().unwrap().len(), 1);
    assert_eq!(c.status(T0).unwrap().counts.alerts, 1);
    // the shapes the window reads (docs/tray.md)
    let j = serde_json::to_value(c.status(T0).unwrap()).unwrap();
    for k in ["pc", "connection", "paused", "badge", "title", "counts", "now"] {
        assert!(j.get(k).is_some(), "{k}");
    }
    let j = serde_json::to_value(&c.list_inbox(true, T0).unwrap()[0]).unwrap();
    for k in [
        "id",
        "from",
        "kind",
        "subject",
        "preview",
        "urgent",
        "createdAt",
        "deliveredAt",
        "state",
        "inReplyTo",
        "pending",
        "timeline",
    ] {
        assert!(j.get(k).is_some(), "{k}");
    }
}

#[test]
fn poll_loop_uses_a_live_daemon_and_polls_on_time_or_when_asked() {
    assert_eq!(next_step(T0, None, 120_000, false, false), PollStep::Cycle);
    assert_eq!(next_step(T0, Some(T0 - 30_000), 120_000, false, false), PollStep::Wait { ms: 90_000 });
    assert_eq!(next_step(T0, Some(T0 - 30_000), 120_000, false, true), PollStep::Cycle);
    assert_eq!(next_step(T0, Some(T0 - 120_000), 120_000, false, false), PollStep::Cycle);
    assert!(matches!(next_step(T0, None, 120_000, true, true), PollStep::Daemon { .. }), "never a second poller");
}

#[test]
fn icons_differ_per_badge_and_encode_as_png() {
    use pcmail_tray::icon::{compose, png, SIZE};
    let kinds = [Badge::None, Badge::Unread(3), Badge::Unread(42), Badge::Attention(1), Badge::Offline];
    let imgs: Vec<Vec<u8>> = kinds.iter().map(compose).collect();
    for (i, a) in imgs.iter().enumerate() {
        assert_eq!(a.len(), (SIZE * SIZE * 4) as usize);
        for b in &imgs[i + 1..] {
            assert_ne!(a, b);
        }
    }
    // the badge corner is blue for unread, red for attention
    let px = |img: &Vec<u8>, x: u32, y: u32| {
        let i = ((y * SIZE + x) * 4) as usize;
        [img[i], img[i + 1], img[i + 2], img[i + 3]]
    };
    let corner = (SIZE - 17 - 12, 17 - 12 + 2);
    assert!(px(&imgs[1], corner.0, corner.1)[2] > 200, "blue");
    assert!(px(&imgs[3], corner.0, corner.1)[0] > 200, "red");
    assert_eq!(px(&imgs[0], corner.0, corner.1)[3], 0, "no badge: transparent corner");
    let p = png(&imgs[1], SIZE, SIZE);
    assert_eq!(&p[..8], b"\x89PNG\r\n\x1a\n");
}

/// Records the acks it is asked for, like `ClientRemote::ack` would send them
/// (the real path, through `pcmail_api::ack`, is in `with_client.rs`).
#[derive(Default)]
struct AckingRemote {
    acked: RefCell<Vec<String>>,
    fail: Cell<bool>,
}
// The controller asks `Remote: Send + Sync`; the test is single-threaded.
unsafe impl Sync for AckingRemote {}
impl Remote for AckingRemote {
    fn sync_once(&self) -> Result<(), String> {
        Ok(())
    }
    fn other_poller_alive(&self) -> bool {
        false
    }
    fn ack(&self, id: &str) -> Result<(), String> {
        if self.fail.get() {
            return Err("server unreachable".into());
        }
        self.acked.borrow_mut().push(id.to_string());
        Ok(())
    }
    fn reply(&self, _: &str, _: &str) -> Result<String, ReplyError> {
        Err(ReplyError::NotFound)
    }
}

#[test]
fn decision_request_work_request_and_urgent_carry_open_ack_reply_and_a_note_none() {
    let env = Env::new();
    let mut c = env.controller();
    let clock = FakeClock::at(T0);
    let ui = FakeUi::new(&clock);
    let mut urgent_reply = mail(&id(4), Kind::Note, true, "Re: disk");
    urgent_reply.in_reply_to = Some(id(9));
    env.deliver(
        &[
            mail(&id(1), Kind::Decision, false, "ship?"),
            mail(&id(2), Kind::Request, false, "build it"),
            mail(&id(3), Kind::Note, true, "disk full"),
            urgent_reply,
            mail(&id(5), Kind::Note, false, "fyi"),
        ],
        T0,
    );
    c.refresh_and_notify(&ui, &clock).unwrap();
    let actions = ui.actions.borrow().clone();
    use NoteAction::*;
    assert_eq!(actions.get(&id(1)), Some(&vec![Open, Ack, Reply]));
    assert_eq!(actions.get(&id(2)), Some(&vec![Open, Ack, Reply]));
    assert_eq!(actions.get(&id(3)), Some(&vec![Open, Ack, Reply]));
    assert_eq!(actions.get(&id(4)), Some(&vec![Open, Ack]), "a reply cannot be answered: no Reply…");
    assert_eq!(actions.get(&id(5)), None, "a plain note gets no popup");
    // the keys the notification server reports back, and what the user reads
    assert_eq!(
        [Open, Ack, Reply].map(|a| (a.key(), a.label())),
        [("open", "Open"), ("ack", "Ack"), ("reply", "Reply…")]
    );
}

#[test]
fn ack_from_a_notification_goes_through_the_remote_and_opens_no_window() {
    let env = Env::new();
    let c = env.controller();
    let clock = FakeClock::at(T0);
    let ui = FakeUi::new(&clock);
    let remote = AckingRemote::default();
    env.deliver(&[mail(&id(1), Kind::Decision, false, "ship?"), mail(&id(2), Kind::Request, false, "r")], T0);

    assert_eq!(c.notification_action(&ui, &remote, &id(1), "ack").unwrap(), ActionOutcome::Acked);
    assert_eq!(*remote.acked.borrow(), vec![id(1)]);
    assert_eq!(ui.take(), vec![], "Ack opens no window");

    // Open, Reply… and a click on the notification itself open the window at that mail
    for key in ["open", "reply", "default"] {
        assert_eq!(c.notification_action(&ui, &remote, &id(2), key).unwrap(), ActionOutcome::Opened);
        assert_eq!(ui.take(), vec![Ev::OpenMail(id(2))], "{key}");
    }
    // closing the notification does nothing
    assert_eq!(c.notification_action(&ui, &remote, &id(2), "__closed").unwrap(), ActionOutcome::Ignored);
    assert_eq!((ui.take(), remote.acked.borrow().len()), (vec![], 1));

    // a mail already done is not acked again
    let mut cw = env.controller();
    cw.ack(&id(2), T0 + 1).unwrap();
    assert_eq!(c.notification_action(&ui, &remote, &id(2), "ack").unwrap(), ActionOutcome::AlreadyFinished);
    assert_eq!(remote.acked.borrow().len(), 1);
    // an unknown mail, and a server that refuses: errors the shell logs
    assert_eq!(c.notification_action(&ui, &remote, "mail-1-deadbeef", "ack").unwrap_err().code(), "not_found");
    remote.fail.set(true);
    env.deliver(&[mail(&id(3), Kind::Decision, false, "d")], T0);
    let e = c.notification_action(&ui, &remote, &id(3), "ack").unwrap_err();
    assert!(e.to_string().contains("server unreachable"), "{e}");
}

#[test]
fn the_tray_menu_lists_open_decision_requests_up_to_five_each_with_open_and_ack() {
    let env = Env::new();
    let mut c = env.controller();
    let clock = FakeClock::at(T0);
    let ui = FakeUi::new(&clock);
    let remote = AckingRemote::default();
    c.refresh(&ui, T0).unwrap();
    assert!(ui.take().contains(&Ev::Decisions(vec![])));

    // seven decision requests (one by its subject tag only), a work request, a note
    let mut mails: Vec<Mail> = (1..=6).map(|n| mail(&id(n), Kind::Decision, false, &format!("decide {n}"))).collect();
    mails.push(mail(&id(7), Kind::Note, false, "[判断依頼] tagged\nwith a newline"));
    mails.push(mail(&id(8), Kind::Request, false, "work"));
    mails.push(mail(&id(9), Kind::Note, false, "note"));
    for (i, m) in mails.iter_mut().enumerate() {
        m.created_at = T0 - 10 * MIN + i as Millis; // newest last
    }
    env.deliver(&mails, T0);
    c.refresh(&ui, T0).unwrap();
    let menus: Vec<Vec<MenuDecision>> =
        ui.take().into_iter().filter_map(|e| if let Ev::Decisions(d) = e { Some(d) } else { None }).collect();
    assert_eq!(menus.len(), 1);
    let ids: Vec<String> = menus[0].iter().map(|d| d.id.clone()).collect();
    assert_eq!(MENU_DECISIONS_MAX, 5);
    assert_eq!(ids, vec![id(7), id(6), id(5), id(4), id(3)], "newest five decision requests, no work request or note");
    assert_eq!(
        menus[0][0].label, "tagged with a newline — pc-a",
        "one line, with the sender, the tag left to the heading"
    );
    // nothing changed: the menu is not rebuilt
    c.refresh(&ui, T0 + 1).unwrap();
    assert!(!ui.take().iter().any(|e| matches!(e, Ev::Decisions(_))));

    // each has Open and Ack
    assert_eq!(menu_item_id(NoteAction::Ack, &id(7)), format!("ack:{}", id(7)));
    assert_eq!(c.menu_clicked(&ui, &remote, &menu_item_id(NoteAction::Open, &id(6))).unwrap(), ActionOutcome::Opened);
    assert_eq!(ui.take(), vec![Ev::OpenMail(id(6))]);
    assert_eq!(c.menu_clicked(&ui, &remote, &menu_item_id(NoteAction::Ack, &id(7))).unwrap(), ActionOutcome::Acked);
    assert_eq!(*remote.acked.borrow(), vec![id(7)]);
    // the shell's own items and junk are not the controller's
    for item in ["quit", "ack:", "ack:../etc", "reply:x", "open"] {
        assert_eq!(c.menu_clicked(&ui, &remote, item).unwrap(), ActionOutcome::Ignored, "{item}");
    }

    // once one is done (the real ack lands in the store), the next one moves up
    c.ack(&id(7), T0 + 2).unwrap();
    c.refresh(&ui, T0 + 2).unwrap();
    let menus: Vec<Vec<MenuDecision>> =
        ui.take().into_iter().filter_map(|e| if let Ev::Decisions(d) = e { Some(d) } else { None }).collect();
    let ids: Vec<String> = menus[0].iter().map(|d| d.id.clone()).collect();
    assert_eq!(ids, vec![id(6), id(5), id(4), id(3), id(2)]);
}

// ---- The kind badge and the buttons in the user's language --------

#[test]
fn notification_title_badge_and_buttons_follow_the_users_language() {
    let env = Env::new();
    let clock = FakeClock::at(T0);
    let ui = FakeUi::new(&clock);
    env.deliver(
        &[
            mail(&id(1), Kind::Decision, false, "[判断依頼] ship 0.4?"),
            mail(&id(2), Kind::Request, true, "rotate the keys"),
        ],
        T0,
    );
    let mut ja = env.controller();
    ja.set_lang(Lang::Ja);
    ja.refresh_and_notify(&ui, &clock).unwrap();
    let notes = ui.notes.borrow().clone();
    let d = &notes[&id(1)];
    assert_eq!(d.title, "pcmail: [判断依頼] pc-a から");
    assert_eq!(d.body, "ship 0.4?", "the tag is not shown twice");
    assert_eq!(d.buttons(), vec![("open", "開く"), ("ack", "完了にする"), ("reply", "返信…")]);
    assert_eq!(notes[&id(2)].title, "pcmail: 至急 [作業依頼] pc-a から");
    assert_eq!(ja.status(T0).unwrap().lang, "ja");

    // English (LANG=C, en_US…): the same mail, English badge and labels
    let env = Env::new();
    env.deliver(&[mail(&id(1), Kind::Decision, false, "[判断依頼] ship 0.4?")], T0);
    let ui = FakeUi::new(&clock);
    let mut en = env.controller();
    en.refresh_and_notify(&ui, &clock).unwrap();
    let d = ui.notes.borrow()[&id(1)].clone();
    assert_eq!(d.title, "pcmail: [decision request] from pc-a");
    assert_eq!(d.buttons(), vec![("open", "Open"), ("ack", "Ack"), ("reply", "Reply…")]);
    assert_eq!(en.status(T0).unwrap().lang, "en");
    // the language comes from the locale variables in POSIX order
    assert_eq!(Lang::from_locale(None, Some("ja_JP.UTF-8"), Some("en_US.UTF-8")), Lang::Ja);
    assert_eq!(Lang::from_locale(Some("C"), Some("ja_JP.UTF-8"), None), Lang::En);
}

// ---- The Leases view and a lease of mine gone stale or lost ----

fn cached(resource: &str, fence: i64, pc: &str, name: Option<&str>, heartbeat_at: Millis, stale: bool) -> CachedLease {
    CachedLease {
        resource: resource.into(),
        fence,
        repo: "github.com/o/r".into(),
        mode: "exclusive".into(),
        holder_pc: pc.into(),
        holder_session: "0123456789abcdef".into(),
        holder_name: name.map(str::to_string),
        description: format!("working on {resource}"),
        files: vec![format!("{resource}/**")],
        granted_at: T0 - 30 * MIN,
        heartbeat_at,
        stale,
        json: String::new(),
    }
}

fn my_lease(resource: &str, fence: Option<i64>, heartbeat_at: Option<Millis>) -> MyLease {
    MyLease {
        claim_id: format!("claim-{resource}"),
        resource: resource.into(),
        repo: "github.com/o/r".into(),
        description: format!("working on {resource}"),
        files: vec![format!("{resource}/**")],
        mode: "exclusive".into(),
        session: "0123456789abcdef".into(),
        pid: Some(1),
        pid_start: None,
        ttl_expires_at: None,
        fence,
        state: if fence.is_some() { "held".into() } else { "unconfirmed".into() },
        claimed_at: T0 - 30 * MIN,
        heartbeat_at,
        release_reason: None,
        release_queued_at: None,
    }
}

#[test]
fn leases_view_shows_who_holds_what_mine_first_with_heartbeat_age_and_stale() {
    let env = Env::new();
    let c = env.controller();
    let mut s = env.poller();
    s.lease_mine_put(&my_lease("deploy", Some(7), Some(T0 - MIN))).unwrap();
    s.lease_mine_put(&my_lease("gpu-0", None, None)).unwrap(); // claimed while offline
    s.lease_cache_replace(
        &[
            cached("api", 3, "pc-a", Some("ani"), T0 - 5 * MIN, true),
            cached("deploy", 7, "pc-b", None, T0 - MIN, false),
        ],
        12,
        T0 - MIN,
    )
    .unwrap();

    let v = c.leases(T0).unwrap();
    let rows: Vec<(&str, &str, bool, bool, &str)> =
        v.leases.iter().map(|l| (l.resource.as_str(), l.holder.as_str(), l.mine, l.stale, l.state)).collect();
    assert_eq!(
        rows,
        [
            ("deploy", "pc-b/01234567", true, false, "held"),
            ("gpu-0", "pc-b/01234567", true, false, "unconfirmed"),
            ("api", "pc-a/ani", false, true, "stale"),
        ]
    );
    let api = &v.leases[2];
    assert_eq!(
        (api.heartbeat_age_ms, api.repo.as_str(), api.files.clone()),
        (Some(5 * MIN), "github.com/o/r", vec!["api/**".to_string()])
    );
    assert_eq!(v.leases[0].heartbeat_age_ms, Some(MIN));
    assert_eq!(v.cache_at, Some(T0 - MIN));
    assert!(v.lost.is_empty());
    let st = c.status(T0).unwrap();
    assert_eq!((st.leases.mine, st.leases.stale, st.leases.lost), (2, 0, 0));
    assert_eq!(st.title, "", "another PC's stale lease is not mine to worry about");
}

#[test]
fn a_lease_of_mine_gone_stale_is_noted_in_the_title_and_tooltip() {
    let env = Env::new();
    let mut c = env.controller();
    let clock = FakeClock::at(T0);
    let ui = FakeUi::new(&clock);
    env.deliver(&[mail(&id(1), Kind::Note, false, "hi")], T0);
    env.poller().lease_mine_put(&my_lease("deploy", Some(7), Some(T0))).unwrap();
    c.refresh(&ui, T0 + 2 * MIN).unwrap();
    assert!(ui.take_but_menu().contains(&Ev::Title("1".into())), "renewed 2 min ago: fine");
    assert!(!ui.tooltip.borrow().contains("lease"), "{}", ui.tooltip.borrow());

    // no heartbeat answered for more than 6·H (3 min): stale
    c.refresh(&ui, T0 + 4 * MIN).unwrap();
    assert_eq!(ui.take_but_menu(), vec![Ev::Title("1 · lease stale".into())]);
    assert!(ui.tooltip.borrow().contains("lease deploy stale (no heartbeat for 4m)"), "{}", ui.tooltip.borrow());
    let v = c.leases(T0 + 4 * MIN).unwrap();
    assert_eq!((v.leases[0].stale, v.leases[0].state), (true, "stale"));

    // the poller's next heartbeat is answered: the note goes
    env.poller().lease_renewed("deploy", 7, T0 + 4 * MIN + 500).unwrap();
    c.refresh(&ui, T0 + 4 * MIN + 1000).unwrap();
    assert_eq!(ui.take_but_menu(), vec![Ev::Title("1".into())]);
    assert!(!ui.tooltip.borrow().contains("lease"));

    // the server lists it stale (e.g. its heartbeats stopped reaching it): noted too
    env.poller().lease_cache_replace(&[cached("deploy", 7, "pc-b", None, T0, true)], 2, T0 + 5 * MIN).unwrap();
    c.refresh(&ui, T0 + 5 * MIN).unwrap();
    assert_eq!(ui.take_but_menu(), vec![Ev::Title("1 · lease stale".into())]);
}

#[test]
fn a_lease_of_mine_lost_is_noted_for_an_hour_and_listed() {
    let env = Env::new();
    let mut c = env.controller();
    let clock = FakeClock::at(T0);
    let ui = FakeUi::new(&clock);
    let mut s = env.poller();
    s.lease_mine_put(&my_lease("deploy", Some(7), Some(T0))).unwrap();
    c.refresh(&ui, T0).unwrap();
    assert!(ui.take_but_menu().contains(&Ev::Title("".into())));

    // the poll says another session took it over
    s.lease_lost(&LostLease {
        resource: "deploy".into(),
        fence: 7,
        at: T0 + MIN,
        taken_by: Some("pc-a/ani".into()),
        reason: Some("holder silent since noon".into()),
        event: "taken_over".into(),
    })
    .unwrap();
    c.refresh(&ui, T0 + 2 * MIN).unwrap();
    assert_eq!(ui.take_but_menu(), vec![Ev::Title("lease lost".into())]);
    assert!(ui.tooltip.borrow().contains("lease deploy lost: taken over by pc-a/ani"), "{}", ui.tooltip.borrow());
    let v = c.leases(T0 + 2 * MIN).unwrap();
    assert!(v.leases.is_empty(), "no longer held");
    assert_eq!(v.lost.len(), 1);
    assert_eq!(v.lost[0].line, "lease deploy was taken over by pc-a/ani: holder silent since noon");
    let st = c.status(T0 + 2 * MIN).unwrap();
    assert_eq!((st.leases.mine, st.leases.lost), (0, 1));

    // an hour later it is history
    c.refresh(&ui, T0 + MIN + LEASE_LOST_NOTE_MS + 1).unwrap();
    assert_eq!(ui.take_but_menu(), vec![Ev::Title("".into())]);
    assert!(c.leases(T0 + MIN + LEASE_LOST_NOTE_MS + 1).unwrap().lost.is_empty());
}

#[derive(Default)]
struct LeaseRemote {
    released: std::sync::Mutex<Vec<String>>,
}

impl Remote for LeaseRemote {
    fn sync_once(&self) -> Result<(), String> {
        Ok(())
    }
    fn other_poller_alive(&self) -> bool {
        false
    }
    fn ack(&self, _: &str) -> Result<(), String> {
        Err("no".into())
    }
    fn reply(&self, _: &str, _: &str) -> Result<String, ReplyError> {
        Err(ReplyError::NotFound)
    }
    fn lease_release(&self, resource: &str) -> Result<LeaseReleased, String> {
        self.released.lock().unwrap().push(resource.to_string());
        Ok(LeaseReleased { released: true, queued: false })
    }
}

#[test]
fn release_goes_to_the_remote_for_my_own_lease_only() {
    let env = Env::new();
    let c = env.controller();
    let mut s = env.poller();
    s.lease_mine_put(&my_lease("deploy", Some(7), Some(T0))).unwrap();
    s.lease_cache_replace(
        &[cached("api", 3, "pc-a", Some("ani"), T0, false), cached("deploy", 7, "pc-b", None, T0, false)],
        3,
        T0,
    )
    .unwrap();
    let r = LeaseRemote::default();
    assert_eq!(c.release_lease(&r, "deploy").unwrap(), LeaseReleased { released: true, queued: false });
    let e = c.release_lease(&r, "api").unwrap_err();
    assert_eq!(e.code(), "not_found", "another PC's lease: {e}");
    assert_eq!(*r.released.lock().unwrap(), vec!["deploy".to_string()]);
}
