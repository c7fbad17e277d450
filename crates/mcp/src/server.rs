//! The MCP tools: one per pcmail-api function, each a thin wrapper that runs
//! the same function as the CLI on a blocking thread and returns its result
//! as structured JSON, or `{"error": {code, exit, message, …}}` with
//! `isError: true`.

use crate::args::{Parameters, UsageError};
use crate::catalog::{self, Profile};
use pcmail_api::features::{self, Group, Hello};
use pcmail_api::leases::{self, LeaseCheckArgs, LeaseClaimArgs, LeaseListArgs, LeaseReleaseArgs, LeaseTakeoverArgs};
use pcmail_api::{
    AlertsArgs, ApiError, Exit, FailArgs, IdArgs, IdsArgs, InboxArgs, NoArgs, ReplyArgs, RosterAddArgs,
    RosterRemoveArgs, SendArgs, SentArgs, WaitForArgs,
};
use pcmail_client::Client;
use pcmail_local::config::Paths;
use pcmail_store::Store;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    CallToolResult, Implementation, MetaObject, ProgressNotificationParam, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler};
use serde::Serialize;
use serde_json::{json, Value};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

/// While the server can't be reached, `hello` is asked again at most this often
/// (not before every tool call: each try costs a connection timeout).
const HELLO_RETRY: Duration = Duration::from_secs(60);

/// A `wait_for` with a progress token reports this often that it still waits.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// The `pcmail mcp` server for one PC user (`PCMAIL_HOME`).
#[derive(Clone)]
pub struct PcmailMcp {
    /// What the tool calls share, behind one `Arc`: a call hands it to its
    /// blocking thread, and cloning the whole server there would copy the
    /// tool router (every tool's name, description and schemas) per call.
    kept: Arc<Kept>,
    tool_router: ToolRouter<Self>,
}

/// The state kept between tool calls.
struct Kept {
    paths: Paths,
    /// The server's `hello`, asked once (on the first tool call that reaches it).
    hello: OnceLock<Hello>,
    hello_failed_at: Mutex<Option<Instant>>,
    /// One opened client kept between calls (opening the embedded engine and
    /// the store every call costs about a millisecond); a call that finds it
    /// taken opens its own, unless it is only finishing a call that has
    /// answered already (writing the `sent` rows): that is waited for.
    idle: Mutex<Idle>,
    /// Told when a client comes back to `idle`.
    returned: Condvar,
    /// The PC store the store-only tools (`inbox`) read, kept open between
    /// calls so that a call does not open the file, set its pragmas and check
    /// its schema again.
    store: Mutex<Option<OpenStore>>,
}

/// The kept client, and how many clients are finishing a call that answered already.
#[derive(Default)]
struct Idle {
    opened: Option<Opened>,
    settling: usize,
}

/// How long a call waits for the kept client to finish the call before it
/// (its `sent` rows take a tenth of a millisecond; opening another, half a
/// millisecond to several).
const SETTLE_WAIT: Duration = Duration::from_millis(50);

/// The kept store and the config file's mtime it was opened with, as for the client.
struct OpenStore {
    store: Store,
    config_mtime: Option<SystemTime>,
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
            Err(e) => CallToolResult::structured_error(
                json!({"error": {"code": "error", "exit": 1, "message": e.to_string()}}),
            ),
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

/// Notes in the result's `_meta` the arguments a client injected that the
/// tool ignored (`pcmail/ignoredArguments`).
fn note_ignored(mut r: CallToolResult, ignored: &[String]) -> CallToolResult {
    if !ignored.is_empty() {
        let mut meta = r.meta.take().unwrap_or_else(|| MetaObject(Default::default()));
        meta.0.insert("pcmail/ignoredArguments".into(), json!(ignored));
        r.meta = Some(meta);
    }
    r
}

/// A bad argument: `{error: {code: "usage", exit: 2, field, message}}`.
fn usage_result(e: &UsageError) -> CallToolResult {
    error_result(&e.api_error(), Some(json!({ "field": e.field })))
}

impl PcmailMcp {
    /// The default tools only.
    pub fn new(paths: Paths) -> PcmailMcp {
        PcmailMcp::with_profile(paths, &Profile::default())
    }

    /// The tools of `profile`.
    pub fn with_profile(paths: Paths, profile: &Profile) -> PcmailMcp {
        PcmailMcp {
            kept: Arc::new(Kept {
                paths,
                hello: OnceLock::new(),
                hello_failed_at: Mutex::new(None),
                idle: Mutex::new(Idle::default()),
                returned: Condvar::new(),
                store: Mutex::new(None),
            }),
            tool_router: Self::tools(profile),
        }
    }
}

impl Kept {
    /// The kept client, waiting (up to [`SETTLE_WAIT`]) for one that is
    /// finishing a call that answered already; None: open another.
    fn take_idle(&self) -> Option<Opened> {
        let deadline = Instant::now() + SETTLE_WAIT;
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(o) = idle.opened.take() {
                return Some(o);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if idle.settling == 0 || left.is_zero() {
                return None;
            }
            idle = self.returned.wait_timeout(idle, left).unwrap_or_else(|p| p.into_inner()).0;
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
}

impl PcmailMcp {
    /// Opens this PC's client, checks the group against the server's
    /// features, runs `op` off the async runtime.
    async fn run_client<T, F>(&self, group: Group, op: F) -> Result<Result<T, ApiError>, ErrorData>
    where
        T: Send + 'static,
        F: FnOnce(&mut Client) -> Result<T, ApiError> + Send + 'static,
    {
        let me = self.kept.clone();
        let (answer, answered) = tokio::sync::oneshot::channel();
        tokio::task::spawn_blocking(move || {
            let mtime = config_mtime(&me.paths);
            let cached = me.take_idle();
            let mut opened = match cached {
                Some(o) if o.config_mtime == mtime => o,
                _ => match Client::open(me.paths.clone()) {
                    Ok(client) => Opened { client, config_mtime: mtime },
                    Err(e) => {
                        let _ = answer.send(Err(e.into()));
                        return;
                    }
                },
            };
            let allowed = match me.features(&opened.client) {
                Some(features) => features::require(group.feature(), features.as_deref()),
                None => Ok(()),
            };
            // The `sent` rows of mail the server took are written after the
            // answer went out, not before (a tenth of a send's time here).
            opened.client.defer_sent_rows = true;
            let result = allowed.and_then(|()| op(&mut opened.client));
            me.idle.lock().unwrap_or_else(|p| p.into_inner()).settling += 1;
            let _ = answer.send(result);
            if let Err(e) = opened.client.settle_deferred() {
                tracing::warn!("sent mail not recorded here: {e} (recorded when the poller sends it again)");
            }
            let mut idle = me.idle.lock().unwrap_or_else(|p| p.into_inner());
            idle.settling -= 1;
            if idle.opened.is_none() {
                idle.opened = Some(opened);
            }
            drop(idle);
            me.returned.notify_all();
        });
        answered.await.map_err(|_| ErrorData::internal_error("tool thread ended without an answer", None))
    }

    /// Bad arguments answer the usage error without opening anything.
    pub(crate) async fn with_client<A, T, F>(
        &self,
        group: Group,
        args: Parameters<A>,
        op: F,
    ) -> Result<CallToolResult, ErrorData>
    where
        A: Send + 'static,
        T: Serialize + Send + 'static,
        F: FnOnce(&mut Client, A) -> Result<T, ApiError> + Send + 'static,
    {
        let a = match args.args {
            Ok(a) => a,
            Err(e) => return Ok(usage_result(&e)),
        };
        Ok(note_ignored(to_result(self.run_client(group, move |c| op(c, a)).await?), &args.ignored))
    }

    /// The tools of `profile` (crate::catalog) from the mail tools, the handoff/memory tools
    /// (crate::handoff_tools), the session tools (crate::session_tools), the job tools
    /// (crate::job_tools), and the code map and admin tools (crate::admin_tools).
    fn tools(profile: &Profile) -> ToolRouter<Self> {
        let mut r = Self::tool_router()
            + Self::handoff_tool_router()
            + Self::session_tool_router()
            + Self::job_tool_router()
            + Self::admin_tool_router();
        catalog::apply(&mut r, profile);
        r
    }

    /// Runs `op` on the kept PC store (no server, no token). It is opened
    /// afresh after `pcmail init` rewrote the config, when the file is gone,
    /// and after a local fault, which may be the connection's own. Calls wait
    /// for each other here, as they would for SQLite's write lock anyway.
    pub(crate) async fn with_store<A, T, F>(&self, args: Parameters<A>, op: F) -> Result<CallToolResult, ErrorData>
    where
        A: Send + 'static,
        T: Serialize + Send + 'static,
        F: FnOnce(&mut Store, A) -> Result<T, ApiError> + Send + 'static,
    {
        let a = match args.args {
            Ok(a) => a,
            Err(e) => return Ok(usage_result(&e)),
        };
        let me = self.kept.clone();
        let r = tokio::task::spawn_blocking(move || {
            let mut kept = me.store.lock().unwrap_or_else(|p| p.into_inner());
            let path = me.paths.store();
            let mtime = config_mtime(&me.paths);
            let current = kept.as_ref().is_some_and(|o| o.config_mtime == mtime) && path.exists();
            if !current {
                *kept = None;
                *kept = Some(OpenStore { store: Store::open(&path)?, config_mtime: mtime });
            }
            let Some(open) = kept.as_mut() else { unreachable!("opened above") };
            let r = op(&mut open.store, a);
            if matches!(&r, Err(e) if e.exit() == Exit::Local) {
                *kept = None;
            }
            r
        })
        .await
        .map_err(|e| ErrorData::internal_error(format!("tool thread: {e}"), None))?;
        Ok(note_ignored(to_result(r), &args.ignored))
    }

    /// Runs `op` on the PC's files only (no server, no token).
    pub(crate) async fn with_paths<A, T, F>(&self, args: Parameters<A>, op: F) -> Result<CallToolResult, ErrorData>
    where
        A: Send + 'static,
        T: Serialize + Send + 'static,
        F: FnOnce(Paths, A) -> Result<T, ApiError> + Send + 'static,
    {
        let a = match args.args {
            Ok(a) => a,
            Err(e) => return Ok(usage_result(&e)),
        };
        let paths = self.kept.paths.clone();
        let r = tokio::task::spawn_blocking(move || op(paths, a))
            .await
            .map_err(|e| ErrorData::internal_error(format!("tool thread: {e}"), None))?;
        Ok(note_ignored(to_result(r), &args.ignored))
    }
}

#[tool_router]
impl PcmailMcp {
    #[tool(
        description = "Send mail (to: one address, or a list: a copy each). An inexact address sends nothing (unknown_address, exit 4, with candidates). wait_for: answer once every copy got there."
    )]
    async fn send(&self, a: Parameters<SendArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, a, |c, a| pcmail_api::send(c, &a)).await
    }

    #[tool(
        description = "This PC's mail (local store), newest first, as summaries (preview: the body's first 160 chars); marks nothing seen. Older: before=next. Whole: full=true, or read one."
    )]
    async fn inbox(&self, a: Parameters<InboxArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_store(a, |s, a| pcmail_api::inbox_in(s, &a)).await
    }

    #[tool(description = "One mail of this PC's inbox, marked seen (not_found, exit 7, for an unknown id).")]
    async fn read(&self, a: Parameters<IdArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, a, |c, a| pcmail_api::read(c, &a)).await
    }

    #[tool(description = "Mark a mail done without a reply.")]
    async fn ack(&self, a: Parameters<IdArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, a, |c, a| pcmail_api::ack(c, &a)).await
    }

    #[tool(
        description = "Answer a mail's sender (all: and its other recipients); it becomes done. A retry is the same reply; a reply to a reply is refused (exit 3)."
    )]
    async fn reply(&self, a: Parameters<ReplyArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, a, |c, a| pcmail_api::reply(c, &a)).await
    }

    #[tool(description = "Mark a mail failed with a reason. Result: {id, state, pendingMarks}.")]
    async fn fail(&self, a: Parameters<FailArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, a, |c, a| pcmail_api::fail(c, &a)).await
    }

    #[tool(
        description = "The server's whole timeline of mail ids (new → delivered → seen → done|failed|expired, who and when). Result: {mails, missing}; any missing id makes it error not_found (exit 7) with the rest in the error."
    )]
    async fn status(&self, a: Parameters<IdsArgs>) -> Result<CallToolResult, ErrorData> {
        let ignored = a.ignored;
        let a = match a.args {
            Ok(a) => a,
            Err(e) => return Ok(usage_result(&e)),
        };
        let r = self.run_client(Group::Mail, move |c| pcmail_api::status(c, &a)).await?;
        Ok(match r {
            Ok(s) if !s.missing.is_empty() => {
                let e = ApiError::Client(pcmail_client::ClientError::NotFound(s.missing.join(", ")));
                error_result(&e, Some(json!({"missing": s.missing, "mails": s.mails})))
            }
            other => note_ignored(to_result(other), &ignored),
        })
    }

    #[tool(
        description = "Wait until every copy of each id reached state (or a final one); timeout: exit 8. Reports progress when asked."
    )]
    async fn wait_for(
        &self,
        a: Parameters<WaitForArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        // With a progress token: a notification every PROGRESS_EVERY until the answer (the
        // progress is the seconds waited, of timeout_secs), so a client can tell a long wait
        // from a hung server.
        let ticker = match (ctx.meta.get_progress_token(), &a.args) {
            (Some(token), Ok(w)) => {
                let total = w.timeout_secs.unwrap_or(pcmail_api::DEFAULT_WAIT_SECS) as f64;
                let what = format!("waiting for {} mail(s) to reach {:?}", w.ids.len(), w.state).to_lowercase();
                let peer = ctx.peer.clone();
                Some(tokio::spawn(async move {
                    let start = Instant::now();
                    loop {
                        tokio::time::sleep(PROGRESS_EVERY).await;
                        let waited = start.elapsed().as_secs_f64().min(total);
                        let p = ProgressNotificationParam::new(token.clone(), waited)
                            .with_total(total)
                            .with_message(format!("{what}: {} s of {} s", waited as u64, total as u64));
                        if peer.notify_progress(p).await.is_err() {
                            break;
                        }
                    }
                }))
            }
            _ => None,
        };
        let r = self.with_client(Group::Mail, a, |c, a| pcmail_api::wait_for(c, &a)).await;
        if let Some(t) = ticker {
            t.abort();
        }
        r
    }

    #[tool(
        description = "Mail this PC sent, newest first, with live states from the server (cached when it is unreachable). Result: {mails}."
    )]
    async fn sent(&self, a: Parameters<SentArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, a, |c, a| pcmail_api::sent(c, &a)).await
    }

    #[tool(
        description = "The roster: number ⇔ label ⇔ hostname of every PC. Result: {pcs, me[, unreachable]} (unreachable: the server was down, this is the cache)."
    )]
    async fn roster(&self, a: Parameters<NoArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, a, |c, _| pcmail_api::roster(c)).await
    }

    #[tool(
        description = "Add a PC to the roster (or change its hostname/number). Result: the server's answer with the new roster version."
    )]
    async fn roster_add(&self, a: Parameters<RosterAddArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, a, |c, a| pcmail_api::roster_add(c, &a)).await
    }

    #[tool(description = "Remove a PC from the roster. Result: the server's answer.")]
    async fn roster_remove(&self, a: Parameters<RosterRemoveArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, a, |c, a| pcmail_api::roster_remove(c, &a)).await
    }

    #[tool(
        description = "Alerts from the server's sweep (open ones; all=true adds resolved). Result: {alerts[, unreachable]}."
    )]
    async fn alerts(&self, a: Parameters<AlertsArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Mail, a, |c, a| pcmail_api::alerts(c, &a)).await
    }

    #[tool(
        description = "Hold a resource across PCs; other sessions may then not edit or commit its files. Lives as long as the agent process above this server (or pid, or ttl). granted (lease.fence), unconfirmed (server down), or held (exit 10) / stale (exit 11) with the holder."
    )]
    async fn lease_claim(&self, a: Parameters<LeaseClaimArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Leases, a, |c, a| leases::lease_claim(c, &a)).await
    }

    #[tool(description = "Release this PC's lease of a resource (queued while the server is unreachable).")]
    async fn lease_release(&self, a: Parameters<LeaseReleaseArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Leases, a, |c, a| leases::lease_release(c, &a)).await
    }

    #[tool(
        description = "Who holds what: live leases (holder, files, stale), of a repo or resource if given. unreachable: the last poll's view."
    )]
    async fn lease_list(&self, a: Parameters<LeaseListArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Leases, a, |c, a| leases::lease_list(c, &a)).await
    }

    #[tool(
        description = "Is fence the current fencing token of resource? Asks the server, never a cache (unreachable: error, exit 6). Result: {current, fence, lease}."
    )]
    async fn lease_check(&self, a: Parameters<LeaseCheckArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Leases, a, |c, a| leases::lease_check(c, &a)).await
    }

    #[tool(
        description = "Take over a lease someone else holds, only with evidence, recorded on its timeline and told to the old holder: its process is gone (same PC), or it is stale while its PC still polls (session ended), or force=true when its PC is silent too. Check the resource itself first. Result: as lease_claim."
    )]
    async fn lease_takeover(&self, a: Parameters<LeaseTakeoverArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Leases, a, |c, a| leases::lease_takeover(c, &a)).await
    }

    #[tool(
        description = "One poll cycle now: push queued mail and marks, fetch and store new mail. Result: the cycle's counts, or {skipped} when another sync is running."
    )]
    async fn sync(&self, a: Parameters<NoArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_paths(a, |p, _| pcmail_api::sync(p, false)).await
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

/// The tool names of `profile`, in the order `tools/list` gives them (for tests and docs).
pub fn tool_names(profile: &Profile) -> Vec<String> {
    PcmailMcp::tools(profile).list_all().into_iter().map(|t| t.name.to_string()).collect()
}

/// What `tools/list` answers for `profile`, as JSON (for tests and docs).
pub fn tools_list_json(profile: &Profile) -> Value {
    json!({ "tools": PcmailMcp::tools(profile).list_all() })
}
