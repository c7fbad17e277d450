//! `pcmail-hook`: the agent hook (Claude Code's SessionStart, UserPromptSubmit,
//! PreToolUse, Stop, SessionEnd and Gemini CLI's names for them), event JSON on stdin. Silent on any trouble:
//! no stdout, no stderr, exit 0. Registered with no arguments.
//! `pcmail-hook pre-commit` is the git pre-commit lease guard (exit 1 refuses).
//! `pcmail-hook lease claim|release …` is `pcmail lease claim|release …`
//! answered by the running daemon (`pcmail_local::cmdsock`).

fn main() {
    // An argument that is not UTF-8 is no option of ours (`args()` would panic on it).
    let first = std::env::args_os().nth(1);
    match first.as_ref().map(|a| a.to_str().unwrap_or("")) {
        Some("--version" | "-V") => println!("pcmail-hook {}", env!("CARGO_PKG_VERSION")),
        Some("--help" | "-h") => print!(
            "pcmail-hook {}: the agent hook of pcmail (Claude Code, Codex CLI, Gemini CLI).\n\n\
             Usage: pcmail-hook < EVENT.json\n\
             \x20      pcmail-hook lease claim|release ARGS...\n\n\
             Reads the hook event JSON on stdin (SessionStart, UserPromptSubmit, PreToolUse, Stop, SessionEnd;\n\
             Gemini CLI's BeforeAgent, BeforeTool, AfterAgent) and prints the context to add, or nothing.\n\
             Never touches the network; silent and exit 0 on any trouble. `pcmail hooks install` registers it.\n\n\
             `pcmail-hook lease claim|release` takes `pcmail lease claim|release`'s arguments and answers the same,\n\
             through the running `pcmail daemon` of this PCMAIL_HOME (about a process start); without one it runs pcmail.\n\n\
             Options:\n\
             \x20 -h, --help     Print this help\n\
             \x20 -V, --version  Print the version\n\n\
             Environment:\n\
             \x20 PCMAIL_HOME    The PC user's pcmail folder [default: the OS data folder, e.g. ~/.local/share/pcmail]\n",
            env!("CARGO_PKG_VERSION")
        ),
        // `lease claim|release …` answered by the running daemon (pcmail itself when none answers).
        Some("lease") => std::process::exit(pcmail_local::cmdsock::front_main(
            std::env::args_os().skip(1).collect(),
            std::env::current_exe().ok(),
        )),
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
