//! `pcmail mcp`: the MCP server on stdio, or its install into an agent.

use super::hooks::AgentArg;
use clap::{Subcommand, ValueEnum};

#[derive(Subcommand)]
pub enum McpCmd {
    /// Register `pcmail mcp` with Claude Code (`claude mcp add`), Codex (~/.codex/config.toml) or Gemini CLI (~/.gemini/settings.json).
    Install {
        /// user: every project of this user; project: the current directory only (Claude Code's
        /// .mcp.json, Gemini's .gemini/settings.json; Codex has no project scope).
        #[arg(long, value_enum, default_value = "user")]
        scope: ScopeArg,
        /// The agent whose configuration gets the server.
        #[arg(long, value_enum, default_value = "claude")]
        client: AgentArg,
    },
    /// Remove what `install` registered.
    Uninstall {
        /// The scope `install` used.
        #[arg(long, value_enum, default_value = "user")]
        scope: ScopeArg,
        /// The agent whose configuration loses the server.
        #[arg(long, value_enum, default_value = "claude")]
        client: AgentArg,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ScopeArg {
    User,
    Project,
}

pub fn run(action: Option<McpCmd>, tools: Option<String>) -> anyhow::Result<()> {
    use pcmail_mcp::install::{self, Agent, Outcome, Scope, Target};
    let profile = match tools.as_deref() {
        Some(t) => pcmail_mcp::Profile::parse(t).map_err(pcmail_api::ApiError::Usage)?,
        None => pcmail_mcp::Profile::default(),
    };
    let (installing, scope, client) = match action {
        None => return Ok(pcmail_mcp::run_stdio(super::paths()?, &profile)?),
        Some(McpCmd::Install { scope, client }) => (true, scope, client),
        Some(McpCmd::Uninstall { scope, client }) => (false, scope, client),
    };
    let scope = match scope {
        ScopeArg::User => Scope::User,
        ScopeArg::Project => Scope::Project,
    };
    let agent = match client {
        AgentArg::Claude => Agent::Claude,
        AgentArg::Codex => Agent::Codex,
        AgentArg::Gemini => Agent::Gemini,
    };
    let as_api = |e: install::InstallError| {
        if e.is_usage() {
            pcmail_api::ApiError::Usage(e.to_string())
        } else {
            pcmail_api::ApiError::Local(e.to_string())
        }
    };
    // canonicalize() gives `\\?\C:\…` on Windows, which other programs cannot always run.
    let exe = std::env::current_exe()?;
    let exe = if cfg!(windows) { exe } else { exe.canonicalize()? };
    let mut t = Target::from_env(agent, scope, exe).map_err(as_api)?;
    t.tools = profile.to_arg();
    let out = if installing { install::install(&t) } else { install::uninstall(&t) }.map_err(as_api)?;
    let verb = if installing { "installed" } else { "removed" };
    match out {
        Outcome::Claude { args } => println!("pcmail: MCP server {verb} (ran: claude {})", args.join(" ")),
        Outcome::File { path, changed: true, backup } => println!(
            "pcmail: MCP server {verb} in {}{}",
            path.display(),
            backup.map(|b| format!(" (backup {})", b.display())).unwrap_or_default()
        ),
        Outcome::File { path, changed: false, .. } => {
            println!(
                "pcmail: MCP server {} in {}",
                if installing { "already installed" } else { "was not installed" },
                path.display()
            )
        }
    }
    Ok(())
}
