//! A tool's arguments, checked by one function. rmcp's own `Parameters`
//! turns a missing or mistyped argument into a plain-text error before the
//! tool runs; here it becomes the same structured usage error as every other
//! failure (`{error: {code: "usage", exit: 2, field, message}}`, exit 2 like
//! the CLI's), naming the argument.

use pcmail_api::ApiError;
use rmcp::handler::server::common::FromContextPart;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Arguments that a known client adds to every tool call of its own accord,
/// not the model: ignored (and named in the result's `_meta`) instead of
/// refused, so the tools work under that client. Gemini CLI adds
/// `wait_for_previous` (whether to wait for the calls before it).
pub const INJECTED_ARGUMENTS: &[&str] = &["wait_for_previous"];

/// The arguments of one tool call, or why they are not usable, and the
/// injected ones that were dropped. Named `Parameters` so rmcp's `#[tool]`
/// macro takes the input schema from `T`.
pub struct Parameters<T> {
    pub args: Result<T, UsageError>,
    pub ignored: Vec<String>,
}

/// A usage error (exit 2) about one argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError {
    /// The argument's name as the input schema spells it (`""` when the
    /// arguments as a whole are wrong).
    pub field: String,
    pub message: String,
}

impl UsageError {
    pub fn api_error(&self) -> ApiError {
        ApiError::Usage(self.message.clone())
    }
}

/// Drops the [`INJECTED_ARGUMENTS`] the tool's schema does not name, then
/// [`parse`]s the rest.
pub fn parse_call<T: DeserializeOwned + JsonSchema + 'static>(mut args: JsonObject) -> Parameters<T> {
    let known = schema_properties::<T>().unwrap_or_default();
    let mut ignored = vec![];
    for name in INJECTED_ARGUMENTS {
        if !known.iter().any(|k| k == name) && args.remove(*name).is_some() {
            ignored.push((*name).to_string());
        }
    }
    Parameters { args: parse(args), ignored }
}

/// The one check every tool's arguments go through: no argument the schema
/// does not name, then serde (a missing required field, a wrong type or an
/// unknown enum value), with the argument's path kept.
pub fn parse<T: DeserializeOwned + JsonSchema + 'static>(args: JsonObject) -> Result<T, UsageError> {
    if let Some(known) = schema_properties::<T>() {
        let mut unknown: Vec<&String> = args.keys().filter(|k| !known.iter().any(|p| p == *k)).collect();
        unknown.sort();
        if let Some(k) = unknown.first() {
            let expected = if known.is_empty() {
                "it takes no arguments".to_string()
            } else {
                format!("expected one of: {}", known.join(", "))
            };
            return Err(UsageError { field: k.to_string(), message: format!("unknown argument `{k}` ({expected})") });
        }
    }
    serde_path_to_error::deserialize::<_, T>(Value::Object(args)).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        // serde names a missing field in its message and leaves the path at the parent.
        let missing = inner.strip_prefix("missing field `").and_then(|s| s.split('`').next()).map(str::to_string);
        let field = missing.unwrap_or_else(|| if path == "." { String::new() } else { path });
        let message = if field.is_empty() || inner.contains(&format!("`{field}`")) {
            format!("bad arguments: {inner}")
        } else {
            format!("argument `{field}`: {inner}")
        };
        UsageError { field, message }
    })
}

/// The top-level property names of `T`'s input schema (None: the schema does
/// not list them, so nothing is refused as unknown).
fn schema_properties<T: JsonSchema + 'static>() -> Option<Vec<String>> {
    let schema = rmcp::handler::server::common::schema_for_input::<T>().ok()?;
    let mut names: Vec<String> = match schema.get("properties") {
        Some(Value::Object(p)) => p.keys().cloned().collect(),
        None => vec![],
        Some(_) => return None,
    };
    names.sort();
    Some(names)
}

impl<S, T: DeserializeOwned + JsonSchema + 'static> FromContextPart<ToolCallContext<'_, S>> for Parameters<T> {
    fn from_context_part(context: &mut ToolCallContext<S>) -> Result<Self, rmcp::ErrorData> {
        Ok(parse_call(context.arguments.take().unwrap_or_default()))
    }
}

impl<T: JsonSchema> JsonSchema for Parameters<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcmail_api::{NoArgs, SendArgs, WaitForArgs};
    use serde_json::json;

    fn obj(v: Value) -> JsonObject {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn each_kind_of_bad_argument_names_its_field() {
        let e = parse::<SendArgs>(obj(json!({"to": "pc-b"}))).unwrap_err();
        assert_eq!(e.field, "body");
        assert!(e.message.contains("missing field `body`"), "{}", e.message);

        let e = parse::<SendArgs>(obj(json!({"to": "pc-b", "body": "x", "urgent": "yes"}))).unwrap_err();
        assert_eq!(e.field, "urgent");
        assert!(e.message.starts_with("argument `urgent`: invalid type"), "{}", e.message);

        let e = parse::<SendArgs>(obj(json!({"to": "pc-b", "body": "x", "kind": "memo"}))).unwrap_err();
        assert_eq!(e.field, "kind");
        assert!(e.message.contains("unknown variant `memo`"), "{}", e.message);

        let e = parse::<SendArgs>(obj(json!({"to": "pc-b", "bdy": "x"}))).unwrap_err();
        assert_eq!(e.field, "bdy");
        assert!(e.message.contains("unknown argument `bdy`") && e.message.contains("body"), "{}", e.message);

        let e = parse::<WaitForArgs>(obj(json!({"ids": ["m1", 7], "state": "seen"}))).unwrap_err();
        assert_eq!(e.field, "ids[1]");

        let e = parse::<NoArgs>(obj(json!({"x": 1}))).unwrap_err();
        assert_eq!((e.field.as_str(), e.message.as_str()), ("x", "unknown argument `x` (it takes no arguments)"));

        assert_eq!(e.api_error().exit() as i32, 2);
    }

    #[test]
    fn an_injected_argument_is_dropped_and_named_any_other_unknown_one_is_refused() {
        let p = parse_call::<SendArgs>(obj(json!({"to": "pc-b", "body": "x", "wait_for_previous": true})));
        assert_eq!(p.ignored, vec!["wait_for_previous".to_string()]);
        assert_eq!(p.args.unwrap().body, "x");
        let p = parse_call::<NoArgs>(obj(json!({"wait_for_previous": false})));
        assert_eq!((p.args.is_ok(), p.ignored.len()), (true, 1));
        // Anything else is still a usage error naming the field, injected one or not.
        let p = parse_call::<SendArgs>(obj(json!({"to": "pc-b", "body": "x", "wait_for_previous": 1, "bdy": 2})));
        assert_eq!(p.args.unwrap_err().field, "bdy");
        let p = parse_call::<NoArgs>(obj(json!({"wait_for_prev": true})));
        assert_eq!(p.args.unwrap_err().field, "wait_for_prev");
        assert!(p.ignored.is_empty());
    }

    #[test]
    fn good_arguments_pass_unchanged() {
        let a = parse::<SendArgs>(obj(json!({"to": "pc-b", "body": "x", "urgent": true}))).unwrap();
        assert_eq!((&a.to, a.body.as_str(), a.urgent), (&pcmail_api::Addresses::from("pc-b"), "x", true));
        parse::<NoArgs>(JsonObject::new()).unwrap();
    }
}
