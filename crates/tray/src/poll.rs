//! The server side of the tray, behind a trait: an adapter over
//! `pcmail-client` in the app, a fake in the tests. Plus the poll loop's
//! decision (whose turn, when), kept pure so it is tested.

use pcmail_core::job::Job;
use pcmail_core::sessions::WhoAnswer;
use pcmail_core::Millis;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyError {
    /// The mail is itself a reply: refused (the CLI's exit 3).
    ReplyToReply,
    NotFound,
    /// Could not reach the server now; `queued` when the reply waits in the outbox.
    Offline {
        queued: bool,
        message: String,
    },
    Refused {
        code: String,
        message: String,
    },
}

pub trait Remote: Send + Sync {
    /// One sync cycle of the receiving PC (the client crate's cycle: confirm,
    /// marks, fetch, updates, alerts), writing to the store.
    fn sync_once(&self) -> Result<(), String>;
    /// A `pcmail daemon` (another process) already polls for this PC user.
    fn other_poller_alive(&self) -> bool;
    /// Acks a received mail (done without a reply) the way `pcmail ack` does
    /// (`pcmail_api::ack`: locally at once, to the server now if it answers).
    fn ack(&self, id: &str) -> Result<(), String>;
    /// Replies to `original` with the CLI's rules; returns the reply id.
    fn reply(&self, original: &str, body: &str) -> Result<String, ReplyError>;
    /// Lease heartbeats: before each cycle, release the leases
    /// whose process exited; the renewals ride the cycle's poll.
    fn lease_heartbeat(&self, _now: Millis) {}
    /// Releases this PC's lease of `resource` the way `pcmail lease release`
    /// does (`pcmail_api::lease_release`: to the server now, else queued for
    /// the next poll).
    fn lease_release(&self, resource: &str) -> Result<LeaseReleased, String> {
        Err(format!("cannot release lease {resource} here"))
    }
    /// Every live session on every PC, as `pcmail who` asks the server
    /// (`pcmail_api::sessions::who`).
    fn who(&self) -> Result<WhoAnswer, RemoteFailure> {
        Err(RemoteFailure::unsupported("sessions"))
    }
    /// The jobs this PC submitted or joined and those it runs as executor,
    /// newest first, as `pcmail job list` asks (`pcmail_api::jobs::job_list`).
    fn jobs(&self) -> Result<Vec<Job>, RemoteFailure> {
        Err(RemoteFailure::unsupported("jobs"))
    }
    /// Cancels a job as `pcmail job cancel` does (`pcmail_api::jobs::job_cancel`).
    fn job_cancel(&self, job_id: &str) -> Result<Job, RemoteFailure> {
        Err(RemoteFailure { code: "unsupported".into(), message: format!("cannot cancel {job_id} here") })
    }
}

/// Why a call to the server did not answer: `code` is the CLI's (the
/// `pcmail_api::ApiError::code`): `unreachable` when the server could not be
/// reached (the views then say "offline"), `unsupported`, `not_found`, …
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteFailure {
    pub code: String,
    pub message: String,
}

impl RemoteFailure {
    pub fn offline(message: impl Into<String>) -> RemoteFailure {
        RemoteFailure { code: "unreachable".into(), message: message.into() }
    }
    pub fn unsupported(feature: &str) -> RemoteFailure {
        RemoteFailure { code: "unsupported".into(), message: format!("this server does not support {feature}") }
    }
    /// The server could not be reached (as opposed to: it answered no).
    pub fn is_offline(&self) -> bool {
        self.code == "unreachable"
    }
}

/// What a release from the window did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct LeaseReleased {
    /// The server ended the lease now (false: it was no longer held there).
    pub released: bool,
    /// The server was unreachable: the release goes with the next poll.
    pub queued: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollStep {
    /// Run one cycle now.
    Cycle,
    /// A daemon polls: do not start a second poller; look again after this long.
    Daemon { recheck_ms: Millis },
    /// Nothing to do before this many ms.
    Wait { ms: Millis },
}

/// The loop's next step. `last_cycle_at` is the end of our last cycle;
/// `asked` is a "Poll now" from the menu or the window.
pub fn next_step(
    now: Millis,
    last_cycle_at: Option<Millis>,
    interval_ms: Millis,
    daemon_alive: bool,
    asked: bool,
) -> PollStep {
    if daemon_alive {
        return PollStep::Daemon { recheck_ms: 30_000 };
    }
    if asked {
        return PollStep::Cycle;
    }
    match last_cycle_at {
        None => PollStep::Cycle,
        Some(t) if now - t >= interval_ms => PollStep::Cycle,
        Some(t) => PollStep::Wait { ms: interval_ms - (now - t) },
    }
}
