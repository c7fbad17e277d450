//! A repo's identity from its origin URL (DESIGN.md "Repos"): one rule for
//! leases, sessions, handoffs and memory, so every part of a PC (and every
//! PC) names a repo the same way. Pure text functions; reading `.git` is the
//! caller's.

/// The `url` of `[remote "origin"]` in a git config file (section names with
/// any spacing, the key in any case, empty values skipped).
pub fn origin_url(config: &str) -> Option<String> {
    let mut in_origin = false;
    for line in config.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            let compact: String = l.chars().filter(|c| !c.is_whitespace()).collect();
            in_origin = compact == "[remote\"origin\"]";
            continue;
        }
        if in_origin {
            if let Some((k, v)) = l.split_once('=') {
                let v = v.trim().trim_matches('"');
                if k.trim().eq_ignore_ascii_case("url") && !v.is_empty() {
                    return Some(v.to_string());
                }
            }
        }
    }
    None
}

/// One spelling per repo: `https://github.com/O/R.git`, `git@github.com:O/R`
/// and `ssh://git@github.com:22/O/R/` all give `github.com/O/R` (host
/// lower-case; no user, port, scheme or `.git`). A local origin keeps its
/// path (`/srv/git/proj.git` and `file:///srv/git/proj` give `/srv/git/proj`).
pub fn normalise_origin(url: &str) -> String {
    let u = url.trim();
    let (host, path) = if let Some((_, rest)) = u.split_once("://") {
        if u.starts_with("file://") {
            return strip_git(rest.trim_end_matches('/')).to_string();
        }
        let (hostpart, path) = rest.split_once('/').unwrap_or((rest, ""));
        (hostpart.to_string(), path.to_string())
    } else if let Some((hostpart, path)) = u.split_once(':').filter(|(h, _)| !h.contains('/') && h.len() > 1) {
        // scp-like `user@host:path` (a one-letter "host" is a Windows drive).
        (hostpart.to_string(), path.to_string())
    } else {
        return strip_git(u.trim_end_matches(['/', '\\'])).to_string();
    };
    let host = host.rsplit('@').next().unwrap_or(&host);
    let host = host.split(':').next().unwrap_or(host).to_ascii_lowercase();
    let path = strip_git(path.trim_matches('/'));
    if path.is_empty() {
        host
    } else {
        format!("{host}/{path}")
    }
}

fn strip_git(s: &str) -> &str {
    s.strip_suffix(".git").unwrap_or(s).trim_end_matches('/')
}

/// The root commit, when the first line of HEAD's reflog records the
/// repo's first commit (`commit (initial)`); a clone's first line records
/// the clone, whose commit is not the root, so it gives None.
pub fn root_commit_from_reflog(first_line: &str) -> Option<String> {
    let (entry, message) = first_line.split_once('\t')?;
    if !message.starts_with("commit (initial)") {
        return None;
    }
    let mut it = entry.split(' ');
    let (old, new) = (it.next()?, it.next()?);
    let hex = |s: &str| (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit());
    (hex(old) && hex(new) && old.bytes().all(|b| b == b'0')).then(|| new.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_spellings_normalise_to_one() {
        for u in [
            "https://github.com/Owner/Repo.git",
            "git@github.com:Owner/Repo.git",
            "ssh://git@GitHub.com:22/Owner/Repo/",
            "https://user:pw@github.com/Owner/Repo",
            "https://user:tok@GitHub.com/Owner/Repo.git/",
        ] {
            assert_eq!(normalise_origin(u), "github.com/Owner/Repo", "{u}");
        }
        assert_eq!(normalise_origin("/srv/git/proj.git"), "/srv/git/proj");
        assert_eq!(normalise_origin("file:///srv/git/proj.git"), "/srv/git/proj");
        assert_eq!(normalise_origin(r"C:\repos\proj.git"), r"C:\repos\proj");
    }

    #[test]
    fn origin_is_read_from_the_config() {
        let c = "[core]\n\tbare = false\n[remote \"upstream\"]\n\turl = https://x/y\n[remote \"origin\"]\n\tURL = git@h.com:a/b.git\n";
        assert_eq!(origin_url(c).as_deref(), Some("git@h.com:a/b.git"));
        assert_eq!(origin_url("[core]\n"), None);
        assert_eq!(origin_url("[remote \"origin\"]\n\turl =\n\turl = x:y/z\n").as_deref(), Some("x:y/z"));
    }

    #[test]
    fn only_an_initial_commit_names_the_root() {
        let root = "a".repeat(40);
        let zero = "0".repeat(40);
        assert_eq!(
            root_commit_from_reflog(&format!("{zero} {root} Me <m@x> 1 +0000\tcommit (initial): x")),
            Some(root.clone())
        );
        assert_eq!(root_commit_from_reflog(&format!("{zero} {root} Me <m@x> 1 +0000\tclone: from https://h/x")), None);
        assert_eq!(root_commit_from_reflog("garbage"), None);
    }
}
