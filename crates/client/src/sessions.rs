//! Sessions and names on the PC: the live sessions the poll
//! reports (from the session registry the hook keeps), the names the answer
//! says this PC holds, mail withdrawn because its name moved away, and the
//! `name.take` and `who` ops.

use crate::transport::CallError;
use crate::{Client, ClientError};
use pcmail_core::protocol::Op;
use pcmail_core::sessions::{clean_live_list, LiveSession, PollSessionsAnswer, TakeAnswer, WhoAnswer};
use pcmail_core::Millis;
use pcmail_local::process::ProcId;
use pcmail_store::leases as sl;
use serde_json::Value;

/// A session without a recorded process (not under Claude Code) counts as
/// live this long after its last prompt.
pub const NO_PROCESS_LIVE_MS: Millis = 30 * 60_000;

impl Client {
    /// This PC's live sessions: registry rows not ended whose Claude Code
    /// process still runs (the newest id of each process: `/clear` and
    /// `--resume` give a process a new one), with idle time and leases held.
    /// Each passes the servers' own check ([`clean_live_list`]): a row a hook
    /// filled with what the servers refuse never stops this PC's polls.
    pub fn live_sessions(&mut self, now: Millis) -> Result<Vec<LiveSession>, ClientError> {
        let rows = sl::sessions_open(self.store.conn(), 1_000)?;
        let leases = self.store.leases_mine()?;
        let mut seen_procs: Vec<(i64, Option<i64>)> = vec![];
        let (mut out, mut exited, mut quiet) = (vec![], vec![], vec![]);
        // Newest first: the first row of a process is its current session.
        for r in rows {
            let last = r.last_prompt_at.unwrap_or(r.started_at).max(r.started_at);
            match r.pid {
                Some(pid) => {
                    if seen_procs.contains(&(pid, r.pid_start)) {
                        continue;
                    }
                    if !(ProcId { pid, start: r.pid_start }).alive() {
                        exited.push(r.session);
                        continue;
                    }
                    seen_procs.push((pid, r.pid_start));
                }
                None if now - last > NO_PROCESS_LIVE_MS => {
                    quiet.push(r.session);
                    continue;
                }
                None => {}
            }
            let mut held: Vec<String> = leases
                .iter()
                .filter(|l| l.session == r.session && l.release_queued_at.is_none() && l.fence.is_some_and(|f| f > 0))
                .map(|l| l.resource.clone())
                .collect();
            held.sort();
            held.dedup();
            out.push(LiveSession {
                session: r.session,
                repo: r.repo,
                branch: r.branch,
                cwd: r.cwd,
                idle_ms: (now - last).max(0),
                leases: held,
            });
            if out.len() == pcmail_core::sessions::SESSIONS_MAX {
                break;
            }
        }
        // A session killed with its terminal never sees SessionEnd: ended
        // here, once, instead of looked up in /proc at every poll round.
        if !exited.is_empty() || !quiet.is_empty() {
            self.store.write(|tx| {
                sl::sessions_mark_gone(tx, &exited, "process gone", now)?;
                sl::sessions_mark_gone(tx, &quiet, "quiet", now)
            })?;
        }
        Ok(clean_live_list(out))
    }

    /// Applies the poll's `sessions` answer: the names held here, and mail
    /// to drop because its name moved to another PC. Returns how many were withdrawn.
    pub(crate) fn apply_sessions_answer(&mut self, answer: Option<PollSessionsAnswer>) -> Result<usize, ClientError> {
        let Some(a) = answer else {
            return Ok(0);
        };
        let held: Vec<(String, String)> = a.names.iter().map(|h| (h.name.clone(), h.session.clone())).collect();
        self.store.names_replace(&held)?;
        Ok(self.store.withdraw(&a.withdrawn)?)
    }

    /// `name.take` for `session` of this PC, with this PC's live sessions.
    pub fn name_take(&mut self, name: &str, session: &str) -> Result<TakeAnswer, ClientError> {
        pcmail_core::sessions::check_name("name", name).map_err(|e| ClientError::Invalid(e.message))?;
        // The id as the hook records it (cleaned the same way), so the name is this session's.
        let session = pcmail_core::rules::clean_session_id(session.trim())
            .ok_or_else(|| ClientError::Invalid("a session id must not be blank".into()))?;
        let session = session.as_str();
        let now = self.now();
        let mut live = self.live_sessions(now)?;
        // The session asking is live: it is running this command.
        if !live.iter().any(|s| s.session == session) {
            live.push(LiveSession { session: session.to_string(), ..Default::default() });
        }
        let live = clean_live_list(live).into_iter().map(Ok).collect();
        let op = Op::NameTake { name: name.to_string(), session: session.to_string(), live: Some(live) };
        let v = self.call_registered_op(&op)?;
        let a: TakeAnswer = serde_json::from_value(v)
            .map_err(|e| ClientError::Invalid(format!("name.take: unexpected answer: {e}")))?;
        // The names this PC holds now, before the next poll says so.
        let mut held = self.store.names()?;
        held.retain(|(n, _)| n != name);
        held.push((name.to_string(), session.to_string()));
        self.store.names_replace(&held)?;
        Ok(a)
    }

    /// `who`: every live session on every PC, from the server.
    pub fn who(&mut self) -> Result<WhoAnswer, ClientError> {
        let v = self.call_registered_op(&Op::Who)?;
        serde_json::from_value(v).map_err(|e| ClientError::Invalid(format!("who: unexpected answer: {e}")))
    }

    /// An op; a PC the server does not know yet registers itself first.
    fn call_registered_op(&mut self, op: &Op) -> Result<Value, ClientError> {
        match self.transport.call(op) {
            Err(CallError::Server(p)) if p.code == pcmail_core::ErrorCode::UnknownPc => {
                self.register_self()?;
                Ok(self.transport.call(op)?)
            }
            other => Ok(other?),
        }
    }
}
