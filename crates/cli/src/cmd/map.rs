//! `pcmail map`: the code map of a repo, written or checked; `--show FILE`:
//! one file of it in full.

use std::path::PathBuf;

pub fn run(
    repo: Option<PathBuf>,
    check: bool,
    map_file: String,
    llms_file: String,
    llms_budget: usize,
    full: bool,
    json: bool,
) -> anyhow::Result<()> {
    // One pcmail-api function for this and the MCP tools `map` / `map_check`.
    let args = pcmail_api::codemap::MapArgs {
        repo: repo.map(|r| r.to_string_lossy().into_owned()),
        map_file: Some(map_file),
        llms_file: Some(llms_file),
        llms_budget: Some(llms_budget),
        full,
    };
    let paths = super::paths()?;
    let r =
        if check { pcmail_api::codemap::map_check(&paths, &args)? } else { pcmail_api::codemap::map(&paths, &args)? };
    if json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        if let Some(n) = &r.note {
            eprintln!("pcmail: {n}");
        }
        print_map_report(&r.report, check);
    }
    Ok(())
}

/// `pcmail map --show FILE`: the file's full detail on stdout (under
/// `--json`: `{repo, file, text}`).
pub fn show(repo: Option<PathBuf>, file: &str, json: bool) -> anyhow::Result<()> {
    let repo = repo.map(|r| r.to_string_lossy().into_owned());
    let r = pcmail_api::codemap::map_show(repo.as_deref(), file)?;
    if json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        print!("{}", r.text);
    }
    Ok(())
}

fn print_map_report(r: &pcmail_codemap::Report, check: bool) {
    let rel = |p: &std::path::Path| p.strip_prefix(&r.repo).unwrap_or(p).display().to_string();
    println!(
        "Code map: {} file{} ({} parsed, {} from the cache), {} failed to parse; skipped {} binary, {} over 1 MiB.",
        r.files,
        if r.files == 1 { "" } else { "s" },
        r.parsed,
        r.reused,
        r.failed,
        r.skipped_binary,
        r.skipped_huge
    );
    if let Some(f) = &r.foreign_llms {
        println!(
            "{} was not written by pcmail: left alone; the index goes to {} beside it.",
            rel(f),
            rel(&r.llms_path)
        );
    }
    if let Some(e) = &r.stamp_error {
        eprintln!("pcmail: {e} (the session hook cannot tell when the map goes stale)");
    }
    if check {
        println!("Fresh: {} and {} match their inputs.", rel(&r.map_path), rel(&r.llms_path));
    } else if r.changed.is_empty() {
        println!("Unchanged: {}, {} ({} chars).", rel(&r.map_path), rel(&r.llms_path), r.llms_chars);
    } else {
        let names: Vec<String> = r.changed.iter().map(|p| rel(p)).collect();
        println!("Wrote {} ({} chars in {}).", names.join(", "), r.llms_chars, rel(&r.llms_path));
    }
}
