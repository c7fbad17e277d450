//! pcmail-tray: the tray app's controller, with no GUI in it.
//!
//! Everything the tray decides lives here and is tested without Tauri: the
//! unread count and title, the badge kind, which mail gets a native
//! notification and within which budget, pause, what a notification click
//! opens, and the seen/ack flows. The controller reads and writes the PC's
//! store through `pcmail-store`; it reaches the GUI only through [`TrayUi`]
//! (the Tauri shell in `src-tauri/` implements it, tests use a recording fake)
//! and the server only through [`Remote`] (an adapter over `pcmail-client`).
//!
//! Time is always passed in (`now` values, or a [`Clock`] for the notification
//! budget), never read here.

pub mod autostart;
pub mod controller;
pub mod icon;
pub mod live;
pub mod notify;
pub mod poll;
pub mod remote;
pub mod ui;
pub mod view;

pub use controller::{ActionOutcome, Controller, TrayError, LEASE_LOST_NOTE_MS, MENU_DECISIONS_MAX};
pub use live::{Freshness, IdleNameView, JobView, JobsView, SessionView, SessionsView, OUTPUT_TAIL_CHARS};
pub use notify::{deliver, Clock, Delivery, NOTIFY_EACH_MS, NOTIFY_TOTAL_MS};
pub use poll::{next_step, LeaseReleased, PollStep, Remote, RemoteFailure, ReplyError};
pub use remote::ClientRemote;
pub use ui::{
    menu_item_id, parse_menu_item_id, Badge, Lang, MenuDecision, NoteAction, Notification, TrayNotification, TrayUi,
};
pub use view::{
    ConnState, Connection, Counts, LeaseCounts, LeaseView, LeasesView, LostLeaseView, MailView, SentView, Status,
};
