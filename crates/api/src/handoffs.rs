//! Handoffs, rollups and memory: one function per operation, the
//! same for `pcmail handoff …` / `pcmail memory …` and the MCP tools. They
//! work on the repo's files and the PC store; only `announce` uses the server.

use crate::{ApiError, MailKind, Result, SendArgs};
use chrono::{DateTime, Utc};
use pcmail_client::ops::SendOutcome;
use pcmail_client::Client;
use pcmail_handoff::handoffs::{self, Author, Created, RolledUp, Sections, Shown, Summary};
use pcmail_handoff::memory::{self, Added, Entry, MemKind};
use pcmail_handoff::repo::Repo;
use pcmail_handoff::session::{self, SessionId};
use pcmail_handoff::HandoffError;
use pcmail_local::config::{Config, Paths};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

impl From<HandoffError> for ApiError {
    fn from(e: HandoffError) -> Self {
        match e {
            HandoffError::Usage(_) | HandoffError::NoRepo(_) => ApiError::Usage(e.to_string()),
            HandoffError::NotFound { .. } => ApiError::Missing(e.to_string()),
            HandoffError::Io { .. } => ApiError::Local(e.to_string()),
            HandoffError::Store(s) => s.into(),
        }
    }
}

/// The repo a call is about: `repo` when given, else the one containing the
/// working directory.
pub fn find_repo(repo: Option<&str>) -> Result<Repo> {
    let dir = match repo {
        Some(r) => PathBuf::from(r),
        None => {
            std::env::current_dir().map_err(|e| ApiError::Local(format!("cannot read the current directory: {e}")))?
        }
    };
    Ok(Repo::find(&dir)?)
}

/// Who acts: this PC's label and the session (pcmail_handoff::session).
pub struct Actor {
    pub session: SessionId,
    pub by: String,
}

pub fn actor(paths: &Paths) -> Result<Actor> {
    let label = Config::load(paths)?.label;
    // Inside Claude Code: the session the hook recorded for the process above.
    let session = session::current_with(|| registry_session(paths));
    let by = pcmail_core::rules::actor(&label, Some(&session.id));
    Ok(Actor { session, by })
}

/// The registry's session of the Claude Code process above this command
/// (as `pcmail name` and `lease claim` find it); None outside Claude Code or
/// before the hook recorded it.
fn registry_session(paths: &Paths) -> Option<String> {
    let claude = pcmail_local::process::claude_ancestor()?;
    let store =
        pcmail_store::Store::open_existing(&paths.store(), std::time::Duration::from_millis(500)).ok().flatten()?;
    pcmail_store::leases::session_of_process(store.conn(), claude.pid, claude.start).ok().flatten().map(|r| r.session)
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = crate::optional_not_null)]
pub struct HandoffNewArgs {
    /// The task's slug (a-z 0-9 -), in the file name.
    pub slug: String,
    /// What the session set out to do.
    #[serde(default)]
    pub goal: Option<String>,
    /// What was done, with paths.
    #[serde(default)]
    pub done: Option<String>,
    /// What didn't work, and why.
    #[serde(default)]
    pub failed: Option<String>,
    /// working, broken or blocked, then any detail.
    #[serde(default)]
    pub state: Option<String>,
    /// The next step.
    #[serde(default)]
    pub next: Option<String>,
    /// The sections as Markdown headings instead (fields win).
    #[serde(default)]
    pub markdown: Option<String>,
    /// The repo (default: the working directory's).
    #[serde(default)]
    pub repo: Option<String>,
    /// Also mail a one-line notice here (`*`: every PC).
    #[serde(default)]
    pub announce: Option<String>,
}

impl HandoffNewArgs {
    pub fn sections(&self) -> Sections {
        let flags = Sections {
            goal: self.goal.clone(),
            done: self.done.clone(),
            failed: self.failed.clone(),
            state: self.state.clone(),
            next: self.next.clone(),
        };
        flags.or(self.markdown.as_deref().map(Sections::parse).unwrap_or_default())
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct HandoffNewResult {
    #[serde(flatten)]
    pub created: Created,
    pub session: SessionId,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub announced: Option<SendOutcome>,
    /// The handoff is written but its notice could not be sent: what went
    /// wrong and the command that sends it again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub announce_failed: Option<AnnounceFailed>,
}

/// A notice that was not sent after its file was written. The write stands
/// (running the command again would write a second handoff), so this is a
/// warning with the way to send the notice alone.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub struct AnnounceFailed {
    /// The error's code, as a failed `send` would give it (`refused`, `unknown_address`, …).
    pub code: String,
    pub message: String,
    /// The `pcmail send` command that sends the same notice.
    pub resend: String,
}

/// An announce's address, resolved before anything is written: an address
/// that cannot be resolved fails the whole command (exit 4) with nothing
/// written, so the caller may fix it and run the same command again.
pub struct Announcer {
    client: Client,
    to: String,
}

impl Announcer {
    pub fn resolve(paths: &Paths, to: &str) -> Result<Announcer> {
        let mut client = Client::open(paths.clone())?;
        let to = client.resolve_recipient(to)?;
        Ok(Announcer { client, to })
    }

    /// Sends the one-line notice; a failure now (after the file is written)
    /// is returned as a value, not an error.
    pub fn send(mut self, line: &str) -> std::result::Result<SendOutcome, AnnounceFailed> {
        let body = pcmail_handoff::index::one_line(line);
        let args = SendArgs {
            to: crate::Addresses::One(self.to.clone()),
            kind: MailKind::Note,
            subject: Some(ANNOUNCE_SUBJECT.into()),
            body: body.clone(),
            auto: true,
            ..Default::default()
        };
        crate::send_only(&mut self.client, &args).map_err(|e| AnnounceFailed {
            code: e.code().to_string(),
            message: e.to_string(),
            resend: format!(
                "pcmail send {} --subject {ANNOUNCE_SUBJECT} --auto --body {}",
                pcmail_core::shell::shell_quote(&self.to),
                pcmail_core::shell::shell_quote(&body)
            ),
        })
    }
}

/// The subject of a handoff's or rollup's notice.
const ANNOUNCE_SUBJECT: &str = "handoff";

/// `handoff new`. With `announce`, the address is resolved first (exit 4,
/// nothing written, when it cannot be); a notice that fails after the write
/// is reported in `announce_failed` and the command still succeeds.
pub fn handoff_new(paths: &Paths, args: &HandoffNewArgs, now: DateTime<Utc>) -> Result<HandoffNewResult> {
    let repo = find_repo(args.repo.as_deref())?;
    let a = actor(paths)?;
    let sections = args.sections();
    let announcer = args.announce.as_deref().map(|to| Announcer::resolve(paths, to)).transpose()?;
    let created =
        handoffs::new_handoff(&repo, &args.slug, &Author { session: &a.session.id, by: &a.by, at: now }, &sections)?;
    let (announced, announce_failed) = match announcer {
        Some(an) => {
            let goal = handoffs::first_line(&sections.goal);
            split(an.send(&format!("handoff {}: {goal}", created.name)))
        }
        None => (None, None),
    };
    Ok(HandoffNewResult { created, session: a.session, announced, announce_failed })
}

fn split(r: std::result::Result<SendOutcome, AnnounceFailed>) -> (Option<SendOutcome>, Option<AnnounceFailed>) {
    match r {
        Ok(o) => (Some(o), None),
        Err(f) => (None, Some(f)),
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = crate::optional_not_null)]
pub struct HandoffListArgs {
    /// Include handoffs a rollup covers and closed ones.
    #[serde(default)]
    pub all: bool,
    #[serde(default)]
    pub repo: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct HandoffListResult {
    pub repo: String,
    pub handoffs: Vec<Summary>,
}

/// `handoff list`: newest first; by default what a new session should read
/// (the latest rollup and what is not rolled up or closed).
pub fn handoff_list(args: &HandoffListArgs) -> Result<HandoffListResult> {
    let repo = find_repo(args.repo.as_deref())?;
    let mut all = handoffs::list(&repo)?;
    if !args.all {
        let latest_rollup = all.iter().find(|s| s.rollup).map(|s| s.name.clone());
        all.retain(|s| {
            if s.rollup {
                Some(&s.name) == latest_rollup.as_ref()
            } else {
                s.rolled_up_into.is_none()
                    && matches!(s.status, pcmail_handoff::index::Event::Active | pcmail_handoff::index::Event::PickedUp)
            }
        });
    }
    Ok(HandoffListResult { repo: repo.id, handoffs: all })
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = crate::optional_not_null)]
pub struct HandoffNameArgs {
    /// The handoff's name, or a unique part of it (its slug).
    pub name: String,
    #[serde(default)]
    pub repo: Option<String>,
}

/// `handoff show`.
pub fn handoff_show(args: &HandoffNameArgs) -> Result<Shown> {
    Ok(handoffs::show(&find_repo(args.repo.as_deref())?, &args.name)?)
}

/// `handoff pickup`: shows it and records who picked it up (PICKED_UP).
pub fn handoff_pickup(paths: &Paths, args: &HandoffNameArgs, now: DateTime<Utc>) -> Result<Shown> {
    let repo = find_repo(args.repo.as_deref())?;
    Ok(handoffs::pickup(&repo, &args.name, &actor(paths)?.by, now)?)
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = crate::optional_not_null)]
pub struct HandoffCloseArgs {
    pub name: String,
    /// Why it is closed (one line in the INDEX).
    #[serde(default)]
    pub note: Option<String>,
    #[serde(default)]
    pub repo: Option<String>,
}

/// `handoff close`.
pub fn handoff_close(paths: &Paths, args: &HandoffCloseArgs, now: DateTime<Utc>) -> Result<Shown> {
    let repo = find_repo(args.repo.as_deref())?;
    Ok(handoffs::close(&repo, &args.name, &actor(paths)?.by, args.note.as_deref().unwrap_or(""), now)?)
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = crate::optional_not_null)]
pub struct HandoffRollupArgs {
    /// Fold the handoffs up to this time: YYYY-MM-DD (end of day, UTC), "YYYY-MM-DD HH:MM" (UTC), RFC 3339, or now.
    pub through: String,
    pub slug: String,
    /// The rollup's body: what the covered sessions add up to (same five questions).
    pub body: String,
    #[serde(default)]
    pub repo: Option<String>,
    /// Also mail a one-line notice here (`*`: every PC).
    #[serde(default)]
    pub announce: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct HandoffRollupResult {
    #[serde(flatten)]
    pub rollup: RolledUp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub announced: Option<SendOutcome>,
    /// Written, but the notice could not be sent (see `HandoffNewResult`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub announce_failed: Option<AnnounceFailed>,
}

/// `handoff rollup`.
/// What `handoff rollup --draft` prints: the handoffs a rollup through
/// `through` would cover and a body gathered from their five sections, for
/// the author to edit (nothing is written).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HandoffRollupDraft {
    pub covers: Vec<String>,
    pub body: String,
}

pub fn handoff_rollup_draft(repo: Option<&str>, through: &str, now: DateTime<Utc>) -> Result<HandoffRollupDraft> {
    let repo = find_repo(repo)?;
    let through = pcmail_handoff::names::parse_date(through, now)?;
    let (covers, body) = handoffs::draft_rollup_body(&repo, through)?;
    Ok(HandoffRollupDraft { covers, body })
}

pub fn handoff_rollup(paths: &Paths, args: &HandoffRollupArgs, now: DateTime<Utc>) -> Result<HandoffRollupResult> {
    let repo = find_repo(args.repo.as_deref())?;
    let through = pcmail_handoff::names::parse_date(&args.through, now)?;
    let a = actor(paths)?;
    let announcer = args.announce.as_deref().map(|to| Announcer::resolve(paths, to)).transpose()?;
    let rollup = handoffs::rollup(
        &repo,
        &args.slug,
        &Author { session: &a.session.id, by: &a.by, at: now },
        through,
        &args.body,
    )?;
    let (announced, announce_failed) = match announcer {
        Some(an) => split(an.send(&format!("rollup {} covers {} handoffs", rollup.name, rollup.covers.len()))),
        None => (None, None),
    };
    Ok(HandoffRollupResult { rollup, announced, announce_failed })
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum MemoryKind {
    #[default]
    Decision,
    Gotcha,
}

impl From<MemoryKind> for MemKind {
    fn from(k: MemoryKind) -> MemKind {
        match k {
            MemoryKind::Decision => MemKind::Decision,
            MemoryKind::Gotcha => MemKind::Gotcha,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = crate::optional_not_null)]
pub struct MemoryAddArgs {
    pub kind: MemoryKind,
    /// A topic path like auth/session (the file .claude/memory/auth/session.md).
    pub topic: String,
    pub text: String,
    #[serde(default)]
    pub why: Option<String>,
    #[serde(default)]
    pub repo: Option<String>,
}

/// `memory add`.
pub fn memory_add(paths: &Paths, args: &MemoryAddArgs, now: DateTime<Utc>) -> Result<Added> {
    let repo = find_repo(args.repo.as_deref())?;
    Ok(memory::add(&repo, args.kind.into(), &args.topic, &args.text, args.why.as_deref(), &actor(paths)?.by, now)?)
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = crate::optional_not_null)]
pub struct MemoryShowArgs {
    /// A topic (with its sub-topics); every topic when absent.
    #[serde(default)]
    pub topic: Option<String>,
    #[serde(default)]
    pub repo: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct MemoryEntries {
    pub repo: String,
    pub entries: Vec<Entry>,
}

/// `memory show`.
pub fn memory_show(args: &MemoryShowArgs) -> Result<MemoryEntries> {
    let repo = find_repo(args.repo.as_deref())?;
    let entries = memory::show(&repo, args.topic.as_deref())?;
    Ok(MemoryEntries { repo: repo.id, entries })
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = crate::optional_not_null)]
pub struct MemorySearchArgs {
    /// Words; an entry matches when it has every one (prefixes count).
    pub words: Vec<String>,
    /// At most this many, best first (default 20).
    #[serde(default)]
    pub limit: Option<usize>,
    #[serde(default)]
    pub repo: Option<String>,
}

/// `memory search`: through the FTS5 index in the PC store (brought up to
/// date with the files first).
pub fn memory_search(paths: &Paths, args: &MemorySearchArgs) -> Result<MemoryEntries> {
    let repo = find_repo(args.repo.as_deref())?;
    let mut store = pcmail_store::Store::open(&paths.store())?;
    let entries = memory::search(&mut store, &repo, &args.words, args.limit.unwrap_or(20).max(1))?;
    Ok(MemoryEntries { repo: repo.id, entries })
}
