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

module.exports = { makeServer, seedMails, mailId, N0, TOKEN, post };
