'use strict';
// What the vectors leave open about per-item marks and expiresIn (hello's features and
// every shared limit: op-table.test.js):
// parity details with crates/core, the stored expiresIn across the archive, old rows.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const path = require('path');
const { makeServer, N0 } = require('../lib/testkit');

const ID = (n) => 'mail-1767225600000-' + n.toString(16).padStart(8, '0');
const MIN = 60000;
const DAY = 24 * 60 * MIN;

test('mark text and markId follow the Rust rules, not JS trim or UTF-8 length', () => {
  const s = makeServer();
  s.call('send', 'pc-a', { mail: { id: ID(1), to: 'pc-b', body: 'x' } });
  const mk = (o) => Object.assign({ markId: 'k', id: ID(1), op: 'seen', at: N0, by: 'pc-b' }, o);
  const r = s.call('mark', 'pc-b', { marks: [
    mk({ markId: '\u{1F600}'.repeat(100) }), // 100 chars (400 UTF-8 bytes): accepted
    mk({ markId: 'a\u0085b' }), // a C1 control
    mk({ markId: 'x'.repeat(101) }),
    mk({ by: '\uFEFF' }), // not White_Space for Rust, so not blank: accepted
    mk({ by: '\u3000' }), // ideographic space is blank
    mk({ op: 'fail', reason: '\t\n' }),
    mk({ op: 'fail', reason: 'line 1\r\nline 2\ttab' }),
    mk({ by: 'x'.repeat(101) }),
    mk({ op: 'fail', reason: 'x'.repeat(2001) }),
    mk({ op: 'fail', reason: 'a\u2029b' }),
    mk({ by: 7 }),
    { markId: 5, id: ['x'], op: 'seen' }
  ] });
  assert.strictEqual(r.ok, true);
  const brief = r.results.map((x) => [x.index, x.ok, x.field || x.state]);
  assert.deepStrictEqual(brief, [
    [0, true, 'seen'], [1, false, 'markId'], [2, false, 'markId'], [3, true, 'seen'], [4, false, 'by'],
    [5, false, 'reason'], [6, true, 'failed'], [7, false, 'by'], [8, false, 'reason'], [9, false, 'reason'],
    [10, false, 'by'], [11, false, 'markId']
  ]);
  assert.deepStrictEqual(r.results[11], { index: 11, markId: null, id: null, ok: false, code: 'bad_request',
    field: 'markId', message: '"markId" must be a string' });
  assert.strictEqual(r.results[2].markId, 'x'.repeat(101), 'a readable markId is echoed even when refused');
});

test('the batch shape is still checked as a whole: more than 500 marks refuse the request', () => {
  const s = makeServer();
  const marks = Array.from({ length: 501 }, (_, i) => ({ markId: 'k' + i, id: ID(1), op: 'seen', at: N0, by: 'pc-b' }));
  const r = s.call('mark', 'pc-b', { marks });
  assert.deepStrictEqual([r.ok, r.error.code, r.error.field], [false, 'bad_request', 'marks']);
  const p = s.call('poll', 'pc-b', { marks: 'x' });
  assert.deepStrictEqual([p.ok, p.error.field], [false, 'marks']);
});

test('status answers names of Object.prototype as missing, and a bad confirm id never fails the poll', () => {
  const s = makeServer();
  s.call('send', 'pc-a', { mail: { id: ID(1), to: 'pc-b', body: 'x' } });
  const st = s.call('status', 'pc-a', { ids: ['constructor', '__proto__', ID(1), 'mail-1-0000abcd'] });
  assert.strictEqual(st.ok, true);
  assert.deepStrictEqual(st.missing, ['constructor', '__proto__', 'mail-1-0000abcd']);
  assert.deepStrictEqual(st.mails.map((m) => m.id), [ID(1)]);
  const p = s.call('poll', 'pc-b', { confirm: ['toString', ID(1), ''] });
  assert.deepStrictEqual([p.ok, p.confirmed], [true, [ID(1)]]);
  assert.strictEqual(s.call('status', 'pc-a', { ids: [] }).error.field, 'ids');
  assert.strictEqual(s.call('status', 'pc-a', { ids: [1] }).error.field, 'ids');
});

test('expiresIn is bounded to 366 days and must be an integer', () => {
  const s = makeServer();
  const send = (expiresIn) => s.call('send', 'pc-a', { mail: { id: ID(1), to: 'pc-b', body: 'x', expiresIn } });
  assert.strictEqual(send(366 * DAY + 1).error.field, 'mail.expiresIn');
  assert.strictEqual(send(-5).error.field, 'mail.expiresIn');
  assert.strictEqual(send(1.5).error.field, 'expiresIn', 'as the Rust opt_int names it');
  assert.deepStrictEqual(send(366 * DAY).ids, [ID(1)]);
});

test('the stored expiresIn survives archiving: a retry after the sweep is still the same mail', () => {
  const s = makeServer();
  const mail = { id: ID(1), to: '*', body: 'to all', expiresIn: 30 * MIN };
  assert.deepStrictEqual(s.call('send', 'pc-a', { mail }).ids, [ID(1) + '~pc-b', ID(1) + '~pc-c']);
  for (const pc of ['pc-b', 'pc-c']) {
    const id = ID(1) + '~' + pc;
    s.call('poll', pc, { confirm: [id], marks: [{ markId: 'k', id, op: 'ack', at: N0, by: pc }] });
  }
  s.advance(MIN);
  assert.strictEqual(s.call('sweep', 'pc-a').ok, true);
  const archive = s.fakes.sheet('Archive').dump();
  const col = archive[0].indexOf('expiresIn');
  assert.strictEqual(col, 17, 'expiresIn is the 18th column (recipients came after it)');
  assert.deepStrictEqual(archive.slice(1).map((r) => r[col]), [String(30 * MIN), String(30 * MIN)]);
  assert.strictEqual(s.fakes.sheet('Mail').getLastRow(), 1, 'both copies left the live tab');
  const retry = (o) => s.call('send', 'pc-a', { mail: Object.assign({}, mail, o) });
  assert.strictEqual(retry({}).existing, true);
  assert.strictEqual(retry({ expiresIn: 29 * MIN }).existing, true);
  assert.strictEqual(retry({ expiresIn: 31 * MIN }).error.code, 'duplicate_id');
  assert.strictEqual(retry({ expiresIn: null, expiresAt: N0 + 30 * MIN }).error.code, 'duplicate_id',
    'an absolute expiry is another mail, even at the same instant');
});

test('a Mail tab from before the expiresIn column: old rows read as no expiresIn, new rows keep theirs', () => {
  const s = makeServer();
  const at = N0 + 10 * MIN;
  assert.strictEqual(s.call('send', 'pc-a', { mail: { id: ID(2), to: 'pc-b', body: 'old', expiresAt: at } }).ok, true);
  const sh = s.fakes.sheet('Mail');
  assert.strictEqual(sh.dump()[0].length, 19);
  sh.cells.forEach((r) => { r.length = 17; }); // header and row as the 17-column layout wrote them
  const again = s.call('send', 'pc-a', { mail: { id: ID(2), to: 'pc-b', body: 'old', expiresAt: at } });
  assert.strictEqual(again.existing, true);
  const asIn = s.call('send', 'pc-a', { mail: { id: ID(2), to: 'pc-b', body: 'old', expiresIn: 10 * MIN } });
  assert.strictEqual(asIn.error.code, 'duplicate_id');
  assert.strictEqual(s.call('status', 'pc-a', { ids: [ID(2)] }).mails[0].expiresAt, at);
  const fresh = { id: ID(3), to: 'pc-b', body: 'new', expiresIn: 5 * MIN };
  assert.strictEqual(s.call('send', 'pc-a', { mail: fresh }).existing, false);
  assert.strictEqual(s.call('send', 'pc-a', { mail: fresh }).existing, true);
  assert.strictEqual(s.call('send', 'pc-a', { mail: Object.assign({}, fresh, { expiresIn: 6 * MIN }) }).error.code, 'duplicate_id');
});

test('received-updates: an Events tab made by an older build gains its r and note columns once, old rows kept', () => {
  const s = makeServer();
  s.ctx.tab_('Events');
  const ev = s.fakes.sheet('Events');
  // The older layout: 7 columns, and a row written by it (a change of mail pc-a sent to pc-b).
  ev.deleteColumns(8, ev.getMaxColumns() - 7);
  ev.seedRows(2, [['1', 'pc-a', ID(1), 'new', String(N0), 'pc-a', ''], ['2', 'pc-a', ID(1), 'delivered', String(N0), 'pc-b', 'pc-a']]);
  assert.strictEqual(ev.getMaxColumns(), 7);
  s.ctx.setProp_('COLUMNS_Events', null);
  s.call('send', 'pc-c', { mail: { id: ID(2), to: 'pc-b', body: 'x' } });
  assert.strictEqual(ev.getMaxColumns(), 9);
  s.advance(10);
  const p = s.call('poll', 'pc-b', { confirm: [ID(2)], receivedSince: 0 });
  assert.strictEqual(p.ok, true, JSON.stringify(p));
  // The old row has no recipient: it is not in the received feed (documented), the new one is.
  assert.deepStrictEqual(p.receivedUpdates.map((u) => [u.id, u.state, u.at, u.by, u.note]), [[ID(2), 'delivered', N0 + 10, 'pc-b', null]]);
  assert.deepStrictEqual(s.call('poll', 'pc-a', { since: 0 }).updates.map((u) => [u.seq, u.state]), [[2, 'delivered']]);
  const header = s.ctx.readText_(ev, 1, 1, 1, 9)[0];
  assert.deepStrictEqual(header, ['seq', 'from', 'id', 'state', 'at', 'by', 'u', 'r', 'note']);
  // Remembered: the next execution does not look at the grid again.
  s.fakes.resetCounters();
  s.call('poll', 'pc-b', { receivedSince: p.receivedCursor });
  assert.strictEqual(s.fakes.snapshotCounters().total.structureCalls || 0, 0);
});

test('multi-recipient: a Mail tab made by an older build gains its recipients column once, old rows kept', () => {
  const s = makeServer();
  s.call('send', 'pc-a', { mail: { id: ID(1), to: 'pc-b', body: 'old' } });
  const sh = s.fakes.sheet('Mail');
  // The older layout: 18 columns, with a row written by it.
  sh.cells.forEach((r) => { r.length = 18; });
  sh.deleteColumns(19, sh.getMaxColumns() - 18);
  s.ctx.setProp_('COLUMNS_Mail', null);
  s.ctx.resetExec_();
  assert.strictEqual(sh.getMaxColumns(), 18);
  const sent = s.call('send', 'pc-a', { mail: { id: ID(2), to: ['pc-b', 'pc-c'], body: 'new' } });
  assert.deepStrictEqual(sent.ids, [ID(2) + '~pc-b', ID(2) + '~pc-c']);
  assert.strictEqual(sh.getMaxColumns(), 19);
  assert.strictEqual(s.ctx.readText_(sh, 1, 19, 1, 1)[0][0], 'recipients');
  const p = s.call('poll', 'pc-b');
  assert.deepStrictEqual(p.mail.map((m) => [m.id, m.recipients || null]),
    [[ID(1), null], [ID(2) + '~pc-b', ['pc-b', 'pc-c']]]);
});

test('received-updates: only a caller that asks gets the second feed', () => {
  const s = makeServer();
  s.call('send', 'pc-a', { mail: { id: ID(1), to: 'pc-b', body: 'x' } });
  const plain = s.call('poll', 'pc-b', { confirm: [ID(1)] });
  assert.ok(!('receivedUpdates' in plain) && !('receivedCursor' in plain), JSON.stringify(plain));
  const asked = s.call('poll', 'pc-b', { receivedSince: 0 });
  assert.deepStrictEqual(asked.receivedUpdates.map((u) => u.state), ['delivered']);
});
