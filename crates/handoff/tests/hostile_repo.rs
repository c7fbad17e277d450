//! A repo's own files cannot make `handoff new`, `handoff rollup`-style
//! stamping or `memory add` write outside it: committed symlinks at the
//! INDEX, a memory topic, `.gitattributes` or the handoffs folder are
//! refused with an I/O error (exit 9 at the edges), and nothing outside the
//! repo is created or changed.
#![cfg(unix)]

use chrono::{TimeZone, Utc};
use pcmail_handoff::handoffs::{new_handoff, Author, Sections};
use pcmail_handoff::memory::{self, MemKind};
use pcmail_handoff::repo::Repo;
use pcmail_handoff::HandoffError;
use std::os::unix::fs::symlink;
use std::path::Path;

fn sections() -> Sections {
    Sections {
        goal: Some("g".into()),
        done: Some("d".into()),
        state: Some("working".into()),
        next: Some("n".into()),
        ..Default::default()
    }
}

fn author() -> Author<'static> {
    Author { session: "s1", by: "pc-a/s1", at: Utc.with_ymd_and_hms(2026, 4, 9, 14, 32, 0).unwrap() }
}

fn outside_unchanged(out: &Path) {
    let mut names: Vec<String> =
        std::fs::read_dir(out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, vec!["victim".to_string()], "nothing new outside the repo");
    assert_eq!(std::fs::read_to_string(out.join("victim")).unwrap(), "keep\n");
}

fn refused(e: HandoffError) {
    match &e {
        HandoffError::Io { source, .. } => {
            assert!(pcmail_fsmode::confined::is_refused(source), "{e}");
            assert!(e.to_string().contains("refused to write"), "{e}");
        }
        other => panic!("not an I/O refusal: {other}"),
    }
}

/// (repo, outside folder holding `victim`)
fn setup() -> (tempfile::TempDir, tempfile::TempDir) {
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir(repo.path().join(".git")).unwrap();
    let out = tempfile::tempdir().unwrap();
    std::fs::write(out.path().join("victim"), "keep\n").unwrap();
    (repo, out)
}

#[test]
fn a_symlinked_gitattributes_is_not_written_through() {
    let (repo, out) = setup();
    symlink(out.path().join("victim"), repo.path().join(".gitattributes")).unwrap();
    let r = Repo::at(repo.path());
    refused(new_handoff(&r, "x", &author(), &sections()).unwrap_err());
    refused(memory::add(&r, MemKind::Decision, "t", "text", None, "pc-a/s1", author().at).unwrap_err());
    outside_unchanged(out.path());
}

#[test]
fn a_symlinked_index_or_handoffs_folder_is_not_written_through() {
    let (repo, out) = setup();
    let r = Repo::at(repo.path());
    std::fs::create_dir_all(r.handoff_dir()).unwrap();
    symlink(out.path().join("victim"), r.index_path()).unwrap();
    refused(new_handoff(&r, "x", &author(), &sections()).unwrap_err());
    outside_unchanged(out.path());

    // A dangling INDEX symlink would have created a file outside.
    std::fs::remove_file(r.index_path()).unwrap();
    symlink(out.path().join("created"), r.index_path()).unwrap();
    refused(new_handoff(&r, "y", &author(), &sections()).unwrap_err());
    outside_unchanged(out.path());

    std::fs::remove_dir_all(r.handoff_dir()).unwrap();
    symlink(out.path(), r.handoff_dir()).unwrap();
    refused(new_handoff(&r, "z", &author(), &sections()).unwrap_err());
    outside_unchanged(out.path());

    std::fs::remove_file(r.handoff_dir()).unwrap();
    std::fs::remove_dir(repo.path().join(".claude")).unwrap();
    symlink(out.path(), repo.path().join(".claude")).unwrap();
    refused(new_handoff(&r, "w", &author(), &sections()).unwrap_err());
    outside_unchanged(out.path());
}

#[test]
fn a_symlinked_memory_topic_or_folder_is_not_written_through() {
    let (repo, out) = setup();
    let r = Repo::at(repo.path());
    std::fs::create_dir_all(r.memory_dir().join("ui")).unwrap();
    symlink(out.path().join("victim"), r.memory_dir().join("auth.md")).unwrap();
    refused(memory::add(&r, MemKind::Gotcha, "auth", "text", None, "pc-a/s1", author().at).unwrap_err());
    symlink(out.path().join("created.md"), r.memory_dir().join("new.md")).unwrap();
    refused(memory::add(&r, MemKind::Gotcha, "new", "text", None, "pc-a/s1", author().at).unwrap_err());
    symlink(out.path(), r.memory_dir().join("ui/tray")).unwrap();
    refused(memory::add(&r, MemKind::Gotcha, "ui/tray/x", "text", None, "pc-a/s1", author().at).unwrap_err());
    // A hard link to a file outside is refused too.
    std::fs::hard_link(out.path().join("victim"), r.memory_dir().join("hard.md")).unwrap();
    refused(memory::add(&r, MemKind::Gotcha, "hard", "text", None, "pc-a/s1", author().at).unwrap_err());
    outside_unchanged(out.path());
    // A real topic still works.
    memory::add(&r, MemKind::Gotcha, "ui/ok", "text", None, "pc-a/s1", author().at).unwrap();
}
