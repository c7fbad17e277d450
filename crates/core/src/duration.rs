//! The one way pcmail reads a duration, for every flag and tool argument that
//! takes one (`--timeout`, `--expires`, `--ttl`, `serve`'s limits): a whole
//! number with a unit, `500ms`, `90s`, `10m`, `2h` or `3d`, or a plain number
//! of seconds. Zero and negative spans are refused with the same words.

use crate::Millis;

/// What a bad duration is told (the caller puts the flag's name before it).
pub const HINT: &str = "use a duration like 90s, 10m, 2h or 3d (a plain number is seconds)";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationError {
    /// Not a duration at all.
    NotADuration,
    /// Zero (or a negative number): a span must be more than zero.
    NotPositive,
    /// More milliseconds than fit.
    TooLong,
}

impl std::fmt::Display for DurationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DurationError::NotADuration => f.write_str(HINT),
            DurationError::NotPositive => f.write_str("a duration must be more than zero (90s, 10m, 2h, 3d)"),
            DurationError::TooLong => write!(f, "too long a duration ({HINT})"),
        }
    }
}

/// `s` in milliseconds.
pub fn parse_ms(s: &str) -> Result<Millis, DurationError> {
    let s = s.trim();
    let (neg, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    if num.is_empty() {
        return Err(DurationError::NotADuration);
    }
    let mult: Millis = match unit.trim() {
        "ms" => 1,
        "" | "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(DurationError::NotADuration),
    };
    let n: Millis = num.parse().map_err(|_| DurationError::TooLong)?;
    if neg || n == 0 {
        return Err(DurationError::NotPositive);
    }
    n.checked_mul(mult).ok_or(DurationError::TooLong)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_and_plain_seconds() {
        assert_eq!(parse_ms("500ms"), Ok(500));
        assert_eq!(parse_ms("90s"), Ok(90_000));
        assert_eq!(parse_ms("20"), Ok(20_000));
        assert_eq!(parse_ms("5m"), Ok(300_000));
        assert_eq!(parse_ms(" 2h "), Ok(7_200_000));
        assert_eq!(parse_ms("3d"), Ok(3 * 86_400_000));
    }

    #[test]
    fn zero_negative_and_nonsense_are_refused_in_words() {
        for z in ["0", "0s", "0m", "-3h"] {
            assert_eq!(parse_ms(z), Err(DurationError::NotPositive), "{z}");
            assert!(parse_ms(z).unwrap_err().to_string().contains("more than zero"));
        }
        for bad in ["", "soon", "3ü", "m", "1.5h", "2w", "99999999999999999999s"] {
            assert!(parse_ms(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_ms("9223372036854775807d"), Err(DurationError::TooLong));
    }
}
