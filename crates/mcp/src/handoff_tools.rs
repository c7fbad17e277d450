//! The MCP tools for handoffs, rollups and memory: each a thin
//! wrapper over the same pcmail-api function as `pcmail handoff …` /
//! `pcmail memory …`. They work on the repo's files (the `repo` argument, else
//! the server's working directory) and the PC store; they need no server
//! except to `announce`.

use crate::args::Parameters;
use crate::server::PcmailMcp;
use pcmail_api::handoffs::{
    self as api, HandoffCloseArgs, HandoffListArgs, HandoffNameArgs, HandoffNewArgs, HandoffRollupArgs, MemoryAddArgs,
    MemorySearchArgs, MemoryShowArgs,
};
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};

fn now() -> chrono::DateTime<chrono::Utc> {
    chrono::Utc::now()
}

#[tool_router(router = handoff_tool_router, vis = "pub(crate)")]
impl PcmailMcp {
    #[tool(
        description = "Write a handoff for the next session (.claude/handoffs/, ACTIVE in INDEX.md, never overwriting). goal, state and next are required, as fields or as headings in markdown. An announce refused after the write: announce_failed."
    )]
    async fn handoff_new(&self, a: Parameters<HandoffNewArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_paths(a, |p, a| api::handoff_new(&p, &a, now())).await
    }

    #[tool(
        description = "Handoffs of the repo, newest first: by default the latest rollup and the handoffs neither rolled up nor closed; all=true lists every one with its last INDEX event. Result: {repo, handoffs: [{name, at, rollup, status, goal, next, state, rolled_up_into, through}]}."
    )]
    async fn handoff_list(&self, a: Parameters<HandoffListArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_paths(a, |_, a| api::handoff_list(&a)).await
    }

    #[tool(
        description = "One handoff or rollup (its name or a unique part such as its slug): {name, path, text, summary, events}. Error not_found (exit 7) for an unknown name."
    )]
    async fn handoff_show(&self, a: Parameters<HandoffNameArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_paths(a, |_, a| api::handoff_show(&a)).await
    }

    #[tool(
        description = "Read a handoff (its name or a unique part) and record PICKED_UP by this session in INDEX.md."
    )]
    async fn handoff_pickup(&self, a: Parameters<HandoffNameArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_paths(a, |p, a| api::handoff_pickup(&p, &a, now())).await
    }

    #[tool(
        description = "Close a handoff that needs no more work: a CLOSED line (with the note) in INDEX.md. Result: the handoff as handoff_show gives it."
    )]
    async fn handoff_close(&self, a: Parameters<HandoffCloseArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_paths(a, |p, a| api::handoff_close(&p, &a, now())).await
    }

    #[tool(
        description = "Fold every handoff up to `through` that no rollup covers yet into a rollup file (front matter type: rollup, covers, through; your body), and stamp rolled_up_into: into each covered handoff. Error not_found (exit 7) when there is nothing to fold. Result: {name, path, through, covers[, announced | announce_failed]}; announce as for handoff_new."
    )]
    async fn handoff_rollup(&self, a: Parameters<HandoffRollupArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_paths(a, |p, a| api::handoff_rollup(&p, &a, now())).await
    }

    #[tool(
        description = "Append a decision or a gotcha to .claude/memory/<topic>.md (topic like auth/session). Result: {topic, path, entry}."
    )]
    async fn memory_add(&self, a: Parameters<MemoryAddArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_paths(a, |p, a| api::memory_add(&p, &a, now())).await
    }

    #[tool(
        description = "Memory entries of a topic and its sub-topics (every topic when none). Result: {repo, entries: [{topic, kind, at, by, text, why}]}. Error not_found (exit 7) for an unknown topic."
    )]
    async fn memory_show(&self, a: Parameters<MemoryShowArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_paths(a, |_, a| api::memory_show(&a)).await
    }

    #[tool(
        description = "Memory entries with every one of the words (prefixes count), best first, through the full-text index in the PC store (refreshed from the files first). Result: {repo, entries}."
    )]
    async fn memory_search(&self, a: Parameters<MemorySearchArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_paths(a, |p, a| api::memory_search(&p, &a)).await
    }
}
