//! TLS beyond loopback, end to end with real processes: `pcmail serve` on TLS
//! (forced on loopback with `--tls`, so no LAN is needed), PCs that pin its
//! certificate through the join code, and a server with another certificate
//! refused by name.

mod common;
use common::*;
use pcmail_testkit::free_port;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

/// A `pcmail serve` process on a fixed port and data folder, so it can be
/// restarted as the same server.
struct Serve {
    _process: Process,
    url: String,
    /// The SHA-256 it printed at start (None on plain HTTP).
    fingerprint: Option<String>,
    stderr: PathBuf,
}

fn serve(dir: &Path, args: &[&str]) -> Serve {
    let stderr = dir.join(format!("serve-stderr-{}.txt", std::process::id()));
    let mut cmd = serve_command(dir);
    cmd.args(args).arg("--db").arg(dir.join("serve.db")).stderr(std::fs::File::create(&stderr).unwrap());
    let mut fingerprint = None;
    let process = Process::try_listening(&mut cmd, Duration::from_secs(20), |line| {
        if let Some(fp) = line.split("SHA-256 fingerprint ").nth(1) {
            fingerprint = Some(fp.trim().to_string());
        }
    })
    .unwrap_or_else(|| {
        panic!("serve exited before listening: {}", std::fs::read_to_string(&stderr).unwrap_or_default())
    });
    Serve { url: process.url.clone(), _process: process, fingerprint, stderr }
}

/// The admin's PC holds the secret and pins the certificate by hand (it saw `serve` print it).
fn admin_pc(s: &Serve) -> Pc {
    let admin = Pc::blank("pc-admin", &s.url, true);
    let out = admin.ok(&[
        "init",
        "--label",
        "pc-admin",
        "--server",
        &s.url,
        "--tls-fingerprint",
        s.fingerprint.as_deref().unwrap(),
    ]);
    assert!(out.contains("pinned"), "{out}");
    admin
}

#[test]
fn enrolment_pins_the_certificate_and_mail_flows_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), &["--listen", "127.0.0.1:0", "--tls"]);
    let fp = s.fingerprint.clone().expect("serve prints its certificate's fingerprint");
    assert_eq!(fp.len(), 64, "{fp}");
    assert!(s.url.starts_with("https://"), "{}", s.url);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("serve-key.pem")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the self-signed key is private");
    }
    // The port speaks nothing but TLS.
    let plain = reqwest::blocking::Client::new()
        .post(s.url.replace("https://", "http://"))
        .json(&json!({"v": 1, "op": "hello", "pc": "pc-x", "token": TOKEN, "args": {}}))
        .send()
        .and_then(|r| r.json::<Value>());
    assert!(plain.is_err(), "plain HTTP answered on the TLS port: {plain:?}");

    let admin = admin_pc(&s);
    let add = admin.json(&["roster", "add", "pc-b"]);
    let code = add["code"].as_str().unwrap().to_string();
    assert!(code.ends_with(&format!(":{fp}")), "the join code carries the fingerprint: {code}");
    assert_eq!(add["tlsFingerprint"], json!(fp));

    // The code's pin needs the https:// address: a plain one is refused before anything is sent.
    let wrong = Pc::blank("pc-b", &s.url, false);
    let out = wrong.run(&["init", "--join", &code, "--server", &s.url.replace("https://", "http://")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("not https://"), "{}", stderr(&out));

    let b = Pc::blank("pc-b", &s.url, false);
    let out = b.ok(&["init", "--join", &code, "--server", &s.url]);
    assert!(out.contains(&fp), "{out}");
    let config = std::fs::read_to_string(b.home.path().join("config.toml")).unwrap();
    assert!(config.contains(&format!("tls_fingerprint = \"{fp}\"")), "pinned in config.toml: {config}");
    let a = Pc::joined(&admin, "pc-a", &s.url);
    a.ok(&["sync"]);
    b.ok(&["sync"]);
    let id = a.send(&["pc-b", "--body", "over TLS"]);
    b.ok(&["sync"]);
    assert_eq!(b.json(&["inbox", "--all"])[0]["id"], json!(id));
    b.ok(&["ack", &id]);
    b.ok(&["sync"]);
    a.ok(&["sync"]);
    assert_eq!(a.state_of(&id), "done");
    let doctor = String::from_utf8_lossy(&b.run(&["--json", "doctor"]).stdout).to_string();
    assert!(doctor.contains("certificate pinned"), "{doctor}");
}

#[test]
fn a_server_with_another_certificate_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let first = serve(dir.path(), &["--listen", &listen, "--tls"]);
    let old_fp = first.fingerprint.clone().unwrap();
    let admin = admin_pc(&first);
    let b = Pc::joined(&admin, "pc-b", &first.url);
    b.ok(&["sync"]);
    let id = admin.send(&["pc-b", "--body", "waits across the swap"]);

    // Restarted on the same port and database, with a new self-signed certificate.
    drop(first);
    for f in ["serve-cert.pem", "serve-key.pem"] {
        std::fs::remove_file(dir.path().join(f)).unwrap();
    }
    let second = serve(dir.path(), &["--listen", &listen, "--tls"]);
    let new_fp = second.fingerprint.clone().unwrap();
    assert_ne!(old_fp, new_fp);

    let out = b.run(&["sync"]);
    assert_eq!(out.status.code(), Some(6), "not trusted exits 6: {}", stderr(&out));
    let msg = stderr(&out);
    assert!(msg.contains(&old_fp) && msg.contains(&new_fp), "both fingerprints named: {msg}");
    assert!(msg.contains("pcmail init --join") && msg.contains("--tls-fingerprint"), "what to do: {msg}");
    assert!(b.json(&["inbox", "--all"]).as_array().unwrap().is_empty(), "nothing came through");

    // The PC's owner checks the new fingerprint and pins it: the same credential and mail go on.
    b.ok(&["init", "--server", &second.url, "--tls-fingerprint", &new_fp, "--offline"]);
    b.ok(&["sync"]);
    assert_eq!(b.json(&["inbox", "--all"])[0]["id"], json!(id));
}

#[test]
fn beyond_loopback_serve_speaks_tls_by_default() {
    // No flag: a listener other machines can reach gets the self-signed certificate.
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let s = serve(dir.path(), &["--listen", &format!("0.0.0.0:{port}")]);
    assert!(s.url.starts_with("https://"), "TLS without being asked: {}", s.url);
    let fp = s.fingerprint.clone().expect("serve prints the certificate's fingerprint");
    assert_eq!(fp.len(), 64, "{fp}");
    assert!(dir.path().join("serve-cert.pem").exists() && dir.path().join("serve-key.pem").exists());
    // Plain HTTP is refused by the server (a TLS listener does not answer it).
    let plain = std::net::TcpStream::connect(("127.0.0.1", port)).and_then(|mut c| {
        use std::io::{Read, Write};
        c.set_read_timeout(Some(Duration::from_secs(5)))?;
        c.write_all(b"POST /api HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")?;
        let mut buf = Vec::new();
        let _ = c.read_to_end(&mut buf);
        Ok(buf)
    });
    let answered = plain.map(|b| String::from_utf8_lossy(&b).to_string()).unwrap_or_default();
    assert!(!answered.contains("\"ok\""), "no JSON answer over plain HTTP: {answered}");
}

#[test]
fn doctor_flags_a_server_on_insecure_http() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let s = serve(dir.path(), &["--listen", &format!("0.0.0.0:{port}"), "--insecure-http"]);
    assert!(s.fingerprint.is_none());
    let warned = std::fs::read_to_string(&s.stderr).unwrap();
    assert!(warned.contains("--insecure-http") && warned.contains("in clear"), "serve warns: {warned}");
    let url = format!("http://127.0.0.1:{port}/api");
    let admin = Pc::blank("pc-admin", &url, true);
    admin.ok(&["init", "--label", "pc-admin", "--server", &url]);
    let out = admin.run(&["--json", "doctor"]);
    assert!(!out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let flagged =
        v["checks"].as_array().unwrap().iter().find(|c| c["check"].as_str().unwrap().contains("--insecure-http"));
    let flagged = flagged.unwrap_or_else(|| panic!("doctor flags --insecure-http: {v}"));
    assert_eq!(flagged["ok"], json!(false));
    assert!(flagged["fix"].as_str().unwrap().contains("--tls"), "{flagged}");
}

/// What a trust failure must never read as: an outage, or a raw TLS log line.
fn assert_says_not_trusted(out: &Output, what: &str) {
    let msg = stderr(out);
    assert_eq!(out.status.code(), Some(6), "{what}: not trusted exits 6: {msg}");
    assert!(msg.contains("not trusted"), "{what}: says not trusted: {msg}");
    assert!(!msg.contains("connection refused"), "{what}: not reported as an outage: {msg}");
    assert!(!msg.contains('\u{1b}'), "{what}: no colour codes: {msg:?}");
    assert!(!msg.contains("rustls"), "{what}: no raw TLS log line: {msg}");
}

#[test]
fn a_send_to_a_server_with_another_certificate_is_not_queued_as_an_outage() {
    let dir = tempfile::tempdir().unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let first = serve(dir.path(), &["--listen", &listen, "--tls"]);
    let admin = admin_pc(&first);
    let b = Pc::joined(&admin, "pc-b", &first.url);
    b.ok(&["sync"]);
    drop(first);
    for f in ["serve-cert.pem", "serve-key.pem"] {
        std::fs::remove_file(dir.path().join(f)).unwrap();
    }
    let _second = serve(dir.path(), &["--listen", &listen, "--tls"]);

    let out = b.run(&["send", "pc-admin", "--body", "to whom?"]);
    assert_says_not_trusted(&out, "send");
    assert!(
        String::from_utf8_lossy(&out.stdout).is_empty(),
        "no \"queued\" line: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Nothing waits in the outbox for a server this PC does not trust.
    let sent = b.json(&["sent"]);
    assert!(sent.as_array().unwrap().is_empty(), "nothing queued: {sent}");
    let out = b.run(&["sync"]);
    assert_says_not_trusted(&out, "sync");
}

#[test]
fn an_https_server_with_an_unknown_certificate_is_not_trusted_rather_than_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), &["--listen", "127.0.0.1:0", "--tls"]);
    // A PC that was given the address but no fingerprint: the self-signed certificate has no CA.
    let c = Pc::blank("pc-c", &s.url, false);
    c.ok(&["init", "--label", "pc-c", "--server", &s.url, "--offline"]);
    let out = c.run(&["sync"]);
    assert_says_not_trusted(&out, "sync");
    assert!(stderr(&out).contains("--tls-fingerprint"), "says how to trust it: {}", stderr(&out));
    let out = c.run(&["send", "pc-c", "--body", "x"]);
    assert_says_not_trusted(&out, "send");
}
