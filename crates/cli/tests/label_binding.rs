//! A label is bound to one installation. Two installations
//! that claim the same label used to split the mail silently (of 20 mails
//! each got 10, all `delivered`); now the second is refused with exit 12 and
//! told what to do, and the first keeps every mail — on both servers.

mod common;
use common::*;

const MAILS: usize = 8;

fn inbox_ids(pc: &Pc) -> Vec<String> {
    let v = pc.json(&["inbox", "--all"]);
    let mut ids: Vec<String> = v.as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap().to_string()).collect();
    ids.sort();
    ids
}

#[test]
fn a_second_installation_cannot_take_a_label_without_replace() {
    for kind in servers() {
        let server = Server::start(kind);
        let [first, sender] = synced(&server, ["pc-a", "pc-b"]);

        // Another installation (its own home and credential) claims the same label.
        let (second, out) = Pc::try_new(&server, "pc-a");
        assert_eq!(out.status.code(), Some(12), "{kind:?}: init refused\n{}", stderr(&out));
        let msg = stderr(&out);
        assert!(msg.contains("belongs to another installation"), "{kind:?}: {msg}");
        assert!(msg.contains("pcmail init --label NEW") && msg.contains("pcmail init --replace"), "{kind:?}: {msg}");

        // Every mail reaches the first; the second is refused at every poll.
        let mut sent = vec![];
        for i in 0..MAILS {
            sent.push(sender.send(&["pc-a", "--body", &format!("mail {i}")]));
            let out = second.run(&["sync"]);
            assert_eq!(out.status.code(), Some(12), "{kind:?}: sync of the second\n{}", stderr(&out));
            first.ok(&["sync"]);
        }
        sent.sort();
        assert_eq!(inbox_ids(&first), sent, "{kind:?}: the first installation got every mail");
        assert!(inbox_ids(&second).is_empty(), "{kind:?}: the second got nothing");
        for id in &sent {
            assert_eq!(sender.state_of(id), "delivered", "{kind:?}");
        }
        // Sending and status from the second are refused too.
        let out = second.run(&["send", "pc-b", "--body", "from the impostor"]);
        assert_eq!(out.status.code(), Some(12), "{kind:?}: send of the second\n{}", stderr(&out));
        let doctor = second.run(&["doctor"]);
        let text = String::from_utf8_lossy(&doctor.stdout);
        assert!(text.contains("FAIL label \"pc-a\": belongs to another installation"), "{kind:?}: doctor\n{text}");
        let doctor = first.run(&["doctor"]);
        let text = String::from_utf8_lossy(&doctor.stdout);
        assert!(
            text.contains("ok   label \"pc-a\": bound to this installation (credential from PCMAIL_CREDENTIAL)"),
            "{kind:?}: doctor\n{text}"
        );

        // `init --replace` takes the label over: the first loses access, the second receives.
        let out = second.run(&["init", "--replace"]);
        assert!(out.status.success(), "{kind:?}: replace\n{}", stderr(&out));
        assert!(String::from_utf8_lossy(&out.stdout).contains("taken over"), "{kind:?}");
        let out = first.run(&["sync"]);
        assert_eq!(out.status.code(), Some(12), "{kind:?}: the replaced installation is refused\n{}", stderr(&out));
        assert!(stderr(&out).contains("belongs to another installation"), "{kind:?}");
        let id = sender.send(&["pc-a", "--body", "after the takeover"]);
        second.ok(&["sync"]);
        assert_eq!(inbox_ids(&second), vec![id.clone()], "{kind:?}: the new owner receives");
        assert_eq!(sender.state_of(&id), "delivered", "{kind:?}");
    }
}

/// Without a keyring and without PCMAIL_CREDENTIAL a PC has nowhere to keep
/// its credential: registering fails with exit 9 and says what to set.
#[test]
fn no_keyring_and_no_credential_is_exit_9() {
    let server = Server::start(Kind::Rust);
    let pc = Pc::new(&server, "pc-a");
    let out = pc.cmd(&["init", "--label", "pc-c"]).env_remove("PCMAIL_CREDENTIAL").output().unwrap();
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("PCMAIL_CREDENTIAL") && stderr(&out).contains("openssl rand -hex 32"),
        "{}",
        stderr(&out)
    );
    // A PCMAIL_CREDENTIAL that is not a long secret is refused before use (the rule of pcmail-core).
    let out = pc.cmd(&["sync"]).env("PCMAIL_CREDENTIAL", "hunter2").output().unwrap();
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    assert!(stderr(&out).contains("PCMAIL_CREDENTIAL: cred must be 32-512"), "{}", stderr(&out));
    assert!(!stderr(&out).contains("hunter2"), "the secret is never printed");
}

/// The PC makes its credential, so a lost answer to its claim never locks it
/// out of its own label: the server bound it, the PC saw an error page, and
/// its next poll presents the same secret again (an idempotent re-claim).
#[test]
fn a_lost_answer_to_the_claim_never_locks_the_pc_out() {
    let server = Server::start(Kind::Gas);
    server.fault("lost");
    let (pc, out) = Pc::try_new(&server, "pc-l");
    assert!(out.status.success(), "init goes on when the server cannot answer: {}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("registers on its first poll"));
    server.fault("off");
    // The claim was stored: another installation is already refused…
    let (other, out) = Pc::try_new(&server, "pc-l");
    assert_eq!(out.status.code(), Some(12), "{}", stderr(&out));
    // …and the PC that lost the answer keeps its label.
    pc.ok(&["sync"]);
    let doctor = String::from_utf8_lossy(&pc.run(&["doctor"]).stdout).to_string();
    assert!(doctor.contains("label \"pc-l\": bound to this installation"), "{doctor}");
    assert_eq!(other.run(&["sync"]).status.code(), Some(12));
}
