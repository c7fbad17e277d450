'use strict';
// Behaviour of the gas server on the fakes: text safety, locking, flat polls, the
// sweep, the webhook, triggers, and the web app entry points.
const test = require('node:test');
const assert = require('node:assert');
const { makeServer, seedMails, N0 } = require('../lib/testkit');

const ID = (n) => 'mail-1767225600000-' + n.toString(16).padStart(8, '0');
const MIN = 60000;

test('tricky text is stored as text, never as a formula, and read back verbatim', () => {
  const s = makeServer();
  const body = '=IMPORTXML("http://evil","//a")';
  const r = s.call('send', 'pc-a', { mail: { id: ID(1), to: 'pc-b', body, subject: 'TRUE' } });
  assert.strictEqual(r.ok, true);
  const mail = s.fakes.sheet('Mail');
  const formulas = mail.getRange(1, 1, mail.getLastRow(), 17).getFormulas().flat().filter(Boolean);
  assert.deepStrictEqual(formulas, [], 'no cell holds a formula');
  const raw = mail.dump()[1];
  assert.ok(raw.every((v) => typeof v === 'string'), 'every stored cell is a string');
  const p = s.call('poll', 'pc-b');
  assert.strictEqual(p.mail[0].body, body);
  assert.strictEqual(p.mail[0].subject, 'TRUE');
});

test('when the @ format is lost, writes fall back to the apostrophe escape and still read back verbatim', () => {
  const s = makeServer();
  s.fakes.faults.formatLost = true;
  const cases = [['=SUM(A1)', 'true'], ['0123', '2026-01-01'], ['-5', '@here']];
  cases.forEach(([body, subject], i) => assert.strictEqual(s.call('send', 'pc-a', { mail: { id: ID(10 + i), to: 'pc-b', body, subject } }).ok, true));
  const got = s.call('poll', 'pc-b').mail.map((m) => [m.body, m.subject]);
  assert.deepStrictEqual(got, cases);
  // the raw cells prove the escape was needed: no booleans, numbers, dates or formulas
  const mail = s.fakes.sheet('Mail');
  assert.deepStrictEqual(mail.getRange(1, 1, mail.getLastRow(), 17).getFormulas().flat().filter(Boolean), []);
  // and without the fallback the trap is real: a plain write of "true" comes back a boolean
  const t = s.fakes.ss.insertSheet('Probe');
  const r = t.getRange(1, 1);
  r.setNumberFormat('@');
  r.setValues([['true']]);
  assert.strictEqual(r.getValues()[0][0], true);
  assert.strictEqual(s.ctx.cellStr_(r.getValues()[0][0]), 'true', 'read-back comparisons normalise both sides');
});

test('a contended lock answers busy and writes nothing; hello still answers', () => {
  const s = makeServer();
  s.fakes.lock.contended = true;
  const before = s.fakes.snapshotCounters().total.cellsWritten;
  const r = s.call('send', 'pc-a', { mail: { id: ID(2), to: 'pc-b', body: 'x' } });
  assert.strictEqual(r.ok, false);
  assert.strictEqual(r.error.code, 'busy');
  assert.strictEqual(s.call('poll', 'pc-b').error.code, 'busy');
  assert.strictEqual(s.fakes.snapshotCounters().total.cellsWritten, before);
  assert.strictEqual(s.call('hello', 'pc-a').ok, true);
  s.fakes.lock.contended = false;
  assert.strictEqual(s.call('send', 'pc-a', { mail: { id: ID(2), to: 'pc-b', body: 'x' } }).ok, true);
});

test('a storage failure answers internal and leaves nothing half-stored', () => {
  const s = makeServer();
  s.fakes.faults.setValuesThrowOn = 'Mail';
  const r = s.call('send', 'pc-a', { mail: { id: ID(3), to: '*', body: 'x' } });
  assert.strictEqual(r.error.code, 'internal');
  s.fakes.faults.setValuesThrowOn = null;
  assert.deepStrictEqual(s.call('status', 'pc-a', { ids: [ID(3)] }).missing, [ID(3)]);
  const ev = s.fakes.sheet('Events');
  assert.ok(!ev || ev.getLastRow() <= 1, 'no events for a mail that was not stored');
  assert.strictEqual(s.call('send', 'pc-a', { mail: { id: ID(3), to: '*', body: 'x' } }).ok, true, 'the retry goes through');
});

test('wrong, missing or unconfigured token is unauthorized', () => {
  const s = makeServer();
  const { post } = require('../lib/testkit');
  assert.strictEqual(post(s.ctx, JSON.stringify({ v: 1, op: 'hello', pc: 'pc-a', token: 't0K' })).json.error.code, 'unauthorized');
  const t = makeServer({ properties: { PCMAIL_TOKEN: '' } });
  assert.strictEqual(post(t.ctx, JSON.stringify({ v: 1, op: 'hello', pc: 'pc-a', token: '' })).json.error.code, 'unauthorized',
    'no token configured fails closed (no switch turns that off)');
  const u = makeServer({ properties: { PCMAIL_TOKEN: '', PCMAIL_ALLOW_NO_TOKEN: 'true' } });
  assert.strictEqual(post(u.ctx, JSON.stringify({ v: 1, op: 'hello', pc: 'pc-a' })).json.error.code, 'unauthorized',
    'the old PCMAIL_ALLOW_NO_TOKEN switch is gone');
});

test('too large bodies and empty posts', () => {
  const s = makeServer();
  const { post } = require('../lib/testkit');
  assert.strictEqual(post(s.ctx, 'x'.repeat(256 * 1024 + 1)).json.error.code, 'too_large');
  const out = s.ctx.doPost({});
  assert.strictEqual(JSON.parse(out.getContent()).error.code, 'bad_json');
  assert.strictEqual(out.getMimeType(), 'application/json');
  const h = JSON.parse(s.ctx.doGet({}).getContent());
  assert.deepStrictEqual([h.ok, h.server, h.protocol], [true, 'pcmail-gas', 1]);
});

function pollCells(historySize, liveShare) {
  const s = makeServer({ labels: ['pc-a', 'pc-b', 'pc-c', 'pc-d'] });
  const specs = [];
  for (let i = 0; i < historySize; i++) {
    const live = i % Math.round(1 / liveShare) === 0;
    specs.push({ from: 'pc-a', to: ['pc-b', 'pc-c', 'pc-d'][i % 3], createdAt: N0 - 86400000 + i, state: live ? 'seen' : 'done', archive: !live });
  }
  seedMails(s, specs);
  s.setNow(N0);
  for (let i = 0; i < 5; i++) s.call('send', 'pc-a', { mail: { id: ID(100 + i), to: 'pc-b', body: 'new ' + i } });
  s.call('poll', 'pc-b'); // warm up: the cursor
  const cursor = s.call('poll', 'pc-b').cursor;
  s.fakes.resetCounters();
  const r = s.call('poll', 'pc-b', { since: cursor });
  assert.strictEqual(r.mail.length, 5);
  return s.fakes.snapshotCounters();
}

test('poll cost is flat as history grows (cells read within 1.5x from 1k to 20k mails)', () => {
  const small = pollCells(1000, 0.1);
  const big = pollCells(20000, 0.1);
  assert.ok(big.total.cellsRead <= 1.5 * small.total.cellsRead, `cells read ${small.total.cellsRead} → ${big.total.cellsRead}`);
  assert.ok(big.total.getValuesCalls <= small.total.getValuesCalls + 1, 'range reads do not grow with history');
  assert.strictEqual(big.perSheet.Archive ? big.perSheet.Archive.cellsRead : 0, 0, 'a poll never reads the archive');
});

test('confirm, marks and the updates feed in one poll touch only the rows involved', () => {
  const s = makeServer();
  seedMails(s, Array.from({ length: 3000 }, (_, i) => ({ from: 'pc-a', to: 'pc-b', createdAt: N0 - 1e6 + i, state: 'seen' })));
  s.call('send', 'pc-a', { mail: { id: ID(7), to: 'pc-b', body: 'x' } });
  s.fakes.resetCounters();
  const r = s.call('poll', 'pc-b', { confirm: [ID(7)], marks: [{ markId: 'm', id: ID(7), op: 'seen', at: N0, by: 'pc-b' }] });
  assert.deepStrictEqual(r.confirmed, [ID(7)]);
  assert.strictEqual(r.marks[0].state, 'seen');
  const c = s.fakes.snapshotCounters();
  assert.ok(c.perSheet.Mail.cellsRead <= 17 * 2, 'only the confirmed row is read: ' + c.perSheet.Mail.cellsRead);
});

test('the sweep expires, archives final mail, and status still finds it', () => {
  const s = makeServer();
  s.call('send', 'pc-a', { mail: { id: ID(20), to: 'pc-b', body: 'x', expiresAt: N0 + MIN } });
  s.call('send', 'pc-a', { mail: { id: ID(21), to: 'pc-b', body: 'y' } });
  s.call('send', 'pc-a', { mail: { id: ID(22), to: 'pc-b', body: 'z' } });
  s.call('mark', 'pc-b', { marks: [{ markId: 'a', id: ID(21), op: 'ack', at: N0, by: 'pc-b' }] });
  s.setNow(N0 + 2 * MIN);
  const r = s.call('sweep', 'pc-a');
  assert.strictEqual(r.expired, 1);
  const live = s.fakes.sheet('Mail').dump().slice(1).map((x) => x[0]);
  const arch = s.fakes.sheet('Archive').dump().slice(1).map((x) => x[0]);
  assert.deepStrictEqual(live, [ID(22)]);
  assert.deepStrictEqual(arch.sort(), [ID(20), ID(21)]);
  const st = s.call('status', 'pc-a', { ids: [ID(20), ID(21), ID(22)] });
  assert.deepStrictEqual(st.mails.map((m) => m.state), ['expired', 'done', 'new']);
  assert.strictEqual(s.call('send', 'pc-a', { mail: { id: ID(21), to: 'pc-b', body: 'y' } }).existing, true, 'dedupe sees the archive');
  assert.strictEqual(s.call('mark', 'pc-b', { marks: [{ markId: 'b', id: ID(21), op: 'seen', at: N0, by: 'pc-b' }] }).results[0].changed, false);
});

test('the sweep never holds the lock for the whole run and lets polls through between bands', () => {
  const s = makeServer();
  const specs = [];
  for (let i = 0; i < 4000; i++) specs.push({ from: 'pc-a', to: 'pc-b', createdAt: N0 - 1e6 + i, state: i % 2 ? 'done' : 'seen', expiresAt: i % 4 === 0 ? N0 : null });
  seedMails(s, specs);
  s.setNow(N0 + MIN);
  let polls = 0;
  s.fakes.lock.onRelease = () => {
    if (polls >= 50) return;
    polls++;
    const p = s.call('poll', 'pc-c');
    assert.strictEqual(p.ok, true, 'a poll between sweep bands is not busy');
  };
  s.fakes.resetCounters();
  const r = s.call('sweep', 'pc-a');
  s.fakes.lock.onRelease = null;
  assert.strictEqual(r.ok, true);
  assert.strictEqual(r.expired, 1000);
  assert.ok(polls >= 5, 'polls ran while the sweep was in progress: ' + polls);
  const c = s.fakes.snapshotCounters();
  assert.ok(c.maxCellsPerLockHold <= 500 * s.ctx.__get('MAIL_NCOL') * 3, 'cells touched under one lock hold: ' + c.maxCellsPerLockHold);
  assert.strictEqual(s.fakes.sheet('Mail').getLastRow() - 1, 1000, 'only the seen mail stays live');
});

test('a second sweep while one runs is refused (lease), polls are not', () => {
  const s = makeServer({ properties: { WEBHOOK_URL: 'https://hooks.example/x' } });
  s.call('poll', 'pc-b');
  s.setNow(N0 + 11 * MIN);
  let inner = null, innerPoll = null;
  s.fakes.fetch.handler = () => {
    inner = inner || s.call('sweep', 'pc-a');
    innerPoll = innerPoll || s.call('poll', 'pc-c');
    return 200;
  };
  const r = s.call('sweep', 'pc-a');
  assert.strictEqual(r.ok, true);
  assert.strictEqual(inner.error.code, 'busy');
  assert.strictEqual(innerPoll.ok, true, 'webhook posts run outside the lock');
});

test('webhook: each opened alert posted once, failures retried on later sweeps at most 5 tries, never throws', () => {
  const s = makeServer({ properties: { WEBHOOK_URL: 'https://hooks.example/x' } });
  s.call('poll', 'pc-b');
  s.call('poll', 'pc-c');
  s.setNow(N0 + 11 * MIN);
  s.fakes.fetch.handler = (req) => (req.payload.includes('pc-b') ? 200 : 'throw');
  const r1 = s.call('sweep', 'pc-a');
  assert.deepStrictEqual(r1.alerts, { opened: 2, updated: 0, resolved: 0 });
  assert.strictEqual(s.fakes.fetch.requests.length, 2);
  const payload = JSON.parse(s.fakes.fetch.requests[0].payload);
  assert.deepStrictEqual(Object.keys(payload), ['content']);
  assert.strictEqual(s.fakes.fetch.requests[0].params.muteHttpExceptions, true);
  for (let i = 0; i < 6; i++) { s.advance(10 * MIN); assert.strictEqual(s.call('sweep', 'pc-a').ok, true); }
  const posts = s.fakes.fetch.requests.map((q) => JSON.parse(q.payload).content);
  assert.strictEqual(posts.filter((c) => c.includes('pc-b')).length, 1, 'a posted alert is not posted again');
  assert.strictEqual(posts.filter((c) => c.includes('pc-c')).length, 5, 'a failing post is tried 5 times in all');
  const al = s.call('alerts', 'pc-a').alerts;
  assert.deepStrictEqual(al.map((a) => [a.subject, a.posted]).sort(), [['pc-b', true], ['pc-c', false]]);
});

test('sweepTrigger never throws; installTriggers is idempotent', () => {
  const s = makeServer();
  s.fakes.lock.contended = true;
  assert.doesNotThrow(() => s.ctx.sweepTrigger());
  s.fakes.lock.contended = false;
  assert.strictEqual(s.ctx.installTriggers(), 1);
  assert.strictEqual(s.ctx.installTriggers(), 1);
  assert.strictEqual(s.fakes.triggers.length, 1);
  assert.strictEqual(s.fakes.triggers[0].getHandlerFunction(), 'sweepTrigger');
  assert.strictEqual(s.fakes.triggers[0].minutes, 10);
  s.ctx.ScriptApp.newTrigger('sweepTrigger').timeBased().everyMinutes(10).create();
  assert.strictEqual(s.ctx.installTriggers(), 1, 'duplicates are removed');
});

test('a sweep of 10,000 live mails makes a bounded number of range reads and writes', () => {
  const s = makeServer();
  const specs = [];
  for (let i = 0; i < 10000; i++) specs.push({ from: 'pc-a', to: 'pc-b', createdAt: N0 - 1e6 + i, state: i % 10 === 0 ? 'done' : 'seen', expiresAt: i % 10 === 1 ? N0 : null });
  seedMails(s, specs);
  s.fakes.resetCounters();
  const r = s.call('sweep', 'pc-a');
  assert.strictEqual(r.expired, 1000);
  const c = s.fakes.snapshotCounters().total;
  assert.ok(c.getValuesCalls <= 80, 'range reads: ' + c.getValuesCalls);
  assert.ok(c.setValuesCalls <= 100, 'range writes: ' + c.setValuesCalls);
});

// The Events row width (it grew with the received-updates feed).
function ctx_EV_NCOL(s) { return s.ctx.__get('EV_NCOL'); }

test('the updates feed of a PC whose cursor lags behind other traffic reads only its own rows', () => {
  const s = makeServer();
  s.ctx.tab_('Events');
  const ev = s.fakes.sheet('Events');
  const rows = [];
  for (let i = 0; i < 5000; i++) rows.push([String(i + 1), 'pc-a', 'mail-x', 'seen', String(N0), 'pc-b', 'pc-a']);
  rows.push(['5001', 'pc-c', ID(9), 'delivered', String(N0), 'pc-b', 'pc-c']);
  ev.seedRows(2, rows);
  s.fakes.resetCounters();
  const p = s.call('poll', 'pc-c', { since: 0 });
  assert.deepStrictEqual(p.updates.map((u) => [u.seq, u.id]), [[5001, ID(9)]]);
  assert.strictEqual(p.cursor, 5001);
  // The tail (the last 500 rows) is one read; above it only the PC's own rows are read.
  const ev2 = s.fakes.snapshotCounters().perSheet.Events;
  assert.ok(ev2.cellsRead <= 500 * ctx_EV_NCOL(s) + ctx_EV_NCOL(s), 'Events cells read: ' + ev2.cellsRead);
  assert.ok(ev2.rangeCalls <= 3, 'Events range calls: ' + ev2.rangeCalls);
});
