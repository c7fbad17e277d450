//! The MCP tools for the code map and the admin's credential
//! commands: each a thin wrapper over the same pcmail-api
//! function as `pcmail map [--check]`, `pcmail roster add|revoke|log|
//! require-credentials` and `pcmail token rotate`.

use crate::args::Parameters;
use crate::server::PcmailMcp;
use pcmail_api::admin::{self, AuditLogArgs, RequireCredentialsArgs, RevokeArgs, RosterEnrolArgs};
use pcmail_api::codemap::{self, MapArgs};
use pcmail_api::features::Group;
use pcmail_api::NoArgs;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};

#[tool_router(router = admin_tool_router, vis = "pub(crate)")]
impl PcmailMcp {
    #[tool(
        description = "Write the code map of a repo (.claude/code-map.md and llms.txt; only what changed), parsing only files changed since the last run (cache in the PC store). repo defaults to the server's working folder's repo. Result: {repo, files, parsed, reused, failed, changed, llms_chars, …}."
    )]
    async fn map(&self, a: Parameters<MapArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_paths(a, |p, a| codemap::map(&p, &a)).await
    }

    #[tool(
        description = "Is the repo's code map fresh? Writes nothing. Result: the report as `map` gives it; error map_stale (exit 15) with the reasons and the command that refreshes it."
    )]
    async fn map_check(&self, a: Parameters<MapArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_paths(a, |p, a| codemap::map_check(&p, &a)).await
    }

    #[tool(
        description = "Admin: add a PC as `pcmail roster add` does. On a server with per-PC credentials: a one-time join code for label, valid for expires (default 24h) — hand it to that PC (`pcmail init --join CODE --server SERVER`); it is shown once and stored nowhere. On the embedded default or a server without credentials, or with number: a plain roster entry (hostname needed). Result: {label, code, expiresAt, server} or the roster answer. Needs the admin secret (error not_enrolled, exit 12)."
    )]
    async fn roster_enrol(&self, a: Parameters<RosterEnrolArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, a, |c, a| admin::roster_enrol(c, &a)).await
    }

    #[tool(
        description = "Admin: revoke a PC's credential at once; its mail waits for a PC re-enrolled under that label. Result: {changed, …}. Error unsupported (exit 5) on a server without per-PC credentials."
    )]
    async fn roster_revoke(&self, a: Parameters<RevokeArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, a, |c, a| admin::revoke(c, &a)).await
    }

    #[tool(
        description = "Admin: the audit log (enrol, join, revoke, rotate, roster changes), newest first; limit 1–500 (default 50). Result: {entries: [{at, by, action, label, detail}]}."
    )]
    async fn roster_log(&self, a: Parameters<AuditLogArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, a, |c, a| admin::audit_log(c, &a)).await
    }

    #[tool(
        description = "Admin: stop (on=true, default) or resume (on=false) accepting the shared token for PC operations, once every PC has its credential. Result: {requireCredentials, changed, unbound: [labels still on the shared token]}."
    )]
    async fn roster_require_credentials(
        &self,
        a: Parameters<RequireCredentialsArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, a, |c, a| admin::require_credentials(c, &a)).await
    }

    #[tool(
        description = "Give this PC a new credential (kept in the OS keyring); the old one stops working at once. Result: {rotated, label}. Errors: unsupported (exit 5) on a server without per-PC credentials; usage (exit 2) when the credential comes from PCMAIL_CREDENTIAL."
    )]
    async fn token_rotate(&self, a: Parameters<NoArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, a, |c, _| admin::token_rotate(c)).await
    }
}
