//! What the client's tests share: a PC on an embedded server file, a
//! `pcmail serve` at a given address, and a server that answers from a
//! script and records every request (with a PC that talks to it).
#![allow(dead_code)] // each test file uses its part

use pcmail_client::transport::{CallError, Embedded, Transport};
use pcmail_client::Client;
use pcmail_core::protocol::Op;
use pcmail_core::Millis;
use pcmail_local::config::{Config, Paths, ServerConfig};
use pcmail_testkit::Loopback;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

/// The test's clock: it moves only when the test moves it.
pub static NOW: AtomicI64 = AtomicI64::new(1_800_000_000_000);

pub fn clock() -> Millis {
    NOW.load(Ordering::SeqCst)
}

/// Moves the clock on by `ms` and answers the new time.
pub fn advance(ms: Millis) -> Millis {
    NOW.fetch_add(ms, Ordering::SeqCst) + ms
}

/// A PC (no desktop notifications) whose PCMAIL_HOME is `home`, on the
/// server engine in `db`, with the test's clock.
pub fn embedded_pc(home: &Path, db: &Path, label: &str, clock: fn() -> Millis) -> Client {
    let config = Config {
        native_notifications: false,
        ..Config::new(label, ServerConfig::Embedded { db: Some(db.to_path_buf()) })
    };
    let t = Embedded::open(db, label, clock).unwrap();
    Client::with(Paths::at(home), config, Box::new(t), clock).unwrap()
}

/// A PC's config with desktop notifications off and a server address that
/// nothing answers at: for a client whose transport the test hands in.
pub fn offline_config(label: &str) -> Config {
    Config {
        native_notifications: false,
        ..Config::new(label, ServerConfig::Http { url: "http://127.0.0.1:9/api".into() })
    }
}

/// A PC whose PCMAIL_HOME is `home`, talking to the scripted server `t`
/// (a clone: the test keeps `t` to script answers and read the calls),
/// with the test's clock.
pub fn scripted_pc(home: &Path, label: &str, t: &Scripted) -> Client {
    Client::with(Paths::at(home), offline_config(label), Box::new(t.clone()), clock).unwrap()
}

/// `pcmail serve` at `addr` with the admin secret `token` and its database
/// at `db`, on a runtime of `workers` threads of its own (the tests block);
/// stopped when dropped.
pub fn serve_at(addr: SocketAddr, db: &Path, token: &str, workers: usize) -> Loopback {
    let opts = pcmail_server::ServeOptions::new(db, token);
    Loopback::on_thread(addr, workers, move |_, listener, stopped| {
        pcmail_server::serve_with_listener(listener, opts, stopped)
    })
}

/// A PC whose PCMAIL_HOME is `root/label`, talking HTTP to `pcmail serve`
/// at `url`, put on the roster by the admin first (as `pcmail roster add`
/// does; `token` is the admin secret and the PCs' shared token), with the
/// system clock and no desktop notifications.
pub fn served_pc(root: &Path, url: &str, token: &str, label: &str) -> Client {
    let t = pcmail_client::transport::Http::new(url, Some(token), label, true).unwrap();
    let op = Op::RosterSet { label: label.into(), hostname: label.into(), number: None, claim: false, replace: false };
    t.call(&op).unwrap();
    let paths = Paths::at(root.join(label));
    std::fs::create_dir_all(&paths.home).unwrap();
    let config = Config { native_notifications: false, ..Config::new(label, ServerConfig::Http { url: url.into() }) };
    config.save(&paths).unwrap();
    Client::with(paths, config, Box::new(t), pcmail_local::system_now).unwrap()
}

/// Two PCs, `pc-a` and `pc-b`, on one embedded server file, each made and
/// polled once in turn (so both are on the roster), with `clock`.
pub struct Two {
    /// Holds the PCs' homes (`a`, `b`) and the server file.
    pub dir: tempfile::TempDir,
    pub db: PathBuf,
    pub a: Client,
    pub b: Client,
}

pub fn two_pcs(clock: fn() -> Millis) -> Two {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("server.db");
    let mut a = embedded_pc(&dir.path().join("a"), &db, "pc-a", clock);
    a.sync_once(0).unwrap();
    let mut b = embedded_pc(&dir.path().join("b"), &db, "pc-b", clock);
    b.sync_once(0).unwrap();
    Two { dir, db, a, b }
}

pub type Answer = Box<dyn FnMut(&Op) -> Result<Value, CallError> + Send>;

#[derive(Clone, Default)]
pub struct Scripted {
    pub calls: Arc<Mutex<Vec<Op>>>,
    pub answer: Arc<Mutex<Option<Answer>>>,
    /// What `describe` says (the client prints it in errors).
    pub name: &'static str,
}

impl Transport for Scripted {
    fn call(&self, op: &Op) -> Result<Value, CallError> {
        self.calls.lock().unwrap().push(op.clone());
        (self.answer.lock().unwrap().as_mut().expect("the test set no answer"))(op)
    }
    fn long_poll(&self) -> bool {
        false
    }
    fn describe(&self) -> String {
        self.name.into()
    }
}
