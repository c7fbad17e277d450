'use strict';
// The dev server behaves like a deployed web app: 302 → one-time GET, HTML on faults,
// state in --db-file across restarts, clean exit on SIGTERM.
const test = require('node:test');
const assert = require('node:assert');
const { spawn } = require('child_process');
const path = require('path');
const fs = require('fs');
const os = require('os');

const SERVER = path.join(__dirname, '..', 'dev-server.js');

function start(args, env) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [SERVER, '--port', '0', '--token', 'T', '--sweep-every-ms', '0', ...args],
      { env: Object.assign({}, process.env, env || {}), stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/127\.0\.0\.1:(\d+))\/exec/.exec(out);
      if (m) resolve({ p, base: m[1] });
    });
    p.on('exit', (code) => reject(new Error('exited ' + code + ' ' + out)));
  });
}
const stop = (s) => new Promise((resolve) => { s.p.removeAllListeners('exit'); s.p.on('exit', (code, sig) => resolve({ code, sig })); s.p.kill('SIGTERM'); });

async function rpc(base, op, pc, args) {
  const r = await fetch(base + '/exec', { method: 'POST', body: JSON.stringify({ v: 1, op, pc, token: 'T', args }), redirect: 'manual', headers: { 'content-type': 'application/json' } });
  assert.strictEqual(r.status, 302);
  const loc = r.headers.get('location');
  assert.match(loc, /^http:\/\/127\.0\.0\.1:\d+\/echo\?key=/);
  const g = await fetch(loc);
  assert.strictEqual(g.status, 200);
  const again = await fetch(loc);
  assert.strictEqual(again.status, 404, 'the echo URL serves once');
  assert.match(again.headers.get('content-type'), /text\/html/);
  return g.json();
}

test('dev server: redirect flow, faults, persistence, SIGTERM', async () => {
  const db = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'pcmail-gas-')), 'state.json');
  let s = await start(['--db-file', db]);
  try {
    assert.strictEqual((await rpc(s.base, 'hello', 'pc-a')).server, 'pcmail-gas');
    assert.strictEqual((await rpc(s.base, 'roster.set', 'pc-a', { label: 'pc-a', hostname: 'A' })).ok, true);
    assert.strictEqual((await rpc(s.base, 'roster.set', 'pc-a', { label: 'pc-b', hostname: 'B' })).ok, true);
    // concurrent sends are all stored once
    const ids = Array.from({ length: 20 }, (_, i) => 'mail-1767225600000-' + (i + 1).toString(16).padStart(8, '0'));
    const res = await Promise.all(ids.map((id) => rpc(s.base, 'send', 'pc-a', { mail: { id, to: 'pc-b', body: '=1+1 ' + id } })));
    assert.ok(res.every((r) => r.ok && r.existing === false));
    // faults give HTML with status 200
    let f = await fetch(s.base + '/__fault', { method: 'POST', body: JSON.stringify({ mode: 'timeout', every: 1 }) });
    assert.strictEqual(f.status, 200);
    let r = await fetch(s.base + '/exec', { method: 'POST', body: '{}', redirect: 'manual' });
    assert.strictEqual(r.status, 200);
    assert.match(r.headers.get('content-type'), /text\/html/);
    assert.match(await r.text(), /Exceeded maximum execution time/);
    await fetch(s.base + '/__fault', { method: 'POST', body: JSON.stringify({ mode: 'throw', every: 1 }) });
    r = await fetch(s.base + '/exec', { method: 'POST', body: '{}', redirect: 'manual' });
    assert.match(await r.text(), /<html>/i);
    await fetch(s.base + '/__fault', { method: 'POST', body: JSON.stringify({ mode: 'off' }) });
    const sw = await (await fetch(s.base + '/__sweep', { method: 'POST' })).json();
    assert.strictEqual(sw.ok, true);
    assert.strictEqual((await stop(s)).code, 0);

    s = await start(['--db-file', db]);
    const p = await rpc(s.base, 'poll', 'pc-b', { limit: 500 });
    assert.strictEqual(p.mail.length, 20, 'state survived the restart');
    assert.strictEqual(p.mail[0].body, '=1+1 ' + ids[0]);
  } finally {
    await stop(s);
  }
});

test('dev server: env fault every Nth request', async () => {
  const s = await start([], { PCMAIL_GAS_FAULT: 'throw', PCMAIL_GAS_FAULT_EVERY: '2' });
  try {
    const codes = [];
    for (let i = 0; i < 4; i++) {
      const r = await fetch(s.base + '/exec', { method: 'POST', body: JSON.stringify({ v: 1, op: 'hello', pc: 'pc-a', token: 'T' }), redirect: 'manual' });
      codes.push(r.status);
      await r.text();
    }
    assert.deepStrictEqual(codes, [302, 200, 302, 200]);
  } finally {
    await stop(s);
  }
});

test('dev server: a job over HTTP, across a restart, and a probe answered in its submit', async () => {
  const db = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'pcmail-gas-')), 'state.json');
  let s = await start(['--db-file', db]);
  const jobId = 'job-1767225600000-0000000a';
  try {
    await rpc(s.base, 'roster.set', 'pc-a', { label: 'pc-a', hostname: 'A' });
    await rpc(s.base, 'roster.set', 'pc-b', { label: 'pc-b', hostname: 'B' });
    const wl = { hash: 'h1', commands: [{ name: 'test', timeLimitMs: 60000, args: [{ name: 'n', type: 'int', required: true }] }], allowedSubmitters: ['pc-a'] };
    assert.strictEqual((await rpc(s.base, 'poll', 'pc-b', { job: { whitelist: wl, take: true } })).job.whitelistHash, 'h1');
    const sub = await rpc(s.base, 'job.submit', 'pc-a', { jobId, target: 'pc-b', command: 'test', args: { n: '3' }, submitter: { pc: 'pc-a', session: 's1' } });
    assert.deepStrictEqual([sub.ok, sub.job.state, sub.job.args.n], [true, 'queued', 3]);
    const probe = await rpc(s.base, 'job.submit', 'pc-a', { jobId: 'job-1767225600000-0000000b', target: '@server', command: '_debug_jobs', submitter: { pc: 'pc-a', session: 's1' } });
    assert.deepStrictEqual([probe.job.state, probe.job.result.data.jobs.map((j) => j.id)], ['ok', ['job-1767225600000-0000000b', jobId]]);
  } finally { await stop(s); }
  s = await start(['--db-file', db]);
  try {
    const p = await rpc(s.base, 'poll', 'pc-b', { job: { take: true } });
    assert.deepStrictEqual(p.job.offered.map((j) => j.id), [jobId], 'the queued job survived the restart');
    assert.strictEqual((await rpc(s.base, 'job.start', 'pc-b', { jobId, runner: 'pc-b/1', startedAt: 1 })).job.state, 'running');
    await rpc(s.base, 'poll', 'pc-b', { job: { reports: [{ jobId, runner: 'pc-b/1', state: 'ok', result: { ran: true, exit: 0, output: 'fine' } }] } });
    const told = await rpc(s.base, 'poll', 'pc-a', { job: {} });
    assert.deepStrictEqual(told.job.finished.map((j) => [j.id, j.state, j.result.output]), [[jobId, 'ok', 'fine']]);
  } finally { await stop(s); }
});
