// The updates feed: one row per timeline entry (creation included, as the Rust server
// numbers them), in seq order. `seq` is stored in the row (not the row number), so the
// sweep can prune old rows from the top (pruneEvents_ in Sweep.js); the highest pruned
// seq is the seq of the first row minus one.
//
// Every writer reads the tail of the tab first (one getValues): it gives the last seq
// and the events already written, so an op repeated after a failure skips the events
// its first attempt wrote, and a poll whose cursor is recent finds
// its updates in the same read.

const EV = { seq: 0, from: 1, id: 2, state: 3, at: 4, by: 5, u: 6, r: 7, note: 8 };
const EV_NCOL = 9;
const EVENTS_TAIL_ROWS = 500; // rows read from the bottom: a repeat within 500 events is deduplicated

// {rows: [[…]], firstRow, lastRow, lastSeq, keys: {id|state: true}}
function eventsTail_() {
  const sh = tab_('Events');
  ensureColumns_(sh);
  const last = sh.getLastRow();
  const first = Math.max(2, last - EVENTS_TAIL_ROWS + 1);
  const rows = last >= 2 ? readText_(sh, first, 1, last - first + 1, EV_NCOL) : [];
  const keys = {};
  rows.forEach(function (r) { keys[eventKey_(r[EV.id], r[EV.state], r[EV.by], r[EV.r])] = true; });
  return { sheet: sh, rows: rows, firstRow: first, lastRow: Math.max(last, 1),
    lastSeq: rows.length ? Number(rows[rows.length - 1][EV.seq]) : 0, keys: keys };
}

// An event's identity for the repeat check: a state is reached once, except `delivered`
// of mail to a name, recorded again (by the server, for the PC it is withdrawn from;
// by the PC it moves to) when the name moves (Sessions.js).
function eventKey_(id, state, by, r) {
  return id + '|' + state + '|' + by + '|' + r;
}

// Appends the events not already in the tail; returns how many were written.
// The received feed's PC (col r) is `e.pc` when the caller knows it, else the PC a mail
// to a name was delivered to (NameMail, read only when needed), else the mail's `to`.
function appendEvents_(evs, tail) {
  if (!evs.length) return 0;
  tail = tail || eventsTail_();
  let nameMail = null;
  const feedPc = function (e) {
    if (e.state === 'new') return '';
    if (e.pc !== undefined) return e.pc;
    if (nameMail === null) nameMail = nameMailRead_();
    return nameMail[e.id] || e.to;
  };
  const fresh = evs.map(function (e) {
    return { e: e, r: feedPc(e) };
  }).filter(function (x) {
    const k = eventKey_(x.e.id, x.e.state, x.e.by, x.r);
    if (tail.keys[k]) return false;
    tail.keys[k] = true;
    return true;
  });
  if (!fresh.length) return 0;
  const rows = fresh.map(function (x, i) {
    const e = x.e;
    const change = e.state !== 'new';
    return [String(tail.lastSeq + 1 + i), e.from, e.id, e.state, String(e.at), e.by, change ? e.from : '',
      x.r, change && e.note !== null && e.note !== undefined ? String(e.note) : ''];
  });
  writeText_(tail.sheet, tail.lastRow + 1, 1, rows);
  tail.rows = tail.rows.concat(rows);
  tail.lastRow += rows.length;
  tail.lastSeq += rows.length;
  return rows.length;
}

function eventOf_(m, by) {
  const t = m.timeline[m.timeline.length - 1];
  return { from: m.from, to: m.to, id: m.id, state: m.state, at: t.at, by: by || t.by, note: t.note === undefined ? null : t.note };
}

function rowToUpdate_(v) {
  return { seq: Number(v[EV.seq]), id: v[EV.id], state: v[EV.state], at: Number(v[EV.at]), by: v[EV.by] };
}

// The received feed's entry also carries the timeline's note (fail reason, ack, reply:<id>).
function rowToReceivedUpdate_(v) {
  const u = rowToUpdate_(v);
  u.note = v[EV.note] === '' || v[EV.note] === undefined ? null : v[EV.note];
  return u;
}

// State changes of mail sent by `label` (col EV.u; or received by it, col EV.r) after
// `since`, oldest first, at most `max`.
// A cursor inside the tail costs nothing more; a lagging one costs a TextFinder on the
// `u` column above the tail and one read of the rows it found (capped at LAG_SPAN rows).
// `since` at or before the pruned point answers cursorReset (docs/protocol.md, poll).
const LAG_SPAN = 5000;
function updatesFor_(label, since, max, tail, col) {
  tail = tail || eventsTail_();
  col = col === undefined ? EV.u : col;
  const toUpdate = col === EV.r ? rowToReceivedUpdate_ : rowToUpdate_;
  const sh = tail.sheet;
  const tailFirstSeq = tail.rows.length ? Number(tail.rows[0][EV.seq]) : tail.lastSeq + 1;
  // The pruned point is the first row's seq - 1; read it only when the cursor is above the tail.
  let pruned = 0;
  if (tail.firstRow === 2) pruned = tailFirstSeq - 1;
  else if (since < tailFirstSeq - 1) pruned = Number(readText_(sh, 2, 1, 1, 1)[0][0]) - 1;
  const reset = since > 0 && since <= pruned && pruned > 0;
  const from = reset ? pruned : since;
  let found = [];
  let cut = false;
  let lagScanned_ = from;
  if (from < tailFirstSeq - 1 && tail.firstRow > 2) {
    const rows = findRows_(sh, col + 1, [label], 2, tail.firstRow - 1);
    const vals = rows.length ? readText_(sh, rows[0], 1, Math.min(rows[rows.length - 1] - rows[0] + 1, LAG_SPAN), EV_NCOL) : [];
    const take = rows.filter(function (r) { return r - rows[0] < LAG_SPAN; });
    cut = take.length < rows.length;
    if (cut) lagScanned_ = Number(vals[vals.length - 1][EV.seq]) || from;
    found = take.map(function (r) { return vals[r - rows[0]]; });
  }
  if (!cut) found = found.concat(tail.rows.filter(function (r) { return r[col] === label; }));
  const all = found.map(toUpdate).filter(function (u) { return u.seq > from; });
  const out = all.slice(0, max);
  let cursor = out.length ? out[out.length - 1].seq : from;
  // A capped lagging read moves the cursor over the span it scanned, so the next poll goes on.
  if (cut && out.length < max) cursor = Math.max(cursor, lagScanned_);
  const res = { updates: out, more: cut || all.length > max, cursor: cursor };
  if (reset) res.cursorReset = true;
  return res;
}
