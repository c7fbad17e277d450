//! What the CLI and the tray do on a person's or an agent's request.

use crate::sync::{CycleReport, UNKNOWN_OP_BACKOFF_MS, UNKNOWN_OP_MAX_TRIES};
use crate::transport::{decode, CallError};
use crate::{Client, ClientError};
use pcmail_core::answers::{MarkAnswer, SendAnswer, StatusAnswer};
use pcmail_core::error::Unresolved;
use pcmail_core::ids::{new_mail_id, reply_id};
use pcmail_core::protocol::Op;
use pcmail_core::protocol::FEATURE_MULTI_RECIPIENT;
use pcmail_core::roster::{resolve, Resolution};
use pcmail_core::{ErrorCode, Kind, Mail, MarkOp, Millis, OutgoingMail, State, To};
use pcmail_store::{inbox, marks, InboxMail};
use std::time::{Duration, Instant};

/// How long a mail being sent stays out of the pollers' way: longer than a
/// `send` request can take (30 s per server address, one retry after
/// registering), so only a sender that died leaves it for the next poll.
const IN_FLIGHT_GRACE_MS: Millis = 3 * 60 * 1000;

use crate::backoff::wait_interval;

/// What `status` found (the mails), which ids it did not find, and for mail
/// to a name nobody live holds, why it waits (id, the server's note).
pub type StatusNotingWaits = (Vec<Mail>, Vec<String>, Vec<(String, String)>);

#[derive(Debug, Clone, serde::Serialize)]
pub struct SendOutcome {
    pub ids: Vec<String>,
    /// The server was unreachable: queued locally, sent by the next cycle.
    pub queued: bool,
    /// The server already had this exact mail (a retry).
    pub existing: bool,
}

#[derive(Debug, Clone)]
pub struct Draft {
    /// What the user typed: one address, or several (each resolved exactly,
    /// all or nothing).
    pub to: To,
    pub kind: Kind,
    pub subject: String,
    pub body: String,
    pub urgent: bool,
    pub expires: Option<Expires>,
    pub auto: bool,
}

impl Default for Draft {
    fn default() -> Self {
        Draft {
            to: To::One(String::new()),
            kind: Kind::default(),
            subject: String::new(),
            body: String::new(),
            urgent: false,
            expires: None,
            auto: false,
        }
    }
}

/// When a mail should expire, as the user said it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expires {
    /// A duration from now (`--expires 30m`).
    In(Millis),
    /// A point in time (`--expires 2026-12-01T10:00:00Z`), read by the server's clock.
    At(Millis),
}

impl Client {
    /// Resolves what the user typed to a canonical label: the cached roster
    /// first (no round trip per send to a slow Apps Script server), the
    /// server's when the cache has no exact match. The server checks the
    /// label again, so a stale cache can only fail closed.
    pub fn resolve_recipient(&mut self, query: &str) -> Result<String, ClientError> {
        let me = self.config.label.clone();
        let cached = self.store.roster()?;
        if !cached.is_empty() {
            match resolve(&cached, query) {
                Resolution::Exact(l) => return Ok(l),
                Resolution::Broadcast if cached.iter().any(|p| p.label != me) => return Ok("*".into()),
                _ => {}
            }
        }
        let (mut pcs, reached) = match self.refresh_roster() {
            Ok(p) => (p, true),
            // A server this PC does not trust is not an outage: say so, not "unknown address".
            Err(ClientError::Call(e @ CallError::Untrusted(_))) => return Err(ClientError::Call(e)),
            Err(_) => (cached, false),
        };
        // This PC is on the roster from its first command, not its first poll.
        if !pcs.iter().any(|p| p.label == me) && self.register_self().is_ok() {
            pcs = self.refresh_roster().unwrap_or(pcs);
        }
        match resolve(&pcs, query) {
            Resolution::Exact(l) => Ok(l),
            Resolution::Broadcast if pcs.iter().any(|p| p.label != me) => Ok("*".into()),
            Resolution::Broadcast => Err(ClientError::NobodyElse),
            // Spelled as a label but no PC: maybe a session's name,
            // which only the server knows. It checks exactly and answers
            // `unknown_recipient` with candidates (names and labels) if not.
            Resolution::Unknown { .. } if reached && pcmail_core::roster::is_valid_label(query) => {
                Ok(query.to_string())
            }
            Resolution::Unknown { candidates } => Err(ClientError::Unresolved { query: query.into(), candidates }),
        }
    }

    /// Resolves every address the user typed, all or nothing: each must be
    /// exact, and when any is not, nothing is sent and every miss is named
    /// with its own candidates (exit 4). `*` is refused in a list (see
    /// `recipients::BROADCAST_IN_LIST`). Two spellings of one PC (`kim` and
    /// `KIM`) are one address; a list that comes down to one is a plain send.
    pub fn resolve_recipients(&mut self, to: &To) -> Result<To, ClientError> {
        let queries = match to {
            To::One(q) => return Ok(To::One(self.resolve_recipient(q)?)),
            To::Many(list) => list,
        };
        if queries.len() > 1 && queries.iter().any(|q| q.trim() == "*") {
            return Err(ClientError::Invalid(pcmail_core::recipients::BROADCAST_IN_LIST.into()));
        }
        let mut resolved: Vec<String> = Vec::new();
        let mut misses = Vec::new();
        for q in queries {
            match self.resolve_recipient(q) {
                Ok(label) if !resolved.contains(&label) => resolved.push(label),
                Ok(_) => {}
                Err(ClientError::Unresolved { query, candidates }) => misses.push(Unresolved { to: query, candidates }),
                Err(e) => return Err(e),
            }
        }
        if !misses.is_empty() {
            return Err(ClientError::UnresolvedMany(misses));
        }
        match resolved.len() {
            0 => Err(ClientError::Invalid("send needs an address".into())),
            1 => Ok(To::One(resolved.remove(0))),
            _ => {
                pcmail_core::recipients::check_list(&resolved).map_err(|e| ClientError::Invalid(e.message))?;
                Ok(To::Many(resolved))
            }
        }
    }

    /// A list of addresses needs a server that knows lists (feature
    /// `multi-recipient`): an older one is told apart here, before anything
    /// is queued, so the user hears it at once instead of a refusal later.
    /// A server that cannot be reached now is not asked: the mail is queued,
    /// and should it turn out old, it refuses the list (`bad_request`, shown
    /// in `pcmail sent`); it never delivers it to one address.
    fn require_lists(&mut self) -> Result<(), ClientError> {
        let op = Op::Hello;
        match self.transport.call(&op) {
            Ok(v) => {
                let hello: pcmail_core::answers::HelloAnswer = decode(&op, v).unwrap_or_default();
                if hello.features.is_some_and(|f| f.iter().any(|x| x == FEATURE_MULTI_RECIPIENT)) {
                    Ok(())
                } else {
                    Err(ClientError::Unsupported { feature: FEATURE_MULTI_RECIPIENT.into() })
                }
            }
            Err(e) if e.is_transient() => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// An expiry as the server wants it: a duration by its own clock.
    pub fn expires_in(&self, e: Expires) -> Result<Millis, ClientError> {
        let ms = match e {
            Expires::In(d) => d,
            Expires::At(t) => t - self.store.server_now(self.now()),
        };
        if ms <= 0 {
            return Err(ClientError::Invalid("--expires is already past (by the server's clock)".into()));
        }
        Ok(ms)
    }

    pub fn send(&mut self, draft: Draft) -> Result<SendOutcome, ClientError> {
        let expires_in = draft.expires.map(|e| self.expires_in(e)).transpose()?;
        let to = self.resolve_recipients(&draft.to)?;
        if to.is_list() {
            self.require_lists()?;
        }
        let now = self.now();
        // `subject_tags = "ja"`: the Japanese tag in front, for PCs that read subjects only.
        let subject = match self.config.subject_tags {
            Some(pcmail_local::config::SubjectTags::Ja) => draft.kind.tagged_subject(&draft.subject),
            None => draft.subject,
        };
        let mail = OutgoingMail {
            id: new_mail_id(now, &mut rand::rng()),
            to,
            kind: draft.kind,
            subject,
            body: draft.body,
            urgent: draft.urgent,
            expires_at: None,
            expires_in,
            in_reply_to: None,
            auto: draft.auto,
            hop: 0,
        };
        self.send_or_queue(mail)
    }

    /// Sends now, or queues locally when the server can't be reached.
    ///
    /// The mail is in the outbox before the request goes out and settled
    /// after the answer: a sender killed in between leaves it listed in
    /// `sent`, and the next poll sends it again under the same id (one mail
    /// on the server). A server that is not the one this PC trusts is no
    /// outage: nothing is queued for it and the caller is told (exit 6).
    pub(crate) fn send_or_queue(&mut self, mail: OutgoingMail) -> Result<SendOutcome, ClientError> {
        check_draft(&mail)?;
        let now = self.now();
        self.store.outbox_in_flight(&mail, now, now + IN_FLIGHT_GRACE_MS)?;
        match self.send_prepared(&mail, true, &mail.id) {
            Err(ClientError::Call(e @ CallError::Untrusted(_))) => {
                self.store.outbox_settle(&mail.id)?;
                Err(ClientError::Call(e))
            }
            Err(ClientError::Call(e)) if e.is_transient() => {
                self.store.outbox_unsent(&mail.id, &e.to_string(), self.now())?;
                Ok(SendOutcome { ids: vec![mail.id], queued: true, existing: false })
            }
            // Taken: its rows are in `sent` and the outbox row went with them.
            Ok(out) => Ok(out),
            Err(e) => {
                // Refused for good: out of the outbox.
                self.store.outbox_settle(&mail.id)?;
                Err(e)
            }
        }
    }

    /// One `send`; on `duplicate_id` (another mail has this id) a fresh id
    /// is made and the mail sent once more when `may_regenerate`.
    /// `settles`: the outbox row this send takes out once the server has it.
    pub(crate) fn send_prepared(
        &mut self,
        mail: &OutgoingMail,
        may_regenerate: bool,
        settles: &str,
    ) -> Result<SendOutcome, ClientError> {
        let op = Op::Send { mail: mail.clone() };
        let resp = match self.transport.call(&op) {
            Err(CallError::Server(p)) if p.code == ErrorCode::DuplicateId && may_regenerate => {
                let mut again = mail.clone();
                again.id = new_mail_id(self.now(), &mut rand::rng());
                return self.send_prepared(&again, false, settles);
            }
            Err(CallError::Server(p)) if p.code == ErrorCode::UnknownPc => {
                self.register_self()?;
                self.transport.call(&op)?
            }
            other => other?,
        };
        let SendAnswer { ids, existing } = decode(&op, resp)?;
        let rows = crate::sent_rows::SentRows {
            mail: mail.clone(),
            ids: ids.clone(),
            from: self.config.label.clone(),
            at: self.now(),
            settles: settles.to_string(),
        };
        if self.defer_sent_rows {
            self.deferred_sent.push(rows);
        } else {
            rows.record(&mut self.store)?;
        }
        Ok(SendOutcome { ids, queued: false, existing })
    }

    /// Writes the `sent` rows that [`Client::defer_sent_rows`] held back.
    pub fn settle_deferred(&mut self) -> Result<(), ClientError> {
        while let Some(rows) = self.deferred_sent.first() {
            rows.record(&mut self.store)?;
            self.deferred_sent.remove(0);
        }
        Ok(())
    }

    /// Replies to a mail in this PC's inbox. The reply id is fixed from the
    /// original and the sender, so a retried reply is one mail; a second reply
    /// with another body gets a fresh id. Replying to a reply is refused.
    pub fn reply(&mut self, original: &str, body: String, auto: bool) -> Result<SendOutcome, ClientError> {
        self.reply_to(original, body, auto, false)
    }

    /// [`Client::reply`], and with `all` to every other address of mail sent
    /// to several (`reply --all`): the sender first, then the others in the
    /// original's order, never this PC's own addresses. A reply goes to the
    /// sender only unless asked: answering everyone is a choice, not a default.
    pub fn reply_to(
        &mut self,
        original: &str,
        body: String,
        auto: bool,
        all: bool,
    ) -> Result<SendOutcome, ClientError> {
        let orig = self.store.inbox_get(original)?.ok_or_else(|| ClientError::NotFound(original.into()))?;
        if orig.in_reply_to.is_some() {
            return Err(ClientError::ReplyToReply { id: original.into() });
        }
        let me = self.config.label.clone();
        let to = match (&orig.recipients, all) {
            (Some(list), true) => {
                let mut to = pcmail_core::recipients::reply_all(&orig.from, list, &[me.as_str(), orig.to.as_str()]);
                if to.len() == 1 {
                    To::One(to.remove(0))
                } else {
                    self.require_lists()?;
                    To::Many(to)
                }
            }
            _ => To::One(orig.from.clone()),
        };
        let mail = OutgoingMail {
            id: reply_id(&orig.id, &me),
            to,
            kind: Kind::Note,
            subject: reply_subject(&orig.subject),
            body,
            urgent: false,
            expires_at: None,
            expires_in: None,
            in_reply_to: Some(orig.id.clone()),
            auto,
            hop: orig.hop + 1,
        };
        let out = self.send_or_queue(mail)?;
        let now = self.now();
        let by = me.clone();
        self.store.write(|tx| {
            inbox::advance(tx, &orig.id, State::Done, now, &by, None)?;
            // The timeline says why, as the server will: answered by this reply.
            let note = out.ids.first().map(|id| format!("reply:{id}"));
            pcmail_store::timeline::record_local(tx, &orig.id, State::Done, now, &by, note.as_deref())?;
            Ok(())
        })?;
        Ok(out)
    }

    /// Marks a mail of this PC's inbox (seen / ack / fail): locally at once,
    /// then to the server now if it answers, else with the next poll.
    /// A reason the server would refuse is refused here, before anything is
    /// queued (the same rule, from pcmail-core).
    pub fn mark(
        &mut self,
        id: &str,
        op: MarkOp,
        reason: Option<&str>,
        actor: Option<&str>,
    ) -> Result<State, ClientError> {
        let now = self.now();
        let by = pcmail_core::rules::sanitize_actor(actor.unwrap_or(&self.config.label));
        pcmail_core::rules::check_mark_text(op, &by, reason).map_err(|e| ClientError::Invalid(e.message))?;
        let state = self.store.write(|tx| {
            let s = inbox::advance(tx, id, op.target(), now, &by, reason)?;
            marks::queue(tx, id, op, now, &by, reason)?;
            Ok(s)
        });
        let state = match state {
            Err(pcmail_store::StoreError::NotFound(_)) => return Err(ClientError::NotFound(id.into())),
            other => other?,
        };
        let _ = self.flush_marks();
        Ok(state)
    }

    pub fn read(&mut self, id: &str, actor: Option<&str>) -> Result<InboxMail, ClientError> {
        if self.store.inbox_get(id)?.is_none() {
            return Err(ClientError::NotFound(id.into()));
        }
        self.mark(id, MarkOp::Seen, None, actor)?;
        // Read after the mark: the timeline shows this reading too.
        self.store.inbox_get(id)?.ok_or_else(|| ClientError::NotFound(id.into()))
    }

    /// Pushes due marks with the `mark` op. An old server that doesn't know
    /// the op: back off 1 h, drop with a record after 5 tries.
    pub fn flush_marks(&mut self) -> Result<CycleReport, ClientError> {
        let now = self.now();
        let due = self.store.due_marks(now, pcmail_core::model::limits::MARKS_MAX)?;
        let mut report = CycleReport::default();
        if due.is_empty() {
            return Ok(report);
        }
        let op = Op::Mark { marks: due.iter().map(|p| Ok(p.mark.clone())).collect() };
        match self.transport.call(&op) {
            Ok(resp) => {
                let a: MarkAnswer = decode(&op, resp).unwrap_or_default();
                // One commit for the marks taken and the ones refused.
                self.batch(|c| c.apply_results(a.results, &due, now, &mut report))?;
            }
            Err(CallError::Server(p)) if p.code == ErrorCode::UnknownOp => {
                for m in &due {
                    if self.store.mark_retry_later(
                        &m.mark.mark_id,
                        "unknown_op",
                        now + UNKNOWN_OP_BACKOFF_MS,
                        UNKNOWN_OP_MAX_TRIES,
                        now,
                    )? {
                        report.marks_dropped += 1;
                    }
                }
            }
            Err(e) => return Err(e.into()),
        }
        Ok(report)
    }

    /// The server's timeline for mail ids (refreshes the local sent cache).
    pub fn status(&mut self, ids: &[String]) -> Result<(Vec<Mail>, Vec<String>), ClientError> {
        self.status_noting_waits(ids).map(|(m, missing, _)| (m, missing))
    }

    /// `status`, and for mail to a name nobody live holds, why it waits
    /// (id → the server's note).
    pub fn status_noting_waits(&mut self, ids: &[String]) -> Result<StatusNotingWaits, ClientError> {
        let op = Op::Status { ids: ids.to_vec() };
        let resp = self.transport.call(&op)?;
        let now = self.now();
        self.record_server_clock(&resp, now);
        let StatusAnswer { mails, missing } = decode(&op, resp)?;
        let waiting: Vec<(String, String)> =
            mails.iter().filter_map(|m| Some((m.mail.id.clone(), m.waiting.clone()?))).collect();
        let mails: Vec<Mail> = mails.into_iter().map(|m| m.mail).collect();
        for m in &mails {
            let _ = self.store.sent_apply_status(m);
            // The same timeline in the store, for mail sent or received here.
            let _ = self.store.apply_status_timeline(m);
        }
        Ok((mails, missing, waiting))
    }

    /// Waits until every copy of `id` reached `wanted` (or a final state).
    pub fn wait_for(&mut self, id: &str, wanted: State, timeout: Duration) -> Result<Vec<Mail>, ClientError> {
        let start = Instant::now();
        let quota_bound = self.transport.quota_bound();
        let mut attempt = 0u32;
        loop {
            let (mails, _) = match self.status(&[id.to_string()]) {
                Ok(r) => r,
                Err(ClientError::Call(e)) if e.is_transient() && start.elapsed() < timeout => {
                    std::thread::sleep(Duration::from_millis(500));
                    continue;
                }
                Err(e) => return Err(e),
            };
            if mails.is_empty() {
                // Queued locally and not sent yet: push it.
                let _ = self.send_queued();
            } else if mails.iter().all(|m| m.state.rank() >= wanted.rank()) {
                return Ok(mails);
            }
            if start.elapsed() >= timeout {
                let state = mails.iter().map(|m| m.state.as_str()).collect::<Vec<_>>().join(",");
                return Err(ClientError::Timeout {
                    id: id.into(),
                    wanted: wanted.as_str().into(),
                    state: if state.is_empty() { "not on the server yet".into() } else { state },
                });
            }
            let left = timeout.saturating_sub(start.elapsed());
            std::thread::sleep(wait_interval(quota_bound, attempt).min(left.max(Duration::from_millis(1))));
            attempt += 1;
        }
    }
}

fn reply_subject(s: &str) -> String {
    // The request tags belong to the request, not to its answer.
    let s = s.replace(pcmail_core::DECISION_TAG, "").replace(pcmail_core::REQUEST_TAG, "");
    let s = s.trim();
    let out = if s.is_empty() || s.starts_with("Re:") { s.to_string() } else { format!("Re: {s}") };
    pcmail_core::present::truncate_chars(&out, pcmail_core::model::limits::SUBJECT_MAX_CHARS)
}

/// The checks the server would make, made first so a bad draft is never queued.
fn check_draft(mail: &OutgoingMail) -> Result<(), ClientError> {
    let req = pcmail_core::protocol::request_json("x", None, &Op::Send { mail: mail.clone() });
    pcmail_core::protocol::parse_request(&req).map(|_| ()).map_err(|e| ClientError::Invalid(e.message))
}
