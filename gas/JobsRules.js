// The job rules both sides check, as crates/core/src/job/ (check.rs, policy.rs) words them:
// CommandSpec and args (check_spec, check_args), who may submit (submitter_allowed),
// the dedup key. Pure functions: no Sheets, no clock.

const JOB = {
  H_MS: 30000, NO_HEARTBEAT_MS: 180000, QUEUED_MAX_MS: 7 * 24 * 3600000,
  DEDUP_DEFAULT_MS: 300000, DEDUP_MAX_MS: 24 * 3600000,
  TIME_LIMIT_MIN_MS: 1000, TIME_LIMIT_MAX_MS: 24 * 3600000,
  ARGS_MAX: 20, STRING_DEFAULT_MAX: 200, STRING_HARD_MAX: 4096, POLL_ITEMS_MAX: 500, OFFER_MAX: 20,
  LIST_DEFAULT: 100, LIST_MAX: 500, OUTPUT_MAX_BYTES: 64 * 1024, COMMANDS_MAX: 200, DESCRIPTION_MAX: 1000,
  ARTIFACTS_MAX: 20, ARTIFACT_MAX: 400, PATTERN_MAX: 500, VALUES_MAX: 500, ACTOR_MAX: 100, REASON_MAX: 2000
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

// crates/core/src/job/policy.rs revoked_target_reason / check_target_not_revoked: a revoked PC
// runs no jobs; a submit to it is refused, its queued jobs are cancelled at revocation.
function revokedTargetReason_(target) {
  return target + ' was revoked by the admin: it runs no jobs until it is enrolled again ' +
    '(the admin runs `pcmail roster add ' + target + '` for a join code, then `pcmail init --join CODE` on that PC)';
}

function checkTargetNotRevoked_(target, revoked) {
  if (revoked) throw jobRefused_('target_revoked', revokedTargetReason_(target) + '; nothing was queued');
}

// `path`: relative, / separators, no .. segment, no leading / or drive letter.
function pathProblem_(v) {
  if (v === '') return 'must not be empty';
  if (/[\u0000-\u001F\u007F-\u009F\u2028\u2029]/.test(v)) return 'contains control characters';
  if (v.indexOf('\\') >= 0) return 'must use / as the separator';
  if (v[0] === '/' || /^[A-Za-z]:/.test(v)) return 'must be relative';
  if (v.split('/').indexOf('..') >= 0) return 'must not contain a .. segment';
  return null;
}

// The shape serde would refuse (a wrong type, a missing name or timeLimitMs): field = prefix.
function checkSpecShape_(spec, prefix) {
  const bad = function () { return badField_(prefix, 'not a command spec: name (string), timeLimitMs (integer), args (array of {name, type, …})…'); };
  if (!isObj_(spec) || typeof spec.name !== 'string' || !Number.isSafeInteger(spec.timeLimitMs)) throw bad();
  const optType = function (o, k, t) { return !has_(o, k) || typeof o[k] === t; };
  if (has_(spec, 'args') && !Array.isArray(spec.args)) throw bad();
  (spec.args || []).forEach(function (a) {
    if (!isObj_(a) || typeof a.name !== 'string' || ARG_TYPES.indexOf(a.type) < 0 || !optType(a, 'required', 'boolean') ||
      !optType(a, 'pattern', 'string') || (has_(a, 'maxLen') && !(Number.isSafeInteger(a.maxLen) && a.maxLen >= 0)) ||
      (has_(a, 'min') && !Number.isSafeInteger(a.min)) || (has_(a, 'max') && !Number.isSafeInteger(a.max)) ||
      (has_(a, 'values') && !(Array.isArray(a.values) && a.values.every(function (v) { return typeof v === 'string'; }))) ||
      !optType(a, 'allowDash', 'boolean')) throw bad();
  });
  if (!optType(spec, 'subject', 'string') || !optType(spec, 'readOnly', 'boolean') || !optType(spec, 'chunked', 'boolean') ||
    !optType(spec, 'verify', 'boolean') || !optType(spec, 'description', 'string')) throw bad();
  if (has_(spec, 'artifacts') && !(Array.isArray(spec.artifacts) && spec.artifacts.every(function (v) { return typeof v === 'string'; }))) throw bad();
}

function isArgName_(s) {
  return typeof s === 'string' && /^[A-Za-z][A-Za-z0-9_-]{0,39}$/.test(s);
}

// check_artifact_pattern: a relative path whose only braces are placeholders:
// {command}, {subject}, {ts}, {args} or one of the command's argument names.
function artifactProblem_(p, argNames) {
  if (charCount_(p) > JOB.ARTIFACT_MAX) return 'an artifact pattern is longer than ' + JOB.ARTIFACT_MAX + ' characters';
  const builtins = ['command', 'subject', 'ts', 'args'];
  const re = /\{([^}]*)\}/g;
  let m;
  while ((m = re.exec(p)) !== null) {
    if (builtins.indexOf(m[1]) < 0 && (argNames || []).indexOf(m[1]) < 0) {
      return '{' + m[1] + '} is not a placeholder of artifact patterns ({command}, {subject}, {ts}, {args} or an argument name)';
    }
  }
  const plain = p.replace(/\{[^}]*\}/g, 'x');
  if (plain.indexOf('{') >= 0 || plain.indexOf('}') >= 0) return 'an artifact pattern has a { or } that is not a placeholder';
  return pathProblem_(plain);
}

// check_not_an_option: a string or path value starting with - is refused
// unless its spec allows it (allowDash), since a program reads it as an option.
function optionProblem_(a, s) {
  if (a.allowDash === true || (a.type !== 'string' && a.type !== 'path') || s[0] !== '-') return null;
  const hint = a.type === 'path' ? ' (write ./-name for a file whose name starts with -)' : '';
  return a.name + ' starts with "-", which the command would read as an option' + hint +
    '; its PC\'s owner can allow it for this argument (allow_dash = true, or after a declared "--")';
}

// crates/core/src/job/builtins.rs pc_builtins: the read-only probes every PC executor publishes
// besides its owner's commands (the one exception to the label spelling in a whitelist).
const PC_PROBES = ['_debug_pc', '_debug_sessions', '_debug_leases', '_debug_jobs'];

// check_spec (crates/core job.rs): bad_request with the field inside the spec, prefixed.
// `builtin` lets a name start with _ (the server's own).
function checkJobSpec_(spec, prefix, builtin) {
  checkSpecShape_(spec, prefix || 'spec');
  const f = function (k) { return prefix ? prefix + '.' + k : k; };
  const bad = function (k, msg) { return badField_(f(k), msg); };
  // A PC's built-in probes, as core defines them (read-only, no args, no artifacts), may start with _.
  const pcProbe = PC_PROBES.indexOf(spec.name) >= 0 && spec.readOnly === true && !(spec.args || []).length && !(spec.artifacts || []).length;
  const name = (builtin || pcProbe) && spec.name[0] === '_' ? spec.name.slice(1) : spec.name;
  if (!isValidLabel_(name)) throw bad('name', 'command name ' + JSON.stringify(spec.name) + ' must look like a label (lower-case a-z 0-9 . _ -, max 40, not starting with _)');
  const args = spec.args || [];
  if (args.length > JOB.ARGS_MAX) throw bad('args', 'at most ' + JOB.ARGS_MAX + ' arguments');
  args.forEach(function (a, i) {
    const af = function (k) { return 'args[' + i + '].' + k; };
    if (!isArgName_(a.name)) throw bad(af('name'), 'argument name ' + JSON.stringify(a.name) + ': a letter, then letters, digits, _ or -, max 40');
    if (args.slice(0, i).some(function (b) { return b.name === a.name; })) throw bad(af('name'), 'argument ' + JSON.stringify(a.name) + ' is declared twice');
    if (has_(a, 'pattern')) {
      if (a.type !== 'string') throw bad(af('pattern'), 'pattern is only for string arguments');
      if (charCount_(a.pattern) > JOB.PATTERN_MAX) throw bad(af('pattern'), 'pattern is longer than ' + JOB.PATTERN_MAX + ' characters');
      try { new RegExp('^(?:' + a.pattern + ')$'); } catch (e) { throw bad(af('pattern'), 'pattern is not a regex: ' + e.message); }
    }
    if (has_(a, 'maxLen')) {
      if (a.type !== 'string' && a.type !== 'path') throw bad(af('maxLen'), 'maxLen is only for string and path arguments');
      if (a.maxLen < 1 || a.maxLen > JOB.STRING_HARD_MAX) throw bad(af('maxLen'), 'maxLen must be 1..' + JOB.STRING_HARD_MAX);
    }
    if (a.allowDash === true && a.type !== 'string' && a.type !== 'path') throw bad(af('allowDash'), 'allowDash is only for string and path arguments');
    if ((has_(a, 'min') || has_(a, 'max')) && a.type !== 'int') throw bad(af('min'), 'min and max are only for int arguments');
    if (has_(a, 'min') && has_(a, 'max') && a.min > a.max) throw bad(af('min'), 'min must not be above max');
    if (!has_(a, 'values')) {
      if (a.type === 'enum') throw bad(af('values'), 'an enum argument needs its values');
    } else {
      if (a.type !== 'enum' && a.type !== 'checkout') throw bad(af('values'), 'values are only for enum and checkout arguments');
      if (a.values.length > JOB.VALUES_MAX) throw bad(af('values'), 'at most ' + JOB.VALUES_MAX + ' values');
      a.values.forEach(function (v) {
        if (v === '') throw bad(af('values'), 'a value must not be empty');
        checkText_(f(af('values')), v, JOB.STRING_DEFAULT_MAX, false);
      });
    }
  });
  if (has_(spec, 'subject') && !args.some(function (a) { return a.name === spec.subject; })) {
    throw bad('subject', 'subject ' + JSON.stringify(spec.subject) + ' is not one of the command\'s arguments');
  }
  if (spec.timeLimitMs < JOB.TIME_LIMIT_MIN_MS || spec.timeLimitMs > JOB.TIME_LIMIT_MAX_MS) throw bad('timeLimitMs', 'timeLimitMs must be 1 second to 24 hours');
  const arts = spec.artifacts || [];
  if (arts.length > JOB.ARTIFACTS_MAX) throw bad('artifacts', 'at most ' + JOB.ARTIFACTS_MAX + ' artifact patterns');
  const argNames = args.map(function (a) { return a.name; });
  arts.forEach(function (p, i) {
    const why = artifactProblem_(p, argNames);
    if (why) throw bad('artifacts[' + i + ']', why);
  });
  checkText_(f('description'), spec.description || '', JOB.DESCRIPTION_MAX, true);
}

// The normalised spec (defaults filled), as stored and answered.
function normSpec_(spec) {
  return {
    name: spec.name,
    args: (spec.args || []).map(function (a) {
      const o = { name: a.name, type: a.type, required: a.required === true };
      ['pattern', 'maxLen', 'min', 'max', 'values'].forEach(function (k) { if (a[k] !== undefined && a[k] !== null) o[k] = a[k]; });
      if (a.allowDash === true) o.allowDash = true;
      return o;
    }),
    subject: spec.subject === undefined ? null : spec.subject, timeLimitMs: spec.timeLimitMs,
    artifacts: (spec.artifacts || []).slice(), readOnly: spec.readOnly === true, chunked: spec.chunked === true,
    verify: spec.verify === true, description: spec.description || ''
  };
}

// check_args (crates/core job.rs): the args fit the spec. Returns them in spec order;
// int and bool also take their string forms ("42", "true"). Throws job_refused /
// bad_argument with field args.<name> (`args` for a name that is not an argument name).
function checkJobArgs_(spec, args) {
  const bad = function (name, msg) { return jobRefused_('bad_argument', msg, 'args.' + name); };
  Object.keys(args).forEach(function (k) {
    if (spec.args.some(function (a) { return a.name === k; })) return;
    const shown = Array.from(k).slice(0, 40).join('');
    const names = spec.args.map(function (a) { return a.name; }).join(', ');
    throw jobRefused_('bad_argument', JSON.stringify(shown) + ' is not an argument of ' + spec.name +
      (names ? ' (it takes: ' + names + ')' : ' (it takes none)'), isArgName_(k) ? 'args.' + shown : 'args');
  });
  const out = {};
  spec.args.forEach(function (a) {
    const n = a.name;
    if (!Object.prototype.hasOwnProperty.call(args, n) || args[n] === null) {
      if (a.required) throw bad(n, spec.name + ' needs argument ' + JSON.stringify(n));
      return;
    }
    const v = args[n];
    const str = function () { if (typeof v !== 'string') throw bad(n, n + ' must be a string'); return v; };
    const text = function (s, max) {
      if (charCount_(s) > max) throw bad(n, n + ' is longer than ' + max + ' characters');
      if (/[\u0000-\u001F\u007F-\u009F\u2028\u2029]/.test(s)) throw bad(n, n + ' contains control characters');
    };
    const maxLen = Math.min(has_(a, 'maxLen') ? a.maxLen : JOB.STRING_DEFAULT_MAX, JOB.STRING_HARD_MAX);
    switch (a.type) {
      case 'string': {
        const s = str();
        text(s, maxLen);
        const dash = optionProblem_(a, s);
        if (dash) throw bad(n, dash);
        if (has_(a, 'pattern') && !new RegExp('^(?:' + a.pattern + ')$').test(s)) throw bad(n, n + ' does not match the pattern ' + a.pattern);
        out[n] = s;
        break;
      }
      case 'int': {
        let x = null;
        if (typeof v === 'number' && Number.isSafeInteger(v)) x = v;
        else if (typeof v === 'string' && v.length <= 20 && /^-?[0-9]+$/.test(v) && Number.isSafeInteger(Number(v))) x = Number(v);
        if (x === null) throw bad(n, n + ' must be an integer');
        if ((has_(a, 'min') && x < a.min) || (has_(a, 'max') && x > a.max)) {
          throw bad(n, n + ' must be ' + (has_(a, 'min') ? a.min : '') + '..' + (has_(a, 'max') ? a.max : ''));
        }
        out[n] = x;
        break;
      }
      case 'bool':
        if (v === true || v === 'true') out[n] = true;
        else if (v === false || v === 'false') out[n] = false;
        else throw bad(n, n + ' must be true or false');
        break;
      case 'enum': case 'checkout': {
        const s = str();
        text(s, JOB.STRING_HARD_MAX);
        const values = a.values || [];
        if (values.indexOf(s) < 0) {
          throw bad(n, n + ': ' + JSON.stringify(s) + ' is not a published ' + (a.type === 'checkout' ? 'checkout' : 'value') + ' (one of: ' + values.join(', ') + ')');
        }
        out[n] = s;
        break;
      }
      case 'path': {
        const s = str();
        text(s, maxLen);
        const why = pathProblem_(s);
        if (why) throw bad(n, n + ' ' + why);
        const dash = optionProblem_(a, s);
        if (dash) throw bad(n, dash);
        out[n] = s;
        break;
      }
      default: throw bad(n, 'unknown type ' + a.type);
    }
  });
  return out;
}

// submitter_allowed: a PC executor's own list; null = nobody, unless the server requires
// per-PC credentials (then every roster PC).
function submitterAllowed_(allowed, submitterPc, credentialsRequired) {
  if (allowed === null || allowed === undefined) return !!credentialsRequired;
  return allowed.indexOf(submitterPc) >= 0;
}

// rules::sanitize_actor: who, as a timeline shows it.
function sanitizeActor_(by) {
  const s = Array.from(by).filter(function (c) { return /[A-Za-z0-9._\-\/@:]/.test(c); }).slice(0, JOB.ACTOR_MAX).join('');
  return s || 'unknown';
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
  return sha256Hex_(canonJson_([target, command, args]));
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
