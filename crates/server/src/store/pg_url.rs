//! `--db postgres://USER@HOST[:PORT]/DB[?…]`: what pcmail accepts, how the
//! password is found (never from the URL), TLS with rustls, and the form
//! shown in logs and `doctor` (no secret in it).
//!
//! - A password in the URL is refused: a URL sits in shell history, in
//!   `/proc/PID/cmdline` and in unit files. The password comes from the OS
//!   keyring (`pcmail token set --db`, handed in by the CLI), else from a
//!   libpq passfile (`PGPASSFILE`, else `~/.pgpass`, ignored unless 0600 as
//!   libpq does), else there is none: peer authentication over a Unix
//!   socket (`?host=/run/postgresql`) needs none.
//! - TLS: `sslmode=disable` or `require` (`verify-full` is a synonym).
//!   `require` verifies the server's certificate and host name against
//!   `sslrootcert=PATH` (default `~/.postgresql/root.crt`, as libpq), never
//!   "encrypted but unverified". With no `sslmode`, a Unix socket or a
//!   loopback host is `disable` and any other host is `require`, so a
//!   database across a network is never reached in clear by accident.
//! - `pool_size=N` (pcmail's own): connections this instance keeps (16).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::config::{Host, SslMode};

#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    #[error("not a PostgreSQL URL (postgres://USER@HOST/DB): {0}")]
    Syntax(String),
    #[error(
        "the database password must not be in the URL (it would sit in shell history, /proc and unit files): \
         store it with `pcmail token set --db` (OS keyring), in a libpq passfile (~/.pgpass, 0600), or use peer \
         authentication over a Unix socket (postgres://USER@/DB?host=/run/postgresql)"
    )]
    PasswordInUrl,
    #[error("sslmode={0} is not supported: use sslmode=require (TLS, certificate verified) or sslmode=disable")]
    SslMode(String),
    #[error("TLS to PostgreSQL: {0}")]
    Tls(String),
}

/// Where TLS is concerned, all that matters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PgTls {
    Disable,
    /// Verify the server against these roots (PEM file) and its host name.
    Verify {
        roots: PathBuf,
    },
}

/// A parsed `--db` URL, without its secret.
#[derive(Clone)]
pub struct PgTarget {
    config: tokio_postgres::Config,
    pub tls: PgTls,
    pub pool_size: u32,
    redacted: String,
    /// Where the password came from (for `doctor`): none, keyring, passfile.
    pub password_source: &'static str,
}

impl std::fmt::Debug for PgTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgTarget").field("url", &self.redacted).field("tls", &self.tls).finish()
    }
}

/// True for `postgres://` and `postgresql://` (anything else is a SQLite path).
pub fn is_postgres_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

impl PgTarget {
    /// Parses the URL; `home` is where `~/.pgpass` and `~/.postgresql/root.crt` are looked for.
    pub fn parse(url: &str, home: Option<&Path>) -> Result<PgTarget, UrlError> {
        if !is_postgres_url(url) {
            return Err(UrlError::Syntax("it must start with postgres:// or postgresql://".into()));
        }
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut kept = Vec::new();
        let mut sslmode: Option<String> = None;
        let mut rootcert: Option<PathBuf> = None;
        let mut pool_size = 16u32;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_decode(v).map_err(UrlError::Syntax)?;
            match k {
                "sslmode" => sslmode = Some(value),
                "sslrootcert" => rootcert = Some(PathBuf::from(value)),
                "pool_size" => {
                    pool_size = value
                        .parse()
                        .ok()
                        .filter(|n| (1..=500).contains(n))
                        .ok_or_else(|| UrlError::Syntax(format!("pool_size={value}: a number from 1 to 500")))?
                }
                "password" => return Err(UrlError::PasswordInUrl),
                _ => kept.push(pair),
            }
        }
        let rebuilt = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
        let mut config: tokio_postgres::Config =
            rebuilt.parse().map_err(|e: tokio_postgres::Error| UrlError::Syntax(e.to_string()))?;
        if config.get_password().is_some() {
            return Err(UrlError::PasswordInUrl);
        }
        if config.get_hosts().is_empty() {
            return Err(UrlError::Syntax("no host (a name, an address, or ?host=/path/of/socket/folder)".into()));
        }
        let local = config.get_hosts().iter().all(|h| match h {
            // Unix sockets exist only on Unix (tokio-postgres has no such host elsewhere).
            #[cfg(unix)]
            Host::Unix(_) => true,
            Host::Tcp(name) => matches!(name.as_str(), "localhost" | "127.0.0.1" | "::1" | "[::1]"),
        });
        let mode = match sslmode.as_deref() {
            None if local => "disable",
            None => "require",
            Some(m) => m,
        };
        let tls = match mode {
            "disable" => PgTls::Disable,
            "require" | "verify-full" => {
                let roots = rootcert
                    .or_else(|| home.map(|h| h.join(".postgresql/root.crt")))
                    .ok_or_else(|| UrlError::Tls("sslrootcert=PATH names the CA certificate to verify with".into()))?;
                PgTls::Verify { roots }
            }
            other => return Err(UrlError::SslMode(other.to_string())),
        };
        config.ssl_mode(if tls == PgTls::Disable { SslMode::Disable } else { SslMode::Require });
        if config.get_application_name().is_none() {
            config.application_name("pcmail");
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(5));
        }
        // A database that vanished without closing the connection (a host
        // gone, a cable pulled) is noticed in seconds, not hours.
        config.keepalives_idle(Duration::from_secs(10));
        #[cfg(target_os = "linux")]
        config.tcp_user_timeout(Duration::from_secs(15));
        let redacted = redact(&config, mode);
        Ok(PgTarget { config, tls, pool_size, redacted, password_source: "none" })
    }

    /// The URL as logs and `doctor` show it: user, hosts, database, sslmode; never a secret.
    pub fn redacted(&self) -> &str {
        &self.redacted
    }

    /// A password from the OS keyring (the CLI reads it).
    pub fn set_password(&mut self, password: &str) {
        self.config.password(password);
        self.password_source = "keyring";
    }

    /// Looks the password up in a libpq passfile when none was given.
    pub fn password_from_passfile(&mut self, home: Option<&Path>) {
        if self.config.get_password().is_some() {
            return;
        }
        let file = std::env::var_os("PGPASSFILE").map(PathBuf::from).or_else(|| home.map(|h| h.join(".pgpass")));
        let Some(file) = file else { return };
        if let Some(pw) = passfile_lookup(&file, &self.config) {
            self.config.password(pw);
            self.password_source = "passfile";
        }
    }

    #[cfg(test)]
    pub(crate) fn set_application_name_for_tests(&mut self, name: &str) {
        self.config.application_name(name);
    }

    /// The database name (for messages).
    pub fn dbname(&self) -> &str {
        self.config.get_dbname().or(self.config.get_user()).unwrap_or("postgres")
    }

    pub(crate) fn config(&self) -> &tokio_postgres::Config {
        &self.config
    }

    /// The rustls connector, when TLS is on.
    pub(crate) fn rustls(&self) -> Result<Option<tokio_postgres_rustls::MakeRustlsConnect>, UrlError> {
        let PgTls::Verify { roots } = &self.tls else { return Ok(None) };
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::CertificateDer;
        let mut store = rustls::RootCertStore::empty();
        let certs = CertificateDer::pem_file_iter(roots)
            .map_err(|e| UrlError::Tls(format!("reading {}: {e}", roots.display())))?;
        for c in certs {
            let c = c.map_err(|e| UrlError::Tls(format!("{}: {e}", roots.display())))?;
            store.add(c).map_err(|e| UrlError::Tls(format!("{}: {e}", roots.display())))?;
        }
        if store.is_empty() {
            return Err(UrlError::Tls(format!("{} holds no certificate", roots.display())));
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| UrlError::Tls(e.to_string()))?
            .with_root_certificates(store)
            .with_no_client_auth();
        Ok(Some(tokio_postgres_rustls::MakeRustlsConnect::new(config)))
    }
}

fn redact(config: &tokio_postgres::Config, sslmode: &str) -> String {
    let user = config.get_user().unwrap_or("");
    let ports = config.get_ports();
    let mut tcp = Vec::new();
    #[cfg_attr(not(unix), allow(unused_mut))]
    let mut socket: Option<String> = None;
    for (i, h) in config.get_hosts().iter().enumerate() {
        let port = ports.get(i).or(ports.first());
        match h {
            Host::Tcp(name) => tcp.push(match port {
                Some(p) => format!("{name}:{p}"),
                None => name.clone(),
            }),
            #[cfg(unix)]
            Host::Unix(path) => socket = Some(path.display().to_string()),
        }
    }
    let mut s = format!("postgres://{user}@{}/{}", tcp.join(","), config.get_dbname().unwrap_or(""));
    let mut q = vec![format!("sslmode={sslmode}")];
    if let Some(path) = socket {
        q.push(format!("host={path}"));
        if let Some(p) = ports.first() {
            q.push(format!("port={p}"));
        }
    }
    s.push('?');
    s.push_str(&q.join("&"));
    s
}

fn percent_decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3).ok_or_else(|| format!("bad escape in {s:?}"))?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| format!("bad escape in {s:?}"))?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("not UTF-8: {s:?}"))
}

/// libpq's passfile: `host:port:db:user:password` lines, `*` matches
/// anything, `\` escapes `:` and `\`. Ignored unless only its owner can
/// read it (libpq does the same), so a leaked-permission file is not used.
fn passfile_lookup(path: &Path, config: &tokio_postgres::Config) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).ok()?.permissions().mode();
        if mode & 0o077 != 0 {
            tracing::warn!(file = %path.display(), "the passfile is readable by others: ignored (chmod 600 it)");
            return None;
        }
    }
    let text = std::fs::read_to_string(path).ok()?;
    let host = match config.get_hosts().first()? {
        Host::Tcp(h) => h.clone(),
        // libpq matches a socket connection as "localhost".
        #[cfg(unix)]
        Host::Unix(_) => "localhost".to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432).to_string();
    let user = config.get_user().unwrap_or("");
    let db = config.get_dbname().unwrap_or(user);
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let fields = split_passfile_line(line);
        if fields.len() != 5 {
            continue;
        }
        let matches = |pat: &str, v: &str| pat == "*" || pat == v;
        if matches(&fields[0], &host)
            && matches(&fields[1], &port)
            && matches(&fields[2], db)
            && matches(&fields[3], user)
        {
            return Some(fields[4].clone());
        }
    }
    None
}

fn split_passfile_line(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    out.last_mut().expect("one field").push(n);
                }
            }
            ':' if out.len() < 5 => out.push(String::new()),
            c => out.last_mut().expect("one field").push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_in_the_url_is_refused() {
        for url in ["postgres://u:pw@db.example/x", "postgres://u@db.example/x?password=pw"] {
            assert!(matches!(PgTarget::parse(url, None), Err(UrlError::PasswordInUrl)), "{url}");
        }
    }

    #[test]
    fn remote_hosts_default_to_verified_tls_and_local_ones_to_none() {
        let home = Path::new("/home/u");
        let t = PgTarget::parse("postgres://u@db.example:6432/team", Some(home)).unwrap();
        assert_eq!(t.tls, PgTls::Verify { roots: home.join(".postgresql/root.crt") });
        assert_eq!(t.redacted(), "postgres://u@db.example:6432/team?sslmode=require");
        let t = PgTarget::parse("postgres://u@127.0.0.1/team", Some(home)).unwrap();
        assert_eq!(t.tls, PgTls::Disable);
        let t = PgTarget::parse("postgres://u@/team?host=/run/postgresql&port=5433", None).unwrap();
        assert_eq!(t.tls, PgTls::Disable);
        assert_eq!(t.redacted(), "postgres://u@/team?sslmode=disable&host=/run/postgresql&port=5433");
        let t =
            PgTarget::parse("postgres://u@db.example/team?sslmode=require&sslrootcert=/etc/ca.pem&pool_size=4", None)
                .unwrap();
        assert_eq!(t.tls, PgTls::Verify { roots: PathBuf::from("/etc/ca.pem") });
        assert_eq!(t.pool_size, 4);
        assert!(matches!(PgTarget::parse("postgres://u@db.example/t?sslmode=prefer", None), Err(UrlError::SslMode(_))));
        assert!(PgTarget::parse("/var/lib/serve.db", None).is_err());
    }

    #[test]
    fn the_passfile_is_read_like_libpq_and_only_when_private() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("pgpass");
        std::fs::write(&f, "# comment\nother:*:*:*:nope\ndb.example:6432:team:u:pa\\:ss\n*:*:*:u:fallback\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        let t = PgTarget::parse("postgres://u@db.example:6432/team?sslmode=disable", None).unwrap();
        assert_eq!(passfile_lookup(&f, t.config()), None, "a passfile others can read is ignored");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(passfile_lookup(&f, t.config()).as_deref(), Some("pa:ss"));
        let t = PgTarget::parse("postgres://u@elsewhere/x?sslmode=disable", None).unwrap();
        assert_eq!(passfile_lookup(&f, t.config()).as_deref(), Some("fallback"));
        let t = PgTarget::parse("postgres://v@elsewhere/x?sslmode=disable", None).unwrap();
        assert_eq!(passfile_lookup(&f, t.config()), None);
    }
}
