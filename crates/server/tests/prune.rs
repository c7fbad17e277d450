//! Retention: final mail past the window goes with its timeline, in bands, and
//! polls keep being answered while it happens ("Databases that don't
//! grow forever").

use pcmail_core::{Kind, Mail, State, TimelineEntry};
use pcmail_server::{Engine, EngineConfig};
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const DAY: i64 = 24 * 60 * 60 * 1000;
const NOW: i64 = 1_800_000_000_000;

fn mail(i: usize, state: State, last_at: i64) -> Mail {
    let created = last_at - 1000;
    let mut timeline = vec![TimelineEntry { state: State::New, at: created, by: "pc-a".into(), note: None }];
    if state != State::New {
        timeline.push(TimelineEntry { state, at: last_at, by: "pc-b".into(), note: None });
    }
    Mail {
        id: format!("mail-{created}-{i:08x}"),
        from: "pc-a".into(),
        to: "pc-b".into(),
        kind: Kind::Note,
        subject: String::new(),
        body: "old news".into(),
        urgent: false,
        expires_at: None,
        in_reply_to: None,
        auto: false,
        hop: 0,
        created_at: created,
        state,
        broadcast_of: None,
        recipients: None,
        timeline,
    }
}

#[test]
fn final_mail_past_retention_goes_in_bands_while_polls_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let e = Arc::new(Engine::open(dir.path().join("s.db"), EngineConfig::default()).unwrap());
    for pc in ["pc-a", "pc-b"] {
        let r = e.handle_value(&json!({"v":1,"op":"roster.set","pc":pc,"args":{"label":pc,"hostname":pc}}), NOW);
        assert_eq!(r["ok"], json!(true));
    }
    let old = NOW - 100 * DAY;
    let finals = [State::Done, State::Failed, State::Expired];
    // 30,000 final mails: many bands (each a short transaction), so polls
    // run between them; one transaction for all would hold them for seconds.
    for chunk in 0..3 {
        let batch: Vec<Mail> = (0..10_000).map(|i| mail(chunk * 10_000 + i, finals[i % 3], old + i as i64)).collect();
        e.import_mail(&batch).unwrap();
    }
    // Kept: recent final mail, and old mail that is not final.
    e.import_mail(&[
        mail(900_001, State::Done, NOW - 10 * DAY),
        mail(900_002, State::Delivered, old),
        mail(900_003, State::New, old),
    ])
    .unwrap();
    assert_eq!(e.prunable(NOW).unwrap(), 30_000);

    let done = Arc::new(AtomicBool::new(false));
    let pruner = {
        let (e, done) = (e.clone(), done.clone());
        std::thread::spawn(move || {
            let n = e.prune(NOW).unwrap();
            done.store(true, Ordering::SeqCst);
            n
        })
    };
    let mut waits = vec![];
    while !done.load(Ordering::SeqCst) {
        let t = Instant::now();
        let r = e.handle_value(&json!({"v":1,"op":"poll","pc":"pc-b","args":{}}), NOW);
        waits.push(t.elapsed());
        assert_eq!(r["ok"], json!(true), "{r}");
    }
    assert_eq!(pruner.join().unwrap(), 30_000);
    let worst = waits.iter().max().copied().unwrap_or_default();
    assert!(waits.len() >= 5, "polls were answered while pruning ({} polls)", waits.len());
    // 50 ms is the target, measured in release by the benchmark (docs/benchmarks.md);
    // this debug-build bound still fails for a prune in one transaction (seconds).
    assert!(worst < Duration::from_millis(400), "a poll waited {worst:?} behind the prune");

    assert_eq!(e.prunable(NOW).unwrap(), 0);
    let left = e.handle_value(
        &json!({"v":1,"op":"status","pc":"pc-a","args":{"ids":[mail(900_001, State::Done, NOW - 10 * DAY).id, mail(900_002, State::Delivered, old).id, mail(0, State::Done, old).id]}}),
        NOW,
    );
    assert_eq!(left["mails"].as_array().unwrap().len(), 2, "{left}");
    assert_eq!(left["missing"].as_array().unwrap().len(), 1, "{left}");
    // Timelines went with their mail.
    let rows = e.dump_rows().unwrap();
    let events = rows.iter().filter(|r| r.starts_with("event:")).count();
    assert_eq!(events, 2 + 2 + 1, "only the kept mails' events remain");
}
