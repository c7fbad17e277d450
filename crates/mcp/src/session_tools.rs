//! The MCP tools for sessions and names: thin wrappers over
//! the same pcmail-api functions as `pcmail name` / `pcmail who`.

use crate::args::Parameters;
use crate::server::PcmailMcp;
use pcmail_api::features::Group;
use pcmail_api::sessions::{self as api, NameArgs, WhoArgs};
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};

#[tool_router(router = session_tool_router, vis = "pub(crate)")]
impl PcmailMcp {
    #[tool(
        description = "This session takes a name (ani, vasya; spelled as a PC label): mail sent to the name comes to it, on whichever PC it runs. Names and PC labels share one namespace. Refused (exit 5, refused) when a live session holds it (the message names the holder) or it is a label; it moves from an ended session, with its unseen mail. The session is the Claude Code session above this server (or `session`). Result: {name, holder, previous, changed, requeued}."
    )]
    async fn name(&self, a: Parameters<NameArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Sessions, a, |c, a| api::name(c, &a)).await
    }

    #[tool(
        description = "Every live session on every PC (name, pc, repo, branch, idle time, leases) and the names no live session holds."
    )]
    async fn who(&self, a: Parameters<WhoArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Sessions, a, |c, a| api::who(c, &a)).await
    }
}
