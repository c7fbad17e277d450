//! The limits, periods and fixed texts of jobs: the same on both servers
//! and on the PC.

use crate::Millis;

/// H: the heartbeat period (the lease's): an executor running a job polls at least this often.
pub const HEARTBEAT_MS: Millis = crate::lease::HEARTBEAT_MS;
/// A running job without a heartbeat for 6·H is timed out by the sweep.
pub const STALE_AFTER_MS: Millis = 6 * HEARTBEAT_MS;
/// A job that ended ok/failed this recently is joined by an identical submit.
pub const DEDUP_WINDOW_DEFAULT_MS: Millis = 5 * 60_000;
/// Longest dedup window a submit may ask for.
pub const DEDUP_WINDOW_MAX_MS: Millis = 24 * 60 * 60_000;
/// A queued job never started this long is cancelled by the sweep.
pub const QUEUED_MAX_AGE_MS: Millis = 7 * 24 * 60 * 60_000;
/// A result's output keeps its last 64 KiB.
pub const OUTPUT_CAP_BYTES: usize = 64 * 1024;
/// A command's time limit: 1 s … 24 h.
pub const TIME_LIMIT_MIN_MS: Millis = 1_000;
pub const TIME_LIMIT_MAX_MS: Millis = 24 * 60 * 60_000;
/// Most arguments a command declares.
pub const ARGS_MAX: usize = 20;
/// Longest string/path value unless the spec says `maxLen`; and the hard cap of `maxLen`.
pub const STRING_MAX_LEN_DEFAULT: usize = 200;
pub const STRING_MAX_LEN_CAP: usize = 4_096;
/// Most commands a whitelist publishes; most artifact patterns per command.
pub const COMMANDS_MAX: usize = 200;
pub const ARTIFACTS_MAX: usize = 20;
pub const ARTIFACT_MAX_CHARS: usize = 400;
pub const DESCRIPTION_MAX_CHARS: usize = 1_000;
/// Most values of an enum (or checkout names).
pub const VALUES_MAX: usize = 500;
/// Longest `pattern` regex source.
pub const PATTERN_MAX_CHARS: usize = 500;
/// Queued jobs offered in one poll answer.
pub const OFFERED_MAX: usize = 20;
/// Most heartbeats and most reports in one poll.
pub const POLL_ITEMS_MAX: usize = 500;
/// `job.list`'s default and largest `limit`.
pub const LIST_LIMIT_DEFAULT: usize = 100;
pub const LIST_LIMIT_MAX: usize = 500;
/// Longest runner (`<pc>/<pid>`), session, name.
pub const RUNNER_MAX_CHARS: usize = 100;
pub const SESSION_MAX_CHARS: usize = crate::rules::SESSION_ID_MAX_CHARS;
/// The target that is the server itself.
pub const SERVER_TARGET: &str = "@server";
/// Who the server writes in a timeline.
pub const SERVER_ACTOR: &str = "server";
/// Chunked commands: a run starts no new input after this share of its time limit…
pub const CHUNK_START_DEADLINE_PERCENT: i64 = 70;
/// …a failing input is dropped after this many failures…
pub const CHUNK_FAILURES_MAX: u32 = 3;
/// …and retried again this long after its last failure.
pub const CHUNK_FAILURE_EXPIRY_MS: Millis = 3 * 24 * 60 * 60_000;
/// Sweep reasons (the same text on both servers).
/// The server cannot know how a run whose executor went silent ended: it
/// says so ("outcome unknown"), never that the run was interrupted.
pub const REASON_NO_HEARTBEAT: &str = "no heartbeat for 180 s (executor gone; outcome unknown)";
pub const REASON_PAST_LIMIT: &str = "running past twice its time limit";
pub const REASON_NEVER_STARTED: &str = "never started";
/// An executor that comes back to a run it started and finds no record of
/// how it ended (no exit code beside the run log): the job ends `timed_out`
/// with this reason. It may have finished, so it is never called interrupted.
pub const REASON_OUTCOME_UNKNOWN: &str =
    "the executor stopped while the job ran; outcome unknown (no exit code was recorded)";
/// The timeline note of a result that arrived after the server had timed the
/// job out for silence: the run's own end replaces the unknown one.
pub const LATE_REPORT_NOTE: &str = "reported by its executor after the server timed it out for silence";

/// `error.reason` of `job_refused`.
pub const REFUSED_NO_EXECUTOR: &str = "no_executor";
pub const REFUSED_NOT_WHITELISTED: &str = "not_whitelisted";
pub const REFUSED_BAD_ARGUMENT: &str = "bad_argument";
pub const REFUSED_SUBMITTER_NOT_ALLOWED: &str = "submitter_not_allowed";
/// The target PC was revoked by the admin.
pub const REFUSED_TARGET_REVOKED: &str = "target_revoked";
