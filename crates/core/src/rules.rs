//! Rules that a client and a server both check, each in one function here:
//! the client checks before it queues, the server when it parses. A mark the
//! client accepted can then never be one the server refuses for its text.

use crate::error::ProtoError;
use crate::model::MarkOp;

/// Longest actor name (`label/session`) a mark may carry.
pub const ACTOR_MAX_CHARS: usize = 100;
/// Longest reason a `fail` mark may carry.
pub const REASON_MAX_CHARS: usize = 2000;
/// How much of a session id goes into an actor name.
pub const ACTOR_SESSION_CHARS: usize = 8;
/// Most globs a lease may name.
pub const FILES_MAX: usize = 200;
/// Longest glob a lease may name.
pub const GLOB_MAX_CHARS: usize = 400;
/// Longest lease resource name.
pub const RESOURCE_MAX_CHARS: usize = 100;

/// Text must fit and carry no control characters but tab and newlines when
/// `multiline` (a NUL or an escape sequence has no business in mail that lands
/// in a terminal or a model's context). Line and paragraph separators count as
/// control characters: they break a line where a reader does not expect it.
pub fn check_text(field: &str, s: &str, max_chars: usize, multiline: bool) -> Result<(), ProtoError> {
    if s.chars().count() > max_chars {
        return Err(ProtoError::field(field, format!("{field} is longer than {max_chars} characters")));
    }
    let bad = s.chars().any(|c| {
        (c.is_control() && !(multiline && matches!(c, '\n' | '\r' | '\t'))) || matches!(c, '\u{2028}' | '\u{2029}')
    });
    if bad {
        return Err(ProtoError::field(field, format!("{field} contains control characters")));
    }
    Ok(())
}

/// The one check of a mark's free-text fields (`by`, `reason`), shared by the
/// CLI (before it queues) and both servers (when they parse).
pub fn check_mark_text(op: MarkOp, by: &str, reason: Option<&str>) -> Result<(), ProtoError> {
    if by.trim().is_empty() {
        return Err(ProtoError::field("by", "a mark needs the actor (\"by\")"));
    }
    check_text("by", by, ACTOR_MAX_CHARS, false)?;
    if let Some(r) = reason {
        check_text("reason", r, REASON_MAX_CHARS, true)?;
    }
    if op == MarkOp::Fail && reason.map(str::trim).unwrap_or("").is_empty() {
        return Err(ProtoError::field("reason", "a fail mark needs a reason that is not blank"));
    }
    Ok(())
}

/// The secret of a join code: 32 lower-case hex characters (128 bits,
/// enough for a one-time code that lives a day).
pub fn check_join_secret(s: &str) -> Result<(), ProtoError> {
    if s.len() == 32 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        Ok(())
    } else {
        Err(ProtoError::field("code", "a join code's secret is 32 lower-case hex characters"))
    }
}

/// A lease's resource name: like a label (lower-case `a-z 0-9 . _ -`,
/// starting with a letter or digit) plus `/` and `:`, up to 100 characters
/// (`staging-deploy`, `gpu-host-a:2`, `module/auth`). The CLI checks it
/// before it sends; both servers when they parse.
pub fn check_resource(s: &str) -> Result<(), ProtoError> {
    let b = s.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= RESOURCE_MAX_CHARS
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'_' | b'-' | b'/' | b':'));
    if ok {
        Ok(())
    } else {
        Err(ProtoError::field(
            "resource",
            format!("resource {s:?} is not valid: 1-100 characters of lower-case a-z 0-9 . _ - / :, starting with a letter or digit"),
        ))
    }
}

/// One file glob of a lease: repo-relative with `/` separators (`src/**/*.rs`),
/// 1-400 characters, no control characters, no `\\`, no leading `/` or drive
/// letter, and no `..` segment (a lease never reaches outside its repo).
pub fn check_file_glob(glob: &str) -> Result<(), ProtoError> {
    let bad = |why: &str| Err(ProtoError::field("files", format!("file glob {glob:?} {why}")));
    if glob.is_empty() || glob.chars().count() > GLOB_MAX_CHARS {
        return bad("must be 1-400 characters");
    }
    if glob.chars().any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')) {
        return bad("contains control characters");
    }
    if glob.contains('\\') {
        return bad("must use / as the separator");
    }
    let b = glob.as_bytes();
    if b[0] == b'/' || (b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':') {
        return bad("must be relative to the repo root");
    }
    if glob.split('/').any(|seg| seg == "..") {
        return bad("must not contain a .. segment");
    }
    Ok(())
}

/// A lease's `files`: at most 200 globs, each passing [`check_file_glob`].
pub fn check_lease_files(files: &[String]) -> Result<(), ProtoError> {
    if files.len() > FILES_MAX {
        return Err(ProtoError::field("files", format!("at most {} globs in \"files\"", FILES_MAX)));
    }
    files.iter().try_for_each(|g| check_file_glob(g))
}

/// Longest session id (a lease holder's, a job submitter's, a live session's, `name.take`'s).
pub const SESSION_ID_MAX_CHARS: usize = 100;
/// How much of an unusable session id's own text its cleaned form keeps.
const CLEAN_SESSION_KEEP_CHARS: usize = 80;

/// A character no session id may hold: control characters (C0, DEL, C1),
/// line and paragraph separators, and the invisible format characters that
/// reorder or hide text (bidi embeddings, overrides and isolates, zero-width
/// spaces and joiners, word joiners, the byte-order mark). The Apps Script
/// server tests the same ranges (`SESSION_UNSAFE_RE`).
pub fn is_unsafe_in_session(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{2028}' | '\u{2029}'
        | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{206f}' | '\u{feff}')
}

/// The one rule for a session id, wherever one travels (a poll's
/// `sessions.live`, `name.take`, a lease's holder, a job's submitter): 1-100
/// characters, not blank, none of them [`is_unsafe_in_session`]. Both servers
/// check it when they parse; the PC makes every id pass it with
/// [`clean_session_id`] before it records or sends one.
pub fn check_session_id(field: &str, s: &str) -> Result<(), ProtoError> {
    let n = s.chars().count();
    if n == 0 || n > SESSION_ID_MAX_CHARS || s.chars().any(is_unsafe_in_session) || s.trim().is_empty() {
        return Err(ProtoError::field(
            field,
            format!(
                "{field} must be 1-{SESSION_ID_MAX_CHARS} characters, not blank, with no control or invisible formatting characters"
            ),
        ));
    }
    Ok(())
}

/// A session id as the PC records and sends it. An id that passes
/// [`check_session_id`] is kept as it is. Any other (a hook or a wrapper may
/// send a newline, a NUL, a bidi override or a huge string) becomes its safe
/// characters, at most 80, then `~` and 8 hex digits of its SHA-256: the same
/// raw id always gives the same cleaned one, and two raw ids that differ only
/// in what was dropped stay apart. None for an id that is empty or blank (no
/// session at all).
pub fn clean_session_id(raw: &str) -> Option<String> {
    if raw.trim().is_empty() {
        return None;
    }
    if check_session_id("session", raw).is_ok() {
        return Some(raw.to_string());
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(raw.as_bytes());
    let tag = crate::hex::lower(&digest[..4]);
    let kept: String = raw.chars().filter(|c| !is_unsafe_in_session(*c)).take(CLEAN_SESSION_KEEP_CHARS).collect();
    let kept = kept.trim();
    Some(if kept.is_empty() { format!("session~{tag}") } else { format!("{kept}~{tag}") })
}

/// The actor name for marks made by `label`, optionally from a session.
/// Never refused: whatever a hook is fed as a session id, only `[A-Za-z0-9._-]`
/// survive (a newline in a session id once stopped a PC's mail for good).
pub fn actor(label: &str, session: Option<&str>) -> String {
    let label = sanitize_actor(label);
    match session.map(clean_session) {
        Some(s) if !s.is_empty() => format!("{label}/{s}"),
        _ => label,
    }
}

fn clean_session(s: &str) -> String {
    s.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')).take(ACTOR_SESSION_CHARS).collect()
}

/// Makes any string a valid actor name (for callers that were given one).
pub fn sanitize_actor(by: &str) -> String {
    let s: String = by
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | '@' | ':'))
        .take(ACTOR_MAX_CHARS)
        .collect();
    if s.is_empty() {
        "unknown".into()
    } else {
        s
    }
}

/// Makes a reason the PC wrote itself (a quarantine's parse error, say) one
/// that passes [`check_mark_text`]: control characters become spaces, it is
/// cut to the limit, and a blank one gets a word.
pub fn clean_reason(s: &str) -> String {
    let s: String = s
        .chars()
        .map(|c| if (c.is_control() && c != '\n') || matches!(c, '\u{2028}' | '\u{2029}') { ' ' } else { c })
        .take(REASON_MAX_CHARS)
        .collect();
    if s.trim().is_empty() {
        "failed on the receiving PC".into()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_reported_reasons_are_refused() {
        for r in ["bad \u{1b}[31m red", &"x".repeat(2146), "   ", "a\u{2028}b", ""] {
            assert!(check_mark_text(MarkOp::Fail, "pc-a", Some(r)).is_err(), "{r:?} accepted");
        }
        assert!(check_mark_text(MarkOp::Fail, "pc-a", Some("disk full\non line 2")).is_ok());
        assert!(check_mark_text(MarkOp::Seen, "pc-a", None).is_ok());
        assert!(check_mark_text(MarkOp::Seen, "pc\na", None).is_err());
    }

    #[test]
    fn actors_are_sanitised_never_refused() {
        assert_eq!(actor("pc-b", Some("ab\ncdefgh")), "pc-b/abcdefgh");
        assert_eq!(actor("pc-b", Some("\u{200b}\u{1b}")), "pc-b");
        assert_eq!(actor("pc-b", None), "pc-b");
        assert_eq!(sanitize_actor("\n\t"), "unknown");
    }

    #[test]
    fn resource_names_are_labels_with_slash_and_colon() {
        for ok in ["staging-deploy", "gpu-host-a:2", "module/auth", "0", &"a".repeat(100)] {
            assert!(check_resource(ok).is_ok(), "{ok:?} refused");
        }
        for bad in ["", "Staging", "-x", "/x", "a b", "a\nb", "é", &"a".repeat(101)] {
            assert_eq!(check_resource(bad).unwrap_err().field.as_deref(), Some("resource"), "{bad:?} accepted");
        }
    }

    #[test]
    fn globs_stay_inside_the_repo() {
        for ok in ["src/**/*.rs", "a/b.c", "*.md", "dir/..x/y", "a..b"] {
            assert!(check_file_glob(ok).is_ok(), "{ok:?} refused");
        }
        for bad in ["", "/etc/x", "../x", "a/../b", "a/..", "C:/x", "a\\b", "a\u{1b}b", &"x".repeat(401)] {
            assert!(check_file_glob(bad).is_err(), "{bad:?} accepted");
        }
        assert!(check_lease_files(&vec!["a".to_string(); 200]).is_ok());
        assert!(check_lease_files(&vec!["a".to_string(); 201]).is_err());
    }

    #[test]
    fn session_ids_the_hook_cannot_use_are_cleaned() {
        for ok in ["abc", "0f3c2a9e-1b2c-4d5e-8f90-123456789abc", "ani session", "вася", &"s".repeat(100)] {
            assert!(check_session_id("session", ok).is_ok(), "{ok:?} refused");
            assert_eq!(clean_session_id(ok).as_deref(), Some(ok), "a usable id is kept as it is");
        }
        for bad in ["a\nb", "a\u{0}b", "a\u{202e}b", "\u{200b}", " ", "", "a\u{2028}", &"s".repeat(101)] {
            assert!(check_session_id("session", bad).is_err(), "{bad:?} accepted");
        }
        let c = clean_session_id("a\nb").unwrap();
        assert!(c.starts_with("ab~") && c.len() == 11, "{c}");
        assert_eq!(clean_session_id("a\nb"), clean_session_id("a\nb"), "stable");
        assert_ne!(clean_session_id("a\nb"), clean_session_id("a\rb"), "distinct ids stay apart");
        assert!(clean_session_id("\u{202e}").unwrap().starts_with("session~"));
        assert_eq!(clean_session_id(" \t "), None);
        assert_eq!(clean_session_id(""), None);
    }

    proptest! {
        // Whatever the hook is fed, the actor it builds passes the server's check.
        #[test]
        fn any_session_gives_a_valid_actor(label in "[a-z0-9][a-z0-9._-]{0,39}", session in any::<String>()) {
            let a = actor(&label, Some(&session));
            prop_assert!(check_mark_text(MarkOp::Seen, &a, None).is_ok(), "{:?}", a);
        }

        // Whatever a hook, a CLI flag or the environment gives as a session id,
        // the PC's cleaned id passes the servers' rule (or there is none).
        #[test]
        fn any_session_id_cleans_to_a_valid_one(raw in any::<String>(), big in proptest::collection::vec(any::<char>(), 90..400)) {
            for raw in [raw, big.into_iter().collect::<String>()] {
                match clean_session_id(&raw) {
                    Some(c) => prop_assert!(check_session_id("session", &c).is_ok(), "{:?} -> {:?}", raw, c),
                    None => prop_assert!(raw.trim().is_empty()),
                }
            }
        }

        #[test]
        fn cleaned_reasons_always_pass(reason in any::<String>()) {
            let r = clean_reason(&reason);
            prop_assert!(check_mark_text(MarkOp::Fail, "pc-a", Some(&r)).is_ok(), "{:?}", r);
        }
    }
}
