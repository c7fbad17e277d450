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
const { makeServer, seedMails, seedFinishedJobs, N0 } = require('./lib/testkit');
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

// ---- jobs ----
// The poll's `job` part of an executor (take + one heartbeat, one queued job offered) with
// 100 vs 10,000 finished jobs: after the sweep has archived them (the steady state: the
// sweep runs every 10 minutes), and before it (all still in the live tab).
const TEST_SPEC = { name: 'test', subject: 'checkout', timeLimitMs: 600000, args: [{ name: 'checkout', type: 'checkout', required: true, values: ['app'] },
  { name: 'crate', type: 'string' }] };
let jseq = 0;
const jid = () => 'job-' + N0 + '-' + (++jseq).toString(16).padStart(8, '0');
function jobPoll(finished, swept) {
  const s = makeServer({ labels: LABELS });
  s.call('poll', 'pc-b', { job: { whitelist: { hash: 'h', commands: [TEST_SPEC], allowedSubmitters: ['pc-a'] }, take: true } });
  seedFinishedJobs(s, finished);
  if (swept) s.call('sweep', 'pc-a');
  const sub = { pc: 'pc-a', session: 's', name: null };
  const run = s.call('job.submit', 'pc-a', { jobId: jid(), target: 'pc-b', command: 'test', args: { checkout: 'app', crate: 'run' }, submitter: sub }).job;
  s.call('job.start', 'pc-b', { jobId: run.id, runner: 'pc-b/1', startedAt: N0 });
  s.call('job.submit', 'pc-a', { jobId: jid(), target: 'pc-b', command: 'test', args: { checkout: 'app', crate: 'queued' }, submitter: sub });
  s.call('poll', 'pc-b', { job: { take: true } }); // the Properties view cached again
  s.fakes.resetCounters();
  const r = s.call('poll', 'pc-b', { job: { take: true, running: [run.id] } });
  if (r.job.offered.length !== 1) throw new Error('expected one offered job');
  const c = s.fakes.snapshotCounters();
  return Object.assign({}, { rangeCalls: c.total.rangeCalls, getValues: c.total.getValuesCalls, setValues: c.total.setValuesCalls, formats: c.total.formatCalls,
    textFinders: c.total.textFinderCalls, cellsRead: c.total.cellsRead, cellsWritten: c.total.cellsWritten, props: c.services.propsCalls,
    locks: c.lockAcquisitions, lockHoldMs: Math.round(c.maxLockHoldMs), totalMs: Math.round(c.simMs), scanned: c.total.textFinderCellsScanned });
}
function pollNoJob() {
  const s = makeServer({ labels: LABELS });
  seedFinishedJobs(s, 100);
  s.call('poll', 'pc-b', {});
  return measure(s, () => s.call('poll', 'pc-b', {}));
}
function probe(command, finished) {
  const s = makeServer({ labels: LABELS });
  seedFinishedJobs(s, finished);
  s.call('sweep', 'pc-a');
  return measure(s, () => s.call('job.submit', 'pc-a', { jobId: jid(), target: '@server', command, submitter: { pc: 'pc-a', session: 's', name: null } }));
}
const jobRows = [];
const flat = {};
for (const swept of [true, false]) {
  for (const n of [100, 10000]) {
    const r = jobPoll(n, swept);
    flat[swept + ':' + n] = r;
    jobRows.push([`poll + job part, ${n} finished, ${swept ? 'archived by the sweep' : 'not yet swept'}`, r]);
  }
}
jobRows.push(['poll without job (mail only)', pollNoJob()]);
jobRows.push(['submit @server _debug_roster', probe('_debug_roster', 100)]);
jobRows.push(['submit @server _debug_sweep_plan, 10k finished', probe('_debug_sweep_plan', 10000)]);

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

console.log('\njobs: the poll\'s job part and @server probes; scanned = cells TextFinder scanned inside Sheets');
cols.push('scanned');
console.log(table(jobRows.map(([n, r]) => [n, Object.assign({ scanned: r.scanned === undefined ? '-' : r.scanned }, r)])));
const ratio = (k) => (flat['true:10000'][k] / flat['true:100'][k]);
const steady = ['rangeCalls', 'cellsRead', 'cellsWritten'].map((k) => k + ' ' + ratio(k).toFixed(2) + 'x');
console.log('10,000 vs 100 finished (archived): ' + steady.join(', ') + ' (target: within 1.3x)');
const probeMs = jobRows.filter(([n]) => n.startsWith('submit @server')).map(([, r]) => r.totalMs);
console.log('probe answered in the submit itself: ' + Math.max.apply(null, probeMs) + ' ms simulated (an Apps Script PC polls every 120 s)');
if (['rangeCalls', 'cellsRead', 'cellsWritten'].some((k) => ratio(k) > 1.3)) { console.log('OVER TARGET: the poll\'s job part is not flat'); process.exitCode = 1; }
