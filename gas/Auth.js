// Who is calling, the same table as pcmail_core::auth::authenticate: the admin
// secret (the Script Property PCMAIL_TOKEN, the old shared token), each PC's own credential
// (SHA-256 in LABEL_CRED_<label>), revoked labels (LABEL_REVOKED_<label>), join codes
// (JOIN_<sha256 of the secret>) and the audit tab. Every hash comes from the execution's
// cached Properties view (CacheService); a credential not in it re-reads Script Properties
// at most once a minute, so a flood of bad credentials costs no Properties quota.
// No switch turns any of this off: tests give their credentials through the fakes.

const REVOKED_PREFIX = 'LABEL_REVOKED_';
const JOIN_PREFIX = 'JOIN_';
const REQUIRE_CREDENTIALS_PROP = 'REQUIRE_CREDENTIALS';
const JOIN_CODE_DEFAULT_MS = 24 * 60 * 60 * 1000;
const JOIN_CODE_MAX_MS = 30 * 24 * 60 * 60 * 1000;
const CRED_REREAD_KEY = 'pcmail:cred-reread';
const CRED_REREAD_S = 60;
// Failed join attempts, as pcmail_core::auth counts them: fixed windows per label and per
// peer. Apps Script sees no caller address, so every caller is the peer 'unknown' and its
// limit is one over all labels. A right code is checked before any limit and always joins.
const JOIN_WINDOW_MS = 10 * 60 * 1000;
const JOIN_FAILURES_PER_LABEL = 10;
const JOIN_FAILURES_PER_PEER = 30;
const UNKNOWN_PEER = 'unknown';
const JOIN_AUDIT_ROWS_PER_WINDOW = 300;
const JOIN_ROWS_KEY = 'rows:*';
const JOIN_OVERFLOW_KEY = 'refused:overflow';
// The windows live in CacheService, not Script Properties: a flood of wrong codes must not
// spend the Properties write quota that a rightful join needs. A window the cache drops
// early only starts counting again; it never refuses a right code.
const JOIN_ATTEMPT_PREFIX = 'pcmail:join-attempt:';

function opClass_(req) {
  switch (req.op) {
    case 'send': case 'poll': case 'mark': case 'status': case 'rotate': return 'pc';
    case 'lease.claim': case 'lease.release': case 'lease.list': case 'lease.check': return 'pc';
    // Jobs: each op checks who may see or change the job (submitter's, joined or target PC).
    case 'job.submit': case 'job.status': case 'job.list': case 'job.cancel': case 'job.start': case 'job.report': return 'pc';
    case 'name.take': case 'who': return 'pc';
    case 'hello': case 'roster.get': case 'sweep': case 'alerts': return 'any';
    case 'join': return 'join';
    // A PC's own entry (its hostname, an old PC's claim) is its business; a takeover is the admin's.
    case 'roster.set': return req.args.label === req.pc && !req.args.replace ? 'pc' : 'admin';
    default: return 'admin';
  }
}

// Compares two hex digests without an early exit.
function sameHash_(a, b) {
  if (!a || !b) return false;
  let diff = a.length === b.length ? 0 : 1;
  for (let i = 0; i < b.length; i++) diff |= (a.charCodeAt(i) ^ b.charCodeAt(i));
  return diff === 0;
}

// No token configured: nobody is admin (fail closed).
function isAdmin_(token) {
  const want = prop_('PCMAIL_TOKEN_SHA256');
  if (!want || token === null) return false;
  return sameHash_(sha256Hex_(token), want);
}

// {state: 'absent'|'active'|'revoked'|'unknown', label} for a credential hash, the caller's
// own label first (one PCMAIL_CREDENTIAL may serve several labels).
function scanCred_(hash, pc) {
  const own = prop_(LABEL_CRED_PREFIX + pc);
  if (sameHash_(own, hash)) return { state: prop_(REVOKED_PREFIX + pc) ? 'revoked' : 'active', label: pc };
  let found = null;
  Object.keys(execProps_ || {}).forEach(function (k) {
    if (!found && k.indexOf(LABEL_CRED_PREFIX) === 0 && sameHash_(execProps_[k], hash)) {
      const label = k.slice(LABEL_CRED_PREFIX.length);
      found = { state: prop_(REVOKED_PREFIX + label) ? 'revoked' : 'active', label: label };
    }
  });
  return found;
}

function findCred_(hash, pc) {
  prop_('PCMAIL_TOKEN_SHA256'); // loads the view
  const hit = scanCred_(hash, pc);
  if (hit) return hit;
  // Not in the cached view: maybe enrolled a moment ago. Re-read, at most once a minute.
  const cache = CacheService.getScriptCache();
  if (cache.get(CRED_REREAD_KEY)) return { state: 'unknown' };
  try { cache.put(CRED_REREAD_KEY, '1', CRED_REREAD_S); } catch (e) { /* best effort */ }
  const view = cacheableProps_(PropertiesService.getScriptProperties().getProperties());
  try { cache.put(PROPS_CACHE_KEY, JSON.stringify(view), PROPS_CACHE_S); } catch (e) { /* next execution re-reads */ }
  execProps_ = view;
  return scanCred_(hash, pc) || { state: 'unknown' };
}

// 'revoked', 'bound' or 'unbound' from the cached Properties view; 'absent' (not on the
// roster) is told apart only when it matters (credentials required), to spare a range read.
function labelState_(pc) {
  if (prop_(REVOKED_PREFIX + pc)) return 'revoked';
  if (prop_(LABEL_CRED_PREFIX + pc)) return 'bound';
  if (!requireCredentialsOn_()) return 'unbound';
  return readRoster_().some(function (p) { return p.label === pc; }) ? 'unbound' : 'absent';
}

function requireCredentialsOn_() {
  return prop_(REQUIRE_CREDENTIALS_PROP) === 'true';
}

function notEnrolled_(msg) { return pcErr_('not_enrolled', msg); }
function revokedErr_(pc) {
  return pcErr_('revoked', JSON.stringify(pc) + ' was revoked by the admin: its mail waits for a PC re-enrolled under that label (`pcmail roster add ' + pc + '`)');
}
function adminRequired_() {
  return pcErr_('admin_required', 'this needs the admin secret (PCMAIL_ADMIN_TOKEN, or `pcmail token set --admin`)');
}
function unauthorized_() { return pcErr_('unauthorized', 'wrong or missing token'); }

// Returns the caller: 'admin', 'credential' (the PC by its own credential), 'token' (an old PC
// on the shared token, unbound label) or 'join'. Throws the refusal otherwise.
function authenticate_(req) {
  const cls = opClass_(req);
  const admin = isAdmin_(req.token);
  const wrongToken = req.token !== null && !admin;
  if (cls === 'join') { if (wrongToken) throw unauthorized_(); return 'join'; }
  let cred = { state: 'absent' };
  if (req.cred !== null) {
    cred = findCred_(credHash_(req.cred), req.pc);
    // A rotation whose answer was lost: the new credential (already stored) proves the PC.
    if (cred.state === 'unknown' && req.op === 'rotate' && sameHash_(prop_(LABEL_CRED_PREFIX + req.pc), credHash_(req.args.newCred))) {
      cred = { state: 'active', label: req.pc };
    }
  }
  if (cred.state === 'revoked') throw revokedErr_(req.pc);
  if (cred.state === 'active' && cred.label !== req.pc) {
    throw pcErr_('forbidden', 'this credential belongs to ' + JSON.stringify(cred.label) + '; it cannot act as ' + JSON.stringify(req.pc));
  }
  if (cred.state === 'active') {
    if (cls !== 'admin') return 'credential';
    if (admin) return 'admin';
    throw wrongToken ? unauthorized_() : adminRequired_();
  }
  if (wrongToken) throw unauthorized_();
  if (!admin) {
    if (cred.state === 'unknown') {
      throw notEnrolled_('this credential is not enrolled as ' + JSON.stringify(req.pc) + ': ask the admin for a join code (`pcmail roster add ' + req.pc + '`), then `pcmail init --join CODE`');
    }
    throw unauthorized_();
  }
  if (cls !== 'pc') return 'admin';
  const state = labelState_(req.pc);
  if (state === 'absent') return 'token'; // the op answers unknown_pc
  if (state === 'revoked') throw revokedErr_(req.pc);
  if (state === 'bound') throw labelTaken_(req.pc);
  if (requireCredentialsOn_()) {
    throw notEnrolled_('this server no longer accepts the shared token for PC operations: enrol ' + JSON.stringify(req.pc) + ' with a join code (`pcmail roster add ' + req.pc + '`, then `pcmail init --join CODE`)');
  }
  return 'token';
}

// Who did it, as the audit log shows it.
function actor_(req) {
  return req.caller === 'admin' ? 'admin@' + req.pc : req.pc;
}

function audit_(req, now, action, label, detail) {
  return auditBy_(now, actor_(req), action, label, detail);
}

// Appends an audit row; returns its sheet row.
function auditBy_(now, by, action, label, detail) {
  const sh = tab_('Audit');
  const seq = sh.getLastRow(); // row 1 is the header
  return appendText_(sh, [[String(seq), String(now), by, action, label, detail || '']]);
}

// Fresh (not cached) JSON of a join code, under the script lock.
function joinCode_(hash) {
  const raw = PropertiesService.getScriptProperties().getProperty(JOIN_PREFIX + hash);
  if (!raw) return null;
  try { return JSON.parse(raw); } catch (e) { return null; }
}

function dropUnusedJoinCodes_(label) {
  const all = PropertiesService.getScriptProperties().getProperties();
  Object.keys(all).forEach(function (k) {
    if (k.indexOf(JOIN_PREFIX) !== 0) return;
    let j = null;
    try { j = JSON.parse(all[k]); } catch (e) { j = null; }
    if (j && j.label === label && !j.usedBy) setProp_(k, null);
  });
}

function opEnrol_(req, now) {
  const a = req.args;
  const hash = sha256Hex_(a.code);
  const existing = joinCode_(hash);
  if (existing) {
    if (existing.label !== a.label) throw pcErr_('conflict', 'that join code is already issued for another label; make a new one');
    return { label: a.label, expiresAt: existing.expiresAt, existing: true };
  }
  if (a.hostname !== null && !readRoster_().some(function (p) { return p.label === a.label; })) {
    rosterSet_(a.label, a.hostname, null, null);
    audit_(req, now, 'roster.set', a.label, 'hostname ' + a.hostname);
  }
  const expiresAt = now + a.expiresIn;
  setProp_(JOIN_PREFIX + hash, JSON.stringify({ label: a.label, hostname: a.hostname, createdAt: now, expiresAt: expiresAt }));
  audit_(req, now, 'enrol', a.label, 'join code expires at ' + new Date(expiresAt).toISOString().replace(/\.\d{3}Z$/, 'Z'));
  return { label: a.label, expiresAt: expiresAt, existing: false };
}

// A failed join is counted and logged (joinRefused_); a right code never reaches a limit.
function opJoin_(req, now) {
  try {
    return joinChecked_(req, now);
  } catch (e) {
    if (e && e.pcmail && isJoinFailure_(e.pcmail.code)) throw joinRefused_(req.pc, UNKNOWN_PEER, now, e);
    throw e;
  }
}

function isJoinFailure_(code) {
  return code === 'join_code_invalid' || code === 'join_code_expired' || code === 'join_code_used';
}

// {start, n, row} of a window still open at `now`, or a fresh one.
function joinWindow_(key, now) {
  let w = null;
  try { w = JSON.parse(CacheService.getScriptCache().get(JOIN_ATTEMPT_PREFIX + key) || 'null'); } catch (e) { w = null; }
  if (!w || !(w.start > now - JOIN_WINDOW_MS)) return { start: now, n: 0, row: null };
  return w;
}

function putJoinWindow_(key, w, now) {
  const ttl = Math.max(1, Math.ceil((w.start + JOIN_WINDOW_MS - now) / 1000));
  try { CacheService.getScriptCache().put(JOIN_ATTEMPT_PREFIX + key, JSON.stringify(w), ttl); } catch (e) { /* best effort */ }
}

// The rule of pcmail_core::auth::judge_join_failure, the audit rows of ops/creds.rs refused_join.
function joinRefused_(label, peer, now, err) {
  const labelKey = 'label:' + label;
  const peerKey = 'peer:' + peer;
  const lw = joinWindow_(labelKey, now);
  const pw = joinWindow_(peerKey, now);
  const verdict = pw.n >= JOIN_FAILURES_PER_PEER ? 'peer' : (lw.n >= JOIN_FAILURES_PER_LABEL ? 'label' : 'logged');
  bumpJoinWindow_(labelKey, lw, now);
  bumpJoinWindow_(peerKey, pw, now);
  let answer = err;
  let entryKey = null;
  let entryLabel = label;
  if (verdict !== 'logged') {
    entryKey = verdict === 'peer' ? 'refused:peer:' + peer : 'refused:label:' + label;
    entryLabel = verdict === 'peer' ? '*' : label;
    const since = verdict === 'peer' ? pw.start : lw.start;
    const minutes = Math.ceil(Math.max(1, since + JOIN_WINDOW_MS - now) / 60000);
    answer = pcErr_('rate_limited', 'too many failed join attempts for this label or from this address: try again in ' + minutes +
      ' min (a right join code is always accepted; ask the admin for a new one if yours fails)');
  }
  // A window's entry that counts refusals is updated in place: a flood adds one row, not one each.
  if (entryKey) {
    const ew = joinWindow_(entryKey, now);
    if (ew.row) {
      writeText_(tab_('Audit'), ew.row, 6, [[joinRefusedDetail_(verdict, ew.n + 1, now, label, peer)]]);
      bumpJoinWindow_(entryKey, ew, now);
      return answer;
    }
  }
  // A new row, unless the window's budget of rows is spent: then one entry counts the rest.
  const rows = joinWindow_(JOIN_ROWS_KEY, now);
  if (rows.n < JOIN_AUDIT_ROWS_PER_WINDOW) {
    bumpJoinWindow_(JOIN_ROWS_KEY, rows, now);
    if (!entryKey) {
      auditBy_(now, peer, 'join-failed', entryLabel, err.pcmail.code);
    } else {
      const ew = { start: now, n: 0, row: auditBy_(now, peer, 'join-throttled', entryLabel, joinRefusedDetail_(verdict, 1, now, label, peer)) };
      bumpJoinWindow_(entryKey, ew, now);
    }
    return answer;
  }
  const ow = joinWindow_(JOIN_OVERFLOW_KEY, now);
  const detail = (ow.n + 1) + ' failed join attempt(s) not logged one by one (over ' + JOIN_AUDIT_ROWS_PER_WINDOW + ' rows in ' +
    (JOIN_WINDOW_MS / 60000) + ' min), the last at ' + now + ' for "' + label + '" from ' + peer;
  if (ow.row) writeText_(tab_('Audit'), ow.row, 6, [[detail]]);
  else ow.row = auditBy_(now, peer, 'join-throttled', '*', detail);
  bumpJoinWindow_(JOIN_OVERFLOW_KEY, ow, now);
  return answer;
}

function joinRefusedDetail_(verdict, n, now, label, peer) {
  const why = verdict === 'peer'
    ? 'over ' + JOIN_FAILURES_PER_PEER + ' failures from this address'
    : 'over ' + JOIN_FAILURES_PER_LABEL + ' failures for this label';
  return n + ' join attempt(s) refused (' + why + ' in ' + (JOIN_WINDOW_MS / 60000) + ' min), the last at ' + now + ' for "' + label + '" from ' + peer;
}

function bumpJoinWindow_(key, w, now) {
  w.n += 1;
  putJoinWindow_(key, w, now);
}

function joinChecked_(req, now) {
  const hash = sha256Hex_(req.args.code);
  const credHash = credHash_(req.cred);
  const j = joinCode_(hash);
  if (!j || j.label !== req.pc) throw pcErr_('join_code_invalid', 'no such join code for this label: ask the admin for one (`pcmail roster add LABEL`)');
  if (j.usedBy) {
    if (sameHash_(j.usedBy, credHash)) {
      // The same PC retrying a lost answer, unless the admin revoked it since:
      // then it is told so, not "already enrolled" (joinReplay in pcmail-core).
      if (prop_(REVOKED_PREFIX + j.label)) {
        throw pcErr_('revoked', JSON.stringify(j.label) + ' was revoked by the admin after it joined with this code, which cannot be used again: ask the admin for a new join code (`pcmail roster add ' + j.label + '`)');
      }
      return { label: j.label, bound: true, existing: true, version: rosterVersion_() };
    }
    throw pcErr_('join_code_used', 'this join code was already used: ask the admin for a new one');
  }
  if (j.expiresAt <= now) throw pcErr_('join_code_expired', 'this join code has expired: ask the admin for a new one');
  const onRoster = readRoster_().some(function (p) { return p.label === j.label; });
  const hostname = j.hostname || req.args.hostname;
  let version;
  if (onRoster) {
    try { version = rosterSet_(j.label, hostname, null, null).version; } catch (e) {
      if (!(e && e.pcmail && e.pcmail.code === 'conflict')) throw e;
      version = rosterVersion_(); // another PC has that hostname: the old one stays
    }
  } else {
    version = rosterSet_(j.label, hostname, null, null).version;
  }
  setProp_(LABEL_CRED_PREFIX + j.label, credHash);
  if (prop_(REVOKED_PREFIX + j.label)) setProp_(REVOKED_PREFIX + j.label, null);
  j.usedAt = now;
  j.usedBy = credHash;
  setProp_(JOIN_PREFIX + hash, JSON.stringify(j));
  audit_(req, now, 'join', j.label, null);
  return { label: j.label, bound: true, existing: false, version: version };
}

function opRevoke_(req, now) {
  const label = req.args.label;
  if (!readRoster_().some(function (p) { return p.label === label; })) {
    throw pcErr_('unknown_pc', JSON.stringify(label) + ' is not on the roster');
  }
  const changed = !PropertiesService.getScriptProperties().getProperty(REVOKED_PREFIX + label);
  if (changed) setProp_(REVOKED_PREFIX + label, String(now));
  dropUnusedJoinCodes_(label); // a revoke must not leave a way back in
  const jobsCancelled = changed ? jobCancelQueuedForRevoked_(label, now) : 0; // Jobs.js
  if (changed) audit_(req, now, 'revoke', label, null);
  return { revoked: true, changed: changed, jobsCancelled: jobsCancelled };
}

function opRotate_(req, now) {
  rosterMember_(readRosterOrFail_(), req.pc);
  const hash = credHash_(req.args.newCred);
  const changed = !sameHash_(PropertiesService.getScriptProperties().getProperty(LABEL_CRED_PREFIX + req.pc), hash);
  if (changed) {
    setProp_(LABEL_CRED_PREFIX + req.pc, hash);
    audit_(req, now, 'rotate', req.pc, null);
  }
  return { rotated: true, changed: changed };
}

function opRequireCredentials_(req, now) {
  const on = req.args.on;
  const was = PropertiesService.getScriptProperties().getProperty(REQUIRE_CREDENTIALS_PROP) === 'true';
  const changed = was !== on;
  if (changed) {
    setProp_(REQUIRE_CREDENTIALS_PROP, on ? 'true' : null);
    audit_(req, now, on ? 'require-credentials' : 'allow-shared-token', '*', null);
  }
  const unbound = readRoster_()
    .filter(function (p) { return !prop_(LABEL_CRED_PREFIX + p.label) && !prop_(REVOKED_PREFIX + p.label); })
    .map(function (p) { return p.label; });
  return { requireCredentials: on, changed: changed, unbound: unbound };
}

function opAuditLog_(req) {
  const sh = tab_('Audit');
  const n = sh.getLastRow() - 1;
  const take = Math.min(n, req.args.limit);
  const rows = readText_(sh, n - take + 2, 1, take, TABS.Audit.length);
  return {
    entries: rows.reverse().map(function (r) {
      return { seq: Number(r[0]), at: Number(r[1]), by: r[2], action: r[3], label: r[4], detail: r[5] === '' ? null : r[5] };
    })
  };
}

// Parses the args of the credential ops (Validate.js parseArgs_ hands them here).
function parseCredArgs_(op, a) {
  switch (op) {
    case 'roster.enrol': {
      const label = reqStr_(a, 'label');
      checkLabel_('label', label);
      const hostname = optStr_(a, 'hostname');
      if (hostname !== null && !isValidHostname_(hostname)) throw badField_('hostname', 'hostname must be 1-253 characters of A-Z a-z 0-9 . _ -');
      const code = reqStr_(a, 'code');
      checkJoinSecret_(code);
      let expiresIn = optInt_(a, 'expiresIn');
      if (expiresIn === null) expiresIn = JOIN_CODE_DEFAULT_MS;
      if (expiresIn < 1 || expiresIn > JOIN_CODE_MAX_MS) throw badField_('expiresIn', 'expiresIn must be 1 ms to 30 days');
      return { label: label, hostname: hostname, code: code, expiresIn: expiresIn };
    }
    case 'join': {
      const code = reqStr_(a, 'code');
      checkJoinSecret_(code);
      const hostname = reqStr_(a, 'hostname');
      if (!isValidHostname_(hostname)) throw badField_('hostname', 'hostname must be 1-253 characters of A-Z a-z 0-9 . _ -');
      return { code: code, hostname: hostname };
    }
    case 'roster.revoke': {
      const label = reqStr_(a, 'label');
      checkLabel_('label', label);
      return { label: label };
    }
    case 'rotate': {
      const newCred = reqStr_(a, 'newCred');
      try { checkCred_(newCred); } catch (e) { throw badField_('newCred', e.pcmail.message); }
      return { newCred: newCred };
    }
    case 'roster.requireCredentials': {
      const on = optBool_(a, 'on');
      return { on: on === null ? true : on };
    }
    case 'roster.log': {
      let limit = optInt_(a, 'limit');
      if (limit === null) limit = 100;
      if (limit < 1 || limit > 500) throw badField_('limit', 'limit must be 1..500');
      return { limit: limit };
    }
    default:
      return null;
  }
}

function checkJoinSecret_(s) {
  if (!/^[0-9a-f]{32}$/.test(s)) throw badField_('code', "a join code's secret is 32 lower-case hex characters");
}
