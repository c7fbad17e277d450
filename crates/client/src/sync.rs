//! One poll cycle: flush queued sends, then poll (confirm what is stored +
//! push pending marks + fetch new mail + heartbeat) until nothing is left.
//! Each mail is stored on its own; only stored mail is ever confirmed, so a
//! lost response or a killed poller means the mail comes again, never lost.

use crate::transport::{call_as, decode, CallError};
use crate::{Client, ClientError};
use pcmail_core::answers::{AlertsAnswer, Lenient, PollAnswer, RosterAnswer, RosterSetAnswer};
use pcmail_core::ids::is_valid_any_id;
use pcmail_core::model::limits;
use pcmail_core::protocol::{Op, PollArgs};
use pcmail_core::{ErrorCode, Mail, MarkOp, MarkResult, Millis, Pc, ReceivedUpdate, State, Update};
use pcmail_store::{inbox, marks, meta, InboxMail};
use serde_json::Value;

/// Marks an old server doesn't understand back off this long, 5 tries.
pub const UNKNOWN_OP_BACKOFF_MS: Millis = 60 * 60 * 1000;
pub const UNKNOWN_OP_MAX_TRIES: i64 = 5;
const MAX_ROUNDS: usize = 20;

/// What one round's poll asked (read before the request).
struct Asked {
    confirm: Vec<String>,
    due: Vec<pcmail_store::PendingMark>,
    since: i64,
    received_since: i64,
    lease: Option<pcmail_core::lease::PollLease>,
    lease_releases: Vec<pcmail_store::leases::MyLease>,
    sessions: Option<Vec<pcmail_core::sessions::LiveItem>>,
    job: Option<pcmail_core::job::PollJob>,
}

/// What one poll's answer left for after its transaction.
struct Applied {
    job: Option<pcmail_core::job::PollJobAnswer>,
    roster_moved: bool,
    done: bool,
    /// The cycle's success was recorded with the answer ([`Client::record_success`]).
    succeeded: bool,
}
/// How far the server's clock may seem to move before this PC records its
/// offset again: well under anything judged by it (expiry, ages in minutes),
/// well over the jitter of a request's travel on a LAN.
pub const SERVER_OFFSET_SLACK_MS: Millis = 250;
/// Store meta: `<label>@<server>\t<bound|unsupported>` after this installation claimed its label.
pub const LABEL_CLAIMED: &str = "label_claimed";

#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct CycleReport {
    pub round_trips: usize,
    pub stored: Vec<String>,
    pub confirmed: usize,
    pub quarantined: Vec<String>,
    pub marks_sent: usize,
    pub marks_dropped: usize,
    pub outbox_sent: Vec<String>,
    pub outbox_left: usize,
    /// Queued mail that expired before the server could take it (not sent).
    pub outbox_expired: Vec<String>,
    pub updates: usize,
    /// Entries of the received-mail feed applied (the server's record of mail this PC received).
    pub received_updates: usize,
    pub roster_refreshed: bool,
    /// The server had pruned updates past this PC's cursor (states re-read).
    pub cursor_reset: bool,
    /// Mail to a name that moved to another PC, dropped from this store.
    pub withdrawn: usize,
    /// The same for the received-mail feed (gas `receivedCursorReset`): the
    /// state of this PC's open received mail was re-read with `status`.
    pub received_cursor_reset: bool,
    /// Mail that wants a notification (claimed: nobody else will notify it).
    #[serde(skip)]
    pub to_notify: Vec<InboxMail>,
}

impl Client {
    /// One cycle. `wait_ms` > 0 long-polls on the first round when there is
    /// nothing to push (the daemon against `pcmail serve`).
    pub fn sync_once(&mut self, wait_ms: i64) -> Result<CycleReport, ClientError> {
        let mut report = CycleReport::default();
        // The attempt is stamped with the first round's request (when the
        // last attempt or success is a step old) and with a failure (the
        // cycle may fail before its request): "attempt after success" means
        // a poll is running, or ran into trouble.
        match self.sync_rounds(wait_ms, &mut report) {
            // Recorded with the last answer's writes.
            Ok(true) => Ok(report),
            Ok(false) => {
                let sweep_due = self.batch(|c| c.record_success(&mut report))?;
                if sweep_due {
                    let now = self.now();
                    self.sweep_and_alerts(now);
                    report.to_notify = self.store.claim_notifications(now, 20)?;
                }
                Ok(report)
            }
            Err(e) => {
                self.batch(|c| {
                    let now = c.now();
                    c.store.meta_set_i64(meta::LAST_POLL_ATTEMPT_AT, now)?;
                    let fails = c.store.meta_i64(meta::CONSECUTIVE_FAILURES)?.unwrap_or(0) + 1;
                    c.store.meta_set_i64(meta::CONSECUTIVE_FAILURES, fails)?;
                    c.store.meta_set(meta::LAST_POLL_ERROR, &e.to_string())?;
                    Ok(())
                })?;
                Err(e)
            }
        }
    }

    /// The cycle's success and the look for mail to notify (which waits
    /// for a sweep when one is due). Returns whether a sweep is due.
    fn record_success(&mut self, report: &mut CycleReport) -> Result<bool, ClientError> {
        let now = self.now();
        self.store.record_poll_ok(now)?;
        let due = self.sweep_due(now);
        if !due {
            report.to_notify = self.store.claim_notifications(now, 20)?;
        }
        Ok(due)
    }

    /// The rounds of one cycle. True when the last answer's transaction
    /// also recorded the cycle's success (nothing was left to do after it).
    fn sync_rounds(&mut self, wait_ms: i64, report: &mut CycleReport) -> Result<bool, ClientError> {
        self.claim_label_once()?;
        self.job_config_reload();
        // The steps before the first request (queued mail, leases claimed
        // offline, runs a gone executor left) run when the first round's
        // read says they may have work, and that read is then made again.
        let mut steps_done = false;
        let mut next_round = 0;
        while next_round < MAX_ROUNDS {
            let round = next_round;
            next_round += 1;
            // What this round asks, read in one transaction (which also
            // holds what that writes: the attempt's time, sessions found
            // gone, the lease holders' liveness). It begins as a read: a
            // poll that writes nothing here never waits for another
            // process's write lock.
            let first = round == 0 && !steps_done;
            let asked = self.batch_read_first(|c| {
                let now = c.now();
                let work = if first { Some(c.store.cycle_start_work()?) } else { None };
                // A mark an older pcmail queued with text the server refuses
                // must never hold up the poll: dropped here with a record.
                let marks_dropped = if round == 0 { c.store.drop_invalid_marks(now)? } else { 0 };
                // The attempt's time, under the server's rule for a poll's:
                // a step after the last attempt or success (a long poll that
                // follows a success at once writes nothing here).
                if round == 0 {
                    let attempt = c.store.meta_i64(meta::LAST_POLL_ATTEMPT_AT)?;
                    let ok = c.store.meta_i64(meta::LAST_POLL_OK_AT)?;
                    if pcmail_core::due::poll_record_due(attempt.max(ok), now) {
                        c.store.meta_set_i64(meta::LAST_POLL_ATTEMPT_AT, now)?;
                    }
                }
                let confirm = c.store.unconfirmed_ids(limits::POLL_LIMIT_MAX)?;
                let due = c.store.due_marks(now, limits::MARKS_MAX)?;
                let since = c.store.meta_i64(meta::UPDATES_CURSOR)?.unwrap_or(0);
                // Asked of every server: one without the feature ignores it and
                // answers no receivedCursor (docs/protocol.md, poll).
                let received_since = c.store.meta_i64(meta::RECEIVED_CURSOR)?.unwrap_or(0);
                // Lease heartbeats and releases ride the first round's poll (no extra request).
                let (lease, lease_releases) = if round == 0 {
                    let (arg, releases) = c.lease_poll_arg(now)?;
                    (Some(arg), releases)
                } else {
                    (None, vec![])
                };
                // This PC's live sessions ride the cycle's first poll (feature
                // `sessions`); a later round follows it by milliseconds (to
                // confirm what it brought, or fetch the rest), and a poll
                // without them leaves the server's list as it was.
                let sessions =
                    if round == 0 { Some(c.live_sessions(now)?.into_iter().map(Ok).collect()) } else { None };
                // Jobs: the whitelist, heartbeats of running jobs, queued reports (first round only).
                let job = if round == 0 { c.job_poll_arg()? } else { None };
                let asked = Asked { confirm, due, since, received_since, lease, lease_releases, sessions, job };
                Ok((asked, marks_dropped, work))
            })?;
            let (
                Asked { confirm, due, since, received_since, lease, lease_releases, sessions, job },
                marks_dropped,
                work,
            ) = asked;
            report.marks_dropped += marks_dropped;
            if let Some(work) = work.filter(|w| w.outbox || w.ungranted_leases || w.job_runs) {
                steps_done = true;
                self.steps_before_the_first_request(work, report)?;
                // Read again, as the same round (`first` is false now).
                next_round = round;
                continue;
            }
            let idle = confirm.is_empty()
                && due.is_empty()
                && lease_releases.is_empty()
                && job.as_ref().is_none_or(|j| j.reports.is_empty() && j.whitelist.is_none());
            let wait_ms = self.job_wait_ms(wait_ms);
            let args = PollArgs {
                confirm: confirm.clone(),
                marks: due.iter().map(|p| Ok(p.mark.clone())).collect(),
                limit: limits::POLL_LIMIT_DEFAULT,
                since,
                wait_ms: if round == 0 && idle && self.transport.long_poll() { wait_ms } else { 0 },
                lease,
                received_since: Some(received_since),
                job: job.clone(),
                sessions,
            };
            let op = Op::Poll(args);
            let resp = match self.transport.call(&op) {
                Err(CallError::Server(p)) if p.code == ErrorCode::UnknownPc => {
                    self.register_self()?;
                    continue;
                }
                other => other?,
            };
            report.round_trips += 1;
            // A long poll may have waited: stamp what follows with the answer's time.
            let now = self.now();
            let asked = Asked { confirm, due, since, received_since, lease: None, lease_releases, sessions: None, job };
            let applied = self.batch(|c| c.apply_poll_answer(&op, resp, round, &asked, now, report))?;
            // Jobs after the answer's transaction: taking an offered job
            // writes it down (committed) before it asks the server to start it.
            if let Some(a) = applied.job {
                self.apply_job_answer(Some(a), asked.job.as_ref(), now)?;
            }
            // Test hook: die like a killed poller between storing and confirming.
            if !report.stored.is_empty() && std::env::var("PCMAIL_FAULT").as_deref() == Ok("exit-after-store") {
                std::process::exit(137);
            }
            if applied.roster_moved {
                self.refresh_roster()?;
                report.roster_refreshed = true;
            }
            if applied.succeeded {
                return Ok(true);
            }
            if applied.done {
                break;
            }
        }
        // The server answers again: what waited in backoff goes now.
        self.flush_outbox(report, true)?;
        if report.cursor_reset {
            self.refresh_open_sent()?;
        }
        if report.received_cursor_reset {
            self.refresh_open_received()?;
        }
        Ok(false)
    }

    /// What a cycle does before its first request when the first round's
    /// read says it may have work: queued mail sent, leases claimed offline
    /// claimed again (same claim id), the runs a gone executor left
    /// reported. Each reads again for its own and may wait on the network.
    fn steps_before_the_first_request(
        &mut self,
        work: pcmail_store::CycleStartWork,
        report: &mut CycleReport,
    ) -> Result<(), ClientError> {
        if work.outbox {
            self.flush_outbox(report, false)?;
        }
        if work.ungranted_leases {
            self.confirm_unconfirmed()?;
        }
        if work.job_runs {
            self.job_recover_orphans(self.now())?;
        }
        Ok(())
    }

    /// Writes what one poll's answer brings (in the caller's transaction):
    /// confirms, mark results, leases, names, mail, the sent and received
    /// feeds, the cursors. Returns what must wait for the network or for
    /// the commit, and whether the rounds are done.
    fn apply_poll_answer(
        &mut self,
        op: &Op,
        resp: Value,
        round: usize,
        asked: &Asked,
        now: Millis,
        report: &mut CycleReport,
    ) -> Result<Applied, ClientError> {
        self.record_server_clock(&resp, now);
        let answer: PollAnswer = decode(op, resp)?;
        let since = asked.since;
        let received_since = asked.received_since;

        // Confirmed ids: stored here and known to the server.
        report.confirmed += answer.confirmed.len();
        self.store.mark_confirmed(&answer.confirmed, now)?;
        self.apply_mark_results(answer.marks.and_then(Lenient::ok), &asked.due, now, report)?;
        let job = if round == 0 {
            self.apply_lease_answer(answer.lease.and_then(Lenient::ok), &asked.lease_releases, now)?;
            answer.job.and_then(Lenient::ok)
        } else {
            None
        };

        // Names first: mail to a name is stored for the session holding it.
        report.withdrawn += self.apply_sessions_answer(answer.sessions.and_then(Lenient::ok))?;
        let fetched = answer.mail.len();
        for item in answer.mail {
            self.store_one(item, now, report);
        }

        let updates: Vec<Update> = answer.updates.ok().unwrap_or_default();
        for u in &updates {
            self.store.sent_apply_update(u)?;
        }
        report.updates += updates.len();
        // The server's record of mail this PC received: its times, its own
        // changes (`expired`), recorded in the store's timeline.
        if let Some(rc) = answer.received_cursor {
            let received: Vec<ReceivedUpdate> = answer.received_updates.and_then(Lenient::ok).unwrap_or_default();
            self.store.apply_received_updates(&received)?;
            report.received_updates += received.len();
            let reset = answer.received_cursor_reset;
            // Entries between the pruned point and here may be lost: the
            // open received mail is re-read after the rounds.
            report.received_cursor_reset |= reset;
            if rc > received_since || reset {
                self.store.meta_set_i64(meta::RECEIVED_CURSOR, rc)?;
            }
        }
        if answer.cursor_reset {
            // The server pruned updates this PC had not read: re-read the
            // state of every open sent mail instead.
            report.cursor_reset = true;
        }
        if let Some(c) = answer.cursor {
            if c > since || report.cursor_reset {
                self.store.meta_set_i64(meta::UPDATES_CURSOR, c)?;
            }
        }
        let roster_moved = match answer.roster_version {
            Some(v) => self.store.meta_i64(meta::ROSTER_VERSION)? != Some(v),
            None => false,
        };
        // Another round only to confirm what we just stored or fetch the
        // rest. When nothing was fetched and the confirms left are the
        // ones the server just did not take (mail it no longer has), stop
        // rather than spin: they go with the next cycle.
        let mut done = false;
        if fetched == 0 && !answer.more {
            let left = self.store.unconfirmed_ids(limits::POLL_LIMIT_MAX)?;
            done = left.is_empty() || left == asked.confirm;
        }
        // The last round with nothing left for after the rounds (no job
        // answer, roster or re-read to fetch, no queued mail to send, no
        // sweep due): the cycle's success is written with this answer.
        let succeeded = done
            && job.is_none()
            && !roster_moved
            && !report.cursor_reset
            && !report.received_cursor_reset
            && self.store.outbox_is_empty()?
            && !self.sweep_due(self.now());
        if succeeded {
            self.record_success(report)?;
        }
        Ok(Applied { job, roster_moved, done, succeeded })
    }

    /// Validates and stores one fetched mail in its own transaction. A
    /// validation error quarantines it and queues a `fail`; an I/O error
    /// leaves it unconfirmed so the next cycle fetches it again.
    fn store_one(&mut self, item: Lenient<Mail>, now: Millis, report: &mut CycleReport) {
        let me = self.config.label.clone();
        let raw = serde_json::to_value(&item).unwrap_or(Value::Null);
        let mail: Result<Mail, String> = match item {
            Lenient::Ok(m) => {
                // Mail to a name this PC holds is checked as addressed to it.
                let to =
                    if m.to != me && self.store.holds_name(&m.to).unwrap_or(false) { m.to.clone() } else { me.clone() };
                validate_incoming(&m, &to).map(|()| m)
            }
            Lenient::Bad { error, .. } => Err(format!("malformed mail: {error}")),
        };
        match mail {
            Ok(m) => match self.store.write(|tx| inbox::insert_received(tx, &m, now)) {
                Ok(true) => report.stored.push(m.id.clone()),
                Ok(false) => {}
                Err(e) => tracing::warn!("could not store {}: {e}; it will come again", m.id),
            },
            Err(reason) => {
                let id = raw.get("id").and_then(Value::as_str).unwrap_or("").to_string();
                let raw_s = raw.to_string();
                let res = self.store.write(|tx| {
                    tx.execute(
                        "INSERT OR REPLACE INTO quarantine (id, raw, reason, at) VALUES (?1, ?2, ?3, ?4)",
                        rusqlite::params![
                            if id.is_empty() { format!("unknown-{now}") } else { id.clone() },
                            raw_s,
                            reason,
                            now
                        ],
                    )?;
                    if is_valid_any_id(&id) {
                        marks::queue(tx, &id, MarkOp::Fail, now, &me, Some(&format!("quarantined by {me}: {reason}")))?;
                    }
                    Ok(())
                });
                if res.is_ok() {
                    report.quarantined.push(id);
                }
            }
        }
    }

    fn apply_mark_results(
        &mut self,
        results: Option<Vec<MarkResult>>,
        sent: &[pcmail_store::PendingMark],
        now: Millis,
        report: &mut CycleReport,
    ) -> Result<(), ClientError> {
        if sent.is_empty() {
            return Ok(());
        }
        let Some(results) = results else {
            // An old server that ignores marks: back off an hour, give up after 5.
            for p in sent {
                if self.store.mark_retry_later(
                    &p.mark.mark_id,
                    "the server did not take marks",
                    now + UNKNOWN_OP_BACKOFF_MS,
                    UNKNOWN_OP_MAX_TRIES,
                    now,
                )? {
                    report.marks_dropped += 1;
                }
            }
            return Ok(());
        };
        self.apply_results(results, sent, now, report)
    }

    /// Applies the server's answer for each mark sent: done, or refused (final
    /// for that mark: dropped with a record `pcmail doctor` shows). A result is
    /// matched by its `index` in the request, else by `markId`.
    pub(crate) fn apply_results(
        &mut self,
        results: Vec<MarkResult>,
        sent: &[pcmail_store::PendingMark],
        now: Millis,
        report: &mut CycleReport,
    ) -> Result<(), ClientError> {
        let mut done = vec![];
        for r in results {
            let mark_id = match r.index.and_then(|i| sent.get(i)) {
                Some(p) => p.mark.mark_id.clone(),
                None => match r.mark_id {
                    Some(m) => m,
                    None => continue,
                },
            };
            if r.ok {
                done.push(mark_id);
            } else {
                // not_found / forbidden / bad_request are final for this mark.
                let why = format!(
                    "server refused: {}{}",
                    r.code.unwrap_or_default(),
                    r.message.map(|m| format!(" ({m})")).unwrap_or_default()
                );
                self.store.drop_mark(&mark_id, &why, now)?;
                report.marks_dropped += 1;
            }
        }
        report.marks_sent += done.len();
        self.store.mark_done(&done)?;
        Ok(())
    }

    /// Keeps this PC's offset from the server's clock (the truth for expiry):
    /// `now` of an answer minus the local time it arrived.
    /// An offset within `SERVER_OFFSET_SLACK_MS` of the kept one is not
    /// written again: each answer measures it give or take the request's
    /// travel, and a write per answer moved nothing anyone judges by.
    pub(crate) fn record_server_clock(&mut self, resp: &Value, local_now: Millis) {
        if let Some(server_now) = resp.get("now").and_then(Value::as_i64) {
            let offset = server_now - local_now;
            let kept = self.store.meta_i64(meta::SERVER_OFFSET_MS).ok().flatten();
            if kept.is_none_or(|k| (k - offset).abs() >= SERVER_OFFSET_SLACK_MS) {
                let _ = self.store.meta_set_i64(meta::SERVER_OFFSET_MS, offset);
            }
        }
    }

    /// Sends what was queued while the server was unreachable.
    /// Sends every queued mail now (used by commands that must not run a
    /// whole cycle: a cycle claims notifications only a poller delivers).
    pub fn send_queued(&mut self) -> Result<CycleReport, ClientError> {
        let mut report = CycleReport::default();
        self.flush_outbox(&mut report, true)?;
        Ok(report)
    }

    fn flush_outbox(&mut self, report: &mut CycleReport, all: bool) -> Result<(), ClientError> {
        let now = self.now();
        let queued = if all { self.store.outbox_all()? } else { self.store.outbox_due(now)? };
        for q in queued {
            // Expiry counts from when the mail was written, not from when the
            // server could finally take it: subtract the time it waited here.
            let mut mail = q.mail.clone();
            if let Some(d) = mail.expires_in {
                let left = d - (now - q.queued_at).max(0);
                if left <= 0 {
                    self.store.outbox_expired(&q.mail, now)?;
                    report.outbox_expired.push(q.mail.id.clone());
                    continue;
                }
                mail.expires_in = Some(left);
            }
            // Settled with the sent record: also the row that listed it as
            // queued, when its id was regenerated.
            match self.send_prepared(&mail, !q.regenerated, &q.mail.id) {
                Ok(out) => report.outbox_sent.extend(out.ids),
                Err(ClientError::Call(e)) if e.is_transient() => {
                    let backoff = crate::backoff::backoff_ms(q.attempts as u32 + 1);
                    self.store.outbox_retry_later(&q.mail.id, &e.to_string(), now + backoff)?;
                    report.outbox_left += 1;
                    return Err(ClientError::Call(e));
                }
                Err(e) => {
                    // Final refusal (e.g. the recipient left the roster): keep a record in sent.
                    tracing::warn!("queued mail {} was refused: {e}", q.mail.id);
                    self.store.outbox_remove(&q.mail.id)?;
                }
            }
        }
        Ok(())
    }

    /// Re-reads the server's state of every sent mail that is not final.
    pub fn refresh_open_sent(&mut self) -> Result<(), ClientError> {
        let open: Vec<String> = self
            .store
            .sent_list(10_000)?
            .into_iter()
            .filter(|m| !m.state.is_final() && m.queued.is_none())
            .map(|m| m.id)
            .collect();
        for chunk in open.chunks(limits::STATUS_IDS_MAX) {
            self.status(chunk)?;
        }
        Ok(())
    }

    /// Re-reads the server's state of every open mail this PC received
    /// (`status`; its timeline goes to the store), after the received feed
    /// was pruned past this PC's cursor.
    pub fn refresh_open_received(&mut self) -> Result<(), ClientError> {
        let open: Vec<String> = self
            .store
            .inbox_list(&[State::New, State::Delivered, State::Seen], 10_000)?
            .into_iter()
            .map(|m| m.id)
            .collect();
        for chunk in open.chunks(limits::STATUS_IDS_MAX) {
            self.status(chunk)?;
        }
        Ok(())
    }

    pub fn register_self(&mut self) -> Result<(), ClientError> {
        self.register_self_as(false)
    }

    /// Puts this PC on the roster and, against a server that binds labels,
    /// claims its label with this installation's credential (made and kept
    /// in the keyring first). `replace` takes a label bound to another
    /// installation over; that one loses access.
    pub fn register_self_as(&mut self, replace: bool) -> Result<(), ClientError> {
        let claim = self.transport.binds_labels();
        if claim {
            let cred = self.claim_credential()?;
            self.transport.set_credential(Some(cred));
        }
        let hostname = roster_hostname(&pcmail_local::config::hostname(), &self.config.label);
        let op = Op::RosterSet {
            label: self.config.label.clone(),
            hostname: hostname.clone(),
            number: None,
            claim,
            replace,
        };
        let mut note = None;
        let done = match self.transport.call(&op) {
            Ok(v) => Ok((op, v)),
            // Hostnames are unique on the roster, and another label holds this
            // one (two PCMAIL_HOMEs on one machine, or this machine's earlier
            // label). The documented rule: `<hostname>.<label>`, said out loud
            // (init, roster, doctor) with the label that holds the real one.
            Err(CallError::Server(p)) if p.code == ErrorCode::Conflict => {
                let listed = format!("{}.{}", hostname, self.config.label);
                let holder = self.hostname_holder(&hostname).unwrap_or_else(|| "another PC".into());
                note = Some(format!(
                    "hostname {hostname:?} is already on the roster for {holder}, so this PC is listed as {listed:?} \
                     (hostnames are unique on the roster; if {holder} is gone: `pcmail roster remove {holder}`, then `pcmail init`)"
                ));
                let op =
                    Op::RosterSet { label: self.config.label.clone(), hostname: listed, number: None, claim, replace };
                let v = self.transport.call(&op)?;
                Ok((op, v))
            }
            Err(e) => Err(ClientError::from(e)),
        };
        let (op, resp) = done?;
        match &note {
            Some(n) => self.store.meta_set(meta::HOSTNAME_NOTE, n)?,
            None => self.store.meta_del(meta::HOSTNAME_NOTE)?,
        }
        if claim {
            // A server without label binding ignores the claim: noted, so it is not asked again.
            let bound = decode::<RosterSetAnswer>(&op, resp)?.bound == Some(true);
            let value = format!("{}\t{}", self.claim_key(), if bound { "bound" } else { "unsupported" });
            self.store.meta_set(LABEL_CLAIMED, &value)?;
        }
        Ok(())
    }

    /// The label that holds `hostname` on the roster (hostnames compare
    /// without case, as the servers do).
    fn hostname_holder(&self, hostname: &str) -> Option<String> {
        let a: RosterAnswer = call_as(self.transport.as_ref(), &Op::RosterGet).ok()?;
        a.pcs
            .into_iter()
            .find(|p| p.hostname.eq_ignore_ascii_case(hostname) && p.label != self.config.label)
            .map(|p| p.label)
    }

    /// What a claim is for: this label on this server.
    pub fn claim_key(&self) -> String {
        format!("{}@{}", self.config.label, self.config.server.describe())
    }

    /// True when this installation has claimed its label on this server
    /// and the server bound it.
    pub fn label_claimed(&self) -> bool {
        self.claim_record().as_deref() == Some("bound")
    }

    /// How the last claim of this label on this server went: `bound`, or
    /// `unsupported` (a server without label binding); None = never claimed.
    pub fn claim_record(&self) -> Option<String> {
        let v = self.store.meta_get(LABEL_CLAIMED).ok().flatten()?;
        let (key, outcome) = v.split_once('\t')?;
        (key == self.claim_key()).then(|| outcome.to_string())
    }

    /// The credential to claim with: this installation's, or a new one kept
    /// in the keyring before it is sent.
    fn claim_credential(&mut self) -> Result<String, ClientError> {
        let url = match &self.config.server {
            pcmail_local::config::ServerConfig::Http { url }
            | pcmail_local::config::ServerConfig::AppsScript { url } => url.clone(),
            pcmail_local::config::ServerConfig::Embedded { .. } => {
                return Err(ClientError::Invalid("the embedded server binds no labels".into()))
            }
        };
        let installation = self.installation_id()?;
        Ok(crate::token::credential::for_claim(&url, &self.config.label, &installation)?.0)
    }

    /// This installation's id, made (and saved in config.toml) on first need.
    /// Read from the file first: a long-running daemon must neither make a
    /// second id nor write back a config that `init` has changed since.
    pub fn installation_id(&mut self) -> Result<String, ClientError> {
        if let Some(id) = &self.config.installation {
            return Ok(id.clone());
        }
        let mut on_disk = pcmail_local::config::Config::load(&self.paths)?;
        let id = match &on_disk.installation {
            Some(id) => id.clone(),
            None => {
                let id = pcmail_core::protocol::new_credential(&mut rand::rng())[..16].to_string();
                on_disk.installation = Some(id.clone());
                on_disk.save(&self.paths)?;
                id
            }
        };
        self.config.installation = Some(id.clone());
        Ok(id)
    }

    /// A PC registered before labels were bound claims its label once, on
    /// its next poll (migration). With nowhere to keep a credential it goes
    /// on unbound, as before, rather than stop its mail.
    fn claim_label_once(&mut self) -> Result<(), ClientError> {
        if self.label_claim_seen || !self.transport.binds_labels() {
            return Ok(());
        }
        if self.claim_record().is_some() {
            self.label_claim_seen = true;
            return Ok(());
        }
        match self.register_self() {
            Err(ClientError::Token(e)) => {
                tracing::warn!("this PC's label stays unbound: {e}");
                Ok(())
            }
            other => other,
        }
    }

    pub fn refresh_roster(&mut self) -> Result<Vec<Pc>, ClientError> {
        let RosterAnswer { pcs, version } = call_as(self.transport.as_ref(), &Op::RosterGet)?;
        self.store.roster_replace(&pcs, version, self.now())?;
        Ok(pcs)
    }

    /// The embedded server has no timer of its own: whoever polls sweeps it
    /// when due. Alerts are cached for the CLI and the tray every 10 minutes.
    fn sweep_due(&self, now: Millis) -> bool {
        self.store.meta_i64(meta::LAST_SWEEP_AT).ok().flatten().is_none_or(|t| now - t >= limits::SWEEP_EVERY_MS)
    }

    fn sweep_and_alerts(&mut self, now: Millis) {
        if matches!(self.config.server, pcmail_local::config::ServerConfig::Embedded { .. }) {
            let _ = self.transport.call(&Op::Sweep);
            self.transport.prune(now);
        }
        let retention = self.config.retention_ms();
        if let Err(e) = self.store.prune_final(now, retention) {
            tracing::warn!("retention: {e}");
        }
        // Job logs by the same window; a store that cannot list its runs keeps them all.
        if let Ok(runs) = self.store.job_runs() {
            let running: Vec<String> = runs.into_iter().map(|r| r.job_id).collect();
            crate::jobs::jobrun::prune_files(&self.paths.home, now - retention, &running);
        }
        if let Ok(a) = call_as::<AlertsAnswer>(self.transport.as_ref(), &Op::Alerts { open_only: true }) {
            let _ = self.store.alerts_replace(&a.alerts);
        }
        let _ = self.store.meta_set_i64(meta::LAST_SWEEP_AT, now);
    }
}

/// The hostname a PC registers: the machine's, kept to the roster's
/// characters (`[A-Za-z0-9._-]`), or the label when nothing is left.
pub fn roster_hostname(host: &str, label: &str) -> String {
    let h: String =
        host.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')).take(253).collect();
    if h.is_empty() {
        label.to_string()
    } else {
        h
    }
}

/// What a receiving PC checks before it stores a mail.
pub fn validate_incoming(m: &Mail, me: &str) -> Result<(), String> {
    if !is_valid_any_id(&m.id) {
        return Err(format!("bad id {:?}", m.id));
    }
    if m.to != me {
        return Err(format!("addressed to {:?}, not {me:?}", m.to));
    }
    if !pcmail_core::roster::is_valid_label(&m.from) {
        return Err(format!("bad sender {:?}", m.from));
    }
    if m.body.chars().count() > limits::BODY_MAX_CHARS || m.subject.chars().count() > limits::SUBJECT_MAX_CHARS {
        return Err("mail text over the size limit".into());
    }
    if m.body.contains('\0') || m.subject.contains('\0') {
        return Err("mail text contains NUL".into());
    }
    Ok(())
}
