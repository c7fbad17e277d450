//! `pcmail mcp`: pcmail's operations as MCP tools over stdio (the official
//! Rust SDK, rmcp), and `pcmail mcp install|uninstall` for Claude Code, Codex
//! and Gemini CLI. The tools call pcmail-api, the same functions as the CLI.
//!
//! Nothing but the protocol goes to stdout; logs go to stderr.

mod admin_tools;
pub mod args;
pub mod catalog;
mod handoff_tools;
pub mod install;
mod job_tools;
pub mod server;
mod session_tools;

pub use catalog::Profile;
pub use server::{tool_names, tools_list_json, PcmailMcp};

use pcmail_local::config::Paths;
use rmcp::ServiceExt;

/// Serves MCP on stdin/stdout until the client closes it.
pub fn run_stdio(paths: Paths, profile: &Profile) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async move {
        let service = PcmailMcp::with_profile(paths, profile)
            // Non-blocking pipes on Linux (no thread hand-off per message); plain stdio elsewhere.
            .serve(rmcp::transport::stdio_pipes())
            .await
            .map_err(|e| std::io::Error::other(format!("MCP initialisation failed: {e}")))?;
        service.waiting().await.map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(())
    })
}
