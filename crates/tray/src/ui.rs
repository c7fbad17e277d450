//! The integration trait: what the controller asks of the GUI side.

pub use pcmail_core::present::Lang;
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

/// A button on a notification (or an item under a decision request in the
/// tray menu). The key is what the notification server sends back in its
/// `ActionInvoked` signal; the label is what the user sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NoteAction {
    /// Open the window at that mail.
    Open,
    /// Mark it done without opening the window.
    Ack,
    /// Open the window at that mail, to answer it.
    Reply,
}

impl NoteAction {
    pub fn key(self) -> &'static str {
        match self {
            NoteAction::Open => "open",
            NoteAction::Ack => "ack",
            NoteAction::Reply => "reply",
        }
    }
    /// The button's label in English.
    pub fn label(self) -> &'static str {
        self.label_in(Lang::En)
    }
    /// The button's label in the user's language (`LANG`/`LC_MESSAGES`).
    pub fn label_in(self, lang: Lang) -> &'static str {
        match (self, lang) {
            (NoteAction::Open, Lang::En) => "Open",
            (NoteAction::Ack, Lang::En) => "Ack",
            (NoteAction::Reply, Lang::En) => "Reply…",
            (NoteAction::Open, Lang::Ja) => "開く",
            (NoteAction::Ack, Lang::Ja) => "完了にする",
            (NoteAction::Reply, Lang::Ja) => "返信…",
        }
    }
    /// The action a notification server reported; `default` is a click on the
    /// notification itself (= Open). Anything else (`__closed`, unknown) is None.
    pub fn from_key(key: &str) -> Option<NoteAction> {
        match key {
            "open" | "default" => Some(NoteAction::Open),
            "ack" => Some(NoteAction::Ack),
            "reply" => Some(NoteAction::Reply),
            _ => None,
        }
    }
    /// The buttons a mail's notification carries: Open, Ack and (unless it is
    /// itself a reply, which cannot be answered) Reply… for a decision request,
    /// a work request or urgent mail; none for a plain note (a click opens it).
    pub fn for_mail(m: &pcmail_store::InboxMail) -> Vec<NoteAction> {
        if !m.wants_notification() {
            return vec![];
        }
        let mut v = vec![NoteAction::Open, NoteAction::Ack];
        if m.in_reply_to.is_none() {
            v.push(NoteAction::Reply);
        }
        v
    }
}

/// A notification with its buttons (`Deref`s to the text). `lang` is the
/// language of its title's kind badge and of its buttons' labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrayNotification {
    pub note: Notification,
    pub actions: Vec<NoteAction>,
    pub lang: Lang,
}

impl TrayNotification {
    /// In English.
    pub fn for_mail(m: &pcmail_store::InboxMail) -> TrayNotification {
        TrayNotification::for_mail_in(m, Lang::En)
    }
    /// The title says the kind as the badge in `lang` (`[判断依頼]` or
    /// `[decision request]`, as `pcmail inbox` shows it); the body is the
    /// subject without the Japanese tags (the badge says it already).
    pub fn for_mail_in(m: &pcmail_store::InboxMail, lang: Lang) -> TrayNotification {
        let mut note = Notification::for_mail(m);
        let badge = pcmail_core::present::kind_badge(m.effective_kind(), lang);
        let urgent = match (m.urgent, lang) {
            (false, _) => "",
            (true, Lang::En) => "URGENT ",
            (true, Lang::Ja) => "至急 ",
        };
        let from = pcmail_core::present::neutralise(&m.from);
        note.title = match (badge, lang) {
            (Some(b), Lang::En) => format!("pcmail: {urgent}{b} from {from}"),
            (Some(b), Lang::Ja) => format!("pcmail: {urgent}{b} {from} から"),
            (None, Lang::En) => format!("pcmail: {urgent}mail from {from}"),
            (None, Lang::Ja) => format!("pcmail: {urgent}{from} からのメール"),
        };
        let subject = pcmail_core::present::subject_without_tags(&m.subject);
        if !subject.is_empty() {
            note.body = pcmail_core::present::truncate_chars(&pcmail_core::present::neutralise(&subject), 160);
        }
        TrayNotification { note, actions: NoteAction::for_mail(m), lang }
    }
    /// The buttons as (key, label in this notification's language).
    pub fn buttons(&self) -> Vec<(&'static str, &'static str)> {
        self.actions.iter().map(|a| (a.key(), a.label_in(self.lang))).collect()
    }
}

impl std::ops::Deref for TrayNotification {
    type Target = Notification;
    fn deref(&self) -> &Notification {
        &self.note
    }
}

/// One open decision request in the tray menu (with Open and Ack under it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MenuDecision {
    pub id: String,
    /// One line: the subject (cut) and the sender.
    pub label: String,
}

/// The tray menu item id for an action on a mail (`ack:<id>`), and back.
pub fn menu_item_id(action: NoteAction, id: &str) -> String {
    format!("{}:{id}", action.key())
}

pub fn parse_menu_item_id(item: &str) -> Option<(NoteAction, &str)> {
    let (key, id) = item.split_once(':')?;
    let action = match key {
        "open" => NoteAction::Open,
        "ack" => NoteAction::Ack,
        _ => return None,
    };
    pcmail_core::ids::is_valid_any_id(id).then_some((action, id))
}

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
    /// `n.actions` are the buttons to offer where the desktop supports them.
    fn notify(&self, n: &TrayNotification, timeout: Duration) -> Result<(), String>;
    /// Shows and focuses the window.
    fn show_window(&self);
    /// Shows the window with that mail open (the window then marks it seen).
    fn open_mail(&self, id: &str);
    /// Tells the window the data changed (it re-reads what it shows).
    fn changed(&self, version: i64);
    /// The open decision requests the tray menu lists (at most
    /// [`crate::controller::MENU_DECISIONS_MAX`]), each with Open and Ack.
    fn set_decisions(&self, decisions: &[MenuDecision]);
}
