//! What `tools/list` costs an agent: the default profile within 12 tools and
//! 10,000 characters (everything it returns, output schemas included), the
//! groups opt-in, every tool annotated and described portably.

use pcmail_mcp::catalog::{self, Group, Profile};
use pcmail_mcp::{tool_names, tools_list_json};
use serde_json::Value;

#[test]
fn the_default_profile_is_at_most_12_tools_and_10000_characters() {
    let list = tools_list_json(&Profile::default());
    let chars = serde_json::to_string(&list).unwrap().chars().count();
    let tools = list["tools"].as_array().unwrap();
    println!("default profile: {} tools, {chars} characters of tools/list", tools.len());
    assert!(tools.len() <= 12, "{} tools", tools.len());
    assert!(chars <= 10_000, "{chars} characters");
    let all = tools_list_json(&Profile::all());
    println!(
        "all tools: {} tools, {} characters",
        all["tools"].as_array().unwrap().len(),
        serde_json::to_string(&all).unwrap().chars().count()
    );
}

#[test]
fn every_tool_has_one_catalog_entry_and_admin_is_never_in_the_default() {
    let names = tool_names(&Profile::all());
    let mut listed: Vec<&str> = catalog::TOOLS.iter().map(|s| s.name).collect();
    listed.sort();
    assert_eq!(names, listed, "the catalog names every tool once, and nothing else");
    let default = tool_names(&Profile::default());
    for s in catalog::TOOLS {
        assert_eq!(default.contains(&s.name.to_string()), s.group == Group::Default, "{}", s.name);
    }
    assert!(catalog::TOOLS.iter().filter(|s| s.group == Group::Admin).all(|s| !default.contains(&s.name.to_string())));
    let with_jobs = tool_names(&Profile::parse("jobs, memory").unwrap());
    assert!(with_jobs.contains(&"job_run".to_string()) && with_jobs.contains(&"memory_add".to_string()));
    assert!(with_jobs.contains(&"send".to_string()), "the default tools stay");
    assert!(!with_jobs.contains(&"token_rotate".to_string()));
    let e = Profile::parse("jobs,adm").unwrap_err();
    assert!(e.contains("`adm`") && e.contains("admin"), "{e}");
    assert_eq!(Profile::parse("map,admin").unwrap().to_arg().as_deref(), Some("map,admin"));
    assert_eq!(Profile::default().to_arg(), None);
}

#[test]
fn every_tool_declares_all_four_annotations_and_an_object_output_schema() {
    let list = tools_list_json(&Profile::all());
    for t in list["tools"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        let a = &t["annotations"];
        for k in ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"] {
            assert!(a[k].is_boolean(), "{name}: {k} missing in {a}");
        }
        assert!(!(a["readOnlyHint"] == true && a["destructiveHint"] == true), "{name}: read-only and destructive");
        assert_eq!(t["outputSchema"]["type"], "object", "{name}");
    }
    // The ones an agent may run without asking are the ones that change nothing.
    let ro: Vec<&str> = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["annotations"]["readOnlyHint"] == true)
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for name in ["inbox", "lease_list", "who", "status", "roster", "wait_for"] {
        assert!(ro.contains(&name), "{name} is read-only");
    }
    for name in ["send", "read", "ack", "reply", "lease_claim", "sync", "map", "token_rotate"] {
        assert!(!ro.contains(&name), "{name} changes something");
    }
}

fn formats(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(f)) = m.get("format") {
                out.push(f.clone());
            }
            m.values().for_each(|x| formats(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| formats(x, out)),
        _ => {}
    }
}

#[test]
fn no_schema_carries_a_format_json_schema_does_not_define() {
    let list = tools_list_json(&Profile::all());
    let mut found = vec![];
    formats(&list, &mut found);
    assert!(found.is_empty(), "non-standard formats: {found:?}");
    // What schemars writes, and what stays.
    let mut v = serde_json::json!({"a": {"type": "integer", "format": "uint", "minimum": 0},
        "b": [{"format": "date-time"}, {"format": "int64"}]});
    catalog::strip_formats(&mut v);
    assert_eq!(v, serde_json::json!({"a": {"type": "integer", "minimum": 0}, "b": [{"format": "date-time"}, {}]}));
}
