//! 8 processes append handoffs, INDEX lines and memory entries to one repo at
//! once ("every line whole, every file present, no name
//! collision"). The workers are this test binary run again with
//! `worker_process` selected. `PCMAIL_CONCURRENCY_SECS` sets the duration
//! (default 5; the full run is 30).

use chrono::Utc;
use pcmail_handoff::handoffs::{self, Author, Sections};
use pcmail_handoff::index::{self, Event};
use pcmail_handoff::memory::{self, MemKind};
use pcmail_handoff::repo::Repo;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const WORKERS: usize = 8;
const REPO_VAR: &str = "PCMAIL_TEST_WORKER_REPO";

fn long_text(worker: usize, i: usize) -> String {
    // Long enough to need more than one page of the kernel's pipe buffer if
    // it were split: an entry must still come out whole.
    format!("w{worker} i{i} ") + &format!("{worker}").repeat(3000) + " end"
}

/// One worker: until the deadline, write a handoff (the pair of workers
/// sharing a session prefix and a slug collide on names every time), pick it
/// up, close it, and add a memory entry; print each name it created.
#[test]
fn worker_process() {
    let Ok(repo) = std::env::var(REPO_VAR) else { return };
    let worker: usize = std::env::var("PCMAIL_TEST_WORKER").unwrap().parse().unwrap();
    let until =
        Instant::now() + Duration::from_millis(std::env::var("PCMAIL_TEST_WORKER_MS").unwrap().parse().unwrap());
    let repo = Repo::at(Path::new(&repo));
    // The two workers of a pair have different sessions with the same first 8 characters.
    let session = format!("pair{}xx-{worker}", worker / 2);
    let by = format!("pc-{worker}/pair{}", worker / 2);
    let mut i = 0;
    while Instant::now() < until {
        let slug = format!("t{}", i % 40);
        let s = Sections {
            goal: Some(format!("goal of worker {worker} round {i}")),
            done: Some(long_text(worker, i)),
            failed: None,
            state: Some("working".into()),
            next: Some("next".into()),
        };
        let now = Utc::now();
        let c = handoffs::new_handoff(&repo, &slug, &Author { session: &session, by: &by, at: now }, &s).unwrap();
        // On a line of its own (libtest may have left its "test … " prefix on the first).
        println!("\nCREATED {}", c.name);
        handoffs::pickup(&repo, &c.name, &by, now).unwrap();
        handoffs::close(&repo, &c.name, &by, &"closing note ".repeat(20), now).unwrap();
        memory::add(&repo, MemKind::Gotcha, "shared/log", &long_text(worker, i), Some("why"), &by, now).unwrap();
        i += 1;
    }
}

#[test]
fn eight_processes_append_at_once_and_nothing_tears_or_collides() {
    let secs: u64 = std::env::var("PCMAIL_CONCURRENCY_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(5);
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..WORKERS)
        .map(|w| {
            Command::new(&exe)
                .args(["--exact", "worker_process", "--nocapture", "--test-threads=1"])
                .env(REPO_VAR, dir.path())
                .env("PCMAIL_TEST_WORKER", w.to_string())
                .env("PCMAIL_TEST_WORKER_MS", (secs * 1000).to_string())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut created: Vec<String> = vec![];
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "a worker failed: {}", String::from_utf8_lossy(&out.stdout));
        created.extend(
            String::from_utf8(out.stdout)
                .unwrap()
                .lines()
                .filter_map(|l| l.split_once("CREATED ").map(|(_, n)| n.to_string())),
        );
    }
    let repo = Repo::at(dir.path());

    // No collision: every name once, and every file there.
    let unique: HashSet<&String> = created.iter().collect();
    assert_eq!(unique.len(), created.len(), "two writers got one name");
    let on_disk: HashSet<String> =
        handoffs::names_in(&repo.handoff_dir()).unwrap().into_iter().map(|(n, _)| n).collect();
    let reported: HashSet<String> = created.iter().cloned().collect();
    let (missing, extra): (Vec<_>, Vec<_>) =
        (reported.difference(&on_disk).collect(), on_disk.difference(&reported).collect());
    assert!(missing.is_empty() && extra.is_empty(), "missing on disk: {missing:?}; not reported: {extra:?}");
    for name in &created {
        let text = std::fs::read_to_string(repo.handoff_dir().join(format!("{name}.md"))).unwrap();
        let s = Sections::parse(&text);
        assert!(s.done.as_deref().is_some_and(|d| d.ends_with(" end")), "{name} is whole");
    }

    // Every INDEX line whole: the header, then 3 parsable lines per handoff.
    let text = std::fs::read_to_string(repo.index_path()).unwrap();
    assert!(text.starts_with(index::HEADER), "the header comes first");
    let body = &text[index::HEADER.len()..];
    let lines: Vec<&str> = body.lines().collect();
    assert_eq!(lines.len(), created.len() * 3, "one line per event");
    let mut per_name: HashMap<String, Vec<Event>> = HashMap::new();
    for l in &lines {
        let parsed = index::Line::parse(l).unwrap_or_else(|| panic!("torn line: {l:?}"));
        assert_eq!(parsed.render(), *l);
        per_name.entry(parsed.name).or_default().push(parsed.event);
    }
    for name in &created {
        assert_eq!(per_name[name], [Event::Active, Event::PickedUp, Event::Closed], "{name}");
    }

    // Every memory entry whole.
    let entries = memory::show(&repo, Some("shared/log")).unwrap();
    assert_eq!(entries.len(), created.len());
    for e in &entries {
        assert!(
            e.text.ends_with(" end") && e.text.len() > 3000 && e.why.as_deref() == Some("why"),
            "{:?}",
            &e.text[..40]
        );
    }
    eprintln!(
        "{} workers, {secs} s: {} handoffs, {} INDEX lines, {} memory entries; no tear, no collision",
        WORKERS,
        created.len(),
        lines.len(),
        entries.len()
    );
}
