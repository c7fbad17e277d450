//! What turns a checked job into a process: the argv (each `{arg}`
//! replaced inside one argv element; never a shell), the directory, and the
//! artifact paths; and the checks of `[jobs]` (pcmail_local::jobconf, its
//! shape) that only this PC can make. The argument values themselves are
//! checked by `pcmail_core::job::check_args` before anything here sees them.

use pcmail_core::job::placeholders;
use pcmail_local::jobconf::{ArgConfig, CommandConfig, JobsConfig};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Placeholders every template may use besides the command's arguments.
pub const BUILTINS: &[&str] = &["command", "subject", "ts", "job", "input", "log"];

/// Where a chunked command's current input goes in its argv until the run
/// fills it in (arguments can hold no control character, so no value is it).
pub const INPUT_SLOT: &str = "\u{1}input\u{1}";

/// Where the path of the job's own output (its run log) goes in a verify or
/// read-back argv until the run fills it in: `{log}` lets a verify step check
/// what the command printed (`grep "test result: ok" {log}`).
pub const LOG_SLOT: &str = "\u{1}log\u{1}";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("[jobs] {0}")]
pub struct JobsConfigError(pub String);

fn err(s: impl Into<String>) -> JobsConfigError {
    JobsConfigError(s.into())
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

/// The checks of a command that only this PC can make, and its published spec.
pub trait CommandRules {
    /// Whether a value of `a` may start with `-` (published as `allowDash`,
    /// checked by core's `check_not_an_option` everywhere): the owner said
    /// so, or every placeholder of it in argv, verify and read-back comes
    /// after the declared `options_end` element of that template.
    fn dash_allowed(&self, a: &ArgConfig) -> bool;
    /// What this PC's owner wrote, checked for what only the PC knows
    /// (placeholders, checkouts); the spec itself is checked by core.
    fn check(&self, checkouts: &BTreeMap<String, PathBuf>) -> Result<(), JobsConfigError>;
    /// The command as the poll publishes it (the contract's CommandSpec).
    fn spec_json(&self, checkouts: &BTreeMap<String, PathBuf>) -> Value;
}

/// `[jobs]` as a whole: its commands checked, and a job made concrete.
pub trait JobsRules {
    fn command(&self, name: &str) -> Option<&CommandConfig>;
    /// Every command checked; the first problem found.
    fn check(&self) -> Result<(), JobsConfigError>;
    /// The argv, directory and artifacts of a job whose `args` core has
    /// checked against this command's spec. Each value goes into the argv
    /// elements that name it and nowhere else; a `checkout` argument becomes
    /// its directory in argv, its name elsewhere. An element that is only
    /// `{arg}` of an optional argument not given is left out.
    fn plan(
        &self,
        command: &str,
        args: &BTreeMap<String, Value>,
        job_id: &str,
        ts: i64,
    ) -> Result<Plan, JobsConfigError>;
}

fn arg<'a>(c: &'a CommandConfig, name: &str) -> Option<&'a ArgConfig> {
    c.args.iter().find(|a| a.name == name)
}

impl CommandRules for CommandConfig {
    fn dash_allowed(&self, a: &ArgConfig) -> bool {
        if !matches!(a.kind.as_str(), "string" | "path") {
            return false;
        }
        if a.allow_dash {
            return true;
        }
        let Some(end) = &self.options_end else { return false };
        let templates = std::iter::once(&self.argv).chain(self.verify.iter()).chain(self.read_back.iter());
        let mut used = false;
        for t in templates {
            let after = t.iter().position(|e| e == end);
            for (i, el) in t.iter().enumerate() {
                if placeholders(el).contains(&a.name.as_str()) {
                    used = true;
                    if after.is_none_or(|end_at| i <= end_at) {
                        return false;
                    }
                }
            }
        }
        used
    }

    fn check(&self, checkouts: &BTreeMap<String, PathBuf>) -> Result<(), JobsConfigError> {
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
        let known = |p: &str| BUILTINS.contains(&p) || arg(self, p).is_some();
        let templates = self.argv.iter().chain(self.verify.iter().flatten()).chain(self.read_back.iter().flatten());
        for t in templates {
            if let Some(p) = placeholders(t).into_iter().find(|p| !known(p)) {
                return Err(err(format!("command {n}: {{{p}}} in {t:?} is not an argument of the command")));
            }
        }
        // Artifact names are made by core's one rule (`artifact_name`); each
        // must name what made it, or one job's files would answer another's.
        let arg_names: Vec<&str> = self.args.iter().map(|a| a.name.as_str()).collect();
        // The checkout argument the command runs in is named by where its files are.
        let cwd_arg = match cwd_source(self) {
            Some(CwdSource::Arg(a)) => Some(a),
            _ => None,
        };
        let to_pin: Vec<&str> = arg_names.iter().copied().filter(|a| cwd_arg.as_deref() != Some(*a)).collect();
        for t in &self.artifacts {
            if let Err(m) = pcmail_core::job::check_artifact_pattern(t, &arg_names) {
                return Err(err(format!("command {n}: artifact {t:?}: {m}")));
            }
            if !self.read_only && !pcmail_core::job::artifact_pins_identity(t, &to_pin, self.subject.as_deref()) {
                return Err(err(format!(
                    "command {n}: artifact {t:?} does not say which arguments made it: add {{args}} \
                     (a short hash of all of them) or name each argument ({})",
                    to_pin.iter().map(|a| format!("{{{a}}}")).collect::<Vec<_>>().join(", ")
                )));
            }
        }
        for a in &self.args {
            if a.allow_dash && !matches!(a.kind.as_str(), "string" | "path") {
                return Err(err(format!("command {n}: allow_dash is only for string and path arguments ({})", a.name)));
            }
        }
        if let Some(end) = &self.options_end {
            if !self.argv.iter().any(|e| e == end) {
                return Err(err(format!("command {n}: options_end {end:?} is not an element of its argv")));
            }
        }
        for a in &self.artifacts {
            if a.starts_with('/') || a.starts_with('\\') || a.contains(':') || a.split(['/', '\\']).any(|s| s == "..") {
                return Err(err(format!("command {n}: artifact {a:?} must be relative to the checkout, without `..`")));
            }
        }
        if let Some(s) = &self.subject {
            if arg(self, s).is_none() {
                return Err(err(format!("command {n}: subject {s:?} is not an argument of the command")));
            }
        }
        match cwd_source(self) {
            None => {
                return Err(err(format!(
                    "command {n}: no checkout to run in (set cwd, or give it a checkout argument)"
                )))
            }
            Some(CwdSource::Arg(a)) => match arg(self, &a) {
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
        if self.argv.iter().any(|a| placeholders(a).contains(&"log")) {
            return Err(err(format!("command {n}: {{log}} (the job's own output) is only for verify and read_back")));
        }
        if self.time_limit_secs == 0 || self.time_limit_secs > 24 * 3600 {
            return Err(err(format!("command {n}: time_limit_secs must be 1 … 86400")));
        }
        Ok(())
    }

    fn spec_json(&self, checkouts: &BTreeMap<String, PathBuf>) -> Value {
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
                if self.dash_allowed(a) {
                    v["allowDash"] = json!(true);
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

/// The checkout the command runs in: an argument (`{name}`) or a fixed checkout name.
fn cwd_source(c: &CommandConfig) -> Option<CwdSource> {
    match c.cwd.as_deref() {
        Some(c) => match c.strip_prefix('{').and_then(|c| c.strip_suffix('}')) {
            Some(arg) => Some(CwdSource::Arg(arg.to_string())),
            None => Some(CwdSource::Fixed(c.to_string())),
        },
        None => c.args.iter().find(|a| a.kind == "checkout").map(|a| CwdSource::Arg(a.name.clone())),
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
    /// How long an earlier job's artifacts answer this one (`reuse_within_secs`).
    pub reuse_within_ms: i64,
}

impl Plan {
    /// "Already made": the artifacts an earlier job with this job's
    /// identity (command and every argument, see `artifact_pins_identity`)
    /// left in the checkout, when core's one rule (`reusable`) says they
    /// still answer it: every pattern has a file made within the reuse
    /// window and not before the checkout's HEAD commit. None: run it.
    /// Used before a first run, a `--rerun-of` and a retry of a job whose
    /// executor stopped.
    pub fn already_made(&self, now: i64) -> Option<Vec<String>> {
        let found: Vec<Vec<pcmail_core::job::FoundArtifact>> = self
            .artifact_patterns
            .iter()
            .map(|p| {
                find_artifacts(&self.cwd, p)
                    .into_iter()
                    .filter_map(|name| {
                        let modified = modified_ms(&self.cwd.join(&name))?;
                        Some(pcmail_core::job::FoundArtifact { name, modified })
                    })
                    .collect()
            })
            .collect();
        let rule =
            pcmail_core::job::ReuseRule { within_ms: self.reuse_within_ms, not_before: head_commit_ms(&self.cwd) };
        pcmail_core::job::reusable(&found, rule, now)
    }
}

fn modified_ms(p: &Path) -> Option<i64> {
    let t = std::fs::symlink_metadata(p).ok()?.modified().ok()?;
    Some(match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_millis() as i64,
        Err(e) => -(e.duration().as_millis() as i64),
    })
}

/// The commit time of `dir`'s HEAD (ms), when `dir` is in a git work tree.
pub fn head_commit_ms(dir: &Path) -> Option<i64> {
    let out = std::process::Command::new("git")
        .args(["log", "-1", "--format=%ct", "HEAD"])
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout).trim().parse::<i64>().ok().map(|s| s * 1000)
}

/// A `path` argument resolved inside its checkout: every part of it that
/// exists is followed (symlinks included) and must stay inside `base`; a
/// symlink whose target is missing is refused (writing through it would
/// create a file wherever it points). The relative text itself was checked
/// by core (`check_relative_path`: no `..`, not absolute).
pub fn resolve_inside(base: &Path, rel: &str) -> Result<PathBuf, String> {
    let root = std::fs::canonicalize(base).map_err(|e| format!("the checkout {}: {e}", base.display()))?;
    let mut p = root.clone();
    for part in rel.split('/').filter(|s| !s.is_empty() && *s != ".") {
        p.push(part);
        match std::fs::symlink_metadata(&p) {
            Err(_) => break,
            Ok(m) => {
                let real = std::fs::canonicalize(&p).map_err(|_| {
                    if m.file_type().is_symlink() {
                        format!("{rel}: {part} is a symlink to nothing (it could make a file outside the checkout)")
                    } else {
                        format!("{rel}: cannot resolve {part}")
                    }
                })?;
                if !real.starts_with(&root) {
                    return Err(format!("{rel} leads out of the checkout through a symlink ({part})"));
                }
            }
        }
    }
    Ok(root.join(rel))
}

/// The text of a checked argument value inside an argv element.
pub fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

impl JobsRules for JobsConfig {
    fn command(&self, name: &str) -> Option<&CommandConfig> {
        self.commands.iter().find(|c| c.name == name)
    }

    fn check(&self) -> Result<(), JobsConfigError> {
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

    fn plan(
        &self,
        command: &str,
        args: &BTreeMap<String, Value>,
        job_id: &str,
        ts: i64,
    ) -> Result<Plan, JobsConfigError> {
        let c = self.command(command).ok_or_else(|| err(format!("command {command} is not configured here")))?;
        let subject = c.subject.as_ref().and_then(|s| args.get(s)).map(value_text).unwrap_or_default();
        let typed: BTreeMap<String, pcmail_core::job::ArgValue> =
            args.iter().filter_map(|(k, v)| serde_json::from_value(v.clone()).ok().map(|t| (k.clone(), t))).collect();
        let mut names: BTreeMap<String, String> = BTreeMap::new();
        names.insert("command".into(), c.name.clone());
        names.insert("subject".into(), subject.clone());
        names.insert("ts".into(), ts.to_string());
        names.insert("job".into(), job_id.to_string());
        let mut in_argv = names.clone();
        in_argv.insert("input".into(), INPUT_SLOT.into());
        in_argv.insert("log".into(), LOG_SLOT.into());
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
        let cwd = match cwd_source(c) {
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
        // Path arguments never lead out of the checkout, symlinks included.
        for a in c.args.iter().filter(|a| a.kind == "path") {
            if let Some(v) = args.get(&a.name) {
                resolve_inside(&cwd, &value_text(v)).map_err(|m| err(format!("argument {}: {m}", a.name)))?;
            }
        }
        if let Some(dir) = c.inputs.as_deref().filter(|_| c.chunked) {
            resolve_inside(&cwd, dir).map_err(|m| err(format!("inputs: {m}")))?;
        }
        // `{ts}` kept as the wildcard of the search for earlier runs' artifacts
        // (a made-safe value never contains a brace).
        let name = |a: &String, ts_text: &str| pcmail_core::job::artifact_name(a, &c.name, &subject, &typed, ts_text);
        let artifact_patterns: Vec<String> = c.artifacts.iter().map(|a| name(a, "{ts}")).collect();
        let artifacts: Vec<String> = c.artifacts.iter().map(|a| name(a, &ts.to_string())).collect();
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
            reuse_within_ms: c
                .reuse_within_secs
                .map(|x| x.min(i64::MAX as u64 / 1000) as i64 * 1000)
                .unwrap_or(pcmail_core::job::REUSE_WITHIN_DEFAULT_MS),
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
artifacts = ["target/pcmail/{command}-{subject}-{crate}-{args}-{ts}.log"]
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
        let id = pcmail_core::job::reuse_identity(
            "test",
            &[("checkout", "app"), ("crate", "a b; rm -rf / $(x)")]
                .iter()
                .map(|(k, v)| (k.to_string(), pcmail_core::job::ArgValue::Str(v.to_string())))
                .collect(),
        );
        assert_eq!(p.artifacts, [format!("target/pcmail/test-app-a%20b%3B%20rm%20-rf%20%2F%20%24%28x%29-{id}-42.log")]);
        assert!(p.artifact_patterns[0].ends_with(&format!("-{id}-{{ts}}.log")), "{:?}", p.artifact_patterns);
        assert_eq!(p.verify.unwrap()[3], "target/pcmail/test-app-42.log");
    }

    #[test]
    fn a_subject_never_adds_a_directory_to_an_artifact() {
        let mut c = cfg();
        c.commands[0].subject = Some("crate".into());
        c.commands[0].artifacts = vec!["out/{subject}-{filter}-{ts}.log".into()];
        c.check().unwrap();
        let p = c.plan("test", &args(&[("checkout", "app"), ("crate", "../../etc/x")]), "j", 1).unwrap();
        assert_eq!(p.artifacts, ["out/..%2F..%2Fetc%2Fx--1.log"]);
        assert!(p.artifacts.iter().all(|a| is_inside(a)));
    }

    #[test]
    fn an_artifact_must_say_which_arguments_made_it() {
        let mut c = cfg();
        // The target of a build is not in the name: another target's file would answer it.
        c.commands[0].artifacts = vec!["out/{command}-{subject}-{ts}.log".into()];
        let e = c.check().unwrap_err().0;
        assert!(e.contains("does not say which arguments made it") && e.contains("{args}"), "{e}");
        c.commands[0].artifacts = vec!["out/{subject}-{crate}-{filter}-{ts}.log".into()];
        c.check().unwrap();
        c.commands[0].artifacts = vec!["out/{nope}.log".into()];
        assert!(c.check().unwrap_err().0.contains("{nope}"));
        // A probe makes nothing to reuse.
        let mut c = cfg();
        c.commands[0].artifacts = vec!["out/{command}.log".into()];
        c.commands[0].read_only = true;
        c.check().unwrap();
    }

    #[test]
    fn reuse_answers_only_the_same_arguments_while_fresh() {
        let d = tempfile::tempdir().unwrap();
        let mut c = cfg();
        c.checkouts.insert("app".into(), d.path().to_path_buf());
        c.commands[0].artifacts = vec!["out/{command}-{subject}-{crate}-{filter}-{ts}.txt".into()];
        c.commands[0].reuse_within_secs = Some(3600);
        c.check().unwrap();
        let plan =
            |krate: &str, ts: i64| c.plan("test", &args(&[("checkout", "app"), ("crate", krate)]), "j", ts).unwrap();
        let core = plan("core", 1);
        std::fs::create_dir_all(d.path().join("out")).unwrap();
        std::fs::write(d.path().join(&core.artifacts[0]), "made").unwrap();
        let now = modified_ms(&d.path().join(&core.artifacts[0])).unwrap();
        assert_eq!(plan("core", 2).already_made(now), Some(core.artifacts.clone()));
        assert_eq!(plan("server", 2).already_made(now), None, "another argument: run it");
        assert_eq!(plan("core", 2).already_made(now + 3_600_001), None, "past the window: run it");
        let mut zero = plan("core", 2);
        zero.reuse_within_ms = 0;
        assert_eq!(zero.already_made(now), None);
    }

    #[cfg(unix)]
    #[test]
    fn path_arguments_never_lead_out_of_the_checkout() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::fs::create_dir(d.path().join("src")).unwrap();
        std::fs::write(d.path().join("src/a.rs"), "a").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), d.path().join("host")).unwrap();
        std::os::unix::fs::symlink(outside.path(), d.path().join("out")).unwrap();
        std::os::unix::fs::symlink(d.path().join("no-such"), d.path().join("dangling")).unwrap();
        std::os::unix::fs::symlink("src", d.path().join("inner")).unwrap();
        for ok in ["src/a.rs", "src/new.rs", "inner/a.rs", "./src"] {
            assert!(resolve_inside(d.path(), ok).is_ok(), "{ok}");
        }
        for bad in ["host", "out/secret", "out/new", "dangling"] {
            let e = resolve_inside(d.path(), bad).unwrap_err();
            assert!(e.contains(bad.split('/').next().unwrap()), "{bad}: {e}");
        }
        // Through plan: the executor refuses it before building the argv.
        let mut c = cfg();
        c.checkouts.insert("app".into(), d.path().to_path_buf());
        c.commands[0].args[2].kind = "path".into();
        let e = c.plan("test", &args(&[("checkout", "app"), ("crate", "x"), ("filter", "host")]), "j", 1).unwrap_err();
        assert!(e.0.contains("out of the checkout"), "{}", e.0);
    }

    #[test]
    fn a_dash_is_allowed_by_the_owner_or_after_a_declared_options_end() {
        let mut c = cfg();
        let filter = c.commands[0].args[2].clone();
        // `cargo test -- {filter}`: the test binary reads options after `--`; nothing declared.
        assert!(!c.commands[0].dash_allowed(&filter));
        assert!(c.commands[0].spec_json(&c.checkouts)["args"][2].get("allowDash").is_none());
        c.commands[0].options_end = Some("--".into());
        c.check().unwrap();
        assert!(c.commands[0].dash_allowed(&filter));
        assert_eq!(c.commands[0].spec_json(&c.checkouts)["args"][2]["allowDash"], json!(true));
        // {crate} comes before it: still refused.
        assert!(!c.commands[0].dash_allowed(&c.commands[0].args[1].clone()));
        // Used in verify before its own `--` too: refused.
        c.commands[0].verify = Some(vec!["grep".into(), "{filter}".into()]);
        assert!(!c.commands[0].dash_allowed(&filter));
        c.commands[0].options_end = Some("---".into());
        assert!(c.check().unwrap_err().0.contains("options_end"));
        let mut c = cfg();
        c.commands[0].args[1].allow_dash = true;
        assert!(c.commands[0].dash_allowed(&c.commands[0].args[1].clone()));
        c.commands[0].args[0].allow_dash = true;
        assert!(c.check().unwrap_err().0.contains("allow_dash"));
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
        assert!(c.check().unwrap_err().0.contains(".."));
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
