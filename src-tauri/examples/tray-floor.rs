//! The floor for the tray app's idle memory: a bare Tauri 2 tray app (one
//! tray icon with a one-item menu, no window, no plugins, none of pcmail),
//! built with the app's settings:
//!
//!   cd src-tauri && nice cargo build --release --features tauri/custom-protocol --example tray-floor
//!
//! (`--features tauri/custom-protocol` is what `tauri build` passes for the
//! app). docs/tray.md "Idle memory" compares the app with it.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

use tauri::image::Image;
use tauri::menu::{Menu, MenuItem};
use tauri::tray::TrayIconBuilder;
use tauri::RunEvent;

fn main() {
    tauri::Builder::default()
        .setup(|app| {
            let quit = MenuItem::with_id(app, "quit", "Quit", true, None::<&str>)?;
            let menu = Menu::with_items(app, &[&quit])?;
            // a plain 64×64 icon, the size of the app's
            let rgba = [0x40u8, 0x80, 0xc0, 0xff].repeat(64 * 64);
            TrayIconBuilder::with_id("floor")
                .icon(Image::new_owned(rgba, 64, 64))
                .tooltip("floor")
                .menu(&menu)
                .on_menu_event(|app, e| {
                    if e.id().as_ref() == "quit" {
                        app.exit(0)
                    }
                })
                .build(app)?;
            // the same test-state handshake as the app, so the measuring script can wait for it
            if let Some(p) = std::env::var_os("PCMAIL_TRAY_TEST_STATE").filter(|p| !p.is_empty()) {
                let _ = std::fs::write(p, br#"{"title": "", "badge": "none", "tooltip": "floor"}"#);
            }
            Ok(())
        })
        .build(tauri::generate_context!())
        .expect("the floor app starts")
        .run(|_app, event| {
            if let RunEvent::ExitRequested { api, code, .. } = event {
                if code.is_none() {
                    api.prevent_exit();
                }
            }
        });
}
