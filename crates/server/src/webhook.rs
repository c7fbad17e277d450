//! Webhook posts of newly opened alerts: each one once, a failed post retried
//! on later sweeps, at most `MAX_TRIES` times. Never on the request path.
//!
//! The shape is Discord's `{"content": …}` or Slack's `{"text": …}`, chosen by
//! the URL (`WebhookFormat::for_url`). A 429/503 answer with `Retry-After`
//! (delay-seconds) is honoured: nothing goes to the webhook before then, and
//! that answer does not use up a try. The last error is kept on the alert row
//! (`lastError` in the `alerts` op), so an alert stays visible with the reason
//! its post failed, whatever the webhook does.

use crate::alert_posts::record_outcome;
pub use crate::alert_posts::{Outcome, MAX_TRIES};
use crate::engine::Engine;
use pcmail_core::Millis;
use std::sync::Arc;
use std::time::Duration;

pub const POST_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest `Retry-After` honoured (a larger one is cut to this).
pub const MAX_RETRY_AFTER_MS: Millis = 24 * 3600 * 1000;

/// The body a webhook receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookFormat {
    /// `{"content": "<line>"}` (Discord, the default).
    Discord,
    /// `{"text": "<line>"}` (Slack and Slack-compatible receivers).
    Slack,
}

impl WebhookFormat {
    /// A `#slack` / `#discord` fragment decides (it is never sent); else a
    /// `hooks.slack.com` host means Slack; else Discord.
    pub fn for_url(url: &str) -> WebhookFormat {
        match url.split_once('#').map(|(_, f)| f.to_ascii_lowercase()) {
            Some(f) if f == "slack" => return WebhookFormat::Slack,
            Some(f) if f == "discord" => return WebhookFormat::Discord,
            _ => {}
        }
        let lower = url.to_ascii_lowercase();
        let host = lower.split("://").nth(1).unwrap_or("").split(['/', '?', '#']).next().unwrap_or("");
        if host == "hooks.slack.com" {
            WebhookFormat::Slack
        } else {
            WebhookFormat::Discord
        }
    }

    pub fn payload(self, message: &str) -> serde_json::Value {
        match self {
            WebhookFormat::Discord => serde_json::json!({ "content": message }),
            WebhookFormat::Slack => serde_json::json!({ "text": message }),
        }
    }
}

/// `Retry-After` as delay-seconds → ms (at most `MAX_RETRY_AFTER_MS`); an
/// HTTP-date or garbage → None.
pub fn retry_after_ms(value: &str) -> Option<Millis> {
    let secs: f64 = value.trim().parse().ok()?;
    if !secs.is_finite() || secs < 0.0 {
        return None;
    }
    Some(((secs * 1000.0).ceil() as Millis).min(MAX_RETRY_AFTER_MS))
}

/// One post; never an error: the outcome says what happened.
async fn post_one(client: &reqwest::Client, url: &str, body: &serde_json::Value, now: Millis) -> Outcome {
    match client.post(url).timeout(POST_TIMEOUT).json(body).send().await {
        Ok(r) if r.status().is_success() => Outcome { ok: true, counts: true, error: None, next_try_at: None },
        Ok(r) => {
            let status = r.status();
            let wait = if status.as_u16() == 429 || status.as_u16() == 503 {
                r.headers().get(reqwest::header::RETRY_AFTER).and_then(|v| v.to_str().ok()).and_then(retry_after_ms)
            } else {
                None
            };
            let text = r.text().await.unwrap_or_default();
            let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(120).collect();
            let mut error = format!("HTTP {}", status.as_u16());
            if let Some(w) = wait {
                error.push_str(&format!(" (retry after {} s)", (w + 999) / 1000));
            }
            if !text.is_empty() {
                error.push_str(": ");
                error.push_str(&text);
            }
            Outcome { ok: false, counts: wait.is_none(), error: Some(error), next_try_at: wait.map(|w| now + w) }
        }
        Err(e) => {
            let msg: String = e.to_string().chars().take(200).collect();
            Outcome { ok: false, counts: true, error: Some(msg), next_try_at: None }
        }
    }
}

/// Posts every pending alert once; returns how many posts succeeded.
pub async fn flush(engine: Arc<Engine>, client: &reqwest::Client, now: Millis) -> anyhow::Result<usize> {
    let Some(url) = engine.config().webhook_url.clone() else { return Ok(0) };
    let format = WebhookFormat::for_url(&url);
    let target = url.split('#').next().unwrap_or(&url).to_string();
    let e = engine.clone();
    let pending = tokio::task::spawn_blocking(move || e.pending_webhook_posts(now)).await??;
    let mut posted = 0;
    let mut wait_until: Option<Millis> = None;
    for (key, content) in pending {
        let outcome = match wait_until {
            // Rate limited: the rest wait too, without using up a try.
            Some(t) => Outcome { ok: false, counts: false, error: None, next_try_at: Some(t) },
            None => post_one(client, &target, &format.payload(&content), now).await,
        };
        if !outcome.ok && outcome.error.is_some() {
            tracing::warn!(alert = %key, error = ?outcome.error, "webhook post failed; retried on a later sweep");
        }
        if !outcome.counts && wait_until.is_none() {
            wait_until = outcome.next_try_at;
        }
        posted += usize::from(outcome.ok);
        let e = engine.clone();
        tokio::task::spawn_blocking(move || {
            e.with_tx(crate::engine::Mode::Write, |tx| record_outcome(tx, &key, &outcome, now))
                .map_err(|err| anyhow::anyhow!("{err}"))
        })
        .await??;
    }
    Ok(posted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_by_fragment_then_host() {
        assert_eq!(WebhookFormat::for_url("https://hooks.slack.com/services/T/B/x"), WebhookFormat::Slack);
        assert_eq!(WebhookFormat::for_url("https://HOOKS.SLACK.COM/services/x"), WebhookFormat::Slack);
        assert_eq!(WebhookFormat::for_url("https://chat.example/hook#slack"), WebhookFormat::Slack);
        assert_eq!(WebhookFormat::for_url("https://hooks.slack.com/x#discord"), WebhookFormat::Discord);
        assert_eq!(WebhookFormat::for_url("https://discord.com/api/webhooks/1/x"), WebhookFormat::Discord);
        assert_eq!(WebhookFormat::for_url("https://evil.example/hooks.slack.com/"), WebhookFormat::Discord);
        assert_eq!(WebhookFormat::Slack.payload("m"), serde_json::json!({"text": "m"}));
        assert_eq!(WebhookFormat::Discord.payload("m"), serde_json::json!({"content": "m"}));
    }

    #[test]
    fn retry_after_is_delay_seconds_capped_at_a_day() {
        assert_eq!(retry_after_ms("30"), Some(30_000));
        assert_eq!(retry_after_ms(" 1.5 "), Some(1_500));
        assert_eq!(retry_after_ms("999999"), Some(MAX_RETRY_AFTER_MS));
        assert_eq!(retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(retry_after_ms("-1"), None);
        assert_eq!(retry_after_ms(""), None);
    }
}
