//! Code map timings: `cargo run --release -p pcmail-codemap --example bench`.
//! A generated 5,000-file repo (Rust, Python, TypeScript, JavaScript, Go) with
//! a real store file: a full run, a re-run with nothing changed, a re-run with
//! one changed file; then a full run (no cache) of this repository.
//! Each figure is the median of the repetitions (PCMAIL_BENCH_REPS, default 5).
//!
//! `PCMAIL_BENCH_SQLALCHEMY=1` measures a real Python repo instead: SQLAlchemy's
//! source distribution, fetched into a temporary folder (see [`sqlalchemy`]).

use pcmail_codemap::{build, map, Options};
use pcmail_store::Store;
use std::path::Path;
use std::time::{Duration, Instant};

fn write(p: &Path, s: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, s).unwrap();
}

fn source(i: usize, version: usize) -> (String, String) {
    let dir = format!("area{}/part{}/unit{}", i % 10, i % 50, i % 4);
    match i % 5 {
        0 | 1 => (
            format!("{dir}/file_{i}.rs"),
            (0..8)
                .map(|k| format!("/// Does thing {k} of {i}.\npub fn thing_{k}_{version}(x: u64, y: &str) -> Option<u64> {{\n    if y.is_empty() {{ None }} else {{ Some(x + {k}) }}\n}}\n\n"))
                .collect::<String>()
                + &format!("/// A type.\npub struct Thing{i} {{ a: u32 }}\nimpl Thing{i} {{\n    /// Makes one.\n    pub fn new() -> Self {{ Thing{i} {{ a: 0 }} }}\n}}\n"),
        ),
        2 => (
            format!("{dir}/mod_{i}.py"),
            (0..8)
                .map(|k| format!("def thing_{k}_{version}(x, y=None):\n    \"\"\"Does thing {k}.\"\"\"\n    return x\n\n\n"))
                .collect::<String>()
                + "class Thing:\n    \"\"\"A type.\"\"\"\n\n    def run(self):\n        return 1\n",
        ),
        3 => (
            format!("{dir}/mod_{i}.ts"),
            (0..8)
                .map(|k| format!("/** Does thing {k}. */\nexport function thing{k}_{version}(x: number, y?: string): number {{\n  return x + {k};\n}}\n\n"))
                .collect::<String>()
                + "export class Thing {\n  /** Runs. */\n  run(): void {}\n}\n",
        ),
        _ => (
            format!("{dir}/file_{i}.go"),
            format!("// Package p{i} is generated.\npackage p{i}\n\n")
                + &(0..8)
                    .map(|k| format!("// Thing{k} does thing {k}.\nfunc Thing{k}V{version}(x int, y string) (int, error) {{\n\treturn x + {k}, nil\n}}\n\n"))
                    .collect::<String>(),
        ),
    }
}

/// This process's CPU time (user + system, all threads) from /proc (Linux;
/// 10 ms ticks), so a figure can be told apart from the machine's load.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

fn cpu_per_run(before: Option<Duration>, runs: usize) -> String {
    match (before, cpu_time()) {
        (Some(a), Some(b)) => format!("{:.0} ms CPU per run", (b - a).as_secs_f64() * 1000.0 / runs as f64),
        _ => "CPU n/a".into(),
    }
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// The SQLAlchemy release measured: pinned, so figures compare across runs.
const SQLALCHEMY: &str = "2.1.0b1";

/// code-map.md of that release as main wrote it before the map became compact
/// (commit 4b0af29, every item's signature and doc line up front), in characters.
const BEFORE_MAP_CHARS: usize = 2_111_352;

/// Fetches the sdist into `dir`. `how` = `pip`: `pip download --no-deps
/// --no-binary :all:`, which also builds the package's metadata in an isolated
/// environment (minutes of CPU on a small machine); otherwise the file's
/// address and sha256 are read from PyPI's simple index and the file fetched
/// and checked by a Python one-liner (under a second).
fn fetch_sqlalchemy(dir: &Path, how: &str) -> std::path::PathBuf {
    let name = format!("sqlalchemy-{SQLALCHEMY}.tar.gz");
    let out = dir.join(&name);
    let status = if how == "pip" {
        std::process::Command::new("pip")
            .args(["download", "--no-deps", "--no-binary", ":all:", "--quiet"])
            .arg(format!("SQLAlchemy=={SQLALCHEMY}"))
            .arg("-d")
            .arg(dir)
            .status()
    } else {
        let script = r#"
import hashlib, re, sys, urllib.request
name, out = sys.argv[1], sys.argv[2]
page = urllib.request.urlopen("https://pypi.org/simple/sqlalchemy/", timeout=60).read().decode()
m = re.search(r'href="([^"]*/' + re.escape(name) + r')#sha256=([0-9a-f]{64})"', page)
if not m:
    sys.exit("no " + name + " in PyPI's simple index")
data = urllib.request.urlopen(m.group(1), timeout=300).read()
if hashlib.sha256(data).hexdigest() != m.group(2):
    sys.exit(name + ": sha256 differs from the index's")
open(out, "wb").write(data)
"#;
        std::process::Command::new("python3").arg("-c").arg(script).arg(&name).arg(&out).status()
    };
    match status {
        Ok(s) if s.success() && out.is_file() => out,
        other => panic!("cannot fetch {name} ({how}): {other:?}"),
    }
}

/// The CPU of a full run of the map (empty cache, real store, files written)
/// against the floor: reading and tree-sitter parsing the same files alone,
/// on one thread, nothing extracted or rendered; and the size of the map.
fn sqlalchemy(how: &str, reps: usize) {
    let tmp = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let sdist = fetch_sqlalchemy(tmp.path(), how);
    let fetched = t.elapsed();
    let st = std::process::Command::new("tar").arg("xzf").arg(&sdist).arg("-C").arg(tmp.path()).status().unwrap();
    assert!(st.success(), "tar failed on {sdist:?}");
    let root = tmp.path().join(format!("sqlalchemy-{SQLALCHEMY}"));
    let files = pcmail_codemap::mapped_files(&root).unwrap();
    let bytes: u64 = files.iter().map(|(p, _)| std::fs::metadata(p).unwrap().len()).sum();

    let mut floor = vec![];
    for _ in 0..reps {
        let mut parsers: Vec<(pcmail_codemap::Lang, tree_sitter::Parser)> = vec![];
        let c0 = cpu_time();
        for (path, lang) in &files {
            let text = std::fs::read(path).unwrap();
            let i = match parsers.iter().position(|(l, _)| l == lang) {
                Some(i) => i,
                None => {
                    let mut p = tree_sitter::Parser::new();
                    p.set_language(&pcmail_codemap::language(*lang)).unwrap();
                    parsers.push((*lang, p));
                    parsers.len() - 1
                }
            };
            std::hint::black_box(parsers[i].1.parse(&text, None));
        }
        floor.push(cpu_time().zip(c0).map(|(b, a)| b - a).unwrap_or_default());
    }

    let store_path = tmp.path().join("home/store.db");
    let opts = Options::new(&root);
    let key = root.canonicalize().unwrap().to_string_lossy().into_owned();
    let mut full = vec![];
    let mut wall = vec![];
    let mut report = None;
    for _ in 0..reps {
        let mut st = Store::open(&store_path).unwrap();
        st.codemap_clear(&key).unwrap();
        let c0 = cpu_time();
        let t = Instant::now();
        let r = map(&opts, Some(&mut st)).unwrap();
        wall.push(t.elapsed());
        full.push(cpu_time().zip(c0).map(|(b, a)| b - a).unwrap_or_default());
        assert_eq!(r.parsed, r.files + r.skipped_binary);
        report = Some(r);
    }
    let r = report.expect("at least one repetition");
    let map_chars = std::fs::read_to_string(&r.map_path).unwrap().chars().count();
    let (floor, full) = (median(floor), median(full));
    let ratio = full.as_secs_f64() / floor.as_secs_f64().max(1e-9);
    println!(
        "SQLAlchemy {SQLALCHEMY} sdist ({} in {:.1} s): {} mapped files, {:.1} MB; median of {reps} runs",
        if how == "pip" { "pip download" } else { "PyPI simple index" },
        fetched.as_secs_f64(),
        files.len(),
        bytes as f64 / 1e6
    );
    println!("  floor: read + tree-sitter parse alone, 1 thread   {:.0} ms CPU", floor.as_secs_f64() * 1e3);
    println!(
        "  full `pcmail map`, empty cache                    {:.0} ms CPU ({} wall)",
        full.as_secs_f64() * 1e3,
        ms(median(wall))
    );
    println!("  full run / floor                                  {ratio:.2} (target <= 1.5)");
    println!("  code-map.md                                       {map_chars} chars");
    println!(
        "  llms.txt                                          {} chars (budget {})",
        r.llms_chars, opts.llms_budget
    );
    if BEFORE_MAP_CHARS > 0 {
        println!(
            "  code-map.md before (main at 4b0af29)              {BEFORE_MAP_CHARS} chars; now / before {:.3} (target <= 0.333)",
            map_chars as f64 / BEFORE_MAP_CHARS as f64
        );
    }
    println!(
        "machine: {} cores, load average {} at the end",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        load()
    );
}

fn main() {
    if let Some(how) = std::env::var("PCMAIL_BENCH_SQLALCHEMY").ok().filter(|v| !v.is_empty() && v != "0") {
        let reps: usize = std::env::var("PCMAIL_BENCH_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
        return sqlalchemy(&how, reps.max(1));
    }
    let reps: usize = std::env::var("PCMAIL_BENCH_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    let files = 5_000;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("repo");
    for i in 0..files {
        let (path, text) = source(i, 0);
        write(&root.join(path), &text);
    }
    // A git directory as git lays it out, so the map writes its stamp.
    write(&root.join(".git/HEAD"), "ref: refs/heads/main\n");
    write(&root.join(".git/refs/heads/main"), "0123456789012345678901234567890123456789\n");
    let store_path = tmp.path().join("home/store.db");
    let opts = Options::new(&root);

    let mut full = vec![];
    let c0 = cpu_time();
    for _ in 0..reps.min(3) {
        let mut st = Store::open(&store_path).unwrap();
        st.codemap_clear(&root.canonicalize().unwrap().to_string_lossy()).unwrap();
        let t = Instant::now();
        let r = map(&opts, Some(&mut st)).unwrap();
        full.push(t.elapsed());
        assert_eq!(r.parsed, files);
    }
    let full_cpu = cpu_per_run(c0, reps.min(3));
    let mut st = Store::open(&store_path).unwrap();
    let mut same = vec![];
    let c0 = cpu_time();
    for _ in 0..reps {
        let t = Instant::now();
        let r = map(&opts, Some(&mut st)).unwrap();
        same.push(t.elapsed());
        assert_eq!(r.parsed, 0);
    }
    let same_cpu = cpu_per_run(c0, reps);
    let mut one = vec![];
    let c0 = cpu_time();
    for rep in 0..reps {
        let (path, text) = source(7, rep + 1);
        write(&root.join(path), &text);
        let t = Instant::now();
        let r = map(&opts, Some(&mut st)).unwrap();
        one.push(t.elapsed());
        assert_eq!(r.parsed, 1);
        assert!(r.changed.contains(&r.map_path), "the map changes");
    }
    let one_cpu = cpu_per_run(c0, reps);
    let map_bytes = std::fs::metadata(root.join(".claude/code-map.md")).unwrap().len();

    // The hook's question, asked of the fresh map: HEAD from the files vs the stamp.
    let calls = 10_000;
    let t = Instant::now();
    for _ in 0..calls {
        assert_eq!(pcmail_codemap_check::stale_line(&root), None);
    }
    let hook_check = t.elapsed() / calls;

    let this_repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let this_opts = Options::new(&this_repo);
    let mut this = vec![];
    let mut this_files = 0;
    let c0 = cpu_time();
    for _ in 0..reps {
        let t = Instant::now();
        let b = build(&this_opts, None).unwrap();
        this.push(t.elapsed());
        this_files = b.report.files;
    }

    let this_cpu = cpu_per_run(c0, reps);
    let (f, s, o, r) = (median(full), median(same), median(one), median(this));
    println!(
        "code map, {files}-file generated repo ({:.1} MB map), median of {reps} runs ({} for the full run):",
        map_bytes as f64 / 1e6,
        reps.min(3)
    );
    println!("  full run (empty cache)        {}  ({full_cpu})", ms(f));
    println!("  re-run, nothing changed       {}  ({same_cpu})", ms(s));
    println!(
        "  re-run, one file changed      {}  ({one_cpu}; target <= 200 ms; {:.0}x faster than full)",
        ms(o),
        f.as_secs_f64() / o.as_secs_f64()
    );
    println!("this repo, full run, no cache   {}  ({this_cpu}; {this_files} files; target <= 2 s)", ms(r));
    println!("stale_line (the hook's check), fresh map   {:.1} µs per call", hook_check.as_secs_f64() * 1e6);
    println!(
        "machine: {} cores, load average {} at the end",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        load()
    );
}
