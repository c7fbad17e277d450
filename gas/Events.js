// The updates feed: one append-only row per timeline entry (creation included, as the
// Rust server numbers them); seq = row - 1, so a poll
// reads only the rows after its cursor, never the history before it.

function appendEvents_(evs) {
  if (!evs.length) return;
  const sh = tab_('Events');
  const first = sh.getLastRow(); // seq of the first new row = its row - 1
  appendText_(sh, evs.map(function (e, i) {
    return [String(first + i), e.from, e.id, e.state, String(e.at), e.by, e.state === 'new' ? '' : e.from];
  }));
}

function eventOf_(m, by) {
  const t = m.timeline[m.timeline.length - 1];
  return { from: m.from, id: m.id, state: m.state, at: t.at, by: by || t.by };
}

// State changes of mail sent by `label` after `since`, oldest first, at most `max`.
// TextFinder on the `u` column (rows after the cursor only) finds them inside Sheets,
// so a PC whose cursor lags behind others' traffic still reads only its own rows.
function updatesFor_(label, since, max) {
  const sh = tab_('Events');
  const rows = findRows_(sh, 7, [label], since + 2); // seq s lives on row s + 1
  const take = rows.slice(0, max);
  let vals = {};
  if (take.length && take[take.length - 1] - take[0] < 1000) {
    const span = readText_(sh, take[0], 1, take[take.length - 1] - take[0] + 1, 7);
    take.forEach(function (r) { vals[r] = span[r - take[0]]; });
  } else vals = readRowsAt_(sh, take, 7);
  const out = take.map(function (r) {
    const v = vals[r];
    return { seq: Number(v[0]), id: v[2], state: v[3], at: Number(v[4]), by: v[5] };
  }).filter(function (u) { return u.seq > since; });
  return { updates: out, more: rows.length > max, cursor: out.length ? out[out.length - 1].seq : since };
}
