//! The imperative part: write the definition, then ask the service manager.
//! Install and uninstall are idempotent and undo each other.

use crate::render::{self, RenderError};
use crate::rule::Registration;
use crate::{schtasks, Platform, ServiceSpec, LAUNCHD_LABEL, TASK_NAME, UNIT_NAME};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Render(#[from] RenderError),
    #[error("cannot write {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{manager} is not available here ({detail}). The definition is written to {}; where {manager} runs, do: {command}", written.display())]
    ManagerUnavailable { manager: &'static str, detail: String, written: PathBuf, command: String },
    #[error("`{command}` failed: {detail}")]
    Command { command: String, detail: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    pub definition: PathBuf,
    /// False when the same definition was already there.
    pub changed: bool,
    /// Something install could not do that the user may want to know.
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    pub definition: PathBuf,
    /// False when nothing was installed.
    pub changed: bool,
}

/// Runs one service manager. `path_env` replaces PATH for the manager's
/// commands (tests put a fake `systemctl` or `schtasks` first).
#[derive(Debug, Clone)]
pub struct Manager {
    pub platform: Platform,
    /// Where the unit / plist / task XML is written.
    pub definition: PathBuf,
    pub path_env: Option<OsString>,
}

struct Ran {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Manager {
    fn command_line(program: &str, args: &[&str]) -> String {
        std::iter::once(program.to_string())
            .chain(args.iter().map(|a| if a.contains(' ') { format!("\"{a}\"") } else { a.to_string() }))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Runs the command; Err only when it could not be started at all.
    fn run(&self, program: &str, args: &[&str]) -> std::io::Result<Ran> {
        let mut cmd = Command::new(program);
        cmd.args(args).stdin(Stdio::null());
        if let Some(p) = &self.path_env {
            cmd.env("PATH", p);
        }
        let out = cmd.output()?;
        Ok(Ran {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }

    fn must(&self, program: &str, args: &[&str]) -> Result<Ran, ServiceError> {
        let r = self
            .run(program, args)
            .map_err(|e| ServiceError::Command { command: Self::command_line(program, args), detail: e.to_string() })?;
        if !r.ok {
            return Err(ServiceError::Command { command: Self::command_line(program, args), detail: r.stderr });
        }
        Ok(r)
    }

    /// Writes `bytes` to the definition (0600 on Unix); false when it already held them.
    fn write_definition(&self, bytes: &[u8]) -> Result<bool, ServiceError> {
        let io = |source| ServiceError::Io { path: self.definition.clone(), source };
        if std::fs::read(&self.definition).ok().as_deref() == Some(bytes) {
            return Ok(false);
        }
        if let Some(dir) = self.definition.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        pcmail_fsmode::replace_private(&self.definition, bytes).map_err(io)?;
        Ok(true)
    }

    fn remove_definition(&self) -> Result<bool, ServiceError> {
        match std::fs::remove_file(&self.definition) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(ServiceError::Io { path: self.definition.clone(), source }),
        }
    }

    /// Registers and starts the service. With `systemctl --user` missing (no
    /// user manager, no D-Bus), the unit is still written and the error says
    /// what to run.
    pub fn install(&self, spec: &ServiceSpec) -> Result<Installed, ServiceError> {
        match self.platform {
            Platform::SystemdUser => {
                let changed = self.write_definition(render::systemd_unit(spec)?.as_bytes())?;
                let unavailable = |detail: String| ServiceError::ManagerUnavailable {
                    manager: "systemctl --user",
                    detail,
                    written: self.definition.clone(),
                    command: format!("systemctl --user daemon-reload && systemctl --user enable --now {UNIT_NAME}"),
                };
                match self.run("systemctl", &["--user", "daemon-reload"]) {
                    Err(e) => return Err(unavailable(e.to_string())),
                    Ok(r) if !r.ok => return Err(unavailable(r.stderr)),
                    Ok(_) => {}
                }
                self.must("systemctl", &["--user", "enable", "--now", UNIT_NAME])?;
                if changed {
                    // A running daemon keeps its old command line otherwise.
                    self.must("systemctl", &["--user", "try-restart", UNIT_NAME])?;
                }
                Ok(Installed { definition: self.definition.clone(), changed, warnings: vec![] })
            }
            Platform::Launchd => {
                let changed = self.write_definition(render::launchd_plist(spec)?.as_bytes())?;
                let plist = self.definition.to_string_lossy().into_owned();
                if changed {
                    let _ = self.run("launchctl", &["unload", &plist]);
                }
                self.must("launchctl", &["load", "-w", &plist])?;
                Ok(Installed { definition: self.definition.clone(), changed, warnings: vec![] })
            }
            Platform::TaskScheduler => {
                let changed = self.write_definition(&render::task_xml_utf16(&render::task_xml(spec)?))?;
                let xml = self.definition.to_string_lossy().into_owned();
                // /F replaces an existing task: registering twice is the same as once.
                self.must("schtasks", &["/Create", "/XML", &xml, "/TN", TASK_NAME, "/F"])?;
                let mut warnings = vec![];
                if spec.pcmail_home.is_some() {
                    warnings.push(
                        "the task does not carry PCMAIL_HOME: make it permanent for your user (`setx PCMAIL_HOME \"…\"`) so the task sees it".into(),
                    );
                }
                match self.run("schtasks", &["/Run", "/TN", TASK_NAME]) {
                    Ok(r) if r.ok => {}
                    Ok(r) => warnings.push(format!(
                        "registered, but starting it now failed ({}); it starts at your next logon",
                        r.stderr
                    )),
                    Err(e) => warnings
                        .push(format!("registered, but starting it now failed ({e}); it starts at your next logon")),
                }
                Ok(Installed { definition: self.definition.clone(), changed, warnings })
            }
        }
    }

    /// Stops and unregisters the service and removes its definition.
    pub fn uninstall(&self) -> Result<Removed, ServiceError> {
        let present = self.definition.exists();
        match self.platform {
            Platform::SystemdUser => {
                if present {
                    // A unit the manager never loaded makes `disable` fail: that is fine here.
                    let _ = self.run("systemctl", &["--user", "disable", "--now", UNIT_NAME]);
                }
                let changed = self.remove_definition()?;
                if changed {
                    let _ = self.run("systemctl", &["--user", "daemon-reload"]);
                }
                Ok(Removed { definition: self.definition.clone(), changed })
            }
            Platform::Launchd => {
                if present {
                    let _ = self.run("launchctl", &["unload", "-w", &self.definition.to_string_lossy()]);
                }
                Ok(Removed { definition: self.definition.clone(), changed: self.remove_definition()? })
            }
            Platform::TaskScheduler => {
                // A registered task is listed; Wine's schtasks answers every /Query with 0 and no text.
                let registered = self
                    .run("schtasks", &["/Query", "/TN", TASK_NAME])
                    .map(|r| r.ok && !r.stdout.trim().is_empty())
                    .unwrap_or(false);
                if registered || present {
                    let _ = self.run("schtasks", &["/End", "/TN", TASK_NAME]);
                    let r = self.run("schtasks", &["/Delete", "/TN", TASK_NAME, "/F"]);
                    if registered && !matches!(r, Ok(Ran { ok: true, .. })) {
                        return Err(ServiceError::Command {
                            command: format!("schtasks /Delete /TN {TASK_NAME} /F"),
                            detail: r.map(|r| r.stderr).unwrap_or_else(|e| e.to_string()),
                        });
                    }
                }
                let removed = self.remove_definition()?;
                Ok(Removed { definition: self.definition.clone(), changed: removed || registered })
            }
        }
    }

    /// What the service manager says about the poller.
    pub fn status(&self) -> Result<Registration, ServiceError> {
        match self.platform {
            Platform::SystemdUser => {
                if !self.definition.exists() {
                    return Ok(Registration::Missing);
                }
                // is-active exits non-zero for inactive/failed units: its stdout is the answer.
                let r =
                    self.run("systemctl", &["--user", "is-active", UNIT_NAME]).map_err(|e| ServiceError::Command {
                        command: format!("systemctl --user is-active {UNIT_NAME}"),
                        detail: e.to_string(),
                    })?;
                Ok(Registration::from_is_active(&r.stdout))
            }
            Platform::Launchd => {
                let r = self.run("launchctl", &["list", LAUNCHD_LABEL]);
                Ok(match r {
                    Ok(r) if r.ok => {
                        let status = r.stdout.lines().find_map(|l| {
                            l.trim().strip_prefix("\"LastExitStatus\" = ")?.trim_end_matches(';').parse::<i64>().ok()
                        });
                        match status {
                            Some(0) | None => Registration::Healthy("loaded".into()),
                            Some(c) => Registration::Unhealthy(format!("LastExitStatus {c}")),
                        }
                    }
                    _ => Registration::Missing,
                })
            }
            Platform::TaskScheduler => {
                let r =
                    self.run("schtasks", &["/Query", "/TN", TASK_NAME, "/FO", "CSV", "/V", "/NH"]).map_err(|e| {
                        ServiceError::Command {
                            command: format!("schtasks /Query /TN {TASK_NAME}"),
                            detail: e.to_string(),
                        }
                    })?;
                if !r.ok {
                    return Ok(Registration::Missing);
                }
                Ok(match schtasks::parse_csv(&r.stdout).or_else(|| schtasks::parse_list(&r.stdout)) {
                    Some(info) => Registration::from_task(&info),
                    None => Registration::Unhealthy("schtasks printed no task status".into()),
                })
            }
        }
    }

    /// The definition file, for messages.
    pub fn definition(&self) -> &Path {
        &self.definition
    }
}
