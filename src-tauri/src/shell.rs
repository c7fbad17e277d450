//! `TrayUi` for Tauri: the tray icon/title/tooltip, native notifications
//! (the notification plugin), the window and its events. With
//! `PCMAIL_TRAY_TEST_STATE=<path>` every change is also written to that JSON
//! file, so the Xvfb smoke test can read what the tray shows.

use pcmail_tray::icon::{compose, SIZE};
use pcmail_tray::{Badge, Notification, TrayUi};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::{mpsc, Mutex};
use std::time::Duration;
use tauri::image::Image;
use tauri::{AppHandle, Emitter, Manager};


pub const TRAY_ID: &str = "main";

#[derive(Debug, Default, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TestState {
    pub title: String,
    /// when the title last changed (ms)
    pub title_at: i64,
    pub badge: String,
    pub tooltip: String,
    pub notified: Vec<String>,
    pub opened: Vec<String>,
    /// mail id → the notification server's id (to fake a click in the smoke test)
    pub server_ids: std::collections::BTreeMap<String, u32>,
    pub changed: i64,
    pub updated_at: i64,
}

pub struct TauriUi {
    app: AppHandle,
    test_path: Option<PathBuf>,
    test: Mutex<TestState>,
}

impl TauriUi {
    pub fn new(app: AppHandle) -> TauriUi {
        let test_path = std::env::var_os("PCMAIL_TRAY_TEST_STATE").filter(|p| !p.is_empty()).map(PathBuf::from);
        TauriUi { app, test_path, test: Mutex::new(TestState::default()) }
    }

    fn record(&self, f: impl FnOnce(&mut TestState)) {
        let Some(path) = &self.test_path else { return };
        let mut st = self.test.lock().unwrap();
        f(&mut st);
        st.updated_at = pcmail_client::system_now();
        let tmp = path.with_extension("tmp");
        if std::fs::write(&tmp, serde_json::to_vec_pretty(&*st).unwrap()).is_ok() {
            let _ = std::fs::rename(&tmp, path);
        }
    }

    pub fn show_main(&self) {
        show_window(&self.app);
    }
}

/// Shows the window, creating it first when it is not there: the webview (and
/// its WebKit processes) only exists while the window is open, so the app
/// idles as a tray icon alone. `open` is a mail to open once the page loads.
pub fn show_window(app: &AppHandle) {
    show_window_at(app, None);
}

fn show_window_at(app: &AppHandle, open: Option<&str>) -> bool {
    if let Some(w) = app.get_webview_window("main") {
        let _ = w.unminimize();
        let _ = w.show();
        let _ = w.set_focus();
        return true;
    }
    let Some(mut cfg) = app.config().app.windows.iter().find(|w| w.label == "main").cloned() else { return false };
    if let Some(id) = open.filter(|id| pcmail_core::ids::is_valid_any_id(id)) {
        cfg.url = tauri::WebviewUrl::App(format!("index.html#open={id}").into());
    }
    // Built off the event-loop thread (building from a menu handler on the
    // main thread can deadlock on Windows).
    let app = app.clone();
    std::thread::spawn(move || match tauri::WebviewWindowBuilder::from_config(&app, &cfg).and_then(|b| b.build()) {
        Ok(w) => {
            let _ = w.set_focus();
        }
        Err(e) => tracing::warn!("cannot open the window: {e}"),
    });
    false
}

/// Linux (freedesktop notifications): with a default action, and a thread that
/// waits for it, so a click opens that mail (the controller decides what a
/// click does). Elsewhere the notification plugin, which reports no clicks
/// on desktop.
#[cfg(all(unix, not(target_os = "macos")))]
fn show_notification(app: &AppHandle, n: &Notification) -> Result<Option<u32>, String> {
    let handle = notify_rust::Notification::new()
        .appname("pcmail")
        .summary(&n.title)
        .body(&n.body)
        .action("default", "Open")
        .show()
        .map_err(|e| e.to_string())?;
    let (app, id) = (app.clone(), n.id.clone());
    let server_id = handle.id();
    std::thread::spawn(move || {
        handle.wait_for_action(|action| {
            if action == "default" {
                if let Some(st) = app.try_state::<std::sync::Arc<crate::state::AppState>>() {
                    st.controller.lock().unwrap().notification_clicked(&st.ui, &id);
                }
            }
        })
    });
    Ok(Some(server_id))
}

#[cfg(not(all(unix, not(target_os = "macos"))))]
fn show_notification(app: &AppHandle, n: &Notification) -> Result<Option<u32>, String> {
    use tauri_plugin_notification::NotificationExt;
    app.notification().builder().title(&n.title).body(&n.body).show().map(|_| None).map_err(|e| e.to_string())
}

impl TrayUi for TauriUi {
    fn set_title(&self, title: &str) {
        if let Some(tray) = self.app.tray_by_id(TRAY_ID) {
            let _ = tray.set_title(if title.is_empty() { None } else { Some(title) });
        }
        tracing::info!(target: "pcmail_tray::tray", "tray title {:?}", title);
        self.record(|s| {
            s.title = title.to_string();
            s.title_at = pcmail_client::system_now();
        });
    }

    fn set_badge(&self, badge: &Badge) {
        if let Some(tray) = self.app.tray_by_id(TRAY_ID) {
            let _ = tray.set_icon(Some(Image::new_owned(compose(badge), SIZE, SIZE)));
        }
        self.record(|s| s.badge = badge.name().to_string());
    }

    fn set_tooltip(&self, text: &str) {
        if let Some(tray) = self.app.tray_by_id(TRAY_ID) {
            let _ = tray.set_tooltip(Some(text));
        }
        self.record(|s| s.tooltip = text.to_string());
    }

    /// The plugin's `show()` can block on a slow notification daemon: it runs on
    /// its own thread and we wait at most `timeout` for it.
    fn notify(&self, n: &Notification, timeout: Duration) -> Result<(), String> {
        let (tx, rx) = mpsc::channel();
        let app = self.app.clone();
        let n2 = n.clone();
        std::thread::spawn(move || {
            let _ = tx.send(show_notification(&app, &n2));
        });
        let r = match rx.recv_timeout(timeout) {
            Ok(r) => r,
            Err(_) => Err(format!("no answer within {} ms", timeout.as_millis())),
        };
        let id = n.id.clone();
        let server_id = r.as_ref().ok().copied().flatten();
        self.record(|s| {
            if let Some(sid) = server_id {
                s.server_ids.insert(id.clone(), sid);
            }
            s.notified.push(id)
        });
        r.map(|_| ())
    }

    fn show_window(&self) {
        show_window(&self.app);
    }

    fn open_mail(&self, id: &str) {
        // an open window gets the event; a new one opens the mail from its URL
        if show_window_at(&self.app, Some(id)) {
            let _ = self.app.emit("open-mail", serde_json::json!({ "id": id }));
        }
        let id = id.to_string();
        self.record(|s| s.opened.push(id));
    }

    fn changed(&self, version: i64) {
        let _ = self.app.emit("changed", serde_json::json!({ "version": version }));
        self.record(|s| s.changed = version);
    }
}
