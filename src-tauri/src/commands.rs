//! The window's commands (docs/tray.md "Command API"). Each is a thin call
//! into the controller (reading/marking through the store) or the client.

use crate::state::AppState;
use pcmail_client::token;
use pcmail_local::config::{Config, ServerConfig};
use pcmail_tray::{
    JobView, JobsView, LeaseReleased, LeasesView, MailView, Remote, SentView, SessionsView, Status, TrayError,
};
use serde::{Deserialize, Serialize};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tauri::State;

type S<'a> = State<'a, Arc<AppState>>;

#[derive(Debug, Serialize)]
pub struct CmdError {
    code: String,
    message: String,
}

impl From<TrayError> for CmdError {
    fn from(e: TrayError) -> Self {
        CmdError { code: e.code().to_string(), message: e.to_string() }
    }
}

fn err(code: &str, message: impl ToString) -> CmdError {
    CmdError { code: code.into(), message: message.to_string() }
}

type R<T> = Result<T, CmdError>;

fn now() -> i64 {
    pcmail_local::system_now()
}

#[derive(Serialize)]
pub struct Listed<T> {
    mails: Vec<T>,
    total: usize,
}

#[tauri::command]
pub async fn get_state(st: S<'_>) -> R<Status> {
    Ok(st.controller.lock().unwrap().status(now())?)
}

#[tauri::command]
pub async fn list_inbox(st: S<'_>, scope: Option<String>) -> R<Listed<MailView>> {
    let all = scope.as_deref() == Some("all");
    let mails = st.controller.lock().unwrap().list_inbox(all, now())?;
    Ok(Listed { total: mails.len(), mails })
}

#[tauri::command]
pub async fn open_mail(st: S<'_>, id: String) -> R<MailView> {
    let v = st.controller.lock().unwrap().open_mail(&id, now())?;
    after_mark(&st);
    Ok(v)
}

#[tauri::command]
pub async fn ack(st: S<'_>, id: String) -> R<MailView> {
    let v = st.controller.lock().unwrap().ack(&id, now())?;
    after_mark(&st);
    Ok(v)
}

/// The mark is stored and queued; send it now in the background (the client's
/// `flush_marks`) and bring the tray up to date.
fn after_mark(st: &Arc<AppState>) {
    st.refresh_now.store(true, Ordering::Relaxed);
    let st2 = st.clone();
    std::thread::spawn(move || st2.remote.flush_marks());
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Replied {
    reply_id: String,
    original: MailView,
}

#[tauri::command]
pub async fn reply(st: S<'_>, id: String, body: String) -> R<Replied> {
    if body.trim().is_empty() {
        return Err(err("bad_request", "the reply is empty"));
    }
    let st2: Arc<AppState> = st.inner().clone();
    let (reply_id, original) = {
        let mut c = st2.controller.lock().unwrap();
        c.reply(&st2.remote, &id, &body, now())?
    };
    st2.refresh_now.store(true, Ordering::Relaxed);
    Ok(Replied { reply_id, original })
}

#[tauri::command]
pub async fn list_sent(st: S<'_>) -> R<Listed<SentView>> {
    let mails = st.controller.lock().unwrap().list_sent()?;
    Ok(Listed { total: mails.len(), mails })
}

#[tauri::command]
pub async fn get_sent(st: S<'_>, id: String) -> R<SentView> {
    Ok(st.controller.lock().unwrap().get_sent(&id)?)
}

#[derive(Serialize)]
pub struct Alerts {
    alerts: Vec<pcmail_core::Alert>,
}

#[tauri::command]
pub async fn list_alerts(st: S<'_>) -> R<Alerts> {
    Ok(Alerts { alerts: st.controller.lock().unwrap().alerts()? })
}

/// The Leases view: who holds what (the lease cache the poller keeps),
/// this PC's own marked, and the leases it lost in the last hour.
#[tauri::command]
pub async fn list_leases(st: S<'_>) -> R<LeasesView> {
    Ok(st.controller.lock().unwrap().leases(now())?)
}

/// Release for a lease of this PC: `pcmail lease release` (pcmail_api),
/// to the server now or queued for the next poll.
#[tauri::command]
pub async fn release_lease(st: S<'_>, resource: String) -> R<LeaseReleased> {
    let st2: Arc<AppState> = st.inner().clone();
    let r = st2.controller.lock().unwrap().release_lease(&st2.remote, &resource)?;
    st2.refresh_now.store(true, Ordering::Relaxed);
    Ok(r)
}

/// A call to the server off the async runtime's threads (the client blocks),
/// and outside the controller's lock (the store watch keeps its 250 ms).
async fn on_server<T: Send + 'static>(st: &Arc<AppState>, f: impl FnOnce(&AppState) -> T + Send + 'static) -> R<T> {
    let st2 = st.clone();
    tauri::async_runtime::spawn_blocking(move || f(&st2)).await.map_err(|e| err("error", e))
}

/// The Sessions view: every live session on every PC (`pcmail who`, asked
/// now); offline, the last answer marked not live.
#[tauri::command]
pub async fn list_sessions(st: S<'_>) -> R<SessionsView> {
    let answer = on_server(st.inner(), |s| s.remote.who()).await?;
    Ok(st.controller.lock().unwrap().sessions_from(answer, now()))
}

/// The Jobs view: what this PC submitted and what it runs (`pcmail job list`).
#[tauri::command]
pub async fn list_jobs(st: S<'_>) -> R<JobsView> {
    let answer = on_server(st.inner(), |s| s.remote.jobs()).await?;
    Ok(st.controller.lock().unwrap().jobs_from(answer, now())?)
}

/// Cancel for a queued or running job this PC submitted (`pcmail job cancel`).
#[tauri::command]
pub async fn cancel_job(st: S<'_>, id: String) -> R<JobView> {
    st.controller.lock().unwrap().check_cancel(&id)?;
    let id2 = id.clone();
    let job = on_server(st.inner(), move |s| s.remote.job_cancel(&id2)).await?.map_err(|f| err(&f.code, f.message))?;
    Ok(st.controller.lock().unwrap().after_cancel(job, now())?)
}

#[derive(Serialize)]
pub struct Started {
    started: bool,
}

#[tauri::command]
pub async fn poll_now(st: S<'_>) -> R<Started> {
    let daemon = st.controller.lock().unwrap().status(now())?.connection.poller == "daemon";
    st.poke();
    st.refresh_now.store(true, Ordering::Relaxed);
    Ok(Started { started: !daemon })
}

#[derive(Serialize)]
pub struct Paused {
    paused: bool,
}

#[tauri::command]
pub async fn set_paused(st: S<'_>, paused: bool) -> R<Paused> {
    crate::set_paused(&st, paused);
    Ok(Paused { paused })
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ServerIn {
    mode: String,
    url: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    server: ServerIn,
    pc_label: String,
    poll_interval_sec: u64,
    autostart: bool,
    #[serde(default)]
    has_token: bool,
}

fn token_key(server: &ServerConfig) -> Option<String> {
    match server {
        ServerConfig::Embedded { .. } => None,
        ServerConfig::Http { url } | ServerConfig::AppsScript { url } => Some(url.clone()),
    }
}

fn settings_of(app: &tauri::AppHandle, cfg: &Config) -> Settings {
    let (mode, url) = match &cfg.server {
        ServerConfig::Embedded { .. } => ("embedded", None),
        ServerConfig::Http { url } => ("serve", Some(url.clone())),
        ServerConfig::AppsScript { url } => ("gas", Some(url.clone())),
    };
    Settings {
        server: ServerIn { mode: mode.into(), url },
        pc_label: cfg.label.clone(),
        poll_interval_sec: cfg.poll_interval().as_secs(),
        autostart: crate::autostart::is_enabled(app),
        has_token: token_key(&cfg.server).is_some_and(|k| token::load(&k).is_ok()),
    }
}

#[tauri::command]
pub async fn get_settings(app: tauri::AppHandle, st: S<'_>) -> R<Settings> {
    let cfg = Config::load(&st.paths).map_err(|e| err("config", e))?;
    Ok(settings_of(&app, &cfg))
}

#[tauri::command]
pub async fn save_settings(app: tauri::AppHandle, st: S<'_>, settings: Settings, token: Option<String>) -> R<Settings> {
    let mut cfg = Config::load(&st.paths).map_err(|e| err("config", e))?;
    if !pcmail_core::roster::is_valid_label(&settings.pc_label) {
        return Err(err("bad_request", "the PC label must be lower-case a-z 0-9 . _ - (max 40)"));
    }
    let url = settings.server.url.clone().unwrap_or_default();
    cfg.server = match settings.server.mode.as_str() {
        "embedded" => match cfg.server {
            ServerConfig::Embedded { db } => ServerConfig::Embedded { db },
            _ => ServerConfig::Embedded { db: None },
        },
        "serve" if !url.is_empty() => ServerConfig::Http { url },
        "gas" if !url.is_empty() => ServerConfig::AppsScript { url },
        _ => return Err(err("bad_request", "a server URL is needed")),
    };
    cfg.label = settings.pc_label.clone();
    cfg.poll_interval_secs = settings.poll_interval_sec.clamp(1, 3600);
    if let (Some(t), Some(key)) = (token.filter(|t| !t.is_empty()), token_key(&cfg.server)) {
        // the keyring only: never the config file, never a log line
        token::store(&key, &t).map_err(|e| err("keyring", e))?;
    }
    cfg.save(&st.paths).map_err(|e| err("config", e))?;
    crate::autostart::choose(&app, &st.paths, settings.autostart).map_err(|e| err("autostart", e))?;
    {
        let mut c = st.controller.lock().unwrap();
        c.set_pc(cfg.label.clone());
        c.set_poll_interval_ms(cfg.poll_interval().as_millis() as i64);
    }
    st.interval_ms.store(crate::interval_ms(&cfg), Ordering::Relaxed);
    st.remote.reset();
    st.reload.store(true, Ordering::Relaxed);
    st.poke();
    Ok(settings_of(&app, &cfg))
}
