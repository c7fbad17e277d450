//! Start at login. On the first run the app turns it on (a PC keeps polling
//! after a reboot without anyone remembering `pcmail daemon`); the window's
//! Settings turn it off, and the choice is kept in `<PCMAIL_HOME>/tray.json`
//! so a later start never turns it back on.
//!
//! Linux: an XDG autostart entry (`$XDG_CONFIG_HOME/autostart/pcmail-tray.desktop`,
//! default `~/.config`), written here so it is tested without a desktop.
//! Elsewhere the shell uses tauri-plugin-autostart (the registry's Run key on
//! Windows, a LaunchAgent on macOS).
//!
//! Starting at login never makes a second poller: the app polls only while
//! it holds the daemon lock (a `pcmail daemon`, the service's too, holds it
//! otherwise; see `poll::next_step`).

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The autostart entry's file name.
pub const DESKTOP_FILE: &str = "pcmail-tray.desktop";
/// The app's own settings file in `PCMAIL_HOME` (the client's config.toml is the CLI's).
pub const SETTINGS_FILE: &str = "tray.json";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TraySettings {
    /// None until the first run decided it.
    #[serde(default)]
    pub autostart: Option<bool>,
}

impl TraySettings {
    pub fn load(home: &Path) -> std::io::Result<TraySettings> {
        match std::fs::read(home.join(SETTINGS_FILE)) {
            Ok(b) => serde_json::from_slice(&b)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{SETTINGS_FILE}: {e}"))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(TraySettings::default()),
            Err(e) => Err(e),
        }
    }
    pub fn save(&self, home: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(home)?;
        pcmail_fsmode::replace_private(
            &home.join(SETTINGS_FILE),
            &serde_json::to_vec_pretty(self).expect("plain struct"),
        )
    }
}

/// What to do about start-at-login when the app starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtStart {
    /// First run: turn it on and remember that.
    EnableFirstRun,
    /// The user's choice stands (on: make sure the entry points at this binary).
    Keep(bool),
}

pub fn at_start(settings: &TraySettings) -> AtStart {
    match settings.autostart {
        None => AtStart::EnableFirstRun,
        Some(on) => AtStart::Keep(on),
    }
}

/// `$XDG_CONFIG_HOME/autostart`, else `$HOME/.config/autostart`.
pub fn xdg_autostart_dir(xdg_config_home: Option<&str>, home: Option<&Path>) -> Option<PathBuf> {
    match xdg_config_home.filter(|d| Path::new(d).is_absolute()) {
        Some(d) => Some(Path::new(d).join("autostart")),
        None => home.map(|h| h.join(".config").join("autostart")),
    }
}

/// The XDG desktop entry that starts `exe` at login. `home` is the
/// `PCMAIL_HOME` to pass on when the user set one (else none).
pub fn desktop_entry(exe: &Path, pcmail_home: Option<&Path>) -> String {
    let exec = desktop_exec_quote(&exe.to_string_lossy());
    let exec = match pcmail_home {
        Some(h) => format!("env PCMAIL_HOME={} {exec}", desktop_exec_quote(&h.to_string_lossy())),
        None => exec,
    };
    format!(
        "[Desktop Entry]\nType=Application\nName=pcmail\nComment=pcmail tray: mail between AI coding sessions\n\
         Exec={exec}\nIcon=pcmail-tray\nTerminal=false\nX-GNOME-Autostart-enabled=true\n"
    )
}

/// Quotes one argument for a desktop entry's `Exec` key (the spec: double
/// quotes, with `"`, `` ` ``, `$` and `\` escaped by a backslash; `%` doubled).
fn desktop_exec_quote(arg: &str) -> String {
    let mut out = String::from("\"");
    for c in arg.chars() {
        match c {
            '"' | '`' | '$' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '%' => out.push_str("%%"),
            '\n' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out.push('"');
    // The spec's general string escaping applies on top: a backslash is written twice.
    out.replace('\\', "\\\\")
}

/// Writes (or rewrites) the entry; 0644 like any desktop file.
pub fn xdg_enable(dir: &Path, exe: &Path, pcmail_home: Option<&Path>) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(DESKTOP_FILE);
    let body = desktop_entry(exe, pcmail_home);
    if std::fs::read_to_string(&path).ok().as_deref() != Some(body.as_str()) {
        pcmail_fsmode::replace_file(&path, body.as_bytes(), Some(0o644))?;
    }
    Ok(path)
}

pub fn xdg_disable(dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(dir.join(DESKTOP_FILE)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

pub fn xdg_is_enabled(dir: &Path) -> bool {
    dir.join(DESKTOP_FILE).is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_run_enables_then_the_choice_stands() {
        let home = tempfile::tempdir().unwrap();
        let s = TraySettings::load(home.path()).unwrap();
        assert_eq!(at_start(&s), AtStart::EnableFirstRun);
        TraySettings { autostart: Some(false) }.save(home.path()).unwrap();
        assert_eq!(at_start(&TraySettings::load(home.path()).unwrap()), AtStart::Keep(false));
        std::fs::write(home.path().join(SETTINGS_FILE), "{not json").unwrap();
        assert!(TraySettings::load(home.path()).is_err(), "a broken file is an error, not a first run");
    }

    #[test]
    fn the_entry_is_written_quoted_and_removed() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("autostart");
        assert!(!xdg_is_enabled(&dir));
        let p = xdg_enable(&dir, Path::new("/opt/my apps/pcmail-tray"), Some(Path::new("/home/u/pc$mail"))).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.starts_with("[Desktop Entry]\nType=Application\n"), "{text}");
        assert!(
            text.contains("\nExec=env PCMAIL_HOME=\"/home/u/pc\\\\$mail\" \"/opt/my apps/pcmail-tray\"\n"),
            "{text}"
        );
        assert!(xdg_is_enabled(&dir));
        xdg_disable(&dir).unwrap();
        assert!(!xdg_is_enabled(&dir));
        xdg_disable(&dir).unwrap(); // already off: fine
    }

    #[test]
    fn xdg_dir_follows_xdg_config_home() {
        assert_eq!(
            xdg_autostart_dir(Some("/x/cfg"), Some(Path::new("/home/u"))),
            Some(PathBuf::from("/x/cfg/autostart"))
        );
        assert_eq!(
            xdg_autostart_dir(Some("relative"), Some(Path::new("/home/u"))),
            Some(PathBuf::from("/home/u/.config/autostart"))
        );
        assert_eq!(xdg_autostart_dir(None, None), None);
    }
}
