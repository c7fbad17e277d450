// The 10-minute sweep. It must never starve polls (seed 002, pitfall 3): it takes
// its own lease (a Script Property) instead of holding the script lock, reads the live
// tab without the lock (only the sweep ever moves rows), and takes the script lock
// only for short band-sized writes. Every step is idempotent, so a sweep cut short
// by the time limit is finished by the next one.

const SWEEP_BAND = 500;                 // rows per locked read-modify-write
const SWEEP_BUDGET_MS = 4 * 60 * 1000;  // start no new band after this (the limit is 6 min)
const SWEEP_LEASE_MS = 6 * 60 * 1000;

function runSweep_(now) {
  const started = Date.now();
  const props = PropertiesService.getScriptProperties();
  withLock_(function () {
    if (Number(props.getProperty('SWEEP_LEASE_UNTIL') || 0) > now) {
      throw pcErr_('busy', 'a sweep is already running');
    }
    props.setProperty('SWEEP_LEASE_UNTIL', String(now + SWEEP_LEASE_MS));
  });
  try {
    const snap = snapshotLive_();
    // Alerts see the states after this sweep's expiry (final mail raises none).
    const after = snap.map(function (s) {
      const m = JSON.parse(JSON.stringify(s.mail));
      if (isDue_(m, now)) transition_(m, 'expired', now, 'server', null, now);
      return m;
    });
    const alerts = alertPass_(after, now);
    const expired = bandPass_(snap, now, started);
    postAlerts_(started);
    return { expired: expired, alerts: alerts };
  } finally {
    props.deleteProperty('SWEEP_LEASE_UNTIL');
  }
}

function isDue_(m, now) {
  return m.expiresAt !== null && m.expiresAt <= now && RANK[m.state] < 3;
}

// The live tab without subject/body, one read, no lock.
function snapshotLive_() {
  const sh = tab_('Mail');
  return readText_(sh, 2, 1, sh.getLastRow() - 1, MAIL_NARROW).map(function (r, i) {
    return { row: i + 2, mail: rowToMail_(r) };
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
// the rows above a band never move. Per band, under the lock: one read, one archive
// append, one events append, one rewrite of the kept rows, one deleteRows.
function bandPass_(snap, now, started) {
  const work = snap.filter(function (s) { return isDue_(s.mail, now) || RANK[s.mail.state] === 3; });
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
      rows.forEach(function (r, i) {
        if (r[MCOL.state - 1] && RANK[r[MCOL.state - 1]] < 3 && r[5] !== '' && Number(r[5]) <= now) {
          const m = rowToMail_(r);
          transition_(m, 'expired', now, 'server', null, now);
          events.push(eventOf_(m));
          expired++;
          r = mailToRow_(m);
        }
        if (RANK[r[MCOL.state - 1]] === 3) {
          if (firstGone < 0) firstGone = i;
          gone.push(r);
        } else kept.push(r);
      });
      if (!gone.length) return;
      appendText_(archive, gone);
      appendEvents_(events);
      writeText_(live, b.lo + firstGone, 1, kept.slice(firstGone));
      live.deleteRows(b.lo + kept.length, gone.length);
    });
  });
  return expired;
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
  const H = 60 * LIMITS.MIN;
  function add(kind, subject, pc, message) {
    want[subject + '|' + kind] = { kind: kind, subject: subject, pc: pc, message: message };
  }
  mails.forEach(function (m) {
    if (m.state === 'delivered') {
      const age = now - deliveredAt_(m);
      if (age > (m.urgent ? 2 * H : 6 * H)) {
        add('unseen', m.id, m.to, 'pcmail: ' + (m.urgent ? 'urgent ' : '') + 'mail ' + m.id + ' from ' + m.from + ' to ' +
          m.to + ' was delivered ' + ago_(age) + ' ago and nobody has read it');
      }
    } else if (m.state === 'new' && now - m.createdAt > 30 * LIMITS.MIN) {
      add('undelivered', m.id, m.to, 'pcmail: mail ' + m.id + ' from ' + m.from + ' to ' + m.to + ' is not delivered after ' +
        ago_(now - m.createdAt) + ' (is the poller on ' + m.to + ' running?)');
    }
  });
  pcs.forEach(function (p) {
    if (p.lastPollAt !== null && now - p.lastPollAt > 10 * LIMITS.MIN) {
      add('stale_pc', p.label, p.label, 'pcmail: ' + p.label + ' has not polled for ' + ago_(now - p.lastPollAt));
    }
  });
  return want;
}

function alertPass_(mails, now) {
  const want = wantedAlerts_(mails, readRoster_(), now);
  return withLock_(function () { return mergeAlerts_(want, now); });
}
