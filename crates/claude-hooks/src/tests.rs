use super::*;
use serde_json::json;
use tempfile::TempDir;

/// The two mail events: most tests here are about the settings format, not
/// which events the default set holds (`default_set_adds_the_lease_and_handoff_events`).
const MAIL_EVENTS: &[HookEvent] = &[SESSION_START, USER_PROMPT_SUBMIT];

fn mail_spec(command: HookCommand) -> HookSpec {
    HookSpec { events: MAIL_EVENTS.to_vec(), ..HookSpec::new(command) }
}

#[test]
fn default_set_adds_the_lease_and_handoff_events() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("settings.json");
    install(&path, &HookSpec::new(HookCommand::Binary(PathBuf::from("/b/pcmail-hook")))).unwrap();
    let v = read_json(&path);
    assert_eq!(keys(&v["hooks"]), ["SessionStart", "UserPromptSubmit", "PreToolUse", "Stop"]);
    assert_eq!(v["hooks"]["PreToolUse"][0]["matcher"], "Edit|Write|MultiEdit|NotebookEdit");
    assert_eq!(status(&path).unwrap().level(DEFAULT_EVENTS), InstallLevel::Installed);
    // SessionEnd only for releases that know it.
    assert!(!events_for(Some((1, 0, 62))).contains(&SESSION_END));
    assert!(!events_for(None).contains(&SESSION_END));
    let mut with_end = HookSpec::new(HookCommand::Binary(PathBuf::from("/b/pcmail-hook")));
    with_end.events = events_for(Some((2, 1, 332)));
    install(&path, &with_end).unwrap();
    let v = read_json(&path);
    assert_eq!(v["hooks"]["SessionEnd"][0]["hooks"][0]["command"], "/b/pcmail-hook");
}

fn spec(exe: &str) -> HookSpec {
    mail_spec(HookCommand::Subcommand(PathBuf::from(exe)))
}

fn spec_with(exe: &str, timeout_secs: u32) -> HookSpec {
    HookSpec { timeout_secs, ..spec(exe) }
}

fn binary_spec(exe: &str) -> HookSpec {
    mail_spec(HookCommand::Binary(PathBuf::from(exe)))
}

/// The handler install writes for `pcmail` (shell form, no `args`).
fn ours(exe: &str) -> Value {
    json!({"type": "command", "command": format!("{} hook", shell_quote(exe)), "timeout": 5})
}

/// A handler as written by pcmail before it switched to the shell form (exec form: blocks old Claude Code).
fn ours_exec_form(exe: &str) -> Value {
    json!({"type": "command", "command": exe, "args": ["hook"], "timeout": 5})
}

/// A quoted shell-form handler (the form even older pcmail versions wrote).
fn ours_shell_form(exe: &str) -> Value {
    json!({"type": "command", "command": format!("'{exe}' hook"), "timeout": 5})
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap()
}

fn write_pretty(path: &Path, v: &Value) -> String {
    let mut text = serde_json::to_string_pretty(v).unwrap();
    text.push('\n');
    fs::write(path, &text).unwrap();
    text
}

/// Every file in `dir` except `keep`, sorted.
fn other_files(dir: &Path, keep: &str) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != keep)
        .collect();
    v.sort();
    v
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

fn count_ours(v: &Value) -> usize {
    let Some(events) = v.get("hooks").and_then(Value::as_object) else {
        return 0;
    };
    events
        .values()
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(|g| g.get("hooks").and_then(Value::as_array))
        .flatten()
        .filter(|h| pcmail_exe_of(h).is_some())
        .count()
}

#[test]
fn install_into_missing_file_creates_dir_and_registers_both_events() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join(".claude").join("settings.json");
    let out = install(&path, &spec("/opt/pc mail/pcmail")).unwrap();
    assert!(out.changed);
    assert_eq!(out.backup, None);
    assert_eq!(
        read_json(&path),
        json!({"hooks": {
            "SessionStart": [{"matcher": "startup|resume|clear|compact",
                              "hooks": [ours("/opt/pc mail/pcmail")]}],
            "UserPromptSubmit": [{"hooks": [ours("/opt/pc mail/pcmail")]}],
        }})
    );
    // no temp or backup files left behind
    assert!(other_files(path.parent().unwrap(), "settings.json").is_empty());

    let st = status(&path).unwrap();
    assert_eq!(st.level(MAIL_EVENTS), InstallLevel::Installed);
    assert_eq!(st.hooks.len(), 2);
    assert!(st.hooks.iter().all(|h| h.exe == Path::new("/opt/pc mail/pcmail")));
    assert!(!st.all_exes_exist(), "/opt/pc mail/pcmail does not exist");
    assert_eq!(st.hooks[0].matcher.as_deref(), Some(SESSION_START_MATCHER));
    assert_eq!(st.hooks[0].timeout_secs, Some(5));
    assert!(st.hooks.iter().all(|h| h.form == HandlerForm::Shell));
}

#[test]
fn status_reports_existing_exe_partial_and_missing() {
    let tmp = TempDir::new().unwrap();
    let exe = tmp.path().join("pcmail");
    fs::write(&exe, "").unwrap();
    let path = tmp.path().join("settings.json");

    let st = status(&path).unwrap();
    assert!(!st.settings_exists);
    assert_eq!(st.level(MAIL_EVENTS), InstallLevel::NotInstalled);

    install(&path, &HookSpec { timeout_secs: 7, ..mail_spec(HookCommand::Subcommand(exe.clone())) }).unwrap();
    let st = status(&path).unwrap();
    assert_eq!(st.level(MAIL_EVENTS), InstallLevel::Installed);
    assert!(st.all_exes_exist());
    assert_eq!(st.hooks[1].timeout_secs, Some(7));

    // drop the UserPromptSubmit registration by hand -> partial
    let mut v = read_json(&path);
    v["hooks"].as_object_mut().unwrap().shift_remove("UserPromptSubmit");
    write_pretty(&path, &v);
    let st = status(&path).unwrap();
    assert_eq!(st.level(MAIL_EVENTS), InstallLevel::Partial);
    assert!(st.has(EVENT_SESSION_START) && !st.has(EVENT_USER_PROMPT_SUBMIT));
}

#[test]
fn install_into_empty_object_makes_backup() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("settings.json");
    fs::write(&path, "{}").unwrap();
    let out = install(&path, &spec("/usr/local/bin/pcmail")).unwrap();
    assert!(out.changed);
    let backup = out.backup.expect("existing file is backed up");
    assert_eq!(backup.parent(), path.parent());
    let bname = backup.file_name().unwrap().to_str().unwrap();
    assert!(bname.starts_with("settings.json.pcmail-backup-"), "{bname}");
    assert!(bname["settings.json.pcmail-backup-".len()..].parse::<u64>().is_ok(), "{bname}");
    assert_eq!(fs::read_to_string(&backup).unwrap(), "{}");
    assert_eq!(count_ours(&read_json(&path)), 2);
    assert_eq!(other_files(tmp.path(), "settings.json"), vec![bname.to_string()]);
}

fn users_settings() -> Value {
    json!({
        "model": "opus",
        "env": {"Z_LAST": "1", "A_FIRST": "2"},
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "check-bash.sh"}]}],
            "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "log-prompt", "timeout": 3}]}],
            "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "cat notes.md"}]}]
        },
        "permissions": {"allow": ["Bash(ls:*)"], "deny": []},
        "alwaysThinkingEnabled": true
    })
}

#[test]
fn install_keeps_other_keys_hooks_and_their_order() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("settings.json");
    let original = users_settings();
    write_pretty(&path, &original);

    install(&path, &spec("/home/u/.cargo/bin/pcmail")).unwrap();
    let v = read_json(&path);
    assert_eq!(keys(&v), ["model", "env", "hooks", "permissions", "alwaysThinkingEnabled"]);
    assert_eq!(keys(&v["env"]), ["Z_LAST", "A_FIRST"]);
    assert_eq!(keys(&v["hooks"]), ["PreToolUse", "UserPromptSubmit", "SessionStart"]);
    assert_eq!(v["hooks"]["PreToolUse"], original["hooks"]["PreToolUse"]);
    assert_eq!(v["permissions"], original["permissions"]);
    // the user's groups stay first and untouched, ours is appended
    let ups = v["hooks"]["UserPromptSubmit"].as_array().unwrap();
    assert_eq!(ups.len(), 2);
    assert_eq!(ups[0], original["hooks"]["UserPromptSubmit"][0]);
    assert_eq!(ups[1], json!({"hooks": [ours("/home/u/.cargo/bin/pcmail")]}));
    let ss = v["hooks"]["SessionStart"].as_array().unwrap();
    assert_eq!(ss.len(), 2);
    assert_eq!(ss[0], original["hooks"]["SessionStart"][0]);
    assert_eq!(ss[1], json!({"matcher": SESSION_START_MATCHER, "hooks": [ours("/home/u/.cargo/bin/pcmail")]}));
}

#[test]
fn second_install_is_a_no_op() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("settings.json");
    write_pretty(&path, &users_settings());
    assert!(install(&path, &spec("/bin/pcmail")).unwrap().changed);
    let content = fs::read(&path).unwrap();
    let mtime = fs::metadata(&path).unwrap().modified().unwrap();
    let files = other_files(tmp.path(), "settings.json");

    // long enough that a rewrite would show in mtime and in a differently named backup
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let out = install(&path, &spec("/bin/pcmail")).unwrap();
    assert!(!out.changed);
    assert_eq!(out.backup, None);
    assert_eq!(fs::read(&path).unwrap(), content);
    assert_eq!(fs::metadata(&path).unwrap().modified().unwrap(), mtime);
    assert_eq!(other_files(tmp.path(), "settings.json"), files);
}

#[test]
fn exe_path_change_replaces_entry_in_place() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("settings.json");
    write_pretty(&path, &users_settings());
    install(&path, &spec("/old/pcmail")).unwrap();
    // the user appends another group after ours
    let mut v = read_json(&path);
    v["hooks"]["SessionStart"]
        .as_array_mut()
        .unwrap()
        .push(json!({"hooks": [{"type": "command", "command": "later"}]}));
    write_pretty(&path, &v);

    let out = install(&path, &spec_with("/new dir/pcmail", 9)).unwrap();
    assert!(out.changed);
    let after = read_json(&path);
    assert_eq!(count_ours(&after), 2);
    let ss = after["hooks"]["SessionStart"].as_array().unwrap();
    assert_eq!(ss.len(), 3, "no second pcmail group added");
    assert_eq!(ss[1]["hooks"][0]["command"], "'/new dir/pcmail' hook");
    assert_eq!(ss[1]["hooks"][0].get("args"), None);
    assert_eq!(ss[1]["hooks"][0]["timeout"], 9);
    assert_eq!(ss[2]["hooks"][0]["command"], "later");
    assert_eq!(after["hooks"]["UserPromptSubmit"][1]["hooks"][0]["command"], "'/new dir/pcmail' hook");

    // switching to the separate hook binary replaces the same entries, in place
    let out = install(&path, &binary_spec("/new dir/pcmail-hook")).unwrap();
    assert!(out.changed);
    let after = read_json(&path);
    assert_eq!(count_ours(&after), 2);
    let ss = after["hooks"]["SessionStart"].as_array().unwrap();
    assert_eq!(ss.len(), 3);
    assert_eq!(ss[1]["hooks"][0]["command"], "'/new dir/pcmail-hook'");
    assert_eq!(ss[2]["hooks"][0]["command"], "later");
    assert_eq!(status(&path).unwrap().hooks[0].exe, PathBuf::from("/new dir/pcmail-hook"));
}

#[test]
fn legacy_forms_inside_user_groups_are_updated_in_place_and_duplicates_dropped() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("settings.json");
    write_pretty(
        &path,
        &json!({"hooks": {
            "SessionStart": [
                {"matcher": "startup", "hooks": [
                    {"type": "command", "command": "echo hi"},
                    {"type": "command", "command": "/x/pcmail hook", "statusMessage": "mail"}
                ]},
                {"hooks": [{"type": "command", "command": "pcmail", "args": ["hook"]}]}
            ],
            "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "'C:\\bin\\pcmail.exe' hook"}]}]
        }}),
    );
    install(&path, &spec("/y/pcmail")).unwrap();
    let v = read_json(&path);
    assert_eq!(
        v,
        json!({"hooks": {
            "SessionStart": [
                // shared with the user's handler: matcher left alone, extra key kept,
                // command rewritten
                {"matcher": "startup", "hooks": [
                    {"type": "command", "command": "echo hi"},
                    {"type": "command", "command": "/y/pcmail hook", "statusMessage": "mail", "timeout": 5}
                ]}
                // the duplicate group was removed
            ],
            "UserPromptSubmit": [{"hooks": [ours("/y/pcmail")]}]
        }})
    );
}

#[test]
fn our_own_group_gets_the_full_session_start_matcher() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("settings.json");
    write_pretty(&path, &json!({"hooks": {"SessionStart": [{"matcher": "startup", "hooks": [ours("/p/pcmail")]}]}}));
    install(&path, &spec("/p/pcmail")).unwrap();
    assert_eq!(read_json(&path)["hooks"]["SessionStart"][0]["matcher"], SESSION_START_MATCHER);
}

#[test]
fn lookalike_commands_are_not_ours() {
    for cmd in [
        "pcmail hook && rm -rf ~",
        "/x/pcmail-dev hook",
        "/x/pcmail hook --extra",
        "/x/pcmail",
        "/x/pcmail send hook",
        "$HOME/pcmail hook",
        "'/x/pcmail hook'",
        "/x/notpcmail hook",
        "/x/pcmail hook # c",
        "/x/pcmail-hook hook",
        "/x/pcmail-hook --x",
        "/x/pcmail-hook; rm -rf ~",
        "/x/pcmail-hooks",
        "'/x/pcmail-hook' ''",
    ] {
        assert_eq!(pcmail_exe_of(&json!({"type": "command", "command": cmd})), None, "{cmd}");
    }
    assert_eq!(pcmail_exe_of(&json!({"type": "http", "command": "/x/pcmail hook"})), None);
    for args in [json!([]), json!(["hook", "--extra"]), json!(["send"]), json!([1]), json!("hook")] {
        assert_eq!(pcmail_exe_of(&json!({"type": "command", "command": "/x/pcmail", "args": args})), None, "{args}");
    }
    assert_eq!(pcmail_exe_of(&json!({"type": "command", "command": "/x/pcmail-dev", "args": ["hook"]})), None);
    assert_eq!(pcmail_exe_of(&json!({"type": "command", "command": "/x/pcmail-hook", "args": ["hook"]})), None);
    // exec form: `command` is the path itself, even if it would need quoting in a shell
    assert_eq!(
        pcmail_handler_of(&json!({"type": "command", "command": "/a b/$x/pcmail", "args": ["hook"]})),
        Some((PathBuf::from("/a b/$x/pcmail"), HandlerForm::ExecWithArgs))
    );
    assert_eq!(
        pcmail_handler_of(&json!({"type": "command", "command": "/a b/pcmail-hook", "args": []})),
        Some((PathBuf::from("/a b/pcmail-hook"), HandlerForm::ExecWithArgs))
    );
    for (cmd, exe) in [
        ("/x/pcmail hook", "/x/pcmail"),
        ("'/a b/pcmail' hook", "/a b/pcmail"),
        ("\"/a b/pcmail\" hook", "/a b/pcmail"),
        ("/a\\ b/pcmail  hook", "/a b/pcmail"),
        ("'/it'\\''s/pcmail' hook", "/it's/pcmail"),
        ("pcmail hook", "pcmail"),
        ("C:/Tools/PCMAIL.EXE hook", "C:/Tools/PCMAIL.EXE"),
        ("/x/pcmail-hook", "/x/pcmail-hook"),
        ("'/a b/pcmail-hook'", "/a b/pcmail-hook"),
        ("  /x/pcmail-hook  ", "/x/pcmail-hook"),
        ("'C:\\Users\\山田 太郎\\pcmail-hook.exe'", "C:\\Users\\山田 太郎\\pcmail-hook.exe"),
        ("'C:\\Tools\\PCMAIL.exe' hook", "C:\\Tools\\PCMAIL.exe"),
    ] {
        let got = pcmail_handler_of(&json!({"type": "command", "command": cmd}));
        assert_eq!(got, Some((PathBuf::from(exe), HandlerForm::Shell)), "{cmd}");
    }
}

#[test]
fn shell_quote_is_read_back_as_one_word() {
    // The quoting itself is tested beside it (pcmail_core::shell); here the
    // recogniser reads every quoted path back as the same single word.
    for (raw, quoted) in [
        ("/usr/local/bin/pcmail", "/usr/local/bin/pcmail"),
        ("/home/u/.cargo/bin/pcmail-hook", "/home/u/.cargo/bin/pcmail-hook"),
        ("/a b/pcmail", "'/a b/pcmail'"),
        ("/it's/pcmail", "'/it'\\''s/pcmail'"),
        ("/$x/`y`/\"q\"/pcmail", "'/$x/`y`/\"q\"/pcmail'"),
        ("/home/山田/pcmail", "'/home/山田/pcmail'"),
        ("C:\\Users\\山田 太郎\\pcmail-hook.exe", "'C:\\Users\\山田 太郎\\pcmail-hook.exe'"),
        ("/x=y/pcmail", "'/x=y/pcmail'"),
        ("/~u/pcmail", "'/~u/pcmail'"),
        ("", "''"),
    ] {
        assert_eq!(shell_quote(raw), quoted, "{raw}");
        assert_eq!(shell_words(&shell_quote(raw)), Some(vec![raw.to_string()]), "{raw}");
    }
}

#[test]
fn hook_handler_is_shell_form_without_args_and_recognised() {
    for exe in
        ["/a/pcmail", "/a b/pcmail", "/it's/pcmail", "/$x/`y`/\"q\"/pcmail", "C:\\Program Files\\pcmail\\pcmail.exe"]
    {
        let h = Value::Object(hook_handler(&spec(exe)).unwrap());
        assert_eq!(h, ours(exe));
        assert_eq!(h.get("args"), None);
        assert_eq!(pcmail_handler_of(&h), Some((PathBuf::from(exe), HandlerForm::Shell)), "{exe}");
    }
    for exe in ["/a/pcmail-hook", "/a b/pcmail-hook", "C:\\Users\\山田 太郎\\pcmail-hook.exe"] {
        let h = Value::Object(hook_handler(&binary_spec(exe)).unwrap());
        assert_eq!(h["command"], json!(shell_quote(exe)));
        assert_eq!(h.get("args"), None);
        assert_eq!(pcmail_handler_of(&h), Some((PathBuf::from(exe), HandlerForm::Shell)), "{exe}");
    }
    assert_eq!(
        hook_handler(&binary_spec("/usr/bin/pcmail-hook")).unwrap()["command"],
        "/usr/bin/pcmail-hook",
        "a plain path stays bare: the same command in exec and shell form"
    );
    for bad in [
        spec("relative/pcmail"),
        spec("/a/pcmail-hook"),
        binary_spec("/a/pcmail"),
        binary_spec("pcmail-hook"),
        spec("/a\nb/pcmail"),
        HookSpec { events: vec![], ..spec("/a/pcmail") },
    ] {
        assert!(matches!(hook_handler(&bad), Err(HooksError::InvalidSpec(_))), "{bad:?}");
    }
}

#[test]
fn exec_form_entry_is_migrated_in_place_then_idempotent() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("settings.json");
    let mut exec_ss = ours_exec_form("/opt/pc mail/pcmail");
    exec_ss["statusMessage"] = json!("checking mail");
    let original = json!({
        "model": "opus",
        "hooks": {
            "SessionStart": [
                {"matcher": "startup", "hooks": [{"type": "command", "command": "cat notes.md"}]},
                {"matcher": SESSION_START_MATCHER, "hooks": [exec_ss]},
                {"hooks": [{"type": "command", "command": "after-us"}]}
            ],
            "UserPromptSubmit": [
                {"hooks": [
                    {"type": "command", "command": "/opt/pc mail/pcmail", "args": ["hook"], "timeout": 5, "x-note": "mine"},
                    {"type": "command", "command": "log-prompt"}
                ]}
            ],
            // an event this install does not register: migrated too, its timeout kept
            "Stop": [{"hooks": [{"type": "command", "command": "/opt/pc mail/pcmail", "args": ["hook"], "timeout": 2}]}]
        }
    });
    write_pretty(&path, &original);
    let st = status(&path).unwrap();
    assert_eq!(st.level(MAIL_EVENTS), InstallLevel::Installed);
    assert!(st.hooks.iter().all(|h| h.form == HandlerForm::ExecWithArgs), "{st:?}");
    assert!(st.needs_migration());

    let out = install(&path, &spec("/opt/pc mail/pcmail")).unwrap();
    assert!(out.changed);
    assert!(out.backup.is_some());
    let v = read_json(&path);
    assert_eq!(
        v,
        json!({
            "model": "opus",
            "hooks": {
                "SessionStart": [
                    {"matcher": "startup", "hooks": [{"type": "command", "command": "cat notes.md"}]},
                    {"matcher": SESSION_START_MATCHER, "hooks": [
                        {"type": "command", "command": "'/opt/pc mail/pcmail' hook",
                         "timeout": 5, "statusMessage": "checking mail"}
                    ]},
                    {"hooks": [{"type": "command", "command": "after-us"}]}
                ],
                "UserPromptSubmit": [
                    {"hooks": [
                        {"type": "command", "command": "'/opt/pc mail/pcmail' hook",
                         "timeout": 5, "x-note": "mine"},
                        {"type": "command", "command": "log-prompt"}
                    ]}
                ],
                "Stop": [{"hooks": [{"type": "command", "command": "'/opt/pc mail/pcmail' hook", "timeout": 2}]}]
            }
        })
    );
    // key order of the migrated handler: ours where they stood, `args` gone, the user's keys
    // where they were
    assert_eq!(keys(&v["hooks"]["SessionStart"][1]["hooks"][0]), ["type", "command", "timeout", "statusMessage"]);
    assert_eq!(keys(&v["hooks"]["UserPromptSubmit"][0]["hooks"][0]), ["type", "command", "timeout", "x-note"]);
    let st = status(&path).unwrap();
    assert_eq!(st.hooks.len(), 3);
    assert!(st.hooks.iter().all(|h| h.form == HandlerForm::Shell));
    assert!(!st.needs_migration());

    // a second install is a no-op: no write, no backup
    let content = fs::read(&path).unwrap();
    let files = other_files(tmp.path(), "settings.json");
    let out = install(&path, &spec("/opt/pc mail/pcmail")).unwrap();
    assert!(!out.changed);
    assert_eq!(out.backup, None);
    assert_eq!(fs::read(&path).unwrap(), content);
    assert_eq!(other_files(tmp.path(), "settings.json"), files);
}

#[test]
fn events_are_a_parameter() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("settings.json");
    let mut s = HookSpec::new(HookCommand::Binary(PathBuf::from("/b/pcmail-hook")));
    s.events = vec![SESSION_START, USER_PROMPT_SUBMIT, PRE_TOOL_USE, STOP, SESSION_END];
    install(&path, &s).unwrap();
    let v = read_json(&path);
    assert_eq!(keys(&v["hooks"]), ["SessionStart", "UserPromptSubmit", "PreToolUse", "Stop", "SessionEnd"]);
    assert_eq!(v["hooks"]["PreToolUse"][0]["matcher"], PRE_TOOL_USE_MATCHER);
    assert_eq!(v["hooks"]["Stop"][0].get("matcher"), None);
    assert_eq!(count_ours(&v), 5);
    let st = status(&path).unwrap();
    assert_eq!(st.level(&s.events), InstallLevel::Installed);
    assert_eq!(st.level(DEFAULT_EVENTS), InstallLevel::Installed);
    // the default set registers nothing new and leaves the others as they are
    assert!(!install(&path, &HookSpec::new(HookCommand::Binary(PathBuf::from("/b/pcmail-hook")))).unwrap().changed);
    // only SessionStart registered: partial against the default set
    uninstall(&path).unwrap();
    let mut only = HookSpec::new(HookCommand::Binary(PathBuf::from("/b/pcmail-hook")));
    only.events = vec![SESSION_START];
    install(&path, &only).unwrap();
    assert_eq!(status(&path).unwrap().level(DEFAULT_EVENTS), InstallLevel::Partial);
}

#[test]
fn for_pcmail_exe_prefers_the_hook_binary_beside_it() {
    let tmp = TempDir::new().unwrap();
    let pcmail = tmp.path().join("pcmail");
    fs::write(&pcmail, "").unwrap();
    assert_eq!(HookCommand::for_pcmail_exe(&pcmail), HookCommand::Subcommand(pcmail.clone()));
    let hook = tmp.path().join(HOOK_BINARY_NAME);
    fs::write(&hook, "").unwrap();
    assert_eq!(HookCommand::for_pcmail_exe(&pcmail), HookCommand::Binary(hook));
}

#[test]
fn path_with_spaces_dollar_and_quotes_is_quoted_once() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("settings.json");
    let exe = "/home/u/my $HOME dir/it's \"q\"/pcmail";
    install(&path, &spec(exe)).unwrap();
    let text = fs::read_to_string(&path).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    for ev in [EVENT_SESSION_START, EVENT_USER_PROMPT_SUBMIT] {
        let h = &v["hooks"][ev][0]["hooks"][0];
        assert_eq!(h["command"].as_str(), Some("'/home/u/my $HOME dir/it'\\''s \"q\"/pcmail' hook"));
        assert_eq!(h.get("args"), None);
        assert_eq!(h["timeout"], 5);
    }
    assert_eq!(status(&path).unwrap().hooks[0].exe, PathBuf::from(exe));
    assert!(!install(&path, &spec(exe)).unwrap().changed);
}

/// Runs `command` the way Claude Code runs a hook without `args`: `sh -c` (bash on Windows).
#[cfg(unix)]
fn run_in_shell(command: &str) -> std::process::Output {
    std::process::Command::new("/bin/sh").arg("-c").arg(command).output().unwrap()
}

#[cfg(unix)]
#[test]
fn registered_handler_runs_the_exe_with_exactly_hook_through_the_shell() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().join("we'ird $dir `x` \"q\" 山田 太郎 \\ ;&|");
    fs::create_dir(&dir).unwrap();
    // prints its argument count, then each argument followed by `|`
    let script = "#!/bin/sh\nprintf '%s:' \"$#\"\nprintf '%s|' \"$@\"\n";
    for (name, expect) in [("pcmail", "1:hook|"), ("pcmail-hook", "0:|")] {
        let exe = dir.join(name);
        fs::write(&exe, script).unwrap();
        fs::set_permissions(&exe, fs::Permissions::from_mode(0o755)).unwrap();
        let command =
            if name == "pcmail" { HookCommand::Subcommand(exe.clone()) } else { HookCommand::Binary(exe.clone()) };
        let path = tmp.path().join(format!("settings-{name}.json"));
        install(&path, &mail_spec(command)).unwrap();
        let v = read_json(&path);
        for ev in [EVENT_SESSION_START, EVENT_USER_PROMPT_SUBMIT] {
            let h = &v["hooks"][ev][0]["hooks"][0];
            assert_eq!(h.get("args"), None);
            let out = run_in_shell(h["command"].as_str().unwrap());
            assert!(out.status.success(), "{out:?}");
            assert_eq!(String::from_utf8_lossy(&out.stdout), expect, "{name}");
        }
    }
}

#[test]
fn uninstall_restores_the_other_content() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("settings.json");
    let original_text = write_pretty(&path, &users_settings());
    install(&path, &spec("/bin/pcmail")).unwrap();
    assert_ne!(fs::read_to_string(&path).unwrap(), original_text);

    let out = uninstall(&path).unwrap();
    assert!(out.changed);
    assert!(out.backup.is_some());
    assert_eq!(fs::read_to_string(&path).unwrap(), original_text);

    // nothing left to remove: no write
    let out = uninstall(&path).unwrap();
    assert!(!out.changed);
}

#[test]
fn uninstall_from_fresh_install_removes_hooks_key_and_keeps_shared_groups() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("settings.json");
    write_pretty(&path, &json!({"model": "sonnet"}));
    install(&path, &spec("/bin/pcmail")).unwrap();
    uninstall(&path).unwrap();
    assert_eq!(read_json(&path), json!({"model": "sonnet"}));

    // our handler inside a user's group: only the handler goes
    write_pretty(
        &path,
        &json!({"hooks": {"SessionStart": [{"matcher": "x", "hooks": [
            {"type": "command", "command": "a"}, ours("/bin/pcmail"),
            ours_shell_form("/old/pcmail")]}], "Stop": []}}),
    );
    uninstall(&path).unwrap();
    assert_eq!(
        read_json(&path),
        json!({"hooks": {"SessionStart": [{"matcher": "x", "hooks": [{"type": "command", "command": "a"}]}], "Stop": []}})
    );
}

#[test]
fn uninstall_without_a_file_creates_nothing() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join(".claude").join("settings.json");
    assert!(!uninstall(&path).unwrap().changed);
    assert!(!tmp.path().join(".claude").exists());
}

#[test]
fn invalid_json_is_refused_and_file_unchanged() {
    for bad in ["{\"hooks\": ", "[1, 2]", "null", "\"str\"", "{} {}"] {
        let tmp = TempDir::new().unwrap();
        let path = tmp.path().join("settings.json");
        fs::write(&path, bad).unwrap();
        let err = install(&path, &spec("/bin/pcmail")).unwrap_err();
        assert!(matches!(&err, HooksError::NotJson { path: p, .. } if p == &path), "{bad}: {err:?}");
        assert!(err.to_string().contains("settings.json"), "{err}");
        let err = uninstall(&path).unwrap_err();
        assert!(matches!(err, HooksError::NotJson { .. }), "{bad}");
        assert!(matches!(status(&path), Err(HooksError::NotJson { .. })));
        assert_eq!(fs::read_to_string(&path).unwrap(), bad);
        assert!(other_files(tmp.path(), "settings.json").is_empty(), "no backup/temp for {bad}");
    }
}

#[test]
fn unexpected_hooks_shape_is_refused() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("settings.json");
    for text in [r#"{"hooks": []}"#, r#"{"hooks": {"SessionStart": {"a": 1}}}"#] {
        fs::write(&path, text).unwrap();
        let err = install(&path, &spec("/bin/pcmail")).unwrap_err();
        assert!(matches!(err, HooksError::UnexpectedShape { .. }), "{err:?}");
        assert_eq!(fs::read_to_string(&path).unwrap(), text);
    }
    assert_eq!(other_files(tmp.path(), "settings.json"), Vec::<String>::new());
}

#[test]
fn backup_holds_the_previous_bytes() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("settings.json");
    let original = "{\n    \"model\":   \"opus\"\n}\n";
    fs::write(&path, original).unwrap();
    let out = install(&path, &spec("/bin/pcmail")).unwrap();
    assert_eq!(fs::read_to_string(out.backup.unwrap()).unwrap(), original);
    // a second change in the same second gets its own backup, the first is not overwritten
    let out2 = uninstall(&path).unwrap();
    let b2 = out2.backup.unwrap();
    assert_eq!(count_ours(&serde_json::from_str(&fs::read_to_string(&b2).unwrap()).unwrap()), 2);
    assert_eq!(other_files(tmp.path(), "settings.json").len(), 2);
    assert_eq!(read_json(&path), json!({"model": "opus"}));
}

#[test]
fn dot_claude_json_is_refused() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join(".claude.json");
    fs::write(&path, "{\"numStartups\": 3}").unwrap();
    let err = install(&path, &spec("/bin/pcmail")).unwrap_err();
    assert!(matches!(err, HooksError::RefusedPath { .. }), "{err:?}");
    assert!(matches!(uninstall(&path), Err(HooksError::RefusedPath { .. })));
    assert_eq!(fs::read_to_string(&path).unwrap(), "{\"numStartups\": 3}");
    // and it is never created either
    let missing = tmp.path().join("sub").join(".claude.json");
    assert!(install(&missing, &spec("/bin/pcmail")).is_err());
    assert!(!missing.exists());
    assert_eq!(other_files(tmp.path(), ".claude.json"), Vec::<String>::new());
}

#[test]
fn bad_specs_are_refused() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("settings.json");
    for s in [spec("pcmail"), spec("/bin/pcmail-dev"), spec_with("/bin/pcmail", 0)] {
        assert!(matches!(install(&path, &s), Err(HooksError::InvalidSpec(_))), "{s:?}");
    }
    assert!(!path.exists());
}

#[test]
fn empty_file_is_treated_as_empty_object() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("settings.json");
    fs::write(&path, "  \n").unwrap();
    let out = install(&path, &spec("/bin/pcmail")).unwrap();
    assert!(out.changed && out.backup.is_some());
    assert_eq!(count_ours(&read_json(&path)), 2);
}

#[cfg(unix)]
#[test]
fn permissions_are_preserved() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("settings.json");
    fs::write(&path, "{}").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
    install(&path, &spec("/bin/pcmail")).unwrap();
    assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o640);
}

#[cfg(unix)]
#[test]
fn symlinked_settings_are_written_through() {
    let tmp = TempDir::new().unwrap();
    let dotfiles = tmp.path().join("dotfiles");
    fs::create_dir(&dotfiles).unwrap();
    let real = dotfiles.join("settings.json");
    fs::write(&real, "{\"a\": 1}").unwrap();
    let claude = tmp.path().join(".claude");
    fs::create_dir(&claude).unwrap();
    let link = claude.join("settings.json");
    std::os::unix::fs::symlink(&real, &link).unwrap();

    install(&link, &spec("/bin/pcmail")).unwrap();
    assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(count_ours(&read_json(&real)), 2);
    assert_eq!(read_json(&real)["a"], 1);
}

#[test]
fn default_settings_path_respects_claude_config_dir() {
    // The only test touching the environment.
    let saved = std::env::var_os("CLAUDE_CONFIG_DIR");
    std::env::set_var("CLAUDE_CONFIG_DIR", "/tmp/cfgdir");
    assert_eq!(default_settings_path(), Some(PathBuf::from("/tmp/cfgdir/settings.json")));
    std::env::remove_var("CLAUDE_CONFIG_DIR");
    if std::env::var_os("HOME").is_some_and(|h| !h.is_empty()) {
        let p = default_settings_path().unwrap();
        assert!(p.ends_with(".claude/settings.json"), "{}", p.display());
        assert_ne!(p.file_name().unwrap(), ".claude.json");
    }
    if let Some(v) = saved {
        std::env::set_var("CLAUDE_CONFIG_DIR", v);
    }
}

#[test]
fn versions_are_parsed_from_claude_version_lines() {
    assert_eq!(parse_version("2.1.332 (Claude Code)"), Some((2, 1, 332)));
    assert_eq!(parse_version("claude 1.0.60"), Some((1, 0, 60)));
    assert_eq!(parse_version("Claude Code"), None);
    assert_eq!(parse_version("2.1"), None);
}

#[cfg(unix)]
#[test]
fn claude_code_version_runs_the_program_with_a_timeout() {
    use std::os::unix::fs::PermissionsExt;
    use std::time::Duration;
    let tmp = TempDir::new().unwrap();
    let write = |name: &str, body: &str| {
        let p = tmp.path().join(name);
        fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        p
    };
    let ok = write("ok", "[ \"$1\" = --version ] && echo '2.0.0 (Claude Code)'");
    assert_eq!(
        claude_code_version(ok.as_os_str(), Duration::from_secs(5)),
        ClaudeCodeVersion::Found { line: "2.0.0 (Claude Code)".into(), version: Some((2, 0, 0)) }
    );
    let hangs = write("hangs", "exec sleep 30");
    // (a `sleep 30` that ran to its end would print nothing and exit 0: Found, not Failed)
    assert!(matches!(
        claude_code_version(hangs.as_os_str(), Duration::from_millis(300)),
        ClaudeCodeVersion::Failed(m) if m.contains("did not answer")
    ));
    let fails = write("fails", "exit 3");
    assert!(matches!(claude_code_version(fails.as_os_str(), Duration::from_secs(5)), ClaudeCodeVersion::Failed(_)));
    assert_eq!(
        claude_code_version(tmp.path().join("absent").as_os_str(), Duration::from_secs(1)),
        ClaudeCodeVersion::NotOnPath
    );
}

#[test]
fn codex_gets_its_own_hooks_file_with_the_apply_patch_guard_and_is_not_rewritten_when_unchanged() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("hooks.json");
    let spec = HookSpec::for_agent(Agent::Codex, HookCommand::Binary(PathBuf::from("/b/pcmail-hook")));
    assert!(install(&path, &spec).unwrap().changed);
    let v = read_json(&path);
    assert_eq!(keys(&v["hooks"]), ["SessionStart", "UserPromptSubmit", "PreToolUse", "Stop"]);
    assert_eq!(v["hooks"]["PreToolUse"][0]["matcher"], "apply_patch");
    assert_eq!(
        v["hooks"]["UserPromptSubmit"][0]["hooks"][0],
        json!({"type": "command", "command": "/b/pcmail-hook", "timeout": 5})
    );
    let written = fs::metadata(&path).unwrap().modified().unwrap();
    let text = fs::read_to_string(&path).unwrap();
    // Codex trusts a hook by its exact definition: a second install writes nothing.
    let again = install(&path, &spec).unwrap();
    assert!(!again.changed && again.backup.is_none());
    assert_eq!(fs::read_to_string(&path).unwrap(), text);
    assert_eq!(fs::metadata(&path).unwrap().modified().unwrap(), written);
    assert_eq!(status_for(Agent::Codex, &path).unwrap().level(CODEX_EVENTS), InstallLevel::Installed);
    assert!(uninstall_for(Agent::Codex, &path).unwrap().changed);
    assert_eq!(read_json(&path), json!({}));
}

#[test]
fn gemini_settings_with_comments_get_its_events_in_milliseconds_and_keep_the_comments() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("settings.json");
    let original = "{\n  // my look\n  \"theme\": \"Dracula\", /* keep */\n  \"hooks\": {\n    \"BeforeTool\": [{\"matcher\": \"run_shell_command\", \"hooks\": [{\"type\": \"command\", \"command\": \"mine.sh\"}]}],\n  },\n}\n";
    fs::write(&path, original).unwrap();
    let spec = HookSpec::for_agent(Agent::Gemini, HookCommand::Binary(PathBuf::from("/b/pcmail-hook")));
    let o = install(&path, &spec).unwrap();
    assert!(o.changed && o.backup.is_some());
    let text = fs::read_to_string(&path).unwrap();
    assert!(text.contains("// my look") && text.contains("/* keep */"), "comments kept:\n{text}");
    let v = Value::Object(pcmail_jsonc::parse(&text).unwrap());
    assert_eq!(keys(&v["hooks"]), ["BeforeTool", "SessionStart", "BeforeAgent", "AfterAgent", "SessionEnd"]);
    assert_eq!(v["hooks"]["BeforeTool"][0]["hooks"][0]["command"], "mine.sh", "the user's hook stays first");
    assert_eq!(v["hooks"]["BeforeTool"][1]["matcher"], "write_file|replace");
    assert_eq!(v["hooks"]["BeforeAgent"][0]["hooks"][0]["timeout"], 5000, "Gemini counts milliseconds");
    assert!(v["hooks"]["SessionStart"][0].get("matcher").is_none(), "every session source");
    assert_eq!(v["theme"], "Dracula");
    assert!(!install(&path, &spec).unwrap().changed, "idempotent");
    assert_eq!(status_for(Agent::Gemini, &path).unwrap().level(GEMINI_EVENTS), InstallLevel::Installed);
    assert!(uninstall_for(Agent::Gemini, &path).unwrap().changed);
    let back = fs::read_to_string(&path).unwrap();
    assert!(back.contains("// my look") && back.contains("mine.sh"), "{back}");
    assert_eq!(pcmail_jsonc::parse(&back).unwrap(), pcmail_jsonc::parse(original).unwrap());
    // Claude Code's settings.json stays strict JSON.
    fs::write(&path, original).unwrap();
    assert!(matches!(status(&path), Err(HooksError::NotJson { .. })));
}

/// A settings file inside a git work tree (a project's
/// `.claude/settings.json`) is the repo's content: a committed symlink at
/// the file or at `.claude` is refused before anything is read, never
/// followed out of the repo. Outside a work tree a symlinked settings.json
/// (a dotfile manager's) is still written through to its target.
#[cfg(unix)]
#[test]
fn a_symlink_inside_a_work_tree_is_refused_but_a_dotfile_link_is_followed() {
    let tmp = TempDir::new().unwrap();
    let repo = tmp.path().join("repo");
    fs::create_dir_all(repo.join(".git")).unwrap();
    let victim = tmp.path().join("victim.json");
    fs::write(&victim, "{}\n").unwrap();

    fs::create_dir_all(repo.join(".claude")).unwrap();
    std::os::unix::fs::symlink(&victim, repo.join(".claude/settings.json")).unwrap();
    let e = install(&repo.join(".claude/settings.json"), &spec("/b/pcmail")).unwrap_err();
    assert!(matches!(e, HooksError::Io { .. }) && e.to_string().contains("symlink"), "{e}");
    fs::remove_dir_all(repo.join(".claude")).unwrap();
    let outside = tmp.path().join("outside");
    fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, repo.join(".claude")).unwrap();
    let e = install(&repo.join(".claude/settings.json"), &spec("/b/pcmail")).unwrap_err();
    assert!(e.to_string().contains("symlink"), "{e}");
    assert_eq!(fs::read_to_string(&victim).unwrap(), "{}\n");
    assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);

    // A real folder in the repo: written, private.
    fs::remove_file(repo.join(".claude")).unwrap();
    install(&repo.join(".claude/settings.json"), &spec("/b/pcmail")).unwrap();
    assert_eq!(count_ours(&read_json(&repo.join(".claude/settings.json"))), 2);

    // Outside any work tree: the dotfile manager's link is written through.
    let home = tmp.path().join("home/.claude");
    fs::create_dir_all(&home).unwrap();
    std::os::unix::fs::symlink(&victim, home.join("settings.json")).unwrap();
    install(&home.join("settings.json"), &spec("/b/pcmail")).unwrap();
    assert!(fs::symlink_metadata(home.join("settings.json")).unwrap().file_type().is_symlink());
    assert_eq!(count_ours(&read_json(&victim)), 2);
}
