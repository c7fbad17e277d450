//! Chunked jobs, the pure part: which inputs a run still
//! has to do, whether it may start another one, and the counts a result
//! carries. Progress is kept per input by fingerprint (input id + its
//! modification time), so one new input never discards the others' results;
//! a failing input is dropped after N failures and tried again once the
//! counter expired. Time is passed in.

use pcmail_core::job::{ChunkCounts, CHUNK_FAILURES_MAX, CHUNK_FAILURE_EXPIRY_MS, CHUNK_START_DEADLINE_PERCENT};
use pcmail_core::Millis;
use sha2::{Digest, Sha256};
use std::path::Path;

/// The fingerprint of one input: SHA-256 of its id and modification time.
pub fn fingerprint(input: &str, mtime_ns: i64) -> String {
    let mut h = Sha256::new();
    h.update(input.as_bytes());
    h.update([0u8]);
    h.update(mtime_ns.to_le_bytes());
    pcmail_core::hex::lower(&h.finalize())
}

/// What is known of one input (by fingerprint).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputState {
    pub fingerprint: String,
    pub input: String,
    pub ok: bool,
    pub failures: u32,
    pub last_failure_at: Option<Millis>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Todo {
    Run,
    Done,
    /// Failed N times and the counter has not expired: not retried now.
    Skipped,
}

pub fn todo(state: Option<&InputState>, now: Millis) -> Todo {
    match state {
        None => Todo::Run,
        Some(s) if s.ok => Todo::Done,
        Some(s)
            if s.failures >= CHUNK_FAILURES_MAX
                && s.last_failure_at.is_some_and(|t| now - t < CHUNK_FAILURE_EXPIRY_MS) =>
        {
            Todo::Skipped
        }
        Some(_) => Todo::Run,
    }
}

/// After this a run starts no new input (earlier than its time limit, so an
/// input started just before it still has its own budget).
pub fn start_deadline(run_started_at: Millis, time_limit_ms: Millis) -> Millis {
    run_started_at + time_limit_ms * CHUNK_START_DEADLINE_PERCENT / 100
}

/// An input's outcome folded into its state. A failure whose counter had
/// expired starts counting again from one.
pub fn record(prev: Option<&InputState>, fingerprint: &str, input: &str, ok: bool, now: Millis) -> InputState {
    let expired = prev.is_some_and(|p| p.last_failure_at.is_some_and(|t| now - t >= CHUNK_FAILURE_EXPIRY_MS));
    let failures = if ok {
        0
    } else if expired {
        1
    } else {
        prev.map_or(0, |p| p.failures) + 1
    };
    InputState {
        fingerprint: fingerprint.to_string(),
        input: input.to_string(),
        ok,
        failures,
        last_failure_at: if ok { None } else { Some(now) },
    }
}

/// The counts of a result: inputs done, all inputs, failing ones (not
/// dropped yet), and those dropped after N failures.
pub fn counts(inputs: &[(String, String)], states: &[InputState], now: Millis) -> ChunkCounts {
    let mut c = ChunkCounts { total: inputs.len() as i64, ..Default::default() };
    for (_, fp) in inputs {
        let s = states.iter().find(|s| &s.fingerprint == fp);
        match todo(s, now) {
            Todo::Done => c.done += 1,
            Todo::Skipped => c.skipped += 1,
            Todo::Run if s.is_some_and(|s| s.failures > 0) => c.failed += 1,
            Todo::Run => {}
        }
    }
    c
}

/// The inputs of a chunked command: the files directly in `dir`, by name,
/// with their fingerprints. `rel` is `dir` as the command sees it (relative
/// to its checkout).
pub fn list_inputs(dir: &Path, rel: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    let mtime = e.metadata().ok()?.modified().ok()?;
                    let ns = mtime.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0);
                    // An input is one argv element: a name that starts with `-`
                    // is given as `./-name`, never read as an option.
                    let id = if rel.is_empty() || rel == "." {
                        if name.starts_with('-') {
                            format!("./{name}")
                        } else {
                            name
                        }
                    } else {
                        format!("{}/{name}", rel.trim_end_matches('/'))
                    };
                    let fp = fingerprint(&id, ns);
                    Some((id, fp))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Millis = 24 * 60 * 60 * 1000;

    #[test]
    fn a_changed_input_is_a_new_fingerprint_and_the_others_keep_theirs() {
        assert_eq!(fingerprint("a.md", 1), fingerprint("a.md", 1));
        assert_ne!(fingerprint("a.md", 1), fingerprint("a.md", 2));
        assert_ne!(fingerprint("a.md", 1), fingerprint("b.md", 1));
        let done = InputState {
            fingerprint: fingerprint("a.md", 1),
            input: "a.md".into(),
            ok: true,
            failures: 0,
            last_failure_at: None,
        };
        let inputs = vec![("a.md".to_string(), fingerprint("a.md", 1)), ("b.md".to_string(), fingerprint("b.md", 5))];
        let c = counts(&inputs, std::slice::from_ref(&done), 0);
        assert_eq!((c.done, c.total), (1, 2), "adding b keeps a's result");
        assert_eq!(todo(Some(&done), 0), Todo::Done);
    }

    #[test]
    fn a_failing_input_is_dropped_after_three_failures_and_retried_after_the_expiry() {
        let fp = fingerprint("x", 1);
        let t0 = 1_000_000;
        let s1 = record(None, &fp, "x", false, t0);
        assert_eq!((s1.failures, todo(Some(&s1), t0)), (1, Todo::Run));
        let s2 = record(Some(&s1), &fp, "x", false, t0 + 10);
        let s3 = record(Some(&s2), &fp, "x", false, t0 + 20);
        assert_eq!(s3.failures, 3);
        assert_eq!(todo(Some(&s3), t0 + 20 + 3 * DAY - 1), Todo::Skipped);
        assert_eq!(counts(&[("x".into(), fp.clone())], std::slice::from_ref(&s3), t0 + 21).skipped, 1);
        // Three days after the last failure: retried, and a new failure counts from one.
        let later = t0 + 20 + 3 * DAY;
        assert_eq!(todo(Some(&s3), later), Todo::Run);
        let s4 = record(Some(&s3), &fp, "x", false, later);
        assert_eq!((s4.failures, todo(Some(&s4), later)), (1, Todo::Run));
        let ok = record(Some(&s4), &fp, "x", true, later + 1);
        assert_eq!((ok.failures, todo(Some(&ok), later + 1)), (0, Todo::Done));
    }

    #[test]
    fn the_start_deadline_is_seventy_percent_of_the_time_limit() {
        assert_eq!(start_deadline(1_000, 10_000), 8_000);
    }

    #[test]
    fn inputs_are_the_files_of_a_folder_by_name() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("b.txt"), "b").unwrap();
        std::fs::write(d.path().join("a.txt"), "a").unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        let l = list_inputs(d.path(), "in");
        assert_eq!(l.iter().map(|x| x.0.as_str()).collect::<Vec<_>>(), ["in/a.txt", "in/b.txt"]);
    }

    #[test]
    fn an_input_named_like_an_option_is_given_as_a_path() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("--output=x"), "o").unwrap();
        std::fs::write(d.path().join("a.txt"), "a").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink("/etc/hostname", d.path().join("host")).unwrap();
        let l = list_inputs(d.path(), ".");
        // Symlinks are not inputs (they could lead out of the checkout).
        assert_eq!(l.iter().map(|x| x.0.as_str()).collect::<Vec<_>>(), ["./--output=x", "a.txt"]);
    }
}
