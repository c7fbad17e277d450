//! `Remote` over `pcmail-client`: what the app asks of the server side, each
//! a call into the client crate (reply with the CLI's rules, flush marks,
//! one cycle, the "is a poller alive" check).

use crate::poll::{LeaseReleased, Remote, RemoteFailure, ReplyError};
use pcmail_client::Client;
use pcmail_core::job::Job;
use pcmail_core::sessions::WhoAnswer;
use pcmail_local::{config::Paths, locks};

/// `Remote` over `pcmail-client`: one `Client` for the window's operations
/// (the poll loop has its own, so a long-poll never blocks a reply).
pub struct ClientRemote {
    pub paths: Paths,
    ops: std::sync::Mutex<Option<Client>>,
}

impl ClientRemote {
    pub fn new(paths: Paths) -> ClientRemote {
        ClientRemote { paths, ops: std::sync::Mutex::new(None) }
    }
    /// Settings changed: open the client again on next use.
    pub fn reset(&self) {
        *self.ops.lock().unwrap() = None;
    }
    fn with<T>(&self, f: impl FnOnce(&mut Client) -> Result<T, String>) -> Result<T, String> {
        let mut g = self.ops.lock().unwrap();
        if g.is_none() {
            *g = Some(Client::open(self.paths.clone()).map_err(|e| e.to_string())?);
        }
        f(g.as_mut().unwrap())
    }
    /// Sends pending marks now (after ack/seen) instead of waiting for the
    /// poller's next round.
    pub fn flush_marks(&self) {
        let _ = self.with(|c| c.flush_marks().map(|_| ()).map_err(|e| e.to_string()));
    }
}

impl Remote for ClientRemote {
    fn sync_once(&self) -> Result<(), String> {
        self.with(|c| c.sync_once(0).map(|_| ()).map_err(|e| e.to_string()))
    }
    fn other_poller_alive(&self) -> bool {
        locks::poller_alive(&self.paths)
    }
    fn ack(&self, id: &str) -> Result<(), String> {
        self.with(|c| {
            pcmail_api::ack(c, &pcmail_api::IdArgs { id: id.to_string() }).map(|_| ()).map_err(|e| e.to_string())
        })
    }
    fn reply(&self, original: &str, body: &str) -> Result<String, ReplyError> {
        let mut g = self.ops.lock().unwrap();
        if g.is_none() {
            *g = Some(
                Client::open(self.paths.clone())
                    .map_err(|e| ReplyError::Offline { queued: false, message: e.to_string() })?,
            );
        }
        let c = g.as_mut().unwrap();
        match c.reply(original, body.to_string(), false) {
            Ok(out) => Ok(out.ids.into_iter().next().unwrap_or_default()),
            Err(pcmail_client::ClientError::ReplyToReply { .. }) => Err(ReplyError::ReplyToReply),
            Err(pcmail_client::ClientError::NotFound(_)) => Err(ReplyError::NotFound),
            Err(e) => match e.refused() {
                Some(p) => Err(ReplyError::Refused { code: p.code.as_str().to_string(), message: p.message.clone() }),
                None => Err(ReplyError::Offline { queued: false, message: e.to_string() }),
            },
        }
    }
    /// Called once per loop turn while this app is the poller, before its
    /// cycle: queues the release of every lease whose process exited (the
    /// cycle then sends it; the renewals of the live ones ride that poll).
    fn lease_release(&self, resource: &str) -> Result<LeaseReleased, String> {
        let args = pcmail_api::leases::LeaseReleaseArgs {
            resource: resource.to_string(),
            reason: Some("released from the tray".into()),
        };
        let done = self.with(|c| pcmail_api::leases::lease_release(c, &args).map_err(|e| e.to_string()))?;
        Ok(LeaseReleased {
            released: done.released.iter().any(|d| d.released),
            queued: done.released.iter().any(|d| d.queued),
        })
    }
    fn lease_heartbeat(&self, now: i64) {
        let _ = self.with(|c| c.lease_liveness(now).map(|_| ()).map_err(|e| e.to_string()));
    }
    fn who(&self) -> Result<WhoAnswer, RemoteFailure> {
        self.api(|c| pcmail_api::sessions::who(c, &pcmail_api::sessions::WhoArgs {}))
    }
    fn jobs(&self) -> Result<Vec<Job>, RemoteFailure> {
        // Not `mine`: the server then lists the jobs this PC watches
        // (submitted or joined) and those targeted at it.
        let args = pcmail_api::jobs::JobListArgs { mine: false, state: None, target: None, limit: Some(JOBS_LISTED) };
        self.api(|c| pcmail_api::jobs::job_list(c, &args)).map(|r| r.jobs)
    }
    fn job_cancel(&self, job_id: &str) -> Result<Job, RemoteFailure> {
        let args = pcmail_api::jobs::JobCancelArgs {
            job_id: job_id.to_string(),
            reason: Some("cancelled from the tray".into()),
        };
        self.api(|c| pcmail_api::jobs::job_cancel_as(c, &args, TRAY_SESSION)).map(|r| r.job)
    }
}

/// Who a Cancel from the tray is on the job's timeline (`pc/tray`): the tray
/// is no Claude Code session, and its parent process names nothing.
pub const TRAY_SESSION: &str = "tray";

/// Jobs the Jobs view lists at most (the newest).
pub const JOBS_LISTED: usize = 100;

impl ClientRemote {
    /// A `pcmail_api` function on the window's client; its error keeps the
    /// CLI's code (`unreachable` = offline).
    fn api<T>(&self, f: impl FnOnce(&mut Client) -> Result<T, pcmail_api::ApiError>) -> Result<T, RemoteFailure> {
        let mut g = self.ops.lock().unwrap();
        if g.is_none() {
            *g = Some(
                Client::open(self.paths.clone())
                    .map_err(|e| RemoteFailure { code: "config".into(), message: e.to_string() })?,
            );
        }
        f(g.as_mut().unwrap()).map_err(|e| RemoteFailure { code: e.code().to_string(), message: e.to_string() })
    }
}
