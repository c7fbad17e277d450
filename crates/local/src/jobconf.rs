//! `[jobs]` in config.toml: the commands this PC's owner lets other
//! sessions run here, the checkouts they run in, and who may submit. Only
//! its shape, read with the rest of the config (also by the hook); the checks
//! only this PC can make and what turns a job into a process are the job
//! executor's, in pcmail-client.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Default time limit of a command (10 minutes).
pub const DEFAULT_TIME_LIMIT_SECS: u64 = 600;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobsConfig {
    /// PC labels whose sessions may submit jobs here. Absent: nobody, until
    /// the server requires per-PC credentials (then every roster PC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_submitters: Option<Vec<String>>,
    /// Checkout name → directory. Jobs run only inside these.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub checkouts: BTreeMap<String, PathBuf>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<CommandConfig>,
}

impl JobsConfig {
    pub fn is_empty(&self) -> bool {
        *self == JobsConfig::default()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandConfig {
    pub name: String,
    /// The program and its arguments; `{arg}` is replaced inside one element.
    pub argv: Vec<String>,
    /// Where it runs: `{arg}` of a checkout argument, or a checkout name.
    /// Default: the first checkout argument.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<ArgConfig>,
    /// The argument whose value is what the job works on (artifacts and the
    /// per-subject lock are keyed by it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(default = "default_time_limit")]
    pub time_limit_secs: u64,
    /// Files the command makes, relative to its directory: `{command}`,
    /// `{subject}`, `{ts}` (the job's submit time, ms), `{args}` (a short
    /// hash of every argument) and `{argument}` names. Each pattern must say
    /// which arguments made the file (`{args}`, or every argument named), so
    /// an earlier job's files answer only a job with the same arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<String>,
    /// How long an earlier job's artifacts answer the same job without
    /// running it (seconds; default a day, 0: never). Files older than the
    /// checkout's HEAD commit never do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reuse_within_secs: Option<u64>,
    /// The argv element after which the program reads no options (`"--"`),
    /// when it really does: an argument whose every placeholder comes after
    /// it may then start with `-`. Not for `cargo test -- …`, whose test
    /// binary reads options after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options_end: Option<String>,
    /// A read-only command run after a successful run; its outcome is part of the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<Vec<String>>,
    /// A command whose output (what was written, read back) goes in the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_back: Option<Vec<String>>,
    /// A probe: no artifacts check, no per-subject lock.
    #[serde(default)]
    pub read_only: bool,
    /// Resumes over several runs: one process per input (`{input}` in argv),
    /// progress kept per input (see docs/jobs.md).
    #[serde(default)]
    pub chunked: bool,
    /// A chunked command's inputs: the files directly in this folder (relative to the checkout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<String>,
    /// A chunked command's budget per input (default: 30 % of the time limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_time_limit_secs: Option<u64>,
    #[serde(default)]
    pub description: String,
}

fn default_time_limit() -> u64 {
    DEFAULT_TIME_LIMIT_SECS
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArgConfig {
    pub name: String,
    /// string, int, bool, enum, path, checkout.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default = "yes")]
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_len: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
    /// `string`/`path`: the value may start with `-` (it is refused by
    /// default, since a program reads such a value as an option).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_dash: bool,
}

fn yes() -> bool {
    true
}
