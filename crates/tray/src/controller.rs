//! The controller: the one place that decides what the tray shows and does.

use crate::notify::{deliver, Clock, Delivery};
use crate::poll::{Remote, ReplyError};
use crate::ui::{Badge, Lang, MenuDecision, NoteAction, TrayNotification, TrayUi};
use crate::view::{
    mail_view, sent_view, ConnState, Connection, Counts, LeaseCounts, LeaseView, LeasesView, LostLeaseView, MailView,
    SentView, Status,
};
use pcmail_core::job::Job;
use pcmail_core::lease::STALE_AFTER_MS;
use pcmail_core::sessions::WhoAnswer;
use pcmail_core::{Kind, MarkOp, Millis, State};
use pcmail_store::leases::{self as sl, LostLease};
use pcmail_store::{inbox, marks, meta, Store, StoreError};
use std::collections::HashSet;

/// Mails listed for the window at most (the UI renders only the rows in view).
pub const LIST_MAX: usize = 20_000;
/// Open decision requests the tray menu lists at most.
pub const MENU_DECISIONS_MAX: usize = 5;
/// Characters of a subject shown in the tray menu.
const MENU_SUBJECT_CHARS: usize = 48;
/// Failures in a row before "failing" turns "offline".
pub const OFFLINE_AFTER_FAILURES: i64 = 3;
/// No successful poll for this long while polls fail: offline.
pub const OFFLINE_AFTER_MS: Millis = 10 * 60_000;
/// A lease of this PC that the server ended stays noted in the tray's
/// title and tooltip (and listed in the Leases view) this long.
pub const LEASE_LOST_NOTE_MS: Millis = 60 * 60_000;
/// Lost leases the Leases view lists at most.
const LOST_LIST_MAX: usize = 20;

#[derive(Debug, thiserror::Error)]
pub enum TrayError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("no such mail {0:?}")]
    NotFound(String),
    /// Something other than a mail is not there (a lease, a job): the whole sentence.
    #[error("{0}")]
    Missing(String),
    #[error("refusing to reply to a reply (the CLI exits 3 here)")]
    ReplyToReply,
    #[error("{message}")]
    Remote { code: String, message: String },
}

/// What a notification button or a tray menu item did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionOutcome {
    /// The window was asked to open at that mail.
    Opened,
    /// The mail was acked (done), without the window.
    Acked,
    /// Already finished (done, failed, expired): nothing was sent.
    AlreadyFinished,
    /// Not an action (the notification was closed, an unknown key).
    Ignored,
}

impl TrayError {
    /// The `code` the window gets (docs/tray.md).
    pub fn code(&self) -> &str {
        match self {
            TrayError::Store(StoreError::NotFound(_)) | TrayError::NotFound(_) | TrayError::Missing(_) => "not_found",
            TrayError::Store(_) => "store",
            TrayError::ReplyToReply => "reply_to_reply",
            TrayError::Remote { code, .. } => code,
        }
    }
}

pub type Result<T> = std::result::Result<T, TrayError>;

/// The last answer a live view had, kept while the app runs.
#[derive(Debug, Clone, Default)]
pub(crate) struct LastAnswers {
    pub who: Option<(WhoAnswer, Millis)>,
    pub jobs: Option<(Vec<Job>, Millis)>,
}

pub struct Controller {
    store: Store,
    pc: String,
    paused: bool,
    daemon_polls: bool,
    poll_interval_ms: Millis,
    shown_title: Option<String>,
    shown_badge: Option<Badge>,
    shown_tooltip: Option<String>,
    shown_decisions: Option<Vec<MenuDecision>>,
    last_version: Option<i64>,
    lang: Lang,
    /// The Sessions and Jobs views' last answers from the server.
    pub(crate) live: LastAnswers,
}

impl Controller {
    /// `pc` is this PC's roster label; marks are recorded as `<pc>/ui`.
    pub fn new(store: Store, pc: impl Into<String>, poll_interval_ms: Millis) -> Controller {
        Controller {
            store,
            pc: pc.into(),
            paused: false,
            daemon_polls: false,
            poll_interval_ms: poll_interval_ms.max(1_000),
            shown_title: None,
            shown_badge: None,
            shown_tooltip: None,
            shown_decisions: None,
            last_version: None,
            lang: Lang::En,
            live: Default::default(),
        }
    }

    /// The language of kind badges and notification buttons (the shell
    /// reads `LC_ALL`/`LC_MESSAGES`/`LANG`: `pcmail_local::config::user_lang`).
    pub fn set_lang(&mut self, lang: Lang) {
        self.lang = lang;
    }
    pub fn lang(&self) -> Lang {
        self.lang
    }

    pub fn store(&self) -> &Store {
        &self.store
    }
    pub fn pc(&self) -> &str {
        &self.pc
    }
    pub fn set_pc(&mut self, pc: impl Into<String>) {
        self.pc = pc.into();
    }
    pub fn set_poll_interval_ms(&mut self, ms: Millis) {
        self.poll_interval_ms = ms.max(1_000);
    }
    pub fn paused(&self) -> bool {
        self.paused
    }
    pub fn set_paused(&mut self, paused: bool) {
        self.paused = paused;
    }
    /// Whether a `pcmail daemon` polls (then this app only watches the store).
    pub fn set_daemon_polls(&mut self, yes: bool) {
        self.daemon_polls = yes;
    }
    fn actor(&self) -> String {
        format!("{}/ui", self.pc)
    }

    // ---- reading -----------------------------------------------------------

    pub fn connection(&self, now: Millis) -> Result<Connection> {
        let ok = self.store.meta_i64(meta::LAST_POLL_OK_AT)?;
        let attempt = self.store.meta_i64(meta::LAST_POLL_ATTEMPT_AT)?;
        let failures = self.store.meta_i64(meta::CONSECUTIVE_FAILURES)?.unwrap_or(0);
        let err = self.store.meta_get(meta::LAST_POLL_ERROR)?.filter(|e| !e.is_empty());
        // The client's cycle stamps the attempt first and the success last, so
        // attempt > ok also means "a (long) poll is running": only the
        // failure counter says the last cycle failed.
        let last_failed = failures > 0;
        // A poller that stopped polling altogether is as bad as one that fails.
        let silent_for = now - attempt.max(ok).unwrap_or(now);
        let stale = silent_for > (3 * self.poll_interval_ms).max(OFFLINE_AFTER_MS);
        let state = if attempt.is_none() && ok.is_none() {
            ConnState::Unknown
        } else if stale
            || (last_failed && (failures >= OFFLINE_AFTER_FAILURES || ok.is_none_or(|o| now - o > OFFLINE_AFTER_MS)))
        {
            ConnState::Offline
        } else if last_failed {
            ConnState::Failing
        } else if ok.is_none() {
            ConnState::Unknown
        } else {
            ConnState::Online
        };
        Ok(Connection {
            state,
            last_poll_at: ok,
            last_error: if last_failed { err } else { None },
            poller: if self.daemon_polls { "daemon" } else { "app" },
        })
    }

    pub fn counts(&self, now: Millis) -> Result<Counts> {
        let c = self.store.inbox_counts(now)?;
        let alerts = self.store.alerts()?.iter().filter(|a| a.resolved_at.is_none()).count() as i64;
        Ok(Counts { unread: c.unread, urgent: c.urgent, decisions: c.decisions, alerts })
    }

    /// The badge for these facts: offline/failing wins, then a decision request
    /// or urgent mail waiting, then plain unread, else nothing.
    pub fn badge_for(conn: ConnState, c: &Counts) -> Badge {
        let n = c.unread.clamp(0, u32::MAX as i64) as u32;
        match conn {
            ConnState::Offline | ConnState::Failing => Badge::Offline,
            _ if c.decisions > 0 || c.urgent > 0 => Badge::Attention(n),
            _ if c.unread > 0 => Badge::Unread(n),
            _ => Badge::None,
        }
    }

    pub fn title_for(c: &Counts) -> String {
        if c.unread > 0 {
            c.unread.to_string()
        } else {
            String::new()
        }
    }

    /// The title with a lease of this PC that went stale or was lost noted
    /// after the count (`2 · lease lost`): the thing to look at, in a word.
    pub fn title_with_leases(c: &Counts, l: &LeaseCounts) -> String {
        let note = if l.lost > 0 {
            "lease lost"
        } else if l.stale > 0 {
            "lease stale"
        } else {
            return Self::title_for(c);
        };
        match Self::title_for(c) {
            t if t.is_empty() => note.to_string(),
            t => format!("{t} · {note}"),
        }
    }

    pub fn status(&self, now: Millis) -> Result<Status> {
        let connection = self.connection(now)?;
        let counts = self.counts(now)?;
        let leases = self.lease_counts(now)?;
        let badge = Self::badge_for(connection.state, &counts);
        Ok(Status {
            pc: self.pc.clone(),
            paused: self.paused,
            badge: badge.name(),
            title: Self::title_with_leases(&counts, &leases),
            connection,
            counts,
            now,
            lang: match self.lang {
                Lang::Ja => "ja",
                Lang::En => "en",
            },
            leases,
        })
    }

    // ---- leases ---------------------------------------------------------------

    fn server_offset(&self) -> Result<Millis> {
        Ok(self.store.meta_i64(meta::SERVER_OFFSET_MS)?.unwrap_or(0))
    }

    /// Leases of this PC the server ended since `since` (this PC's clock), newest first.
    fn lost_since(&self, since: Millis) -> Result<Vec<LostLease>> {
        let mut st = self
            .store
            .conn()
            .prepare_cached(
                "SELECT resource, fence, at, taken_by, reason, event FROM lease_lost WHERE at >= ?1 ORDER BY at DESC, resource LIMIT ?2",
            )
            .map_err(StoreError::from)?;
        let rows = st
            .query_map([since, LOST_LIST_MAX as i64], |r| {
                Ok(LostLease {
                    resource: r.get(0)?,
                    fence: r.get(1)?,
                    at: r.get(2)?,
                    taken_by: r.get(3)?,
                    reason: r.get(4)?,
                    event: r.get(5)?,
                })
            })
            .and_then(|rows| rows.collect::<std::result::Result<Vec<_>, _>>())
            .map_err(StoreError::from)?;
        Ok(rows)
    }

    /// Who holds what: the server's list as the poller last cached it, with
    /// this PC's own leases marked (Release), plus those of this PC the server
    /// does not list (claimed offline, being released), and the leases this
    /// PC lost in the last hour. Read from the store only: no network.
    pub fn leases(&self, now: Millis) -> Result<LeasesView> {
        let offset = self.server_offset()?;
        let mine = self.store.leases_mine()?;
        let mut out: Vec<LeaseView> = vec![];
        for l in self.store.lease_cache()? {
            let my_row = mine.iter().find(|m| m.resource == l.resource && m.fence == Some(l.fence));
            let is_mine = l.holder_pc == self.pc;
            // The server's heartbeat time, in this PC's clock.
            let heartbeat_at = l.heartbeat_at - offset;
            let stale = l.stale || my_row.is_some_and(|m| my_stale(m, now));
            let releasing = my_row.is_some_and(|m| m.release_queued_at.is_some());
            out.push(LeaseView {
                holder: holder_label(&l.holder_pc, l.holder_name.as_deref(), &l.holder_session),
                resource: l.resource,
                repo: l.repo,
                mode: l.mode,
                holder_pc: l.holder_pc,
                description: l.description,
                files: l.files,
                fence: Some(l.fence),
                granted_at: Some(l.granted_at - offset),
                heartbeat_at: Some(heartbeat_at),
                heartbeat_age_ms: Some((now - heartbeat_at).max(0)),
                stale,
                mine: is_mine,
                state: if releasing {
                    "releasing"
                } else if stale {
                    "stale"
                } else {
                    "held"
                },
            });
        }
        for m in &mine {
            if out.iter().any(|v| v.resource == m.resource && v.fence.is_some() && v.fence == m.fence) {
                continue;
            }
            if m.fence.is_some_and(|f| f < 0) {
                continue; // refused on reconnect: listed under lost
            }
            let stale = my_stale(m, now);
            let heartbeat_at = m.heartbeat_at;
            out.push(LeaseView {
                resource: m.resource.clone(),
                repo: m.repo.clone(),
                mode: m.mode.clone(),
                holder: holder_label(&self.pc, None, &m.session),
                holder_pc: self.pc.clone(),
                description: m.description.clone(),
                files: m.files.clone(),
                fence: m.fence,
                granted_at: Some(m.claimed_at),
                heartbeat_at,
                heartbeat_age_ms: heartbeat_at.map(|h| (now - h).max(0)),
                stale,
                mine: true,
                state: if m.release_queued_at.is_some() {
                    "releasing"
                } else if m.fence.is_none() {
                    "unconfirmed"
                } else if stale {
                    "stale"
                } else {
                    "held"
                },
            });
        }
        // Mine first, then by resource.
        out.sort_by(|a, b| {
            b.mine.cmp(&a.mine).then_with(|| a.resource.cmp(&b.resource)).then_with(|| a.fence.cmp(&b.fence))
        });
        let lost = self
            .lost_since(now - LEASE_LOST_NOTE_MS)?
            .into_iter()
            .map(|l| LostLeaseView {
                line: lost_line(&l),
                resource: l.resource,
                at: l.at,
                event: l.event,
                taken_by: l.taken_by,
                reason: l.reason,
            })
            .collect();
        Ok(LeasesView { leases: out, lost, cache_at: sl::cache_at(self.store.conn())?, now })
    }

    /// This PC's leases at a glance, for the title and tooltip.
    pub fn lease_counts(&self, now: Millis) -> Result<LeaseCounts> {
        let mine = self.store.leases_mine()?;
        let cached_stale: Vec<(String, i64)> = self
            .store
            .lease_cache()?
            .into_iter()
            .filter(|l| l.stale && l.holder_pc == self.pc)
            .map(|l| (l.resource, l.fence))
            .collect();
        let live: Vec<_> = mine.iter().filter(|m| m.fence.is_none_or(|f| f >= 0)).collect();
        let stale = live
            .iter()
            .filter(|m| my_stale(m, now) || cached_stale.iter().any(|(r, f)| *r == m.resource && Some(*f) == m.fence))
            .count() as i64;
        let lost = self.lost_since(now - LEASE_LOST_NOTE_MS)?.len() as i64;
        Ok(LeaseCounts { mine: live.len() as i64, stale, lost })
    }

    /// The tooltip's lease part: each stale lease of mine and each lost one, named.
    fn lease_notes(&self, now: Millis) -> Result<Vec<String>> {
        let mut notes = vec![];
        for l in self.leases(now)?.leases.iter().filter(|l| l.mine && l.stale) {
            let age = l
                .heartbeat_age_ms
                .map(|a| format!(" (no heartbeat for {})", pcmail_core::present::age(a)))
                .unwrap_or_default();
            notes.push(format!("lease {} stale{age}", l.resource));
        }
        for l in self.lost_since(now - LEASE_LOST_NOTE_MS)? {
            let what = match l.event.as_str() {
                "taken_over" => format!(
                    "taken over by {}",
                    l.taken_by
                        .as_deref()
                        .map(pcmail_core::present::neutralise)
                        .unwrap_or_else(|| "another session".into())
                ),
                "expired" => "expired".to_string(),
                _ => "released elsewhere".to_string(),
            };
            notes.push(format!("lease {} lost: {what}", l.resource));
        }
        Ok(notes)
    }

    /// Release for a lease of this PC, from the window: the function `pcmail
    /// lease release` runs (`Remote::lease_release`). A lease another PC holds
    /// is refused here (the server would refuse it too).
    pub fn release_lease(&self, remote: &dyn Remote, resource: &str) -> Result<crate::poll::LeaseReleased> {
        let ours = self.store.leases_mine()?.iter().any(|m| m.resource == resource);
        if !ours {
            return Err(TrayError::Missing(format!("this PC holds no lease of {resource}")));
        }
        remote.lease_release(resource).map_err(|message| TrayError::Remote { code: "lease_release".into(), message })
    }

    fn pending_ids(&self) -> Result<HashSet<String>> {
        // The store has no per-mail query for pending marks; the table is small.
        Ok(self.store.due_marks(Millis::MAX, 10_000)?.into_iter().map(|p| p.mark.id).collect())
    }

    /// The inbox for the window: `open` (not finished) or all, newest first
    /// (the window orders the queue).
    pub fn list_inbox(&self, all: bool, now: Millis) -> Result<Vec<MailView>> {
        let statuses: &[State] = if all { &[] } else { &[State::New, State::Delivered, State::Seen] };
        let pending = self.pending_ids()?;
        Ok(self
            .store
            .inbox_list(statuses, LIST_MAX)?
            .iter()
            .map(|m| mail_view(m, &self.pc, now, pending.contains(&m.id), false))
            .filter(|v| all || !v.state.is_final())
            .collect())
    }

    pub fn get_mail(&self, id: &str, now: Millis) -> Result<MailView> {
        let m = self.store.inbox_get(id)?.ok_or_else(|| TrayError::NotFound(id.into()))?;
        let pending = self.pending_ids()?.contains(id);
        Ok(mail_view(&m, &self.pc, now, pending, true))
    }

    pub fn list_sent(&self) -> Result<Vec<SentView>> {
        Ok(self.store.sent_list(LIST_MAX)?.iter().map(|m| sent_view(m, false)).collect())
    }

    pub fn get_sent(&self, id: &str) -> Result<SentView> {
        let m = self.store.sent_get(id)?.ok_or_else(|| TrayError::NotFound(id.into()))?;
        Ok(sent_view(&m, true))
    }

    /// The open decision requests for the tray menu: not finished, not
    /// expired, newest first, at most [`MENU_DECISIONS_MAX`].
    pub fn open_decisions(&self, now: Millis) -> Result<Vec<MenuDecision>> {
        Ok(self
            .store
            .inbox_list(&[State::New, State::Delivered, State::Seen], LIST_MAX)?
            .into_iter()
            .filter(|m| m.effective_kind() == Kind::Decision && !m.status.is_final() && !m.is_expired_at(now))
            .take(MENU_DECISIONS_MAX)
            .map(|m| MenuDecision { label: menu_label(&m.subject, &m.body, &m.from), id: m.id })
            .collect())
    }

    pub fn alerts(&self) -> Result<Vec<pcmail_core::Alert>> {
        Ok(self.store.alerts()?.into_iter().filter(|a| a.resolved_at.is_none()).collect())
    }

    // ---- the store changed ---------------------------------------------------

    /// Cheap check (SQLite `PRAGMA data_version`): Some(version) when another
    /// connection (the poller, a daemon, the CLI, the hook) committed since the
    /// last call. The app calls it every 250 ms.
    pub fn store_changed(&mut self) -> Result<Option<i64>> {
        let v = self.store.data_version()?;
        if self.last_version == Some(v) {
            return Ok(None);
        }
        self.last_version = Some(v);
        Ok(Some(v))
    }

    /// A cheap fingerprint of what the window shows (inbox, sent, alerts,
    /// connection, the last poll): the poller also commits its attempt times,
    /// and the window is only told when something it shows moved.
    pub fn signature(&self, now: Millis) -> Result<String> {
        let q = |sql: &str| -> Result<String> {
            Ok(self
                .store
                .conn()
                .query_row(sql, [], |r| {
                    Ok(format!(
                        "{}:{}:{}",
                        r.get::<_, Option<i64>>(0)?.unwrap_or(0),
                        r.get::<_, Option<i64>>(1)?.unwrap_or(0),
                        r.get::<_, Option<i64>>(2)?.unwrap_or(0)
                    ))
                })
                .map_err(StoreError::from)?)
        };
        let inbox = q("SELECT count(*), max(status_at), max(received_at + coalesce(confirmed_at, 0)) FROM inbox")?;
        let sent = q("SELECT count(*), max(state_at), sum(length(timeline)) FROM sent")?;
        let st = self.status(now)?;
        // The last poll's time too: each poll moves the header's "polled … ago",
        // and the Sessions and Jobs views ask the server again at each poll.
        Ok(format!(
            "{inbox}|{sent}|{}|{}|{:?}|{:?}|{:?}",
            st.counts.alerts,
            st.counts.unread,
            st.connection.state,
            st.connection.last_error,
            st.connection.last_poll_at
        ))
    }

    /// Brings the tray in line with the store: title, badge and tooltip (only
    /// when they change), and claims the notifications that are due. The claim
    /// is atomic in the store, so a mail is announced once across cycles and
    /// across processes; while paused the claimed ones are dropped (the count
    /// and the badge still show them).
    pub fn refresh(&mut self, ui: &dyn TrayUi, now: Millis) -> Result<Vec<TrayNotification>> {
        let st = self.status(now)?;
        if self.shown_title.as_deref() != Some(st.title.as_str()) {
            ui.set_title(&st.title);
            self.shown_title = Some(st.title.clone());
        }
        let badge = Self::badge_for(st.connection.state, &st.counts);
        if self.shown_badge.as_ref() != Some(&badge) {
            ui.set_badge(&badge);
            self.shown_badge = Some(badge);
        }
        let mut tip = tooltip(&st);
        for note in self.lease_notes(now)? {
            tip.push_str(" · ");
            tip.push_str(&note);
        }
        if self.shown_tooltip.as_deref() != Some(tip.as_str()) {
            ui.set_tooltip(&tip);
            self.shown_tooltip = Some(tip);
        }
        let decisions = self.open_decisions(now)?;
        if self.shown_decisions.as_ref() != Some(&decisions) {
            ui.set_decisions(&decisions);
            self.shown_decisions = Some(decisions);
        }
        let claimed = self.store.claim_notifications(now, 50)?;
        if self.paused {
            return Ok(vec![]);
        }
        Ok(self.notifications_for(&claimed))
    }

    /// The notifications for mail a poll cycle of this app claimed
    /// (`CycleReport::to_notify`); none while paused.
    pub fn notifications_for(&self, claimed: &[pcmail_store::InboxMail]) -> Vec<TrayNotification> {
        if self.paused {
            return vec![];
        }
        claimed.iter().map(|m| TrayNotification::for_mail_in(m, self.lang)).collect()
    }

    /// `refresh` then the notifications within their budget. The app runs the
    /// delivery outside its lock on the controller; this is for callers that
    /// do not hold one (and for the tests).
    pub fn refresh_and_notify(&mut self, ui: &dyn TrayUi, clock: &dyn Clock) -> Result<Delivery> {
        let notes = self.refresh(ui, clock.now_ms())?;
        Ok(deliver(&notes, ui, clock))
    }

    // ---- actions ---------------------------------------------------------------

    /// A notification was clicked: open that mail.
    pub fn notification_clicked(&self, ui: &dyn TrayUi, id: &str) {
        ui.open_mail(id);
    }

    /// A notification's button (the key the notification server reported:
    /// `default` for a click on it, `open`, `ack`, `reply`, `__closed`).
    /// Open and Reply… open the window at that mail; Ack marks it done
    /// through `Remote::ack` (the CLI's `pcmail ack`) without the window.
    pub fn notification_action(
        &self,
        ui: &dyn TrayUi,
        remote: &dyn Remote,
        id: &str,
        key: &str,
    ) -> Result<ActionOutcome> {
        match NoteAction::from_key(key) {
            Some(action) => self.act(ui, remote, id, action),
            None => Ok(ActionOutcome::Ignored),
        }
    }

    /// A tray menu item under a decision request (`open:<id>`, `ack:<id>`,
    /// [`crate::ui::menu_item_id`]); the menu's own items are the shell's.
    pub fn menu_clicked(&self, ui: &dyn TrayUi, remote: &dyn Remote, item: &str) -> Result<ActionOutcome> {
        match crate::ui::parse_menu_item_id(item) {
            Some((action, id)) => self.act(ui, remote, id, action),
            None => Ok(ActionOutcome::Ignored),
        }
    }

    fn act(&self, ui: &dyn TrayUi, remote: &dyn Remote, id: &str, action: NoteAction) -> Result<ActionOutcome> {
        let m = self.store.inbox_get(id)?.ok_or_else(|| TrayError::NotFound(id.into()))?;
        match action {
            NoteAction::Open | NoteAction::Reply => {
                ui.open_mail(id);
                Ok(ActionOutcome::Opened)
            }
            NoteAction::Ack if m.status.is_final() => Ok(ActionOutcome::AlreadyFinished),
            NoteAction::Ack => {
                remote.ack(id).map_err(|message| TrayError::Remote { code: "ack".into(), message })?;
                Ok(ActionOutcome::Acked)
            }
        }
    }

    /// "Open" in the tray menu: the window; straight to the mail when exactly
    /// one decision request or urgent mail waits.
    pub fn open_clicked(&self, ui: &dyn TrayUi, now: Millis) -> Result<()> {
        let urgent: Vec<_> = self
            .store
            .inbox_list(&[State::New], 3)?
            .into_iter()
            .filter(|m| !m.is_expired_at(now) && (m.urgent || m.effective_kind() == Kind::Decision))
            .collect();
        let c = self.counts(now)?;
        if urgent.len() == 1 && c.decisions + c.urgent <= 1 {
            ui.open_mail(&urgent[0].id);
        } else {
            ui.show_window();
        }
        Ok(())
    }

    fn mark(&mut self, id: &str, op: MarkOp, now: Millis) -> Result<()> {
        let by = self.actor();
        self.store.write(|tx| {
            let before = inbox::advance(tx, id, State::New, now, &by, None)?; // reads the status, moves nothing
            if before.advance(op.target()).is_some() {
                inbox::advance(tx, id, op.target(), now, &by, None)?;
                marks::queue(tx, id, op, now, &by, None)?;
            }
            Ok(())
        })?;
        Ok(())
    }

    /// Opening a mail in the window marks it seen (locally now, on the server
    /// with the next cycle) and returns it with its body.
    pub fn open_mail(&mut self, id: &str, now: Millis) -> Result<MailView> {
        if self.store.inbox_get(id)?.is_none() {
            return Err(TrayError::NotFound(id.into()));
        }
        self.mark(id, MarkOp::Seen, now)?;
        self.get_mail(id, now)
    }

    /// Ack: done without a reply.
    pub fn ack(&mut self, id: &str, now: Millis) -> Result<MailView> {
        if self.store.inbox_get(id)?.is_none() {
            return Err(TrayError::NotFound(id.into()));
        }
        self.mark(id, MarkOp::Ack, now)?;
        self.get_mail(id, now)
    }

    /// A reply, through the client crate's rules (`Remote::reply`).
    pub fn reply(&mut self, remote: &dyn Remote, id: &str, body: &str, now: Millis) -> Result<(String, MailView)> {
        let m = self.store.inbox_get(id)?.ok_or_else(|| TrayError::NotFound(id.into()))?;
        if m.in_reply_to.is_some() {
            return Err(TrayError::ReplyToReply);
        }
        let reply_id = remote.reply(id, body).map_err(|e| match e {
            ReplyError::ReplyToReply => TrayError::ReplyToReply,
            ReplyError::NotFound => TrayError::NotFound(id.into()),
            ReplyError::Offline { queued, message } => {
                TrayError::Remote { code: if queued { "queued".into() } else { "offline".into() }, message }
            }
            ReplyError::Refused { code, message } => TrayError::Remote { code, message },
        })?;
        Ok((reply_id, self.get_mail(id, now)?))
    }
}

/// One menu line: the subject (or the body's start) on one line, cut, and
/// the sender. The Japanese subject tag goes (the menu's heading names the
/// kind in the user's language). Mail is untrusted: control characters go.
fn menu_label(subject: &str, body: &str, from: &str) -> String {
    let subject = pcmail_core::present::subject_without_tags(subject);
    let text = if subject.trim().is_empty() { body } else { subject.as_str() };
    let one_line: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let one_line = one_line.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut cut: String = one_line.chars().take(MENU_SUBJECT_CHARS).collect();
    if one_line.chars().count() > MENU_SUBJECT_CHARS {
        cut.push('…');
    }
    format!("{cut} — {from}")
}

fn tooltip(st: &Status) -> String {
    let mut s = format!("pcmail ({})", st.pc);
    if st.counts.unread > 0 {
        s.push_str(&format!(" · {} unread", st.counts.unread));
    }
    if st.counts.decisions > 0 {
        s.push_str(&format!(" · {} decision", st.counts.decisions));
    }
    if st.counts.urgent > 0 {
        s.push_str(&format!(" · {} urgent", st.counts.urgent));
    }
    match st.connection.state {
        ConnState::Offline => s.push_str(" · offline"),
        ConnState::Failing => s.push_str(" · failing"),
        _ => {}
    }
    if st.connection.poller == "daemon" {
        s.push_str(" · via pcmail daemon");
    }
    if st.paused {
        s.push_str(" · notifications paused");
    }
    s
}

/// A lease of this PC is stale when the server has answered no heartbeat
/// for it for 6·H: its holder lives but nobody renews it (no poller runs),
/// or the server stopped answering. TTL leases are not renewed (they end
/// at their time); one being released or never granted is not stale.
fn my_stale(m: &pcmail_store::leases::MyLease, now: Millis) -> bool {
    m.fence.is_some_and(|f| f > 0)
        && m.ttl_expires_at.is_none()
        && m.release_queued_at.is_none()
        && now - m.heartbeat_at.unwrap_or(m.claimed_at) > STALE_AFTER_MS
}

/// The line a session is told about a lease it lost (the hook's wording).
fn lost_line(l: &LostLease) -> String {
    let reason = l
        .reason
        .as_deref()
        .map(|r| format!(": {}", pcmail_core::present::truncate_chars(&pcmail_core::present::neutralise(r), 120)))
        .unwrap_or_default();
    match l.event.as_str() {
        "taken_over" => format!(
            "lease {} was taken over by {}{reason}",
            l.resource,
            l.taken_by.as_deref().map(pcmail_core::present::neutralise).unwrap_or_else(|| "another session".into())
        ),
        "expired" => format!("lease {} expired{reason}", l.resource),
        _ => format!("lease {} was released{reason}", l.resource),
    }
}

/// `pc/name`, else `pc/` and the session id's first 8 characters (as `pcmail lease list`).
fn holder_label(pc: &str, name: Option<&str>, session: &str) -> String {
    match name {
        Some(n) if !n.is_empty() => format!("{pc}/{n}"),
        _ => format!("{pc}/{}", session.chars().take(8).collect::<String>()),
    }
}
