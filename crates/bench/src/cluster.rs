//! `pcmail-bench server-pg`: the same seeded history served by SQLite ×1,
//! PostgreSQL ×1 and PostgreSQL ×2 instances (one throwaway PostgreSQL from
//! pcmail-pgtest, filled from the SQLite file by `migrate_from_sqlite`, as
//! `pcmail serve --migrate-from` does), loaded by the same clients in one
//! run: polls/s, latency, and server CPU per poll (from /proc), then the
//! cross-instance wake-ups: a send through instance B waking a long poll on
//! instance A, and (with the `pcmail` binary) hook → seen with whole
//! processes, the sender on B and the receiving daemon on A.

use super::{
    catch_up, env_num, load_paced, pct, poll_load_across, seed, send_to_long_poller, Load, Req, ServerChild, Settings,
    PCS,
};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// CPU time (user + system) in milliseconds of a process; with `children`,
/// also what its reaped children used (PostgreSQL's backends that exited).
pub(crate) fn cpu_ms(pid: u32, children: bool) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).with_context(|| format!("/proc/{pid}/stat"))?;
    // The command name may hold spaces: the fields start after its closing parenthesis.
    let rest = stat.rsplit_once(')').context("stat format")?.1;
    let f: Vec<u64> = rest.split_whitespace().skip(11).take(4).map(|x| x.parse().unwrap_or(0)).collect();
    let ticks = if children { f.iter().sum() } else { f[0] + f[1] };
    Ok(ticks as f64 * 1000.0 / clock_ticks())
}

/// How often a process's threads have gone to sleep (voluntary context
/// switches, every thread's, from /proc): each is a wait for work, and each
/// wake-up after it costs the CPU a switch back.
fn sleeps(pid: u32) -> Result<u64> {
    let mut n = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).with_context(|| format!("/proc/{pid}/task"))? {
        // A thread that ended meanwhile has nothing more to count.
        let Ok(status) = std::fs::read_to_string(task?.path().join("status")) else { continue };
        n += status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
    }
    Ok(n)
}

/// A process's resident memory now and at its peak (MB), from /proc.
pub(crate) fn rss_mb(pid: u32) -> Result<(f64, f64)> {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).with_context(|| format!("/proc/{pid}/status"))?;
    let kb = |key: &str| -> f64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    Ok((kb("VmRSS:") / 1024.0, kb("VmHWM:") / 1024.0))
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf reads a constant of the running system.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

fn ppid(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

/// The PostgreSQL cluster's CPU so far: the postmaster with its reaped
/// children, and every live backend and helper process under it.
fn postgres_cpu_ms(postmaster: u32) -> Result<f64> {
    let mut total = cpu_ms(postmaster, true)?;
    for e in std::fs::read_dir("/proc")?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        if ppid(pid) == Some(postmaster) {
            total += cpu_ms(pid, false).unwrap_or(0.0); // it may have exited meanwhile
        }
    }
    Ok(total)
}

fn postmaster_pid(pg: &pcmail_pgtest::Postgres) -> Result<u32> {
    let f: PathBuf = pg.socket_dir().parent().context("cluster folder")?.join("data/postmaster.pid");
    let text = std::fs::read_to_string(&f).with_context(|| format!("{}", f.display()))?;
    text.lines().next().and_then(|l| l.trim().parse().ok()).context("postmaster.pid")
}

struct Phase {
    name: &'static str,
    load: Load,
    /// pcmail serve processes' CPU per poll (ms).
    serve_cpu: f64,
    /// PostgreSQL's CPU per poll (ms); 0 for SQLite (in the server process).
    db_cpu: f64,
    /// send → delivered at a long poller: (poll on, send through, latencies).
    wake: (String, Vec<f64>),
    /// The same polls at a fixed rate, below what either store can answer.
    paced: Load,
}

impl Phase {
    fn cpu(&self) -> f64 {
        self.serve_cpu + self.db_cpu
    }
}

fn run_phase(
    name: &'static str,
    servers: &[ServerChild],
    postmaster: Option<u32>,
    s: &Settings,
    salt: u32,
) -> Result<Phase> {
    let urls: Vec<String> = servers.iter().map(|x| x.url.clone()).collect();
    let cursors = catch_up(&urls[0])?;
    // Unmeasured: every client thread's connections, and each instance's pool, open first.
    let warm =
        Settings { threads: s.threads, phase: s.phase.min(Duration::from_secs(2)), round_trips: 0, paced_rate: 0.0 };
    poll_load_across(&urls, &warm, cursors.clone())?;
    let serve_cpu = || -> Result<f64> { servers.iter().map(|x| cpu_ms(x.pid(), false)).sum() };
    let db_cpu = || -> Result<f64> { postmaster.map(postgres_cpu_ms).transpose().map(|c| c.unwrap_or(0.0)) };
    let (s0, d0) = (serve_cpu()?, db_cpu()?);
    let load = poll_load_across(&urls, s, cursors.clone())?;
    let (s1, d1) = (serve_cpu()?, db_cpu()?);
    let n = load.count.max(1) as f64;
    let paced = load_paced(&urls, s, cursors, Req::Poll, Some(s.paced_rate))?;
    // The long poll on the first instance, the send through the last (another one when there are two).
    let (poll_url, send_url) = (&urls[0], &urls[urls.len() - 1]);
    let lat = send_to_long_poller(poll_url, send_url, s.round_trips, salt)?;
    let how = if urls.len() > 1 { "poll on A, send through B" } else { "one instance" };
    let p = Phase { name, load, serve_cpu: (s1 - s0) / n, db_cpu: (d1 - d0) / n, wake: (how.into(), lat), paced };
    let r = &p.load;
    println!(
        "  {:<14} {:>7.0} polls/s ({} in {:.1} s, {} errors); p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms; \
         CPU per poll {:.3} ms (pcmail serve {:.3} + database {:.3})",
        p.name,
        r.rps(),
        r.count,
        r.secs,
        r.errors,
        r.p(0.5),
        r.p(0.99),
        r.p(1.0),
        p.cpu(),
        p.serve_cpu,
        p.db_cpu
    );
    println!(
        "  {:<14} at {:.0} polls/s offered ({:.0} answered, {} errors): p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms",
        "",
        s.paced_rate,
        p.paced.rps(),
        p.paced.errors,
        p.paced.p(0.5),
        p.paced.p(0.99),
        p.paced.p(1.0)
    );
    println!(
        "  {:<14} send → delivered+confirmed at a long poller ({}, {} round trips): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        "",
        p.wake.0,
        p.wake.1.len(),
        pct(&p.wake.1, 0.5),
        pct(&p.wake.1, 0.99),
        pct(&p.wake.1, 1.0)
    );
    Ok(p)
}

/// One flat-out phase of the alternation: polls per second and CPU per poll
/// (every instance of the pair and the database, the idle one included).
struct Flat {
    rps: f64,
    /// pcmail serve's CPU per poll (ms), both instances.
    serve: f64,
    /// PostgreSQL's CPU per poll (ms).
    db: f64,
    /// The `pcmail serve` threads' sleeps per poll, both instances.
    sleeps: f64,
}

impl Flat {
    fn cpu(&self) -> f64 {
        self.serve + self.db
    }
}

/// `pairs` measurements of `a` and `b` side by side, the order swapped every
/// pair (a b, b a, a b, …): this machine's speed drifts within a run by more
/// than the differences measured, so each `b` is judged against the `a`
/// beside it, and a drift favours neither side.
fn in_pairs<T>(
    pairs: usize,
    mut a: impl FnMut() -> Result<T>,
    mut b: impl FnMut() -> Result<T>,
) -> Result<Vec<(T, T)>> {
    (0..pairs)
        .map(|pair| {
            if pair % 2 == 0 {
                let first = a()?;
                Ok((first, b()?))
            } else {
                let second = b()?;
                Ok((a()?, second))
            }
        })
        .collect()
}

/// Flat-out loads on the first instance alone and on both ([`in_pairs`]) on
/// the same two running instances.
fn alternated(
    one: &ServerChild,
    two: &[ServerChild],
    postmaster: u32,
    s: &Settings,
    pairs: usize,
) -> Result<Vec<(Flat, Flat)>> {
    let single = vec![one.url.clone()];
    let urls: Vec<String> = two.iter().map(|x| x.url.clone()).collect();
    let cursors = catch_up(&urls[0])?;
    // Every instance's CPU either way (the idle ones' too), and the database's.
    let cpu = || -> Result<(f64, f64)> {
        let serve: f64 = std::iter::once(one).chain(two).map(|x| cpu_ms(x.pid(), false)).sum::<Result<f64>>()?;
        Ok((serve, postgres_cpu_ms(postmaster)?))
    };
    let slept = || -> Result<u64> { std::iter::once(one).chain(two).map(|x| sleeps(x.pid())).sum() };
    let flat = |across: &[String]| -> Result<Flat> {
        let ((s0, d0), z0) = (cpu()?, slept()?);
        let load = poll_load_across(across, s, cursors.clone())?;
        let ((s1, d1), z1) = (cpu()?, slept()?);
        let n = load.count.max(1) as f64;
        Ok(Flat { rps: load.rps(), serve: (s1 - s0) / n, db: (d1 - d0) / n, sleeps: (z1 - z0) as f64 / n })
    };
    let out = in_pairs(pairs, || flat(&single), || flat(&urls))?;
    for (pair, (one, two)) in out.iter().enumerate() {
        println!(
            "  pair {}: ×1 {:.0} polls/s, CPU per poll {:.3} ms ({:.3} + {:.3}), {:.2} sleeps; ×2 {:.0} polls/s, {:.3} ms \
             ({:.3} + {:.3}), {:.2} sleeps: throughput {:.2}x, CPU {:.2}x",
            pair + 1,
            one.rps,
            one.cpu(),
            one.serve,
            one.db,
            one.sleeps,
            two.rps,
            two.cpu(),
            two.serve,
            two.db,
            two.sleeps,
            two.rps / one.rps,
            two.cpu() / one.cpu()
        );
    }
    Ok(out)
}

/// The paced polls on SQLite ×1 and PostgreSQL ×1 in pairs ([`in_pairs`]),
/// both servers running throughout: a p99 is the few slowest polls, which a
/// moment of this machine's other work decides.
/// (SQLite's p99, PostgreSQL's p99) per pair.
fn alternated_paced(sqlite: &ServerChild, pg: &ServerChild, s: &Settings, pairs: usize) -> Result<Vec<(f64, f64)>> {
    let (lite_url, pg_url) = (vec![sqlite.url.clone()], vec![pg.url.clone()]);
    let (lite_cursors, pg_cursors) = (catch_up(&lite_url[0])?, catch_up(&pg_url[0])?);
    let paced = |urls: &[String], cursors: &[i64]| -> Result<f64> {
        Ok(load_paced(urls, s, cursors.to_vec(), Req::Poll, Some(s.paced_rate))?.p(0.99))
    };
    let out = in_pairs(pairs, || paced(&lite_url, &lite_cursors), || paced(&pg_url, &pg_cursors))?;
    for (pair, (lite, pg)) in out.iter().enumerate() {
        println!("  pair {}: p99 SQLite {lite:.2} ms, PostgreSQL {pg:.2} ms: {:.2}x", pair + 1, pg / lite);
    }
    Ok(out)
}

pub(crate) fn bench_server_pg() -> Result<()> {
    let s = Settings {
        threads: env_num("PCMAIL_BENCH_THREADS", 12),
        phase: Duration::from_secs(env_num("PCMAIL_BENCH_SECS", 8) as u64),
        round_trips: env_num("PCMAIL_BENCH_ROUND_TRIPS", 100),
        // At least one poll a second: a rate of 0 would be no schedule at all.
        paced_rate: env_num("PCMAIL_BENCH_PACED_RATE", 1000).max(1) as f64,
    };
    let history = env_num("PCMAIL_BENCH_MAILS", 100_000);
    let rounds = env_num("PCMAIL_BENCH_ROUNDS", 40);
    println!(
        "pcmail-bench server-pg: {PCS} PCs, {history} mails of history, {} client threads (keep-alive), {:?} per phase",
        s.threads, s.phase
    );
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("server.db");
    let t = Instant::now();
    seed(&db, history)?;
    let seeded = t.elapsed();
    let t = Instant::now();
    let pg = pcmail_pgtest::Postgres::start();
    let url = pg.create_database("bench");
    let target = pcmail_server::store::pg_url::PgTarget::parse(&url, None)?;
    let report = pcmail_server::migrate_from::migrate_from_sqlite(&db, &target)?;
    println!(
        "seeded SQLite in {:.1} s; copied {} rows into PostgreSQL in {:.1} s (the same data for every phase)\n",
        seeded.as_secs_f64(),
        report.total_rows(),
        t.elapsed().as_secs_f64()
    );
    let postmaster = postmaster_pid(&pg)?;
    // The instances' URL: each keeps a pool of this many connections (pcmail's default when unset).
    let url = match std::env::var("PCMAIL_BENCH_PG_POOL") {
        Ok(n) => {
            println!("each instance's pool: {n} connections (PCMAIL_BENCH_PG_POOL)\n");
            format!("{url}&pool_size={n}")
        }
        Err(_) => url,
    };

    // At least one pair: none would leave the ratios judged without a figure.
    let pairs_n = env_num("PCMAIL_BENCH_PAIRS", 3).max(1);
    let sqlite_server = ServerChild::start(&db)?;
    let sqlite = run_phase("SQLite ×1", std::slice::from_ref(&sqlite_server), None, &s, 0)?;
    // One instance with all of this host's cores: PostgreSQL ×1 throughout.
    let pg_one = ServerChild::start(&url)?;
    let (pg1, paced_pairs) = {
        let p = run_phase("PostgreSQL ×1", std::slice::from_ref(&pg_one), Some(postmaster), &s, 1)?;
        println!(
            "\n  at {:.0} polls/s offered, SQLite ×1 and PostgreSQL ×1 alternated, {pairs_n} pairs:",
            s.paced_rate
        );
        let pairs = alternated_paced(&sqlite_server, &pg_one, &s, pairs_n)?;
        println!();
        (p, pairs)
    };
    drop(sqlite_server);
    let (pg2, seen, pairs) = {
        // Two instances on one host split its cores, as docs/deployment.md
        // tells a deployment to (`pcmail serve --threads`).
        let cores = std::thread::available_parallelism().map(usize::from).unwrap_or(1);
        let threads = (cores / 2).max(1);
        println!("  the two instances share this host's {cores} cores: pcmail serve --threads {threads} each\n");
        let servers = [ServerChild::start_with(&url, Some(threads))?, ServerChild::start_with(&url, Some(threads))?];
        let p = run_phase("PostgreSQL ×2", &servers, Some(postmaster), &s, 2)?;
        let seen = match pcmail_bin() {
            Some(bin) => Some(seen_across(&bin, &servers[0].url, &servers[1].url, rounds)?),
            None => None,
        };
        println!(
            "\n  flat out, ×1 (the instance with all {cores} cores) and ×2 (the two of --threads {threads}) alternated, {pairs_n} pairs (sleeps: how often per poll a `pcmail serve` thread waited for work):"
        );
        let pairs = alternated(&pg_one, &servers, postmaster, &s, pairs_n)?;
        (p, seen, pairs)
    };

    println!("\nratios (this run):");
    println!(
        "  PostgreSQL ×2 vs ×1, the phases above: throughput {:.2}x, CPU per poll {:.2}x (pcmail serve alone {:.2}x)",
        pg2.load.rps() / pg1.load.rps(),
        pg2.cpu() / pg1.cpu(),
        pg2.serve_cpu / pg1.serve_cpu
    );
    let through: Vec<f64> = pairs.iter().map(|(one, two)| two.rps / one.rps).collect();
    let cpu: Vec<f64> = pairs.iter().map(|(one, two)| two.cpu() / one.cpu()).collect();
    let list = |v: &[f64]| v.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join(", ");
    println!(
        "  PostgreSQL ×2 vs ×1, alternated pairs: throughput median {:.2}x ({}; target ≥ 1), CPU per poll median {:.2}x ({}; target ≤ 1.2)",
        pct(&through, 0.5),
        list(&through),
        pct(&cpu, 0.5),
        list(&cpu)
    );
    let p99s: Vec<f64> = paced_pairs.iter().map(|(lite, pg)| pg / lite).collect();
    println!(
        "  PostgreSQL ×1 vs SQLite ×1 at {:.0} polls/s offered, alternated pairs: p99 median {:.2}x ({}; target ≤ 2)",
        s.paced_rate,
        pct(&p99s, 0.5),
        list(&p99s)
    );
    println!(
        "  PostgreSQL ×1 vs SQLite ×1 at {:.0} polls/s offered, the phases above: p99 {:.2}x, p50 {:.2}x",
        s.paced_rate,
        pg1.paced.p(0.99) / sqlite.paced.p(0.99),
        pg1.paced.p(0.5) / sqlite.paced.p(0.5)
    );
    println!(
        "  PostgreSQL ×1 vs SQLite ×1 flat out: p99 {:.2}x, p50 {:.2}x, throughput {:.2}x, CPU per poll {:.2}x",
        pg1.load.p(0.99) / sqlite.load.p(0.99),
        pg1.load.p(0.5) / sqlite.load.p(0.5),
        pg1.load.rps() / sqlite.load.rps(),
        pg1.cpu() / sqlite.cpu()
    );
    println!(
        "  cross-instance send → delivered: p50 {:.1} ms, p99 {:.1} ms (target p50 < 200, p99 < 1000)",
        pct(&pg2.wake.1, 0.5),
        pct(&pg2.wake.1, 0.99)
    );
    match seen {
        Some((delivered, seen)) => {
            println!(
                "  whole processes across instances ({} rounds): send (CLI, through B) → delivered at a daemon on A: \
                 p50 {:.0} ms, p99 {:.0} ms; hook shows mail → sender's status (through B) says seen: p50 {:.0} ms, p99 {:.0} ms",
                delivered.len(),
                pct(&delivered, 0.5),
                pct(&delivered, 0.99),
                pct(&seen, 0.5),
                pct(&seen, 0.99)
            );
        }
        None => println!("  (hook → seen needs the pcmail binary beside this one, or PCMAIL_BIN)"),
    }
    Ok(())
}

fn pcmail_bin() -> Option<PathBuf> {
    let p = match std::env::var_os("PCMAIL_BIN") {
        Some(p) => PathBuf::from(p),
        None => std::env::current_exe().ok()?.with_file_name("pcmail"),
    };
    p.exists().then_some(p)
}

/// `pcmail-bench seen` across two instances: PC A (the sender) talks to
/// `url_b`, PC B (its daemon long-polling, and its hook) to `url_a`.
fn seen_across(pcmail: &Path, url_a: &str, url_b: &str, rounds: usize) -> Result<(Vec<f64>, Vec<f64>)> {
    let dir = tempfile::tempdir()?;
    let run = super::seen_rounds(pcmail, dir.path(), url_b, url_a, rounds)?;
    Ok((run.delivered_ms, run.seen_ms))
}
