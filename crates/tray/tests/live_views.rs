//! The Sessions and Jobs views: the controller with a real
//! store and a recording fake `Remote` standing for the server (the app's
//! `ClientRemote` calls `pcmail_api::sessions::who`, `jobs::job_list` and
//! `jobs::job_cancel`, the CLI's functions).

use pcmail_core::job::Job;
use pcmail_core::sessions::{NameHolder, WhoAnswer, WhoSession};
use pcmail_core::Millis;
use pcmail_store::{meta, Store};
use pcmail_tray::{Controller, LeaseReleased, Remote, RemoteFailure, ReplyError, OUTPUT_TAIL_CHARS};
use serde_json::json;
use std::sync::Mutex;

const T0: Millis = 1_767_225_600_000;
const MIN: Millis = 60_000;

/// Answers what the test scripts, records every call.
#[derive(Default)]
struct FakeServer {
    who: Mutex<Option<Result<WhoAnswer, RemoteFailure>>>,
    jobs: Mutex<Option<Result<Vec<Job>, RemoteFailure>>>,
    calls: Mutex<Vec<String>>,
}

impl FakeServer {
    fn answer_who(&self, a: Result<WhoAnswer, RemoteFailure>) {
        *self.who.lock().unwrap() = Some(a);
    }
    fn answer_jobs(&self, a: Result<Vec<Job>, RemoteFailure>) {
        *self.jobs.lock().unwrap() = Some(a);
    }
    fn calls(&self) -> Vec<String> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

impl Remote for FakeServer {
    fn sync_once(&self) -> Result<(), String> {
        Ok(())
    }
    fn other_poller_alive(&self) -> bool {
        false
    }
    fn ack(&self, _: &str) -> Result<(), String> {
        Err("not here".into())
    }
    fn reply(&self, _: &str, _: &str) -> Result<String, ReplyError> {
        Err(ReplyError::NotFound)
    }
    fn lease_release(&self, _: &str) -> Result<LeaseReleased, String> {
        Err("not here".into())
    }
    fn who(&self) -> Result<WhoAnswer, RemoteFailure> {
        self.calls.lock().unwrap().push("who".into());
        self.who.lock().unwrap().clone().expect("who answered by the test")
    }
    fn jobs(&self) -> Result<Vec<Job>, RemoteFailure> {
        self.calls.lock().unwrap().push("job.list".into());
        self.jobs.lock().unwrap().clone().expect("jobs answered by the test")
    }
    fn job_cancel(&self, job_id: &str) -> Result<Job, RemoteFailure> {
        self.calls.lock().unwrap().push(format!("job.cancel {job_id}"));
        let jobs = self.jobs.lock().unwrap().clone().unwrap().unwrap();
        let mut j = jobs.into_iter().find(|j| j.id == job_id).expect("known job");
        match j.state.as_str() {
            "queued" => {
                j.state = pcmail_core::job::JobState::Cancelled;
                j.ended_at = Some(T0);
            }
            _ => j.cancel_requested = true,
        }
        Ok(j)
    }
}

fn session(pc: &str, id: &str, name: Option<&str>, idle: Millis, leases: &[&str]) -> WhoSession {
    WhoSession {
        pc: pc.into(),
        session: id.into(),
        name: name.map(Into::into),
        repo: Some("github.com/o/app".into()),
        branch: Some("main".into()),
        cwd: Some("/src/app".into()),
        idle_ms: idle,
        leases: leases.iter().map(|s| s.to_string()).collect(),
    }
}

fn offline() -> RemoteFailure {
    RemoteFailure::offline("connection refused (127.0.0.1:9)")
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
    fn controller(&self) -> Controller {
        Controller::new(Store::open(&self.path).unwrap(), "pc-b", 120_000)
    }
    fn store(&self) -> Store {
        Store::open(&self.path).unwrap()
    }
}

#[test]
fn sessions_lists_every_pc_mine_first_and_offline_says_so() {
    let env = Env::new();
    let mut c = env.controller();
    let server = FakeServer::default();

    // before the server ever answered, offline: nothing to show, and it says why
    server.answer_who(Err(offline()));
    let v = c.sessions(&server, T0);
    assert_eq!((v.sessions.len(), v.freshness.live, v.freshness.as_of), (0, false, None));
    assert_eq!(v.freshness.error_code.as_deref(), Some("unreachable"));

    server.answer_who(Ok(WhoAnswer {
        sessions: vec![
            session("pc-a", "aaaa1111-2222", Some("ani"), 2 * MIN, &["deploy"]),
            session("pc-c", "cccc3333-4444", None, 30_000, &[]),
            session("pc-b", "bbbb5555-6666", Some("vasya"), 5_000, &[]),
        ],
        idle_names: vec![NameHolder {
            name: "nastya".into(),
            pc: "pc-a".into(),
            session: "old".into(),
            since: T0 - 60 * MIN,
        }],
    }));
    let v = c.sessions(&server, T0 + 1000);
    let rows: Vec<(&str, Option<&str>, bool)> =
        v.sessions.iter().map(|s| (s.who.pc.as_str(), s.who.name.as_deref(), s.mine)).collect();
    assert_eq!(rows, [("pc-b", Some("vasya"), true), ("pc-a", Some("ani"), false), ("pc-c", None, false)]);
    assert_eq!((v.freshness.live, v.freshness.as_of, v.freshness.error.as_deref()), (true, Some(T0 + 1000), None));
    assert_eq!((v.sessions[1].who.idle_ms, v.sessions[1].who.leases.clone()), (2 * MIN, vec!["deploy".to_string()]));
    assert_eq!(v.sessions[1].who.repo.as_deref(), Some("github.com/o/app"));
    assert_eq!(v.idle_names.len(), 1);
    assert_eq!(v.idle_names[0].name, "nastya");

    // the server stops answering: the last rows, marked not live, as of their time
    server.answer_who(Err(offline()));
    let v = c.sessions(&server, T0 + 5 * MIN);
    assert!(!v.freshness.live);
    assert_eq!(v.freshness.as_of, Some(T0 + 1000));
    assert_eq!(v.freshness.error_code.as_deref(), Some("unreachable"));
    assert_eq!(v.sessions.len(), 3);
    // a server without sessions says so (not "offline")
    server.answer_who(Err(RemoteFailure::unsupported("sessions")));
    assert_eq!(c.sessions(&server, T0 + 6 * MIN).freshness.error_code.as_deref(), Some("unsupported"));
    assert_eq!(server.calls(), ["who", "who", "who", "who"], "every open or poll asks the server once");
}

fn job(id: &str, target: &str, submitter_pc: &str, state: &str, extra: serde_json::Value) -> Job {
    let mut v = json!({
        "id": id, "target": target, "command": "test", "args": {"checkout": "app", "crate": "core"}, "subject": "app",
        "submitter": {"pc": submitter_pc, "session": "5e55104a-0000-4000", "name": null},
        "force": false, "rerunOf": null, "state": state, "submittedAt": T0 - 10 * MIN, "startedAt": null,
        "runner": null, "heartbeatAt": null, "endedAt": null, "timeLimitMs": 900_000, "cancelRequested": false,
        "joined": 0, "result": null, "reason": null,
    });
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    serde_json::from_value(v).unwrap()
}

#[test]
fn jobs_view_shows_submitted_and_executed_jobs_with_result_and_cancel_only_for_mine() {
    let env = Env::new();
    let mut c = env.controller();
    // the server's clock runs 2 s ahead of this PC's: times are shown in this PC's
    env.store().meta_set_i64(meta::SERVER_OFFSET_MS, 2_000).unwrap();
    let server = FakeServer::default();
    let long_output: String = (0..2_000).map(|i| format!("line {i}\n")).collect();
    server.answer_jobs(Ok(vec![
        job("job-q", "build-box", "pc-b", "queued", json!({})),
        job(
            "job-r",
            "build-box",
            "pc-b",
            "running",
            json!({"startedAt": T0 - 3 * MIN + 2_000, "runner": "build-box/4242"}),
        ),
        job("job-x", "pc-b", "pc-a", "running", json!({"startedAt": T0 - MIN + 2_000, "runner": "pc-b/777"})),
        job(
            "job-ok",
            "build-box",
            "pc-b",
            "ok",
            json!({"startedAt": T0 - 9 * MIN + 2_000, "endedAt": T0 - 8 * MIN + 2_000, "runner": "build-box/4242",
                   "result": {"ran": true, "exit": 0, "durationMs": 61_500, "output": long_output, "truncated": false,
                              "artifacts": ["target/pcmail/test-app-1.log"]}}),
        ),
        job(
            "job-f",
            "pc-b",
            "pc-a",
            "failed",
            json!({"endedAt": T0 - 7 * MIN, "reason": "exit 101",
                   "result": {"ran": true, "exit": 101, "durationMs": 900, "output": "boom\n"}}),
        ),
    ]));
    let v = c.jobs(&server, T0).unwrap();
    assert!(v.freshness.live);
    let rows: Vec<(&str, &str, bool, bool, bool)> =
        v.jobs.iter().map(|j| (j.id.as_str(), j.state, j.submitted_here, j.runs_here, j.can_cancel)).collect();
    assert_eq!(
        rows,
        [
            ("job-q", "queued", true, false, true),
            ("job-r", "running", true, false, true),
            ("job-x", "running", false, true, false),
            ("job-ok", "ok", true, false, false),
            ("job-f", "failed", false, true, false),
        ]
    );
    let r = &v.jobs[1];
    assert_eq!(
        (r.started_at, r.duration_ms, r.runner.as_deref()),
        (Some(T0 - 3 * MIN), Some(3 * MIN), Some("build-box/4242"))
    );
    assert_eq!(r.args, ["checkout=app", "crate=core"]);
    assert_eq!(r.submitter, "pc-b/5e55104a");
    assert_eq!(r.submitted_at, T0 - 10 * MIN - 2_000);
    let ok = &v.jobs[3];
    assert_eq!(
        (ok.exit, ok.duration_ms, ok.artifacts.clone()),
        (Some(0), Some(61_500), vec!["target/pcmail/test-app-1.log".to_string()])
    );
    assert!(ok.output_truncated);
    assert_eq!(ok.output_tail.chars().count(), OUTPUT_TAIL_CHARS);
    assert!(ok.output_tail.ends_with("line 1999\n"), "the tail, not the head");
    let f = &v.jobs[4];
    assert_eq!(
        (f.exit, f.reason.as_deref(), f.output_tail.as_str(), f.output_truncated),
        (Some(101), Some("exit 101"), "boom\n", false)
    );

    // Cancel: my queued job goes to the server; another PC's job (running
    // here) and an ended one are refused without asking it
    server.calls();
    let cancelled = c.cancel_job(&server, "job-q", T0).unwrap();
    assert_eq!((cancelled.state, cancelled.can_cancel), ("cancelled", false));
    let e = c.cancel_job(&server, "job-x", T0).unwrap_err();
    assert_eq!(e.code(), "forbidden", "{e}");
    let e = c.cancel_job(&server, "job-ok", T0).unwrap_err();
    assert_eq!(e.code(), "ended", "{e}");
    assert_eq!(c.cancel_job(&server, "job-nope", T0).unwrap_err().code(), "not_found");
    // a running one: the server asks its executor to stop (cancelRequested)
    let r = c.cancel_job(&server, "job-r", T0).unwrap();
    assert_eq!((r.state, r.cancel_requested, r.can_cancel), ("running", true, false));
    assert_eq!(server.calls(), ["job.cancel job-q", "job.cancel job-r"]);

    // offline: the last answer (with the cancel in it), not live
    server.answer_jobs(Err(offline()));
    let v = c.jobs(&server, T0 + MIN).unwrap();
    assert_eq!((v.freshness.live, v.freshness.as_of), (false, Some(T0)));
    assert_eq!(v.jobs[0].state, "cancelled");
}

#[test]
fn jobs_offline_before_any_answer_shows_what_the_store_knows() {
    let env = Env::new();
    let mut c = env.controller();
    let j = job("job-mine", "build-box", "pc-b", "running", json!({"startedAt": T0 - MIN, "runner": "build-box/1"}));
    env.store()
        .job_mine_record(&pcmail_store::jobs::MyJob {
            job_id: j.id.clone(),
            session: "5e55104a-0000-4000".into(),
            target: j.target.clone(),
            command: j.command.clone(),
            submitted_at: T0 - 10 * MIN,
            state: "running".into(),
            job: Some(serde_json::to_string(&j).unwrap()),
            ended_at: None,
            told_at: None,
        })
        .unwrap();
    let server = FakeServer::default();
    server.answer_jobs(Err(offline()));
    let v = c.jobs(&server, T0).unwrap();
    assert_eq!(
        (v.freshness.live, v.freshness.as_of, v.freshness.error_code.as_deref()),
        (false, None, Some("unreachable"))
    );
    let rows: Vec<(&str, &str, bool)> = v.jobs.iter().map(|j| (j.id.as_str(), j.state, j.can_cancel)).collect();
    assert_eq!(rows, [("job-mine", "running", true)]);
}

#[test]
fn each_poll_tells_the_window_so_the_live_views_ask_again() {
    let env = Env::new();
    let c = env.controller();
    let mut s = env.store();
    s.meta_set_i64(meta::LAST_POLL_ATTEMPT_AT, T0).unwrap();
    s.meta_set_i64(meta::LAST_POLL_OK_AT, T0).unwrap();
    let before = c.signature(T0).unwrap();
    // a long poll starting changes nothing the window shows
    s.meta_set_i64(meta::LAST_POLL_ATTEMPT_AT, T0 + 1).unwrap();
    assert_eq!(c.signature(T0 + 1).unwrap(), before);
    // the poll's answer does (the header's "polled … ago", Sessions, Jobs)
    s.meta_set_i64(meta::LAST_POLL_OK_AT, T0 + 25_000).unwrap();
    assert_ne!(c.signature(T0 + 25_000).unwrap(), before);
}
