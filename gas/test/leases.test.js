'use strict';
// Leases on the stricter Sheets fakes (batched writes, per-call counting): what the
// vectors cannot see — how many Sheets calls a lease op costs, that text survives the
// sheet, that a poll without `lease` touches no lease tab, and that the sweep drops
// ended leases after 24 h without ever reusing a fence.
const test = require('node:test');
const assert = require('node:assert');
const { makeServer, N0 } = require('../lib/testkit');

const H6 = 180000;

function claim(s, pc, resource, n, extra) {
  return s.call('lease.claim', pc, Object.assign({
    claimId: 'c-' + pc + '-' + resource + '-' + n, resource: resource, repo: 'github.com/kim/app',
    description: 'work on ' + resource, files: ['src/**'], mode: 'exclusive',
    holder: { pc: pc, session: 's-' + pc, name: null }
  }, extra || {}));
}

test('a poll renewing 200 leases costs the same few Sheets calls as one renewing 1', () => {
  const s = makeServer();
  for (let i = 0; i < 200; i++) assert.strictEqual(claim(s, 'pc-a', 'res-' + i, 0).ok, true);
  const renewCost = (n) => {
    s.advance(30000);
    s.fakes.resetCounters();
    const renew = [];
    for (let i = 0; i < n; i++) renew.push({ resource: 'res-' + i, fence: 1 });
    const r = s.call('poll', 'pc-a', { lease: { renew: renew, known: 200 } });
    assert.strictEqual(r.lease.renewed.length, n);
    const c = s.fakes.snapshotCounters().perSheet;
    return { reads: c.Leases.getValuesCalls, writes: c.Leases.setValuesCalls };
  };
  const one = renewCost(1);
  const many = renewCost(200);
  assert.deepStrictEqual(many, one, 'no per-lease Sheets calls');
  assert.ok(many.reads <= 1 && many.writes <= 1, JSON.stringify(many));
});

test('a poll without a lease argument touches no lease tab', () => {
  const s = makeServer();
  claim(s, 'pc-a', 'res', 0);
  s.fakes.resetCounters();
  assert.strictEqual(s.call('poll', 'pc-b', {}).ok, true);
  const per = s.fakes.snapshotCounters().perSheet;
  ['Leases', 'LeaseCounters', 'LeaseLost'].forEach((t) => {
    const c = per[t] || { getValuesCalls: 0, setValuesCalls: 0 }; // a tab never made was never touched
    assert.strictEqual(c.getValuesCalls + c.setValuesCalls, 0, t);
  });
});

test('text that Sheets would turn into numbers, dates or formulas comes back verbatim', () => {
  const s = makeServer();
  const r = claim(s, 'pc-a', '0123', 0, { description: '=SUM(A1)', repo: '2026-01-01', files: ['true', '0123', '+1'],
    holder: { pc: 'pc-a', session: '007', name: 'TRUE' } });
  assert.strictEqual(r.ok, true, JSON.stringify(r));
  const l = s.call('lease.list', 'pc-b', {}).leases[0];
  assert.deepStrictEqual([l.resource, l.description, l.repo, l.files, l.holder.session, l.holder.name],
    ['0123', '=SUM(A1)', '2026-01-01', ['true', '0123', '+1'], '007', 'TRUE']);
});

test('the sweep drops leases ended over 24 h ago; their fences are never handed out again', () => {
  const s = makeServer();
  assert.strictEqual(claim(s, 'pc-a', 'res', 0).lease.fence, 1);
  assert.strictEqual(s.call('lease.release', 'pc-a', { resource: 'res', fence: 1, by: 'pc-a/s' }).released, true);
  s.advance(25 * 3600000);
  assert.strictEqual(s.call('sweep', 'pc-a', {}).ok, true);
  assert.strictEqual(s.fakes.sheet('Leases').getLastRow(), 1, 'the ended lease is gone from the tab');
  assert.strictEqual(claim(s, 'pc-a', 'res', 1).lease.fence, 2);
  assert.strictEqual(s.call('lease.check', 'pc-b', { resource: 'res', fence: 1 }).current, false);
});

test('a refused claim writes nothing, even when it found a lease gone stale', () => {
  const s = makeServer();
  claim(s, 'pc-a', 'res', 0);
  s.advance(H6);
  s.fakes.resetCounters();
  const r = claim(s, 'pc-b', 'res', 0);
  assert.strictEqual(r.error.code, 'stale');
  assert.strictEqual(r.error.lease.stale, true);
  const per = s.fakes.snapshotCounters().perSheet;
  assert.strictEqual(per.Leases.setValuesCalls + per.LeaseCounters.setValuesCalls, 0);
  // The next op marks it stale for good, once.
  const v = s.call('lease.list', 'pc-b', { timeline: true });
  assert.deepStrictEqual(v.leases[0].timeline.map((e) => [e.event, e.at]), [['granted', N0], ['stale', N0 + H6]]);
});

test('a claim storm through doPost: never two holders, fences grow by one', () => {
  const s = makeServer({ labels: ['pc-a', 'pc-b', 'pc-c', 'pc-d'] });
  const pcs = ['pc-a', 'pc-b', 'pc-c', 'pc-d'];
  const holding = {};
  let expectFence = 1;
  // Interleaved clients: each step one client acts; a holder releases, the others claim.
  for (let step = 0; step < 400; step++) {
    const pc = pcs[(step * 7 + (step >> 3)) % pcs.length];
    s.advance(7);
    if (holding[pc]) {
      const r = s.call('lease.release', pc, { resource: 'storm', fence: holding[pc], by: pc + '/s' });
      assert.strictEqual(r.released, true);
      delete holding[pc];
    } else {
      const r = claim(s, pc, 'storm', step);
      if (r.ok) {
        assert.deepStrictEqual(Object.keys(holding), [], 'granted while someone held it');
        assert.strictEqual(r.lease.fence, expectFence++);
        holding[pc] = r.lease.fence;
      } else assert.strictEqual(r.error.code, 'held');
    }
  }
  assert.ok(expectFence > 50, 'the storm granted ' + (expectFence - 1));
});
