//! What the client's tests share: a PC on an embedded server file, and a
//! server that answers from a script and records every request.
#![allow(dead_code)] // each test file uses its part

use pcmail_client::transport::{CallError, Embedded, Transport};
use pcmail_client::Client;
use pcmail_core::protocol::Op;
use pcmail_core::Millis;
use pcmail_local::config::{Config, Paths, ServerConfig};
use serde_json::Value;
use std::path::Path;
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
