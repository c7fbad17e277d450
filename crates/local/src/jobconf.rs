//! `[jobs]` in config.toml (issue 13): the commands this PC's owner lets
//! other sessions run here, the checkouts they run in, and who may submit.
//! Also what turns a checked job into a process: the argv (each `{arg}`
//! replaced inside one argv element; never a shell), the directory, and the
//! artifact paths. The argument values themselves are checked by
//! `pcmail_core::job::check_args` before anything here sees them.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Placeholders every template may use besides the command's arguments.
pub const BUILTINS: &[&str] = &["command", "subject", "ts", "job", "input"];

/// Where a chunked command's current input goes in its argv until the run
/// fills it in (arguments can hold no control character, so no value is it).
pub const INPUT_SLOT: &str = "\u{1}input\u{1}";

/// Default time limit of a command (10 minutes).
pub const DEFAULT_TIME_LIMIT_SECS: u64 = 600;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobsConfig {
    /// PC labels whose sessions may submit jobs here. Absent: nobody, until
    /// the server requires per-PC credentials (then every roster PC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_submitters: Option<Vec<String>>,
    /// Checkout name → directory. Jobs run only inside these.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub checkouts: BTreeMap<String, PathBuf>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<CommandConfig>,
}

impl JobsConfig {
    pub fn is_empty(&self) -> bool {
        *self == JobsConfig::default()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandConfig {
    pub name: String,
    /// The program and its arguments; `{arg}` is replaced inside one element.
    pub argv: Vec<String>,
    /// Where it runs: `{arg}` of a checkout argument, or a checkout name.
    /// Default: the first checkout argument.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<ArgConfig>,
    /// The argument whose value is what the job works on (artifacts and the
    /// per-subject lock are keyed by it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(default = "default_time_limit")]
    pub time_limit_secs: u64,
    /// Files the command makes, relative to its directory: `{command}`,
    /// `{subject}`, `{ts}` (the job's submit time, ms) and arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<String>,
    /// A read-only command run after a successful run; its outcome is part of the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<Vec<String>>,
    /// A command whose output (what was written, read back) goes in the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_back: Option<Vec<String>>,
    /// A probe: no artifacts check, no per-subject lock.
    #[serde(default)]
    pub read_only: bool,
    /// Resumes over several runs: one process per input (`{input}` in argv),
    /// progress kept per input (see docs/jobs.md).
    #[serde(default)]
    pub chunked: bool,
    /// A chunked command's inputs: the files directly in this folder (relative to the checkout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<String>,
    /// A chunked command's budget per input (default: 30 % of the time limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_time_limit_secs: Option<u64>,
    #[serde(default)]
    pub description: String,
}

fn default_time_limit() -> u64 {
    DEFAULT_TIME_LIMIT_SECS
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArgConfig {
    pub name: String,
    /// string, int, bool, enum, path, checkout.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default = "yes")]
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_len: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("[jobs] {0}")]
pub struct JobsConfigError(pub String);

fn err(s: impl Into<String>) -> JobsConfigError {
    JobsConfigError(s.into())
}

/// The `{name}` placeholders of a template, in order.
pub fn placeholders(template: &str) -> Vec<&str> {
    let mut out = vec![];
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) => {
                out.push(&after[..close]);
                rest = &after[close + 1..];
            }
            None => break,
        }
    }
    out
}

/// Replaces each `{name}` with its value; `None` when a placeholder has no value.
pub fn render(template: &str, values: &BTreeMap<String, String>) -> Option<String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else { break };
        out.push_str(&rest[..open]);
        out.push_str(values.get(&after[..close])?);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Some(out)
}

impl CommandConfig {
    fn arg(&self, name: &str) -> Option<&ArgConfig> {
        self.args.iter().find(|a| a.name == name)
    }

    /// The checkout the command runs in: an argument (`{name}`) or a fixed checkout name.
    fn cwd_source(&self) -> Option<CwdSource> {
        match self.cwd.as_deref() {
            Some(c) => match c.strip_prefix('{').and_then(|c| c.strip_suffix('}')) {
                Some(arg) => Some(CwdSource::Arg(arg.to_string())),
                None => Some(CwdSource::Fixed(c.to_string())),
            },
            None => self.args.iter().find(|a| a.kind == "checkout").map(|a| CwdSource::Arg(a.name.clone())),
        }
    }

    /// What this PC's owner wrote, checked for what only the PC knows
    /// (placeholders, checkouts); the spec itself is checked by core.
    pub fn check(&self, checkouts: &BTreeMap<String, PathBuf>) -> Result<(), JobsConfigError> {
        let n = &self.name;
        if self.argv.is_empty() || self.argv[0].is_empty() {
            return Err(err(format!("command {n}: argv must name a program")));
        }
        for a in &self.args {
            if BUILTINS.contains(&a.name.as_str()) {
                return Err(err(format!(
                    "command {n}: argument name {:?} is reserved ({})",
                    a.name,
                    BUILTINS.join(", ")
                )));
            }
        }
        let known = |p: &str| BUILTINS.contains(&p) || self.arg(p).is_some();
        let templates = self.argv.iter().chain(self.verify.iter().flatten()).chain(self.read_back.iter().flatten());
        for t in templates {
            if let Some(p) = placeholders(t).into_iter().find(|p| !known(p)) {
                return Err(err(format!("command {n}: {{{p}}} in {t:?} is not an argument of the command")));
            }
        }
        // Artifact names are made by core's one rule (`artifact_name`), which knows these three.
        for t in &self.artifacts {
            if let Some(p) = placeholders(t).into_iter().find(|p| !["command", "subject", "ts"].contains(p)) {
                return Err(err(format!(
                    "command {n}: artifact {t:?} may use {{command}}, {{subject}} and {{ts}} only, not {{{p}}}"
                )));
            }
        }
        for a in &self.artifacts {
            if a.starts_with('/') || a.starts_with('\\') || a.contains(':') || a.split(['/', '\\']).any(|s| s == "..") {
                return Err(err(format!("command {n}: artifact {a:?} must be relative to the checkout, without `..`")));
            }
        }
        if let Some(s) = &self.subject {
            if self.arg(s).is_none() {
                return Err(err(format!("command {n}: subject {s:?} is not an argument of the command")));
            }
        }
        match self.cwd_source() {
            None => {
                return Err(err(format!(
                    "command {n}: no checkout to run in (set cwd, or give it a checkout argument)"
                )))
            }
            Some(CwdSource::Arg(a)) => match self.arg(&a) {
                Some(x) if x.kind == "checkout" => {}
                _ => return Err(err(format!("command {n}: cwd {{{a}}} is not a checkout argument"))),
            },
            Some(CwdSource::Fixed(c)) => {
                if !checkouts.contains_key(&c) {
                    return Err(err(format!("command {n}: cwd {c:?} is not in [jobs.checkouts]")));
                }
            }
        }
        if self.chunked {
            match &self.inputs {
                Some(d) if d == "." || is_inside(d) => {}
                _ => {
                    return Err(err(format!(
                        "command {n}: a chunked command needs `inputs`, a folder inside its checkout"
                    )))
                }
            }
            if !self.argv.iter().any(|a| placeholders(a).contains(&"input")) {
                return Err(err(format!(
                    "command {n}: a chunked command runs once per input: put {{input}} in its argv"
                )));
            }
        } else if self
            .argv
            .iter()
            .chain(self.verify.iter().flatten())
            .chain(self.read_back.iter().flatten())
            .any(|a| placeholders(a).contains(&"input"))
        {
            return Err(err(format!("command {n}: {{input}} is only for chunked commands")));
        }
        if self.time_limit_secs == 0 || self.time_limit_secs > 24 * 3600 {
            return Err(err(format!("command {n}: time_limit_secs must be 1 … 86400")));
        }
        Ok(())
    }

    /// The command as the poll publishes it (the contract's CommandSpec).
    pub fn spec_json(&self, checkouts: &BTreeMap<String, PathBuf>) -> Value {
        let args: Vec<Value> = self
            .args
            .iter()
            .map(|a| {
                let mut v = json!({"name": a.name, "type": a.kind, "required": a.required});
                if let Some(p) = &a.pattern {
                    v["pattern"] = json!(p);
                }
                if let Some(m) = a.max_len {
                    v["maxLen"] = json!(m);
                }
                if let Some(m) = a.min {
                    v["min"] = json!(m);
                }
                if let Some(m) = a.max {
                    v["max"] = json!(m);
                }
                match (a.kind.as_str(), &a.values) {
                    ("checkout", _) => v["values"] = json!(checkouts.keys().collect::<Vec<_>>()),
                    (_, Some(vals)) => v["values"] = json!(vals),
                    _ => {}
                }
                v
            })
            .collect();
        json!({
            "name": self.name,
            "args": args,
            "subject": self.subject,
            "timeLimitMs": self.time_limit_secs * 1000,
            "artifacts": self.artifacts,
            "readOnly": self.read_only,
            "chunked": self.chunked,
            "verify": self.verify.is_some(),
            "description": self.description,
        })
    }
}

enum CwdSource {
    Arg(String),
    Fixed(String),
}

/// A checked job made concrete: what runs, where, and what it should make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    pub verify: Option<Vec<String>>,
    pub read_back: Option<Vec<String>>,
    /// Artifact patterns with everything but `{ts}` filled in.
    pub artifact_patterns: Vec<String>,
    /// The artifacts of this very job (`{ts}` = its submit time).
    pub artifacts: Vec<String>,
    pub subject: String,
    /// A chunked command's inputs folder (relative to `cwd`).
    pub inputs: Option<String>,
    /// A chunked command's budget per input.
    pub input_limit_ms: i64,
}

/// The text of a checked argument value inside an argv element.
pub fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

impl JobsConfig {
    pub fn command(&self, name: &str) -> Option<&CommandConfig> {
        self.commands.iter().find(|c| c.name == name)
    }

    /// Every command checked; the first problem found.
    pub fn check(&self) -> Result<(), JobsConfigError> {
        for (name, dir) in &self.checkouts {
            if !dir.is_absolute() {
                return Err(err(format!("checkout {name}: {} must be an absolute path", dir.display())));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for c in &self.commands {
            if !seen.insert(&c.name) {
                return Err(err(format!("command {} is defined twice", c.name)));
            }
            c.check(&self.checkouts)?;
        }
        Ok(())
    }

    /// The argv, directory and artifacts of a job whose `args` core has
    /// checked against this command's spec. Each value goes into the argv
    /// elements that name it and nowhere else; a `checkout` argument becomes
    /// its directory in argv, its name elsewhere. An element that is only
    /// `{arg}` of an optional argument not given is left out.
    pub fn plan(
        &self,
        command: &str,
        args: &BTreeMap<String, Value>,
        job_id: &str,
        ts: i64,
    ) -> Result<Plan, JobsConfigError> {
        let c = self.command(command).ok_or_else(|| err(format!("command {command} is not configured here")))?;
        let subject = c.subject.as_ref().and_then(|s| args.get(s)).map(value_text).unwrap_or_default();
        let mut names: BTreeMap<String, String> = BTreeMap::new();
        names.insert("command".into(), c.name.clone());
        names.insert("subject".into(), subject.clone());
        names.insert("ts".into(), ts.to_string());
        names.insert("job".into(), job_id.to_string());
        let mut in_argv = names.clone();
        in_argv.insert("input".into(), INPUT_SLOT.into());
        for a in &c.args {
            let Some(v) = args.get(&a.name) else { continue };
            let text = value_text(v);
            if a.kind == "checkout" {
                let dir = self
                    .checkouts
                    .get(&text)
                    .ok_or_else(|| err(format!("checkout {text:?} is not configured here")))?;
                in_argv.insert(a.name.clone(), dir.to_string_lossy().into_owned());
            } else {
                in_argv.insert(a.name.clone(), text.clone());
            }
            names.insert(a.name.clone(), text);
        }
        let build = |t: &[String]| -> Result<Vec<String>, JobsConfigError> {
            let mut out = vec![];
            for el in t {
                let ph = placeholders(el);
                let lone_missing = ph.len() == 1 && el == &format!("{{{}}}", ph[0]) && !in_argv.contains_key(ph[0]);
                if lone_missing {
                    continue;
                }
                let mut vals = in_argv.clone();
                for p in &ph {
                    vals.entry(p.to_string()).or_default();
                }
                out.push(render(el, &vals).expect("every placeholder has a value"));
            }
            Ok(out)
        };
        let cwd = match c.cwd_source() {
            Some(CwdSource::Arg(a)) => {
                let name =
                    names.get(&a).ok_or_else(|| err(format!("argument {a} (the checkout to run in) is missing")))?;
                self.checkouts
                    .get(name)
                    .cloned()
                    .ok_or_else(|| err(format!("checkout {name:?} is not configured here")))?
            }
            Some(CwdSource::Fixed(n)) => {
                self.checkouts.get(&n).cloned().ok_or_else(|| err(format!("checkout {n:?} is not configured here")))?
            }
            None => return Err(err(format!("command {command}: no checkout to run in"))),
        };
        // `{ts}` kept as the wildcard of the search for earlier runs' artifacts
        // (a sentinel no made-safe subject can contain stands for it meanwhile).
        let artifact_patterns: Vec<String> = c
            .artifacts
            .iter()
            .map(|a| {
                pcmail_core::job::artifact_name(&a.replace("{ts}", "\u{1}"), &c.name, &subject, ts)
                    .replace('\u{1}', "{ts}")
            })
            .collect();
        let artifacts: Vec<String> =
            c.artifacts.iter().map(|a| pcmail_core::job::artifact_name(a, &c.name, &subject, ts)).collect();
        for a in artifact_patterns.iter().chain(&artifacts) {
            if !is_inside(a) {
                return Err(err(format!("artifact {a:?} would leave the checkout")));
            }
        }
        Ok(Plan {
            argv: build(&c.argv)?,
            cwd,
            verify: c.verify.as_deref().map(build).transpose()?,
            read_back: c.read_back.as_deref().map(build).transpose()?,
            artifact_patterns,
            artifacts,
            subject,
            inputs: c.chunked.then(|| c.inputs.clone()).flatten(),
            input_limit_ms: c.input_time_limit_secs.map(|x| x as i64 * 1000).unwrap_or(c.time_limit_secs as i64 * 300),
        })
    }
}

/// A relative path that stays below its base: no leading `/`, no drive, no `..`.
pub fn is_inside(rel: &str) -> bool {
    !rel.is_empty()
        && !rel.starts_with('/')
        && !rel.starts_with('\\')
        && !rel.contains(':')
        && !rel.chars().any(|c| c.is_control())
        && !rel.split(['/', '\\']).any(|s| s == "..")
}

/// Files under `base` matching an artifact pattern whose only wildcard is
/// `{ts}` (any run of characters without `/`). Returns relative names, sorted.
pub fn find_artifacts(base: &Path, pattern: &str) -> Vec<String> {
    let segs: Vec<&str> = pattern.split('/').filter(|s| !s.is_empty() && *s != ".").collect();
    let mut out = vec![];
    walk(base, "", &segs, &mut out);
    out.sort();
    out
}

fn walk(dir: &Path, prefix: &str, segs: &[&str], out: &mut Vec<String>) {
    let Some((first, rest)) = segs.split_first() else { return };
    let join = |name: &str| if prefix.is_empty() { name.to_string() } else { format!("{prefix}/{name}") };
    let candidates: Vec<String> = if first.contains("{ts}") {
        match std::fs::read_dir(dir) {
            Ok(rd) => rd
                .filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| ts_match(first, n))
                .collect(),
            Err(_) => vec![],
        }
    } else {
        vec![first.to_string()]
    };
    for name in candidates {
        let p = dir.join(&name);
        if rest.is_empty() {
            if p.is_file() {
                out.push(join(&name));
            }
        } else if p.is_dir() {
            walk(&p, &join(&name), rest, out);
        }
    }
}

/// `name` matches `seg`, where each `{ts}` stands for one or more characters.
fn ts_match(seg: &str, name: &str) -> bool {
    let parts: Vec<&str> = seg.split("{ts}").collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        // Each wildcard takes at least one character before the next literal part.
        match rest.get(1..).and_then(|r| r.find(mid)) {
            Some(i) => rest = &rest[i + 1 + mid.len()..],
            None => return false,
        }
    }
    !rest.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> JobsConfig {
        toml::from_str(
            r#"
allowed_submitters = ["laptop"]
[checkouts]
app = "/srv/app"
[[commands]]
name = "test"
argv = ["cargo", "test", "-p", "{crate}", "--", "{filter}"]
subject = "checkout"
time_limit_secs = 60
artifacts = ["target/pcmail/{command}-{subject}-{ts}.log"]
verify = ["grep", "-q", "ok", "target/pcmail/{command}-{subject}-{ts}.log"]
[[commands.args]]
name = "checkout"
type = "checkout"
[[commands.args]]
name = "crate"
type = "string"
[[commands.args]]
name = "filter"
type = "string"
required = false
"#,
        )
        .unwrap()
    }

    fn args(pairs: &[(&str, &str)]) -> BTreeMap<String, Value> {
        pairs.iter().map(|(k, v)| (k.to_string(), json!(v))).collect()
    }

    #[test]
    fn a_value_fills_one_argv_element_and_an_absent_optional_drops_its_element() {
        let c = cfg();
        c.check().unwrap();
        let p = c.plan("test", &args(&[("checkout", "app"), ("crate", "a b; rm -rf / $(x)")]), "job-1-aa", 42).unwrap();
        assert_eq!(p.argv, ["cargo", "test", "-p", "a b; rm -rf / $(x)", "--"]);
        assert_eq!(p.cwd, PathBuf::from("/srv/app"));
        assert_eq!(p.subject, "app");
        assert_eq!(p.artifacts, ["target/pcmail/test-app-42.log"]);
        assert_eq!(p.artifact_patterns, ["target/pcmail/test-app-{ts}.log"]);
        assert_eq!(p.verify.unwrap()[3], "target/pcmail/test-app-42.log");
    }

    #[test]
    fn a_subject_never_adds_a_directory_to_an_artifact() {
        let mut c = cfg();
        c.commands[0].subject = Some("crate".into());
        let p = c.plan("test", &args(&[("checkout", "app"), ("crate", "../../etc/x")]), "j", 1).unwrap();
        assert_eq!(p.artifacts, ["target/pcmail/test-.._.._etc_x-1.log"]);
        c.commands[0].artifacts = vec!["out/{crate}.log".into()];
        assert!(c.check().unwrap_err().0.contains("{command}, {subject} and {ts} only"));
    }

    #[test]
    fn unknown_placeholders_reserved_names_and_unknown_checkouts_are_refused() {
        let mut c = cfg();
        c.commands[0].argv.push("{nope}".into());
        assert!(c.check().unwrap_err().0.contains("{nope}"));
        let mut c = cfg();
        c.commands[0].args[1].name = "ts".into();
        assert!(c.check().unwrap_err().0.contains("reserved"));
        let mut c = cfg();
        c.commands[0].cwd = Some("other".into());
        assert!(c.check().unwrap_err().0.contains("not in [jobs.checkouts]"));
        let mut c = cfg();
        c.commands[0].artifacts = vec!["../x".into()];
        assert!(c.check().unwrap_err().0.contains("without `..`"));
    }

    #[test]
    fn the_published_spec_lists_the_checkouts_as_values() {
        let c = cfg();
        let s = c.commands[0].spec_json(&c.checkouts);
        assert_eq!(s["args"][0]["values"], json!(["app"]));
        assert_eq!(s["timeLimitMs"], json!(60_000));
        assert_eq!(s["verify"], json!(true));
    }

    #[test]
    fn artifacts_are_found_by_pattern_with_ts_as_the_wildcard() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("target/pcmail")).unwrap();
        for f in ["test-app-17.log", "test-app-.log", "test-apps-1.log", "test-app-9.txt"] {
            std::fs::write(d.path().join("target/pcmail").join(f), "x").unwrap();
        }
        assert_eq!(find_artifacts(d.path(), "target/pcmail/test-app-{ts}.log"), ["target/pcmail/test-app-17.log"]);
        assert!(find_artifacts(d.path(), "nothing/{ts}").is_empty());
        assert!(ts_match("a{ts}b{ts}c", "a1b2c"));
        assert!(!ts_match("a{ts}b{ts}c", "abc"));
    }
}
