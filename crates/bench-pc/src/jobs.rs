//! `pcmail-bench-pc jobs [runs]` — the jobs target "submit → running on a
//! long-polling PC: p50 < 50 ms on serve": a real `pcmail serve`, pc-b's
//! daemon executing a probe (`true`) from its `[jobs]` config, pc-a running
//! `pcmail job run … --wait` as a whole process, each submit distinct (no
//! dedup). Prints submit → running and submit → ended by the server's own
//! timestamps (`startedAt`/`endedAt` − `submittedAt`), and the CLI's wall time.

use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "bench-token-0123456789";

fn credential() -> String {
    let mut b = [0u8; 32];
    rand::fill(&mut b);
    pcmail_core::hex::lower(&b)
}

fn pc(home: &Path, cred: &str, args: &[&str]) -> Command {
    let mut c = Command::new(super::pcmail());
    c.args(args)
        .env("PCMAIL_HOME", home)
        .env("PCMAIL_TOKEN", TOKEN)
        .env("PCMAIL_CREDENTIAL", cred)
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .stdin(Stdio::null());
    c
}

fn ok(mut c: Command) -> Result<String> {
    let out = c.output()?;
    if !out.status.success() {
        bail!("{:?} failed: {}", c, String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8(out.stdout)?)
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

pub fn bench(runs: usize) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let mut serve = Command::new(super::pcmail())
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(dir.path().join("serve.db"))
        .env("PCMAIL_TOKEN", TOKEN)
        .env("PCMAIL_HOME", dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut lines = BufReader::new(serve.stdout.take().unwrap()).lines();
    let url = loop {
        let line = lines.next().context("serve exited")??;
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest.trim().to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    let (a, b, app) = (dir.path().join("a"), dir.path().join("b"), dir.path().join("app"));
    std::fs::create_dir_all(&app)?;
    let (ca, cb) = (credential(), credential());
    ok(pc(&a, &ca, &["init", "--label", "pc-a", "--server", &url]))?;
    ok(pc(&b, &cb, &["init", "--label", "pc-b", "--server", &url]))?;
    let mut cfg = std::fs::read_to_string(b.join("config.toml"))?;
    cfg.push_str(&format!(
        "\n[jobs]\nallowed_submitters = [\"pc-a\"]\n[jobs.checkouts]\napp = {:?}\n[[jobs.commands]]\nname = \"probe\"\nargv = [\"true\", \"{{n}}\"]\ncwd = \"app\"\nread_only = true\n[[jobs.commands.args]]\nname = \"n\"\ntype = \"int\"\n",
        app.display().to_string()
    ));
    std::fs::write(b.join("config.toml"), cfg)?;
    let mut daemon = pc(&b, &cb, &["daemon"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn()?;
    let result = (|| -> Result<()> {
        let t = Instant::now();
        loop {
            if pc(&a, &ca, &["job", "run", "pc-b", "probe", "n=-1", "--wait", "--timeout", "20s"])
                .output()?
                .status
                .success()
            {
                break;
            }
            if t.elapsed() > Duration::from_secs(30) {
                bail!("pc-b's whitelist never reached the server");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let (mut to_running, mut to_ended, mut wall) = (vec![], vec![], vec![]);
        for i in 0..runs {
            let t = Instant::now();
            let out = ok(pc(
                &a,
                &ca,
                &["--json", "job", "run", "pc-b", "probe", &format!("n={i}"), "--wait", "--timeout", "30s"],
            ))?;
            wall.push(t.elapsed().as_secs_f64() * 1000.0);
            let v: serde_json::Value = serde_json::from_str(&out)?;
            let j = &v["job"];
            let sub = j["submittedAt"].as_i64().context("submittedAt")?;
            to_running.push((j["startedAt"].as_i64().context("startedAt")? - sub) as f64);
            to_ended.push((j["endedAt"].as_i64().context("endedAt")? - sub) as f64);
        }
        println!("jobs: {runs} probe jobs, pc-b's daemon long-polling `pcmail serve` on loopback");
        println!(
            "  submit → running (server times): p50 {:.0} ms, p95 {:.0} ms",
            pct(&mut to_running, 0.5),
            pct(&mut to_running, 0.95)
        );
        println!(
            "  submit → ended   (server times): p50 {:.0} ms, p95 {:.0} ms",
            pct(&mut to_ended, 0.5),
            pct(&mut to_ended, 0.95)
        );
        println!(
            "  `pcmail job run --wait` wall:     p50 {:.0} ms, p95 {:.0} ms",
            pct(&mut wall, 0.5),
            pct(&mut wall, 0.95)
        );
        Ok(())
    })();
    let _ = daemon.kill();
    let _ = daemon.wait();
    let _ = serve.kill();
    let _ = serve.wait();
    result
}
