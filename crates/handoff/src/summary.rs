//! What SessionStart shows of handoffs and memory (after mail and the one-line items, inside the 1,800-char
//! budget): the latest rollup's name, the ACTIVE handoffs it does not
//! cover (newest first, one line each: goal and next step), then the
//! memory count and the newest gotchas. A part that does not fit becomes a
//! count with the command that shows it. Reads the repo's files only.

use crate::handoffs::{self, Summary};
use crate::index::{self, Event};
use crate::memory::{self, Entry, MemKind};
use crate::names;
use crate::repo::Repo;
use crate::Result;
use chrono::{DateTime, Utc};
use pcmail_core::present::neutralise;

/// Handoff files read for their goal and next step at most (the rest are
/// counted from their names and the INDEX).
pub const MAX_ACTIVE_READ: usize = 12;
/// Newest gotchas shown at most.
pub const MAX_GOTCHAS: usize = 3;
/// A memory file larger than this is not read by the hook.
pub const MAX_FILE_BYTES: i64 = 1 << 20;
/// One line of the hook at most.
pub const LINE_MAX_CHARS: usize = 220;

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HookView {
    pub rollup: Option<(String, Option<DateTime<Utc>>)>,
    /// The latest rollup's own first line of text: what the sessions it
    /// covers added up to.
    pub rollup_summary: String,
    /// ACTIVE handoffs newer than the rollup's `through`, newest first (the
    /// first [`MAX_ACTIVE_READ`] read in full).
    pub active: Vec<Summary>,
    pub active_total: usize,
    pub memory_total: usize,
    pub gotcha_total: usize,
    /// Newest first.
    pub gotchas: Vec<Entry>,
}

/// Reads what the hook shows for `repo`.
pub fn view(repo: &Repo) -> Result<HookView> {
    view_seen(repo, &mut |_| {})
}

/// [`view`], telling `before_read` every file and folder it reads, each just
/// before reading (listing) it: what the view depends on, for the view
/// kept between sessions. A file or folder that is not there is told too.
pub fn view_seen(repo: &Repo, before_read: &mut dyn FnMut(&std::path::Path)) -> Result<HookView> {
    let dir = repo.handoff_dir();
    let mut v = HookView::default();
    before_read(&dir);
    let all = handoffs::names_in(&dir)?;
    if !all.is_empty() {
        before_read(&repo.index_path());
        let lines = index::read(&repo.index_path())?;
        let latest = index::latest(&lines);
        // What the latest rollup covers is the list it names, not every
        // handoff up to its `through`: names and `through` have minute
        // resolution, so a handoff written in the same minute after a
        // `--through now` rollup would otherwise be hidden until the next
        // rollup folded it in unseen.
        let mut covered = std::collections::HashSet::new();
        if let Some((name, p)) = all.iter().find(|(_, p)| p.rollup) {
            let path = dir.join(format!("{name}.md"));
            before_read(&path);
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let s = handoffs::summarise_text(name, p, &text);
            let (fm, body) = handoffs::strip_front_matter(&text);
            covered.extend(handoffs::front_list(&fm, "covers"));
            v.rollup_summary = body
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty() && !l.starts_with('#'))
                .map(index::one_line)
                .unwrap_or_default();
            v.rollup = Some((name.clone(), s.through));
        }
        let active: Vec<_> = all
            .iter()
            .filter(|(n, p)| {
                !p.rollup
                    && !covered.contains(n.as_str())
                    && latest.get(n.as_str()).is_none_or(|l| l.event == Event::Active)
            })
            .collect();
        v.active_total = active.len();
        v.active = active
            .iter()
            .take(MAX_ACTIVE_READ)
            .map(|(n, p)| {
                before_read(&dir.join(format!("{n}.md")));
                handoffs::summarise(&dir, n, p)
            })
            .filter(|s| s.rolled_up_into.is_none())
            .collect();
    }
    let mut entries = vec![];
    for (topic, path, _) in memory::topic_files_seen(repo, before_read)? {
        before_read(&path);
        // The hook stays fast whatever a repo holds: an outsized file is left
        // to `memory show`. Its size is taken after `before_read`, not from
        // the listing: what the view decides must come from the file as it
        // was then or later, so that any change after it shows in the file's
        // state when the cache compares it.
        if std::fs::metadata(&path).map_or(true, |m| m.len() > MAX_FILE_BYTES as u64) {
            continue;
        }
        if let Ok(text) = std::fs::read_to_string(&path) {
            entries.extend(memory::parse_file(&topic, &text));
        }
    }
    v.memory_total = entries.len();
    let mut gotchas: Vec<Entry> = entries.into_iter().filter(|e| e.kind == MemKind::Gotcha).collect();
    v.gotcha_total = gotchas.len();
    gotchas.sort_by_key(|g| std::cmp::Reverse(g.at));
    gotchas.truncate(MAX_GOTCHAS);
    v.gotchas = gotchas;
    Ok(v)
}

fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        s.chars().take(max - 1).collect::<String>() + "…"
    }
}

/// Lines that fit in `room` characters (each line's newline counted), or
/// None when there is nothing to say or not even a count fits.
pub fn render(v: &HookView, room: usize) -> Option<String> {
    let mut out: Vec<String> = vec![];
    let mut left = room;
    let push = |out: &mut Vec<String>, line: String, left: &mut usize| -> bool {
        let n = line.chars().count() + 1;
        if n > *left {
            return false;
        }
        *left -= n;
        out.push(line);
        true
    };

    // Handoffs: the header, the lines that fit, a count for the rest.
    let handoff_part = v.active_total > 0 || v.rollup.is_some();
    if handoff_part {
        let head = match &v.rollup {
            Some((name, through)) => format!(
                "pcmail handoffs: latest rollup {}{}; {} ACTIVE since{}",
                neutralise(name),
                through.map(|t| format!(" (through {})", names::format_through(t))).unwrap_or_default(),
                v.active_total,
                if v.active_total > 0 { ", newest first:" } else { "." }
            ),
            None => format!("pcmail handoffs: {} ACTIVE, newest first:", v.active_total),
        };
        let count_line = format!("pcmail: {} ACTIVE handoffs: `pcmail handoff list`", v.active_total);
        // Keep room for the memory count line when there is memory.
        let reserve = if v.memory_total > 0 { 60 } else { 0 };
        let mut shown = 0;
        if head.chars().count() + 1 + reserve <= left {
            push(&mut out, cut(&head, LINE_MAX_CHARS), &mut left);
            // The rollup's own summary, when a line of it fits beside the first handoff.
            if !v.rollup_summary.is_empty() {
                let line = cut(&format!("  rollup says: {}", neutralise(&v.rollup_summary)), LINE_MAX_CHARS);
                if line.chars().count() + 1 + reserve + if v.active_total > 0 { 50 } else { 0 } <= left {
                    push(&mut out, line, &mut left);
                }
            }
            for s in &v.active {
                let line = cut(
                    &format!("- {}: {} → next: {}", neutralise(&s.name), neutralise(&s.goal), neutralise(&s.next)),
                    LINE_MAX_CHARS,
                );
                let rest = v.active_total - shown - 1;
                let tail = if rest > 0 { 50 } else { 0 };
                if line.chars().count() + 1 + tail + reserve > left {
                    break;
                }
                push(&mut out, line, &mut left);
                shown += 1;
                // Its dead end, when one was written and it fits: the useful
                // part of a handoff is often what did not work.
                if !s.failed.is_empty() {
                    let dead_end = cut(&format!("  didn't work: {}", neutralise(&s.failed)), LINE_MAX_CHARS);
                    if dead_end.chars().count() + 1 + tail + reserve <= left {
                        push(&mut out, dead_end, &mut left);
                    }
                }
            }
            if shown < v.active_total {
                push(
                    &mut out,
                    format!("pcmail: {} more ACTIVE handoffs: `pcmail handoff list`", v.active_total - shown),
                    &mut left,
                );
            }
        } else if v.active_total > 0 {
            push(&mut out, count_line, &mut left);
        }
    }

    // Memory: the count, then the newest gotchas that fit.
    if v.memory_total > 0 {
        let head = format!(
            "pcmail memory: {} entries ({} gotchas) in .claude/memory: `pcmail memory search WORDS`",
            v.memory_total, v.gotcha_total
        );
        let lines: Vec<String> = v
            .gotchas
            .iter()
            .map(|g| {
                cut(&format!("- [{}] {}", neutralise(&g.topic), neutralise(&memory::entry_line(g))), LINE_MAX_CHARS)
            })
            .collect();
        const MORE: &str = "; newest gotchas:";
        // "newest gotchas:" only when at least one of them fits under it.
        let with_first = lines.first().map(|l| head.chars().count() + MORE.len() + 1 + l.chars().count() + 1);
        if with_first.is_some_and(|n| n <= left) {
            push(&mut out, format!("{head}{MORE}"), &mut left);
            for line in lines {
                if !push(&mut out, line, &mut left) {
                    break;
                }
            }
        } else if !push(&mut out, head, &mut left) {
            push(&mut out, format!("pcmail: {} memory entries: `pcmail memory show`", v.memory_total), &mut left);
        }
    }
    (!out.is_empty()).then(|| out.join("\n"))
}

/// The hook's part for the session whose working directory is `cwd`, given
/// how many characters the budget has already used.
pub fn session_start_text(cwd: &std::path::Path, used: usize) -> Option<String> {
    let repo = Repo::find_unnamed(cwd).ok()?;
    // render() counts a newline per line: the first one joins it to what is above.
    let room = pcmail_core::present::TOTAL_CHARS.checked_sub(used)?;
    render(&view(&repo).ok()?, room)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handoffs::{new_handoff, rollup, Author, Sections};
    use chrono::TimeZone;

    fn sections(goal: &str) -> Sections {
        Sections {
            goal: Some(goal.into()),
            done: None,
            failed: Some(format!("tried {} the slow way", goal.split(' ').take(2).collect::<Vec<_>>().join(" "))),
            state: Some("working".into()),
            next: Some(format!("next for {goal}")),
        }
    }

    #[test]
    fn rollup_then_active_newest_first_then_memory_within_the_room() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join(".git")).unwrap();
        let repo = Repo::at(d.path());
        let t = |h| Utc.with_ymd_and_hms(2026, 4, 9, h, 0, 0).unwrap();
        for h in 1..=3 {
            new_handoff(
                &repo,
                &format!("old-{h}"),
                &Author { session: "s1", by: "pc-a/s1", at: t(h) },
                &sections(&format!("old {h}")),
            )
            .unwrap();
        }
        rollup(&repo, "first", &Author { session: "s2", by: "pc-a/s2", at: t(4) }, t(3), "All three.").unwrap();
        for h in 5..=7 {
            new_handoff(
                &repo,
                &format!("new-{h}"),
                &Author { session: "s3", by: "pc-b/s3", at: t(h) },
                &sections(&format!("new {h} <pcmail-mail>")),
            )
            .unwrap();
        }
        crate::handoffs::close(&repo, "new-6", "pc-b/s3", "done", t(8)).unwrap();
        memory::add(&repo, MemKind::Gotcha, "db", "old gotcha", None, "x", t(1)).unwrap();
        memory::add(&repo, MemKind::Gotcha, "db", "new gotcha", None, "x", t(2)).unwrap();
        memory::add(&repo, MemKind::Decision, "db", "a decision", None, "x", t(3)).unwrap();

        let v = view(&repo).unwrap();
        assert_eq!(v.active_total, 2);
        let text = render(&v, 1800).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with(
                "pcmail handoffs: latest rollup 2026-04-09_04-00_s2_rollup_first (through 2026-04-09 03:00); 2 ACTIVE"
            ),
            "{text}"
        );
        assert_eq!(lines[1], "  rollup says: All three.", "the rollup's own summary: {text}");
        assert!(
            lines[2].starts_with("- 2026-04-09_07-00_s3_new-7: new 7 ‹pcmail-mail› → next: next for new 7"),
            "{text}"
        );
        assert_eq!(lines[3], "  didn't work: tried new 7 the slow way", "each handoff's dead end: {text}");
        assert!(lines[4].starts_with("- 2026-04-09_05-00_s3_new-5"), "{text}");
        assert_eq!(lines[5], "  didn't work: tried new 5 the slow way");
        assert!(lines[6].starts_with("pcmail memory: 3 entries (2 gotchas)"), "{text}");
        assert_eq!(&lines[7..], ["- [db] new gotcha", "- [db] old gotcha"]);

        // Little room: the parts become counts with their commands.
        let small = render(&v, 120).unwrap();
        assert!(small.chars().count() <= 120, "{small}");
        assert!(small.contains("`pcmail handoff list`") && small.contains("`pcmail memory"), "{small}");
        assert_eq!(render(&v, 10), None);
        for room in 0..400 {
            if let Some(t) = render(&v, room) {
                assert!(t.chars().count() < room.max(1), "room {room}: {t}");
            }
        }
    }
}
