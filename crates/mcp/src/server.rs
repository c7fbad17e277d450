//! The MCP tools: one per pcmail-api function, each a thin wrapper that runs
//! the same function as the CLI on a blocking thread and returns its result
//! as structured JSON, or `{"error": {code, exit, message, …}}` with
//! `isError: true`.

use pcmail_api::features::{self, Group, Hello};
use pcmail_api::{
    AlertsArgs, ApiError, FailArgs, IdArgs, IdsArgs, InboxArgs, NoArgs, ReplyArgs, RosterAddArgs, RosterRemoveArgs, SendArgs,
    SentArgs, WaitForArgs,
};
use pcmail_client::config::Paths;
use pcmail_client::Client;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{tool, tool_handler, tool_router, ErrorData, ServerHandler};
use serde::Serialize;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

/// While the server can't be reached, `hello` is asked again at most this often
/// (not before every tool call: each try costs a connection timeout).
const HELLO_RETRY: Duration = Duration::from_secs(60);

/// The `pcmail mcp` server for one PC user (`PCMAIL_HOME`).
#[derive(Clone)]
pub struct PcmailMcp {
    paths: Paths,
    /// The server's `hello`, asked once (on the first tool call that reaches it).
    hello: Arc<OnceLock<Hello>>,
    hello_failed_at: Arc<Mutex<Option<Instant>>>,
    /// One opened client kept between calls (opening the embedded engine and
    /// the store every call costs about a millisecond); a call that finds it
    /// taken opens its own.
    idle: Arc<Mutex<Option<Opened>>>,
    tool_router: ToolRouter<Self>,
}

/// A client and the config file's mtime it was opened with (`pcmail init`
/// while the server runs makes the next call open afresh).
struct Opened {
    client: Client,
    config_mtime: Option<SystemTime>,
}

fn config_mtime(paths: &Paths) -> Option<SystemTime> {
    std::fs::metadata(paths.config()).and_then(|m| m.modified()).ok()
}

/// What a tool answers: the api's value, or its error as data.
fn to_result<T: Serialize>(r: Result<T, ApiError>) -> CallToolResult {
    match r {
        Ok(v) => match serde_json::to_value(v) {
            Ok(v) => CallToolResult::structured(v),
            Err(e) => CallToolResult::structured_error(json!({"error": {"code": "error", "exit": 1, "message": e.to_string()}})),
        },
        Err(e) => error_result(&e, None),
    }
}

fn error_result(e: &ApiError, extra: Option<Value>) -> CallToolResult {
    tracing::debug!("tool error: {e}");
    let mut err = e.to_json();
    if let Some(Value::Object(m)) = extra {
        for (k, v) in m {
            err[k] = v;
        }
    }
    CallToolResult::structured_error(json!({ "error": err }))
}

impl PcmailMcp {
    pub fn new(paths: Paths) -> PcmailMcp {
        PcmailMcp {
            paths,
            hello: Arc::new(OnceLock::new()),
            hello_failed_at: Arc::new(Mutex::new(None)),
            idle: Arc::new(Mutex::new(None)),
            tool_router: Self::all_tools(),
        }
    }

    /// Asks `hello` once; `None` while the server can't be reached (the
    /// operation itself then says so, or works from the PC store).
    fn features(&self, client: &Client) -> Option<Option<Vec<String>>> {
        if let Some(h) = self.hello.get() {
            return Some(h.features.clone());
        }
        let mut failed_at = self.hello_failed_at.lock().unwrap_or_else(|p| p.into_inner());
        if failed_at.is_some_and(|t| t.elapsed() < HELLO_RETRY) {
            return None;
        }
        match features::hello(client) {
            Ok(h) => Some(self.hello.get_or_init(|| h).features.clone()),
            Err(e) => {
                tracing::debug!("hello failed: {e}");
                *failed_at = Some(Instant::now());
                None
            }
        }
    }

    /// Opens this PC's client, checks the group against the server's
    /// features, runs `op` off the async runtime.
    async fn run_client<T, F>(&self, group: Group, op: F) -> Result<Result<T, ApiError>, ErrorData>
    where
        T: Send + 'static,
        F: FnOnce(&mut Client) -> Result<T, ApiError> + Send + 'static,
    {
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            let mtime = config_mtime(&me.paths);
            let cached = me.idle.lock().unwrap_or_else(|p| p.into_inner()).take();
            let mut opened = match cached {
                Some(o) if o.config_mtime == mtime => o,
                _ => Opened { client: Client::open(me.paths.clone())?, config_mtime: mtime },
            };
            if let Some(features) = me.features(&opened.client) {
                features::require(group.feature(), features.as_deref())?;
            }
            let r = op(&mut opened.client);
            let mut idle = me.idle.lock().unwrap_or_else(|p| p.into_inner());
            if idle.is_none() {
                *idle = Some(opened);
            }
            r
        })
        .await
        .map_err(|e| ErrorData::internal_error(format!("tool thread: {e}"), None))
    }

    async fn with_client<T, F>(&self, group: Group, op: F) -> Result<CallToolResult, ErrorData>
    where
        T: Serialize + Send + 'static,
        F: FnOnce(&mut Client) -> Result<T, ApiError> + Send + 'static,
    {
        Ok(to_result(self.run_client(group, op).await?))
    }

    /// The mail tools and the handoff/memory tools (crate::handoff_tools).
    fn all_tools() -> ToolRouter<Self> {
        Self::tool_router() + Self::handoff_tool_router()
    }

    /// Runs `op` on the PC's files only (no server, no token).
    pub(crate) async fn with_paths<T, F>(&self, op: F) -> Result<CallToolResult, ErrorData>
    where
        T: Serialize + Send + 'static,
        F: FnOnce(Paths) -> Result<T, ApiError> + Send + 'static,
    {
        let paths = self.paths.clone();
        let r = tokio::task::spawn_blocking(move || op(paths))
            .await
            .map_err(|e| ErrorData::internal_error(format!("tool thread: {e}"), None))?;
        Ok(to_result(r))
    }
}

#[tool_router]
impl PcmailMcp {
    #[tool(description = "Send mail to an exact roster label, number or hostname (`*` = every PC). An inexact address is not sent: error unknown_address (exit 4) with candidates. With wait_for, answers once every copy reached that state (error timeout, exit 8, after timeout_secs). Result: {ids, queued, existing[, mails]}.")]
    async fn send(&self, Parameters(a): Parameters<SendArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, move |c| pcmail_api::send(c, &a)).await
    }

    #[tool(description = "Mail for this PC from the local store (open mail by default; all=true adds done, failed and expired). Works offline. Result: {mails}. Reading does not mark mail seen; use `read`.")]
    async fn inbox(&self, Parameters(a): Parameters<InboxArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_paths(move |p| pcmail_api::inbox(&p, &a)).await
    }

    #[tool(description = "Show one mail of this PC's inbox and mark it seen. Result: the mail. Error not_found (exit 7) for an unknown id.")]
    async fn read(&self, Parameters(a): Parameters<IdArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, move |c| pcmail_api::read(c, &a)).await
    }

    #[tool(description = "Mark a mail done without a reply. Result: {id, state, pendingMarks}.")]
    async fn ack(&self, Parameters(a): Parameters<IdArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, move |c| pcmail_api::ack(c, &a)).await
    }

    #[tool(description = "Answer a mail (the reply id is fixed, so a retry is one mail; the original becomes done). Replying to a reply is refused: error reply_to_reply (exit 3). Result: {ids, queued, existing}.")]
    async fn reply(&self, Parameters(a): Parameters<ReplyArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, move |c| pcmail_api::reply(c, &a)).await
    }

    #[tool(description = "Mark a mail failed with a reason. Result: {id, state, pendingMarks}.")]
    async fn fail(&self, Parameters(a): Parameters<FailArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, move |c| pcmail_api::fail(c, &a)).await
    }

    #[tool(description = "The server's whole timeline of mail ids (new → delivered → seen → done|failed|expired, who and when). Result: {mails, missing}; any missing id makes it error not_found (exit 7) with the rest in the error.")]
    async fn status(&self, Parameters(a): Parameters<IdsArgs>) -> Result<CallToolResult, ErrorData> {
        let r = self.run_client(Group::Mail, move |c| pcmail_api::status(c, &a)).await?;
        Ok(match r {
            Ok(s) if !s.missing.is_empty() => {
                let e = ApiError::Client(pcmail_client::ClientError::NotFound(s.missing.join(", ")));
                error_result(&e, Some(json!({"missing": s.missing, "mails": s.mails})))
            }
            other => to_result(other),
        })
    }

    #[tool(description = "Wait until every copy of each mail id reached a state (delivered, seen or done; a final state also ends the wait). Error timeout (exit 8) after timeout_secs (default 300). Result: {mails}.")]
    async fn wait_for(&self, Parameters(a): Parameters<WaitForArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, move |c| pcmail_api::wait_for(c, &a)).await
    }

    #[tool(description = "Mail this PC sent, newest first, with live states from the server (cached when it is unreachable). Result: {mails}.")]
    async fn sent(&self, Parameters(a): Parameters<SentArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, move |c| pcmail_api::sent(c, &a)).await
    }

    #[tool(description = "The roster: number ⇔ label ⇔ hostname of every PC. Result: {pcs, me[, unreachable]} (unreachable: the server was down, this is the cache).")]
    async fn roster(&self, Parameters(_): Parameters<NoArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, pcmail_api::roster).await
    }

    #[tool(description = "Add a PC to the roster (or change its hostname/number). Result: the server's answer with the new roster version.")]
    async fn roster_add(&self, Parameters(a): Parameters<RosterAddArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, move |c| pcmail_api::roster_add(c, &a)).await
    }

    #[tool(description = "Remove a PC from the roster. Result: the server's answer.")]
    async fn roster_remove(&self, Parameters(a): Parameters<RosterRemoveArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, move |c| pcmail_api::roster_remove(c, &a)).await
    }

    #[tool(description = "Alerts from the server's sweep (open ones; all=true adds resolved). Result: {alerts[, unreachable]}.")]
    async fn alerts(&self, Parameters(a): Parameters<AlertsArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, move |c| pcmail_api::alerts(c, &a)).await
    }

    #[tool(description = "One poll cycle now: push queued mail and marks, fetch and store new mail. Result: the cycle's counts, or {skipped} when another sync is running.")]
    async fn sync(&self, Parameters(_): Parameters<NoArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_paths(|p| pcmail_api::sync(p, false)).await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for PcmailMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("pcmail", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "pcmail: mail between AI coding sessions on several PCs, with a state the sender can trust \
                 (new → delivered → seen → done|failed|expired). Errors come as {error: {code, exit, message}} \
                 with the CLI's exit codes; an unknown address carries candidates, a refusal its rule.",
            )
    }
}

/// The tool names, in the order `tools/list` gives them (for tests and docs).
pub fn tool_names() -> Vec<String> {
    PcmailMcp::all_tools().list_all().into_iter().map(|t| t.name.to_string()).collect()
}
