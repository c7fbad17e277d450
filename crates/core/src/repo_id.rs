//! A repo's identity from its origin URL: one rule for
//! leases, sessions, handoffs and memory, so every part of a PC (and every
//! PC) names a repo the same way. Pure text functions; reading `.git` is the
//! caller's.

/// The URL that names the repo, from a git config file: `[remote "origin"]`'s
/// `url`, else the only remote's, else that of the remote whose name sorts
/// first (byte order), so a clone whose remote is called `upstream` or
/// `github` names the same repo on every PC. Section names with any
/// spacing, the key in any case; remotes without a URL are skipped.
pub fn remote_url(config: &str) -> Option<String> {
    let mut remotes: Vec<(String, String)> = vec![];
    let mut current: Option<String> = None;
    for line in config.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            current = remote_section(l);
            continue;
        }
        let Some(name) = &current else { continue };
        if let Some((k, v)) = l.split_once('=') {
            let v = v.trim().trim_matches('"');
            if k.trim().eq_ignore_ascii_case("url") && !v.is_empty() && !remotes.iter().any(|(n, _)| n == name) {
                remotes.push((name.clone(), v.to_string()));
            }
        }
    }
    if let Some((_, u)) = remotes.iter().find(|(n, _)| n == "origin") {
        return Some(u.clone());
    }
    remotes.sort();
    remotes.into_iter().next().map(|(_, u)| u)
}

/// The remote's name of a `[remote "NAME"]` section header.
fn remote_section(header: &str) -> Option<String> {
    let inner = header.strip_prefix('[')?.split(']').next()?.trim();
    let rest = inner.strip_prefix("remote")?.trim_start();
    let name = rest.strip_prefix('"')?.strip_suffix('"')?;
    (!name.is_empty()).then(|| name.to_string())
}

/// The hosts whose repo paths ignore case (`github.com/O/R` is
/// `github.com/o/r`): their paths are lower-cased. Elsewhere only the host
/// is, since a self-hosted server may tell `A/b` from `a/b`.
pub const CASE_INSENSITIVE_HOSTS: &[&str] = &["github.com", "gitlab.com", "bitbucket.org"];

/// One spelling per repo: `https://GitHub.com/O/R.git`, `git@github.com:O/R`
/// and `ssh://git@github.com:22/o/r/` all give `github.com/o/r` (host
/// lower-case, the path too on [`CASE_INSENSITIVE_HOSTS`]; no user, port,
/// scheme or `.git`). A local origin keeps its
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
    } else if CASE_INSENSITIVE_HOSTS.contains(&host.as_str()) {
        format!("{host}/{}", path.to_lowercase())
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
            assert_eq!(normalise_origin(u), "github.com/owner/repo", "{u}");
        }
        // The host always ignores case; the path only on the hosts known to.
        assert_eq!(normalise_origin("https://GitHub.com/O/R"), normalise_origin("https://github.com/o/r"));
        assert_eq!(normalise_origin("git@GitLab.com:Grp/Sub/P.git"), "gitlab.com/grp/sub/p");
        assert_eq!(normalise_origin("https://Bitbucket.org/T/R"), "bitbucket.org/t/r");
        assert_eq!(normalise_origin("https://Git.Example.org/A/B"), "git.example.org/A/B");
        assert_eq!(normalise_origin("/srv/git/proj.git"), "/srv/git/proj");
        assert_eq!(normalise_origin("file:///srv/git/proj.git"), "/srv/git/proj");
        assert_eq!(normalise_origin(r"C:\repos\proj.git"), r"C:\repos\proj");
    }

    #[test]
    fn origin_is_read_from_the_config() {
        let c = "[core]\n\tbare = false\n[remote \"upstream\"]\n\turl = https://x/y\n[remote \"origin\"]\n\tURL = git@h.com:a/b.git\n";
        assert_eq!(remote_url(c).as_deref(), Some("git@h.com:a/b.git"));
        assert_eq!(remote_url("[core]\n"), None);
        assert_eq!(remote_url("[remote \"origin\"]\n\turl =\n\turl = x:y/z\n").as_deref(), Some("x:y/z"));
    }

    #[test]
    fn without_origin_the_only_remote_else_the_first_by_name() {
        let only = "[remote \"upstream\"]\n\turl = git@github.com:O/R.git\n";
        assert_eq!(remote_url(only).as_deref(), Some("git@github.com:O/R.git"));
        let two =
            "[remote \"zeta\"]\n\turl = https://z/z\n[remote \"github\"]\n\turl = https://g/g\n[remote \"empty\"]\n";
        assert_eq!(remote_url(two).as_deref(), Some("https://g/g"));
        let spaced = "[ remote  \"origin\" ]\n\turl = a:b/c\n[remote \"a\"]\n\turl = x:y/z\n";
        assert_eq!(remote_url(spaced).as_deref(), Some("a:b/c"));
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
