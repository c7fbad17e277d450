// Posts each newly opened alert to WEBHOOK_URL. Fetches run outside the lock; a failure
// only records a try and the error on the alert row, and never throws. The alert stays
// in the `alerts` op whatever the webhook does.
//
// Shape (docs/protocol.md, "Webhook"): Discord {"content": …} or Slack {"text": …},
// chosen by the Script Property WEBHOOK_FORMAT (discord|slack), else by a URL fragment
// (#slack / #discord, never sent), else by the host (hooks.slack.com → slack).
// A 429/503 with Retry-After is honoured: no post to that URL before then, and the
// rate-limited answer does not use up one of the 5 tries.

function webhookFormat_(url, setting) {
  const s = String(setting || '').toLowerCase();
  if (s === 'slack' || s === 'discord') return s;
  const hash = url.indexOf('#') >= 0 ? url.slice(url.indexOf('#') + 1).toLowerCase() : '';
  if (hash === 'slack' || hash === 'discord') return hash;
  return /^https?:\/\/hooks\.slack\.com\//i.test(url) ? 'slack' : 'discord';
}

function webhookPayload_(format, message) {
  return format === 'slack' ? { text: message } : { content: message };
}

// Retry-After in delay-seconds → ms to wait (at most 1 day); null when absent or not a
// number (an HTTP-date is not honoured, as in the Rust server).
function retryAfterMs_(headers) {
  let v = null;
  Object.keys(headers || {}).forEach(function (k) { if (k.toLowerCase() === 'retry-after') v = String(headers[k]); });
  if (v === null || !/^\s*\d+(\.\d+)?\s*$/.test(v)) return null;
  return Math.min(Math.ceil(Number(v) * 1000), 24 * 3600 * 1000);
}

function postAlerts_(started, now) {
  const rawUrl = prop_('WEBHOOK_URL');
  if (!rawUrl) return 0;
  const format = webhookFormat_(rawUrl, prop_('WEBHOOK_FORMAT'));
  const url = rawUrl.split('#')[0];
  const todo = readAlerts_().filter(function (a) {
    return a.resolvedAt === null && !a.posted && a.postTries < WEBHOOK_MAX_TRIES && (a.nextTryAt === null || a.nextTryAt <= now);
  }).sort(function (x, y) { return x.openedAt - y.openedAt || (x.key < y.key ? -1 : 1); });
  const outcome = {};
  let waitUntil = null; // set by a Retry-After: the rest wait too
  todo.forEach(function (a) {
    if (Date.now() - started > SWEEP_BUDGET_MS) return;
    if (waitUntil !== null) { outcome[a.key] = { ok: false, counts: false, error: null, nextTryAt: waitUntil }; return; }
    const o = { ok: false, counts: true, error: null, nextTryAt: null };
    try {
      const resp = UrlFetchApp.fetch(url, {
        method: 'post', contentType: 'application/json', muteHttpExceptions: true,
        payload: JSON.stringify(webhookPayload_(format, a.message))
      });
      const code = resp.getResponseCode();
      o.ok = code >= 200 && code < 300;
      if (!o.ok) {
        const wait = (code === 429 || code === 503) ? retryAfterMs_(resp.getHeaders()) : null;
        const body = String(resp.getContentText() || '').replace(/\s+/g, ' ').slice(0, 120);
        o.error = 'HTTP ' + code + (wait !== null ? ' (retry after ' + Math.ceil(wait / 1000) + ' s)' : '') + (body ? ': ' + body : '');
        if (wait !== null) { o.nextTryAt = now + wait; o.counts = false; waitUntil = o.nextTryAt; }
      }
    } catch (e) {
      o.error = String(e && e.message || e).slice(0, 200);
    }
    outcome[a.key] = o;
  });
  if (!Object.keys(outcome).length) return 0;
  try {
    withLock_(function () {
      const sh = tab_('Alerts');
      const all = readAlerts_();
      all.forEach(function (a) {
        const o = outcome[a.key];
        if (!o) return;
        if (o.counts) a.postTries += 1;
        if (o.ok) { a.posted = true; a.lastError = null; } else if (o.error) a.lastError = o.error;
        a.nextTryAt = o.nextTryAt;
      });
      writeText_(sh, 2, 10, all.map(function (a) {
        return [String(a.posted), String(a.postTries), a.lastError || '', a.nextTryAt === null ? '' : String(a.nextTryAt)];
      }));
    });
  } catch (e) {
    console.warn('webhook bookkeeping skipped: ' + e.message); // retried next sweep
  }
  return Object.keys(outcome).length;
}
