'use strict';
// Team functions on @server: queued by the submit, run by the worker
// trigger under a per-subject lease — never under the script lock, so intake goes on —
// `running` written before the work, a run killed at the 6-minute limit timed out by the
// sweep, and chunked functions resuming over several runs with per-input fingerprints and
// an expiring failure counter. The fakes' clock stands in for time.
const test = require('node:test');
const assert = require('node:assert');
const { makeServer, N0 } = require('../lib/testkit');

const MIN = 60000;
const DAY = 24 * 60 * MIN;
let seq = 0;
const JID = () => 'job-' + N0 + '-' + (++seq).toString(16).padStart(8, '0');
const sub = (pc) => ({ pc, session: 's-' + pc, name: null });

function register(s, name, entry) {
  s.ctx.__get('JOBS_WHITELIST')[name] = entry;
}
function submitServer(s, pc, command, args, extra) {
  return s.call('job.submit', pc, Object.assign({ jobId: JID(), target: '@server', command, args: args || {}, submitter: sub(pc) }, extra || {}));
}
const work = (s) => s.ctx.jobsWorkerTrigger();
const status = (s, id) => s.call('job.status', 'pc-a', { jobId: id }).job;

test('a team function is queued by the submit and run by the worker; intake never waits on it', () => {
  const s = makeServer();
  const seen = {};
  register(s, 'rebuild', {
    args: [{ name: 'doc', type: 'string', required: true, pattern: '[A-Za-z0-9_-]{1,40}' }], subject: 'doc', timeLimitMs: 300000,
    artifacts: ['reports/{command}-{subject}-{ts}.pdf'], description: 'rebuild one document',
    run: function (args, ctx) {
      // Inside the long run: the script lock is free, the job already says running,
      // the subject lease is held, and a poll and a probe submit both complete.
      seen.lockHeld = s.fakes.lock.heldBy !== null;
      seen.state = s.call('job.status', 'pc-a', { jobId: ctx.job.id }).job.state;
      seen.leases = s.call('lease.list', 'pc-b', {}).leases.map((l) => [l.resource, l.holder.pc, l.description]);
      s.advance(4 * MIN); // a long run
      seen.poll = s.call('poll', 'pc-b', { job: { take: true } }).ok;
      const probe = s.call('job.submit', 'pc-b', { jobId: JID(), target: '@server', command: '_debug_roster', submitter: sub('pc-b') });
      seen.probe = probe.job && probe.job.state;
      seen.mail = s.call('send', 'pc-b', { mail: { id: 'mail-' + N0 + '-0000beef', to: 'pc-a', body: 'still here' } }).ok;
      ctx.log('rebuilt ' + args.doc);
      ctx.readBack('pages=12');
      ctx.artifact('reports/rebuild-' + args.doc + '.pdf');
      return { pages: 12 };
    }
  });
  const r = submitServer(s, 'pc-a', 'rebuild', { doc: 'Doc_1' });
  assert.deepStrictEqual([r.ok, r.job.state, r.job.subject], [true, 'queued', 'Doc_1']);
  assert.strictEqual(submitServer(s, 'pc-a', 'rebuild', { doc: '../x' }).error.reason, 'bad_argument');
  s.call('poll', 'pc-a', { job: { take: true } });
  assert.strictEqual(status(s, r.job.id).state, 'queued', 'neither the submit nor a poll runs it');
  // Measured from the worker's run on: the first call of a fresh spreadsheet creates
  // every tab under the lock once (more tabs since sessions), which is not intake waiting.
  s.fakes.lock.maxHoldMs = 0;
  const w = work(s);
  assert.deepStrictEqual([w.ran, w.state], [r.job.id, 'ok']);
  assert.deepStrictEqual(seen, { lockHeld: false, state: 'running', leases: [[s.ctx.subjectResource_('rebuild', 'Doc_1'), 'server', 'job ' + r.job.id + ' rebuild on Doc_1']],
    poll: true, probe: 'ok', mail: true });
  const done = status(s, r.job.id);
  assert.deepStrictEqual([done.state, done.runner, done.result.data, done.result.readBack, done.result.artifacts, done.result.output, done.result.durationMs],
    ['ok', 'server/worker', { pages: 12 }, 'pages=12', ['reports/rebuild-Doc_1.pdf'], 'rebuilt Doc_1', 4 * MIN]);
  assert.deepStrictEqual(done.timeline.map((e) => [e.state, e.by]), [['queued', 'pc-a/s-pc-a'], ['running', 'server/worker'], ['ok', 'server/worker']]);
  assert.deepStrictEqual(s.call('lease.list', 'pc-b', {}).leases, [], 'the subject lease is released');
  assert.deepStrictEqual(s.call('poll', 'pc-a', { job: {} }).job.finished.map((j) => j.id), [r.job.id], 'the submitter is told in its poll');
  assert.strictEqual(work(s).ran, null, 'nothing left to run');
  assert.ok(s.fakes.lock.maxHoldMs < 2000, 'no long script-lock hold: ' + s.fakes.lock.maxHoldMs);
  assert.strictEqual(s.fakes.lock.pendingAtRelease, 0, 'every write flushed before its lock was released');
});

test('one subject at a time: a second job on the same subject waits for the lease, another subject runs', () => {
  const s = makeServer();
  const order = [];
  register(s, 'touch', {
    args: [{ name: 'doc', type: 'string', required: true }], subject: 'doc', timeLimitMs: 60000,
    run: function (args, ctx) {
      order.push('start ' + args.doc);
      if (args.doc === 'a' && order.length === 1) {
        // While this run holds subject a, another worker run (an overlapping trigger) runs.
        order.push('inner: ' + JSON.stringify(s.ctx.jobsWorkerTrigger().ran !== null));
      }
      return null;
    }
  });
  const a1 = submitServer(s, 'pc-a', 'touch', { doc: 'a' }).job;
  const a2 = submitServer(s, 'pc-a', 'touch', { doc: 'a' }, { force: true }).job;
  const b = submitServer(s, 'pc-a', 'touch', { doc: 'b' }).job;
  work(s);
  assert.deepStrictEqual(order, ['start a', 'start b', 'inner: true'], 'the overlapping run skipped a2 (subject a busy) and ran b');
  assert.deepStrictEqual([status(s, a1.id).state, status(s, a2.id).state, status(s, b.id).state], ['ok', 'queued', 'ok']);
  work(s);
  assert.strictEqual(status(s, a2.id).state, 'ok');
});

test('a run killed at Apps Script\'s 6-minute limit is timed out by the sweep, with a record', () => {
  const s = makeServer();
  register(s, 'slow', { args: [], timeLimitMs: 300000, run: function () { s.advance(6 * MIN); return 1; } });
  const j = submitServer(s, 'pc-a', 'slow').job;
  // The kill: the execution ends inside the run; nothing after it (the finish) happens.
  const finish = s.ctx.workerFinish_;
  s.ctx.workerFinish_ = function () { throw new Error('Exceeded maximum execution time'); };
  work(s);
  s.ctx.workerFinish_ = finish;
  assert.deepStrictEqual([status(s, j.id).state, status(s, j.id).runner], ['running', 'server/worker'], '`running` was written before the work');
  s.advance(30000); // 6.5 min since the last heartbeat
  const plan = submitServer(s, 'pc-a', '_debug_sweep_plan').job.result.data.jobs;
  assert.deepStrictEqual(plan.map((p) => [p.id, p.state]), [[j.id, 'timed_out']]);
  assert.deepStrictEqual(s.call('sweep', 'pc-a', {}).jobs, { timedOut: 1, cancelled: 0 });
  const t = status(s, j.id);
  assert.strictEqual(t.state, 'timed_out');
  assert.match(t.reason, /no heartbeat for 390 s \(the worker run was killed/);
  assert.deepStrictEqual(s.call('poll', 'pc-a', { job: {} }).job.finished.map((x) => x.state), ['timed_out']);
  // Its lease ran out with it: the next job on that command runs.
  const k = submitServer(s, 'pc-a', 'slow', {}, { force: true }).job;
  s.ctx.__get('JOBS_WHITELIST').slow.run = function () { return 2; };
  work(s);
  assert.strictEqual(status(s, k.id).state, 'ok');
});

test('a cancel of a queued team job ends it at once; of a running one, between chunks', () => {
  const s = makeServer();
  register(s, 'noop', { args: [], timeLimitMs: 60000, run: function () { return null; } });
  const j = submitServer(s, 'pc-a', 'noop').job;
  assert.strictEqual(s.call('job.cancel', 'pc-a', { jobId: j.id, by: 'pc-a/s' }).job.state, 'cancelled');
  assert.strictEqual(work(s).ran, null);
  register(s, 'many', {
    chunked: true, args: [], timeLimitMs: 300000,
    inputs: function () { return [1, 2, 3, 4].map((i) => ({ id: 'in' + i, mtime: 1 })); },
    process: function (input, args, ctx) {
      if (input.id === 'in2') s.call('job.cancel', 'pc-a', { jobId: ctx.job.id, by: 'pc-a/s', reason: 'enough' });
      return input.id;
    }
  });
  const m = submitServer(s, 'pc-a', 'many').job;
  work(s);
  const c = status(s, m.id);
  assert.deepStrictEqual([c.state, c.reason, c.result.chunks], ['cancelled', 'enough', { done: 2, total: 4, failed: 0, skipped: 0 }]);
});

// A chunked job: inputs are "documents"; each takes 40 s of the fakes' clock.
function chunked(s, name, docs, opts) {
  opts = opts || {};
  const calls = [];
  register(s, name, {
    chunked: true, args: [{ name: 'folder', type: 'string', required: true }], subject: 'folder', timeLimitMs: 300000,
    inputs: function () { return docs.map((d) => ({ id: d.id, mtime: d.mtime || 1 })); },
    process: function (input) {
      calls.push(input.id);
      s.advance(40000);
      if (opts.fail && opts.fail(input)) throw new Error('cannot read ' + input.id);
      return input.id.toUpperCase();
    },
    combine: function (results) { return Object.keys(results).sort().map((k) => results[k]).join(','); }
  });
  return calls;
}

test('a chunked job longer than its time limit finishes over several worker runs', () => {
  const s = makeServer();
  const docs = [];
  for (let i = 0; i < 10; i++) docs.push({ id: 'd' + i });
  const calls = chunked(s, 'digest', docs);
  const j = submitServer(s, 'pc-a', 'digest', { folder: 'inbox' }).job;
  const run1 = work(s);
  assert.deepStrictEqual([run1.ran, run1.state, run1.again], [j.id, 'running', true]);
  // 70 % of 300 s = 210 s: inputs start at 0, 40 … 200 s, none after.
  assert.strictEqual(calls.length, 6);
  const mid = status(s, j.id);
  assert.deepStrictEqual([mid.state, mid.result.chunks], ['running', { done: 6, total: 10, failed: 0, skipped: 0 }]);
  s.advance(MIN);
  assert.deepStrictEqual(s.call('sweep', 'pc-a', {}).jobs, { timedOut: 0, cancelled: 0 }, 'waiting for its next run is not silence');
  const run2 = work(s);
  assert.deepStrictEqual([run2.state, calls.length], ['ok', 10]);
  const done = status(s, j.id);
  assert.deepStrictEqual([done.result.chunks, done.result.data], [{ done: 10, total: 10, failed: 0, skipped: 0 }, 'D0,D1,D2,D3,D4,D5,D6,D7,D8,D9']);
  assert.deepStrictEqual(done.timeline.map((e) => [e.state, e.reason]), [['queued', null], ['running', null], ['running', 'run 2'], ['ok', null]]);
  // One input added (and one changed): only those two run; every other result is reused.
  docs.push({ id: 'd10' });
  docs[3].mtime = 2;
  s.advance(MIN);
  const k = submitServer(s, 'pc-a', 'digest', { folder: 'inbox' }, { force: true }).job;
  calls.length = 0;
  work(s);
  assert.deepStrictEqual(calls, ['d3', 'd10']);
  assert.deepStrictEqual([status(s, k.id).state, status(s, k.id).result.chunks.done], ['ok', 11]);
});

test('a failing input is dropped after 3 failures and retried after the counter expires (3 days)', () => {
  const s = makeServer();
  let broken = true;
  const docs = [{ id: 'good1' }, { id: 'bad' }, { id: 'good2' }];
  const calls = chunked(s, 'scan', docs, { fail: (input) => broken && input.id === 'bad' });
  const j = submitServer(s, 'pc-a', 'scan', { folder: 'f' }).job;
  const states = [];
  for (let run = 0; run < 3; run++) { states.push(work(s).state); s.advance(MIN); }
  assert.deepStrictEqual(states, ['running', 'running', 'failed'], 'retried on the next runs, dropped after the third failure');
  assert.deepStrictEqual(calls, ['good1', 'bad', 'good2', 'bad', 'bad']);
  const f = status(s, j.id);
  assert.deepStrictEqual(f.result.chunks, { done: 2, total: 3, failed: 0, skipped: 1 });
  assert.match(f.reason, /1 input\(s\) dropped after 3 failures.*bad/);
  assert.match(f.result.output, /input bad failed \(3\/3\): cannot read bad/);
  // Within 3 days a new run does not touch it again.
  calls.length = 0;
  const k = submitServer(s, 'pc-a', 'scan', { folder: 'f' }, { force: true }).job;
  work(s);
  assert.deepStrictEqual([calls, status(s, k.id).state], [[], 'failed']);
  // After 3 days since the last failure the counter has expired: retried (and now it works).
  s.advance(3 * DAY);
  broken = false;
  const l = submitServer(s, 'pc-a', 'scan', { folder: 'f' }, { force: true }).job;
  work(s);
  assert.deepStrictEqual([calls, status(s, l.id).state, status(s, l.id).result.data], [['bad'], 'ok', 'BAD,GOOD1,GOOD2']);
});

test('installJobsWorker makes exactly one 1-minute trigger; setup adds it only when team functions exist', () => {
  const s = makeServer();
  s.ctx.setup();
  assert.deepStrictEqual(s.fakes.triggers.map((t) => t.getHandlerFunction()), ['sweepTrigger']);
  register(s, 'noop', { args: [], timeLimitMs: 60000, run: function () { return null; } });
  s.ctx.setup();
  assert.strictEqual(s.ctx.installJobsWorker(), 1);
  assert.deepStrictEqual(s.fakes.triggers.map((t) => [t.getHandlerFunction(), t.minutes]).sort(), [['jobsWorkerTrigger', 1], ['sweepTrigger', 10]]);
  // A registration that does not fit the rules is refused at submit, not at run time.
  register(s, 'toolong', { args: [], timeLimitMs: 600000, run: function () { return null; } });
  const r = submitServer(s, 'pc-a', 'toolong');
  assert.deepStrictEqual([r.ok, r.error.field], [false, 'JOBS_WHITELIST.toolong.timeLimitMs']);
});

test('chunk results: the sweep drops those not written for 30 days, even while a run updates others', () => {
  const s = makeServer();
  const docs = [{ id: 'a' }, { id: 'b' }, { id: 'c' }];
  let failB = false;
  chunked(s, 'idx', docs, { fail: (input) => failB && input.id === 'b' });
  submitServer(s, 'pc-a', 'idx', { folder: 'old' });
  work(s); // rows 2-4: idx|old, written now
  s.advance(31 * DAY);
  failB = true;
  const j = submitServer(s, 'pc-a', 'idx', { folder: 'new' }).job;
  assert.strictEqual(work(s).state, 'running', 'b failed once: another run');
  assert.strictEqual(s.fakes.sheet('JobChunks').getLastRow(), 7);
  // The next run: while it processes b (whose row it read as row 6), the sweep drops rows 2-4.
  failB = false;
  const entry = s.ctx.__get('JOBS_WHITELIST').idx;
  const process = entry.process;
  entry.process = function (input, args, ctx) {
    if (input.id === 'b') assert.deepStrictEqual(s.call('sweep', 'pc-a', {}).ok, true);
    return process(input, args, ctx);
  };
  s.advance(MIN);
  assert.strictEqual(work(s).state, 'ok');
  assert.strictEqual(status(s, j.id).result.data, 'A,B,C');
  const rows = s.fakes.sheet('JobChunks').dump().slice(1).map((r) => [r[0], r[2], r[3], r[4]]);
  assert.deepStrictEqual(rows, [['idx|new', 'a', 'ok', '0'], ['idx|new', 'b', 'ok', '1'], ['idx|new', 'c', 'ok', '0']],
    'the old rows are gone and b was updated where it is now, not where it was');
});

test('existing artifacts answer without running (unless force); a verify step decides ok or failed', () => {
  const s = makeServer();
  const made = new Set();
  let runs = 0;
  register(s, 'render', {
    args: [{ name: 'doc', type: 'string', required: true }], subject: 'doc', timeLimitMs: 60000, artifacts: ['out/{command}-{subject}.pdf'],
    existing: function (args) { const n = 'out/render-' + args.doc + '.pdf'; return made.has(n) ? [n] : []; },
    run: function (args, ctx) { runs++; made.add('out/render-' + args.doc + '.pdf'); ctx.artifact('out/render-' + args.doc + '.pdf'); return { part: 'X-' + args.doc }; },
    verify: function (data, args) { return { ok: made.has('out/render-' + args.doc + '.pdf') && data.part === 'X-' + args.doc, output: 'found ' + data.part }; }
  });
  const first = submitServer(s, 'pc-a', 'render', { doc: 'd1' }).job;
  work(s);
  const f = status(s, first.id);
  assert.deepStrictEqual([f.state, f.result.ran, f.result.verify, runs], ['ok', true, { ok: true, exit: null, output: 'found X-d1' }, 1]);
  s.advance(10 * MIN); // past the dedup window
  const again = submitServer(s, 'pc-a', 'render', { doc: 'd1' }).job;
  work(s);
  const a = status(s, again.id);
  assert.deepStrictEqual([a.state, a.result.ran, a.result.reused, runs], ['ok', false, ['out/render-d1.pdf'], 1], 'not run again: its artifact exists');
  const forced = submitServer(s, 'pc-a', 'render', { doc: 'd1' }, { force: true }).job;
  work(s);
  assert.deepStrictEqual([status(s, forced.id).result.ran, runs], [true, 2]);
  s.ctx.__get('JOBS_WHITELIST').render.verify = function () { return { ok: false, output: 'X-d2 not in the PDF' }; };
  const bad = submitServer(s, 'pc-a', 'render', { doc: 'd2' }).job;
  work(s);
  const b = status(s, bad.id);
  assert.deepStrictEqual([b.state, b.reason, b.result.verify.ok], ['failed', 'verify failed: X-d2 not in the PDF', false]);
});

test('a chunked job whose next run never comes (no worker trigger) is timed out after 6 h', () => {
  const s = makeServer();
  const docs = [];
  for (let i = 0; i < 10; i++) docs.push({ id: 'd' + i });
  chunked(s, 'digest', docs);
  const j = submitServer(s, 'pc-a', 'digest', { folder: 'x' }).job;
  work(s);
  s.advance(5 * 60 * MIN);
  s.call('sweep', 'pc-a', {});
  assert.strictEqual(status(s, j.id).state, 'running');
  s.advance(60 * MIN);
  s.call('sweep', 'pc-a', {});
  const t = status(s, j.id);
  assert.deepStrictEqual([t.state, t.result.chunks.done], ['timed_out', 6]);
  assert.match(t.reason, /no worker run for 6 h/);
});

test('the worker runs nothing while the trigger\'s build differs from the deployed one', () => {
  const s = makeServer();
  register(s, 'noop', { args: [], timeLimitMs: 60000, run: function () { return 1; } });
  const j = submitServer(s, 'pc-a', 'noop').job;
  s.fakes.scriptProps.DEPLOYED_BUILD = 'build-of-the-deployment';
  s.fakes.cacheStore.clear();
  assert.strictEqual(work(s).stale, true);
  assert.strictEqual(status(s, j.id).state, 'queued'); // that request recorded the served build again
  s.fakes.cacheStore.clear();
  assert.strictEqual(work(s).ran, j.id);
  assert.strictEqual(status(s, j.id).state, 'ok');
});
