//! `lease_takeover` end to end on the PC side, against the real embedded
//! server shared by three PCs: a resource held by several `shared` holders
//! is taken only when every one of them accepts the evidence, and every one
//! is told; a `[[leases.checks]]` command answering busy (exit 0) refuses the
//! takeover before the server is asked.

use pcmail_api::leases::{self as api, LeaseClaimArgs, LeaseMode, LeaseTakeoverArgs};
use pcmail_client::leases::ClaimOutcome;
use pcmail_client::transport::{CallError, Embedded, Transport};
use pcmail_client::Client;
use pcmail_core::lease::{Event, Evidence, Lease, ListArgs, HEARTBEAT_MS, STALE_AFTER_MS};
use pcmail_core::protocol::Op;
use pcmail_core::Millis;
use pcmail_local::config::{Config, LeaseCheck, Paths, ServerConfig};
use pcmail_local::hook;
use serde_json::Value;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

static NOW: AtomicI64 = AtomicI64::new(1_800_000_000_000);
fn clock() -> Millis {
    NOW.load(Ordering::SeqCst)
}
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A PC that can be taken off the network.
struct Cable {
    inner: Embedded,
    offline: Arc<AtomicBool>,
}

impl Transport for Cable {
    fn call(&self, op: &Op) -> Result<Value, CallError> {
        if self.offline.load(Ordering::SeqCst) {
            return Err(CallError::Transient("no route to host".into()));
        }
        self.inner.call(op)
    }
    fn long_poll(&self) -> bool {
        false
    }
    fn describe(&self) -> String {
        "cable".into()
    }
}

struct Pc {
    client: Client,
    offline: Arc<AtomicBool>,
    paths: Paths,
}

fn pc(root: &Path, label: &str, checks: Vec<LeaseCheck>) -> Pc {
    let db = root.join("server.db");
    let paths = Paths::at(root.join(label));
    std::fs::create_dir_all(&paths.home).unwrap();
    let mut cfg = Config::default_for_this_pc();
    cfg.label = label.into();
    cfg.server = ServerConfig::Embedded { db: Some(db.clone()) };
    cfg.native_notifications = false;
    cfg.leases.checks = checks;
    cfg.save(&paths).unwrap();
    // What is saved is what is read back: the checks survive config.toml.
    assert_eq!(Config::load(&paths).unwrap(), cfg);
    let offline = Arc::new(AtomicBool::new(false));
    let t = Cable { inner: Embedded::open(&db, label, clock).unwrap(), offline: offline.clone() };
    let mut client = Client::with(paths.clone(), cfg, Box::new(t), clock).unwrap();
    client.sync_once(0).unwrap();
    Pc { client, offline, paths }
}

fn setup() -> (std::sync::MutexGuard<'static, ()>, tempfile::TempDir) {
    let g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // No Claude Code process above the test (also when the suite runs inside one).
    std::env::set_var("PCMAIL_CLAUDE_PID", "0");
    (g, tempfile::tempdir().unwrap())
}

/// A shared claim by `session`, following this test process (alive).
fn hold_shared(p: &mut Pc, session: &str) {
    std::env::set_var("PCMAIL_SESSION", session);
    let me = std::process::id() as i64;
    let args = LeaseClaimArgs {
        resource: "gpu-0".into(),
        description: format!("training run of {session}"),
        files: vec![],
        mode: LeaseMode::Shared,
        repo: Some("github.com/o/r".into()),
        pid: Some(me),
        ..Default::default()
    };
    let r = api::lease_claim(&mut p.client, &args).unwrap();
    assert!(matches!(r.outcome, ClaimOutcome::Granted { .. }), "{session} holds gpu-0 shared");
    std::env::remove_var("PCMAIL_SESSION");
    // Its session is in the registry (its hook ran), so a loss is told to it.
    let input =
        hook::HookInput { session_id: session.into(), event: hook::Event::UserPromptSubmit, ..Default::default() };
    hook::dispatch(&p.paths, &input, clock()).unwrap();
}

fn live(c: &mut Client) -> Vec<Lease> {
    let l = c
        .lease_list(ListArgs { resource: Some("gpu-0".into()), all: true, timeline: true, ..Default::default() })
        .unwrap();
    l.leases.into_iter().filter(|l| l.state.is_live()).collect()
}

fn takeover(force: bool) -> LeaseTakeoverArgs {
    LeaseTakeoverArgs {
        resource: "gpu-0".into(),
        reason: "both runs finished; checked nvidia-smi".into(),
        force,
        ttl: Some("30m".into()),
        ..Default::default()
    }
}

#[test]
fn a_resource_held_shared_by_several_is_taken_only_when_every_holder_accepts_the_evidence() {
    let (_g, root) = setup();
    let mut a = pc(root.path(), "pc-a", vec![]);
    let mut b = pc(root.path(), "pc-b", vec![]);
    let mut c = pc(root.path(), "pc-c", vec![]);
    hold_shared(&mut a, "sess-a");
    hold_shared(&mut b, "sess-b");
    assert_eq!(live(&mut c.client).len(), 2, "two shared holders");

    // Both still renew: refused on this PC, naming a holder, nothing sent.
    let e = api::lease_takeover(&mut c.client, &takeover(false)).unwrap_err();
    assert!(e.to_string().contains("still renews gpu-0") && e.to_string().contains("every one must be gone"), "{e}");
    // A lease that is still renewed is held: exit 10, as `claim` says it, not a usage error.
    assert_eq!(e.exit(), pcmail_api::Exit::LeaseHeld, "{e}");

    // pc-a's session ended (pc-a polls on, without renewing); pc-b went off the network.
    let a_claim = a.client.store.leases_mine().unwrap()[0].claim_id.clone();
    a.client.store.lease_mine_remove(&a_claim).unwrap();
    b.offline.store(true, Ordering::SeqCst);
    NOW.fetch_add(STALE_AFTER_MS + HEARTBEAT_MS, Ordering::SeqCst);
    a.client.sync_once(0).unwrap();
    c.client.sync_once(0).unwrap();
    let both = live(&mut c.client);
    assert!(both.len() == 2 && both.iter().all(|l| l.stale), "{both:?}");

    // session_ended holds for pc-a's lease but not for silent pc-b's: the
    // server refuses the whole takeover and nothing changes.
    let e = api::lease_takeover(&mut c.client, &takeover(false)).unwrap_err();
    let m = e.to_string();
    assert!(m.contains("pc-b") && m.contains("only force"), "{m}");
    assert_eq!(live(&mut c.client).len(), 2, "neither lease was taken");

    // With --force (a person's decision, recorded) every holder gives way at once.
    let r = api::lease_takeover(&mut c.client, &takeover(true)).unwrap();
    let ClaimOutcome::Granted { lease } = r.outcome else { panic!("granted") };
    assert_eq!(lease.holder.pc, "pc-c");
    let now_live = live(&mut c.client);
    assert_eq!(now_live.len(), 1, "one exclusive holder: {now_live:?}");
    let all = c
        .client
        .lease_list(ListArgs { resource: Some("gpu-0".into()), all: true, timeline: true, ..Default::default() })
        .unwrap()
        .leases;
    // The new lease's timeline starts with one takeover entry per old holder.
    let new = all.iter().find(|l| l.fence == lease.fence).expect("the new lease");
    let taken: Vec<_> = new.timeline.iter().flatten().filter(|t| t.event == Event::TakenOver).collect();
    let old: Vec<i64> = all.iter().filter(|l| l.fence != lease.fence).map(|l| l.fence).collect();
    assert_eq!(taken.len(), 2, "{new:#?}");
    assert!(taken.iter().all(|t| old.contains(&t.fence.unwrap())));
    assert!(taken
        .iter()
        .all(|t| t.evidence == Some(Evidence::Force) && t.reason.as_deref() == Some(takeover(true).reason.as_str())));

    // pc-b comes back: its session is told once, with who and why.
    b.offline.store(false, Ordering::SeqCst);
    b.client.sync_once(0).unwrap();
    let input =
        hook::HookInput { session_id: "sess-b".into(), event: hook::Event::UserPromptSubmit, ..Default::default() };
    let out = hook::dispatch(&b.paths, &input, clock()).unwrap().output.expect("one line");
    assert!(out.contains("lease gpu-0 was taken over by pc-c/") && out.contains("checked nvidia-smi"), "{out}");
    assert_eq!(hook::dispatch(&b.paths, &input, clock()).unwrap().output, None, "once");
}

#[test]
fn a_check_answering_busy_refuses_the_takeover_before_the_server_is_asked() {
    let (_g, root) = setup();
    let flag = root.path().join("gpu-busy");
    // Busy while the flag file exists (exit 0), free otherwise.
    let check = LeaseCheck {
        pattern: "gpu-*".into(),
        argv: vec![
            "sh".into(),
            "-c".into(),
            format!("test -e '{}' && echo \"in use: $PCMAIL_LEASE_RESOURCE\"", flag.display()),
        ],
        timeout_secs: None,
    };
    let mut a = pc(root.path(), "pc-a", vec![]);
    let mut c = pc(root.path(), "pc-c", vec![check]);
    hold_shared(&mut a, "sess-a");
    a.offline.store(true, Ordering::SeqCst);
    NOW.fetch_add(STALE_AFTER_MS + HEARTBEAT_MS, Ordering::SeqCst);
    c.client.sync_once(0).unwrap();

    std::fs::write(&flag, "").unwrap();
    let e = api::lease_takeover(&mut c.client, &takeover(true)).unwrap_err();
    assert_eq!((e.exit() as i32, e.code()), (10, "held"));
    assert!(e.to_string().contains("gpu-0 is still in use") && e.to_string().contains("in use: gpu-0"), "{e}");
    let still = live(&mut c.client);
    assert!(still.len() == 1 && still[0].holder.pc == "pc-a", "the server was not asked: {still:?}");

    // The check says free (exit 1): taken, and the check's verdict is on the timeline.
    std::fs::remove_file(&flag).unwrap();
    let r = api::lease_takeover(&mut c.client, &takeover(true)).unwrap();
    let ClaimOutcome::Granted { lease } = r.outcome else { panic!("granted") };
    let all = c
        .client
        .lease_list(ListArgs { resource: Some("gpu-0".into()), all: true, timeline: true, ..Default::default() })
        .unwrap()
        .leases;
    let new = all.iter().find(|l| l.fence == lease.fence).expect("the new lease");
    let entry = new.timeline.iter().flatten().find(|t| t.event == Event::TakenOver).expect("a takeover entry");
    let detail = entry.detail.as_deref().unwrap_or_default();
    assert!(detail.contains("exited 1 (not busy)"), "{detail}");

    // A resource no check matches is not checked.
    assert!(c.client.config.leases.check_for("staging-deploy").is_none());
}

/// A `--ttl` lease of one session is not taken by another session on the
/// same PC just because it follows no process: it is held until its time
/// ends or it is released (the server refuses --force on a lease still live).
#[test]
fn a_ttl_lease_on_this_pc_is_not_taken_without_force_while_its_time_runs() {
    let (_g, root) = setup();
    let mut a = pc(root.path(), "pc-a", vec![]);
    std::env::set_var("PCMAIL_SESSION", "sess-ttl");
    let args = LeaseClaimArgs {
        resource: "staging-deploy".into(),
        description: "deploying".into(),
        repo: Some("github.com/o/r".into()),
        ttl: Some("30m".into()),
        ..Default::default()
    };
    let r = api::lease_claim(&mut a.client, &args).unwrap();
    assert!(matches!(r.outcome, ClaimOutcome::Granted { .. }));
    std::env::set_var("PCMAIL_SESSION", "sess-other");
    let take = LeaseTakeoverArgs {
        resource: "staging-deploy".into(),
        reason: "mine now".into(),
        ttl: Some("10m".into()),
        ..Default::default()
    };
    let e = api::lease_takeover(&mut a.client, &take).unwrap_err();
    assert!(e.to_string().contains("for a fixed time (--ttl) that ends in 30m"), "{e}");
    let held = a.client.lease_list(ListArgs { resource: Some("staging-deploy".into()), ..Default::default() }).unwrap();
    assert_eq!(held.leases.iter().filter(|l| l.state.is_live()).count(), 1);
    assert_eq!(held.leases[0].holder.session, "sess-ttl", "still the first session's");
    // Past its end it is the next session's.
    NOW.fetch_add(31 * 60 * 1000, Ordering::SeqCst);
    a.client.sync_once(0).unwrap();
    let r = api::lease_claim(&mut a.client, &LeaseClaimArgs { ttl: Some("10m".into()), ..args }).unwrap();
    assert!(matches!(r.outcome, ClaimOutcome::Granted { .. }), "{:?}", r.outcome);
    std::env::remove_var("PCMAIL_SESSION");
}
