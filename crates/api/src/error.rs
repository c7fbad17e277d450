//! One error type for every operation, carrying the CLI's exit code
//! (docs/exit-codes.md) and a stable string code that MCP tool results carry.

use pcmail_client::transport::CallError;
use pcmail_client::ClientError;
use pcmail_core::ErrorCode;
use pcmail_local::config::ConfigError;
use pcmail_store::StoreError;
use serde_json::{json, Value};

/// Exit codes (docs/exit-codes.md, the same for every command): scripts
/// and agents branch on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// A lease is held by someone else (`pcmail lease claim`).
    LeaseHeld = 10,
    /// A lease's holder stopped renewing it: taking it needs evidence (`pcmail lease takeover`).
    LeaseStale = 11,
    /// Not enrolled / revoked: this PC's credential is refused (not enrolled,
    /// revoked, a bad join code, the admin secret needed), or its label belongs to another installation.
    NotEnrolled = 12,
    /// A job was refused: not whitelisted, a bad argument, the submitter not
    /// allowed, or (by its executor) the artifacts of an earlier run exist.
    JobRefused = 13,
    /// A job ended `timed_out` (its own time limit, or its executor went silent).
    JobTimedOut = 14,
    /// `pcmail map --check`: the code map is stale.
    MapStale = 15,
}

impl Exit {
    /// The stable string an MCP tool error carries for this exit code.
    pub fn as_str(self) -> &'static str {
        match self {
            Exit::Error => "error",
            Exit::Usage => "usage",
            Exit::ReplyToReply => "reply_to_reply",
            Exit::Unresolved => "unknown_address",
            Exit::Refused => "refused",
            Exit::Unreachable => "unreachable",
            Exit::NotFound => "not_found",
            Exit::Timeout => "timeout",
            Exit::Local => "local",
            Exit::LeaseHeld => "held",
            Exit::LeaseStale => "stale",
            Exit::NotEnrolled => "not_enrolled",
            Exit::JobRefused => "job_refused",
            Exit::JobTimedOut => "timed_out",
            Exit::MapStale => "map_stale",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Client(#[from] ClientError),
    /// Bad arguments (a bad `expires`, an empty body …).
    #[error("{0}")]
    Usage(String),
    /// The server behind this PC lacks a tool group (`hello` features).
    #[error("this server does not support {feature}: redeploy gas/ or update pcmail serve")]
    Unsupported { feature: String },
    /// Local trouble outside the client's own errors (a lock file …).
    #[error("{0}")]
    Local(String),
    /// No such item that is not a mail (a handoff, a memory topic): exit 7.
    #[error("{0}")]
    Missing(String),
    /// The resource itself is still in use (a `[[leases.checks]]` command
    /// answered busy): the takeover is refused, exit 10 as for a held lease.
    #[error("{0}")]
    Busy(String),
    /// `map --check`: the code map is out of date (exit 15).
    #[error("{0}")]
    MapStale(String),
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError::Client(e.into())
    }
}

impl From<ConfigError> for ApiError {
    fn from(e: ConfigError) -> Self {
        ApiError::Client(e.into())
    }
}

impl From<CallError> for ApiError {
    fn from(e: CallError) -> Self {
        ApiError::Client(e.into())
    }
}

/// The exit code of a client error (also used by the CLI for the commands
/// that call pcmail-client directly: init, token, serve).
pub fn exit_of_client(c: &ClientError) -> Exit {
    match c {
        ClientError::ReplyToReply { .. } => Exit::ReplyToReply,
        ClientError::Unresolved { .. } | ClientError::UnresolvedMany(_) | ClientError::NobodyElse => Exit::Unresolved,
        ClientError::Unsupported { .. } => Exit::Refused,
        ClientError::LabelTaken(_) => Exit::NotEnrolled,
        ClientError::Call(CallError::Server(p)) => match p.code {
            ErrorCode::UnknownRecipient => Exit::Unresolved,
            c if pcmail_core::auth::is_identity_refusal(c) => Exit::NotEnrolled,
            ErrorCode::NotFound => Exit::NotFound,
            ErrorCode::Held => Exit::LeaseHeld,
            ErrorCode::Stale => Exit::LeaseStale,
            ErrorCode::JobRefused => Exit::JobRefused,
            c if c.is_transient() => Exit::Unreachable,
            _ => Exit::Refused,
        },
        ClientError::Call(CallError::Transient(_) | CallError::Untrusted(_)) => Exit::Unreachable,
        ClientError::NotFound(_) | ClientError::LeaseNotHeld { .. } | ClientError::Store(StoreError::NotFound(_)) => {
            Exit::NotFound
        }
        ClientError::Timeout { .. } => Exit::Timeout,
        ClientError::Invalid(_) => Exit::Usage,
        ClientError::Config(_) | ClientError::Store(_) | ClientError::Token(_) => Exit::Local,
    }
}

impl ApiError {
    pub fn exit(&self) -> Exit {
        match self {
            ApiError::Client(c) => exit_of_client(c),
            ApiError::Usage(_) => Exit::Usage,
            ApiError::Unsupported { .. } => Exit::Refused,
            ApiError::Local(_) => Exit::Local,
            ApiError::Missing(_) => Exit::NotFound,
            ApiError::Busy(_) => Exit::LeaseHeld,
            ApiError::MapStale(_) => Exit::MapStale,
        }
    }

    /// Stable string code: the exit code's name, `unsupported` for a missing
    /// tool group.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::Unsupported { .. } | ApiError::Client(ClientError::Unsupported { .. }) => "unsupported",
            e => e.exit().as_str(),
        }
    }

    /// Roster suggestions for an address that is not exact (never used to deliver).
    pub fn candidates(&self) -> Option<&[String]> {
        match self {
            ApiError::Client(ClientError::Unresolved { candidates, .. }) => Some(candidates),
            ApiError::Client(ClientError::UnresolvedMany(m)) => m.first().map(|u| u.candidates.as_slice()),
            ApiError::Client(ClientError::Call(CallError::Server(p))) => p.candidates.as_deref(),
            _ => None,
        }
    }

    /// Every address of a list that did not resolve, each with its candidates.
    pub fn unresolved(&self) -> Option<&[pcmail_core::error::Unresolved]> {
        match self {
            ApiError::Client(ClientError::UnresolvedMany(m)) => Some(m),
            ApiError::Client(ClientError::Call(CallError::Server(p))) => p.unresolved.as_deref(),
            _ => None,
        }
    }

    /// The protocol rule behind a refusal (`loop_refused`, `hop_limit`,
    /// `unauthorized` …), or `reply_to_reply` for the client's own loop rule.
    pub fn rule(&self) -> Option<&'static str> {
        match self {
            ApiError::Client(ClientError::Call(CallError::Server(p))) => Some(p.code.as_str()),
            ApiError::Client(ClientError::ReplyToReply { .. }) => Some("reply_to_reply"),
            _ => None,
        }
    }

    /// `{"code", "exit", "message", "candidates"?, "rule"?, "feature"?}`: what an MCP tool error carries.
    pub fn to_json(&self) -> Value {
        let mut v = json!({"code": self.code(), "exit": self.exit() as i32, "message": self.to_string()});
        if let Some(c) = self.candidates() {
            v["candidates"] = json!(c);
        }
        if let Some(r) = self.rule() {
            v["rule"] = json!(r);
        }
        if let ApiError::Unsupported { feature } | ApiError::Client(ClientError::Unsupported { feature }) = self {
            v["feature"] = json!(feature);
        }
        if let Some(u) = self.unresolved() {
            v["unresolved"] = json!(u);
        }
        if let ApiError::Client(ClientError::Call(CallError::Server(p))) = self {
            if let Some(l) = &p.lease {
                v["lease"] = l.clone();
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcmail_core::ProtoError;

    fn server(code: ErrorCode) -> ApiError {
        ApiError::Client(ClientError::Call(CallError::Server(ProtoError::new(code, "x"))))
    }

    /// A list of addresses: every miss with its own candidates, in the MCP
    /// error as in the CLI's `--json`; `candidates` those of the first.
    #[test]
    fn a_list_names_every_miss() {
        use pcmail_core::error::Unresolved;
        let misses = vec![
            Unresolved { to: "pc-x".into(), candidates: vec!["pc-a".into()] },
            Unresolved { to: "lea".into(), candidates: vec!["lee".into()] },
        ];
        let j = ApiError::from(ClientError::UnresolvedMany(misses.clone())).to_json();
        assert_eq!(j["unresolved"], json!(misses));
        assert_eq!(j["candidates"], json!(["pc-a"]));
        let refused = ProtoError::new(ErrorCode::UnknownRecipient, "x").with_unresolved(misses.clone());
        let j = ApiError::Client(ClientError::Call(CallError::Server(refused))).to_json();
        assert_eq!((j["exit"].as_i64(), &j["unresolved"]), (Some(4), &json!(misses)));
        let j = ApiError::from(ClientError::Unsupported { feature: "multi-recipient".into() }).to_json();
        assert_eq!((j["code"].as_str(), j["feature"].as_str()), (Some("unsupported"), Some("multi-recipient")));
    }

    #[test]
    fn every_variant_has_the_readme_exit_code_and_a_stable_string() {
        let cases: Vec<(ApiError, i32, &str)> = vec![
            (ApiError::Usage("bad".into()), 2, "usage"),
            (ClientError::Invalid("empty".into()).into(), 2, "usage"),
            (ClientError::ReplyToReply { id: "m".into() }.into(), 3, "reply_to_reply"),
            (ClientError::Unresolved { query: "x".into(), candidates: vec!["a".into()] }.into(), 4, "unknown_address"),
            (server(ErrorCode::UnknownRecipient), 4, "unknown_address"),
            (server(ErrorCode::LoopRefused), 5, "refused"),
            (server(ErrorCode::Held), 10, "held"),
            (server(ErrorCode::Stale), 11, "stale"),
            (server(ErrorCode::JobRefused), 13, "job_refused"),
            (server(ErrorCode::HopLimit), 5, "refused"),
            (server(ErrorCode::Unauthorized), 5, "refused"),
            (ApiError::Unsupported { feature: "leases".into() }, 5, "unsupported"),
            (ClientError::Unsupported { feature: "multi-recipient".into() }.into(), 5, "unsupported"),
            (ClientError::UnresolvedMany(vec![]).into(), 4, "unknown_address"),
            (ClientError::Call(CallError::Transient("down".into())).into(), 6, "unreachable"),
            (server(ErrorCode::NotFound), 7, "not_found"),
            (ClientError::NotFound("m".into()).into(), 7, "not_found"),
            (ClientError::LeaseNotHeld { resource: "deploy".into() }.into(), 7, "not_found"),
            (ClientError::Timeout { id: "m".into(), wanted: "seen".into(), state: "new".into() }.into(), 8, "timeout"),
            (ClientError::Config(ConfigError::NoHome).into(), 9, "local"),
            (ApiError::Missing("no handoff \"x\"".into()), 7, "not_found"),
            (ApiError::Busy("gpu-0 is in use".into()), 10, "held"),
            (ApiError::MapStale("the code map is stale".into()), 15, "map_stale"),
        ];
        for (e, exit, code) in cases {
            assert_eq!(e.exit() as i32, exit, "{e}");
            assert_eq!(e.code(), code, "{e}");
            let j = e.to_json();
            assert_eq!(j["exit"], exit);
            assert_eq!(j["code"], code);
            assert_eq!(j["message"], e.to_string());
        }
    }

    #[test]
    fn refusals_name_the_rule_and_unknown_addresses_the_candidates() {
        assert_eq!(server(ErrorCode::LoopRefused).to_json()["rule"], "loop_refused");
        assert_eq!(server(ErrorCode::HopLimit).to_json()["rule"], "hop_limit");
        let e: ApiError = ClientError::ReplyToReply { id: "m".into() }.into();
        assert_eq!(e.to_json()["rule"], "reply_to_reply");
        let e: ApiError = ClientError::Unresolved {
            query: "kim".into(),
            candidates: vec!["kim-laptop".into(), "kim-desktop".into()],
        }
        .into();
        assert_eq!(e.to_json()["candidates"], json!(["kim-laptop", "kim-desktop"]));
        let e = ApiError::Unsupported { feature: "leases".into() };
        assert!(e.to_string().contains("this server does not support leases: redeploy gas/ or update pcmail serve"));
    }
}
