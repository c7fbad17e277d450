//! Handoffs and rollups: one file per session (never overwritten), the five
//! sections as headings, an INDEX line per event; a rollup folds
//! older handoffs and stamps `rolled_up_into:` into each (the only edit an old
//! handoff ever gets, done atomically).

use crate::index::{self, Event, Line};
use crate::names::{self, ParsedName};
use crate::repo::Repo;
use crate::{fsutil, gitattributes, HandoffError, Result};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkState {
    Working,
    Broken,
    Blocked,
}

impl WorkState {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkState::Working => "working",
            WorkState::Broken => "broken",
            WorkState::Blocked => "blocked",
        }
    }
    pub fn parse(s: &str) -> Option<WorkState> {
        Some(match s.trim().trim_end_matches([':', '.', ',']).to_ascii_lowercase().as_str() {
            "working" => WorkState::Working,
            "broken" => WorkState::Broken,
            "blocked" => WorkState::Blocked,
            _ => return None,
        })
    }
}

/// The five sections (goal; done, with paths; what didn't work and
/// why; the state; the next step). `state` is its first word plus any detail.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Sections {
    pub goal: Option<String>,
    pub done: Option<String>,
    pub failed: Option<String>,
    pub state: Option<String>,
    pub next: Option<String>,
}

/// What an empty section says in the file.
pub const NOTHING_RECORDED: &str = "(nothing recorded)";

/// The headings as written.
pub const HEADINGS: [&str; 5] = ["Goal", "Done", "What didn't work", "State", "Next step"];

#[derive(Clone, Copy)]
enum Which {
    Goal,
    Done,
    Failed,
    State,
    Next,
}

fn heading_of(line: &str) -> Option<Which> {
    let t = line.trim_start();
    if !t.starts_with('#') {
        return None;
    }
    let h = t.trim_start_matches('#').trim().trim_end_matches(':').to_lowercase().replace('’', "'");
    Some(if h.starts_with("goal") {
        Which::Goal
    } else if h.starts_with("done") {
        Which::Done
    } else if h.contains("didn't work")
        || h.contains("did not work")
        || h.starts_with("failed")
        || h.starts_with("what failed")
    {
        Which::Failed
    } else if h.starts_with("state") {
        Which::State
    } else if h.starts_with("next") {
        Which::Next
    } else {
        return None;
    })
}

impl Sections {
    /// The sections of a Markdown text (a handoff, stdin, the editor's file):
    /// text under each known heading; other headings stay in their section.
    pub fn parse(text: &str) -> Sections {
        let mut s = Sections::default();
        let mut cur: Option<Which> = None;
        let mut buf = String::new();
        let body = strip_front_matter(text).1;
        let flush = |cur: Option<Which>, buf: &mut String, s: &mut Sections| {
            let t = buf.trim().to_string();
            buf.clear();
            let Some(w) = cur else { return };
            if t.is_empty() {
                return;
            }
            let slot = match w {
                Which::Goal => &mut s.goal,
                Which::Done => &mut s.done,
                Which::Failed => &mut s.failed,
                Which::State => &mut s.state,
                Which::Next => &mut s.next,
            };
            *slot = Some(t);
        };
        for line in body.lines() {
            if let Some(w) = heading_of(line) {
                flush(cur, &mut buf, &mut s);
                cur = Some(w);
                continue;
            }
            buf.push_str(line);
            buf.push('\n');
        }
        flush(cur, &mut buf, &mut s);
        s
    }

    /// `other`'s sections where this one has none (flags over stdin).
    pub fn or(self, other: Sections) -> Sections {
        Sections {
            goal: self.goal.or(other.goal),
            done: self.done.or(other.done),
            failed: self.failed.or(other.failed),
            state: self.state.or(other.state),
            next: self.next.or(other.next),
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == Sections::default()
    }

    /// What is still missing for a handoff (goal, state, next step are
    /// required; done and what didn't work may say nothing).
    pub fn missing(&self) -> Vec<&'static str> {
        let mut m = vec![];
        if self.goal.as_deref().is_none_or(|g| g.trim().is_empty()) {
            m.push("goal (--goal)");
        }
        if self.state.as_deref().and_then(|s| s.split_whitespace().next()).and_then(WorkState::parse).is_none() {
            m.push("state: working, broken or blocked (--state)");
        }
        if self.next.as_deref().is_none_or(|g| g.trim().is_empty()) {
            m.push("next step (--next)");
        }
        m
    }

    pub fn work_state(&self) -> Option<WorkState> {
        self.state.as_deref().and_then(|s| s.split_whitespace().next()).and_then(WorkState::parse)
    }

    /// The template `$EDITOR` opens.
    pub fn template(slug: &str) -> String {
        format!(
            "# Handoff: {slug}\n\n## Goal\n\n\n## Done\n(with paths)\n\n## What didn't work\n(and why)\n\n## State\nworking | broken | blocked\n\n## Next step\n\n"
        )
    }
}

/// `(front matter lines, body)`; no front matter gives an empty list.
pub fn strip_front_matter(text: &str) -> (Vec<&str>, &str) {
    let Some(rest) = text.strip_prefix("---\n").or_else(|| text.strip_prefix("---\r\n")) else {
        return (vec![], text);
    };
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            let fm = rest[..offset].lines().collect();
            return (fm, &rest[offset + line.len()..]);
        }
        offset += line.len();
    }
    (vec![], text)
}

/// A key's value in front matter lines.
pub fn front_value<'a>(fm: &[&'a str], key: &str) -> Option<&'a str> {
    fm.iter()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(':')).map(str::trim))
        .filter(|v| !v.is_empty())
}

/// A rollup's `covers:` list.
pub fn front_list(fm: &[&str], key: &str) -> Vec<String> {
    let mut out = vec![];
    let mut inside = false;
    for l in fm {
        if inside {
            match l.trim_start().strip_prefix("- ") {
                Some(v) if l.starts_with(' ') || l.starts_with('-') => {
                    out.push(v.trim().to_string());
                    continue;
                }
                _ => inside = false,
            }
        }
        if l.strip_prefix(key).is_some_and(|r| r.trim() == ":") {
            inside = true;
        }
    }
    out
}

fn section_text(s: &Option<String>) -> String {
    // A line that would read as one of our headings is escaped, so the file
    // parses back to the same sections.
    let t = s.as_deref().map(str::trim).filter(|t| !t.is_empty()).unwrap_or(NOTHING_RECORDED);
    t.lines()
        .map(|l| if heading_of(l).is_some() { format!("\\{}", l.trim_start()) } else { l.to_string() })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Who wrote a file and when: what front matter carries.
#[derive(Debug, Clone)]
pub struct Author<'a> {
    pub session: &'a str,
    pub by: &'a str,
    pub at: DateTime<Utc>,
}

pub fn render_handoff(slug: &str, a: &Author, s: &Sections) -> String {
    let state = s.work_state().map(WorkState::as_str).unwrap_or("working");
    format!(
        "---\ntype: handoff\nslug: {slug}\nsession: {}\nby: {}\ncreated: {}\nstate: {state}\n---\n# Handoff: {slug}\n\n\
         ## Goal\n{}\n\n## Done\n{}\n\n## What didn't work\n{}\n\n## State\n{}\n\n## Next step\n{}\n",
        index::one_line(a.session),
        index::one_line(a.by),
        a.at.format("%Y-%m-%d %H:%M:%SZ"),
        section_text(&s.goal),
        section_text(&s.done),
        section_text(&s.failed),
        section_text(&s.state),
        section_text(&s.next),
    )
}

#[derive(Debug, Clone, Serialize)]
pub struct Created {
    pub name: String,
    pub path: PathBuf,
    /// `.gitattributes` got the merge=union lines this time.
    pub gitattributes_changed: bool,
}

/// Creates the file `<stem>.md` (or `<stem>-2.md` … when the same session
/// already wrote that slug this minute): O_CREAT|O_EXCL, never overwriting.
fn create_unique(root: &Path, dir: &Path, stem: &str, content: impl Fn(&str) -> String) -> Result<(String, PathBuf)> {
    for n in 1..=99 {
        let name = if n == 1 { stem.to_string() } else { format!("{stem}-{n}") };
        let path = dir.join(format!("{name}.md"));
        if fsutil::create_new(root, &path, content(&name).as_bytes())? {
            return Ok((name, path));
        }
    }
    Err(HandoffError::Usage(format!("{stem}: 99 handoffs with this slug this minute; pick another slug")))
}

/// `pcmail handoff new`: writes the handoff and its ACTIVE line.
pub fn new_handoff(repo: &Repo, slug: &str, a: &Author, s: &Sections) -> Result<Created> {
    names::check_slug(slug)?;
    let missing = s.missing();
    if !missing.is_empty() {
        return Err(HandoffError::Usage(format!("the handoff needs: {}", missing.join(", "))));
    }
    let gitattributes_changed = gitattributes::ensure(&repo.root)?;
    let stem = names::file_stem(a.at, a.session, slug, false);
    let (name, path) = create_unique(&repo.root, &repo.handoff_dir(), &stem, |_| render_handoff(slug, a, s))?;
    let goal = s.goal.as_deref().unwrap_or("");
    index::append(&repo.root, &repo.index_path(), &Line::new(a.at, Event::Active, &name, a.by, goal))?;
    Ok(Created { name, path, gitattributes_changed })
}

/// One handoff or rollup as `list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub name: String,
    pub at: DateTime<Utc>,
    pub rollup: bool,
    /// The last INDEX event (ACTIVE when the INDEX has none for it).
    pub status: Event,
    /// Who made the last event.
    pub status_by: Option<String>,
    pub goal: String,
    pub next: String,
    /// The first line of "What didn't work": the dead end the next session
    /// should not walk into again.
    pub failed: String,
    pub state: Option<WorkState>,
    pub rolled_up_into: Option<String>,
    /// A rollup's `through`.
    pub through: Option<DateTime<Utc>>,
}

/// The names in the handoff folder, newest first.
pub fn names_in(dir: &Path) -> Result<Vec<(String, ParsedName)>> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(HandoffError::io(dir, e)),
    };
    let mut out: Vec<(String, ParsedName)> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".md") && !n.starts_with('.'))
        .filter_map(|n| {
            let stem = n.trim_end_matches(".md").to_string();
            names::parse_stem(&stem).map(|p| (stem, p))
        })
        .collect();
    out.sort_by(|a, b| b.1.at.cmp(&a.1.at).then_with(|| b.0.cmp(&a.0)));
    Ok(out)
}

/// The first non-blank line of a section, one line.
pub fn first_line(s: &Option<String>) -> String {
    s.as_deref().and_then(|t| t.lines().map(str::trim).find(|l| !l.is_empty())).map(index::one_line).unwrap_or_default()
}

/// Reads one file into a summary (status filled by the caller).
pub fn summarise(dir: &Path, name: &str, p: &ParsedName) -> Summary {
    let text = std::fs::read_to_string(dir.join(format!("{name}.md"))).unwrap_or_default();
    summarise_text(name, p, &text)
}

pub fn summarise_text(name: &str, p: &ParsedName, text: &str) -> Summary {
    let (fm, _) = strip_front_matter(text);
    let s = Sections::parse(text);
    Summary {
        name: name.to_string(),
        at: p.at,
        rollup: p.rollup,
        status: Event::Active,
        status_by: None,
        goal: first_line(&s.goal),
        next: first_line(&s.next),
        failed: Some(first_line(&s.failed)).filter(|l| l != NOTHING_RECORDED).unwrap_or_default(),
        state: s.work_state(),
        rolled_up_into: front_value(&fm, "rolled_up_into").map(str::to_string),
        through: front_value(&fm, "through").and_then(names::parse_through),
    }
}

/// `pcmail handoff list`: every handoff and rollup, newest first.
pub fn list(repo: &Repo) -> Result<Vec<Summary>> {
    let dir = repo.handoff_dir();
    let lines = index::read(&repo.index_path())?;
    let latest = index::latest(&lines);
    Ok(names_in(&dir)?
        .iter()
        .map(|(name, p)| {
            let mut s = summarise(&dir, name, p);
            if let Some(l) = latest.get(name.as_str()) {
                s.status = l.event;
                s.status_by = Some(l.by.clone());
            }
            s
        })
        .collect())
}

/// A name the user typed: the exact name (with or without `.md`), else the
/// one name that ends with it or contains it (a slug).
pub fn resolve(repo: &Repo, query: &str) -> Result<String> {
    let q = query.trim().trim_end_matches(".md");
    let q = Path::new(q).file_name().and_then(|n| n.to_str()).unwrap_or(q);
    let all = names_in(&repo.handoff_dir())?;
    if all.iter().any(|(n, _)| n == q) {
        return Ok(q.to_string());
    }
    let hits: Vec<String> =
        all.iter().filter(|(n, _)| !q.is_empty() && n.contains(q)).map(|(n, _)| n.clone()).collect();
    match hits.len() {
        1 => Ok(hits.into_iter().next().expect("one")),
        0 => Err(HandoffError::NotFound {
            what: format!("no handoff {q:?} in {}", repo.handoff_dir().display()),
            candidates: all.iter().take(5).map(|(n, _)| n.clone()).collect(),
        }),
        _ => Err(HandoffError::Usage(format!("{q:?} names {} handoffs: {}", hits.len(), hits.join(", ")))),
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Shown {
    pub name: String,
    pub path: PathBuf,
    pub text: String,
    pub summary: Summary,
    /// Every INDEX event of this handoff, oldest first.
    pub events: Vec<Line>,
}

/// `pcmail handoff show`.
pub fn show(repo: &Repo, query: &str) -> Result<Shown> {
    let name = resolve(repo, query)?;
    let path = repo.handoff_dir().join(format!("{name}.md"));
    let text = std::fs::read_to_string(&path).map_err(|e| HandoffError::io(&path, e))?;
    let p = names::parse_stem(&name).expect("resolved names parse");
    let mut summary = summarise_text(&name, &p, &text);
    let events: Vec<Line> = index::read(&repo.index_path())?.into_iter().filter(|l| l.name == name).collect();
    if let Some(l) = events.last() {
        summary.status = l.event;
        summary.status_by = Some(l.by.clone());
    }
    Ok(Shown { name, path, text, summary, events })
}

/// `pcmail handoff pickup`: shows it and records who picked it up.
pub fn pickup(repo: &Repo, query: &str, by: &str, now: DateTime<Utc>) -> Result<Shown> {
    let name = resolve(repo, query)?;
    index::append(&repo.root, &repo.index_path(), &Line::new(now, Event::PickedUp, &name, by, ""))?;
    show(repo, &name)
}

/// `pcmail handoff close`.
pub fn close(repo: &Repo, query: &str, by: &str, note: &str, now: DateTime<Utc>) -> Result<Shown> {
    let name = resolve(repo, query)?;
    index::append(&repo.root, &repo.index_path(), &Line::new(now, Event::Closed, &name, by, note))?;
    show(repo, &name)
}

#[derive(Debug, Clone, Serialize)]
pub struct RolledUp {
    pub name: String,
    pub path: PathBuf,
    pub through: DateTime<Utc>,
    pub covers: Vec<String>,
}

/// The handoffs a rollup through `through` would cover now, oldest first:
/// every one up to `through` that is not rolled up yet.
pub fn rollup_candidates(repo: &Repo, through: DateTime<Utc>) -> Result<Vec<String>> {
    let dir = repo.handoff_dir();
    let lines = index::read(&repo.index_path())?;
    let latest = index::latest(&lines);
    let mut covers: Vec<String> = names_in(&dir)?
        .into_iter()
        .filter(|(n, p)| {
            !p.rollup && p.at <= through && latest.get(n.as_str()).is_none_or(|l| l.event != Event::RolledUp)
        })
        .filter(|(n, p)| summarise(&dir, n, p).rolled_up_into.is_none())
        .map(|(n, _)| n)
        .collect();
    covers.reverse();
    Ok(covers)
}

/// A draft body for a rollup through `through`, for its author to edit: the
/// five sections, each gathering the covered handoffs' own text under their
/// names (oldest first), so nothing a session learned, dead ends included,
/// is lost by the fold.
pub fn draft_rollup_body(repo: &Repo, through: DateTime<Utc>) -> Result<(Vec<String>, String)> {
    let covers = rollup_candidates(repo, through)?;
    let dir = repo.handoff_dir();
    let parsed: Vec<(String, Sections)> = covers
        .iter()
        .map(|n| {
            let text = std::fs::read_to_string(dir.join(format!("{n}.md"))).unwrap_or_default();
            let slug = names::parse_stem(n).map(|p| p.slug).unwrap_or_else(|| n.clone());
            (slug, Sections::parse(&text))
        })
        .collect();
    let mut body = String::new();
    for (i, heading) in HEADINGS.iter().enumerate() {
        body.push_str(&format!("## {heading}\n"));
        let mut any = false;
        for (slug, s) in &parsed {
            let text = match i {
                0 => &s.goal,
                1 => &s.done,
                2 => &s.failed,
                3 => &s.state,
                _ => &s.next,
            };
            if let Some(t) = text.as_deref().map(str::trim).filter(|t| !t.is_empty() && *t != NOTHING_RECORDED) {
                any = true;
                let mut lines = t.lines();
                body.push_str(&format!("- {slug}: {}\n", lines.next().unwrap_or_default()));
                for l in lines {
                    body.push_str(&format!("  {l}\n"));
                }
            }
        }
        if !any {
            body.push_str("- (none)\n");
        }
        body.push('\n');
    }
    Ok((covers, body))
}

/// `pcmail handoff rollup`: folds every handoff up to `through` that no
/// rollup covers yet into a new rollup file, then stamps each one.
pub fn rollup(repo: &Repo, slug: &str, a: &Author, through: DateTime<Utc>, body: &str) -> Result<RolledUp> {
    names::check_slug(slug)?;
    if body.trim().is_empty() {
        return Err(HandoffError::Usage(
            "the rollup needs a body (--body, --file or stdin): what the covered sessions add up to".into(),
        ));
    }
    let dir = repo.handoff_dir();
    let covers = rollup_candidates(repo, through)?; // oldest first, as the front matter lists them
    if covers.is_empty() {
        return Err(HandoffError::NotFound {
            what: format!("no handoff up to {} that a rollup does not already cover", names::format_through(through)),
            candidates: vec![],
        });
    }
    gitattributes::ensure(&repo.root)?;
    let stem = names::file_stem(a.at, a.session, slug, true);
    let covers_text: String = covers.iter().map(|c| format!("  - {c}\n")).collect();
    let (name, path) = create_unique(&repo.root, &dir, &stem, |_| {
        format!(
            "---\ntype: rollup\ncovers:\n{covers_text}through: {}\nsession: {}\nby: {}\ncreated: {}\n---\n# Rollup: {slug}\n\n{}\n",
            names::format_through(through),
            index::one_line(a.session),
            index::one_line(a.by),
            a.at.format("%Y-%m-%d %H:%M:%SZ"),
            body.trim()
        )
    })?;
    for c in &covers {
        stamp_rolled_up(&repo.root, &dir.join(format!("{c}.md")), &name)?;
        index::append(
            &repo.root,
            &repo.index_path(),
            &Line::new(a.at, Event::RolledUp, c, a.by, &format!("into {name}")),
        )?;
    }
    index::append(
        &repo.root,
        &repo.index_path(),
        &Line::new(
            a.at,
            Event::Active,
            &name,
            a.by,
            &format!("rollup of {} handoffs through {}", covers.len(), names::format_through(through)),
        ),
    )?;
    Ok(RolledUp { name, path, through, covers })
}

/// Adds `rolled_up_into: <rollup>` to a handoff's front matter (a front
/// matter is made for a file without one), replacing the file atomically.
pub fn stamp_rolled_up(root: &Path, path: &Path, rollup: &str) -> Result<()> {
    let text = std::fs::read_to_string(path).map_err(|e| HandoffError::io(path, e))?;
    let (fm, body) = strip_front_matter(&text);
    if front_value(&fm, "rolled_up_into").is_some() {
        return Ok(());
    }
    let head = &text[..text.len() - body.len()];
    let stamped = match head.rfind("---") {
        // Insert before the closing `---` of the front matter.
        Some(close) if !head.is_empty() && close > 0 => {
            format!("{}rolled_up_into: {rollup}\n{}", &text[..close], &text[close..])
        }
        _ => format!("---\nrolled_up_into: {rollup}\n---\n{text}"),
    };
    fsutil::replace_atomically(root, path, &stamped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn sections_parse_from_any_heading_level_and_round_trip() {
        let text = "# Handoff\n\n## Goal\nShip it\n\n### Done\n- src/a.rs\n\n## What didn’t work:\nlr=3e-4 NaN\n## State\nblocked: waiting\n# Next step\nask ani\n";
        let s = Sections::parse(text);
        assert_eq!(s.goal.as_deref(), Some("Ship it"));
        assert_eq!(s.done.as_deref(), Some("- src/a.rs"));
        assert_eq!(s.failed.as_deref(), Some("lr=3e-4 NaN"));
        assert_eq!(s.work_state(), Some(WorkState::Blocked));
        assert_eq!(s.next.as_deref(), Some("ask ani"));
        assert!(s.missing().is_empty());
        let a = Author { session: "s1", by: "pc-a/s1", at: Utc.with_ymd_and_hms(2026, 4, 9, 14, 32, 0).unwrap() };
        let mut tricky = s.clone();
        tricky.done = Some("first\n## Next step\nnot a heading".into());
        let r = render_handoff("x", &a, &tricky);
        assert_eq!(Sections::parse(&r).done.as_deref(), Some("first\n\\## Next step\nnot a heading"));
        assert_eq!(Sections::parse(&r).next, tricky.next);
        assert_eq!(Sections::default().missing().len(), 3);
    }

    #[test]
    fn stamping_adds_one_line_to_the_front_matter() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("h.md");
        std::fs::write(&p, "---\ntype: handoff\n---\n# H\n\n## Goal\ng\n").unwrap();
        stamp_rolled_up(d.path(), &p, "r1").unwrap();
        stamp_rolled_up(d.path(), &p, "r2").unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "---\ntype: handoff\nrolled_up_into: r1\n---\n# H\n\n## Goal\ng\n"
        );
        let q = d.path().join("plain.md");
        std::fs::write(&q, "# by hand\n").unwrap();
        stamp_rolled_up(d.path(), &q, "r1").unwrap();
        let t = std::fs::read_to_string(&q).unwrap();
        assert_eq!(front_value(&strip_front_matter(&t).0, "rolled_up_into"), Some("r1"));
        assert!(t.ends_with("# by hand\n"));
    }
}
