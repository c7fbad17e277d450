//! `pcmail-bench jobs`: the job queue's cost per poll with 100 vs
//! 10,000 finished jobs (two servers side by side, requests alternated so
//! the machine's noise hits both alike), and submit → `running` on `serve`
//! with a long-polling fake executor that calls `job.start` on offer.

use crate::{call, client, env_num, pct, ServerChild, TOKEN};
use anyhow::{bail, Context, Result};
use pcmail_server::{Engine, EngineConfig};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const T0: i64 = 1_767_225_600_000;

fn req(pc: &str, op: &str, args: Value) -> Value {
    json!({"v": 1, "op": op, "pc": pc, "token": TOKEN, "args": args})
}

fn whitelist() -> Value {
    json!({"hash": "bench-1", "allowedSubmitters": ["pc-a"], "checkouts": ["app"], "commands": [
        {"name": "test", "subject": "checkout", "timeLimitMs": 600000, "artifacts": [], "readOnly": false,
         "chunked": false, "verify": false, "description": "",
         "args": [{"name": "checkout", "type": "checkout", "required": true, "values": ["app"]},
                  {"name": "n", "type": "int", "required": false}]}]})
}

fn job_id(n: usize) -> String {
    format!("job-{}-{:08x}", T0, n)
}

fn submit(n: usize) -> Value {
    req(
        "pc-a",
        "job.submit",
        json!({"jobId": job_id(n), "target": "pc-b", "command": "test",
        "args": {"checkout": "app", "n": n}, "submitter": {"pc": "pc-a", "session": "bench"}}),
    )
}

fn must(e: &Engine, body: Value, now: i64) -> Result<Value> {
    let r = e.handle_value(&body, now);
    if r["ok"] != json!(true) {
        bail!("{body} → {r}");
    }
    Ok(r)
}

/// A database with the roster, pc-b's whitelist, `finished` ended jobs that
/// pc-a was already told of, and one job running on pc-b (its heartbeat rides
/// every executor poll), through the ops as a real queue would get there.
fn seed(db: &Path, finished: usize) -> Result<()> {
    let e = Engine::open(db, EngineConfig { token: Some(TOKEN.into()), ..Default::default() })?;
    for (pc, host) in [("pc-a", "A"), ("pc-b", "B")] {
        must(&e, req(pc, "roster.set", json!({"label": pc, "hostname": host})), T0)?;
    }
    must(&e, req("pc-b", "poll", json!({"job": {"whitelist": whitelist(), "take": true}})), T0)?;
    for n in 0..=finished {
        let now = T0 + n as i64;
        must(&e, submit(n), now)?;
        must(&e, req("pc-b", "job.start", json!({"jobId": job_id(n), "runner": "pc-b/1", "startedAt": now})), now)?;
        if n < finished {
            must(
                &e,
                req(
                    "pc-b",
                    "job.report",
                    json!({"jobId": job_id(n), "runner": "pc-b/1", "state": "ok",
                "result": {"ran": true, "exit": 0, "durationMs": 1, "output": "ok"}}),
                ),
                now,
            )?;
        }
    }
    // pc-a hears of every end once, as its poller would have.
    loop {
        let r = must(&e, req("pc-a", "poll", json!({"job": {}})), T0 + finished as i64 + 1)?;
        if r["job"]["finished"].as_array().is_none_or(|a| a.is_empty()) {
            break;
        }
    }
    Ok(())
}

pub(crate) fn bench_jobs() -> Result<()> {
    let polls = env_num("PCMAIL_BENCH_POLLS", 3_000);
    let rounds = env_num("PCMAIL_BENCH_ROUNDS", 100);
    // PCMAIL_BENCH_JOBS: the large history (fewer for a quick run that only shows the bench works).
    let large = env_num("PCMAIL_BENCH_JOBS", 10_000);
    println!("pcmail-bench jobs: poll cost with 100 vs {large} finished jobs ({polls} polls each, alternated); submit → running ({rounds} rounds)");
    let dirs = [tempfile::tempdir()?, tempfile::tempdir()?];
    let sizes = [100usize, large];
    let mut servers = Vec::new();
    for (dir, n) in dirs.iter().zip(sizes) {
        let db = dir.path().join("server.db");
        let t = Instant::now();
        seed(&db, n)?;
        println!("  seeded {n} finished jobs in {:.1} s", t.elapsed().as_secs_f64());
        servers.push(ServerChild::start(&db)?);
    }
    // Both sides of a job's poll: the executor (take + a heartbeat) and the submitter (finished).
    let exec_poll = |n: usize| req("pc-b", "poll", json!({"job": {"take": true, "running": [job_id(n)]}}));
    let sub_poll = req("pc-a", "poll", json!({"job": {}}));
    let c = client();
    let mut lat: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for i in 0..polls + 200 {
        for (k, s) in servers.iter().enumerate() {
            let body = if i % 2 == 0 { exec_poll(sizes[k]) } else { sub_poll.clone() };
            let t = Instant::now();
            let r = call(&c, &s.url, &body)?;
            let ms = t.elapsed().as_secs_f64() * 1000.0;
            if r["ok"] != json!(true) || r["job"].is_null() {
                bail!("poll failed: {r}");
            }
            if i >= 200 {
                lat[k].push(ms); // the first 200 warm caches and connections
            }
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    for (k, n) in sizes.iter().enumerate() {
        println!(
            "  poll with job, {n:>6} finished jobs: p50 {:.3} ms, mean {:.3} ms, p99 {:.3} ms",
            pct(&lat[k], 0.5),
            mean(&lat[k]),
            pct(&lat[k], 0.99)
        );
    }
    println!(
        "  ratio {large} / 100: p50 {:.2}×, mean {:.2}× (target ≤ 1.3×)",
        pct(&lat[1], 0.5) / pct(&lat[0], 0.5),
        mean(&lat[1]) / mean(&lat[0])
    );
    drop(servers);

    let lat = submit_to_running(rounds)?;
    println!(
        "  submit → running (long-polling executor calls job.start on offer), {rounds} rounds: p50 {:.2} ms, p90 {:.2} ms, max {:.2} ms (target p50 < 50 ms)",
        pct(&lat, 0.5),
        pct(&lat, 0.9),
        lat.iter().cloned().fold(0.0, f64::max)
    );
    Ok(())
}

/// Submit → `running`: the clock runs from just before `job.submit` until the
/// executor holds the answer of its `job.start` (the moment it may run).
fn submit_to_running(rounds: usize) -> Result<Vec<f64>> {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("server.db");
    {
        let e = Engine::open(&db, EngineConfig { token: Some(TOKEN.into()), ..Default::default() })?;
        for (pc, host) in [("pc-a", "A"), ("pc-b", "B")] {
            must(&e, req(pc, "roster.set", json!({"label": pc, "hostname": host})), T0)?;
        }
        must(&e, req("pc-b", "poll", json!({"job": {"whitelist": whitelist(), "take": true}})), T0)?;
    }
    let server = ServerChild::start(&db)?;
    let (started_tx, started_rx) = mpsc::channel::<(String, Instant)>();
    let url = server.url.clone();
    let executor = std::thread::spawn(move || -> Result<()> {
        let c = client();
        let mut done = 0;
        while done < rounds {
            let r = call(&c, &url, &req("pc-b", "poll", json!({"waitMs": 20_000, "job": {"take": true}})))?;
            for j in r["job"]["offered"].as_array().into_iter().flatten() {
                let id = j["id"].as_str().context("offered id")?.to_string();
                let s = call(
                    &c,
                    &url,
                    &req("pc-b", "job.start", json!({"jobId": id, "runner": "pc-b/1", "startedAt": 0})),
                )?;
                let at = Instant::now();
                if s["job"]["state"] != json!("running") {
                    bail!("start failed: {s}");
                }
                // Finish it so the next poll waits again.
                call(
                    &c,
                    &url,
                    &req(
                        "pc-b",
                        "job.report",
                        json!({"jobId": id, "runner": "pc-b/1", "state": "ok",
                    "result": {"ran": true, "exit": 0, "durationMs": 0, "output": ""}}),
                    ),
                )?;
                started_tx.send((id, at))?;
                done += 1;
            }
        }
        Ok(())
    });
    let c = client();
    let mut lat = Vec::new();
    for n in 0..rounds {
        std::thread::sleep(Duration::from_millis(30)); // let the executor's next long poll start waiting
        let at = Instant::now();
        let r = call(&c, &server.url, &submit(1_000_000 + n))?;
        if r["ok"] != json!(true) || r["deduped"] != json!(false) {
            bail!("submit failed: {r}");
        }
        let (id, started) =
            started_rx.recv_timeout(Duration::from_secs(10)).context("the executor did not start the job")?;
        if id != job_id(1_000_000 + n) {
            bail!("started {id}, expected {}", job_id(1_000_000 + n));
        }
        lat.push(started.duration_since(at).as_secs_f64() * 1000.0);
    }
    executor.join().map_err(|_| anyhow::anyhow!("executor panicked"))??;
    Ok(lat)
}
