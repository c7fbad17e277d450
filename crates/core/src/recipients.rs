//! Mail to several addresses (feature `multi-recipient`): the rule a list of
//! addresses follows, checked by the PC before it queues a mail and by both
//! servers when they parse one (gas/Validate.js `checkRecipients_` follows
//! it), the error that names every address that did not resolve, and whom a
//! reply to everyone goes to.

use crate::error::{ErrorCode, ProtoError, Unresolved};
use crate::model::limits::RECIPIENTS_MAX;
use crate::roster::is_valid_label;

/// The field a bad list is reported under.
pub const FIELD: &str = "mail.to";

/// A list of addresses as a server accepts it: 2 to [`RECIPIENTS_MAX`]
/// addresses, none of them `*`, none twice, each spelled as a label (a roster
/// label or a session's name; whether it exists is the server's roster's
/// business). The shape is checked before the spelling, so one answer never
/// depends on which check ran first.
pub fn check_list(list: &[String]) -> Result<(), ProtoError> {
    if list.len() < 2 {
        return Err(ProtoError::field(FIELD, "a list of addresses needs at least 2 (send one address as a string)"));
    }
    if list.len() > RECIPIENTS_MAX {
        return Err(ProtoError::field(FIELD, format!("at most {RECIPIENTS_MAX} addresses per mail")));
    }
    if list.iter().any(|a| a == "*") {
        return Err(ProtoError::field(FIELD, BROADCAST_IN_LIST));
    }
    for (i, a) in list.iter().enumerate() {
        if list[..i].contains(a) {
            return Err(ProtoError::field(FIELD, format!("{a:?} is listed twice")));
        }
    }
    let misspelt: Vec<Unresolved> =
        list.iter().filter(|a| !is_valid_label(a)).map(|a| Unresolved { to: a.clone(), candidates: vec![] }).collect();
    if misspelt.is_empty() {
        Ok(())
    } else {
        Err(unknown_recipients(misspelt))
    }
}

/// Why `*` is refused in a list: it already means every other PC, so the
/// list would add nothing but a second copy for each PC named in it, and
/// which of the two copies a reply finishes would be a guess.
pub const BROADCAST_IN_LIST: &str =
    "\"*\" (every other PC) cannot be combined with other addresses: it already reaches every PC, and a PC listed beside it would get two copies; send the broadcast on its own";

/// `unknown_recipient` for a list: every address that did not resolve, each
/// with its own candidates (`unresolved`), and `candidates` those of the
/// first one, as an answer about one address has them. Nothing was sent.
pub fn unknown_recipients(misses: Vec<Unresolved>) -> ProtoError {
    let names: Vec<String> = misses.iter().map(|m| format!("{:?}", m.to)).collect();
    let verb =
        if misses.len() == 1 { "is not an exact roster label or name" } else { "are not exact roster labels or names" };
    let first = misses.first().map(|m| m.candidates.clone()).unwrap_or_default();
    ProtoError::new(ErrorCode::UnknownRecipient, format!("{} {verb}; nothing was sent to anyone", names.join(", ")))
        .with_candidates(first)
        .with_unresolved(misses)
}

/// Whom `reply --all` answers: the original's sender first, then every other
/// address the original listed, in its order, leaving out the replier's own
/// addresses (its label, and the name its copy came to) and any repeat.
pub fn reply_all(sender: &str, recipients: &[String], mine: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = vec![sender.to_string()];
    for a in recipients {
        if !mine.contains(&a.as_str()) && !out.contains(a) {
            out.push(a.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_list_is_two_to_twenty_distinct_labels_without_the_broadcast() {
        assert!(check_list(&l(&["pc-b", "pc-c"])).is_ok());
        assert_eq!(check_list(&l(&["pc-b"])).unwrap_err().field.as_deref(), Some(FIELD));
        assert_eq!(check_list(&l(&["pc-b", "*"])).unwrap_err().message, BROADCAST_IN_LIST);
        assert!(check_list(&l(&["pc-b", "pc-b"])).unwrap_err().message.contains("twice"));
        let many: Vec<String> = (0..=RECIPIENTS_MAX).map(|i| format!("pc-{i}")).collect();
        assert!(check_list(&many).unwrap_err().message.contains("at most"));
        let e = check_list(&l(&["pc-b", "Bad Name", "x y"])).unwrap_err();
        assert_eq!(e.code, ErrorCode::UnknownRecipient);
        let missed: Vec<&str> = e.unresolved.as_ref().unwrap().iter().map(|u| u.to.as_str()).collect();
        assert_eq!(missed, ["Bad Name", "x y"]);
    }

    #[test]
    fn reply_all_is_the_sender_then_the_others_without_me() {
        assert_eq!(reply_all("pc-a", &l(&["pc-b", "pc-c", "ani"]), &["pc-b"]), ["pc-a", "pc-c", "ani"]);
        assert_eq!(reply_all("pc-a", &l(&["pc-a", "pc-b", "ani"]), &["pc-b", "ani"]), ["pc-a"]);
    }
}
