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
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .take(ACTOR_SESSION_CHARS)
        .collect()
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

    proptest! {
        // Whatever the hook is fed, the actor it builds passes the server's check.
        #[test]
        fn any_session_gives_a_valid_actor(label in "[a-z0-9][a-z0-9._-]{0,39}", session in any::<String>()) {
            let a = actor(&label, Some(&session));
            prop_assert!(check_mark_text(MarkOp::Seen, &a, None).is_ok(), "{:?}", a);
        }

        #[test]
        fn cleaned_reasons_always_pass(reason in any::<String>()) {
            let r = clean_reason(&reason);
            prop_assert!(check_mark_text(MarkOp::Fail, "pc-a", Some(&r)).is_ok(), "{:?}", r);
        }
    }
}
