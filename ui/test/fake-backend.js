// A stand-in for the Tauri backend, injected into the page before app.js runs.
// It implements the command API of docs/tray.md over an in-memory store and
// records every call in window.__calls, so tests assert on what the UI shows
// and on what it asked for.
// Used as: page.addInitScript(installFakeBackend, seed)
function installFakeBackend(seed) {
  const FINAL = ['done', 'failed', 'expired'];
  const db = {
    pc: seed.pc || 'pc-b',
    mails: (seed.mails || []).map((m) => Object.assign({ state: 'delivered', timeline: [], kind: 'note', urgent: false, inReplyTo: null, subject: '', body: '' }, m)),
    sent: seed.sent || [],
    alerts: seed.alerts || [],
    paused: false,
    connection: seed.connection || { state: 'online', lastPollAt: Date.now() - 12000, lastError: null, poller: 'app' },
    lang: seed.lang || 'en',
    leases: seed.leases || [],
    lost: seed.lost || [],
    cacheAt: seed.cacheAt || Date.now() - 20000,
    // Sessions and Jobs come from the server: `online: false` answers as the
    // controller does offline (the last answer, not live, as of its time).
    server: Object.assign({ online: true, error: 'connection refused (127.0.0.1:7878)', lastAt: null }, seed.server || {}),
    sessions: seed.sessions || [],
    idleNames: seed.idleNames || [],
    jobs: seed.jobs || [],
    settings: seed.settings || { server: { mode: 'serve', url: 'http://127.0.0.1:7878/api' }, pcLabel: 'pc-b', pollIntervalSec: 120, autostart: true, hasToken: true },
  };
  const calls = [];
  window.__calls = calls;
  window.__db = db;
  const listeners = {};
  const byId = (id) => db.mails.find((m) => m.id === id);
  const summary = (m) => ({
    id: m.id, from: m.from, to: m.to, kind: m.kind, subject: m.subject, preview: (m.body || '').slice(0, 160),
    urgent: m.urgent, createdAt: m.createdAt, deliveredAt: m.deliveredAt, state: m.state, inReplyTo: m.inReplyTo, timeline: m.timeline,
  });
  const counts = () => {
    const open = db.mails.filter((m) => m.state === 'delivered' || m.state === 'new');
    return {
      unread: open.length,
      urgent: open.filter((m) => m.urgent).length,
      decisions: db.mails.filter((m) => !FINAL.includes(m.state) && m.kind === 'decision').length,
      requests: db.mails.filter((m) => !FINAL.includes(m.state) && m.kind === 'request').length,
      alerts: db.alerts.length,
    };
  };
  const err = (code, message) => { const e = { code, message }; return Promise.reject(e); };
  // A live view's answer: now, or offline the last one marked not live.
  const live = (rows) => {
    const now = Date.now();
    if (db.server.online) { db.server.lastAt = now; return Object.assign(rows(), { live: true, asOf: now, errorCode: null, error: null, now }); }
    const old = db.server.lastAt ? rows() : { sessions: [], idleNames: [], jobs: [] };
    return Object.assign(old, { live: false, asOf: db.server.lastAt, errorCode: 'unreachable', error: db.server.error, now });
  };
  const handlers = {
    get_state: () => {
      const c = counts();
      const badge = db.connection.state !== 'online' ? 'offline' : (c.decisions || c.urgent) ? 'attention' : c.unread ? 'unread' : 'none';
      const mine = db.leases.filter((l) => l.mine);
      const leases = { mine: mine.length, stale: mine.filter((l) => l.stale).length, lost: db.lost.length };
      const note = leases.lost ? 'lease lost' : leases.stale ? 'lease stale' : '';
      const title = [c.unread ? String(c.unread) : '', note].filter(Boolean).join(' · ');
      return { pc: db.pc, connection: db.connection, paused: db.paused, counts: c, badge, title, now: Date.now(), lang: db.lang, leases };
    },
    list_inbox: ({ scope }) => {
      const list = db.mails.filter((m) => scope === 'all' || !FINAL.includes(m.state)).map(summary);
      return { mails: list, total: db.mails.length };
    },
    open_mail: ({ id }) => {
      const m = byId(id);
      if (!m) return err('not_found', 'no such mail');
      if (m.state === 'delivered' || m.state === 'new') {
        m.state = 'seen';
        m.timeline = m.timeline.concat([{ state: 'seen', at: Date.now(), by: db.pc + '/ui', note: null }]);
        m.pending = true;
      }
      return Object.assign({}, m);
    },
    ack: ({ id }) => {
      const m = byId(id);
      if (!m) return err('not_found', 'no such mail');
      if (!FINAL.includes(m.state)) {
        m.state = 'done';
        m.timeline = m.timeline.concat([{ state: 'done', at: Date.now(), by: db.pc + '/ui', note: 'ack' }]);
      }
      return Object.assign({}, m);
    },
    reply: ({ id, body }) => {
      const m = byId(id);
      if (!m) return err('not_found', 'no such mail');
      if (m.inReplyTo) return err('reply_to_reply', 'refusing to reply to a reply (exit 3 in the CLI)');
      const replyId = m.id.replace(/-[0-9a-f]{8}$/, '-feedf00d');
      m.state = 'done';
      m.timeline = m.timeline.concat([{ state: 'done', at: Date.now(), by: db.pc, note: 'reply:' + replyId }]);
      db.sent.push({ id: replyId, to: m.from, kind: 'note', subject: 'Re: ' + m.subject, body, urgent: false, inReplyTo: m.id, createdAt: Date.now(), state: 'new', timeline: [{ state: 'new', at: Date.now(), by: db.pc, note: null }] });
      return { replyId, original: Object.assign({}, m) };
    },
    list_sent: () => ({ mails: db.sent.map((m) => Object.assign({ preview: (m.body || '').slice(0, 160) }, m, { body: undefined })) }),
    get_sent: ({ id }) => db.sent.find((m) => m.id === id) || err('not_found', 'no such mail'),
    list_alerts: () => ({ alerts: db.alerts }),
    list_leases: () => ({ leases: db.leases.map((l) => Object.assign({}, l)), lost: db.lost, cacheAt: db.cacheAt, now: Date.now() }),
    release_lease: ({ resource }) => {
      const l = db.leases.find((x) => x.resource === resource && x.mine);
      if (!l) return err('not_found', 'this PC holds no lease of ' + resource);
      db.leases = db.leases.filter((x) => x !== l);
      return { released: true, queued: false };
    },
    list_sessions: () => live(() => ({ sessions: db.sessions.map((x) => Object.assign({}, x)), idleNames: db.idleNames })),
    list_jobs: () => live(() => ({ jobs: db.jobs.map((x) => Object.assign({}, x)) })),
    cancel_job: ({ id }) => {
      const j = db.jobs.find((x) => x.id === id);
      if (!j) return err('not_found', 'no job ' + id + ' is known on this PC');
      if (!db.server.online) return err('unreachable', db.server.error);
      if (!j.submittedHere) return err('forbidden', 'job ' + id + ' was submitted by ' + j.submitter + ', not this PC');
      if (j.state !== 'queued' && j.state !== 'running') return err('ended', 'job ' + id + ' already ended ' + j.state);
      if (j.state === 'queued') { j.state = 'cancelled'; j.endedAt = Date.now(); j.reason = 'cancelled from the tray'; } else j.cancelRequested = true;
      j.canCancel = false;
      return Object.assign({}, j);
    },
    poll_now: () => ({ started: true }),
    set_paused: ({ paused }) => { db.paused = !!paused; return { paused: db.paused }; },
    get_settings: () => db.settings,
    save_settings: ({ settings, token }) => { db.settings = Object.assign({}, settings, { hasToken: db.settings.hasToken || !!token }); return db.settings; },
  };
  window.__emit = (event, payload) => (listeners[event] || []).forEach((h) => h({ event, payload }));
  window.__TAURI__ = {
    core: {
      invoke: (cmd, args) => {
        calls.push({ cmd, args: JSON.parse(JSON.stringify(args || {})) });
        const h = handlers[cmd];
        if (!h) return err('unknown_command', cmd);
        try { return Promise.resolve(h(args || {})); } catch (e) { return Promise.reject(e); }
      },
    },
    event: {
      listen: (event, h) => { (listeners[event] = listeners[event] || []).push(h); return Promise.resolve(() => {}); },
    },
  };
}
module.exports = { installFakeBackend };
