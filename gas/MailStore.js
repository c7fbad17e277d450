// Mail rows. The live tab "Mail" holds mail that is not final; the sweep moves final
// mail to "Archive" (same layout), so the live tab stays small as history grows.

// Column numbers (1-based). state..q are the only columns that change after send,
// and they are adjacent so one write updates a mail.
const MCOL = { id: 1, to: 3, createdAt: 10, broadcastOf: 11, state: 12, updatedAt: 14, q: 15 };
const MAIL_NCOL = 19;     // all columns
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
    // Mail to a name re-queued after the name moved (Sessions.js): delivered, with q set.
    requeued: r[11] === 'delivered' && r[14] !== '',
    expiresIn: r[17] ? Number(r[17]) : null, // absent in rows older than the column
    recipients: r[18] ? JSON.parse(r[18]) : null // a copy of mail to several addresses
  };
}

function mutRow_(m) {
  return [m.state, JSON.stringify(m.timeline), String(m.updatedAt),
    m.state === 'new' || (m.requeued && m.state === 'delivered') ? m.to : ''];
}

function mailToRow_(m) {
  return [m.id, m.from, m.to, m.kind, String(m.urgent), m.expiresAt === null ? '' : String(m.expiresAt),
    m.inReplyTo || '', String(m.auto), String(m.hop), String(m.createdAt), m.broadcastOf || '']
    .concat(mutRow_(m)).concat([m.subject, m.body, m.expiresIn == null ? '' : String(m.expiresIn),
      m.recipients ? JSON.stringify(m.recipients) : '']);
}

// The wire form, keys in the Rust server's order.
function mailView_(m) {
  const v = {
    id: m.id, from: m.from, to: m.to, kind: m.kind, subject: m.subject, body: m.body,
    urgent: m.urgent, expiresAt: m.expiresAt, inReplyTo: m.inReplyTo, auto: m.auto, hop: m.hop,
    createdAt: m.createdAt, state: m.state, broadcastOf: m.broadcastOf
  };
  if (m.recipients) v.recipients = m.recipients.slice(); // only mail to several addresses has it
  v.timeline = m.timeline.map(function (t) {
    return { state: t.state, at: t.at, by: t.by, note: t.note === undefined ? null : t.note };
  });
  return v;
}

// A mail view as a reader sees it at `now` (crates/core due.rs `mail_as_read`): past
// its expiry and not final, it is `expired` at its expiresAt, by `server`, whether or
// not a sweep wrote it yet. Mutates and returns the view.
function mailAsRead_(v, now) {
  if (v.expiresAt === null || v.expiresAt > now || RANK[v.state] >= 3) return v;
  const last = v.timeline.length ? v.timeline[v.timeline.length - 1].at : v.expiresAt;
  v.state = 'expired';
  v.timeline.push({ state: 'expired', at: Math.max(v.expiresAt, last), by: 'server', note: null });
  return v;
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
  if (!ids.length) return map;
  locate_(ids).forEach(function (loc) { if (!map[loc.mail.id]) map[loc.mail.id] = loc; });
  return map;
}

// The caller's mail still new (q = label) and the live mail named by `ids`, found by ONE
// TextFinder over the id..q columns and read with ONE getValues of the span covering
// them, however they interleave with other PCs' mail. A mail id on
// two rows (a sweep band cut short, see Sweep.js) counts once: the first row.
// Returns {locs: {id: loc}, list: [loc] in sheet order, span: {lo, vals}, cut}.
function mineLive_(label, ids, limit) {
  // `label` may be a list: the caller's label and the names its live sessions hold.
  const qs = [].concat(label);
  const sh = tab_('Mail');
  const last = sh.getLastRow();
  let pendingRows = [];
  const idRows = [];
  if (last >= 2) {
    if (!ids.length) {
      if (limit > 0) pendingRows = findRows_(sh, MCOL.q, qs);
    } else {
      const want = {};
      ids.forEach(function (id) { want[id] = true; });
      const texts = Object.keys(want).concat(limit > 0 ? qs : []).map(escapeRe_);
      const range = sh.getRange(2, 1, last - 1, MCOL.q);
      for (let i = 0; i < texts.length; i += FIND_BATCH) {
        range.createTextFinder('^(?:' + texts.slice(i, i + FIND_BATCH).join('|') + ')$')
          .useRegularExpression(true).matchCase(true).matchEntireCell(true).findAll()
          .forEach(function (c) {
            if (c.getColumn() === MCOL.q) pendingRows.push(c.getRow());
            else if (c.getColumn() === MCOL.id) idRows.push(c.getRow());
          });
      }
      pendingRows.sort(function (a, b) { return a - b; });
    }
  }
  // Mail confirmed in this poll leaves the pending list: read that many more.
  const cap = limit > 0 ? limit + ids.length : 0;
  const cut = pendingRows.length > cap;
  const rows = uniqSorted_(pendingRows.slice(0, cap).concat(idRows));
  const span = { lo: rows.length ? rows[0] : 0, vals: [] };
  if (rows.length) span.vals = readText_(sh, span.lo, 1, rows[rows.length - 1] - span.lo + 1, MAIL_NCOL);
  const locs = {};
  const list = [];
  rows.forEach(function (r) {
    const m = rowToMail_(span.vals[r - span.lo]);
    if (locs[m.id]) return;
    locs[m.id] = { where: 'Mail', row: r, mail: m };
    list.push(locs[m.id]);
  });
  return { locs: locs, list: list, span: span, cut: cut };
}

function uniqSorted_(xs) {
  const seen = {};
  return xs.filter(function (x) { if (seen[x]) return false; seen[x] = true; return true; })
    .sort(function (a, b) { return a - b; });
}

// Writes back the changed columns (state..q) of live mails in ONE setValues over the
// rows they span; rows in between keep the values `span` read under the same lock.
function saveMut_(locs, span) {
  locs = locs.filter(function (l) { return l; });
  if (!locs.length) return;
  const sh = tab_('Mail');
  locs.forEach(function (loc) {
    if (loc.where !== 'Mail') throw new Error('archived mail cannot change: ' + loc.mail.id);
  });
  locs.sort(function (a, b) { return a.row - b.row; });
  const lo = locs[0].row;
  const hi = locs[locs.length - 1].row;
  const byRow = {};
  locs.forEach(function (l) { byRow[l.row] = mutRow_(l.mail); });
  const out = [];
  for (let r = lo; r <= hi; r++) {
    if (byRow[r]) { out.push(byRow[r]); continue; }
    const v = span && span.vals[r - span.lo];
    if (!v) { // no read of this row: write the changed rows one by one instead
      locs.forEach(function (l) { writeText_(sh, l.row, MCOL.state, [mutRow_(l.mail)]); });
      return;
    }
    out.push(v.slice(MCOL.state - 1, MCOL.state - 1 + MUT_NCOL));
  }
  writeText_(sh, lo, MCOL.state, out);
}

function appendMails_(mails) {
  appendText_(tab_('Mail'), mails.map(mailToRow_));
}

// The caller's mail still `new`, oldest first, at most `limit`.
function pendingOf_(mine, label, limit) {
  const qs = [].concat(label);
  const mails = mine.list.map(function (l) { return l.mail; })
    .filter(function (m) { return (m.state === 'new' || m.requeued) && qs.indexOf(m.to) >= 0; });
  const take = mails.slice(0, limit);
  take.sort(function (a, b) { return a.createdAt - b.createdAt; });
  return { mails: take, more: mails.length > limit || mine.cut };
}
