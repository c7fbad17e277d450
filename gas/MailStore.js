// Mail rows. The live tab "Mail" holds mail that is not final; the sweep moves final
// mail to "Archive" (same layout), so the live tab stays small as history grows.

// Column numbers (1-based). state..q are the only columns that change after send,
// and they are adjacent so one write updates a mail.
const MCOL = { id: 1, broadcastOf: 11, state: 12, q: 15 };
const MAIL_NCOL = 18;     // all columns
const MAIL_NARROW = 15;   // everything but subject, body and expiresIn (what the sweep reads)
const MUT_NCOL = 4;       // state, timeline, updatedAt, q
const RANK = { new: 0, delivered: 1, seen: 2, done: 3, failed: 3, expired: 3 };

function rowToMail_(r) {
  return {
    id: r[0], from: r[1], to: r[2], kind: r[3] || 'note', urgent: r[4] === 'true',
    expiresAt: r[5] === '' ? null : Number(r[5]), inReplyTo: r[6] || null,
    auto: r[7] === 'true', hop: Number(r[8] || 0), createdAt: Number(r[9]),
    broadcastOf: r[10] || null, state: r[11], timeline: r[12] ? JSON.parse(r[12]) : [],
    updatedAt: Number(r[13] || 0), subject: r[15] || '', body: r[16] || '',
    expiresIn: r[17] ? Number(r[17]) : null // absent in rows older than the column
  };
}

function mutRow_(m) {
  return [m.state, JSON.stringify(m.timeline), String(m.updatedAt), m.state === 'new' ? m.to : ''];
}

function mailToRow_(m) {
  return [m.id, m.from, m.to, m.kind, String(m.urgent), m.expiresAt === null ? '' : String(m.expiresAt),
    m.inReplyTo || '', String(m.auto), String(m.hop), String(m.createdAt), m.broadcastOf || '']
    .concat(mutRow_(m)).concat([m.subject, m.body, m.expiresIn == null ? '' : String(m.expiresIn)]);
}

// The wire form, keys in the Rust server's order.
function mailView_(m) {
  return {
    id: m.id, from: m.from, to: m.to, kind: m.kind, subject: m.subject, body: m.body,
    urgent: m.urgent, expiresAt: m.expiresAt, inReplyTo: m.inReplyTo, auto: m.auto, hop: m.hop,
    createdAt: m.createdAt, state: m.state, broadcastOf: m.broadcastOf,
    timeline: m.timeline.map(function (t) {
      return { state: t.state, at: t.at, by: t.by, note: t.note === undefined ? null : t.note };
    })
  };
}

// Moves forward only; a step to a rank ≤ the current one is a no-op.
// `at` is clamped to not before the previous timeline entry.
function transition_(m, state, at, by, note, now) {
  if (RANK[state] <= RANK[m.state]) return false;
  m.state = state;
  m.timeline.push({ state: state, at: Math.max(at, lastAt_(m)), by: by, note: note === undefined ? null : note });
  m.updatedAt = now;
  return true;
}

function lastAt_(m) {
  return m.timeline.length ? m.timeline[m.timeline.length - 1].at : m.createdAt;
}

// Finds mails by id (or by broadcastOf), live tab first, then the archive.
// Returns [{where, row, mail}] in sheet order; only exact matches.
function locate_(ids, col) {
  col = col || MCOL.id;
  const key = col === MCOL.id ? 'id' : 'broadcastOf';
  const want = {};
  ids.forEach(function (id) { want[id] = true; });
  const out = [];
  const foundKeys = {};
  ['Mail', 'Archive'].forEach(function (name) {
    const rest = Object.keys(want).filter(function (id) { return col !== MCOL.id || !foundKeys[id]; });
    if (!rest.length) return;
    const sh = tab_(name);
    const rows = findRows_(sh, col, rest);
    const vals = readRowsAt_(sh, rows, MAIL_NCOL);
    rows.forEach(function (row) {
      const m = rowToMail_(vals[row]);
      if (!want[m[key]]) return;
      foundKeys[m[key]] = true;
      out.push({ where: name, row: row, mail: m });
    });
  });
  return out;
}

// Map id → located mail (first hit).
function locateMap_(ids) {
  const map = {};
  locate_(ids).forEach(function (loc) { if (!map[loc.mail.id]) map[loc.mail.id] = loc; });
  return map;
}

// Writes back the changed columns of live mails, one short write each.
function saveMut_(locs) {
  if (!locs.length) return;
  const sh = tab_('Mail');
  locs.forEach(function (loc) {
    if (loc.where !== 'Mail') throw new Error('archived mail cannot change: ' + loc.mail.id);
    writeText_(sh, loc.row, MCOL.state, [mutRow_(loc.mail)]);
  });
}

function appendMails_(mails) {
  appendText_(tab_('Mail'), mails.map(mailToRow_));
}

// The caller's mail still `new`, oldest first: TextFinder on the q column finds the
// rows inside Sheets; only those rows are read.
function pendingFor_(label, limit) {
  const sh = tab_('Mail');
  const rows = findRows_(sh, MCOL.q, [label]);
  const take = rows.slice(0, limit);
  const vals = readRowsAt_(sh, take, MAIL_NCOL);
  const mails = take.map(function (r) { return rowToMail_(vals[r]); })
    .filter(function (m) { return m.state === 'new' && m.to === label; });
  mails.sort(function (a, b) { return a.createdAt - b.createdAt; });
  return { mails: mails, more: rows.length > limit };
}
