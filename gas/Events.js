// The updates feed: one append-only row per timeline entry (creation included, as the
// Rust server numbers them); seq = row - 1, so a poll
// reads only the rows after its cursor, never the history before it.

function appendEvents_(evs) {
  if (!evs.length) return;
  const sh = tab_('Events');
  const first = sh.getLastRow(); // seq of the first new row = its row - 1
  appendText_(sh, evs.map(function (e, i) {
    return [String(first + i), e.from, e.id, e.state, String(e.at), e.by];
  }));
}

function eventOf_(m, by) {
  const t = m.timeline[m.timeline.length - 1];
  return { from: m.from, id: m.id, state: m.state, at: t.at, by: by || t.by };
}

// State changes of mail sent by `label` after `since`, oldest first, at most `max`.
function updatesFor_(label, since, max) {
  const sh = tab_('Events');
  const lastSeq = sh.getLastRow() - 1;
  const out = [];
  let more = false;
  let seq = since + 1;
  const WINDOW = 1000;
  while (seq <= lastSeq && !more) {
    const n = Math.min(WINDOW, lastSeq - seq + 1);
    const rows = readText_(sh, seq + 1, 1, n, 6);
    for (let i = 0; i < rows.length; i++) {
      const r = rows[i];
      if (r[1] !== label || r[3] === 'new') continue;
      if (out.length === max) { more = true; break; }
      out.push({ seq: Number(r[0]), id: r[2], state: r[3], at: Number(r[4]), by: r[5] });
    }
    seq += n;
  }
  return { updates: out, more: more, cursor: out.length ? out[out.length - 1].seq : since };
}
