// The roster tab (number ⇔ label ⇔ hostname, plus each PC's last poll and cursor) and its version.

// Bumped under the script lock; read from the cached properties.
function rosterVersion_() {
  return Number(prop_('ROSTER_VERSION') || 0);
}
function bumpRosterVersion_() {
  const props = PropertiesService.getScriptProperties();
  const v = Number(props.getProperty('ROSTER_VERSION') || 0) + 1;
  setProp_('ROSTER_VERSION', v);
  return v;
}

// All PCs sorted by number; `row` is the sheet row, `lastPollAt` null until the first poll,
// `cursor` the `since` of its last recorded poll (0 when none).
function readRoster_() {
  const sh = tab_('Roster');
  const last = sh.getLastRow();
  const rows = readText_(sh, 2, 1, last - 1, TABS.Roster.length);
  const pcs = [];
  rows.forEach(function (r, i) {
    if (!r[1]) return;
    pcs.push({ number: Number(r[0]), label: r[1], hostname: r[2],
      lastPollAt: r[3] === '' ? null : Number(r[3]), cursor: Number(r[4] || 0), row: i + 2 });
  });
  pcs.sort(function (a, b) { return a.number - b.number; });
  return pcs;
}

// The sweep's view: the roster with the newest heartbeats from CacheService.
function readRosterLive_() {
  const pcs = readRoster_();
  let hb = {};
  try { hb = CacheService.getScriptCache().getAll(pcs.map(function (p) { return HB_KEY + p.label; })); } catch (e) { hb = {}; }
  pcs.forEach(function (p) {
    const v = hb[HB_KEY + p.label];
    if (!v) return;
    const h = JSON.parse(v);
    if (p.lastPollAt === null || h.at >= p.lastPollAt) { p.lastPollAt = h.at; p.cursor = h.since; }
  });
  return pcs;
}

// Fail closed: a roster we cannot read delivers nothing.
function readRosterOrFail_() {
  try {
    return readRoster_();
  } catch (e) {
    throw pcErr_('roster_unavailable', 'the roster cannot be read: ' + e.message);
  }
}

function pcView_(p) {
  return { number: p.number, label: p.label, hostname: p.hostname };
}

// `claim` ({cred, replace}) binds the label to that credential (checked before any change).
function rosterSet_(label, hostname, number, claim) {
  if (claim) checkClaim_(label, claim.cred, claim.replace);
  const pcs = readRoster_();
  const sh = tab_('Roster');
  const existing = pcs.filter(function (p) { return p.label === label; })[0] || null;
  if (pcs.some(function (p) { return p.hostname.toLowerCase() === hostname.toLowerCase() && p.label !== label; })) {
    throw pcErr_('conflict', 'hostname ' + hostname + ' belongs to another PC');
  }
  if (number !== null && pcs.some(function (p) { return p.number === number && p.label !== label; })) {
    throw pcErr_('conflict', 'number ' + number + ' belongs to another PC');
  }
  let pc;
  let changed = true;
  if (existing) {
    pc = { number: number === null ? existing.number : number, label: label, hostname: hostname };
    changed = pc.number !== existing.number || pc.hostname !== existing.hostname;
  } else {
    const next = pcs.reduce(function (m, p) { return Math.max(m, p.number); }, 0) + 1;
    pc = { number: number === null ? next : number, label: label, hostname: hostname };
  }
  // The version first: if the row write then fails, clients re-read an unchanged
  // roster (harmless), and the repeat writes the row and bumps again.
  const version = changed ? bumpRosterVersion_() : rosterVersion_();
  if (existing && changed) writeText_(sh, existing.row, 1, [[String(pc.number), label, hostname]]);
  if (!existing) appendText_(sh, [[String(pc.number), label, hostname, '', '0']]);
  const rebound = claim ? bindLabel_(label, claim.cred) : false;
  return { pc: pc, changed: changed, version: version, bound: claim ? true : undefined, rebound: rebound };
}

function rosterRemove_(label) {
  const p = readRoster_().filter(function (x) { return x.label === label; })[0];
  if (!p) return { removed: false, version: rosterVersion_() };
  const version = bumpRosterVersion_(); // first, as in rosterSet_
  deleteRowsSafe_(tab_('Roster'), p.row, 1);
  unbindLabel_(label); // the label is free again
  if (prop_(REVOKED_PREFIX + label)) setProp_(REVOKED_PREFIX + label, null);
  dropUnusedJoinCodes_(label);
  return { removed: true, version: version };
}

// Every poll's heartbeat goes to CacheService; the Roster row is written only when its
// value is HEARTBEAT_SHEET_MS old, so most polls make no Roster write.
// Stale-PC alerts (10 min) and Events pruning read both (readRosterLive_).
const HB_KEY = 'pcmail:hb:';
const HEARTBEAT_SHEET_MS = 4 * 60 * 1000;
function heartbeat_(pc, now, since) {
  try { CacheService.getScriptCache().put(HB_KEY + pc.label, JSON.stringify({ at: now, since: since }), 21600); } catch (e) { /* the sheet below */ }
  if (pc.lastPollAt !== null && now - pc.lastPollAt < HEARTBEAT_SHEET_MS && pc.cursor <= since) return;
  writeText_(tab_('Roster'), pc.row, 4, [[String(now), String(since)]]);
}

// Whether a PC whose recorded poll is `recorded` has been silent for more than `windowMs`
// at `now` (the Rust core's due::pc_silent). This server records every poll in
// CacheService; the Rust server records one only every POLL_RECORD_STEP_MS, so the
// rule allows that step on both and the two judge the same.
function pcSilent_(recorded, now, windowMs) {
  return recorded < now - windowMs - LIMITS.POLL_RECORD_STEP_MS;
}

// Up to 5 labels that look like `query`, closest first (same scoring as the Rust core).
function candidates_(pcs, query) {
  const q = query.toLowerCase();
  const scored = [];
  pcs.forEach(function (p) {
    const host = p.hostname.toLowerCase();
    const d = Math.min(editDistance_(q, p.label), editDistance_(q, host));
    const contains = q !== '' && (p.label.indexOf(q) >= 0 || host.indexOf(q) >= 0);
    const close = d <= Math.max(Math.floor(charCount_(q) / 2), 2);
    if (contains || close) scored.push([contains ? Math.min(d, 1) : d, p.label]);
  });
  scored.sort(function (a, b) { return a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0); });
  return scored.slice(0, 5).map(function (s) { return s[1]; });
}

function editDistance_(a, b) {
  const x = Array.from(a);
  const y = Array.from(b);
  let prev = [];
  for (let j = 0; j <= y.length; j++) prev.push(j);
  for (let i = 1; i <= x.length; i++) {
    const cur = [i];
    for (let j = 1; j <= y.length; j++) {
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x[i - 1] === y[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[y.length];
}

// A label bound to one installation. The SHA-256 hex of its credential
// lives in Script Properties under LABEL_CRED_<label> (read with the execution's cached
// Properties view; no tab column, so the sheet layout is unchanged); none = not bound.
const LABEL_CRED_PREFIX = 'LABEL_CRED_';
const PC_OPS = { send: true, poll: true, mark: true, status: true };

function credHash_(cred) {
  return sha256Hex_(cred);
}

// Same rule as pcmail_core::protocol::check_credential.
function checkCred_(cred) {
  if (cred.length < 32 || cred.length > 512 || !/^[\x21-\x7e]+$/.test(cred)) {
    throw badField_('cred', 'cred must be 32-512 printable ASCII characters without spaces (e.g. `openssl rand -hex 32`)');
  }
}

// After parsing (same order as the Rust parser): the credential's shape, then a claim's rules.
function checkClaimArgs_(op, pc, cred, args) {
  if (cred !== null) checkCred_(cred);
  checkCredOps_(op, cred);
  if (op !== 'roster.set' || !args.claim) return;
  if (args.label !== pc) throw badField_('claim', 'a PC may only claim its own label (label must equal pc)');
  if (cred === null) throw badField_('cred', 'claim needs "cred": this installation\'s credential');
}

// join and rotate act with the PC's own credential (same order as the Rust parser).
function checkCredOps_(op, cred) {
  if ((op === 'join' || op === 'rotate') && cred === null) throw badField_('cred', op + ' needs "cred": this PC\'s credential');
}

// An unbound label accepts anyone (old clients; the next claim binds it); a bound one only
// its credential, compared without an early exit.
function credMatches_(hash, cred) {
  if (!hash) return true;
  if (cred === null) return false;
  const given = credHash_(cred);
  let diff = given.length === hash.length ? 0 : 1;
  for (let i = 0; i < hash.length; i++) diff |= (given.charCodeAt(i) ^ hash.charCodeAt(i));
  return diff === 0;
}

function labelTaken_(label) {
  return pcErr_('label_taken', 'label ' + JSON.stringify(label) +
    ' belongs to another installation: pick another label, or replace it');
}

// roster.set with claim, under the script lock: re-read fresh, refuse before anything changes.
function checkClaim_(label, cred, replace) {
  const bound = PropertiesService.getScriptProperties().getProperty(LABEL_CRED_PREFIX + label);
  if (bound && !replace && !credMatches_(bound, cred)) throw labelTaken_(label);
}

// A replace needs the admin secret (Auth.js opClass_); it also lifts a revoke.
// Returns whether anything changed.
function bindLabel_(label, cred) {
  const hash = credHash_(cred);
  const props = PropertiesService.getScriptProperties();
  const changed = props.getProperty(LABEL_CRED_PREFIX + label) !== hash || !!props.getProperty(REVOKED_PREFIX + label);
  if (!changed) return false;
  setProp_(LABEL_CRED_PREFIX + label, hash); // drops the cached Properties view
  if (props.getProperty(REVOKED_PREFIX + label)) setProp_(REVOKED_PREFIX + label, null);
  return true;
}

function unbindLabel_(label) {
  if (prop_(LABEL_CRED_PREFIX + label) !== null) setProp_(LABEL_CRED_PREFIX + label, null);
}
