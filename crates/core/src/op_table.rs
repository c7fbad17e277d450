//! Every op's facts in one table: its wire name, who may call it, whether it
//! only reads, whether the caller must be on the roster, the feature `hello`
//! announces it under, how the Apps Script server locks it, and which long
//! polls its commit may wake. The parser, the authentication rule and the
//! Rust server's dispatcher read these rows; `tests/protocol/generated/op-table.json`
//! is this table (and every limit both servers share) written out, so the
//! Apps Script server and the tray window are checked against the same facts.
//!
//! `OpKind` lists the ops; `OpKind::spec` is an exhaustive `match`, and so is
//! `Op::kind` (in `protocol`), so an op added to `Op` does not compile until
//! its row is written here.

use serde::Serialize;

/// What this protocol implementation supports beyond the first version, as
/// `hello` answers it (clients ask instead of guessing; docs/protocol.md).
pub const FEATURES: &[&str] = &[
    FEATURE_MARK_RESULTS,
    FEATURE_EXPIRES_IN,
    FEATURE_LABEL_BINDING,
    FEATURE_CREDENTIALS,
    FEATURE_LEASES,
    FEATURE_RECEIVED_UPDATES,
    FEATURE_JOBS,
    FEATURE_SESSIONS,
    FEATURE_MULTI_RECIPIENT,
];
/// `send` with `mail.to` a list of addresses: one copy, state and timeline
/// per address, all or nothing (docs/protocol.md, "Mail to several
/// addresses"). Not an op of its own, so no row names it: `send`'s row stays
/// the first protocol version's, and a client asks `hello` before it sends a
/// list.
pub const FEATURE_MULTI_RECIPIENT: &str = "multi-recipient";
/// The poll's `sessions` argument, `name.take`, `who`, and mail to a name.
pub const FEATURE_SESSIONS: &str = "sessions";
/// Marks are answered item by item (with `index`); a bad mark never fails the batch.
pub const FEATURE_MARK_RESULTS: &str = "mark-results";
/// `mail.expiresIn`: expiry as a duration measured by the server's clock.
pub const FEATURE_EXPIRES_IN: &str = "expires-in";
/// `cred` in the envelope and `roster.set` with `claim`: a label belongs to one installation.
pub const FEATURE_LABEL_BINDING: &str = "label-binding";
/// Per-PC credentials: join codes, the admin secret, revoke, rotate, the audit log.
pub const FEATURE_CREDENTIALS: &str = "credentials";
/// `lease.*` ops and the poll's `lease` argument.
pub const FEATURE_LEASES: &str = "leases";
/// `poll.receivedSince`: a second updates feed, of mail the caller received
/// (`receivedUpdates`, `receivedCursor`), so a receiving PC records the
/// server's own times and a server-side `expired`.
pub const FEATURE_RECEIVED_UPDATES: &str = "received-updates";
/// `job.*` ops and the poll's `job` argument.
pub const FEATURE_JOBS: &str = "jobs";

/// Which identity an op needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OpClass {
    /// Acts as the envelope's PC: its own mail, leases, jobs and sessions.
    Pc,
    /// Any authenticated caller, PC or admin (`hello`, `roster.get`, `sweep`, `alerts`).
    Any,
    /// Needs the admin secret (roster changes, enrol, revoke, require, log).
    Admin,
    /// Authenticated by the join code in its arguments.
    Join,
}

/// How an op's class is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassRule {
    Always(OpClass),
    /// `roster.set`: the caller's own entry (its hostname, an old PC's claim)
    /// is the PC's business; a takeover (`replace`) or anyone else's entry is
    /// the admin's.
    OwnEntryOrAdmin,
}

impl ClassRule {
    pub fn as_str(self) -> &'static str {
        match self {
            ClassRule::Always(OpClass::Pc) => "pc",
            ClassRule::Always(OpClass::Any) => "any",
            ClassRule::Always(OpClass::Admin) => "admin",
            ClassRule::Always(OpClass::Join) => "join",
            ClassRule::OwnEntryOrAdmin => "own-entry-or-admin",
        }
    }
}

/// How the Apps Script server runs an op with respect to its one script lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GasLock {
    /// The whole op runs under the script lock.
    Request,
    /// No lock: it reads only what needs none (one property, a tab only the sweep writes).
    Unlocked,
    /// It takes the lock itself around each of its writes, never across a long
    /// step (the sweep's bands; a built-in job run between two short locks).
    OwnSections,
}

/// What a committed op may have news of, for the long polls that wait on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum News {
    /// New mail for a PC, a state change of mail it sent or received.
    Mail,
    /// A lease a PC held was taken over or ended by someone else, or the
    /// live leases of a repo in which the PC has a live session changed (its
    /// edit guard must hear of a claim or a release at once).
    Lease,
    /// A job offered to a PC, cancelled at it, or ended for its watchers.
    Job,
}

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpSpec {
    pub kind: OpKind,
    /// The wire name (`"op"` of the envelope).
    pub name: &'static str,
    pub class: ClassRule,
    /// Reads only: the Rust server runs it in a read (deferred) transaction,
    /// which takes no write lock; it must write nothing.
    pub read_only: bool,
    /// The caller must be on the roster (`unknown_pc` otherwise), checked
    /// before the op runs.
    pub on_roster: bool,
    /// The `hello` feature that announces the op; None: the first protocol version.
    pub feature: Option<&'static str>,
    pub gas_lock: GasLock,
    /// The news its commit may bring (the long polls it may wake).
    pub wakes: &'static [News],
}

macro_rules! op_kinds {
    ($($kind:ident),* $(,)?) => {
        /// The ops, without their arguments.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum OpKind { $($kind),* }
        impl OpKind {
            /// Every op, in the table's order.
            pub const ALL: &'static [OpKind] = &[$(OpKind::$kind),*];
        }
    };
}

op_kinds!(
    Hello,
    RosterGet,
    RosterSet,
    RosterRemove,
    Send,
    Poll,
    Mark,
    Status,
    Sweep,
    Alerts,
    Enrol,
    Join,
    Revoke,
    Rotate,
    RequireCredentials,
    AuditLog,
    LeaseClaim,
    LeaseRelease,
    LeaseList,
    LeaseCheck,
    JobSubmit,
    JobStatus,
    JobList,
    JobCancel,
    JobStart,
    JobReport,
    NameTake,
    Who,
);

use ClassRule::{Always, OwnEntryOrAdmin};
use GasLock::{OwnSections, Request, Unlocked};
use OpClass::{Admin, Any, Join, Pc};

const NONE: &[News] = &[];
const MAIL: &[News] = &[News::Mail];
const LEASE: &[News] = &[News::Lease];
const JOB: &[News] = &[News::Job];
const ALL_NEWS: &[News] = &[News::Mail, News::Lease, News::Job];

/// A row; `spec` sets its `kind`.
const fn row(
    name: &'static str,
    class: ClassRule,
    read_only: bool,
    on_roster: bool,
    feature: Option<&'static str>,
    gas_lock: GasLock,
    wakes: &'static [News],
) -> OpSpec {
    OpSpec { kind: OpKind::Hello, name, class, read_only, on_roster, feature, gas_lock, wakes }
}

impl OpKind {
    /// The op's row.
    pub const fn spec(self) -> OpSpec {
        use OpKind as K;
        let (cred, lease, job, sessions) =
            (Some(FEATURE_CREDENTIALS), Some(FEATURE_LEASES), Some(FEATURE_JOBS), Some(FEATURE_SESSIONS));
        #[rustfmt::skip]
        let spec = match self {
            //                      name                         class                read   roster feature   gas lock     wakes
            K::Hello =>              row("hello",                     Always(Any),         true,  false, None,     Unlocked,    NONE),
            K::RosterGet =>          row("roster.get",                Always(Any),         true,  false, None,     Request,     NONE),
            K::RosterSet =>          row("roster.set",                OwnEntryOrAdmin,     false, false, None,     Request,     NONE),
            K::RosterRemove =>       row("roster.remove",             Always(Admin),       false, false, None,     Request,     NONE),
            K::Send =>               row("send",                      Always(Pc),          false, true,  None,     Request,     MAIL),
            // A poll reports leases and jobs too: a release or a report ends them for others.
            K::Poll =>               row("poll",                      Always(Pc),          false, true,  None,     Request,     ALL_NEWS),
            K::Mark =>               row("mark",                      Always(Pc),          false, true,  None,     Request,     MAIL),
            K::Status =>             row("status",                    Always(Pc),          true,  true,  None,     Request,     NONE),
            K::Sweep =>              row("sweep",                     Always(Any),         false, false, None,     OwnSections, ALL_NEWS),
            K::Alerts =>             row("alerts",                    Always(Any),         true,  false, None,     Unlocked,    NONE),
            K::Enrol =>              row("roster.enrol",              Always(Admin),       false, false, cred,     Request,     NONE),
            // A PC re-enrolled under its label: the mail kept for it goes out.
            K::Join =>               row("join",                      Always(Join),        false, false, cred,     Request,     MAIL),
            // A revoked PC's queued jobs end, and their submitters hear it.
            K::Revoke =>             row("roster.revoke",             Always(Admin),       false, false, cred,     Request,     JOB),
            K::Rotate =>             row("rotate",                    Always(Pc),          false, true,  cred,     Request,     NONE),
            K::RequireCredentials => row("roster.requireCredentials", Always(Admin),       false, false, cred,     Request,     NONE),
            K::AuditLog =>           row("roster.log",                Always(Admin),       true,  false, cred,     Request,     NONE),
            K::LeaseClaim =>         row("lease.claim",               Always(Pc),          false, true,  lease,    Request,     LEASE),
            K::LeaseRelease =>       row("lease.release",             Always(Pc),          false, true,  lease,    Request,     LEASE),
            K::LeaseList =>          row("lease.list",                Always(Pc),          false, true,  lease,    Request,     LEASE),
            K::LeaseCheck =>         row("lease.check",               Always(Pc),          false, true,  lease,    Request,     LEASE),
            // A built-in runs inside the submit (the sweep among them).
            K::JobSubmit =>          row("job.submit",                Always(Pc),          false, true,  job,      OwnSections, ALL_NEWS),
            K::JobStatus =>          row("job.status",                Always(Pc),          true,  true,  job,      Request,     NONE),
            K::JobList =>            row("job.list",                  Always(Pc),          true,  true,  job,      Request,     NONE),
            K::JobCancel =>          row("job.cancel",                Always(Pc),          false, true,  job,      Request,     JOB),
            K::JobStart =>           row("job.start",                 Always(Pc),          false, true,  job,      Request,     NONE),
            K::JobReport =>          row("job.report",                Always(Pc),          false, true,  job,      Request,     JOB),
            // Mail to the name follows it here; the PC it left hears of it.
            K::NameTake =>           row("name.take",                 Always(Pc),          false, true,  sessions, Request,     MAIL),
            K::Who =>                row("who",                       Always(Pc),          true,  true,  sessions, Request,     NONE),
        };
        OpSpec { kind: self, ..spec }
    }

    /// The op of a wire name.
    pub fn from_name(name: &str) -> Option<OpKind> {
        OpKind::ALL.iter().copied().find(|k| k.spec().name == name)
    }

    pub fn name(self) -> &'static str {
        self.spec().name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_one_op_and_back() {
        let mut seen = std::collections::HashSet::new();
        for k in OpKind::ALL {
            let s = k.spec();
            assert_eq!(s.kind, *k);
            assert!(seen.insert(s.name), "{} twice", s.name);
            assert_eq!(OpKind::from_name(s.name), Some(*k));
        }
        assert_eq!(OpKind::from_name("nuke"), None);
    }

    #[test]
    fn a_read_only_op_wakes_no_poll() {
        for k in OpKind::ALL {
            let s = k.spec();
            assert!(!s.read_only || s.wakes.is_empty(), "{} reads only but says it wakes {:?}", s.name, s.wakes);
        }
    }
}
