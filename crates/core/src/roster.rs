//! The roster (working number ⇔ label ⇔ hostname) and exact-only address
//! resolution. No substring or prefix match ever decides a recipient; near
//! misses only become suggestions.

use crate::Pc;

pub fn is_valid_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 40
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'_' | b'-'))
}

pub fn is_valid_hostname(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

/// Turns a hostname into a label candidate (`KIM-LT.local` → `kim-lt.local`).
pub fn label_from_hostname(host: &str) -> String {
    let mut s: String = host
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'))
        .take(40)
        .collect();
    while s.starts_with(['.', '_', '-']) {
        s.remove(0);
    }
    if s.is_empty() {
        "pc".to_string()
    } else {
        s
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// Exactly one PC: its canonical label.
    Exact(String),
    /// Broadcast to every PC.
    Broadcast,
    /// Not resolvable; the suggestions, closest first (never used to deliver).
    Unknown { candidates: Vec<String> },
}

/// Resolves what a user typed to a canonical label: an exact label, an exact
/// working number (`3` or `#3`), an exact hostname (case-insensitive), or `*`.
pub fn resolve(pcs: &[Pc], query: &str) -> Resolution {
    let q = query.trim();
    if q == "*" {
        return Resolution::Broadcast;
    }
    if let Some(pc) = pcs.iter().find(|p| p.label == q) {
        return Resolution::Exact(pc.label.clone());
    }
    let num = q.strip_prefix('#').unwrap_or(q);
    if !num.is_empty() && num.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(n) = num.parse::<i64>() {
            if let Some(pc) = pcs.iter().find(|p| p.number == n) {
                return Resolution::Exact(pc.label.clone());
            }
        }
    }
    let by_host: Vec<&Pc> = pcs.iter().filter(|p| p.hostname.eq_ignore_ascii_case(q)).collect();
    if by_host.len() == 1 {
        return Resolution::Exact(by_host[0].label.clone());
    }
    Resolution::Unknown { candidates: candidates(pcs, q) }
}

/// Up to 5 labels that look like `query`, closest first.
pub fn candidates(pcs: &[Pc], query: &str) -> Vec<String> {
    let q = query.to_lowercase();
    let mut scored: Vec<(usize, &str)> = pcs
        .iter()
        .filter_map(|p| {
            let host = p.hostname.to_lowercase();
            let d = edit_distance(&q, &p.label).min(edit_distance(&q, &host));
            let contains = !q.is_empty() && (p.label.contains(&q) || host.contains(&q));
            let close = d <= (q.chars().count() / 2).max(2);
            (contains || close).then_some((if contains { d.min(1) } else { d }, p.label.as_str()))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(5).map(|(_, l)| l.to_string()).collect()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roster() -> Vec<Pc> {
        vec![
            Pc { number: 1, label: "kim-desktop".into(), hostname: "KIM-DT".into() },
            Pc { number: 2, label: "kim-laptop".into(), hostname: "KIM-LT".into() },
            Pc { number: 3, label: "lee".into(), hostname: "lee-box".into() },
        ]
    }

    #[test]
    fn exact_label_number_and_hostname() {
        let r = roster();
        assert_eq!(resolve(&r, "kim-laptop"), Resolution::Exact("kim-laptop".into()));
        assert_eq!(resolve(&r, "2"), Resolution::Exact("kim-laptop".into()));
        assert_eq!(resolve(&r, "#3"), Resolution::Exact("lee".into()));
        assert_eq!(resolve(&r, "kim-dt"), Resolution::Exact("kim-desktop".into()));
        assert_eq!(resolve(&r, "*"), Resolution::Broadcast);
    }

    #[test]
    fn partial_address_is_never_resolved() {
        // The old bug: `kim` matched several PCs by substring.
        match resolve(&roster(), "kim") {
            Resolution::Unknown { candidates } => {
                assert!(candidates.contains(&"kim-desktop".to_string()));
                assert!(candidates.contains(&"kim-laptop".to_string()));
                assert!(!candidates.contains(&"lee".to_string()));
            }
            other => panic!("kim resolved to {other:?}"),
        }
        assert!(matches!(resolve(&roster(), "9"), Resolution::Unknown { .. }));
        assert!(matches!(resolve(&roster(), "KIM-LAPTOP"), Resolution::Unknown { .. }));
    }

    #[test]
    fn labels() {
        assert!(is_valid_label("pc-a"));
        assert!(is_valid_label("0pc.b_c"));
        assert!(!is_valid_label("Pc"));
        assert!(!is_valid_label("-pc"));
        assert!(!is_valid_label(""));
        assert!(!is_valid_label("a b"));
        assert!(!is_valid_label(&"a".repeat(41)));
        assert_eq!(label_from_hostname("KIM-LT.local"), "kim-lt.local");
        assert_eq!(label_from_hostname("--"), "pc");
    }
}
