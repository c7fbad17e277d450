//! Handoff file names: `<YYYY-MM-DD_HH-MM>_<session8>_<slug>.md` (UTC), a
//! rollup's with a `rollup_` segment before its slug. The session's first
//! characters make two sessions in the same minute write two names; the name
//! sorts by time.

use crate::{HandoffError, Result};
use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc};

pub const SLUG_MAX: usize = 60;
pub const ROLLUP_SEGMENT: &str = "rollup_";
const STAMP_FORMAT: &str = "%Y-%m-%d_%H-%M";
/// The time of an INDEX line and of a memory entry's header.
pub(crate) const AT_FORMAT: &str = "%Y-%m-%d %H:%M:%SZ";

/// `NaiveDateTime::parse_from_str(s, fmt)` for the two fixed formats pcmail
/// writes ([`STAMP_FORMAT`] in names, [`AT_FORMAT`] in the INDEX and in
/// memory headers). A string exactly as pcmail writes it (four-digit year,
/// two-digit fields) is read digit by digit: SessionStart reads about a
/// thousand of them, and chrono's format interpreter was most of the cost
/// of reading a repo's handoffs and memory. Anything else goes to chrono, so
/// what is accepted, and as what, does not change.
pub(crate) fn parse_stamp(s: &str, fmt: &str) -> Option<NaiveDateTime> {
    written_form(s, fmt).or_else(|| NaiveDateTime::parse_from_str(s, fmt).ok())
}

/// `s` read as `fmt` when it is exactly the form pcmail writes, else None.
fn written_form(s: &str, fmt: &str) -> Option<NaiveDateTime> {
    let (between, in_time, seconds) = match fmt {
        STAMP_FORMAT => (b'_', b'-', false),
        AT_FORMAT => (b' ', b':', true),
        _ => return None,
    };
    let b = s.as_bytes();
    if b.len() != if seconds { 20 } else { 16 } {
        return None;
    }
    let digit = |i: usize| b[i].is_ascii_digit().then(|| u32::from(b[i] - b'0'));
    let two = |i: usize| Some(digit(i)? * 10 + digit(i + 1)?);
    let marks = b[4] == b'-' && b[7] == b'-' && b[10] == between && b[13] == in_time;
    if !marks || (seconds && (b[16] != in_time || b[19] != b'Z')) {
        return None;
    }
    let year = two(0)? * 100 + two(2)?;
    let second = if seconds { two(17)? } else { 0 };
    NaiveDate::from_ymd_opt(year as i32, two(5)?, two(8)?)?.and_hms_opt(two(11)?, two(14)?, second)
}

/// A slug: lower-case a-z 0-9 and `-`, starting with a letter or digit, at
/// most 60 characters (no `_`: it separates the name's parts).
pub fn check_slug(slug: &str) -> Result<()> {
    let ok = !slug.is_empty()
        && slug.len() <= SLUG_MAX
        && slug.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && slug.as_bytes()[0] != b'-';
    if ok {
        Ok(())
    } else {
        Err(HandoffError::Usage(format!(
            "slug {slug:?}: use lower-case a-z 0-9 and - (starting with a letter or digit, at most {SLUG_MAX})"
        )))
    }
}

/// The session part of a name: the id's first 8 characters of `[a-z0-9-]`
/// (lower-cased), or `session` when none survive.
pub fn session8(session: &str) -> String {
    let s: String = session
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .map(|c| c.to_ascii_lowercase())
        .take(8)
        .collect();
    if s.is_empty() {
        "session".into()
    } else {
        s
    }
}

/// The name (without `.md`) of a handoff or rollup written at `at`.
pub fn file_stem(at: DateTime<Utc>, session: &str, slug: &str, rollup: bool) -> String {
    format!("{}_{}_{}{}", at.format(STAMP_FORMAT), session8(session), if rollup { ROLLUP_SEGMENT } else { "" }, slug)
}

/// What a name says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedName {
    pub at: DateTime<Utc>,
    pub session8: String,
    pub slug: String,
    pub rollup: bool,
}

/// Parses a handoff name (with or without `.md`); None for anything else
/// (INDEX.md, a stray file).
pub fn parse_stem(name: &str) -> Option<ParsedName> {
    let stem = name.strip_suffix(".md").unwrap_or(name);
    if stem.len() < 18 || !stem.is_char_boundary(16) {
        return None;
    }
    let (stamp, rest) = stem.split_at(16);
    let at = parse_stamp(stamp, STAMP_FORMAT)?;
    let rest = rest.strip_prefix('_')?;
    let (s8, tail) = rest.split_once('_')?;
    if s8.is_empty() {
        return None;
    }
    let (rollup, slug) = match tail.strip_prefix(ROLLUP_SEGMENT) {
        Some(s) => (true, s),
        None => (false, tail),
    };
    if slug.is_empty() {
        return None;
    }
    Some(ParsedName { at: Utc.from_utc_datetime(&at), session8: s8.to_string(), slug: slug.to_string(), rollup })
}

/// `through` as a rollup's front matter writes it.
pub fn format_through(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M").to_string()
}

/// A DATE the user gives: `YYYY-MM-DD` (the end of that day, UTC),
/// `YYYY-MM-DD HH:MM` or `YYYY-MM-DDTHH:MM` (UTC), an RFC 3339 time, or `now`.
pub fn parse_date(s: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("now") {
        return Ok(now);
    }
    if let Ok(d) = DateTime::parse_from_rfc3339(t) {
        return Ok(d.with_timezone(&Utc));
    }
    for f in ["%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S"] {
        if let Ok(d) = NaiveDateTime::parse_from_str(t, f) {
            return Ok(Utc.from_utc_datetime(&d));
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        let end = NaiveTime::from_hms_opt(23, 59, 59).expect("a valid time");
        return Ok(Utc.from_utc_datetime(&d.and_time(end)));
    }
    Err(HandoffError::Usage(format!(
        "date {t:?}: use YYYY-MM-DD, \"YYYY-MM-DD HH:MM\" (UTC), an RFC 3339 time, or now"
    )))
}

/// Parses what [`format_through`] wrote (and the other forms of [`parse_date`]).
pub fn parse_through(s: &str) -> Option<DateTime<Utc>> {
    parse_date(s, DateTime::<Utc>::MIN_UTC).ok().filter(|d| *d != DateTime::<Utc>::MIN_UTC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_read_digit_by_digit_are_what_chrono_reads() {
        let mut cases: Vec<String> = vec![];
        for fmt_case in [
            "2026-04-09_14-32",
            "2026-04-09 14:32:05Z",
            "0000-01-01 00:00:00Z",
            "9999-12-31_23-59",
            "2024-02-29 12:00:00Z",
            "2026-02-29 12:00:00Z",
            "2026-13-01_10-00",
            "2026-04-31_10-00",
            "2026-04-09 24:00:00Z",
            "2026-04-09 23:60:00Z",
            "2026-04-09 23:59:60Z",
            "2026-04-09 23:59:61Z",
            "+2026-04-09 14:32:05Z",
            "2026-4-09 14:32:05Z",
            "2026-04-09 14:32:05",
            "2026-04-09 14:32:05ZZ",
            "2026-04-09T14:32:05Z",
            "2026-04-09  4:32:05Z",
            "2026-04-09 14:32:5Z",
            "20260-04-09_14-32",
            "2026-04-09_14:32",
            "2026-04-09_14-3x",
            "",
            "２026-04-09_14-32",
        ] {
            cases.push(fmt_case.to_string());
        }
        // Each byte of both written forms replaced by others, one at a time.
        for base in ["2026-04-09_14-32", "2026-04-09 14:32:05Z"] {
            for i in 0..base.len() {
                for c in ['0', '9', '-', '_', ' ', ':', 'Z', 'a', '+'] {
                    let mut s = base.to_string();
                    s.replace_range(i..i + 1, &c.to_string());
                    cases.push(s);
                }
            }
        }
        for s in &cases {
            for fmt in [STAMP_FORMAT, AT_FORMAT] {
                assert_eq!(parse_stamp(s, fmt), NaiveDateTime::parse_from_str(s, fmt).ok(), "{s:?} as {fmt}");
            }
        }
        assert!(written_form("2026-04-09 14:32:05Z", AT_FORMAT).is_some());
        assert!(written_form("2026-04-09_14-32", STAMP_FORMAT).is_some());
    }

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn names_round_trip() {
        let at = t("2026-04-09T14:32:59Z");
        let n = file_stem(at, "373D1618-aaaa-bbbb", "drift-validator", false);
        assert_eq!(n, "2026-04-09_14-32_373d1618_drift-validator");
        let p = parse_stem(&format!("{n}.md")).unwrap();
        assert_eq!(
            p,
            ParsedName {
                at: t("2026-04-09T14:32:00Z"),
                session8: "373d1618".into(),
                slug: "drift-validator".into(),
                rollup: false
            }
        );
        let r = file_stem(at, "ani", "march", true);
        assert_eq!(r, "2026-04-09_14-32_ani_rollup_march");
        assert!(parse_stem(&r).unwrap().rollup);
        for bad in ["INDEX.md", "2026-04-09_14-32_abc", "2026-04-09_14-32__x", "notes.md", "2026-13-09_14-32_a_b"] {
            assert_eq!(parse_stem(bad), None, "{bad}");
        }
        assert_eq!(session8("\n\u{202e}"), "session");
        assert_eq!(session8("A_b.c-DEFGHIJ"), "abc-defg");
    }

    #[test]
    fn slugs_and_dates() {
        assert!(check_slug("auth-fix").is_ok());
        for bad in ["", "-x", "Auth", "a_b", "a b", "a/b", &"x".repeat(61), "認証"] {
            assert!(check_slug(bad).is_err(), "{bad}");
        }
        let now = t("2026-05-01T10:00:00Z");
        assert_eq!(parse_date("now", now).unwrap(), now);
        assert_eq!(parse_date("2026-03-15", now).unwrap(), t("2026-03-15T23:59:59Z"));
        assert_eq!(parse_date("2026-03-15 18:00", now).unwrap(), t("2026-03-15T18:00:00Z"));
        assert_eq!(parse_date("2026-03-15T18:00:00+02:00", now).unwrap(), t("2026-03-15T16:00:00Z"));
        assert!(parse_date("yesterday", now).is_err());
        assert_eq!(parse_through(&format_through(t("2026-03-15T18:00:00Z"))), Some(t("2026-03-15T18:00:00Z")));
    }
}
