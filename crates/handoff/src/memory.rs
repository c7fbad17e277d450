//! Memory: decisions and gotchas, appended to `.claude/memory/<topic>.md`
//! (hierarchical by topic path, Markdown readable without pcmail, one entry
//! per append in a single write). `search` goes through an FTS5 index in the
//! PC store, rebuilt from the files whose size or modification time changed.

use crate::names::AT_FORMAT;
use crate::repo::Repo;
use crate::{fsutil, gitattributes, index, HandoffError, Result};
use chrono::{DateTime, TimeZone, Utc};
use pcmail_store::memory::{MemoryFile, MemoryRow, MemoryUpsert};
use pcmail_store::Store;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

pub const TOPIC_MAX: usize = 100;
pub const TEXT_MAX_CHARS: usize = 4000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemKind {
    Decision,
    Gotcha,
}

impl MemKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MemKind::Decision => "decision",
            MemKind::Gotcha => "gotcha",
        }
    }
    pub fn parse(s: &str) -> Option<MemKind> {
        match s {
            "decision" => Some(MemKind::Decision),
            "gotcha" => Some(MemKind::Gotcha),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub topic: String,
    pub kind: MemKind,
    pub at: DateTime<Utc>,
    pub by: String,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// A topic path: segments of lower-case a-z 0-9 `.` `_` `-` (not starting
/// with `.`), joined by `/`, at most 100 characters.
pub fn check_topic(topic: &str) -> Result<()> {
    let ok = !topic.is_empty()
        && topic.len() <= TOPIC_MAX
        && topic.split('/').all(|seg| {
            !seg.is_empty()
                && !seg.starts_with('.')
                && seg.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'))
        });
    if ok {
        Ok(())
    } else {
        Err(HandoffError::Usage(format!(
            "topic {topic:?}: use a path like auth/session (lower-case a-z 0-9 . _ -, segments joined by /, at most {TOPIC_MAX})"
        )))
    }
}

pub fn topic_path(repo: &Repo, topic: &str) -> PathBuf {
    let mut p = repo.memory_dir();
    for seg in topic.split('/') {
        p.push(seg);
    }
    p.set_extension("md");
    p
}

fn header_line(kind: MemKind, at: DateTime<Utc>, by: &str) -> String {
    format!("## {} · {} · {}", kind.as_str(), at.format(AT_FORMAT), pcmail_core::rules::sanitize_actor(by))
}

/// A text line that would read as an entry header is escaped (`\## …`), so
/// the file parses back to the same entries.
fn escape(text: &str) -> String {
    text.trim()
        .lines()
        .map(|l| if l.starts_with("## ") || l.starts_with("\\## ") { format!("\\{l}") } else { l.to_string() })
        .collect::<Vec<_>>()
        .join("\n")
}

fn unescape(line: &str) -> &str {
    match line.strip_prefix('\\') {
        Some(rest) if rest.starts_with("## ") || rest.starts_with("\\## ") => rest,
        _ => line,
    }
}

pub fn render_entry(kind: MemKind, at: DateTime<Utc>, by: &str, text: &str, why: Option<&str>) -> String {
    let mut s = format!("\n{}\n\n{}\n", header_line(kind, at, by), escape(text));
    if let Some(w) = why.map(str::trim).filter(|w| !w.is_empty()) {
        s.push_str(&format!("\n**Why:** {}\n", escape(w)));
    }
    s
}

#[derive(Debug, Clone, Serialize)]
pub struct Added {
    pub topic: String,
    pub path: PathBuf,
    pub entry: Entry,
}

/// `pcmail memory add`: one entry appended in one write.
pub fn add(
    repo: &Repo,
    kind: MemKind,
    topic: &str,
    text: &str,
    why: Option<&str>,
    by: &str,
    at: DateTime<Utc>,
) -> Result<Added> {
    check_topic(topic)?;
    if text.trim().is_empty() {
        return Err(HandoffError::Usage("the entry needs its text".into()));
    }
    if text.chars().count() > TEXT_MAX_CHARS || why.is_some_and(|w| w.chars().count() > TEXT_MAX_CHARS) {
        return Err(HandoffError::Usage(format!("an entry is at most {TEXT_MAX_CHARS} characters (and its why too)")));
    }
    gitattributes::ensure(&repo.root)?;
    let path = topic_path(repo, topic);
    fsutil::ensure_with_header(
        &repo.root,
        &path,
        &format!("# Memory: {topic}\n\nDecisions and gotchas, appended by `pcmail memory add` (newest last; edit by adding, not rewriting).\n"),
    )?;
    fsutil::append_block(&repo.root, &path, &render_entry(kind, at, by, text, why))?;
    let entry = Entry {
        topic: topic.to_string(),
        kind,
        // The file keeps whole seconds.
        at: Utc.timestamp_opt(at.timestamp(), 0).single().unwrap_or(at),
        by: pcmail_core::rules::sanitize_actor(by),
        text: text.trim().to_string(),
        why: why.map(|w| w.trim().to_string()).filter(|w| !w.is_empty()),
    };
    Ok(Added { topic: topic.to_string(), path, entry })
}

/// The entries of one topic file's text, in file order.
pub fn parse_file(topic: &str, text: &str) -> Vec<Entry> {
    let mut out: Vec<Entry> = vec![];
    let mut cur: Option<(MemKind, DateTime<Utc>, String)> = None;
    let mut body: Vec<&str> = vec![];
    let finish = |cur: Option<(MemKind, DateTime<Utc>, String)>, body: &mut Vec<&str>, out: &mut Vec<Entry>| {
        if let Some((kind, at, by)) = cur {
            let mut text = vec![];
            let mut why: Option<Vec<&str>> = None;
            for l in body.iter() {
                if let Some(w) = l.strip_prefix("**Why:**") {
                    why = Some(vec![w.trim_start()]);
                } else if let Some(w) = why.as_mut() {
                    w.push(unescape(l));
                } else {
                    text.push(unescape(l));
                }
            }
            let text = text.join("\n").trim().to_string();
            let why = why.map(|w| w.join("\n").trim().to_string()).filter(|w| !w.is_empty());
            out.push(Entry { topic: topic.to_string(), kind, at, by, text, why });
        }
        body.clear();
    };
    for line in text.lines() {
        if let Some(h) = parse_header(line) {
            finish(cur.take(), &mut body, &mut out);
            cur = Some(h);
        } else if cur.is_some() {
            body.push(line);
        }
    }
    finish(cur, &mut body, &mut out);
    out
}

fn parse_header(line: &str) -> Option<(MemKind, DateTime<Utc>, String)> {
    let rest = line.strip_prefix("## ")?;
    let mut parts = rest.split(" · ");
    let kind = MemKind::parse(parts.next()?.trim())?;
    let at = crate::names::parse_stamp(parts.next()?.trim(), AT_FORMAT)?;
    let by = parts.next().unwrap_or("").trim().to_string();
    Some((kind, Utc.from_utc_datetime(&at), by))
}

/// Every topic file under the memory folder: (topic, path, size, mtime ns).
pub fn topic_files(repo: &Repo) -> Result<Vec<(String, PathBuf, MemoryFile)>> {
    topic_files_seen(repo, &mut |_| {})
}

/// [`topic_files`], telling `before_listing` each folder just before it is
/// listed (the memory folder first, even when it does not exist): the hook's
/// view cache notes what each folder was when its listing was taken.
pub fn topic_files_seen(
    repo: &Repo,
    before_listing: &mut dyn FnMut(&std::path::Path),
) -> Result<Vec<(String, PathBuf, MemoryFile)>> {
    let root = repo.memory_dir();
    let mut out = vec![];
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        before_listing(&dir);
        let rd = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(HandoffError::io(&dir, e)),
        };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() && name.ends_with(".md") {
                let Ok(rel) = p.strip_prefix(&root) else { continue };
                let rel = rel.to_string_lossy().replace('\\', "/");
                let topic = rel.trim_end_matches(".md").to_string();
                let meta = e.metadata().map_err(|err| HandoffError::io(&p, err))?;
                let mtime_ns = meta
                    .modified()
                    .ok()
                    .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
                    .map(|d| d.as_nanos() as i64)
                    .unwrap_or(0);
                out.push((topic, p, MemoryFile { path: rel, size: meta.len() as i64, mtime_ns }));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// `pcmail memory show [topic]`: the entries of a topic and its sub-topics
/// (every topic when none), by topic, in file order.
pub fn show(repo: &Repo, topic: Option<&str>) -> Result<Vec<Entry>> {
    if let Some(t) = topic {
        check_topic(t)?;
    }
    let files = topic_files(repo)?;
    let mut out = vec![];
    let mut seen_topic = false;
    for (t, path, _) in &files {
        if let Some(want) = topic {
            if t != want && !t.starts_with(&format!("{want}/")) {
                continue;
            }
        }
        seen_topic = true;
        // Others may be appending: whole lines only.
        let text = crate::fsutil::read_appended(path)?.unwrap_or_default();
        out.extend(parse_file(t, &text));
    }
    if let (Some(t), false) = (topic, seen_topic) {
        return Err(HandoffError::NotFound {
            what: format!("no memory topic {t:?} in {}", repo.memory_dir().display()),
            candidates: files.iter().map(|f| f.0.clone()).take(10).collect(),
        });
    }
    Ok(out)
}

/// What [`sync_index`] did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SyncReport {
    pub files: usize,
    pub reindexed: usize,
    pub removed: usize,
}

/// Brings the store's index for this repo up to date with the files: only
/// files whose size or modification time changed are parsed again.
pub fn sync_index(store: &mut Store, repo: &Repo) -> Result<SyncReport> {
    let files = topic_files(repo)?;
    let known = store.memory_files(&repo.id)?;
    let mut upserts = vec![];
    for (topic, path, f) in &files {
        if known.iter().any(|k| k == f) {
            continue;
        }
        let text = crate::fsutil::read_appended(path)?.unwrap_or_default();
        let rows = parse_file(topic, &text)
            .into_iter()
            .map(|e| MemoryRow {
                topic: e.topic,
                kind: e.kind.as_str().to_string(),
                at: e.at.timestamp_millis(),
                by: e.by,
                text: e.text,
                why: e.why.unwrap_or_default(),
            })
            .collect();
        upserts.push(MemoryUpsert { file: f.clone(), rows });
    }
    let removed: Vec<String> =
        known.iter().filter(|k| !files.iter().any(|f| f.2.path == k.path)).map(|k| k.path.clone()).collect();
    store.memory_apply(&repo.id, &upserts, &removed)?;
    Ok(SyncReport { files: files.len(), reindexed: upserts.len(), removed: removed.len() })
}

/// An FTS5 query from the user's words: each word a quoted prefix term, all
/// required. Words outside ASCII also go to a substring match (the unicode61
/// tokenizer keeps a run of Japanese as one token).
pub fn fts_query(words: &[String]) -> (String, Vec<String>) {
    let words: Vec<&str> = words.iter().flat_map(|w| w.split_whitespace()).collect();
    let q = words.iter().map(|w| format!("\"{}\"*", w.replace('"', "\"\""))).collect::<Vec<_>>().join(" ");
    let subs = words.iter().filter(|w| !w.is_ascii()).map(|w| w.to_string()).collect();
    (q, subs)
}

/// `pcmail memory search WORDS`.
pub fn search(store: &mut Store, repo: &Repo, words: &[String], limit: usize) -> Result<Vec<Entry>> {
    let (q, subs) = fts_query(words);
    if q.is_empty() {
        return Err(HandoffError::Usage("search for what? give one or more words".into()));
    }
    sync_index(store, repo)?;
    let rows = match store.memory_search(&repo.id, &q, &subs, limit) {
        Ok(r) => r,
        // A query FTS5 cannot parse: fall back to substrings of every word.
        Err(_) => store.memory_search(
            &repo.id,
            "",
            &words.iter().flat_map(|w| w.split_whitespace()).map(str::to_string).collect::<Vec<_>>(),
            limit,
        )?,
    };
    Ok(rows
        .into_iter()
        .map(|r| Entry {
            topic: r.topic,
            kind: MemKind::parse(&r.kind).unwrap_or(MemKind::Decision),
            at: Utc.timestamp_millis_opt(r.at).single().unwrap_or_default(),
            by: r.by,
            text: r.text,
            why: Some(r.why).filter(|w| !w.is_empty()),
        })
        .collect())
}

/// One line of an entry (for lists and the hook).
pub fn entry_line(e: &Entry) -> String {
    index::one_line(&e.text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 4, 9, 14, 0, s).unwrap()
    }

    #[test]
    fn entries_append_and_parse_back_even_with_tricky_text() {
        let d = tempfile::tempdir().unwrap();
        let repo = Repo::at(d.path());
        add(
            &repo,
            MemKind::Decision,
            "auth/session",
            "Tokens live 15 min",
            Some("the proxy caches 10 min"),
            "pc-a/s1",
            at(1),
        )
        .unwrap();
        let tricky = "line one\n## gotcha · 2026-01-01 00:00:00Z · fake\n**Why:** not really";
        let a = add(&repo, MemKind::Gotcha, "auth/session", tricky, None, "pc-b/s2", at(2)).unwrap();
        assert_eq!(a.path, d.path().join(".claude/memory/auth/session.md"));
        let all = show(&repo, Some("auth")).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].why.as_deref(), Some("the proxy caches 10 min"));
        assert_eq!(all[1].kind, MemKind::Gotcha);
        assert_eq!(all[1].by, "pc-b/s2");
        // The fake header stays text; the fake Why is text of the entry, not its why.
        assert!(all[1].text.starts_with("line one\n## gotcha"), "{:?}", all[1]);
        assert!(matches!(show(&repo, Some("nope")), Err(HandoffError::NotFound { .. })));
        for bad in ["", "Auth", "a//b", "../x", "a/.b", "a b"] {
            assert!(add(&repo, MemKind::Gotcha, bad, "t", None, "x", at(3)).is_err(), "{bad}");
        }
        assert!(std::fs::read_to_string(d.path().join(".gitattributes"))
            .unwrap()
            .contains(".claude/memory/**/*.md merge=union"));
    }

    #[test]
    fn search_reindexes_only_what_changed() {
        let d = tempfile::tempdir().unwrap();
        let s = tempfile::tempdir().unwrap();
        let mut store = Store::open(&s.path().join("store.db")).unwrap();
        let repo = Repo::at(d.path());
        add(&repo, MemKind::Gotcha, "db", "SQLite busy timeout must be set before WAL", None, "x", at(1)).unwrap();
        add(&repo, MemKind::Decision, "ui/tray", "The tray polls only without a daemon", None, "x", at(2)).unwrap();
        add(&repo, MemKind::Gotcha, "ja", "認証トークンの更新が競合する", Some("プロキシ"), "x", at(3)).unwrap();
        let hits = search(&mut store, &repo, &["busy".into()], 10).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].topic, "db");
        assert_eq!(search(&mut store, &repo, &["tray daemon".into()], 10).unwrap()[0].topic, "ui/tray");
        assert_eq!(search(&mut store, &repo, &["トークン".into()], 10).unwrap()[0].topic, "ja");
        assert!(search(&mut store, &repo, &["nothing-like-this".into()], 10).unwrap().is_empty());
        // Unchanged files are not parsed again; an appended one is.
        assert_eq!(sync_index(&mut store, &repo).unwrap().reindexed, 0);
        add(&repo, MemKind::Gotcha, "db", "VACUUM needs twice the space", None, "x", at(4)).unwrap();
        let r = sync_index(&mut store, &repo).unwrap();
        assert_eq!((r.files, r.reindexed), (3, 1));
        assert_eq!(search(&mut store, &repo, &["vacuum".into()], 10).unwrap().len(), 1);
        std::fs::remove_file(topic_path(&repo, "ui/tray")).unwrap();
        assert_eq!(sync_index(&mut store, &repo).unwrap().removed, 1);
        assert!(search(&mut store, &repo, &["tray".into()], 10).unwrap().is_empty());
        // Quotes and FTS operators in the words are only words.
        assert!(search(&mut store, &repo, &["\"busy".into(), "NEAR(".into()], 10).is_ok());
    }
}
