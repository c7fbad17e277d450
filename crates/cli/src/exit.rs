//! Exit codes (documented in docs/exit-codes.md): scripts and agents branch on them.
//! The mapping lives on `pcmail_api::ApiError` (shared with `pcmail mcp`);
//! this maps the errors of the commands that don't go through the api.

use pcmail_api::ApiError;
use pcmail_api::Exit;
use pcmail_client::transport::CallError;
use pcmail_client::ClientError;
use std::io::Write;

pub fn code_of(e: &anyhow::Error) -> Exit {
    if let Some(s) = e.downcast_ref::<Shown>() {
        return s.exit;
    }
    if let Some(a) = e.downcast_ref::<ApiError>() {
        return a.exit();
    }
    if let Some(c) = e.downcast_ref::<ClientError>() {
        return pcmail_api::exit_of_client(c);
    }
    if let Some(CallError::Server(p)) = e.downcast_ref::<CallError>() {
        if pcmail_core::auth::is_identity_refusal(p.code) {
            return Exit::NotEnrolled;
        }
    }
    if e.downcast_ref::<pcmail_codemap::StaleMap>().is_some() {
        return Exit::MapStale;
    }
    if let Some(m) = e.downcast_ref::<pcmail_codemap::MapError>() {
        return match m {
            pcmail_codemap::MapError::NotADirectory(_) | pcmail_codemap::MapError::BudgetTooSmall(_) => Exit::Usage,
            _ => Exit::Local,
        };
    }
    if e.downcast_ref::<pcmail_local::config::ConfigError>().is_some()
        || e.downcast_ref::<pcmail_store::StoreError>().is_some()
        || e.downcast_ref::<pcmail_client::token::TokenError>().is_some()
        || e.downcast_ref::<pcmail_claude_hooks::HooksError>().is_some()
    {
        return Exit::Local;
    }
    Exit::Error
}

/// An error whose whole answer is already on stdout (`doctor --json`'s
/// checks, `status --json`'s timelines): only its line goes to stderr.
#[derive(Debug)]
pub struct Shown {
    pub exit: Exit,
    pub message: String,
}

impl std::fmt::Display for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Shown {}

/// The JSON error object `--json` prints on stdout for any failure: the same
/// `code`, `exit` and `message` for every exit code, with the lease,
/// candidates or rule when there are.
pub fn json_error(e: &anyhow::Error) -> serde_json::Value {
    if let Some(a) = e.downcast_ref::<ApiError>() {
        return serde_json::json!({ "error": a.to_json() });
    }
    let exit = code_of(e);
    let mut v = serde_json::json!({"code": exit.as_str(), "exit": exit as i32, "message": format!("{e:#}")});
    let c = match (e.downcast_ref::<ClientError>(), e.downcast_ref::<CallError>()) {
        (Some(ClientError::Unresolved { candidates, .. }), _) => Some(candidates.clone()),
        (Some(ClientError::Call(CallError::Server(p))), _) | (_, Some(CallError::Server(p))) => p.candidates.clone(),
        _ => None,
    };
    if let Some(c) = c.filter(|c| !c.is_empty()) {
        v["candidates"] = serde_json::json!(c);
    }
    if let Some(ClientError::UnresolvedMany(u)) = e.downcast_ref::<ClientError>() {
        v["unresolved"] = serde_json::json!(u);
    }
    serde_json::json!({ "error": v })
}

/// Prints the error once (stderr; and the JSON object on stdout under
/// `--json`) with candidates for an unresolved address, and returns the code.
pub fn fail(e: &anyhow::Error, json: bool) -> i32 {
    fail_to(e, json, &mut std::io::stdout().lock(), &mut std::io::stderr().lock())
}

/// [`fail`] into these two streams (the daemon's answer to the small front
/// carries them). A line that cannot be written is dropped: a dead stderr
/// must not end a daemon.
pub fn fail_to(e: &anyhow::Error, json: bool, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    macro_rules! say {
        ($($arg:tt)*) => {{
            let _ = writeln!(err, $($arg)*);
        }};
    }
    if let Some(s) = e.downcast_ref::<Shown>() {
        say!("pcmail: {}", s.message);
        return s.exit as i32;
    }
    if json {
        let _ = writeln!(out, "{}", json_error(e));
    }
    say!("pcmail: {e:#}");
    let server_candidates = match (e.downcast_ref::<ApiError>(), e.downcast_ref::<ClientError>()) {
        (Some(ApiError::Client(ClientError::Call(CallError::Server(p)))), _)
        | (_, Some(ClientError::Call(CallError::Server(p)))) => p.candidates.as_ref(),
        _ => None,
    };
    let unresolved = match (e.downcast_ref::<ApiError>(), e.downcast_ref::<ClientError>()) {
        (Some(a), _) => a.unresolved().map(<[_]>::to_vec),
        (_, Some(ClientError::Call(CallError::Server(p)))) => p.unresolved.clone(),
        _ => None,
    };
    if let Some(u) = unresolved.filter(|u| !u.is_empty()) {
        // A list of addresses: every miss on its own line, each with its candidates.
        for m in u {
            let c = if m.candidates.is_empty() { "no close match".to_string() } else { m.candidates.join(", ") };
            say!("pcmail: candidates for {:?}: {c}", m.to);
        }
    } else if let Some(c) = server_candidates {
        if !c.is_empty() {
            say!("pcmail: candidates: {}", c.join(", "));
        }
    }
    code_of(e) as i32
}

/// An api error that wraps a client error, shown as that client error:
/// `init` and `token` print under `--json` the message with its causes and
/// no `rule` (their error object as it has always been), while the exit code
/// is the same either way (`exit_of_client`).
pub fn as_client(e: ApiError) -> anyhow::Error {
    match e {
        ApiError::Client(c) => c.into(),
        e => e.into(),
    }
}
