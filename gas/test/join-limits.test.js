'use strict';
// Failed join attempts on Apps Script (Auth.js): per label, and over every caller at once
// (Apps Script sees no address: every caller is the peer 'unknown'). The vector
// tests/protocol/cred-join-rate-limit.json holds both servers to the same answers; this
// adds what a vector cannot say: the constants are pcmail_core's, a flood writes no
// Script Property and a bounded number of audit rows, the right code joins through any flood.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const path = require('path');
const { makeServer, post } = require('../lib/testkit');

const CODE = '0123456789abcdef0123456789abcd01';
const hex = (n) => n.toString(16).padStart(32, '0');

function join(s, label, code, cred) {
  const body = { v: 1, op: 'join', pc: label, cred: cred || 'e'.repeat(64), args: { code: code, hostname: 'H' } };
  return post(s.ctx, JSON.stringify(body)).json;
}

function auditRows(s) {
  return s.call('roster.log', 'pc-admin', { limit: 500 }).entries;
}

test('the limits are pcmail_core::auth\'s', () => {
  const src = fs.readFileSync(path.join(__dirname, '../../crates/core/src/auth.rs'), 'utf8');
  const rust = (name) => {
    const m = new RegExp('pub const ' + name + ': [^=]+ = ([^;]+);').exec(src);
    assert.ok(m, name + ' not found in auth.rs');
    return m[1].trim();
  };
  const s = makeServer();
  const product = (expr) => expr.split('*').reduce((acc, n) => acc * Number(n.trim()), 1);
  assert.strictEqual(product(rust('JOIN_WINDOW_MS')), s.ctx.__get('JOIN_WINDOW_MS'));
  assert.strictEqual(Number(rust('JOIN_FAILURES_PER_LABEL')), s.ctx.__get('JOIN_FAILURES_PER_LABEL'));
  assert.strictEqual(Number(rust('JOIN_FAILURES_PER_PEER')), s.ctx.__get('JOIN_FAILURES_PER_PEER'));
  assert.strictEqual(JSON.parse(rust('UNKNOWN_PEER')), s.ctx.__get('UNKNOWN_PEER'));
});

test('a flood of wrong codes writes no Script Property, few audit rows, and the right code still joins', () => {
  const s = makeServer({ labels: [] });
  assert.strictEqual(s.call('roster.enrol', 'pc-admin', { label: 'pc-b', hostname: 'B', code: CODE }).ok, true);
  const before = JSON.stringify(s.fakes.scriptProps);
  const codes = {};
  for (let i = 0; i < 300; i++) {
    const r = join(s, i % 2 ? 'pc-b' : 'pc-q' + (i % 7), hex(1000 + i));
    codes[r.error.code] = (codes[r.error.code] || 0) + 1;
  }
  // pc-b has 10 checked failures, then its label limit; the other labels' failures are
  // checked until every caller together has 30 (pc-b's refused ones count there too).
  assert.deepStrictEqual(codes, { join_code_invalid: 25, rate_limited: 275 });
  assert.strictEqual(JSON.stringify(s.fakes.scriptProps), before, 'failed joins spend no Properties writes');
  const rows = auditRows(s);
  const failed = rows.filter((e) => e.action === 'join-failed').length;
  const throttled = rows.filter((e) => e.action === 'join-throttled');
  assert.strictEqual(failed, 25, 'each checked failure has its row');
  assert.deepStrictEqual(throttled.map((e) => [e.label, e.by]), [['*', 'unknown'], ['pc-b', 'unknown']], 'one row per limit and window');
  assert.match(throttled[0].detail, /^270 join attempt\(s\) refused \(over 30 failures from this address in 10 min\)/);
  assert.match(throttled[1].detail, /^5 join attempt\(s\) refused \(over 10 failures for this label in 10 min\)/);
  const r = join(s, 'pc-b', CODE, 'b'.repeat(64));
  assert.strictEqual(r.ok, true, JSON.stringify(r));
  assert.strictEqual(auditRows(s)[0].action, 'join');
});

test('a known and an unknown label answer alike, message and all', () => {
  const s = makeServer({ labels: [] });
  s.call('roster.enrol', 'pc-admin', { label: 'pc-b', hostname: 'B', code: CODE });
  for (let i = 0; i < 12; i++) {
    const known = join(s, 'pc-b', hex(2000 + i));
    const unknown = join(s, 'pc-nobody', hex(3000 + i));
    assert.deepStrictEqual(unknown, known, 'attempt ' + i);
  }
});

test('a window the cache dropped early only starts counting again', () => {
  const s = makeServer({ labels: [] });
  s.call('roster.enrol', 'pc-admin', { label: 'pc-b', hostname: 'B', code: CODE });
  for (let i = 0; i < 10; i++) join(s, 'pc-b', hex(4000 + i));
  assert.strictEqual(join(s, 'pc-b', hex(4100)).error.code, 'rate_limited');
  [...s.fakes.cacheStore.keys()].filter((k) => k.indexOf('pcmail:join-attempt:') === 0).forEach((k) => s.fakes.cacheStore.delete(k));
  assert.strictEqual(join(s, 'pc-b', hex(4101)).error.code, 'join_code_invalid');
  s.advance(10 * 60 * 1000);
  assert.strictEqual(join(s, 'pc-b', CODE, 'b'.repeat(64)).ok, true);
});
