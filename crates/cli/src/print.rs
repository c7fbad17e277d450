//! Human and `--json` output of the CLI.

use pcmail_client::ops::SendOutcome;
use pcmail_client::sync::CycleReport;
use pcmail_core::present::{age, neutralise, truncate_chars};
use pcmail_core::{Alert, Mail, Millis, Pc};
use pcmail_store::{InboxMail, SentMail};
use serde_json::json;

pub fn time(ms: Millis) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3fZ").to_string())
        .unwrap_or_else(|| ms.to_string())
}

pub fn send_outcome(o: &SendOutcome, json: bool) {
    if json {
        println!("{}", serde_json::to_string(o).unwrap());
    } else if o.queued {
        println!(
            "queued {} — the server is unreachable; it will be sent by the next poll (pcmail sync)",
            o.ids.join(" ")
        );
    } else if o.existing {
        println!("sent {} (the server already had it)", o.ids.join(" "));
    } else {
        println!("sent {}", o.ids.join(" "));
    }
}

pub fn timelines(mails: &[Mail], json: bool) {
    if json {
        println!("{}", serde_json::to_string(mails).unwrap());
        return;
    }
    for m in mails {
        println!("{}  {} → {}  [{}]  {}", m.id, m.from, m.to, m.state, neutralise(&truncate_chars(&m.subject, 60)));
        for e in &m.timeline {
            let note = e.note.as_deref().map(|n| format!("  ({})", neutralise(n))).unwrap_or_default();
            println!("  {:<9} {}  by {}{}", e.state.as_str(), time(e.at), e.by, note);
        }
    }
}

/// `older`: the command that lists older mail, when there is some.
pub fn inbox(rows: &[InboxMail], now: Millis, json: bool, older: Option<&str>) {
    if json {
        println!("{}", serde_json::to_string(rows).unwrap());
        return;
    }
    if rows.is_empty() {
        println!("no open mail");
        return;
    }
    let lang = pcmail_local::config::user_lang();
    for m in rows {
        let urgent = if m.urgent { " URGENT" } else { "" };
        let expired = if m.is_expired_at(now) { " (expired)" } else { "" };
        // The kind as a badge in the user's language (LANG / LC_MESSAGES); the
        // Japanese tags in the subject are recognised and not shown twice.
        let badged = pcmail_core::present::badged_subject(m.effective_kind(), &m.subject, lang);
        let subject = pcmail_core::present::subject_without_tags(&m.subject);
        let text = match (subject.is_empty(), badged.is_empty()) {
            (true, true) => m.body.clone(),
            (true, false) => format!("{badged} {}", m.body),
            _ => badged,
        };
        let state = shown_state(m);
        println!(
            "{}  {:<9} {:>4} ago  from {}{}{}  {}",
            m.id,
            state,
            age(now - m.created_at),
            m.from,
            urgent,
            expired,
            neutralise(&truncate_chars(&text, 70))
        );
    }
    if let Some(cmd) = older {
        println!("older mail: {cmd}");
    }
}

pub fn sent(rows: &[SentMail], json: bool) {
    if json {
        println!("{}", serde_json::to_string(rows).unwrap());
        return;
    }
    for m in rows {
        let text = if m.subject.is_empty() { &m.body } else { &m.subject };
        let state = match (&m.queued, m.state) {
            (Some(_), pcmail_core::State::New) => "queued".to_string(),
            (Some(why), s) => format!("{s}: {why}"),
            (None, s) => s.to_string(),
        };
        println!("{}  → {:<12} [{}]  {}", m.id, m.to, state, neutralise(&truncate_chars(text, 60)));
    }
}

pub fn one_mail(m: &InboxMail, json: bool) {
    if json {
        println!("{}", serde_json::to_string(m).unwrap());
        return;
    }
    println!("id:      {}", m.id);
    println!("from:    {}", m.from);
    if let Some(all) = &m.recipients {
        // Mail to several addresses: who else got it (`reply --all` answers them too).
        println!("to:      {}", neutralise(&all.join(", ")));
    }
    let kind = m.effective_kind();
    let badge = pcmail_core::present::kind_badge(kind, pcmail_local::config::user_lang());
    println!(
        "kind:    {}{}{}",
        badge.map(|b| format!("{b} ")).unwrap_or_default(),
        kind.as_str(),
        if m.urgent { " (urgent)" } else { "" }
    );
    println!("sent:    {}", time(m.created_at));
    if let Some(r) = &m.in_reply_to {
        println!("reply to: {r}");
    }
    if !m.subject.is_empty() {
        println!("subject: {}", neutralise(&m.subject));
    }
    println!("state:   {}", shown_state(m));
    for e in &m.timeline {
        let note = e.note.as_deref().map(|n| format!("  ({})", neutralise(n))).unwrap_or_default();
        println!("  {:<9} {}  by {}{}", e.state.as_str(), time(e.at), neutralise(&e.by), note);
    }
    println!();
    // For a person, line breaks kept; a server that let an escape sequence
    // through (an older one) still cannot move or colour this terminal.
    println!("{}", pcmail_core::present::terminal_text(&m.body));
}

/// Stored here and not read yet is what the server calls `delivered`.
fn shown_state(m: &InboxMail) -> &'static str {
    if m.status == pcmail_core::State::New {
        "delivered"
    } else {
        m.status.as_str()
    }
}

pub fn marked(m: &pcmail_api::Marked, json: bool) {
    if json {
        println!("{}", serde_json::to_string(m).unwrap());
    } else {
        let pending = m.pending_marks;
        let tail = if pending > 0 { format!(" ({pending} mark(s) wait for the server)") } else { String::new() };
        println!("{} is {}{tail}", m.id, m.state);
    }
}

pub fn roster(pcs: &[Pc], me: &str, json: bool) {
    if json {
        println!("{}", serde_json::to_string(pcs).unwrap());
        return;
    }
    for p in pcs {
        let mark = if p.label == me { "  (this PC)" } else { "" };
        println!("{:>3}  {:<24} {}{}", p.number, p.label, p.hostname, mark);
    }
}

pub fn alerts(a: &[Alert], json: bool) {
    if json {
        println!("{}", serde_json::to_string(a).unwrap());
        return;
    }
    if a.is_empty() {
        println!("no alerts");
    }
    for x in a {
        let resolved = x.resolved_at.map(|t| format!(" resolved {}", time(t))).unwrap_or_default();
        let webhook = x.last_error.as_deref().map(|e| format!("  (webhook: {})", neutralise(e))).unwrap_or_default();
        println!(
            "{:<12} {:<10} {}  ×{}  {}{}{}",
            x.kind.as_str(),
            x.pc,
            x.subject,
            x.count,
            neutralise(&x.message),
            resolved,
            webhook
        );
    }
}

pub fn cycle(r: &CycleReport, json: bool) {
    if json {
        println!("{}", serde_json::to_string(r).unwrap());
    } else {
        println!(
            "synced: {} new, {} confirmed, {} marks sent, {} queued mail sent, {} updates ({} round trips){}",
            r.stored.len(),
            r.confirmed,
            r.marks_sent,
            r.outbox_sent.len(),
            r.updates,
            r.round_trips,
            if r.quarantined.is_empty() { String::new() } else { format!(", {} quarantined", r.quarantined.len()) }
        );
    }
}

pub fn doctor(json: bool, fix: bool) -> anyhow::Result<()> {
    use pcmail_local::config::{Config, Paths};
    let mut checks: Vec<(String, bool, String)> = vec![];
    let paths = Paths::from_env()?;
    // On an instance host: the database `pcmail serve` would use, redacted (never its password).
    if let Some(url) = std::env::var("PCMAIL_DATABASE_URL").ok().filter(|u| !u.is_empty()) {
        checks.push(match crate::cmd::serve::postgres_target(&url) {
            Ok(t) => {
                (format!("serve database: {} (password: {})", t.redacted(), t.password_source), true, String::new())
            }
            Err(e) => (format!("serve database (PCMAIL_DATABASE_URL): {e}"), false, "fix PCMAIL_DATABASE_URL".into()),
        });
    }
    let config = match Config::load(&paths) {
        Ok(c) => {
            let more = if c.failover_urls.is_empty() {
                String::new()
            } else {
                format!(" (then, if it is unreachable: {})", c.failover_urls.join(", "))
            };
            checks.push((
                format!("config: PC {:?}, server {}{more}", c.label, c.server.describe()),
                true,
                String::new(),
            ));
            Some(c)
        }
        Err(e) => {
            checks.push((
                format!("config: {e}"),
                false,
                format!("fix or remove {}, then `pcmail init`", paths.config().display()),
            ));
            None
        }
    };
    if let Some(c) = &config {
        match pcmail_client::make_transport(&paths, c, pcmail_local::system_now) {
            Ok(t) => match t.call(&pcmail_core::protocol::Op::Hello) {
                Ok(v) => {
                    checks.push((
                        format!(
                            "server reachable: {} ({}){}",
                            t.describe(),
                            v["server"].as_str().unwrap_or("?"),
                            // Which of several addresses answered this time.
                            if c.failover_urls.is_empty() { "" } else { " answered" }
                        ),
                        true,
                        String::new(),
                    ));
                    checks.extend(transport_check(c, &v));
                }
                Err(e @ pcmail_client::transport::CallError::Untrusted(_)) => checks.push((
                    format!("server: {e}"),
                    false,
                    "re-enrol or pin the new fingerprint, as the message says, once the admin confirms it".into(),
                )),
                Err(e) => checks.push((
                    format!("server: {e}"),
                    false,
                    "check the URL (`pcmail init --server`), the token (`pcmail token set`), and that the server runs"
                        .into(),
                )),
            },
            Err(e) => checks.push((format!("server: {e}"), false, "`pcmail token set` or PCMAIL_TOKEN".into())),
        }
        checks.extend(label_binding_check(&paths, c));
    }
    let now = pcmail_local::system_now();
    let alive = pcmail_local::locks::poller_alive(&paths);
    // A store that cannot be read stops every command: named, with the way back.
    let store = match pcmail_store::Store::open(&paths.store()) {
        Ok(s) => match s.integrity_problems() {
            Ok(p) if p.is_empty() => {
                checks.push((format!("PC store: {}", paths.store().display()), true, String::new()));
                Some(s)
            }
            Ok(p) => {
                let first: Vec<&str> = p.iter().take(3).map(String::as_str).collect();
                checks.push((
                    format!("PC store: {} is damaged ({})", paths.store().display(), first.join("; ")),
                    false,
                    pcmail_store::recovery(&paths.store()),
                ));
                Some(s)
            }
            Err(e) => {
                checks.push((format!("PC store: {e}"), false, pcmail_store::recovery(&paths.store())));
                None
            }
        },
        Err(pcmail_store::StoreError::Unreadable { source, .. }) => {
            checks.push((
                format!("PC store: {} cannot be read ({source})", paths.store().display()),
                false,
                pcmail_store::recovery(&paths.store()),
            ));
            None
        }
        Err(e) => {
            checks.push((format!("PC store: {e}"), false, format!("check {}", paths.store().display())));
            None
        }
    };
    let last = store.as_ref().and_then(|s| s.last_poll_ok_at().ok().flatten());
    let last_error = store.as_ref().and_then(|s| s.meta_get(pcmail_store::meta::LAST_POLL_ERROR).ok().flatten());
    let ago = last.map(|t| format!("{} ago", age(now - t))).unwrap_or_else(|| "never".into());
    let hung_after = pcmail_client::watchdog::HUNG_AFTER_MS;
    let keep_running =
        "`pcmail service install` (starts at login, restarts on failure), or `pcmail daemon`, or the tray app";
    if !alive {
        checks.push((format!("poller: not running (last successful poll {ago})"), false, keep_running.into()));
    } else if last.is_none_or(|t| now - t > hung_after) {
        let why = last_error.map(|e| format!("; last error: {e}")).unwrap_or_default();
        checks.push((
            format!("poller: running, but its last successful poll was {ago}{why}"),
            false,
            "its watchdog restarts a hung poller after 10 minutes; check the server (`pcmail sync` shows the error)"
                .into(),
        ));
    } else {
        checks.push((format!("poller: running; last successful poll {ago}"), true, String::new()));
    }
    // Marks the server refused are dropped with a record: say so (not a failure of this PC).
    if let Some(dropped) = store.as_ref().and_then(|s| s.dropped_marks().ok()).filter(|d| !d.is_empty()) {
        let (_, id, op, why) = dropped.last().expect("not empty");
        checks.push((
            format!("marks: {} dropped (the newest: {op} on {id}: {why})", dropped.len()),
            true,
            String::new(),
        ));
    }
    // Warnings: worth knowing, not a failure (the command still exits 0).
    let mut warnings: Vec<(String, String)> = vec![];
    // Whether the running poller answers lease commands (a daemon does; the
    // tray app, or a daemon older than this pcmail, does not): only speed.
    if alive {
        let socket = paths.command_socket();
        if pcmail_local::cmdsock::answers(&socket) {
            checks.push((
                format!(
                    "lease commands: the daemon answers them ({}; `pcmail-hook lease claim|release`)",
                    socket.display()
                ),
                true,
                String::new(),
            ));
        } else {
            warnings.push((
                "lease commands: the running poller does not answer them (the tray app, a daemon older than this pcmail, or a PCMAIL_HOME too long for a socket's path: the daemon's log says which); `pcmail lease` does the work itself, slower".into(),
                "run `pcmail daemon` (`pcmail service install` restarts it) from a PCMAIL_HOME under ~100 characters to answer `pcmail-hook lease claim|release` in about a process start".into(),
            ));
        }
    }
    hooks_checks(&mut checks, &mut warnings, fix);
    let all_ok = checks.iter().all(|c| c.1);
    if json {
        let mut v: Vec<_> = checks
            .iter()
            .map(|(w, ok, fix)| json!({"check": w, "ok": ok, "level": if *ok { "ok" } else { "fail" }, "fix": fix}))
            .collect();
        v.extend(warnings.iter().map(|(w, fix)| json!({"check": w, "ok": false, "level": "warn", "fix": fix})));
        println!("{}", json!({"ok": all_ok, "warnings": warnings.len(), "checks": v}));
    } else {
        for (what, ok, fix) in &checks {
            println!("{} {}", if *ok { "ok  " } else { "FAIL" }, what);
            if !ok {
                println!("     fix: {fix}");
            }
        }
        for (what, fix) in &warnings {
            println!("warn {what}");
            println!("     fix: {fix}");
        }
    }
    if all_ok {
        Ok(())
    } else {
        // The checks are the answer (on stdout under --json too): not a second object.
        anyhow::bail!(crate::exit::Shown { exit: pcmail_api::Exit::Error, message: "some checks failed".into() })
    }
}

/// Secrets cross a network only inside TLS. A server on
/// `--insecure-http` says so in `hello`; a plain http:// URL to another
/// machine is the same risk seen from this PC.
fn transport_check(c: &pcmail_local::config::Config, hello: &serde_json::Value) -> Option<(String, bool, String)> {
    let url = c.server.url()?;
    let fix = "restart `pcmail serve` with --tls (a self-signed certificate, pinned by the PCs through their join codes) \
               or --tls-cert/--tls-key, then re-enrol each PC (`pcmail roster add LABEL`, `pcmail init --join CODE --server https://…`) \
               or pin it (`pcmail init --server https://… --tls-fingerprint FP`)";
    if hello.get("insecureHttp") == Some(&serde_json::Value::Bool(true)) {
        return Some((
            "transport: the server runs with --insecure-http: the admin secret and credentials cross the network in clear".into(),
            false,
            fix.into(),
        ));
    }
    let host = url.split("://").nth(1).unwrap_or("").split(['/', '?']).next().unwrap_or("");
    let host =
        host.rsplit_once(':').map_or(host, |(h, port)| if port.chars().all(|d| d.is_ascii_digit()) { h } else { host });
    let loopback = host == "localhost"
        || host.trim_matches(['[', ']']).parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if url.starts_with("http://") && !loopback {
        return Some((
            format!("transport: plain HTTP to {host}: the admin secret and credentials cross the network in clear"),
            false,
            fix.into(),
        ));
    }
    c.tls_fingerprint
        .as_ref()
        .map(|fp| (format!("transport: TLS, certificate pinned (SHA-256 {fp})"), true, String::new()))
}

/// Whether this PC's label is bound to this installation, and where its
/// credential lives. None for the embedded server.
fn label_binding_check(
    paths: &pcmail_local::config::Paths,
    c: &pcmail_local::config::Config,
) -> Option<(String, bool, String)> {
    use pcmail_client::token::credential;
    use pcmail_local::config::ServerConfig;
    let url = match &c.server {
        ServerConfig::Http { url } | ServerConfig::AppsScript { url } => url,
        ServerConfig::Embedded { .. } => return None,
    };
    let label = &c.label;
    let cred = match credential::load(url, label, c.installation.as_deref()) {
        Ok(found) => found,
        Err(e) => {
            return Some((
                format!("label {label:?}: {e}"),
                false,
                "set PCMAIL_CREDENTIAL to a long random secret (`openssl rand -hex 32`)".into(),
            ))
        }
    };
    let client = pcmail_client::Client::open(paths.clone()).ok()?;
    // A PC op answers label_taken when the label belongs to another installation,
    // revoked / not_enrolled when its credential is refused.
    let probe = client.transport.call(&pcmail_core::protocol::Op::Status { ids: vec!["mail-0-00000000".into()] });
    if let Err(pcmail_client::transport::CallError::Server(p)) = &probe {
        let rejoin = format!("ask the admin for a join code (`pcmail roster add {label}`), then `pcmail init --join CODE --server {url}`");
        match p.code {
            pcmail_core::ErrorCode::LabelTaken => {
                return Some((
                    format!("label {label:?}: belongs to another installation; this PC's requests are refused"),
                    false,
                    "`pcmail init --label NEW` picks another label; `pcmail init --replace` takes this one over (the other PC loses access)".into(),
                ))
            }
            pcmail_core::ErrorCode::Revoked => {
                return Some((format!("label {label:?}: revoked by the admin; this PC's requests are refused"), false, rejoin))
            }
            pcmail_core::ErrorCode::NotEnrolled => {
                return Some((format!("label {label:?}: this PC's credential is not enrolled ({})", p.message), false, rejoin))
            }
            _ => {}
        }
    }
    // Migration to per-PC credentials: a PC still on the shared token (its next poll exchanges it).
    let hello = client.transport.call(&pcmail_core::protocol::Op::Hello).ok();
    let features =
        hello.as_ref().and_then(|h| h.get("features")).and_then(|f| f.as_array()).cloned().unwrap_or_default();
    if features.iter().any(|f| f == pcmail_core::protocol::FEATURE_CREDENTIALS) && client.claim_record().is_none() {
        return Some((
            format!(
                "label {label:?}: still on the shared token; its next poll exchanges it for this PC's own credential"
            ),
            true,
            String::new(),
        ));
    }
    Some(match (client.claim_record().as_deref(), cred) {
        (Some("bound"), Some((_, source))) => {
            (format!("label {label:?}: bound to this installation (credential {})", source.describe()), true, String::new())
        }
        (Some("bound"), None) => (
            format!("label {label:?}: bound, but this installation's credential is gone (keyring entry or PCMAIL_CREDENTIAL)"),
            false,
            "restore PCMAIL_CREDENTIAL, or `pcmail init --replace` to bind the label to a new credential".into(),
        ),
        (Some(_), _) => (format!("label {label:?}: this server does not bind labels to installations"), true, String::new()),
        (None, _) => (format!("label {label:?}: not bound yet (claimed by `pcmail init` or the next poll)"), true, String::new()),
    })
}

/// The Claude Code hook checks of `doctor`: registration and form (migrated first with `--fix`),
/// then the installed Claude Code's version.
fn hooks_checks(checks: &mut Vec<(String, bool, String)>, warnings: &mut Vec<(String, String)>, fix: bool) {
    use pcmail_claude_hooks::{ClaudeCodeVersion, HandlerForm, InstallLevel, DEFAULT_EVENTS};
    use pcmail_claude_hooks::{EXEC_FORM_SINCE, MIN_CLAUDE_CODE};
    let v = |(a, b, c): (u32, u32, u32)| format!("{a}.{b}.{c}");
    let old_form = format!(
        "old exec form with args: blocks prompts on Claude Code before {}; run `pcmail doctor --fix` or `pcmail hooks install`",
        v(EXEC_FORM_SINCE)
    );
    let Some(path) = pcmail_claude_hooks::default_settings_path() else {
        checks.push(("Claude Code hooks: no home directory".into(), false, "set HOME".into()));
        return;
    };
    let mut state = pcmail_claude_hooks::status(&path);
    if fix && state.as_ref().is_ok_and(|s| s.needs_migration()) {
        let fixed = crate::cmd::hooks::hook_spec().and_then(|spec| Ok(pcmail_claude_hooks::install(&path, &spec)?));
        match fixed {
            Ok(o) => checks.push((
                format!(
                    "fixed: hooks moved to the shell form in {}{}",
                    path.display(),
                    o.backup.map(|b| format!(" (backup {})", b.display())).unwrap_or_default()
                ),
                true,
                String::new(),
            )),
            Err(e) => checks.push((format!("fix of the hooks failed: {e:#}"), false, "`pcmail hooks install`".into())),
        }
        state = pcmail_claude_hooks::status(&path);
    }
    // The plugin's hooks file is static: when settings.json registers the same events,
    // pcmail-hook keeps the plugin's run silent and the settings entry acts.
    let plugin = pcmail_claude_hooks::enabled_plugin(&path);
    if let (Some(p), Ok(s)) = (&plugin, &state) {
        let mut events: Vec<&str> = s.hooks.iter().map(|h| h.event.as_str()).collect();
        events.dedup();
        let line = if events.is_empty() {
            format!("Claude Code plugin {p}: enabled, its hooks act")
        } else {
            format!(
                "Claude Code plugin {p}: enabled; {} also registers {}: the settings.json entries act, the plugin's stay silent (`pcmail hooks uninstall` leaves the plugin alone)",
                path.display(),
                events.join(", ")
            )
        };
        checks.push((line, true, String::new()));
    }
    match state {
        Ok(s) if plugin.is_some() && s.hooks.is_empty() => {
            checks.push(("Claude Code hooks: none in settings.json (the plugin's act)".into(), true, String::new()));
        }
        Ok(s) => {
            let level = s.level(DEFAULT_EVENTS);
            let old = s.hooks.iter().any(|h| h.form == HandlerForm::ExecWithArgs);
            let form = if s.hooks.is_empty() {
                String::new()
            } else if old {
                format!(", {old_form}")
            } else {
                ", shell form".into()
            };
            let missing = s.hooks.iter().find(|h| !h.exe_exists).map(|h| format!(", {} is missing", h.exe.display()));
            let ok = level == InstallLevel::Installed && s.all_exes_exist() && !old;
            let fix = if old { "`pcmail doctor --fix` or `pcmail hooks install`" } else { "`pcmail hooks install`" };
            let events = s.registered_events();
            let events = if events.is_empty() { String::new() } else { format!(" for {}", events.join(", ")) };
            let not_for = s.missing_events(DEFAULT_EVENTS);
            let not_for = if not_for.is_empty() || s.hooks.is_empty() {
                String::new()
            } else {
                format!("; not for {}", not_for.join(", "))
            };
            checks.push((
                format!("Claude Code hooks: {level}{events}{not_for}{form}{}", missing.unwrap_or_default()),
                ok,
                fix.into(),
            ));
        }
        Err(e) => checks.push((
            format!("Claude Code hooks: {e}"),
            false,
            "fix ~/.claude/settings.json, then `pcmail hooks install`".into(),
        )),
    }
    let (version, ok) = match pcmail_claude_hooks::claude_code_version(
        std::ffi::OsStr::new("claude"),
        std::time::Duration::from_secs(5),
    ) {
        // Nothing is broken, but nothing here proves the hooks reach a model either.
        ClaudeCodeVersion::NotOnPath => {
            warnings.push((
                "Claude Code version: claude not on PATH (the hooks and the installed events cannot be checked against it)"
                    .into(),
                format!(
                    "install Claude Code {} or newer, or put `claude` on PATH; ignore this on a PC without it",
                    v(MIN_CLAUDE_CODE)
                ),
            ));
            return;
        }
        ClaudeCodeVersion::Found { line, version } => {
            let ok = version.is_none_or(|x| x >= MIN_CLAUDE_CODE);
            (
                if ok {
                    line
                } else {
                    format!("{line}, older than {}: the hooks do not reach the model", v(MIN_CLAUDE_CODE))
                },
                ok,
            )
        }
        ClaudeCodeVersion::Failed(e) => (format!("unknown ({e})"), true),
    };
    checks.push((
        format!("Claude Code version: {version}"),
        ok,
        format!("update Claude Code to {} or newer", v(MIN_CLAUDE_CODE)),
    ));
}

/// A probe's answer (`result.data`, JSON) for a person: one `key: value`
/// line each, nested parts indented, lists of records one record a line,
/// times (`…At` keys holding milliseconds) as UTC times, text neutralised
/// (a PC's answer is its data, not something to put on a terminal as is).
pub fn data_lines(v: &serde_json::Value) -> Vec<String> {
    let mut out = vec![];
    data_into(&mut out, 0, None, v);
    out
}

fn scalar(key: Option<&str>, v: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    Some(match v {
        Value::Null => "-".into(),
        Value::Bool(b) => if *b { "yes" } else { "no" }.into(),
        Value::Number(n) => match (key, n.as_i64()) {
            (Some(k), Some(ms)) if k.ends_with("At") && ms > 1_000_000_000_000 => time(ms),
            _ => n.to_string(),
        },
        Value::String(s) => neutralise(&truncate_chars(s, 200)),
        Value::Array(a) if a.is_empty() => "none".into(),
        Value::Array(a) if a.iter().all(|x| !x.is_object() && !x.is_array()) => {
            a.iter().filter_map(|x| scalar(None, x)).collect::<Vec<_>>().join(", ")
        }
        Value::Object(o) if o.is_empty() => "-".into(),
        _ => return None,
    })
}

fn data_into(out: &mut Vec<String>, depth: usize, key: Option<&str>, v: &serde_json::Value) {
    use serde_json::Value;
    let pad = "  ".repeat(depth);
    let label = key.map(|k| format!("{k}: ")).unwrap_or_default();
    if let Some(s) = scalar(key, v) {
        out.push(format!("{pad}{label}{s}"));
        return;
    }
    match v {
        Value::Object(o) => {
            let inner = if key.is_some() {
                out.push(format!("{pad}{}:", key.unwrap_or_default()));
                depth + 1
            } else {
                depth
            };
            for (k, x) in o {
                data_into(out, inner, Some(k), x);
            }
        }
        Value::Array(a) => {
            out.push(format!("{pad}{}({}):", key.map(|k| format!("{k} ")).unwrap_or_default(), a.len()));
            for x in a {
                // A record of plain fields is one line; anything deeper is nested under its dash.
                let flat = x.as_object().map(|o| {
                    o.iter().map(|(k, f)| scalar(Some(k), f).map(|s| format!("{k}: {s}"))).collect::<Option<Vec<_>>>()
                });
                match flat {
                    Some(Some(fields)) => out.push(format!("{pad}  - {}", fields.join(", "))),
                    _ => {
                        out.push(format!("{pad}  -"));
                        data_into(out, depth + 2, None, x);
                    }
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_probe_answer_reads_as_lines_for_a_person() {
        let v = json!({
            "pcs": [{"label": "pc-a", "lastPollAt": 1_800_000_000_000i64, "bound": true, "executor": null}],
            "requireCredentials": false,
            "poller": {"consecutiveFailures": 0, "lastPollError": "x\u{1b}[31m"},
            "cache": [],
        });
        let lines = data_lines(&v);
        let want = [
            "cache: none".to_string(),
            "pcs (1):".into(),
            "  - label: pc-a, lastPollAt: 2027-01-15 08:00:00.000Z, bound: yes, executor: -".into(),
            "poller:".into(),
            "  consecutiveFailures: 0".into(),
            format!("  lastPollError: {}", neutralise("x\u{1b}[31m")),
            "requireCredentials: no".into(),
        ];
        // serde_json keeps the keys' order or sorts them, by a feature another crate may turn on.
        let (mut got, mut want) = (lines.clone(), want.to_vec());
        got.sort();
        want.sort();
        assert_eq!(got, want, "{lines:#?}");
        assert!(!lines.concat().contains('\u{1b}'), "no terminal escape gets through");
    }
}
