//! Mail ids: `mail-<ms>-<8 lower hex>`, made by the client so every write is
//! idempotent; broadcast copies are `<id>~<label>`.

use crate::roster::is_valid_label;
use crate::Millis;
use rand::{Rng, RngExt};
use sha2::{Digest, Sha256};

/// A fresh random id for a new mail created at `now`.
pub fn new_mail_id(now: Millis, rng: &mut impl Rng) -> String {
    format!("mail-{}-{:08x}", now.max(0), rng.random::<u32>())
}

/// The fixed id of `sender`'s reply to `original`: a retried reply is the same
/// mail. A second reply with another body collides (`duplicate_id`) and the
/// client then makes a fresh id, so a quick ack never swallows the real answer.
pub fn reply_id(original: &str, sender: &str) -> String {
    let ms = parse_base(original).map(|(ms, _)| ms).unwrap_or(0);
    let mut h = Sha256::new();
    h.update(original.as_bytes());
    h.update(b"\n");
    h.update(sender.as_bytes());
    let d = h.finalize();
    format!("mail-{}-{:02x}{:02x}{:02x}{:02x}", ms, d[0], d[1], d[2], d[3])
}

/// The id of the copy of broadcast `id` for `label`.
pub fn broadcast_copy_id(id: &str, label: &str) -> String {
    format!("{id}~{label}")
}

/// Splits `mail-<ms>-<hex>` into its parts; None if it is not that exact shape.
fn parse_base(id: &str) -> Option<(Millis, &str)> {
    let base = id.split('~').next()?;
    let rest = base.strip_prefix("mail-")?;
    let (ms, hex) = rest.split_once('-')?;
    if ms.is_empty() || ms.len() > 15 || !ms.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if hex.len() != 8 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    Some((ms.parse().ok()?, hex))
}

/// True for an id a client may create: `mail-<ms>-<8 lower hex>`.
pub fn is_valid_mail_id(id: &str) -> bool {
    !id.contains('~') && parse_base(id).is_some()
}

/// True for any id the server may hold: a mail id or a broadcast copy id.
pub fn is_valid_any_id(id: &str) -> bool {
    match id.split_once('~') {
        None => is_valid_mail_id(id),
        Some((base, label)) => is_valid_mail_id(base) && is_valid_label(label),
    }
}

/// The creation time encoded in an id.
pub fn id_millis(id: &str) -> Option<Millis> {
    parse_base(id).map(|(ms, _)| ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn new_ids_have_the_documented_shape() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let id = new_mail_id(1_767_225_600_123, &mut rng);
        assert!(id.starts_with("mail-1767225600123-"), "{id}");
        assert!(is_valid_mail_id(&id));
        assert_eq!(id_millis(&id), Some(1_767_225_600_123));
    }

    #[test]
    fn reply_id_is_fixed_per_original_and_sender() {
        let a = reply_id("mail-1-0000abcd", "pc-b");
        assert_eq!(a, reply_id("mail-1-0000abcd", "pc-b"));
        assert_ne!(a, reply_id("mail-1-0000abcd", "pc-c"));
        assert_ne!(a, reply_id("mail-2-0000abcd", "pc-b"));
        assert!(is_valid_mail_id(&a));
        assert!(a.starts_with("mail-1-"));
    }

    #[test]
    fn rejects_near_misses() {
        for bad in [
            "",
            "mail-",
            "mail-1-",
            "mail-1-0000ABCD",
            "mail-1-000abcd",
            "mail-x-0000abcd",
            "mail-1-0000abcdd",
            "Mail-1-0000abcd",
            "mail--0000abcd",
            "mail-1-0000abcd~",
            "mail-1-0000abcd~Pc",
            "mail-1-0000abcd;DROP TABLE",
        ] {
            assert!(!is_valid_any_id(bad), "{bad:?} accepted");
        }
        assert!(is_valid_any_id("mail-1-0000abcd~pc-b"));
        assert!(!is_valid_mail_id("mail-1-0000abcd~pc-b"));
    }
}
