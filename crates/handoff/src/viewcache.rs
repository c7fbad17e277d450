//! The hook's view of a repo's handoffs and memory ([`summary::view`]), kept
//! between SessionStarts in a private file of the PC, so that a repo that did
//! not change costs a few `stat` calls instead of reading and parsing every
//! handoff name, the INDEX, the rollup, the ACTIVE handoffs and every memory
//! file.
//!
//! The file holds the view and the state of every file and folder the view
//! was read from (device, inode, size, modification and change times), each
//! taken just before that file was read or that folder listed. The view is
//! used only when every one of them is still the same; a folder's times move
//! when a name is added, removed or renamed in it, and a file's when it is
//! written. The change time cannot be set back by a program (unlike the
//! modification time, which `touch` or a copy that keeps times can), so a
//! rewrite that keeps the size and the modification time is seen too.
//!
//! Timestamps have a granularity (a clock tick on Linux, a second or two on
//! some filesystems), so a file written twice within one tick, with the same
//! size, would look unchanged to a view read between the two writes. A view
//! read from anything that changed less than [`SETTLE`] before it was read
//! is therefore used but not kept: the next SessionStart reads the files
//! again.
//!
//! A missing, unreadable or damaged cache file, or one from another version,
//! is ignored and written again; writing it is best effort (a full disk only
//! costs the next SessionStart the full read). It is replaced by a rename
//! (never seen half written) but not fsync-ed: losing it in a crash costs
//! one full read, where two fsyncs would cost several times that read on
//! every change.

use crate::repo::Repo;
use crate::summary::{self, HookView};
use crate::Result;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// What the cache file's layout and the view's meaning are: changing either
/// (a field, what the view reads or how it parses) must change this number,
/// so a cache written by an older build is never taken for a current one.
pub const FORMAT: u32 = 1;

/// A view read from a file or folder that changed less than this before it
/// was read is not kept (timestamp granularity: see the module's text).
/// Two seconds is the coarsest granularity of a common filesystem (FAT).
pub const SETTLE: Duration = Duration::from_secs(3);

/// What `stat` says of a file or folder, enough to tell that it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
}

impl Stamp {
    /// The state of `path` (symlinks followed, as the view reads them); None
    /// when it cannot be stat-ed (missing, or no permission).
    pub fn of(path: &Path) -> Option<Stamp> {
        let m = std::fs::metadata(path).ok()?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Some(Stamp {
                dev: m.dev(),
                ino: m.ino(),
                size: m.size(),
                mtime_ns: m.mtime().saturating_mul(1_000_000_000).saturating_add(m.mtime_nsec()),
                ctime_ns: m.ctime().saturating_mul(1_000_000_000).saturating_add(m.ctime_nsec()),
            })
        }
        #[cfg(not(unix))]
        {
            let ns = |t: std::io::Result<SystemTime>| {
                t.ok().and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos() as i64)
            };
            Some(Stamp { dev: 0, ino: 0, size: m.len(), mtime_ns: ns(m.modified()), ctime_ns: ns(m.created()) })
        }
    }

    /// Whether the last change is at least [`SETTLE`] before `read_at`.
    fn settled(&self, read_at: SystemTime) -> bool {
        let last = self.mtime_ns.max(self.ctime_ns);
        let Ok(read) = read_at.duration_since(SystemTime::UNIX_EPOCH) else { return false };
        i128::from(last) + SETTLE.as_nanos() as i128 <= read.as_nanos() as i128
    }
}

#[derive(Serialize, Deserialize)]
struct CacheFile {
    format: u32,
    version: String,
    root: PathBuf,
    /// Every file and folder the view was read from, with its state then
    /// (None: not there).
    seen: Vec<(PathBuf, Option<Stamp>)>,
    view: HookView,
}

/// Where the cache of the repo at `root` lives in `cache_dir`: one file per
/// repo root (the file names its root, which is checked on reading).
pub fn cache_path(cache_dir: &Path, root: &Path) -> PathBuf {
    // FNV-1a: a name that stays the same across builds (std's hasher may not).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in root.as_os_str().as_encoded_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    cache_dir.join(format!("{h:016x}.json"))
}

/// How [`view_cached`] got its view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// From the cache: nothing had changed.
    Cache,
    /// Read from the repo, and the cache written.
    ReadAndKept,
    /// Read from the repo; not kept (something had just changed, or the
    /// cache could not be written).
    Read,
}

/// The view of `repo`, from its cache file in `cache_dir` when nothing it was
/// read from changed, else read from the repo (and kept when everything it
/// was read from had settled by `now`).
pub fn view_cached(repo: &Repo, cache_dir: &Path, now: SystemTime) -> Result<(HookView, Source)> {
    let path = cache_path(cache_dir, &repo.root);
    if let Some(v) = load(&path, &repo.root) {
        return Ok((v, Source::Cache));
    }
    let mut seen: Vec<(PathBuf, Option<Stamp>)> = vec![];
    let view = summary::view_seen(repo, &mut |p| seen.push((p.to_path_buf(), Stamp::of(p))))?;
    if !seen.iter().all(|(_, s)| s.is_none_or(|s| s.settled(now))) {
        return Ok((view, Source::Read));
    }
    let file = CacheFile {
        format: FORMAT,
        version: env!("CARGO_PKG_VERSION").to_string(),
        root: repo.root.clone(),
        seen,
        view,
    };
    let kept = serde_json::to_vec(&file).ok().is_some_and(|bytes| save(cache_dir, &path, &bytes).is_ok());
    Ok((file.view, if kept { Source::ReadAndKept } else { Source::Read }))
}

/// The cached view, when the file is whole, of this format and version, for
/// this root, and every file and folder it was read from is unchanged.
fn load(path: &Path, root: &Path) -> Option<HookView> {
    let bytes = std::fs::read(path).ok()?;
    let c: CacheFile = serde_json::from_slice(&bytes).ok()?;
    let current = c.format == FORMAT
        && c.version == env!("CARGO_PKG_VERSION")
        && c.root == root
        && c.seen.iter().all(|(p, s)| Stamp::of(p) == *s);
    current.then_some(c.view)
}

/// Written whole by a rename, private, without fsyncs: a crash may lose it or
/// leave it empty, which costs one full read; the fsyncs would cost more
/// than the read they save.
fn save(cache_dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    pcmail_fsmode::create_private_dir_all(cache_dir)?;
    pcmail_fsmode::replace_private_unsynced(path, bytes)
}

/// `summary::session_start_text` with the view kept in `cache_dir` between
/// runs; `now` decides whether what was read had settled.
pub fn session_start_text_cached(cwd: &Path, used: usize, cache_dir: &Path, now: SystemTime) -> Option<String> {
    let repo = Repo::find_unnamed(cwd).ok()?;
    let room = pcmail_core::present::TOTAL_CHARS.checked_sub(used)?;
    summary::render(&view_cached(&repo, cache_dir, now).ok()?.0, room)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handoffs::{close, new_handoff, rollup, Author, Sections};
    use crate::memory::{self, MemKind};
    use chrono::{TimeZone, Utc};

    fn t(h: u32) -> chrono::DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 4, 9, h, 0, 0).unwrap()
    }

    /// Later than anything the test writes by more than [`SETTLE`]: the view
    /// is kept (a test cannot wait for its files to settle).
    fn later() -> SystemTime {
        SystemTime::now() + Duration::from_secs(3600)
    }

    fn handoff(repo: &Repo, slug: &str, h: u32) -> String {
        let s = Sections {
            goal: Some(format!("goal {slug}")),
            done: None,
            failed: None,
            state: Some("working".into()),
            next: Some(format!("next {slug}")),
        };
        new_handoff(repo, slug, &Author { session: "s1", by: "pc-a/s1", at: t(h) }, &s).unwrap().name
    }

    /// A repo with a rollup, two ACTIVE handoffs after it and two memory
    /// topics; the cache folder beside it.
    fn seeded() -> (tempfile::TempDir, Repo, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("repo");
        std::fs::create_dir_all(root.join(".git")).unwrap();
        let repo = Repo::at(&root);
        handoff(&repo, "old", 1);
        rollup(&repo, "first", &Author { session: "s2", by: "pc-a/s2", at: t(2) }, t(1), "One.").unwrap();
        handoff(&repo, "new-a", 3);
        handoff(&repo, "new-b", 4);
        memory::add(&repo, MemKind::Gotcha, "db", "the pool leaks", None, "x", t(1)).unwrap();
        memory::add(&repo, MemKind::Decision, "db/schema", "ids are text", None, "x", t(2)).unwrap();
        let cache = d.path().join("home/hook-views");
        (d, repo, cache)
    }

    /// The cached view after a change must be what a fresh read says.
    fn fresh_and_cached(repo: &Repo, cache: &Path) -> (HookView, HookView, Source) {
        let (v, src) = view_cached(repo, cache, later()).unwrap();
        (summary::view(repo).unwrap(), v, src)
    }

    fn rewrite_keeping_mtime(path: &Path, text: &str, mtime: SystemTime) {
        std::fs::write(path, text).unwrap();
        std::fs::File::options().write(true).open(path).unwrap().set_modified(mtime).unwrap();
    }

    #[test]
    fn an_unchanged_repo_is_served_from_the_cache_as_read() {
        let (_d, repo, cache) = seeded();
        let (v, src) = view_cached(&repo, &cache, later()).unwrap();
        assert_eq!(src, Source::ReadAndKept);
        assert_eq!(v, summary::view(&repo).unwrap());
        assert_eq!(v.active_total, 2);
        assert_eq!(v.memory_total, 2);
        let (again, src) = view_cached(&repo, &cache, later()).unwrap();
        assert_eq!(src, Source::Cache);
        assert_eq!(again, v);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let file = cache_path(&cache, &repo.root);
            assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
            assert_eq!(std::fs::metadata(&cache).unwrap().permissions().mode() & 0o777, 0o700);
        }
        // The file holds no temp files beside it (written by the one atomic replace).
        assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 1);
    }

    #[test]
    fn a_new_handoff_a_closed_one_and_a_new_memory_topic_are_seen_next_time() {
        let (_d, repo, cache) = seeded();
        view_cached(&repo, &cache, later()).unwrap();

        let name = handoff(&repo, "new-c", 5);
        let (fresh, v, src) = fresh_and_cached(&repo, &cache);
        assert_ne!(src, Source::Cache);
        assert_eq!(v, fresh);
        assert_eq!(v.active_total, 3);
        assert_eq!(v.active[0].name, name);

        close(&repo, &name, "pc-a/s1", "done", t(6)).unwrap();
        let (fresh, v, src) = fresh_and_cached(&repo, &cache);
        assert_ne!(src, Source::Cache, "an INDEX line is a change");
        assert_eq!((v.active_total, &v), (2, &fresh));

        memory::add(&repo, MemKind::Gotcha, "net/tls", "certs expire", None, "x", t(7)).unwrap();
        let (fresh, v, src) = fresh_and_cached(&repo, &cache);
        assert_ne!(src, Source::Cache, "a new topic in a new folder");
        assert_eq!((v.memory_total, v.gotcha_total, &v), (3, 2, &fresh));
        assert_eq!(v.gotchas[0].text, "certs expire");
        assert_eq!(view_cached(&repo, &cache, later()).unwrap().1, Source::Cache);
    }

    #[test]
    fn a_memory_file_rewritten_with_the_same_size_or_the_same_mtime_is_seen() {
        let (_d, repo, cache) = seeded();
        let file = memory::topic_path(&repo, "db");
        let before = std::fs::read_to_string(&file).unwrap();
        let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();

        // The same size, the modification time moved (a second later).
        view_cached(&repo, &cache, later()).unwrap();
        let same_size = before.replace("the pool leaks", "the pool LEAKS");
        assert_eq!(same_size.len(), before.len());
        rewrite_keeping_mtime(&file, &same_size, mtime + Duration::from_secs(1));
        let (fresh, v, src) = fresh_and_cached(&repo, &cache);
        assert_ne!(src, Source::Cache);
        assert_eq!(v, fresh);
        assert_eq!(v.gotchas[0].text, "the pool LEAKS");

        // The same modification time (to the nanosecond), another size.
        let longer = before.replace("the pool leaks", "the pool leaks slowly");
        rewrite_keeping_mtime(&file, &longer, mtime);
        let (fresh, v, src) = fresh_and_cached(&repo, &cache);
        assert_ne!(src, Source::Cache);
        assert_eq!(v, fresh);
        assert_eq!(v.gotchas[0].text, "the pool leaks slowly");

        // The same size and the same modification time: the change time,
        // which no program can set back, still moved.
        let same_again = longer.replace("slowly", "SLOWLY");
        rewrite_keeping_mtime(&file, &same_again, mtime);
        assert_eq!(std::fs::metadata(&file).unwrap().modified().unwrap(), mtime);
        let (fresh, v, src) = fresh_and_cached(&repo, &cache);
        assert_ne!(src, Source::Cache);
        assert_eq!(v, fresh);
        assert_eq!(v.gotchas[0].text, "the pool leaks SLOWLY");
    }

    #[test]
    fn an_active_handoff_or_the_rollup_edited_in_place_is_seen() {
        let (_d, repo, cache) = seeded();
        let v = view_cached(&repo, &cache, later()).unwrap().0;
        let active = repo.handoff_dir().join(format!("{}.md", v.active[0].name));
        let text = std::fs::read_to_string(&active).unwrap();
        let mtime = std::fs::metadata(&active).unwrap().modified().unwrap();
        rewrite_keeping_mtime(&active, &text.replace("next new-b", "NEXT new-b"), mtime);
        let (fresh, v, src) = fresh_and_cached(&repo, &cache);
        assert_ne!(src, Source::Cache);
        assert_eq!(v, fresh);
        assert_eq!(v.active[0].next, "NEXT new-b");

        let rollup = repo.handoff_dir().join(format!("{}.md", v.rollup.as_ref().unwrap().0));
        let text = std::fs::read_to_string(&rollup).unwrap();
        std::fs::write(&rollup, text.replace("One.", "Two.")).unwrap();
        let (fresh, v, src) = fresh_and_cached(&repo, &cache);
        assert_ne!(src, Source::Cache);
        assert_eq!((v.rollup_summary.as_str(), &v), ("Two.", &fresh));
    }

    #[test]
    fn a_damaged_or_foreign_cache_is_ignored_and_written_again() {
        let (_d, repo, cache) = seeded();
        view_cached(&repo, &cache, later()).unwrap();
        let file = cache_path(&cache, &repo.root);
        let good = std::fs::read(&file).unwrap();
        for bad in [&b""[..], &good[..good.len() / 2], b"{\"format\":1}", b"\xff\xfe garbage"] {
            std::fs::write(&file, bad).unwrap();
            let (v, src) = view_cached(&repo, &cache, later()).unwrap();
            assert_eq!(src, Source::ReadAndKept);
            assert_eq!(v, summary::view(&repo).unwrap());
            assert_eq!(view_cached(&repo, &cache, later()).unwrap().1, Source::Cache);
        }
        // Another format's file, or one naming another root, is not used.
        let mut c: serde_json::Value = serde_json::from_slice(&good).unwrap();
        c["format"] = (FORMAT + 1).into();
        std::fs::write(&file, serde_json::to_vec(&c).unwrap()).unwrap();
        assert_eq!(view_cached(&repo, &cache, later()).unwrap().1, Source::ReadAndKept);
        let mut c: serde_json::Value = serde_json::from_slice(&good).unwrap();
        c["root"] = "/elsewhere".into();
        std::fs::write(&file, serde_json::to_vec(&c).unwrap()).unwrap();
        assert_eq!(view_cached(&repo, &cache, later()).unwrap().1, Source::ReadAndKept);
    }

    #[test]
    fn a_view_of_files_that_just_changed_is_not_kept() {
        let (_d, repo, cache) = seeded();
        // Written a moment ago: within one timestamp tick a second write of
        // the same size could still follow unseen.
        let (v, src) = view_cached(&repo, &cache, SystemTime::now()).unwrap();
        assert_eq!(src, Source::Read);
        assert_eq!(v, summary::view(&repo).unwrap());
        assert!(!cache_path(&cache, &repo.root).exists());
        // A repo without handoffs or memory is cached as empty, and its first
        // handoff is seen.
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join(".git")).unwrap();
        let empty = Repo::at(d.path());
        assert_eq!(view_cached(&empty, &cache, later()).unwrap(), (HookView::default(), Source::ReadAndKept));
        assert_eq!(view_cached(&empty, &cache, later()).unwrap().1, Source::Cache);
        handoff(&empty, "first", 1);
        let (v, src) = view_cached(&empty, &cache, later()).unwrap();
        assert_eq!((v.active_total, src), (1, Source::ReadAndKept));
    }
}
