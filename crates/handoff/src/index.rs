//! `.claude/handoffs/INDEX.md`: append-only, one line per event, newest last;
//! a status change is a new line, never an edit (a write-ahead log). Each
//! line goes in with one write(2) on an O_APPEND descriptor, so concurrent
//! writers never tear one; git merges the file with `merge=union`.
//!
//! `- 2026-04-09 14:32:05Z ACTIVE 2026-04-09_14-32_373d1618_auth-fix by pc-a/373d1618 — goal text`

use crate::fsutil;
use crate::names::{self, AT_FORMAT};
use crate::Result;
use chrono::{DateTime, TimeZone, Utc};
use std::collections::HashMap;
use std::path::Path;

pub const HEADER: &str =
    "# Handoff INDEX\n\nAppend-only, written by pcmail: one line per event (ACTIVE, PICKED_UP, CLOSED, ROLLED_UP), \
newest last. A status change is a new line, never an edit.\n\n";
/// A note longer than this is cut (a line stays one short write).
pub const NOTE_MAX_CHARS: usize = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Event {
    Active,
    PickedUp,
    Closed,
    RolledUp,
}

impl Event {
    pub fn as_str(self) -> &'static str {
        match self {
            Event::Active => "ACTIVE",
            Event::PickedUp => "PICKED_UP",
            Event::Closed => "CLOSED",
            Event::RolledUp => "ROLLED_UP",
        }
    }
    pub fn parse(s: &str) -> Option<Event> {
        Some(match s {
            "ACTIVE" => Event::Active,
            "PICKED_UP" => Event::PickedUp,
            "CLOSED" => Event::Closed,
            "ROLLED_UP" => Event::RolledUp,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Line {
    pub at: DateTime<Utc>,
    pub event: Event,
    pub name: String,
    pub by: String,
    pub note: String,
}

/// Any text as one short line: controls and line breaks become spaces, runs
/// of spaces one, cut at [`NOTE_MAX_CHARS`].
pub fn one_line(s: &str) -> String {
    let mut out = String::new();
    for w in s.split(|c: char| c.is_whitespace() || c.is_control()).filter(|w| !w.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    if out.chars().count() > NOTE_MAX_CHARS {
        out = out.chars().take(NOTE_MAX_CHARS - 1).collect::<String>() + "…";
    }
    out
}

impl Line {
    pub fn new(at: DateTime<Utc>, event: Event, name: &str, by: &str, note: &str) -> Line {
        Line { at, event, name: name.to_string(), by: pcmail_core::rules::sanitize_actor(by), note: one_line(note) }
    }

    pub fn render(&self) -> String {
        let mut s = format!("- {} {} {} by {}", self.at.format(AT_FORMAT), self.event.as_str(), self.name, self.by);
        if !self.note.is_empty() {
            s.push_str(" — ");
            s.push_str(&self.note);
        }
        s
    }

    /// A line of the file, or None for the header, blanks and anything torn.
    pub fn parse(line: &str) -> Option<Line> {
        let rest = line.strip_prefix("- ")?;
        let (head, note) = match rest.split_once(" — ") {
            Some((h, n)) => (h, n.trim()),
            None => (rest, ""),
        };
        let mut it = head.split(' ');
        let (date, time) = (it.next()?, it.next()?);
        // "{date} {time}": the start of `head`, split at its first space.
        let at = names::parse_stamp(&head[..date.len() + 1 + time.len()], AT_FORMAT)?;
        let event = Event::parse(it.next()?)?;
        let name = it.next()?;
        if it.next()? != "by" {
            return None;
        }
        let by = it.next()?;
        if it.next().is_some() || name.is_empty() {
            return None;
        }
        Some(Line {
            at: Utc.from_utc_datetime(&at),
            event,
            name: name.to_string(),
            by: by.to_string(),
            note: note.to_string(),
        })
    }
}

/// Appends one event line to the INDEX at `path` (under the repo at `root`;
/// created with its header).
pub fn append(root: &Path, path: &Path, line: &Line) -> Result<()> {
    fsutil::ensure_with_header(root, path, HEADER)?;
    fsutil::append_line(root, path, &line.render())
}

/// Every well-formed line, oldest first by time (lines from two PCs that git
/// merged keep their own order within one second).
pub fn read(path: &Path) -> Result<Vec<Line>> {
    // Others may be appending: whole lines only.
    Ok(fsutil::read_appended(path)?.map(|t| parse_all(&t)).unwrap_or_default())
}

pub fn parse_all(text: &str) -> Vec<Line> {
    let mut lines: Vec<Line> = text.lines().filter_map(Line::parse).collect();
    lines.sort_by_key(|l| l.at);
    lines
}

/// The last event of each name.
pub fn latest(lines: &[Line]) -> HashMap<&str, &Line> {
    let mut m = HashMap::new();
    for l in lines {
        m.insert(l.name.as_str(), l);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_garbage_is_skipped() {
        let at = Utc.with_ymd_and_hms(2026, 4, 9, 14, 32, 5).unwrap();
        let l = Line::new(
            at,
            Event::PickedUp,
            "2026-04-09_14-32_373d1618_auth-fix",
            "pc-a/373d1618",
            "goal\nwith — dash\tand tab",
        );
        let r = l.render();
        assert_eq!(r, "- 2026-04-09 14:32:05Z PICKED_UP 2026-04-09_14-32_373d1618_auth-fix by pc-a/373d1618 — goal with — dash and tab");
        assert_eq!(Line::parse(&r).unwrap(), l);
        let no_note = Line::new(at, Event::Closed, "x", "pc a\n", "");
        assert_eq!(Line::parse(&no_note.render()).unwrap(), no_note);
        for bad in [
            "",
            "# Handoff INDEX",
            "- 2026-04-09 14:32:05Z",
            "- 2026-04-09 14:32:05Z ACTIVE",
            "- 2026-04-09 14:32:05Z OPEN x by y",
            "- 2026-04-09 14:32:05Z ACTIVE x by",
            "- 2026-04-09 14:32:05Z ACTIVE x from y",
            "- 2026-04-09 14:3",
        ] {
            assert_eq!(Line::parse(bad), None, "{bad}");
        }
        assert!(one_line(&"é".repeat(500)).chars().count() == NOTE_MAX_CHARS);
    }

    #[test]
    fn latest_event_wins_by_time() {
        let t = |s| Utc.with_ymd_and_hms(2026, 4, 9, 14, 0, s).unwrap();
        let text = [
            Line::new(t(3), Event::Closed, "a", "x", ""),
            Line::new(t(1), Event::Active, "a", "x", ""),
            Line::new(t(2), Event::Active, "b", "x", ""),
        ]
        .iter()
        .map(Line::render)
        .collect::<Vec<_>>()
        .join("\n");
        let lines = parse_all(&text);
        let m = latest(&lines);
        assert_eq!(m["a"].event, Event::Closed);
        assert_eq!(m["b"].event, Event::Active);
    }
}
