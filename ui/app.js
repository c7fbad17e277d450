// pcmail tray window. Plain JS, no build step.
//
// Rules kept everywhere in this file:
// - every backend call goes through invoke(cmd, args) (docs/tray.md lists the commands);
// - mail is untrusted: text is only ever set with textContent, never as HTML;
// - long lists render only the rows that are visible (fixed row height).
'use strict';

(function () {
  const HOUR = 3600 * 1000;
  // The unread thresholds the servers alert on, from the table pcmail-core
  // generates (op-table.js, loaded before this file).
  const LIMITS = (window.PCMAIL_OP_TABLE && window.PCMAIL_OP_TABLE.limits) || {};
  const UNSEEN_URGENT_MS = LIMITS.UNSEEN_URGENT_MS;
  const UNSEEN_MS = LIMITS.UNSEEN_MS;
  if (!UNSEEN_URGENT_MS || !UNSEEN_MS) console.error('op-table.js did not load: no unread SLA badges');
  const ROW_H = 64;                  // px, must match .row height in style.css
  const OVERSCAN = 6;

  // ---- the one backend door -------------------------------------------------

  function tauri() { return window.__TAURI__ || null; }

  /** Calls a backend command. Rejects with {code, message}. */
  async function invoke(cmd, args) {
    const t = tauri();
    if (!t || !t.core || typeof t.core.invoke !== 'function') {
      throw { code: 'no_backend', message: 'not running inside the pcmail app' };
    }
    try {
      return await t.core.invoke(cmd, args || {});
    } catch (e) {
      if (e && typeof e === 'object' && e.code) throw e;
      throw { code: 'error', message: String(e && e.message ? e.message : e) };
    }
  }

  function listen(event, handler) {
    const t = tauri();
    if (t && t.event && typeof t.event.listen === 'function') {
      return t.event.listen(event, (ev) => handler(ev ? ev.payload : undefined));
    }
    return Promise.resolve(() => {});
  }

  // ---- small DOM helpers (textContent only) -----------------------------------

  const $ = (sel, root) => (root || document).querySelector(sel);

  function el(tag, cls, text) {
    const n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined && text !== null) n.textContent = String(text);
    return n;
  }

  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }

  // ---- pure presentation logic (exported for tests as window.pcmailUi) -------

  const FINAL = new Set(['done', 'failed', 'expired']);
  const UNREAD = new Set(['new', 'delivered']);

  function kindOf(m) {
    const s = m.subject || '';
    if (m.kind === 'decision' || s.includes('[判断依頼]')) return 'decision';
    if (m.kind === 'request' || s.includes('[作業依頼]')) return 'request';
    return 'note';
  }

  /** Queue group: open decision requests 0, open work requests/urgent 1, other open 2, finished 3. */
  function group(m) {
    if (FINAL.has(m.state)) return 3;
    const k = kindOf(m);
    if (k === 'decision') return 0;
    if (k === 'request' || m.urgent) return 1;
    return 2;
  }

  /** Decision requests first, then work requests/urgent, then the rest; unread before seen; newest first. */
  function sortQueue(mails) {
    return mails.slice().sort((a, b) =>
      (group(a) - group(b)) ||
      ((UNREAD.has(a.state) ? 0 : 1) - (UNREAD.has(b.state) ? 0 : 1)) ||
      ((b.createdAt || 0) - (a.createdAt || 0)) ||
      (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  /**
   * Unread SLA: age since delivery against 2 h (urgent) or 6 h. Only unread
   * mail has one. level: ok (< 50 %), warn (50–100 %), over (> 100 %).
   */
  function sla(m, now) {
    const limit = m.urgent ? UNSEEN_URGENT_MS : UNSEEN_MS;
    if (!UNREAD.has(m.state) || !limit) return null;
    const since = m.deliveredAt || m.createdAt || now;
    const age = Math.max(0, now - since);
    const ratio = age / limit;
    const level = ratio < 0.5 ? 'ok' : ratio <= 1 ? 'warn' : 'over';
    return { age, limit, ratio, level };
  }

  function fmtAge(ms) {
    const s = Math.floor(ms / 1000);
    if (s < 60) return s + ' s';
    const m = Math.floor(s / 60);
    if (m < 60) return m + ' min';
    const h = Math.floor(m / 60);
    if (h < 48) return h + ' h ' + (m % 60 ? (m % 60) + ' min' : '');
    return Math.floor(h / 24) + ' d';
  }

  function pad(n) { return n < 10 ? '0' + n : '' + n; }
  function fmtTime(ms) {
    if (!ms) return '—';
    const d = new Date(ms);
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' +
      pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
  }

  function timelineSorted(tl) {
    return (tl || []).map((e, i) => [e, i]).sort((a, b) => (a[0].at - b[0].at) || (a[1] - b[1])).map((x) => x[0]);
  }

  // ---- app state ---------------------------------------------------------------

  const S = {
    view: 'inbox',
    scope: 'open',
    status: null,
    inbox: [],          // sorted summaries
    inboxTotal: 0,
    sent: [],
    alerts: [],
    selected: { inbox: null, sent: null },
    current: { inbox: null, sent: null }, // full mail shown in the detail pane
    paused: false,
    settings: null,
  };

  // ---- virtual list ----------------------------------------------------------

  class VList {
    constructor(root, renderRow, onPick) {
      this.root = root;
      this.inner = $('.vlist-inner', root);
      this.empty = $('.empty', root);
      this.items = [];
      this.renderRow = renderRow;
      this.onPick = onPick;
      this.selectedId = null;
      this.pending = false;
      root.addEventListener('scroll', () => this.schedule(), { passive: true });
      window.addEventListener('resize', () => this.schedule());
      root.addEventListener('click', (ev) => {
        const row = ev.target.closest('.row');
        if (row && row.dataset.id) this.onPick(row.dataset.id);
      });
      root.addEventListener('keydown', (ev) => this.key(ev));
    }
    set(items) {
      this.items = items;
      this.inner.style.height = (items.length * ROW_H) + 'px';
      this.empty.hidden = items.length > 0;
      this.render();
    }
    select(id) { this.selectedId = id; this.render(); }
    schedule() {
      if (this.pending) return;
      this.pending = true;
      requestAnimationFrame(() => { this.pending = false; this.render(); });
    }
    render() {
      const h = this.root.clientHeight || 600;
      const top = this.root.scrollTop;
      const first = Math.max(0, Math.floor(top / ROW_H) - OVERSCAN);
      const last = Math.min(this.items.length, Math.ceil((top + h) / ROW_H) + OVERSCAN);
      const frag = document.createDocumentFragment();
      for (let i = first; i < last; i++) {
        const m = this.items[i];
        const row = this.renderRow(m);
        row.classList.add('row');
        row.dataset.id = m.id;
        row.setAttribute('role', 'option');
        row.style.top = (i * ROW_H) + 'px';
        if (m.id === this.selectedId) { row.classList.add('selected'); row.setAttribute('aria-selected', 'true'); }
        frag.appendChild(row);
      }
      clear(this.inner);
      this.inner.appendChild(frag);
    }
    key(ev) {
      if (ev.key !== 'ArrowDown' && ev.key !== 'ArrowUp') return;
      ev.preventDefault();
      const i = this.items.findIndex((m) => m.id === this.selectedId);
      const j = Math.max(0, Math.min(this.items.length - 1, i + (ev.key === 'ArrowDown' ? 1 : -1)));
      if (this.items[j]) {
        this.onPick(this.items[j].id);
        const y = j * ROW_H;
        if (y < this.root.scrollTop) this.root.scrollTop = y;
        else if (y + ROW_H > this.root.scrollTop + this.root.clientHeight) this.root.scrollTop = y + ROW_H - this.root.clientHeight;
      }
    }
  }

  // ---- pieces ----------------------------------------------------------------

  function stateChip(state) {
    const c = el('span', 'chip state-' + state, state);
    c.dataset.state = state;
    return c;
  }

  // The kind as a badge in the user's language (the backend reads LANG /
  // LC_MESSAGES: Status.lang), as `pcmail inbox` shows it.
  const KIND_BADGE = {
    en: { decision: 'decision request', request: 'work request' },
    ja: { decision: '判断依頼', request: '作業依頼' },
  };
  function kindBadge(kind, lang) {
    const t = KIND_BADGE[lang] || KIND_BADGE.en;
    return t[kind] || null;
  }
  /** A subject shown beside its badge: the Japanese subject tags come out (the badge says the same). */
  function subjectWithoutTags(subject) {
    const s = subject || '';
    if (!s.includes('[判断依頼]') && !s.includes('[作業依頼]')) return s.trim();
    return s.split('[判断依頼]').join('').split('[作業依頼]').join('').replace(/  +/g, ' ').trim();
  }
  function lang() { return (S.status && S.status.lang) || 'en'; }

  function kindTag(m) {
    const k = kindOf(m);
    const frag = document.createDocumentFragment();
    if (k === 'decision') frag.appendChild(el('span', 'tag tag-decision', kindBadge('decision', lang())));
    if (k === 'request') frag.appendChild(el('span', 'tag tag-request', kindBadge('request', lang())));
    if (m.urgent) frag.appendChild(el('span', 'tag tag-urgent', 'urgent'));
    if (m.inReplyTo) frag.appendChild(el('span', 'tag tag-reply', 'reply'));
    return frag;
  }

  function slaBadge(m, now) {
    const s = sla(m, now);
    if (!s) return null;
    const b = el('span', 'sla sla-' + s.level, fmtAge(s.age).trim());
    b.dataset.level = s.level;
    b.title = 'unread for ' + fmtAge(s.age).trim() + ' of ' + (s.limit / HOUR) + ' h (' + Math.round(s.ratio * 100) + ' %)';
    return b;
  }

  // One list row: who, the kind tag, a right-hand chip, subject/preview/age.
  function row(m, cls, who, chip, now) {
    const r = el('div', cls);
    const line1 = el('div', 'line1');
    line1.appendChild(el('span', 'from', who));
    line1.appendChild(kindTag(m));
    line1.appendChild(el('span', 'grow'));
    line1.appendChild(chip);
    const line2 = el('div', 'line2');
    line2.appendChild(el('span', 'subject', subjectWithoutTags(m.subject) || '(no subject)'));
    line2.appendChild(el('span', 'preview', m.preview || ''));
    line2.appendChild(el('span', 'when muted', fmtAge(Math.max(0, now - (m.createdAt || now))).trim()));
    r.appendChild(line1);
    r.appendChild(line2);
    return r;
  }

  function inboxRow(m) {
    const now = Date.now();
    const cls = 'mail-row' + (UNREAD.has(m.state) ? ' unread' : '') + (FINAL.has(m.state) ? ' finished' : '');
    return row(m, cls, m.from, slaBadge(m, now) || stateChip(m.state), now);
  }

  function sentRow(m) {
    const now = Date.now();
    return row(m, 'mail-row', '→ ' + m.to, stateChip(m.state), now);
  }

  function timeline(m) {
    const ol = el('ol', 'timeline');
    const entries = timelineSorted(m.timeline);
    const seenStates = new Set(entries.map((e) => e.state));
    for (const e of entries) {
      const li = el('li', 'tl tl-' + e.state);
      li.dataset.state = e.state;
      li.appendChild(el('span', 'tl-dot'));
      li.appendChild(el('span', 'tl-state', e.state));
      const t = el('time', 'tl-at', fmtTime(e.at));
      t.dateTime = new Date(e.at).toISOString();
      li.appendChild(t);
      li.appendChild(el('span', 'tl-by', e.by));
      if (e.note) li.appendChild(el('span', 'tl-note', e.note));
      ol.appendChild(li);
    }
    // The steps not reached yet, greyed: the four facts stay apart at a glance.
    const steps = ['new', 'delivered', 'seen', 'done'];
    for (const st of steps) {
      if (FINAL.has(m.state) || seenStates.has(st)) continue;
      if (steps.indexOf(st) <= steps.indexOf(m.state)) continue;
      const li = el('li', 'tl tl-future');
      li.appendChild(el('span', 'tl-dot'));
      li.appendChild(el('span', 'tl-state', st));
      li.appendChild(el('span', 'tl-at muted', 'not yet'));
      ol.appendChild(li);
    }
    return ol;
  }

  function detail(pane, m, box) {
    clear(pane);
    if (!m) {
      pane.appendChild(el('p', 'placeholder', box === 'inbox' ? 'Select a mail to read it. Opening a mail marks it seen.' : 'Select a sent mail.'));
      return;
    }
    const now = Date.now();
    const head = el('header', 'detail-head');
    const tags = el('div', 'tags');
    tags.appendChild(kindTag(m));
    tags.appendChild(stateChip(m.state));
    const b = box === 'inbox' ? slaBadge(m, now) : null;
    if (b) tags.appendChild(b);
    head.appendChild(tags);
    head.appendChild(el('h1', 'subject', subjectWithoutTags(m.subject) || '(no subject)'));
    const meta = el('p', 'meta muted');
    meta.appendChild(el('span', null, (box === 'inbox' ? 'from ' + m.from : 'to ' + m.to)));
    meta.appendChild(el('span', 'sep', '·'));
    meta.appendChild(el('span', null, fmtTime(m.createdAt)));
    meta.appendChild(el('span', 'sep', '·'));
    meta.appendChild(el('span', 'mono', m.id));
    head.appendChild(meta);
    pane.appendChild(head);

    if (box === 'inbox') {
      const actions = el('div', 'actions');
      const ack = el('button', 'btn primary', FINAL.has(m.state) ? 'Acked' : 'Ack');
      ack.type = 'button';
      ack.id = 'ack-btn';
      ack.disabled = FINAL.has(m.state);
      ack.title = 'Mark done without a reply';
      ack.addEventListener('click', () => doAck(m.id));
      const rep = el('button', 'btn', 'Reply…');
      rep.type = 'button';
      rep.id = 'reply-btn';
      if (m.inReplyTo) {
        rep.disabled = true;
        rep.title = 'This mail is itself a reply: replying to a reply is refused (same rule as the CLI)';
      }
      rep.addEventListener('click', () => openReply(m));
      actions.appendChild(ack);
      actions.appendChild(rep);
      if (m.pending) actions.appendChild(el('span', 'muted small', 'mark waits for the next poll'));
      pane.appendChild(actions);
    }

    const body = el('pre', 'body');
    body.textContent = m.body || '';
    pane.appendChild(body);

    pane.appendChild(el('h2', 'section-title', 'Timeline'));
    pane.appendChild(timeline(m));
  }

  // ---- status bar ------------------------------------------------------------

  function renderStatus() {
    const st = S.status;
    if (!st) return;
    $('#pc-label').textContent = st.pc || '';
    const conn = $('#conn');
    const c = st.connection || {};
    conn.dataset.state = c.state || 'unknown';
    let text = c.state || 'unknown';
    if (c.lastPollAt) text += ' · polled ' + fmtAge(Math.max(0, Date.now() - c.lastPollAt)).trim() + ' ago';
    if (c.poller === 'daemon') text += ' · via pcmail daemon';
    $('.conn-text', conn).textContent = text;
    conn.title = c.lastError ? ('last error: ' + c.lastError) : 'connection to the server';

    const counts = $('#counts');
    clear(counts);
    const k = st.counts || {};
    const add = (n, label, cls) => {
      const s = el('span', 'count ' + cls);
      s.appendChild(el('b', null, n));
      s.appendChild(el('span', null, ' ' + label));
      counts.appendChild(s);
    };
    add(k.unread || 0, 'unread', (k.unread ? 'has' : 'none'));
    if (k.decisions) add(k.decisions, 'decision' + (k.decisions > 1 ? 's' : ''), 'attention');
    if (k.urgent) add(k.urgent, 'urgent', 'attention');
    $('#tab-inbox-count').textContent = k.unread ? String(k.unread) : '';
    $('#tab-alerts-count').textContent = k.alerts ? String(k.alerts) : '';
    // A lease of mine gone stale or lost: said on the Leases tab, as the tray's title does.
    const l = st.leases || {};
    const tl = $('#tab-leases-count');
    tl.textContent = l.lost ? 'lost' : l.stale ? 'stale' : (l.mine ? String(l.mine) : '');
    tl.dataset.trouble = (l.lost || l.stale) ? 'true' : 'false';
    S.paused = !!st.paused;
    const pb = $('#pause-btn');
    pb.setAttribute('aria-pressed', S.paused ? 'true' : 'false');
    pb.textContent = S.paused ? 'Resume notifications' : 'Pause notifications';
  }

  // ---- loading ---------------------------------------------------------------

  let inboxList, sentList;

  async function loadStatus() {
    try {
      const before = lang();
      S.status = await invoke('get_state');
      renderStatus();
      // the first status brings the user's language: badges drawn before it are redrawn
      if (lang() !== before) { inboxList.render(); sentList.render(); }
    } catch (e) { toast(e); }
  }

  async function loadInbox() {
    try {
      const r = await invoke('list_inbox', { scope: S.scope });
      S.inbox = sortQueue(r.mails || []);
      S.inboxTotal = r.total != null ? r.total : S.inbox.length;
      $('#inbox-total').textContent = S.inbox.length + (S.scope === 'open' ? ' open' : ' mails');
      inboxList.set(S.inbox);
      // keep the detail pane in step with the list (state changes from elsewhere)
      const cur = S.current.inbox;
      if (cur) {
        const fresh = S.inbox.find((m) => m.id === cur.id);
        if (fresh && fresh.state !== cur.state) {
          S.current.inbox = Object.assign({}, cur, fresh, { body: cur.body, timeline: fresh.timeline || cur.timeline });
          detail($('#inbox-detail'), S.current.inbox, 'inbox');
        }
      }
    } catch (e) { toast(e); }
  }

  async function loadSent() {
    try {
      const r = await invoke('list_sent', {});
      S.sent = (r.mails || []).slice().sort((a, b) => (b.createdAt || 0) - (a.createdAt || 0));
      $('#sent-total').textContent = S.sent.length ? S.sent.length + ' sent' : '';
      sentList.set(S.sent);
      const cur = S.current.sent;
      if (cur) {
        const fresh = S.sent.find((m) => m.id === cur.id);
        if (fresh) { S.current.sent = Object.assign({}, cur, fresh, { body: cur.body }); detail($('#sent-detail'), S.current.sent, 'sent'); }
      }
    } catch (e) { toast(e); }
  }

  async function loadAlerts() {
    try {
      const r = await invoke('list_alerts', {});
      S.alerts = r.alerts || [];
      const ul = $('#alerts-list');
      clear(ul);
      for (const a of S.alerts) {
        const li = el('li', 'alert alert-' + a.kind);
        const top = el('div', 'line1');
        top.appendChild(el('span', 'tag tag-alert', a.kind.replace('_', ' ')));
        top.appendChild(el('span', 'from', a.pc));
        top.appendChild(el('span', 'grow'));
        top.appendChild(el('span', 'muted small', 'since ' + fmtTime(a.openedAt) + (a.count > 1 ? ' · ×' + a.count : '')));
        li.appendChild(top);
        li.appendChild(el('div', 'alert-msg', a.message));
        li.appendChild(el('div', 'mono muted small', a.subject));
        ul.appendChild(li);
      }
      $('#alerts-empty').hidden = S.alerts.length > 0;
    } catch (e) { toast(e); }
  }

  async function loadLeases() {
    try {
      const r = await invoke('list_leases', {});
      const now = r.now || Date.now();
      $('#leases-cache').textContent = r.cacheAt ? 'as of ' + fmtAge(Math.max(0, now - r.cacheAt)).trim() + ' ago' : 'not fetched yet';
      const lost = $('#leases-lost');
      clear(lost);
      for (const x of r.lost || []) {
        const li = el('li', 'lease lease-lost');
        li.dataset.resource = x.resource;
        const top = el('div', 'line1');
        top.appendChild(el('span', 'tag tag-lost', 'lost'));
        top.appendChild(el('span', 'lease-res mono', x.resource));
        top.appendChild(el('span', 'grow'));
        top.appendChild(el('span', 'muted small', fmtTime(x.at)));
        li.appendChild(top);
        li.appendChild(el('div', 'lease-desc', x.line));
        lost.appendChild(li);
      }
      const ul = $('#leases-list');
      clear(ul);
      for (const x of r.leases || []) {
        const li = el('li', 'lease' + (x.mine ? ' mine' : '') + (x.stale ? ' stale' : ''));
        li.dataset.resource = x.resource;
        li.dataset.state = x.state;
        const top = el('div', 'line1');
        top.appendChild(el('span', 'lease-res mono', x.resource));
        top.appendChild(el('span', 'tag tag-mode', x.mode));
        if (x.stale) top.appendChild(el('span', 'tag tag-stale', 'stale'));
        if (x.state === 'unconfirmed' || x.state === 'releasing') top.appendChild(el('span', 'tag tag-' + x.state, x.state));
        top.appendChild(el('span', 'from', (x.mine ? 'mine · ' : '') + x.holder));
        top.appendChild(el('span', 'grow'));
        const hb = el('span', 'lease-hb muted small', x.heartbeatAgeMs == null ? 'no heartbeat yet' : 'heartbeat ' + fmtAge(x.heartbeatAgeMs).trim() + ' ago');
        if (x.heartbeatAt) hb.title = fmtTime(x.heartbeatAt);
        top.appendChild(hb);
        if (x.mine && x.state !== 'releasing') {
          const b = el('button', 'btn small release-btn', 'Release');
          b.type = 'button';
          b.title = 'pcmail lease release ' + x.resource;
          b.addEventListener('click', () => doRelease(x.resource, b));
          top.appendChild(b);
        }
        li.appendChild(top);
        li.appendChild(el('div', 'lease-desc', x.description || ''));
        const meta = el('div', 'lease-meta muted small');
        meta.appendChild(el('span', 'mono', x.repo || ''));
        if (x.files && x.files.length) {
          meta.appendChild(el('span', 'sep', '·'));
          meta.appendChild(el('span', 'mono lease-files', x.files.join(' ')));
        }
        if (x.grantedAt) {
          meta.appendChild(el('span', 'sep', '·'));
          meta.appendChild(el('span', null, 'since ' + fmtTime(x.grantedAt)));
        }
        li.appendChild(meta);
        ul.appendChild(li);
      }
      $('#leases-empty').hidden = (r.leases || []).length + (r.lost || []).length > 0;
    } catch (e) { toast(e); }
  }

  async function doRelease(resource, btn) {
    if (btn) btn.disabled = true;
    try {
      const r = await invoke('release_lease', { resource });
      toast(r && r.queued ? 'Release queued: it goes with the next poll.' : 'Released ' + resource + '.');
      await loadLeases();
      loadStatus();
    } catch (e) { toast(e); if (btn) btn.disabled = false; }
  }

  // ---- Sessions and Jobs: asked from the server each time ----------------------

  /** "offline — …" for a live view that has only an older answer (or none). */
  function freshness(r, asofSel, noteSel, listSel) {
    const now = r.now || Date.now();
    $(asofSel).textContent = r.live ? 'live' : (r.asOf ? 'as of ' + fmtAge(Math.max(0, now - r.asOf)).trim() + ' ago' : '');
    const note = $(noteSel);
    if (r.live) { note.hidden = true; note.textContent = ''; }
    else {
      const why = r.errorCode === 'unreachable' ? 'Offline: the server did not answer' : 'The server did not answer';
      const then = r.asOf ? '. Shown as it was at ' + fmtTime(r.asOf) + ', not live.' : '. Nothing to show yet.';
      note.textContent = why + (r.error ? ' (' + r.error + ')' : '') + then;
      note.hidden = false;
    }
    $(listSel).classList.toggle('not-live', !r.live);
  }

  async function loadSessions() {
    try {
      const r = await invoke('list_sessions', {});
      freshness(r, '#sessions-asof', '#sessions-offline', '#sessions-list');
      const ul = $('#sessions-list');
      clear(ul);
      for (const x of r.sessions || []) {
        const li = el('li', 'lease session' + (x.mine ? ' mine' : ''));
        li.dataset.session = x.session;
        li.dataset.pc = x.pc;
        const top = el('div', 'line1');
        top.appendChild(el('span', 'sess-name', x.name || x.session.slice(0, 8)));
        top.appendChild(el('span', 'from', (x.mine ? 'mine · ' : '') + x.pc));
        if (x.branch) top.appendChild(el('span', 'tag tag-mode', x.branch));
        const idle = el('span', 'sess-idle muted small', 'idle ' + fmtAge(Math.max(0, x.idleMs || 0)).trim());
        top.appendChild(idle);
        li.appendChild(top);
        const meta = el('div', 'lease-meta muted small');
        meta.appendChild(el('span', 'mono', x.repo || x.cwd || ''));
        meta.appendChild(el('span', 'sep', '·'));
        meta.appendChild(el('span', 'mono', x.session));
        if (x.leases && x.leases.length) {
          meta.appendChild(el('span', 'sep', '·'));
          meta.appendChild(el('span', 'sess-leases', 'leases: ' + x.leases.join(', ')));
        }
        li.appendChild(meta);
        ul.appendChild(li);
      }
      const n = (r.sessions || []).length;
      $('#sessions-empty').hidden = n > 0 || !r.live;
      const idle = $('#sessions-idle-names');
      const names = (r.idleNames || []).map((x) => x.name + ' (last on ' + x.pc + ')');
      idle.textContent = names.length ? 'Names without a live session: ' + names.join(', ') : '';
      idle.hidden = names.length === 0;
      $('#tab-sessions-count').textContent = r.live && n ? String(n) : (r.live ? '' : 'offline');
    } catch (e) { toast(e); }
  }

  const expandedJobs = new Set();

  function jobDetail(x) {
    const d = el('div', 'job-detail');
    const facts = el('div', 'lease-meta muted small');
    const add = (t, cls) => { if (facts.childNodes.length) facts.appendChild(el('span', 'sep', '·')); facts.appendChild(el('span', cls || null, t)); };
    add(x.exit == null ? 'no exit code' : 'exit ' + x.exit, 'job-exit');
    add('submitted ' + fmtTime(x.submittedAt) + ' by ' + x.submitter);
    if (x.startedAt) add('started ' + fmtTime(x.startedAt));
    if (x.endedAt) add('ended ' + fmtTime(x.endedAt));
    if (x.joined) add(x.joined + ' joined');
    d.appendChild(facts);
    if (x.reason) d.appendChild(el('div', 'lease-desc job-reason', 'reason: ' + x.reason));
    if (x.artifacts && x.artifacts.length) d.appendChild(el('div', 'mono small job-artifacts', 'artifacts: ' + x.artifacts.join(' ')));
    if (x.reused && x.reused.length) d.appendChild(el('div', 'mono small job-reused', 'reused: ' + x.reused.join(' ')));
    const out = el('pre', 'job-output', x.outputTail || '(no output)');
    d.appendChild(out);
    if (x.outputTruncated) d.appendChild(el('div', 'muted small', 'the output’s last ' + (x.outputTail || '').length + ' characters'));
    return d;
  }

  async function loadJobs() {
    try {
      const r = await invoke('list_jobs', {});
      freshness(r, '#jobs-asof', '#jobs-offline', '#jobs-list');
      const now = r.now || Date.now();
      const ul = $('#jobs-list');
      clear(ul);
      for (const x of r.jobs || []) {
        const li = el('li', 'lease job' + (x.submittedHere ? ' mine' : '') + (expandedJobs.has(x.id) ? ' expanded' : ''));
        li.dataset.id = x.id;
        li.dataset.state = x.state;
        const top = el('div', 'line1');
        top.appendChild(stateChip(x.state));
        top.appendChild(el('span', 'job-cmd mono', [x.command].concat(x.args || []).join(' ')));
        top.appendChild(el('span', 'from', (x.runsHere ? 'runs here' : '→ ' + x.target)));
        if (x.cancelRequested) top.appendChild(el('span', 'tag tag-stale', 'cancel requested'));
        const dur = x.durationMs == null ? (x.state === 'queued' ? 'queued ' + fmtAge(Math.max(0, now - x.submittedAt)).trim() : '') : fmtAge(x.durationMs).trim();
        top.appendChild(el('span', 'job-dur muted small', dur));
        if (x.canCancel && r.live) {
          const b = el('button', 'btn small cancel-btn', 'Cancel');
          b.type = 'button';
          b.title = 'pcmail job cancel ' + x.id;
          b.addEventListener('click', (ev) => { ev.stopPropagation(); doCancel(x.id, b); });
          top.appendChild(b);
        }
        li.appendChild(top);
        const meta = el('div', 'lease-meta muted small');
        meta.appendChild(el('span', 'mono', x.id));
        meta.appendChild(el('span', 'sep', '·'));
        meta.appendChild(el('span', 'job-runner', x.runner ? 'runner ' + x.runner : 'no runner yet'));
        if (!x.runsHere) { meta.appendChild(el('span', 'sep', '·')); meta.appendChild(el('span', null, 'target ' + x.target)); }
        if (!x.submittedHere) { meta.appendChild(el('span', 'sep', '·')); meta.appendChild(el('span', null, 'from ' + x.submitter)); }
        li.appendChild(meta);
        if (expandedJobs.has(x.id)) li.appendChild(jobDetail(x));
        li.addEventListener('click', () => {
          if (expandedJobs.has(x.id)) expandedJobs.delete(x.id); else expandedJobs.add(x.id);
          const open = expandedJobs.has(x.id);
          li.classList.toggle('expanded', open);
          const old = $('.job-detail', li);
          if (old) li.removeChild(old);
          if (open) li.appendChild(jobDetail(x));
        });
        ul.appendChild(li);
      }
      $('#jobs-empty').hidden = (r.jobs || []).length > 0 || !r.live;
      const active = (r.jobs || []).filter((x) => x.state === 'queued' || x.state === 'running').length;
      $('#tab-jobs-count').textContent = r.live ? (active ? String(active) : '') : 'offline';
    } catch (e) { toast(e); }
  }

  async function doCancel(id, btn) {
    if (btn) btn.disabled = true;
    try {
      const j = await invoke('cancel_job', { id });
      toast(j && j.state === 'cancelled' ? 'Cancelled ' + id + '.' : 'Cancel sent: its executor stops it at its next poll.');
      await loadJobs();
    } catch (e) { toast(e); if (btn) btn.disabled = false; }
  }

  async function loadSettings() {
    try {
      const s = await invoke('get_settings', {});
      S.settings = s;
      const f = $('#settings-form');
      for (const r of f.querySelectorAll('input[name=mode]')) r.checked = r.value === (s.server && s.server.mode);
      f.url.value = (s.server && s.server.url) || '';
      f.pcLabel.value = s.pcLabel || '';
      f.pollIntervalSec.value = s.pollIntervalSec || 120;
      f.autostart.checked = !!s.autostart;
      f.token.value = '';
      f.token.placeholder = s.hasToken ? 'kept in the keyring (leave empty to keep)' : 'none set';
      syncUrlField();
    } catch (e) { toast(e); }
  }

  function syncUrlField() {
    const f = $('#settings-form');
    const mode = (f.querySelector('input[name=mode]:checked') || {}).value;
    f.url.disabled = mode === 'embedded' || !mode;
    f.token.disabled = mode === 'embedded' || !mode;
  }

  let refreshTimer = null;
  let dirty = false;
  function refreshSoon() {
    // A hidden window (the app lives in the tray) does no work: it catches up when shown.
    if (document.visibilityState === 'hidden') { dirty = true; return; }
    if (refreshTimer) return;
    refreshTimer = setTimeout(async () => {
      refreshTimer = null;
      await loadStatus();
      if (S.view === 'inbox') await loadInbox();
      else if (S.view === 'sent') await loadSent();
      else if (S.view === 'alerts') await loadAlerts();
      else if (S.view === 'leases') await loadLeases();
      else if (S.view === 'sessions') await loadSessions();
      else if (S.view === 'jobs') await loadJobs();
    }, 30);
  }

  // ---- actions ---------------------------------------------------------------

  function replaceInList(m) {
    const i = S.inbox.findIndex((x) => x.id === m.id);
    if (i >= 0) {
      S.inbox[i] = Object.assign({}, S.inbox[i], { state: m.state, timeline: m.timeline, pending: m.pending });
      inboxList.set(S.inbox);
    }
  }

  async function openMail(id) {
    S.selected.inbox = id;
    inboxList.select(id);
    try {
      const m = await invoke('open_mail', { id });
      if (S.selected.inbox !== id) return;
      S.current.inbox = m;
      replaceInList(m);
      detail($('#inbox-detail'), m, 'inbox');
      loadStatus();
    } catch (e) { toast(e); }
  }

  async function openSent(id) {
    S.selected.sent = id;
    sentList.select(id);
    try {
      const m = await invoke('get_sent', { id });
      if (S.selected.sent !== id) return;
      S.current.sent = m;
      detail($('#sent-detail'), m, 'sent');
    } catch (e) { toast(e); }
  }

  async function doAck(id) {
    try {
      const m = await invoke('ack', { id });
      if (S.current.inbox && S.current.inbox.id === id) {
        S.current.inbox = Object.assign({}, S.current.inbox, m);
        detail($('#inbox-detail'), S.current.inbox, 'inbox');
      }
      replaceInList(m);
      loadStatus();
      toast('Acked.');
    } catch (e) { toast(e); }
  }

  let replyFor = null;
  function openReply(m) {
    replyFor = m;
    const d = $('#reply-dialog');
    $('.reply-to', d).textContent = 'to ' + m.from + ' · re: ' + (m.subject || '(no subject)');
    $('.reply-quote', d).textContent = (m.body || '').slice(0, 400);
    $('#reply-form').body.value = '';
    const err = $('.reply-error', d);
    err.hidden = true;
    err.textContent = '';
    if (typeof d.showModal === 'function') d.showModal(); else d.setAttribute('open', '');
    $('#reply-form').body.focus();
  }

  async function sendReply(ev) {
    ev.preventDefault();
    const d = $('#reply-dialog');
    const body = $('#reply-form').body.value;
    if (!replyFor || !body.trim()) return;
    const btn = $('#reply-send');
    btn.disabled = true;
    try {
      const r = await invoke('reply', { id: replyFor.id, body });
      d.close();
      if (r && r.original) {
        if (S.current.inbox && S.current.inbox.id === r.original.id) {
          S.current.inbox = Object.assign({}, S.current.inbox, r.original);
          detail($('#inbox-detail'), S.current.inbox, 'inbox');
        }
        replaceInList(r.original);
      }
      toast('Reply sent (' + (r && r.replyId ? r.replyId : 'queued') + ').');
      loadStatus();
    } catch (e) {
      const err = $('.reply-error', d);
      err.textContent = (e && e.message) || String(e);
      err.hidden = false;
    } finally {
      btn.disabled = false;
    }
  }

  let toastTimer = null;
  function toast(msg) {
    const t = $('#toast');
    const text = typeof msg === 'string' ? msg : ((msg && msg.message) || String(msg));
    t.textContent = text;
    t.dataset.kind = typeof msg === 'string' ? 'info' : 'error';
    t.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { t.hidden = true; }, 3500);
  }

  function show(view) {
    S.view = view;
    for (const t of document.querySelectorAll('.tab')) t.setAttribute('aria-selected', t.dataset.view === view ? 'true' : 'false');
    for (const v of document.querySelectorAll('.view')) v.hidden = v.dataset.view !== view;
    if (view === 'inbox') loadInbox();
    if (view === 'sent') loadSent();
    if (view === 'alerts') loadAlerts();
    if (view === 'leases') loadLeases();
    if (view === 'sessions') loadSessions();
    if (view === 'jobs') loadJobs();
    if (view === 'settings') loadSettings();
  }

  // ---- wiring ----------------------------------------------------------------

  function init() {
    inboxList = new VList($('#inbox-list'), inboxRow, openMail);
    sentList = new VList($('#sent-list'), sentRow, openSent);
    for (const t of document.querySelectorAll('.tab')) t.addEventListener('click', () => show(t.dataset.view));
    for (const b of document.querySelectorAll('.seg-btn')) {
      b.addEventListener('click', () => {
        S.scope = b.dataset.scope;
        for (const x of document.querySelectorAll('.seg-btn')) x.setAttribute('aria-pressed', x === b ? 'true' : 'false');
        loadInbox();
      });
    }
    $('#poll-btn').addEventListener('click', async () => {
      const b = $('#poll-btn');
      b.disabled = true;
      try { await invoke('poll_now', {}); } catch (e) { toast(e); } finally { b.disabled = false; refreshSoon(); }
    });
    $('#pause-btn').addEventListener('click', async () => {
      try { const r = await invoke('set_paused', { paused: !S.paused }); S.paused = !!(r && r.paused); await loadStatus(); } catch (e) { toast(e); }
    });
    $('#reply-form').addEventListener('submit', sendReply);
    $('#reply-cancel').addEventListener('click', () => $('#reply-dialog').close());
    const f = $('#settings-form');
    for (const r of f.querySelectorAll('input[name=mode]')) r.addEventListener('change', syncUrlField);
    f.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const mode = (f.querySelector('input[name=mode]:checked') || {}).value || 'embedded';
      const args = {
        settings: {
          server: { mode, url: mode === 'embedded' ? null : (f.url.value.trim() || null) },
          pcLabel: f.pcLabel.value.trim(),
          pollIntervalSec: Number(f.pollIntervalSec.value) || 120,
          autostart: f.autostart.checked,
        },
      };
      if (f.token.value) args.token = f.token.value;
      try {
        await invoke('save_settings', args);
        f.token.value = '';
        $('#settings-msg').textContent = 'Saved.';
        loadSettings();
        loadStatus();
      } catch (e) { $('#settings-msg').textContent = (e && e.message) || String(e); }
    });

    listen('changed', () => refreshSoon());
    document.addEventListener('visibilitychange', () => {
      if (document.visibilityState === 'visible' && dirty) { dirty = false; refreshSoon(); }
    });
    listen('open-mail', (p) => { if (p && p.id) { show('inbox'); openMail(p.id); } });
    // Ages and SLA colours move with the clock: re-render once a minute while visible.
    setInterval(() => {
      if (document.visibilityState !== 'visible') return;
      renderStatus();
      if (S.view === 'inbox') inboxList.render();
      if (S.view === 'leases') loadLeases();
    }, 60 * 1000);

    loadStatus();
    loadInbox();
    // opened from a notification or the tray's Open with one mail waiting
    const m = /^#open=([A-Za-z0-9._~-]+)$/.exec(location.hash || '');
    if (m) { history.replaceState(null, '', location.pathname); openMail(m[1]); }
  }

  window.pcmailUi = { invoke, sortQueue, sla, group, kindOf, kindBadge, subjectWithoutTags, fmtAge, timelineSorted, openMail, show, refresh: refreshSoon };
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
})();
