'use strict';
// The server against fakes that behave like Google (batched writes, round-trip
// costs, the grid, deferred write failures, the Properties quota). One test (or more)
// per defect once found in the server; each asserts what the code before the fix got wrong.
const test = require('node:test');
const assert = require('node:assert');
const { makeServer, seedMails, N0, TOKEN, post } = require('../lib/testkit');
const { createFakes } = require('../lib/fakes');

const ID = (n) => 'mail-1767225600000-' + n.toString(16).padStart(8, '0');
const MIN = 60000;
const DAY = 24 * 60 * MIN;

function eventRows(s) {
  const ev = s.fakes.sheet('Events');
  return ev ? ev.dump().slice(1) : [];
}
function eventKeys(s) {
  return eventRows(s).map((r) => r[2] + '|' + r[3]);
}
function assertNoDuplicateEvents(s) {
  const keys = eventKeys(s);
  assert.deepStrictEqual(keys.filter((k, i) => keys.indexOf(k) !== i), [], 'an (id, state) event is written once');
  const seqs = eventRows(s).map((r) => Number(r[0]));
  seqs.forEach((q, i) => { if (i) assert.ok(q > seqs[i - 1], 'seqs increase: ' + seqs.join(',')); });
}

// ---- the fakes themselves ------------------------------------------------------------

test('fakes: a write is invisible to another execution until flush() or the end of the writer', () => {
  const f = createFakes();
  const sh = f.ss.insertSheet('T');
  let seenInside = null, seenAfterFlush = null;
  f.runExecution(() => {
    sh.getRange(1, 1).setValues([['a']]);
    f.runExecution(() => { seenInside = sh.getLastRow(); });           // another execution
    assert.strictEqual(sh.getRange(1, 1).getValues()[0][0], 'a', 'the writer reads its own write');
    sh.getRange(2, 1).setValues([['b']]);
    f.globals.SpreadsheetApp.flush();
    f.runExecution(() => { seenAfterFlush = sh.getLastRow(); });
  });
  assert.strictEqual(seenInside, 0);
  assert.strictEqual(seenAfterFlush, 2);
});

test('fakes: the grid is 1000 x 26, outside it throws (switchable), and a write can fail at a later call', () => {
  const f = createFakes();
  const sh = f.ss.insertSheet('T');
  assert.deepStrictEqual([sh.getMaxRows(), sh.getMaxColumns()], [1000, 26]);
  assert.throws(() => sh.getRange(1001, 1), /outside the dimensions of the sheet/);
  assert.throws(() => sh.getRange(1, 27), /outside the dimensions of the sheet/);
  const lenient = createFakes({ gridStrict: false });
  const t = lenient.ss.insertSheet('T');
  t.getRange(1500, 1).setValues([['x']]);
  assert.strictEqual(t.getMaxRows(), 1500, 'lenient: the grid grows');
  f.faults.plan.push({ what: 'setValues', sheet: 'T', nth: 1, deferred: true });
  assert.throws(() => f.runExecution(() => {
    sh.getRange(1, 1).setValues([['queued']]);   // no error here…
    sh.getRange(1, 1).getValues();               // …but at the next read
  }), /batched setValues/);
});

test('fakes: round trips cost simulated time, the lock records its hold, Properties have a daily quota', () => {
  let now = N0;
  const f = createFakes({ now: () => now, propsQuotaPerDay: 10 });
  const sh = f.ss.insertSheet('T');
  const lock = f.globals.LockService.getScriptLock();
  lock.tryLock(1000);
  sh.getRange(1, 1, 100, 10).getValues();
  lock.releaseLock();
  assert.ok(f.lock.maxHoldMs >= f.cost.rangeCall, 'hold ' + f.lock.maxHoldMs);
  const p = f.globals.PropertiesService.getScriptProperties();
  for (let i = 0; i < 10; i++) p.getProperty('x');
  assert.throws(() => p.getProperty('x'), /too many times for one day: properties/);
  now += DAY;
  assert.strictEqual(p.getProperty('x'), null, 'the quota is per day');
});

// ---- flush before the lock is released ----------------------------------

for (const gridStrict of [true, false]) {
  test(`an execution that runs right after another's lock release sees its rows (grid strict: ${gridStrict})`, () => {
    const s = makeServer({ gridStrict });
    let inner = null;
    s.fakes.lock.onRelease = () => {
      if (inner) return;
      inner = {};
      inner = s.call('send', 'pc-c', { mail: { id: ID(2), to: 'pc-b', body: 'second' } });
    };
    assert.strictEqual(s.call('send', 'pc-a', { mail: { id: ID(1), to: 'pc-b', body: 'first' } }).ok, true);
    s.fakes.lock.onRelease = null;
    assert.strictEqual(inner.ok, true);
    assert.strictEqual(s.fakes.lock.pendingAtRelease, 0, 'no write was still queued when the lock went');
    assert.deepStrictEqual(s.fakes.sheet('Mail').dump().slice(1).map((r) => r[0]).sort(), [ID(1), ID(2)]);
    assert.deepStrictEqual(eventRows(s).map((r) => [r[0], r[2]]).sort(), [['1', ID(1)], ['2', ID(2)]]);
    assert.strictEqual(s.call('poll', 'pc-b', { limit: 10 }).mail.length, 2);
  });
}

// ---- range calls per poll / confirm / mark --------------------------------

function measured(s, fn) {
  s.fakes.resetCounters();
  const r = fn();
  assert.strictEqual(r.ok, true, JSON.stringify(r));
  const c = s.fakes.snapshotCounters();
  return { r, calls: c.total.rangeCalls, grew: c.total.structureCalls, holdMs: c.maxLockHoldMs };
}

test('a poll, a confirm of 500 and a mark of 500 interleaved with other mail cost <= 6 range calls, lock hold < 2 s', () => {
  const s = makeServer();
  // 1,000 live rows: pc-b's 500 new mails interleaved one by one with pc-c's.
  const specs = [];
  for (let i = 0; i < 1000; i++) specs.push({ id: 'mail-' + (N0 - 1e6 + i) + '-' + i.toString(16).padStart(8, '0'), from: 'pc-a', to: i % 2 ? 'pc-c' : 'pc-b', createdAt: N0 - 1e6 + i, state: 'new' });
  seedMails(s, specs);
  const mine = specs.filter((x) => x.to === 'pc-b').map((x) => x.id);
  s.call('poll', 'pc-b', { limit: 1 }); // the first poll writes the Roster heartbeat
  const poll = measured(s, () => s.call('poll', 'pc-b', { limit: 500 }));
  assert.strictEqual(poll.r.mail.length, 500);
  const confirm = measured(s, () => s.call('poll', 'pc-b', { confirm: mine, limit: 500 }));
  assert.strictEqual(confirm.r.confirmed.length, 500);
  const mark = measured(s, () => s.call('mark', 'pc-b', { marks: mine.map((id, i) => ({ markId: 'm' + i, id, op: 'seen', at: N0, by: 'pc-b' })) }));
  assert.ok(mark.r.results.every((x) => x.ok && x.changed));
  for (const [name, m] of [['poll', poll], ['confirm 500', confirm], ['mark 500', mark]]) {
    // Growing a full grid (once per 1,000 rows appended) costs one format call more.
    assert.ok(m.calls <= 6 + (m.grew ? 1 : 0), `${name}: ${m.calls} range calls`);
    assert.ok(m.holdMs < 2000, `${name}: estimated lock hold ${m.holdMs} ms`);
  }
  const st = s.call('status', 'pc-a', { ids: mine.slice(0, 3).concat(specs[1].id) });
  assert.deepStrictEqual(st.mails.map((m) => m.state), ['seen', 'seen', 'seen', 'new'], 'the other PC\'s rows in the span are unchanged');
  assertNoDuplicateEvents(s);
});

// ---- every multi-step write is safe to repeat -----------------------------

function failOnce(s, what, sheet, deferred) {
  s.fakes.faults.plan = [{ what, sheet, nth: 1, deferred }];
}

const SEND_STEPS = [['setValues', 'Events'], ['setValues', 'Mail']];
for (const deferred of [false, true]) {
  for (const [what, sheet] of SEND_STEPS.concat([['setValues', 'Mail#2']])) {
    test(`a reply whose ${what} on ${sheet} fails${deferred ? ' (at a later call)' : ''} is whole after one retry`, () => {
      const s = makeServer();
      s.call('send', 'pc-a', { mail: { id: ID(1), to: 'pc-b', body: 'question' } });
      s.call('poll', 'pc-b', { confirm: [ID(1)] });
      const reply = { mail: { id: ID(2), to: 'pc-a', body: 'answer', inReplyTo: ID(1) } };
      s.fakes.faults.plan = [{ what, sheet: sheet.replace('#2', ''), nth: sheet.endsWith('#2') ? 2 : 1, deferred }];
      const first = s.call('send', 'pc-b', reply);
      s.fakes.faults.plan = [];
      const again = s.call('send', 'pc-b', reply);
      assert.strictEqual(again.ok, true, JSON.stringify(again));
      assert.deepStrictEqual(again.ids, [ID(2)]);
      if (first.ok) assert.deepStrictEqual(first.ids, [ID(2)]);
      const st = s.call('status', 'pc-a', { ids: [ID(1), ID(2)] });
      assert.deepStrictEqual(st.mails.map((m) => [m.id, m.state]), [[ID(1), 'done'], [ID(2), 'new']]);
      assert.deepStrictEqual(s.fakes.sheet('Mail').dump().slice(1).map((r) => r[0]).sort(), [ID(1), ID(2)]);
      const keys = eventKeys(s);
      for (const k of [ID(1) + '|new', ID(1) + '|delivered', ID(1) + '|done', ID(2) + '|new']) assert.ok(keys.includes(k), 'event ' + k);
      assertNoDuplicateEvents(s);
      assert.deepStrictEqual(s.call('poll', 'pc-a').updates.map((u) => [u.id, u.state]), [[ID(1), 'delivered'], [ID(1), 'done']]);
    });
  }
  for (const [what, sheet] of [['setValues', 'Events'], ['setValues', 'Mail']]) {
    test(`a mark whose ${what} on ${sheet} fails${deferred ? ' (at a later call)' : ''} is whole after one retry`, () => {
      const s = makeServer();
      s.call('send', 'pc-a', { mail: { id: ID(1), to: 'pc-b', body: 'x' } });
      s.call('poll', 'pc-b', { confirm: [ID(1)] });
      const marks = { marks: [{ markId: 'k', id: ID(1), op: 'ack', at: N0, by: 'pc-b' }] };
      failOnce(s, what, sheet, deferred);
      s.call('mark', 'pc-b', marks);
      s.fakes.faults.plan = [];
      const again = s.call('mark', 'pc-b', marks);
      assert.strictEqual(again.results[0].state, 'done');
      assertNoDuplicateEvents(s);
      assert.ok(eventKeys(s).includes(ID(1) + '|done'));
      assert.deepStrictEqual(s.call('status', 'pc-a', { ids: [ID(1)] }).mails.map((m) => m.state), ['done']);
    });
  }
  for (const [what, sheet] of [['setValues', 'Events'], ['setValues', 'Archive'], ['setValues', 'Mail'], ['deleteRows', 'Mail']]) {
    test(`a sweep band whose ${what} on ${sheet} fails${deferred ? ' (at a later call)' : ''} is whole after the next sweep`, () => {
      const s = makeServer();
      s.call('send', 'pc-a', { mail: { id: ID(1), to: '*', body: 'to all' } });           // two copies, acked below
      s.call('send', 'pc-a', { mail: { id: ID(2), to: 'pc-b', body: 'expires', expiresAt: N0 + MIN } });
      s.call('send', 'pc-a', { mail: { id: ID(3), to: 'pc-c', body: 'stays' } });
      for (const pc of ['pc-b', 'pc-c']) {
        s.call('mark', pc, { marks: [{ markId: 'k', id: ID(1) + '~' + pc, op: 'ack', at: N0, by: pc }] });
      }
      s.setNow(N0 + 2 * MIN);
      failOnce(s, what, sheet, deferred);
      s.call('sweep', 'pc-a');
      s.fakes.faults.plan = [];
      s.advance(10 * MIN);
      assert.strictEqual(s.call('sweep', 'pc-a').ok, true);
      assert.strictEqual(s.call('sweep', 'pc-a').ok, true);
      const arch = s.fakes.sheet('Archive').dump().slice(1).map((r) => r[0]).sort();
      assert.deepStrictEqual(arch, [ID(1) + '~pc-b', ID(1) + '~pc-c', ID(2)], 'each final mail archived once');
      assert.deepStrictEqual(s.fakes.sheet('Mail').dump().slice(1).map((r) => r[0]), [ID(3)], 'no copies left in the live tab');
      assertNoDuplicateEvents(s);
      assert.strictEqual(eventKeys(s).filter((k) => k.endsWith('|expired')).length, 1);
      assert.strictEqual(s.call('status', 'pc-a', { ids: [ID(1)] }).mails.length, 2, 'status: two broadcast copies');
      assert.strictEqual(s.call('send', 'pc-a', { mail: { id: ID(1), to: '*', body: 'to all' } }).ids.length, 2);
    });
  }
}

// ---- wrong tokens cost no Properties quota --------------------------------

test('60,000 wrong-token requests over 60 simulated minutes use <= 100 Properties reads', () => {
  const s = makeServer();
  s.fakes.resetCounters();
  const body = JSON.stringify({ v: 1, op: 'hello', pc: 'pc-x', token: 'wrong' });
  for (let i = 0; i < 60000; i++) {
    if (i % 1000 === 0) s.setNow(N0 + (i / 1000) * MIN);
    // handleBody_ is doPost without wrapping the answer in a TextOutput (faster, same path)
    const r = i === 0 ? post(s.ctx, body).json : s.ctx.handleBody_(body);
    if (i % 10000 === 0) assert.strictEqual(r.error.code, 'unauthorized');
  }
  assert.ok(s.fakes.counts.propsCalls <= 100, 'Properties calls: ' + s.fakes.counts.propsCalls);
  assert.ok(!JSON.stringify([...s.fakes.cacheStore.values()]).includes(TOKEN), 'the token itself is never cached');
  assert.strictEqual(s.call('hello', 'pc-a').ok, true, 'the right token still works');
});

// ---- the trigger refuses to sweep when it is not the deployed code ----------

test('a trigger running another build than the web app raises stale_deploy instead of sweeping', () => {
  const s = makeServer();
  s.call('send', 'pc-a', { mail: { id: ID(1), to: 'pc-b', body: 'x', expiresAt: N0 + MIN } });
  assert.strictEqual(s.fakes.scriptProps.DEPLOYED_BUILD, s.ctx.__get('PCMAIL_BUILD'), 'serving records the build');
  s.fakes.scriptProps.DEPLOYED_BUILD = 'build-of-the-deployment';
  s.fakes.cacheStore.clear();
  s.setNow(N0 + 2 * MIN);
  s.ctx.sweepTrigger();
  // status judges the expiry on read whether or not a sweep ran; the stored row says whether one did
  assert.deepStrictEqual(s.call('status', 'pc-a', { ids: [ID(1)] }).mails[0].state, 'expired', 'judged on read');
  assert.deepStrictEqual(s.ctx.locate_([ID(1)])[0].mail.state, 'new', 'no sweep ran');
  // that request recorded the build again (the web app serves this code now)
  const al = s.call('alerts', 'pc-a').alerts;
  assert.deepStrictEqual(al.map((a) => [a.kind, a.subject]), [['stale_deploy', 'gas']]);
  assert.match(al[0].message, /did not run/);
  s.fakes.cacheStore.clear();
  s.ctx.sweepTrigger();
  assert.strictEqual(s.call('status', 'pc-a', { ids: [ID(1)] }).mails[0].state, 'expired', 'same build: the sweep runs');
  assert.deepStrictEqual(s.call('alerts', 'pc-a').alerts.filter((a) => a.kind === 'stale_deploy'), [], 'and resolves the alert');
});

// ---- bounded growth ------------------------------------------------------

test('new tabs are trimmed to their columns', () => {
  const s = makeServer();
  s.ctx.setup();
  for (const name of ['Mail', 'Archive', 'Events', 'Roster', 'Alerts']) {
    const sh = s.fakes.sheet(name);
    assert.strictEqual(sh.maxCols, s.ctx.__get('TABS')[name].length, name);
  }
});

test('Events are pruned once every recent PC passed them; a cursor behind gets cursorReset', () => {
  const s = makeServer();
  for (let i = 1; i <= 6; i++) s.call('send', 'pc-a', { mail: { id: ID(i), to: 'pc-b', body: 'x' + i } });
  const ids = [1, 2, 3, 4, 5, 6].map(ID);
  s.call('poll', 'pc-b', { confirm: ids });
  const p1 = s.call('poll', 'pc-a', { since: 0 });
  assert.strictEqual(p1.updates.length, 6);
  const cursor = p1.cursor;
  s.call('poll', 'pc-a', { since: cursor });   // pc-a has passed every event
  s.call('poll', 'pc-b', { since: cursor });
  s.call('poll', 'pc-c', { since: cursor });
  s.call('mark', 'pc-b', { marks: [{ markId: 'a', id: ID(6), op: 'seen', at: N0, by: 'pc-b' }] });
  s.advance(MIN);
  s.call('sweep', 'pc-a');
  const seqs = eventRows(s).map((r) => Number(r[0]));
  assert.strictEqual(seqs[0], cursor + 1, 'rows up to the slowest cursor are gone: ' + seqs.join(','));
  // a PC that kept an old cursor: cursorReset and the updates after the pruned point
  const late = s.call('poll', 'pc-a', { since: 3 });
  assert.strictEqual(late.cursorReset, true);
  assert.deepStrictEqual(late.updates.map((u) => [u.id, u.state]), [[ID(6), 'seen']]);
  const fine = s.call('poll', 'pc-a', { since: late.cursor });
  assert.strictEqual(fine.cursorReset, undefined);
  // seqs go on after pruning
  s.call('mark', 'pc-b', { marks: [{ markId: 'b', id: ID(6), op: 'ack', at: N0, by: 'pc-b' }] });
  assert.deepStrictEqual(s.call('poll', 'pc-a', { since: late.cursor }).updates.map((u) => u.seq), [late.cursor + 1]);
});

test('a PC silent for over 30 days does not hold back pruning', () => {
  const s = makeServer();
  s.call('poll', 'pc-c', { since: 0 });
  for (let i = 1; i <= 3; i++) s.call('send', 'pc-a', { mail: { id: ID(i), to: 'pc-b', body: 'x' } });
  s.call('poll', 'pc-b', { confirm: [ID(1), ID(2), ID(3)] });
  s.advance(31 * DAY);
  const c = s.call('poll', 'pc-a', { since: 0 }).cursor;
  s.call('poll', 'pc-a', { since: c });
  s.call('poll', 'pc-b', { since: c });
  s.call('sweep', 'pc-a');
  assert.strictEqual(eventRows(s).length, 1, 'only the last row stays');
});

test('archived mail past the retention is deleted with a record', () => {
  const s = makeServer({ properties: { ARCHIVE_RETENTION_DAYS: '90' } });
  s.call('send', 'pc-a', { mail: { id: ID(1), to: 'pc-b', body: 'old' } });
  s.call('mark', 'pc-b', { marks: [{ markId: 'a', id: ID(1), op: 'ack', at: N0, by: 'pc-b' }] });
  s.call('sweep', 'pc-a');
  s.advance(60 * DAY);
  s.call('send', 'pc-a', { mail: { id: ID(2), to: 'pc-b', body: 'newer' } });
  s.call('mark', 'pc-b', { marks: [{ markId: 'b', id: ID(2), op: 'ack', at: s.getNow(), by: 'pc-b' }] });
  s.call('sweep', 'pc-a');
  s.advance(31 * DAY);
  s.call('sweep', 'pc-a');
  assert.deepStrictEqual(s.fakes.sheet('Archive').dump().slice(1).map((r) => r[0]), [ID(2)]);
  const rec = s.fakes.sheet('Purged').dump().slice(1);
  assert.deepStrictEqual(rec.map((r) => [r[1], r[2], r[3]]), [['1', ID(1), ID(1)]]);
  assert.deepStrictEqual(s.call('status', 'pc-a', { ids: [ID(1)] }).missing, [ID(1)]);
});

// ---- webhook ---------------------------------------------------------------

function staleAlertServer(props) {
  const s = makeServer({ properties: Object.assign({ WEBHOOK_URL: 'https://discord.com/api/webhooks/1/x' }, props || {}) });
  s.call('poll', 'pc-b');
  s.setNow(N0 + 11 * MIN);
  return s;
}

test('a 429 with Retry-After is honoured, does not use up a try, and the error shows on the alert', () => {
  const s = staleAlertServer();
  s.fakes.fetch.script = [{ code: 429, headers: { 'Retry-After': '1200' }, body: 'error code: 1015' }];
  s.call('sweep', 'pc-a');
  let a = s.call('alerts', 'pc-a').alerts[0];
  assert.deepStrictEqual([a.posted, a.postTries], [false, 0]);
  assert.match(a.lastError, /HTTP 429 \(retry after 1200 s\): error code: 1015/);
  s.advance(10 * MIN);
  s.call('sweep', 'pc-a');
  assert.strictEqual(s.fakes.fetch.requests.length, 1, 'no post before Retry-After');
  s.advance(11 * MIN);
  s.call('sweep', 'pc-a');
  assert.strictEqual(s.fakes.fetch.requests.length, 2);
  a = s.call('alerts', 'pc-a').alerts[0];
  assert.deepStrictEqual([a.posted, a.postTries, a.lastError], [true, 1, null]);
});

test('after 5 failed tries the alert stays listed with its last error', () => {
  const s = staleAlertServer();
  s.fakes.fetch.handler = () => ({ code: 500, body: 'boom' });
  for (let i = 0; i < 7; i++) { s.call('sweep', 'pc-a'); s.advance(10 * MIN); s.call('poll', 'pc-c'); }
  assert.strictEqual(s.fakes.fetch.requests.length, 5);
  const a = s.call('alerts', 'pc-a', { open: true }).alerts.filter((x) => x.subject === 'pc-b')[0];
  assert.deepStrictEqual([a.posted, a.postTries, a.lastError, a.resolvedAt], [false, 5, 'HTTP 500: boom', null]);
});

test('Slack-compatible {"text"} by URL host, by URL fragment or by WEBHOOK_FORMAT', () => {
  for (const [props, url] of [
    [{ WEBHOOK_URL: 'https://hooks.slack.com/services/T/B/x' }, 'https://hooks.slack.com/services/T/B/x'],
    [{ WEBHOOK_URL: 'https://chat.example/hook#slack' }, 'https://chat.example/hook'],
    [{ WEBHOOK_URL: 'https://chat.example/hook', WEBHOOK_FORMAT: 'slack' }, 'https://chat.example/hook']
  ]) {
    const s = staleAlertServer(props);
    s.call('sweep', 'pc-a');
    const req = s.fakes.fetch.requests[0];
    assert.strictEqual(req.url, url);
    assert.deepStrictEqual(Object.keys(JSON.parse(req.payload)), ['text']);
  }
  const d = staleAlertServer();
  d.call('sweep', 'pc-a');
  assert.deepStrictEqual(Object.keys(JSON.parse(d.fakes.fetch.requests[0].payload)), ['content']);
});

// ---- setup: no spreadsheet, a non-ASCII token ---------------------------------------

test('a standalone script without SPREADSHEET_ID answers not_configured with the fix', () => {
  const s = makeServer({ standalone: true });
  const r = s.call('roster.get', 'pc-a');
  assert.strictEqual(r.error.code, 'not_configured');
  assert.match(r.error.message, /SPREADSHEET_ID/);
  const t = makeServer({ standalone: true, properties: { SPREADSHEET_ID: null } });
  t.fakes.scriptProps.SPREADSHEET_ID = t.fakes.ss.id;
  t.fakes.cacheStore.clear();
  assert.strictEqual(t.call('roster.set', 'pc-a', { label: 'pc-a', hostname: 'A' }).ok, true);
});

test('a non-ASCII token is digested as UTF-8 (not a charset that folds characters together)', () => {
  const s = makeServer({ properties: { PCMAIL_TOKEN: 't\u0101k-🔑' } });
  const r = post(s.ctx, JSON.stringify({ v: 1, op: 'hello', pc: 'pc-a', token: 't\u0101k-🔑' })).json;
  assert.strictEqual(r.ok, true, JSON.stringify(r));
  // U+0201 and U+0101 have the same low byte: a Latin-1 digest could not tell them apart.
  const w = post(s.ctx, JSON.stringify({ v: 1, op: 'hello', pc: 'pc-a', token: 't\u0201k-🔑' })).json;
  assert.strictEqual(w.error && w.error.code, 'unauthorized');
});

test('a roster.set whose row write fails still bumps the version, and its repeat stores the PC', () => {
  const s = makeServer();
  const v0 = s.call('hello', 'pc-a').rosterVersion;
  s.fakes.faults.plan = [{ what: 'setValues', sheet: 'Roster', nth: 1 }];
  assert.strictEqual(s.call('roster.set', 'pc-a', { label: 'pc-d', hostname: 'D' }).error.code, 'internal');
  s.fakes.faults.plan = [];
  assert.ok(s.call('hello', 'pc-a').rosterVersion > v0, 'clients re-read the roster');
  const r = s.call('roster.set', 'pc-a', { label: 'pc-d', hostname: 'D' });
  assert.deepStrictEqual([r.ok, r.changed, r.pc.number], [true, true, 4]);
  assert.deepStrictEqual(s.call('roster.get', 'pc-a').pcs.map((p) => p.label), ['pc-a', 'pc-b', 'pc-c', 'pc-d']);
});
