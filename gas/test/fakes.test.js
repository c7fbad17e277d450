'use strict';
// The fakes must reproduce the Sheets traps, or the server tests prove nothing.
const test = require('node:test');
const assert = require('node:assert');
const { createFakes } = require('../lib/fakes');

function sheet() {
  const f = createFakes();
  return { f, sh: f.ss.insertSheet('T') };
}

test('without the @ format Sheets coerces text; with it the text stays', () => {
  const { sh } = sheet();
  sh.getRange(1, 1, 1, 6).setValues([['true', 'FALSE', '0123', '1e3', '2026-01-01', "'=lit"]]);
  const v = sh.getRange(1, 1, 1, 6).getValues()[0];
  assert.strictEqual(v[0], true);
  assert.strictEqual(v[1], false);
  assert.strictEqual(v[2], 123);
  assert.strictEqual(v[3], 1000);
  assert.ok(v[4] instanceof Date);
  assert.strictEqual(v[4].toISOString(), '2026-01-01T00:00:00.000Z');
  assert.strictEqual(v[5], '=lit', 'a leading apostrophe makes literal text and is not stored');

  const r = sh.getRange(2, 1, 1, 5);
  r.setNumberFormat('@');
  r.setValues([['true', '0123', '2026-01-01', '=SUM(A1)', '+1']]);
  assert.deepStrictEqual(r.getValues()[0], ['true', '0123', '2026-01-01', '=SUM(A1)', '+1']);
  assert.deepStrictEqual(r.getFormulas()[0], ['', '', '', '', '']);
});

test('formulas are evaluated (or error) when the format is not text', () => {
  const { sh } = sheet();
  sh.getRange(1, 1, 1, 4).setValues([['=SUM(A1)', '=1+2', '+x', '@here']]);
  assert.deepStrictEqual(sh.getRange(1, 1, 1, 4).getValues()[0], ['#NAME?', 3, '#ERROR!', '#NAME?']);
  assert.strictEqual(sh.getRange(1, 1).getFormulas()[0][0], '=SUM(A1)');
});

test('a lost format fault makes setNumberFormat a no-op', () => {
  const { f, sh } = sheet();
  f.faults.formatLost = true;
  const r = sh.getRange(1, 1);
  r.setNumberFormat('@');
  r.setValues([['true']]);
  assert.strictEqual(r.getValues()[0][0], true);
});

test('ranges count cells, check dimensions, and TextFinder finds exact cells', () => {
  const { sh } = sheet();
  assert.throws(() => sh.getRange(1, 1, 2, 2).setValues([['a']]), /does not match/);
  assert.throws(() => sh.getRange(0, 1), /invalid/);
  const r = sh.getRange(1, 1, 3, 1);
  r.setNumberFormat('@');
  r.setValues([['pc-b'], ['pc-bb'], ['PC-B']]);
  sh.getRange(1, 1, 3, 1).getValues();
  assert.strictEqual(sh.counters.cellsRead, 3);
  assert.strictEqual(sh.counters.cellsWritten, 3);
  const rows = sh.getRange(1, 1, 3, 1).createTextFinder('pc-b').matchEntireCell(true).matchCase(true).findAll().map((x) => x.getRow());
  assert.deepStrictEqual(rows, [1]);
  const re = sh.getRange(1, 1, 3, 1).createTextFinder('^(?:pc-b|pc-bb)$').useRegularExpression(true).matchCase(true).findAll();
  assert.strictEqual(re.length, 2);
  assert.strictEqual(sh.counters.textFinderCalls, 2);
  sh.deleteRows(1, 2);
  assert.strictEqual(sh.getLastRow(), 1);
});

test('CacheService expires entries and refuses values over 100 KB', () => {
  let now = 1000;
  const f = createFakes({ now: () => now });
  const c = f.globals.CacheService.getScriptCache();
  c.put('k', 'v', 10);
  assert.strictEqual(c.get('k'), 'v');
  now += 10001;
  assert.strictEqual(c.get('k'), null);
  assert.throws(() => c.put('big', 'x'.repeat(100 * 1024 + 1)), /too large/);
});

test('the script lock can be contended', () => {
  const f = createFakes();
  const a = f.globals.LockService.getScriptLock();
  const b = f.globals.LockService.getScriptLock();
  assert.ok(a.tryLock(100));
  assert.strictEqual(b.tryLock(100), false);
  a.releaseLock();
  assert.ok(b.tryLock(100));
  b.releaseLock();
  f.lock.contended = true;
  assert.strictEqual(a.tryLock(100), false);
  assert.throws(() => a.waitLock(100), /Lock timeout/);
});

test('UrlFetchApp records and plays scripted failures; Utilities digests are signed bytes', () => {
  const f = createFakes();
  f.fetch.script = [500, 'throw'];
  const U = f.globals.UrlFetchApp;
  assert.strictEqual(U.fetch('https://x', { muteHttpExceptions: true }).getResponseCode(), 500);
  assert.throws(() => U.fetch('https://x', {}), /Address unavailable/);
  assert.strictEqual(U.fetch('https://x', {}).getResponseCode(), 200);
  assert.strictEqual(f.fetch.requests.length, 3);
  const d = f.globals.Utilities.computeDigest(f.globals.Utilities.DigestAlgorithm.SHA_256, 'abc');
  assert.strictEqual(d.length, 32);
  assert.ok(d.some((b) => b < 0));
});
