#!/usr/bin/env node
'use strict';
// Prints what each op costs on the fakes: range calls (getValues/setValues/
// setNumberFormat/TextFinder round trips), cells, Properties calls and the estimated
// lock-hold time from the simulated per-call costs (lib/fakes.js DEFAULT_COST; the
// assumptions are in docs/gas-quota.md), at 1k and 100k mails of history and 10 and 500
// mails per request. History is written straight into the tabs in the server's layout:
// 90% archived (final), 10% live (delivered/seen) spread over five PCs, one Events row
// per mail. The request's mail is interleaved row by row with another PC's.
// Run: node gas/bench.js
const { makeServer, seedMails, N0 } = require('./lib/testkit');
const { DEFAULT_COST } = require('./lib/fakes');

const LABELS = ['pc-a', 'pc-b', 'pc-c', 'pc-d', 'pc-e'];
const idAt = (ms, n) => 'mail-' + ms + '-' + n.toString(16).padStart(8, '0');

function withHistory(n) {
  const s = makeServer({ labels: LABELS });
  const specs = [];
  for (let i = 0; i < n; i++) {
    const live = i % 10 === 0;
    specs.push({ from: LABELS[i % 5], to: LABELS[(i + 1) % 5], createdAt: N0 - 30 * 86400000 + i * 1000,
      state: live ? (i % 20 ? 'seen' : 'delivered') : 'done', archive: !live });
  }
  seedMails(s, specs);
  const ev = s.fakes.sheet('Events');
  const rows = [];
  for (let i = 0; i < n; i++) rows.push([String(i + 1), LABELS[i % 5], 'mail-x', 'done', String(N0 - 1000), 'pc-x', LABELS[i % 5]]);
  ev.seedRows(2, rows);
  s.setNow(N0);
  for (const pc of LABELS) s.call('poll', pc, { since: n, limit: 1 }); // heartbeats written, cursors current
  return s;
}

// `k` new mails to pc-b interleaved with k to pc-c, appended to the live tab.
function addNew(s, k, base) {
  const specs = [];
  for (let i = 0; i < 2 * k; i++) specs.push({ id: idAt(N0 - 60000, base + i), from: 'pc-a', to: i % 2 ? 'pc-c' : 'pc-b', createdAt: N0 - 60000 + i, state: 'new' });
  seedMails(s, specs);
  return specs.filter((x) => x.to === 'pc-b').map((x) => x.id);
}

function measure(s, fn) {
  s.fakes.resetCounters();
  const r = fn();
  if (r && r.ok === false) throw new Error(JSON.stringify(r));
  const c = s.fakes.snapshotCounters();
  return { rangeCalls: c.total.rangeCalls, getValues: c.total.getValuesCalls, setValues: c.total.setValuesCalls,
    formats: c.total.formatCalls, textFinders: c.total.textFinderCalls, cellsRead: c.total.cellsRead,
    cellsWritten: c.total.cellsWritten, props: c.services.propsCalls, locks: c.lockAcquisitions,
    lockHoldMs: Math.round(c.maxLockHoldMs), totalMs: Math.round(c.simMs) };
}

const results = [];
for (const hist of [1000, 100000]) {
  const s = withHistory(hist);
  let base = 1;
  let cursor = hist;
  for (const k of [10, 500]) {
    s.call('sweep', 'pc-a'); // every 10 min in production: it also keeps 1,000 spare grid rows
    const ids = addNew(s, k, base);
    base += 2 * k;
    const h = (hist / 1000) + 'k';
    results.push([`poll, ${k} new, history ${h}`, measure(s, () => s.call('poll', 'pc-b', { since: cursor, limit: k }))]);
    results.push([`poll + confirm ${k}, history ${h}`, measure(s, () => s.call('poll', 'pc-b', { since: cursor, confirm: ids, limit: k }))]);
    results.push([`mark ${k} seen, history ${h}`, measure(s, () => s.call('mark', 'pc-b',
      { marks: ids.map((id, i) => ({ markId: 'm' + i, id, op: 'seen', at: N0, by: 'pc-b' })) }))]);
    const p = s.call('poll', 'pc-a', { since: cursor, limit: 1 });
    results.push([`poll, ${k} updates, history ${h}`, measure(s, () => s.call('poll', 'pc-a', { since: cursor, limit: 1 }))]);
    cursor = p.cursor;
  }
  results.push([`send, history ${(hist / 1000)}k`, measure(s, () => s.call('send', 'pc-a', { mail: { id: idAt(N0, 999999), to: 'pc-c', body: 'hello' } }))]);
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
results.push(['sweep, 10k live mails', sweep(10000)]);

const cols = ['rangeCalls', 'getValues', 'setValues', 'formats', 'textFinders', 'cellsRead', 'cellsWritten', 'props', 'locks', 'lockHoldMs', 'totalMs'];
function table(rows) {
  const head = ['case'].concat(cols);
  const lines = [head].concat(rows.map(([name, r]) => [name].concat(cols.map((c) => String(r[c])))));
  const w = head.map((_, i) => Math.max(...lines.map((l) => l[i].length)));
  return lines.map((l) => l.map((x, i) => (i ? x.padStart(w[i]) : x.padEnd(w[i]))).join('  ')).join('\n');
}

console.log('pcmail gas: cost per request on the fakes (history 90% archived, 10% live; one Events row per mail)');
console.log('assumed cost per call (ms): ' + JSON.stringify(DEFAULT_COST) + '\n');
console.log(table(results));
console.log('\nrangeCalls = getValues + setValues + setNumberFormat + TextFinder round trips; lockHoldMs = the longest');
console.log('script-lock hold in simulated time; totalMs = all simulated service time of the request.');
const bad = results.filter(([name, r]) => !name.startsWith('sweep') && !name.startsWith('send') && (r.rangeCalls > 6 || r.lockHoldMs >= 2000));
console.log(bad.length ? 'OVER TARGET (<= 6 range calls, < 2 s lock hold): ' + bad.map((b) => b[0]).join('; ') : 'poll/confirm/mark: all <= 6 range calls and < 2 s estimated lock hold');
if (bad.length) process.exitCode = 1;
