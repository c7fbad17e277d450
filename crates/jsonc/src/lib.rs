//! One value of a JSON-with-comments file, read or changed in place.
//!
//! Gemini CLI reads its `settings.json` with comments and trailing commas
//! allowed, and people write both. A plain JSON parser refuses such a file,
//! and re-serialising it drops every comment; here the file is parsed into a
//! concrete syntax tree, only the property at the path changes, and the rest
//! of the text comes back byte for byte.

use jsonc_parser::cst::{CstInputValue, CstNode, CstObject, CstRootNode};
use jsonc_parser::ParseOptions;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

fn options() -> ParseOptions {
    ParseOptions::default()
}

/// The whole file as a JSON value; empty (or only comments) is `{}`. A top
/// level that is not an object is an error.
pub fn parse(text: &str) -> Result<serde_json::Map<String, Value>, Error> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let v: Value = jsonc_parser::parse_to_serde_value(text, &options()).map_err(|e| Error(e.to_string()))?;
    match v {
        Value::Null => Ok(serde_json::Map::new()),
        Value::Object(m) => Ok(m),
        _ => Err(Error("the top level is not an object".into())),
    }
}

fn input(v: &Value) -> CstInputValue {
    match v {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(a) => CstInputValue::Array(a.iter().map(input).collect()),
        Value::Object(m) => CstInputValue::Object(m.iter().map(|(k, v)| (k.clone(), input(v))).collect()),
    }
}

/// The object at `path` under `obj`, made when `create` (None: absent, or
/// not an object when not creating).
fn object_at(obj: &CstObject, key: &str, create: bool) -> Result<Option<CstObject>, Error> {
    match obj.get(key) {
        Some(prop) => match prop.value() {
            Some(CstNode::Container(_)) if prop.object_value().is_some() => Ok(prop.object_value()),
            _ => Err(Error(format!("`{key}` is not an object"))),
        },
        None if create => Ok(Some(obj.object_value_or_set(key))),
        None => Ok(None),
    }
}

/// `text` with the property at `path` set to `value`, or removed when
/// `value` is None (then objects on the path that this leaves empty go too).
/// Objects missing on the way are added. Everything else is kept as written.
pub fn set(text: &str, path: &[&str], value: Option<&Value>) -> Result<String, Error> {
    let (last, parents) = path.split_last().ok_or_else(|| Error("an empty path".into()))?;
    let bom = text.starts_with('\u{feff}');
    let body = text.strip_prefix('\u{feff}').unwrap_or(text);
    // Validate the whole file first (the tree keeps going past some errors).
    parse(body)?;
    let root = CstRootNode::parse(body, &options()).map_err(|e| Error(e.to_string()))?;
    let top = match root.value() {
        None => root.object_value_or_set(),
        Some(_) => root.object_value().ok_or_else(|| Error("the top level is not an object".into()))?,
    };
    let mut chain = vec![top];
    for key in parents {
        let here = chain.last().expect("starts with the top");
        match object_at(here, key, value.is_some())? {
            Some(o) => chain.push(o),
            None => return Ok(text.to_string()),
        }
    }
    let obj = chain.last().expect("at least the top");
    match value {
        Some(v) => match obj.get(last) {
            Some(prop) => prop.set_value(input(v)),
            None => {
                obj.append(last, input(v));
            }
        },
        None => {
            let Some(prop) = obj.get(last) else { return Ok(text.to_string()) };
            prop.remove();
            // Prune the objects this removal emptied, innermost first (never the top).
            for (i, key) in parents.iter().enumerate().rev() {
                if !chain[i + 1].properties().is_empty() {
                    break;
                }
                if let Some(p) = chain[i].get(key) {
                    p.remove();
                }
            }
        }
    }
    let mut out = root.to_string();
    if bom {
        out.insert(0, '\u{feff}');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const COMMENTED: &str = "{\n  // my theme\n  \"theme\": \"Dracula\", /* keep */\n  \"mcpServers\": {\n    \"other\": {\"command\": \"x\"}, // trailing comma next\n  },\n}\n";

    #[test]
    fn a_value_is_set_and_removed_with_every_comment_kept() {
        let added =
            set(COMMENTED, &["mcpServers", "pcmail"], Some(&json!({"command": "/p", "args": ["mcp"]}))).unwrap();
        for c in ["// my theme", "/* keep */", "// trailing comma next"] {
            assert!(added.contains(c), "{c} kept:\n{added}");
        }
        let v = parse(&added).unwrap();
        assert_eq!(v["mcpServers"]["pcmail"], json!({"command": "/p", "args": ["mcp"]}));
        assert_eq!(v["mcpServers"]["other"], json!({"command": "x"}));
        // Changing it again replaces the value in place.
        let changed = set(&added, &["mcpServers", "pcmail"], Some(&json!({"command": "/q"}))).unwrap();
        assert_eq!(parse(&changed).unwrap()["mcpServers"]["pcmail"], json!({"command": "/q"}));
        // Removing it gives the original text back.
        assert_eq!(
            set(&changed, &["mcpServers", "pcmail"], None).unwrap(),
            set(COMMENTED, &["nothing"], None).unwrap()
        );
        assert_eq!(parse(&set(&changed, &["mcpServers", "pcmail"], None).unwrap()).unwrap(), parse(COMMENTED).unwrap());
    }

    #[test]
    fn missing_objects_are_made_and_emptied_ones_pruned() {
        let t = set("", &["hooks", "BeforeAgent"], Some(&json!([1]))).unwrap();
        assert_eq!(parse(&t).unwrap(), *json!({"hooks": {"BeforeAgent": [1]}}).as_object().unwrap());
        let t2 = set(&t, &["hooks", "BeforeAgent"], None).unwrap();
        assert_eq!(parse(&t2).unwrap(), serde_json::Map::new());
        let with_bom = format!("\u{feff}{COMMENTED}");
        assert!(set(&with_bom, &["x"], Some(&json!(1))).unwrap().starts_with('\u{feff}'));
    }

    #[test]
    fn what_is_not_json_or_not_an_object_is_refused() {
        assert!(parse("{ not json").is_err());
        assert!(set("{ not json", &["a"], Some(&json!(1))).is_err());
        assert!(set("[1]", &["a"], Some(&json!(1))).is_err());
        assert!(set("{\"hooks\": 3}", &["hooks", "a"], Some(&json!(1))).is_err());
        assert_eq!(parse("// only a comment\n").unwrap(), serde_json::Map::new());
    }
}
