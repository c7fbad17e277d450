// Sessions and names (docs/protocol.md "Sessions and names"), as the Rust
// server keeps them (crates/server/src/ops/sessions.rs), on five small tabs read whole:
// - Sessions: each PC's last report of its live sessions (a poll replaces the PC's rows);
// - Names: who holds each name (names and labels are one namespace);
// - NameEvents: every move of a name;
// - NameMail: the PC a mail to a name was delivered to;
// - NameWithdraw: mail a PC must drop because its name moved away (told once).
// Mail to a name keeps `to` = the name; its `q` cell holds the name while it is new, or
// delivered and re-queued after a move (MailStore.js mutRow_), so mineLive_ finds it.

const SESS = {
  SESSIONS_MAX: 200, SESSION_MAX: 100, REPO_MAX: 500, BRANCH_MAX: 250, CWD_MAX: 1000, LEASES_MAX: 100,
  REPORT_FRESH_MS: 3 * 60000
};

// ---- validation: crates/core/src/sessions.rs, check for check ------------------------

function checkName_(field, name) {
  if (!isValidLabel_(name)) {
    throw badField_(field, field + ' ' + JSON.stringify(name) + ' is not a valid name (names are spelled as PC labels: lower-case a-z 0-9 . _ -, max 40)');
  }
}

function sessText_(o, k, field) {
  if (!has_(o, k)) return null;
  const s = o[k];
  if (typeof s !== 'string') throw badField_(field, '"' + field + '" must be a string');
  return s;
}

function sessCheckOptional_(field, s, max) {
  if (s !== null && (charCount_(s) > max || /[\u0000-\u001F\u007F-\u009F]/.test(s))) {
    throw badField_(field, field + ' must be at most ' + max + ' characters with no control characters');
  }
}

// sessions.rs check_live_session: the one check of a reported session (the PC runs it too).
function checkLiveSession_(l, at) {
  checkSessionId_(at + '.session', l.session);
  sessCheckOptional_(at + '.repo', l.repo, SESS.REPO_MAX);
  sessCheckOptional_(at + '.branch', l.branch, SESS.BRANCH_MAX);
  sessCheckOptional_(at + '.cwd', l.cwd, SESS.CWD_MAX);
  if (l.leases.length > SESS.LEASES_MAX) {
    throw badField_(at + '.leases', 'leases must be an array of at most ' + SESS.LEASES_MAX + ' resources');
  }
  l.leases.forEach(function (r) {
    try { checkResource_(r); } catch (e) { throw badField_(at + '.leases', 'leases must be lease resource names'); }
  });
}

function parseOneSession_(v, at) {
  if (!isObj_(v)) throw badField_(at, 'each of ' + at + ' must be an object');
  if (!has_(v, 'session')) throw badField_(at + '.session', 'missing "' + at + '.session"');
  if (typeof v.session !== 'string') throw badField_(at + '.session', '"' + at + '.session" must be a string');
  const repo = sessText_(v, 'repo', at + '.repo');
  const branch = sessText_(v, 'branch', at + '.branch');
  const cwd = sessText_(v, 'cwd', at + '.cwd');
  let idleMs = 0;
  if (has_(v, 'idleMs')) {
    if (typeof v.idleMs !== 'number' || !Number.isSafeInteger(v.idleMs) || v.idleMs < 0) {
      throw badField_(at + '.idleMs', 'idleMs must be an integer >= 0');
    }
    idleMs = v.idleMs;
  }
  let leases = [];
  if (has_(v, 'leases')) {
    if (!Array.isArray(v.leases) || v.leases.length > SESS.LEASES_MAX) {
      throw badField_(at + '.leases', 'leases must be an array of at most ' + SESS.LEASES_MAX + ' resources');
    }
    leases = v.leases.map(function (r) {
      if (typeof r !== 'string') throw badField_(at + '.leases', 'leases must be lease resource names');
      return r;
    });
  }
  const l = { session: v.session, repo: repo, branch: branch, cwd: cwd, idleMs: idleMs, leases: leases };
  checkLiveSession_(l, at);
  return l;
}

// sessions.rs parse_live: the list's shape fails the request; each session is refused on
// its own ({bad: {...}}, answered in `sessions.errors`), a repeated id too (the first counts).
function parseLive_(v, field) {
  if (!Array.isArray(v)) throw badField_(field, '"' + field + '" must be an array');
  if (v.length > SESS.SESSIONS_MAX) throw badField_(field, 'at most ' + SESS.SESSIONS_MAX + ' sessions in "' + field + '"');
  const out = [];
  v.forEach(function (x, index) {
    try {
      const s = parseOneSession_(x, field);
      if (goodSessions_(out).some(function (o) { return o.session === s.session; })) {
        throw badField_(field, 'session ' + JSON.stringify(s.session) + ' is listed twice');
      }
      out.push(s);
    } catch (err) {
      if (!err || !err.pcmail) throw err;
      out.push({ bad: { list: 'live', index: index, code: err.pcmail.code,
        field: err.pcmail.extra ? err.pcmail.extra.field : null, message: err.pcmail.message } });
    }
  });
  return out;
}

function goodSessions_(items) {
  return items.filter(function (s) { return !s.bad; });
}

// The poll's `sessions` argument.
function parsePollSessions_(v) {
  if (!isObj_(v)) throw badField_('sessions', '"sessions" must be an object');
  return has_(v, 'live') ? parseLive_(v.live, 'sessions.live') : [];
}

function parseNameTake_(a) {
  if (!has_(a, 'name')) throw badField_('name', 'missing "name"');
  if (typeof a.name !== 'string') throw badField_('name', '"name" must be a string');
  checkName_('name', a.name);
  if (!has_(a, 'session')) throw badField_('session', 'missing "session"');
  if (typeof a.session !== 'string') throw badField_('session', '"session" must be a string');
  checkSessionId_('session', a.session);
  const live = has_(a, 'live') ? parseLive_(a.live, 'live') : null;
  return { name: a.name, session: a.session, live: live };
}

// ---- storage ----------------------------------------------------------------------------

function readTabRows_(name) {
  const sh = tab_(name);
  return readText_(sh, 2, 1, sh.getLastRow() - 1, TABS[name].length).filter(function (r) { return r[0] !== ''; });
}

// Rewrites a whole tab: `rows`, then blanks over what was below.
function writeTabRows_(name, rows, before) {
  const sh = tab_(name);
  const out = rows.slice();
  while (out.length < before) out.push(TABS[name].map(function () { return ''; }));
  if (out.length) writeText_(sh, 2, 1, out);
}

// One request's view of the session tabs: read once, written back once.
function sessStore_(now) {
  const sessions = readTabRows_('Sessions').map(function (r) {
    return { pc: r[0], session: r[1], repo: r[2] === '' ? null : r[2], branch: r[3] === '' ? null : r[3],
      cwd: r[4] === '' ? null : r[4], idleMs: Number(r[5]), leases: JSON.parse(r[6] || '[]'), reportedAt: Number(r[7]) };
  });
  const names = readTabRows_('Names').map(function (r) {
    return { name: r[0], pc: r[1], session: r[2], since: Number(r[3]) };
  });
  return { now: now, sessions: sessions, sessionRows: sessions.length, sessionsDirty: false,
    names: names, nameRows: names.length, namesDirty: false };
}

function sessCommit_(st) {
  const s = function (v) { return v === null ? '' : String(v); };
  if (st.sessionsDirty) {
    writeTabRows_('Sessions', st.sessions.map(function (x) {
      return [x.pc, x.session, s(x.repo), s(x.branch), s(x.cwd), String(x.idleMs), JSON.stringify(x.leases), String(x.reportedAt)];
    }), st.sessionRows);
  }
  if (st.namesDirty) {
    writeTabRows_('Names', st.names.map(function (n) { return [n.name, n.pc, n.session, String(n.since)]; }), st.nameRows);
  }
}

// Replaces the caller's report with the sessions of `live` that parsed.
function sessReport_(st, pc, live) {
  st.sessions = st.sessions.filter(function (x) { return x.pc !== pc; }).concat(goodSessions_(live).map(function (l) {
    return { pc: pc, session: l.session, repo: l.repo, branch: l.branch, cwd: l.cwd, idleMs: l.idleMs,
      leases: l.leases.slice(), reportedAt: st.now };
  }));
  st.sessionsDirty = true;
}

function sessHolder_(st, name) {
  return st.names.filter(function (n) { return n.name === name; })[0] || null;
}

// ops/sessions.rs is_live: in its PC's report, and that report fresh (the caller's always counts).
function sessIsLive_(st, pc, session, caller) {
  return st.sessions.some(function (x) {
    return x.pc === pc && x.session === session && (x.pc === caller || x.reportedAt >= st.now - SESS.REPORT_FRESH_MS);
  });
}

function holderView_(n) {
  return { name: n.name, pc: n.pc, session: n.session, since: n.since };
}

// The names the caller's live sessions hold: the ones its mail comes addressed to.
function liveNamesOf_(st, pc) {
  return st.names.filter(function (n) { return n.pc === pc && sessIsLive_(st, n.pc, n.session, pc); })
    .map(function (n) { return n.name; });
}

// ops/sessions.rs receives: the caller's label, a name it holds, or a name mail delivered to it.
function sessReceives_(st, m, pc, delivered) {
  if (m.to === pc) return true;
  const h = sessHolder_(st, m.to);
  if (!h) return false;
  if (h.pc === pc) return true;
  return delivered[m.id] === pc;
}

// NameMail: id → the PC it was delivered to.
function nameMailRead_() {
  const out = {};
  readTabRows_('NameMail').forEach(function (r) { out[r[0]] = r[1]; });
  return out;
}

function nameMailWrite_(map, before) {
  writeTabRows_('NameMail', Object.keys(map).sort().map(function (id) { return [id, map[id]]; }), before);
}

// The poll's `sessions` answer: the names this PC holds and the mail it withdraws (once).
// `live`: the poll's parsed report, whose refused sessions are answered in `errors`.
function sessPollAnswer_(st, pc, live) {
  const names = st.names.filter(function (n) { return n.pc === pc; })
    .sort(function (a, b) { return a.name < b.name ? -1 : a.name > b.name ? 1 : 0; }).map(holderView_);
  const rows = readTabRows_('NameWithdraw');
  const mine = rows.filter(function (r) { return r[0] === pc; }).map(function (r) { return r[1]; }).sort();
  if (mine.length) writeTabRows_('NameWithdraw', rows.filter(function (r) { return r[0] !== pc; }), rows.length);
  const errors = live.filter(function (s) { return s.bad; }).map(function (s) { return s.bad; });
  return { names: names, withdrawn: mine, errors: errors };
}

// Up to 5 names that look like `query` (the labels' scoring, names standing in as PCs).
function nameCandidates_(st, query) {
  return candidates_(st.names.map(function (n) { return { label: n.name, hostname: n.name }; }), query);
}

// Why mail to a name waits, for `status`.
function sessWaiting_(st, m, caller) {
  if (m.state !== 'new') return null;
  const h = sessHolder_(st, m.to);
  if (!h || sessIsLive_(st, h.pc, h.session, caller)) return null;
  return 'waiting: no live session holds ' + h.name + ' (last held by ' + h.pc + '/' + h.session +
    '); it goes out when a session takes the name or that one comes back';
}

// crates/core/src/sessions.rs withdrawn_note / redelivered_note: the notes of the
// `delivered` entries a move of a name adds to its unseen mail's timeline.
function withdrawnNote_(name, toPc) {
  return 'withdrawn: the name ' + name + ' moved to ' + toPc;
}

function redeliveredNote_(name) {
  return 'delivered again: the name ' + name + ' moved here';
}

// crates/core/src/sessions.rs recipient_text: how alert text names a recipient; `at` is
// null for a label, or {pc, session, live} for a name.
function recipientText_(to, at) {
  if (!at) return to;
  return at.live ? 'the name ' + to + ' (held by ' + at.pc + '/' + at.session + ')'
    : 'the name ' + to + ' (no live session holds it; last held by ' + at.pc + '/' + at.session + ')';
}

// Where each name is, for the sweep's alert text: name → {pc, session, live}.
function nameWhereabouts_(now) {
  const st = sessStore_(now);
  const out = {};
  st.names.forEach(function (n) { out[n.name] = { pc: n.pc, session: n.session, live: sessIsLive_(st, n.pc, n.session, null) }; });
  return out;
}

// ---- ops --------------------------------------------------------------------------------

function opNameTake_(req, now) {
  const a = req.args;
  const pcs = readRosterOrFail_();
  rosterMember_(pcs, req.pc);
  const st = sessStore_(now);
  if (a.live) sessReport_(st, req.pc, a.live);
  if (pcs.some(function (p) { return p.label === a.name; })) {
    throw pcErr_('conflict', JSON.stringify(a.name) + ' is a PC label; names and labels share one namespace: pick another name');
  }
  const prev = sessHolder_(st, a.name);
  if (prev && prev.pc === req.pc && prev.session === a.session) {
    sessCommit_(st);
    return { name: a.name, holder: holderView_(prev), previous: null, changed: false, requeued: 0 };
  }
  if (prev && sessIsLive_(st, prev.pc, prev.session, req.pc)) {
    throw pcErr_('conflict', a.name + ' is held by ' + prev.pc + '/' + prev.session + ' (a live session, since ' +
      prev.since + '); it moves only when that session has ended');
  }
  const mine = { name: a.name, pc: req.pc, session: a.session, since: now };
  const previous = prev ? holderView_(prev) : null;
  st.names = st.names.filter(function (n) { return n.name !== a.name; }).concat([mine]);
  st.namesDirty = true;
  let requeued = 0;
  if (prev && prev.pc !== req.pc) {
    // Delivered there, not yet seen: back on the server for this PC, out of that PC's store.
    const delivered = nameMailRead_();
    const ids = Object.keys(delivered).filter(function (id) { return delivered[id] === prev.pc; });
    const locs = ids.length ? locate_(ids).filter(function (l) {
      return l.where === 'Mail' && l.mail.to === a.name && l.mail.state === 'delivered';
    }) : [];
    if (locs.length) {
      const before = Object.keys(delivered).length;
      // The old PC's received feed (and the timeline) say it left: still `delivered`,
      // withdrawn from that PC by the server (ops/sessions.rs take).
      const note = withdrawnNote_(a.name, req.pc);
      const events = locs.map(function (l) {
        l.mail.requeued = true;
        delete delivered[l.mail.id];
        l.mail.timeline.push({ state: 'delivered', at: Math.max(now, lastAt_(l.mail)), by: 'server', note: note });
        l.mail.updatedAt = now;
        const ev = eventOf_(l.mail);
        ev.pc = prev.pc;
        return ev;
      });
      appendEvents_(events);
      saveMut_(locs);
      nameMailWrite_(delivered, before);
      appendText_(tab_('NameWithdraw'), locs.map(function (l) { return [prev.pc, l.mail.id]; }));
      requeued = locs.length;
    }
  }
  const ev = tab_('NameEvents');
  appendText_(ev, [[String(Math.max(ev.getLastRow(), 1)), a.name, String(now), req.pc, a.session,
    prev ? prev.pc : '', prev ? prev.session : '', String(requeued)]]);
  sessCommit_(st);
  return { name: a.name, holder: holderView_(mine), previous: previous, changed: true, requeued: requeued };
}

function opWho_(req, now) {
  const pcs = readRosterOrFail_();
  rosterMember_(pcs, req.pc);
  const st = sessStore_(now);
  const cmp = function (a, b) { return a < b ? -1 : a > b ? 1 : 0; };
  const sessions = st.sessions
    .filter(function (x) { return x.reportedAt >= now - SESS.REPORT_FRESH_MS || x.pc === req.pc; })
    .sort(function (x, y) { return cmp(x.pc, y.pc) || cmp(x.session, y.session); })
    .map(function (x) {
      const held = st.names.filter(function (n) { return n.pc === x.pc && n.session === x.session; }).map(function (n) { return n.name; });
      return { pc: x.pc, session: x.session, repo: x.repo, branch: x.branch, cwd: x.cwd,
        idleMs: x.idleMs + Math.max(now - x.reportedAt, 0), leases: x.leases, name: held.length ? held.join(' ') : null };
    });
  const idleNames = st.names
    .filter(function (n) { return !sessions.some(function (s) { return s.pc === n.pc && s.session === n.session; }); })
    .sort(function (a, b) { return cmp(a.name, b.name); }).map(holderView_);
  return { sessions: sessions, idleNames: idleNames };
}
