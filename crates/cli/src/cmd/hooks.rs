//! `pcmail hooks`: the agents' hook settings and the git pre-commit lease
//! guard; `pcmail hook`, the hook itself (the same code as `pcmail-hook`).

use anyhow::Context;
use clap::ValueEnum;
use pcmail_client::ClientError;
use std::path::PathBuf;
use std::time::Duration;

/// The agent whose hooks (or MCP entry) these are.
#[derive(Clone, Copy, ValueEnum)]
pub enum AgentArg {
    Claude,
    Codex,
    Gemini,
}

/// `pcmail hooks install|uninstall|status` for an agent's settings file.
pub fn agent(action: &str, settings: Option<PathBuf>, client: AgentArg, json: bool) -> anyhow::Result<()> {
    use pcmail_claude_hooks::Agent;
    let agent = match client {
        AgentArg::Claude => Agent::Claude,
        AgentArg::Codex => Agent::Codex,
        AgentArg::Gemini => Agent::Gemini,
    };
    let path = settings.or_else(|| agent.default_path()).context("no home directory")?;
    match action {
        "install" => {
            let spec = hook_spec_for(agent)?;
            let o = pcmail_claude_hooks::install(&path, &spec)?;
            let events: Vec<&str> = spec.events.iter().map(|e| e.event).collect();
            if json {
                println!(
                    "{}",
                    serde_json::json!({"changed": o.changed, "settings": o.settings_path, "events": events,
                                       "backup": o.backup})
                );
            } else {
                println!(
                    "pcmail: hooks {} for {} in {}{}",
                    if o.changed { "installed" } else { "already installed" },
                    events.join(", "),
                    o.settings_path.display(),
                    o.backup.map(|b| format!(" (backup {})", b.display())).unwrap_or_default()
                );
            }
        }
        "uninstall" => {
            let o = pcmail_claude_hooks::uninstall_for(agent, &path)?;
            if json {
                println!("{}", serde_json::json!({"changed": o.changed, "settings": o.settings_path}));
            } else {
                println!(
                    "pcmail: hooks {} in {}",
                    if o.changed { "removed" } else { "were not installed" },
                    o.settings_path.display()
                );
            }
        }
        _ => {
            let s = pcmail_claude_hooks::status_for(agent, &path)?;
            let wanted = agent.events();
            let level = s.level(&wanted);
            let (registered, missing) = (s.registered_events(), s.missing_events(&wanted));
            let form = match (s.hooks.is_empty(), s.needs_migration()) {
                (true, _) => None,
                (false, true) => Some("exec"),
                (false, false) => Some("shell"),
            };
            if json {
                println!(
                    "{}",
                    serde_json::json!({"state": level.as_str(), "settings": path, "events": registered,
                                       "missing": missing, "form": form})
                );
            } else {
                let events =
                    if registered.is_empty() { String::new() } else { format!(" for {}", registered.join(", ")) };
                let missing = if missing.is_empty() || registered.is_empty() {
                    String::new()
                } else {
                    format!("; not for {}", missing.join(", "))
                };
                let form = match form {
                    Some("exec") => ", old exec form: `pcmail hooks install` moves it to the shell form",
                    Some(_) => ", shell form",
                    None => "",
                };
                println!("pcmail: hooks {level}{events}{missing} ({}){form}", path.display());
            }
        }
    }
    Ok(())
}

/// What `hooks install` and `doctor --fix` register: `pcmail-hook` when it sits beside this
/// `pcmail`, else `pcmail hook`; shell form either way (see crates/claude-hooks).
pub(crate) fn hook_spec() -> anyhow::Result<pcmail_claude_hooks::HookSpec> {
    hook_spec_for(pcmail_claude_hooks::Agent::Claude)
}

/// The hook program every hook pcmail installs runs (the agents' hooks and
/// the git pre-commit guard alike): `pcmail-hook` when it sits beside this
/// `pcmail`, else `pcmail hook` (the same code).
pub(crate) fn hook_command() -> anyhow::Result<pcmail_claude_hooks::HookCommand> {
    // canonicalize() gives `\\?\C:\…` on Windows, which Git Bash cannot run.
    let exe = std::env::current_exe()?;
    let exe = if cfg!(windows) { exe } else { exe.canonicalize()? };
    Ok(pcmail_claude_hooks::HookCommand::for_pcmail_exe(&exe))
}

/// The same for `agent`'s hooks file (Claude Code's events depend on its release).
pub(crate) fn hook_spec_for(agent: pcmail_claude_hooks::Agent) -> anyhow::Result<pcmail_claude_hooks::HookSpec> {
    let command = hook_command()?;
    if agent != pcmail_claude_hooks::Agent::Claude {
        return Ok(pcmail_claude_hooks::HookSpec::for_agent(agent, command));
    }
    let mut spec = pcmail_claude_hooks::HookSpec::new(command);
    // SessionEnd only where the installed Claude Code knows it (1.0.62 rejects an unknown event).
    let version = match pcmail_claude_hooks::claude_code_version(std::ffi::OsStr::new("claude"), Duration::from_secs(5))
    {
        pcmail_claude_hooks::ClaudeCodeVersion::Found { version, .. } => version,
        _ => None,
    };
    spec.events = pcmail_claude_hooks::events_for(version);
    Ok(spec)
}

/// `pcmail hooks install|uninstall|status --git`: the pre-commit lease guard
/// runs `<hook program> pre-commit`, the hook program chosen as for the
/// agents' hooks (`hook_command`).
pub fn git(action: &str, json: bool) -> anyhow::Result<()> {
    use pcmail_local::githook;
    let dir = std::env::current_dir()?;
    match action {
        "install" => {
            let hook = hook_command()?.shell_command().map_err(|e| ClientError::Invalid(e.to_string()))?;
            let done = githook::install(&dir, &hook).map_err(|e| ClientError::Invalid(e.to_string()))?;
            if json {
                println!("{}", serde_json::to_string(&done)?);
            } else {
                println!(
                    "pcmail: git pre-commit lease guard {} in {}{}; `git commit --no-verify` skips it",
                    if done.changed { "installed" } else { "already installed" },
                    done.hook.display(),
                    done.chained
                        .as_ref()
                        .map(|c| format!(" (the earlier hook runs after it: {})", c.display()))
                        .unwrap_or_default()
                );
            }
        }
        "uninstall" => {
            let removed = githook::uninstall(&dir).map_err(|e| ClientError::Invalid(e.to_string()))?;
            println!("pcmail: git pre-commit lease guard {}", if removed { "removed" } else { "was not installed" });
        }
        _ => {
            let hooks = githook::hooks_dir(&dir).map_err(|e| ClientError::Invalid(e.to_string()))?;
            let ours = std::fs::read_to_string(hooks.join("pre-commit")).is_ok_and(|t| t.contains(githook::MARKER));
            println!(
                "pcmail: git pre-commit lease guard {} ({})",
                if ours { "installed" } else { "not installed" },
                hooks.display()
            );
        }
    }
    Ok(())
}

/// The same library code as `pcmail-hook`; here `pcmail` is this binary.
pub fn run_hook() {
    if let Some(out) = pcmail_local::hook::main_with(|| std::env::current_exe().ok()) {
        use std::io::Write;
        let _ = writeln!(std::io::stdout().lock(), "{out}");
    }
}
