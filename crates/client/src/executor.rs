//! The job executor's state: the jobs this process runs (shared with their
//! worker threads). The executor's work is `jobs`'; a `Client` that executes
//! jobs holds one of these.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The jobs this process runs: id → its cancel flag. Shared with the workers.
#[derive(Default, Clone)]
pub struct Executor {
    pub(crate) running: Arc<Mutex<HashMap<String, Arc<AtomicBool>>>>,
    /// Offered jobs held back this cycle (their subject is busy): the poller
    /// pauses briefly instead of long-polling on an answer that is never empty.
    pub(crate) held_back: Arc<AtomicBool>,
    /// Worker threads, joined by tests that need a run to finish.
    pub(crate) workers: Arc<Mutex<Vec<std::thread::JoinHandle<()>>>>,
    /// config.toml's mtime when `[jobs]` was last read: an edited whitelist
    /// is published by a running daemon at its next poll.
    pub(crate) config_mtime: Arc<Mutex<Option<std::time::SystemTime>>>,
}

impl Executor {
    pub fn running_ids(&self) -> Vec<String> {
        self.running.lock().map(|m| m.keys().cloned().collect()).unwrap_or_default()
    }
    pub(crate) fn is_running(&self, id: &str) -> bool {
        self.running.lock().map(|m| m.contains_key(id)).unwrap_or(false)
    }
    pub fn held_back(&self) -> bool {
        self.held_back.load(Ordering::Relaxed)
    }
    /// Waits for every worker started so far (tests).
    pub fn join_workers(&self) {
        let hs: Vec<_> = self.workers.lock().map(|mut w| w.drain(..).collect()).unwrap_or_default();
        for h in hs {
            let _ = h.join();
        }
    }
}
