// The Alerts tab: one row per (subject, kind), updated in place by the sweep.

const ALERT_KEEP_RESOLVED_MS = 30 * 24 * 3600 * 1000; // resolved alerts older than this are dropped
const WEBHOOK_MAX_TRIES = 5;                          // tries in all, as the Rust server

function rowToAlert_(r) {
  return {
    key: r[0], kind: r[1], subject: r[2], pc: r[3], message: r[4], openedAt: Number(r[5]),
    updatedAt: Number(r[6]), resolvedAt: r[7] === '' ? null : Number(r[7]), count: Number(r[8]),
    posted: r[9] === 'true', postTries: Number(r[10] || 0), lastError: r[11] ? r[11] : null,
    nextTryAt: r[12] ? Number(r[12]) : null
  };
}
function alertToRow_(a) {
  return [a.key, a.kind, a.subject, a.pc, a.message, String(a.openedAt), String(a.updatedAt),
    a.resolvedAt === null ? '' : String(a.resolvedAt), String(a.count), String(a.posted), String(a.postTries),
    a.lastError || '', a.nextTryAt === null ? '' : String(a.nextTryAt)];
}
// The wire form (docs/protocol.md, alerts): the webhook outcome travels with the alert,
// so `pcmail alerts` and the tray show it whatever the webhook did.
function alertView_(a) {
  return { key: a.key, kind: a.kind, subject: a.subject, pc: a.pc, message: a.message, openedAt: a.openedAt,
    updatedAt: a.updatedAt, resolvedAt: a.resolvedAt, count: a.count, posted: a.posted,
    postTries: a.postTries, lastError: a.lastError };
}

function readAlerts_() {
  const sh = tab_('Alerts');
  return readText_(sh, 2, 1, sh.getLastRow() - 1, TABS.Alerts.length).map(rowToAlert_);
}

// Opens, updates and resolves against what should alert now; one read, one write.
function mergeAlerts_(want, now) {
  const sh = tab_('Alerts');
  const before = readAlerts_();
  const counts = { opened: 0, updated: 0, resolved: 0 };
  const all = before.map(function (a) {
    const w = want[a.key];
    if (w) {
      delete want[a.key];
      a.message = w.message;
      a.pc = w.pc;
      a.updatedAt = now;
      a.count += 1;
      if (a.resolvedAt !== null) { // the condition is back: open the same row again
        a.resolvedAt = null;
        a.openedAt = now;
        a.posted = false;
        a.postTries = 0;
        a.lastError = null;
        a.nextTryAt = null;
        counts.opened++;
      } else counts.updated++;
    } else if (a.resolvedAt === null) {
      a.resolvedAt = now;
      counts.resolved++;
    }
    return a;
  }).filter(function (a) { return a.resolvedAt === null || now - a.resolvedAt < ALERT_KEEP_RESOLVED_MS; });
  Object.keys(want).sort().forEach(function (key) {
    const w = want[key];
    all.push({ key: key, kind: w.kind, subject: w.subject, pc: w.pc, message: w.message, openedAt: now,
      updatedAt: now, resolvedAt: null, count: 1, posted: false, postTries: 0, lastError: null, nextTryAt: null });
    counts.opened++;
  });
  writeText_(sh, 2, 1, all.map(alertToRow_));
  if (before.length > all.length) deleteRowsSafe_(sh, 2 + all.length, before.length - all.length);
  return counts;
}

// Opens (or updates) one alert outside the sweep's merge, e.g. `stale_deploy` raised by
// the trigger instead of sweeping. The next sweep that runs resolves it.
function raiseAlert_(kind, subject, pc, message, now) {
  withLock_(function () {
    const sh = tab_('Alerts');
    const all = readAlerts_();
    const key = subject + '|' + kind;
    const a = all.filter(function (x) { return x.key === key; })[0];
    if (a) {
      if (a.resolvedAt !== null) { a.resolvedAt = null; a.openedAt = now; a.posted = false; a.postTries = 0; a.lastError = null; a.nextTryAt = null; }
      a.message = message; a.updatedAt = now; a.count += 1;
    } else {
      all.push({ key: key, kind: kind, subject: subject, pc: pc, message: message, openedAt: now, updatedAt: now,
        resolvedAt: null, count: 1, posted: false, postTries: 0, lastError: null, nextTryAt: null });
    }
    writeText_(sh, 2, 1, all.map(alertToRow_));
  });
}

function listAlerts_(openOnly) {
  return readAlerts_()
    .filter(function (a) { return !openOnly || a.resolvedAt === null; })
    .sort(function (x, y) { return y.updatedAt - x.updatedAt || (x.key < y.key ? -1 : x.key > y.key ? 1 : 0); })
    .slice(0, 500)
    .map(alertView_);
}
