//! A fresh home's first moments: the processes an agent session starts
//! together, each the first to open the PC's files.

mod common;

use common::Pc;
use std::process::Stdio;

/// On a home that has only its config (`pcmail init` on the embedded
/// default), the daemon, lease claims of several sessions, sends and a
/// `sync` start at the same moment: each may be the one that creates the
/// store or the embedded server's file. Every command succeeds, the daemon
/// keeps running, and what they did is all there afterwards.
#[test]
fn everything_a_fresh_home_starts_at_once_succeeds() {
    for round in 0..3 {
        let pc = Pc::blank("pc-a", "", true);
        pc.ok(&["init", "--label", "pc-a"]);
        assert!(!pc.store().exists(), "round {round}: init made no store yet");
        let work = tempfile::tempdir().unwrap();
        let mut daemon = pc.cmd(&["daemon"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let mut commands = vec![];
        for i in 0..3 {
            let res = format!("res-{i}");
            commands
                .push(["lease", "claim", res.as_str(), "--ttl", "10m", "-d", "first use"].map(String::from).to_vec());
        }
        for i in 0..2 {
            let body = format!("mail {i}");
            commands.push(["send", "pc-a", "--body", body.as_str()].map(String::from).to_vec());
        }
        commands.push(vec!["sync".to_string()]);
        let started: Vec<_> = commands
            .iter()
            .map(|args| {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let child = pc
                    .cmd(&args)
                    .current_dir(work.path())
                    .env("PCMAIL_SESSION_ID", format!("session-{}", args.join("-")))
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap();
                (args.join(" "), child)
            })
            .collect();
        for (what, child) in started {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "round {round}: `pcmail {what}` exited {:?}: {}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(daemon.try_wait().unwrap().is_none(), "round {round}: the daemon ended");
        daemon.kill().unwrap();
        daemon.wait().unwrap();
        let leases = pc.json(&["lease", "list"]);
        let listed = leases.to_string();
        for i in 0..3 {
            assert!(listed.contains(&format!("res-{i}")), "round {round}: res-{i} missing from {leases}");
        }
        pc.ok(&["sync"]);
        let inbox = pc.json(&["inbox"]).to_string();
        for i in 0..2 {
            assert!(inbox.contains(&format!("mail {i}")), "round {round}: mail {i} missing from {inbox}");
        }
    }
}
