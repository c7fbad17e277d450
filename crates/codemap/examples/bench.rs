//! Code map timings: `cargo run --release -p pcmail-codemap --example bench`.
//! A generated 5,000-file repo (Rust, Python, TypeScript, JavaScript, Go) with
//! a real store file: a full run, a re-run with nothing changed, a re-run with
//! one changed file; then a full run (no cache) of this repository.
//! Each figure is the median of the repetitions (PCMAIL_BENCH_REPS, default 5).

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

fn main() {
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
