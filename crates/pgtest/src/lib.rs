//! A throwaway PostgreSQL for tests and benchmarks.
//!
//! Each [`Postgres`] is a cluster of its own: a data folder copied from a
//! template made once with the system's `initdb`, its own port and Unix
//! socket folder, never the distribution's cluster on 5432. `initdb` and
//! `postgres` refuse to run as root, so as root they run as the `postgres`
//! user (Debian's package makes it) on folders it owns. The server process
//! is started from a thread that lives as long as the cluster, with a parent
//! death signal: a test killed with SIGKILL takes its PostgreSQL with it.
//!
//! Nothing here skips: when PostgreSQL cannot be found or started, `start`
//! panics with the reason and the server's log, so a suite that needs it
//! fails loudly.

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How a cluster is set up beyond the Unix socket (always there, `trust`).
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Also listen on 127.0.0.1 (a free port), where every login needs a
    /// password (scram-sha-256).
    pub tcp: bool,
    /// TLS on the TCP port with a certificate made for `localhost` and
    /// 127.0.0.1 by a CA of its own (`ca_cert`), and only TLS there; implies `tcp`.
    pub tls: bool,
    /// The password of the `postgres` role over TCP.
    pub password: Option<String>,
}

/// A running throwaway cluster; stopped (fast shutdown) and deleted on drop.
pub struct Postgres {
    dir: tempfile::TempDir,
    port: u16,
    opts: Options,
    keeper: Option<Keeper>,
}

/// The thread that started the server process (the parent death signal is
/// tied to the thread that forked) and that signals and reaps it.
struct Keeper {
    cmds: mpsc::Sender<KeeperCmd>,
    thread: std::thread::JoinHandle<()>,
}

enum KeeperCmd {
    /// Send this signal and wait for the process to exit.
    Stop(i32, mpsc::Sender<()>),
}

impl Postgres {
    /// A cluster with only its Unix socket (trust authentication).
    pub fn start() -> Postgres {
        Postgres::start_with(Options::default())
    }

    pub fn start_with(opts: Options) -> Postgres {
        let bin = bindir();
        let owner = Owner::current();
        remove_stale_clusters();
        let template = template(&bin, &owner);
        let dir = tempfile::Builder::new().prefix("pcmail-pg-").tempdir().expect("a temporary folder");
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).expect("chmod the cluster folder");
        owner.chown(dir.path());
        let data = dir.path().join("data");
        let status = Command::new("cp").arg("-a").arg(&template).arg(&data).status().expect("cp runs");
        assert!(status.success(), "copying the template cluster {} failed", template.display());
        fs::create_dir(dir.path().join("sock")).expect("socket folder");
        owner.chown(&dir.path().join("sock"));
        let mut opts = opts;
        opts.tcp |= opts.tls;
        if opts.tls {
            write_tls_files(dir.path(), &owner);
            // Over TCP only TLS is accepted: a client that tries clear text is refused.
            let hba = data.join("pg_hba.conf");
            fs::write(&hba, "local all all trust\nhostssl all all 127.0.0.1/32 scram-sha-256\nhostssl all all ::1/128 scram-sha-256\n")
                .expect("pg_hba.conf");
            owner.chown(&hba);
        }
        let mut pg = Postgres { dir, port: 0, opts, keeper: None };
        let mut last_err = String::new();
        for _ in 0..5 {
            pg.port = free_port();
            match pg.launch(&bin, &owner) {
                Ok(()) => {
                    pg.after_start();
                    return pg;
                }
                // Another process took the port between our probe and the bind: try another.
                Err(e) => last_err = e,
            }
        }
        panic!("PostgreSQL did not start (5 tries):\n{last_err}");
    }

    fn launch(&mut self, bin: &Path, owner: &Owner) -> Result<(), String> {
        let data = self.dir.path().join("data");
        let sock = self.dir.path().join("sock");
        let log = self.dir.path().join("postgres.log");
        let _ = fs::remove_file(&log);
        let logf = fs::File::create(&log).map_err(|e| format!("log file: {e}"))?;
        owner.chown(&log);
        let mut cmd = Command::new(bin.join("postgres"));
        cmd.arg("-D").arg(&data).arg("-p").arg(self.port.to_string()).arg("-k").arg(&sock);
        let listen = if self.opts.tcp { "127.0.0.1" } else { "" };
        cmd.arg("-c").arg(format!("listen_addresses={listen}"));
        for setting in [
            // A test cluster: durability across an OS crash is not wanted, speed
            // is. Commits still write the WAL (synchronous_commit stays on), so a
            // crash of PostgreSQL itself (`crash`) keeps every committed row.
            "fsync=off",
            "full_page_writes=off",
            "max_connections=300",
            "shared_buffers=32MB",
            "max_locks_per_transaction=256",
            "max_pred_locks_per_transaction=256",
            "log_min_messages=warning",
            "log_min_error_statement=panic",
        ] {
            cmd.arg("-c").arg(setting);
        }
        if self.opts.tls {
            let d = self.dir.path();
            cmd.arg("-c").arg("ssl=on");
            cmd.arg("-c").arg(format!("ssl_cert_file={}", d.join("server.crt").display()));
            cmd.arg("-c").arg(format!("ssl_key_file={}", d.join("server.key").display()));
        }
        cmd.stdin(Stdio::null()).stdout(logf.try_clone().map_err(|e| e.to_string())?).stderr(logf);
        owner.apply(&mut cmd);
        let (ready_tx, ready_rx) = mpsc::channel::<std::io::Result<()>>();
        let (cmd_tx, cmd_rx) = mpsc::channel::<KeeperCmd>();
        let thread = std::thread::Builder::new()
            .name("pgtest-keeper".into())
            .spawn(move || keeper(cmd, ready_tx, cmd_rx))
            .map_err(|e| e.to_string())?;
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(format!("spawning {}: {e}", bin.join("postgres").display())),
            Err(_) => return Err("the keeper thread died".into()),
        }
        self.keeper = Some(Keeper { cmds: cmd_tx, thread });
        // Ready when a connection over the socket works.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match postgres::Config::new()
                .host_path(&sock)
                .port(self.port)
                .user("postgres")
                .dbname("postgres")
                .connect_timeout(Duration::from_secs(2))
                .connect(postgres::NoTls)
            {
                Ok(_) => return Ok(()),
                Err(e) => {
                    if self.keeper.as_ref().is_some_and(|k| k.thread.is_finished()) || Instant::now() > deadline {
                        self.keeper = None;
                        return Err(format!("{e}\n--- postgres.log ---\n{}", self.log_tail(4000)));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }

    fn after_start(&self) {
        if let Some(pw) = &self.opts.password {
            let mut c = self.admin();
            let quoted = pw.replace('\'', "''");
            c.batch_execute(&format!("ALTER ROLE postgres PASSWORD '{quoted}'")).expect("set the password");
        }
    }

    /// The port (also the number in the socket's file name).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The folder holding the Unix socket.
    pub fn socket_dir(&self) -> PathBuf {
        self.dir.path().join("sock")
    }

    /// The CA certificate that signed the server's (when started with `tls`).
    pub fn ca_cert(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// A connection URL for database `db` over the Unix socket, as user `postgres`.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@/{db}?host={}&port={}", self.socket_dir().display(), self.port)
    }

    /// A URL for `db` over TCP on 127.0.0.1 (needs `Options::tcp`); no password in it.
    pub fn tcp_url(&self, db: &str) -> String {
        assert!(self.opts.tcp, "this cluster was started without TCP");
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// An admin connection to the `postgres` database over the socket.
    pub fn admin(&self) -> postgres::Client {
        self.connect("postgres")
    }

    pub fn connect(&self, db: &str) -> postgres::Client {
        postgres::Config::new()
            .host_path(self.socket_dir())
            .port(self.port)
            .user("postgres")
            .dbname(db)
            .connect(postgres::NoTls)
            .unwrap_or_else(|e| panic!("connecting to the test cluster: {e}\n{}", self.log_tail(2000)))
    }

    /// Creates an empty database and returns its URL (over the socket).
    pub fn create_database(&self, name: &str) -> String {
        assert!(name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'), "a plain database name: {name}");
        self.admin().batch_execute(&format!("CREATE DATABASE {name}")).expect("create database");
        self.url(name)
    }

    /// Creates `name` as a copy of database `template` (which nobody may be connected to).
    pub fn create_database_from(&self, name: &str, template: &str) -> String {
        for n in [name, template] {
            assert!(n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'), "a plain database name: {n}");
        }
        self.admin()
            .batch_execute(&format!("CREATE DATABASE {name} TEMPLATE {template} STRATEGY FILE_COPY"))
            .expect("create database from template");
        self.url(name)
    }

    /// Ends the server at once, as a crash would (SIGQUIT: immediate shutdown,
    /// no checkpoint; the next start recovers from the WAL).
    pub fn crash(&mut self) {
        self.signal_and_wait(libc::SIGQUIT);
    }

    /// Starts the server again on the same data, port and socket (after `crash`).
    pub fn restart(&mut self) {
        if self.keeper.is_some() {
            self.signal_and_wait(libc::SIGINT);
        }
        let (bin, owner) = (bindir(), Owner::current());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match self.launch(&bin, &owner) {
                Ok(()) => return,
                Err(e) if Instant::now() > deadline => panic!("PostgreSQL did not restart: {e}"),
                // The old socket or port may still be in its last moments.
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    fn signal_and_wait(&mut self, sig: i32) {
        if let Some(k) = self.keeper.take() {
            let (tx, rx) = mpsc::channel();
            if k.cmds.send(KeeperCmd::Stop(sig, tx)).is_ok() {
                let _ = rx.recv_timeout(Duration::from_secs(30));
            }
            let _ = k.thread.join();
        }
    }

    /// The last `max` bytes of the server's log.
    pub fn log_tail(&self, max: u64) -> String {
        let Ok(mut f) = fs::File::open(self.dir.path().join("postgres.log")) else { return String::new() };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = f.seek(SeekFrom::Start(len.saturating_sub(max)));
        let mut s = String::new();
        let _ = f.read_to_string(&mut s);
        s
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // Fast shutdown: open sessions are ended, nothing is waited for.
        self.signal_and_wait(libc::SIGINT);
    }
}

fn keeper(mut cmd: Command, ready: mpsc::Sender<std::io::Result<()>>, cmds: mpsc::Receiver<KeeperCmd>) {
    let mut child: Child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let _ = ready.send(Ok(()));
    loop {
        match cmds.recv_timeout(Duration::from_millis(100)) {
            Ok(KeeperCmd::Stop(sig, done)) => {
                // SAFETY: kill(2) on our own child's pid.
                unsafe { libc::kill(child.id() as i32, sig) };
                let deadline = Instant::now() + Duration::from_secs(20);
                loop {
                    if let Ok(Some(_)) = child.try_wait() {
                        break;
                    }
                    if Instant::now() > deadline {
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                let _ = done.send(());
                return;
            }
            // The Postgres handle is gone without a stop (cannot happen through
            // Drop, which always stops): end the server rather than leak it.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
                let _ = child.wait();
                return;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Ok(Some(_)) = child.try_wait() {
                    // It exited on its own (crashed, or killed from outside): nothing to keep.
                    return;
                }
            }
        }
    }
}

/// The folder with `initdb` and `postgres`: `PCMAIL_PG_BINDIR`, else the
/// newest under `/usr/lib/postgresql/*/bin` (Debian, not on PATH), else
/// `pg_config --bindir`.
pub fn bindir() -> PathBuf {
    if let Some(d) = std::env::var_os("PCMAIL_PG_BINDIR") {
        return PathBuf::from(d);
    }
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return bin;
    }
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if p.join("postgres").exists() {
            return p;
        }
    }
    panic!(
        "PostgreSQL is not installed: no /usr/lib/postgresql/*/bin/postgres and no pg_config \
         (bash scripts/install-deps.sh installs Debian's postgresql package; PCMAIL_PG_BINDIR names another)"
    );
}

/// Who runs `initdb` and `postgres`: ourselves, or as root the `postgres` user.
struct Owner {
    ids: Option<(u32, u32)>,
}

impl Owner {
    fn current() -> Owner {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Owner { ids: None };
        }
        let name = std::ffi::CString::new("postgres").expect("no NUL");
        // SAFETY: getpwnam with a valid C string; the fields are copied at once.
        let pw = unsafe { libc::getpwnam(name.as_ptr()) };
        assert!(
            !pw.is_null(),
            "running as root and there is no `postgres` user to run PostgreSQL as (Debian's postgresql package makes it)"
        );
        let ids = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
        Owner { ids: Some(ids) }
    }

    fn chown(&self, path: &Path) {
        if let Some((uid, gid)) = self.ids {
            std::os::unix::fs::chown(path, Some(uid), Some(gid))
                .unwrap_or_else(|e| panic!("chown {} to postgres: {e}", path.display()));
        }
    }

    fn uid(&self) -> u32 {
        // SAFETY: geteuid has no preconditions.
        self.ids.map(|(u, _)| u).unwrap_or_else(|| unsafe { libc::geteuid() })
    }

    fn apply(&self, cmd: &mut Command) {
        if let Some((uid, gid)) = self.ids {
            cmd.uid(uid).gid(gid);
        }
        // Runs after the uid change (which would clear it): the server dies
        // with the thread that started it, i.e. with the test process.
        // SAFETY: prctl is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGQUIT) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
}

/// The template data folder, made once per PostgreSQL build and user with
/// `initdb` (about a second), then copied for every cluster (tens of ms).
fn template(bin: &Path, owner: &Owner) -> PathBuf {
    let version = Command::new(bin.join("postgres"))
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|e| panic!("running {}: {e}", bin.join("postgres").display()));
    let tag: String = version.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let root = std::env::temp_dir().join(format!("pcmail-pgtest-{me}"));
    fs::create_dir_all(&root).expect("template root");
    let meta = fs::metadata(&root).expect("template root");
    use std::os::unix::fs::MetadataExt;
    assert!(
        meta.uid() == me && meta.mode() & 0o022 == 0 || {
            fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).is_ok() && meta.uid() == me
        },
        "{} is not ours: refusing to use a template someone else could change",
        root.display()
    );
    let dir = root.join(format!("template-{tag}-v1"));
    if dir.join("PG_VERSION").exists() {
        return dir;
    }
    // One maker at a time; the others wait, then find it made.
    let lock = fs::File::create(root.join("lock")).expect("template lock");
    // SAFETY: flock on an open file descriptor.
    unsafe { libc::flock(std::os::unix::io::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) };
    if dir.join("PG_VERSION").exists() {
        return dir;
    }
    let work = root.join(format!("making-{}", std::process::id()));
    let _ = fs::remove_dir_all(&work);
    fs::create_dir(&work).expect("template work folder");
    owner.chown(&work);
    let data = work.join("data");
    let mut cmd = Command::new(bin.join("initdb"));
    cmd.arg("-D").arg(&data).args(["-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C"]);
    cmd.stdin(Stdio::null());
    if let Some((uid, gid)) = owner.ids {
        cmd.uid(uid).gid(gid);
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("running {}: {e}", bin.join("initdb").display()));
    assert!(
        out.status.success(),
        "initdb failed (uid {}):\n{}{}",
        owner.uid(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The socket trusts (it is in a 0700 folder only this user reaches); TCP needs a password.
    fs::write(
        data.join("pg_hba.conf"),
        "local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\nhost all all ::1/128 scram-sha-256\n",
    )
    .expect("pg_hba.conf");
    owner.chown(&data.join("pg_hba.conf"));
    fs::rename(&data, &dir).expect("template in place");
    let _ = fs::remove_dir_all(&work);
    dir
}

/// Clusters of test processes that were killed (their folder outlives them:
/// the server dies with the process, the folder is not removed): a folder
/// over ten minutes old whose server is not running is deleted.
fn remove_stale_clusters() {
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        if !name.to_string_lossy().starts_with("pcmail-pg-") {
            continue;
        }
        let path = e.path();
        let old = fs::metadata(&path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > Duration::from_secs(600));
        if !old {
            continue;
        }
        let running = fs::read_to_string(path.join("data/postmaster.pid"))
            .ok()
            .and_then(|s| s.lines().next().and_then(|l| l.trim().parse::<i32>().ok()))
            // SAFETY: signal 0 only asks whether the process exists.
            .is_some_and(|pid| unsafe { libc::kill(pid, 0) } == 0);
        if !running {
            let _ = fs::remove_dir_all(&path);
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// A CA and a server certificate for localhost / 127.0.0.1 signed by it.
fn write_tls_files(dir: &Path, owner: &Owner) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(rcgen::DnType::CommonName, "pcmail test CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).expect("CA certificate");
    let key = KeyPair::generate().expect("server key");
    let params = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).expect("server params");
    let cert = params.signed_by(&key, &ca).expect("server certificate");
    fs::write(dir.join("ca.crt"), ca.pem()).expect("ca.crt");
    fs::write(dir.join("server.crt"), cert.pem()).expect("server.crt");
    let key_path = dir.join("server.key");
    fs::write(&key_path, key.serialize_pem()).expect("server.key");
    fs::set_permissions(&key_path, fs::Permissions::from_mode(0o600)).expect("chmod server.key");
    for f in ["ca.crt", "server.crt", "server.key"] {
        owner.chown(&dir.join(f));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_starts_answers_and_stops() {
        let pg = Postgres::start();
        let url = pg.create_database("t1");
        assert!(url.contains("/t1?host="), "{url}");
        let mut c = pg.connect("t1");
        let v: i32 = c.query_one("SELECT 41 + 1", &[]).unwrap().get(0);
        assert_eq!(v, 42);
        assert_ne!(pg.port(), 5432, "never the package's own cluster");
        let sock = pg.socket_dir().join(format!(".s.PGSQL.{}", pg.port()));
        assert!(sock.exists(), "the socket is in our own folder");
        drop(c);
        drop(pg);
        assert!(!sock.exists(), "stopped and deleted on drop");
    }

    #[test]
    fn a_crash_and_restart_keep_committed_rows() {
        let mut pg = Postgres::start();
        pg.create_database("t2");
        pg.connect("t2").batch_execute("CREATE TABLE x (v BIGINT); INSERT INTO x VALUES (7);").unwrap();
        pg.crash();
        assert!(postgres::Config::new()
            .host_path(pg.socket_dir())
            .port(pg.port())
            .user("postgres")
            .dbname("t2")
            .connect_timeout(Duration::from_millis(500))
            .connect(postgres::NoTls)
            .is_err());
        pg.restart();
        let v: i64 = pg.connect("t2").query_one("SELECT v FROM x", &[]).unwrap().get(0);
        assert_eq!(v, 7);
    }

    #[test]
    fn tcp_needs_the_password() {
        let pg = Postgres::start_with(Options { tcp: true, tls: false, password: Some("s3cret'x".into()) });
        let cfg = |pw: &str| {
            let mut c = postgres::Config::new();
            c.host("127.0.0.1").port(pg.port()).user("postgres").dbname("postgres").password(pw);
            c
        };
        assert!(cfg("wrong").connect(postgres::NoTls).is_err());
        assert!(cfg("s3cret'x").connect(postgres::NoTls).is_ok());
    }
}

#[cfg(test)]
mod kill_check {
    /// Held open so a script can SIGKILL the test process and see the server go too.
    #[test]
    #[ignore = "run by hand: kill -9 this test's process, then look for its postgres"]
    fn hold_a_cluster_for_a_minute() {
        let pg = super::Postgres::start();
        eprintln!("socket {}", pg.socket_dir().display());
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
}
