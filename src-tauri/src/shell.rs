//! `TrayUi` for Tauri: the tray icon/title/tooltip, native notifications
//! (the notification plugin), the window and its events. With
//! `PCMAIL_TRAY_TEST_STATE=<path>` every change is also written to that JSON
//! file, so the Xvfb smoke test can read what the tray shows.

use pcmail_tray::icon::{compose, SIZE};
use pcmail_tray::{menu_item_id, Badge, Lang, MenuDecision, NoteAction, TrayNotification, TrayUi};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::{mpsc, Mutex};
use std::time::Duration;
use tauri::image::Image;
use tauri::menu::{IsMenuItem, Menu, MenuItem, MenuItemKind, PredefinedMenuItem, Submenu};
use tauri::{AppHandle, Emitter, Manager, Wry};

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
    /// mail id → the buttons its notification carried
    pub actions: std::collections::BTreeMap<String, Vec<String>>,
    /// mail id → the notification's title and its buttons' labels (the user's language)
    pub shown: std::collections::BTreeMap<String, Vec<String>>,
    /// `<key>:<id> → <outcome>` for every notification button / menu item used
    pub acted: Vec<String>,
    /// the open decision requests the tray menu lists
    pub menu: Vec<MenuDecision>,
    pub changed: i64,
    pub updated_at: i64,
}

pub struct TauriUi {
    app: AppHandle,
    test_path: Option<PathBuf>,
    test: Mutex<TestState>,
    /// The tray menu, and the decision requests' items at its top (replaced
    /// when the list changes; the fixed items below stay).
    menu: Mutex<Option<Menu<Wry>>>,
    decision_items: Mutex<Vec<MenuItemKind<Wry>>>,
    /// The language of the menu's decision items.
    lang: Lang,
}

impl TauriUi {
    pub fn new(app: AppHandle, lang: Lang) -> TauriUi {
        let test_path = std::env::var_os("PCMAIL_TRAY_TEST_STATE").filter(|p| !p.is_empty()).map(PathBuf::from);
        TauriUi {
            app,
            test_path,
            test: Mutex::new(TestState::default()),
            menu: Mutex::new(None),
            decision_items: Mutex::new(vec![]),
            lang,
        }
    }

    /// The tray menu, once built (the decision requests go at its top).
    pub fn set_menu(&self, menu: Menu<Wry>) {
        *self.menu.lock().unwrap() = Some(menu);
    }

    /// A notification button or a decision's menu item was used (key `open`,
    /// `ack`, `reply`, `default`, `__closed`): the controller decides. Called
    /// off the event-loop thread (an ack may wait for the server).
    pub fn act(&self, st: &crate::state::AppState, id: &str, key: &str) {
        let outcome = st.controller.lock().unwrap().notification_action(self, &st.remote, id, key);
        match &outcome {
            Ok(o) => tracing::info!("{key} on {id}: {o:?}"),
            Err(e) => tracing::warn!("{key} on {id}: {e}"),
        }
        st.refresh_now.store(true, std::sync::atomic::Ordering::Relaxed);
        let line = format!(
            "{key}:{id}:{}",
            match outcome {
                Ok(o) => format!("{o:?}"),
                Err(e) => format!("error {}", e.code()),
            }
        );
        self.record(|s| s.acted.push(line));
    }

    fn record(&self, f: impl FnOnce(&mut TestState)) {
        let Some(path) = &self.test_path else { return };
        let mut st = self.test.lock().unwrap();
        f(&mut st);
        st.updated_at = pcmail_local::system_now();
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

/// Linux (freedesktop notifications): a default action (a click on the
/// notification) plus the mail's buttons (Open, Ack, Reply…), and a thread
/// that waits for the one used; the controller decides what it does. A
/// notification server without actions shows the text and ignores the
/// buttons. Elsewhere the notification plugin, which on desktop takes no
/// buttons and reports no clicks: the text only (the tray menu has Open and
/// Ack for decision requests).
#[cfg(all(unix, not(target_os = "macos")))]
fn show_notification(app: &AppHandle, n: &TrayNotification) -> Result<Option<u32>, String> {
    let mut note = notify_rust::Notification::new();
    note.appname("pcmail").summary(&n.title).body(&n.body).action("default", NoteAction::Open.label_in(n.lang));
    for (key, label) in n.buttons() {
        note.action(key, label);
    }
    let handle = note.show().map_err(|e| e.to_string())?;
    let (app, id) = (app.clone(), n.id.clone());
    let server_id = handle.id();
    std::thread::spawn(move || {
        handle.wait_for_action(|key| {
            if let Some(st) = app.try_state::<std::sync::Arc<crate::state::AppState>>() {
                st.ui.act(&st, &id, key);
            }
        })
    });
    Ok(Some(server_id))
}

#[cfg(not(all(unix, not(target_os = "macos"))))]
fn show_notification(app: &AppHandle, n: &TrayNotification) -> Result<Option<u32>, String> {
    use tauri_plugin_notification::NotificationExt;
    app.notification().builder().title(&n.title).body(&n.body).show().map(|_| None).map_err(|e| e.to_string())
}

/// The decision requests' part of the tray menu: a heading, one submenu per
/// request (its subject and sender) with Open and Ack, a separator.
fn decision_items(app: &AppHandle, decisions: &[MenuDecision], lang: Lang) -> tauri::Result<Vec<MenuItemKind<Wry>>> {
    let mut items: Vec<MenuItemKind<Wry>> = vec![];
    if decisions.is_empty() {
        return Ok(items);
    }
    let heading = match lang {
        Lang::En => format!("Decision requests ({})", decisions.len()),
        Lang::Ja => format!("判断依頼 ({})", decisions.len()),
    };
    items.push(MenuItem::with_id(app, "decisions", heading, false, None::<&str>)?.kind());
    for d in decisions {
        let open = MenuItem::with_id(
            app,
            menu_item_id(NoteAction::Open, &d.id),
            NoteAction::Open.label_in(lang),
            true,
            None::<&str>,
        )?;
        let ack = MenuItem::with_id(
            app,
            menu_item_id(NoteAction::Ack, &d.id),
            NoteAction::Ack.label_in(lang),
            true,
            None::<&str>,
        )?;
        // GTK reads "_" as a mnemonic marker: double it so the subject shows as sent
        items.push(Submenu::with_items(app, d.label.replace('_', "__"), true, &[&open, &ack])?.kind());
    }
    items.push(PredefinedMenuItem::separator(app)?.kind());
    Ok(items)
}

impl TrayUi for TauriUi {
    fn set_title(&self, title: &str) {
        if let Some(tray) = self.app.tray_by_id(TRAY_ID) {
            let _ = tray.set_title(if title.is_empty() { None } else { Some(title) });
        }
        tracing::info!(target: "pcmail_tray::tray", "tray title {:?}", title);
        self.record(|s| {
            s.title = title.to_string();
            s.title_at = pcmail_local::system_now();
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
    fn notify(&self, n: &TrayNotification, timeout: Duration) -> Result<(), String> {
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
        let actions: Vec<String> = n.actions.iter().map(|a| a.key().to_string()).collect();
        let mut shown = vec![n.title.clone()];
        shown.extend(n.buttons().into_iter().map(|(_, label)| label.to_string()));
        self.record(|s| {
            s.shown.insert(id.clone(), shown);
            if let Some(sid) = server_id {
                s.server_ids.insert(id.clone(), sid);
            }
            s.actions.insert(id.clone(), actions);
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

    fn set_decisions(&self, decisions: &[MenuDecision]) {
        if let Some(menu) = self.menu.lock().unwrap().as_ref() {
            let mut old = self.decision_items.lock().unwrap();
            for item in old.drain(..) {
                let _ = menu.remove(&item);
            }
            match decision_items(&self.app, decisions, self.lang) {
                Ok(items) => {
                    for (i, item) in items.iter().enumerate() {
                        if let Err(e) = menu.insert(item, i) {
                            tracing::warn!("tray menu: {e}");
                        }
                    }
                    *old = items;
                }
                Err(e) => tracing::warn!("tray menu: {e}"),
            }
        }
        let list = decisions.to_vec();
        self.record(|s| s.menu = list);
    }
}
