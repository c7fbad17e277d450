//! What the server's tests share: `pcmail serve`'s HTTP layer on loopback,
//! its database in the server's own folder, stopped when dropped (with PCs
//! already on its roster, or on a listener the test bound); an engine with
//! an alert open for the webhook to post.
#![allow(dead_code)] // each test file uses its part

use pcmail_server::{serve_with_listener, Engine, EngineConfig, ServeOptions};
use pcmail_testkit::{register, Loopback};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use tokio::net::TcpListener;

/// The alert tests' start of time, and a minute.
pub const T0: i64 = 1_767_225_600_000;
pub const MIN: i64 = 60_000;

/// `pcmail serve` on loopback with the admin secret `token`.
pub async fn serve(token: &str) -> Loopback {
    serve_with(token, |_, _| {}).await
}

/// The same, with `labels` put on its roster by the admin (each its
/// hostname in capitals).
pub async fn serve_registered(token: &str, labels: &[&str]) -> Loopback {
    let s = serve(token).await;
    register(&s.url, token, labels).await;
    s
}

/// The same as [`serve`] on a listener the test bound itself (to change the
/// process's limits between the bind and the server's start).
pub fn serve_on(listener: TcpListener, token: &str) -> Loopback {
    let token = token.to_string();
    Loopback::serve(listener, move |dir, listener, stopped| {
        serve_with_listener(listener, ServeOptions::new(dir.join("server.db"), token), stopped)
    })
}

/// The same, with its options changed first by `change` (handed the
/// server's folder too, for a certificate kept there).
pub async fn serve_with(token: &str, change: impl FnOnce(&mut ServeOptions, &Path)) -> Loopback {
    Loopback::start(|dir, listener, stopped| {
        let mut opts = ServeOptions::new(dir.join("server.db"), token);
        change(&mut opts, dir);
        serve_with_listener(listener, opts, stopped)
    })
    .await
}

/// An engine in memory posting alerts to `webhook_url`, with `pc-a` and
/// `pc-b` on its roster and a mail from `pc-a` that `pc-b` left undelivered:
/// the sweep at 31 minutes has opened one alert, not yet posted.
pub fn engine_with_open_alert(webhook_url: &str) -> Arc<Engine> {
    let e =
        Engine::open_in_memory(EngineConfig { webhook_url: Some(webhook_url.into()), ..Default::default() }).unwrap();
    for pc in ["pc-a", "pc-b"] {
        e.handle_value(&json!({"v":1,"op":"roster.set","pc":pc,"args":{"label":pc,"hostname":pc}}), T0);
    }
    let r = e.handle_value(
        &json!({"v":1,"op":"send","pc":"pc-a","args":{"mail":{"id":"mail-1-00000009","to":"pc-b","body":"x"}}}),
        T0,
    );
    assert_eq!(r["ok"], json!(true));
    let r = e.run_sweep(T0 + 31 * MIN);
    assert_eq!(r["alerts"]["opened"], json!(1), "{r}");
    Arc::new(e)
}

/// An HTTP app (a webhook's receiver) on loopback, serving until the test
/// ends; its address, `http://ADDR`.
pub async fn serve_app(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}
