//! What `tools/list` says about each tool, in one table: the group that loads
//! it, its MCP annotations and the shape of its structured result.
//!
//! An agent pays for every tool definition in every session that loads it, so
//! `pcmail mcp` loads only the [`Group::Default`] tools unless `--tools` asks
//! for more. The default set is what a working session uses all day: its mail
//! (send, inbox, read, reply, ack, and wait_for to wait for an answer), the
//! leases that keep two sessions off the same files (claim, release, list),
//! who else is working, and handoffs (write one, pick one up). The rest is
//! rarer or for one person on the team: the mail timeline and the roster
//! (`mail`), names and lease checks/takeovers (`sessions`), the other handoff
//! tools (`handoffs`), `memory`, `jobs`, the code `map`, and `admin` (roster
//! changes and credentials), which never loads by default.
//!
//! The annotations are the tool's truth, not a wish: read-only means nothing
//! changes anywhere (a cache refresh aside); destructive means it can undo or
//! take away something (remove a PC, take over a lease, revoke a credential);
//! idempotent means a repeat with the same arguments changes nothing more.
//! No tool reaches past the user's own server and PCs, so none is open-world.
//!
//! Output schemas describe the top level of a result (its required keys and
//! their JSON types, or the `error` object of a failed call): short, because
//! they are paid for in the same budget, and exact enough for a client to
//! validate every result against.

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{JsonObject, ToolAnnotations};
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;
use std::sync::Arc;

/// A set of tools loaded together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Group {
    Default,
    Mail,
    Sessions,
    Handoffs,
    Memory,
    Jobs,
    Map,
    Admin,
}

impl Group {
    /// Every opt-in group, in the order `--help` names them.
    pub const OPT_IN: [Group; 7] =
        [Group::Mail, Group::Sessions, Group::Handoffs, Group::Memory, Group::Jobs, Group::Map, Group::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Group::Default => "default",
            Group::Mail => "mail",
            Group::Sessions => "sessions",
            Group::Handoffs => "handoffs",
            Group::Memory => "memory",
            Group::Jobs => "jobs",
            Group::Map => "map",
            Group::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Option<Group> {
        std::iter::once(Group::Default).chain(Group::OPT_IN).find(|g| g.as_str() == s)
    }
}

/// Which groups a `pcmail mcp` loads: always [`Group::Default`], plus the
/// ones `--tools` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    groups: BTreeSet<Group>,
}

impl Default for Profile {
    fn default() -> Self {
        Profile { groups: BTreeSet::from([Group::Default]) }
    }
}

impl Profile {
    /// Every tool.
    pub fn all() -> Profile {
        Profile { groups: std::iter::once(Group::Default).chain(Group::OPT_IN).collect() }
    }

    /// `--tools` as a user writes it: groups separated by commas (spaces
    /// allowed), or `all`. The default tools are always in.
    pub fn parse(spec: &str) -> Result<Profile, String> {
        let mut p = Profile::default();
        for word in spec.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            if word == "all" {
                p = Profile::all();
                continue;
            }
            match Group::parse(word) {
                Some(g) => {
                    p.groups.insert(g);
                }
                None => {
                    let names: Vec<&str> = Group::OPT_IN.iter().map(|g| g.as_str()).collect();
                    return Err(format!(
                        "unknown tool group `{word}` (expected all, or some of: {})",
                        names.join(", ")
                    ));
                }
            }
        }
        Ok(p)
    }

    pub fn includes(&self, g: Group) -> bool {
        self.groups.contains(&g)
    }

    /// The opt-in groups, as `--tools` takes them back (`None`: the default alone).
    pub fn to_arg(&self) -> Option<String> {
        let extra: Vec<&str> = Group::OPT_IN.iter().filter(|g| self.includes(**g)).map(|g| g.as_str()).collect();
        (!extra.is_empty()).then(|| extra.join(","))
    }
}

/// One tool's entry.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    pub name: &'static str,
    pub group: Group,
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    /// The result's required top-level keys and their JSON types.
    pub output: &'static [(&'static str, &'static str)],
}

const fn reads(name: &'static str, group: Group, output: &'static [(&'static str, &'static str)]) -> Spec {
    Spec { name, group, read_only: true, destructive: false, idempotent: true, output }
}

const fn writes(
    name: &'static str,
    group: Group,
    destructive: bool,
    idempotent: bool,
    output: &'static [(&'static str, &'static str)],
) -> Spec {
    Spec { name, group, read_only: false, destructive, idempotent, output }
}

use Group::{Admin, Handoffs, Jobs, Mail, Memory, Sessions};

const MARKED: &[(&str, &str)] = &[("id", "string"), ("state", "string"), ("pendingMarks", "integer")];
const SENT: &[(&str, &str)] = &[("ids", "array"), ("queued", "boolean"), ("existing", "boolean")];
const MAILS: &[(&str, &str)] = &[("mails", "array")];
const SHOWN: &[(&str, &str)] = &[("name", "string"), ("path", "string"), ("text", "string")];
const LEASE: &[(&str, &str)] = &[("outcome", "string")];
const JOB: &[(&str, &str)] = &[("job", "object")];
const MAP: &[(&str, &str)] = &[("repo", "string"), ("files", "integer")];
const ANY: &[(&str, &str)] = &[];

/// Every tool, in the order of `tools/list` within a group.
pub const TOOLS: &[Spec] = &[
    writes("send", Group::Default, false, false, SENT),
    reads("inbox", Group::Default, MAILS),
    writes("read", Group::Default, false, true, &[("id", "string"), ("body", "string")]),
    writes("reply", Group::Default, false, true, SENT),
    writes("ack", Group::Default, false, true, MARKED),
    reads("wait_for", Group::Default, MAILS),
    writes("lease_claim", Group::Default, false, false, LEASE),
    writes("lease_release", Group::Default, false, true, &[("released", "array")]),
    reads("lease_list", Group::Default, &[("leases", "array"), ("now", "integer")]),
    reads("who", Group::Default, &[("sessions", "array"), ("idleNames", "array")]),
    writes("handoff_new", Group::Default, false, false, &[("name", "string"), ("path", "string")]),
    writes("handoff_pickup", Group::Default, false, false, SHOWN),
    writes("fail", Mail, false, true, MARKED),
    reads("status", Mail, &[("mails", "array"), ("missing", "array")]),
    reads("sent", Mail, MAILS),
    reads("roster", Mail, &[("pcs", "array"), ("me", "string")]),
    writes("sync", Mail, false, true, ANY),
    writes("name", Sessions, false, true, &[("name", "string"), ("changed", "boolean")]),
    reads("lease_check", Sessions, &[("current", "boolean")]),
    writes("lease_takeover", Sessions, true, false, LEASE),
    reads("handoff_list", Handoffs, &[("repo", "string"), ("handoffs", "array")]),
    reads("handoff_show", Handoffs, SHOWN),
    writes("handoff_close", Handoffs, false, false, SHOWN),
    writes("handoff_rollup", Handoffs, false, false, &[("name", "string"), ("path", "string"), ("covers", "array")]),
    writes("memory_add", Memory, false, false, &[("topic", "string"), ("path", "string")]),
    reads("memory_show", Memory, &[("repo", "string"), ("entries", "array")]),
    reads("memory_search", Memory, &[("repo", "string"), ("entries", "array")]),
    writes("job_run", Jobs, true, false, &[("deduped", "boolean"), ("job", "object")]),
    reads("job_status", Jobs, JOB),
    reads("job_list", Jobs, &[("jobs", "array")]),
    writes("job_cancel", Jobs, true, true, JOB),
    writes("map", Group::Map, false, true, MAP),
    reads("map_check", Group::Map, MAP),
    writes("roster_add", Admin, true, true, ANY),
    writes("roster_remove", Admin, true, true, ANY),
    reads("alerts", Admin, &[("alerts", "array")]),
    writes("roster_enrol", Admin, false, false, ANY),
    writes("roster_revoke", Admin, true, true, ANY),
    reads("roster_log", Admin, &[("entries", "array")]),
    writes("roster_require_credentials", Admin, true, true, &[("requireCredentials", "boolean"), ("unbound", "array")]),
    writes("token_rotate", Admin, true, false, &[("rotated", "boolean")]),
];

pub fn spec(name: &str) -> Option<&'static Spec> {
    TOOLS.iter().find(|s| s.name == name)
}

impl Spec {
    pub fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::from_raw(
            None,
            Some(self.read_only),
            Some(self.destructive),
            Some(self.idempotent),
            Some(false),
        )
    }

    /// `{"type": "object", "properties": {k: {"type": t}…, "error": …},
    /// "anyOf": [{"required": [k…]}, {"required": ["error"]}]}`: the result's
    /// keys, or the `{error: {code, exit, message}}` of a failed call (some
    /// clients check an error result against the schema too).
    pub fn output_schema(&self) -> JsonObject {
        let mut s = Map::new();
        s.insert("type".into(), json!("object"));
        if !self.output.is_empty() {
            let mut props = Map::new();
            for (k, t) in self.output {
                props.insert((*k).into(), json!({ "type": t }));
            }
            props.insert("error".into(), json!({"type": "object"}));
            s.insert("properties".into(), Value::Object(props));
            let keys: Vec<&str> = self.output.iter().map(|(k, _)| *k).collect();
            s.insert("anyOf".into(), json!([{ "required": keys }, { "required": ["error"] }]));
        }
        s
    }
}

/// The `format` values JSON Schema defines (draft 2020-12, §7.3). Anything
/// else (schemars writes `uint`, `int64`, `double`…) is dropped: strict
/// clients warn about it on every run.
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Puts each `$defs` entry where its `$ref` stands (keeping the description
/// written there) and drops `$defs`: one level fewer for a client to follow,
/// and shorter when, as here, each definition is used by one property.
pub fn inline_defs(schema: &mut Value) {
    let Some(Value::Object(defs)) = schema.as_object_mut().and_then(|m| m.remove("$defs")) else { return };
    fn walk(v: &mut Value, defs: &Map<String, Value>) {
        match v {
            Value::Object(m) => {
                let target = m.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/$defs/"));
                if let Some(Value::Object(def)) = target.and_then(|name| defs.get(name)) {
                    m.remove("$ref");
                    for (k, dv) in def {
                        m.entry(k.clone()).or_insert_with(|| dv.clone());
                    }
                }
                m.values_mut().for_each(|x| walk(x, defs));
            }
            Value::Array(a) => a.iter_mut().for_each(|x| walk(x, defs)),
            _ => {}
        }
    }
    walk(schema, &defs);
}

/// Removes every non-standard `format` from a schema, at any depth.
pub fn strip_formats(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if m.get("format").and_then(Value::as_str).is_some_and(|f| !STANDARD_FORMATS.contains(&f)) {
                m.remove("format");
            }
            m.values_mut().for_each(strip_formats);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_formats),
        _ => {}
    }
}

/// What a client gains nothing from, removed to keep the list short: the
/// `$schema` line (MCP's default dialect is the one schemars writes), a
/// `default` of null, false, "" or [] (leaving the argument out says the
/// same), and a `oneOf`
/// of plain string constants, which says what one `enum` says.
pub fn compact(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("$schema");
            let empty = |d: &Value| match d {
                Value::Null => true,
                Value::Bool(b) => !b,
                Value::String(s) => s.is_empty(),
                Value::Array(a) => a.is_empty(),
                _ => false,
            };
            if m.get("default").is_some_and(empty) {
                m.remove("default");
            }
            let consts: Option<Vec<Value>> = m.get("oneOf").and_then(Value::as_array).and_then(|alts| {
                let mut out = vec![];
                for a in alts {
                    if a.get("type") != Some(&json!("string")) {
                        return None;
                    }
                    if let Some(c) = a.get("const") {
                        out.push(c.clone());
                    } else if let Some(Value::Array(e)) = a.get("enum") {
                        out.extend(e.iter().cloned());
                    } else {
                        return None;
                    }
                }
                Some(out)
            });
            if let Some(values) = consts {
                m.remove("oneOf");
                m.insert("type".into(), json!("string"));
                m.insert("enum".into(), Value::Array(values));
            }
            m.values_mut().for_each(compact);
        }
        Value::Array(a) => a.iter_mut().for_each(compact),
        _ => {}
    }
}

/// Keeps the routes `profile` loads and writes each one's annotations,
/// output schema and portable input schema. Panics on a tool without an entry
/// (a test lists them all).
pub fn apply<S>(router: &mut ToolRouter<S>, profile: &Profile) {
    router.map.retain(|name, _| spec(name).is_some_and(|s| profile.includes(s.group)));
    for (name, route) in router.map.iter_mut() {
        let s = spec(name).expect("retained above");
        route.attr.annotations = Some(s.annotations());
        route.attr.output_schema = Some(Arc::new(s.output_schema()));
        let mut input = Value::Object((*route.attr.input_schema).clone());
        strip_formats(&mut input);
        inline_defs(&mut input);
        compact(&mut input);
        if let Value::Object(m) = input {
            route.attr.input_schema = Arc::new(m);
        }
    }
}
