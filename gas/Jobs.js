// Jobs (docs/protocol.md "Jobs"): a command queue that never goes silent.
// - Jobs tab: live jobs (queued, running, ended but not yet told to every submitter);
//   the sweep moves the rest to JobsArchive, so the poll's cost stays flat however many
//   jobs ever finished. Narrow index columns (q, cx, tell) let ONE TextFinder find what
//   a poll needs; the rows are read with ONE getValues of their span.
// - JobWhitelists tab: each PC's published CommandSpecs; its hash also sits in the
//   Script Property JOB_WL_<label>, so a poll reads it from the cached Properties view.
// Every op runs inside the request's short script lock, except job.submit, which takes
// the lock twice around a built-in run (a probe or the sweep), never during it.

const JOB_PARTS = 4;          // j1..j4 / w1..w4
const JOB_PART_CHARS = 45000; // under Sheets' 50,000 characters a cell
const JOB_WL_PROP = 'JOB_WL_';
const JOB_ALIAS_KEY = 'pcmail:jobalias:'; // a deduped submit's jobId → the job it joined
const JOB_ALIAS_S = 21600;
const JOB_ARCHIVE_SCAN = 2000; // job.list reads this many of the newest archive rows
const JOB_FINISHED_MAX = 100;  // finished jobs told per poll (the rest in the next)

// ---- parsing (crates/core job.rs, field for field) -----------------------------------

function parseJobSubmitter_(v) {
  const s = lobj_(v, 'submitter');
  const out = { pc: lreqStr_(s, 'pc', 'submitter.pc'), session: lreqStr_(s, 'session', 'submitter.session'),
    name: loptStr_(s, 'name', 'submitter.name') };
  if (!isValidLabel_(out.pc)) throw badField_('submitter.pc', 'submitter.pc must be a roster label');
  checkSessionId_('submitter.session', out.session);
  if (out.name !== null) checkSingleLine_('submitter.name', out.name, LEASE.SESSION_MAX, true);
  return out;
}

function reqJobId_(a, k) {
  const id = lreqStr_(a, k, k);
  if (!isJobId_(id)) throw badField_(k, k + ' must look like job-<ms>-<8 lower hex>');
  return id;
}

function checkActor_(field, s) {
  checkSingleLine_(field, s, JOB.ACTOR_MAX, true);
}

// serde's reading of JobResult (crates/core job.rs): `ran` required, the rest typed with
// defaults; any wrong type is bad_request on field `result`. The output keeps its last 64 KiB.
function parseJobResult_(v) {
  if (!isObj_(v)) throw badField_('result', '"result" must be an object');
  const bad = function (k, want) { return badField_('result', 'result: ' + k + ' must be ' + want); };
  const isInt = Number.isSafeInteger;
  const present = function (k) { return Object.prototype.hasOwnProperty.call(v, k) && v[k] !== undefined; };
  if (typeof v.ran !== 'boolean') throw bad('ran', 'true or false');
  const optInt = function (k) { if (!present(k) || v[k] === null) return null; if (!isInt(v[k])) throw bad(k, 'an integer or null'); return v[k]; };
  const int = function (k) { if (!present(k)) return 0; if (!isInt(v[k])) throw bad(k, 'an integer'); return v[k]; };
  const str = function (k) { if (!present(k)) return ''; if (typeof v[k] !== 'string') throw bad(k, 'a string'); return v[k]; };
  const optStr = function (k) { if (!present(k) || v[k] === null) return null; if (typeof v[k] !== 'string') throw bad(k, 'a string or null'); return v[k]; };
  const bool = function (k) { if (!present(k)) return false; if (typeof v[k] !== 'boolean') throw bad(k, 'true or false'); return v[k]; };
  const strs = function (k) {
    if (!present(k)) return [];
    if (!Array.isArray(v[k]) || v[k].some(function (x) { return typeof x !== 'string'; })) throw bad(k, 'an array of strings');
    return v[k].slice();
  };
  let verify = null;
  if (present('verify') && v.verify !== null) {
    const w = v.verify;
    if (!isObj_(w) || typeof w.ok !== 'boolean' || (has_(w, 'exit') && !isInt(w.exit)) || (has_(w, 'output') && typeof w.output !== 'string')) {
      throw bad('verify', '{ok, exit, output}');
    }
    verify = { ok: w.ok, exit: has_(w, 'exit') ? w.exit : null, output: tailUtf8_(has_(w, 'output') ? w.output : '', JOB.OUTPUT_MAX_BYTES).text };
  }
  let chunks = null;
  if (present('chunks') && v.chunks !== null) {
    const c = v.chunks;
    if (!isObj_(c) || ['done', 'total', 'failed', 'skipped'].some(function (k) { return !isInt(c[k]); })) throw bad('chunks', '{done, total, failed, skipped}');
    chunks = { done: c.done, total: c.total, failed: c.failed, skipped: c.skipped };
  }
  const cut = tailUtf8_(str('output'), JOB.OUTPUT_MAX_BYTES);
  return {
    ran: v.ran, exit: optInt('exit'), durationMs: int('durationMs'), output: cut.text, truncated: bool('truncated') || cut.cut,
    artifacts: strs('artifacts'), reused: strs('reused'), readBack: optStr('readBack'), verify: verify, chunks: chunks,
    data: present('data') ? v.data : null
  };
}

// parse_report, check for check (state, result, jobId, runner, reason).
function parseJobReport_(a) {
  const state = lreqStr_(a, 'state', 'state');
  if (['ok', 'failed', 'cancelled', 'timed_out'].indexOf(state) < 0) throw badField_('state', 'a report\'s state must be ok, failed, cancelled or timed_out');
  const result = parseJobResult_(a.result);
  const r = { jobId: reqJobId_(a, 'jobId'), runner: lreqStr_(a, 'runner', 'runner'), state: state,
    result: result, reason: loptStr_(a, 'reason', 'reason') };
  checkActor_('runner', r.runner);
  if (r.reason !== null) checkText_('reason', r.reason, JOB.REASON_MAX, true);
  return r;
}

function parseJobArgs_(op, a) {
  switch (op) {
    case 'job.submit': {
      const sub = lobj_(has_(a, 'submitter') ? a.submitter : null, 'submitter');
      const raw = { jobId: lreqStr_(a, 'jobId', 'jobId'), target: lreqStr_(a, 'target', 'target'), command: lreqStr_(a, 'command', 'command') };
      let args = {};
      if (has_(a, 'args')) {
        if (!isObj_(a.args)) throw badField_('args', '"args" must be an object');
        Object.keys(a.args).forEach(function (k) { if (a.args[k] !== null) args[k] = a.args[k]; });
      }
      const force = optBool_(a, 'force') === true;
      const rerunOf = loptStr_(a, 'rerunOf', 'rerunOf');
      const submitter = { pc: lreqStr_(sub, 'pc', 'submitter.pc'), session: lreqStr_(sub, 'session', 'submitter.session'),
        name: loptStr_(sub, 'name', 'submitter.name') };
      const win = loptInt_(a, 'dedupWindowMs', 'dedupWindowMs');
      // check_submit
      if (!isJobId_(raw.jobId)) throw badField_('jobId', 'jobId must look like job-<ms>-<8 lower hex>');
      if (raw.target !== '@server' && !isValidLabel_(raw.target)) throw badField_('target', 'target must be a roster label or @server');
      if (!isValidLabel_(raw.command) && !(raw.command[0] === '_' && isValidLabel_(raw.command.slice(1)))) {
        throw badField_('command', 'command must look like a label (lower-case a-z 0-9 . _ -, max 40)');
      }
      if (Object.keys(a.args || {}).length > JOB.ARGS_MAX) throw badField_('args', 'at most ' + JOB.ARGS_MAX + ' arguments');
      if (rerunOf !== null && !isJobId_(rerunOf)) throw badField_('rerunOf', 'rerunOf must look like job-<ms>-<8 lower hex>');
      if (!isValidLabel_(submitter.pc)) throw badField_('submitter.pc', 'submitter.pc must be a roster label');
      checkSessionId_('submitter.session', submitter.session);
      if (submitter.name !== null) checkSingleLine_('submitter.name', submitter.name, LEASE.SESSION_MAX, true);
      if (win !== null && (win < 0 || win > JOB.DEDUP_MAX_MS)) throw badField_('dedupWindowMs', 'dedupWindowMs must be 0 ms to 1 day');
      return { jobId: raw.jobId, target: raw.target, command: raw.command, args: args, force: force, rerunOf: rerunOf,
        submitter: submitter, dedupWindowMs: win === null ? JOB.DEDUP_DEFAULT_MS : win };
    }
    case 'job.status': return { jobId: reqJobId_(a, 'jobId') };
    case 'job.list': {
      const target = loptStr_(a, 'target', 'target');
      if (target !== null && target !== '@server' && !isValidLabel_(target)) throw badField_('target', 'target must be a label or @server');
      const state = loptStr_(a, 'state', 'state');
      if (state !== null && JOB_STATES.indexOf(state) < 0) throw badField_('state', 'state must be one of ' + JOB_STATES.join(', '));
      let limit = loptInt_(a, 'limit', 'limit');
      if (limit === null) limit = JOB.LIST_DEFAULT;
      if (limit < 1 || limit > JOB.LIST_MAX) throw badField_('limit', 'limit must be 1..' + JOB.LIST_MAX);
      return { target: target, state: state, mine: optBool_(a, 'mine') === true, limit: limit };
    }
    case 'job.cancel': {
      const c = { jobId: reqJobId_(a, 'jobId'), by: lreqStr_(a, 'by', 'by'), reason: loptStr_(a, 'reason', 'reason') };
      checkActor_('by', c.by);
      if (c.reason !== null) checkText_('reason', c.reason, JOB.REASON_MAX, true);
      return c;
    }
    case 'job.start': {
      const s = { jobId: reqJobId_(a, 'jobId'), runner: lreqStr_(a, 'runner', 'runner'), startedAt: lreqInt_(a, 'startedAt', 'startedAt') };
      checkActor_('runner', s.runner);
      if (s.startedAt < 0) throw badField_('startedAt', 'startedAt must be a time in ms');
      return s;
    }
    case 'job.report': return parseJobReport_(a);
    default: return null;
  }
}

// The poll's `job` argument: lists of the request's shape, each item parsed alone.
function parsePollJob_(v) {
  const m = lobj_(v, 'job');
  const list = function (k) {
    const field = 'job.' + k;
    if (!has_(m, k)) return [];
    if (!Array.isArray(m[k])) throw badField_(field, '"' + field + '" must be an array');
    if (m[k].length > JOB.POLL_ITEMS_MAX) throw badField_(field, 'at most ' + JOB.POLL_ITEMS_MAX + ' items in "' + field + '"');
    return m[k];
  };
  let whitelist = null;
  // A whitelist the server refuses is refused on its own (job.errors, list `whitelist`):
  // the PC's heartbeats, reports and mail still go through.
  if (has_(m, 'whitelist')) {
    try {
      whitelist = parsePollWhitelist_(m.whitelist);
    } catch (err) {
      if (!err || !err.pcmail) throw err;
      whitelist = { bad: { list: 'whitelist', index: 0, code: err.pcmail.code,
        field: err.pcmail.extra ? err.pcmail.extra.field : null, message: err.pcmail.message } };
    }
  }
  const take = has_(m, 'take') ? optBool_(m, 'take') : false;
  // A malformed heartbeat id is left out like an unknown one.
  const running = list('running').filter(isJobId_);
  const reports = list('reports').map(function (x, index) {
    try {
      if (!isObj_(x)) throw badField_('job.reports', 'each report must be an object');
      return parseJobReport_(x);
    } catch (err) {
      if (!err || !err.pcmail) throw err;
      return { bad: { list: 'reports', index: index, jobId: isObj_(x) && typeof x.jobId === 'string' ? Array.from(x.jobId).slice(0, 60).join('') : null,
        code: err.pcmail.code, field: err.pcmail.extra ? err.pcmail.extra.field : null, message: err.pcmail.message } };
    }
  });
  return { whitelist: whitelist, take: take, running: running, reports: reports };
}

// job::parse_whitelist + check_whitelist.
function parsePollWhitelist_(wv) {
  {
    const w = lobj_(wv, 'job.whitelist');
    const hash = lreqStr_(w, 'hash', 'job.whitelist.hash');
    checkSingleLine_('job.whitelist.hash', hash, 128, true);
    if (!Array.isArray(w.commands) || w.commands.length > JOB.COMMANDS_MAX) throw badField_('job.whitelist.commands', '"commands" must be an array of at most ' + JOB.COMMANDS_MAX);
    w.commands.forEach(function (c, i) { checkSpecShape_(c, 'job.whitelist.commands[' + i + ']'); });
    const commands = w.commands.map(function (c, i) {
      checkJobSpec_(c, 'job.whitelist.commands[' + i + ']');
      if (w.commands.slice(0, i).some(function (d) { return d.name === c.name; })) {
        throw badField_('job.whitelist.commands[' + i + '].name', 'command ' + JSON.stringify(c.name) + ' is published twice');
      }
      return normSpec_(c);
    });
    const names = function (k) {
      const field = 'job.whitelist.' + k;
      if (!has_(w, k)) return null;
      const x = w[k];
      if (!Array.isArray(x) || x.length > JOB.VALUES_MAX) throw badField_(field, '"' + k + '" must be an array of at most ' + JOB.VALUES_MAX + ' names');
      x.forEach(function (s) {
        if (typeof s !== 'string' || s === '' || charCount_(s) > JOB.STRING_DEFAULT_MAX || /[\u0000-\u001F\u007F-\u009F\u2028\u2029]/.test(s)) {
          throw badField_(field, '"' + k + '" must be an array of names');
        }
      });
      return x.slice();
    };
    const allowed = names('allowedSubmitters');
    return { hash: hash, commands: commands, allowedSubmitters: allowed, checkouts: names('checkouts') || [] };
  }
}

// ---- storage ---------------------------------------------------------------------------

const JCOL = { id: 1, q: 2, cx: 3, tell: 4, target: 5, state: 6, dedupKey: 7, submittedAt: 8, endedAt: 9, j1: 10 };
const JOB_NCOL = 13;

function splitParts_(s) {
  const parts = [];
  for (let i = 0; i < JOB_PARTS; i++) parts.push(s.slice(i * JOB_PART_CHARS, (i + 1) * JOB_PART_CHARS));
  if (s.length > JOB_PARTS * JOB_PART_CHARS) throw new Error('a job is too large to store (' + s.length + ' characters)');
  return parts;
}

// A job whose JSON would not fit loses the head of its output first.
function jobJson_(j) {
  let s = JSON.stringify(j);
  while (s.length > JOB_PARTS * JOB_PART_CHARS && j.result && j.result.output.length > 1000) {
    j.result.output = j.result.output.slice(Math.floor(j.result.output.length / 2));
    j.result.truncated = true;
    s = JSON.stringify(j);
  }
  return s;
}

function jobWaits_(j) {
  return j.state === 'queued' || (j.state === 'running' && j._.awaiting === true);
}

function jobToRow_(j) {
  return [j.id, jobWaits_(j) ? j.target : '', j.state === 'running' && j.cancelRequested ? j.target : '',
    j._.tell.length ? ' ' + j._.tell.join(' ') + ' ' : '', j.target, j.state, j._.dedupKey, String(j.submittedAt),
    j.endedAt === null ? '' : String(j.endedAt)].concat(splitParts_(jobJson_(j)));
}

function rowToJob_(r) {
  return JSON.parse(r.slice(JCOL.j1 - 1, JCOL.j1 - 1 + JOB_PARTS).join(''));
}

// Wire form, keys as crates/core job.rs orders them; the timeline on request (true), or
// credentialsRequired for an offered job ('offered').
function jobView_(j, withTimeline) {
  const out = {
    id: j.id, target: j.target, command: j.command, args: j.args, subject: j.subject,
    submitter: { pc: j.submitter.pc, session: j.submitter.session, name: j.submitter.name },
    force: j.force, rerunOf: j.rerunOf, state: j.state, submittedAt: j.submittedAt, startedAt: j.startedAt,
    runner: j.runner, heartbeatAt: j.heartbeatAt, endedAt: j.endedAt, runStartedAt: j.runStartedAt,
    timeLimitMs: j.timeLimitMs, cancelRequested: j.cancelRequested, joined: j.joined, result: j.result,
    reason: j.reason
  };
  if (withTimeline === 'offered') out.credentialsRequired = j._.credentialsRequired === true; // the PC re-checks with it
  else if (withTimeline) out.timeline = j.timeline.map(function (e) { return { at: e.at, state: e.state, by: e.by, reason: e.reason }; });
  return out;
}

// Row numbers in `tabName` whose id column is one of `ids`.
function jobRowsById_(sh, ids) {
  return findRows_(sh, JCOL.id, ids);
}

// id → {where, row, job, vals} for the given ids, live tab first, then the archive.
function jobLocate_(ids) {
  const out = {};
  const want = ids.filter(function (id, i) { return ids.indexOf(id) === i; });
  ['Jobs', 'JobsArchive'].forEach(function (name) {
    const rest = want.filter(function (id) { return !out[id]; });
    if (!rest.length) return;
    const sh = tab_(name);
    const rows = jobRowsById_(sh, rest);
    const vals = readRowsAt_(sh, rows, JOB_NCOL);
    rows.forEach(function (row) {
      const v = vals[row];
      if (out[v[0]] || rest.indexOf(v[0]) < 0) return;
      out[v[0]] = { where: name, row: row, job: rowToJob_(v) };
    });
  });
  return out;
}

// Writes changed jobs back: live rows in ONE setValues over their span when `span` holds
// every row in between (read under the same lock), else row by row.
function jobSave_(locs, span) {
  locs = locs.filter(function (l, i) { return l && locs.indexOf(l) === i; });
  ['Jobs', 'JobsArchive'].forEach(function (name) {
    const mine = locs.filter(function (l) { return l.where === name; }).sort(function (a, b) { return a.row - b.row; });
    if (!mine.length) return;
    const sh = tab_(name);
    const lo = mine[0].row;
    const hi = mine[mine.length - 1].row;
    const byRow = {};
    mine.forEach(function (l) { byRow[l.row] = jobToRow_(l.job); });
    if (name === 'Jobs' && span && span.lo <= lo && span.lo + span.vals.length - 1 >= hi) {
      const out = [];
      for (let r = lo; r <= hi; r++) out.push(byRow[r] || span.vals[r - span.lo]);
      writeText_(sh, lo, 1, out);
      return;
    }
    mine.forEach(function (l) { writeText_(sh, l.row, 1, [byRow[l.row]]); });
  });
}

function jobAppend_(j) {
  const sh = tab_('Jobs');
  const row = appendText_(sh, [jobToRow_(j)]);
  return { where: 'Jobs', row: row, job: j };
}

// ---- state changes ---------------------------------------------------------------------

function jobStep_(j, state, at, by, reason) {
  j.state = state;
  j.timeline.push({ at: Math.max(at, j.timeline.length ? j.timeline[j.timeline.length - 1].at : at), state: state, by: by, reason: reason === undefined ? null : reason });
}

// Ends a job: endedAt, the timeline entry, every submitting or joined PC owed the finish.
function jobEnd_(j, state, now, by, reason, result) {
  jobStep_(j, state, now, by, reason);
  j.endedAt = j.timeline[j.timeline.length - 1].at; // never before the previous entry
  j.reason = reason === undefined ? null : reason;
  if (result !== undefined) j.result = result;
  j._.awaiting = false;
  j._.tell = j._.subs.slice();
}

function jobVisible_(j, pc) {
  return j.target === pc || j.submitter.pc === pc || j._.subs.indexOf(pc) >= 0;
}

function forbiddenJob_(j, who) {
  return pcErr_('forbidden', 'only ' + who + ' may do that to ' + j.id);
}

function jobNotFound_(id) {
  return pcErr_('not_found', 'no job ' + id);
}

// job.start's rule (also the gas worker's), as crates/server ops/job.rs: queued → running;
// the same start again (same runner, same startedAt) a no-op; a chunked job's next run
// stamps runStartedAt; anything else conflict. The executor's clock is clamped between
// the previous timeline entry and now.
function jobStart_(j, runner, startedAt, now) {
  const last = j.timeline.length ? j.timeline[j.timeline.length - 1].at : j.submittedAt;
  const at = Math.min(Math.max(startedAt, last), Math.max(now, last));
  const by = sanitizeActor_(runner);
  if (j.state === 'queued') {
    jobStep_(j, 'running', at, by, null);
    j.startedAt = at;
    j.runStartedAt = at;
    j.runner = runner;
    j.heartbeatAt = now;
    j._.run = 1;
    j._.runSentAt = startedAt;
    j._.awaiting = false;
    return true;
  }
  if (j.state === 'running' && j.runner === runner && j._.runSentAt === startedAt && !j._.awaiting) return false;
  if (j.state === 'running' && j._.chunked && !j.cancelRequested) {
    j._.run = (j._.run || 1) + 1;
    jobStep_(j, 'running', at, by, 'run ' + j._.run);
    j.runStartedAt = at;
    j.runner = runner;
    j.heartbeatAt = now;
    j._.runSentAt = startedAt;
    j._.awaiting = false;
    return true;
  }
  const why = j.state !== 'running' ? 'it is ' + j.state
    : j.cancelRequested ? 'running with a cancel requested' : 'already running under ' + j.runner;
  throw pcErr_('conflict', 'job ' + j.id + ' cannot start: ' + why + '; do not run it');
}

// job.report's rule. Returns true when the job changed.
function jobReport_(j, r, now) {
  const aged = jobAsRead_(j, now); // a run already timed out by the clock is ended before the report
  if (jobEnded_(j.state)) {
    // crates/core job.rs late_report_allowed: the server timed it out for silence, not
    // knowing how it ended; the runner that ran it, back, reports the real exit code.
    if (j.state === 'timed_out' && j.reason === JOB_REASON_NO_HEARTBEAT && j.runner === r.runner &&
        r.result && r.result.ran && r.result.exit !== null && r.result.exit !== undefined &&
        (r.state === 'ok' || r.state === 'failed' || r.state === 'timed_out')) {
      const reason = r.reason ? r.reason + ' (' + JOB_LATE_REPORT_NOTE + ')' : JOB_LATE_REPORT_NOTE;
      jobStep_(j, r.state, now, sanitizeActor_(r.runner), reason);
      j.endedAt = j.timeline[j.timeline.length - 1].at;
      j.reason = reason;
      j.result = r.result;
      j._.tell = j._.subs.slice();
      return true;
    }
    return aged;
  }
  if (j.state === 'queued' && r.result.ran) {
    throw pcErr_('conflict', j.id + ' was never started: a report from queued must have result.ran false');
  }
  if (j.state === 'running' && j.runner !== null && j.runner !== r.runner) {
    throw pcErr_('conflict', j.id + ' runs under ' + j.runner + ', not ' + r.runner);
  }
  jobEnd_(j, r.state, now, sanitizeActor_(r.runner), r.reason, r.result);
  return true;
}

// ---- ops ---------------------------------------------------------------------------------

// What a submit sent (raw args): a retry with the same jobId must send the same.
function submitKey_(a) {
  return sha256Hex_(canonJson_([a.target, a.command, a.args, a.force, a.rerunOf, a.submitter.pc, a.submitter.session]));
}

// The spec of `command` on `target` and whether the submitter may use it; throws job_refused.
function jobSpecFor_(a, credentialsRequired) {
  if (a.target === '@server') {
    const spec = serverCommandSpec_(a.command); // JobsServer.js
    if (!spec) throw jobRefused_('not_whitelisted', a.command + ' is not a command of @server (' + serverCommandNames_().join(', ') + ')');
    const args = checkJobArgs_(spec, a.args);
    if (spec.allowedSubmitters && spec.allowedSubmitters.indexOf(a.submitter.pc) < 0) {
      throw jobRefused_('submitter_not_allowed', a.submitter.pc + ' may not submit ' + a.command + ' to @server');
    }
    return { spec: spec, args: args };
  }
  const wl = readWhitelist_(a.target);
  if (!wl) throw jobRefused_('no_executor', a.target + ' never published a whitelist (is its executor running?)');
  // A checkout argument takes only its own `values` (the PC fills them), as in crates/core.
  const spec = wl.commands.filter(function (c) { return c.name === a.command; })[0];
  if (!spec) throw jobRefused_('not_whitelisted', a.command + ' is not whitelisted on ' + a.target + ' (' + wl.commands.map(function (c) { return c.name; }).join(', ') + ')');
  const args = checkJobArgs_(spec, a.args);
  if (!submitterAllowed_(wl.allowedSubmitters, a.submitter.pc, credentialsRequired)) {
    throw jobRefused_('submitter_not_allowed', a.submitter.pc + ' is not allowed to submit jobs to ' + a.target +
      (wl.allowedSubmitters === null ? ' (its allowed_submitters is empty and the server accepts the shared token)' : ''));
  }
  return { spec: spec, args: args };
}

// The newest job with this dedup key that a submit joins: queued or running, or ended
// ok/failed within the window. Live rows first, then the newest archived one.
function dedupCandidate_(key, now, windowMs) {
  const fits = function (j) {
    if (j.state === 'queued' || j.state === 'running') return true;
    return (j.state === 'ok' || j.state === 'failed') && j.endedAt !== null && j.endedAt > now - windowMs;
  };
  const live = tab_('Jobs');
  const rows = findRows_(live, JCOL.dedupKey, [key]);
  const vals = readRowsAt_(live, rows, JOB_NCOL);
  let best = null;
  rows.forEach(function (row) {
    const j = rowToJob_(vals[row]);
    if (!fits(j)) return;
    const rank = jobEnded_(j.state) ? j.endedAt : Infinity;
    if (!best || rank >= best.rank) best = { rank: rank, loc: { where: 'Jobs', row: row, job: j } }; // the newest
  });
  if (best) return best.loc;
  if (!windowMs) return null;
  const arch = tab_('JobsArchive');
  const arows = findRows_(arch, JCOL.dedupKey, [key]);
  if (!arows.length) return null;
  const row = arows[arows.length - 1];
  const j = rowToJob_(readText_(arch, row, 1, 1, JOB_NCOL)[0]);
  return fits(j) ? { where: 'JobsArchive', row: row, job: j } : null;
}

function aliasOf_(jobId) {
  try { return CacheService.getScriptCache().get(JOB_ALIAS_KEY + jobId); } catch (e) { return null; }
}

// Phase 1 of a submit, under the lock: idempotency, the whitelist, dedup, the new row.
function jobSubmitLocked_(req, now) {
  const a = req.args;
  const key0 = submitKey_(a);
  const alias = aliasOf_(a.jobId); // "jobId|submitKey" of a deduped submit
  const aliasId = alias ? alias.split('|')[0] : null;
  const known = jobLocate_(aliasId ? [a.jobId, aliasId] : [a.jobId]);
  const mine = known[a.jobId] || (aliasId && known[aliasId]) || null;
  if (mine) {
    const stored = known[a.jobId] ? mine.job._.submitKey : alias.split('|')[1];
    if (stored !== key0) throw pcErr_('duplicate_id', 'job id ' + a.jobId + ' was used for another submit; make a fresh id');
    return { answer: { deduped: mine.job.id !== a.jobId, job: jobView_(mine.job, true) } };
  }
  // A revoked PC cannot poll: its jobs would only wait.
  if (a.target !== '@server') checkTargetNotRevoked_(a.target, !!prop_(REVOKED_PREFIX + a.target));
  const credentialsRequired = requireCredentialsOn_();
  const found = jobSpecFor_(a, credentialsRequired);
  const spec = found.spec;
  const key = jobDedupKey_(a.target, a.command, found.args);
  // @server built-ins are never joined: each submit runs (a probe answers what is true now).
  if (!a.force && !spec.builtin) {
    const dup = dedupCandidate_(key, now, a.dedupWindowMs);
    if (dup) {
      dup.job.joined += 1;
      // The joining PC may see the job and, unless it already ended (then this answer tells it), hears of its end.
      if (dup.job._.subs.indexOf(a.submitter.pc) < 0) dup.job._.subs.push(a.submitter.pc);
      jobSave_([dup]);
      try { CacheService.getScriptCache().put(JOB_ALIAS_KEY + a.jobId, dup.job.id + '|' + key0, JOB_ALIAS_S); } catch (e) { /* a retry joins again */ }
      return { answer: { deduped: true, job: jobView_(dup.job, true) } };
    }
  }
  const j = {
    id: a.jobId, target: a.target, command: a.command, args: found.args,
    subject: spec.subject ? String(found.args[spec.subject] === undefined ? '' : found.args[spec.subject]) : '',
    submitter: a.submitter, force: a.force, rerunOf: a.rerunOf, state: 'queued', submittedAt: now,
    startedAt: null, runner: null, heartbeatAt: null, endedAt: null, runStartedAt: null, timeLimitMs: spec.timeLimitMs,
    cancelRequested: false, joined: 0, result: null, reason: null,
    timeline: [{ at: now, state: 'queued', by: leaseActor_(a.submitter), reason: null }],
    _: { dedupKey: key, submitKey: key0, subs: [a.submitter.pc], tell: [], chunked: spec.chunked, readOnly: spec.readOnly,
      credentialsRequired: credentialsRequired, run: 0, awaiting: false, builtin: !!spec.builtin }
  };
  if (spec.builtin) {
    jobStart_(j, 'server', now, now);
    jobAppend_(j);
    return { run: spec, job: j };
  }
  jobAppend_(j);
  return { answer: { deduped: false, job: jobView_(j, true) } };
}

// Unlocked op: a built-in runs between two short locks (the sweep takes its own).
function opJobSubmit_(req, now) {
  const a = req.args;
  const pcs = readRosterOrFail_();
  rosterMember_(pcs, req.pc);
  if (a.submitter.pc !== req.pc) {
    throw pcErr_('forbidden', 'submitter.pc ' + JSON.stringify(a.submitter.pc) + ' is not the caller ' + JSON.stringify(req.pc));
  }
  if (a.target !== '@server' && !pcs.some(function (p) { return p.label === a.target; })) {
    throw pcErr_('unknown_recipient', JSON.stringify(a.target) + ' is not a roster label or @server', { candidates: candidates_(pcs, a.target) });
  }
  const first = withLock_(function () { return jobSubmitLocked_(req, now); });
  if (first.answer) return first.answer;
  const outcome = runBuiltin_(first.run, first.job, req, now); // JobsServer.js
  const ended = withLock_(function () {
    const loc = jobLocate_([first.job.id])[first.job.id];
    if (!jobEnded_(loc.job.state)) {
      jobEnd_(loc.job, outcome.state, pcmailNow_(), 'server', outcome.reason, outcome.result);
      loc.job._.tell = []; // the submit answer tells the submitter
      jobSave_([loc]);
    }
    return loc.job;
  });
  return { deduped: false, job: jobView_(ended, true) };
}

function opJobStatus_(req, now) {
  rosterMember_(readRosterOrFail_(), req.pc);
  const loc = jobLocate_([req.args.jobId])[req.args.jobId];
  if (!loc) throw jobNotFound_(req.args.jobId);
  if (!jobVisible_(loc.job, req.pc)) throw forbiddenJob_(loc.job, 'its submitter\'s PC, a joined submitter\'s PC or its target PC');
  jobAsRead_(loc.job, now); // read-only: shown as the clock has it, not saved
  return { job: jobView_(loc.job, true) };
}

// Every live job and the newest archived ones (list is not the poll: it may read them).
function allJobs_() {
  const out = [];
  const live = tab_('Jobs');
  readText_(live, 2, 1, live.getLastRow() - 1, JOB_NCOL).forEach(function (r) { if (r[0]) out.push(rowToJob_(r)); });
  const arch = tab_('JobsArchive');
  const last = arch.getLastRow();
  const first = Math.max(2, last - JOB_ARCHIVE_SCAN + 1);
  if (last >= 2) readText_(arch, first, 1, last - first + 1, JOB_NCOL).forEach(function (r) { if (r[0]) out.push(rowToJob_(r)); });
  return out;
}

function listJobs_(pc, f, now) {
  const seen = {};
  return allJobs_().filter(function (j) {
    if (seen[j.id]) return false;
    seen[j.id] = true;
    jobAsRead_(j, now); // read-only: shown as the clock has it, not saved
    if (pc !== null && !jobVisible_(j, pc)) return false;
    if (f.target && j.target !== f.target) return false;
    if (f.state && j.state !== f.state) return false;
    if (f.mine && j._.subs.indexOf(pc) < 0 && j.submitter.pc !== pc) return false;
    return true;
  }).sort(function (x, y) { return y.submittedAt - x.submittedAt || (x.id < y.id ? 1 : x.id > y.id ? -1 : 0); })
    .slice(0, f.limit).map(function (j) { return jobView_(j, false); });
}

function opJobList_(req, now) {
  rosterMember_(readRosterOrFail_(), req.pc);
  return { jobs: listJobs_(req.pc, req.args, now) };
}

function opJobCancel_(req, now) {
  rosterMember_(readRosterOrFail_(), req.pc);
  const a = req.args;
  const loc = jobLocate_([a.jobId])[a.jobId];
  if (!loc) throw jobNotFound_(a.jobId);
  const j = loc.job;
  if (j.submitter.pc !== req.pc && j.target !== req.pc) throw forbiddenJob_(j, 'its submitter\'s PC or its target PC');
  // A job the clock has already ended is ended first (as the Rust server's catch-up does).
  if (jobAsRead_(j, now)) jobSave_([loc]);
  const by = sanitizeActor_(a.by);
  if (j.state === 'queued') {
    jobEnd_(j, 'cancelled', now, by, a.reason === null ? 'cancelled by ' + by : a.reason, j.result);
    jobSave_([loc]);
  } else if (j.state === 'running' && !j.cancelRequested) {
    j.cancelRequested = true;
    if (a.reason !== null) j._.cancelReason = a.reason;
    jobSave_([loc]);
  }
  return { job: jobView_(j, true) };
}

function opJobStart_(req, now) {
  rosterMember_(readRosterOrFail_(), req.pc);
  const a = req.args;
  const loc = jobLocate_([a.jobId])[a.jobId];
  if (!loc) throw jobNotFound_(a.jobId);
  if (loc.job.target !== req.pc) throw forbiddenJob_(loc.job, 'its target PC ' + loc.job.target);
  const aged = jobAsRead_(loc.job, now); // a queued job past 7 days is cancelled first
  if (jobStart_(loc.job, a.runner, a.startedAt, now) || aged) jobSave_([loc]);
  return { job: jobView_(loc.job, true) };
}

function opJobReport_(req, now) {
  rosterMember_(readRosterOrFail_(), req.pc);
  const a = req.args;
  const loc = jobLocate_([a.jobId])[a.jobId];
  if (!loc) throw jobNotFound_(a.jobId);
  if (loc.job.target !== req.pc) throw forbiddenJob_(loc.job, 'its target PC ' + loc.job.target);
  if (jobReport_(loc.job, a, now)) jobSave_([loc]);
  return { job: jobView_(loc.job, true) };
}

// ---- whitelists --------------------------------------------------------------------------

function readWhitelist_(target) {
  const sh = tab_('JobWhitelists');
  const rows = findRows_(sh, 1, [target]);
  if (!rows.length) return null;
  const r = readText_(sh, rows[0], 1, 1, TABS.JobWhitelists.length)[0];
  return JSON.parse(r.slice(3).join(''));
}

function storeWhitelist_(target, w, now) {
  const sh = tab_('JobWhitelists');
  const row = [target, w.hash, String(now)].concat(splitParts_(JSON.stringify(w)));
  const rows = findRows_(sh, 1, [target]);
  if (rows.length) writeText_(sh, rows[0], 1, [row]); else appendText_(sh, [row]);
  setProp_(JOB_WL_PROP + target, w.hash);
}

// ---- the poll's `job` part -----------------------------------------------------------------

// ONE TextFinder over the id..tell columns finds the jobs named by heartbeats and reports
// (id), queued here (q), cancel requested here (cx) and owed to this PC (tell); ONE read
// of their span; ONE write of the changed rows. Nothing here grows with finished jobs.
function pollJob_(pc, p, now) {
  const errors = [];
  let hash = prop_(JOB_WL_PROP + pc);
  if (p.whitelist && p.whitelist.bad) errors.push(p.whitelist.bad);
  else if (p.whitelist && p.whitelist.hash !== hash) {
    storeWhitelist_(pc, p.whitelist, now);
    hash = p.whitelist.hash;
  }
  const running = p.running;
  const ids = running.concat(p.reports.filter(function (r) { return !r.bad; }).map(function (r) { return r.jobId; }));
  const sh = tab_('Jobs');
  const last = sh.getLastRow();
  const idRows = [], qRows = [], cxRows = [], tellRows = [];
  if (last >= 2) {
    const want = {};
    ids.forEach(function (id) { want[id] = true; });
    const texts = Object.keys(want).map(escapeRe_).concat([escapeRe_(pc), '.* ' + escapeRe_(pc) + ' .*']);
    const range = sh.getRange(2, 1, last - 1, JCOL.tell);
    for (let i = 0; i < texts.length; i += FIND_BATCH) {
      range.createTextFinder('^(?:' + texts.slice(i, i + FIND_BATCH).join('|') + ')$')
        .useRegularExpression(true).matchCase(true).matchEntireCell(true).findAll()
        .forEach(function (c) {
          const col = c.getColumn();
          if (col === JCOL.id) idRows.push(c.getRow());
          else if (col === JCOL.q && p.take) qRows.push(c.getRow());
          else if (col === JCOL.cx) cxRows.push(c.getRow());
          else if (col === JCOL.tell) tellRows.push(c.getRow());
        });
    }
  }
  const rows = uniqSorted_(idRows.concat(qRows, cxRows, tellRows));
  const span = { lo: rows.length ? rows[0] : 0, vals: [] };
  if (rows.length) span.vals = readText_(sh, span.lo, 1, rows[rows.length - 1] - span.lo + 1, JOB_NCOL);
  const byId = {};
  const locAt = {};
  rows.forEach(function (r) {
    const v = span.vals[r - span.lo];
    if (byId[v[0]]) return; // a second copy (a sweep cut short) is ignored
    byId[v[0]] = locAt[r] = { where: 'Jobs', row: r, job: rowToJob_(v) };
  });
  const changed = [];
  const reported = [];
  p.reports.forEach(function (r, index) {
    if (r.bad) {
      errors.push({ list: 'reports', index: r.bad.index, code: r.bad.code, field: r.bad.field, message: r.bad.message });
      return;
    }
    const loc = byId[r.jobId] || jobLocate_([r.jobId])[r.jobId]; // an archived job: ended, so unchanged
    try {
      if (!loc) throw jobNotFound_(r.jobId);
      if (loc.job.target !== pc) throw forbiddenJob_(loc.job, 'its target PC ' + loc.job.target);
      if (jobReport_(loc.job, r, now)) changed.push(loc);
      reported.push({ jobId: r.jobId, ok: true });
    } catch (err) {
      if (!err || !err.pcmail) throw err;
      reported.push({ jobId: r.jobId, ok: false, code: err.pcmail.code, message: err.pcmail.message });
    }
  });
  running.forEach(function (id) {
    const loc = byId[id];
    if (!loc || loc.job.target !== pc || loc.job.state !== 'running') return;
    loc.job.heartbeatAt = now;
    changed.push(loc);
  });
  const cancel = uniqSorted_(cxRows).map(function (r) { return locAt[r]; })
    .filter(function (l) { return l && l.job.state === 'running' && l.job.cancelRequested && l.job.target === pc; })
    .map(function (l) { return l.job.id; });
  const offered = uniqSorted_(qRows).map(function (r) { return locAt[r]; })
    .filter(function (l) { return l && l.job.state === 'queued' && l.job.target === pc; })
    .map(function (l) { return l.job; })
    .sort(function (x, y) { return x.submittedAt - y.submittedAt; })
    .slice(0, JOB.OFFER_MAX).map(function (j) { return jobView_(j, 'offered'); });
  const finished = [];
  uniqSorted_(tellRows).map(function (r) { return locAt[r]; })
    .filter(function (l) { return l && l.job._.tell.indexOf(pc) >= 0; })
    .sort(function (x, y) { return x.job.id < y.job.id ? -1 : x.job.id > y.job.id ? 1 : 0; })
    .slice(0, JOB_FINISHED_MAX).forEach(function (l) {
    l.job._.tell = l.job._.tell.filter(function (x) { return x !== pc; });
    finished.push(jobView_(l.job, false));
    changed.push(l);
  });
  if (changed.length) jobSave_(changed, span);
  return { whitelistHash: hash, offered: offered, cancel: cancel, reported: reported, finished: finished, errors: errors };
}

// ---- the sweep's job step (under one short lock) -------------------------------------------

// What the server's clock has decided for one job at `now` (crates/core due.rs
// `job`): {state, reason, at} or null. `at` is the moment the rule fired; a running
// job's first deadline wins. The sweep writes it, and every read shows it (jobAsRead_).
function jobDue_(j, now) {
  if (j.state === 'running' && j._.awaiting) {
    // A chunked team function between runs: the worker trigger runs every minute.
    const at = j.heartbeatAt + SERVER_AWAIT_MAX_MS;
    return at <= now ? { state: 'timed_out', at: at, reason: 'no worker run for 6 h (is the jobs worker trigger installed? run installJobsWorker)' } : null;
  }
  if (j.state === 'running') {
    const worker = j.target === '@server' && !j._.builtin;
    const silentMs = worker ? SERVER_RUN_SILENT_MS : JOB.NO_HEARTBEAT_MS;
    const runStart = j.runStartedAt !== null ? j.runStartedAt : j.startedAt !== null ? j.startedAt : j.submittedAt;
    const silent = (j.heartbeatAt !== null ? j.heartbeatAt : runStart) + silentMs;
    const past = runStart + 2 * j.timeLimitMs;
    const d = silent <= past
      ? { state: 'timed_out', at: silent, reason: worker
        ? 'no heartbeat for ' + (silentMs / 1000) + ' s (the worker run was killed, e.g. at Apps Script\'s 6-minute limit)'
        : JOB_REASON_NO_HEARTBEAT }
      : { state: 'timed_out', at: past, reason: 'running past twice its time limit' };
    return d.at <= now ? d : null;
  }
  if (j.state === 'queued' && j.submittedAt + JOB.QUEUED_MAX_MS <= now) {
    return { state: 'cancelled', at: j.submittedAt + JOB.QUEUED_MAX_MS, reason: 'never started' };
  }
  return null;
}

// The same text as crates/core job.rs REASON_NO_HEARTBEAT: the server cannot know how
// the run ended, so it says "outcome unknown", never "interrupted".
const JOB_REASON_NO_HEARTBEAT = 'no heartbeat for 180 s (executor gone; outcome unknown)';
const JOB_LATE_REPORT_NOTE = 'reported by its executor after the server timed it out for silence';

// A job as a reader sees it at `now`: the end the sweep would have written, written
// into `j` (the caller saves it or not). True when it changed.
function jobAsRead_(j, now) {
  const d = jobDue_(j, now);
  if (!d) return false;
  jobEnd_(j, d.state, d.at, 'server', d.reason);
  return true;
}

// What the sweep would do to the live jobs at `now`: [{job, state, reason, at}].
function jobSweepPlan_(jobs, now) {
  const plan = [];
  jobs.forEach(function (j) {
    const d = jobDue_(j, now);
    if (d) plan.push({ job: j, state: d.state, reason: d.reason, at: d.at });
  });
  return plan;
}

// Times out silent runs, cancels week-old queued jobs, and moves ended jobs told to every
// submitter to JobsArchive (archive rows first, so a sweep cut short loses nothing; the
// live copy left behind is dropped by the next sweep, which finds it archived).
// roster.revoke: the PC's queued jobs are cancelled with why and how it comes back
// (ops/job.rs cancel_queued_for_revoked); its running ones time out as any silent executor's.
function jobCancelQueuedForRevoked_(label, now) {
  const sh = tab_('Jobs');
  const rows = findRows_(sh, JCOL.q, [label]);
  if (!rows.length) return 0;
  const vals = readRowsAt_(sh, rows, JOB_NCOL);
  const reason = revokedTargetReason_(label);
  const locs = [];
  rows.forEach(function (row) {
    const j = rowToJob_(vals[row]);
    if (j.target !== label || j.state !== 'queued') return;
    jobEnd_(j, 'cancelled', now, 'server', reason);
    locs.push({ where: 'Jobs', row: row, job: j });
  });
  jobSave_(locs);
  return locs.length;
}

function jobSweep_(now) {
  const sh = tab_('Jobs');
  const n = sh.getLastRow() - 1;
  const rows = readText_(sh, 2, 1, n, JOB_NCOL);
  const jobs = rows.map(function (r) { return r[0] ? rowToJob_(r) : null; });
  const counts = { timedOut: 0, cancelled: 0 };
  const plan = jobSweepPlan_(jobs.filter(function (j) { return j; }), now);
  plan.forEach(function (p) {
    jobEnd_(p.job, p.state, p.at, 'server', p.reason);
    if (p.state === 'timed_out') counts.timedOut++; else counts.cancelled++;
  });
  const gone = jobs.filter(function (j) { return j && jobEnded_(j.state) && !j._.tell.length; });
  const staleTell = jobs.filter(function (j) { return j && jobEnded_(j.state) && j._.tell.length && j.endedAt + EVENTS_KEEP_MS <= now; });
  const moving = gone.concat(staleTell);
  if (!plan.length && !moving.length) return counts;
  const arch = tab_('JobsArchive');
  const already = {};
  if (moving.length) {
    findRows_(arch, JCOL.id, moving.map(function (j) { return j.id; })).forEach(function (r) {
      already[readText_(arch, r, 1, 1, 1)[0][0]] = true;
    });
    appendText_(arch, moving.filter(function (j) { return !already[j.id]; }).map(jobToRow_));
  }
  const seen = {};
  const kept = jobs.filter(function (j) {
    if (!j || moving.indexOf(j) >= 0 || seen[j.id]) return false;
    seen[j.id] = true;
    return true;
  });
  if (kept.length) writeText_(sh, 2, 1, kept.map(jobToRow_));
  deleteRowsSafe_(sh, 2 + kept.length, n - kept.length);
  return counts;
}

// Archived jobs ended longer ago than the archive retention (ARCHIVE_RETENTION_DAYS,
// default 90) are deleted from the top (the archive is in the order the sweep moved them).
function jobPurgeArchive_(now) {
  const days = Number(prop_('ARCHIVE_RETENTION_DAYS') || ARCHIVE_RETENTION_DAYS);
  if (!(days > 0)) return 0;
  const cutoff = now - days * 24 * 3600 * 1000;
  return withLock_(function () {
    const sh = tab_('JobsArchive');
    const last = sh.getLastRow();
    if (last < 2) return 0;
    const top = readText_(sh, 2, JCOL.endedAt, Math.min(last - 1, PURGE_MAX_ROWS), 1);
    let k = 0;
    while (k < top.length && top[k][0] !== '' && Number(top[k][0]) < cutoff) k++;
    deleteRowsSafe_(sh, 2, k);
    return k;
  });
}
