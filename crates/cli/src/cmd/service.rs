//! `pcmail service install|uninstall|status`: wiring over pcmail-service.

use pcmail_client::Client;
use pcmail_local::config::Paths;
use pcmail_local::locks;
use pcmail_service::{judge, Manager, Registration, ServiceSpec, Verdict};
use std::path::PathBuf;

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// This executable as the service should start it. On Windows the plain
/// path (canonicalize would give a `\\?\` path); elsewhere symlinks resolved.
fn this_exe() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    Ok(if cfg!(windows) { exe } else { exe.canonicalize()? })
}

fn manager(paths: &Paths) -> anyhow::Result<Manager> {
    let platform = pcmail_service::platform();
    let home = env_path("HOME").or_else(|| env_path("USERPROFILE")).unwrap_or_else(|| paths.home.clone());
    let config_home = env_path("XDG_CONFIG_HOME").unwrap_or_else(|| home.join(".config"));
    Ok(Manager {
        platform,
        definition: pcmail_service::definition_path(platform, &config_home, &home, &paths.home),
        path_env: None,
    })
}

fn spec() -> anyhow::Result<ServiceSpec> {
    let pcmail_home = match env_path("PCMAIL_HOME") {
        Some(h) if h.is_relative() => Some(std::env::current_dir()?.join(h)),
        h => h,
    };
    let user = match (std::env::var("USERDOMAIN"), std::env::var("USERNAME")) {
        (Ok(d), Ok(u)) if !d.is_empty() => format!("{d}\\{u}"),
        (_, Ok(u)) => u,
        _ => std::env::var("USER").unwrap_or_default(),
    };
    Ok(ServiceSpec { exe: this_exe()?, pcmail_home, user })
}

fn describe(reg: &Registration) -> String {
    match reg {
        Registration::Missing => "not installed".into(),
        Registration::Healthy(s) => format!("running ({s})"),
        Registration::Unhealthy(s) => format!("not healthy ({s})"),
    }
}

pub fn run(action: &str, repair: bool, json: bool) -> anyhow::Result<()> {
    let paths = Paths::from_env()?;
    let m = manager(&paths)?;
    let name = m.platform.name();
    match action {
        "install" => {
            let out = m.install(&spec()?)?;
            println!(
                "pcmail: {name} {} ({})",
                if out.changed { "installed" } else { "already installed, re-registered" },
                out.definition.display()
            );
            println!("pcmail: {}", pcmail_service::when_it_runs(m.platform));
            println!("pcmail: one poller at a time: whoever holds the daemon lock polls (the tray stays idle while the service runs)");
            for w in out.warnings {
                println!("pcmail: note: {w}");
            }
        }
        "uninstall" => {
            let out = m.uninstall()?;
            println!(
                "pcmail: {name} {} ({})",
                if out.changed { "removed" } else { "was not installed" },
                out.definition.display()
            );
        }
        _ => {
            let reg = m.status()?;
            let last_poll = match pcmail_store::Store::open_existing(&paths.store(), std::time::Duration::from_secs(2))
            {
                Ok(Some(s)) => s.last_poll_ok_at()?,
                _ => None,
            };
            let now = pcmail_local::system_now();
            let verdict = judge(&reg, last_poll, now);
            let mut repaired = false;
            if let (Verdict::Repair(_), true) = (&verdict, repair) {
                // The self-healing rule: re-register, then poll once right now.
                m.install(&spec()?)?;
                let _sync = locks::try_lock(&paths.sync_lock())?;
                Client::open(paths.clone())?.sync_once(0)?;
                repaired = true;
            }
            let reasons = match &verdict {
                Verdict::Healthy => vec![],
                Verdict::Repair(r) => r.clone(),
            };
            if json {
                let v = serde_json::json!({
                    "platform": name,
                    "definition": m.definition().display().to_string(),
                    "service": describe(&reg),
                    "lastPollOkAt": last_poll,
                    "healthy": reasons.is_empty(),
                    "reasons": reasons,
                    "repaired": repaired,
                });
                println!("{v}");
            } else {
                println!("pcmail: {name}: {} ({})", describe(&reg), m.definition().display());
                match last_poll {
                    Some(t) => println!("pcmail: last good poll {} s ago", (now - t).max(0) / 1000),
                    None => println!("pcmail: no good poll recorded yet"),
                }
                for r in &reasons {
                    println!("pcmail: needs repair: {r}");
                }
                if repaired {
                    println!("pcmail: repaired: re-registered the {name} and polled once");
                } else if !reasons.is_empty() {
                    println!("pcmail: fix: pcmail service status --repair (re-registers the service and polls once)");
                } else {
                    println!("pcmail: ok");
                }
            }
        }
    }
    Ok(())
}
