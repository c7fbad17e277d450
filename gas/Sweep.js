// The 10-minute sweep. It must never starve polls: it takes
// its own lease (a Script Property) instead of holding the script lock, reads the live
// tab without the lock (only the sweep ever moves rows), and takes the script lock
// only for short band-sized writes. Every step is idempotent, so a sweep cut short
// by the time limit is finished by the next one.

const SWEEP_BAND = 500;                 // rows per locked read-modify-write
const SWEEP_BUDGET_MS = 4 * 60 * 1000;  // start no new band after this (the limit is 6 min)
const SWEEP_LEASE_MS = 6 * 60 * 1000;

const EVENTS_KEEP_MS = 30 * 24 * 3600 * 1000; // PCs that polled within this hold back pruning
const PRUNE_MAX_ROWS = 2000;                   // Events rows pruned per sweep
const ARCHIVE_RETENTION_DAYS = 90;             // default; Script Property ARCHIVE_RETENTION_DAYS
const PURGE_MAX_ROWS = 1000;                   // Archive rows purged per sweep

function runSweep_(now) {
  const started = Date.now();
  withLock_(function () {
    const props = PropertiesService.getScriptProperties();
    if (Number(props.getProperty('SWEEP_LEASE_UNTIL') || 0) > now) {
      throw pcErr_('busy', 'a sweep is already running');
    }
    props.setProperty('SWEEP_LEASE_UNTIL', String(now + SWEEP_LEASE_MS));
  });
  try {
    const snap = snapshotLive_();
    // Alerts see the states after this sweep's expiry (final mail raises none).
    const after = snap.filter(function (s) { return !s.dup; }).map(function (s) {
      const m = JSON.parse(JSON.stringify(s.mail));
      if (isDue_(m, now)) transition_(m, 'expired', m.expiresAt, 'server', null, now);
      return m;
    });
    // Leases: stale, TTL expiry, the stale_lease alerts (Leases.js), in one short lock.
    const leases = withLock_(function () { return leaseSweep_(now); });
    // Jobs (Jobs.js): silent runs timed out, week-old queued jobs cancelled, told ones archived.
    const jobs = withLock_(function () { return jobSweep_(now); });
    const alerts = alertPass_(after, now, leases.want);
    const expired = bandPass_(snap, now, started);
    const pruned = pruneEvents_(now);
    const purged = purgeArchive_(now);
    const jobsPurged = jobPurgeArchive_(now);
    const chunksDropped = chunkSweep_(now); // JobsServer.js
    withLock_(function () { ensureHeadroom_(tab_('Mail')); ensureHeadroom_(tab_('Events')); });
    postAlerts_(started, now);
    console.log('sweep: pruned ' + pruned + ' events, purged ' + purged + ' archived mails, ' + jobsPurged + ' archived jobs, ' + chunksDropped + ' chunk results');
    return { expired: expired, alerts: alerts, leases: leases.counts, jobs: jobs };
  } finally {
    PropertiesService.getScriptProperties().deleteProperty('SWEEP_LEASE_UNTIL');
  }
}

function isDue_(m, now) {
  return m.expiresAt !== null && m.expiresAt <= now && RANK[m.state] < 3;
}

// The live tab without subject/body, one read, no lock. A mail id on a second row (left
// by a band cut short between its rewrite and its deleteRows) is marked `dup`.
function snapshotLive_() {
  const sh = tab_('Mail');
  const seen = {};
  return readText_(sh, 2, 1, sh.getLastRow() - 1, MAIL_NARROW).map(function (r, i) {
    const dup = !!seen[r[0]];
    seen[r[0]] = true;
    return { row: i + 2, mail: rowToMail_(r), dup: dup };
  });
}

// Groups snapshot items into bands of at most SWEEP_BAND consecutive rows.
function bands_(items) {
  const out = [];
  items.forEach(function (s) {
    const b = out[out.length - 1];
    if (b && s.row - b.lo < SWEEP_BAND) { b.items.push(s); b.hi = s.row; } else out.push({ lo: s.row, hi: s.row, items: [s] });
  });
  return out;
}

// Expires due mail and moves final mail to Archive, band by band from the bottom up so
// the rows above a band never move. Each band is safe to repeat after a failure at any
// step: 1. the `expired` events (intent; ones already written are
// skipped), 2. the archive rows, skipping ids already archived, 3. the kept rows
// rewritten upwards, 4. deleteRows. Cut short between 3 and 4, the band leaves second
// copies of kept mail below; readers take the first row of an id, the next sweep
// deletes the copies.
function bandPass_(snap, now, started) {
  const firstRowOf = {};
  snap.forEach(function (s) { if (!(s.mail.id in firstRowOf)) firstRowOf[s.mail.id] = s.row; });
  const work = snap.filter(function (s) { return s.dup || isDue_(s.mail, now) || RANK[s.mail.state] === 3; });
  const live = tab_('Mail');
  const archive = tab_('Archive');
  let expired = 0;
  bands_(work).reverse().forEach(function (b) {
    if (Date.now() - started > SWEEP_BUDGET_MS) return;
    withLock_(function () {
      const rows = readText_(live, b.lo, 1, b.hi - b.lo + 1, MAIL_NCOL);
      const gone = [];
      const kept = [];
      const events = [];
      let firstGone = -1;
      let dropped = 0;
      rows.forEach(function (r, i) {
        const dup = firstRowOf[r[0]] !== undefined && firstRowOf[r[0]] < b.lo + i;
        if (!dup && r[MCOL.state - 1] && RANK[r[MCOL.state - 1]] < 3 && r[5] !== '' && Number(r[5]) <= now) {
          const m = rowToMail_(r);
          transition_(m, 'expired', m.expiresAt, 'server', null, now);
          events.push(eventOf_(m));
          expired++;
          r = mailToRow_(m);
        }
        if (dup || RANK[r[MCOL.state - 1]] === 3) {
          if (firstGone < 0) firstGone = i;
          if (dup) dropped++; else gone.push(r);
        } else kept.push(r);
      });
      if (firstGone < 0) return;
      if (events.length) appendEvents_(events);
      const archived = archivedIds_(archive);
      appendText_(archive, gone.filter(function (r) { return !archived[r[0]]; }));
      writeText_(live, b.lo + firstGone, 1, kept.slice(firstGone));
      deleteRowsSafe_(live, b.lo + kept.length, gone.length + dropped);
    });
  });
  return expired;
}

// Ids among the last rows of the Archive (a band cut short appended there).
function archivedIds_(archive) {
  const last = archive.getLastRow();
  const first = Math.max(2, last - 2 * SWEEP_BAND + 1);
  const out = {};
  if (last >= 2) readText_(archive, first, 1, last - first + 1, 1).forEach(function (r) { out[r[0]] = true; });
  return out;
}

// Drops the oldest Events rows every PC that polled in the last 30 days has passed
// (its recorded poll `since`). A PC that polls with since 0 holds back the rows of its
// own updates. The last row always stays (it carries the highest seq). A PC whose cursor
// is behind the pruned point later gets `cursorReset` (Events.js updatesFor_).
function pruneEvents_(now) {
  const pcs = readRosterLive_().filter(function (p) { return p.lastPollAt !== null && now - p.lastPollAt <= EVENTS_KEEP_MS; });
  if (!pcs.length) return 0;
  const withCursor = pcs.filter(function (p) { return p.cursor > 0; });
  const zero = {};
  pcs.forEach(function (p) { if (p.cursor === 0) zero[p.label] = true; });
  const upTo = withCursor.length ? Math.min.apply(null, withCursor.map(function (p) { return p.cursor; })) : Infinity;
  return withLock_(function () {
    const sh = tab_('Events');
    const last = sh.getLastRow();
    if (last < 3) return 0;
    const n = Math.min(last - 2, PRUNE_MAX_ROWS); // never the last row
    const top = readText_(sh, 2, 1, n, EV_NCOL);
    let k = 0;
    while (k < top.length && Number(top[k][EV.seq]) <= upTo && !zero[top[k][EV.u]] && !zero[top[k][EV.r]]) k++;
    deleteRowsSafe_(sh, 2, k);
    return k;
  });
}

// Archived mail final for longer than the retention (default 90 days) is deleted, with
// a record row in the Purged tab written first (so a repeat after a failed delete does
// not record twice). Archive rows are in the order the sweep moved them.
function purgeArchive_(now) {
  const days = Number(prop_('ARCHIVE_RETENTION_DAYS') || ARCHIVE_RETENTION_DAYS);
  if (!(days > 0)) return 0;
  const cutoff = now - days * 24 * 3600 * 1000;
  return withLock_(function () {
    const sh = tab_('Archive');
    const last = sh.getLastRow();
    if (last < 2) return 0;
    const n = Math.min(last - 1, PURGE_MAX_ROWS);
    const top = readText_(sh, 2, 1, n, MCOL.updatedAt);
    let k = 0;
    while (k < top.length && Number(top[k][MCOL.updatedAt - 1]) < cutoff) k++;
    if (!k) return 0;
    const rec = [String(now), String(k), top[0][0], top[k - 1][0], top[0][MCOL.createdAt - 1], top[k - 1][MCOL.createdAt - 1]];
    const purged = tab_('Purged');
    const pl = purged.getLastRow();
    const prev = pl >= 2 ? readText_(purged, pl, 1, 1, rec.length)[0] : null;
    if (!prev || prev[2] !== rec[2] || prev[3] !== rec[3]) appendText_(purged, [rec]);
    deleteRowsSafe_(sh, 2, k);
    return k;
  });
}

// "42m" or "3h 05m", as the Rust server words it.
function ago_(ms) {
  const mins = Math.floor(Math.max(ms, 0) / LIMITS.MIN);
  return mins >= 60 ? Math.floor(mins / 60) + 'h ' + String(mins % 60).padStart(2, '0') + 'm' : mins + 'm';
}

function deliveredAt_(m) {
  for (let i = m.timeline.length - 1; i >= 0; i--) if (m.timeline[i].state === 'delivered') return m.timeline[i].at;
  return m.updatedAt;
}

// What should be alerting now, keyed "<subject>|<kind>".
function wantedAlerts_(mails, pcs, now) {
  const want = {};
  // Mail to a name: the text names the name and the PC holding it (Sessions.js recipientText_).
  const labels = {};
  pcs.forEach(function (p) { labels[p.label] = true; });
  let names = null;
  const whereIs = function (to) {
    if (labels[to]) return null;
    if (names === null) names = nameWhereabouts_(now);
    return names[to] || null;
  };
  function add(kind, subject, pc, message) {
    want[subject + '|' + kind] = { kind: kind, subject: subject, pc: pc, message: message };
  }
  mails.forEach(function (m) {
    if (m.state === 'delivered') {
      const age = now - deliveredAt_(m);
      if (age > (m.urgent ? LIMITS.UNSEEN_URGENT_MS : LIMITS.UNSEEN_MS)) {
        const at = whereIs(m.to);
        add('unseen', m.id, at ? at.pc : m.to, 'pcmail: ' + (m.urgent ? 'urgent ' : '') + 'mail ' + m.id + ' from ' + m.from + ' to ' +
          recipientText_(m.to, at) + ' was delivered ' + ago_(age) + ' ago and nobody has read it');
      }
    } else if (m.state === 'new' && now - m.createdAt > LIMITS.UNDELIVERED_MS) {
      const at = whereIs(m.to);
      const hint = !at ? 'is the poller on ' + m.to + ' running?' : at.live ? 'is the poller on ' + at.pc + ' running?'
        : 'it waits until a session takes ' + m.to;
      add('undelivered', m.id, at ? at.pc : m.to, 'pcmail: mail ' + m.id + ' from ' + m.from + ' to ' + recipientText_(m.to, at) +
        ' is not delivered after ' + ago_(now - m.createdAt) + ' (' + hint + ')');
    }
  });
  pcs.forEach(function (p) {
    if (p.lastPollAt !== null && pcSilent_(p.lastPollAt, now, LIMITS.STALE_PC_MS)) {
      add('stale_pc', p.label, p.label, 'pcmail: ' + p.label + ' has not polled for ' + ago_(now - p.lastPollAt));
    }
  });
  return want;
}

function alertPass_(mails, now, extra) {
  const want = wantedAlerts_(mails, readRosterLive_(), now);
  Object.keys(extra || {}).forEach(function (k) { want[k] = extra[k]; });
  return withLock_(function () { return mergeAlerts_(want, now); });
}
