//! `pcmail export DIR`: a PC's mail (with timelines), leases, names,
//! sessions and jobs as files readable without pcmail, written only into a
//! new or empty real folder and never over anything.

mod common;

use common::*;

#[test]
fn export_writes_every_mail_with_its_timeline_and_never_overwrites() {
    let server = Server::start(Kind::Rust);
    let (a, b) = pair(&server);
    let to_b = a.send(&["pc-b", "--subject", "build is red", "--body", "line one\nline two"]);
    let to_a = b.send(&["pc-a", "--subject", "[判断依頼] ship?", "--body", "yes or no"]);
    b.ok(&["sync"]);
    b.ok(&["ack", &to_b]);
    b.ok(&["sync"]);
    a.ok(&["sync"]);

    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("export");
    let v = b.json(&["export", dir.to_str().unwrap()]);
    assert_eq!(v["received"], 1, "{v}");
    assert_eq!(v["sent"], 1, "{v}");
    let received = std::fs::read_to_string(dir.join(format!("mail/received/{to_b}.md"))).unwrap();
    assert!(received.starts_with(&format!("---\nid: \"{to_b}\"\nfrom: \"pc-a\"\n")), "{received}");
    assert!(received.contains("subject: \"build is red\""), "{received}");
    assert!(received.contains("\n---\n\nline one\nline two\n"), "{received}");
    assert!(received.contains("## Timeline"), "{received}");
    assert!(received.contains(" done by pc-b"), "the ack is in the timeline: {received}");
    let sent = std::fs::read_to_string(dir.join(format!("mail/sent/{to_a}.md"))).unwrap();
    assert!(sent.contains("to: \"pc-a\"") && sent.contains("[判断依頼] ship?"), "{sent}");
    for f in ["leases.json", "names.json", "sessions.json", "jobs.json", "README.md"] {
        assert!(dir.join(f).is_file(), "{f}");
    }
    let leases: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("leases.json")).unwrap()).unwrap();
    assert!(leases["mine"].is_array() && leases["known"].is_array(), "{leases}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join(format!("mail/received/{to_b}.md"))).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "mail files are the PC user's");
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
    }

    // A folder that is not empty, or a link, is refused and left as it was.
    let again = b.run(&["export", dir.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2), "{}", String::from_utf8_lossy(&again.stderr));
    assert!(String::from_utf8_lossy(&again.stderr).contains("not empty"));
    #[cfg(unix)]
    {
        let link = out.path().join("link");
        let target = out.path().join("elsewhere");
        std::fs::create_dir(&target).unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let r = b.run(&["export", link.to_str().unwrap()]);
        assert_eq!(r.status.code(), Some(2), "{}", String::from_utf8_lossy(&r.stderr));
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0, "nothing written through the link");
    }

    // A folder name with control characters is shown escaped, never sent raw to a terminal.
    let odd = out.path().join("x\u{1b}[31my");
    let r = b.run(&["export", odd.to_str().unwrap()]);
    assert!(r.status.success(), "{r:?}");
    let said = String::from_utf8_lossy(&r.stdout);
    assert!(!said.contains('\u{1b}') && said.contains("x\\u{1b}[31my"), "{said}");
}
