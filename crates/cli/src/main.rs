//! `pcmail`: argument parsing and wiring. The logic lives in pcmail-client
//! (and pcmail-server for `serve`); this file only parses, calls and prints.

mod demo;
mod exit;
mod print;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use exit::{fail, Exit};
use pcmail_client::config::{Config, Paths, ServerConfig};
use pcmail_api::{MailKind, WaitState};
use pcmail_client::{hook, locks, notify, spawn, Client, ClientError};
use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(name = "pcmail", version, about = "Mail between AI coding sessions on several PCs, with a state the sender can trust")]
struct Cli {
    /// Machine-readable output (every command that reads).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, ValueEnum)]
enum KindArg {
    Note,
    Request,
    Decision,
}

#[derive(Clone, Copy, ValueEnum)]
enum WaitArg {
    Delivered,
    Seen,
    Done,
}

impl WaitArg {
    fn state(self) -> WaitState {
        match self {
            WaitArg::Delivered => WaitState::Delivered,
            WaitArg::Seen => WaitState::Seen,
            WaitArg::Done => WaitState::Done,
        }
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Set this PC's label and server (default: the embedded server, no setup).
    Init {
        #[arg(long)]
        label: Option<String>,
        /// `embedded`, a `pcmail serve` URL (http://host:7878/api) or an Apps Script /exec URL.
        #[arg(long)]
        server: Option<String>,
        /// SQLite file of the embedded server (share one file to link sessions of several users on one machine).
        #[arg(long)]
        embedded_db: Option<PathBuf>,
        #[arg(long)]
        poll_interval: Option<u64>,
        /// Discord-style webhook for decision/work/urgent notifications.
        #[arg(long)]
        webhook: Option<String>,
    },
    /// Store the server token in the OS keyring (read from stdin).
    Token {
        #[arg(value_parser = ["set", "clear"])]
        action: String,
        /// The token `pcmail serve` requires (default: the one for the configured server URL).
        #[arg(long)]
        serve: bool,
    },
    /// Send mail to an exact roster label, number or hostname (`*` = every PC).
    Send {
        to: String,
        #[arg(long, value_enum, default_value = "note")]
        kind: KindArg,
        #[arg(long, short)]
        subject: Option<String>,
        /// The body; or --file, or stdin.
        #[arg(long, short)]
        body: Option<String>,
        #[arg(long, short)]
        file: Option<PathBuf>,
        #[arg(long)]
        urgent: bool,
        /// Expiry: a duration (30m, 2h, 3d) or an RFC 3339 time.
        #[arg(long)]
        expires: Option<String>,
        /// Written by a program, not at a person's request.
        #[arg(long)]
        auto: bool,
        #[arg(long, value_enum)]
        wait_for: Option<WaitArg>,
        /// Seconds to wait with --wait-for.
        #[arg(long, default_value_t = 300)]
        timeout: u64,
    },
    /// The whole timeline of mail ids (from the server).
    Status {
        #[arg(required = true)]
        ids: Vec<String>,
        #[arg(long, value_enum)]
        wait_for: Option<WaitArg>,
        #[arg(long, default_value_t = 300)]
        timeout: u64,
    },
    /// Mail for this PC (open by default).
    Inbox {
        /// Include done, failed and expired mail.
        #[arg(long)]
        all: bool,
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Mail this PC sent, with its live state.
    Sent {
        #[arg(long, default_value_t = 30)]
        limit: usize,
    },
    /// Show a mail and mark it seen.
    Read { id: String },
    /// Mark a mail done without a reply.
    Ack { id: String },
    /// Answer a mail (exit 3 when it is itself a reply).
    Reply {
        id: String,
        #[arg(long, short)]
        body: Option<String>,
        #[arg(long, short)]
        file: Option<PathBuf>,
        #[arg(long)]
        auto: bool,
    },
    /// Mark a mail failed with a reason.
    Fail {
        id: String,
        #[arg(long, required = true)]
        reason: String,
    },
    /// The roster (number ⇔ label ⇔ hostname), or change it.
    Roster {
        #[command(subcommand)]
        action: Option<RosterCmd>,
    },
    /// Alerts from the server's sweep.
    Alerts {
        #[arg(long)]
        all: bool,
    },
    /// One poll cycle.
    Sync {
        /// No output (used by the hook's detached poller).
        #[arg(long)]
        quiet: bool,
    },
    /// The poller loop (one per PC user).
    Daemon,
    /// Run the HTTP server (127.0.0.1:7878 unless told otherwise).
    Serve {
        #[arg(long, default_value = "127.0.0.1:7878")]
        listen: std::net::SocketAddr,
        #[arg(long)]
        db: Option<PathBuf>,
        #[arg(long)]
        webhook: Option<String>,
    },
    /// Check config, server, poller and hooks, each with the fix.
    Doctor,
    /// Claude Code hooks in ~/.claude/settings.json.
    Hooks {
        #[arg(value_parser = ["install", "uninstall", "status"])]
        action: String,
        #[arg(long)]
        settings: Option<PathBuf>,
    },
    /// The Claude Code hook itself (SessionStart / UserPromptSubmit). Reads hook JSON on stdin.
    Hook,
    /// Two simulated PCs on the embedded default exchange mail; prints timelines and a Mermaid diagram.
    Demo,
    /// The MCP server on stdio (every mail operation as a tool), or `mcp install|uninstall` into an agent's config.
    Mcp {
        #[command(subcommand)]
        action: Option<McpCmd>,
    },
}

#[derive(Subcommand)]
enum McpCmd {
    /// Register `pcmail mcp` with Claude Code (`claude mcp add`), Codex (~/.codex/config.toml) or Gemini CLI (~/.gemini/settings.json).
    Install {
        #[arg(long, value_enum, default_value = "user")]
        scope: ScopeArg,
        #[arg(long, value_enum, default_value = "claude")]
        client: AgentArg,
    },
    /// Remove what `install` registered.
    Uninstall {
        #[arg(long, value_enum, default_value = "user")]
        scope: ScopeArg,
        #[arg(long, value_enum, default_value = "claude")]
        client: AgentArg,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum ScopeArg {
    User,
    Project,
}

#[derive(Clone, Copy, ValueEnum)]
enum AgentArg {
    Claude,
    Codex,
    Gemini,
}

#[derive(Subcommand)]
enum RosterCmd {
    Add {
        label: String,
        #[arg(long)]
        hostname: String,
        #[arg(long)]
        number: Option<i64>,
    },
    Remove { label: String },
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            std::process::exit(if e.use_stderr() { Exit::Usage as i32 } else { 0 });
        }
    };
    // The hook must stay silent and fast whatever happens.
    if matches!(cli.cmd, Cmd::Hook) {
        run_hook();
        std::process::exit(0);
    }
    let filter = std::env::var("PCMAIL_LOG").unwrap_or_else(|_| "warn".into());
    let _ = tracing_subscriber::fmt().with_writer(std::io::stderr).with_env_filter(filter).try_init();
    let code = match run(cli) {
        Ok(()) => 0,
        Err(e) => fail(&e),
    };
    std::process::exit(code);
}

fn run_hook() {
    let mut input = vec![];
    if !std::io::stdin().is_terminal() {
        let _ = std::io::stdin().take(1 << 20).read_to_end(&mut input);
    }
    let Ok(paths) = Paths::from_env() else { return };
    let parsed = hook::parse_input(&input);
    let Ok(r) = hook::run(&paths, &parsed, pcmail_client::system_now()) else { return };
    if r.spawn_poller {
        if let Ok(exe) = std::env::current_exe() {
            let _ = spawn::spawn_detached(&exe, &["sync", "--quiet"]);
        }
    }
    if let Some(out) = r.output {
        println!("{out}");
    }
}

fn paths() -> anyhow::Result<Paths> {
    Ok(Paths::from_env()?)
}

fn open() -> anyhow::Result<Client> {
    Ok(Client::open(paths()?)?)
}

fn body_from(body: Option<String>, file: Option<PathBuf>) -> anyhow::Result<String> {
    if let Some(b) = body {
        return Ok(b);
    }
    if let Some(f) = file {
        return std::fs::read_to_string(&f).with_context(|| format!("cannot read {}", f.display()));
    }
    if std::io::stdin().is_terminal() {
        anyhow::bail!(ClientError::Invalid("no body: pass --body, --file, or pipe it on stdin".into()));
    }
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).context("cannot read the body from stdin")?;
    Ok(s)
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let json = cli.json;
    match cli.cmd {
        Cmd::Init { label, server, embedded_db, poll_interval, webhook } => {
            let p = paths()?;
            let mut c = Config::load(&p)?;
            if let Some(l) = label {
                if !pcmail_core::roster::is_valid_label(&l) {
                    anyhow::bail!(ClientError::Invalid(format!("label {l:?}: use lower-case a-z 0-9 . _ - (max 40)")));
                }
                c.label = l;
            }
            if let Some(s) = server {
                c.server = if s == "embedded" { ServerConfig::Embedded { db: embedded_db.clone() } } else { ServerConfig::from_url(&s) };
            } else if let Some(db) = embedded_db {
                c.server = ServerConfig::Embedded { db: Some(db) };
            }
            if let Some(n) = poll_interval {
                c.poll_interval_secs = n;
            }
            if webhook.is_some() {
                c.notify_webhook = webhook;
            }
            c.save(&p)?;
            println!("pcmail: this PC is {:?}, server: {} (config {})", c.label, c.server.describe(), p.config().display());
            Ok(())
        }
        Cmd::Token { action, serve } => {
            let c = Config::load(&paths()?)?;
            let key = match &c.server {
                ServerConfig::Http { url } | ServerConfig::AppsScript { url } if !serve => url.clone(),
                _ => "serve".to_string(),
            };
            if action == "clear" {
                pcmail_client::token::delete(&key)?;
                println!("pcmail: token removed from the OS keyring");
            } else {
                let mut t = String::new();
                std::io::stdin().read_line(&mut t)?;
                let t = t.trim();
                if t.is_empty() {
                    anyhow::bail!(ClientError::Invalid("empty token on stdin".into()));
                }
                pcmail_client::token::store(&key, t)?;
                println!("pcmail: token stored in the OS keyring for {key}");
            }
            Ok(())
        }
        Cmd::Send { to, kind, subject, body, file, urgent, expires, auto, wait_for, timeout } => {
            let mut client = open()?;
            let body = body_from(body, file)?;
            let kind = match kind {
                KindArg::Note => MailKind::Note,
                KindArg::Request => MailKind::Request,
                KindArg::Decision => MailKind::Decision,
            };
            let args = pcmail_api::SendArgs { to, kind, subject, body, urgent, expires, auto, wait_for: None, timeout_secs: Some(timeout) };
            let out = pcmail_api::send_only(&mut client, &args)?;
            let Some(w) = wait_for else {
                print::send_outcome(&out, json);
                return Ok(());
            };
            if !json {
                print::send_outcome(&out, false);
                if out.queued {
                    eprintln!("pcmail: waiting for the server to come back…");
                }
            }
            let mails = pcmail_api::wait_for_sent(&mut client, &out, w.state(), timeout)?;
            if json {
                println!("{}", serde_json::to_string(&pcmail_api::SendResult { outcome: out, mails: Some(mails) })?);
            } else {
                print::timelines(&mails, false);
            }
            Ok(())
        }
        Cmd::Status { ids, wait_for, timeout } => {
            let mut client = open()?;
            let (mails, missing) = match wait_for {
                Some(w) => {
                    let args = pcmail_api::WaitForArgs { ids, state: w.state(), timeout_secs: Some(timeout) };
                    (pcmail_api::wait_for(&mut client, &args)?.mails, vec![])
                }
                None => {
                    let r = pcmail_api::status(&mut client, &pcmail_api::IdsArgs { ids })?;
                    (r.mails, r.missing)
                }
            };
            print::timelines(&mails, json);
            if !missing.is_empty() {
                anyhow::bail!(ClientError::NotFound(missing.join(", ")));
            }
            Ok(())
        }
        Cmd::Inbox { all, limit } => {
            let r = pcmail_api::inbox(&paths()?, &pcmail_api::InboxArgs { all, limit })?;
            print::inbox(&r.mails, pcmail_client::system_now(), json);
            Ok(())
        }
        Cmd::Sent { limit } => {
            let r = pcmail_api::sent(&mut open()?, &pcmail_api::SentArgs { limit })?;
            print::sent(&r.mails, json);
            Ok(())
        }
        Cmd::Read { id } => {
            let m = pcmail_api::read(&mut open()?, &pcmail_api::IdArgs { id })?;
            print::one_mail(&m, json);
            Ok(())
        }
        Cmd::Ack { id } => {
            let m = pcmail_api::ack(&mut open()?, &pcmail_api::IdArgs { id })?;
            print::marked(&m, json);
            Ok(())
        }
        Cmd::Fail { id, reason } => {
            let m = pcmail_api::fail(&mut open()?, &pcmail_api::FailArgs { id, reason })?;
            print::marked(&m, json);
            Ok(())
        }
        Cmd::Reply { id, body, file, auto } => {
            let mut client = open()?;
            // Refuse a reply to a reply before asking for a body.
            pcmail_api::reply_precheck(&client, &id)?;
            let body = body_from(body, file)?;
            let out = pcmail_api::reply(&mut client, &pcmail_api::ReplyArgs { id, body, auto })?;
            print::send_outcome(&out, json);
            Ok(())
        }
        Cmd::Roster { action } => {
            let mut client = open()?;
            match action {
                None => {
                    let r = pcmail_api::roster(&mut client)?;
                    if let Some(e) = &r.unreachable {
                        eprintln!("pcmail: server unreachable ({e}); showing the cached roster");
                    }
                    print::roster(&r.pcs, &r.me, json);
                }
                Some(RosterCmd::Add { label, hostname, number }) => {
                    let r = pcmail_api::roster_add(&mut client, &pcmail_api::RosterAddArgs { label, hostname, number })?;
                    println!("{}", if json { r.to_string() } else { format!("pcmail: roster now at version {}", r["version"]) });
                }
                Some(RosterCmd::Remove { label }) => {
                    let r = pcmail_api::roster_remove(&mut client, &pcmail_api::RosterRemoveArgs { label })?;
                    println!("{}", if json { r.to_string() } else { format!("pcmail: removed: {}", r["removed"]) });
                }
            }
            Ok(())
        }
        Cmd::Alerts { all } => {
            let r = pcmail_api::alerts(&mut open()?, &pcmail_api::AlertsArgs { all })?;
            if let Some(e) = &r.unreachable {
                eprintln!("pcmail: server unreachable ({e}); showing cached alerts");
            }
            print::alerts(&r.alerts, json);
            Ok(())
        }
        Cmd::Sync { quiet } => {
            let r = pcmail_api::sync(paths()?, quiet)?;
            match (&r.report, &r.skipped) {
                (Some(report), _) if !quiet => print::cycle(report, json),
                // The daemon does the work: the quiet poller leaves silently.
                (None, Some(why)) if !quiet => eprintln!("pcmail: {why}"),
                _ => {}
            }
            Ok(())
        }
        Cmd::Daemon => daemon(),
        Cmd::Serve { listen, db, webhook } => {
            let p = paths()?;
            let token = pcmail_client::token::load("serve").map_err(|e| {
                anyhow::anyhow!(ClientError::Invalid(format!(
                    "pcmail serve needs a token: {e} (`echo TOKEN | pcmail token set --serve`, or PCMAIL_TOKEN)"
                )))
            })?;
            let mut opts = pcmail_server::http::ServeOptions::new(db.unwrap_or_else(|| p.home.join("serve.db")), token);
            opts.listen = listen;
            opts.webhook_url = webhook;
            if !listen.ip().is_loopback() {
                eprintln!("pcmail: listening on {listen} — reachable from other machines; the token is the only guard");
            }
            pcmail_server::http::serve_blocking(opts)
        }
        Cmd::Doctor => print::doctor(json),
        Cmd::Hooks { action, settings } => {
            let path = settings.or_else(pcmail_claude_hooks::default_settings_path).context("no home directory")?;
            match action.as_str() {
                "install" => {
                    let exe = std::env::current_exe()?.canonicalize()?;
                    let o = pcmail_claude_hooks::install(&path, &pcmail_claude_hooks::HookSpec { exe, timeout_secs: 5 })?;
                    println!(
                        "pcmail: hooks {} in {}{}",
                        if o.changed { "installed" } else { "already installed" },
                        o.settings_path.display(),
                        o.backup.map(|b| format!(" (backup {})", b.display())).unwrap_or_default()
                    );
                }
                "uninstall" => {
                    let o = pcmail_claude_hooks::uninstall(&path)?;
                    println!("pcmail: hooks {} in {}", if o.changed { "removed" } else { "were not installed" }, o.settings_path.display());
                }
                _ => {
                    let s = pcmail_claude_hooks::status(&path)?;
                    println!("pcmail: hooks {:?} ({})", s.level(), path.display());
                }
            }
            Ok(())
        }
        Cmd::Hook => unreachable!("handled before logging starts"),
        Cmd::Demo => demo::run(json),
        Cmd::Mcp { action } => mcp(action),
    }
}

fn mcp(action: Option<McpCmd>) -> anyhow::Result<()> {
    use pcmail_mcp::install::{self, Agent, Outcome, Scope, Target};
    let (installing, scope, client) = match action {
        None => return Ok(pcmail_mcp::run_stdio(paths()?)?),
        Some(McpCmd::Install { scope, client }) => (true, scope, client),
        Some(McpCmd::Uninstall { scope, client }) => (false, scope, client),
    };
    let scope = match scope {
        ScopeArg::User => Scope::User,
        ScopeArg::Project => Scope::Project,
    };
    let agent = match client {
        AgentArg::Claude => Agent::Claude,
        AgentArg::Codex => Agent::Codex,
        AgentArg::Gemini => Agent::Gemini,
    };
    let as_api = |e: install::InstallError| {
        if e.is_usage() {
            pcmail_api::ApiError::Usage(e.to_string())
        } else {
            pcmail_api::ApiError::Local(e.to_string())
        }
    };
    let exe = std::env::current_exe()?.canonicalize()?;
    let t = Target::from_env(agent, scope, exe).map_err(as_api)?;
    let out = if installing { install::install(&t) } else { install::uninstall(&t) }.map_err(as_api)?;
    let verb = if installing { "installed" } else { "removed" };
    match out {
        Outcome::Claude { args } => println!("pcmail: MCP server {verb} (ran: claude {})", args.join(" ")),
        Outcome::File { path, changed: true, backup } => println!(
            "pcmail: MCP server {verb} in {}{}",
            path.display(),
            backup.map(|b| format!(" (backup {})", b.display())).unwrap_or_default()
        ),
        Outcome::File { path, changed: false, .. } => {
            println!("pcmail: MCP server {} in {}", if installing { "already installed" } else { "was not installed" }, path.display())
        }
    }
    Ok(())
}

fn daemon() -> anyhow::Result<()> {
    let p = paths()?;
    let Some(_lock) = locks::try_lock(&p.daemon_lock())? else {
        println!("pcmail: a daemon is already running for this PC user ({})", p.daemon_lock().display());
        return Ok(());
    };
    let mut client = Client::open(p)?;
    let interval = client.config.poll_interval();
    let wait_ms = if client.transport.long_poll() { 20_000 } else { 0 };
    let chans = notify::channels(&client.config);
    eprintln!("pcmail: daemon for {} polling {}", client.me(), client.config.server.describe());
    let mut failures: u32 = 0;
    loop {
        match client.sync_once(wait_ms) {
            Ok(report) => {
                failures = 0;
                if !report.stored.is_empty() {
                    tracing::info!("stored {} mail", report.stored.len());
                }
                let notes: Vec<_> = report.to_notify.iter().map(notify::Notification::for_mail).collect();
                if !notes.is_empty() {
                    let _ = notify::deliver(&chans, &notes, notify::PER_NOTIFICATION, notify::TOTAL);
                }
                std::thread::sleep(interval);
            }
            Err(e) => {
                failures += 1;
                let wait = pcmail_client::ops::backoff_ms(failures);
                eprintln!("pcmail: poll failed ({e}); retrying in {} s", wait / 1000);
                std::thread::sleep(Duration::from_millis(wait as u64));
            }
        }
    }
}
