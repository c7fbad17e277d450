//! `pcmail`: the command line's definition and a `run` that only dispatches.
//! Each command is a module of `cmd/` that calls pcmail-api (or the crate
//! that does the work: pcmail-server for `serve`) and prints the answer.

/// A line on stderr that never panics: `eprintln!` panics when stderr
/// fails (a terminal closed behind `pcmail daemon &`, a log pipe whose
/// reader died), which would end a daemon or a server at its next line.
/// A line nobody can read is dropped.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

mod cmd;
mod demo;
mod demo_sessions;
mod exit;
mod print;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use exit::fail;
use pcmail_api::{Exit, MailKind, WaitState};
use std::io::IsTerminal;
use std::path::PathBuf;

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
    /// Mail for this PC (open by default), newest first.
    Inbox {
        /// Include done, failed and expired mail.
        #[arg(long)]
        all: bool,
        #[arg(long, default_value_t = pcmail_api::InboxArgs::default().limit)]
        limit: usize,
        /// Older mail: the mail below this id (the last one listed before).
        #[arg(long, value_name = "ID")]
        before: Option<String>,
        /// Print what the MCP inbox tool answers: {"mails": [summaries], "next"}, each mail's body cut to a preview.
        #[arg(long)]
        summary: bool,
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
        action: Option<cmd::roster::RosterCmd>,
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
        /// Threads that answer requests [default: the host's cores]. Several instances on one host:
        /// split its cores between them (database work waits on threads of its own).
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
        threads: Option<u16>,
        #[command(flatten)]
        net: cmd::serve_net::ServeNet,
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
        client: cmd::hooks::AgentArg,
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
        action: cmd::lease::LeaseCmd,
    },
    /// Jobs: run whitelisted commands on another PC or the server (`pcmail job --help`).
    Job {
        #[command(subcommand)]
        action: cmd::job::JobCmd,
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
    /// Write the code map (.claude/code-map.md and llms.txt) of a repo; --check exits 15 when it is stale;
    /// --show FILE prints one file in full.
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
        /// Print one file in full instead (every item and member with its signature and doc line; the map lists
        /// top-level items only). FILE as the map names it, relative to the repo root. Writes nothing.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["check", "full"])]
        show: Option<String>,
    },
    /// Handoffs for the next session (.claude/handoffs/, append-only with INDEX.md) and rollups.
    Handoff {
        #[command(subcommand)]
        action: cmd::handoff::HandoffCmd,
    },
    /// Decisions and gotchas of this repo (.claude/memory/<topic>.md), searchable.
    Memory {
        #[command(subcommand)]
        action: cmd::handoff::MemoryCmd,
    },
    /// The MCP server on stdio (every mail operation as a tool), or `mcp install|uninstall` into an agent's config.
    /// With no subcommand it serves until stdin closes; no options; logs go to stderr at `PCMAIL_LOG`
    /// [default: warn]; `PCMAIL_HOME` [default: the OS data folder] picks the PC user.
    Mcp {
        #[command(subcommand)]
        action: Option<cmd::mcp::McpCmd>,
        /// Tool groups to load besides the default set (mail, leases, who, handoffs), comma-separated:
        /// mail, sessions, handoffs, memory, jobs, map, admin, or all. With install: written into the
        /// agent's configuration.
        #[arg(long, global = true, value_name = "GROUPS")]
        tools: Option<String>,
    },
}

/// `pcmail lease …` alone, as the daemon parses what the small front sends:
/// the same `--json` and the same [`cmd::lease::LeaseCmd`] (so the same
/// arguments, defaults and refusals) without every other command's parser.
#[derive(Parser)]
#[command(name = "pcmail")]
struct LeaseOnly {
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: LeaseOnlyCmd,
}

#[derive(Subcommand)]
enum LeaseOnlyCmd {
    Lease {
        #[command(subcommand)]
        action: cmd::lease::LeaseCmd,
    },
}

/// The daemon's answer to the small front (`pcmail-hook lease claim|release
/// …`): the arguments parsed as `pcmail` parses them and run by the same
/// code, for the front's caller, with the lines and the exit code `pcmail`
/// would have given. Anything else (a usage error included) is left to
/// `pcmail` itself: the front runs it.
fn answer_for_front(
    client: &mut pcmail_client::Client,
    req: pcmail_local::cmdsock::Request,
) -> pcmail_local::cmdsock::Reply {
    use clap::{CommandFactory, FromArgMatches};
    use cmd::lease::LeaseCmd;
    use pcmail_local::cmdsock::Reply;
    thread_local! {
        // Built once: building it is most of the cost of parsing.
        static PARSER: std::cell::RefCell<clap::Command> = std::cell::RefCell::new(LeaseOnly::command());
    }
    let args = std::iter::once("pcmail".to_string()).chain(req.args);
    let parsed =
        PARSER.with_borrow_mut(|p| p.try_get_matches_from_mut(args)).and_then(|m| LeaseOnly::from_arg_matches(&m));
    let Ok(cli) = parsed else {
        return Reply::not_served();
    };
    let LeaseOnlyCmd::Lease { action: action @ (LeaseCmd::Claim { .. } | LeaseCmd::Release { .. }) } = cli.cmd else {
        return Reply::not_served();
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let exit = match cmd::lease::claim_or_release(client, action, &req.caller, cli.json, &mut out, &mut err) {
        Ok(()) => 0,
        Err(e) => exit::fail_to(&e, cli.json, &mut out, &mut err),
    };
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    Reply { served: true, exit, stdout: text(out), stderr: text(err) }
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
        cmd::hooks::run_hook();
        std::process::exit(0);
    }
    // `pcmail status ID | head -1`: a reader that goes away ends the command
    // quietly, as it does any Unix tool, instead of a "Broken pipe" panic.
    // Not the long-running ones: a daemon whose log pipe or terminal went
    // away, or a server whose peer reset its socket, gets a write error and
    // goes on, where the default action of SIGPIPE would end it at its next
    // log line or answer.
    #[cfg(unix)]
    {
        let action = if matches!(cli.cmd, Cmd::Daemon | Cmd::Serve { .. }) { libc::SIG_IGN } else { libc::SIG_DFL };
        // SAFETY: setting the action of one signal before any thread starts.
        unsafe {
            libc::signal(libc::SIGPIPE, action);
        }
    }
    // rustls logs a refused certificate itself ("Sending fatal alert …"); pcmail
    // says what it means in its own error, so that line stays out by default.
    // Colour codes only where a terminal shows them, never in a log or a pipe.
    let filter = std::env::var("PCMAIL_LOG").unwrap_or_else(|_| "warn,rustls=off".into());
    // A log line that cannot be written is dropped: the subscriber's own
    // report of that failure is an `eprintln!`, which panics on the same
    // broken stderr (the daemon ended at its first warning).
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .log_internal_errors(false)
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

/// `--timeout` as seconds, read by the one duration parser of every flag.
/// A zero wait (`--timeout 0`) looks once and does not wait.
fn timeout_secs(s: &str) -> Result<u64, String> {
    if s.trim().trim_end_matches(|c: char| c.is_ascii_alphabetic()) == "0" {
        return Ok(0);
    }
    pcmail_core::duration::parse_ms(s).map(|ms| (ms as u64).div_ceil(1000)).map_err(|e| e.to_string())
}

impl KindArg {
    fn kind(self) -> MailKind {
        match self {
            KindArg::Note => MailKind::Note,
            KindArg::Request => MailKind::Request,
            KindArg::Decision => MailKind::Decision,
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let json = cli.json;
    match cli.cmd {
        Cmd::Init { join: Some(code), server, .. } => cmd::init::join(&code, &server),
        Cmd::Init { label, server, embedded_db, poll_interval, webhook, replace, offline, tls_fingerprint, .. } => {
            let args = pcmail_api::setup::InitArgs {
                label,
                server,
                embedded_db,
                poll_interval,
                webhook,
                replace,
                tls_fingerprint,
            };
            cmd::init::run(&args, offline)
        }
        Cmd::Token { action, serve, db } => cmd::token::run(&action, serve, db, json),
        Cmd::Send { to, kind, subject, body, file, urgent, expires, auto, wait_for, timeout } => {
            let opts = cmd::send::SendOpts {
                to,
                kind: kind.kind(),
                subject,
                body,
                file,
                urgent,
                expires,
                auto,
                wait_for: wait_for.map(WaitArg::state),
                timeout,
            };
            cmd::send::send(opts, json)
        }
        Cmd::Status { ids, wait_for, timeout } => cmd::status::run(ids, wait_for.map(WaitArg::state), timeout, json),
        Cmd::Inbox { all, limit, before, summary } => cmd::mail::inbox(all, limit, before, summary, json),
        Cmd::Export { dir } => cmd::export::run(&dir, json),
        Cmd::Sent { limit } => cmd::mail::sent(limit, json),
        Cmd::Read { id } => cmd::mail::read(id, json),
        Cmd::Ack { id } => cmd::mail::ack(id, json),
        Cmd::Fail { id, reason } => cmd::mail::fail(id, reason, json),
        Cmd::Reply { id, body, file, auto, all } => cmd::send::reply(id, body, file, auto, all, json),
        Cmd::Roster { action } => cmd::roster::run(action, json),
        Cmd::Alerts { all } => cmd::alerts::run(all, json),
        Cmd::Sync { quiet } => cmd::sync::run(quiet, json),
        Cmd::Daemon => cmd::daemon::run(answer_for_front),
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
            threads,
            net,
        } => {
            let opts = cmd::serve::ServeOpts {
                listen,
                db,
                migrate_from,
                webhook,
                retention_days,
                tls,
                tls_cert,
                tls_key,
                insecure_http,
                threads: threads.map(usize::from),
                net,
            };
            cmd::serve::run(opts, json)
        }
        Cmd::Doctor { fix } => print::doctor(json, fix),
        Cmd::Hooks { action, git: true, .. } => cmd::hooks::git(&action, json),
        Cmd::Hooks { action, settings, client, git: false } => cmd::hooks::agent(&action, settings, client, json),
        Cmd::Lease { action } => cmd::lease::run(action, json),
        Cmd::Name { name, session } => cmd::session::name(name, session, json),
        Cmd::Who => cmd::session::who(json),
        Cmd::Watch { session } => cmd::session::watch(session),
        Cmd::Job { action } => cmd::job::run(action, json),
        Cmd::Hook { .. } => unreachable!("handled before logging starts"),
        Cmd::Service { action, repair } => cmd::service::run(&action, repair, json),
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
        Cmd::Map { repo, show: Some(file), .. } => cmd::map::show(repo, &file, json),
        Cmd::Map { repo, check, map_file, llms_file, llms_budget, full, show: None } => {
            cmd::map::run(repo, check, map_file, llms_file, llms_budget, full, json)
        }
        Cmd::Mcp { action, tools } => cmd::mcp::run(action, tools),
        Cmd::Handoff { action } => cmd::handoff::handoff(action, json),
        Cmd::Memory { action } => cmd::handoff::memory(action, json),
    }
}
