//! End-to-end harness: real `pcmail` processes, each PC its own data
//! directory, against a real server on loopback (`pcmail serve`, or the Apps
//! Script code behind its Node WebApp front).
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

pub const TOKEN: &str = "e2e-token-0123456789";

/// The `pcmail` under test: cargo's, or a copy named by `PCMAIL_TEST_EXE`
/// (or `PCMAIL_TEST_BIN`, the name the cluster tests read before they shared
/// this harness), taken right after the build where several worktrees share
/// one target folder and its `debug/pcmail`.
pub fn exe() -> PathBuf {
    ["PCMAIL_TEST_EXE", "PCMAIL_TEST_BIN"]
        .iter()
        .find_map(|v| std::env::var_os(v).filter(|p| !p.is_empty()))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_pcmail")))
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// A server process (or a proxy in front of one) and the URL it is reached
/// at. It is killed and reaped when dropped, so it never outlives its test,
/// even one that panics.
pub struct Process {
    pub child: Child,
    pub url: String,
}

impl Process {
    /// Spawns `cmd` (its stdout piped) and waits up to `within` for the line
    /// that says where it listens, handing every line before it to `each`.
    /// None when the process exits first.
    pub fn try_listening(cmd: &mut Command, within: Duration, each: impl FnMut(&str)) -> Option<Process> {
        let mut p = Process { child: cmd.spawn().expect("start the server"), url: String::new() };
        p.url = pcmail_testkit::listening_url(&mut p.child, within, each)?;
        Some(p)
    }

    /// The same, requiring that it says where it listens.
    pub fn listening(cmd: &mut Command, within: Duration) -> Process {
        Process::try_listening(cmd, within, |_| {}).expect("the server exited before saying where it listens")
    }

    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// `pcmail serve` with the admin secret and `home` as its PCMAIL_HOME, its
/// stdout piped for [`Process::listening`] and its stderr dropped; the
/// caller adds where it listens and its database.
pub fn serve_command(home: &Path) -> Command {
    let mut c = Command::new(exe());
    c.arg("serve").env("PCMAIL_TOKEN", TOKEN).env("PCMAIL_HOME", home).stdout(Stdio::piped()).stderr(Stdio::null());
    c
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Rust,
    Gas,
}

pub struct Server {
    pub kind: Kind,
    pub url: String,
    _process: Process,
    _dir: tempfile::TempDir,
}

impl Server {
    pub fn start(kind: Kind) -> Server {
        Server::start_with_env(kind, &[])
    }

    /// `pcmail serve` with more environment (libfaketime's, to move the
    /// server's clock while it runs).
    pub fn start_with_env(kind: Kind, envs: &[(&str, &str)]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = match kind {
            Kind::Rust => {
                let mut c = serve_command(dir.path());
                c.args(["--listen", "127.0.0.1:0", "--db"]).arg(dir.path().join("serve.db")).envs(envs.iter().copied());
                c
            }
            Kind::Gas => {
                let mut c = Command::new("node");
                c.arg(repo_root().join("gas/dev-server.js"))
                    .args(["--port", &pcmail_testkit::free_port().to_string(), "--token", TOKEN, "--db-file"])
                    .arg(dir.path().join("sheet.json"))
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null());
                c
            }
        };
        let process = Process::listening(&mut cmd, Duration::from_secs(20));
        Server { kind, url: process.url.clone(), _process: process, _dir: dir }
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

    /// Makes the Apps Script dev server misbehave on every request from now
    /// on, in the way `mode` names (`throw`, `timeout`, `lost`: the request
    /// is carried out and its answer lost; `off`: back to normal).
    pub fn fault(&self, mode: &str) {
        assert_eq!(self.kind, Kind::Gas, "only the Apps Script dev server has faults");
        let url = self.url.replace("/exec", "/__fault");
        let r = reqwest::blocking::Client::new()
            .post(url)
            .body(format!("{{\"mode\":\"{mode}\",\"every\":1}}"))
            .send()
            .unwrap();
        assert!(r.status().is_success());
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
    /// A new installation, not set up yet: a home of its own and a fresh
    /// credential. `admin`: whether it holds the admin secret.
    pub fn blank(label: &str, server_url: &str, admin: bool) -> Pc {
        Pc {
            label: label.into(),
            home: tempfile::tempdir().unwrap(),
            server_url: server_url.into(),
            cred: random_credential(),
            admin,
        }
    }

    pub fn new(server: &Server, label: &str) -> Pc {
        let (pc, out) = Pc::try_new(server, label);
        assert!(out.status.success(), "init: {}", String::from_utf8_lossy(&out.stderr));
        pc
    }

    /// A new installation running `init` (which registers and claims the label); its output.
    pub fn try_new(server: &Server, label: &str) -> (Pc, Output) {
        let pc = Pc::blank(label, &server.url, true);
        let out = pc.run(&["init", "--label", label, "--server", &server.url]);
        (pc, out)
    }

    /// A PC enrolled the new way — `admin` makes a join code
    /// (`roster add`), the new PC exchanges it (`init --join`) for its own
    /// credential and never holds the admin secret.
    pub fn enrolled(server: &Server, admin: &Pc, label: &str) -> Pc {
        Pc::joined(admin, label, &server.url)
    }

    /// The same, joining at `url` (a server this harness did not start).
    pub fn joined(admin: &Pc, label: &str, url: &str) -> Pc {
        let code = admin.json(&["roster", "add", label])["code"].as_str().expect("a join code").to_string();
        let pc = Pc::blank(label, url, false);
        pc.ok(&["init", "--join", &code, "--server", url]);
        pc
    }

    /// A PC on the embedded server file `db` (no `pcmail serve`), set up
    /// with `init` and holding the admin secret.
    pub fn embedded(db: &Path, label: &str) -> Pc {
        let pc = Pc::blank(label, "", true);
        pc.ok(&["init", "--label", label, "--embedded-db", db.to_str().unwrap()]);
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

/// A command's stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// PCs set up on `server` in the order given, then each synced once in the
/// same order: all are on the roster, and each has seen those made before it.
pub fn synced<const N: usize>(server: &Server, labels: [&str; N]) -> [Pc; N] {
    let pcs = labels.map(|label| Pc::new(server, label));
    for pc in &pcs {
        pc.ok(&["sync"]);
    }
    pcs
}

/// Two registered PCs, `pc-a` and `pc-b`, that know each other.
pub fn pair(server: &Server) -> (Pc, Pc) {
    let [a, b] = synced(server, ["pc-a", "pc-b"]);
    a.ok(&["roster"]);
    (a, b)
}

/// Two PCs, `pc-a` and `pc-b`, on the embedded server file `db`, each synced
/// after its `init` and `pc-a` once more, so that each knows the other.
pub fn embedded_pair(db: &Path) -> (Pc, Pc) {
    let mk = |label: &str| {
        let pc = Pc::embedded(db, label);
        pc.ok(&["sync"]);
        pc
    };
    let pair = (mk("pc-a"), mk("pc-b"));
    pair.0.ok(&["sync"]);
    pair
}

/// Every scenario runs against both servers; node is a test requirement
/// (scripts/install-deps.sh installs it), never silently skipped.
pub fn servers() -> Vec<Kind> {
    vec![Kind::Rust, Kind::Gas]
}

/// libfaketime (Debian's `faketime` package), preloaded into a process to move its clock.
pub const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";
