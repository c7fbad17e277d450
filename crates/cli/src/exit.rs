//! Exit codes (documented in README.md): scripts and agents branch on them.

use pcmail_client::transport::CallError;
use pcmail_client::ClientError;

#[derive(Debug, Clone, Copy)]
pub enum Exit {
    Error = 1,
    Usage = 2,
    ReplyToReply = 3,
    Unresolved = 4,
    Refused = 5,
    Unreachable = 6,
    NotFound = 7,
    Timeout = 8,
    Local = 9,
    /// Not enrolled / revoked (DESIGN.md): this PC's label belongs to another installation.
    NotEnrolled = 12,
    MapStale = 15,
}

pub fn code_of(e: &anyhow::Error) -> Exit {
    if let Some(c) = e.downcast_ref::<ClientError>() {
        return match c {
            ClientError::ReplyToReply { .. } => Exit::ReplyToReply,
            ClientError::Unresolved { .. } | ClientError::NobodyElse => Exit::Unresolved,
            ClientError::LabelTaken(_) => Exit::NotEnrolled,
            ClientError::Call(CallError::Server(p)) => match p.code {
                pcmail_core::ErrorCode::UnknownRecipient => Exit::Unresolved,
                pcmail_core::ErrorCode::LabelTaken => Exit::NotEnrolled,
                pcmail_core::ErrorCode::NotFound => Exit::NotFound,
                c if c.is_transient() => Exit::Unreachable,
                _ => Exit::Refused,
            },
            ClientError::Call(CallError::Transient(_)) => Exit::Unreachable,
            ClientError::NotFound(_) | ClientError::Store(pcmail_store::StoreError::NotFound(_)) => Exit::NotFound,
            ClientError::Timeout { .. } => Exit::Timeout,
            ClientError::Invalid(_) => Exit::Usage,
            ClientError::Config(_) | ClientError::Store(_) | ClientError::Token(_) => Exit::Local,
        };
    }
    if let Some(CallError::Server(p)) = e.downcast_ref::<CallError>() {
        if p.code == pcmail_core::ErrorCode::LabelTaken {
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
    if let Some(ClientError::Call(CallError::Server(p))) = e.downcast_ref::<ClientError>() {
        if let Some(c) = &p.candidates {
            if !c.is_empty() {
                eprintln!("pcmail: candidates: {}", c.join(", "));
            }
        }
    }
    code_of(e) as i32
}
