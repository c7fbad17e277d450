//! The code map end to end on real directories and a real SQLite store.
//! Golden files: `UPDATE_GOLDEN=1 cargo test -p pcmail-codemap` rewrites them
//! (then read the diff before committing).

use pcmail_codemap::{build, check, map, show, Options, ShowError, LLMS_MARKER};
use pcmail_store::Store;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            fs::copy(e.path(), dest).unwrap();
        }
    }
}

fn write(p: &Path, s: impl AsRef<[u8]>) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, s).unwrap();
}

/// A copy of fixture `name` at `<tmp>/<name>` (the folder name is the repo
/// name in llms.txt), with a git-ignored file that must not show up.
fn fixture_repo(tmp: &Path, name: &str) -> PathBuf {
    let root = tmp.join(name);
    copy_dir(&fixtures().join(name), &root);
    write(&root.join(".gitignore"), "generated/\n*.gen.rs\n");
    write(&root.join("generated/ignored.py"), "def ignored(): pass\n");
    write(&root.join("src/skip.gen.rs"), "pub fn ignored() {}\n");
    root
}

fn store(tmp: &Path) -> Store {
    Store::open(&tmp.join("home/store.db")).unwrap()
}

fn golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        write(&path, actual);
        return;
    }
    let expected = fs::read_to_string(&path).unwrap_or_else(|_| panic!("no golden {name}: run with UPDATE_GOLDEN=1"));
    assert_eq!(actual, expected, "{name} differs from its golden file");
}

#[test]
fn golden_output_per_language() {
    for lang in ["rust", "python", "typescript", "javascript", "go"] {
        let tmp = tempfile::tempdir().unwrap();
        let root = fixture_repo(tmp.path(), lang);
        let mut st = store(tmp.path());
        let r = map(&Options::new(&root), Some(&mut st)).unwrap();
        assert_eq!(r.failed, 0, "{lang}: the fixture parses cleanly");
        let code_map = fs::read_to_string(root.join(".claude/code-map.md")).unwrap();
        let llms = fs::read_to_string(root.join("llms.txt")).unwrap();
        assert!(!code_map.contains("ignored"), "{lang}: git-ignored files are skipped");
        assert!(!code_map.contains("not_in_the_map"), "{lang}: cfg(test) modules are skipped");
        golden(&format!("{lang}.code-map.md"), &code_map);
        golden(&format!("{lang}.llms.txt"), &llms);
        // Every mapped file in full, as `pcmail map --show` prints it.
        let detail: String =
            sections(&code_map).keys().map(|path| show(&root, path).unwrap() + "\n").collect::<Vec<_>>().concat();
        golden(&format!("{lang}.show.md"), &detail);
    }
}

/// A repo with every fixture language in it.
fn mixed_repo(tmp: &Path) -> PathBuf {
    let root = tmp.join("mixed");
    for lang in ["rust", "python", "typescript", "javascript", "go"] {
        copy_dir(&fixtures().join(lang), &root.join(lang));
    }
    root
}

/// `### path` sections of a code map, by path.
fn sections(map: &str) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    let mut cur: Option<(String, String)> = None;
    for line in map.lines() {
        if let Some(h) = line.strip_prefix("### ") {
            if let Some((k, v)) = cur.take() {
                out.insert(k, v);
            }
            cur = Some((h.trim_matches('`').to_string(), String::new()));
        } else if line.starts_with("## ") {
            if let Some((k, v)) = cur.take() {
                out.insert(k, v);
            }
        } else if let Some((_, v)) = cur.as_mut() {
            v.push_str(line);
            v.push('\n');
        }
    }
    if let Some((k, v)) = cur {
        out.insert(k, v);
    }
    out
}

#[test]
fn incremental_runs_match_a_full_run_and_touch_only_the_edited_part() {
    let tmp = tempfile::tempdir().unwrap();
    let root = mixed_repo(tmp.path());
    let mut st = store(tmp.path());
    let opts = Options::new(&root);

    let first = map(&opts, Some(&mut st)).unwrap();
    assert_eq!(first.parsed, first.files, "an empty cache parses everything");
    let before = fs::read_to_string(&first.map_path).unwrap();

    // Nothing changed: nothing is parsed and nothing written.
    let again = map(&opts, Some(&mut st)).unwrap();
    assert_eq!((again.parsed, again.reused), (0, again.files));
    assert!(again.changed.is_empty());

    // Touched without a change: read and hashed, not parsed, output the same.
    let api = root.join("typescript/src/api.ts");
    let text = fs::read_to_string(&api).unwrap();
    write(&api, &text);
    let f = fs::File::options().write(true).open(&api).unwrap();
    f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5)).unwrap();
    let touched = map(&opts, Some(&mut st)).unwrap();
    assert_eq!(touched.parsed, 0);
    assert!(touched.changed.is_empty());

    // One edited file: one parse, and only its section (and the inputs digest) changes.
    write(
        &api,
        text.replace(
            "export function parse(text: string)",
            "/** Parses mail. */\nexport function parseAll(text: string, strict: boolean)",
        ),
    );
    let edited = map(&opts, Some(&mut st)).unwrap();
    assert_eq!(edited.parsed, 1);
    let after = fs::read_to_string(&edited.map_path).unwrap();
    assert_ne!(before.lines().next(), after.lines().next(), "the inputs digest moved");
    let (b, a) = (sections(&before), sections(&after));
    assert_eq!(b.keys().collect::<Vec<_>>(), a.keys().collect::<Vec<_>>());
    let differing: Vec<&String> = b.keys().filter(|k| b[*k] != a[*k]).collect();
    assert_eq!(differing, ["typescript/src/api.ts"]);
    assert!(a["typescript/src/api.ts"]
        .contains("`export function parseAll(text: string, strict: boolean): Mail[]` — Parses mail."));
    let strip_first = |s: &str| s.split_once('\n').unwrap().1.to_string();
    let changed_lines = strip_first(&before).lines().zip(strip_first(&after).lines()).filter(|(x, y)| x != y).count();
    assert_eq!(changed_lines, 1, "one item line changed, nothing else");

    // A removed file and a new one.
    fs::remove_file(root.join("go/store/store.go")).unwrap();
    write(&root.join("python/pkg/extra.py"), "def extra():\n    \"\"\"Extra.\"\"\"\n");
    let moved = map(&opts, Some(&mut st)).unwrap();
    assert_eq!(moved.parsed, 1);

    // Byte-identical to a full run without any cache.
    let full = build(&opts, None).unwrap();
    assert_eq!(fs::read_to_string(&moved.map_path).unwrap(), full.code_map);
    assert_eq!(fs::read_to_string(&moved.llms_path).unwrap(), full.llms);
    assert!(!full.code_map.contains("go/store/store.go"));
    assert!(full.code_map.contains("`def extra()` — Extra."));
    let repo_key = root.canonicalize().unwrap().to_string_lossy().into_owned();
    let rows = st.codemap_rows(&repo_key).unwrap();
    assert_eq!(rows.len(), full.report.files);
    assert!(!rows.iter().any(|r| r.path == "go/store/store.go"), "a removed file leaves the cache");
}

#[test]
fn parse_failures_binary_and_huge_files_are_counted_not_fatal() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("robust");
    write(&root.join("good.rs"), "/// Fine.\npub fn fine() {}\n");
    write(&root.join("broken.py"), "def ok():\n    pass\n\ndef broken(:\n    pass\n");
    write(&root.join("latin1.go"), b"package x\n// caf\xe9\n");
    write(&root.join("blob.rs"), b"\x7fELF\x00\x00\x01binary");
    write(&root.join("bundle.min.js"), "x".repeat(1_100_000));
    let r = map(&Options::new(&root), None).unwrap();
    assert_eq!((r.files, r.failed, r.skipped_binary, r.skipped_huge), (3, 2, 1, 1));
    let m = fs::read_to_string(&r.map_path).unwrap();
    assert!(m.contains("Skipped: 1 binary, 1 over 1 MiB. Failed to parse: 2"), "{m}");
    assert!(m.contains("**Parse failed:** syntax error at line 4"), "{m}");
    assert!(m.contains("**Parse failed:** not valid UTF-8 text"), "{m}");
    assert!(m.contains("`def ok()`"), "items before the error are still listed");
    assert!(m.contains("`pub fn fine()` — Fine."));
    assert!(!m.contains("blob.rs") && !m.contains("bundle.min.js"));
    let l = fs::read_to_string(&r.llms_path).unwrap();
    assert!(l.contains("[broken.py](broken.py): ok, broken — parse failed"), "{l}");
}

/// `n` files spread over nested folders, each with a few items.
fn synthetic_repo(root: &Path, n: usize) {
    for i in 0..n {
        let dir = format!("pkg{}/mod{}/sub{}", i % 7, i % 31, i % 3);
        let body: String = (0..4)
            .map(|k| {
                format!("/// Item {k} of file {i}, documented.\npub fn function_{i}_{k}(x: u32) -> u32 {{ x + {k} }}\n")
            })
            .collect();
        write(&root.join(dir).join(format!("file_{i}.rs")), format!("//! File {i}.\n{body}"));
    }
}

#[test]
fn llms_stays_within_its_budget_by_summarising() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("big");
    synthetic_repo(&root, 2_000);
    // One parse of the 2,000 files; the other budgets render from the cache.
    let mut st = store(tmp.path());
    for budget in [1_000, 3_000, 8_000, 40_000, 400_000] {
        let mut o = Options::new(&root);
        o.llms_budget = budget;
        let b = build(&o, Some(&mut st)).unwrap();
        let chars = b.llms.chars().count();
        assert!(chars <= budget, "{chars} > {budget}");
        assert!(b.llms.lines().any(|l| l == LLMS_MARKER));
        assert!(b.llms.starts_with("# big\n"));
        // Every top-level folder is named or counted: nothing is cut silently.
        let named = (0..7).filter(|k| b.llms.contains(&format!("pkg{k}/"))).count();
        assert!(named == 7 || b.llms.contains("more folders"), "budget {budget}:\n{}", b.llms);
        if budget == 400_000 {
            assert!(
                b.llms.contains("[file_0.rs](pkg0/mod0/sub0/file_0.rs): File 0. — function_0_0"),
                "full detail fits"
            );
        }
        if budget >= 3_000 {
            assert!(chars > budget / 2, "the budget is used, not wasted: {chars} of {budget}");
        }
    }
    let mut o = Options::new(&root);
    o.llms_budget = 999;
    assert!(matches!(build(&o, None), Err(pcmail_codemap::MapError::BudgetTooSmall(999))));
}

#[test]
fn a_foreign_llms_txt_is_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixture_repo(tmp.path(), "go");
    let mine = "# My project\n\n> Hand-written.\n";
    write(&root.join("llms.txt"), mine);
    let r = map(&Options::new(&root), None).unwrap();
    assert_eq!(fs::read_to_string(root.join("llms.txt")).unwrap(), mine);
    assert_eq!(r.foreign_llms.as_deref(), Some(root.canonicalize().unwrap().join("llms.txt").as_path()));
    assert_eq!(r.llms_path, root.canonicalize().unwrap().join("llms.pcmail.txt"));
    assert!(fs::read_to_string(&r.llms_path).unwrap().contains(LLMS_MARKER));
    // Runs after that keep to the file beside it, and --check agrees.
    assert!(map(&Options::new(&root), None).unwrap().changed.is_empty());
    assert!(check(&Options::new(&root), None).unwrap().is_ok());
    // A file that is pcmail's own is rewritten.
    fs::remove_file(root.join("llms.txt")).unwrap();
    let r = map(&Options::new(&root), None).unwrap();
    assert_eq!(r.llms_path, root.canonicalize().unwrap().join("llms.txt"));
    write(&root.join("extra.go"), "package main\nfunc Extra() {}\n");
    map(&Options::new(&root), None).unwrap();
    assert!(fs::read_to_string(root.join("llms.txt")).unwrap().contains("extra.go"));
}

#[test]
fn check_says_stale_when_inputs_change() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixture_repo(tmp.path(), "python");
    let opts = Options::new(&root);
    let stale = check(&opts, None).unwrap().unwrap_err();
    assert!(stale.reasons.iter().any(|r| r.contains("code-map.md is missing")), "{:?}", stale.reasons);
    map(&opts, None).unwrap();
    assert!(check(&opts, None).unwrap().is_ok());
    write(&root.join("pkg/util.py"), "def changed():\n    pass\n");
    let stale = check(&opts, None).unwrap().unwrap_err();
    assert_eq!(stale.command, "pcmail map");
    assert!(stale.reasons.iter().any(|r| r.contains("code-map.md differs")));
    // --check writes nothing.
    assert!(check(&opts, None).unwrap().is_err());
    let mut custom = Options::new(&root);
    custom.map_file = "docs/map.md".into();
    custom.llms_budget = 5_000;
    assert_eq!(custom.refresh_command(), "pcmail map --map-file docs/map.md --llms-budget 5000");
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn the_hook_line_follows_head_in_a_real_git_repo() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixture_repo(tmp.path(), "rust");
    git(&root, &["init", "-q", "-b", "main"]);
    git(&root, &["add", "."]);
    git(&root, &["commit", "-qm", "one"]);
    let check_line = || pcmail_codemap_check::stale_line(&root);
    assert_eq!(check_line(), None, "no map made here yet");
    map(&Options::new(&root), None).unwrap();
    assert_eq!(check_line(), None);
    write(&root.join("src/new.rs"), "pub fn new() {}\n");
    git(&root, &["add", "."]);
    git(&root, &["commit", "-qm", "two"]);
    let head = git(&root, &["rev-parse", "HEAD"]);
    let line = check_line().expect("stale after a commit");
    assert!(line.contains(&head[..10]) && line.contains("`pcmail map`"), "{line}");
    map(&Options::new(&root), None).unwrap();
    assert_eq!(check_line(), None);
    // Packed refs and a detached HEAD, as git writes them.
    git(&root, &["pack-refs", "--all"]);
    assert_eq!(check_line(), None);
    git(&root, &["checkout", "-qf", "--detach", "HEAD~1"]);
    assert!(check_line().is_some());
    map(&Options::new(&root), None).unwrap();
    assert_eq!(check_line(), None);
    // A linked worktree has its own HEAD and its own stamp.
    let wt = tmp.path().join("wt");
    git(&root, &["worktree", "add", "-q", wt.to_str().unwrap(), "main"]);
    assert_eq!(pcmail_codemap_check::stale_line(&wt), None, "no map made in the worktree yet");
    map(&Options::new(&wt), None).unwrap();
    assert_eq!(pcmail_codemap_check::stale_line(&wt), None);
    assert_eq!(check_line(), None);
}

#[test]
fn a_same_size_edit_within_the_clock_tick_is_still_seen() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("racy");
    let file = root.join("a.rs");
    write(&file, "pub fn aaa() {}\n");
    let mtime = fs::metadata(&file).unwrap().modified().unwrap();
    let mut st = store(tmp.path());
    map(&Options::new(&root), Some(&mut st)).unwrap();
    // Same size, same modification time, other content: only the hash can tell.
    write(&file, "pub fn bbb() {}\n");
    fs::File::options().write(true).open(&file).unwrap().set_modified(mtime).unwrap();
    let r = map(&Options::new(&root), Some(&mut st)).unwrap();
    assert_eq!(r.parsed, 1);
    assert!(fs::read_to_string(&r.map_path).unwrap().contains("`pub fn bbb()`"));
}

/// A repo's committed symlink at `.claude` cannot make `pcmail map` write
/// outside the repo: the write is refused and nothing appears there.
#[cfg(unix)]
#[test]
fn a_symlinked_claude_folder_is_not_written_through() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixture_repo(tmp.path(), "rust");
    let outside = tmp.path().join("outside");
    fs::create_dir_all(&outside).unwrap();
    let _ = fs::remove_dir_all(root.join(".claude"));
    std::os::unix::fs::symlink(&outside, root.join(".claude")).unwrap();
    let e = map(&Options::new(&root), None).unwrap_err();
    assert!(e.to_string().contains("refused"), "{e}");
    assert_eq!(fs::read_dir(&outside).unwrap().count(), 0, "nothing written outside the repo");
}

/// The map lists a file's top-level items and counts their members; the
/// members' signatures and docs come from `show`, which reads the file now.
#[test]
fn the_map_counts_members_and_show_lists_them() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("nested");
    write(
        &root.join("pkg/shapes.py"),
        "\"\"\"Shapes.\"\"\"\n\ndef area(s) -> float:\n    \"\"\"Area of any shape.\"\"\"\n\n\
         class Circle(Shape):\n    \"\"\"A round one.\"\"\"\n\n    def radius_of_circle(self) -> float:\n        \"\"\"Its radius.\"\"\"\n\n\
         \x20   class Inner:\n        def deep_method(self):\n            pass\n",
    );
    let r = map(&Options::new(&root), None).unwrap();
    let m = fs::read_to_string(&r.map_path).unwrap();
    assert!(m.contains("- `def area(s) -> float` — Area of any shape.\n"), "{m}");
    assert!(m.contains("- `class Circle(Shape)` — A round one. (3 members)\n"), "nested members counted: {m}");
    assert!(!m.contains("radius_of_circle") && !m.contains("deep_method"), "members are not listed: {m}");
    assert!(m.contains("`pcmail map --show FILE`"), "the map names the command that gives the rest");
    assert!(fs::read_to_string(&r.llms_path).unwrap().contains("`pcmail map --show FILE`"));

    let d = show(&root, "pkg/shapes.py").unwrap();
    assert_eq!(
        d,
        "### `pkg/shapes.py`\n\nPython: Shapes.\n\n- `def area(s) -> float` — Area of any shape.\n\
         - `class Circle(Shape)` — A round one.\n  - `def radius_of_circle(self) -> float` — Its radius.\n\
         \x20 - `class Inner`\n    - `def deep_method(self)`\n"
    );
    // The same file by absolute path, and with `./`; and parsed now, not from the map.
    assert_eq!(show(&root, root.join("pkg/shapes.py").to_str().unwrap()).unwrap(), d);
    assert_eq!(show(&root, "./pkg/shapes.py").unwrap(), d);
    write(&root.join("pkg/shapes.py"), "def square():\n    pass\n");
    assert!(show(&root, "pkg/shapes.py").unwrap().contains("`def square()`"));
}

/// Old cache rows hold the long form of a file's part of the map: a run of
/// this version parses the file again instead of reusing them.
#[test]
fn cache_rows_of_an_older_version_are_not_reused() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixture_repo(tmp.path(), "python");
    let mut st = store(tmp.path());
    let first = map(&Options::new(&root), Some(&mut st)).unwrap();
    let key = root.canonicalize().unwrap().to_string_lossy().into_owned();
    let mut rows = st.codemap_rows(&key).unwrap();
    for r in &mut rows {
        r.version = pcmail_codemap::EXTRACT_VERSION - 1;
        r.entry = r.entry.replace("Python", "Python: OLD LONG SECTION");
    }
    st.codemap_apply(&key, &rows, &[]).unwrap();
    let again = map(&Options::new(&root), Some(&mut st)).unwrap();
    assert_eq!(again.parsed, first.files, "every row of the older version is parsed again");
    assert!(!fs::read_to_string(&again.map_path).unwrap().contains("OLD LONG SECTION"));
    assert!(again.changed.is_empty(), "the same map as the first run");
}

/// `show` reads only regular files inside the repo: a path outside it, `..`,
/// a symlink (to a file or a folder) leading out, a folder, a file the map
/// does not cover and a value that looks like an option are refused, each
/// with its own error, and nothing outside is read.
#[test]
fn show_refuses_what_is_not_a_mapped_file_inside_the_repo() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixture_repo(tmp.path(), "python");
    let outside = tmp.path().join("outside");
    write(&outside.join("secret.py"), "def secret_outside():\n    pass\n");
    let secret = outside.join("secret.py");
    let err = |file: &str| show(&root, file).unwrap_err();

    assert!(matches!(err("--full"), ShowError::LooksLikeOption(_)));
    assert!(err("--full").to_string().contains("./--full"));
    assert!(matches!(err("../outside/secret.py"), ShowError::OutsideRepo { .. }));
    assert!(matches!(err("pkg/../../outside/secret.py"), ShowError::OutsideRepo { .. }));
    let abs = err(secret.to_str().unwrap());
    assert!(matches!(abs, ShowError::OutsideRepo { .. }), "{abs}");
    assert!(abs.to_string().contains("not a file inside the repo"), "{abs}");
    assert!(matches!(err(""), ShowError::OutsideRepo { .. }));
    assert!(matches!(err("pkg/missing.py"), ShowError::NotFound(_)));
    assert!(matches!(err("pkg/__init__.py/x.py"), ShowError::NotFound(_)));
    assert!(matches!(err("pkg"), ShowError::Folder(_)));
    write(&root.join("README.md"), "# Readme\n");
    assert!(matches!(err("README.md"), ShowError::NotMapped(_)));
    write(&root.join("big.py"), "x = 1\n".repeat(200_000));
    assert!(matches!(err("big.py"), ShowError::TooLarge(_)));
    assert!(matches!(show(&root.join("nope"), "pkg/util.py").unwrap_err(), ShowError::NotADirectory(_)));

    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&secret, root.join("pkg/link.py")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("out")).unwrap();
        for file in ["pkg/link.py", "out/secret.py"] {
            let e = err(file);
            assert!(matches!(e, ShowError::Refused { .. }), "{file}: {e}");
            assert!(e.to_string().contains("symlink"), "{e}");
            assert!(!e.to_string().contains("secret_outside"));
        }
        // A symlink inside the repo to a file inside it is refused too: the
        // map does not follow symlinks, so --show does not either.
        std::os::unix::fs::symlink(root.join("pkg/util.py"), root.join("pkg/alias.py")).unwrap();
        assert!(matches!(err("pkg/alias.py"), ShowError::Refused { .. }));
    }
    // The real files still show.
    assert!(show(&root, "pkg/util.py").unwrap().contains("`def cached(x)`"));
}
