//! The built-in commands: the server's own (target `@server`) and the
//! probes every PC executor has.

use super::spec::{ArgSpec, ArgType, CommandSpec};
use super::wire::JobState;

/// The server's built-in commands (target `@server`): read-only probes and
/// maintenance, run inside the submit. Both servers publish these.
pub fn server_builtins() -> Vec<CommandSpec> {
    let probe = |name: &str, args: Vec<ArgSpec>, description: &str, read_only: bool| CommandSpec {
        name: name.into(),
        args,
        subject: None,
        time_limit_ms: 60_000,
        artifacts: vec![],
        read_only,
        chunked: false,
        verify: false,
        description: description.into(),
    };
    let arg = |name: &str, kind: ArgType, required: bool| ArgSpec {
        name: name.into(),
        kind,
        required,
        pattern: None,
        max_len: None,
        min: None,
        max: None,
        values: None,
        allow_dash: false,
    };
    let mail_id = ArgSpec {
        pattern: Some(r"mail-[0-9]{1,15}-[0-9a-f]{8}(~[a-z0-9][a-z0-9._-]{0,39})?".into()),
        max_len: Some(100),
        ..arg("id", ArgType::String, true)
    };
    let state = ArgSpec {
        values: Some(JobState::ALL.iter().map(|s| s.as_str().to_string()).collect()),
        ..arg("state", ArgType::Enum, false)
    };
    vec![
        probe(
            "_debug_roster",
            vec![],
            "the roster with each PC's last poll, credential state and published commands",
            true,
        ),
        probe("_debug_mail", vec![mail_id], "one mail with its timeline and copies", true),
        probe("_debug_alerts", vec![], "open alerts", true),
        probe(
            "_debug_sweep_plan",
            vec![],
            "what the next sweep would time out, cancel, expire or alert, and why",
            true,
        ),
        probe("_debug_jobs", vec![state], "jobs (newest first), optionally in one state", true),
        probe("sweep", vec![], "run the sweep now", false),
        probe("prune", vec![], "prune ended mail, leases and jobs past their retention", false),
    ]
}

/// The spec of a built-in, by name.
pub fn server_builtin(name: &str) -> Option<CommandSpec> {
    server_builtins().into_iter().find(|c| c.name == name)
}

/// Most items a PC probe lists (sessions, leases, jobs): its answer stays
/// small, like any job's bounded output.
pub const PC_PROBE_ITEMS_MAX: usize = 100;

/// The read-only probes every PC executor has besides its owner's commands:
/// published with its whitelist, run in-process by the
/// executor (no command, no shell), under the same submitter rule
/// (`submitter_allowed`). Their names start with `_`, which no owner's
/// command may, so they never collide.
pub fn pc_builtins() -> Vec<CommandSpec> {
    let pc_probe = |name: &str, description: &str| CommandSpec {
        name: name.into(),
        args: vec![],
        subject: None,
        time_limit_ms: 60_000,
        artifacts: vec![],
        read_only: true,
        chunked: false,
        verify: false,
        description: description.into(),
    };
    vec![
        pc_probe(
            "_debug_pc",
            "this PC: label, version, server kind, poller state, last poll, pending marks, store size",
        ),
        pc_probe("_debug_sessions", "this PC's live sessions: id prefix, name, repo, branch, idle time"),
        pc_probe(
            "_debug_leases",
            "the leases in this PC's cache, with their stale flags, and the ones its sessions hold",
        ),
        pc_probe("_debug_jobs", "the jobs running on this PC and its queued reports"),
    ]
}

/// The spec of a PC probe, by name.
pub fn pc_builtin(name: &str) -> Option<CommandSpec> {
    pc_builtins().into_iter().find(|c| c.name == name)
}
