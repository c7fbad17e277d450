//! The integration trait: what the controller asks of the GUI side.

use serde::Serialize;
use std::time::Duration;

/// What the tray icon shows (the shell composes the pixels with [`crate::icon`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "count", rename_all = "lowercase")]
pub enum Badge {
    /// Nothing new.
    None,
    /// Unread mail, with the count.
    Unread(u32),
    /// A decision request or urgent mail waits (count of unread).
    Attention(u32),
    /// The poller cannot reach the server (offline or failing).
    Offline,
}

impl Badge {
    pub fn name(&self) -> &'static str {
        match self {
            Badge::None => "none",
            Badge::Unread(_) => "unread",
            Badge::Attention(_) => "attention",
            Badge::Offline => "offline",
        }
    }
}

/// One native notification, for one mail id: the client crate's type (its
/// `Notification::for_mail` words it and neutralises the text).
pub use pcmail_client::notify::Notification;

/// The tray / notification / window side. Implemented by the Tauri shell and by
/// the recording fake in the tests.
pub trait TrayUi {
    /// The text next to the tray icon (`set_title`; shown on Linux and macOS).
    fn set_title(&self, title: &str);
    /// The tray icon's badge.
    fn set_badge(&self, badge: &Badge);
    /// The tooltip (where the platform has one).
    fn set_tooltip(&self, _text: &str) {}
    /// Shows one native notification, returning within `timeout` (the shell
    /// gives up waiting after it). `Err` when the platform refused it.
    fn notify(&self, n: &Notification, timeout: Duration) -> Result<(), String>;
    /// Shows and focuses the window.
    fn show_window(&self);
    /// Shows the window with that mail open (the window then marks it seen).
    fn open_mail(&self, id: &str);
    /// Tells the window the data changed (it re-reads what it shows).
    fn changed(&self, version: i64);
}
