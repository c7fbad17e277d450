//! The Japanese subject tags. `[判断依頼]` / `[作業依頼]`
//! are recognised in what arrives; the kind is shown as a badge in the user's
//! language (LC_ALL / LC_MESSAGES / LANG: Japanese or English) by `inbox`,
//! `read` and the hook; a PC adds the tag to what it sends only when its
//! config says `subject_tags = "ja"`.

mod common;
use common::*;
use std::io::Write as _;
use std::process::{Command, Stdio};

/// `pcmail ARGS` with the locale set to `lang` (LC_ALL and LC_MESSAGES unset).
fn in_lang(pc: &Pc, lang: &str, args: &[&str]) -> Command {
    let mut c = pc.cmd(args);
    c.env_remove("LC_ALL").env_remove("LC_MESSAGES").env("LANG", lang);
    c
}

fn stdout_in(pc: &Pc, lang: &str, args: &[&str]) -> String {
    let out = in_lang(pc, lang, args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn hook_in(pc: &Pc, lang: &str, session: &str) -> String {
    let mut child = in_lang(pc, lang, &["hook"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let input = serde_json::json!({"session_id": session, "hook_event_name": "UserPromptSubmit", "cwd": "/tmp", "prompt": "hi"});
    child.stdin.take().unwrap().write_all(input.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the hook prints its JSON");
    v["hookSpecificOutput"]["additionalContext"].as_str().unwrap().to_string()
}

#[test]
fn the_kind_badge_is_in_the_users_language_and_tags_are_not_added_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = embedded_pair(&dir.path().join("server.db"));
    let dec = a.send(&["pc-b", "--kind", "decision", "--subject", "ship it?", "--body", "yes or no"]);
    b.ok(&["sync"]);
    // No subject_tags in a's config: the subject travels as written.
    let inbox = b.json(&["inbox"]);
    assert_eq!(inbox[0]["subject"], "ship it?");

    let ja = stdout_in(&b, "ja_JP.UTF-8", &["inbox"]);
    assert!(ja.contains("[判断依頼] ship it?"), "{ja}");
    let en = stdout_in(&b, "en_US.UTF-8", &["inbox"]);
    assert!(en.contains("[decision request] ship it?"), "{en}");
    assert!(!en.contains("判断依頼"), "{en}");
    // LC_MESSAGES goes before LANG.
    let msgs = in_lang(&b, "en_US.UTF-8", &["inbox"]).env("LC_MESSAGES", "ja_JP.UTF-8").output().unwrap();
    assert!(String::from_utf8_lossy(&msgs.stdout).contains("[判断依頼] ship it?"));

    assert!(stdout_in(&b, "ja_JP.UTF-8", &["read", &dec]).contains("kind:    [判断依頼] decision"));
    assert!(stdout_in(&b, "C", &["read", &dec]).contains("kind:    [decision request] decision"));

    let ctx = hook_in(&b, "ja_JP.UTF-8", "4f1c2a9e-0000");
    assert!(ctx.contains("[判断依頼] ship it? — yes or no"), "{ctx}");
    b.send(&["pc-a", "--kind", "request", "--subject", "rebase", "--body", "onto main"]);
    a.ok(&["sync"]);
    let ctx = hook_in(&a, "C.UTF-8", "77aa0e12-0000");
    assert!(ctx.contains("[work request] rebase — onto main"), "{ctx}");
}

#[test]
fn subject_tags_ja_puts_the_tag_in_front_once_and_it_is_recognised_without_the_kind() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = embedded_pair(&dir.path().join("server.db"));
    // A top-level key: first in the file, before the [server] table.
    let cfg = a.home.path().join("config.toml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("subject_tags = \"ja\"\n{text}")).unwrap();
    a.send(&["pc-b", "--kind", "request", "--subject", "rebase", "--body", "onto main"]);
    a.send(&["pc-b", "--kind", "decision", "--subject", "[判断依頼] ship it?", "--body", "y/n"]);
    a.send(&["pc-b", "--subject", "fyi", "--body", "a note gets no tag"]);
    b.ok(&["sync"]);
    let subjects: Vec<String> =
        b.json(&["inbox"]).as_array().unwrap().iter().map(|m| m["subject"].as_str().unwrap().to_string()).collect();
    assert!(subjects.contains(&"[作業依頼] rebase".to_string()), "{subjects:?}");
    assert!(subjects.contains(&"[判断依頼] ship it?".to_string()), "not doubled: {subjects:?}");
    assert!(subjects.contains(&"fyi".to_string()), "{subjects:?}");
    // Shown once, as the badge, in either language.
    let en = stdout_in(&b, "en_US.UTF-8", &["inbox"]);
    assert!(en.contains("[work request] rebase") && !en.contains("作業依頼"), "{en}");
    // A tag alone (an older sender's note) is recognised as the kind.
    b.send(&["pc-a", "--subject", "[作業依頼] tagged only", "--body", "x"]);
    a.ok(&["sync"]);
    let ja = stdout_in(&a, "ja_JP.UTF-8", &["inbox"]);
    assert!(ja.contains("[作業依頼] tagged only") && !ja.contains("[作業依頼] [作業依頼]"), "{ja}");

    // Any other value is refused with the key named.
    let text = std::fs::read_to_string(&cfg).unwrap().replace("subject_tags = \"ja\"", "subject_tags = \"fr\"");
    assert!(text.contains("subject_tags = \"fr\""));
    std::fs::write(&cfg, text).unwrap();
    let out = a.run(&["sync"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("subject_tags"), "{}", String::from_utf8_lossy(&out.stderr));
}
