// The job rules both sides check (issue 13), as crates/core/src/job.rs words them:
// CommandSpec and args (check_spec, check_args), who may submit (submitter_allowed),
// the dedup key. Pure functions: no Sheets, no clock.

const JOB = {
  H_MS: 30000, NO_HEARTBEAT_MS: 180000, QUEUED_MAX_MS: 7 * 24 * 3600000,
  DEDUP_DEFAULT_MS: 300000, DEDUP_MAX_MS: 24 * 3600000,
  TIME_LIMIT_MIN_MS: 1000, TIME_LIMIT_MAX_MS: 24 * 3600000,
  ARGS_MAX: 20, STRING_DEFAULT_MAX: 200, STRING_HARD_MAX: 4096, POLL_ITEMS_MAX: 500, OFFER_MAX: 20,
  LIST_DEFAULT: 100, LIST_MAX: 500, OUTPUT_MAX_BYTES: 64 * 1024, COMMANDS_MAX: 200, DESCRIPTION_MAX: 1000,
  ARTIFACTS_MAX: 20, ARTIFACT_MAX: 400, CHECKOUTS_MAX: 200, VALUES_MAX: 200, ACTOR_MAX: 100, REASON_MAX: 2000
};
const JOB_STATES = ['queued', 'running', 'ok', 'failed', 'timed_out', 'cancelled'];
const JOB_RANK = { queued: 0, running: 1, ok: 2, failed: 2, timed_out: 2, cancelled: 2 };
const ARG_TYPES = ['string', 'int', 'bool', 'enum', 'path', 'checkout'];

function isJobId_(s) {
  return typeof s === 'string' && /^job-[0-9]{1,15}-[0-9a-f]{8}$/.test(s);
}
function isCommandName_(s) {
  return typeof s === 'string' && /^[a-z0-9][a-z0-9._-]{0,39}$/.test(s);
}
function jobEnded_(state) {
  return JOB_RANK[state] === 2;
}

function jobRefused_(reason, message, field) {
  const extra = { reason: reason };
  if (field !== undefined) extra.field = field;
  return pcErr_('job_refused', message, extra);
}

// A string value: no NUL or control characters, at most max characters.
function argTextProblem_(v, max) {
  if (/[\u0000-\u001F\u007F-\u009F\u2028\u2029]/.test(v)) return 'contains control characters';
  if (charCount_(v) > max) return 'is longer than ' + max + ' characters';
  return null;
}

// `path`: relative, / separators, no .. segment, no leading / or drive letter.
function pathProblem_(v) {
  if (v === '') return 'must not be empty';
  if (v.indexOf('\\') >= 0) return 'must use / as the separator';
  if (v[0] === '/' || /^[A-Za-z]:/.test(v)) return 'must be relative';
  if (v.split('/').indexOf('..') >= 0) return 'must not contain a .. segment';
  return null;
}

// check_spec: a CommandSpec is well formed (names, types, bounds). Throws bad_request
// with field `commands[i].…` (prefix given).
function checkJobSpec_(spec, prefix) {
  const f = function (k) { return prefix ? prefix + '.' + k : k; };
  const bad = function (k, msg) { return badField_(f(k), msg); };
  if (!isObj_(spec)) throw badField_(prefix || 'spec', 'a command spec must be an object');
  if (!isCommandName_(spec.name)) throw bad('name', 'command name ' + JSON.stringify(spec.name) + ' must be 1-40 characters of a-z 0-9 . _ -, starting with a letter or digit');
  const args = spec.args === undefined ? [] : spec.args;
  if (!Array.isArray(args) || args.length > JOB.ARGS_MAX) throw bad('args', 'args must be an array of at most ' + JOB.ARGS_MAX + ' argument specs');
  const names = {};
  args.forEach(function (a, i) {
    const af = function (k) { return 'args[' + i + '].' + k; };
    if (!isObj_(a)) throw bad('args[' + i + ']', 'each argument spec must be an object');
    if (!(typeof a.name === 'string' && /^[a-z][a-z0-9_-]{0,39}$/.test(a.name))) throw bad(af('name'), 'argument name must be 1-40 characters of a-z 0-9 _ -, starting with a letter');
    if (names[a.name]) throw bad(af('name'), 'argument ' + a.name + ' is listed twice');
    names[a.name] = true;
    if (ARG_TYPES.indexOf(a.type) < 0) throw bad(af('type'), 'type must be one of ' + ARG_TYPES.join(', '));
    if (a.required !== undefined && typeof a.required !== 'boolean') throw bad(af('required'), 'required must be true or false');
    if (a.pattern !== undefined && a.pattern !== null) {
      if (typeof a.pattern !== 'string') throw bad(af('pattern'), 'pattern must be a string');
      try { new RegExp(a.pattern); } catch (e) { throw bad(af('pattern'), 'pattern is not a valid regex'); }
    }
    if (a.maxLen !== undefined && a.maxLen !== null && !(Number.isSafeInteger(a.maxLen) && a.maxLen >= 1 && a.maxLen <= JOB.STRING_HARD_MAX)) {
      throw bad(af('maxLen'), 'maxLen must be 1..' + JOB.STRING_HARD_MAX);
    }
    ['min', 'max'].forEach(function (k) {
      if (a[k] !== undefined && a[k] !== null && !Number.isSafeInteger(a[k])) throw bad(af(k), k + ' must be an integer');
    });
    if (a.values !== undefined && a.values !== null) {
      if (!Array.isArray(a.values) || a.values.length > JOB.VALUES_MAX || a.values.some(function (v) { return typeof v !== 'string'; })) {
        throw bad(af('values'), 'values must be an array of at most ' + JOB.VALUES_MAX + ' strings');
      }
    }
    if (a.type === 'enum' && !(Array.isArray(a.values) && a.values.length)) throw bad(af('values'), 'an enum needs its values');
  });
  if (spec.subject !== undefined && spec.subject !== null && !names[spec.subject]) {
    throw bad('subject', 'subject must name one of the args');
  }
  if (!(Number.isSafeInteger(spec.timeLimitMs) && spec.timeLimitMs >= JOB.TIME_LIMIT_MIN_MS && spec.timeLimitMs <= JOB.TIME_LIMIT_MAX_MS)) {
    throw bad('timeLimitMs', 'timeLimitMs must be 1 s to 24 h');
  }
  const arts = spec.artifacts === undefined ? [] : spec.artifacts;
  if (!Array.isArray(arts) || arts.length > JOB.ARTIFACTS_MAX) throw bad('artifacts', 'artifacts must be an array of at most ' + JOB.ARTIFACTS_MAX + ' patterns');
  arts.forEach(function (p) {
    if (typeof p !== 'string' || argTextProblem_(p, JOB.ARTIFACT_MAX) || pathProblem_(p)) throw bad('artifacts', 'artifact pattern ' + JSON.stringify(p) + ' must be a relative path of at most ' + JOB.ARTIFACT_MAX + ' characters');
  });
  ['readOnly', 'chunked', 'verify'].forEach(function (k) {
    if (spec[k] !== undefined && typeof spec[k] !== 'boolean') throw bad(k, k + ' must be true or false');
  });
  if (spec.description !== undefined && spec.description !== null) {
    if (typeof spec.description !== 'string') throw bad('description', 'description must be a string');
    checkText_(f('description'), spec.description, JOB.DESCRIPTION_MAX, true);
  }
}

// The normalised spec (defaults filled), as stored and answered.
function normSpec_(spec) {
  return {
    name: spec.name,
    args: (spec.args || []).map(function (a) {
      const o = { name: a.name, type: a.type, required: a.required === true };
      ['pattern', 'maxLen', 'min', 'max', 'values'].forEach(function (k) { if (a[k] !== undefined && a[k] !== null) o[k] = a[k]; });
      return o;
    }),
    subject: spec.subject === undefined ? null : spec.subject, timeLimitMs: spec.timeLimitMs,
    artifacts: (spec.artifacts || []).slice(), readOnly: spec.readOnly === true, chunked: spec.chunked === true,
    verify: spec.verify === true, description: spec.description || ''
  };
}

// check_args: the args fit the spec. Returns the args in spec order (unknown names refused);
// throws job_refused / bad_argument with field args.<name>.
function checkJobArgs_(spec, args, checkouts) {
  const out = {};
  const bad = function (name, msg) { return jobRefused_('bad_argument', 'argument ' + name + ' ' + msg, 'args.' + name); };
  Object.keys(args).forEach(function (k) {
    if (!spec.args.some(function (a) { return a.name === k; })) throw bad(k, 'is not an argument of ' + spec.name);
  });
  spec.args.forEach(function (a) {
    if (!Object.prototype.hasOwnProperty.call(args, a.name) || args[a.name] === null) {
      if (a.required) throw bad(a.name, 'is required');
      return;
    }
    const v = args[a.name];
    switch (a.type) {
      case 'int':
        if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw bad(a.name, 'must be an integer');
        if (a.min !== undefined && v < a.min) throw bad(a.name, 'must be at least ' + a.min);
        if (a.max !== undefined && v > a.max) throw bad(a.name, 'must be at most ' + a.max);
        break;
      case 'bool':
        if (typeof v !== 'boolean') throw bad(a.name, 'must be true or false');
        break;
      default: {
        if (typeof v !== 'string') throw bad(a.name, 'must be a string');
        const max = Math.min(a.maxLen || JOB.STRING_DEFAULT_MAX, JOB.STRING_HARD_MAX);
        const p = argTextProblem_(v, a.type === 'enum' || a.type === 'checkout' ? JOB.STRING_HARD_MAX : max);
        if (p) throw bad(a.name, p);
        if (a.type === 'path') { const q = pathProblem_(v); if (q) throw bad(a.name, q); }
        if (a.type === 'enum' && a.values.indexOf(v) < 0) throw bad(a.name, 'must be one of ' + a.values.join(', '));
        if (a.type === 'checkout') {
          const names = a.values || checkouts || [];
          if (names.indexOf(v) < 0) throw bad(a.name, 'must name a checkout of the target: ' + names.join(', '));
        }
        if ((a.type === 'string' || a.type === 'path') && a.pattern !== undefined && !new RegExp('^(?:' + a.pattern + ')$').test(v)) {
          throw bad(a.name, 'does not match ' + a.pattern);
        }
      }
    }
    out[a.name] = v;
  });
  return out;
}

// submitter_allowed: a PC executor's own list; null = nobody, unless the server requires
// per-PC credentials (then every roster PC).
function submitterAllowed_(allowed, submitterPc, credentialsRequired) {
  if (allowed === null || allowed === undefined) return !!credentialsRequired;
  return allowed.indexOf(submitterPc) >= 0;
}

// Canonical JSON: object keys sorted, so equal args give equal text.
function canonJson_(v) {
  if (Array.isArray(v)) return '[' + v.map(canonJson_).join(',') + ']';
  if (v !== null && typeof v === 'object') {
    return '{' + Object.keys(v).sort().map(function (k) { return JSON.stringify(k) + ':' + canonJson_(v[k]); }).join(',') + '}';
  }
  return JSON.stringify(v);
}

// dedup_key: the same (target, command, args) gives the same key.
function jobDedupKey_(target, command, args) {
  return sha256Hex_(canonJson_([target, command, args])).slice(0, 32);
}

// The last 64 KiB (UTF-8) of a string, cut on a code point.
function tailUtf8_(s, maxBytes) {
  if (utf8Len_(s) <= maxBytes) return { text: s, cut: false };
  let n = 0;
  let i = s.length;
  while (i > 0) {
    const c = s.charCodeAt(i - 1);
    const lowSurrogate = c >= 0xDC00 && c <= 0xDFFF && i > 1;
    const w = lowSurrogate ? 4 : c < 0x80 ? 1 : c < 0x800 ? 2 : 3;
    if (n + w > maxBytes) break;
    n += w;
    i -= lowSurrogate ? 2 : 1;
  }
  return { text: s.slice(i), cut: true };
}
