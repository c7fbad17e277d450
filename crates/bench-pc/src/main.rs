//! `pcmail-bench-pc hook` — `pcmail hook` as a whole process on a store with
//! 10,000 mails (500 unread): median, p99, peak RSS.
//! `pcmail-bench-pc soak [secs]` — 8 hook loops, the daemon and 4 senders on
//! one store against a real `pcmail serve`: errors, lost and duplicated mail.
//!
//! Build both in one profile so the `pcmail` binary sits next to this one:
//! `cargo build --release -p pcmail-cli -p pcmail-bench-pc`.

use anyhow::{bail, Context, Result};
use pcmail_core::{Kind, Mail, State};
use pcmail_store::{inbox, Store};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn pcmail() -> PathBuf {
    let p = std::env::current_exe().unwrap().parent().unwrap().join("pcmail");
    assert!(p.exists(), "build pcmail in the same profile: cargo build --release -p pcmail-cli -p pcmail-bench-pc");
    p
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("hook") => hook_bench(args.get(2).and_then(|s| s.parse().ok()).unwrap_or(300)),
        Some("soak") => soak(args.get(2).and_then(|s| s.parse().ok()).unwrap_or(60)),
        _ => bail!("usage: pcmail-bench-pc hook [runs] | soak [seconds]"),
    }
}

fn seed_store(home: &Path, total: usize, unread: usize) -> Result<()> {
    std::fs::write(home.join("config.toml"), "label = \"pc-b\"\n")?;
    let mut store = Store::open(&home.join("store.db"))?;
    let now = 1_800_000_000_000i64;
    store.write(|tx| {
        for i in 0..total {
            let kind = match i % 10 {
                0 => Kind::Decision,
                1 | 2 => Kind::Request,
                _ => Kind::Note,
            };
            let m = Mail {
                id: format!("mail-{}-{:08x}", now - (total - i) as i64 * 60_000, i),
                from: format!("pc-{}", i % 7),
                to: "pc-b".into(),
                kind,
                subject: format!("subject {i}"),
                body: "lorem ipsum dolor sit amet ".repeat(1 + i % 20),
                urgent: i % 13 == 0,
                expires_at: None,
                in_reply_to: None,
                auto: false,
                hop: 0,
                created_at: now - (total - i) as i64 * 60_000,
                state: State::New,
                broadcast_of: None,
                timeline: vec![],
            };
            inbox::insert_received(tx, &m, now)?;
            if i < total - unread {
                inbox::advance(tx, &m.id, State::Done, now, "pc-b", None)?;
            }
        }
        tx.execute("UPDATE inbox SET confirmed_at = received_at", [])?;
        tx.execute("INSERT INTO meta (key, value) VALUES ('last_poll_ok_at', ?1)", [i64::MAX.to_string()])?;
        Ok(())
    })?;
    drop(store);
    // Fold the WAL into the main file so copies are self-contained.
    let c = Store::open(&home.join("store.db"))?;
    c.conn().execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")?;
    Ok(())
}

/// Runs one process, returns (wall time, peak RSS in KiB, stdout).
fn run_measured(cmd: &mut Command, stdin: &[u8]) -> Result<(Duration, i64, Vec<u8>)> {
    let t = Instant::now();
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    child.stdin.take().unwrap().write_all(stdin)?;
    let mut out = vec![];
    std::io::Read::read_to_end(child.stdout.as_mut().unwrap(), &mut out)?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our child; wait4 fills status and rusage.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    let took = t.elapsed();
    if r != pid || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        bail!("process failed (status {status})");
    }
    Ok((took, ru.ru_maxrss, out))
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn hook_bench(runs: usize) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let pristine = dir.path().join("pristine");
    std::fs::create_dir_all(&pristine)?;
    seed_store(&pristine, 10_000, 500)?;
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home)?;
    std::fs::copy(pristine.join("config.toml"), home.join("config.toml"))?;
    let exe = pcmail();
    let mut times = vec![];
    let mut rss = vec![];
    for i in 0..runs {
        // A fresh copy each run: every run is a new session that presents 11
        // mails and writes their marks (the expensive path), on 500 unread.
        std::fs::copy(pristine.join("store.db"), home.join("store.db"))?;
        let _ = std::fs::remove_file(home.join("store.db-wal"));
        let _ = std::fs::remove_file(home.join("store.db-shm"));
        let input = format!("{{\"session_id\":\"bench-{i}\",\"hook_event_name\":\"UserPromptSubmit\"}}");
        let (t, kb, out) = run_measured(Command::new(&exe).arg("hook").env("PCMAIL_HOME", &home), input.as_bytes())?;
        if i == 0 {
            let v: serde_json::Value = serde_json::from_slice(&out).context("hook output is JSON")?;
            let ctx = v["hookSpecificOutput"]["additionalContext"].as_str().unwrap_or("");
            assert!(ctx.contains("<pcmail-mail id="), "the hook showed mail");
            eprintln!("hook output: {} characters", ctx.chars().count());
        }
        times.push(t);
        rss.push(kb);
    }
    // The same session again (count line only), the path of every later prompt.
    let mut repeat = vec![];
    for _ in 0..runs.min(100) {
        let input = "{\"session_id\":\"bench-last\",\"hook_event_name\":\"UserPromptSubmit\"}";
        let (t, _, _) = run_measured(Command::new(&exe).arg("hook").env("PCMAIL_HOME", &home), input.as_bytes())?;
        repeat.push(t);
    }
    // The floor: a process that does nothing, to compare in the same run.
    let mut floor = vec![];
    for _ in 0..runs.min(100) {
        let (t, _, _) = run_measured(&mut Command::new("/bin/true"), b"")?;
        floor.push(t);
    }
    times.sort();
    repeat.sort();
    floor.sort();
    let max_rss = rss.iter().max().copied().unwrap_or(0);
    println!("pcmail hook, whole process, store of 10,000 mails with 500 unread, {runs} runs");
    println!("  new session (presents + writes marks): median {:.2} ms  p99 {:.2} ms  max {:.2} ms",
        ms(pct(&times, 0.5)), ms(pct(&times, 0.99)), ms(*times.last().unwrap()));
    println!("  same session again (count line):       median {:.2} ms  p99 {:.2} ms", ms(pct(&repeat, 0.5)), ms(pct(&repeat, 0.99)));
    println!("  /bin/true for scale:                    median {:.2} ms", ms(pct(&floor, 0.5)));
    println!("  peak RSS: {:.1} MB (max over runs)", max_rss as f64 / 1024.0);
    println!("  targets: median < 10 ms, p99 < 30 ms, peak RSS < 15 MB");
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn soak(secs: u64) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let exe = pcmail();
    let token = "soak-token";
    // A real `pcmail serve` on loopback.
    let mut server = Command::new(&exe)
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(dir.path().join("serve.db"))
        .env("PCMAIL_TOKEN", token)
        .env("PCMAIL_HOME", dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let url = loop {
        let l = lines.next().context("server exited")??;
        if let Some(u) = l.split("listening on ").nth(1) {
            break u.trim().to_string();
        }
    };
    let home = dir.path().join("pc-b");
    let pc = |args: &[&str]| {
        let mut c = Command::new(&exe);
        c.args(args).env("PCMAIL_HOME", &home).env("PCMAIL_TOKEN", token).env_remove("DBUS_SESSION_BUS_ADDRESS");
        c
    };
    let ok = pc(&["init", "--label", "pc-b", "--server", &url]).output()?;
    assert!(ok.status.success());
    assert!(pc(&["sync"]).output()?.status.success());
    let mut daemon = pc(&["daemon"]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn()?;

    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let sent = Arc::new(Mutex::new(Vec::<String>::new()));
    let hooks_run = Arc::new(AtomicUsize::new(0));
    let shown_per_session = Arc::new(Mutex::new(std::collections::HashMap::<String, Vec<String>>::new()));
    let mut threads = vec![];
    for s in 0..4 {
        let (stop, errors, sent) = (stop.clone(), errors.clone(), sent.clone());
        let (exe, home, url) = (exe.clone(), home.clone(), url.clone());
        threads.push(std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let kind = ["note", "request", "decision"][n % 3];
                let out = Command::new(&exe)
                    .args(["--json", "send", "pc-b", "--kind", kind, "--body", &format!("sender {s} mail {n}")])
                    .env("PCMAIL_HOME", &home).env("PCMAIL_TOKEN", token).env_remove("DBUS_SESSION_BUS_ADDRESS")
                    .stdin(Stdio::null()).output().unwrap();
                let _ = &url;
                if !out.status.success() {
                    errors.lock().unwrap().push(format!("send: {}", String::from_utf8_lossy(&out.stderr)));
                } else {
                    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                    if v["queued"] == true {
                        errors.lock().unwrap().push("send was queued (server unreachable)".into());
                    }
                    sent.lock().unwrap().push(v["ids"][0].as_str().unwrap().to_string());
                }
                n += 1;
            }
        }));
    }
    for h in 0..8 {
        let (stop, errors, hooks_run, shown) = (stop.clone(), errors.clone(), hooks_run.clone(), shown_per_session.clone());
        let (exe, home) = (exe.clone(), home.clone());
        threads.push(std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                // Each hook loop is a few sessions, each prompting several times.
                let session = format!("soak-{h}-{}", n / 5);
                let input = format!("{{\"session_id\":\"{session}\",\"hook_event_name\":\"UserPromptSubmit\"}}");
                let mut child = Command::new(&exe).arg("hook").env("PCMAIL_HOME", &home)
                    .stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
                child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
                let out = child.wait_with_output().unwrap();
                if !out.status.success() || !out.stderr.is_empty() {
                    errors.lock().unwrap().push(format!("hook: {}", String::from_utf8_lossy(&out.stderr)));
                }
                if !out.stdout.is_empty() {
                    match serde_json::from_slice::<serde_json::Value>(&out.stdout) {
                        Ok(v) => {
                            let ctx = v["hookSpecificOutput"]["additionalContext"].as_str().unwrap_or("").to_string();
                            let ids: Vec<String> = ctx.split("<pcmail-mail id=\"").skip(1)
                                .map(|s| s.split('"').next().unwrap().to_string()).collect();
                            shown.lock().unwrap().entry(session).or_default().extend(ids);
                        }
                        Err(e) => errors.lock().unwrap().push(format!("hook printed non-JSON: {e}")),
                    }
                }
                hooks_run.fetch_add(1, Ordering::Relaxed);
                n += 1;
            }
        }));
    }
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    // Let the daemon take the last mail, then one more explicit cycle.
    std::thread::sleep(Duration::from_secs(3));
    let _ = pc(&["sync"]).output()?;
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    let _ = daemon.wait();
    let mut daemon_err = String::new();
    std::io::Read::read_to_string(daemon.stderr.as_mut().unwrap(), &mut daemon_err)?;
    for l in daemon_err.lines().filter(|l| l.contains("failed")) {
        errors.lock().unwrap().push(format!("daemon: {l}"));
    }

    let sent = sent.lock().unwrap().clone();
    let store = Store::open(&home.join("store.db"))?;
    let mut lost = 0;
    let mut undelivered_on_server = 0;
    for chunk in sent.chunks(200) {
        for id in chunk {
            if store.inbox_get(id)?.is_none() {
                lost += 1;
            }
        }
        let out = pc(&["--json", "status"]).args(chunk).output()?;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        for m in v.as_array().cloned().unwrap_or_default() {
            if m["state"] == "new" {
                undelivered_on_server += 1;
            }
            let delivered = m["timeline"].as_array().map(|t| t.iter().filter(|e| e["state"] == "delivered").count()).unwrap_or(0);
            if delivered > 1 {
                errors.lock().unwrap().push(format!("{} delivered {delivered} times", m["id"]));
            }
        }
    }
    let rows: i64 = store.conn().query_row("SELECT count(*) FROM inbox", [], |r| r.get(0))?;
    let duplicated_rows = rows - (sent.len() as i64 - lost);
    let mut shown_twice = 0;
    for ids in shown_per_session.lock().unwrap().values() {
        let mut s = ids.clone();
        s.sort();
        let before = s.len();
        s.dedup();
        shown_twice += before - s.len();
    }
    let _ = server.kill();
    let errors = errors.lock().unwrap();
    println!("soak: {secs} s, 8 hook loops + daemon + 4 senders on one store, pcmail serve on loopback");
    println!("  mails sent: {}  hook runs: {}", sent.len(), hooks_run.load(Ordering::Relaxed));
    println!("  errors: {}  lost: {}  duplicated rows: {}  undelivered on server: {}  shown twice to one session: {}",
        errors.len(), lost, duplicated_rows, undelivered_on_server, shown_twice);
    for e in errors.iter().take(10) {
        println!("  error: {e}");
    }
    if !errors.is_empty() || lost > 0 || duplicated_rows != 0 || undelivered_on_server > 0 || shown_twice > 0 {
        bail!("soak failed");
    }
    Ok(())
}
