//! Which session a command runs in. `PCMAIL_SESSION` (an explicit choice),
//! else the session the PC's registry has for the Claude Code process above
//! the command (the hook recorded it; the caller looks it up and
//! passes it in, since this crate reads no store), else a session id the
//! environment carries (`CLAUDE_SESSION_ID`, which a SessionStart hook can
//! export through `CLAUDE_ENV_FILE`), else a random id for this one command —
//! so two writers never share a name either way.

/// Where the session id came from (shown with `--json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionSource {
    /// `PCMAIL_SESSION`.
    Env,
    /// The PC's session registry: the Claude Code process above the command.
    Registry,
    /// `CLAUDE_SESSION_ID` / `CLAUDE_CODE_SESSION_ID`.
    Claude,
    /// Made up for this command.
    Random,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SessionId {
    pub id: String,
    pub source: SessionSource,
}

/// The session this process acts for, without the registry.
pub fn current() -> SessionId {
    current_with(|| None)
}

/// The session this process acts for; `registry` gives the registry's
/// session of the Claude Code process above (asked only when
/// `PCMAIL_SESSION` is not set).
pub fn current_with(registry: impl FnOnce() -> Option<String>) -> SessionId {
    current_from(|k| std::env::var(k).ok(), registry)
}

/// [`current_with`] over any environment (tests).
pub fn current_from(env: impl Fn(&str) -> Option<String>, registry: impl FnOnce() -> Option<String>) -> SessionId {
    // Cleaned as the hook cleans the id it records: a session id any server refuses never leaves here.
    let get = |k: &str| env(k).and_then(|v| pcmail_core::rules::clean_session_id(v.trim()));
    if let Some(id) = get("PCMAIL_SESSION") {
        return SessionId { id, source: SessionSource::Env };
    }
    if let Some(id) = registry().and_then(|v| pcmail_core::rules::clean_session_id(v.trim())) {
        return SessionId { id, source: SessionSource::Registry };
    }
    if let Some(id) = get("CLAUDE_SESSION_ID").or_else(|| get("CLAUDE_CODE_SESSION_ID")) {
        return SessionId { id, source: SessionSource::Claude };
    }
    SessionId { id: random_id(), source: SessionSource::Random }
}

/// 16 random hex digits.
pub fn random_id() -> String {
    use rand::RngExt;
    format!("{:016x}", rand::rng().random::<u64>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_first_then_the_registry_then_claude_then_random() {
        let s = current_from(|k| (k == "PCMAIL_SESSION").then(|| " ani ".to_string()), || Some("reg".into()));
        assert_eq!(s, SessionId { id: "ani".into(), source: SessionSource::Env });
        let claude_env = |k: &str| (k == "CLAUDE_SESSION_ID").then(|| "373d1618-x".to_string());
        let s = current_from(claude_env, || Some("5e55101d-reg".into()));
        assert_eq!(s, SessionId { id: "5e55101d-reg".into(), source: SessionSource::Registry });
        let s = current_from(claude_env, || None);
        assert_eq!(s.source, SessionSource::Claude);
        let (a, b) = (current_from(|_| None, || None), current_from(|_| Some(" ".into()), || Some(" ".into())));
        assert_eq!(a.source, SessionSource::Random);
        assert_eq!(a.id.len(), 16);
        assert_ne!(a.id, b.id);
    }
}
