//! `pcmail mcp install|uninstall`: registers `pcmail mcp` with an agent the
//! way that agent documents it.
//!
//! - Claude Code: `claude mcp add --scope user|project pcmail -- <exe> mcp`
//!   when `claude` is on PATH; without it, project scope writes `.mcp.json`
//!   (`mcpServers.pcmail`) and user scope says what to run. `~/.claude.json`
//!   is Claude Code's own state file: never written here.
//! - Codex CLI: `$CODEX_HOME/config.toml` (default `~/.codex/config.toml`),
//!   table `[mcp_servers.pcmail]` with `command` and `args` (user scope only).
//!   Codex gives an MCP server only a short list of its own environment, so
//!   the entry also says `env = { PCMAIL_HOME = … }` when `PCMAIL_HOME` is set
//!   (else the server would open the default PC store, not the user's) and
//!   `env_vars = [names]` for the credential variables that are set: Codex
//!   passes those on from its own environment, so no secret is written.
//! - Gemini CLI: `~/.gemini/settings.json` (project: `.gemini/settings.json`),
//!   `mcpServers.pcmail` with `command`, `args` and, as for Codex, `env`:
//!   `PCMAIL_HOME` by value and each credential variable as `"$NAME"`, which
//!   Gemini expands when it starts the server (it withholds variables whose
//!   names look like secrets unless `env` names them). The file may hold
//!   comments, as Gemini allows: only `mcpServers.pcmail` changes
//!   (crates/jsonc), every comment stays. Gemini's non-interactive mode hides
//!   every tool its policy would ask about, so a user-scope install also
//!   writes `~/.gemini/policies/pcmail.toml`, a rule that allows pcmail's
//!   read-only tools (the same ones Codex runs without asking); the others
//!   stay the user's decision.
//!
//! Files are merged, never clobbered (other keys, comments and order kept),
//! written atomically (temp file + rename) after a backup copy, and only when
//! something changes, so a second install is a no-op and `uninstall` puts the
//! file back to what it was without pcmail.

use pcmail_core::shell::shell_quote;
use serde_json::{Map, Value};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

/// The name pcmail's server is registered under in every client.
pub const SERVER_NAME: &str = "pcmail";

/// The environment variables that carry a credential (the shared token, this
/// PC's own credential, the admin secret): passed on by name, never by value.
pub const CREDENTIAL_VARS: &[&str] = &["PCMAIL_TOKEN", "PCMAIL_CREDENTIAL", "PCMAIL_ADMIN_TOKEN"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    User,
    Project,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Project => "project",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    Claude,
    Codex,
    Gemini,
}

/// Where and what to register.
#[derive(Debug, Clone)]
pub struct Target {
    pub agent: Agent,
    pub scope: Scope,
    /// Absolute path of the `pcmail` executable.
    pub exe: PathBuf,
    /// The user's home directory (`HOME`).
    pub home: PathBuf,
    /// The project directory for project scope (the current directory).
    pub project: PathBuf,
    /// `CODEX_HOME` when set.
    pub codex_home: Option<PathBuf>,
    /// The `claude` executable, when on PATH.
    pub claude: Option<PathBuf>,
    /// `PCMAIL_HOME` when set.
    pub pcmail_home: Option<PathBuf>,
    /// The [`CREDENTIAL_VARS`] that are set.
    pub credential_vars: Vec<String>,
    /// `--tools` for `pcmail mcp` (None: the default tools).
    pub tools: Option<String>,
}

impl Target {
    /// From the environment: `HOME`, `CODEX_HOME`, `PATH`, the current directory.
    pub fn from_env(agent: Agent, scope: Scope, exe: PathBuf) -> Result<Target, InstallError> {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .or_else(|| std::env::var_os("USERPROFILE").filter(|h| !h.is_empty()))
            .map(PathBuf::from)
            .ok_or_else(|| InstallError::Usage("no home directory (HOME is not set)".into()))?;
        let project = std::env::current_dir().map_err(io_err("reading the current directory of", Path::new(".")))?;
        let codex_home = std::env::var_os("CODEX_HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
        let pcmail_home = std::env::var_os("PCMAIL_HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
        let credential_vars = CREDENTIAL_VARS
            .iter()
            .filter(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()))
            .map(|v| v.to_string())
            .collect();
        Ok(Target {
            agent,
            scope,
            exe,
            home,
            project,
            codex_home,
            claude: find_on_path("claude"),
            pcmail_home,
            credential_vars,
            tools: None,
        })
    }
}

/// What install/uninstall did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A config file was merged (`changed` false: it already said so).
    File { path: PathBuf, changed: bool, backup: Option<PathBuf> },
    /// `claude mcp …` was run with these arguments.
    Claude { args: Vec<String> },
}

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("{0}")]
    Usage(String),
    #[error("`claude` is not on PATH, and Claude Code's user scope is only changed through it: install Claude Code, then run `{command}` (or use --scope project to write .mcp.json here)")]
    NeedClaude { command: String },
    #[error("`{command}` failed ({status}): {stderr}")]
    ClaudeFailed { command: String, status: String, stderr: String },
    #[error("{}: {detail}; refusing to modify it", .path.display())]
    Unreadable { path: PathBuf, detail: String },
    #[error("{op} {}: {source}", .path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl InstallError {
    /// Bad arguments (exit 2) rather than local trouble (exit 9).
    pub fn is_usage(&self) -> bool {
        matches!(self, InstallError::Usage(_))
    }
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> InstallError + 'a {
    move |source| InstallError::Io { op, path: path.to_path_buf(), source }
}

/// The config file a target merges into (`None`: Claude Code through `claude`).
pub fn config_path(t: &Target) -> Result<Option<PathBuf>, InstallError> {
    Ok(match (t.agent, t.scope) {
        (Agent::Claude, _) if t.claude.is_some() => None,
        (Agent::Claude, Scope::Project) => Some(t.project.join(".mcp.json")),
        (Agent::Claude, Scope::User) => return Err(InstallError::NeedClaude { command: claude_add_line(t) }),
        (Agent::Codex, Scope::User) => {
            Some(t.codex_home.clone().unwrap_or_else(|| t.home.join(".codex")).join("config.toml"))
        }
        (Agent::Codex, Scope::Project) => {
            return Err(InstallError::Usage(
                "Codex reads MCP servers from ~/.codex/config.toml ($CODEX_HOME): use --scope user".into(),
            ))
        }
        (Agent::Gemini, Scope::User) => Some(t.home.join(".gemini").join("settings.json")),
        (Agent::Gemini, Scope::Project) => Some(t.project.join(".gemini").join("settings.json")),
    })
}

/// The folder a project-scope file is confined to (the project); None for
/// the user's own config.
fn project_root(t: &Target) -> Option<&Path> {
    (t.scope == Scope::Project).then_some(t.project.as_path())
}

fn exe_str(t: &Target) -> Result<&str, InstallError> {
    if !t.exe.is_absolute() {
        return Err(InstallError::Usage(format!("{}: the pcmail path must be absolute", t.exe.display())));
    }
    t.exe.to_str().ok_or_else(|| InstallError::Usage(format!("{}: not valid UTF-8", t.exe.display())))
}

/// The arguments after the executable: `mcp`, and `--tools GROUPS` when asked.
pub fn server_args(t: &Target) -> Vec<String> {
    let mut a = vec!["mcp".to_string()];
    if let Some(g) = &t.tools {
        a.push("--tools".into());
        a.push(g.clone());
    }
    a
}

/// What a project's shared file runs: the command found on PATH. The file is
/// committed and read on other PCs, so it holds no path of this one.
pub const SHARED_COMMAND: &str = "pcmail";

/// The command an entry runs: this pcmail's absolute path in the user's own
/// configuration, `pcmail` (from PATH) in a project's shared file.
fn command_for(t: &Target) -> Result<String, InstallError> {
    match t.scope {
        Scope::Project => Ok(SHARED_COMMAND.into()),
        Scope::User => exe_str(t).map(str::to_string),
    }
}

fn claude_add_args(t: &Target) -> Vec<String> {
    let exe = match t.scope {
        Scope::Project => SHARED_COMMAND.to_string(),
        Scope::User => t.exe.to_string_lossy().into_owned(),
    };
    let mut a: Vec<String> =
        ["mcp", "add", "--scope", t.scope.as_str(), SERVER_NAME, "--", &exe].iter().map(|s| s.to_string()).collect();
    a.extend(server_args(t));
    a
}

fn claude_add_line(t: &Target) -> String {
    let args: Vec<String> = claude_add_args(t).iter().map(|a| shell_quote(a)).collect();
    format!("claude {}", args.join(" "))
}

/// The first line of the policy file pcmail writes for Gemini (how uninstall knows it is ours).
const POLICY_MARKER: &str = "# Written by `pcmail mcp install --client gemini`";

/// `~/.gemini/policies/pcmail.toml` (user scope only: Gemini ignores project policies).
fn gemini_policy_path(t: &Target) -> Option<PathBuf> {
    (t.agent == Agent::Gemini && t.scope == Scope::User)
        .then(|| t.home.join(".gemini").join("policies").join(format!("{SERVER_NAME}.toml")))
}

/// A Gemini policy rule allowing the read-only tools of the installed profile.
fn gemini_policy(t: &Target) -> String {
    let profile = match &t.tools {
        Some(g) => crate::catalog::Profile::parse(g).unwrap_or_default(),
        None => crate::catalog::Profile::default(),
    };
    let names: Vec<String> = crate::catalog::TOOLS
        .iter()
        .filter(|s| s.read_only && profile.includes(s.group))
        .map(|s| format!("\"{}\"", s.name))
        .collect();
    format!(
        "{POLICY_MARKER}: pcmail's read-only MCP tools (readOnlyHint)\n\
         # run without a confirmation, also in `gemini -p`. Tools that change something stay yours to allow.\n\
         [[rule]]\nmcpName = \"{SERVER_NAME}\"\ntoolName = [{}]\ndecision = \"allow\"\npriority = 100\n",
        names.join(", ")
    )
}

pub fn install(t: &Target) -> Result<Outcome, InstallError> {
    let out = install_config(t)?;
    if let Some(policy) = gemini_policy_path(t) {
        let text = gemini_policy(t);
        if let Outcome::File { changed: false, .. } = merge_file(&policy, None, |_| Ok(text.clone()))? {
            return Ok(out);
        }
        if let Outcome::File { path, backup, .. } = out {
            return Ok(Outcome::File { path, changed: true, backup });
        }
    }
    Ok(out)
}

fn install_config(t: &Target) -> Result<Outcome, InstallError> {
    exe_str(t)?;
    let exe = command_for(t)?;
    let Some(path) = config_path(t)? else {
        // Re-adding replaces: remove first (absent is fine), so install is idempotent.
        let remove = ["mcp", "remove", "--scope", t.scope.as_str(), SERVER_NAME];
        let _ = run_claude(t, &remove.map(String::from), true);
        let args = claude_add_args(t);
        run_claude(t, &args, false)?;
        return Ok(Outcome::Claude { args });
    };
    let changed = |old: &str| -> Result<String, InstallError> {
        match t.agent {
            Agent::Codex => codex_set(&path, old, Some(t)),
            Agent::Claude => json_set(&path, old, Some(json_entry(t, &exe, false))),
            Agent::Gemini => jsonc_set(&path, old, Some(json_entry(t, &exe, true))),
        }
    };
    merge_file(&path, project_root(t), changed)
}

pub fn uninstall(t: &Target) -> Result<Outcome, InstallError> {
    if let Some(policy) = gemini_policy_path(t) {
        if fs::read_to_string(&policy).is_ok_and(|p| p.starts_with(POLICY_MARKER)) {
            fs::remove_file(&policy).map_err(io_err("removing", &policy))?;
        }
    }
    let Some(path) = config_path(t)? else {
        let args: Vec<String> = ["mcp", "remove", "--scope", t.scope.as_str(), SERVER_NAME].map(String::from).to_vec();
        run_claude(t, &args, false)?;
        return Ok(Outcome::Claude { args });
    };
    if !path.exists() {
        return Ok(Outcome::File { path, changed: false, backup: None });
    }
    let edit = |old: &str| -> Result<String, InstallError> {
        match t.agent {
            Agent::Codex => codex_set(&path, old, None),
            Agent::Claude => json_set(&path, old, None),
            Agent::Gemini => jsonc_set(&path, old, None),
        }
    };
    merge_file(&path, project_root(t), edit)
}

fn run_claude(t: &Target, args: &[String], quiet: bool) -> Result<(), InstallError> {
    let claude = t.claude.as_ref().expect("only called with claude on PATH");
    let out = Command::new(claude)
        .args(args)
        .current_dir(&t.project)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(io_err("running", claude))?;
    if out.status.success() || quiet {
        return Ok(());
    }
    Err(InstallError::ClaudeFailed {
        command: format!("claude {}", args.iter().map(|a| shell_quote(a)).collect::<Vec<_>>().join(" ")),
        status: out.status.to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
    })
}

/// `{command, args[, env]}`: `env` (Gemini) holds `PCMAIL_HOME` by value and
/// the credential variables as `$NAME`, expanded by the agent.
fn json_entry(t: &Target, exe: &str, with_env: bool) -> Map<String, Value> {
    let mut entry = Map::new();
    entry.insert("command".into(), Value::String(exe.into()));
    entry.insert("args".into(), serde_json::json!(server_args(t)));
    let mut env = Map::new();
    if with_env {
        if let Some(h) = &t.pcmail_home {
            // A project's file is shared: each PC's own PCMAIL_HOME, never this one's path.
            let value = match t.scope {
                Scope::Project => "$PCMAIL_HOME".to_string(),
                Scope::User => h.to_string_lossy().into_owned(),
            };
            env.insert("PCMAIL_HOME".into(), Value::String(value));
        }
        for v in &t.credential_vars {
            env.insert(v.clone(), Value::String(format!("${v}")));
        }
    }
    if !env.is_empty() {
        entry.insert("env".into(), Value::Object(env));
    }
    entry
}

/// `mcpServers.pcmail` in a JSON-with-comments file, changed in place (None: removed).
fn jsonc_set(path: &Path, old: &str, entry: Option<Map<String, Value>>) -> Result<String, InstallError> {
    let unreadable = |detail: String| InstallError::Unreadable { path: path.to_path_buf(), detail };
    let root = pcmail_jsonc::parse(old).map_err(|e| unreadable(format!("not JSON ({e})")))?;
    let current = root.get("mcpServers").and_then(|s| s.get(SERVER_NAME));
    let want = entry.map(Value::Object);
    if current == want.as_ref() {
        return Ok(old.to_string());
    }
    if old.trim().is_empty() && want.is_none() {
        return Ok(old.to_string());
    }
    let text = if old.trim().is_empty() { "{}\n" } else { old };
    pcmail_jsonc::set(text, &["mcpServers", SERVER_NAME], want.as_ref()).map_err(|e| unreadable(e.to_string()))
}

/// `mcpServers.pcmail = {command, args}` in a JSON object (`entry` None: removed).
fn json_set(path: &Path, old: &str, entry: Option<Map<String, Value>>) -> Result<String, InstallError> {
    let unreadable = |detail: String| InstallError::Unreadable { path: path.to_path_buf(), detail };
    let mut root: Map<String, Value> = if old.trim().is_empty() {
        Map::new()
    } else {
        match serde_json::from_str::<Value>(old) {
            Ok(Value::Object(m)) => m,
            Ok(_) => return Err(unreadable("not a JSON object".into())),
            Err(e) => return Err(unreadable(format!("not JSON ({e})"))),
        }
    };
    match entry {
        Some(want) => {
            let servers = root.entry("mcpServers").or_insert_with(|| Value::Object(Map::new()));
            let Value::Object(servers) = servers else { return Err(unreadable("mcpServers is not an object".into())) };
            let entry = servers.entry(SERVER_NAME).or_insert_with(|| Value::Object(Map::new()));
            let Value::Object(entry) = entry else {
                return Err(unreadable("mcpServers.pcmail is not an object".into()));
            };
            for (k, v) in want {
                entry.insert(k, v);
            }
        }
        None => {
            if let Some(Value::Object(servers)) = root.get_mut("mcpServers") {
                servers.remove(SERVER_NAME);
                if servers.is_empty() {
                    root.remove("mcpServers");
                }
            }
        }
    }
    let mut s = serde_json::to_string_pretty(&Value::Object(root)).expect("a JSON value serialises");
    s.push('\n');
    Ok(s)
}

/// `[mcp_servers.pcmail]` in Codex's config.toml: `command`, `args`, `env`
/// (`PCMAIL_HOME`) and `env_vars` (the credential variables' names), each
/// rewritten only when it differs so an unchanged entry stays as the user
/// formatted it (`t` None: removed).
fn codex_set(path: &Path, old: &str, t: Option<&Target>) -> Result<String, InstallError> {
    let unreadable = |detail: String| InstallError::Unreadable { path: path.to_path_buf(), detail };
    let mut doc: toml_edit::DocumentMut = old.parse().map_err(|e| unreadable(format!("not TOML ({e})")))?;
    match t {
        Some(t) => {
            let exe = exe_str(t)?;
            let servers = doc.entry("mcp_servers").or_insert_with(|| {
                let mut t = toml_edit::Table::new();
                t.set_implicit(true);
                toml_edit::Item::Table(t)
            });
            let servers = servers.as_table_mut().ok_or_else(|| unreadable("mcp_servers is not a table".into()))?;
            let entry = servers.entry(SERVER_NAME).or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()));
            let entry = entry.as_table_mut().ok_or_else(|| unreadable("mcp_servers.pcmail is not a table".into()))?;
            if entry.get("command").and_then(|c| c.as_str()) != Some(exe) {
                entry["command"] = toml_edit::value(exe);
            }
            let strings = |item: Option<&toml_edit::Item>| -> Option<Vec<String>> {
                item?.as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
            };
            let array = |v: &[String]| {
                let mut a = toml_edit::Array::new();
                v.iter().for_each(|x| a.push(x.as_str()));
                toml_edit::value(a)
            };
            let args = server_args(t);
            if strings(entry.get("args")).as_deref() != Some(args.as_slice()) {
                entry["args"] = array(&args);
            }
            let home = t.pcmail_home.as_ref().map(|h| h.to_string_lossy().into_owned());
            let current_home = entry
                .get("env")
                .and_then(|e| e.as_table_like())
                .and_then(|e| e.get("PCMAIL_HOME"))
                .and_then(|h| h.as_str())
                .map(str::to_string);
            if current_home != home {
                // Only PCMAIL_HOME in `env`: the user's other variables stay.
                if entry.get("env").is_some_and(|e| e.as_table_like().is_none()) {
                    return Err(unreadable("mcp_servers.pcmail.env is not a table".into()));
                }
                match &home {
                    Some(h) => {
                        if entry.get("env").is_none() {
                            entry["env"] = toml_edit::value(toml_edit::InlineTable::new());
                        }
                        let env = entry["env"].as_table_like_mut().expect("checked: a table");
                        env.insert("PCMAIL_HOME", toml_edit::value(h.as_str()));
                    }
                    None => {
                        let env = entry["env"].as_table_like_mut().expect("present: it held PCMAIL_HOME");
                        env.remove("PCMAIL_HOME");
                        if env.is_empty() {
                            entry.remove("env");
                        }
                    }
                }
            }
            if strings(entry.get("env_vars")).unwrap_or_default() != t.credential_vars {
                if t.credential_vars.is_empty() {
                    entry.remove("env_vars");
                } else {
                    entry["env_vars"] = array(&t.credential_vars);
                }
            }
        }
        None => {
            if let Some(servers) = doc.get_mut("mcp_servers").and_then(|s| s.as_table_mut()) {
                servers.remove(SERVER_NAME);
                if servers.is_empty() {
                    doc.remove("mcp_servers");
                }
            }
        }
    }
    Ok(doc.to_string())
}

/// Reads `path` (absent: empty), computes the new text, and writes it only
/// if it differs, after a backup copy. A file in a project (`root`, or the
/// git work tree holding it) is the repo's content: it is read and written
/// confined to that folder (a committed symlink at `.mcp.json` or at
/// `.gemini/` is refused, never followed out of the repo); a file of the
/// user's own config is written where its path leads.
fn merge_file(
    path: &Path,
    root: Option<&Path>,
    edit: impl FnOnce(&str) -> Result<String, InstallError>,
) -> Result<Outcome, InstallError> {
    use pcmail_fsmode::confined;
    if path.file_name().is_some_and(|n| n == ".claude.json") {
        return Err(InstallError::Usage("refusing to write ~/.claude.json (Claude Code's own state file)".into()));
    }
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().map_err(io_err("resolving", path))?.join(path)
    };
    let dir = abs.parent().expect("an absolute file path has a folder").to_path_buf();
    // The folder the write is confined to: the project, else the work tree
    // holding the file, else the file's own folder (the user's config).
    let (confine, inside) = match root.map(Path::to_path_buf).or_else(|| pcmail_fsmode::enclosing_work_tree(&abs)) {
        Some(r) => (r, true),
        None => (dir.clone(), false),
    };
    let old = if inside {
        confined::read(&confine, &abs)
    } else {
        match fs::read(&abs) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
    .map_err(io_err("reading", path))?
    .map(|b| {
        String::from_utf8(b)
            .map_err(|_| InstallError::Unreadable { path: path.to_path_buf(), detail: "not UTF-8".into() })
    })
    .transpose()?;
    let new = edit(old.as_deref().unwrap_or(""))?;
    if old.as_deref() == Some(new.as_str()) || (old.is_none() && new.trim().is_empty()) {
        return Ok(Outcome::File { path: path.to_path_buf(), changed: false, backup: None });
    }
    if !inside {
        fs::create_dir_all(&dir).map_err(io_err("creating", &dir))?;
    }
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let backup =
        if old.is_some() { confined::backup(&confine, &abs, secs).map_err(io_err("backing up", path))? } else { None };
    // A new file is private; a replaced one keeps its permission bits.
    let mode = if old.is_some() { None } else { Some(pcmail_fsmode::FILE_MODE) };
    confined::replace(&confine, &abs, new.as_bytes(), mode).map_err(io_err("writing", path))?;
    Ok(Outcome::File { path: path.to_path_buf(), changed: true, backup })
}

/// The first `name` on PATH that is an executable file.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        p.is_file() || p.with_extension("exe").is_file() || p.with_extension("cmd").is_file()
    }
}

#[cfg(test)]
mod tests;
