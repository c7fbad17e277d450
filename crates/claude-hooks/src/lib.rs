//! Registers / unregisters pcmail's hook command in Claude Code's `settings.json`, for
//! `pcmail hooks install|uninstall|status` and `pcmail doctor [--fix]`.
//!
//! # The settings format we write
//!
//! Per the Claude Code hooks reference: `hooks` maps an event name to an array of *matcher
//! groups*; each group has an optional `matcher` and a `hooks` array of handlers. `timeout` is in
//! **seconds**. Events that do not use matchers (`UserPromptSubmit`) may omit `matcher`; for
//! `SessionStart` the matcher is matched against the session source (`startup`, `resume`,
//! `clear`, `compact`). The events are a parameter ([`HookSpec::events`], [`DEFAULT_EVENTS`]).
//!
//! ```json
//! {"hooks": {
//!   "SessionStart":     [{"matcher": "startup|resume|clear|compact",
//!                         "hooks": [{"type": "command", "command": "/abs/path/pcmail-hook", "timeout": 5}]}],
//!   "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "/abs/path/pcmail-hook", "timeout": 5}]}],
//!   "PreToolUse":       [{"matcher": "Edit|Write|MultiEdit|NotebookEdit",
//!                         "hooks": [{"type": "command", "command": "/abs/path/pcmail-hook", "timeout": 5}]}],
//!   "SessionEnd":       [{"hooks": [{"type": "command", "command": "/abs/path/pcmail-hook", "timeout": 5}]}],
//!   "Stop":             [{"hooks": [{"type": "command", "command": "/abs/path/pcmail-hook", "timeout": 5}]}]
//! }}
//! ```
//!
//! `command` is one of two shell commands, chosen by the caller ([`HookCommand`]):
//! * [`HookCommand::Binary`]: the path of the separate `pcmail-hook` binary, alone;
//! * [`HookCommand::Subcommand`]: the path of `pcmail` followed by ` hook`.
//!
//! The path is quoted for a POSIX shell with single quotes when it holds anything but
//! `A–Z a–z 0–9 / . _ - + , : @` (an embedded `'` becomes `'\''`): spaces, non-ASCII letters,
//! `$`, and Windows backslashes (`'C:\Users\山田 太郎\pcmail-hook.exe'`: Claude Code on Windows
//! runs hook commands through Git Bash, where single quotes keep backslashes as they are).
//!
//! ## Why the shell form, with no `args`
//!
//! Current Claude Code also has an *exec form* (`"command": "/abs/pcmail", "args": ["hook"]`:
//! no shell, `args` as argv), which pcmail used to write. Claude Code releases
//! that predate `args` (before 2.1.139: [`EXEC_FORM_SINCE`]) ignore it and run bare `pcmail`, which
//! prints its usage and exits 2 — and exit 2 from `UserPromptSubmit` blocks every prompt. A
//! command without `args` is run through the shell by every release, old and new, so it works
//! everywhere; a bare `pcmail-hook` path even reads the same in both forms. The shell costs one
//! extra process per hook run, which the separate `pcmail-hook` binary more than pays back.
//!
//! ## Migration
//!
//! Every handler of ours — one that runs a file named `pcmail`/`pcmail.exe` with the single
//! argument `hook`, or `pcmail-hook`/`pcmail-hook.exe` with no arguments, in exec form (`args`)
//! or shell form (quoted or not) — is rewritten by [`install`] in place to the form asked for
//! (same group, same position, the user's extra keys on the handler kept, `args` dropped), in
//! every event. A second install is then a no-op. [`InstallState::needs_migration`] tells
//! `pcmail doctor` that an exec-form entry is still there.
//!
//! # Guarantees
//!
//! * Merge, never clobber: every other key, event, group and handler is kept, in order
//!   (`serde_json`'s `preserve_order`). Re-installing (same or different path, either
//!   [`HookCommand`]) updates our handler in place.
//! * Idempotent: if nothing would change, nothing is written and no backup is made.
//! * Atomic: temp file in the same directory, fsync, rename over the original (the symlink
//!   target, if `settings.json` is a symlink), fsync the directory. The original is first copied
//!   to `settings.json.pcmail-backup-<unix secs>`; its permissions are kept.
//! * Refuses (changing nothing) a file that is not a JSON object, and any path named
//!   `.claude.json` (Claude Code's state file, a different file from `settings.json`).

use pcmail_fsmode::confined;
use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use pcmail_core::shell::shell_quote;
use serde_json::{Map, Value};

/// Claude Code event fired when a session starts / resumes / is cleared / compacted.
pub const EVENT_SESSION_START: &str = "SessionStart";
/// Claude Code event fired before each user prompt is processed.
pub const EVENT_USER_PROMPT_SUBMIT: &str = "UserPromptSubmit";
/// Claude Code event fired before a tool runs (the lease guard).
pub const EVENT_PRE_TOOL_USE: &str = "PreToolUse";
/// Claude Code event fired when the model ends its turn.
pub const EVENT_STOP: &str = "Stop";
/// Claude Code event fired when a session ends.
pub const EVENT_SESSION_END: &str = "SessionEnd";
/// The `SessionStart` matcher we register with (all session sources).
pub const SESSION_START_MATCHER: &str = "startup|resume|clear|compact";
/// The `PreToolUse` matcher: the tools that write files.
pub const PRE_TOOL_USE_MATCHER: &str = "Edit|Write|MultiEdit|NotebookEdit";
/// The sub-command of `pcmail` that is the hook.
pub const HOOK_ARG: &str = "hook";

/// One event to register for, with the matcher our own group gets (`None`: no matcher).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HookEvent {
    pub event: &'static str,
    pub matcher: Option<&'static str>,
}

pub const SESSION_START: HookEvent = HookEvent { event: EVENT_SESSION_START, matcher: Some(SESSION_START_MATCHER) };
pub const USER_PROMPT_SUBMIT: HookEvent = HookEvent { event: EVENT_USER_PROMPT_SUBMIT, matcher: None };
/// The lease guard: only the tools that write files.
pub const PRE_TOOL_USE: HookEvent = HookEvent { event: EVENT_PRE_TOOL_USE, matcher: Some(PRE_TOOL_USE_MATCHER) };
/// The handoff reminder: registered by default.
pub const STOP: HookEvent = HookEvent { event: EVENT_STOP, matcher: None };
/// Records a session's end and queues the release of its leases.
pub const SESSION_END: HookEvent = HookEvent { event: EVENT_SESSION_END, matcher: None };

/// The events `pcmail hooks install` registers on every Claude Code release
/// pcmail supports; `SessionEnd` is added by [`events_for`] on releases that
/// know it (an unknown event name makes 1.0.62 reject every hook: tested).
pub const DEFAULT_EVENTS: &[HookEvent] = &[SESSION_START, USER_PROMPT_SUBMIT, PRE_TOOL_USE, STOP];

/// The first Claude Code release with the `SessionEnd` hook event.
pub const SESSION_END_SINCE: (u32, u32, u32) = (1, 0, 85);

/// The events to register for the Claude Code release found (None: not
/// known): [`DEFAULT_EVENTS`], plus `SessionEnd` from [`SESSION_END_SINCE`].
pub fn events_for(version: Option<(u32, u32, u32)>) -> Vec<HookEvent> {
    let mut e = DEFAULT_EVENTS.to_vec();
    if version.is_some_and(|v| v >= SESSION_END_SINCE) {
        e.push(SESSION_END);
    }
    e
}

/// The agents whose hooks files pcmail writes. They share Claude Code's shape
/// (event → matcher groups → command handlers); what differs is the file,
/// the event names and matchers, the unit of `timeout`, and whether the file
/// may hold comments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    /// `~/.claude/settings.json`: strict JSON, timeouts in seconds.
    Claude,
    /// `$CODEX_HOME/hooks.json` (default `~/.codex/hooks.json`): Claude Code's
    /// event names, timeouts in seconds; files are edited through
    /// `apply_patch`. Codex runs a hook only once the user trusted its exact
    /// definition, so an unchanged install must not rewrite it.
    Codex,
    /// `~/.gemini/settings.json`: comments allowed (kept), its own event
    /// names (BeforeAgent, BeforeTool, AfterAgent), timeouts in milliseconds.
    Gemini,
}

/// Codex's lease guard: its one file-editing tool.
pub const CODEX_PRE_TOOL_USE: HookEvent = HookEvent { event: EVENT_PRE_TOOL_USE, matcher: Some("apply_patch") };
/// The events `pcmail hooks install --client codex` registers.
pub const CODEX_EVENTS: &[HookEvent] = &[SESSION_START, USER_PROMPT_SUBMIT, CODEX_PRE_TOOL_USE, STOP];
/// The events `pcmail hooks install --client gemini` registers: its names for
/// SessionStart, UserPromptSubmit, PreToolUse (its file-writing tools), Stop
/// and SessionEnd. Its lifecycle matchers are exact strings, so SessionStart
/// has none (every source).
pub const GEMINI_EVENTS: &[HookEvent] = &[
    HookEvent { event: EVENT_SESSION_START, matcher: None },
    HookEvent { event: "BeforeAgent", matcher: None },
    HookEvent { event: "BeforeTool", matcher: Some("write_file|replace") },
    HookEvent { event: "AfterAgent", matcher: None },
    HookEvent { event: EVENT_SESSION_END, matcher: None },
];

impl Agent {
    /// The file the hooks go into, from the environment (`CLAUDE_CONFIG_DIR`,
    /// `CODEX_HOME`, `HOME`).
    pub fn default_path(self) -> Option<PathBuf> {
        let home = || {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .or_else(|| std::env::var_os("USERPROFILE").filter(|h| !h.is_empty()))
                .map(PathBuf::from)
        };
        match self {
            Agent::Claude => default_settings_path(),
            Agent::Codex => std::env::var_os("CODEX_HOME")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from)
                .or_else(|| home().map(|h| h.join(".codex")))
                .map(|d| d.join("hooks.json")),
            Agent::Gemini => home().map(|h| h.join(".gemini").join("settings.json")),
        }
    }

    /// The events registered for this agent (Claude Code: see [`events_for`]).
    pub fn events(self) -> Vec<HookEvent> {
        match self {
            Agent::Claude => DEFAULT_EVENTS.to_vec(),
            Agent::Codex => CODEX_EVENTS.to_vec(),
            Agent::Gemini => GEMINI_EVENTS.to_vec(),
        }
    }

    fn timeout_factor(self) -> u64 {
        match self {
            Agent::Gemini => 1000,
            Agent::Claude | Agent::Codex => 1,
        }
    }

    fn comments_allowed(self) -> bool {
        self == Agent::Gemini
    }
}

/// The file name of the separate hook binary on this OS.
pub const HOOK_BINARY_NAME: &str = if cfg!(windows) { "pcmail-hook.exe" } else { "pcmail-hook" };

/// What Claude Code runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookCommand {
    /// The absolute path of `pcmail-hook`/`pcmail-hook.exe`, run with no arguments.
    Binary(PathBuf),
    /// The absolute path of `pcmail`/`pcmail.exe`, run as `<path> hook`.
    Subcommand(PathBuf),
}

impl HookCommand {
    /// `Binary` if `pcmail-hook` sits beside `pcmail_exe` (same directory), else
    /// `Subcommand(pcmail_exe)`.
    pub fn for_pcmail_exe(pcmail_exe: &Path) -> HookCommand {
        let hook = pcmail_exe.with_file_name(HOOK_BINARY_NAME);
        if hook.is_file() {
            HookCommand::Binary(hook)
        } else {
            HookCommand::Subcommand(pcmail_exe.to_path_buf())
        }
    }

    pub fn path(&self) -> &Path {
        match self {
            HookCommand::Binary(p) | HookCommand::Subcommand(p) => p,
        }
    }

    /// The shell command written into `command`.
    pub fn shell_command(&self) -> Result<String, HooksError> {
        let p = self
            .path()
            .to_str()
            .ok_or_else(|| HooksError::InvalidSpec(format!("path is not UTF-8: {}", self.path().display())))?;
        Ok(match self {
            HookCommand::Binary(_) => shell_quote(p),
            HookCommand::Subcommand(_) => format!("{} {HOOK_ARG}", shell_quote(p)),
        })
    }
}

/// What to register.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookSpec {
    /// Whose hooks file this is.
    pub agent: Agent,
    pub command: HookCommand,
    /// Claude Code's per-command timeout, in seconds.
    pub timeout_secs: u32,
    /// The events to register for (see [`DEFAULT_EVENTS`]).
    pub events: Vec<HookEvent>,
}

impl HookSpec {
    /// `command` for Claude Code's [`DEFAULT_EVENTS`] with a 5 s timeout.
    pub fn new(command: HookCommand) -> HookSpec {
        HookSpec::for_agent(Agent::Claude, command)
    }

    /// `command` for `agent`'s events with a 5 s timeout.
    pub fn for_agent(agent: Agent, command: HookCommand) -> HookSpec {
        HookSpec { agent, command, timeout_secs: 5, events: agent.events() }
    }
}

/// Result of [`install`] / [`uninstall`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Whether the settings file was written.
    pub changed: bool,
    /// The copy of the previous file, if one existed and we changed it.
    pub backup: Option<PathBuf>,
    /// The settings file that was (or would have been) written.
    pub settings_path: PathBuf,
}

/// Summary level of [`InstallState`] against a set of events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstallLevel {
    /// Registered for every event asked about.
    Installed,
    /// Registered for some of them.
    Partial,
    /// Not registered (or no settings file).
    NotInstalled,
}

impl InstallLevel {
    /// The state in words, as `hooks status` and `doctor` show it.
    pub fn as_str(self) -> &'static str {
        match self {
            InstallLevel::Installed => "installed",
            InstallLevel::Partial => "partly installed",
            InstallLevel::NotInstalled => "not installed",
        }
    }
}

impl std::fmt::Display for InstallLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a handler of ours is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandlerForm {
    /// `command` only: run through the shell by every Claude Code release. What we write.
    Shell,
    /// `command` + `args` (exec form): Claude Code releases before `args` existed run
    /// `command` alone, i.e. bare `pcmail`, which exits 2 and blocks every prompt.
    ExecWithArgs,
}

/// One pcmail handler found in the settings file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredHook {
    pub event: String,
    /// The `matcher` of its group, if any.
    pub matcher: Option<String>,
    /// The executable it runs (`pcmail` or `pcmail-hook`).
    pub exe: PathBuf,
    pub exe_exists: bool,
    pub timeout_secs: Option<u64>,
    pub form: HandlerForm,
}

/// What [`status`] found, for `pcmail doctor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallState {
    pub settings_exists: bool,
    /// Every pcmail handler found, in file order (any event).
    pub hooks: Vec<RegisteredHook>,
}

impl InstallState {
    /// Whether a handler of ours is registered for `event`.
    pub fn has(&self, event: &str) -> bool {
        self.hooks.iter().any(|h| h.event == event)
    }

    /// The events a handler of ours is registered for, each once, in file order.
    pub fn registered_events(&self) -> Vec<&str> {
        let mut out: Vec<&str> = vec![];
        for h in &self.hooks {
            if !out.contains(&h.event.as_str()) {
                out.push(&h.event);
            }
        }
        out
    }

    /// The events of `wanted` no handler of ours is registered for.
    pub fn missing_events<'a>(&self, wanted: &'a [HookEvent]) -> Vec<&'a str> {
        wanted.iter().filter(|e| !self.has(e.event)).map(|e| e.event).collect()
    }

    /// Against the events `wanted` (usually [`DEFAULT_EVENTS`]).
    pub fn level(&self, wanted: &[HookEvent]) -> InstallLevel {
        let n = wanted.iter().filter(|e| self.has(e.event)).count();
        match n {
            0 => InstallLevel::NotInstalled,
            n if n == wanted.len() => InstallLevel::Installed,
            _ => InstallLevel::Partial,
        }
    }

    /// True when at least one handler is registered and every registered exe path exists.
    pub fn all_exes_exist(&self) -> bool {
        !self.hooks.is_empty() && self.hooks.iter().all(|h| h.exe_exists)
    }

    /// True when a handler of ours is still in the exec form (see [`HandlerForm::ExecWithArgs`]):
    /// [`install`] rewrites it.
    pub fn needs_migration(&self) -> bool {
        self.hooks.iter().any(|h| h.form == HandlerForm::ExecWithArgs)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HooksError {
    /// The existing file is not valid JSON, or its top level is not an object.
    #[error("{}: not a JSON object ({detail}); refusing to modify it", .path.display())]
    NotJson { path: PathBuf, detail: String },
    /// Valid JSON, but `hooks` / an event entry has a type Claude Code would not accept.
    #[error("{}: unexpected settings layout ({detail}); refusing to modify it", .path.display())]
    UnexpectedShape { path: PathBuf, detail: String },
    /// A path we must never write (e.g. `~/.claude.json`).
    #[error("refusing to touch {}: {reason}", .path.display())]
    RefusedPath { path: PathBuf, reason: String },
    #[error("invalid hook spec: {0}")]
    InvalidSpec(String),
    #[error("{op} {}: {source}", .path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> HooksError + 'a {
    move |source| HooksError::Io { op, path: path.to_path_buf(), source }
}

/// `$CLAUDE_CONFIG_DIR/settings.json` if that variable is set (and non-empty), else
/// `~/.claude/settings.json`. `None` if no home directory can be determined.
pub fn default_settings_path() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir).join("settings.json"));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var_os("USERPROFILE").filter(|h| !h.is_empty()))?;
    Some(PathBuf::from(home).join(".claude").join("settings.json"))
}

/// The handler object we register for `spec`, in shell form:
/// `{"type": "command", "command": "<quoted path>[ hook]", "timeout": <secs>}` (no `args`).
pub fn hook_handler(spec: &HookSpec) -> Result<Map<String, Value>, HooksError> {
    validate_spec(spec)?;
    let mut h = Map::new();
    h.insert("type".into(), Value::from("command"));
    h.insert("command".into(), Value::from(spec.command.shell_command()?));
    h.insert("timeout".into(), Value::from(u64::from(spec.timeout_secs) * spec.agent.timeout_factor()));
    Ok(h)
}

/// Registers `spec` for each of `spec.events`, and migrates every other handler of ours (any
/// event) to the same command.
pub fn install(settings_path: &Path, spec: &HookSpec) -> Result<Outcome, HooksError> {
    check_path(settings_path)?;
    check_confined(settings_path)?;
    let desired = hook_handler(spec)?;
    let loaded = load(settings_path, spec.agent)?;
    let mut root = loaded.root.clone();
    apply_install(&mut root, &desired, &spec.events, settings_path)?;
    commit(settings_path, &loaded, root)
}

/// Removes every pcmail handler (from any event) of Claude Code's settings.json.
pub fn uninstall(settings_path: &Path) -> Result<Outcome, HooksError> {
    uninstall_for(Agent::Claude, settings_path)
}

/// Removes every pcmail handler (from any event), and groups / event arrays / the `hooks`
/// object left empty by that removal. Everything else is kept.
pub fn uninstall_for(agent: Agent, settings_path: &Path) -> Result<Outcome, HooksError> {
    check_path(settings_path)?;
    check_confined(settings_path)?;
    let loaded = load(settings_path, agent)?;
    let mut root = loaded.root.clone();
    apply_uninstall(&mut root);
    commit(settings_path, &loaded, root)
}

/// The pcmail plugin enabled in a Claude Code settings file (`enabledPlugins`
/// names it `pcmail@<marketplace>`), if any. Never writes.
pub fn enabled_plugin(settings_path: &Path) -> Option<String> {
    let root = load(settings_path, Agent::Claude).ok()?.root;
    let plugins = root.get("enabledPlugins")?.as_object()?;
    plugins.iter().find(|(k, v)| k.starts_with("pcmail@") && v.as_bool() == Some(true)).map(|(k, _)| k.clone())
}

/// Reports whether pcmail is registered in Claude Code's settings.json, for `pcmail doctor`.
pub fn status(settings_path: &Path) -> Result<InstallState, HooksError> {
    status_for(Agent::Claude, settings_path)
}

/// Reports whether pcmail is registered in `agent`'s hooks file. Never writes.
pub fn status_for(agent: Agent, settings_path: &Path) -> Result<InstallState, HooksError> {
    check_path(settings_path)?;
    let loaded = load(settings_path, agent)?;
    let mut state = InstallState { settings_exists: loaded.existed, hooks: Vec::new() };
    let Some(events) = loaded.root.get("hooks").and_then(Value::as_object) else {
        return Ok(state);
    };
    for (event, groups) in events {
        let Some(groups) = groups.as_array() else {
            continue;
        };
        for group in groups {
            let Some(handlers) = group.get("hooks").and_then(Value::as_array) else {
                continue;
            };
            for handler in handlers {
                let Some((exe, form)) = pcmail_handler_of(handler) else {
                    continue;
                };
                state.hooks.push(RegisteredHook {
                    event: event.clone(),
                    matcher: group.get("matcher").and_then(Value::as_str).map(str::to_owned),
                    exe_exists: exe.is_file(),
                    exe,
                    timeout_secs: handler.get("timeout").and_then(Value::as_u64),
                    form,
                });
            }
        }
    }
    Ok(state)
}

// ---------------------------------------------------------------------------------------------
// validation

fn check_path(path: &Path) -> Result<(), HooksError> {
    if path.file_name() == Some(OsStr::new(".claude.json")) {
        return Err(HooksError::RefusedPath {
            path: path.to_path_buf(),
            reason: "`.claude.json` is Claude Code's state file, not settings.json; \
                     hooks belong in ~/.claude/settings.json"
                .into(),
        });
    }
    if path.file_name().is_none() {
        return Err(HooksError::RefusedPath { path: path.to_path_buf(), reason: "not a file path".into() });
    }
    Ok(())
}

/// Absolute on this OS, or (for a settings file shared with Windows) a drive path `C:\…`/`C:/…`.
fn is_absolute_anywhere(p: &str) -> bool {
    let b = p.as_bytes();
    Path::new(p).is_absolute()
        || (b.len() > 2 && b[0].is_ascii_alphabetic() && b[1] == b':' && matches!(b[2], b'\\' | b'/'))
}

fn validate_spec(spec: &HookSpec) -> Result<(), HooksError> {
    let path = spec.command.path();
    let s = path.to_str().ok_or_else(|| HooksError::InvalidSpec(format!("path is not UTF-8: {}", path.display())))?;
    if !is_absolute_anywhere(s) {
        return Err(HooksError::InvalidSpec(format!("the hook's path must be absolute, got {}", path.display())));
    }
    // Our entries are recognised by these file names; anything else could not be found again
    // by a later install/uninstall.
    let (ok, want) = match spec.command {
        HookCommand::Binary(_) => (is_hook_binary_name(s), "`pcmail-hook` or `pcmail-hook.exe`"),
        HookCommand::Subcommand(_) => (is_pcmail_name(s), "`pcmail` or `pcmail.exe`"),
    };
    if !ok {
        return Err(HooksError::InvalidSpec(format!("file name must be {want}, got {}", path.display())));
    }
    if s.contains(['\0', '\n', '\r']) {
        return Err(HooksError::InvalidSpec(format!("path has a line break: {}", path.display())));
    }
    if spec.timeout_secs == 0 {
        return Err(HooksError::InvalidSpec("timeout_secs must be at least 1".into()));
    }
    if spec.events.is_empty() {
        return Err(HooksError::InvalidSpec("no events to register".into()));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// recognising our handlers

/// File name of `path`, accepting both `/` and `\` separators (a settings file may have been
/// written on Windows).
fn file_name_of(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

fn is_pcmail_name(path: &str) -> bool {
    let name = file_name_of(path);
    name == "pcmail" || name.eq_ignore_ascii_case("pcmail.exe")
}

fn is_hook_binary_name(path: &str) -> bool {
    let name = file_name_of(path);
    name == "pcmail-hook" || name.eq_ignore_ascii_case("pcmail-hook.exe")
}

/// If `handler` is a pcmail hook command, the exe it runs.
fn pcmail_exe_of(handler: &Value) -> Option<PathBuf> {
    pcmail_handler_of(handler).map(|(exe, _)| exe)
}

/// Like [`pcmail_exe_of`], also telling the handler's form. Ours: `pcmail[.exe] hook` or
/// `pcmail-hook[.exe]` alone, in exec form (`args`) or shell form (quoted or not).
fn pcmail_handler_of(handler: &Value) -> Option<(PathBuf, HandlerForm)> {
    let obj = handler.as_object()?;
    if obj.get("type").and_then(Value::as_str) != Some("command") {
        return None;
    }
    let command = obj.get("command")?.as_str()?;
    let (exe, rest, form): (String, Vec<String>, HandlerForm) = match obj.get("args") {
        Some(Value::Array(args)) => {
            // Exec form: `command` is the executable itself.
            let args: Option<Vec<String>> = args.iter().map(|a| a.as_str().map(str::to_owned)).collect();
            (command.to_owned(), args?, HandlerForm::ExecWithArgs)
        }
        Some(_) => return None,
        None => {
            let mut words = shell_words(command)?.into_iter();
            (words.next()?, words.collect(), HandlerForm::Shell)
        }
    };
    let ours = (is_pcmail_name(&exe) && rest.len() == 1 && rest[0] == HOOK_ARG)
        || (is_hook_binary_name(&exe) && rest.is_empty());
    ours.then(|| (PathBuf::from(exe), form))
}

/// Splits a *simple* POSIX shell command into words (quotes and backslashes handled). Returns
/// `None` for anything more than a simple command (operators, expansions, redirections,
/// unterminated quotes), which is then never treated as ours.
fn shell_words(s: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        ch => cur.push(ch),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => match chars.next()? {
                            ch @ ('"' | '\\' | '$' | '`') => cur.push(ch),
                            '\n' => {}
                            ch => {
                                cur.push('\\');
                                cur.push(ch);
                            }
                        },
                        '$' | '`' => return None,
                        ch => cur.push(ch),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next()? {
                    '\n' => {}
                    ch => cur.push(ch),
                }
            }
            // Operators, expansions, redirections, globs: not a simple command.
            ';' | '&' | '|' | '<' | '>' | '(' | ')' | '$' | '`' | '*' | '?' | '[' => return None,
            // Comment / tilde expansion at the start of a word.
            '#' | '~' if !in_word => return None,
            ch => {
                in_word = true;
                cur.push(ch);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Some(words)
}

// ---------------------------------------------------------------------------------------------
// the merge

/// Rewrites an existing pcmail handler to `desired`, keeping the user's extra keys and the key
/// order: our keys replace theirs where they stand, `args` (exec form) is dropped, and any of
/// our keys still missing are appended.
fn rewrite_handler(existing: &Map<String, Value>, desired: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, v) in existing {
        if k == "args" {
            continue;
        }
        out.insert(k.clone(), desired.get(k).unwrap_or(v).clone());
    }
    for (k, v) in desired {
        if !out.contains_key(k) {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

fn apply_install(
    root: &mut Map<String, Value>,
    desired: &Map<String, Value>,
    wanted: &[HookEvent],
    path: &Path,
) -> Result<(), HooksError> {
    let shape = |detail: String| HooksError::UnexpectedShape { path: path.to_path_buf(), detail };
    let events = root
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| shape("`hooks` is not an object".into()))?;
    for e in wanted {
        let groups = events
            .entry(e.event)
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
            .ok_or_else(|| shape(format!("`hooks.{}` is not an array", e.event)))?;
        install_event(groups, desired, e.matcher);
    }
    // Our handlers under other events (registered by another pcmail version): same command,
    // so none is left in the exec form that blocks old Claude Code.
    for (event, groups) in events.iter_mut() {
        if wanted.iter().any(|e| e.event == event) {
            continue;
        }
        let Some(groups) = groups.as_array_mut() else {
            continue;
        };
        for handlers in groups.iter_mut().filter_map(|g| g.get_mut("hooks").and_then(Value::as_array_mut)) {
            for h in handlers.iter_mut() {
                if pcmail_exe_of(h).is_some() {
                    let existing = h.as_object().expect("pcmail handler is an object");
                    let mut d = desired.clone();
                    // Keep the timeout chosen for that event.
                    if let Some(t) = existing.get("timeout") {
                        d.insert("timeout".into(), t.clone());
                    }
                    *h = Value::Object(rewrite_handler(existing, &d));
                }
            }
        }
    }
    Ok(())
}

/// Updates the first pcmail handler of `groups` in place (dropping any duplicates), or appends
/// a new group holding it.
fn install_event(groups: &mut Vec<Value>, desired: &Map<String, Value>, matcher: Option<&str>) {
    let mut placed = false;
    let mut gi = 0;
    while gi < groups.len() {
        let Some(group) = groups[gi].as_object_mut() else {
            gi += 1;
            continue;
        };
        let mut removed_any = false;
        let mut placed_here = false;
        let mut all_ours = false;
        let mut now_empty = false;
        if let Some(handlers) = group.get_mut("hooks").and_then(Value::as_array_mut) {
            all_ours = !handlers.is_empty() && handlers.iter().all(|h| pcmail_exe_of(h).is_some());
            let mut hi = 0;
            while hi < handlers.len() {
                if pcmail_exe_of(&handlers[hi]).is_none() {
                    hi += 1;
                } else if !placed {
                    let h = handlers[hi].as_object().expect("pcmail handler is an object");
                    // Keep any extra keys the user added; set ours (this also migrates a legacy
                    // shell-form entry to the exec form, in place).
                    handlers[hi] = Value::Object(rewrite_handler(h, desired));
                    placed = true;
                    placed_here = true;
                    hi += 1;
                } else {
                    handlers.remove(hi);
                    removed_any = true;
                }
            }
            now_empty = handlers.is_empty();
        }
        if placed_here && all_ours {
            // The group is ours alone: make sure it fires for every session source.
            if let Some(m) = matcher {
                group.insert("matcher".into(), Value::from(m));
            }
        }
        if removed_any && now_empty {
            groups.remove(gi);
        } else {
            gi += 1;
        }
    }
    if !placed {
        let mut group = Map::new();
        if let Some(m) = matcher {
            group.insert("matcher".into(), Value::from(m));
        }
        group.insert("hooks".into(), Value::Array(vec![Value::Object(desired.clone())]));
        groups.push(Value::Object(group));
    }
}

fn apply_uninstall(root: &mut Map<String, Value>) {
    let Some(events) = root.get_mut("hooks").and_then(Value::as_object_mut) else {
        return;
    };
    let mut emptied_events = Vec::new();
    for (event, groups) in events.iter_mut() {
        let Some(groups) = groups.as_array_mut() else {
            continue;
        };
        let mut removed_group = false;
        groups.retain_mut(|group| {
            let Some(handlers) = group.get_mut("hooks").and_then(Value::as_array_mut) else {
                return true;
            };
            let before = handlers.len();
            handlers.retain(|h| pcmail_exe_of(h).is_none());
            let keep = !(handlers.is_empty() && handlers.len() != before);
            removed_group |= !keep;
            keep
        });
        if removed_group && groups.is_empty() {
            emptied_events.push(event.clone());
        }
    }
    let removed_event = !emptied_events.is_empty();
    for event in emptied_events {
        events.shift_remove(&event);
    }
    if removed_event && events.is_empty() {
        root.shift_remove("hooks");
    }
}

// ---------------------------------------------------------------------------------------------
// files

struct Loaded {
    root: Map<String, Value>,
    existed: bool,
    /// The file's text when it may hold comments: changes are then made in
    /// place in it (crates/jsonc) instead of writing the JSON anew.
    jsonc: Option<String>,
}

fn load(path: &Path, agent: Agent) -> Result<Loaded, HooksError> {
    let text = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let jsonc = agent.comments_allowed().then(String::new);
            return Ok(Loaded { root: Map::new(), existed: false, jsonc });
        }
        Err(e) => return Err(io_err("reading", path)(e)),
    };
    let not_json = |detail: String| HooksError::NotJson { path: path.to_path_buf(), detail };
    let text = String::from_utf8(text).map_err(|e| not_json(format!("not UTF-8: {e}")))?;
    if agent.comments_allowed() {
        let root = pcmail_jsonc::parse(&text).map_err(|e| not_json(e.to_string()))?;
        return Ok(Loaded { root, existed: true, jsonc: Some(text) });
    }
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    if text.trim().is_empty() {
        // An empty file is what an editor's "new file" leaves; Claude Code treats it as `{}`.
        return Ok(Loaded { root: Map::new(), existed: true, jsonc: None });
    }
    match serde_json::from_str::<Value>(text).map_err(|e| not_json(e.to_string()))? {
        Value::Object(root) => Ok(Loaded { root, existed: true, jsonc: None }),
        other => Err(not_json(format!("top level is {}, expected an object", kind(&other)))),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn commit(path: &Path, loaded: &Loaded, root: Map<String, Value>) -> Result<Outcome, HooksError> {
    let unchanged = Outcome { changed: false, backup: None, settings_path: path.to_path_buf() };
    if loaded.existed && root == loaded.root {
        return Ok(unchanged);
    }
    if !loaded.existed && root.is_empty() {
        // Uninstall with no settings file: nothing to do, do not create one.
        return Ok(unchanged);
    }
    let text = match &loaded.jsonc {
        Some(old) => edit_in_place(path, old, &loaded.root, &root)?,
        None => {
            let mut text = serde_json::to_string_pretty(&Value::Object(root)).expect("serialising a Value");
            text.push('\n');
            text
        }
    };
    let (confine, target) = write_place(path, true)?;
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let backup = if loaded.existed {
        confined::backup(&confine, &target, secs).map_err(io_err("backing up", &target))?
    } else {
        None
    };
    // A new file is private; a replaced one keeps its permission bits.
    let mode = if loaded.existed { None } else { Some(pcmail_fsmode::FILE_MODE) };
    confined::replace(&confine, &target, text.as_bytes(), mode).map_err(io_err("writing", &target))?;
    Ok(Outcome { changed: true, backup, settings_path: path.to_path_buf() })
}

/// Where a settings file is written: the folder the write is confined to and
/// the file. Inside a git work tree the file is the repo's content (a
/// project's `.claude/settings.json`): confined to the work tree, a committed
/// symlink at the file or on its way is refused, never followed out of the
/// repo. Elsewhere it is the user's own config: a symlinked settings.json (a
/// dotfile manager's) is written through to its target, whose folder is made
/// when missing.
fn write_place(path: &Path, create: bool) -> Result<(PathBuf, PathBuf), HooksError> {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().map_err(io_err("resolving", path))?.join(path)
    };
    if let Some(tree) = pcmail_fsmode::enclosing_work_tree(&abs) {
        return Ok((tree, abs));
    }
    let target = if fs::symlink_metadata(&abs).map(|m| m.file_type().is_symlink()).unwrap_or(false) {
        fs::canonicalize(&abs).map_err(io_err("resolving", path))?
    } else {
        abs
    };
    let dir = target.parent().expect("an absolute file path has a folder").to_path_buf();
    if create {
        fs::create_dir_all(&dir).map_err(io_err("creating directory", &dir))?;
    }
    Ok((dir, target))
}

/// A settings file inside a git work tree that pcmail would refuse to write
/// (a symlink, or a symlinked folder on its way) is refused before it is
/// read, so its target's content is never parsed or shown.
fn check_confined(path: &Path) -> Result<(), HooksError> {
    let (confine, target) = write_place(path, false)?;
    match confined::read(&confine, &target) {
        Err(e) if confined::is_refused(&e) => Err(io_err("reading", path)(e)),
        _ => Ok(()),
    }
}

/// The new text of a file that may hold comments: only the events under
/// `hooks` that changed are rewritten; comments and everything else stay.
fn edit_in_place(
    path: &Path,
    old: &str,
    before: &Map<String, Value>,
    after: &Map<String, Value>,
) -> Result<String, HooksError> {
    let shape = |detail: String| HooksError::UnexpectedShape { path: path.to_path_buf(), detail };
    let events = |root: &Map<String, Value>| root.get("hooks").and_then(Value::as_object).cloned().unwrap_or_default();
    let (was, now) = (events(before), events(after));
    let mut text = if old.trim().is_empty() { "{}\n".to_string() } else { old.to_string() };
    let names: Vec<String> = was.keys().chain(now.keys()).cloned().collect();
    for name in names {
        if was.get(&name) != now.get(&name) {
            text = pcmail_jsonc::set(&text, &["hooks", &name], now.get(&name)).map_err(|e| shape(e.to_string()))?;
        }
    }
    Ok(text)
}

#[cfg(test)]
mod tests;

// ---------------------------------------------------------------------------------------------
// the installed Claude Code, for `pcmail doctor`

/// The oldest Claude Code release pcmail's hooks work on: 1.0.61 and older do not know
/// `SessionStart` and reject the whole `hooks` setting (tests/claude-code, scenario 4).
pub const MIN_CLAUDE_CODE: (u32, u32, u32) = (1, 0, 62);
/// The first Claude Code release that knows `args` (exec form); before it, an exec-form entry
/// runs bare `pcmail` and blocks every prompt (found by bisecting the npm releases).
pub const EXEC_FORM_SINCE: (u32, u32, u32) = (2, 1, 139);

/// What `claude --version` said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaudeCodeVersion {
    /// `claude` is not on PATH.
    NotOnPath,
    /// Its first line, e.g. `2.1.332 (Claude Code)`, and the version parsed from it.
    Found { line: String, version: Option<(u32, u32, u32)> },
    /// It ran but failed, or did not answer within the timeout.
    Failed(String),
}

/// Runs `<claude> --version` with `timeout` (killed past it). `claude` is the program name or
/// path (normally `"claude"`, looked up on PATH).
pub fn claude_code_version(claude: &OsStr, timeout: std::time::Duration) -> ClaudeCodeVersion {
    use std::process::{Command, Stdio};
    let mut child = match Command::new(claude)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return ClaudeCodeVersion::NotOnPath,
        Err(e) => return ClaudeCodeVersion::Failed(e.to_string()),
    };
    let deadline = std::time::Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return ClaudeCodeVersion::Failed(format!(
                    "`claude --version` did not answer within {} s",
                    timeout.as_secs_f32()
                ));
            }
            Err(e) => return ClaudeCodeVersion::Failed(e.to_string()),
        }
    };
    let mut out = String::new();
    if let Some(mut so) = child.stdout.take() {
        let _ = io::Read::read_to_string(&mut so, &mut out);
    }
    if !status.success() {
        return ClaudeCodeVersion::Failed(format!("`claude --version` exited with {status}"));
    }
    let line = out.lines().next().unwrap_or("").trim().to_owned();
    ClaudeCodeVersion::Found { version: parse_version(&line), line }
}

/// The first `X.Y.Z` in `s`.
pub fn parse_version(s: &str) -> Option<(u32, u32, u32)> {
    s.split(|c: char| !(c.is_ascii_digit() || c == '.')).find_map(|w| {
        let mut it = w.split('.').map(|n| n.parse::<u32>().ok());
        match (it.next(), it.next(), it.next()) {
            (Some(Some(a)), Some(Some(b)), Some(Some(c))) => Some((a, b, c)),
            _ => None,
        }
    })
}
