//! `pcmail name` and `pcmail who`: thin over pcmail-api.

use pcmail_api::sessions::{self as api, NameArgs, WhoArgs};
use pcmail_core::sessions::{idle_text, WhoAnswer};

pub fn name(name: String, session: Option<String>, json: bool) -> anyhow::Result<()> {
    let mut client = super::open()?;
    let r = api::name(&mut client, &NameArgs { name, session })?;
    if json {
        println!("{}", serde_json::to_string(&r)?);
        return Ok(());
    }
    let t = &r.taken;
    match (&t.previous, t.changed) {
        (_, false) => println!("pcmail: this session already holds {}", t.name),
        (None, true) => {
            println!("pcmail: {} is this session's name now ({}/{})", t.name, t.holder.pc, t.holder.session)
        }
        (Some(p), true) => {
            println!("pcmail: {} moved here from {}/{} (that session has ended)", t.name, p.pc, p.session);
            if t.requeued > 0 {
                println!("pcmail: {} unseen mail to {} comes here", t.requeued, t.name);
            }
        }
    }
    Ok(())
}

pub fn who(json: bool) -> anyhow::Result<()> {
    let mut client = super::open()?;
    let w = api::who(&mut client, &WhoArgs {})?;
    if json {
        println!("{}", serde_json::to_string(&w)?);
    } else {
        print!("{}", who_text(&w));
    }
    Ok(())
}

/// One line per live session, then the names nobody live holds.
pub fn who_text(w: &WhoAnswer) -> String {
    let mut out = String::new();
    if w.sessions.is_empty() {
        out.push_str("pcmail: no live sessions on any PC\n");
    } else {
        let rows: Vec<[String; 6]> = w
            .sessions
            .iter()
            .map(|s| {
                let short: String = s.session.chars().take(8).collect();
                [
                    s.name.clone().unwrap_or_else(|| format!("({short})")),
                    s.pc.clone(),
                    s.repo.clone().unwrap_or_else(|| "-".into()),
                    s.branch.clone().unwrap_or_else(|| "-".into()),
                    idle_text(s.idle_ms),
                    if s.leases.is_empty() { "-".into() } else { s.leases.join(",") },
                ]
            })
            .collect();
        let head = ["NAME", "PC", "REPO", "BRANCH", "IDLE", "LEASES"];
        let width: Vec<usize> = (0..6)
            .map(|i| rows.iter().map(|r| r[i].chars().count()).chain([head[i].len()]).max().unwrap_or(0))
            .collect();
        let line = |cells: &[&str]| {
            let mut l = String::new();
            for (i, c) in cells.iter().enumerate() {
                if i == 5 {
                    l.push_str(c);
                } else {
                    l.push_str(&format!("{c:<w$}  ", w = width[i]));
                }
            }
            l.trim_end().to_string() + "\n"
        };
        out.push_str(&line(&head));
        for r in &rows {
            out.push_str(&line(&r.iter().map(String::as_str).collect::<Vec<_>>()));
        }
    }
    for n in &w.idle_names {
        out.push_str(&format!(
            "pcmail: {} has no live session (last {}/{}); mail to it waits\n",
            n.name, n.pc, n.session
        ));
    }
    out
}

/// Set by SIGTERM / SIGINT, or EOF on a piped stdin: `watch` ends cleanly.
static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[cfg(unix)]
extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// `pcmail watch`: one framed line per new mail for this session, as it
/// arrives (crates/local/src/watch.rs). Reads only the PC store.
pub fn watch(session: Option<String>) -> anyhow::Result<()> {
    use std::io::Write;
    let paths = pcmail_local::config::Paths::from_env()?;
    // Claude Code gives a plugin's monitor its session id (CLAUDE_CODE_SESSION_ID), the same
    // id its hooks receive.
    // Each id cleaned as the hook cleans the one it records, so both name the same session.
    let clean = |s: String| pcmail_core::rules::clean_session_id(s.trim());
    let from_env = |k: &str| std::env::var(k).ok().and_then(clean);
    let session = match session.and_then(clean).or_else(|| from_env("PCMAIL_SESSION")).or_else(|| from_env("CLAUDE_CODE_SESSION_ID")) {
        Some(s) => s,
        None => session_above_soon(&paths).ok_or_else(|| {
            pcmail_api::ApiError::Usage(
                "no Claude Code session above this command (the hook records sessions on SessionStart): run it from a session's Monitor tool, or pass --session".into(),
            )
        })?,
    };
    #[cfg(unix)]
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
    }
    // EOF on a piped stdin ends it (the agent closed it). A terminal or
    // /dev/null is not watched: the Monitor tool may give either.
    if stdin_is_pipe() {
        std::thread::spawn(|| {
            let mut buf = [0u8; 256];
            let mut stdin = std::io::stdin();
            while let Ok(n) = std::io::Read::read(&mut stdin, &mut buf) {
                if n == 0 {
                    break;
                }
            }
            STOP.store(true, std::sync::atomic::Ordering::Relaxed);
        });
    }
    let stdout = std::io::stdout();
    let r = pcmail_local::watch::run(&paths, &session, &STOP, |line| {
        let mut o = stdout.lock();
        writeln!(o, "{line}")?;
        o.flush()
    });
    match r {
        Ok(()) => Ok(()),
        // The reader went away (a closed pipe): nothing more to say to it.
        Err(e) if e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe) => {
            Ok(())
        }
        Err(e) => Err(anyhow::anyhow!("{e}")),
    }
}

fn stdin_is_pipe() -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        std::fs::metadata("/dev/stdin").map(|m| m.file_type().is_fifo() || m.file_type().is_socket()).unwrap_or(false)
    }
    #[cfg(not(unix))]
    {
        false
    }
}

/// How long `watch` waits for the session of the agent above it to be
/// recorded: a plugin's monitor starts with the session, beside the
/// SessionStart hook that records it.
const SESSION_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// [`session_above`], waiting up to [`SESSION_WAIT`] while an agent process is
/// above this command but its session is not recorded yet (none above: at once).
fn session_above_soon(paths: &pcmail_local::config::Paths) -> Option<String> {
    let deadline = std::time::Instant::now() + SESSION_WAIT;
    loop {
        if let Some(s) = session_above(paths) {
            return Some(s);
        }
        if pcmail_local::process::claude_ancestor().is_none() || std::time::Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// The current session of the Claude Code process above this command, from
/// the registry in the PC store (as `pcmail name` and `pcmail lease claim` find it).
fn session_above(paths: &pcmail_local::config::Paths) -> Option<String> {
    let store = pcmail_store::Store::open_existing(&paths.store(), std::time::Duration::from_secs(2)).ok()??;
    let c = pcmail_local::process::claude_ancestor()?;
    pcmail_store::leases::session_of_process(store.conn(), c.pid, c.start).ok().flatten().map(|r| r.session)
}
