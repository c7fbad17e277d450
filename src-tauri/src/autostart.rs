//! Start at login: on at the first run, then as the user chose (Settings).
//! The decision and the XDG entry are `pcmail_tray::autostart`'s; the one
//! platform function is [`set_enabled`] (and its reader [`is_enabled`]).

use pcmail_local::config::Paths;
use pcmail_tray::autostart::{at_start, AtStart, TraySettings};
use tauri::AppHandle;

#[cfg(target_os = "linux")]
fn xdg_dir() -> Result<std::path::PathBuf, String> {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    pcmail_tray::autostart::xdg_autostart_dir(std::env::var("XDG_CONFIG_HOME").ok().as_deref(), home.as_deref())
        .ok_or_else(|| "no home directory for ~/.config/autostart".to_string())
}

/// Linux: the XDG autostart entry for this binary (with `PCMAIL_HOME` when
/// one was given: the entry must start the app for the same PC user).
#[cfg(target_os = "linux")]
pub fn set_enabled(_app: &AppHandle, on: bool) -> Result<(), String> {
    let dir = xdg_dir()?;
    if on {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let home = std::env::var_os("PCMAIL_HOME").filter(|h| !h.is_empty()).map(std::path::PathBuf::from);
        pcmail_tray::autostart::xdg_enable(&dir, &exe, home.as_deref()).map(|_| ()).map_err(|e| e.to_string())
    } else {
        pcmail_tray::autostart::xdg_disable(&dir).map_err(|e| e.to_string())
    }
}

#[cfg(target_os = "linux")]
pub fn is_enabled(_app: &AppHandle) -> bool {
    xdg_dir().is_ok_and(|d| pcmail_tray::autostart::xdg_is_enabled(&d))
}

/// Windows (the registry's Run key) and macOS (a LaunchAgent): the plugin.
#[cfg(not(target_os = "linux"))]
pub fn set_enabled(app: &AppHandle, on: bool) -> Result<(), String> {
    use tauri_plugin_autostart::ManagerExt;
    let al = app.autolaunch();
    if on { al.enable() } else { al.disable() }.map_err(|e| e.to_string())
}

#[cfg(not(target_os = "linux"))]
pub fn is_enabled(app: &AppHandle) -> bool {
    use tauri_plugin_autostart::ManagerExt;
    app.autolaunch().is_enabled().unwrap_or(false)
}

/// At every start: the first run turns start-at-login on and remembers it;
/// later runs keep the user's choice (re-pointing the entry at this binary).
pub fn apply_at_start(app: &AppHandle, paths: &Paths) {
    let settings = match TraySettings::load(&paths.home) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("tray settings: {e}; start at login left as it is");
            return;
        }
    };
    let on = match at_start(&settings) {
        AtStart::EnableFirstRun => {
            if let Err(e) = (TraySettings { autostart: Some(true) }).save(&paths.home) {
                tracing::warn!("tray settings: {e}");
            }
            tracing::info!("first run: start at login turned on (Settings turns it off)");
            true
        }
        AtStart::Keep(on) => on,
    };
    if let Err(e) = set_enabled(app, on) {
        tracing::warn!("start at login: {e}");
    }
}

/// The window's Settings: the choice, applied and remembered.
pub fn choose(app: &AppHandle, paths: &Paths, on: bool) -> Result<(), String> {
    set_enabled(app, on)?;
    TraySettings { autostart: Some(on) }.save(&paths.home).map_err(|e| e.to_string())
}
