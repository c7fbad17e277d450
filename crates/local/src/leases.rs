//! The lease side of the hook and the git pre-commit guard, from the local
//! store only (the guard cache the poller keeps): which files a lease covers,
//! whether an edit or a commit touches another session's exclusive lease,
//! and the lines a session is told (leases others hold, a lease it lost).

use pcmail_core::present::{neutralise, truncate_chars};
use pcmail_core::Millis;
use pcmail_handoff::viewcache::Stamp;
use pcmail_store::leases::{self as sl, CachedLease, LostLease};
use rusqlite::Connection;
use std::path::{Path, PathBuf};

/// The heartbeat period H, 30 s (`pcmail_core::lease::HEARTBEAT_MS`).
pub const HEARTBEAT_MS: Millis = 30_000;
/// A guard cache older than this gets one line of context.
pub const CACHE_OLD_MS: Millis = 10 * 60 * 1000;

/// Whether a repo-relative `path` falls under a lease's file `pattern`:
/// `**` any number of folders, `*` and `?` within one name; a pattern
/// without wildcards covers that file and everything under it as a folder.
pub fn covers(pattern: &str, path: &str) -> bool {
    // `strip_prefix` compares bytes; `trim_start_matches` with a string
    // builds a substring searcher at every call.
    let mut pat = pattern;
    while let Some(rest) = pat.strip_prefix("./") {
        pat = rest;
    }
    let pat = pat.trim_end_matches('/');
    if pat.is_empty() {
        return false;
    }
    let Some(wild) = pat.find(['*', '?']) else {
        return path == pat || path.strip_prefix(pat).is_some_and(|rest| rest.starts_with('/'));
    };
    // What comes before the first wildcard is matched literally from the
    // start: most patterns of a big cache are refused here, without splitting.
    if !path.starts_with(&pat[..wild]) {
        return false;
    }
    let p: Vec<&str> = pat.split('/').collect();
    let f: Vec<&str> = path.split('/').collect();
    match_segments(&p, &f)
}

/// Whether a resource name matches a `[[leases.checks]]` pattern: `*` any
/// characters (`/` and `:` too: `gpu-*` matches `gpu-a:2`), `?` one.
pub fn resource_matches(pattern: &str, resource: &str) -> bool {
    match_name(pattern.as_bytes(), resource.as_bytes())
}

fn match_segments(p: &[&str], f: &[&str]) -> bool {
    match p.split_first() {
        None => f.is_empty(),
        Some((&"**", rest)) => (0..=f.len()).any(|i| match_segments(rest, &f[i..])),
        Some((seg, rest)) => {
            !f.is_empty() && match_name(seg.as_bytes(), f[0].as_bytes()) && match_segments(rest, &f[1..])
        }
    }
}

/// `*` and `?` within one path segment (byte-wise; `?` on a multi-byte
/// character matches one byte, which only makes a pattern narrower).
fn match_name(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while si < s.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            mark = si;
            pi += 1;
        } else if let Some(st) = star {
            pi = st + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

/// `pc/name` (or `pc/session…`) of a lease's holder.
pub fn holder_label(l: &CachedLease) -> String {
    match &l.holder_name {
        Some(n) if !n.is_empty() => format!("{}/{}", l.holder_pc, n),
        _ => format!("{}/{}", l.holder_pc, l.holder_session.chars().take(8).collect::<String>()),
    }
}

/// HH:MM (UTC) of a time.
pub fn hhmm(ms: Millis) -> String {
    let m = (ms.max(0) / 60_000) % 1440;
    format!("{:02}:{:02} UTC", m / 60, m % 60)
}

/// Whose leases count as "this session's own": leases this PC holds for the
/// session's process (its current or earlier session id).
pub struct Me<'a> {
    pub pc: &'a str,
    pub session: &'a str,
    pub own: Vec<(String, i64)>,
}

impl Me<'_> {
    pub fn load<'a>(conn: &Connection, pc: &'a str, session: &'a str) -> Me<'a> {
        let own = sl::fences_of_session(conn, session).unwrap_or_default();
        Me { pc, session, own }
    }
    pub fn holds(&self, l: &CachedLease) -> bool {
        l.holder_pc == self.pc
            && (l.holder_session == self.session || self.own.iter().any(|(r, f)| *r == l.resource && *f == l.fence))
    }
}

/// Whether any pattern of a lease's `files` (the cache's JSON array) covers
/// `rel`; read without allocating when no pattern has a JSON escape.
pub fn files_cover(files_json: &str, rel: &str) -> bool {
    // Paths as pcmail writes them (`["a/**","b.md"]`) are read without a
    // parser: the guard runs this on each exclusive lease of the repo at
    // every tool call. Anything else is parsed, so a damaged array never
    // covers more than parsing it says.
    if let Some(mut globs) = plain_strings(files_json) {
        return globs.any(|g| covers(g, rel));
    }
    match serde_json::from_str::<Vec<&str>>(files_json) {
        Ok(globs) => globs.iter().any(|g| covers(g, rel)),
        Err(_) => {
            serde_json::from_str::<Vec<String>>(files_json).is_ok_and(|globs| globs.iter().any(|g| covers(g, rel)))
        }
    }
}

/// The strings of `json` when it is a JSON array of strings with no escape
/// and no control character in them: then they are exactly what lies
/// between every other quote. None for anything else, which the caller
/// parses. One pass to check the shape, one (`split`) to hand the strings out.
fn plain_strings(json: &str) -> Option<impl Iterator<Item = &str>> {
    let b = json.as_bytes();
    let space = |mut i: usize| {
        while b.get(i).is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r')) {
            i += 1;
        }
        i
    };
    let strings = || json.split('"').skip(1).step_by(2);
    let mut i = space(0);
    if b.get(i) != Some(&b'[') {
        return None;
    }
    i = space(i + 1);
    if b.get(i) == Some(&b']') {
        return (space(i + 1) == b.len()).then(strings);
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let end = i + 1 + b[i + 1..].iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20)?;
        if b[end] != b'"' {
            return None;
        }
        i = space(end + 1);
        match b.get(i) {
            Some(b',') => i = space(i + 1),
            Some(b']') => return (space(i + 1) == b.len()).then(strings),
            _ => return None,
        }
    }
}

/// The exclusive leases of `repo` with a pattern covering `rel`, from the
/// guard cache: one pass over (resource, fence, files) of the repo's rows,
/// and only a covering row is read whole (the PreToolUse hot path, with
/// 1,000 leases in the cache).
pub fn covering_exclusive(conn: &Connection, repo: &str, rel: &str) -> rusqlite::Result<Vec<CachedLease>> {
    let mut keys: Vec<(String, i64)> = vec![];
    {
        let mut st =
            conn.prepare("SELECT resource, fence, files FROM lease_cache WHERE repo = ?1 AND mode = 'exclusive'")?;
        let mut rows = st.query([repo])?;
        while let Some(r) = rows.next()? {
            if files_cover(r.get_ref(2)?.as_str().unwrap_or("[]"), rel) {
                keys.push((r.get(0)?, r.get(1)?));
            }
        }
    }
    if keys.is_empty() {
        return Ok(vec![]);
    }
    let mut st = conn.prepare(
        "SELECT holder_pc, holder_session, holder_name, description, files, granted_at, heartbeat_at, stale
         FROM lease_cache WHERE resource = ?1 AND fence = ?2",
    )?;
    let mut out = vec![];
    for (resource, fence) in keys {
        let l = st.query_row(rusqlite::params![resource, fence], |r| {
            let files: String = r.get(4)?;
            Ok(CachedLease {
                resource: resource.clone(),
                fence,
                repo: repo.to_string(),
                mode: "exclusive".to_string(),
                holder_pc: r.get(0)?,
                holder_session: r.get(1)?,
                holder_name: r.get(2)?,
                description: r.get(3)?,
                files: serde_json::from_str(&files).unwrap_or_default(),
                granted_at: r.get(5)?,
                heartbeat_at: r.get(6)?,
                stale: r.get(7)?,
                json: String::new(),
            })
        })?;
        out.push(l);
    }
    Ok(out)
}

/// The guard file's name in the PC's home: what the PreToolUse guard needs
/// from the lease cache (the exclusive leases, the cache's time and the
/// server's clock offset), written by the poller after each poll so an edit
/// is checked without opening SQLite.
pub const GUARD_FILE: &str = "guard-leases";
/// The file's first line: a reader that doesn't find it uses the store.
const GUARD_MAGIC: &str = "pcmail guard-leases 1";

pub fn guard_file(home: &Path) -> PathBuf {
    home.join(GUARD_FILE)
}

#[derive(serde::Serialize, serde::Deserialize)]
struct GuardHead {
    /// When the server last confirmed the cache (local ms).
    at: Millis,
    /// The server's clock minus this PC's.
    offset: Millis,
    /// This PC's checkouts of the repos with exclusive leases, as (repo id,
    /// top folder): where the guard looks for the other names of a
    /// hard-linked file. Absent in a file of an older version.
    #[serde(default)]
    checkouts: Vec<(String, String)>,
}

/// The checkouts on this PC of the repos that have exclusive leases in
/// `leases`, as (repo id, top folder), from the folders of the sessions this
/// PC recorded (the newest 200, each folder looked up once). Computed by the
/// poller, so the guard's hot path never looks for them.
pub fn lease_checkouts(conn: &Connection, leases: &[CachedLease]) -> Vec<(String, String)> {
    use std::collections::HashSet;
    let repos: HashSet<&str> = leases.iter().filter(|l| l.mode == "exclusive").map(|l| l.repo.as_str()).collect();
    if repos.is_empty() {
        return vec![];
    }
    let (mut cwds, mut roots, mut out) = (HashSet::new(), HashSet::new(), vec![]);
    for s in sl::sessions_list(conn, 200).unwrap_or_default() {
        let Some(cwd) = s.cwd.filter(|c| cwds.insert(c.clone())) else { continue };
        if !s.repo.as_deref().is_some_and(|r| repos.contains(r)) {
            continue;
        }
        let Some(root) = crate::repo::work_tree_root(Path::new(&cwd)) else { continue };
        if roots.insert(root.clone()) {
            out.push((s.repo.unwrap_or_default(), root.to_string_lossy().into_owned()));
        }
    }
    out
}

/// A guard file that would say the same but for its time is written again
/// only once its time is this old. The poller polls every few seconds, and a
/// rewrite costs a rename and two fsyncs; the guard speaks of the file's age
/// only past [`CACHE_OLD_MS`], so a minute of it is never seen.
pub const GUARD_REFRESH_MS: Millis = 60 * 1000;
/// The server's clock offset moves by a round trip's noise at every poll;
/// within this it is the same offset.
const GUARD_OFFSET_SLACK_MS: Millis = 1000;

/// Writes the guard file atomically (a private temp file renamed over it):
/// one line per exclusive lease, `repo<TAB>files<TAB>lease`, each field
/// JSON (which escapes every control character, so no field holds a tab or
/// a newline), so the guard compares the repo and matches the globs of a
/// line without parsing the rest. Returns false when the file already said
/// the same (leases, checkouts, an offset within a second) and its time is
/// less than [`GUARD_REFRESH_MS`] old: then nothing is written. The file on
/// disk is what is compared, so a file another process wrote counts.
pub fn write_guard_file(
    home: &Path,
    leases: &[CachedLease],
    cache_at: Millis,
    server_offset: Millis,
    checkouts: &[(String, String)],
) -> std::io::Result<bool> {
    guard_file_says(home, leases, cache_at, server_offset, checkouts).map(|(wrote, ..)| wrote)
}

/// [`write_guard_file`], also returning the time and offset the file now
/// holds (its own when nothing was written).
fn guard_file_says(
    home: &Path,
    leases: &[CachedLease],
    cache_at: Millis,
    server_offset: Millis,
    checkouts: &[(String, String)],
) -> std::io::Result<(bool, Millis, Millis)> {
    if let Some(old) = GuardFile::read(home) {
        let fresh = (0..GUARD_REFRESH_MS).contains(&(cache_at - old.at));
        if fresh
            && (server_offset - old.offset).abs() <= GUARD_OFFSET_SLACK_MS
            && guard_text(leases, old.at, old.offset, checkouts)?.as_bytes() == old.bytes.as_slice()
        {
            return Ok((false, old.at, old.offset));
        }
    }
    let text = guard_text(leases, cache_at, server_offset, checkouts)?;
    pcmail_fsmode::replace_private(&guard_file(home), text.as_bytes())?;
    Ok((true, cache_at, server_offset))
}

/// What [`write_guard_file_kept`] last wrote or found, kept by its caller (the
/// poller): with the same leases and checkouts, an offset within the same
/// slack, a time less than [`GUARD_REFRESH_MS`] old and the file as it was
/// left (its `stat`: device, inode, size, modification and change times,
/// as [`Stamp::of`] takes it for the handoffs' view), the next poll neither
/// reads nor writes the file. Anything else, a file another process
/// replaced or touched included, goes the way of [`write_guard_file`].
#[derive(Debug, Clone, PartialEq)]
pub struct GuardWritten {
    leases: Vec<CachedLease>,
    checkouts: Vec<(String, String)>,
    at: Millis,
    offset: Millis,
    stamp: Stamp,
}

/// [`write_guard_file`] for a caller that keeps what it wrote (`kept`):
/// a `stat` instead of reading the file when nothing changed since.
pub fn write_guard_file_kept(
    home: &Path,
    leases: &[CachedLease],
    cache_at: Millis,
    server_offset: Millis,
    checkouts: &[(String, String)],
    kept: &mut Option<GuardWritten>,
) -> std::io::Result<bool> {
    let path = guard_file(home);
    if let Some(k) = kept.as_ref() {
        if (0..GUARD_REFRESH_MS).contains(&(cache_at - k.at))
            && (server_offset - k.offset).abs() <= GUARD_OFFSET_SLACK_MS
            && k.leases == leases
            && k.checkouts == checkouts
            && Stamp::of(&path) == Some(k.stamp)
        {
            return Ok(false);
        }
    }
    *kept = None;
    let (wrote, at, offset) = guard_file_says(home, leases, cache_at, server_offset, checkouts)?;
    // What the file says now (written, or found saying the same), and its stat.
    *kept = Stamp::of(&path).map(|stamp| GuardWritten {
        leases: leases.to_vec(),
        checkouts: checkouts.to_vec(),
        at,
        offset,
        stamp,
    });
    Ok(wrote)
}

fn guard_text(
    leases: &[CachedLease],
    cache_at: Millis,
    server_offset: Millis,
    checkouts: &[(String, String)],
) -> std::io::Result<String> {
    let mut text = String::with_capacity(64 + leases.len() * 256);
    text.push_str(GUARD_MAGIC);
    text.push('\n');
    text.push_str(&serde_json::to_string(&GuardHead {
        at: cache_at,
        offset: server_offset,
        checkouts: checkouts.to_vec(),
    })?);
    text.push('\n');
    for l in leases.iter().filter(|l| l.mode == "exclusive") {
        text.push_str(&serde_json::to_string(&l.repo)?);
        text.push('\t');
        text.push_str(&serde_json::to_string(&l.files)?);
        text.push('\t');
        text.push_str(&serde_json::to_string(l)?);
        text.push('\n');
    }
    Ok(text)
}

/// A lease line of the guard file: `CachedLease` as it serialises
/// (camelCase; its `json`, the server's whole object, is left out).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct GuardLease {
    resource: String,
    fence: i64,
    repo: String,
    mode: String,
    holder_pc: String,
    holder_session: String,
    holder_name: Option<String>,
    description: String,
    files: Vec<String>,
    granted_at: Millis,
    heartbeat_at: Millis,
    stale: bool,
}

impl From<GuardLease> for CachedLease {
    fn from(l: GuardLease) -> CachedLease {
        CachedLease {
            resource: l.resource,
            fence: l.fence,
            repo: l.repo,
            mode: l.mode,
            holder_pc: l.holder_pc,
            holder_session: l.holder_session,
            holder_name: l.holder_name,
            description: l.description,
            files: l.files,
            granted_at: l.granted_at,
            heartbeat_at: l.heartbeat_at,
            stale: l.stale,
            json: String::new(),
        }
    }
}

/// The guard file as read by the guard.
pub struct GuardFile {
    bytes: GuardBytes,
    /// When the server last confirmed the cache (local ms).
    pub at: Millis,
    /// The server's clock minus this PC's.
    pub offset: Millis,
    /// This PC's checkouts of repos with exclusive leases (repo id, top folder).
    pub checkouts: Vec<(String, String)>,
}

impl GuardFile {
    /// None when there is no file, it can't be read or it is not in this
    /// format: the caller then reads the store (never a denial from it).
    pub fn read(home: &Path) -> Option<GuardFile> {
        let bytes = GuardBytes::open(&guard_file(home))?;
        let text = std::str::from_utf8(bytes.as_slice()).ok()?;
        let rest = text.strip_prefix(GUARD_MAGIC)?.strip_prefix('\n')?;
        let head: GuardHead = serde_json::from_str(rest.split_once('\n')?.0).ok()?;
        Some(GuardFile { at: head.at, offset: head.offset, checkouts: head.checkouts, bytes })
    }

    fn text(&self) -> &str {
        // SAFETY: `read` checked these bytes are UTF-8, and they do not
        // change while `self` holds them (see `GuardBytes::open`).
        unsafe { std::str::from_utf8_unchecked(self.bytes.as_slice()) }
    }

    /// The exclusive leases of `repo` with a pattern covering `rel` (the
    /// same `files_cover` as the store's `covering_exclusive`); only a
    /// covering line is parsed whole. None when a line is damaged: the
    /// caller then reads the store.
    pub fn covering_exclusive(&self, repo: &str, rel: &str) -> Option<Vec<CachedLease>> {
        let want = serde_json::to_string(repo).ok()?;
        let mut out = vec![];
        for line in self.text().lines().skip(2) {
            let (r, rest) = line.split_once('\t')?;
            if r != want {
                continue;
            }
            let (files, lease) = rest.split_once('\t')?;
            if files_cover(files, rel) {
                out.push(serde_json::from_str::<GuardLease>(lease).ok()?.into());
            }
        }
        Some(out)
    }
}

/// The guard file's bytes. The guard reads the whole file at every tool
/// call (some 370 bytes per exclusive lease); read into memory, the copy
/// and the fresh pages it lands in cost a fifth of the guard's CPU with
/// 1,000 leases, so on Unix the file is mapped instead.
enum GuardBytes {
    #[cfg(unix)]
    Mapped {
        at: std::ptr::NonNull<u8>,
        len: usize,
    },
    Read(Vec<u8>),
}

impl GuardBytes {
    fn open(path: &Path) -> Option<GuardBytes> {
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            let file = std::fs::File::open(path).ok()?;
            let len = usize::try_from(file.metadata().ok()?.len()).ok()?;
            if len == 0 {
                return Some(GuardBytes::Read(vec![]));
            }
            #[cfg(target_os = "linux")]
            let flags = libc::MAP_PRIVATE | libc::MAP_POPULATE;
            #[cfg(not(target_os = "linux"))]
            let flags = libc::MAP_PRIVATE;
            // SAFETY: a read-only private mapping of a file opened for
            // reading, `len` bytes from its start; the mapping outlives the
            // descriptor by design. pcmail never changes a guard file in
            // place (a new one is renamed over it, which leaves this inode
            // as it is), and only this user may write it (0600), so the
            // bytes do not change under the slice made from them.
            let at = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, flags, file.as_raw_fd(), 0) };
            if at != libc::MAP_FAILED {
                return std::ptr::NonNull::new(at.cast::<u8>()).map(|at| GuardBytes::Mapped { at, len });
            }
        }
        std::fs::read(path).ok().map(GuardBytes::Read)
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            // SAFETY: `at` maps `len` readable bytes until `drop` (see `open`).
            #[cfg(unix)]
            GuardBytes::Mapped { at, len } => unsafe { std::slice::from_raw_parts(at.as_ptr(), *len) },
            GuardBytes::Read(v) => v,
        }
    }
}

impl Drop for GuardBytes {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let GuardBytes::Mapped { at, len } = self {
            // SAFETY: the mapping `open` made, unmapped once; no slice of it outlives `self`.
            unsafe { libc::munmap(at.as_ptr().cast(), *len) };
        }
    }
}

/// The first exclusive lease of another session in `repo` covering `rel`.
pub fn blocking<'a>(leases: &'a [CachedLease], me: &Me, rel: &str) -> Option<(&'a CachedLease, &'a str)> {
    leases
        .iter()
        .filter(|l| l.mode == "exclusive" && !me.holds(l))
        .find_map(|l| l.files.iter().find(|g| covers(g, rel)).map(|g| (l, g.as_str())))
}

/// Why an edit or a commit is refused: the file, the lease, the holder and how to reach them.
pub fn refusal(l: &CachedLease, rel: &str, now: Millis) -> String {
    let desc = truncate_chars(&neutralise(&l.description), 160);
    let stale = if l.stale {
        format!(
            " Its holder has been silent for {} (stale): `pcmail lease takeover {} --reason …` takes it with evidence.",
            pcmail_core::present::age(now - l.heartbeat_at),
            l.resource
        )
    } else {
        String::new()
    };
    format!(
        "pcmail: {rel} is under the exclusive lease `{}` held by {} since {}: {desc}. Ask the holder to release it \
         (`pcmail send {} --body \"…\"`, or wait: `pcmail lease list`).{stale}",
        l.resource,
        holder_label(l),
        hhmm(l.granted_at),
        l.holder_pc,
    )
}

/// The context line when the lease view may be old (the poller has not
/// refreshed it for 10 minutes); None while it is fresh.
pub fn cache_age_line(conn: &Connection, now: Millis) -> Option<String> {
    age_line(sl::cache_at(conn).ok().flatten()?, now)
}

/// The same line from the cache's time (the guard file's, or the store's).
pub fn age_line(at: Millis, now: Millis) -> Option<String> {
    (now - at > CACHE_OLD_MS).then(|| {
        format!(
            "pcmail: the lease view is {} old (no poll since); a lease taken meanwhile is not guarded. `pcmail sync` refreshes it.",
            pcmail_core::present::age(now - at)
        )
    })
}

/// A lost lease's event when the server turned out to have no leases at all
/// (a claim kept unconfirmed offline, answered `unknown_op` on reconnect).
pub const LOST_UNSUPPORTED: &str = "unsupported";

/// The one line a session gets about a lease it lost.
pub fn lost_line(l: &LostLease) -> String {
    let reason = l.reason.as_deref().map(|r| format!(": {}", truncate_chars(&neutralise(r), 120))).unwrap_or_default();
    match l.event.as_str() {
        "taken_over" => format!(
            "pcmail: lease {} was taken over by {} at {}{reason}",
            l.resource,
            l.taken_by.as_deref().map(neutralise).unwrap_or_else(|| "another session".into()),
            hhmm(l.at)
        ),
        "expired" => format!("pcmail: lease {} expired at {}{reason}", l.resource, hhmm(l.at)),
        LOST_UNSUPPORTED => format!(
            "pcmail: lease {} is not held: the server has no leases (no `leases` in its features), so nothing guards it \
             across PCs; redeploy gas/ or update pcmail serve",
            l.resource
        ),
        _ => format!("pcmail: lease {} was released at {}{reason}", l.resource, hhmm(l.at)),
    }
}

/// Leases others hold in `repo`, one line each, within `room` characters;
/// what doesn't fit becomes a count with the command that shows it.
pub fn others_lines(leases: &[CachedLease], me: &Me, now: Millis, room: usize) -> Option<String> {
    let others: Vec<&CachedLease> = leases.iter().filter(|l| !me.holds(l)).collect();
    if others.is_empty() {
        return None;
    }
    let mut out = String::new();
    let mut shown = 0;
    for (i, l) in others.iter().enumerate() {
        let files =
            if l.files.is_empty() { String::new() } else { format!(" [{}]", truncate_chars(&l.files.join(", "), 80)) };
        let stale = if l.stale { " STALE" } else { "" };
        let line = format!(
            "pcmail: lease {}{files} held by {} ({}, {} ago{stale}): {}",
            l.resource,
            holder_label(l),
            l.mode,
            pcmail_core::present::age(now - l.granted_at),
            truncate_chars(&neutralise(&l.description), 100)
        );
        let left = others.len() - i - 1;
        let tail = if left > 0 {
            format!("\npcmail: +{left} more leases in this repo: pcmail lease list")
        } else {
            String::new()
        };
        let need = out.chars().count() + usize::from(!out.is_empty()) + line.chars().count();
        if need + tail.chars().count() > room {
            break;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&line);
        shown += 1;
    }
    let left = others.len() - shown;
    if left > 0 {
        let tail = if shown == 0 {
            format!("pcmail: {left} leases held by others in this repo: pcmail lease list")
        } else {
            format!("pcmail: +{left} more leases in this repo: pcmail lease list")
        };
        if out.chars().count() + 1 + tail.chars().count() <= room {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&tail);
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_cover_files_and_folders() {
        for (p, f, want) in [
            ("src/auth/**", "src/auth/login.rs", true),
            ("src/auth/**", "src/auth/a/b/c.rs", true),
            ("src/auth/**", "src/authz.rs", false),
            ("src/auth", "src/auth/login.rs", true),
            ("src/auth/", "src/auth/x", true),
            ("src/auth", "src/authz/x", false),
            ("src/*.rs", "src/main.rs", true),
            ("src/*.rs", "src/a/main.rs", false),
            ("**/*.md", "README.md", true),
            ("**/*.md", "docs/x/y.md", true),
            ("Cargo.toml", "Cargo.toml", true),
            ("Cargo.toml", "crates/x/Cargo.toml", false),
            ("src/ma?n.rs", "src/main.rs", true),
            ("crates/m5/**", "crates/m50/x.rs", false),
            ("crates/m5*/**", "crates/m50/x.rs", true),
            ("crates/m5/**", "src/main.rs", false),
            ("./src/*.rs", "src/main.rs", true),
            ("././src/*.rs", "src/main.rs", true),
            ("./", "x", false),
            ("", "x", false),
        ] {
            assert_eq!(covers(p, f), want, "{p} ~ {f}");
        }
    }

    /// The guard splits a plain array of paths at its quotes; whatever the
    /// array holds, that says what parsing it says.
    #[test]
    fn a_files_array_covers_what_its_parsed_globs_cover() {
        let parsed = |json: &str, rel: &str| {
            serde_json::from_str::<Vec<String>>(json).is_ok_and(|globs| globs.iter().any(|g| covers(g, rel)))
        };
        let arrays = [
            r#"[]"#,
            r#"[ ]"#,
            r#"["src/auth/**"]"#,
            r#"["docs/a.md","src/*.rs"]"#,
            r#"[ "docs/a.md" , "src/*.rs" ]"#,
            r#"["src/a\"b.rs"]"#,
            r#"["src/\u00e9/**"]"#,
            r#"["src/a,b.rs","x"]"#,
            r#"["src/é/**"]"#,
            r#"["src/auth/**",1]"#,
            r#"["src/auth/**" "x"]"#,
            r#"["src/auth/**",]"#,
            r#"[,"src/auth/**"]"#,
            r#"["src/auth/**""#,
            r#""src/auth/**"]"#,
            "[\"src/auth/**\",\"a\tb\"]",
            "[\"src/auth/**\",\n \"x\"]",
            r#"not json"#,
            r#"["unclosed"#,
        ];
        for json in arrays {
            for rel in ["src/auth/x.rs", "src/main.rs", "docs/a.md", "src/a\"b.rs", "src/é/x", "src/a,b.rs", "x"] {
                assert_eq!(files_cover(json, rel), parsed(json, rel), "{json} ~ {rel}");
            }
        }
        // Strings made of JSON's punctuation, paths, spaces and control
        // characters, as a damaged file could hold them.
        let alphabet = ["[", "]", "\"", ",", " ", "\\", "\t", "\u{1}", "src/auth/**", "x", "1"];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            let mut json = String::new();
            for _ in 0..(seed % 9) {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                json.push_str(alphabet[(seed >> 33) as usize % alphabet.len()]);
            }
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            for rel in ["src/auth/x.rs", "x"] {
                assert_eq!(files_cover(&json, rel), parsed(&json, rel), "{json:?} ~ {rel}");
            }
        }
    }

    #[test]
    fn check_patterns_match_whole_resource_names() {
        for (p, r, want) in [
            ("gpu-*", "gpu-0", true),
            ("gpu-*", "gpu-a:2", true),
            ("gpu-*", "gpus", false),
            ("gpu-*", "my-gpu-0", false),
            ("deploy/*", "deploy/staging", true),
            ("gpu-?", "gpu-10", false),
            ("staging-deploy", "staging-deploy", true),
        ] {
            assert_eq!(resource_matches(p, r), want, "{p} ~ {r}");
        }
    }

    fn lease(pc: &str, session: &str, files: &[&str], stale: bool) -> CachedLease {
        CachedLease {
            resource: "auth".into(),
            fence: 4,
            repo: "github.com/o/r".into(),
            mode: "exclusive".into(),
            holder_pc: pc.into(),
            holder_session: session.into(),
            holder_name: Some("ani".into()),
            description: "refactor <auth>".into(),
            files: files.iter().map(|s| s.to_string()).collect(),
            granted_at: 14 * 3_600_000 + 2 * 60_000,
            heartbeat_at: 0,
            stale,
            json: "{}".into(),
        }
    }

    /// The poller's way: what it wrote is kept, and the next poll with the
    /// same inputs decides on a `stat` of the file alone; the same changes
    /// as above write it again, and so does a file another process replaced.
    #[test]
    fn a_kept_guard_file_is_judged_by_its_stat_until_something_changes() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        let path = guard_file(home);
        let ls = vec![lease("pc-b", "s2", &["src/auth/**"], false)];
        let t0 = 1_800_000_000_000;
        let mut kept = None;
        assert!(write_guard_file_kept(home, &ls, t0, 250, &[], &mut kept).unwrap(), "no file yet");
        assert!(kept.is_some());
        assert!(!write_guard_file_kept(home, &ls, t0 + 5_000, 262, &[], &mut kept).unwrap());
        // A poller that starts finds the file saying the same: kept too, with the file's time.
        let mut found = None;
        assert!(!write_guard_file_kept(home, &ls, t0 + 5_000, 262, &[], &mut found).unwrap());
        assert_eq!(found, kept, "the file's own time and offset, and its stat");
        // Bytes changed in place with the size and modification time put
        // back: the change time tells, so it is read, found damaged, and
        // written again.
        let before = std::fs::metadata(&path).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[0] ^= 1;
        let mut f = std::fs::File::options().write(true).open(&path).unwrap();
        std::io::Write::write_all(&mut f, &bytes).unwrap();
        f.set_modified(before.modified().unwrap()).unwrap();
        drop(f);
        assert!(write_guard_file_kept(home, &ls, t0 + 6_000, 250, &[], &mut kept).unwrap());
        assert_eq!(GuardFile::read(home).unwrap().at, t0 + 6_000);
        // Replaced by another writer (a new inode): read, found damaged, written again.
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        assert!(write_guard_file_kept(home, &ls, t0 + 7_000, 250, &[], &mut kept).unwrap());
        assert_eq!(GuardFile::read(home).unwrap().at, t0 + 7_000);
        // New inputs, as for the unkept call.
        let more =
            vec![ls[0].clone(), CachedLease { resource: "db".into(), files: vec!["db/**".into()], ..ls[0].clone() }];
        assert!(write_guard_file_kept(home, &more, t0 + 8_000, 250, &[], &mut kept).unwrap(), "a new lease");
        let co = vec![("github.com/o/r".to_string(), "/w/r".to_string())];
        assert!(write_guard_file_kept(home, &more, t0 + 9_000, 250, &co, &mut kept).unwrap(), "a new checkout");
        assert!(write_guard_file_kept(home, &more, t0 + 10_000, 5_250, &co, &mut kept).unwrap(), "a clock step");
        assert!(!write_guard_file_kept(home, &more, t0 + 10_000 + GUARD_REFRESH_MS - 1, 5_250, &co, &mut kept).unwrap());
        assert!(write_guard_file_kept(home, &more, t0 + 10_000 + GUARD_REFRESH_MS, 5_250, &co, &mut kept).unwrap());
        assert!(write_guard_file_kept(home, &more, t0, 5_250, &co, &mut kept).unwrap(), "a clock set back");
        assert_eq!(GuardFile::read(home).unwrap().at, t0);
    }

    #[test]
    fn the_guard_file_is_written_again_only_when_it_would_say_something_new() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        let ls = vec![lease("pc-b", "s2", &["src/auth/**"], false)];
        let t0 = 1_800_000_000_000;
        assert!(write_guard_file(home, &ls, t0, 250, &[]).unwrap(), "no file yet");
        // The same leases a poll later, the offset moved by a round trip's noise: nothing written.
        assert!(!write_guard_file(home, &ls, t0 + 5_000, 262, &[]).unwrap());
        let g = GuardFile::read(home).unwrap();
        assert_eq!((g.at, g.offset), (t0, 250), "the file kept what it said");
        assert_eq!(g.covering_exclusive("github.com/o/r", "src/auth/x.rs").map(|l| l.len()), Some(1));
        // Something new: a lease, a checkout, an offset a clock step away, or the time a step old.
        let more =
            vec![ls[0].clone(), CachedLease { resource: "db".into(), files: vec!["db/**".into()], ..ls[0].clone() }];
        assert!(write_guard_file(home, &more, t0 + 6_000, 250, &[]).unwrap(), "a new lease");
        assert_eq!(GuardFile::read(home).unwrap().at, t0 + 6_000);
        let co = vec![("github.com/o/r".to_string(), "/w/r".to_string())];
        assert!(write_guard_file(home, &more, t0 + 7_000, 250, &co).unwrap(), "a new checkout");
        assert!(write_guard_file(home, &more, t0 + 8_000, 5_250, &co).unwrap(), "the server's clock moved");
        assert!(!write_guard_file(home, &more, t0 + 8_000 + GUARD_REFRESH_MS - 1, 5_250, &co).unwrap());
        assert!(write_guard_file(home, &more, t0 + 8_000 + GUARD_REFRESH_MS, 5_250, &co).unwrap(), "a step old");
        // A clock set back below the file's time writes the earlier time.
        assert!(write_guard_file(home, &more, t0, 5_250, &co).unwrap());
        assert_eq!(GuardFile::read(home).unwrap().at, t0);
        // A damaged file is written again.
        std::fs::write(guard_file(home), "garbage").unwrap();
        assert!(write_guard_file(home, &more, t0 + 1, 5_250, &co).unwrap());
        assert!(GuardFile::read(home).is_some());
    }

    #[test]
    fn only_another_sessions_exclusive_lease_blocks() {
        let ls = vec![lease("pc-b", "s2", &["src/auth/**"], false)];
        let me = Me { pc: "pc-a", session: "s1", own: vec![] };
        let (l, g) = blocking(&ls, &me, "src/auth/x.rs").unwrap();
        assert_eq!((l.resource.as_str(), g), ("auth", "src/auth/**"));
        assert!(blocking(&ls, &me, "src/main.rs").is_none());
        let holder = Me { pc: "pc-b", session: "s2", own: vec![] };
        assert!(blocking(&ls, &holder, "src/auth/x.rs").is_none(), "the holder itself edits");
        let after_clear = Me { pc: "pc-b", session: "s3", own: vec![("auth".into(), 4)] };
        assert!(blocking(&ls, &after_clear, "src/auth/x.rs").is_none(), "the same process after /clear");
        let mut shared = ls.clone();
        shared[0].mode = "shared".into();
        assert!(blocking(&shared, &me, "src/auth/x.rs").is_none());
        let r = refusal(&ls[0], "src/auth/x.rs", 0);
        assert!(
            r.contains("pc-b/ani") && r.contains("14:02") && r.contains("‹auth›") && r.contains("pcmail send pc-b"),
            "{r}"
        );
    }

    #[test]
    fn others_leases_fit_the_room_or_become_a_count() {
        let me = Me { pc: "pc-a", session: "s1", own: vec![] };
        let ls: Vec<CachedLease> = (0..30)
            .map(|i| {
                let mut l = lease("pc-b", "s2", &["src/**"], i == 0);
                l.resource = format!("res-{i}");
                l
            })
            .collect();
        let all = others_lines(&ls, &me, 20 * 3_600_000, 10_000).unwrap();
        assert_eq!(all.lines().count(), 30);
        assert!(all.lines().next().unwrap().contains("STALE"));
        let some = others_lines(&ls, &me, 0, 400).unwrap();
        assert!(some.chars().count() <= 400, "{some}");
        assert!(some.ends_with("more leases in this repo: pcmail lease list"), "{some}");
        let none = others_lines(&ls, &me, 0, 90).unwrap();
        assert_eq!(none, "pcmail: 30 leases held by others in this repo: pcmail lease list");
        assert_eq!(others_lines(&ls, &me, 0, 10), None);
    }
}
