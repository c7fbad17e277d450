//! What the window is handed (docs/tray.md "Shapes"): serialisable views built
//! from the store's rows.

use pcmail_core::{Kind, Millis, State, TimelineEntry};
use pcmail_store::{InboxMail, SentMail};
use serde::Serialize;

pub const PREVIEW_CHARS: usize = 160;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ConnState {
    /// No poll has been tried yet.
    Unknown,
    Online,
    /// The last attempt failed, an earlier one worked recently.
    Failing,
    /// Failing for a while (3 attempts, or no success for 10 min), or nobody polls.
    Offline,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Connection {
    pub state: ConnState,
    pub last_poll_at: Option<Millis>,
    pub last_error: Option<String>,
    /// "app" when this app runs the poller, "daemon" when a `pcmail daemon` does.
    pub poller: &'static str,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub unread: i64,
    pub urgent: i64,
    pub decisions: i64,
    pub alerts: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub pc: String,
    pub connection: Connection,
    pub paused: bool,
    pub badge: &'static str,
    pub title: String,
    pub counts: Counts,
    pub now: Millis,
    /// The user's language for kind badges and labels: "ja" or "en".
    pub lang: &'static str,
    /// This PC's leases: held, stale, lost lately.
    pub leases: LeaseCounts,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LeaseCounts {
    /// Leases this PC holds (or claimed offline, or is releasing).
    pub mine: i64,
    /// Of those, stale: no heartbeat the server answered for 6·H (3 min).
    pub stale: i64,
    /// Leases of this PC the server ended (taken over, expired) in the last hour.
    pub lost: i64,
}

/// One lease in the Leases view: the server's list (the PC's guard cache)
/// plus this PC's own leases the server has not listed (claimed offline,
/// being released).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseView {
    pub resource: String,
    pub repo: String,
    /// "exclusive" or "shared".
    pub mode: String,
    /// `pc/name` (or `pc/` and the session's first 8 characters).
    pub holder: String,
    pub holder_pc: String,
    pub description: String,
    pub files: Vec<String>,
    pub fence: Option<i64>,
    pub granted_at: Option<Millis>,
    /// The last heartbeat, in this PC's clock.
    pub heartbeat_at: Option<Millis>,
    pub heartbeat_age_ms: Option<Millis>,
    pub stale: bool,
    /// Held by this PC: the window offers Release.
    pub mine: bool,
    /// "held", "stale", "unconfirmed" (claimed while the server was
    /// unreachable) or "releasing" (the release waits for the next poll).
    pub state: &'static str,
}

/// A lease this PC lost (the server ended it: taken over, expired, released elsewhere).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LostLeaseView {
    pub resource: String,
    pub at: Millis,
    pub event: String,
    pub taken_by: Option<String>,
    pub reason: Option<String>,
    /// The line the session was told (`pcmail: lease … was taken over by …`).
    pub line: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeasesView {
    pub leases: Vec<LeaseView>,
    pub lost: Vec<LostLeaseView>,
    /// When the server last confirmed the list (this PC's clock), if ever.
    pub cache_at: Option<Millis>,
    pub now: Millis,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MailView {
    pub id: String,
    pub from: String,
    pub to: String,
    pub kind: Kind,
    pub subject: String,
    pub preview: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    pub urgent: bool,
    pub created_at: Millis,
    pub delivered_at: Option<Millis>,
    pub expires_at: Option<Millis>,
    /// The state as this PC knows it (see `state_of`).
    pub state: State,
    pub in_reply_to: Option<String>,
    /// A mark of ours waits to go to the server with the next cycle.
    pub pending: bool,
    pub timeline: Vec<TimelineEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SentView {
    pub id: String,
    pub to: String,
    pub kind: Kind,
    pub subject: String,
    pub preview: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    pub urgent: bool,
    pub created_at: Millis,
    pub state: State,
    pub in_reply_to: Option<String>,
    pub timeline: Vec<TimelineEntry>,
}

pub fn preview(body: &str) -> String {
    let mut s: String = body.chars().take(PREVIEW_CHARS).collect();
    if body.chars().count() > PREVIEW_CHARS {
        s.push('…');
    }
    s
}

/// The store keeps a received mail at `new` until a session sees it; for the
/// window that is `delivered` once this PC has confirmed it to the server
/// (the server then says delivered too), `new` before.
pub fn state_of(m: &InboxMail, now: Millis) -> State {
    if m.is_expired_at(now) {
        return State::Expired;
    }
    match m.status {
        State::New | State::Delivered if m.confirmed_at.is_some() => State::Delivered,
        s => s,
    }
}

/// A received mail's timeline: the store's recorded one; for a row read
/// without it, rebuilt from what the inbox row keeps: created (sender),
/// delivered (confirmed by this PC), seen (presented or marked), and the
/// final step. The store keeps only the latest local status change, so a
/// `seen` before a `done` shows only when the hook's presentedAt recorded it.
pub fn inbox_timeline(m: &InboxMail, me: &str, now: Millis) -> Vec<TimelineEntry> {
    // Recorded: the store keeps every change with the server's
    // time and actor, the same timeline `pcmail status` and `read` show.
    if !m.timeline.is_empty() {
        let mut tl = m.timeline.clone();
        // Past its expiry by the server's clock and the sweep has not run
        // yet: shown expired now (as `inbox` does); the sweep's record follows.
        if !tl.iter().any(|e| e.state.is_final()) && m.is_expired_at(now) {
            if let Some(at) = m.expires_at {
                tl.push(TimelineEntry { state: State::Expired, at, by: "server".into(), note: None });
            }
        }
        return tl;
    }
    let mut tl = vec![TimelineEntry { state: State::New, at: m.created_at, by: m.from.clone(), note: None }];
    if let Some(at) = m.confirmed_at {
        tl.push(TimelineEntry { state: State::Delivered, at, by: me.to_string(), note: None });
    }
    let by = m.status_by.clone().unwrap_or_else(|| me.to_string());
    match m.status {
        State::New | State::Delivered => {}
        State::Seen => tl.push(TimelineEntry { state: State::Seen, at: m.status_at, by, note: None }),
        fin => {
            if let Some(at) = m.presented_at {
                let who = match &m.presented_session {
                    Some(s) => format!("{me}/{s}"),
                    None => me.to_string(),
                };
                tl.push(TimelineEntry { state: State::Seen, at, by: who, note: None });
            }
            let note = match fin {
                State::Failed => m.fail_reason.clone(),
                State::Done => Some("ack".to_string()),
                _ => None,
            };
            tl.push(TimelineEntry { state: fin, at: m.status_at, by, note });
        }
    }
    if m.status != State::Expired && m.is_expired_at(now) {
        if let Some(at) = m.expires_at {
            tl.push(TimelineEntry { state: State::Expired, at, by: "server".into(), note: None });
        }
    }
    tl.sort_by_key(|e| e.at);
    tl
}

pub fn mail_view(m: &InboxMail, me: &str, now: Millis, pending: bool, with_body: bool) -> MailView {
    MailView {
        id: m.id.clone(),
        from: m.from.clone(),
        to: m.to.clone(),
        kind: m.effective_kind(),
        subject: m.subject.clone(),
        preview: preview(&m.body),
        body: with_body.then(|| m.body.clone()),
        urgent: m.urgent,
        created_at: m.created_at,
        delivered_at: m.confirmed_at.or(Some(m.received_at)),
        expires_at: m.expires_at,
        state: state_of(m, now),
        in_reply_to: m.in_reply_to.clone(),
        pending,
        timeline: inbox_timeline(m, me, now),
    }
}

pub fn sent_view(m: &SentMail, with_body: bool) -> SentView {
    SentView {
        id: m.id.clone(),
        to: m.to.clone(),
        kind: Kind::classify(m.kind, &m.subject),
        subject: m.subject.clone(),
        preview: preview(&m.body),
        body: with_body.then(|| m.body.clone()),
        urgent: m.urgent,
        created_at: m.created_at,
        state: m.state,
        in_reply_to: m.in_reply_to.clone(),
        timeline: m.timeline.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcmail_core::{Mail, ReceivedUpdate};

    /// The window shows the recorded timeline (the server's record,
    /// the same `pcmail status` prints), not one rebuilt from the inbox row.
    #[test]
    fn the_window_shows_the_recorded_timeline_of_a_received_mail() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = pcmail_store::Store::open(&dir.path().join("pc.db")).unwrap();
        let mail: Mail = serde_json::from_value(serde_json::json!({
            "id": "mail-1-000000e1", "from": "pc-a", "to": "pc-b", "kind": "decision", "subject": "s", "body": "b",
            "urgent": false, "expiresAt": 1_000, "createdAt": 10, "state": "new",
            "timeline": [{"state": "new", "at": 10, "by": "pc-a", "note": null}]
        }))
        .unwrap();
        store.write(|tx| pcmail_store::inbox::insert_received(tx, &mail, 20)).unwrap();
        let up = |seq, state, at, by: &str| ReceivedUpdate {
            seq,
            id: mail.id.clone(),
            state,
            at,
            by: by.into(),
            note: None,
        };
        store
            .apply_received_updates(&[up(2, State::Delivered, 25, "pc-b"), up(3, State::Expired, 1_300, "server")])
            .unwrap();
        let m = store.inbox_get(&mail.id).unwrap().unwrap();
        let v = mail_view(&m, "pc-b", 5_000, false, false);
        assert_eq!(v.timeline, store.timeline(&mail.id).unwrap());
        let got: Vec<_> = v.timeline.iter().map(|e| (e.state, e.at, e.by.as_str())).collect();
        assert_eq!(got, [(State::New, 10, "pc-a"), (State::Delivered, 25, "pc-b"), (State::Expired, 1_300, "server")]);
        assert_eq!(v.state, State::Expired);
    }
}
