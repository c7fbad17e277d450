//! `pcmail handoff …` and `pcmail memory …`: parse, call the one
//! pcmail-api function per operation, print.

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use pcmail_api::handoffs as api;
use pcmail_client::ClientError;
use pcmail_core::present::terminal_text;
use pcmail_local::config::Paths;
use std::io::{IsTerminal, Read};
use std::path::PathBuf;

#[derive(Args, Clone)]
pub struct RepoArg {
    /// The repo (default: the one containing the current directory).
    #[arg(long)]
    repo: Option<String>,
}

#[derive(Subcommand)]
pub enum HandoffCmd {
    /// Write a handoff for the next session: .claude/handoffs/<YYYY-MM-DD_HH-MM>_<session8>_<slug>.md (never overwrites).
    ///
    /// The five sections come from the flags, else from Markdown on stdin (headings Goal, Done,
    /// What didn't work, State, Next step), else from $EDITOR when stdin is a terminal.
    New {
        /// The task's slug: lower-case a-z 0-9 and -.
        #[arg(long)]
        slug: String,
        /// What the session set out to do.
        #[arg(long)]
        goal: Option<String>,
        /// What was done, with paths.
        #[arg(long)]
        done: Option<String>,
        /// What didn't work, and why.
        #[arg(long)]
        failed: Option<String>,
        /// working, broken or blocked (then any detail).
        #[arg(long)]
        state: Option<String>,
        /// The next step.
        #[arg(long)]
        next: Option<String>,
        /// Read the sections as Markdown from this file.
        #[arg(long, short)]
        file: Option<PathBuf>,
        /// Mail a one-line notice to this address (no value: every PC on the roster).
        #[arg(long, num_args = 0..=1, default_missing_value = "*", value_name = "TO")]
        announce: Option<String>,
        #[command(flatten)]
        repo: RepoArg,
    },
    /// Handoffs newest first: by default the latest rollup and what is neither rolled up nor closed.
    List {
        /// Every handoff and rollup, with its last INDEX event.
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        repo: RepoArg,
    },
    /// Print a handoff (its name or a unique part of it, such as its slug).
    Show {
        name: String,
        #[command(flatten)]
        repo: RepoArg,
    },
    /// Print a handoff and record that this session picked it up (PICKED_UP in INDEX.md).
    Pickup {
        name: String,
        #[command(flatten)]
        repo: RepoArg,
    },
    /// Record that a handoff needs no more work (CLOSED in INDEX.md).
    Close {
        name: String,
        /// Why (one line in INDEX.md).
        #[arg(long)]
        note: Option<String>,
        #[command(flatten)]
        repo: RepoArg,
    },
    /// Fold every handoff up to DATE that no rollup covers yet into one rollup file, and stamp
    /// `rolled_up_into:` into each.
    Rollup {
        /// YYYY-MM-DD (end of that day, UTC), "YYYY-MM-DD HH:MM" (UTC), an RFC 3339 time, or now.
        #[arg(long)]
        through: String,
        /// A short name for the file: `<YYYY-MM-DD_HH-MM>_<session8>_rollup_<slug>.md`.
        #[arg(long)]
        slug: String,
        /// The body; or --file, or stdin.
        #[arg(long, short)]
        body: Option<String>,
        /// Read the body from this file.
        #[arg(long, short)]
        file: Option<PathBuf>,
        /// Mail a one-line notice to this address (no value: every PC on the roster).
        #[arg(long, num_args = 0..=1, default_missing_value = "*", value_name = "TO")]
        announce: Option<String>,
        /// Print a draft body gathered from the covered handoffs' five sections (to edit and
        /// pass back with --file); writes nothing.
        #[arg(long, conflicts_with_all = ["body", "file", "announce"])]
        draft: bool,
        #[command(flatten)]
        repo: RepoArg,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum MemKindArg {
    Decision,
    Gotcha,
}

#[derive(Subcommand)]
pub enum MemoryCmd {
    /// Append a decision or a gotcha to .claude/memory/<topic>.md.
    Add {
        #[arg(value_enum)]
        kind: MemKindArg,
        /// A topic path like auth/session.
        #[arg(long)]
        topic: String,
        /// The entry.
        text: String,
        /// Why (the reason behind a decision, the cause of a gotcha).
        #[arg(long)]
        why: Option<String>,
        #[command(flatten)]
        repo: RepoArg,
    },
    /// Entries of a topic and its sub-topics (every topic without one).
    Show {
        topic: Option<String>,
        #[command(flatten)]
        repo: RepoArg,
    },
    /// Entries with every one of WORDS (prefixes count), best first, from the index in the PC store.
    Search {
        #[arg(required = true)]
        words: Vec<String>,
        #[arg(long, default_value_t = 20)]
        limit: usize,
        #[command(flatten)]
        repo: RepoArg,
    },
}

fn paths() -> anyhow::Result<Paths> {
    Ok(Paths::from_env()?)
}

fn now() -> chrono::DateTime<chrono::Utc> {
    chrono::Utc::now()
}

fn print_json<T: serde::Serialize>(v: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string(v)?);
    Ok(())
}

fn read_stdin() -> anyhow::Result<String> {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).context("cannot read stdin")?;
    Ok(s)
}

/// Opens `$VISUAL`/`$EDITOR` on a template (only when stdin is a terminal).
fn from_editor(template: &str) -> anyhow::Result<String> {
    let editor = std::env::var("VISUAL").ok().or_else(|| std::env::var("EDITOR").ok()).filter(|e| !e.trim().is_empty());
    let Some(editor) = editor else {
        anyhow::bail!(ClientError::Invalid(
            "the handoff has missing sections and no $EDITOR is set: pass the flags or pipe Markdown on stdin".into()
        ));
    };
    let file = tempfile::Builder::new().prefix("pcmail-handoff-").suffix(".md").tempfile()?;
    std::fs::write(file.path(), template)?;
    let mut words = editor.split_whitespace();
    let prog = words.next().expect("not blank");
    let status = std::process::Command::new(prog)
        .args(words)
        .arg(file.path())
        .status()
        .with_context(|| format!("cannot run {editor}"))?;
    if !status.success() {
        anyhow::bail!(ClientError::Invalid(format!("{editor} exited with {status}: no handoff written")));
    }
    Ok(std::fs::read_to_string(file.path())?)
}

pub fn handoff(cmd: HandoffCmd, json: bool) -> anyhow::Result<()> {
    match cmd {
        HandoffCmd::New { slug, goal, done, failed, state, next, file, announce, repo } => {
            let mut args = pcmail_api::handoffs::HandoffNewArgs {
                slug,
                goal,
                done,
                failed,
                state,
                next,
                markdown: None,
                repo: repo.repo,
                announce,
            };
            if let Some(f) = file {
                args.markdown =
                    Some(std::fs::read_to_string(&f).with_context(|| format!("cannot read {}", f.display()))?);
            } else if !args.sections().missing().is_empty() {
                args.markdown = Some(if std::io::stdin().is_terminal() {
                    from_editor(&pcmail_handoff::handoffs::Sections::template(&args.slug))?
                } else {
                    read_stdin()?
                });
            }
            let r = api::handoff_new(&paths()?, &args, now())?;
            if json {
                return print_json(&r);
            }
            println!("pcmail: wrote {} (ACTIVE in INDEX.md)", r.created.path.display());
            if r.created.gitattributes_changed {
                println!("pcmail: .gitattributes now merges INDEX.md and the memory files with merge=union");
            }
            if let Some(a) = &r.announced {
                println!(
                    "pcmail: announced: {}{}",
                    a.ids.join(", "),
                    if a.queued { " (queued: the server is unreachable)" } else { "" }
                );
            }
            warn_announce_failed(r.announce_failed.as_ref());
            Ok(())
        }
        HandoffCmd::List { all, repo } => {
            let r = api::handoff_list(&pcmail_api::handoffs::HandoffListArgs { all, repo: repo.repo })?;
            if json {
                return print_json(&r);
            }
            if r.handoffs.is_empty() {
                println!("pcmail: no handoffs{} in this repo", if all { "" } else { " to read" });
            }
            for s in &r.handoffs {
                let what = if s.rollup {
                    format!(
                        "rollup{}",
                        s.through
                            .map(|t| format!(" through {}", pcmail_handoff::names::format_through(t)))
                            .unwrap_or_default()
                    )
                } else {
                    format!("{} → next: {}", s.goal, s.next)
                };
                println!("{:<9} {}  {}", s.status.as_str(), s.name, what);
            }
            Ok(())
        }
        HandoffCmd::Show { name, repo } => {
            let r = api::handoff_show(&pcmail_api::handoffs::HandoffNameArgs { name, repo: repo.repo })?;
            if json {
                return print_json(&r);
            }
            print!("{}", terminal_text(&r.text));
            Ok(())
        }
        HandoffCmd::Pickup { name, repo } => {
            let r = api::handoff_pickup(
                &paths()?,
                &pcmail_api::handoffs::HandoffNameArgs { name, repo: repo.repo },
                now(),
            )?;
            if json {
                return print_json(&r);
            }
            eprintln!("pcmail: picked up {} (PICKED_UP in INDEX.md)", r.name);
            print!("{}", terminal_text(&r.text));
            Ok(())
        }
        HandoffCmd::Close { name, note, repo } => {
            let r = api::handoff_close(
                &paths()?,
                &pcmail_api::handoffs::HandoffCloseArgs { name, note, repo: repo.repo },
                now(),
            )?;
            if json {
                return print_json(&r);
            }
            println!("pcmail: closed {} (CLOSED in INDEX.md)", r.name);
            Ok(())
        }
        HandoffCmd::Rollup { through, slug, draft: true, repo, .. } => {
            let d = api::handoff_rollup_draft(repo.repo.as_deref(), &through, now())?;
            if json {
                return print_json(&d);
            }
            if d.covers.is_empty() {
                eprintln!("pcmail: no handoff up to {through} that a rollup does not already cover");
            } else {
                eprintln!(
                    "pcmail: a draft for the rollup {slug:?} covering {} handoffs; edit it, then: pcmail handoff rollup --through {through:?} --slug {slug} --file FILE",
                    d.covers.len()
                );
            }
            print!("{}", terminal_text(&d.body));
            Ok(())
        }
        HandoffCmd::Rollup { through, slug, body, file, announce, repo, draft: false } => {
            let body = match (body, file) {
                (Some(b), _) => b,
                (None, Some(f)) => {
                    std::fs::read_to_string(&f).with_context(|| format!("cannot read {}", f.display()))?
                }
                (None, None) if std::io::stdin().is_terminal() => {
                    anyhow::bail!(ClientError::Invalid("no body: pass --body, --file, or pipe it on stdin".into()))
                }
                (None, None) => read_stdin()?,
            };
            let args = pcmail_api::handoffs::HandoffRollupArgs { through, slug, body, repo: repo.repo, announce };
            let r = api::handoff_rollup(&paths()?, &args, now())?;
            if json {
                return print_json(&r);
            }
            println!(
                "pcmail: wrote {} covering {} handoffs through {}; each now says rolled_up_into: {}",
                r.rollup.path.display(),
                r.rollup.covers.len(),
                pcmail_handoff::names::format_through(r.rollup.through),
                r.rollup.name
            );
            if let Some(a) = &r.announced {
                println!("pcmail: announced: {}", a.ids.join(", "));
            }
            warn_announce_failed(r.announce_failed.as_ref());
            Ok(())
        }
    }
}

/// The file is written and stays; only its notice failed: running the same
/// command again would write a second file, so the warning gives the command
/// that sends the notice alone.
fn warn_announce_failed(f: Option<&pcmail_api::handoffs::AnnounceFailed>) {
    if let Some(f) = f {
        eprintln!("pcmail: warning: written, but the announce was not sent ({}): {}", f.code, f.message);
        eprintln!("pcmail: to send it again (not the whole command, which would write a second one): {}", f.resend);
    }
}

fn entry_text(e: &pcmail_handoff::memory::Entry) -> String {
    let mut s =
        format!("- {} {} ({}): {}", e.kind.as_str(), e.at.format("%Y-%m-%d %H:%M"), e.by, e.text.replace('\n', "\n  "));
    if let Some(w) = &e.why {
        s.push_str(&format!("\n  why: {}", w.replace('\n', "\n  ")));
    }
    // A repo's memory file is its committers' text: printed without escapes.
    terminal_text(&s)
}

pub fn memory(cmd: MemoryCmd, json: bool) -> anyhow::Result<()> {
    match cmd {
        MemoryCmd::Add { kind, topic, text, why, repo } => {
            let kind = match kind {
                MemKindArg::Decision => pcmail_api::handoffs::MemoryKind::Decision,
                MemKindArg::Gotcha => pcmail_api::handoffs::MemoryKind::Gotcha,
            };
            let r = api::memory_add(
                &paths()?,
                &pcmail_api::handoffs::MemoryAddArgs { kind, topic, text, why, repo: repo.repo },
                now(),
            )?;
            if json {
                return print_json(&r);
            }
            println!("pcmail: added a {} to {}", r.entry.kind.as_str(), r.path.display());
            Ok(())
        }
        MemoryCmd::Show { topic, repo } => {
            let r = api::memory_show(&pcmail_api::handoffs::MemoryShowArgs { topic, repo: repo.repo })?;
            if json {
                return print_json(&r);
            }
            let mut last: Option<&str> = None;
            for e in &r.entries {
                if last != Some(e.topic.as_str()) {
                    println!("{}# {}", if last.is_some() { "\n" } else { "" }, terminal_text(&e.topic));
                    last = Some(&e.topic);
                }
                println!("{}", entry_text(e));
            }
            if r.entries.is_empty() {
                println!("pcmail: no memory entries in this repo yet (`pcmail memory add gotcha --topic a/b \"…\"`)");
            }
            Ok(())
        }
        MemoryCmd::Search { words, limit, repo } => {
            let r = api::memory_search(
                &paths()?,
                &pcmail_api::handoffs::MemorySearchArgs { words, limit: Some(limit), repo: repo.repo },
            )?;
            if json {
                return print_json(&r);
            }
            for e in &r.entries {
                println!("[{}] {}", terminal_text(&e.topic), entry_text(e).trim_start_matches("- "));
            }
            if r.entries.is_empty() {
                println!("pcmail: nothing matches");
            }
            Ok(())
        }
    }
}
