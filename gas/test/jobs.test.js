'use strict';
// Jobs on the strict fakes: the PC-executor flow through the poll, refusals,
// dedup, visibility, the sweep's job step, the @server built-ins, and the team functions
// the worker trigger runs under a subject lease (never the script lock), with chunks.
const test = require('node:test');
const assert = require('node:assert');
const { makeServer, seedFinishedJobs, N0 } = require('../lib/testkit');

const MIN = 60000;
const DAY = 24 * 60 * MIN;
let seq = 0;
const JID = () => 'job-' + N0 + '-' + (++seq).toString(16).padStart(8, '0');
const sub = (pc, session) => ({ pc, session: session || 's-' + pc, name: null });

const TEST_SPEC = {
  name: 'test', subject: 'checkout', timeLimitMs: 600000, artifacts: ['target/pcmail/{command}-{subject}-{ts}.log'],
  args: [
    { name: 'checkout', type: 'checkout', required: true, values: ['app', 'web'] },
    { name: 'crate', type: 'string', pattern: '[a-z][a-z0-9_-]*', maxLen: 40 },
    { name: 'filter', type: 'string' },
    { name: 'file', type: 'path', maxLen: 100 },
    { name: 'jobs', type: 'int', min: 1, max: 16 }
  ]
};

// pc-b executes `test`; pc-a (and the others listed) may submit.
function withExecutor(opts) {
  const s = makeServer(opts);
  const wl = { hash: 'wl-1', commands: [TEST_SPEC], allowedSubmitters: (opts && opts.allowed) || ['pc-a', 'pc-c'], checkouts: ['app', 'web'] };
  const p = s.call('poll', 'pc-b', { job: { whitelist: wl, take: true } });
  assert.strictEqual(p.job.whitelistHash, 'wl-1');
  return s;
}

function submit(s, pc, extra) {
  return s.call('job.submit', pc, Object.assign({ jobId: JID(), target: 'pc-b', command: 'test', args: { checkout: 'app' }, submitter: sub(pc) }, extra || {}));
}

test('a PC job: offered until started, heartbeats, reported item by item, the submitter told once', () => {
  const s = withExecutor();
  const r = submit(s, 'pc-a', { args: { checkout: 'app', crate: 'core' } });
  assert.deepStrictEqual([r.ok, r.deduped, r.job.state, r.job.subject, r.job.timeline.length], [true, false, 'queued', 'app', 1]);
  const id = r.job.id;
  // Offered at least once: every poll with take until it starts.
  for (let i = 0; i < 2; i++) {
    const o = s.call('poll', 'pc-b', { job: { take: true } }).job;
    assert.deepStrictEqual(o.offered.map((j) => j.id), [id]);
    assert.strictEqual(o.offered[0].credentialsRequired, false);
  }
  assert.deepStrictEqual(s.call('poll', 'pc-b', { job: { take: false } }).job.offered, [], 'take false: offered nothing');
  const st = s.call('job.start', 'pc-b', { jobId: id, runner: 'pc-b/77', startedAt: N0 });
  assert.deepStrictEqual([st.job.state, st.job.runner, st.job.heartbeatAt, st.job.runStartedAt], ['running', 'pc-b/77', N0, N0]);
  assert.strictEqual(s.call('job.start', 'pc-b', { jobId: id, runner: 'pc-b/77', startedAt: N0 }).ok, true, 'the same runner again: ok');
  assert.strictEqual(s.call('job.start', 'pc-b', { jobId: id, runner: 'pc-b/78', startedAt: N0 }).error.code, 'conflict', 'another runner must not run it');
  assert.strictEqual(s.call('job.start', 'pc-a', { jobId: id, runner: 'pc-a/1', startedAt: N0 }).error.code, 'forbidden', 'only the target PC');
  assert.deepStrictEqual(s.call('poll', 'pc-b', { job: { take: true } }).job.offered, [], 'started: no longer offered');
  s.advance(30000);
  s.call('poll', 'pc-b', { job: { running: [id] } });
  assert.strictEqual(s.call('job.status', 'pc-a', { jobId: id }).job.heartbeatAt, N0 + 30000);
  s.advance(1000);
  const rep = s.call('poll', 'pc-b', { job: { reports: [
    { jobId: id, runner: 'pc-b/77', state: 'ok', result: { ran: true, exit: 0, output: 'x'.repeat(70000) + 'END', artifacts: ['target/pcmail/test-app-1.log'] } },
    { jobId: 'nope', runner: 'pc-b/77', state: 'ok', result: { ran: true } },
    { jobId: JID(), runner: 'pc-b/77', state: 'ok', result: { ran: true } }
  ] } }).job;
  // A report that does not parse is in `errors` (with its index); one the server refuses in `reported`.
  assert.deepStrictEqual(rep.reported.map((x) => [x.jobId, x.ok, x.code || null]), [[id, true, null], [rep.reported[1].jobId, false, 'not_found']]);
  assert.deepStrictEqual(rep.errors.map((e) => [e.list, e.index, e.code, e.field]), [['reports', 1, 'bad_request', 'jobId']]);
  const done = s.call('job.status', 'pc-a', { jobId: id }).job;
  assert.deepStrictEqual([done.state, done.result.truncated, Buffer.byteLength(done.result.output), done.result.output.endsWith('END')], ['ok', true, 65536, true]);
  assert.deepStrictEqual(done.timeline.map((e) => [e.state, e.by]), [['queued', 'pc-a/s-pc-a'], ['running', 'pc-b/77'], ['ok', 'pc-b/77']]);
  const again = s.call('poll', 'pc-b', { job: { reports: [{ jobId: id, runner: 'pc-b/77', state: 'failed', result: { ran: true } }] } }).job;
  assert.deepStrictEqual(again.reported, [{ jobId: id, ok: true }], 'a retried report is safe');
  assert.strictEqual(s.call('job.status', 'pc-a', { jobId: id }).job.state, 'ok', 'and changes nothing');
  const told = s.call('poll', 'pc-a', { job: {} }).job.finished;
  assert.deepStrictEqual(told.map((j) => [j.id, j.state]), [[id, 'ok']]);
  assert.deepStrictEqual(s.call('poll', 'pc-a', { job: {} }).job.finished, [], 'told once');
  assert.deepStrictEqual(s.call('poll', 'pc-b', { job: {} }).job.finished, [], 'the target is not told');
});

test('refusals: no executor, not whitelisted, bad arguments (never reaching a shell), submitter not allowed', () => {
  const s = withExecutor();
  const code = (r) => [r.ok, r.error && r.error.code, r.error && r.error.reason, r.error && r.error.field];
  assert.deepStrictEqual(code(submit(s, 'pc-a', { target: 'pc-c' })), [false, 'job_refused', 'no_executor', undefined]);
  assert.deepStrictEqual(code(submit(s, 'pc-a', { command: 'deploy' })), [false, 'job_refused', 'not_whitelisted', undefined]);
  const u = submit(s, 'pc-a', { target: 'pc-bb' });
  assert.deepStrictEqual([u.error.code, u.error.candidates[0]], ['unknown_recipient', 'pc-b']);
  assert.deepStrictEqual(code(submit(s, 'pc-a', { target: '@elsewhere' })), [false, 'bad_request', undefined, 'target']);
  assert.deepStrictEqual(code(submit(s, 'pc-a', { submitter: sub('pc-c') })), [false, 'forbidden', undefined, undefined]);
  // Hostile values: refused with their field, before any executor sees them.
  const hostile = [
    [{ checkout: 'app', filter: 'a\u0000b' }, 'args.filter'], [{ checkout: 'app', filter: 'a\nb' }, 'args.filter'],
    [{ checkout: 'app', filter: 'x'.repeat(201) }, 'args.filter'], [{ checkout: 'app', crate: 'core; id' }, 'args.crate'],
    [{ checkout: 'app', file: '../etc/passwd' }, 'args.file'], [{ checkout: 'app', file: '/etc/passwd' }, 'args.file'],
    [{ checkout: 'app', file: 'C:/Windows' }, 'args.file'], [{ checkout: 'app', file: '..\\x' }, 'args.file'],
    [{ checkout: '../app' }, 'args.checkout'], [{ checkout: 'app', jobs: '4; id' }, 'args.jobs'], [{ checkout: 'app', jobs: 17 }, 'args.jobs'],
    [{ checkout: 'app', nope: 1 }, 'args.nope'], [{ checkout: 'app', 'bad name': 1 }, 'args'], [{}, 'args.checkout']
  ];
  hostile.forEach(([args, field]) => assert.deepStrictEqual(code(submit(s, 'pc-a', { args })), [false, 'job_refused', 'bad_argument', field], JSON.stringify(args)));
  // Shell metacharacters are just characters of one value.
  const meta = submit(s, 'pc-a', { args: { checkout: 'app', filter: '$(id); rm -rf / && `id` | x > y' }, force: true });
  assert.strictEqual(meta.job.args.filter, '$(id); rm -rf / && `id` | x > y');
  const typed = submit(s, 'pc-a', { args: { checkout: 'web', jobs: '4' }, force: true });
  assert.strictEqual(typed.job.args.jobs, 4, 'an int in its string form is the int');
  // Default allowedSubmitters (null): nobody while the shared token is accepted…
  const t = withExecutor({ allowed: null });
  t.call('poll', 'pc-b', { job: { whitelist: { hash: 'wl-2', commands: [TEST_SPEC], allowedSubmitters: null } } });
  assert.deepStrictEqual(code(submit(t, 'pc-a')), [false, 'job_refused', 'submitter_not_allowed', undefined]);
  assert.deepStrictEqual(code(submit(s, 'pc-c', { args: { checkout: 'web' } })).slice(0, 1), [true], 'pc-c is on pc-b\'s list');
});

test('arguments never become options: a leading - is refused for string and path unless the spec allows it', () => {
  const s = withExecutor();
  const code = (r) => [r.ok, r.error && r.error.code, r.error && r.error.reason, r.error && r.error.field];
  [[{ checkout: 'app', filter: '--output=/tmp/x' }, 'args.filter'], [{ checkout: 'app', filter: '-' }, 'args.filter'],
    [{ checkout: 'app', file: '--output=/tmp/x' }, 'args.file'], [{ checkout: 'app', file: '-x' }, 'args.file']]
    .forEach(([args, field]) => {
      const r = submit(s, 'pc-a', { args });
      assert.deepStrictEqual(code(r), [false, 'job_refused', 'bad_argument', field], JSON.stringify(args));
      assert.match(r.error.message, /read as an option/);
    });
  assert.strictEqual(submit(s, 'pc-a', { args: { checkout: 'app', file: './-x', filter: 'a-b' }, force: true }).ok, true);
  // The executor's spec opts in per argument (allowDash), only for string and path.
  const allowing = Object.assign({}, TEST_SPEC, {
    args: TEST_SPEC.args.map((a) => (a.name === 'filter' ? Object.assign({}, a, { allowDash: true }) : a)),
    artifacts: ['out/{command}-{subject}-{crate}-{args}-{ts}.log']
  });
  const p = s.call('poll', 'pc-b', { job: { whitelist: { hash: 'wl-dash', commands: [allowing], allowedSubmitters: ['pc-a'], checkouts: ['app'] }, take: true } });
  assert.strictEqual(p.ok, true, JSON.stringify(p));
  assert.strictEqual(submit(s, 'pc-a', { args: { checkout: 'app', filter: '--x' }, force: true }).ok, true);
  const bad = Object.assign({}, TEST_SPEC, { args: TEST_SPEC.args.map((a) => (a.name === 'jobs' ? Object.assign({}, a, { allowDash: true }) : a)) });
  const r = s.call('poll', 'pc-b', { job: { whitelist: { hash: 'wl-bad', commands: [bad], allowedSubmitters: ['pc-a'] }, take: true } });
  // A bad whitelist is refused on its own: the poll goes on, the refusal names the field.
  assert.strictEqual(r.ok, true);
  assert.strictEqual(r.job.errors[0].field, 'job.whitelist.commands[0].args[4].allowDash');
  const unknown = Object.assign({}, TEST_SPEC, { artifacts: ['out/{nope}'] });
  const u = s.call('poll', 'pc-b', { job: { whitelist: { hash: 'wl-u', commands: [unknown], allowedSubmitters: ['pc-a'] }, take: true } });
  assert.strictEqual(u.job.errors[0].field, 'job.whitelist.commands[0].artifacts[0]');
});

test('a bad whitelist is refused on its own with its field (the poll goes on); an unchanged hash is not stored again', () => {
  const s = withExecutor();
  const bad = s.call('poll', 'pc-b', { job: { whitelist: { hash: 'h', commands: [{ name: 'x', timeLimitMs: 5 }] } } });
  assert.deepStrictEqual([bad.ok, bad.job.errors[0].list, bad.job.errors[0].field], [true, 'whitelist', 'job.whitelist.commands[0].timeLimitMs']);
  const dup = s.call('poll', 'pc-b', { job: { whitelist: { hash: 'h', commands: [TEST_SPEC, TEST_SPEC] } } });
  assert.strictEqual(dup.job.errors[0].field, 'job.whitelist.commands[1].name');
  s.call('poll', 'pc-b', { job: {} }); // the Properties view is cached again after the write
  s.fakes.resetCounters();
  s.call('poll', 'pc-b', { job: { whitelist: { hash: 'wl-1', commands: [TEST_SPEC] } } });
  const c = s.fakes.snapshotCounters();
  assert.strictEqual((c.perSheet.JobWhitelists || { setValuesCalls: 0 }).setValuesCalls, 0);
  assert.strictEqual(c.services.propsCalls, 0, 'the hash comes from the cached Properties view');
});

test('8 sessions submit the same job: one job, 8 answers, each PC told once; --force runs again', () => {
  const s = withExecutor({ labels: ['pc-a', 'pc-b', 'pc-c', 'pc-d'], allowed: ['pc-a', 'pc-c', 'pc-d'] });
  const answers = [];
  for (let i = 0; i < 8; i++) {
    const pc = ['pc-a', 'pc-c', 'pc-d'][i % 3];
    answers.push(s.call('job.submit', pc, { jobId: JID(), target: 'pc-b', command: 'test', args: { checkout: 'app', crate: 'core' }, submitter: sub(pc, 'session-' + i) }));
  }
  const id = answers[0].job.id;
  assert.ok(answers.every((a) => a.ok && a.job.id === id));
  assert.deepStrictEqual(answers.map((a) => a.deduped), [false, true, true, true, true, true, true, true]);
  assert.strictEqual(s.call('job.status', 'pc-a', { jobId: id }).job.joined, 7);
  // A retried deduped submit (same jobId) does not join twice.
  const retryId = JID();
  const first = s.call('job.submit', 'pc-c', { jobId: retryId, target: 'pc-b', command: 'test', args: { checkout: 'app', crate: 'core' }, submitter: sub('pc-c') });
  const retry = s.call('job.submit', 'pc-c', { jobId: retryId, target: 'pc-b', command: 'test', args: { checkout: 'app', crate: 'core' }, submitter: sub('pc-c') });
  assert.deepStrictEqual([first.deduped, retry.deduped, retry.job.id, retry.job.joined], [true, true, id, 8]);
  assert.strictEqual(s.call('poll', 'pc-b', { job: { take: true } }).job.offered.length, 1, 'one run offered');
  s.call('job.start', 'pc-b', { jobId: id, runner: 'pc-b/1', startedAt: N0 });
  s.call('job.report', 'pc-b', { jobId: id, runner: 'pc-b/1', state: 'ok', result: { ran: true, exit: 0, output: 'same result' } });
  for (const pc of ['pc-a', 'pc-c', 'pc-d']) {
    assert.deepStrictEqual(s.call('poll', pc, { job: {} }).job.finished.map((j) => [j.id, j.result.output]), [[id, 'same result']], pc);
    assert.deepStrictEqual(s.call('poll', pc, { job: {} }).job.finished, [], pc + ' told once');
  }
  // Within the window an identical submit is answered with the ended job.
  s.advance(MIN);
  const late = submit(s, 'pc-a', { args: { checkout: 'app', crate: 'core' } });
  assert.deepStrictEqual([late.deduped, late.job.id, late.job.state], [true, id, 'ok']);
  const forced = submit(s, 'pc-a', { args: { checkout: 'app', crate: 'core' }, force: true });
  assert.deepStrictEqual([forced.deduped, forced.job.state, forced.job.force], [false, 'queued', true]);
  assert.notStrictEqual(forced.job.id, id);
  // After the window (default 5 min) a plain submit runs again; dedupWindowMs 0 never joins an ended job.
  s.advance(5 * MIN);
  s.call('job.report', 'pc-b', { jobId: forced.job.id, runner: 'pc-b/1', state: 'failed', result: { ran: false, reused: ['target/pcmail/test-app-1.log'] } });
  const zero = submit(s, 'pc-a', { args: { checkout: 'app', crate: 'core' }, dedupWindowMs: 0 });
  assert.strictEqual(zero.deduped, false);
});

test('ids are idempotent: the same content answers the job, other content duplicate_id', () => {
  const s = withExecutor();
  const id = JID();
  const a = s.call('job.submit', 'pc-a', { jobId: id, target: 'pc-b', command: 'test', args: { checkout: 'app' }, submitter: sub('pc-a') });
  const b = s.call('job.submit', 'pc-a', { jobId: id, target: 'pc-b', command: 'test', args: { checkout: 'app' }, submitter: sub('pc-a') });
  assert.deepStrictEqual([a.job.id, b.job.id, b.deduped, b.job.joined], [id, id, false, 0]);
  const c = s.call('job.submit', 'pc-a', { jobId: id, target: 'pc-b', command: 'test', args: { checkout: 'web' }, submitter: sub('pc-a') });
  assert.strictEqual(c.error.code, 'duplicate_id');
});

test('visibility: status and list only for the submitter\'s, a joined or the target PC; cancel by submitter or target', () => {
  const s = withExecutor({ labels: ['pc-a', 'pc-b', 'pc-c', 'pc-d'] });
  const j = submit(s, 'pc-a').job;
  assert.strictEqual(s.call('job.status', 'pc-b', { jobId: j.id }).ok, true);
  assert.strictEqual(s.call('job.status', 'pc-d', { jobId: j.id }).error.code, 'forbidden');
  assert.strictEqual(s.call('job.status', 'pc-a', { jobId: JID() }).error.code, 'not_found');
  assert.deepStrictEqual(s.call('job.list', 'pc-d', {}).jobs, []);
  assert.deepStrictEqual(s.call('job.list', 'pc-a', { mine: true }).jobs.map((x) => x.id), [j.id]);
  assert.strictEqual(s.call('job.list', 'pc-a', {}).jobs[0].timeline, undefined, 'lists carry no timeline');
  submit(s, 'pc-c'); // joins
  assert.strictEqual(s.call('job.status', 'pc-c', { jobId: j.id }).ok, true, 'a joined PC sees it');
  assert.strictEqual(s.call('job.cancel', 'pc-c', { jobId: j.id, by: 'pc-c/x' }).error.code, 'forbidden', 'a joined PC may not cancel');
  const c = s.call('job.cancel', 'pc-a', { jobId: j.id, by: 'pc-a/s', reason: 'not needed' }).job;
  assert.deepStrictEqual([c.state, c.reason, c.timeline[1].by], ['cancelled', 'not needed', 'pc-a/s']);
  assert.strictEqual(s.call('job.start', 'pc-b', { jobId: j.id, runner: 'pc-b/1', startedAt: N0 }).error.code, 'conflict', 'a cancelled job is never started');
  assert.deepStrictEqual(s.call('poll', 'pc-c', { job: {} }).job.finished.map((x) => x.state), ['cancelled']);
});

test('cancel of a running job: requested, the executor told in its poll, reports cancelled', () => {
  const s = withExecutor();
  const j = submit(s, 'pc-a').job;
  s.call('job.start', 'pc-b', { jobId: j.id, runner: 'pc-b/1', startedAt: N0 });
  const c = s.call('job.cancel', 'pc-a', { jobId: j.id, by: 'pc-a/s' }).job;
  assert.deepStrictEqual([c.state, c.cancelRequested], ['running', true]);
  assert.deepStrictEqual(s.call('poll', 'pc-b', { job: { running: [j.id] } }).job.cancel, [j.id]);
  s.call('poll', 'pc-b', { job: { reports: [{ jobId: j.id, runner: 'pc-b/1', state: 'cancelled', result: { ran: true, exit: null } }] } });
  assert.strictEqual(s.call('job.status', 'pc-a', { jobId: j.id }).job.state, 'cancelled');
  assert.deepStrictEqual(s.call('poll', 'pc-b', { job: { running: [j.id] } }).job.cancel, []);
  // A report from queued needs ran false.
  const q = submit(s, 'pc-a', { args: { checkout: 'web' } }).job;
  assert.strictEqual(s.call('job.report', 'pc-b', { jobId: q.id, runner: 'pc-b/1', state: 'ok', result: { ran: true } }).error.code, 'conflict');
  const reused = s.call('job.report', 'pc-b', { jobId: q.id, runner: 'pc-b/1', state: 'ok', result: { ran: false, reused: ['a.log'] } }).job;
  assert.deepStrictEqual([reused.state, reused.result.reused], ['ok', ['a.log']]);
});

test('the sweep: a silent executor → timed_out with the reason, twice the limit, a week queued → cancelled; the plan lists them first', () => {
  const s = withExecutor();
  const dead = submit(s, 'pc-a').job; // kill -9: started, then never heard of again
  s.call('job.start', 'pc-b', { jobId: dead.id, runner: 'pc-b/9', startedAt: N0 });
  const slow = submit(s, 'pc-a', { args: { checkout: 'web' } }).job;
  s.call('job.start', 'pc-b', { jobId: slow.id, runner: 'pc-b/10', startedAt: N0 });
  for (let t = 30000; t <= 1200000; t += 30000) { s.setNow(N0 + t); s.call('poll', 'pc-b', { job: { running: [slow.id] } }); if (t === 150000) break; }
  // at N0+150 s: the dead one has 150 s of silence (not yet 180 s)
  assert.deepStrictEqual(s.call('sweep', 'pc-a', {}).jobs, { timedOut: 0, cancelled: 0 });
  s.setNow(N0 + 180000);
  s.call('poll', 'pc-b', { job: { running: [slow.id] } });
  const plan = s.call('job.submit', 'pc-a', { jobId: JID(), target: '@server', command: '_debug_sweep_plan', submitter: sub('pc-a') });
  assert.deepStrictEqual(plan.job.result.data.jobs.map((p) => [p.id, p.state, p.reason]), [[dead.id, 'timed_out', 'no heartbeat for 180 s (executor gone; outcome unknown)']]);
  assert.deepStrictEqual(s.call('sweep', 'pc-a', {}).jobs, { timedOut: 1, cancelled: 0 });
  const st = s.call('job.status', 'pc-a', { jobId: dead.id }).job;
  assert.deepStrictEqual([st.state, st.reason, st.timeline[st.timeline.length - 1].by], ['timed_out', 'no heartbeat for 180 s (executor gone; outcome unknown)', 'server']);
  assert.deepStrictEqual(s.call('poll', 'pc-a', { job: {} }).job.finished.map((j) => [j.id, j.state]), [[dead.id, 'timed_out']]);
  // Heartbeats go on, but the run passes twice its limit (600 s).
  for (let t = 210000; t <= 1200000; t += 30000) { s.setNow(N0 + t); s.call('poll', 'pc-b', { job: { running: [slow.id] } }); }
  s.call('sweep', 'pc-a', {});
  const sl = s.call('job.status', 'pc-a', { jobId: slow.id }).job;
  assert.deepStrictEqual([sl.state, sl.reason], ['timed_out', 'running past twice its time limit']);
  const old = submit(s, 'pc-a', { args: { checkout: 'app', crate: 'x' } }).job;
  s.advance(7 * DAY);
  assert.deepStrictEqual(s.call('sweep', 'pc-a', {}).jobs, { timedOut: 0, cancelled: 1 });
  const o = s.call('job.status', 'pc-a', { jobId: old.id }).job;
  assert.deepStrictEqual([o.state, o.reason, o.timeline[1].by], ['cancelled', 'never started', 'server']);
});

test('a poll without `job` touches no job tab; with it, its cost is flat in the number of finished jobs', () => {
  const s = withExecutor();
  s.fakes.resetCounters();
  assert.strictEqual(s.call('poll', 'pc-a', {}).ok, true);
  const per = s.fakes.snapshotCounters().perSheet;
  ['Jobs', 'JobsArchive', 'JobWhitelists', 'JobChunks'].forEach((t) => {
    const c = per[t] || { getValuesCalls: 0, setValuesCalls: 0, textFinderCalls: 0 };
    assert.strictEqual(c.getValuesCalls + c.setValuesCalls + c.textFinderCalls, 0, t);
  });
  const cost = (finished) => {
    const t = withExecutor({ labels: ['pc-a', 'pc-b', 'pc-c'] });
    seedFinishedJobs(t, finished);
    t.call('sweep', 'pc-a', {}); // moves the told ones to the archive
    const live = submit(t, 'pc-a', { args: { checkout: 'web', crate: 'live' } }).job;
    t.call('job.start', 'pc-b', { jobId: live.id, runner: 'pc-b/1', startedAt: t.getNow() });
    submit(t, 'pc-a', { args: { checkout: 'app', crate: 'queued' } });
    t.fakes.resetCounters();
    const r = t.call('poll', 'pc-b', { job: { take: true, running: [live.id] } });
    assert.strictEqual(r.job.offered.length, 1);
    const c = t.fakes.snapshotCounters();
    return { calls: c.total.rangeCalls, cellsRead: c.total.cellsRead, cellsWritten: c.total.cellsWritten };
  };
  const small = cost(100);
  const big = cost(10000);
  assert.deepStrictEqual(big, small, 'the same calls and cells with 10,000 finished jobs as with 100');
});


test('@server built-ins answer inside the submit: queued → running → ok by server, never joined', () => {
  const s = withExecutor();
  const id = 'mail-' + N0 + '-0000abcd';
  s.call('send', 'pc-a', { mail: { id, to: 'pc-b', subject: 'secret subject', body: 'secret body' } });
  const run = (pc, command, args) => s.call('job.submit', pc, { jobId: JID(), target: '@server', command, args: args || {}, submitter: sub(pc) });
  const r = run('pc-a', '_debug_roster');
  assert.deepStrictEqual([r.deduped, r.job.state, r.job.runner, r.job.result.ran, r.job.result.exit], [false, 'ok', 'server', true, 0]);
  assert.deepStrictEqual(r.job.timeline.map((e) => [e.state, e.by]), [['queued', 'pc-a/s-pc-a'], ['running', 'server'], ['ok', 'server']]);
  const pcs = r.job.result.data.pcs;
  assert.deepStrictEqual(pcs.map((p) => [p.label, p.bound, p.revoked, p.executor && p.executor.commands]), [['pc-a', false, false, null], ['pc-b', false, false, ['test']], ['pc-c', false, false, null]]);
  assert.strictEqual(r.job.result.data.requireCredentials, false);
  assert.strictEqual(run('pc-b', '_debug_mail', { id }).job.result.data.mails[0].body, 'secret body');
  const other = run('pc-c', '_debug_mail', { id }).job;
  assert.deepStrictEqual([other.state, other.result.data, other.reason], ['failed', null, 'no mail ' + id + ' that pc-c sent or received'], 'only the caller\'s own mail');
  assert.strictEqual(run('pc-a', '_debug_mail', { id: "x'; DROP" }).error.reason, 'bad_argument');
  assert.ok(Array.isArray(run('pc-a', '_debug_alerts').job.result.data.alerts));
  const dj = run('pc-a', '_debug_jobs', { state: 'ok' }).job.result.data;
  assert.deepStrictEqual(dj.jobs.map((j) => j.command), ['_debug_alerts', '_debug_roster'], 'the caller\'s ended jobs, newest first');
  assert.deepStrictEqual([dj.counts.ok, dj.counts.failed], [3, 1], 'counts of every job');
  assert.strictEqual(run('pc-a', '_debug_jobs', { state: 'done' }).error.field, 'args.state');
  const sw = run('pc-a', 'sweep').job;
  assert.deepStrictEqual([sw.state, sw.result.data.jobs], ['ok', { timedOut: 0, cancelled: 0 }]);
  assert.strictEqual(typeof run('pc-a', 'prune').job.result.data.events, 'number');
  assert.strictEqual(run('pc-a', 'no-such').error.reason, 'not_whitelisted');
  // Never joined: each submit runs (a probe answers what is true now).
  const a = run('pc-a', '_debug_alerts');
  const b = run('pc-a', '_debug_alerts');
  assert.deepStrictEqual([b.deduped, b.job.id === a.job.id], [false, false]);
  assert.deepStrictEqual(s.call('poll', 'pc-a', { job: {} }).job.finished, [], 'a probe answered in its submit is not told again');
});

test('the sweep archives ended jobs once told, and purges the archive after its retention', () => {
  const s = withExecutor();
  const j = submit(s, 'pc-a').job;
  s.call('job.report', 'pc-b', { jobId: j.id, runner: 'pc-b/1', state: 'ok', result: { ran: false } });
  s.call('sweep', 'pc-a', {});
  assert.strictEqual(s.fakes.sheet('Jobs').getLastRow(), 2, 'not yet told: stays live');
  s.call('poll', 'pc-a', { job: {} });
  s.call('sweep', 'pc-a', {});
  assert.deepStrictEqual([s.fakes.sheet('Jobs').getLastRow(), s.fakes.sheet('JobsArchive').getLastRow()], [1, 2]);
  const st = s.call('job.status', 'pc-a', { jobId: j.id }).job;
  assert.deepStrictEqual([st.state, st.timeline.length], ['ok', 2], 'an archived job is still there for status');
  assert.strictEqual(submit(s, 'pc-a').deduped, true, 'and joins an identical submit within the window');
  s.advance(91 * DAY);
  s.call('sweep', 'pc-a', {});
  assert.strictEqual(s.fakes.sheet('JobsArchive').getLastRow(), 1);
  assert.strictEqual(s.call('job.status', 'pc-a', { jobId: j.id }).error.code, 'not_found');
});

test('job text survives the sheet: formulas and numbers stay text, a 64 KiB output of escapes fits its cells', () => {
  const s = withExecutor();
  s.fakes.faults.formatLost = true; // even without the '@' format
  const j = submit(s, 'pc-a', { args: { checkout: 'app', filter: '=SUM(A1)' } }).job;
  const tricky = '\u0001'.repeat(15000) + '\u00e9'.repeat(26000) + 'TAIL'; // 116k characters of JSON: 3 cells
  s.call('job.start', 'pc-b', { jobId: j.id, runner: 'pc-b/1', startedAt: N0 });
  const r = s.call('job.report', 'pc-b', { jobId: j.id, runner: 'pc-b/1', state: 'failed', reason: '0123', result: { ran: true, exit: 1, output: tricky, data: { n: '2026-01-01' } } });
  assert.strictEqual(r.ok, true, JSON.stringify(r).slice(0, 300));
  const st = s.call('job.status', 'pc-a', { jobId: j.id }).job;
  assert.deepStrictEqual([st.args.filter, st.reason, st.result.data.n, st.result.truncated, st.result.output.endsWith('TAIL')], ['=SUM(A1)', '0123', '2026-01-01', true, true]);
  const sh = s.fakes.sheet('Jobs');
  assert.deepStrictEqual(sh.getRange(1, 1, sh.getLastRow(), 13).getFormulas().flat().filter(Boolean), []);
  assert.ok(sh.dump()[1].every((v) => typeof v === 'string' && v.length <= 50000), 'every cell is text under 50,000 characters');
});

test('a PC that joins an ended job may see it and is not told again', () => {
  const s = withExecutor();
  const j = submit(s, 'pc-a').job;
  s.call('job.report', 'pc-b', { jobId: j.id, runner: 'pc-b/1', state: 'ok', result: { ran: false } });
  const late = submit(s, 'pc-c');
  assert.deepStrictEqual([late.deduped, late.job.id, late.job.state], [true, j.id, 'ok']);
  assert.strictEqual(s.call('job.status', 'pc-c', { jobId: j.id }).ok, true);
  assert.deepStrictEqual(s.call('poll', 'pc-c', { job: {} }).job.finished, []);
  assert.deepStrictEqual(s.call('poll', 'pc-a', { job: {} }).job.finished.map((x) => x.id), [j.id]);
});
