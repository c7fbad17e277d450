//! Sessions and names: `name` and `who`, one function each,
//! shared by `pcmail name` / `pcmail who` and the MCP tools.

use crate::{optional_not_null, ApiError, Result};
use pcmail_client::{Client, ClientError};
use pcmail_core::rules::clean_session_id;
use pcmail_core::sessions::{TakeAnswer, WhoAnswer};
use pcmail_local::process;
use pcmail_store::leases as sl;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = optional_not_null)]
pub struct NameArgs {
    /// The name to take (spelled as a PC label: lower-case a-z 0-9 . _ -). It moves here from an ended session; a live holder or a PC label refuses it.
    pub name: String,
    /// The session taking it; default: the Claude Code session above the caller (`PCMAIL_SESSION` outside Claude Code).
    #[serde(default)]
    pub session: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct NameResult {
    #[serde(flatten)]
    pub taken: TakeAnswer,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct WhoArgs {}

/// The session this command runs in: `PCMAIL_SESSION`, else the current
/// session of the Claude Code process above it (as `pcmail lease claim`
/// finds it, from the registry the hook keeps).
pub fn current_session(client: &Client) -> Option<String> {
    if let Some(s) = std::env::var("PCMAIL_SESSION").ok().and_then(|s| clean_session_id(s.trim())) {
        return Some(s);
    }
    let c = process::claude_ancestor()?;
    sl::session_of_process(client.store.conn(), c.pid, c.start)
        .ok()
        .flatten()
        .and_then(|r| clean_session_id(&r.session))
}

/// A server without sessions answers `unknown_op`: say so at once.
fn unsupported(e: ClientError) -> ApiError {
    match e.refused() {
        Some(p) if p.code == pcmail_core::ErrorCode::UnknownOp => ApiError::Unsupported { feature: "sessions".into() },
        _ => ApiError::Client(e),
    }
}

/// `name`: this session takes a name (refused: exit 5 with the holder or the label).
pub fn name(client: &mut Client, args: &NameArgs) -> Result<NameResult> {
    pcmail_core::sessions::check_name("name", &args.name).map_err(|e| ApiError::Usage(e.message))?;
    // A session the servers would refuse is cleaned as the hook cleans the one it records.
    let session = match args.session.as_deref().and_then(|s| clean_session_id(s.trim())) {
        Some(s) => s,
        None => current_session(client).ok_or_else(|| {
            ApiError::Usage(
                "no Claude Code session above this command (the hook records sessions on SessionStart): run it from a session, or set PCMAIL_SESSION"
                    .into(),
            )
        })?,
    };
    let taken = client.name_take(&args.name, &session).map_err(unsupported)?;
    Ok(NameResult { taken })
}

/// `who`: every live session on every PC (name, PC, repo, branch, idle, leases), from the server.
pub fn who(client: &mut Client, _args: &WhoArgs) -> Result<WhoAnswer> {
    client.who().map_err(unsupported)
}
