//! `pcmail-bench-pc handoffs [runs]`: whole processes on a repo
//! with 200 handoffs, a rollup and 500 memory entries, and a store with
//! 10,000 mails (500 unread) so that the mail fills its part of the budget:
//! the SessionStart hook (median ≤ 10 ms, output within 1,800 characters,
//! within 1.2× the UserPromptSubmit hook on the same store and repo) beside
//! the same hook in a directory with no repo and the first prompt of a
//! session in the repo, and `pcmail handoff new` (≤ 20 ms) beside `pcmail
//! --version`.

use crate::{context, fresh_copy, median, ms, pct, poller_connection, run_measured, seed_store, sibling};
use anyhow::{ensure, Result};
use chrono::{Duration as Days, TimeZone, Utc};
use pcmail_handoff::handoffs::{self, Author, Sections};
use pcmail_handoff::memory::{self, MemKind};
use pcmail_handoff::repo::Repo;
use pcmail_handoff::viewcache::SETTLE;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

pub const HANDOFFS: usize = 200;
pub const ACTIVE_AFTER_ROLLUP: usize = 10;
pub const MEMORY_ENTRIES: usize = 500;

/// A repo with `HANDOFFS` handoffs a day apart, a rollup of all but the last
/// `ACTIVE_AFTER_ROLLUP`, and `MEMORY_ENTRIES` entries over 25 topics (one in
/// five a gotcha).
pub fn seed_repo(root: &Path) -> Result<()> {
    std::fs::create_dir_all(root)?;
    // A real repo with a remote, as a user's checkout is: the hook names it
    // from `.git/config` (an empty `.git` folder would make both hooks run
    // `git rev-list` for its root commit, a cost no real checkout pays).
    for args in [&["init", "-q"][..], &["remote", "add", "origin", "https://github.com/o/bench-handoffs"]] {
        let out = Command::new("git").args(args).current_dir(root).output()?;
        ensure!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let repo = Repo::at(root);
    let start = Utc.with_ymd_and_hms(2026, 1, 1, 9, 0, 0).unwrap();
    for i in 0..HANDOFFS {
        let at = start + Days::days(i as i64);
        let s = Sections {
            goal: Some(format!("Colour checker: CNN sweep step {i} and the diffusion baseline")),
            done: Some(format!("src/train_{i}.py, configs/sweep_{i}.yaml: baseline median 1.99 deg, 11M params")),
            failed: Some("lr=3e-4: NaN after epoch 10-13, no gradient clipping".into()),
            state: Some(["working", "broken: OOM at bs=16", "blocked: waiting for GPU 2"][i % 3].into()),
            next: Some(format!("Inference script for diffusion {i} + visual sheets")),
        };
        let session = format!("{:08x}-bench", i * 7919);
        handoffs::new_handoff(&repo, &format!("sweep-{i}"), &Author { session: &session, by: "pc-a/bench", at }, &s)?;
    }
    let through = start + Days::days((HANDOFFS - ACTIVE_AFTER_ROLLUP - 1) as i64);
    let at = through + Days::hours(1);
    handoffs::rollup(
        &repo,
        "winter",
        &Author { session: "rollup00", by: "pc-a/bench", at },
        through,
        "The sweep so far: CNN 1.99 deg; diffusion OOMs at bs=16.",
    )?;
    for i in 0..MEMORY_ENTRIES {
        let kind = if i % 5 == 0 { MemKind::Gotcha } else { MemKind::Decision };
        let topic = format!("area{}/part{}", i % 5, i % 25 / 5);
        let at = start + Days::minutes(i as i64 * 37);
        memory::add(
            &repo,
            kind,
            &topic,
            &format!("Entry {i}: the token cache must be cleared before the proxy restarts"),
            Some("the proxy keeps stale keys"),
            "pc-a/bench",
            at,
        )?;
    }
    Ok(())
}

fn session_start(session: &str, cwd: &Path) -> Vec<u8> {
    serde_json::json!({"session_id": session, "hook_event_name": "SessionStart", "source": "startup", "cwd": cwd})
        .to_string()
        .into_bytes()
}

/// The first prompt of a new session in `cwd`: the per-prompt hook on the
/// same store and repo, the figure SessionStart is held to.
fn prompt(session: &str, cwd: &Path) -> Vec<u8> {
    serde_json::json!({"session_id": session, "hook_event_name": "UserPromptSubmit", "cwd": cwd, "prompt": "go"})
        .to_string()
        .into_bytes()
}

/// SessionStart in the repo within this many times the UserPromptSubmit hook
/// on the same store and repo (medians of one run).
pub const SESSION_START_RATIO: f64 = 1.2;

pub fn bench(runs: usize) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let hook = sibling("pcmail-hook");
    // `pcmail` is the slowest to build: the hook part runs without it.
    let pcmail = std::env::current_exe()?.with_file_name("pcmail");
    let pristine = dir.path().join("pristine");
    seed_store(&pristine, 10_000, 500)?;
    let repo = dir.path().join("repo");
    seed_repo(&repo)?;
    let norepo = dir.path().join("norepo");
    std::fs::create_dir_all(&norepo)?;
    let home = dir.path().join("home");

    // The hook keeps its view of the repo only once the files it read are a
    // few seconds old (pcmail_handoff::viewcache::SETTLE): wait, as a repo
    // between sessions is.
    std::thread::sleep(SETTLE + Duration::from_millis(200));

    // 1. A new session each run (fresh store copy, so every run presents the
    // same mail and writes the same marks): SessionStart with the repo as its
    // `cwd` (its view kept from the run before, and with the kept view
    // removed: what the first SessionStart after a change pays) and with no
    // repo, and the first UserPromptSubmit of a session in the repo,
    // interleaved in an order that rotates every run.
    let (mut with, mut cold, mut without, mut prompted) = (vec![], vec![], vec![], vec![]);
    let (mut text, mut cold_text, mut prompt_text) = (String::new(), String::new(), String::new());
    // The texts of the second run: the first may have found no kept view yet.
    let shown_run = runs.min(2).saturating_sub(1);
    let views = home.join("hook-views");
    for i in 0..runs {
        for k in 0..4 {
            fresh_copy(&pristine, &home)?;
            let _poller = poller_connection(&home)?;
            let session = format!("bench-{i}");
            let which = (i + k) % 4;
            if which == 1 {
                let _ = std::fs::remove_dir_all(&views);
            }
            let (input, series) = match which {
                0 => (session_start(&session, &repo), &mut with),
                1 => (session_start(&session, &repo), &mut cold),
                2 => (session_start(&session, &norepo), &mut without),
                _ => (prompt(&session, &repo), &mut prompted),
            };
            let s = run_measured(Command::new(&hook).env("PCMAIL_HOME", &home), &input)?;
            series.push(s.wall);
            if i == shown_run {
                match which {
                    0 => text = context(&s.out),
                    1 => cold_text = context(&s.out),
                    3 => prompt_text = context(&s.out),
                    _ => {}
                }
            }
        }
    }
    let chars = text.chars().count();
    ensure!(
        text.contains("pcmail handoffs: latest rollup") || text.contains("ACTIVE handoffs"),
        "the hook showed no handoffs: {text}"
    );
    ensure!(text == cold_text, "SessionStart said another thing from its kept view:\n{text}\n---\n{cold_text}");
    let mail = |t: &str| t.matches("<pcmail-mail id=").count();
    ensure!(
        mail(&prompt_text) > 0 && mail(&prompt_text) == mail(&text),
        "UserPromptSubmit and SessionStart presented different mail ({} and {})",
        mail(&prompt_text),
        mail(&text)
    );

    // 2. `pcmail handoff new` as a whole process, beside `pcmail --version`.
    let (mut new, mut version) = (vec![], vec![]);
    for i in 0..if pcmail.exists() { runs } else { 0 } {
        let mut c = Command::new(&pcmail);
        c.args([
            "handoff",
            "new",
            "--slug",
            &format!("bench-{i}"),
            "--goal",
            "measure",
            "--state",
            "working",
            "--next",
            "read the figure",
        ])
        .current_dir(&repo)
        .env("PCMAIL_HOME", &home)
        .env("PCMAIL_SESSION", format!("{i:08x}-new"));
        new.push(run_measured(&mut c, b"")?.wall);
        version.push(run_measured(Command::new(&pcmail).arg("--version"), b"")?.wall);
    }

    let sorted = |v: &[Duration]| {
        let mut s = v.to_vec();
        s.sort();
        s
    };
    let check = |ok: bool| if ok { "ok" } else { "MISSED" };
    let (w, wo, n, v) = (sorted(&with), sorted(&without), sorted(&new), sorted(&version));
    let (p, c) = (sorted(&prompted), sorted(&cold));
    println!("handoffs and memory, whole processes, {runs} runs each, interleaved");
    println!("repo: {HANDOFFS} handoffs, a rollup ({ACTIVE_AFTER_ROLLUP} ACTIVE after it), {MEMORY_ENTRIES} memory entries; store: 10,000 mails, 500 unread");
    println!();
    println!("SessionStart (pcmail-hook), new session:");
    println!("  in the repo:   median {:.2} ms  p90 {:.2} ms  max {:.2} ms  output {chars} chars (budget 1,800: {})  (target median <= 10 ms: {})",
        ms(median(&w)), ms(pct(&w, 0.9)), ms(*w.last().unwrap()), check(chars <= 1800), check(median(&w) <= Duration::from_millis(10)));
    println!(
        "  in the repo, its kept view removed (the first SessionStart after a change): median {:.2} ms  p90 {:.2} ms",
        ms(median(&c)),
        ms(pct(&c, 0.9))
    );
    println!(
        "  no repo:       median {:.2} ms  p90 {:.2} ms  (the same mail; what handoffs and memory add: {:.2} ms)",
        ms(median(&wo)),
        ms(pct(&wo, 0.9)),
        ms(median(&w)) - ms(median(&wo))
    );
    println!(
        "UserPromptSubmit (pcmail-hook), first prompt of a new session in the repo: median {:.2} ms  p90 {:.2} ms  output {} chars",
        ms(median(&p)),
        ms(pct(&p, 0.9)),
        prompt_text.chars().count()
    );
    let ratio = ms(median(&w)) / ms(median(&p));
    println!(
        "SessionStart in the repo / UserPromptSubmit, medians: {ratio:.2}x  (target <= {SESSION_START_RATIO}x: {}); after a change: {:.2}x",
        check(ratio <= SESSION_START_RATIO),
        ms(median(&c)) / ms(median(&p))
    );
    println!();
    if n.is_empty() {
        println!("pcmail handoff new: skipped (no pcmail beside this binary: cargo build --release -p pcmail-cli)");
    } else {
        println!("pcmail handoff new: median {:.2} ms  p90 {:.2} ms  max {:.2} ms  (target <= 20 ms: {}); pcmail --version median {:.2} ms",
            ms(median(&n)), ms(pct(&n, 0.9)), ms(*n.last().unwrap()), check(median(&n) <= Duration::from_millis(20)), ms(median(&v)));
    }
    println!();
    println!("the hook's text at SessionStart in the repo (second run, from its kept view; the same text as with it removed):");
    for l in text
        .lines()
        .filter(|l| !l.starts_with("<pcmail-mail") && !l.starts_with("</pcmail-mail"))
        .filter(|l| l.starts_with("pcmail") || l.starts_with("- "))
    {
        println!("  {l}");
    }
    Ok(())
}
