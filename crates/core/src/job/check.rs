//! The rules a spec and every submitted argument are checked by, the same
//! on both servers and the PC: names, patterns, placeholders, artifact
//! patterns, relative paths, each argument's type and bounds.

use super::builtins::*;
use super::limits::*;
use super::spec::*;
use crate::error::{ErrorCode, ProtoError};
use crate::roster::is_valid_label;
use crate::rules::check_text;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

fn refused(reason: &str, message: impl Into<String>) -> ProtoError {
    ProtoError::new(ErrorCode::JobRefused, message).with_reason(reason)
}

fn bad_argument(name: &str, message: impl Into<String>) -> ProtoError {
    let mut e = refused(REFUSED_BAD_ARGUMENT, message);
    e.field = Some(format!("args.{name}"));
    e
}

/// A command name: like a label (`^[a-z0-9][a-z0-9._-]{0,39}$`). Names
/// starting with `_` are the server's built-ins and never pass here.
pub fn is_valid_command_name(s: &str) -> bool {
    is_valid_label(s)
}

/// An argument name: a letter, then letters, digits, `_` or `-`; at most 40.
pub fn is_valid_arg_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 40
        && b[0].is_ascii_alphabetic()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-'))
}

/// The `pattern` of a string argument must match the whole value.
fn compile_pattern(p: &str) -> Result<regex::Regex, String> {
    if p.chars().count() > PATTERN_MAX_CHARS {
        return Err(format!("pattern is longer than {PATTERN_MAX_CHARS} characters"));
    }
    regex::RegexBuilder::new(&format!("^(?:{p})$"))
        .size_limit(1 << 20)
        .build()
        .map_err(|e| format!("pattern is not a regex: {e}"))
}

fn spec_err(field: String, message: impl Into<String>) -> ProtoError {
    ProtoError { field: Some(field), ..ProtoError::new(ErrorCode::BadRequest, message) }
}

/// The one check of a published command (the PC when it loads its config,
/// the server when it stores a whitelist). Errors are `bad_request` with the
/// field inside the spec (`args[1].pattern`, `timeLimitMs` …).
pub fn check_spec(spec: &CommandSpec) -> Result<(), ProtoError> {
    // A PC's built-in probes are the one exception to the label spelling:
    // as core defines them (read-only, no args, no artifacts).
    let pc_probe =
        pc_builtin(&spec.name).is_some() && spec.read_only && spec.args.is_empty() && spec.artifacts.is_empty();
    if !is_valid_command_name(&spec.name) && !pc_probe {
        return Err(spec_err(
            "name".into(),
            format!(
                "command name {:?} must look like a label (lower-case a-z 0-9 . _ -, max 40, not starting with _)",
                spec.name
            ),
        ));
    }
    check_spec_body(spec)
}

pub(super) fn check_spec_body(spec: &CommandSpec) -> Result<(), ProtoError> {
    if spec.args.len() > ARGS_MAX {
        return Err(spec_err("args".into(), format!("at most {ARGS_MAX} arguments")));
    }
    for (i, a) in spec.args.iter().enumerate() {
        let f = |k: &str| format!("args[{i}].{k}");
        if !is_valid_arg_name(&a.name) {
            return Err(spec_err(
                f("name"),
                format!("argument name {:?}: a letter, then letters, digits, _ or -, max 40", a.name),
            ));
        }
        if spec.args[..i].iter().any(|b| b.name == a.name) {
            return Err(spec_err(f("name"), format!("argument {:?} is declared twice", a.name)));
        }
        if a.pattern.is_some() && a.kind != ArgType::String {
            return Err(spec_err(f("pattern"), "pattern is only for string arguments"));
        }
        if let Some(p) = &a.pattern {
            compile_pattern(p).map_err(|m| spec_err(f("pattern"), m))?;
        }
        if let Some(n) = a.max_len {
            if !matches!(a.kind, ArgType::String | ArgType::Path) {
                return Err(spec_err(f("maxLen"), "maxLen is only for string and path arguments"));
            }
            if !(1..=STRING_MAX_LEN_CAP).contains(&n) {
                return Err(spec_err(f("maxLen"), format!("maxLen must be 1..{STRING_MAX_LEN_CAP}")));
            }
        }
        if a.allow_dash && !matches!(a.kind, ArgType::String | ArgType::Path) {
            return Err(spec_err(f("allowDash"), "allowDash is only for string and path arguments"));
        }
        if (a.min.is_some() || a.max.is_some()) && a.kind != ArgType::Int {
            return Err(spec_err(f("min"), "min and max are only for int arguments"));
        }
        if let (Some(lo), Some(hi)) = (a.min, a.max) {
            if lo > hi {
                return Err(spec_err(f("min"), "min must not be above max"));
            }
        }
        match (&a.values, a.kind) {
            (None, ArgType::Enum) => return Err(spec_err(f("values"), "an enum argument needs its values")),
            (Some(_), k) if !matches!(k, ArgType::Enum | ArgType::Checkout) => {
                return Err(spec_err(f("values"), "values are only for enum and checkout arguments"))
            }
            (Some(vs), _) => {
                if vs.len() > VALUES_MAX {
                    return Err(spec_err(f("values"), format!("at most {VALUES_MAX} values")));
                }
                for v in vs {
                    if v.is_empty() {
                        return Err(spec_err(f("values"), "a value must not be empty"));
                    }
                    check_text(&f("values"), v, STRING_MAX_LEN_DEFAULT, false)?;
                }
            }
            _ => {}
        }
    }
    if let Some(s) = &spec.subject {
        if !spec.args.iter().any(|a| &a.name == s) {
            return Err(spec_err("subject".into(), format!("subject {s:?} is not one of the command's arguments")));
        }
    }
    if !(TIME_LIMIT_MIN_MS..=TIME_LIMIT_MAX_MS).contains(&spec.time_limit_ms) {
        return Err(spec_err("timeLimitMs".into(), "timeLimitMs must be 1 second to 24 hours"));
    }
    if spec.artifacts.len() > ARTIFACTS_MAX {
        return Err(spec_err("artifacts".into(), format!("at most {ARTIFACTS_MAX} artifact patterns")));
    }
    let arg_names: Vec<&str> = spec.args.iter().map(|a| a.name.as_str()).collect();
    for (i, p) in spec.artifacts.iter().enumerate() {
        check_artifact_pattern(p, &arg_names).map_err(|m| spec_err(format!("artifacts[{i}]"), m))?;
    }
    check_text("description", &spec.description, DESCRIPTION_MAX_CHARS, true)?;
    Ok(())
}

/// The placeholders every artifact pattern may use besides the command's
/// argument names.
pub const ARTIFACT_BUILTINS: [&str; 4] = ["command", "subject", "ts", "args"];

/// The `{name}` placeholders of a template, in order (an unclosed `{` ends the list).
pub fn placeholders(template: &str) -> Vec<&str> {
    let mut out = vec![];
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else { break };
        out.push(&after[..close]);
        rest = &after[close + 1..];
    }
    out
}

/// An artifact pattern: a relative path (the `path` rule) whose only braces
/// are placeholders: `{command}`, `{subject}`, `{ts}`, `{args}` or one of the
/// command's argument names.
pub fn check_artifact_pattern(p: &str, arg_names: &[&str]) -> Result<(), String> {
    if p.chars().count() > ARTIFACT_MAX_CHARS {
        return Err(format!("an artifact pattern is longer than {ARTIFACT_MAX_CHARS} characters"));
    }
    if let Some(x) = placeholders(p).into_iter().find(|x| !ARTIFACT_BUILTINS.contains(x) && !arg_names.contains(x)) {
        return Err(format!(
            "{{{x}}} is not a placeholder of artifact patterns ({{command}}, {{subject}}, {{ts}}, {{args}} or an argument name)"
        ));
    }
    let mut plain = String::new();
    let mut rest = p;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else { break };
        plain.push_str(&rest[..open]);
        plain.push('x');
        rest = &rest[open + close + 1..];
    }
    plain.push_str(rest);
    if plain.contains('{') || plain.contains('}') {
        return Err("an artifact pattern has a { or } that is not a placeholder".into());
    }
    check_relative_path(&plain)
}

/// The `path` rule: relative, `/` separators, no `..` segment, no leading `/`
/// or drive letter, no control characters, no backslash (a separator on Windows).
pub fn check_relative_path(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("must not be empty".into());
    }
    if s.chars().any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')) {
        return Err("contains control characters".into());
    }
    if s.contains('\\') {
        return Err("must use / as separator (no backslash)".into());
    }
    if s.starts_with('/') {
        return Err("must be relative (no leading /)".into());
    }
    let b = s.as_bytes();
    if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
        return Err("must be relative (no drive letter)".into());
    }
    if s.split('/').any(|seg| seg == "..") {
        return Err("must not contain a .. segment".into());
    }
    Ok(())
}

/// The job's subject: the value of the spec's subject argument, `""` without one.
pub fn subject_of(spec: &CommandSpec, args: &BTreeMap<String, ArgValue>) -> String {
    spec.subject.as_ref().and_then(|s| args.get(s)).map(ArgValue::to_arg_string).unwrap_or_default()
}

/// Typed arguments → the validated map (the submitting CLI, both servers at
/// submit, and the PC again before it builds the argv). Strings are never
/// interpreted: shell metacharacters are just characters of one argv element;
/// control characters, NUL, oversize, traversal, unknown names are refused
/// with `job_refused` (`reason: bad_argument`, `field: args.<name>`).
/// `int` and `bool` also take their string forms (`"42"`, `"true"`), so a CLI
/// that does not know the spec sends what it was given.
pub fn check_args(spec: &CommandSpec, args: &Map<String, Value>) -> Result<BTreeMap<String, ArgValue>, ProtoError> {
    if let Some(k) = args.keys().find(|k| !spec.args.iter().any(|a| &a.name == *k)) {
        let shown: String = k.chars().take(40).collect();
        let takes = match spec.args.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", ") {
            none if none.is_empty() => "it takes none".to_string(),
            names => format!("it takes: {names}"),
        };
        let mut e = bad_argument(&shown, format!("{:?} is not an argument of {} ({takes})", shown, spec.name));
        if !is_valid_arg_name(k) {
            e.field = Some("args".into());
        }
        return Err(e);
    }
    let mut out = BTreeMap::new();
    for a in &spec.args {
        let v = match args.get(&a.name) {
            None | Some(Value::Null) => {
                if a.required {
                    return Err(bad_argument(&a.name, format!("{} needs argument {:?}", spec.name, a.name)));
                }
                continue;
            }
            Some(v) => v,
        };
        out.insert(a.name.clone(), check_arg(a, v)?);
    }
    Ok(out)
}

fn check_arg(a: &ArgSpec, v: &Value) -> Result<ArgValue, ProtoError> {
    let n = &a.name;
    let string = |v: &Value| -> Result<String, ProtoError> {
        v.as_str().map(str::to_string).ok_or_else(|| bad_argument(n, format!("{n} must be a string")))
    };
    let text = |s: &str, max: usize| -> Result<(), ProtoError> {
        if s.chars().count() > max {
            return Err(bad_argument(n, format!("{n} is longer than {max} characters")));
        }
        if s.chars().any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')) {
            return Err(bad_argument(n, format!("{n} contains control characters")));
        }
        Ok(())
    };
    let max_len = a.max_len.unwrap_or(STRING_MAX_LEN_DEFAULT).min(STRING_MAX_LEN_CAP);
    match a.kind {
        ArgType::String => {
            let s = string(v)?;
            text(&s, max_len)?;
            check_not_an_option(a, &s)?;
            if let Some(p) = &a.pattern {
                let re = compile_pattern(p).map_err(|m| bad_argument(n, m))?;
                if !re.is_match(&s) {
                    return Err(bad_argument(n, format!("{n} does not match the pattern {p}")));
                }
            }
            Ok(ArgValue::Str(s))
        }
        ArgType::Int => {
            let x = match v {
                Value::Number(x) => x.as_i64(),
                Value::String(s) if s.len() <= 20 => s.parse::<i64>().ok().filter(|_| !s.starts_with('+')),
                _ => None,
            }
            .ok_or_else(|| bad_argument(n, format!("{n} must be an integer")))?;
            if a.min.is_some_and(|lo| x < lo) || a.max.is_some_and(|hi| x > hi) {
                let lo = a.min.map(|x| x.to_string()).unwrap_or_default();
                let hi = a.max.map(|x| x.to_string()).unwrap_or_default();
                return Err(bad_argument(n, format!("{n} must be {lo}..{hi}")));
            }
            Ok(ArgValue::Int(x))
        }
        ArgType::Bool => match v {
            Value::Bool(b) => Ok(ArgValue::Bool(*b)),
            Value::String(s) if s == "true" => Ok(ArgValue::Bool(true)),
            Value::String(s) if s == "false" => Ok(ArgValue::Bool(false)),
            _ => Err(bad_argument(n, format!("{n} must be true or false"))),
        },
        ArgType::Enum | ArgType::Checkout => {
            let s = string(v)?;
            text(&s, STRING_MAX_LEN_CAP)?;
            let values = a.values.as_deref().unwrap_or(&[]);
            if !values.contains(&s) {
                let what = if a.kind == ArgType::Checkout { "checkout" } else { "value" };
                return Err(bad_argument(
                    n,
                    format!("{n}: {s:?} is not a published {what} (one of: {})", values.join(", ")),
                ));
            }
            Ok(ArgValue::Str(s))
        }
        ArgType::Path => {
            let s = string(v)?;
            text(&s, max_len)?;
            check_relative_path(&s).map_err(|m| bad_argument(n, format!("{n} {m}")))?;
            check_not_an_option(a, &s)?;
            Ok(ArgValue::Str(s))
        }
    }
}

/// Arguments never become options: a `string` or `path` value that starts
/// with `-` is refused unless its spec allows it (`allowDash`: the owner
/// opted in, or the value only ever follows an end-of-options `--` the
/// command declares). One rule for the submitting CLI, both servers and the
/// executing PC (through `check_args`). A file whose name starts with `-` is
/// still reachable as `./-name`.
pub fn check_not_an_option(a: &ArgSpec, value: &str) -> Result<(), ProtoError> {
    if a.allow_dash || !matches!(a.kind, ArgType::String | ArgType::Path) || !value.starts_with('-') {
        return Ok(());
    }
    let n = &a.name;
    let hint = if a.kind == ArgType::Path { " (write ./-name for a file whose name starts with -)" } else { "" };
    Err(bad_argument(
        n,
        format!(
            "{n} starts with \"-\", which the command would read as an option{hint}; \
             its PC's owner can allow it for this argument (allow_dash = true, or after a declared \"--\")"
        ),
    ))
}
