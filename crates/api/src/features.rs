//! Tool groups and the server's `hello` features: the client asks what the
//! server supports instead of guessing from failures, so a group the server
//! lacks is refused at once with a clear message instead of failing later.

use crate::{ApiError, Result};
use pcmail_client::Client;
use pcmail_core::protocol::Op;

/// A set of operations that arrives with one server feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// Mail, roster, alerts: the base protocol every server speaks.
    Mail,
    /// `lease.*`.
    Leases,
    /// `name.take`, `who` and mail to a name.
    Sessions,
    /// `job.*`.
    Jobs,
}

impl Group {
    /// The `hello` feature that must be present; `None` for the base protocol.
    pub fn feature(self) -> Option<&'static str> {
        match self {
            Group::Mail => None,
            Group::Leases => Some("leases"),
            Group::Sessions => Some("sessions"),
            Group::Jobs => Some("jobs"),
        }
    }
}

/// What `hello` answers (the name the MCP server knows it by).
pub type Hello = pcmail_core::answers::HelloAnswer;

/// `hello`; an answer that is not one reads as a mail-only server's.
pub fn hello(client: &Client) -> Result<Hello> {
    let v = client.transport.call(&Op::Hello)?;
    Ok(pcmail_client::transport::decode(&Op::Hello, v).unwrap_or_default())
}

/// `Ok` when a server with these `hello` features serves the group that needs `feature`.
pub fn require(feature: Option<&str>, features: Option<&[String]>) -> Result<()> {
    let Some(needed) = feature else { return Ok(()) };
    // No features list: a mail-only server.
    let has = features.is_some_and(|f| f.iter().any(|x| x == needed));
    if has {
        Ok(())
    } else {
        Err(ApiError::Unsupported { feature: needed.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_groups_always_pass_and_others_need_their_feature() {
        assert!(require(Group::Mail.feature(), None).is_ok());
        assert!(require(Group::Mail.feature(), Some(&[])).is_ok());
        let listed = vec!["leases".to_string()];
        assert!(require(Some("leases"), Some(&listed)).is_ok());
        let e = require(Some("jobs"), Some(&listed)).unwrap_err();
        assert_eq!((e.exit() as i32, e.code()), (5, "unsupported"));
        assert!(e.to_string().contains("does not support jobs: redeploy gas/ or update pcmail serve"));
        assert!(require(Some("leases"), None).is_err(), "no features list: mail only");
    }

    #[test]
    fn hello_without_features_parses_as_mail_only() {
        let h: Hello = serde_json::from_str(r#"{"ok":true,"server":"pcmail-rust","protocol":1}"#).unwrap();
        assert!(h.features.is_none());
        let h: Hello = serde_json::from_str(r#"{"server":"x","features":["mail","leases"]}"#).unwrap();
        assert_eq!(h.features.unwrap(), ["mail", "leases"]);
    }
}
