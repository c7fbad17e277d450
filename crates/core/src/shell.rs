//! Quoting for a POSIX shell, written once: the hooks pcmail registers in an
//! agent's settings (`pcmail-claude-hooks`), the `claude mcp add` line it
//! shows or runs (`pcmail-mcp`) and the git pre-commit hook it writes
//! (`pcmail-local`) all put a path into a command a shell reads.

/// Characters no POSIX shell treats specially, so a word made only of them
/// needs no quotes.
const PLAIN: &str = "/._-+,:@";

/// `s` as one POSIX shell word: unchanged when it is only characters no shell
/// treats specially (ASCII letters and digits, `/ . _ - + , : @`), else in
/// single quotes (see [`single_quote`]). The empty string is `''`.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || PLAIN.contains(c));
    if plain {
        s.to_owned()
    } else {
        single_quote(s)
    }
}

/// `s` in single quotes whatever it holds: inside them a shell expands
/// nothing, and an embedded `'` is written `'\''` (close, an escaped quote,
/// open again).
pub fn single_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quote_quotes_only_what_needs_it() {
        for (raw, quoted) in [
            ("/usr/local/bin/pcmail", "/usr/local/bin/pcmail"),
            ("/home/u/.cargo/bin/pcmail-hook", "/home/u/.cargo/bin/pcmail-hook"),
            ("mail,leases", "mail,leases"),
            ("/a b/pcmail", "'/a b/pcmail'"),
            ("/it's/pcmail", "'/it'\\''s/pcmail'"),
            ("/$x/`y`/\"q\"/pcmail", "'/$x/`y`/\"q\"/pcmail'"),
            ("/home/山田/pcmail", "'/home/山田/pcmail'"),
            ("C:\\Users\\山田 太郎\\pcmail-hook.exe", "'C:\\Users\\山田 太郎\\pcmail-hook.exe'"),
            ("/x=y/pcmail", "'/x=y/pcmail'"),
            ("/~u/pcmail", "'/~u/pcmail'"),
            ("", "''"),
        ] {
            assert_eq!(shell_quote(raw), quoted, "{raw}");
        }
    }

    #[test]
    fn single_quote_always_quotes() {
        assert_eq!(single_quote("/usr/bin/pcmail-hook"), "'/usr/bin/pcmail-hook'");
        assert_eq!(single_quote("/it's/x"), "'/it'\\''s/x'");
        assert_eq!(single_quote(""), "''");
    }
}
