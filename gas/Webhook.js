// Posts each newly opened alert once to WEBHOOK_URL (Discord-style {"content"}).
// Fetches run outside the lock; a failure only counts a try and never throws.

function postAlerts_(started) {
  const url = prop_('WEBHOOK_URL');
  if (!url) return 0;
  const todo = readAlerts_().filter(function (a) {
    return a.resolvedAt === null && !a.posted && a.postTries < WEBHOOK_MAX_TRIES;
  }).sort(function (x, y) { return x.openedAt - y.openedAt || (x.key < y.key ? -1 : 1); });
  const outcome = {};
  todo.forEach(function (a) {
    if (Date.now() - started > SWEEP_BUDGET_MS) return;
    let ok = false;
    try {
      const resp = UrlFetchApp.fetch(url, {
        method: 'post', contentType: 'application/json', muteHttpExceptions: true,
        payload: JSON.stringify({ content: a.message })
      });
      const code = resp.getResponseCode();
      ok = code >= 200 && code < 300;
    } catch (e) {
      ok = false;
    }
    outcome[a.key] = ok;
  });
  if (!Object.keys(outcome).length) return 0;
  try {
    withLock_(function () {
      const sh = tab_('Alerts');
      const all = readAlerts_();
      all.forEach(function (a) {
        if (!(a.key in outcome)) return;
        a.postTries += 1;
        if (outcome[a.key]) a.posted = true;
      });
      writeText_(sh, 2, 10, all.map(function (a) { return [String(a.posted), String(a.postTries)]; }));
    });
  } catch (e) {
    console.warn('webhook bookkeeping skipped: ' + e.message); // retried next sweep
  }
  return Object.keys(outcome).length;
}
