//! `tests/protocol/generated/op-table.json` is the op table and the shared
//! limits exactly as `pcmail_core::shared_table::shared_table()` makes them,
//! and `ui/op-table.js` is the same JSON for the tray window (which can load
//! a script from its own folder, not a JSON file from outside it). The Apps
//! Script tests and the tray window read these files; this test fails when
//! either is stale.

use std::path::{Path, PathBuf};

const REGENERATE: &str = "PCMAIL_WRITE_OP_TABLE=1 cargo test -p pcmail-core --test op_table_json";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn json_text() -> String {
    let mut s = serde_json::to_string_pretty(&pcmail_core::shared_table::shared_table()).unwrap();
    s.push('\n');
    s
}

fn ui_text(json: &str) -> String {
    format!(
        "// Generated from pcmail-core (the op table and the shared limits), the same JSON as\n\
         // tests/protocol/generated/op-table.json. Do not edit: {REGENERATE}\n\
         'use strict';\nwindow.PCMAIL_OP_TABLE = {};\n",
        json.trim_end()
    )
}

fn check(path: &Path, want: &str) -> Result<(), String> {
    if std::env::var_os("PCMAIL_WRITE_OP_TABLE").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, want).unwrap();
        return Ok(());
    }
    match std::fs::read_to_string(path) {
        Ok(have) if have == want => Ok(()),
        Ok(_) => Err(format!("{} differs from the op table in pcmail-core", path.display())),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

#[test]
fn the_committed_op_table_is_the_one_core_makes() {
    let json = json_text();
    let errors: Vec<String> = [
        check(&repo().join("tests/protocol/generated/op-table.json"), &json),
        check(&repo().join("ui/op-table.js"), &ui_text(&json)),
    ]
    .into_iter()
    .filter_map(Result::err)
    .collect();
    assert!(errors.is_empty(), "{}\nregenerate both with: {REGENERATE}", errors.join("\n"));
}
