//! One mail to several PCs, end to end with real processes on both servers:
//! one copy and one timeline per recipient, `status` of the mail's id shows
//! each recipient's state, `reply` answers the sender only and `reply --all`
//! everyone else too; and all or nothing: one address that is not exact sends
//! nothing to anyone (exit 4, the candidates of each miss).

mod common;
use common::*;

fn states(tl: &serde_json::Value) -> Vec<String> {
    tl["timeline"].as_array().unwrap().iter().map(|e| e["state"].as_str().unwrap().to_string()).collect()
}

#[test]
fn one_mail_to_two_pcs_has_a_timeline_per_recipient_on_both_servers() {
    for kind in servers() {
        let server = Server::start(kind);
        let [a, b, c] = synced(&server, ["pc-a", "pc-b", "pc-c"]);
        // A working number is an exact address like a label (pc-c registered third).
        let out = a.json(&["send", "pc-b", "#3", "--kind", "decision", "--body", "ship 2.1 today?"]);
        let ids: Vec<&str> = out["ids"].as_array().unwrap().iter().map(|i| i.as_str().unwrap()).collect();
        assert_eq!(ids.len(), 2, "{kind:?}: {out}");
        let id = ids[0].split('~').next().unwrap().to_string();
        assert_eq!(ids, [format!("{id}~pc-b"), format!("{id}~pc-c")], "{kind:?}");

        b.ok(&["sync"]);
        c.ok(&["sync"]);
        let shown = b.ok(&["read", ids[0]]);
        assert!(shown.contains("to:      pc-b, pc-c"), "{kind:?}: read says who else got it\n{shown}");
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("export");
        b.ok(&["export", out.to_str().unwrap()]);
        let md = std::fs::read_dir(out.join("mail/received")).unwrap().next().unwrap().unwrap().path();
        let md = std::fs::read_to_string(md).unwrap();
        assert!(md.contains(r#"recipients: ["pc-b", "pc-c"]"#), "{kind:?}: the export keeps the list\n{md}");
        b.ok(&["sync"]);

        // The sender's status of the mail's own id: every recipient, each its own state.
        let st = a.json(&["status", &id]);
        let rows: Vec<(String, String)> = st
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (m["to"].as_str().unwrap().to_string(), m["state"].as_str().unwrap().to_string()))
            .collect();
        assert_eq!(rows, [("pc-b".into(), "seen".into()), ("pc-c".into(), "delivered".into())], "{kind:?}: {st}");
        assert_eq!(states(&st[0]), ["new", "delivered", "seen"], "{kind:?}");
        assert_eq!(states(&st[1]), ["new", "delivered"], "{kind:?}");
        let text = a.ok(&["status", &id]);
        assert!(text.contains("pc-a → pc-b  [seen]") && text.contains("pc-a → pc-c  [delivered]"), "{text}");

        // pc-c answers everyone: the sender and pc-b, never itself.
        let all = c.json(&["reply", ids[1], "--all", "--body", "yes, after the tests"]);
        let to: Vec<String> = all["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_str().unwrap().split_once('~').unwrap().1.to_string())
            .collect();
        assert_eq!(to, ["pc-a", "pc-b"], "{kind:?}: {all}");
        // pc-b answers the sender only (the default).
        let one = b.json(&["reply", ids[0], "--body", "fine by me"]);
        assert_eq!(one["ids"].as_array().unwrap().len(), 1, "{kind:?}: {one}");
        assert!(!one["ids"][0].as_str().unwrap().contains('~'), "{kind:?}: {one}");
        b.ok(&["sync"]);
        let inbox = b.json(&["inbox"]);
        assert!(
            inbox.as_array().unwrap().iter().any(|m| m["from"] == "pc-c" && m["body"] == "yes, after the tests"),
            "{kind:?}: pc-b got pc-c's reply to all: {inbox}"
        );
        // Each reply finished its replier's own copy, and only that one.
        let st = a.json(&["status", &id]);
        assert_eq!((st[0]["state"].as_str(), st[1]["state"].as_str()), (Some("done"), Some("done")), "{kind:?}: {st}");
    }
}

#[test]
fn one_address_that_is_not_exact_sends_nothing_to_anyone() {
    for kind in servers() {
        let server = Server::start(kind);
        let (a, b) = pair(&server);
        let out = a.run(&["send", "pc-b", "pc-x", "pc-bb", "--body", "half a mail is no mail"]);
        assert_eq!(out.status.code(), Some(4), "{kind:?}: {}", String::from_utf8_lossy(&out.stderr));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("nothing was sent"), "{kind:?}: {err}");
        assert!(err.contains("candidates for \"pc-x\"") && err.contains("candidates for \"pc-bb\""), "{kind:?}: {err}");
        // --json names every miss with its candidates.
        let out = a.run(&["--json", "send", "pc-b", "pc-x", "--body", "x"]);
        assert_eq!(out.status.code(), Some(4));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["error"]["unresolved"][0]["to"], "pc-x", "{kind:?}: {v}");
        // A name-shaped address only the server can judge: refused there, whole.
        let out = a.run(&["send", "pc-b", "ani", "--body", "x"]);
        assert_eq!(out.status.code(), Some(4), "{kind:?}: {}", String::from_utf8_lossy(&out.stderr));
        // `*` in a list is a usage error.
        let out = a.run(&["send", "pc-b", "*", "--body", "x"]);
        assert_eq!(out.status.code(), Some(2), "{kind:?}");
        // Nothing anywhere: pc-b gets no mail, pc-a lists nothing sent.
        b.ok(&["sync"]);
        assert_eq!(b.json(&["inbox", "--all"]).as_array().unwrap().len(), 0, "{kind:?}");
        assert_eq!(a.json(&["sent"]).as_array().unwrap().len(), 0, "{kind:?}");
    }
}
