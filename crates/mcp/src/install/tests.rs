use super::*;

fn target(dir: &Path, agent: Agent, scope: Scope) -> Target {
    let home = dir.join("home");
    let project = dir.join("project");
    fs::create_dir_all(&home).unwrap();
    fs::create_dir_all(&project).unwrap();
    Target {
        agent,
        scope,
        exe: PathBuf::from("/opt/pc mail/bin/pcmail"),
        home,
        project,
        codex_home: None,
        claude: None,
        pcmail_home: None,
        credential_vars: vec![],
        tools: None,
    }
}

fn file_outcome(o: Outcome) -> (PathBuf, bool, Option<PathBuf>) {
    match o {
        Outcome::File { path, changed, backup } => (path, changed, backup),
        other => panic!("expected a file, got {other:?}"),
    }
}

#[test]
fn codex_config_is_merged_kept_idempotent_and_reversible() {
    let dir = tempfile::tempdir().unwrap();
    let t = target(dir.path(), Agent::Codex, Scope::User);
    let path = t.home.join(".codex/config.toml");
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let original =
        "# my settings\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"other-mcp\" # keep me\nargs = []\n";
    fs::write(&path, original).unwrap();

    let (p, changed, backup) = file_outcome(install(&t).unwrap());
    assert_eq!(p, path);
    assert!(changed);
    assert_eq!(fs::read_to_string(backup.unwrap()).unwrap(), original, "backup holds the old file");
    let text = fs::read_to_string(&path).unwrap();
    let v: toml::Value = toml::from_str(&text).unwrap();
    assert_eq!(v["mcp_servers"]["pcmail"]["command"].as_str(), Some("/opt/pc mail/bin/pcmail"));
    assert_eq!(v["mcp_servers"]["pcmail"]["args"], toml::Value::Array(vec!["mcp".into()]));
    assert_eq!(v["mcp_servers"]["other"]["command"].as_str(), Some("other-mcp"));
    assert_eq!(v["model"].as_str(), Some("o3"));
    assert!(text.contains("# my settings") && text.contains("# keep me"), "comments kept:\n{text}");

    let (_, again, backup2) = file_outcome(install(&t).unwrap());
    assert!(!again && backup2.is_none(), "second install writes nothing");
    assert_eq!(fs::read_to_string(&path).unwrap(), text);

    let (_, removed, _) = file_outcome(uninstall(&t).unwrap());
    assert!(removed);
    assert_eq!(fs::read_to_string(&path).unwrap(), original, "uninstall gives the file back");
    let (_, removed_again, _) = file_outcome(uninstall(&t).unwrap());
    assert!(!removed_again);
}

#[test]
fn codex_home_is_honoured_and_project_scope_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = target(dir.path(), Agent::Codex, Scope::User);
    t.codex_home = Some(dir.path().join("codexhome"));
    let (p, changed, backup) = file_outcome(install(&t).unwrap());
    assert_eq!(p, dir.path().join("codexhome/config.toml"));
    assert!(changed && backup.is_none(), "a new file has nothing to back up");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
    }
    // Removing the only server leaves an empty file, as before there was none.
    file_outcome(uninstall(&t).unwrap());
    assert_eq!(fs::read_to_string(&p).unwrap().trim(), "");
    t.scope = Scope::Project;
    assert!(install(&t).unwrap_err().is_usage());
}

#[test]
fn gemini_settings_are_merged_in_both_scopes_and_reversible() {
    let dir = tempfile::tempdir().unwrap();
    for scope in [Scope::User, Scope::Project] {
        let t = target(dir.path(), Agent::Gemini, scope);
        let path = match scope {
            Scope::User => t.home.join(".gemini/settings.json"),
            Scope::Project => t.project.join(".gemini/settings.json"),
        };
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let original = serde_json::json!({"theme": "Dracula", "mcpServers": {"other": {"command": "x"}}});
        fs::write(&path, original.to_string()).unwrap();
        let (p, changed, backup) = file_outcome(install(&t).unwrap());
        assert_eq!(p, path);
        assert!(changed && backup.is_some());
        let v: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        let command = if scope == Scope::Project { "pcmail" } else { "/opt/pc mail/bin/pcmail" };
        assert_eq!(v["mcpServers"]["pcmail"], serde_json::json!({"command": command, "args": ["mcp"]}));
        assert_eq!(v["mcpServers"]["other"]["command"], "x");
        assert_eq!(v["theme"], "Dracula");
        assert!(!file_outcome(install(&t).unwrap()).1, "idempotent");
        file_outcome(uninstall(&t).unwrap());
        let back: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(back, original);
    }
}

#[test]
fn a_file_that_is_not_json_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let t = target(dir.path(), Agent::Gemini, Scope::User);
    let path = t.home.join(".gemini/settings.json");
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, "{ not json").unwrap();
    let e = install(&t).unwrap_err();
    assert!(matches!(e, InstallError::Unreadable { .. }), "{e}");
    assert_eq!(fs::read_to_string(&path).unwrap(), "{ not json");
    assert_eq!(fs::read_dir(path.parent().unwrap()).unwrap().count(), 1, "no backup, no temp file");
}

#[test]
fn claude_without_claude_on_path_writes_mcp_json_for_a_project_and_says_what_to_run_for_the_user() {
    let dir = tempfile::tempdir().unwrap();
    let t = target(dir.path(), Agent::Claude, Scope::Project);
    let (p, changed, _) = file_outcome(install(&t).unwrap());
    assert_eq!(p, t.project.join(".mcp.json"));
    assert!(changed);
    let v: Value = serde_json::from_str(&fs::read_to_string(&p).unwrap()).unwrap();
    assert_eq!(v, serde_json::json!({"mcpServers": {"pcmail": {"command": "pcmail", "args": ["mcp"]}}}));
    file_outcome(uninstall(&t).unwrap());
    let v: Value = serde_json::from_str(&fs::read_to_string(&p).unwrap()).unwrap();
    assert_eq!(v, serde_json::json!({}));

    let t = target(dir.path(), Agent::Claude, Scope::User);
    let e = install(&t).unwrap_err();
    assert!(!e.is_usage());
    assert!(e.to_string().contains("claude mcp add --scope user pcmail -- '/opt/pc mail/bin/pcmail' mcp"), "{e}");
    assert!(!t.home.join(".claude.json").exists(), "never writes ~/.claude.json");
}

#[cfg(unix)]
#[test]
fn claude_on_path_is_asked_to_add_and_remove_the_server() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let mut t = target(dir.path(), Agent::Claude, Scope::User);
    // A stand-in for the claude CLI that records its arguments.
    let log = dir.path().join("claude.log");
    let script = dir.path().join("claude");
    fs::write(&script, format!("#!/bin/sh\necho \"$*\" >> '{}'\n", log.display())).unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    t.claude = Some(script);
    install(&t).unwrap();
    uninstall(&t).unwrap();
    let lines: Vec<String> = fs::read_to_string(&log).unwrap().lines().map(str::to_string).collect();
    assert_eq!(
        lines,
        [
            "mcp remove --scope user pcmail",
            "mcp add --scope user pcmail -- /opt/pc mail/bin/pcmail mcp",
            "mcp remove --scope user pcmail",
        ]
    );
    assert!(!t.home.join(".claude.json").exists());
}

#[test]
fn codex_gets_pcmail_home_by_value_the_credentials_by_name_and_the_tool_groups() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = target(dir.path(), Agent::Codex, Scope::User);
    t.pcmail_home = Some(PathBuf::from("/srv/pc store"));
    t.credential_vars = vec!["PCMAIL_TOKEN".into(), "PCMAIL_CREDENTIAL".into()];
    t.tools = Some("jobs,admin".into());
    let path = t.home.join(".codex/config.toml");
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, "[mcp_servers.pcmail]\ncommand = \"/old/pcmail\"\nenv = { KEEP = \"1\" }\n").unwrap();
    install(&t).unwrap();
    let text = fs::read_to_string(&path).unwrap();
    let v: toml::Value = toml::from_str(&text).unwrap();
    let e = &v["mcp_servers"]["pcmail"];
    assert_eq!(e["args"], toml::Value::Array(vec!["mcp".into(), "--tools".into(), "jobs,admin".into()]));
    assert_eq!(e["env"]["PCMAIL_HOME"].as_str(), Some("/srv/pc store"));
    assert_eq!(e["env"]["KEEP"].as_str(), Some("1"), "the user's own variables stay");
    assert_eq!(e["env_vars"], toml::Value::Array(vec!["PCMAIL_TOKEN".into(), "PCMAIL_CREDENTIAL".into()]));
    assert!(!text.contains("secret"), "no value of a credential is written");
    assert!(!file_outcome(install(&t).unwrap()).1, "unchanged: not rewritten");
    // Without PCMAIL_HOME and credentials in the environment, the entry loses them again.
    t.pcmail_home = None;
    t.credential_vars.clear();
    t.tools = None;
    install(&t).unwrap();
    let v: toml::Value = toml::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    let e = &v["mcp_servers"]["pcmail"];
    assert!(e["env"].get("PCMAIL_HOME").is_none() && e.get("env_vars").is_none(), "{e}");
    assert_eq!(e["env"]["KEEP"].as_str(), Some("1"));
    assert_eq!(e["args"], toml::Value::Array(vec!["mcp".into()]));
}

#[test]
fn gemini_settings_with_comments_are_accepted_and_keep_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = target(dir.path(), Agent::Gemini, Scope::User);
    t.pcmail_home = Some(PathBuf::from("/srv/pcmail"));
    t.credential_vars = vec!["PCMAIL_TOKEN".into()];
    let path = t.home.join(".gemini/settings.json");
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let original = "{\n  // my look\n  \"theme\": \"Dracula\",\n  \"mcpServers\": {\n    \"other\": { \"command\": \"x\" }, /* mine */\n  },\n}\n";
    fs::write(&path, original).unwrap();
    let (_, changed, backup) = file_outcome(install(&t).unwrap());
    assert!(changed && backup.is_some());
    let text = fs::read_to_string(&path).unwrap();
    assert!(text.contains("// my look") && text.contains("/* mine */"), "comments kept:\n{text}");
    let v = pcmail_jsonc::parse(&text).unwrap();
    assert_eq!(
        v["mcpServers"]["pcmail"],
        serde_json::json!({"command": "/opt/pc mail/bin/pcmail", "args": ["mcp"],
            "env": {"PCMAIL_HOME": "/srv/pcmail", "PCMAIL_TOKEN": "$PCMAIL_TOKEN"}})
    );
    assert!(!file_outcome(install(&t).unwrap()).1, "idempotent");
    // Gemini's headless mode hides tools that would need a confirmation: the read-only ones are allowed.
    let policy = fs::read_to_string(t.home.join(".gemini/policies/pcmail.toml")).unwrap();
    let rule: toml::Value = toml::from_str(&policy).unwrap();
    let allowed: Vec<&str> =
        rule["rule"][0]["toolName"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(allowed, ["inbox", "wait_for", "lease_list", "who"]);
    assert_eq!(
        (rule["rule"][0]["mcpName"].as_str(), rule["rule"][0]["decision"].as_str()),
        (Some("pcmail"), Some("allow"))
    );
    file_outcome(uninstall(&t).unwrap());
    assert_eq!(fs::read_to_string(&path).unwrap(), original, "uninstall gives the text back");
    assert!(!t.home.join(".gemini/policies/pcmail.toml").exists());
}

#[test]
fn a_projects_shared_file_holds_no_path_of_this_pc() {
    for agent in [Agent::Claude, Agent::Gemini] {
        let dir = tempfile::tempdir().unwrap();
        let mut t = target(dir.path(), agent, Scope::Project);
        t.pcmail_home = Some(PathBuf::from("/home/me/.local/share/pcmail-work"));
        let (p, _, _) = file_outcome(install(&t).unwrap());
        let text = fs::read_to_string(&p).unwrap();
        assert!(!text.contains("/opt/pc mail") && !text.contains("/home/me"), "{agent:?}: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["mcpServers"]["pcmail"]["command"], "pcmail", "{agent:?}");
        // The user's own file keeps the absolute path (no PATH needed).
        let mut u = target(dir.path(), agent, Scope::User);
        u.pcmail_home = t.pcmail_home.clone();
        if agent == Agent::Gemini {
            let (p, _, _) = file_outcome(install(&u).unwrap());
            assert!(fs::read_to_string(&p).unwrap().contains("/opt/pc mail/bin/pcmail"));
        }
    }
}

/// A project's `.mcp.json` or `.gemini/` is the repo's content: a committed
/// symlink there is refused (a local error), never followed out of the
/// project, and the file it points to is left as it was.
#[cfg(unix)]
#[test]
fn a_symlink_in_the_project_is_refused_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim.json");
    fs::write(&victim, "{\"keep\": true}\n").unwrap();

    let t = target(dir.path(), Agent::Claude, Scope::Project);
    std::os::unix::fs::symlink(&victim, t.project.join(".mcp.json")).unwrap();
    let e = install(&t).unwrap_err();
    assert!(!e.is_usage() && e.to_string().contains("symlink"), "{e}");

    let t = target(dir.path(), Agent::Gemini, Scope::Project);
    let elsewhere = dir.path().join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, t.project.join(".gemini")).unwrap();
    let e = install(&t).unwrap_err();
    assert!(e.to_string().contains("symlink"), "{e}");
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0, "nothing written through the folder link");
    assert_eq!(fs::read_to_string(&victim).unwrap(), "{\"keep\": true}\n");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 4, "no backup or temp file beside the victim");
}
