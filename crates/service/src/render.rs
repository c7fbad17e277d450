//! The service definitions as text. Every path goes through an escaper for
//! its format: spaces, `%`, `$`, quotes and non-ASCII names must survive.

use crate::{ServiceSpec, LAUNCHD_LABEL, TASK_NAME};
use std::path::Path;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RenderError {
    #[error("path {0:?} contains a line break or a NUL: a service definition cannot hold it")]
    BadPath(String),
}

fn path_str(p: &Path) -> Result<String, RenderError> {
    let s = p.to_string_lossy().into_owned();
    if s.contains(['\n', '\r', '\0']) {
        return Err(RenderError::BadPath(s));
    }
    Ok(s)
}

/// One systemd word in double quotes: C escapes for `\` and `"`, `%%` for
/// specifiers. `$` is left alone: it is not expanded in the executable's path
/// nor in Environment= (systemd-analyze verify proves the first).
fn systemd_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '%' => out.push_str("%%"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The systemd user unit: `pcmail daemon`, restarted when it fails.
pub fn systemd_unit(spec: &ServiceSpec) -> Result<String, RenderError> {
    let exe = path_str(&spec.exe)?;
    let mut env = String::new();
    if let Some(h) = &spec.pcmail_home {
        env = format!("Environment={}\n", systemd_quote(&format!("PCMAIL_HOME={}", path_str(h)?)));
    }
    Ok(format!(
        "# Written by `pcmail service install`; `pcmail service uninstall` removes it.\n\
         # Runs before login only with `loginctl enable-linger $USER`.\n\
         [Unit]\n\
         Description=pcmail poller (fetches this PC's mail)\n\
         StartLimitIntervalSec=0\n\
         \n\
         [Service]\n\
         Type=simple\n\
         ExecStart={} daemon\n\
         {env}\
         Restart=on-failure\n\
         RestartSec=10\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        systemd_quote(&exe)
    ))
}

fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// The launchd agent (not proven: macOS can't be built here).
pub fn launchd_plist(spec: &ServiceSpec) -> Result<String, RenderError> {
    let exe = xml_escape(&path_str(&spec.exe)?);
    let env = match &spec.pcmail_home {
        Some(h) => format!(
            "  <key>EnvironmentVariables</key>\n  <dict>\n    <key>PCMAIL_HOME</key>\n    <string>{}</string>\n  </dict>\n",
            xml_escape(&path_str(h)?)
        ),
        None => String::new(),
    };
    Ok(format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
         <plist version=\"1.0\">\n<dict>\n\
         \x20 <key>Label</key>\n  <string>{LAUNCHD_LABEL}</string>\n\
         \x20 <key>ProgramArguments</key>\n  <array>\n    <string>{exe}</string>\n    <string>daemon</string>\n  </array>\n\
         {env}\
         \x20 <key>RunAtLoad</key>\n  <true/>\n\
         \x20 <key>KeepAlive</key>\n  <dict>\n    <key>SuccessfulExit</key>\n    <false/>\n  </dict>\n\
         </dict>\n</plist>\n"
    ))
}

/// The Task Scheduler task: starts at this user's logon, restarts on failure
/// (every minute, up to 999 times), never stopped for running long, one
/// instance at a time. `schtasks /Create /XML` reads it (as UTF-16: see
/// [`task_xml_utf16`]).
pub fn task_xml(spec: &ServiceSpec) -> Result<String, RenderError> {
    let exe = path_str(&spec.exe)?;
    // The folder by the string, so a Windows path reads the same on any build host.
    let dir = exe.rfind(['\\', '/']).map(|i| exe[..i].to_string()).unwrap_or_default();
    let user = xml_escape(&spec.user);
    Ok(format!(
        r#"<?xml version="1.0" encoding="UTF-16"?>
<Task version="1.2" xmlns="http://schemas.microsoft.com/windows/2004/02/mit/task">
  <RegistrationInfo>
    <Description>pcmail poller: fetches this PC's mail (written by `pcmail service install`)</Description>
    <URI>\{TASK_NAME}</URI>
  </RegistrationInfo>
  <Triggers>
    <LogonTrigger>
      <Enabled>true</Enabled>
      <UserId>{user}</UserId>
    </LogonTrigger>
  </Triggers>
  <Principals>
    <Principal id="Author">
      <UserId>{user}</UserId>
      <LogonType>InteractiveToken</LogonType>
      <RunLevel>LeastPrivilege</RunLevel>
    </Principal>
  </Principals>
  <Settings>
    <MultipleInstancesPolicy>IgnoreNew</MultipleInstancesPolicy>
    <DisallowStartIfOnBatteries>false</DisallowStartIfOnBatteries>
    <StopIfGoingOnBatteries>false</StopIfGoingOnBatteries>
    <AllowHardTerminate>true</AllowHardTerminate>
    <StartWhenAvailable>true</StartWhenAvailable>
    <RunOnlyIfNetworkAvailable>false</RunOnlyIfNetworkAvailable>
    <IdleSettings>
      <StopOnIdleEnd>false</StopOnIdleEnd>
      <RestartOnIdle>false</RestartOnIdle>
    </IdleSettings>
    <AllowStartOnDemand>true</AllowStartOnDemand>
    <Enabled>true</Enabled>
    <Hidden>false</Hidden>
    <RunOnlyIfIdle>false</RunOnlyIfIdle>
    <WakeToRun>false</WakeToRun>
    <ExecutionTimeLimit>PT0S</ExecutionTimeLimit>
    <Priority>7</Priority>
    <RestartOnFailure>
      <Interval>PT1M</Interval>
      <Count>999</Count>
    </RestartOnFailure>
  </Settings>
  <Actions Context="Author">
    <Exec>
      <Command>{}</Command>
      <Arguments>daemon</Arguments>
      <WorkingDirectory>{}</WorkingDirectory>
    </Exec>
  </Actions>
</Task>
"#,
        xml_escape(&exe),
        xml_escape(&dir)
    ))
}

/// The task XML as schtasks wants the file: UTF-16LE with a byte-order mark.
pub fn task_xml_utf16(xml: &str) -> Vec<u8> {
    let mut out = vec![0xFF, 0xFE];
    for u in xml.replace('\n', "\r\n").encode_utf16() {
        out.extend_from_slice(&u.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn spec(exe: &str, home: Option<&str>) -> ServiceSpec {
        ServiceSpec { exe: PathBuf::from(exe), pcmail_home: home.map(PathBuf::from), user: "PC1\\山田 太郎".into() }
    }

    #[test]
    fn unit_runs_the_daemon_restarts_on_failure_and_quotes_odd_paths() {
        let u = systemd_unit(&spec("/home/y t/100%$bin/pc\"mail", Some("/srv/山田 太郎/%h"))).unwrap();
        assert!(u.contains("ExecStart=\"/home/y t/100%%$bin/pc\\\"mail\" daemon\n"), "{u}");
        assert!(u.contains("Environment=\"PCMAIL_HOME=/srv/山田 太郎/%%h\"\n"), "{u}");
        assert!(u.contains("Restart=on-failure\n"));
        assert!(u.contains("WantedBy=default.target\n"));
        assert!(u.contains("loginctl enable-linger"));
    }

    #[test]
    fn unit_without_pcmail_home_sets_no_environment() {
        let u = systemd_unit(&spec("/usr/bin/pcmail", None)).unwrap();
        assert!(!u.contains("Environment="));
        assert!(u.contains("ExecStart=\"/usr/bin/pcmail\" daemon\n"));
    }

    #[test]
    fn a_line_break_in_a_path_is_refused_not_written() {
        assert!(matches!(systemd_unit(&spec("/a\nExecStartPre=/bin/evil", None)), Err(RenderError::BadPath(_))));
        assert!(task_xml(&spec("C:\\a\r\nb.exe", None)).is_err());
    }

    #[test]
    fn task_xml_starts_at_logon_restarts_on_failure_and_escapes() {
        let x = task_xml(&spec(r"C:\Users\山田 太郎\R&D <x>\pcmail.exe", None)).unwrap();
        assert!(x.contains("<LogonTrigger>"));
        assert!(x.contains("<UserId>PC1\\山田 太郎</UserId>"));
        assert!(x.contains("<RestartOnFailure>\n      <Interval>PT1M</Interval>\n      <Count>999</Count>"));
        assert!(x.contains("<ExecutionTimeLimit>PT0S</ExecutionTimeLimit>"));
        assert!(x.contains(r"<Command>C:\Users\山田 太郎\R&amp;D &lt;x&gt;\pcmail.exe</Command>"), "{x}");
        assert!(x.contains(r"<WorkingDirectory>C:\Users\山田 太郎\R&amp;D &lt;x&gt;</WorkingDirectory>"), "{x}");
        assert!(x.contains("<Arguments>daemon</Arguments>"));
    }

    #[test]
    fn task_xml_file_is_utf16le_with_bom_and_crlf() {
        let bytes = task_xml_utf16("<a>山\n</a>");
        assert_eq!(&bytes[..2], &[0xFF, 0xFE]);
        let units: Vec<u16> = bytes[2..].chunks(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
        assert_eq!(String::from_utf16(&units).unwrap(), "<a>山\r\n</a>");
    }

    #[test]
    fn plist_keeps_the_daemon_alive_and_escapes() {
        let p = launchd_plist(&spec("/Users/a&b/pcmail", Some("/tmp/h"))).unwrap();
        assert!(p.contains("<string>/Users/a&amp;b/pcmail</string>\n    <string>daemon</string>"));
        assert!(p.contains("<key>SuccessfulExit</key>\n    <false/>"));
        assert!(p.contains("<key>PCMAIL_HOME</key>\n    <string>/tmp/h</string>"));
    }
}
