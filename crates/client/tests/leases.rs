//! Leases on the PC against the real embedded server: heartbeats ride the
//! poll (no extra request), a killed holder process is released within one
//! heartbeat period by the poller's pusher, a takeover reaches the old
//! holder's next hook run once, a lease claimed offline is kept unconfirmed.

use pcmail_client::leases::{ClaimOutcome, ClaimRequest};
use pcmail_client::transport::{CallError, Embedded, Transport};
use pcmail_client::Client;
use pcmail_core::lease::{Evidence, ListArgs, Mode, Takeover, HEARTBEAT_MS, STALE_AFTER_MS};
use pcmail_core::protocol::Op;
use pcmail_core::Millis;
use pcmail_local::config::{Config, Paths, ServerConfig};
use pcmail_local::hook;
use pcmail_local::process::ProcId;
use serde_json::Value;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The test clock of the clients and the embedded server they share.
static NOW: AtomicI64 = AtomicI64::new(1_800_000_000_000);
fn clock() -> Millis {
    NOW.load(Ordering::SeqCst)
}
/// The tests move the one clock: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn config(label: &str, db: &Path) -> Config {
    Config { native_notifications: false, ..Config::new(label, ServerConfig::Embedded { db: Some(db.to_path_buf()) }) }
}

/// Counts requests; can be switched off like a pulled cable, or answer
/// `lease.*` as a server without the `leases` feature does (`unknown_op`).
struct Counting {
    inner: Embedded,
    calls: Arc<AtomicUsize>,
    offline: Arc<AtomicBool>,
    no_leases: Arc<AtomicBool>,
}

impl Transport for Counting {
    fn call(&self, op: &Op) -> Result<Value, CallError> {
        if self.offline.load(Ordering::SeqCst) {
            return Err(CallError::Transient("connection refused or no route".into()));
        }
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.no_leases.load(Ordering::SeqCst) && op.name().starts_with("lease.") {
            let msg = format!("unknown op {:?}", op.name());
            return Err(CallError::Server(pcmail_core::ProtoError::new(pcmail_core::ErrorCode::UnknownOp, msg)));
        }
        self.inner.call(op)
    }
    fn long_poll(&self) -> bool {
        false
    }
    fn describe(&self) -> String {
        "counting".into()
    }
}

struct Pc {
    client: Client,
    calls: Arc<AtomicUsize>,
    offline: Arc<AtomicBool>,
    no_leases: Arc<AtomicBool>,
    paths: Paths,
}

fn pc(root: &Path, label: &str) -> Pc {
    let db = root.join("server.db");
    let paths = Paths::at(root.join(label));
    std::fs::create_dir_all(&paths.home).unwrap();
    let cfg = config(label, &db);
    cfg.save(&paths).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let offline = Arc::new(AtomicBool::new(false));
    let no_leases = Arc::new(AtomicBool::new(false));
    let t = Counting {
        inner: Embedded::open(&db, label, clock).unwrap(),
        calls: calls.clone(),
        offline: offline.clone(),
        no_leases: no_leases.clone(),
    };
    let mut client = Client::with(paths.clone(), cfg, Box::new(t), clock).unwrap();
    client.sync_once(0).unwrap();
    Pc { client, calls, offline, no_leases, paths }
}

fn claim(resource: &str, session: &str, follow: Option<ProcId>) -> ClaimRequest {
    ClaimRequest {
        resource: resource.into(),
        repo: "github.com/o/r".into(),
        description: "deploying".into(),
        files: vec!["deploy/**".into()],
        mode: Mode::Exclusive,
        session: session.into(),
        name: None,
        follow,
        ttl_ms: None,
        takeover: None,
    }
}

fn live(c: &mut Client, resource: &str) -> Vec<pcmail_core::lease::Lease> {
    let l = c.lease_list(ListArgs { resource: Some(resource.into()), ..Default::default() }).unwrap();
    l.leases.into_iter().filter(|l| l.state.is_live()).collect()
}

#[test]
fn heartbeats_ride_the_poll_and_fill_the_guard_cache() {
    let _serial = serial();
    let root = tempfile::tempdir().unwrap();
    let mut a = pc(root.path(), "pc-a");
    let mut b = pc(root.path(), "pc-b");
    let me = ProcId::of(std::process::id() as i64).unwrap();
    let ClaimOutcome::Granted { lease } = a.client.lease_claim(&claim("staging-deploy", "s1", Some(me))).unwrap()
    else {
        panic!("granted")
    };
    let granted_at = lease.heartbeat_at;
    // Both PCs up to date (roster, lease list) before counting.
    a.client.sync_once(0).unwrap();
    b.client.sync_once(0).unwrap();

    // A poll with a lease held costs the same requests as one without.
    NOW.fetch_add(HEARTBEAT_MS, Ordering::SeqCst);
    let before = a.calls.load(Ordering::SeqCst);
    a.client.sync_once(0).unwrap();
    let with_lease = a.calls.load(Ordering::SeqCst) - before;
    let before = b.calls.load(Ordering::SeqCst);
    b.client.sync_once(0).unwrap();
    let without = b.calls.load(Ordering::SeqCst) - before;
    assert_eq!(with_lease, without, "the heartbeat rides the poll");
    let now_live = live(&mut b.client, "staging-deploy");
    assert_eq!(now_live.len(), 1);
    assert!(now_live[0].heartbeat_at > granted_at, "renewed by the poll");

    // pc-b's guard cache holds pc-a's lease after its poll.
    let cache = b.client.store.lease_cache().unwrap();
    assert_eq!(cache.len(), 1);
    assert_eq!((cache[0].holder_pc.as_str(), cache[0].resource.as_str()), ("pc-a", "staging-deploy"));

    // Polls at least every H while a lease is held, at the configured pace otherwise.
    assert_eq!(a.client.poll_pause(Duration::from_secs(120)), Duration::from_millis(HEARTBEAT_MS as u64));
    assert_eq!(b.client.poll_pause(Duration::from_secs(120)), Duration::from_secs(120));
}

#[test]
fn a_killed_holder_process_is_released_within_one_heartbeat_period() {
    let _serial = serial();
    let root = tempfile::tempdir().unwrap();
    let mut a = pc(root.path(), "pc-a");
    let mut b = pc(root.path(), "pc-b");
    let mut holder = std::process::Command::new("sleep").arg("600").spawn().unwrap();
    let proc = ProcId::of(holder.id() as i64).unwrap();
    assert!(matches!(a.client.lease_claim(&claim("gpu:0", "s1", Some(proc))).unwrap(), ClaimOutcome::Granted { .. }));
    assert!(b.client.lease_claim(&claim("gpu:0", "s9", None)).is_err(), "held");

    // pc-a's poller (the pusher beside its loop), with a short liveness period.
    let _pusher = pcmail_client::pusher::spawn_with(a.paths.clone(), Duration::from_millis(100));
    holder.kill().unwrap(); // SIGKILL
    holder.wait().unwrap();
    let killed = Instant::now();
    while !live(&mut b.client, "gpu:0").is_empty() {
        assert!(
            killed.elapsed() < Duration::from_millis(HEARTBEAT_MS as u64),
            "not released within one heartbeat period"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The next claim gets it, with a higher fence.
    let ClaimOutcome::Granted { lease } = b.client.lease_claim(&claim("gpu:0", "s9", None)).unwrap() else { panic!() };
    assert!(lease.fence >= 2);
    assert!(a.client.store.leases_mine().unwrap().is_empty(), "pc-a forgot it");
}

#[test]
fn a_takeover_is_told_to_the_old_holder_once() {
    let _serial = serial();
    let root = tempfile::tempdir().unwrap();
    let mut a = pc(root.path(), "pc-a");
    let mut b = pc(root.path(), "pc-b");
    let me = ProcId::of(std::process::id() as i64).unwrap();
    // The old holder's session is in pc-a's registry (its hook ran once).
    let input =
        hook::HookInput { session_id: "sess-a".into(), event: hook::Event::UserPromptSubmit, ..Default::default() };
    hook::dispatch(&a.paths, &input, clock()).unwrap();
    a.client.lease_claim(&claim("refactor-auth", "sess-a", Some(me))).unwrap();

    // pc-a goes silent; past 6·H the lease is stale; pc-b forces it with a reason.
    a.offline.store(true, Ordering::SeqCst);
    NOW.fetch_add(STALE_AFTER_MS + HEARTBEAT_MS, Ordering::SeqCst);
    b.client.sync_once(0).unwrap(); // the embedded server's sweep runs with a poll
    let stale = live(&mut b.client, "refactor-auth");
    let mut req = claim("refactor-auth", "sess-b", None);
    let (evidence, _) = b.client.takeover_evidence(&stale[0], true).unwrap();
    assert_eq!(evidence, Evidence::Force);
    req.takeover =
        Some(Takeover { evidence, reason: "pc-a is off the network; checked the branch".into(), detail: None });
    let ClaimOutcome::Granted { .. } = b.client.lease_claim(&req).unwrap() else { panic!() };

    // pc-a comes back: its poll learns the loss; the session's next hook says so once.
    a.offline.store(false, Ordering::SeqCst);
    a.client.sync_once(0).unwrap();
    assert!(a.client.store.leases_mine().unwrap().is_empty());
    let out = hook::dispatch(&a.paths, &input, clock()).unwrap().output.expect("one line");
    assert!(
        out.contains("lease refactor-auth was taken over by pc-b/") && out.contains("pc-a is off the network"),
        "{out}"
    );
    assert_eq!(hook::dispatch(&a.paths, &input, clock()).unwrap().output, None, "once");
}

#[test]
fn offline_a_claim_is_kept_unconfirmed_and_claimed_on_reconnect() {
    let _serial = serial();
    let root = tempfile::tempdir().unwrap();
    let mut a = pc(root.path(), "pc-a");
    let mut b = pc(root.path(), "pc-b");
    a.offline.store(true, Ordering::SeqCst);
    let me = ProcId::of(std::process::id() as i64).unwrap();
    let ClaimOutcome::Unconfirmed { .. } = a.client.lease_claim(&claim("docs", "s1", Some(me))).unwrap() else {
        panic!()
    };
    // Meanwhile pc-b holds another resource; pc-a's unconfirmed lease of "docs" is claimed on reconnect.
    b.client.lease_claim(&claim("other", "s2", None)).unwrap();
    a.offline.store(false, Ordering::SeqCst);
    a.client.sync_once(0).unwrap();
    let mine = a.client.store.leases_mine().unwrap();
    assert_eq!(mine.len(), 1);
    assert!(mine[0].fence.is_some_and(|f| f > 0), "{mine:?}");
    assert_eq!(live(&mut b.client, "docs")[0].holder.pc, "pc-a");
}

/// A lease claimed offline against a server that turns out
/// to have no leases at all is not "taken over" or "lost" to someone: the
/// session is told once that the server has no leases.
#[test]
fn an_unconfirmed_claim_against_a_server_without_leases_says_so_not_lost() {
    let _serial = serial();
    let root = tempfile::tempdir().unwrap();
    let mut a = pc(root.path(), "pc-a");
    let input =
        hook::HookInput { session_id: "sess-a".into(), event: hook::Event::UserPromptSubmit, ..Default::default() };
    hook::dispatch(&a.paths, &input, clock()).unwrap();
    a.offline.store(true, Ordering::SeqCst);
    a.no_leases.store(true, Ordering::SeqCst);
    let me = ProcId::of(std::process::id() as i64).unwrap();
    let ClaimOutcome::Unconfirmed { .. } = a.client.lease_claim(&claim("docs", "sess-a", Some(me))).unwrap() else {
        panic!()
    };
    // Back online: the server answers lease.claim with unknown_op.
    a.offline.store(false, Ordering::SeqCst);
    a.client.sync_once(0).unwrap();
    assert!(a.client.store.leases_mine().unwrap().is_empty(), "not kept as held or unconfirmed");
    let out = hook::dispatch(&a.paths, &input, clock()).unwrap().output.expect("one line");
    assert!(out.contains("lease docs is not held: the server has no leases"), "{out}");
    assert!(!out.contains("taken over") && !out.contains("lost"), "{out}");
    assert_eq!(hook::dispatch(&a.paths, &input, clock()).unwrap().output, None, "once");
}

/// The PreToolUse guard's file: written by a poll beside the store (0600),
/// rewritten when the lease ends and on every poll (its time is the cache's);
/// the guard denies from it alone, in a home with no store at all, and
/// never from a damaged file.
#[test]
fn a_poll_writes_the_guard_file_and_the_guard_denies_from_it_without_a_store() {
    use hook::HookInput;
    use pcmail_local::leases::{guard_file, GuardFile};
    let _serial = serial();
    let root = tempfile::tempdir().unwrap();
    let mut a = pc(root.path(), "pc-a");
    let mut b = pc(root.path(), "pc-b");
    let me = ProcId::of(std::process::id() as i64);
    assert!(matches!(a.client.lease_claim(&claim("staging-deploy", "s1", me)).unwrap(), ClaimOutcome::Granted { .. }));
    NOW.fetch_add(1_000, Ordering::SeqCst);
    b.client.sync_once(0).unwrap();
    let file = guard_file(&b.paths.home);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let g = GuardFile::read(&b.paths.home).expect("the poll wrote the guard file");
    assert_eq!(g.at, clock(), "the cache's time");
    let held = g.covering_exclusive("github.com/o/r", "deploy/run.sh").unwrap();
    assert_eq!((held.len(), held[0].holder_pc.as_str(), held[0].resource.as_str()), (1, "pc-a", "staging-deploy"));
    assert!(g.covering_exclusive("github.com/o/r", "src/main.rs").unwrap().is_empty());
    assert!(g.covering_exclusive("github.com/o/other", "deploy/run.sh").unwrap().is_empty());

    // A home with pc-b's config and only that file: no store.db.
    let repo = root.path().join("repo");
    std::fs::create_dir_all(repo.join("deploy")).unwrap();
    let git = |args: &[&str]| {
        assert!(std::process::Command::new("git").args(args).current_dir(&repo).output().unwrap().status.success())
    };
    git(&["init", "-q"]);
    git(&["remote", "add", "origin", "git@github.com:o/r.git"]);
    let bare = Paths::at(root.path().join("guard-only"));
    std::fs::create_dir_all(&bare.home).unwrap();
    config("pc-b", &root.path().join("server.db")).save(&bare).unwrap();
    let edit = |file: &str| HookInput {
        session_id: "s9".into(),
        event: hook::Event::PreToolUse,
        cwd: Some(repo.to_string_lossy().into()),
        tool_name: Some("Edit".into()),
        file_path: Some(repo.join(file).to_string_lossy().into()),
        ..Default::default()
    };
    let guard = |paths: &Paths, file: &str| hook::guard(paths, &edit(file), clock()).unwrap();
    std::fs::copy(&file, guard_file(&bare.home)).unwrap();
    let said = guard(&bare, "deploy/run.sh").expect("denied from the file");
    assert!(said.contains("\"deny\"") && said.contains("staging-deploy") && said.contains("pc-a"), "{said}");
    assert_eq!(guard(&bare, "src/main.rs"), None);
    assert!(!bare.store().exists(), "no store was opened or made");

    // A damaged or foreign file never denies: the store decides (none here: no decision).
    std::fs::write(guard_file(&bare.home), std::fs::read_to_string(&file).unwrap().replace('\t', " ")).unwrap();
    assert_eq!(guard(&bare, "deploy/run.sh"), None);
    std::fs::write(guard_file(&bare.home), "garbage\n").unwrap();
    assert_eq!(guard(&bare, "deploy/run.sh"), None);

    // The lease ends: pc-b's next poll rewrites the file without it.
    a.client.lease_release("staging-deploy", None, None).unwrap();
    NOW.fetch_add(1_000, Ordering::SeqCst);
    b.client.sync_once(0).unwrap();
    let g = GuardFile::read(&b.paths.home).unwrap();
    assert!(g.covering_exclusive("github.com/o/r", "deploy/run.sh").unwrap().is_empty(), "the ended lease is gone");
    assert_eq!(g.at, clock());
    std::fs::copy(&file, guard_file(&bare.home)).unwrap();
    assert_eq!(guard(&bare, "deploy/run.sh"), None);
}
