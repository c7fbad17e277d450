//! Where pcmail keeps its files and what it talks to. One directory per PC
//! user (`PCMAIL_HOME`, else the OS data directory); the token is never here.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path} is not valid pcmail config: {detail}")]
    Invalid { path: PathBuf, detail: String },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("no home directory found; set PCMAIL_HOME")]
    NoHome,
}

/// The files of one PC user.
#[derive(Debug, Clone)]
pub struct Paths {
    pub home: PathBuf,
}

impl Paths {
    pub fn from_env() -> Result<Paths, ConfigError> {
        if let Some(h) = std::env::var_os("PCMAIL_HOME").filter(|h| !h.is_empty()) {
            return Ok(Paths { home: PathBuf::from(h) });
        }
        let dirs = directories::ProjectDirs::from("", "", "pcmail").ok_or(ConfigError::NoHome)?;
        Ok(Paths { home: dirs.data_dir().to_path_buf() })
    }
    pub fn at(home: impl Into<PathBuf>) -> Paths {
        Paths { home: home.into() }
    }
    pub fn config(&self) -> PathBuf {
        self.home.join("config.toml")
    }
    pub fn store(&self) -> PathBuf {
        self.home.join("store.db")
    }
    pub fn embedded_server_db(&self) -> PathBuf {
        self.home.join("server.db")
    }
    pub fn daemon_lock(&self) -> PathBuf {
        self.home.join("daemon.lock")
    }
    /// Where the daemon answers lease commands for the small front (`cmdsock`).
    pub fn command_socket(&self) -> PathBuf {
        self.home.join("daemon.sock")
    }
    pub fn sync_lock(&self) -> PathBuf {
        self.home.join("sync.lock")
    }
    pub fn log(&self) -> PathBuf {
        self.home.join("pcmail.log")
    }
    /// The hook's view of each repo's handoffs and memory, one file per repo
    /// (`pcmail_handoff::viewcache`).
    pub fn hook_view_cache(&self) -> PathBuf {
        self.home.join("hook-views")
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ServerConfig {
    /// The same server engine in-process on a SQLite file (no setup, no token).
    Embedded { db: Option<PathBuf> },
    /// `pcmail serve` over HTTP (long-poll).
    Http { url: String },
    /// An Apps Script web app (`…/exec`): polled every 2 minutes.
    AppsScript { url: String },
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig::Embedded { db: None }
    }
}

impl ServerConfig {
    /// An URL the user typed: Apps Script URLs are recognised by host.
    pub fn from_url(url: &str) -> ServerConfig {
        if url.contains("script.google.com") || url.contains("script.googleusercontent.com") || url.ends_with("/exec") {
            ServerConfig::AppsScript { url: url.to_string() }
        } else {
            ServerConfig::Http { url: url.to_string() }
        }
    }
    /// The URL of a server over HTTP(S); None for the embedded one.
    pub fn url(&self) -> Option<&str> {
        match self {
            ServerConfig::Http { url } | ServerConfig::AppsScript { url } => Some(url),
            ServerConfig::Embedded { .. } => None,
        }
    }
    pub fn describe(&self) -> String {
        match self {
            ServerConfig::Embedded { db } => match db {
                Some(p) => format!("embedded ({})", p.display()),
                None => "embedded (this PC only)".to_string(),
            },
            ServerConfig::Http { url } => format!("pcmail serve at {url}"),
            ServerConfig::AppsScript { url } => format!("Apps Script at {url}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    /// This PC's label on the roster; absent: the one made from the hostname,
    /// as with no config.toml at all (a file holding only `[handoffs]` works).
    #[serde(default = "default_label")]
    pub label: String,
    #[serde(default)]
    pub server: ServerConfig,
    /// More addresses of the same `pcmail serve` (instances of one cluster
    /// on one PostgreSQL), tried in order when `server.url` cannot be
    /// reached; the PC goes back to `server.url` once it answers again. They
    /// share `tls_fingerprint`: every instance serves the same certificate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failover_urls: Vec<String>,
    /// Seconds between polls when long-poll is not available; 0 (or absent) =
    /// the default for the server kind: 120 for Apps Script, 2 embedded.
    /// Left out of config.toml while it is the default.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub poll_interval_secs: u64,
    /// Discord-style webhook for decision/work/urgent notifications.
    #[serde(default)]
    pub notify_webhook: Option<String>,
    /// Native desktop notifications when a session bus is present.
    #[serde(default = "yes")]
    pub native_notifications: bool,
    /// The backlog bound: after a session has been shown this many mails that
    /// may wait (not decision requests, not urgent), it gets one count line
    /// for the rest until `pcmail inbox` is run on this PC (0 = no bound).
    #[serde(default = "default_hook_session_mail_limit")]
    pub hook_session_mail_limit: usize,
    /// This installation's id (random hex, made on first need): names its
    /// credential in the keyring, so two PCMAIL_HOMEs are two installations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installation: Option<String>,
    /// The SHA-256 fingerprint of the `pcmail serve` certificate this PC
    /// pinned at enrolment (from the join code, or `init --tls-fingerprint`):
    /// every https request checks it. Not a secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_fingerprint: Option<String>,
    /// Days this PC keeps final mail (done, failed, expired); default 30.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_days: Option<u32>,
    /// `subject_tags = "ja"`: put the Japanese tag (`[判断依頼]`,
    /// `[作業依頼]`) in front of the subject of decision and work requests
    /// this PC sends. Absent: subjects are sent as written. Received tags
    /// are recognised either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_tags: Option<SubjectTags>,
    /// `[handoffs]`: the Stop hook's handoff reminder.
    #[serde(default, skip_serializing_if = "HandoffSettings::is_default")]
    pub handoffs: HandoffSettings,
    /// `[jobs]`: the commands other sessions may run on this PC.
    #[serde(default, skip_serializing_if = "crate::jobconf::JobsConfig::is_empty")]
    pub jobs: crate::jobconf::JobsConfig,
    /// `[leases]`: checks that run before a takeover.
    #[serde(default, skip_serializing_if = "LeaseSettings::is_empty")]
    pub leases: LeaseSettings,
}

/// `[leases]` in config.toml.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseSettings {
    /// `[[leases.checks]]`: before `pcmail lease takeover` asks the server,
    /// the first check whose pattern matches the resource runs; exit 0 means
    /// the resource is still busy and the takeover is refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<LeaseCheck>,
}

impl LeaseSettings {
    fn is_empty(&self) -> bool {
        self.checks.is_empty()
    }
    /// The check for `resource`: the first whose pattern matches it.
    pub fn check_for(&self, resource: &str) -> Option<&LeaseCheck> {
        self.checks.iter().find(|c| crate::leases::resource_matches(&c.pattern, resource))
    }
}

/// One resource kind's busy check: `pattern = "gpu-*"`, `argv = ["sh", "-c",
/// "nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -q ."]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseCheck {
    /// The resource names it checks: `*` any characters (also `/` and `:`), `?` one.
    pub pattern: String,
    /// The command and its arguments (no shell unless you name one); it gets
    /// PCMAIL_LEASE_RESOURCE and PCMAIL_LEASE_HOLDER in its environment.
    pub argv: Vec<String>,
    /// Seconds it may run before the takeover is refused as unverified (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
}

/// `[handoffs]` in config.toml.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandoffSettings {
    /// Remind a session once, at Stop, to write a handoff (false: never).
    #[serde(default = "yes")]
    pub stop_reminder: bool,
    /// A session whose transcript is at least this many KiB did real work.
    #[serde(default = "default_stop_reminder_min_transcript_kb")]
    pub stop_reminder_min_transcript_kb: u64,
}

/// A two-turn `claude -p` session already writes ~140 KiB of transcript.
pub const DEFAULT_STOP_REMINDER_MIN_TRANSCRIPT_KB: u64 = 1024;

fn default_stop_reminder_min_transcript_kb() -> u64 {
    DEFAULT_STOP_REMINDER_MIN_TRANSCRIPT_KB
}

impl Default for HandoffSettings {
    fn default() -> Self {
        HandoffSettings {
            stop_reminder: true,
            stop_reminder_min_transcript_kb: DEFAULT_STOP_REMINDER_MIN_TRANSCRIPT_KB,
        }
    }
}

impl HandoffSettings {
    fn is_default(&self) -> bool {
        *self == HandoffSettings::default()
    }
}

/// The subject tags a PC adds to what it sends (`subject_tags` in config.toml).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SubjectTags {
    /// The Japanese subject tags.
    #[serde(rename = "ja")]
    Ja,
}

/// The user's language for kind badges, from `LC_ALL`, `LC_MESSAGES`, `LANG`.
pub fn user_lang() -> pcmail_core::present::Lang {
    let get = |k: &str| std::env::var(k).ok();
    pcmail_core::present::Lang::from_locale(
        get("LC_ALL").as_deref(),
        get("LC_MESSAGES").as_deref(),
        get("LANG").as_deref(),
    )
}

fn default_label() -> String {
    pcmail_core::roster::label_from_hostname(&hostname())
}

fn yes() -> bool {
    true
}

pub const DEFAULT_HOOK_SESSION_MAIL_LIMIT: usize = 12;

fn default_hook_session_mail_limit() -> usize {
    DEFAULT_HOOK_SESSION_MAIL_LIMIT
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Config {
    /// A config with every setting at the default a config.toml holding
    /// only `label` and `server` would give: tests and the demo start from
    /// it and change the one or two settings they need.
    pub fn new(label: &str, server: ServerConfig) -> Config {
        Config {
            label: label.to_string(),
            server,
            failover_urls: Vec::new(),
            poll_interval_secs: 0,
            notify_webhook: None,
            native_notifications: true,
            hook_session_mail_limit: DEFAULT_HOOK_SESSION_MAIL_LIMIT,
            installation: None,
            tls_fingerprint: None,
            retention_days: None,
            subject_tags: None,
            handoffs: HandoffSettings::default(),
            jobs: Default::default(),
            leases: LeaseSettings::default(),
        }
    }

    pub fn default_for_this_pc() -> Config {
        Config::new(&pcmail_core::roster::label_from_hostname(&hostname()), ServerConfig::default())
    }

    /// Reads the config, or the defaults for this PC when there is none yet.
    pub fn load(paths: &Paths) -> Result<Config, ConfigError> {
        let path = paths.config();
        match std::fs::read_to_string(&path) {
            Ok(s) => {
                let c: Config = toml::from_str(&s)
                    .map_err(|e| ConfigError::Invalid { path: path.clone(), detail: e.to_string() })?;
                if !pcmail_core::roster::is_valid_label(&c.label) {
                    return Err(ConfigError::Invalid {
                        path,
                        detail: format!("label {:?} must be lower-case a-z 0-9 . _ - (max 40)", c.label),
                    });
                }
                Ok(c)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Config::default_for_this_pc()),
            Err(source) => Err(ConfigError::Read { path, source }),
        }
    }

    /// Writes atomically so a crash never leaves half a config.
    pub fn save(&self, paths: &Paths) -> Result<(), ConfigError> {
        let path = paths.config();
        let w = |source| ConfigError::Write { path: path.clone(), source };
        pcmail_fsmode::create_private_dir_all(&paths.home).map_err(w)?;
        let text = toml::to_string_pretty(self).expect("config serialises");
        pcmail_fsmode::replace_private(&path, text.as_bytes()).map_err(w)
    }

    /// How long this PC keeps final mail.
    pub fn retention_ms(&self) -> i64 {
        self.retention_days
            .map(|d| i64::from(d.max(1)) * 24 * 60 * 60 * 1000)
            .unwrap_or(pcmail_store::retention::DEFAULT_RETENTION_MS)
    }

    pub fn embedded_db(&self, paths: &Paths) -> Option<PathBuf> {
        match &self.server {
            ServerConfig::Embedded { db } => Some(db.clone().unwrap_or_else(|| paths.embedded_server_db())),
            _ => None,
        }
    }

    /// How long the daemon waits between cycles when the server has no long-poll.
    pub fn poll_interval(&self) -> std::time::Duration {
        let secs = match (self.poll_interval_secs, &self.server) {
            (n, _) if n > 0 => n,
            (_, ServerConfig::AppsScript { .. }) => 120,
            (_, ServerConfig::Embedded { .. }) => 2,
            (_, ServerConfig::Http { .. }) => 0,
        };
        std::time::Duration::from_secs(secs)
    }
}

pub fn hostname() -> String {
    #[cfg(unix)]
    {
        let mut buf = [0u8; 256];
        // SAFETY: buf is valid for its length; gethostname NUL-terminates or truncates.
        let rc = unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) };
        if rc == 0 {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            let h = String::from_utf8_lossy(&buf[..end]).to_string();
            if !h.is_empty() {
                return h;
            }
        }
    }
    std::env::var("COMPUTERNAME").or_else(|_| std::env::var("HOSTNAME")).unwrap_or_else(|_| "pc".into())
}

pub fn is_same_path(a: &Path, b: &Path) -> bool {
    a.canonicalize().ok() == b.canonicalize().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_config_holding_only_a_handoffs_table_works_on_the_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let paths = super::Paths::at(dir.path());
        std::fs::write(paths.config(), "[handoffs]\nstop_reminder = false\n").unwrap();
        let c = super::Config::load(&paths).unwrap();
        let d = super::Config::default_for_this_pc();
        assert_eq!(c.label, d.label, "the label made from the hostname");
        assert_eq!(c.server, d.server, "the embedded default");
        assert!(!c.handoffs.stop_reminder);
    }

    use super::*;

    /// `Config::new` must give what a config.toml holding only the label
    /// and the server gives, or tests built on it drift from real PCs.
    #[test]
    fn new_matches_a_config_file_with_only_label_and_server() {
        let parsed: Config =
            toml::from_str("label = \"pc-a\"\n[server]\nkind = \"http\"\nurl = \"http://127.0.0.1:9/api\"\n").unwrap();
        assert_eq!(Config::new("pc-a", ServerConfig::Http { url: "http://127.0.0.1:9/api".into() }), parsed);
    }
}
