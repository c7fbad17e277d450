//! `pcmail service` end to end on Linux: the real binary, a fake `systemctl`
//! first on PATH that records its calls.

#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Env {
    root: tempfile::TempDir,
}

impl Env {
    /// `systemctl_body`: shell for the fake systemctl after it logs its arguments.
    fn new(systemctl_body: &str) -> Env {
        let root = tempfile::tempdir().unwrap();
        let bin = root.path().join("fake bin");
        std::fs::create_dir_all(&bin).unwrap();
        let script = format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\n{systemctl_body}\n",
            root.path().join("calls").display()
        );
        std::fs::write(bin.join("systemctl"), script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(bin.join("systemctl"), std::fs::Permissions::from_mode(0o755)).unwrap();
        Env { root }
    }

    fn home(&self) -> PathBuf {
        self.root.path().join("山田 太郎/pcmail")
    }

    fn unit(&self) -> PathBuf {
        self.root.path().join("config/systemd/user/pcmail.service")
    }

    fn pcmail(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_pcmail"))
            .args(args)
            .env("PCMAIL_HOME", self.home())
            .env("HOME", self.root.path())
            .env("XDG_CONFIG_HOME", self.root.path().join("config"))
            .env("PATH", format!("{}:/usr/bin:/bin", self.root.path().join("fake bin").display()))
            .output()
            .unwrap()
    }

    fn calls(&self) -> Vec<String> {
        let p = self.root.path().join("calls");
        let s = std::fs::read_to_string(&p).unwrap_or_default();
        let _ = std::fs::remove_file(&p);
        s.lines().map(String::from).collect()
    }
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn install_twice_status_uninstall_twice() {
    let env = Env::new("case \"$*\" in *is-active*) echo active;; esac; exit 0");
    let o = env.pcmail(&["service", "install"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("loginctl enable-linger"), "{}", text(&o));
    assert!(text(&o).contains("whoever holds the daemon lock polls"), "{}", text(&o));
    assert_eq!(
        env.calls(),
        ["--user daemon-reload", "--user enable --now pcmail.service", "--user try-restart pcmail.service"]
    );
    let unit = std::fs::read_to_string(env.unit()).unwrap();
    let exe = Path::new(env!("CARGO_BIN_EXE_pcmail")).canonicalize().unwrap();
    assert!(unit.contains(&format!("ExecStart=\"{}\" daemon\n", exe.display())), "{unit}");
    assert!(unit.contains(&format!("Environment=\"PCMAIL_HOME={}\"\n", env.home().display())), "{unit}");

    let o = env.pcmail(&["service", "install"]);
    assert!(o.status.success() && text(&o).contains("already installed"), "{}", text(&o));
    assert_eq!(env.calls(), ["--user daemon-reload", "--user enable --now pcmail.service"]);

    // Registered and active, but no poll yet: the rule asks for a repair.
    let o = env.pcmail(&["--json", "service", "status"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["service"], "running (active)");
    assert_eq!(v["healthy"], false);
    assert!(v["reasons"][0].as_str().unwrap().contains("no good poll"), "{v}");

    // --repair re-registers and polls once (embedded default: the poll works offline).
    let o = env.pcmail(&["--json", "service", "status", "--repair"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["repaired"], true, "{v}");
    env.calls();
    let o = env.pcmail(&["--json", "service", "status"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["healthy"], true, "after the repair's poll: {v}");

    let o = env.pcmail(&["service", "uninstall"]);
    assert!(o.status.success() && text(&o).contains("removed"), "{}", text(&o));
    assert!(!env.unit().exists());
    assert_eq!(
        env.calls(),
        ["--user is-active pcmail.service", "--user disable --now pcmail.service", "--user daemon-reload"]
    );
    let o = env.pcmail(&["service", "uninstall"]);
    assert!(o.status.success() && text(&o).contains("was not installed"), "{}", text(&o));
    assert!(env.calls().is_empty());
}

#[test]
fn without_systemctl_user_install_writes_the_unit_and_fails_with_the_command() {
    let env = Env::new("echo 'Failed to connect to bus: No medium found' >&2; exit 1");
    let o = env.pcmail(&["service", "install"]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(t.contains("systemctl --user daemon-reload && systemctl --user enable --now pcmail.service"), "{t}");
    assert!(t.contains(&env.unit().display().to_string()), "{t}");
    assert!(env.unit().exists(), "the unit is written all the same");
}
