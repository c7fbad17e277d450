//! Lower-case hex, as pcmail spells every hash and secret it writes.

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// `bytes` as lower-case hex, two characters a byte. (Formatting each byte
/// with `format!` made and dropped a string per byte; a credential's hash
/// is spelled so on every request.)
pub fn lower(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_byte_is_its_two_lower_case_digits() {
        let all: Vec<u8> = (0..=255).collect();
        let want: String = all.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(super::lower(&all), want);
        assert_eq!(super::lower(&[]), "");
    }
}
