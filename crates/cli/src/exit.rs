//! Exit codes (documented in docs/exit-codes.md): scripts and agents branch on them.
//! The mapping lives on `pcmail_api::ApiError` (shared with `pcmail mcp`);
//! this maps the errors of the commands that don't go through the api.

use pcmail_api::ApiError;
pub use pcmail_api::Exit;
use pcmail_client::transport::CallError;
use pcmail_client::ClientError;

pub fn code_of(e: &anyhow::Error) -> Exit {
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
    if e.downcast_ref::<pcmail_client::config::ConfigError>().is_some()
        || e.downcast_ref::<pcmail_store::StoreError>().is_some()
        || e.downcast_ref::<pcmail_client::token::TokenError>().is_some()
        || e.downcast_ref::<pcmail_claude_hooks::HooksError>().is_some()
    {
        return Exit::Local;
    }
    Exit::Error
}

/// Prints the error (and candidates for an unresolved address) and returns the code.
pub fn fail(e: &anyhow::Error) -> i32 {
    eprintln!("pcmail: {e:#}");
    let server_candidates = match (e.downcast_ref::<ApiError>(), e.downcast_ref::<ClientError>()) {
        (Some(ApiError::Client(ClientError::Call(CallError::Server(p)))), _)
        | (_, Some(ClientError::Call(CallError::Server(p)))) => p.candidates.as_ref(),
        _ => None,
    };
    if let Some(c) = server_candidates {
        if !c.is_empty() {
            eprintln!("pcmail: candidates: {}", c.join(", "));
        }
    }
    code_of(e) as i32
}
