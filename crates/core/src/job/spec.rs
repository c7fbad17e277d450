//! A command's spec as a PC publishes it: its arguments and their types,
//! its artifacts and subject; and a checked argument's value.

use crate::Millis;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArgType {
    String,
    Int,
    Bool,
    Enum,
    Path,
    Checkout,
}

/// One typed argument of a command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArgSpec {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: ArgType,
    #[serde(default)]
    pub required: bool,
    /// `string`: a regex the whole value must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// `string`/`path`: longest value in characters (default 200, at most 4 096).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_len: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<i64>,
    /// `enum`: the allowed values; `checkout`: the PC's checkout names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
    /// `string`/`path`: a value may start with `-`. Off by default, because
    /// such a value is read as an option by most programs (`--output=/x`).
    /// The executing PC sets it when its owner opted in for this argument,
    /// or placed it only after an end-of-options `--` the command declares.
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_dash: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// What an executor publishes of one command (never the argv template).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandSpec {
    pub name: String,
    #[serde(default)]
    pub args: Vec<ArgSpec>,
    /// The name of the argument whose value is the job's subject.
    #[serde(default)]
    pub subject: Option<String>,
    pub time_limit_ms: Millis,
    /// Patterns with `{command}`, `{subject}`, `{ts}`, `{args}` and the
    /// command's argument names (`{target}`); see `artifact_name`.
    #[serde(default)]
    pub artifacts: Vec<String>,
    #[serde(default)]
    pub read_only: bool,
    #[serde(default)]
    pub chunked: bool,
    #[serde(default)]
    pub verify: bool,
    #[serde(default)]
    pub description: String,
}

/// A checked argument value. On the wire it is the plain JSON value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ArgValue {
    Bool(bool),
    Int(i64),
    Str(String),
}

impl ArgValue {
    /// The value as one argv element (never through a shell).
    pub fn to_arg_string(&self) -> String {
        match self {
            ArgValue::Bool(b) => b.to_string(),
            ArgValue::Int(n) => n.to_string(),
            ArgValue::Str(s) => s.clone(),
        }
    }
}
