//! `pcmail`: argument parsing and wiring. The logic lives in pcmail-client
//! (and pcmail-server for `serve`); this file only parses, calls and prints.

mod demo;
mod demo_sessions;
mod exit;
mod handoff_cmd;
mod job_cmd;
mod lease_cmd;
mod print;
mod roster_cmd;
mod serve_net;
mod service_cmd;
mod session_cmd;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use exit::fail;
use pcmail_api::{Exit, MailKind, WaitState};
use pcmail_client::{notify, Client, ClientError};
use pcmail_local::config::{Config, Paths, ServerConfig};
use pcmail_local::{hook, locks};
use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "pcmail",
    version,
    about = "Mail between AI coding sessions on several PCs, with a state the sender can trust"
)]
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
        /// `embedded`, a `pcmail serve` URL (http://host:7878/api) or an Apps Script /exec URL. Given
        /// again, more addresses of the same pcmail serve cluster, tried in order when one is unreachable.
        #[arg(long, action = clap::ArgAction::Append)]
        server: Vec<String>,
        /// SQLite file of the embedded server (share one file to link sessions of several users on one machine).
        #[arg(long)]
        embedded_db: Option<PathBuf>,
        /// Seconds between polls when the server has no long poll [default: 120 for Apps Script, 2 embedded; pcmail serve long-polls]
        #[arg(long)]
        poll_interval: Option<u64>,
        /// Discord-style webhook for decision/work/urgent notifications.
        #[arg(long)]
        webhook: Option<String>,
        /// Take this label over from the installation that holds it (that PC loses access).
        #[arg(long, conflicts_with = "offline")]
        replace: bool,
        /// Only write the config; register (and bind the label) on the first poll.
        #[arg(long)]
        offline: bool,
        /// Enrol this PC with a join code from the admin (`pcmail roster add LABEL`): sets the
        /// label from the code and makes this PC's own credential (kept in the OS keyring).
        #[arg(long, requires = "server", conflicts_with_all = ["label", "replace", "offline"])]
        join: Option<String>,
        /// Trust the https:// server by the SHA-256 fingerprint of its certificate (what `pcmail serve`
        /// prints at start), with no CA; a join code from a server on TLS carries it already.
        #[arg(long, conflicts_with = "join")]
        tls_fingerprint: Option<String>,
    },
    /// Store the admin secret (the old shared token) in the OS keyring (read from stdin), or
    /// `rotate` this PC's own credential.
    Token {
        #[arg(value_parser = ["set", "clear", "rotate"])]
        action: String,
        /// The token `pcmail serve` requires (default: the one for the configured server URL).
        #[arg(long)]
        serve: bool,
        /// The password `pcmail serve --db postgres://…` logs in with (kept only in the OS keyring).
        #[arg(long, conflicts_with = "serve")]
        db: bool,
    },
    /// Send mail to exact roster labels, numbers, hostnames or names (`*` = every PC).
    Send {
        /// The recipients: each an exact roster label, working number (3 or #3), hostname (case-insensitive) or
        /// session name; several get one copy each, all or nothing. `*` alone: every other PC.
        #[arg(required = true, num_args = 1..)]
        to: Vec<String>,
        /// note, request (a work request, [作業依頼]) or decision (a decision request, [判断依頼]).
        #[arg(long, value_enum, default_value = "note")]
        kind: KindArg,
        /// Subject line (at most 200 characters) [default: none]
        #[arg(long, short)]
        subject: Option<String>,
        /// The body; or --file, or stdin.
        #[arg(long, short)]
        body: Option<String>,
        /// Read the body from this file.
        #[arg(long, short)]
        file: Option<PathBuf>,
        /// Mark it urgent: shown early, notified, unseen alert after 2 h instead of 6 h.
        #[arg(long)]
        urgent: bool,
        /// Expiry: a duration (30m, 2h, 3d) or an RFC 3339 time.
        #[arg(long)]
        expires: Option<String>,
        /// Written by a program, not at a person's request.
        #[arg(long)]
        auto: bool,
        /// Wait until every copy reached this state (exit 8 when --timeout runs out).
        #[arg(long, value_enum)]
        wait_for: Option<WaitArg>,
        /// How long to wait with --wait-for (90s, 10m, 2h; a plain number is seconds).
        #[arg(long, default_value = "5m", value_parser = timeout_secs)]
        timeout: u64,
    },
    /// The whole timeline of mail ids (from the server).
    Status {
        /// Mail ids (a broadcast's id expands to its copies).
        #[arg(required = true)]
        ids: Vec<String>,
        /// Wait until each mail reached this state (exit 8 when --timeout runs out).
        #[arg(long, value_enum)]
        wait_for: Option<WaitArg>,
        /// How long to wait with --wait-for (90s, 10m, 2h; a plain number is seconds).
        #[arg(long, default_value = "5m", value_parser = timeout_secs)]
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
    /// Write what this PC knows (its mail with timelines, leases, names, sessions, jobs) as
    /// Markdown and JSON files into a new or empty folder, readable without pcmail.
    Export {
        /// The folder: new, or empty.
        dir: PathBuf,
    },
    /// Mail this PC sent, with its live state.
    Sent {
        #[arg(long, default_value_t = 30)]
        limit: usize,
    },
    /// Show a mail and mark it seen.
    Read {
        /// The mail's id.
        id: String,
    },
    /// Mark a mail done without a reply.
    Ack {
        /// The mail's id.
        id: String,
    },
    /// Answer a mail (exit 3 when it is itself a reply).
    Reply {
        /// The id of the mail in this PC's inbox you answer.
        id: String,
        /// The answer; or --file, or stdin.
        #[arg(long, short)]
        body: Option<String>,
        /// Read the answer from this file.
        #[arg(long, short)]
        file: Option<PathBuf>,
        /// Written by a program, not at a person's request (an automatic reply to automatic mail is refused).
        #[arg(long)]
        auto: bool,
        /// Mail sent to several addresses: answer the sender and every other address too (default: the sender only).
        #[arg(long)]
        all: bool,
    },
    /// Mark a mail failed with a reason.
    Fail {
        /// The mail's id.
        id: String,
        /// Why it cannot be done (the sender sees it on the timeline).
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
        /// Also the alerts that resolved.
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
    ///
    /// It needs the admin secret (the PC that manages the roster holds it; every other PC is enrolled
    /// with a join code): `echo SECRET | pcmail token set --serve` (OS keyring), or PCMAIL_ADMIN_TOKEN /
    /// PCMAIL_TOKEN in its environment.
    Serve {
        /// Address to listen on; anything but loopback is reachable from other machines.
        #[arg(long, default_value = "127.0.0.1:7878")]
        listen: std::net::SocketAddr,
        /// SQLite file of the server [default: $PCMAIL_HOME/serve.db], or a PostgreSQL URL
        /// (postgres://USER@HOST/DB, no password in it: `pcmail token set --db`, ~/.pgpass, or peer
        /// authentication over ?host=/run/postgresql) shared by several `pcmail serve` instances.
        #[arg(long, env = "PCMAIL_DATABASE_URL", hide_env_values = true)]
        db: Option<String>,
        /// With --db postgres://…: copy this SQLite serve database (stopped, or a snapshot) into the
        /// empty PostgreSQL database, check every table's rows, print the counts and exit.
        #[arg(long)]
        migrate_from: Option<PathBuf>,
        /// Discord- or Slack-style webhook URL that new alerts are posted to.
        #[arg(long)]
        webhook: Option<String>,
        /// Days final mail (done, failed, expired) is kept before it is deleted.
        #[arg(long, default_value_t = 90)]
        retention_days: u32,
        /// Speak TLS even on loopback, with a self-signed certificate made at first start and kept beside
        /// serve.db (or --tls-cert/--tls-key). Beyond loopback this is the default (unless --insecure-http).
        #[arg(long)]
        tls: bool,
        /// The TLS certificate chain (PEM) to serve instead of the self-signed one; with --tls-key.
        #[arg(long, requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// The private key (PEM) of --tls-cert.
        #[arg(long, requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// Plain HTTP beyond loopback: the admin secret and credentials cross the network in clear.
        /// Only for a network that is private by itself (a VPN); `pcmail doctor` flags it.
        #[arg(long, conflicts_with_all = ["tls", "tls_cert", "tls_key"])]
        insecure_http: bool,
        #[command(flatten)]
        net: serve_net::ServeNet,
    },
    /// Check config, server, poller and hooks, each with the fix.
    Doctor {
        /// Also repair what can be repaired here: move old exec-form hook entries to the shell form.
        #[arg(long)]
        fix: bool,
    },
    /// Claude Code hooks in ~/.claude/settings.json; with --git, the git pre-commit lease guard of the current repo.
    Hooks {
        /// install: register `pcmail-hook` (or `pcmail hook`) for SessionStart, UserPromptSubmit,
        /// PreToolUse (the lease guard on Edit|Write|MultiEdit|NotebookEdit) and Stop, and SessionEnd
        /// where `claude --version` is 1.0.85 or newer (Codex and Gemini: their names for the same
        /// events, docs/agents.md), moving old exec-form entries; uninstall: remove pcmail's entries;
        /// status: the state (installed, partly installed, not installed) and the events registered.
        #[arg(value_parser = ["install", "uninstall", "status"])]
        action: String,
        /// The settings file to edit [default: claude: $CLAUDE_CONFIG_DIR/settings.json, else
        /// ~/.claude/settings.json; codex: $CODEX_HOME/hooks.json, else ~/.codex/hooks.json; gemini:
        /// ~/.gemini/settings.json].
        #[arg(long, conflicts_with = "git")]
        settings: Option<PathBuf>,
        /// The agent whose hooks these are (Codex asks you to trust new hooks: docs/agents.md).
        #[arg(long, value_enum, default_value = "claude", conflicts_with = "git")]
        client: AgentArg,
        /// The git pre-commit hook of the repo in the current folder (core.hooksPath respected; an
        /// existing pre-commit hook is chained). `git commit --no-verify` skips it.
        #[arg(long)]
        git: bool,
    },
    /// This session takes a name (ani, vasya): mail to the name comes to it. Names and PC labels
    /// share one namespace; a name held by a live session is refused (exit 5, with the holder);
    /// it moves from an ended session, with its unseen mail. Run it from a Claude Code session
    /// (or set PCMAIL_SESSION).
    Name {
        /// The name: lower-case a-z 0-9 . _ - like a PC label, and not one.
        name: String,
        /// The session taking it [default: the Claude Code session above this command].
        #[arg(long)]
        session: Option<String>,
    },
    /// Every live session on every PC: name, PC, repo, branch, idle time, leases held (from the server).
    Who,
    /// For Claude Code's Monitor tool: prints one framed line per new mail for this session as it
    /// arrives (woken by the poller's store change; reads only the PC store), marks it seen for
    /// the session; ends on SIGTERM/SIGINT or EOF of a piped stdin.
    Watch {
        /// The session [default: PCMAIL_SESSION, else the Claude Code session above this command].
        #[arg(long)]
        session: Option<String>,
    },
    /// Leases: hold a resource across PCs, see who holds what (`pcmail lease --help`).
    Lease {
        #[command(subcommand)]
        action: lease_cmd::LeaseCmd,
    },
    /// Jobs: run whitelisted commands on another PC or the server (`pcmail job --help`).
    Job {
        #[command(subcommand)]
        action: job_cmd::JobCmd,
    },
    /// The Claude Code hook itself (same code as `pcmail-hook`): reads the hook event JSON on stdin,
    /// prints the context to add or nothing, exit 0 always. No options; `PCMAIL_HOME` [default: the
    /// OS data folder] picks the PC user. `pcmail hook pre-commit` is the git pre-commit lease guard
    /// (`hooks install --git`; exit 1 refuses the commit).
    Hook {
        #[arg(value_parser = ["pre-commit"], hide = true)]
        which: Option<String>,
    },
    /// Keep this PC's poller running without the tray (systemd user unit, Task Scheduler task, launchd agent).
    Service {
        #[arg(value_parser = ["install", "uninstall", "status"])]
        action: String,
        /// With status: apply the self-healing rule (re-register and poll once when the service
        /// failed or the last good poll is older than 10 minutes).
        #[arg(long)]
        repair: bool,
    },
    /// Every layer on the embedded default, no account, no network: two PCs exchange mail (timelines
    /// and a Mermaid diagram), then two named sessions go through names, leases, handoffs, a rollup,
    /// memory, watch and a job.
    Demo {
        /// Run every step without waiting for Enter between them (the default when not on a terminal).
        #[arg(long)]
        no_pause: bool,
    },
    /// Print the shell completion script: `pcmail completions bash > ~/.local/share/bash-completion/completions/pcmail`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff): `pcmail man | man -l -`. The same page is docs/pcmail.1.
    Man,
    /// Write the code map (.claude/code-map.md and llms.txt) of a repo; --check exits 15 when it is stale.
    Map {
        /// The repo (default: the one containing the current directory).
        #[arg(long)]
        repo: Option<PathBuf>,
        /// Write nothing; exit 15 when the files differ from what a run would write.
        #[arg(long)]
        check: bool,
        /// The map, relative to the repo root.
        #[arg(long, default_value = pcmail_codemap::DEFAULT_MAP_FILE)]
        map_file: String,
        /// The llms.txt index, relative to the repo root.
        #[arg(long, default_value = pcmail_codemap::DEFAULT_LLMS_FILE)]
        llms_file: String,
        /// Maximum size of llms.txt in characters.
        #[arg(long, default_value_t = pcmail_codemap::DEFAULT_LLMS_BUDGET)]
        llms_budget: usize,
        /// Parse every file (ignore the cache in the PC store).
        #[arg(long)]
        full: bool,
    },
    /// Handoffs for the next session (.claude/handoffs/, append-only with INDEX.md) and rollups.
    Handoff {
        #[command(subcommand)]
        action: handoff_cmd::HandoffCmd,
    },
    /// Decisions and gotchas of this repo (.claude/memory/<topic>.md), searchable.
    Memory {
        #[command(subcommand)]
        action: handoff_cmd::MemoryCmd,
    },
    /// The MCP server on stdio (every mail operation as a tool), or `mcp install|uninstall` into an agent's config.
    /// With no subcommand it serves until stdin closes; no options; logs go to stderr at `PCMAIL_LOG`
    /// [default: warn]; `PCMAIL_HOME` [default: the OS data folder] picks the PC user.
    Mcp {
        #[command(subcommand)]
        action: Option<McpCmd>,
        /// Tool groups to load besides the default set (mail, leases, who, handoffs), comma-separated:
        /// mail, sessions, handoffs, memory, jobs, map, admin, or all. With install: written into the
        /// agent's configuration.
        #[arg(long, global = true, value_name = "GROUPS")]
        tools: Option<String>,
    },
}

#[derive(Subcommand)]
enum McpCmd {
    /// Register `pcmail mcp` with Claude Code (`claude mcp add`), Codex (~/.codex/config.toml) or Gemini CLI (~/.gemini/settings.json).
    Install {
        /// user: every project of this user; project: the current directory only (Claude Code's
        /// .mcp.json, Gemini's .gemini/settings.json; Codex has no project scope).
        #[arg(long, value_enum, default_value = "user")]
        scope: ScopeArg,
        /// The agent whose configuration gets the server.
        #[arg(long, value_enum, default_value = "claude")]
        client: AgentArg,
    },
    /// Remove what `install` registered.
    Uninstall {
        /// The scope `install` used.
        #[arg(long, value_enum, default_value = "user")]
        scope: ScopeArg,
        /// The agent whose configuration loses the server.
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
    /// Admin: a one-time join code for a new PC (`pcmail init --join CODE` on it). With
    /// --hostname the PC is on the roster at once; on a server without credentials it is added.
    Add {
        /// The new PC's label (lower-case a-z 0-9 . _ -).
        label: String,
        /// The PC's hostname (needed to add it directly on the embedded default; optional for a join code).
        #[arg(long)]
        hostname: Option<String>,
        /// Its roster number (adds it directly instead of making a join code) [default: the next free one].
        #[arg(long)]
        number: Option<i64>,
        /// How long the join code lives (30m, 2h, 3d; at most 30 days).
        #[arg(long, default_value = "24h")]
        expires: String,
    },
    /// Admin: take a PC off the roster (its mail is kept).
    Remove {
        /// The PC's label.
        label: String,
    },
    /// Admin: end a PC's access at once; its mail waits for a PC re-enrolled under that label.
    Revoke {
        /// The PC's label.
        label: String,
    },
    /// Admin: stop accepting the shared token for PC operations (after every PC has its credential).
    RequireCredentials {
        /// Accept the shared token again.
        #[arg(long)]
        off: bool,
    },
    /// Admin: the audit log (enrol, join, revoke, rotate, roster changes), newest first.
    Log {
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            // `--json`: a usage error is an error object on stdout too, like every other exit code.
            if e.use_stderr() && std::env::args_os().skip(1).any(|a| a == "--json") {
                let message = e.render().to_string();
                let message = message.lines().next().unwrap_or("").trim_start_matches("error: ").to_string();
                println!(
                    "{}",
                    serde_json::json!({"error": {"code": Exit::Usage.as_str(), "exit": Exit::Usage as i32, "message": message}})
                );
            }
            std::process::exit(if e.use_stderr() { Exit::Usage as i32 } else { 0 });
        }
    };
    // The hook must stay silent and fast whatever happens.
    if let Cmd::Hook { which } = &cli.cmd {
        if which.is_some() {
            // The git pre-commit lease guard: its exit code is the verdict.
            std::process::exit(pcmail_local::githook::pre_commit_main());
        }
        run_hook();
        std::process::exit(0);
    }
    // `pcmail status ID | head -1`: a reader that goes away ends the command
    // quietly, as it does any Unix tool, instead of a "Broken pipe" panic.
    #[cfg(unix)]
    // SAFETY: restoring the default action of one signal before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // rustls logs a refused certificate itself ("Sending fatal alert …"); pcmail
    // says what it means in its own error, so that line stays out by default.
    // Colour codes only where a terminal shows them, never in a log or a pipe.
    let filter = std::env::var("PCMAIL_LOG").unwrap_or_else(|_| "warn,rustls=off".into());
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
        .with_env_filter(filter)
        .try_init();
    let json = cli.json;
    let code = match run(cli) {
        Ok(()) => 0,
        Err(e) => fail(&e, json),
    };
    std::process::exit(code);
}

/// The man page of `pcmail` (its options and the list of its commands), in
/// roff: clap_mangen renders the command line's own definition, so it is
/// never stale; each command's details are its `--help`.
fn man_page() -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    clap_mangen::Man::new(<Cli as clap::CommandFactory>::command()).render(&mut out)?;
    Ok(out)
}

/// The same library code as `pcmail-hook`; here `pcmail` is this binary.
fn run_hook() {
    if let Some(out) = hook::main_with(|| std::env::current_exe().ok()) {
        use std::io::Write;
        let _ = writeln!(std::io::stdout().lock(), "{out}");
    }
}

fn print_map_report(r: &pcmail_codemap::Report, check: bool) {
    let rel = |p: &std::path::Path| p.strip_prefix(&r.repo).unwrap_or(p).display().to_string();
    println!(
        "Code map: {} file{} ({} parsed, {} from the cache), {} failed to parse; skipped {} binary, {} over 1 MiB.",
        r.files,
        if r.files == 1 { "" } else { "s" },
        r.parsed,
        r.reused,
        r.failed,
        r.skipped_binary,
        r.skipped_huge
    );
    if let Some(f) = &r.foreign_llms {
        println!(
            "{} was not written by pcmail: left alone; the index goes to {} beside it.",
            rel(f),
            rel(&r.llms_path)
        );
    }
    if let Some(e) = &r.stamp_error {
        eprintln!("pcmail: {e} (the session hook cannot tell when the map goes stale)");
    }
    if check {
        println!("Fresh: {} and {} match their inputs.", rel(&r.map_path), rel(&r.llms_path));
    } else if r.changed.is_empty() {
        println!("Unchanged: {}, {} ({} chars).", rel(&r.map_path), rel(&r.llms_path), r.llms_chars);
    } else {
        let names: Vec<String> = r.changed.iter().map(|p| rel(p)).collect();
        println!("Wrote {} ({} chars in {}).", names.join(", "), r.llms_chars, rel(&r.llms_path));
    }
}

/// `--timeout` as seconds, read by the one duration parser of every flag.
/// A zero wait (`--timeout 0`) looks once and does not wait.
fn timeout_secs(s: &str) -> Result<u64, String> {
    if s.trim().trim_end_matches(|c: char| c.is_ascii_alphabetic()) == "0" {
        return Ok(0);
    }
    pcmail_core::duration::parse_ms(s).map(|ms| (ms as u64).div_ceil(1000)).map_err(|e| e.to_string())
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

/// A `--db postgres://…` with its password from the OS keyring (`pcmail
/// token set --db`) or a libpq passfile; refused when the URL holds one.
pub(crate) fn postgres_target(url: &str) -> anyhow::Result<pcmail_server::store::pg_url::PgTarget> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut t = pcmail_server::store::pg_url::PgTarget::parse(url, home.as_deref())
        .map_err(|e| anyhow::anyhow!(ClientError::Invalid(e.to_string())))?;
    if let Some(pw) = pcmail_client::token::db_password() {
        t.set_password(&pw);
    } else {
        t.password_from_passfile(home.as_deref());
    }
    Ok(t)
}

/// `serve --db postgres://… --migrate-from serve.db`.
fn copy_sqlite_into_postgres(
    source: &std::path::Path,
    target: &pcmail_server::store::pg_url::PgTarget,
    json: bool,
) -> anyhow::Result<()> {
    let report = pcmail_server::migrate_from::migrate_from_sqlite(source, target)
        .map_err(|e| anyhow::anyhow!(ClientError::Invalid(e.to_string())))?;
    if json {
        let tables: serde_json::Map<String, serde_json::Value> =
            report.tables.iter().map(|t| (t.table.clone(), serde_json::json!(t.rows))).collect();
        println!(
            "{}",
            serde_json::json!({"ok": true, "from": source.display().to_string(), "to": target.redacted(),
                               "tables": tables, "rows": report.total_rows(), "schema": report.schema_version})
        );
    } else {
        println!(
            "pcmail: copied {} rows from {} into {} (schema {}), every table checked:",
            report.total_rows(),
            source.display(),
            target.redacted(),
            report.schema_version
        );
        for t in report.tables.iter().filter(|t| t.rows > 0) {
            println!("  {:<14} {:>8}", t.table, t.rows);
        }
        println!("pcmail: now start every instance with `pcmail serve --db {}`", target.redacted());
    }
    Ok(())
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let json = cli.json;
    match cli.cmd {
        Cmd::Init { join: Some(code), server, .. } => {
            let j = pcmail_client::creds::join(paths()?, &code, &server)?;
            println!(
                "pcmail: this PC is {:?} on {}, with its own credential in the OS keyring (or PCMAIL_CREDENTIAL){}",
                j.label,
                j.server,
                if j.existing { " (already enrolled)" } else { "" }
            );
            if let Some(fp) = j.tls_fingerprint {
                println!("pcmail: the server's TLS certificate is pinned (SHA-256 {fp}); a server with another one is refused");
            }
            Ok(())
        }
        Cmd::Init { label, server, embedded_db, poll_interval, webhook, replace, offline, tls_fingerprint, .. } => {
            let p = paths()?;
            let mut c = Config::load(&p)?;
            let old_url = c.server.url().map(str::to_string);
            if let Some(l) = label {
                if !pcmail_core::roster::is_valid_label(&l) {
                    anyhow::bail!(ClientError::Invalid(format!("label {l:?}: use lower-case a-z 0-9 . _ - (max 40)")));
                }
                c.label = l;
            }
            if let Some((s, more)) = server.split_first() {
                c.server = if s == "embedded" {
                    ServerConfig::Embedded { db: embedded_db.clone() }
                } else {
                    ServerConfig::from_url(s)
                };
                if !more.is_empty() && !matches!(c.server, ServerConfig::Http { .. }) {
                    anyhow::bail!(ClientError::Invalid(
                        "several --server addresses are for a pcmail serve cluster (http:// or https://), not embedded or Apps Script".into()
                    ));
                }
                c.failover_urls = more.to_vec();
            } else if let Some(db) = embedded_db {
                c.server = ServerConfig::Embedded { db: Some(db) };
            }
            if let Some(fp) = tls_fingerprint {
                let fp = pcmail_core::auth::parse_fingerprint(&fp).ok_or_else(|| {
                    ClientError::Invalid(format!("--tls-fingerprint {fp:?}: 64 hex characters (a SHA-256, colons allowed), as `pcmail serve` prints it"))
                })?;
                if !c.server.url().is_some_and(|u| u.starts_with("https://")) {
                    anyhow::bail!(ClientError::Invalid(
                        "--tls-fingerprint pins an https:// server: give --server https://HOST:PORT/api".into()
                    ));
                }
                c.tls_fingerprint = Some(fp);
            } else if c.server.url().map(str::to_string) != old_url {
                // A pin belongs to the server it was made for.
                c.tls_fingerprint = None;
            }
            if let Some(n) = poll_interval {
                c.poll_interval_secs = n;
            }
            if webhook.is_some() {
                c.notify_webhook = webhook;
            }
            if replace && matches!(c.server, ServerConfig::Embedded { .. }) {
                anyhow::bail!(ClientError::Invalid(
                    "--replace is for a shared server; the embedded one binds no labels".into()
                ));
            }
            c.save(&p)?;
            println!(
                "pcmail: this PC is {:?}, server: {} (config {})",
                c.label,
                c.server.describe(),
                p.config().display()
            );
            if let Some(fp) = &c.tls_fingerprint {
                println!("pcmail: the server's TLS certificate is pinned (SHA-256 {fp})");
            }
            if offline || matches!(c.server, ServerConfig::Embedded { .. }) {
                return Ok(());
            }
            // Registered (and the label claimed) right away, so a label that
            // belongs to another installation is learnt now, not at the first poll.
            let mut client = match pcmail_client::Client::open(p) {
                Err(ClientError::Token(pcmail_client::token::TokenError::Missing)) if !replace => {
                    println!(
                        "pcmail: no server token yet: `pcmail token set` (this PC registers on its first command)"
                    );
                    return Ok(());
                }
                other => other?,
            };
            let registered = client.register_self_as(replace);
            if registered.is_ok() {
                if let Ok(Some(note)) = client.store.meta_get(pcmail_store::meta::HOSTNAME_NOTE) {
                    println!("pcmail: {note}");
                }
            }
            match registered {
                Ok(()) if client.label_claimed() => {
                    println!(
                        "pcmail: label {:?} is bound to this installation{}",
                        c.label,
                        if replace { " (taken over: the PC that held it has lost access)" } else { "" }
                    );
                    Ok(())
                }
                Ok(()) => {
                    println!("pcmail: registered as {:?} (this server does not bind labels to installations)", c.label);
                    Ok(())
                }
                Err(ClientError::Call(e)) if e.is_transient() && !replace => {
                    println!("pcmail: the server cannot be reached now ({e}); this PC registers on its first poll");
                    Ok(())
                }
                Err(e) => Err(e.into()),
            }
        }
        Cmd::Token { action, db: true, .. } => {
            if action == "clear" {
                pcmail_client::token::delete(pcmail_client::token::DB_PASSWORD_KEY)?;
                println!("pcmail: the database password is removed from the OS keyring");
            } else if action == "set" {
                let mut t = String::new();
                std::io::stdin().read_line(&mut t)?;
                let t = t.trim_end_matches(['\r', '\n']);
                if t.is_empty() {
                    anyhow::bail!(ClientError::Invalid("empty password on stdin".into()));
                }
                pcmail_client::token::store(pcmail_client::token::DB_PASSWORD_KEY, t)?;
                println!("pcmail: the database password is stored in the OS keyring (pcmail serve reads it there)");
            } else {
                anyhow::bail!(ClientError::Invalid("the database password is `set` or `clear`ed, not rotated".into()));
            }
            Ok(())
        }
        Cmd::Token { action, serve, .. } if action == "rotate" => {
            if serve {
                anyhow::bail!(ClientError::Invalid(
                    "rotate is for a PC's credential; change the serve secret with `pcmail token set --serve`".into()
                ));
            }
            let mut client = open()?;
            let r = pcmail_api::admin::token_rotate(&mut client)?;
            if json {
                println!("{}", serde_json::to_string(&r)?);
            } else {
                println!("pcmail: this PC has a new credential (in the OS keyring); the old one no longer works");
            }
            Ok(())
        }
        Cmd::Token { action, serve, .. } => {
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
            let to = if to.len() == 1 {
                pcmail_api::Addresses::One(to.into_iter().next().unwrap_or_default())
            } else {
                pcmail_api::Addresses::Many(to)
            };
            let args = pcmail_api::SendArgs {
                to,
                kind,
                subject,
                body,
                urgent,
                expires,
                auto,
                wait_for: None,
                timeout_secs: Some(timeout),
            };
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
            let mut waiting = vec![];
            let (mails, missing) = match wait_for {
                Some(w) => {
                    let args = pcmail_api::WaitForArgs { ids, state: w.state(), timeout_secs: Some(timeout) };
                    (pcmail_api::wait_for(&mut client, &args)?.mails, vec![])
                }
                None => {
                    let r = pcmail_api::status(&mut client, &pcmail_api::IdsArgs { ids })?;
                    waiting = r.waiting;
                    (r.mails, r.missing)
                }
            };
            if json && !waiting.is_empty() {
                // Mail to a name nobody live holds: its object says why it waits.
                let mut v = serde_json::to_value(&mails)?;
                for m in v.as_array_mut().into_iter().flatten() {
                    if let Some((_, note)) = waiting.iter().find(|(id, _)| m["id"] == serde_json::json!(id)) {
                        m["waiting"] = serde_json::json!(note);
                    }
                }
                println!("{v}");
            } else {
                print::timelines(&mails, json);
                for (id, note) in &waiting {
                    println!("pcmail: {id}: {note}");
                }
            }
            if !missing.is_empty() {
                let e = ClientError::NotFound(missing.join(", "));
                if json {
                    // The timelines found are the answer on stdout; the missing ids are the exit code.
                    anyhow::bail!(exit::Shown { exit: Exit::NotFound, message: e.to_string() });
                }
                anyhow::bail!(e);
            }
            Ok(())
        }
        Cmd::Inbox { all, limit } => {
            let p = paths()?;
            let r = pcmail_api::inbox(&p, &pcmail_api::InboxArgs { all, limit })?;
            // Expiry and age by the server's clock (this PC's offset from it).
            let now = pcmail_store::Store::open(&p.store())?.server_now(pcmail_local::system_now());
            print::inbox(&r.mails, now, json);
            Ok(())
        }
        Cmd::Export { dir } => {
            let r = pcmail_api::export::export(&paths()?, &dir, pcmail_local::system_now())?;
            if json {
                println!("{}", serde_json::to_string(&r)?);
                return Ok(());
            }
            println!(
                "pcmail: exported {} received and {} sent mails, {} leases, {} names, {} sessions and {} jobs to {} ({} files; README.md lists them)",
                r.received, r.sent, r.leases, r.names, r.sessions, r.jobs, pcmail_api::export::shown(&r.dir), r.files
            );
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
        Cmd::Reply { id, body, file, auto, all } => {
            let mut client = open()?;
            // Refuse a reply to a reply before asking for a body.
            pcmail_api::reply_precheck(&client, &id)?;
            let body = body_from(body, file)?;
            let out = pcmail_api::reply(&mut client, &pcmail_api::ReplyArgs { id, body, auto, all })?;
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
                    if !json {
                        if let Ok(Some(note)) = client.store.meta_get(pcmail_store::meta::HOSTNAME_NOTE) {
                            println!("note: {note}");
                        }
                    }
                }
                Some(RosterCmd::Remove { label }) => {
                    let r = pcmail_api::roster_remove(&mut client, &pcmail_api::RosterRemoveArgs { label })?;
                    println!("{}", if json { r.to_string() } else { format!("pcmail: removed: {}", r["removed"]) });
                }
                Some(cmd) => roster_cmd::run(&mut client, cmd, json)?,
            }
            Ok(())
        }
        Cmd::Alerts { all } => {
            let r = pcmail_api::alerts(&mut open()?, &pcmail_api::AlertsArgs { all })?;
            if let Some(e) = &r.unreachable {
                eprintln!("pcmail: server unreachable ({e}); showing cached alerts");
            }
            print::alerts(&r.alerts, json);
            // Marks this PC gave up on (refused by the server, or unsendable text from an
            // older pcmail): this PC's own record, beside the server's alerts.
            if !json {
                let dropped = pcmail_store::Store::open(&paths()?.store())?.dropped_marks()?;
                for (_, id, op, why) in &dropped {
                    println!("{:<12} {:<10} {id}  {}", "dropped_mark", op, pcmail_core::present::neutralise(why));
                }
            }
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
        Cmd::Serve {
            listen,
            db,
            migrate_from,
            webhook,
            retention_days,
            tls,
            tls_cert,
            tls_key,
            insecure_http,
            net,
        } => {
            let p = paths()?;
            let postgres = match db.as_deref() {
                Some(url) if pcmail_server::store::pg_url::is_postgres_url(url) => Some(postgres_target(url)?),
                _ => None,
            };
            if let Some(source) = migrate_from {
                let Some(target) = &postgres else {
                    anyhow::bail!(ClientError::Invalid(
                        "--migrate-from copies into PostgreSQL: give --db postgres://USER@HOST/DB".into()
                    ));
                };
                return copy_sqlite_into_postgres(&source, target, json);
            }
            let db = match (&postgres, db) {
                (None, Some(path)) => PathBuf::from(path),
                _ => p.home.join("serve.db"),
            };
            // TLS files (a made certificate) live beside the SQLite file, or in PCMAIL_HOME.
            let db_dir = if postgres.is_some() {
                p.home.clone()
            } else {
                db.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new(".")).to_path_buf()
            };
            let choice = pcmail_server::tls::TlsChoice { tls, cert: tls_cert, key: tls_key, insecure_http };
            // Before the secret is read: a refused --listen says so first.
            let transport = pcmail_server::tls::decide(listen, &choice, &db_dir)
                .map_err(|e| anyhow::anyhow!(ClientError::Invalid(e)))?;
            let (limits, peers) = net.parts().map_err(|e| anyhow::anyhow!(ClientError::Invalid(e)))?;
            let token = pcmail_client::token::load("serve").map_err(|e| {
                anyhow::anyhow!(ClientError::Invalid(format!(
                    "pcmail serve needs the admin secret: {e} (`echo SECRET | pcmail token set --serve`, or PCMAIL_ADMIN_TOKEN)"
                )))
            })?;
            let mut opts = pcmail_server::http::ServeOptions::new(db, token);
            opts.postgres = postgres;
            opts.listen = listen;
            opts.transport = transport;
            opts.webhook_url = webhook;
            opts.retention_ms = Some(i64::from(retention_days.max(1)) * 24 * 60 * 60 * 1000);
            (opts.limits, opts.peers) = (limits, peers);
            pcmail_server::http::serve_blocking(opts)
        }
        Cmd::Doctor { fix } => print::doctor(json, fix),
        Cmd::Hooks { action, git: true, .. } => git_hooks(&action, json),
        Cmd::Lease { action } => lease_cmd::run(action, json),
        Cmd::Name { name, session } => session_cmd::name(name, session, json),
        Cmd::Who => session_cmd::who(json),
        Cmd::Watch { session } => session_cmd::watch(session),
        Cmd::Job { action } => job_cmd::run(action, json),
        Cmd::Hooks { action, settings, client, git: false } => {
            use pcmail_claude_hooks::Agent;
            let agent = match client {
                AgentArg::Claude => Agent::Claude,
                AgentArg::Codex => Agent::Codex,
                AgentArg::Gemini => Agent::Gemini,
            };
            let path = settings.or_else(|| agent.default_path()).context("no home directory")?;
            match action.as_str() {
                "install" => {
                    let spec = hook_spec_for(agent)?;
                    let o = pcmail_claude_hooks::install(&path, &spec)?;
                    let events: Vec<&str> = spec.events.iter().map(|e| e.event).collect();
                    if json {
                        println!(
                            "{}",
                            serde_json::json!({"changed": o.changed, "settings": o.settings_path, "events": events,
                                               "backup": o.backup})
                        );
                    } else {
                        println!(
                            "pcmail: hooks {} for {} in {}{}",
                            if o.changed { "installed" } else { "already installed" },
                            events.join(", "),
                            o.settings_path.display(),
                            o.backup.map(|b| format!(" (backup {})", b.display())).unwrap_or_default()
                        );
                    }
                }
                "uninstall" => {
                    let o = pcmail_claude_hooks::uninstall_for(agent, &path)?;
                    if json {
                        println!("{}", serde_json::json!({"changed": o.changed, "settings": o.settings_path}));
                    } else {
                        println!(
                            "pcmail: hooks {} in {}",
                            if o.changed { "removed" } else { "were not installed" },
                            o.settings_path.display()
                        );
                    }
                }
                _ => {
                    let s = pcmail_claude_hooks::status_for(agent, &path)?;
                    let wanted = agent.events();
                    let level = s.level(&wanted);
                    let (registered, missing) = (s.registered_events(), s.missing_events(&wanted));
                    let form = match (s.hooks.is_empty(), s.needs_migration()) {
                        (true, _) => None,
                        (false, true) => Some("exec"),
                        (false, false) => Some("shell"),
                    };
                    if json {
                        println!(
                            "{}",
                            serde_json::json!({"state": level.as_str(), "settings": path, "events": registered,
                                               "missing": missing, "form": form})
                        );
                    } else {
                        let events = if registered.is_empty() {
                            String::new()
                        } else {
                            format!(" for {}", registered.join(", "))
                        };
                        let missing = if missing.is_empty() || registered.is_empty() {
                            String::new()
                        } else {
                            format!("; not for {}", missing.join(", "))
                        };
                        let form = match form {
                            Some("exec") => ", old exec form: `pcmail hooks install` moves it to the shell form",
                            Some(_) => ", shell form",
                            None => "",
                        };
                        println!("pcmail: hooks {level}{events}{missing} ({}){form}", path.display());
                    }
                }
            }
            Ok(())
        }
        Cmd::Hook { .. } => unreachable!("handled before logging starts"),
        Cmd::Service { action, repair } => service_cmd::run(&action, repair, json),
        Cmd::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut <Cli as clap::CommandFactory>::command(),
                "pcmail",
                &mut std::io::stdout(),
            );
            Ok(())
        }
        Cmd::Man => {
            use std::io::Write;
            std::io::stdout().write_all(&man_page()?)?;
            Ok(())
        }
        Cmd::Demo { no_pause } => {
            demo::run(json)?;
            // Part two: every layer above the mail, run by this binary as a user would.
            let exe = std::env::current_exe().context("the path of this pcmail binary")?;
            demo_sessions::run(exe, no_pause)
        }
        Cmd::Map { repo, check, map_file, llms_file, llms_budget, full } => {
            // One pcmail-api function for this and the MCP tools `map` / `map_check`.
            let args = pcmail_api::codemap::MapArgs {
                repo: repo.map(|r| r.to_string_lossy().into_owned()),
                map_file: Some(map_file),
                llms_file: Some(llms_file),
                llms_budget: Some(llms_budget),
                full,
            };
            let paths = paths()?;
            let r = if check {
                pcmail_api::codemap::map_check(&paths, &args)?
            } else {
                pcmail_api::codemap::map(&paths, &args)?
            };
            if json {
                println!("{}", serde_json::to_string(&r)?);
            } else {
                if let Some(n) = &r.note {
                    eprintln!("pcmail: {n}");
                }
                print_map_report(&r.report, check);
            }
            Ok(())
        }
        Cmd::Mcp { action, tools } => mcp(action, tools),
        Cmd::Handoff { action } => handoff_cmd::handoff(action, json),
        Cmd::Memory { action } => handoff_cmd::memory(action, json),
    }
}

/// What `hooks install` and `doctor --fix` register: `pcmail-hook` when it sits beside this
/// `pcmail`, else `pcmail hook`; shell form either way (see crates/claude-hooks).
pub(crate) fn hook_spec() -> anyhow::Result<pcmail_claude_hooks::HookSpec> {
    hook_spec_for(pcmail_claude_hooks::Agent::Claude)
}

/// The hook program every hook pcmail installs runs (the agents' hooks and
/// the git pre-commit guard alike): `pcmail-hook` when it sits beside this
/// `pcmail`, else `pcmail hook` (the same code).
pub(crate) fn hook_command() -> anyhow::Result<pcmail_claude_hooks::HookCommand> {
    // canonicalize() gives `\\?\C:\…` on Windows, which Git Bash cannot run.
    let exe = std::env::current_exe()?;
    let exe = if cfg!(windows) { exe } else { exe.canonicalize()? };
    Ok(pcmail_claude_hooks::HookCommand::for_pcmail_exe(&exe))
}

/// The same for `agent`'s hooks file (Claude Code's events depend on its release).
pub(crate) fn hook_spec_for(agent: pcmail_claude_hooks::Agent) -> anyhow::Result<pcmail_claude_hooks::HookSpec> {
    let command = hook_command()?;
    if agent != pcmail_claude_hooks::Agent::Claude {
        return Ok(pcmail_claude_hooks::HookSpec::for_agent(agent, command));
    }
    let mut spec = pcmail_claude_hooks::HookSpec::new(command);
    // SessionEnd only where the installed Claude Code knows it (1.0.62 rejects an unknown event).
    let version = match pcmail_claude_hooks::claude_code_version(std::ffi::OsStr::new("claude"), Duration::from_secs(5))
    {
        pcmail_claude_hooks::ClaudeCodeVersion::Found { version, .. } => version,
        _ => None,
    };
    spec.events = pcmail_claude_hooks::events_for(version);
    Ok(spec)
}

fn mcp(action: Option<McpCmd>, tools: Option<String>) -> anyhow::Result<()> {
    use pcmail_mcp::install::{self, Agent, Outcome, Scope, Target};
    let profile = match tools.as_deref() {
        Some(t) => pcmail_mcp::Profile::parse(t).map_err(pcmail_api::ApiError::Usage)?,
        None => pcmail_mcp::Profile::default(),
    };
    let (installing, scope, client) = match action {
        None => return Ok(pcmail_mcp::run_stdio(paths()?, &profile)?),
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
    // canonicalize() gives `\\?\C:\…` on Windows, which other programs cannot always run.
    let exe = std::env::current_exe()?;
    let exe = if cfg!(windows) { exe } else { exe.canonicalize()? };
    let mut t = Target::from_env(agent, scope, exe).map_err(as_api)?;
    t.tools = profile.to_arg();
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
            println!(
                "pcmail: MCP server {} in {}",
                if installing { "already installed" } else { "was not installed" },
                path.display()
            )
        }
    }
    Ok(())
}

/// `pcmail hooks install|uninstall|status --git`: the pre-commit lease guard
/// runs `<hook program> pre-commit`, the hook program chosen as for the
/// agents' hooks (`hook_command`).
fn git_hooks(action: &str, json: bool) -> anyhow::Result<()> {
    use pcmail_local::githook;
    let dir = std::env::current_dir()?;
    match action {
        "install" => {
            let hook = hook_command()?.shell_command().map_err(|e| ClientError::Invalid(e.to_string()))?;
            let done = githook::install(&dir, &hook).map_err(|e| ClientError::Invalid(e.to_string()))?;
            if json {
                println!("{}", serde_json::to_string(&done)?);
            } else {
                println!(
                    "pcmail: git pre-commit lease guard {} in {}{}; `git commit --no-verify` skips it",
                    if done.changed { "installed" } else { "already installed" },
                    done.hook.display(),
                    done.chained
                        .as_ref()
                        .map(|c| format!(" (the earlier hook runs after it: {})", c.display()))
                        .unwrap_or_default()
                );
            }
        }
        "uninstall" => {
            let removed = githook::uninstall(&dir).map_err(|e| ClientError::Invalid(e.to_string()))?;
            println!("pcmail: git pre-commit lease guard {}", if removed { "removed" } else { "was not installed" });
        }
        _ => {
            let hooks = githook::hooks_dir(&dir).map_err(|e| ClientError::Invalid(e.to_string()))?;
            let ours = std::fs::read_to_string(hooks.join("pre-commit")).is_ok_and(|t| t.contains(githook::MARKER));
            println!(
                "pcmail: git pre-commit lease guard {} ({})",
                if ours { "installed" } else { "not installed" },
                hooks.display()
            );
        }
    }
    Ok(())
}

fn daemon() -> anyhow::Result<()> {
    let p = paths()?;
    // A daemon restarted by its watchdog waits briefly for its predecessor's lock.
    let restarted = std::env::var_os("PCMAIL_DAEMON_RESTARTED").is_some();
    let mut lock = locks::try_lock(&p.daemon_lock())?;
    for _ in 0..50 {
        if lock.is_some() || !restarted {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        lock = locks::try_lock(&p.daemon_lock())?;
    }
    let Some(_lock) = lock else {
        println!("pcmail: a daemon is already running for this PC user ({})", p.daemon_lock().display());
        return Ok(());
    };
    // Marks the hook queues go out within ~100 ms, also during a long poll.
    let _pusher = pcmail_client::pusher::spawn(p.clone());
    let progress = pcmail_client::watchdog::Progress::default();
    progress.mark(pcmail_local::system_now());
    {
        let store_path = p.store();
        pcmail_client::watchdog::spawn(
            progress.clone(),
            pcmail_client::watchdog::threshold_ms(),
            pcmail_local::system_now,
            move || pcmail_store::Store::open(&store_path).ok().and_then(|s| s.last_poll_ok_at().ok().flatten()),
            restart_daemon,
        );
    }
    let mut client = Client::open(p)?;
    // The daemon executes jobs this PC's [jobs] whitelists (workers beside the poll loop).
    client.enable_executor();
    let interval = client.config.poll_interval();
    let wait_ms = if client.transport.long_poll() { 20_000 } else { 0 };
    let chans = notify::channels(&client.config);
    eprintln!("pcmail: daemon for {} polling {}", client.me(), client.config.server.describe());
    let mut failures: u32 = 0;
    loop {
        progress.mark(pcmail_local::system_now());
        let cycle = client.sync_once(wait_ms);
        progress.mark(pcmail_local::system_now());
        match cycle {
            Ok(report) => {
                failures = 0;
                if !report.stored.is_empty() {
                    tracing::info!("stored {} mail", report.stored.len());
                }
                let notes: Vec<_> = report.to_notify.iter().map(notify::Notification::for_mail).collect();
                if !notes.is_empty() {
                    let _ = notify::deliver(&chans, &notes, notify::PER_NOTIFICATION, notify::TOTAL);
                }
                // While this PC holds leases: at least one poll per heartbeat
                // period; sooner when another PC's lease changed.
                client.wait_before_next_poll(interval);
            }
            Err(e) => {
                failures += 1;
                let wait = pcmail_client::backoff::backoff_ms(failures);
                eprintln!("pcmail: poll failed ({e}); retrying in {} s", wait / 1000);
                std::thread::sleep(Duration::from_millis(wait as u64));
            }
        }
    }
}

/// The watchdog's way out of a hung poll: the same daemon, started afresh,
/// polls at once. On Unix the process image is replaced (same PID; the lock
/// file closes on exec, so the new image takes it); elsewhere a detached
/// successor starts and this process exits.
fn restart_daemon() {
    eprintln!("pcmail: watchdog: no good poll and no progress for too long; restarting the daemon");
    let Ok(exe) = std::env::current_exe() else { std::process::exit(75) };
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let err = std::process::Command::new(&exe).arg("daemon").env("PCMAIL_DAEMON_RESTARTED", "1").exec();
        eprintln!("pcmail: watchdog: restart failed: {err}");
        std::process::exit(75);
    }
    #[cfg(not(unix))]
    {
        let mut cmd = pcmail_local::spawn::detached_command(&exe, &["daemon"]);
        cmd.env("PCMAIL_DAEMON_RESTARTED", "1");
        let _ = cmd.spawn();
        std::process::exit(0);
    }
}
