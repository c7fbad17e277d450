//! Keeps the receiving PC's poller (`pcmail daemon`) running without the tray:
//! a systemd user unit on Linux, a launchd agent on macOS, a Task Scheduler
//! task on Windows. The platform is chosen in one place ([`platform`]).
//!
//! Pure parts (what the files say, how `schtasks` output reads, when the
//! poller needs repair) are plain functions the tests call directly; the
//! imperative part ([`Manager`]) runs `systemctl --user`, `launchctl` or
//! `schtasks` and nothing else.
//!
//! Only one process polls: whoever holds the daemon lock (the service's
//! `pcmail daemon` or the tray). A second `pcmail daemon` exits at once.

mod manager;
mod render;
mod rule;
mod schtasks;

pub use manager::{Installed, Manager, Removed, ServiceError};
pub use render::{launchd_plist, systemd_unit, task_xml, task_xml_utf16, RenderError};
pub use rule::{judge, last_result_is_normal, Registration, Verdict, NOT_YET_RUN, POLL_STALE_MS, RUNNING};
pub use schtasks::{parse_csv, parse_list, TaskInfo};

use std::path::PathBuf;

/// The service managers pcmail knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    /// `systemctl --user` (proven on Linux in the tests).
    SystemdUser,
    /// A launchd agent (not proven: nothing can be built for macOS here).
    Launchd,
    /// A Task Scheduler task (its XML and the self-healing rule are tested;
    /// registration is exercised under Wine).
    TaskScheduler,
}

/// The one `cfg` choice of service manager for this build.
pub fn platform() -> Platform {
    if cfg!(windows) {
        Platform::TaskScheduler
    } else if cfg!(target_os = "macos") {
        Platform::Launchd
    } else {
        Platform::SystemdUser
    }
}

impl Platform {
    pub fn name(self) -> &'static str {
        match self {
            Platform::SystemdUser => "systemd user unit",
            Platform::Launchd => "launchd agent",
            Platform::TaskScheduler => "Task Scheduler task",
        }
    }
}

/// Task name, unit name and launchd label.
pub const TASK_NAME: &str = "pcmail";
pub const UNIT_NAME: &str = "pcmail.service";
pub const LAUNCHD_LABEL: &str = "dev.pcmail.daemon";

/// What the service runs: `<exe> daemon` as this user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceSpec {
    /// The `pcmail` executable (absolute).
    pub exe: PathBuf,
    /// `PCMAIL_HOME` to give the daemon, when the user set one.
    pub pcmail_home: Option<PathBuf>,
    /// Windows `DOMAIN\user` whose logon starts the task.
    pub user: String,
}

/// Where the service definition lives for `platform`. `config_home` is
/// `$XDG_CONFIG_HOME` (or `~/.config`), `home` the user's home directory and
/// `data_dir` pcmail's own folder (the Task Scheduler XML is kept there so
/// `service install` can re-register it).
pub fn definition_path(
    platform: Platform,
    config_home: &std::path::Path,
    home: &std::path::Path,
    data_dir: &std::path::Path,
) -> PathBuf {
    match platform {
        Platform::SystemdUser => config_home.join("systemd").join("user").join(UNIT_NAME),
        Platform::Launchd => home.join("Library").join("LaunchAgents").join(format!("{LAUNCHD_LABEL}.plist")),
        Platform::TaskScheduler => data_dir.join("pcmail-task.xml"),
    }
}

/// One line for install's output: when the service runs.
pub fn when_it_runs(platform: Platform) -> &'static str {
    match platform {
        Platform::SystemdUser => {
            "it starts with your user session; to run before you log in (after a reboot), run `loginctl enable-linger \"$USER\"` once"
        }
        Platform::Launchd => "it starts when you log in (not proven: macOS can't be built in pcmail's CI)",
        Platform::TaskScheduler => "it starts when you log in and restarts on failure",
    }
}
