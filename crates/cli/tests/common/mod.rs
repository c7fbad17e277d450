//! End-to-end harness: real `pcmail` processes, each PC its own data
//! directory, against a real server on loopback (`pcmail serve`, or the Apps
//! Script code behind its Node WebApp front).
#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const TOKEN: &str = "e2e-token-0123456789";

/// The `pcmail` under test: cargo's, or `PCMAIL_TEST_EXE` (a copy taken right
/// after the build, where several worktrees share one target folder and its
/// `debug/pcmail`).
pub fn exe() -> PathBuf {
    match std::env::var_os("PCMAIL_TEST_EXE").filter(|p| !p.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_BIN_EXE_pcmail")),
    }
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Rust,
    Gas,
}

pub struct Server {
    pub kind: Kind,
    pub url: String,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Server {
    pub fn start(kind: Kind) -> Server {
        Server::start_with_env(kind, &[])
    }

    /// `pcmail serve` with more environment (libfaketime's, to move the
    /// server's clock while it runs).
    pub fn start_with_env(kind: Kind, envs: &[(&str, &str)]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let mut child = match kind {
            Kind::Rust => Command::new(exe())
                .args(["serve", "--listen", "127.0.0.1:0", "--db"])
                .arg(dir.path().join("serve.db"))
                .env("PCMAIL_TOKEN", TOKEN)
                .env("PCMAIL_HOME", dir.path())
                .envs(envs.iter().copied())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("start pcmail serve"),
            Kind::Gas => Command::new("node")
                .arg(repo_root().join("gas/dev-server.js"))
                .args(["--port", &free_port().to_string(), "--token", TOKEN, "--db-file"])
                .arg(dir.path().join("sheet.json"))
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("start node gas/dev-server.js"),
        };
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let deadline = Instant::now() + Duration::from_secs(20);
        let url = loop {
            assert!(Instant::now() < deadline, "server did not say where it listens");
            let line = lines.next().expect("server exited before listening").unwrap();
            if let Some(rest) = line.split("listening on ").nth(1) {
                break rest.trim().to_string();
            }
        };
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Server { kind, url, child, _dir: dir }
    }

    /// Sends one raw protocol request (for ops the CLI has no verb for, e.g. sweep).
    pub fn call(&self, pc: &str, op: &str, args: Value) -> Value {
        self.post(serde_json::json!({"v": 1, "op": op, "pc": pc, "token": TOKEN, "args": args}))
    }

    /// One raw request as that PC, with its credential (its label is bound).
    pub fn call_as(&self, pc: &Pc, op: &str, args: Value) -> Value {
        self.post(serde_json::json!({"v": 1, "op": op, "pc": pc.label, "token": TOKEN, "cred": pc.cred, "args": args}))
    }

    /// One raw request with only a credential (no admin secret), as any label.
    pub fn call_with_cred(&self, pc: &str, cred: &str, op: &str, args: Value) -> Value {
        self.post(serde_json::json!({"v": 1, "op": op, "pc": pc, "cred": cred, "args": args}))
    }

    fn post(&self, body: Value) -> Value {
        let client = reqwest::blocking::Client::new();
        let resp = client.post(&self.url).json(&body).send().unwrap();
        resp.json().unwrap()
    }
}

pub struct Pc {
    pub label: String,
    pub home: tempfile::TempDir,
    pub server_url: String,
    /// This simulated installation's own credential (PCMAIL_CREDENTIAL: no keyring here).
    pub cred: String,
    /// Whether it holds the admin secret (the old shared token): PCs made by
    /// `new` do (they register the old way); PCs made by `enrolled` do not.
    pub admin: bool,
}

/// A fresh random credential, as a PC makes its own.
pub fn random_credential() -> String {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .expect("/dev/urandom");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Pc {
    pub fn new(server: &Server, label: &str) -> Pc {
        let (pc, out) = Pc::try_new(server, label);
        assert!(out.status.success(), "init: {}", String::from_utf8_lossy(&out.stderr));
        pc
    }

    /// A new installation running `init` (which registers and claims the label); its output.
    pub fn try_new(server: &Server, label: &str) -> (Pc, Output) {
        let home = tempfile::tempdir().unwrap();
        let pc =
            Pc { label: label.into(), home, server_url: server.url.clone(), cred: random_credential(), admin: true };
        let out = pc.run(&["init", "--label", label, "--server", &server.url]);
        (pc, out)
    }

    /// A PC enrolled the new way — `admin` makes a join code
    /// (`roster add`), the new PC exchanges it (`init --join`) for its own
    /// credential and never holds the admin secret.
    pub fn enrolled(server: &Server, admin: &Pc, label: &str) -> Pc {
        let code = admin.json(&["roster", "add", label])["code"].as_str().expect("a join code").to_string();
        let pc = Pc {
            label: label.into(),
            home: tempfile::tempdir().unwrap(),
            server_url: server.url.clone(),
            cred: random_credential(),
            admin: false,
        };
        pc.ok(&["init", "--join", &code, "--server", &server.url]);
        pc
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(exe());
        c.args(args)
            .env("PCMAIL_HOME", self.home.path())
            .env_remove("PCMAIL_ADMIN_TOKEN")
            .env("PCMAIL_CREDENTIAL", &self.cred)
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .stdin(Stdio::null());
        if self.admin {
            c.env("PCMAIL_TOKEN", TOKEN);
        } else {
            c.env_remove("PCMAIL_TOKEN");
        }
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    /// Runs and requires success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "pcmail {:?} exited {:?}\nstdout: {}\nstderr: {}",
            args,
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    pub fn json(&self, args: &[&str]) -> Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        serde_json::from_str(&self.ok(&a)).unwrap()
    }

    /// Sends and returns the first id.
    pub fn send(&self, args: &[&str]) -> String {
        let mut a = vec!["send"];
        a.extend_from_slice(args);
        let v = self.json(&a);
        v["ids"][0].as_str().unwrap().to_string()
    }

    /// Runs the hook as Claude Code would, returns additionalContext ("" for no output).
    pub fn hook(&self, session: &str, event: &str) -> String {
        use std::io::Write;
        let mut child =
            self.cmd(&["hook"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let input = serde_json::json!({"session_id": session, "hook_event_name": event, "cwd": "/tmp", "prompt": "hi"});
        child.stdin.take().unwrap().write_all(input.to_string().as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        assert!(out.stderr.is_empty(), "the hook wrote to stderr: {}", String::from_utf8_lossy(&out.stderr));
        let s = String::from_utf8(out.stdout).unwrap();
        if s.trim().is_empty() {
            return String::new();
        }
        let v: Value = serde_json::from_str(s.trim()).expect("hook prints one JSON object");
        assert_eq!(v["hookSpecificOutput"]["hookEventName"], event);
        v["hookSpecificOutput"]["additionalContext"].as_str().unwrap().to_string()
    }

    pub fn state_of(&self, id: &str) -> String {
        let v = self.json(&["status", id]);
        v[0]["state"].as_str().unwrap().to_string()
    }

    pub fn store(&self) -> PathBuf {
        self.home.path().join("store.db")
    }
}

/// Two registered PCs, `pc-a` and `pc-b`, that know each other.
pub fn pair(server: &Server) -> (Pc, Pc) {
    let a = Pc::new(server, "pc-a");
    let b = Pc::new(server, "pc-b");
    a.ok(&["sync"]);
    b.ok(&["sync"]);
    a.ok(&["roster"]);
    (a, b)
}

/// Every scenario runs against both servers; node is a test requirement
/// (scripts/install-deps.sh installs it), never silently skipped.
pub fn servers() -> Vec<Kind> {
    vec![Kind::Rust, Kind::Gas]
}
