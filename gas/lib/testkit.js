'use strict';
// Shared helpers for tests and the bench: a gas server on fakes, and direct seeding.
const { createFakes } = require('./fakes');
const { loadGas, post } = require('./loader');

const N0 = 1767225600000;
const TOKEN = 't0k';

function makeServer(opts) {
  opts = opts || {};
  let now = opts.now || N0;
  const fakes = createFakes({ properties: Object.assign({ PCMAIL_TOKEN: TOKEN }, opts.properties || {}),
    gridStrict: opts.gridStrict, standalone: opts.standalone, now: () => now });
  const ctx = loadGas(fakes);
  ctx.__setNow(() => now);
  ctx.resetExec_();
  const labels = opts.labels || ['pc-a', 'pc-b', 'pc-c'];
  if (!opts.standalone) labels.forEach((l, i) => ctx.rosterSet_(l, 'HOST-' + l.toUpperCase(), i + 1));
  const call = (op, pc, args) => post(ctx, JSON.stringify(args === undefined ? { v: 1, op, pc, token: TOKEN } : { v: 1, op, pc, token: TOKEN, args })).json;
  return { fakes, ctx, call, setNow: (n) => { now = n; }, getNow: () => now, advance: (ms) => { now += ms; } };
}

let seq = 0;
function mailId(ms) {
  seq = (seq + 1) % 0xffffffff;
  return 'mail-' + ms + '-' + seq.toString(16).padStart(8, '0');
}

// Writes mails straight into the tabs in the server's own row layout (fast history).
// spec: {to, from, state, createdAt, archive:boolean}
function seedMails(srv, specs) {
  const { ctx, fakes } = srv;
  ctx.tab_('Mail'); ctx.tab_('Archive'); ctx.tab_('Events');
  const live = [], arch = [];
  specs.forEach((s) => {
    const m = { id: s.id || mailId(s.createdAt), from: s.from, to: s.to, kind: 'note', subject: 'history', body: 'old mail body',
      urgent: false, expiresAt: s.expiresAt === undefined ? null : s.expiresAt, inReplyTo: null, auto: false, hop: 0, createdAt: s.createdAt,
      broadcastOf: null, state: 'new', updatedAt: s.createdAt, timeline: [{ state: 'new', at: s.createdAt, by: s.from, note: null }] };
    if (s.state !== 'new') {
      m.timeline.push({ state: 'delivered', at: s.createdAt + 1000, by: s.to, note: null });
      if (s.state !== 'delivered') m.timeline.push({ state: s.state, at: s.createdAt + 2000, by: s.to, note: s.state === 'done' ? 'ack' : null });
      m.state = s.state;
    }
    (s.archive ? arch : live).push(ctx.mailToRow_(m));
  });
  const ms = fakes.sheet('Mail'), as = fakes.sheet('Archive');
  ms.seedRows(ms.getLastRow() + 1, live);
  as.seedRows(as.getLastRow() + 1, arch);
}

// Writes `n` jobs that ended ok and were told to their submitter (pc-a) straight into the
// Jobs tab in the server's row layout (the next sweep archives them): fast job history.
function seedFinishedJobs(srv, n, target) {
  const { ctx, fakes } = srv;
  ctx.tab_('Jobs');
  const rows = [];
  for (let i = 0; i < n; i++) {
    const at = N0 - 86400000 + i;
    const j = { id: 'job-' + at + '-' + i.toString(16).padStart(8, '0'), target: target || 'pc-b', command: 'test', args: { checkout: 'app', crate: 'c' + i },
      subject: 'app', submitter: { pc: 'pc-a', session: 's-pc-a', name: null }, force: false, rerunOf: null, state: 'ok', submittedAt: at,
      startedAt: at, runner: 'pc-b/1', heartbeatAt: at, endedAt: at + 1, runStartedAt: at, timeLimitMs: 600000, cancelRequested: false, joined: 0,
      result: { ran: true, exit: 0, durationMs: 1, output: 'ok', truncated: false, artifacts: [], reused: [], readBack: null, verify: null, chunks: null, data: null },
      reason: null, timeline: [{ at: at, state: 'queued', by: 'pc-a/s', reason: null }],
      _: { dedupKey: 'k' + i, subs: ['pc-a'], tell: [], chunked: false, readOnly: false, run: 1, awaiting: false } };
    rows.push(ctx.jobToRow_(j));
  }
  const sh = fakes.sheet('Jobs');
  sh.seedRows(sh.getLastRow() + 1, rows);
}

module.exports = { makeServer, seedMails, seedFinishedJobs, mailId, N0, TOKEN, post };
