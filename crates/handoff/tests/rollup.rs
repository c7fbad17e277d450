//! Rollups: front matter, the stamps in each covered handoff (the only edit
//! an old handoff gets), the INDEX lines, and a second rollup covering only
//! what the first did not.

use chrono::{DateTime, TimeZone, Utc};
use pcmail_handoff::handoffs::{self, Author, Sections};
use pcmail_handoff::index::{self, Event};
use pcmail_handoff::repo::Repo;
use pcmail_handoff::HandoffError;

fn t(d: u32, h: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, d, h, 0, 0).unwrap()
}

fn write(repo: &Repo, slug: &str, at: DateTime<Utc>) -> String {
    let s = Sections {
        goal: Some(format!("goal {slug}")),
        done: Some("src/x.rs".into()),
        failed: Some("lr=3e-4 NaN".into()),
        state: Some("broken: OOM at bs=16".into()),
        next: Some(format!("next {slug}")),
    };
    handoffs::new_handoff(repo, slug, &Author { session: "373d1618-aaaa", by: "pc-a/373d1618", at }, &s).unwrap().name
}

#[test]
fn rollup_covers_stamps_and_indexes() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join(".git")).unwrap();
    let repo = Repo::at(d.path());
    let a = write(&repo, "kickoff", t(1, 12));
    let b = write(&repo, "auth-refactor", t(2, 14));
    let c = write(&repo, "ci-pipeline", t(15, 18));
    let late = write(&repo, "later", t(16, 9));
    let before_c = std::fs::read_to_string(repo.handoff_dir().join(format!("{c}.md"))).unwrap();

    let author = Author { session: "b858f500", by: "pc-b/b858f500", at: t(16, 10) };
    let r = handoffs::rollup(&repo, "march", &author, t(15, 18), "Three sessions: auth done, CI green.").unwrap();
    assert_eq!(r.name, "2026-03-16_10-00_b858f500_rollup_march");
    assert_eq!(r.covers, [a.clone(), b.clone(), c.clone()]);
    let text = std::fs::read_to_string(&r.path).unwrap();
    assert!(
        text.starts_with(&format!(
            "---\ntype: rollup\ncovers:\n  - {a}\n  - {b}\n  - {c}\nthrough: 2026-03-15 18:00\n"
        )),
        "{text}"
    );
    assert!(text.contains("Three sessions: auth done, CI green."));

    // Each covered handoff: the same text plus one front-matter line.
    let after_c = std::fs::read_to_string(repo.handoff_dir().join(format!("{c}.md"))).unwrap();
    assert_eq!(after_c.replacen(&format!("rolled_up_into: {}\n", r.name), "", 1), before_c);
    let late_text = std::fs::read_to_string(repo.handoff_dir().join(format!("{late}.md"))).unwrap();
    assert!(!late_text.contains("rolled_up_into"));

    let lines = index::read(&repo.index_path()).unwrap();
    let latest = index::latest(&lines);
    for n in [&a, &b, &c] {
        assert_eq!(latest[n.as_str()].event, Event::RolledUp);
        assert_eq!(latest[n.as_str()].note, format!("into {}", r.name));
    }
    assert_eq!(latest[late.as_str()].event, Event::Active);
    assert_eq!(latest[r.name.as_str()].event, Event::Active);

    // List and show read it back; the summary carries the stamp and `through`.
    let list = handoffs::list(&repo).unwrap();
    assert_eq!(list[0].name, r.name);
    assert_eq!(list[0].through, Some(t(15, 18)));
    assert_eq!(list.iter().find(|s| s.name == b).unwrap().rolled_up_into.as_deref(), Some(r.name.as_str()));
    assert_eq!(handoffs::show(&repo, "auth-refactor").unwrap().summary.state, Some(handoffs::WorkState::Broken));

    // Nothing left up to that date; a later rollup covers only the new one.
    let again = handoffs::rollup(&repo, "march-again", &author, t(15, 18), "x");
    assert!(matches!(again, Err(HandoffError::NotFound { .. })), "{again:?}");
    let r2 =
        handoffs::rollup(&repo, "april", &Author { at: t(20, 0), ..author.clone() }, t(20, 0), "the rest").unwrap();
    assert_eq!(r2.covers, [late]);
    assert!(matches!(handoffs::rollup(&repo, "x", &author, t(20, 0), "  "), Err(HandoffError::Usage(_))));
}

#[test]
fn names_never_collide_and_files_are_never_overwritten() {
    let d = tempfile::tempdir().unwrap();
    let repo = Repo::at(d.path());
    let first = write(&repo, "same", t(1, 1));
    let second = write(&repo, "same", t(1, 1));
    assert_eq!(second, format!("{first}-2"));
    assert!(handoffs::resolve(&repo, "same").is_err(), "two match: ambiguous");
    assert_eq!(handoffs::resolve(&repo, &format!("{first}.md")).unwrap(), first);
    assert!(matches!(handoffs::resolve(&repo, "nothing"), Err(HandoffError::NotFound { .. })));
    let missing =
        handoffs::new_handoff(&repo, "x", &Author { session: "s", by: "b", at: t(1, 1) }, &Sections::default());
    assert!(matches!(missing, Err(HandoffError::Usage(m)) if m.contains("goal") && m.contains("next step")));
}

/// A handoff written in the same minute as a `--through now` rollup, after
/// it, is not covered by it: the next session sees it as ACTIVE, and the next
/// rollup covers it.
#[test]
fn a_handoff_written_in_the_minute_of_a_rollup_is_still_shown() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join(".git")).unwrap();
    let repo = Repo::at(d.path());
    let first = write(&repo, "first", t(16, 9));
    let now = t(16, 10) + chrono::Duration::seconds(5);
    let author = Author { session: "b858f500", by: "pc-b/b858f500", at: now };
    let r = handoffs::rollup(&repo, "morning", &author, now, "One session.").unwrap();
    assert_eq!(r.covers, [first]);
    let same_minute = write(&repo, "after-the-rollup", now + chrono::Duration::seconds(30));
    let view = pcmail_handoff::summary::view(&repo).unwrap();
    assert_eq!(view.active_total, 1, "the handoff after the rollup is ACTIVE");
    assert_eq!(view.active.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), [same_minute.as_str()]);
    // The next rollup covers it.
    let later = Author { session: "b858f500", by: "pc-b/b858f500", at: t(16, 11) };
    let r2 = handoffs::rollup(&repo, "noon", &later, t(16, 11), "Then one more.").unwrap();
    assert_eq!(r2.covers, [same_minute]);
    assert_eq!(pcmail_handoff::summary::view(&repo).unwrap().active_total, 0);
}

/// `handoff rollup --draft`: the five sections, each gathering the covered
/// handoffs' text under their slugs, dead ends included; nothing written.
#[test]
fn a_rollup_draft_gathers_the_covered_handoffs_sections() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join(".git")).unwrap();
    let repo = Repo::at(d.path());
    write(&repo, "kickoff", t(1, 12));
    write(&repo, "auth-refactor", t(2, 14));
    let before: Vec<_> = std::fs::read_dir(repo.handoff_dir()).unwrap().collect();
    let (covers, body) = handoffs::draft_rollup_body(&repo, t(3, 0)).unwrap();
    assert_eq!(covers.len(), 2);
    assert_eq!(std::fs::read_dir(repo.handoff_dir()).unwrap().count(), before.len(), "a draft writes nothing");
    let failed = body.split("## What didn't work\n").nth(1).unwrap().split("\n## ").next().unwrap();
    assert_eq!(failed.trim(), "- kickoff: lr=3e-4 NaN\n- auth-refactor: lr=3e-4 NaN", "{body}");
    assert!(body.starts_with("## Goal\n- kickoff: goal kickoff\n- auth-refactor: goal auth-refactor\n"), "{body}");
    assert!(body.contains("## Next step\n- kickoff: next kickoff\n"), "{body}");
    // The draft, passed back as the body, is what the rollup holds; the hook shows its first line.
    handoffs::rollup(&repo, "early", &Author { session: "b858f500", by: "pc-b/b858f500", at: t(3, 1) }, t(3, 0), &body)
        .unwrap();
    let view = pcmail_handoff::summary::view(&repo).unwrap();
    assert_eq!(view.rollup_summary, "- kickoff: goal kickoff");
}
