//! `pcmail export DIR`: what this PC knows, as files anyone can read without
//! pcmail. One Markdown file per mail (front matter, the text, its timeline),
//! and JSON for the leases, names, sessions and jobs, so nothing is locked in
//! the PC's SQLite store. Reads the PC store only (no server, works offline).
//!
//! The folder is new or empty and is made private (0700, files 0600: mail is
//! the PC user's); a file is created with O_EXCL and never replaces anything,
//! so an export can never overwrite a file or follow a link someone left there.

use crate::{ApiError, Result};
use pcmail_core::{Millis, TimelineEntry};
use pcmail_local::config::Paths;
use pcmail_store::{InboxMail, SentMail, Store};
use serde::Serialize;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Rows read from each table at most (the PC store keeps less than this).
const MAX_ROWS: usize = 1_000_000;

#[derive(Debug, Clone, Default, Serialize)]
pub struct ExportResult {
    pub dir: PathBuf,
    pub received: usize,
    pub sent: usize,
    pub leases: usize,
    pub names: usize,
    pub sessions: usize,
    pub jobs: usize,
    /// Every file written, relative to `dir`.
    pub files: usize,
}

pub fn export(paths: &Paths, dir: &Path, now: Millis) -> Result<ExportResult> {
    prepare_dir(dir)?;
    let store = Store::open(&paths.store())?;
    let mut out = ExportResult { dir: dir.to_path_buf(), ..Default::default() };

    let received = store.inbox_list(&[], MAX_ROWS)?;
    let sent = store.sent_list(MAX_ROWS)?;
    mkdir(&dir.join("mail"))?;
    mkdir(&dir.join("mail/received"))?;
    mkdir(&dir.join("mail/sent"))?;
    for m in &received {
        write_new(&dir.join("mail/received").join(file_name(&m.id)), received_md(m).as_bytes())?;
        out.files += 1;
    }
    for m in &sent {
        write_new(&dir.join("mail/sent").join(file_name(&m.id)), sent_md(m).as_bytes())?;
        out.files += 1;
    }
    out.received = received.len();
    out.sent = sent.len();

    let mine = store.leases_mine()?;
    let seen = store.lease_cache()?;
    out.leases = mine.len() + seen.len();
    write_json(dir, "leases.json", &json!({ "mine": mine, "known": seen }))?;
    let names: Vec<Value> =
        store.names()?.into_iter().map(|(name, session)| json!({"name": name, "session": session})).collect();
    out.names = names.len();
    write_json(dir, "names.json", &json!({ "held": names }))?;
    let sessions = pcmail_store::leases::sessions_list(store.conn(), MAX_ROWS)?;
    out.sessions = sessions.len();
    write_json(dir, "sessions.json", &json!({ "sessions": sessions }))?;
    let jobs: Vec<Value> = store
        .jobs_mine(MAX_ROWS)?
        .into_iter()
        .map(|j| {
            json!({
                "jobId": j.job_id, "session": j.session, "target": j.target, "command": j.command,
                "submittedAt": iso(j.submitted_at), "state": j.state,
                "endedAt": j.ended_at.map(iso),
                "job": j.job.as_deref().and_then(|s| serde_json::from_str::<Value>(s).ok()),
            })
        })
        .collect();
    out.jobs = jobs.len();
    write_json(dir, "jobs.json", &json!({ "submitted": jobs }))?;
    out.files += 4;

    let index = format!(
        "# pcmail export\n\nExported {} by `pcmail export`.\n\n\
         - `mail/received/`: {} mails this PC received, one file each (front matter, text, timeline)\n\
         - `mail/sent/`: {} mails this PC sent\n\
         - `leases.json`: {} leases (this PC's own, and the others it last saw)\n\
         - `names.json`: {} names this PC's sessions hold\n\
         - `sessions.json`: {} sessions recorded on this PC\n\
         - `jobs.json`: {} jobs this PC submitted\n",
        iso(now),
        out.received,
        out.sent,
        out.leases,
        out.names,
        out.sessions,
        out.jobs
    );
    write_new(&dir.join("README.md"), index.as_bytes())?;
    out.files += 1;
    Ok(out)
}

/// A new folder, or an empty real one (not a link): an export never mixes
/// with or overwrites what is there.
fn prepare_dir(dir: &Path) -> Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(md) if md.file_type().is_symlink() || !md.is_dir() => {
            Err(ApiError::Usage(format!("{} exists and is not a folder: give a new or empty folder", shown(dir))))
        }
        Ok(_) => {
            let mut entries = std::fs::read_dir(dir).map_err(|e| io_err(dir, e))?;
            if entries.next().is_some() {
                return Err(ApiError::Usage(format!(
                    "{} is not empty: give a new or empty folder (an export never overwrites)",
                    shown(dir)
                )));
            }
            pcmail_fsmode_restrict_dir(dir)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => mkdir(dir),
        Err(e) => Err(io_err(dir, e)),
    }
}

fn mkdir(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        let mut b = std::fs::DirBuilder::new();
        std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
        b.create(dir).map_err(|e| io_err(dir, e))
    }
    #[cfg(not(unix))]
    std::fs::create_dir(dir).map_err(|e| io_err(dir, e))
}

fn pcmail_fsmode_restrict_dir(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(|e| io_err(dir, e))?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // With create_new a link is refused anyway; O_NOFOLLOW keeps it so
        // should the open ever change.
        opts.mode(0o600).custom_flags(libc::O_NOFOLLOW);
    }
    let mut f = opts.open(path).map_err(|e| io_err(path, e))?;
    f.write_all(bytes).map_err(|e| io_err(path, e))
}

fn write_json(dir: &Path, name: &str, v: &Value) -> Result<()> {
    let mut text = serde_json::to_string_pretty(v).map_err(|e| ApiError::Local(e.to_string()))?;
    text.push('\n');
    write_new(&dir.join(name), text.as_bytes())
}

fn io_err(path: &Path, e: std::io::Error) -> ApiError {
    ApiError::Local(format!("{}: {e}", shown(path)))
}

/// A path as messages show it: control characters escaped (a folder name
/// cannot colour or move a terminal) and cut to 200 characters.
pub fn shown(path: &Path) -> String {
    let s: String = path.display().to_string().escape_debug().collect();
    pcmail_core::present::truncate_chars(&s, 200)
}

/// Mail ids are the server's (letters, digits, `-`, `_`, `.`); anything else
/// becomes `_`, so a name never leaves its folder.
fn file_name(id: &str) -> String {
    let safe: String =
        id.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_') { c } else { '_' }).collect();
    format!("{safe}.md")
}

fn iso(ms: Millis) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_else(|| ms.to_string())
}

/// A front matter value: JSON strings are valid YAML scalars.
fn yaml(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

fn timeline_md(t: &[TimelineEntry]) -> String {
    let mut out = String::from("\n## Timeline\n\n");
    if t.is_empty() {
        out.push_str("(none recorded)\n");
    }
    for e in t {
        out.push_str(&format!("- {} {}", iso(e.at), e.state.as_str()));
        if !e.by.is_empty() {
            out.push_str(&format!(" by {}", e.by));
        }
        if let Some(r) = e.note.as_deref().filter(|r| !r.is_empty()) {
            out.push_str(&format!(": {}", r.replace('\n', " ")));
        }
        out.push('\n');
    }
    out
}

fn received_md(m: &InboxMail) -> String {
    let mut fm = vec![
        format!("id: {}", yaml(&m.id)),
        format!("from: {}", yaml(&m.from)),
        format!("to: {}", yaml(&m.to)),
        format!("kind: {}", m.kind.as_str()),
        format!("subject: {}", yaml(&m.subject)),
        format!("urgent: {}", m.urgent),
        format!("created: {}", iso(m.created_at)),
        format!("received: {}", iso(m.received_at)),
        format!("state: {}", m.status.as_str()),
        format!("state_at: {}", iso(m.status_at)),
    ];
    if let Some(all) = &m.recipients {
        // Mail sent to several addresses: the whole list (a YAML flow sequence of JSON strings).
        fm.push(format!("recipients: [{}]", all.iter().map(|a| yaml(a)).collect::<Vec<_>>().join(", ")));
    }
    if let Some(r) = &m.in_reply_to {
        fm.push(format!("in_reply_to: {}", yaml(r)));
    }
    if let Some(e) = m.expires_at {
        fm.push(format!("expires: {}", iso(e)));
    }
    if let Some(r) = &m.fail_reason {
        fm.push(format!("fail_reason: {}", yaml(r)));
    }
    format!("---\n{}\n---\n\n{}\n{}", fm.join("\n"), m.body, timeline_md(&m.timeline))
}

fn sent_md(m: &SentMail) -> String {
    let mut fm = vec![
        format!("id: {}", yaml(&m.id)),
        format!("to: {}", yaml(&m.to)),
        format!("kind: {}", m.kind.as_str()),
        format!("subject: {}", yaml(&m.subject)),
        format!("urgent: {}", m.urgent),
        format!("created: {}", iso(m.created_at)),
        format!("state: {}", m.state.as_str()),
        format!("state_at: {}", iso(m.state_at)),
    ];
    if let Some(r) = &m.in_reply_to {
        fm.push(format!("in_reply_to: {}", yaml(r)));
    }
    if let Some(q) = &m.queued {
        fm.push(format!("queued: {}", yaml(q)));
    }
    format!("---\n{}\n---\n\n{}\n{}", fm.join("\n"), m.body, timeline_md(&m.timeline))
}
