//! `pcmail`: argument parsing and wiring. The logic lives in pcmail-client
//! (and pcmail-server for `serve`); this file only parses, calls and prints.

mod demo;
mod exit;
mod print;
mod service_cmd;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use exit::{fail, Exit};
use pcmail_client::config::{Config, Paths, ServerConfig};
use pcmail_client::ops::Draft;
use pcmail_client::{hook, locks, notify, spawn, Client, ClientError};
use pcmail_core::{Kind, MarkOp, Millis, State};
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
    fn state(self) -> State {
        match self {
            WaitArg::Delivered => State::Delivered,
            WaitArg::Seen => State::Seen,
            WaitArg::Done => State::Done,
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
    /// Keep this PC's poller running without the tray (systemd user unit, Task Scheduler task, launchd agent).
    Service {
        #[arg(value_parser = ["install", "uninstall", "status"])]
        action: String,
        /// With status: apply the self-healing rule (re-register and poll once when the service
        /// failed or the last good poll is older than 10 minutes).
        #[arg(long)]
        repair: bool,
    },
    /// Two simulated PCs on the embedded default exchange mail; prints timelines and a Mermaid diagram.
    Demo,
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

fn parse_expires(s: &str, now: Millis) -> anyhow::Result<Millis> {
    let s = s.trim();
    let unit = |c: char| -> Option<i64> {
        match c {
            's' => Some(1_000),
            'm' => Some(60_000),
            'h' => Some(3_600_000),
            'd' => Some(86_400_000),
            _ => None,
        }
    };
    if let Some(last) = s.chars().last() {
        if let (Some(mult), Ok(n)) = (unit(last), s[..s.len() - 1].parse::<i64>()) {
            if n > 0 {
                return Ok(now + n * mult);
            }
        }
    }
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Ok(t.timestamp_millis());
    }
    anyhow::bail!(ClientError::Invalid(format!("--expires {s:?}: use a duration like 30m, 2h, 3d or an RFC 3339 time")))
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
            let now = client.now();
            let expires_at = expires.map(|e| parse_expires(&e, now)).transpose()?;
            let kind = match kind {
                KindArg::Note => Kind::Note,
                KindArg::Request => Kind::Request,
                KindArg::Decision => Kind::Decision,
            };
            let subject = subject.unwrap_or_default();
            let out = client.send(Draft { to, kind, subject, body, urgent, expires_at, auto })?;
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
            // A broadcast is waited for copy by copy (the original id expands).
            let originals: std::collections::BTreeSet<String> =
                out.ids.iter().map(|i| i.split('~').next().unwrap_or(i).to_string()).collect();
            let mut all = vec![];
            for id in originals {
                all.extend(client.wait_for(&id, w.state(), Duration::from_secs(timeout))?);
            }
            if json {
                let mut v = serde_json::to_value(&out)?;
                v["mails"] = serde_json::to_value(&all)?;
                println!("{v}");
            } else {
                print::timelines(&all, false);
            }
            Ok(())
        }
        Cmd::Status { ids, wait_for, timeout } => {
            let mut client = open()?;
            let (mails, missing) = match wait_for {
                Some(w) => {
                    let mut all = vec![];
                    for id in &ids {
                        all.extend(client.wait_for(id, w.state(), Duration::from_secs(timeout))?);
                    }
                    (all, vec![])
                }
                None => client.status(&ids)?,
            };
            print::timelines(&mails, json);
            if !missing.is_empty() {
                anyhow::bail!(ClientError::NotFound(missing.join(", ")));
            }
            Ok(())
        }
        Cmd::Inbox { all, limit } => {
            let p = paths()?;
            let store = pcmail_store::Store::open(&p.store())?;
            let filter: &[State] = if all { &[] } else { &[State::New, State::Seen] };
            let rows = store.inbox_list(filter, limit)?;
            print::inbox(&rows, pcmail_client::system_now(), json);
            Ok(())
        }
        Cmd::Sent { limit } => {
            let mut client = open()?;
            // Fresh states from the server where it answers, else the cache.
            let _ = client.send_queued();
            let open_ids: Vec<String> =
                client.store.sent_list(limit)?.into_iter().filter(|m| !m.state.is_final()).map(|m| m.id).collect();
            for chunk in open_ids.chunks(pcmail_core::model::limits::STATUS_IDS_MAX) {
                if client.status(chunk).is_err() {
                    break;
                }
            }
            let rows = client.store.sent_list(limit)?;
            print::sent(&rows, json);
            Ok(())
        }
        Cmd::Read { id } => {
            let mut client = open()?;
            let m = client.read(&id, None)?;
            print::one_mail(&m, json);
            Ok(())
        }
        Cmd::Ack { id } => {
            let mut client = open()?;
            let s = client.mark(&id, MarkOp::Ack, None, None)?;
            print::marked(&id, s, client.store.pending_mark_count()?, json);
            Ok(())
        }
        Cmd::Fail { id, reason } => {
            let mut client = open()?;
            let s = client.mark(&id, MarkOp::Fail, Some(&reason), None)?;
            print::marked(&id, s, client.store.pending_mark_count()?, json);
            Ok(())
        }
        Cmd::Reply { id, body, file, auto } => {
            let mut client = open()?;
            // Refuse a reply to a reply before asking for a body.
            if let Some(m) = client.store.inbox_get(&id)? {
                if m.in_reply_to.is_some() {
                    anyhow::bail!(ClientError::ReplyToReply { id });
                }
            }
            let body = body_from(body, file)?;
            let out = client.reply(&id, body, auto)?;
            print::send_outcome(&out, json);
            Ok(())
        }
        Cmd::Roster { action } => {
            let mut client = open()?;
            match action {
                None => {
                    let pcs = match client.refresh_roster() {
                        Ok(p) => p,
                        Err(e) => {
                            eprintln!("pcmail: server unreachable ({e}); showing the cached roster");
                            client.store.roster()?
                        }
                    };
                    print::roster(&pcs, client.me(), json);
                }
                Some(RosterCmd::Add { label, hostname, number }) => {
                    let r = client.transport.call(&pcmail_core::protocol::Op::RosterSet { label, hostname, number })?;
                    println!("{}", if json { r.to_string() } else { format!("pcmail: roster now at version {}", r["version"]) });
                }
                Some(RosterCmd::Remove { label }) => {
                    let r = client.transport.call(&pcmail_core::protocol::Op::RosterRemove { label })?;
                    println!("{}", if json { r.to_string() } else { format!("pcmail: removed: {}", r["removed"]) });
                }
            }
            Ok(())
        }
        Cmd::Alerts { all } => {
            let mut client = open()?;
            let alerts = match client.transport.call(&pcmail_core::protocol::Op::Alerts { open_only: !all }) {
                Ok(v) => {
                    let a: Vec<pcmail_core::Alert> = serde_json::from_value(v["alerts"].clone()).unwrap_or_default();
                    if !all {
                        let _ = client.store.alerts_replace(&a);
                    }
                    a
                }
                Err(e) => {
                    eprintln!("pcmail: server unreachable ({e}); showing cached alerts");
                    client.store.alerts()?
                }
            };
            print::alerts(&alerts, json);
            Ok(())
        }
        Cmd::Sync { quiet } => {
            let p = paths()?;
            // At most one poller per PC user: a running daemon or sync does the work.
            if locks::is_held(&p.daemon_lock()) && quiet {
                return Ok(());
            }
            let Some(_lock) = locks::try_lock(&p.sync_lock())? else {
                if !quiet {
                    eprintln!("pcmail: another sync is running");
                }
                return Ok(());
            };
            let mut client = Client::open(p)?;
            let report = client.sync_once(0)?;
            let notes: Vec<_> = report.to_notify.iter().map(notify::Notification::for_mail).collect();
            let chans = notify::channels(&client.config);
            let _ = notify::deliver(&chans, &notes, notify::PER_NOTIFICATION, notify::TOTAL);
            if !quiet {
                print::cycle(&report, json);
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
        Cmd::Service { action, repair } => service_cmd::run(&action, repair, json),
        Cmd::Demo => demo::run(json),
    }
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
