//! What the app shares between the tray, the commands and its two threads.

use crate::shell::TauriUi;
use pcmail_local::config::Paths;
use pcmail_tray::{ClientRemote, Controller};
use std::sync::atomic::{AtomicBool, AtomicI64};
use std::sync::mpsc::Sender;
use std::sync::Mutex;

pub struct AppState {
    pub paths: Paths,
    pub controller: Mutex<Controller>,
    pub ui: TauriUi,
    pub remote: ClientRemote,
    pub poke: Mutex<Sender<()>>,
    pub interval_ms: AtomicI64,
    pub reload: AtomicBool,
    pub refresh_now: AtomicBool,
    pub quit: AtomicBool,
    pub pause_item: Mutex<Option<tauri::menu::CheckMenuItem<tauri::Wry>>>,
}

impl AppState {
    pub fn poke(&self) {
        let _ = self.poke.lock().unwrap().send(());
    }
}
