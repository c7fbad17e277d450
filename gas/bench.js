#!/usr/bin/env node
'use strict';
// Prints what one poll, one send and one sweep cost in Sheets calls and cells, from the
// fakes' counters, as history grows. History is written straight into the tabs in the
// server's own layout: 90% archived (final), 10% live (delivered/seen), plus one Events
// row per mail. Run: node gas/bench.js
const { makeServer, seedMails, N0 } = require('./lib/testkit');

const ID = (n) => 'mail-1767225600000-' + n.toString(16).padStart(8, '0');
const LABELS = ['pc-a', 'pc-b', 'pc-c', 'pc-d', 'pc-e'];

function withHistory(n, liveShare) {
  const s = makeServer({ labels: LABELS });
  const every = Math.round(1 / liveShare);
  const specs = [];
  for (let i = 0; i < n; i++) {
    const live = i % every === 0;
    specs.push({ from: LABELS[i % 5], to: LABELS[(i + 1) % 5], createdAt: N0 - 30 * 86400000 + i * 1000,
      state: live ? (i % 2 ? 'seen' : 'delivered') : 'done', archive: !live });
  }
  seedMails(s, specs);
  const ev = s.fakes.sheet('Events');
  const rows = [];
  for (let i = 0; i < n; i++) rows.push([String(i + 1), LABELS[i % 5], 'mail-x', 'done', String(N0 - 1000), 'pc-x', LABELS[i % 5]]);
  ev.seedRows(2, rows);
  s.setNow(N0);
  return s;
}

function measure(s, fn) {
  s.fakes.resetCounters();
  const r = fn();
  if (r && r.ok === false) throw new Error(JSON.stringify(r));
  const c = s.fakes.snapshotCounters();
  return { sheetsCalls: c.services.sheetsCalls, getValues: c.total.getValuesCalls, cellsRead: c.total.cellsRead,
    setValues: c.total.setValuesCalls, cellsWritten: c.total.cellsWritten, textFinders: c.total.textFinderCalls,
    tfScanned: c.total.textFinderCellsScanned, deleteRows: c.total.deleteRowsCalls, locks: c.lockAcquisitions,
    maxCellsPerLock: c.maxCellsPerLockHold, props: c.services.propsCalls };
}

function pollAndSend(n) {
  const s = withHistory(n, 0.1);
  for (let i = 0; i < 5; i++) s.call('send', 'pc-a', { mail: { id: ID(i + 1), to: 'pc-b', body: 'new ' + i } });
  // A client keeps its cursor: catch up with the updates feed first, as a poller does.
  let cursor = 0;
  for (let p = s.call('poll', 'pc-b'); ; p = s.call('poll', 'pc-b', { since: cursor })) {
    cursor = p.cursor;
    if (!p.updates.length) break;
  }
  const poll = measure(s, () => s.call('poll', 'pc-b', { since: cursor }));
  const pollConfirm = measure(s, () => s.call('poll', 'pc-b', { since: cursor, confirm: [ID(1), ID(2), ID(3), ID(4), ID(5)] }));
  const pollEmpty = measure(s, () => s.call('poll', 'pc-b', { since: cursor }));
  const send = measure(s, () => s.call('send', 'pc-a', { mail: { id: ID(100), to: 'pc-c', body: 'hello' } }));
  return { poll, pollConfirm, pollEmpty, send };
}

function sweep(live) {
  const s = makeServer({ labels: LABELS });
  const specs = [];
  for (let i = 0; i < live; i++) {
    specs.push({ from: 'pc-a', to: LABELS[1 + (i % 4)], createdAt: N0 - 86400000 + i, expiresAt: i % 10 === 1 ? N0 : null,
      state: i % 10 === 0 ? 'done' : i % 3 ? 'seen' : 'delivered' });
  }
  seedMails(s, specs);
  s.setNow(N0);
  return measure(s, () => s.call('sweep', 'pc-a'));
}

const cols = ['props', 'sheetsCalls', 'getValues', 'cellsRead', 'setValues', 'cellsWritten', 'textFinders', 'tfScanned', 'deleteRows', 'locks', 'maxCellsPerLock'];
function table(rows) {
  const head = ['case'].concat(cols);
  const lines = [head].concat(rows.map(([name, r]) => [name].concat(cols.map((c) => String(r[c])))));
  const w = head.map((_, i) => Math.max(...lines.map((l) => l[i].length)));
  return lines.map((l) => l.map((x, i) => (i ? x.padStart(w[i]) : x.padEnd(w[i]))).join('  ')).join('\n');
}

const h1k = pollAndSend(1000);
const h100k = pollAndSend(100000);
const sw = sweep(10000);
console.log('pcmail gas — cost per request from the fakes (history: 90% archived, 10% live; one Events row per mail)\n');
console.log(table([
  ['poll, 5 new, history 1k', h1k.poll], ['poll, 5 new, history 100k', h100k.poll],
  ['poll+confirm 5, hist 1k', h1k.pollConfirm], ['poll+confirm 5, hist 100k', h100k.pollConfirm],
  ['poll, nothing new, 1k', h1k.pollEmpty], ['poll, nothing new, 100k', h100k.pollEmpty],
  ['send, history 1k', h1k.send], ['send, history 100k', h100k.send],
  ['sweep, 10k live mails', sw]
]));
const ratio = h100k.poll.cellsRead / h1k.poll.cellsRead;
console.log(`\npoll cells read: ${h1k.poll.cellsRead} (1k history) → ${h100k.poll.cellsRead} (100k history): ratio ${ratio.toFixed(2)} (target ≤ 1.5) ${ratio <= 1.5 ? 'OK' : 'FAIL'}`);
console.log(`sweep of 10k live mails: ${sw.getValues} range reads, ${sw.setValues} range writes, ${sw.deleteRows} deleteRows, ${sw.locks} lock holds of at most ${sw.maxCellsPerLock} cells`);
console.log('tfScanned = cells TextFinder searches inside Sheets (not transferred to the script).');
if (ratio > 1.5) process.exitCode = 1;
