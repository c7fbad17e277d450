//! pcmail tray app (Tauri 2). The shell only: tray icon + menu, the window,
//! the commands, the plugins. The decisions live in `pcmail-tray`'s
//! controller; the poll cycle, config and token in `pcmail-client`; the data
//! in `pcmail-store`.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

mod autostart;
mod commands;
mod poller;
mod shell;
mod state;

use pcmail_local::config::{Config, Paths};
use pcmail_store::Store;
use pcmail_tray::icon::{compose, SIZE};
use pcmail_tray::{Badge, Controller};
use shell::{TauriUi, TRAY_ID};
use state::AppState;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use tauri::image::Image;
use tauri::menu::{CheckMenuItem, Menu, MenuItem, PredefinedMenuItem};
use tauri::tray::TrayIconBuilder;
use tauri::{Manager, RunEvent};

/// The pause between the app's cycles: the config's interval; 0 for a
/// long-poll server (`pcmail serve`), where the held poll is the wait and the
/// next one starts as soon as it returns.
pub fn interval_ms(cfg: &Config) -> i64 {
    cfg.poll_interval().as_millis() as i64
}

pub fn set_paused(st: &AppState, paused: bool) {
    st.controller.lock().unwrap().set_paused(paused);
    if let Some(item) = st.pause_item.lock().unwrap().as_ref() {
        let _ = item.set_checked(paused);
    }
    st.refresh_now.store(true, Ordering::Relaxed);
}

/// "Open": the window, or straight to the one decision/urgent mail waiting.
fn open_action(st: &AppState) {
    let now = pcmail_local::system_now();
    if let Err(e) = st.controller.lock().unwrap().open_clicked(&st.ui, now) {
        tracing::warn!("open: {e}");
        st.ui.show_main();
    }
}

fn main() {
    // A log line that cannot be written (the terminal the app was started
    // from is closed) is dropped: the subscriber's own report of that failure
    // is an `eprintln!`, which panics on the same stderr in whichever thread
    // logged, the poller's included.
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("PCMAIL_LOG").unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .log_internal_errors(false)
        .init();

    let paths = Paths::from_env().expect("a home directory for pcmail (set PCMAIL_HOME)");
    let cfg = Config::load(&paths).unwrap_or_else(|e| {
        tracing::warn!("config: {e}; using this PC's defaults");
        Config::default_for_this_pc()
    });

    let builder = tauri::Builder::default()
        // first: a second start is the tray's "Open" in the running app
        .plugin(tauri_plugin_single_instance::init(|app, _args, _cwd| match app.try_state::<Arc<AppState>>() {
            Some(st) => open_action(&st),
            None => shell::show_window(app),
        }))
        .plugin(tauri_plugin_notification::init());
    // Start at login: Linux writes its XDG entry itself (autostart.rs)
    #[cfg(not(target_os = "linux"))]
    let builder =
        builder.plugin(tauri_plugin_autostart::init(tauri_plugin_autostart::MacosLauncher::LaunchAgent, None));
    builder
        .invoke_handler(tauri::generate_handler![
            commands::get_state,
            commands::list_inbox,
            commands::open_mail,
            commands::ack,
            commands::reply,
            commands::list_sent,
            commands::get_sent,
            commands::list_alerts,
            commands::list_leases,
            commands::release_lease,
            commands::list_sessions,
            commands::list_jobs,
            commands::cancel_job,
            commands::poll_now,
            commands::set_paused,
            commands::get_settings,
            commands::save_settings,
        ])
        .setup(move |app| {
            let store = Store::open(&paths.store())?;
            let mut controller = Controller::new(store, cfg.label.clone(), interval_ms(&cfg));
            // kind badges and notification buttons in the user's language (LANG / LC_MESSAGES)
            let lang = pcmail_local::config::user_lang();
            controller.set_lang(lang);
            let (poke_tx, poke_rx) = mpsc::channel();
            let st = Arc::new(AppState {
                paths: paths.clone(),
                controller: Mutex::new(controller),
                ui: TauriUi::new(app.handle().clone(), lang),
                remote: pcmail_tray::ClientRemote::new(paths.clone()),
                poke: Mutex::new(poke_tx),
                interval_ms: AtomicI64::new(interval_ms(&cfg)),
                reload: AtomicBool::new(false),
                refresh_now: AtomicBool::new(true),
                quit: AtomicBool::new(false),
                pause_item: Mutex::new(None),
            });
            app.manage(st.clone());

            // Linux trays deliver no clicks: everything is in the menu.
            let open = MenuItem::with_id(app, "open", "Open", true, None::<&str>)?;
            let poll = MenuItem::with_id(app, "poll", "Poll now", true, None::<&str>)?;
            let pause = CheckMenuItem::with_id(app, "pause", "Pause notifications", true, false, None::<&str>)?;
            let quit = MenuItem::with_id(app, "quit", "Quit", true, None::<&str>)?;
            let menu = Menu::with_items(
                app,
                &[
                    &open,
                    &poll,
                    &PredefinedMenuItem::separator(app)?,
                    &pause,
                    &PredefinedMenuItem::separator(app)?,
                    &quit,
                ],
            )?;
            *st.pause_item.lock().unwrap() = Some(pause.clone());
            st.ui.set_menu(menu.clone());
            let st_menu = st.clone();
            TrayIconBuilder::with_id(TRAY_ID)
                .icon(Image::new_owned(compose(&Badge::None), SIZE, SIZE))
                .tooltip("pcmail")
                .menu(&menu)
                .show_menu_on_left_click(true)
                .on_menu_event(move |app, event| match event.id().as_ref() {
                    "open" => open_action(&st_menu),
                    "poll" => {
                        st_menu.poke();
                        st_menu.refresh_now.store(true, Ordering::Relaxed);
                    }
                    "pause" => {
                        let now_paused = !st_menu.controller.lock().unwrap().paused();
                        set_paused(&st_menu, now_paused);
                    }
                    "quit" => {
                        st_menu.quit.store(true, Ordering::Relaxed);
                        app.exit(0);
                    }
                    // Open / Ack under a decision request: off the event loop (an ack waits for the server)
                    item => {
                        if let Some((action, id)) = pcmail_tray::parse_menu_item_id(item) {
                            let (st, id) = (st_menu.clone(), id.to_string());
                            std::thread::spawn(move || st.ui.act(&st, &id, action.key()));
                        }
                    }
                })
                .build(app)?;

            autostart::apply_at_start(app.handle(), &paths);
            let st_w = st.clone();
            std::thread::Builder::new().name("pcmail-watch".into()).spawn(move || poller::watch(st_w))?;
            let st_p = st.clone();
            std::thread::Builder::new().name("pcmail-poller".into()).spawn(move || poller::run(st_p, poke_rx))?;
            tracing::info!(
                "pcmail tray for {:?} ({}), store {}",
                cfg.label,
                cfg.server.describe(),
                paths.store().display()
            );
            Ok(())
        })
        .build(tauri::generate_context!())
        .expect("the tray app starts")
        .run(|_app, event| {
            if let RunEvent::ExitRequested { api, code, .. } = event {
                // closing the window destroys it (and its WebKit processes);
                // no window left is not a reason to quit: the menu's Quit is
                if code.is_none() {
                    api.prevent_exit();
                }
            }
        });
}
