//! Which session a command runs in. One function, so that it can be pointed
//! at the PC's session registry (issue 11 §1, the Claude Code process found
//! among the CLI's ancestors) when that exists. Today: `PCMAIL_SESSION`, else
//! a session id the environment carries (`CLAUDE_SESSION_ID`, which a
//! SessionStart hook can export through `CLAUDE_ENV_FILE`), else a random id
//! for this one command — so two writers never share a name either way.

/// Where the session id came from (shown with `--json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionSource {
    /// `PCMAIL_SESSION`.
    Env,
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

/// The session this process acts for.
pub fn current() -> SessionId {
    current_from(|k| std::env::var(k).ok())
}

/// [`current`] over any environment (tests).
pub fn current_from(env: impl Fn(&str) -> Option<String>) -> SessionId {
    let get = |k: &str| env(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    if let Some(id) = get("PCMAIL_SESSION") {
        return SessionId { id, source: SessionSource::Env };
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
    fn env_first_then_claude_then_random() {
        let s = current_from(|k| (k == "PCMAIL_SESSION").then(|| " ani ".to_string()));
        assert_eq!(s, SessionId { id: "ani".into(), source: SessionSource::Env });
        let s = current_from(|k| (k == "CLAUDE_SESSION_ID").then(|| "373d1618-x".to_string()));
        assert_eq!(s.source, SessionSource::Claude);
        let (a, b) = (current_from(|_| None), current_from(|_| Some(" ".into())));
        assert_eq!(a.source, SessionSource::Random);
        assert_eq!(a.id.len(), 16);
        assert_ne!(a.id, b.id);
    }
}
