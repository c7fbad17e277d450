// Leases (docs/protocol.md "Leases"), as the Rust server keeps them
// (crates/server/src/ops/lease.rs), on three tabs:
// - Leases: one row per grant, live ones and those that ended in the last 24 h (the
//   sweep drops older ones); the timeline is a JSON cell, as Mail's;
// - LeaseCounters: `version` and `fence:<resource>` (the last fence handed out, so a
//   fence is never reused whatever the sweep drops);
// - LeaseLost: reports a PC's next poll owes it (a lease taken over or expired).
// Every op runs inside the request's script lock (Code.js withLock_), reads each tab
// once, changes rows in memory and writes each tab back with one setValues.

const LEASE = {
  HEARTBEAT_MS: 30000, STALE_AFTER_MS: 180000, STALE_ALERT_MS: 3600000, ENDED_WINDOW_MS: 24 * 3600000,
  TTL_MIN_MS: 1000, TTL_MAX_MS: 7 * 24 * 3600000, FILES_MAX: 200, GLOB_MAX: 400, RESOURCE_MAX: 100,
  DESCRIPTION_MAX: 1000, REPO_MAX: 500, CLAIM_ID_MAX: 100, SESSION_MAX: 100, POLL_ITEMS_MAX: 500,
  ACTOR_MAX: 100, REASON_MAX: 2000
};
const LEASE_EVIDENCE = ['process_gone', 'session_ended', 'force'];

// ---- validation: crates/core rules.rs and lease.rs, check for check ----------------

function lreqStr_(o, k, field) {
  if (!has_(o, k)) throw badField_(field, 'missing "' + k + '"');
  if (typeof o[k] !== 'string') throw badField_(field, '"' + k + '" must be a string');
  return o[k];
}
function loptStr_(o, k, field) {
  if (!has_(o, k)) return null;
  if (typeof o[k] !== 'string') throw badField_(field, '"' + k + '" must be a string');
  return o[k];
}
function loptInt_(o, k, field) {
  if (!has_(o, k)) return null;
  if (typeof o[k] !== 'number' || !Number.isSafeInteger(o[k])) throw badField_(field, '"' + k + '" must be an integer');
  return o[k];
}
function lreqInt_(o, k, field) {
  const n = loptInt_(o, k, field);
  if (n === null) throw badField_(field, 'missing "' + k + '"');
  return n;
}
function lobj_(v, field) {
  if (!isObj_(v)) throw badField_(field, '"' + field + '" must be an object');
  return v;
}

// rules::check_resource
function checkResource_(s) {
  if (!(typeof s === 'string' && s.length <= LEASE.RESOURCE_MAX && /^[a-z0-9][a-z0-9._\/:-]*$/.test(s))) {
    throw badField_('resource', 'resource ' + JSON.stringify(s) + ' is not valid: 1-100 characters of lower-case a-z 0-9 . _ - / :, starting with a letter or digit');
  }
}
// rules::check_file_glob
function checkFileGlob_(g) {
  const bad = function (why) { return badField_('files', 'file glob ' + JSON.stringify(g) + ' ' + why); };
  if (g === '' || charCount_(g) > LEASE.GLOB_MAX) throw bad('must be 1-400 characters');
  if (/[\u0000-\u001F\u007F-\u009F\u2028\u2029]/.test(g)) throw bad('contains control characters');
  if (g.indexOf('\\') >= 0) throw bad('must use / as the separator');
  if (g[0] === '/' || /^[A-Za-z]:/.test(g)) throw bad('must be relative to the repo root');
  if (g.split('/').indexOf('..') >= 0) throw bad('must not contain a .. segment');
}
function checkLeaseFiles_(files) {
  if (files.length > LEASE.FILES_MAX) throw badField_('files', 'at most ' + LEASE.FILES_MAX + ' globs in "files"');
  files.forEach(checkFileGlob_);
}
function checkSingleLine_(field, s, max, notBlank) {
  if (notBlank && isBlank_(s)) throw badField_(field, field + ' must not be blank');
  checkText_(field, s, max, false);
}
function checkFence_(field, n) {
  if (!(n >= 1)) throw badField_(field, 'fence must be a positive integer');
}

// lease::parse_claim + check_claim
function parseLeaseClaim_(a) {
  let files = [];
  if (has_(a, 'files')) {
    if (!Array.isArray(a.files)) throw badField_('files', '"files" must be an array of strings');
    if (a.files.length > LEASE.FILES_MAX) throw badField_('files', 'at most ' + LEASE.FILES_MAX + ' globs in "files"');
    a.files.forEach(function (x) { if (typeof x !== 'string') throw badField_('files', '"files" must be an array of strings'); });
    files = a.files.slice();
  }
  let mode = 'exclusive';
  const m = loptStr_(a, 'mode', 'mode');
  if (m !== null) {
    if (m !== 'exclusive' && m !== 'shared') throw badField_('mode', 'mode must be exclusive or shared');
    mode = m;
  }
  const h = lobj_(a.holder, 'holder');
  const holder = { pc: lreqStr_(h, 'pc', 'holder.pc'), session: lreqStr_(h, 'session', 'holder.session'),
    name: loptStr_(h, 'name', 'holder.name') };
  let takeover = null;
  if (has_(a, 'takeover')) {
    const t = lobj_(a.takeover, 'takeover');
    const ev = lreqStr_(t, 'evidence', 'takeover.evidence');
    if (LEASE_EVIDENCE.indexOf(ev) < 0) throw badField_('takeover.evidence', 'takeover.evidence must be process_gone, session_ended or force');
    takeover = { evidence: ev, reason: lreqStr_(t, 'reason', 'takeover.reason'), detail: loptStr_(t, 'detail', 'takeover.detail') };
  }
  const c = {
    claimId: lreqStr_(a, 'claimId', 'claimId'), resource: lreqStr_(a, 'resource', 'resource'),
    repo: loptStr_(a, 'repo', 'repo') || '', description: loptStr_(a, 'description', 'description') || '',
    files: files, mode: mode, holder: holder, ttlMs: loptInt_(a, 'ttlMs', 'ttlMs'), takeover: takeover
  };
  if (c.claimId === '' || charCount_(c.claimId) > LEASE.CLAIM_ID_MAX || /[\u0000-\u001F\u007F-\u009F]/.test(c.claimId)) {
    throw badField_('claimId', 'claimId must be 1-100 characters with no control characters');
  }
  checkResource_(c.resource);
  checkText_('repo', c.repo, LEASE.REPO_MAX, false);
  checkText_('description', c.description, LEASE.DESCRIPTION_MAX, false);
  checkLeaseFiles_(c.files);
  if (!isValidLabel_(holder.pc)) throw badField_('holder.pc', 'holder.pc must be a roster label');
  checkSessionId_('holder.session', holder.session);
  if (holder.name !== null) checkSingleLine_('holder.name', holder.name, LEASE.SESSION_MAX, true);
  if (c.ttlMs !== null && (c.ttlMs < LEASE.TTL_MIN_MS || c.ttlMs > LEASE.TTL_MAX_MS)) throw badField_('ttlMs', 'ttlMs must be 1 second to 7 days');
  if (takeover) {
    checkText_('takeover.reason', takeover.reason, LEASE.REASON_MAX, true);
    if (takeover.detail !== null) checkText_('takeover.detail', takeover.detail, LEASE.REASON_MAX, true);
    if (takeover.evidence === 'force' && isBlank_(takeover.reason)) {
      throw badField_('takeover.reason', 'a forced takeover needs a reason that is not blank');
    }
  }
  return c;
}

// lease::parse_release + check_release
function parseLeaseRelease_(a) {
  const r = { resource: lreqStr_(a, 'resource', 'resource'), fence: lreqInt_(a, 'fence', 'fence'),
    by: lreqStr_(a, 'by', 'by'), reason: loptStr_(a, 'reason', 'reason') };
  checkResource_(r.resource);
  checkFence_('fence', r.fence);
  checkSingleLine_('by', r.by, LEASE.ACTOR_MAX, true);
  if (r.reason !== null) checkText_('reason', r.reason, LEASE.REASON_MAX, true);
  return r;
}

function parseLeaseList_(a) {
  const resource = loptStr_(a, 'resource', 'resource');
  if (resource !== null) checkResource_(resource);
  const repo = loptStr_(a, 'repo', 'repo');
  if (repo !== null) checkText_('repo', repo, LEASE.REPO_MAX, false);
  return { resource: resource, repo: repo, all: optBool_(a, 'all') === true, timeline: optBool_(a, 'timeline') === true };
}

function parseLeaseCheck_(a) {
  const resource = lreqStr_(a, 'resource', 'resource');
  checkResource_(resource);
  const fence = lreqInt_(a, 'fence', 'fence');
  checkFence_('fence', fence);
  return { resource: resource, fence: fence };
}

// lease::parse_poll_lease: the lists are the request's shape; each item is parsed alone
// and a bad one becomes {bad: its error entry}.
function parsePollLease_(v) {
  const m = lobj_(v, 'lease');
  const list = function (k) {
    const field = 'lease.' + k;
    if (!has_(m, k)) return [];
    if (!Array.isArray(m[k])) throw badField_(field, '"' + field + '" must be an array');
    if (m[k].length > LEASE.POLL_ITEMS_MAX) throw badField_(field, 'at most ' + LEASE.POLL_ITEMS_MAX + ' items in "' + field + '"');
    return m[k];
  };
  const known = loptInt_(m, 'known', 'lease.known') || 0;
  if (known < 0) throw badField_('lease.known', 'lease.known must be >= 0');
  const item = function (name, parse) {
    return function (x, index) {
      try {
        if (!isObj_(x)) throw badField_('lease', 'each item must be an object');
        return parse(x);
      } catch (err) {
        if (!err || !err.pcmail) throw err;
        return { bad: { list: name, index: index,
          resource: isObj_(x) && typeof x.resource === 'string' ? x.resource : null,
          fence: isObj_(x) && Number.isSafeInteger(x.fence) ? x.fence : null,
          code: err.pcmail.code, field: err.pcmail.extra ? err.pcmail.extra.field : null, message: err.pcmail.message } };
      }
    };
  };
  const renew = list('renew').map(item('renew', function (x) {
    const r = { resource: lreqStr_(x, 'resource', 'resource'), fence: lreqInt_(x, 'fence', 'fence') };
    checkResource_(r.resource);
    checkFence_('fence', r.fence);
    return r;
  }));
  const release = list('release').map(item('release', parseLeaseRelease_));
  return { renew: renew, release: release, known: known };
}

// ---- storage -------------------------------------------------------------------------

const LCOL = {}; // column index (0-based) by name
function lcol_(name) {
  if (!Object.keys(LCOL).length) TABS.Leases.forEach(function (c, i) { LCOL[c] = i; });
  return LCOL[name];
}

function rowToLease_(r) {
  const c = function (k) { return r[lcol_(k)]; };
  const num = function (k) { return c(k) === '' ? null : Number(c(k)); };
  return {
    resource: c('resource'), fence: Number(c('fence')), repo: c('repo'), description: c('description'),
    files: JSON.parse(c('files') || '[]'), mode: c('mode'),
    holder: { pc: c('holderPc'), session: c('holderSession'), name: c('holderName') === '' ? null : c('holderName') },
    claimId: c('claimId'), grantedAt: num('grantedAt'), heartbeatAt: num('heartbeatAt'),
    ttlExpiresAt: num('ttlExpiresAt'), state: c('state'), endedAt: num('endedAt'),
    timeline: JSON.parse(c('timeline') || '[]')
  };
}

function leaseToRow_(l) {
  const s = function (n) { return n === null ? '' : String(n); };
  const v = {
    resource: l.resource, fence: String(l.fence), state: l.state, mode: l.mode, holderPc: l.holder.pc,
    holderSession: l.holder.session, holderName: l.holder.name === null ? '' : l.holder.name,
    claimId: l.claimId, grantedAt: s(l.grantedAt), heartbeatAt: s(l.heartbeatAt), ttlExpiresAt: s(l.ttlExpiresAt),
    endedAt: s(l.endedAt), repo: l.repo, description: l.description, files: JSON.stringify(l.files),
    timeline: JSON.stringify(l.timeline)
  };
  return TABS.Leases.map(function (k) { return v[k]; });
}

function isLive_(l) {
  return l.state === 'held' || l.state === 'stale';
}

function leaseView_(l, withTimeline) {
  const out = {
    resource: l.resource, repo: l.repo, description: l.description, files: l.files.slice(), mode: l.mode,
    holder: { pc: l.holder.pc, session: l.holder.session, name: l.holder.name }, fence: l.fence,
    claimId: l.claimId, grantedAt: l.grantedAt, heartbeatAt: l.heartbeatAt, ttlExpiresAt: l.ttlExpiresAt,
    state: l.state, stale: l.state === 'stale'
  };
  if (withTimeline) {
    out.timeline = l.timeline.map(function (e) {
      return { at: e.at, event: e.event, by: e.by, fence: e.fence, reason: e.reason, evidence: e.evidence, detail: e.detail };
    });
  }
  return out;
}

function byResourceFence_(x, y) {
  return x.resource < y.resource ? -1 : x.resource > y.resource ? 1 : x.fence - y.fence;
}

// One request's view of the lease tabs: read once, changed in memory, written once.
function leaseStore_(now) {
  const sh = tab_('Leases');
  const nc = TABS.Leases.length;
  const leases = readText_(sh, 2, 1, sh.getLastRow() - 1, nc).filter(function (r) { return r[0] !== ''; }).map(rowToLease_);
  const csh = tab_('LeaseCounters');
  const counters = {};
  readText_(csh, 2, 1, csh.getLastRow() - 1, 2).forEach(function (r) { if (r[0]) counters[r[0]] = Number(r[1]); });
  const st = {
    now: now, leases: leases, counters: counters, dirtyFrom: Infinity, countersDirty: false, lost: [],
    touch: function (l) { st.dirtyFrom = Math.min(st.dirtyFrom, st.leases.indexOf(l)); },
    bump: function () { st.counters.version = (st.counters.version || 0) + 1; st.countersDirty = true; },
    nextFence: function (resource) {
      const k = 'fence:' + resource;
      st.counters[k] = (st.counters[k] || 0) + 1;
      st.countersDirty = true;
      return st.counters[k];
    },
    version: function () { return st.counters.version || 0; }
  };
  return st;
}

// Writes what changed: the Leases rows from the first changed one down (one setValues),
// the counters (one), the queued lost reports (one append).
function leaseCommit_(st) {
  if (st.dirtyFrom < st.leases.length) {
    writeText_(tab_('Leases'), 2 + st.dirtyFrom, 1, st.leases.slice(st.dirtyFrom).map(leaseToRow_));
  }
  if (st.countersDirty) {
    const keys = Object.keys(st.counters).sort();
    writeText_(tab_('LeaseCounters'), 2, 1, keys.map(function (k) { return [k, String(st.counters[k])]; }));
  }
  if (st.lost.length) appendText_(tab_('LeaseLost'), st.lost);
}

function leaseAdd_(st, l) {
  st.leases.push(l);
  st.touch(l);
}

function tlEntry_(at, event, by, fence, extra) {
  const e = { at: at, event: event, by: by, fence: fence, reason: null, evidence: null, detail: null };
  if (extra) Object.keys(extra).forEach(function (k) { e[k] = extra[k]; });
  return e;
}

function queueLost_(st, l, lost) {
  st.lost.push([l.holder.pc, lost.resource, String(lost.fence), lost.takenBy ? JSON.stringify(lost.takenBy) : '',
    String(lost.at), lost.reason === null ? '' : lost.reason, lost.event]);
}

// lease.rs refresh: stale after 6·H (at the moment it became so), TTL leases expired.
function leaseRefresh_(st) {
  const now = st.now;
  const out = { stale: 0, expired: 0 };
  const going = st.leases.filter(function (l) {
    return l.state === 'held' && l.ttlExpiresAt === null && l.heartbeatAt <= now - LEASE.STALE_AFTER_MS;
  }).sort(function (x, y) { return x.heartbeatAt - y.heartbeatAt; });
  going.forEach(function (l) {
    l.state = 'stale';
    l.timeline.push(tlEntry_(l.heartbeatAt + LEASE.STALE_AFTER_MS, 'stale', 'server', l.fence));
    st.touch(l);
    st.bump();
    out.stale++;
  });
  const ending = st.leases.filter(function (l) {
    return isLive_(l) && l.ttlExpiresAt !== null && l.ttlExpiresAt <= now;
  }).sort(function (x, y) { return x.ttlExpiresAt - y.ttlExpiresAt; });
  ending.forEach(function (l) {
    const reason = 'its ttl ran out';
    l.state = 'expired';
    l.endedAt = l.ttlExpiresAt;
    l.timeline.push(tlEntry_(l.ttlExpiresAt, 'expired', 'server', l.fence, { reason: reason }));
    st.touch(l);
    st.bump();
    queueLost_(st, l, { resource: l.resource, fence: l.fence, takenBy: null, at: l.ttlExpiresAt, reason: reason, event: 'expired' });
    out.expired++;
  });
  return out;
}

// rules::actor: `pc/session`, the session cut to [A-Za-z0-9._-]{,8}.
function leaseActor_(h) {
  const label = h.pc.replace(/[^A-Za-z0-9._\-\/@:]/g, '').slice(0, LEASE.ACTOR_MAX) || 'unknown';
  const s = h.session.replace(/[^A-Za-z0-9._-]/g, '').slice(0, 8);
  return s ? label + '/' + s : label;
}

function leaseWho_(l) {
  return l.holder.pc + '/' + l.holder.session + (l.holder.name !== null ? ' (' + l.holder.name + ')' : '');
}
// present::lease_since: ages by the server clock, never epoch milliseconds.
function leaseAge_(ms) {
  const s = Math.floor(Math.max(0, ms) / 1000);
  if (s < 60) return s + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm';
  if (s < 86400) return Math.floor(s / 3600) + 'h';
  return Math.floor(s / 86400) + 'd';
}
function leaseSince_(l, now) {
  return 'fence ' + l.fence + ', granted ' + leaseAge_(now - l.grantedAt) + ' ago, last heartbeat ' + leaseAge_(now - l.heartbeatAt) + ' ago';
}
function leaseErr_(code, message, l) {
  return pcErr_(code, message, { lease: leaseView_(l, false) });
}

function findLease_(st, resource, fence) {
  return st.leases.filter(function (l) { return l.resource === resource && l.fence === fence; })[0] || null;
}
function liveOn_(st, resource) {
  return st.leases.filter(function (l) { return l.resource === resource && isLive_(l); }).sort(byResourceFence_);
}

function leaseRenew_(st, l) {
  l.heartbeatAt = st.now;
  if (l.state === 'stale') { l.state = 'held'; st.bump(); }
  st.touch(l);
}

function refuseTakeover_(st, l, evidence, callerPc, pcs) {
  const stale = l.state === 'stale';
  if (evidence === 'process_gone') {
    if (l.holder.pc !== callerPc) {
      return 'process_gone can only be checked on the holder\'s PC ' + JSON.stringify(l.holder.pc) + '; from here use session_ended or force';
    }
    // A lease held for a fixed time follows no process: while its time runs,
    // the end of the process that made it is no evidence.
    if (l.ttlExpiresAt !== null && l.ttlExpiresAt > st.now) {
      return 'it is held for a fixed time (--ttl) that ends in ' + leaseAge_(l.ttlExpiresAt - st.now) +
        ', whatever process made it, so process_gone is no evidence: ask the holder to release it, or wait';
    }
    return null;
  }
  if (!stale) return evidence + ' needs a stale lease; this one is still renewed';
  if (evidence === 'session_ended') {
    const p = pcs.filter(function (x) { return x.label === l.holder.pc; })[0];
    if (p && p.lastPollAt !== null && !pcSilent_(p.lastPollAt, st.now, LEASE.STALE_AFTER_MS)) return null;
    return 'session_ended needs the holder\'s PC ' + JSON.stringify(l.holder.pc) + ' to be polling; it is silent, so only force (with a reason) may take it';
  }
  return null; // force on a stale lease
}

function leaseGrant_(st, c, fence) {
  const now = st.now;
  const l = {
    resource: c.resource, fence: fence, repo: c.repo, description: c.description, files: c.files.slice(),
    mode: c.mode, holder: { pc: c.holder.pc, session: c.holder.session, name: c.holder.name }, claimId: c.claimId,
    grantedAt: now, heartbeatAt: now, ttlExpiresAt: c.ttlMs === null ? null : now + c.ttlMs, state: 'held',
    endedAt: null, timeline: []
  };
  st.bump();
  return l;
}

function claimAnswer_(l) {
  return { granted: true, lease: leaseView_(l, true) };
}

function opLeaseClaim_(req, now) {
  const c = req.args;
  const pcs = readRosterOrFail_();
  rosterMember_(pcs, req.pc);
  if (c.holder.pc !== req.pc) {
    throw pcErr_('forbidden', 'holder.pc ' + JSON.stringify(c.holder.pc) + ' is not the caller ' + JSON.stringify(req.pc));
  }
  const st = leaseStore_(now);
  leaseRefresh_(st);
  const out = leaseClaim_(st, c, req.pc);
  leaseCommit_(st);
  return out;
}

function leaseClaim_(st, c, callerPc) {
  const prev = st.leases.filter(function (l) { return l.claimId === c.claimId; })[0];
  if (prev) {
    if (prev.resource !== c.resource || prev.holder.pc !== c.holder.pc) {
      throw pcErr_('duplicate_id', 'claimId ' + JSON.stringify(c.claimId) + ' was used for another claim (resource ' + JSON.stringify(prev.resource) + ')');
    }
    return claimAnswer_(prev);
  }
  const live = liveOn_(st, c.resource);
  const mine = live.filter(function (l) { return l.holder.pc === c.holder.pc && l.holder.session === c.holder.session; })[0];
  if (mine) {
    leaseRenew_(st, mine);
    return claimAnswer_(mine);
  }
  const conflicts = live.filter(function (l) { return !(c.mode === 'shared' && l.mode === 'shared'); });
  if (conflicts.length) {
    const t = c.takeover;
    if (!t) {
      const held = conflicts.filter(function (l) { return l.state === 'held'; })[0];
      if (held) {
        throw leaseErr_('held', c.resource + ' is held by ' + leaseWho_(held) + ': ' + JSON.stringify(held.description) + ' (' + leaseSince_(held, st.now) + ')', held);
      }
      const s = conflicts[0];
      throw leaseErr_('stale', c.resource + ' is held by ' + leaseWho_(s) + ' but stale (no heartbeat for 3 minutes; ' + leaseSince_(s, st.now) + '): take it over with evidence', s);
    }
    const pcs = t.evidence === 'session_ended' ? readRosterLive_() : [];
    conflicts.forEach(function (l) {
      const why = refuseTakeover_(st, l, t.evidence, callerPc, pcs);
      if (why) throw leaseErr_('forbidden', 'cannot take ' + c.resource + ' from ' + leaseWho_(l) + ': ' + why, l);
    });
    const fence = st.nextFence(c.resource);
    const by = leaseActor_(c.holder);
    const entry = tlEntry_(st.now, 'taken_over', by, 0, { reason: t.reason, evidence: t.evidence, detail: t.detail });
    const fresh = leaseGrant_(st, c, fence);
    conflicts.forEach(function (old) {
      const e = Object.assign({}, entry, { fence: old.fence, newFence: fence });
      old.state = 'released';
      old.endedAt = st.now;
      old.timeline.push(e);
      st.touch(old);
      st.bump();
      fresh.timeline.push(e);
      queueLost_(st, old, { resource: old.resource, fence: old.fence, takenBy: leaseView_(fresh, false).holder, at: st.now, reason: t.reason, event: 'taken_over' });
    });
    fresh.timeline.push(tlEntry_(st.now, 'granted', by, fence));
    leaseAdd_(st, fresh);
    return claimAnswer_(fresh);
  }
  const fence = st.nextFence(c.resource);
  const l = leaseGrant_(st, c, fence);
  l.timeline.push(tlEntry_(st.now, 'granted', leaseActor_(c.holder), fence));
  leaseAdd_(st, l);
  return claimAnswer_(l);
}

// {released, lease} or throws not_found / forbidden.
function leaseReleaseOne_(st, r, callerPc) {
  const l = findLease_(st, r.resource, r.fence);
  if (!l) throw pcErr_('not_found', 'no lease ' + r.resource + ' with fence ' + r.fence);
  if (l.holder.pc !== callerPc) {
    throw leaseErr_('forbidden', 'only the holder\'s PC ' + JSON.stringify(l.holder.pc) + ' may release ' + r.resource + ' fence ' + r.fence, l);
  }
  if (!isLive_(l)) return { released: false, lease: l };
  l.state = 'released';
  l.endedAt = st.now;
  l.timeline.push(tlEntry_(st.now, 'released', r.by, l.fence, { reason: r.reason }));
  st.touch(l);
  st.bump();
  return { released: true, lease: l };
}

function opLeaseRelease_(req, now) {
  rosterMember_(readRosterOrFail_(), req.pc);
  const st = leaseStore_(now);
  leaseRefresh_(st);
  // A refused release writes nothing (the Rust server rolls its transaction back).
  const r = leaseReleaseOne_(st, req.args, req.pc);
  leaseCommit_(st);
  return { released: r.released, lease: leaseView_(r.lease, false) };
}

function opLeaseList_(req, now) {
  rosterMember_(readRosterOrFail_(), req.pc);
  const a = req.args;
  const st = leaseStore_(now);
  leaseRefresh_(st);
  leaseCommit_(st);
  const cut = now - LEASE.ENDED_WINDOW_MS;
  const leases = st.leases.filter(function (l) {
    if (a.resource !== null && l.resource !== a.resource) return false;
    if (a.repo !== null && l.repo !== a.repo) return false;
    return isLive_(l) || (a.all && l.endedAt !== null && l.endedAt >= cut);
  }).sort(byResourceFence_);
  return { leases: leases.map(function (l) { return leaseView_(l, a.timeline); }), version: st.version() };
}

function opLeaseCheck_(req, now) {
  rosterMember_(readRosterOrFail_(), req.pc);
  const st = leaseStore_(now);
  leaseRefresh_(st);
  leaseCommit_(st);
  const live = liveOn_(st, req.args.resource);
  const l = findLease_(st, req.args.resource, req.args.fence);
  return { current: !!(l && isLive_(l)), fence: live.length ? live[live.length - 1].fence : null,
    lease: l ? leaseView_(l, false) : null };
}

// lease.rs lost_of: why a lease the caller renewed is not its own any more.
function lostOf_(st, resource, fence, l) {
  const gone = function (reason) { return { resource: resource, fence: fence, takenBy: null, at: st.now, reason: reason, event: 'released' }; };
  if (!l) return gone('the server has no such lease');
  if (isLive_(l)) return gone('held by another PC (' + l.holder.pc + ')');
  let end = null;
  l.timeline.forEach(function (e) {
    if (e.fence === fence && ['released', 'expired', 'taken_over'].indexOf(e.event) >= 0) end = e;
  });
  if (!end) return gone('it ended');
  const by = end.newFence ? findLease_(st, resource, end.newFence) : null;
  return { resource: resource, fence: fence, takenBy: by ? leaseView_(by, false).holder : null, at: end.at,
    reason: end.reason, event: end.event };
}

// The poll's `lease` argument (called inside opPoll_'s lock): releases, renewals, what
// this PC lost meanwhile (once), the version and, when it moved, the live list.
function pollLease_(pc, p, now) {
  const st = leaseStore_(now);
  leaseRefresh_(st);
  const errors = [];
  const released = [];
  p.release.forEach(function (r, index) {
    if (r.bad) { errors.push(r.bad); return; }
    try {
      const out = leaseReleaseOne_(st, r, pc);
      released.push({ resource: r.resource, fence: r.fence, released: out.released });
    } catch (err) {
      if (!err || !err.pcmail) throw err;
      errors.push({ list: 'release', index: index, resource: r.resource, fence: r.fence, code: err.pcmail.code,
        field: err.pcmail.extra && err.pcmail.extra.field !== undefined ? err.pcmail.extra.field : null, message: err.pcmail.message });
    }
  });
  const renewed = [];
  const lost = [];
  p.renew.forEach(function (r) {
    if (r.bad) { errors.push(r.bad); return; }
    const l = findLease_(st, r.resource, r.fence);
    if (l && isLive_(l) && l.holder.pc === pc) {
      leaseRenew_(st, l);
      renewed.push(r.fence);
    } else {
      const x = lostOf_(st, r.resource, r.fence, l);
      if (!lost.some(function (y) { return y.resource === x.resource && y.fence === x.fence; })) lost.push(x);
    }
  });
  // Queued reports: the rows of this PC (those queued by this request's refresh too).
  const lsh = tab_('LeaseLost');
  const nc = TABS.LeaseLost.length;
  const rows = readText_(lsh, 2, 1, lsh.getLastRow() - 1, nc).filter(function (r) { return r[0] !== ''; }).concat(st.lost);
  st.lost = [];
  const reported = [];
  const keep = [];
  rows.forEach(function (r) {
    if (r[0] !== pc) { keep.push(r); return; }
    const x = { resource: r[1], fence: Number(r[2]), takenBy: r[3] ? JSON.parse(r[3]) : null, at: Number(r[4]),
      reason: r[5] === '' ? null : r[5], event: r[6] };
    if (!reported.some(function (y) { return y.resource === x.resource && y.fence === x.fence; })) reported.push(x);
  });
  lost.forEach(function (x) {
    const y = reported.filter(function (z) { return z.resource === x.resource && z.fence === x.fence; })[0];
    if (y) { if (!y.takenBy) y.takenBy = x.takenBy; } else reported.push(x);
  });
  const before = lsh.getLastRow() - 1;
  if (keep.length) writeText_(lsh, 2, 1, keep);
  if (before > keep.length) deleteRowsSafe_(lsh, 2 + keep.length, before - keep.length);
  leaseCommit_(st);
  const v = st.version();
  const out = { renewed: renewed, released: released, lost: reported, errors: errors, version: v };
  if (v !== p.known) {
    out.list = st.leases.filter(isLive_).sort(byResourceFence_).map(function (l) { return leaseView_(l, false); });
  }
  return out;
}

// The sweep's lease step (under its own short lock): stale and TTL, ended leases past
// the 24 h window dropped, and the stale_lease alerts wanted (one per resource).
function leaseSweep_(now) {
  const st = leaseStore_(now);
  const counts = leaseRefresh_(st);
  const cut = now - LEASE.STALE_AFTER_MS - LEASE.STALE_ALERT_MS;
  const want = {};
  st.leases.filter(function (l) { return l.state === 'stale' && l.heartbeatAt < cut; }).sort(byResourceFence_).forEach(function (l) {
    const key = l.resource + '|stale_lease';
    if (want[key]) return;
    const mins = Math.floor((now - l.heartbeatAt) / 60000);
    want[key] = { kind: 'stale_lease', subject: l.resource, pc: l.holder.pc,
      message: 'pcmail: lease ' + l.resource + ' held by ' + leaseWho_(l) + ' is stale: no heartbeat for ' +
        Math.floor(mins / 60) + 'h ' + String(mins % 60).padStart(2, '0') + 'm (' + JSON.stringify(l.description) + ')' };
  });
  // Ended leases past the 24 h window go: the kept rows are rewritten from the top, the
  // surplus rows deleted (LeaseCounters keeps their fences from being reused).
  const windowCut = now - LEASE.ENDED_WINDOW_MS;
  const kept = st.leases.filter(function (l) { return isLive_(l) || l.endedAt === null || l.endedAt >= windowCut; });
  const dropped = st.leases.length - kept.length;
  if (dropped) {
    st.leases = kept;
    st.dirtyFrom = 0;
  }
  leaseCommit_(st);
  if (dropped) deleteRowsSafe_(tab_('Leases'), 2 + kept.length, dropped);
  return { counts: counts, want: want };
}
