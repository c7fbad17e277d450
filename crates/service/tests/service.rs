//! The service manager parts against fakes on PATH that record their calls,
//! the self-healing rule on recorded `schtasks /Query` outputs, and the unit
//! through `systemd-analyze verify` where that tool exists.

use pcmail_service::*;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

const NOW: i64 = 1_800_000_000_000;

fn recorded(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/recorded").join(name)).unwrap()
}

fn list(name: &str) -> TaskInfo {
    parse_list(&recorded(name)).unwrap_or_else(|| panic!("{name} did not parse"))
}

#[test]
fn recorded_list_outputs_read_in_both_locales() {
    let en = list("list-en-running.txt");
    assert_eq!(en.task_name, "\\pcmail");
    assert_eq!(en.status, "Running");
    assert_eq!(en.last_result, Some(RUNNING));
    assert_eq!(en.task_to_run, "C:\\Users\\山田 太郎\\.cargo\\bin\\pcmail.exe daemon");
    let ja = list("list-ja-killed.txt");
    assert_eq!(ja.task_name, "\\pcmail");
    assert_eq!(ja.last_result, Some(0xC000_013A), "STATUS_CONTROL_C_EXIT printed as a negative number");
    assert_eq!(list("list-ja-running.txt").last_result, Some(RUNNING));
    assert_eq!(list("list-en-not-yet-run.txt").last_result, Some(NOT_YET_RUN));
    assert_eq!(list("list-en-failed.txt").last_result, Some(1));
}

#[test]
fn the_rule_on_recorded_outputs() {
    let fresh = Some(NOW - 2 * 60_000);
    let stale = Some(NOW - 11 * 60_000);
    let cases: &[(&str, Option<i64>, bool)] = &[
        ("list-en-running.txt", fresh, false),
        ("list-en-not-yet-run.txt", fresh, false),
        ("list-ja-running.txt", fresh, false),
        ("list-en-running.txt", stale, true), // running but hung: a poller once sat 13 hours silent while "running"
        ("list-en-failed.txt", fresh, true),
        ("list-ja-killed.txt", fresh, true),
    ];
    for (file, last_poll, repair) in cases {
        let reg = Registration::from_task(&list(file));
        let v = judge(&reg, *last_poll, NOW);
        assert_eq!(matches!(v, Verdict::Repair(_)), *repair, "{file} {last_poll:?}: {v:?}");
    }
    let csv_ok = parse_csv(&recorded("csv-en-running.txt")).unwrap();
    assert_eq!(csv_ok.last_result, Some(RUNNING));
    assert_eq!(judge(&Registration::from_task(&csv_ok), fresh, NOW), Verdict::Healthy);
    let csv_bad = parse_csv(&recorded("csv-en-file-not-found.txt")).unwrap();
    assert_eq!(csv_bad.last_result, Some(0x8007_0002));
    let Verdict::Repair(why) = judge(&Registration::from_task(&csv_bad), fresh, NOW) else { panic!() };
    assert!(why[0].contains("0x80070002"), "{why:?}");
}

/// A directory with a fake `program` that appends its arguments to `calls`
/// and behaves as the shell snippet `body` says.
struct Fake {
    dir: tempfile::TempDir,
}

impl Fake {
    fn new(program: &str, body: &str) -> Fake {
        let dir = tempfile::tempdir().unwrap();
        let calls = dir.path().join("calls");
        let script = format!("#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\n{body}\n", calls.display());
        let p = dir.path().join(program);
        std::fs::write(&p, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        Fake { dir }
    }

    /// PATH with only the fake's folder and the basics a shell script needs.
    fn path(&self) -> OsString {
        OsString::from(format!("{}:/usr/bin:/bin", self.dir.path().display()))
    }

    /// Calls since the last take.
    fn take(&self) -> Vec<String> {
        let p = self.dir.path().join("calls");
        let s = std::fs::read_to_string(&p).unwrap_or_default();
        let _ = std::fs::remove_file(&p);
        s.lines().map(String::from).collect()
    }
}

fn spec(dir: &Path) -> ServiceSpec {
    ServiceSpec { exe: dir.join("bin dir/山田/pcmail"), pcmail_home: Some(dir.join("home 1")), user: "PC\\u".into() }
}

fn systemd_manager(root: &Path, fake: &Fake) -> Manager {
    Manager {
        platform: Platform::SystemdUser,
        definition: definition_path(Platform::SystemdUser, &root.join("config"), root, &root.join("data")),
        path_env: Some(fake.path()),
    }
}

#[test]
fn systemd_install_twice_then_uninstall_twice_through_a_fake_systemctl() {
    let root = tempfile::tempdir().unwrap();
    let fake = Fake::new("systemctl", "case \"$*\" in *is-active*) echo active;; esac; exit 0");
    let m = systemd_manager(root.path(), &fake);
    assert_eq!(m.definition, root.path().join("config/systemd/user/pcmail.service"));
    assert_eq!(m.status().unwrap(), Registration::Missing);

    let first = m.install(&spec(root.path())).unwrap();
    assert!(first.changed);
    assert_eq!(
        fake.take(),
        ["--user daemon-reload", "--user enable --now pcmail.service", "--user try-restart pcmail.service"]
    );
    let unit = std::fs::read_to_string(&m.definition).unwrap();
    assert_eq!(unit, systemd_unit(&spec(root.path())).unwrap());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&m.definition).unwrap().permissions().mode() & 0o777, 0o600);

    let again = m.install(&spec(root.path())).unwrap();
    assert!(!again.changed, "same unit: nothing to restart");
    assert_eq!(fake.take(), ["--user daemon-reload", "--user enable --now pcmail.service"]);
    assert_eq!(std::fs::read_to_string(&m.definition).unwrap(), unit);

    assert_eq!(m.status().unwrap(), Registration::Healthy("active".into()));
    assert_eq!(fake.take(), ["--user is-active pcmail.service"]);

    let gone = m.uninstall().unwrap();
    assert!(gone.changed);
    assert!(!m.definition.exists());
    assert_eq!(fake.take(), ["--user disable --now pcmail.service", "--user daemon-reload"]);
    let gone_again = m.uninstall().unwrap();
    assert!(!gone_again.changed);
    assert!(fake.take().is_empty(), "nothing installed: systemctl is not asked");
    assert_eq!(m.status().unwrap(), Registration::Missing);
}

#[test]
fn a_failed_unit_reads_unhealthy() {
    let root = tempfile::tempdir().unwrap();
    let fake = Fake::new("systemctl", "case \"$*\" in *is-active*) echo failed; exit 3;; esac; exit 0");
    let m = systemd_manager(root.path(), &fake);
    m.install(&spec(root.path())).unwrap();
    assert_eq!(m.status().unwrap(), Registration::Unhealthy("failed".into()));
    assert!(matches!(judge(&m.status().unwrap(), Some(NOW), NOW), Verdict::Repair(_)));
}

#[test]
fn without_a_user_manager_install_writes_the_unit_and_says_what_to_run() {
    let root = tempfile::tempdir().unwrap();
    // What systemctl --user prints in a container or an ssh session without a user bus.
    let fake = Fake::new("systemctl", "echo 'Failed to connect to bus: No medium found' >&2; exit 1");
    let m = systemd_manager(root.path(), &fake);
    let err = m.install(&spec(root.path())).unwrap_err();
    let ServiceError::ManagerUnavailable { written, command, detail, .. } = &err else { panic!("{err:?}") };
    assert_eq!(written, &m.definition);
    assert!(m.definition.exists());
    assert!(command.contains("systemctl --user enable --now pcmail.service"), "{command}");
    assert!(detail.contains("Failed to connect to bus"));
    assert!(err.to_string().contains("systemctl --user daemon-reload"), "{err}");
    assert_eq!(fake.take(), ["--user daemon-reload"]);

    // No systemctl at all.
    let empty = tempfile::tempdir().unwrap();
    let m2 = Manager { path_env: Some(empty.path().as_os_str().to_owned()), ..m.clone() };
    assert!(matches!(m2.install(&spec(root.path())), Err(ServiceError::ManagerUnavailable { .. })));
}

#[test]
fn task_scheduler_install_status_uninstall_through_a_fake_schtasks() {
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("registered");
    let csv = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/recorded/csv-en-running.txt");
    let body = format!(
        "case \"$1\" in\n\
         /Create) touch '{s}';;\n\
         /Delete) rm '{s}' || exit 1;;\n\
         /Query) [ -e '{s}' ] || {{ echo 'ERROR: The system cannot find the file specified.' >&2; exit 1; }}; if [ \"$5\" = CSV ]; then cat '{csv}'; else echo 'TaskName  Next Run Time  Status'; echo 'pcmail    N/A            Running'; fi;;\n\
         /Run|/End) [ -e '{s}' ] || exit 1;;\n\
         esac",
        s = state.display(),
        csv = csv.display()
    );
    let fake = Fake::new("schtasks", &body);
    let data = root.path().join("山田 太郎/pcmail");
    let m = Manager {
        platform: Platform::TaskScheduler,
        definition: definition_path(Platform::TaskScheduler, root.path(), root.path(), &data),
        path_env: Some(fake.path()),
    };
    let s = ServiceSpec { pcmail_home: None, ..spec(root.path()) };
    assert_eq!(m.status().unwrap(), Registration::Missing);
    fake.take();
    let first = m.install(&s).unwrap();
    assert!(first.changed && first.warnings.is_empty(), "{first:?}");
    let xml_path = data.join("pcmail-task.xml");
    assert_eq!(
        fake.take(),
        [format!("/Create /XML {} /TN pcmail /F", xml_path.display()), "/Run /TN pcmail".to_string()]
    );
    assert_eq!(std::fs::read(&xml_path).unwrap(), task_xml_utf16(&task_xml(&s).unwrap()));
    let again = m.install(&s).unwrap();
    assert!(!again.changed);
    assert_eq!(fake.take().len(), 2, "re-registering is the same /Create /F");
    let reg = m.status().unwrap();
    assert!(matches!(reg, Registration::Healthy(_)), "{reg:?}");
    assert_eq!(fake.take(), ["/Query /TN pcmail /FO CSV /V /NH"]);

    assert!(m.uninstall().unwrap().changed);
    assert_eq!(fake.take(), ["/Query /TN pcmail", "/End /TN pcmail", "/Delete /TN pcmail /F"]);
    assert!(!xml_path.exists());
    assert!(!m.uninstall().unwrap().changed);
    assert_eq!(fake.take(), ["/Query /TN pcmail"]);
}

#[test]
fn the_unit_passes_systemd_analyze_verify() {
    let Ok(out) = std::process::Command::new("systemd-analyze").arg("--version").output() else {
        println!("skipped: systemd-analyze is not installed");
        return;
    };
    assert!(out.status.success());
    let root = tempfile::tempdir().unwrap();
    // A real executable at a path with a space, `%`, `$` and non-ASCII characters.
    let exe_dir: PathBuf = root.path().join("bin dir/山田 100%$x");
    std::fs::create_dir_all(&exe_dir).unwrap();
    let exe = exe_dir.join("pcmail");
    std::fs::copy("/bin/true", &exe).unwrap();
    let s = ServiceSpec { exe, pcmail_home: Some(root.path().join("home 1/%h")), user: String::new() };
    let unit = root.path().join("pcmail.service");
    std::fs::write(&unit, systemd_unit(&s).unwrap()).unwrap();
    let out = std::process::Command::new("systemd-analyze").arg("verify").arg(&unit).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // verify also checks the rest of the system's units: only lines about ours count.
    let ours: Vec<&str> = stderr.lines().filter(|l| l.contains("pcmail.service")).collect();
    assert!(out.status.success() && ours.is_empty(), "status {:?}\n{stderr}", out.status);
}

#[test]
fn one_cfg_function_picks_the_platform() {
    let expected = if cfg!(windows) {
        Platform::TaskScheduler
    } else if cfg!(target_os = "macos") {
        Platform::Launchd
    } else {
        Platform::SystemdUser
    };
    assert_eq!(platform(), expected);
    assert!(when_it_runs(Platform::SystemdUser).contains("loginctl enable-linger"));
}
