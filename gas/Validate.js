// Request parsing, field for field as the Rust core (crates/core/src/protocol.rs)
// so both servers answer the same code and `field` for the same bad input.

// Checked against tests/protocol/generated/op-table.json (test/op-table.test.js).
const LIMITS = {
  SUBJECT_MAX: 200, BODY_MAX: 20000, HOP_LIMIT: 3, POLL_DEFAULT: 100, POLL_MAX: 500,
  UPDATES_MAX: 200, STATUS_MAX: 200, MARKS_MAX: 500, WAIT_MAX: 25000, BODY_BYTES_MAX: 256 * 1024,
  MIN: 60000, EXPIRES_IN_MAX: 366 * 24 * 60 * 60000, RECIPIENTS_MAX: 20,
  UNSEEN_URGENT_MS: 2 * 60 * 60000, UNSEEN_MS: 6 * 60 * 60000, UNDELIVERED_MS: 30 * 60000, STALE_PC_MS: 10 * 60000,
  POLL_RECORD_STEP_MS: 10000
};
// The op table's names, in its order (test/op-table.test.js checks both).
const OPS = ['hello', 'roster.get', 'roster.set', 'roster.remove', 'send', 'poll', 'mark',
  'status', 'sweep', 'alerts',
  // credentials (Auth.js)
  'roster.enrol', 'join', 'roster.revoke', 'rotate', 'roster.requireCredentials', 'roster.log',
  'lease.claim', 'lease.release', 'lease.list', 'lease.check',
  // jobs (Jobs.js)
  'job.submit', 'job.status', 'job.list', 'job.cancel', 'job.start', 'job.report',
  'name.take', 'who']; // sessions and names (Sessions.js)

function has_(o, k) {
  return Object.prototype.hasOwnProperty.call(o, k) && o[k] !== null && o[k] !== undefined;
}
function isObj_(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}
function reqStr_(o, k) {
  if (!has_(o, k)) throw badField_(k, 'missing "' + k + '"');
  if (typeof o[k] !== 'string') throw badField_(k, '"' + k + '" must be a string');
  return o[k];
}
function optStr_(o, k) {
  if (!has_(o, k)) return null;
  if (typeof o[k] !== 'string') throw badField_(k, '"' + k + '" must be a string');
  return o[k];
}
function optInt_(o, k) {
  if (!has_(o, k)) return null;
  if (typeof o[k] !== 'number' || !Number.isSafeInteger(o[k])) throw badField_(k, '"' + k + '" must be an integer');
  return o[k];
}
function optBool_(o, k) {
  if (!has_(o, k)) return null;
  if (typeof o[k] !== 'boolean') throw badField_(k, '"' + k + '" must be true or false');
  return o[k];
}
function optStrArray_(o, k, max) {
  if (!has_(o, k)) return [];
  const a = o[k];
  if (!Array.isArray(a)) throw badField_(k, '"' + k + '" must be an array of strings');
  if (a.length > max) throw badField_(k, 'at most ' + max + ' entries in "' + k + '"');
  a.forEach(function (x) { if (typeof x !== 'string') throw badField_(k, '"' + k + '" must be an array of strings'); });
  return a.slice();
}

function isValidLabel_(s) {
  return typeof s === 'string' && /^[a-z0-9][a-z0-9._-]{0,39}$/.test(s);
}
function isValidHostname_(s) {
  return typeof s === 'string' && /^[A-Za-z0-9._-]{1,253}$/.test(s);
}
function isValidMailId_(id) {
  return typeof id === 'string' && /^mail-[0-9]{1,15}-[0-9a-f]{8}$/.test(id);
}
function isValidAnyId_(id) {
  if (typeof id !== 'string') return false;
  const i = id.indexOf('~');
  if (i < 0) return isValidMailId_(id);
  return isValidMailId_(id.slice(0, i)) && isValidLabel_(id.slice(i + 1));
}
function checkLabel_(field, s) {
  if (!isValidLabel_(s)) throw badField_(field, field + ' ' + JSON.stringify(s) + ' is not a valid label (lower-case a-z 0-9 . _ -, max 40)');
}
function checkAnyId_(field, id) {
  if (!isValidAnyId_(id)) throw badField_(field, JSON.stringify(id) + ' is not a mail id');
}
function charCount_(s) {
  let n = 0;
  for (const _ of s) n++; // eslint-disable-line no-unused-vars
  return n;
}
// Unicode Cc controls (and line/paragraph separators); tab and newlines only when multiline.
function checkText_(field, s, max, multiline) {
  if (charCount_(s) > max) throw badField_(field, field + ' is longer than ' + max + ' characters');
  const re = multiline ? /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F\u2028\u2029]/
    : /[\u0000-\u001F\u007F-\u009F\u2028\u2029]/;
  if (re.test(s)) throw badField_(field, field + ' contains control characters');
}

// crates/core/src/rules.rs is_unsafe_in_session: control characters, line and paragraph
// separators, and the invisible format characters that reorder or hide text.
const SESSION_UNSAFE_RE = /[\u0000-\u001F\u007F-\u009F\u2028\u2029\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u206F\uFEFF]/;
// crates/core/src/rules.rs check_session_id: the one rule for a session id, wherever one travels.
function checkSessionId_(field, s) {
  const n = charCount_(s);
  if (n === 0 || n > SESS.SESSION_MAX || SESSION_UNSAFE_RE.test(s) || isBlank_(s)) {
    throw badField_(field, field + ' must be 1-' + SESS.SESSION_MAX + ' characters, not blank, with no control or invisible formatting characters');
  }
}

// Parses the whole envelope and the op's args before anything is touched.
function parseRequest_(body) {
  let v;
  try { v = JSON.parse(body); } catch (e) {
    throw pcErr_('bad_json', 'request body is not JSON: ' + e.message);
  }
  if (!isObj_(v)) throw pcErr_('bad_json', 'request body must be a JSON object');
  if (!Object.prototype.hasOwnProperty.call(v, 'v')) {
    throw pcErr_('bad_version', 'missing protocol version "v"; this server speaks v1');
  }
  if (v.v !== 1) throw pcErr_('bad_version', 'protocol version ' + JSON.stringify(v.v) + ' is not supported; this server speaks v1');
  const op = reqStr_(v, 'op');
  let token = null;
  if (has_(v, 'token')) {
    if (typeof v.token !== 'string') throw badField_('token', '"token" must be a string');
    token = v.token;
  }
  let cred = null;
  if (has_(v, 'cred') && v.cred !== null) {
    if (typeof v.cred !== 'string') throw badField_('cred', '"cred" must be a string');
    cred = v.cred;
  }
  const pc = reqStr_(v, 'pc');
  let args = {};
  if (has_(v, 'args')) {
    if (!isObj_(v.args)) throw badField_('args', '"args" must be an object');
    args = v.args;
  }
  if (OPS.indexOf(op) < 0) throw pcErr_('unknown_op', 'unknown op ' + JSON.stringify(op));
  const parsed = parseArgs_(op, args);
  // The caller's label is checked after the op so unknown_op wins over a bad label.
  checkLabel_('pc', pc);
  checkClaimArgs_(op, pc, cred, parsed);
  return { op: op, pc: pc, token: token, cred: cred, args: parsed };
}

function parseArgs_(op, a) {
  switch (op) {
    case 'roster.set': {
      const label = reqStr_(a, 'label');
      checkLabel_('label', label);
      const hostname = reqStr_(a, 'hostname');
      if (!isValidHostname_(hostname)) throw badField_('hostname', 'hostname must be 1-253 characters of A-Z a-z 0-9 . _ -');
      const number = optInt_(a, 'number');
      if (number !== null && (number < 1 || number > 1000000)) throw badField_('number', 'number must be between 1 and 1000000');
      const claim = optBool_(a, 'claim') === true;
      const replace = optBool_(a, 'replace') === true;
      if (replace && !claim) throw badField_('replace', 'replace is only allowed with "claim": true');
      return { label: label, hostname: hostname, number: number, claim: claim, replace: replace };
    }
    case 'roster.remove': {
      const label = reqStr_(a, 'label');
      checkLabel_('label', label);
      return { label: label };
    }
    case 'send': {
      if (!has_(a, 'mail')) throw badField_('mail', 'missing "mail"');
      if (!isObj_(a.mail)) throw badField_('mail', '"mail" must be an object');
      return { mail: parseMail_(a.mail) };
    }
    case 'poll': {
      // A malformed id is left out like an unknown one: one bad id never fails the poll.
      const confirm = optStrArray_(a, 'confirm', LIMITS.POLL_MAX).filter(function (id) { return isValidAnyId_(id); });
      const marks = has_(a, 'marks') ? parseMarks_(a.marks) : [];
      let limit = optInt_(a, 'limit');
      if (limit === null) limit = LIMITS.POLL_DEFAULT;
      else if (limit < 1 || limit > LIMITS.POLL_MAX) throw badField_('limit', 'limit must be 1..' + LIMITS.POLL_MAX);
      const since = optInt_(a, 'since') || 0;
      if (since < 0) throw badField_('since', 'since must be >= 0');
      const waitMs = optInt_(a, 'waitMs') || 0;
      if (waitMs < 0 || waitMs > LIMITS.WAIT_MAX) throw badField_('waitMs', 'waitMs must be 0..' + LIMITS.WAIT_MAX);
      const lease = has_(a, 'lease') ? parsePollLease_(a.lease) : null; // Leases.js
      const job = has_(a, 'job') ? parsePollJob_(a.job) : null; // Jobs.js
      const receivedSince = optInt_(a, 'receivedSince');
      if (receivedSince !== null && receivedSince < 0) throw badField_('receivedSince', 'receivedSince must be >= 0');
      const sessions = has_(a, 'sessions') ? parsePollSessions_(a.sessions) : null; // Sessions.js
      return { confirm: confirm, marks: marks, limit: limit, since: since, waitMs: waitMs, lease: lease, receivedSince: receivedSince,
        job: job, sessions: sessions };
    }
    case 'mark': {
      if (!has_(a, 'marks')) throw badField_('marks', 'missing "marks"');
      return { marks: parseMarks_(a.marks) };
    }
    case 'status': {
      const ids = optStrArray_(a, 'ids', LIMITS.STATUS_MAX);
      if (!ids.length) throw badField_('ids', '"ids" must list 1 to 200 mail ids');
      // An id that is not a mail id is answered as missing (opStatus_), like an unknown one.
      return { ids: ids };
    }
    case 'alerts': {
      const open = optBool_(a, 'open');
      return { open: open === null ? true : open };
    }
    case 'lease.claim': return parseLeaseClaim_(a);
    case 'lease.release': return parseLeaseRelease_(a);
    case 'lease.list': return parseLeaseList_(a);
    case 'lease.check': return parseLeaseCheck_(a);
    case 'name.take': return parseNameTake_(a);
    case 'who': return {};
    default:
      return parseJobArgs_(op, a) || parseCredArgs_(op, a) || {};
  }
}

function parseMail_(m) {
  const id = reqStr_(m, 'id');
  if (!isValidMailId_(id)) throw badField_('mail.id', 'mail.id must look like mail-<ms>-<8 lower hex>');
  let to;
  if (Array.isArray(m.to)) { // a list of addresses (feature multi-recipient): one copy each
    if (!m.to.every(function (a) { return typeof a === 'string'; })) throw badField_('mail.to', 'mail.to must be a string or an array of strings');
    checkRecipients_(m.to);
    to = m.to.slice();
  } else {
    to = reqStr_(m, 'to');
    if (to !== '*' && !isValidLabel_(to)) {
      throw pcErr_('unknown_recipient', JSON.stringify(to) + ' is not a roster label (labels are lower-case a-z 0-9 . _ -)', { candidates: [] });
    }
  }
  let kind = 'note';
  if (has_(m, 'kind')) {
    if (typeof m.kind !== 'string') throw badField_('mail.kind', 'mail.kind must be a string');
    if (['note', 'request', 'decision'].indexOf(m.kind) < 0) throw badField_('mail.kind', 'mail.kind must be note, request or decision');
    kind = m.kind;
  }
  const subject = optStr_(m, 'subject') || '';
  checkText_('mail.subject', subject, LIMITS.SUBJECT_MAX, false);
  const body = reqStr_(m, 'body');
  checkText_('mail.body', body, LIMITS.BODY_MAX, true);
  if (!body.trim()) throw badField_('mail.body', 'mail.body must not be empty');
  const urgent = optBool_(m, 'urgent') || false;
  const expiresAt = optInt_(m, 'expiresAt');
  if (expiresAt !== null && expiresAt < 0) throw badField_('mail.expiresAt', 'mail.expiresAt must be a time in ms');
  // A duration the server measures by its own clock (a sender's clock may be off).
  const expiresIn = optInt_(m, 'expiresIn');
  if (expiresIn !== null) {
    if (expiresIn < 1 || expiresIn > LIMITS.EXPIRES_IN_MAX) throw badField_('mail.expiresIn', 'mail.expiresIn must be 1 ms to 366 days');
    if (expiresAt !== null) throw badField_('mail.expiresIn', 'send either mail.expiresIn or mail.expiresAt, not both');
  }
  const inReplyTo = optStr_(m, 'inReplyTo');
  if (inReplyTo !== null) checkAnyId_('mail.inReplyTo', inReplyTo);
  const auto = optBool_(m, 'auto') || false;
  const hop = optInt_(m, 'hop') || 0;
  if (hop < 0 || hop > 1000) throw badField_('mail.hop', 'mail.hop must be 0..1000');
  return { id: id, to: to, kind: kind, subject: subject, body: body, urgent: urgent,
    expiresAt: expiresAt, expiresIn: expiresIn, inReplyTo: inReplyTo, auto: auto, hop: hop };
}

// crates/core/src/recipients.rs check_list: 2 to RECIPIENTS_MAX addresses, no "*", none
// twice, each spelled as a label; the shape is checked before the spelling.
const BROADCAST_IN_LIST = '"*" (every other PC) cannot be combined with other addresses: it already reaches every PC, ' +
  'and a PC listed beside it would get two copies; send the broadcast on its own';
function checkRecipients_(list) {
  if (list.length < 2) throw badField_('mail.to', 'a list of addresses needs at least 2 (send one address as a string)');
  if (list.length > LIMITS.RECIPIENTS_MAX) throw badField_('mail.to', 'at most ' + LIMITS.RECIPIENTS_MAX + ' addresses per mail');
  if (list.indexOf('*') >= 0) throw badField_('mail.to', BROADCAST_IN_LIST);
  list.forEach(function (a, i) {
    if (list.indexOf(a) < i) throw badField_('mail.to', JSON.stringify(a) + ' is listed twice');
  });
  const misspelt = list.filter(function (a) { return !isValidLabel_(a); })
    .map(function (a) { return { to: a, candidates: [] }; });
  if (misspelt.length) throw unknownRecipients_(misspelt);
}

// recipients.rs unknown_recipients: every address that did not resolve, each with its
// candidates; `candidates` is the first one's. Nothing was sent.
function unknownRecipients_(misses) {
  const names = misses.map(function (m) { return JSON.stringify(m.to); }).join(', ');
  const verb = misses.length === 1 ? 'is not an exact roster label or name' : 'are not exact roster labels or names';
  return pcErr_('unknown_recipient', names + ' ' + verb + '; nothing was sent to anyone',
    { candidates: misses[0].candidates, unresolved: misses });
}

function utf8Len_(s) {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xD800 && c <= 0xDBFF) { n += 4; i++; } else n += 3;
  }
  return n;
}

// The batch itself must be an array of at most 500 (the request's shape); each item
// is parsed on its own (crates/core protocol.rs parse_mark): a bad one becomes
// {bad: its result} so it never fails the other marks or the poll carrying them.
function parseMarks_(v) {
  if (!Array.isArray(v)) throw badField_('marks', '"marks" must be an array');
  if (v.length > LIMITS.MARKS_MAX) throw badField_('marks', 'at most ' + LIMITS.MARKS_MAX + ' marks per request');
  return v.map(function (m, index) {
    try {
      return parseMark_(m);
    } catch (err) {
      if (!err || !err.pcmail) throw err;
      const s = function (k) { return isObj_(m) && typeof m[k] === 'string' ? m[k] : null; };
      return { bad: { index: index, markId: s('markId'), id: s('id'), ok: false, code: err.pcmail.code,
        field: err.pcmail.extra ? err.pcmail.extra.field : undefined, message: err.pcmail.message } };
    }
  });
}

function parseMark_(m) {
  if (!isObj_(m)) throw badField_('marks', 'each mark must be an object');
  const markId = reqStr_(m, 'markId');
  if (!markId || charCount_(markId) > 100 || /[\u0000-\u001F\u007F-\u009F]/.test(markId)) {
    throw badField_('markId', 'markId must be 1-100 characters with no control characters');
  }
  const id = reqStr_(m, 'id');
  checkAnyId_('id', id);
  const op = reqStr_(m, 'op');
  if (['seen', 'ack', 'fail'].indexOf(op) < 0) throw badField_('op', 'mark op must be seen, ack or fail');
  const at = optInt_(m, 'at');
  if (at === null) throw badField_('at', 'missing "at"');
  const by = reqStr_(m, 'by');
  const reason = optStr_(m, 'reason');
  checkMarkText_(op, by, reason);
  return { markId: markId, id: id, op: op, at: at, by: by, reason: reason };
}

// crates/core rules.rs check_mark_text, check for check.
function checkMarkText_(op, by, reason) {
  if (isBlank_(by)) throw badField_('by', 'a mark needs the actor ("by")');
  checkText_('by', by, 100, false);
  if (reason !== null) checkText_('reason', reason, 2000, true);
  if (op === 'fail' && isBlank_(reason || '')) throw badField_('reason', 'a fail mark needs a reason that is not blank');
}

// Only Unicode White_Space, as Rust's str::trim (JS trim also strips U+FEFF).
function isBlank_(s) {
  return /^[\t\n\u000B\f\r \u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]*$/.test(s);
}
