//! The MCP tools for jobs: each a thin wrapper over the same
//! pcmail-api function as `pcmail job …`.

use crate::args::Parameters;
use crate::server::PcmailMcp;
use pcmail_api::features::Group;
use pcmail_api::jobs::{self as api, JobCancelArgs, JobIdArgs, JobListArgs, JobRunArgs};
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};

#[tool_router(router = job_tool_router, vis = "pub(crate)")]
impl PcmailMcp {
    #[tool(
        description = "Run a command another PC (target: its label) or the server (target: @server; probes _debug_roster, _debug_mail, _debug_alerts, _debug_sweep_plan, _debug_jobs) whitelisted, with typed args by name. Refused (not whitelisted, bad argument, submitter not allowed): error job_refused (exit 13) with its reason and field. An identical job queued, running or just ended is joined instead of run twice (deduped: true); force=true runs again; when artifacts of the same command and arguments exist, made within the executor's reuse window and not before its checkout's HEAD commit, the job answers them (result.reused) without running. A string or path value starting with - is refused (bad_argument) unless the executor allows it. wait=true answers once it ended (ended: false when timeout_secs ran out). Result: {deduped, job: {id, state, result: {ran, exit, output, artifacts, reused, verify, readBack}, reason, timeline}[, ended]}."
    )]
    async fn job_run(&self, a: Parameters<JobRunArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Jobs, a, |c, a| api::job_run(c, &a)).await
    }

    #[tool(
        description = "A job's state with its timeline (queued → running → ok|failed|timed_out|cancelled, who and when) and result; tells queued, running and ran-and-died (timed_out with the reason) apart. Result: {job}. Error not_found (exit 7)."
    )]
    async fn job_status(&self, a: Parameters<JobIdArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Jobs, a, |c, a| api::job_status(c, &a)).await
    }

    #[tool(
        description = "Jobs this PC may see, newest first (mine=true: submitted or joined by this PC; state; target; limit ≤ 500). Result: {jobs} without timelines."
    )]
    async fn job_list(&self, a: Parameters<JobListArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Jobs, a, |c, a| api::job_list(c, &a)).await
    }

    #[tool(
        description = "Cancel a job: a queued one ends cancelled at once; a running one gets cancelRequested and its executor kills it at its next poll. Result: {job}."
    )]
    async fn job_cancel(&self, a: Parameters<JobCancelArgs>) -> Result<CallToolResult, ErrorData> {
        self.with_client(Group::Jobs, a, |c, a| api::job_cancel(c, &a)).await
    }
}
