//! `pcmail-hook`: the Claude Code hook (SessionStart, UserPromptSubmit,
//! PreToolUse, Stop, SessionEnd), event JSON on stdin. Silent on any trouble:
//! no stdout, no stderr, exit 0. Registered with no arguments.
//! `pcmail-hook pre-commit` is the git pre-commit lease guard (exit 1 refuses).

fn main() {
    match std::env::args().nth(1).as_deref() {
        Some("--version" | "-V") => println!("pcmail-hook {}", env!("CARGO_PKG_VERSION")),
        Some("--help" | "-h") => println!(
            "pcmail-hook {}: the Claude Code hook of pcmail. Reads the hook event JSON on stdin, prints \
             the context to add (or nothing), never touches the network. `pcmail hooks install` registers it.",
            env!("CARGO_PKG_VERSION")
        ),
        // The git pre-commit lease guard (`pcmail hooks install --git`).
        Some("pre-commit") => std::process::exit(pcmail_local::githook::pre_commit_main()),
        _ => {
            let own = std::env::current_exe().ok();
            if let Some(out) = pcmail_local::hook::main_with(|| pcmail_local::hook::find_pcmail(own)) {
                use std::io::Write;
                let mut stdout = std::io::stdout().lock();
                let _ = writeln!(stdout, "{out}");
            }
        }
    }
}
