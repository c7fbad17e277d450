// The `@server` executor on Apps Script:
// - built-ins: read-only probes and maintenance, run inside the submit (Jobs.js
//   opJobSubmit_), between two short script locks;
// - team functions (JobsWhitelist.js): queued by the submit, run by a separate worker
//   trigger (jobsWorkerTrigger), never by the poll or the submit. A run holds only a
//   per-subject LEASE (Leases.js), never the script lock while it works; `running` is
//   written (and flushed) before the work starts; a run killed at Apps Script's 6-minute
//   limit stops heartbeating and the sweep closes it `timed_out` with that reason.
// - chunked team functions resume over several worker runs: per-input results keyed by
//   fingerprint (sha256 of input id + mtime) in the JobChunks tab, a start deadline at
//   70 % of the run's time limit, a failure counter (3) that expires 3 days after the
//   last failure.

const SERVER_RUN_MAX_MS = 330000;     // a team function's time limit: under Apps Script's 6 minutes
const SERVER_RUN_SILENT_MS = 390000;  // a worker run silent this long was killed (6 min + 30 s)
const SERVER_AWAIT_MAX_MS = 6 * 3600000; // a chunked job waiting this long for its next run has no worker
const CHUNK = { START_DEADLINE: 0.7, MAX_FAILURES: 3, FAILURE_EXPIRY_MS: 3 * 24 * 3600000, RESULT_MAX_CHARS: 45000,
  KEEP_MS: 30 * 24 * 3600000 }; // a chunk result not written for 30 days is dropped by the sweep
const WORKER_RUNNER = 'server/worker';

const BUILTIN_JOBS = {
  _debug_roster: { description: 'the roster with each PC\'s last poll and published whitelist hash' },
  _debug_mail: { description: 'one mail as the server holds it (subject and body only for its sender or recipient)',
    args: [{ name: 'id', type: 'string', required: true, maxLen: 100, pattern: 'mail-[0-9]{1,15}-[0-9a-f]{8}(~[a-z0-9][a-z0-9._-]{0,39})?' }] },
  _debug_alerts: { description: 'the open alerts' },
  _debug_sweep_plan: { description: 'what the next sweep would time out, cancel, expire, alert and mark stale, and why' },
  _debug_jobs: { description: 'the jobs the caller may see',
    args: [{ name: 'state', type: 'enum', required: false, values: JOB_STATES }] },
  sweep: { description: 'run the sweep now', maintenance: true },
  prune: { description: 'prune the Events tab now (what the sweep does)', maintenance: true }
};

function builtinSpec_(name) {
  const b = BUILTIN_JOBS[name];
  if (!b) return null;
  return { name: name, args: normSpec_({ name: 'x', args: b.args || [], timeLimitMs: 60000 }).args, subject: null,
    timeLimitMs: 60000, artifacts: [], readOnly: !b.maintenance, chunked: false, verify: false,
    description: b.description, builtin: true };
}

// A registered team function's spec, checked like a PC's (null when not registered).
function teamSpec_(name) {
  if (!Object.prototype.hasOwnProperty.call(JOBS_WHITELIST, name)) return null;
  const e = JOBS_WHITELIST[name];
  const spec = { name: name, args: e.args || [], subject: e.subject || null, timeLimitMs: e.timeLimitMs,
    artifacts: e.artifacts || [], readOnly: e.readOnly === true, chunked: e.chunked === true, verify: typeof e.verify === 'function',
    description: e.description || '' };
  checkJobSpec_(spec, 'JOBS_WHITELIST.' + name);
  if (spec.timeLimitMs > SERVER_RUN_MAX_MS) throw badField_('JOBS_WHITELIST.' + name + '.timeLimitMs', 'a team function runs at most 330 s (Apps Script stops a run at 6 minutes): make it chunked');
  if (spec.chunked ? !(typeof e.inputs === 'function' && typeof e.process === 'function') : typeof e.run !== 'function') {
    throw badField_('JOBS_WHITELIST.' + name, spec.chunked ? 'a chunked team function needs inputs() and process()' : 'a team function needs run()');
  }
  const out = normSpec_(spec);
  out.allowedSubmitters = Array.isArray(e.allowedSubmitters) ? e.allowedSubmitters.slice() : null;
  return out;
}

function serverCommandSpec_(name) {
  return name[0] === '_' || BUILTIN_JOBS[name] ? builtinSpec_(name) : teamSpec_(name);
}

function serverCommandNames_() {
  return Object.keys(BUILTIN_JOBS).concat(Object.keys(JOBS_WHITELIST));
}

function emptyResult_(ran) {
  return { ran: ran, exit: null, durationMs: 0, output: '', truncated: false, artifacts: [], reused: [],
    readBack: null, verify: null, chunks: null, data: null };
}

// ---- built-ins ---------------------------------------------------------------------------

// `_debug_roster`: each PC with its last poll, credential state and published commands.
function debugRoster_() {
  const wl = {};
  const sh = tab_('JobWhitelists');
  readText_(sh, 2, 1, sh.getLastRow() - 1, TABS.JobWhitelists.length).forEach(function (r) {
    if (!r[0]) return;
    const w = JSON.parse(r.slice(3).join(''));
    wl[r[0]] = { hash: r[1], commands: w.commands.map(function (c) { return c.name; }), allowedSubmitters: w.allowedSubmitters,
      checkouts: w.checkouts, publishedAt: Number(r[2]) };
  });
  return {
    pcs: readRosterLive_().map(function (p) {
      return { number: p.number, label: p.label, hostname: p.hostname, lastPollAt: p.lastPollAt,
        bound: !!prop_(LABEL_CRED_PREFIX + p.label), revoked: !!prop_(REVOKED_PREFIX + p.label), executor: wl[p.label] || null };
    }),
    requireCredentials: requireCredentialsOn_()
  };
}

// `_debug_jobs`: the counts by state (live and the scanned archive) and the caller's newest 100.
function debugJobs_(pc, state) {
  const counts = {};
  const seen = {};
  allJobs_().forEach(function (j) {
    if (seen[j.id]) return;
    seen[j.id] = true;
    counts[j.state] = (counts[j.state] || 0) + 1;
  });
  const sorted = {};
  Object.keys(counts).sort().forEach(function (k) { sorted[k] = counts[k]; });
  return { counts: sorted, jobs: listJobs_(pc, { state: state || null, limit: JOB.LIST_DEFAULT }) };
}

// What runSweep_ would do now, without doing it (crates/server sweep.rs plan): jobs first,
// then mail to expire, then the alert conditions that hold now; gas adds the leases.
function sweepPlan_(now) {
  const live = tab_('Jobs');
  const jobs = readText_(live, 2, 1, live.getLastRow() - 1, JOB_NCOL).filter(function (r) { return r[0]; }).map(rowToJob_);
  const jobPlan = jobSweepPlan_(jobs, now).map(function (p) {
    return { id: p.job.id, state: p.state, reason: p.reason, target: p.job.target, command: p.job.command };
  });
  const expire = [];
  const after = snapshotLive_().filter(function (s) { return !s.dup; }).map(function (s) {
    const m = JSON.parse(JSON.stringify(s.mail));
    if (isDue_(m, now)) {
      expire.push({ id: m.id, expiresAt: m.expiresAt, reason: 'past its expiry' });
      transition_(m, 'expired', now, 'server', null, now);
    }
    return m;
  });
  const st = leaseStore_(now);
  const leases = [];
  st.leases.forEach(function (l) {
    if (l.state === 'held' && l.ttlExpiresAt === null && l.heartbeatAt <= now - LEASE.STALE_AFTER_MS) {
      leases.push({ resource: l.resource, fence: l.fence, state: 'stale', reason: 'no heartbeat since ' + l.heartbeatAt });
    } else if (isLive_(l) && l.ttlExpiresAt !== null && l.ttlExpiresAt <= now) {
      leases.push({ resource: l.resource, fence: l.fence, state: 'expired', reason: 'its ttl ran out' });
    }
  });
  const want = wantedAlerts_(after, readRosterLive_(), now);
  const alerts = Object.keys(want).sort().map(function (k) {
    return { kind: want[k].kind, subject: want[k].subject, pc: want[k].pc, message: want[k].message };
  });
  return { jobs: jobPlan, expire: expire, alerts: alerts, leases: leases };
}

// Runs a built-in outside the script lock. Returns {state, reason, result}: `ran: true`,
// exit 0 and `data` the answer, or exit 1 and the reason (crates/server ops/job.rs).
function runBuiltin_(spec, job, req, now) {
  const result = emptyResult_(true);
  let data;
  try {
    switch (spec.name) {
      case '_debug_roster': data = debugRoster_(); break;
      case '_debug_mail': {
        const answer = opStatus_({ pc: req.pc, args: { ids: [job.args.id] } });
        if (!answer.mails.length) data = { failed: 'no mail ' + job.args.id + ' that ' + req.pc + ' sent or received' };
        else data = answer;
        break;
      }
      case '_debug_alerts': data = { alerts: listAlerts_(true) }; break;
      case '_debug_sweep_plan': data = sweepPlan_(now); break;
      case '_debug_jobs': data = debugJobs_(req.pc, job.args.state); break;
      case 'sweep': data = runSweep_(now); break;
      case 'prune': data = { events: pruneEvents_(now), jobs: jobPurgeArchive_(now) }; break;
      default: data = { failed: spec.name + ' is not a built-in' };
    }
  } catch (err) {
    data = { failed: err && err.pcmail ? err.pcmail.code + ': ' + err.pcmail.message : String((err && err.message) || err) };
  }
  if (data && typeof data.failed === 'string' && Object.keys(data).length === 1) {
    result.exit = 1;
    return { state: 'failed', reason: data.failed, result: result };
  }
  result.exit = 0;
  result.data = data;
  return { state: 'ok', reason: null, result: result };
}

// ---- the worker ----------------------------------------------------------------------------

// The per-subject lock's lease resource: one per subject (a command without a subject
// locks per command), so two team functions never work on one document at once.
function subjectResource_(command, subject) {
  return subject === '' ? 'job-command/' + command : 'job-subject/' + sha256Hex_(subject).slice(0, 32);
}

// Under the script lock: the oldest @server job waiting for a run whose subject lease is
// free; claims the lease and writes `running` (flushed by withLock_ before the work).
function workerPick_(now) {
  const sh = tab_('Jobs');
  const rows = findRows_(sh, JCOL.q, ['@server']);
  const vals = readRowsAt_(sh, rows, JOB_NCOL);
  const locs = rows.map(function (r) { return { where: 'Jobs', row: r, job: rowToJob_(vals[r]) }; })
    .filter(function (l) { return jobWaits_(l.job); })
    .sort(function (x, y) { return x.job.submittedAt - y.job.submittedAt; });
  if (!locs.length) return null; // an idle run: one TextFinder, no lease read
  const st = leaseStore_(now);
  leaseRefresh_(st);
  const ended = [];
  let picked = null;
  for (let i = 0; i < locs.length && !picked; i++) {
    const loc = locs[i];
    const j = loc.job;
    if (j.cancelRequested) { jobEnd_(j, 'cancelled', now, WORKER_RUNNER, j._.cancelReason || 'cancelled between runs'); ended.push(loc); continue; }
    let spec = null;
    try { spec = teamSpec_(j.command); } catch (e) { spec = null; }
    if (!spec) { jobEnd_(j, 'failed', now, WORKER_RUNNER, j.command + ' is no longer registered in JOBS_WHITELIST', emptyResult_(false)); ended.push(loc); continue; }
    const resource = subjectResource_(j.command, j.subject);
    const claim = { claimId: 'job-run:' + j.id + ':' + ((j._.run || 0) + 1), resource: resource, repo: '',
      description: 'job ' + j.id + ' ' + j.command + (j.subject ? ' on ' + j.subject : ''), files: [], mode: 'exclusive',
      holder: { pc: 'server', session: j.id, name: 'jobs worker' }, ttlMs: SERVER_RUN_SILENT_MS, takeover: null };
    let lease;
    try { lease = leaseClaim_(st, claim, 'server').lease; } catch (err) {
      if (err && err.pcmail && (err.pcmail.code === 'held' || err.pcmail.code === 'stale')) continue; // its subject is busy
      throw err;
    }
    jobStart_(j, WORKER_RUNNER, now, now);
    picked = { loc: loc, spec: spec, resource: resource, fence: lease.fence };
  }
  leaseCommit_(st);
  jobSave_(ended.concat(picked ? [picked.loc] : []));
  return picked;
}

// Under the script lock: the job as it is now (the sweep may have moved its row).
function workerJob_(id) {
  return jobLocate_([id])[id] || null;
}

function workerHeartbeat_(id) {
  return withLock_(function () {
    const loc = workerJob_(id);
    if (!loc || loc.job.state !== 'running' || loc.job.runner !== WORKER_RUNNER) return { gone: true };
    loc.job.heartbeatAt = pcmailNow_();
    jobSave_([loc]);
    return { gone: false, cancel: loc.job.cancelRequested };
  });
}

// Ends the run: the job ended or left waiting for the next run, the lease released.
function workerFinish_(picked, outcome) {
  return withLock_(function () {
    const now = pcmailNow_();
    const loc = workerJob_(picked.loc.job.id);
    if (loc && loc.job.state === 'running' && loc.job.runner === WORKER_RUNNER) {
      const j = loc.job;
      if (j.cancelRequested) jobEnd_(j, 'cancelled', now, WORKER_RUNNER, j._.cancelReason || 'cancel requested', outcome.result);
      else if (outcome.again) {
        j._.awaiting = true; // the next worker run resumes it
        j.result = outcome.result;
        j.heartbeatAt = now;
      } else jobEnd_(j, outcome.state, now, WORKER_RUNNER, outcome.reason, outcome.result);
      jobSave_([loc]);
    }
    const st = leaseStore_(now);
    leaseRefresh_(st);
    try { leaseReleaseOne_(st, { resource: picked.resource, fence: picked.fence, by: WORKER_RUNNER, reason: 'run ended' }, 'server'); } catch (e) { /* taken or gone */ }
    leaseCommit_(st);
    return loc ? loc.job : null;
  });
}

function workerCtx_(job, logs, extra) {
  const ctx = {
    job: jobView_(job, false), now: function () { return pcmailNow_(); },
    log: function (s) { logs.push(String(s)); },
    readBack: function (s) { extra.readBack = String(s); },
    artifact: function (name) { extra.artifacts.push(String(name)); },
    heartbeat: function () { const h = workerHeartbeat_(job.id); return !h.gone && !h.cancel; }
  };
  return ctx;
}

// One worker run (the time trigger): picks one job and runs it once. Returns what it did.
function runJobsWorker_() {
  const picked = withLock_(function () { return workerPick_(pcmailNow_()); });
  if (!picked) return { ran: null };
  const job = picked.loc.job;
  const entry = JOBS_WHITELIST[job.command];
  const t0 = pcmailNow_();
  const logs = [];
  const extra = { readBack: null, artifacts: [] };
  const ctx = workerCtx_(job, logs, extra);
  let outcome;
  try {
    const reused = job.force || typeof entry.existing !== 'function' ? [] : (entry.existing(job.args, ctx) || []).map(String);
    if (reused.length) { // what it would make exists already; not run again unless forced
      const result = emptyResult_(false);
      result.reused = reused;
      outcome = { state: 'ok', reason: 'answered from existing artifacts (submit with force to run again)', result: result };
    } else {
      outcome = picked.spec.chunked ? runChunked_(picked, entry, ctx, t0) : runPlain_(entry, job, ctx);
      if (outcome.state === 'ok' && !outcome.again && typeof entry.verify === 'function') verifyOutcome_(entry, job, ctx, outcome);
    }
  } catch (err) {
    outcome = { state: 'failed', reason: 'the team function threw: ' + ((err && err.message) || err), result: emptyResult_(true) };
    outcome.result.exit = 1;
    logs.push(String((err && err.stack) || err));
  }
  const r = outcome.result;
  r.durationMs = Math.max(0, pcmailNow_() - t0);
  const cut = tailUtf8_(logs.join('\n'), JOB.OUTPUT_MAX_BYTES);
  r.output = cut.text;
  r.truncated = cut.cut;
  r.readBack = extra.readBack;
  r.artifacts = extra.artifacts;
  const after = workerFinish_(picked, outcome);
  return { ran: job.id, state: after ? after.state : null, again: !!outcome.again };
}

// The declared verify step: a read-only check of what the run made (e.g. a value only an
// intermediate result has, looked for in the final artifact). Its outcome is in the result.
function verifyOutcome_(entry, job, ctx, outcome) {
  let v;
  try {
    const r = entry.verify(outcome.result.data, job.args, ctx);
    v = { ok: !!(r && r.ok), exit: null, output: String((r && r.output) || '') };
  } catch (err) {
    v = { ok: false, exit: null, output: String((err && err.message) || err) };
  }
  v.output = tailUtf8_(v.output, JOB.OUTPUT_MAX_BYTES).text;
  outcome.result.verify = v;
  if (!v.ok) {
    outcome.state = 'failed';
    outcome.reason = 'verify failed' + (v.output ? ': ' + v.output : '');
  }
}

function runPlain_(entry, job, ctx) {
  const data = entry.run(job.args, ctx);
  const result = emptyResult_(true);
  result.exit = 0;
  result.data = data === undefined ? null : data;
  return { state: 'ok', reason: null, result: result };
}

// ---- chunks ----------------------------------------------------------------------------------

function chunkFp_(input) {
  return sha256Hex_(String(input.id) + '\n' + String(input.mtime));
}

// fp → {row, state, failures, lastFailureAt, result} for one (command, subject).
function readChunks_(key) {
  const sh = tab_('JobChunks');
  const rows = findRows_(sh, 1, [key]);
  const vals = readRowsAt_(sh, rows, TABS.JobChunks.length);
  const out = {};
  rows.forEach(function (r) {
    const v = vals[r];
    if (v[0] !== key || out[v[1]]) return;
    out[v[1]] = { row: r, input: v[2], state: v[3], failures: Number(v[4] || 0),
      lastFailureAt: v[5] === '' ? null : Number(v[5]), result: v[7] === '' ? null : JSON.parse(v[7]) };
  });
  return out;
}

// Saves one input's outcome and heartbeats the job, in one short lock. The row is found
// again by its fingerprint under the lock (the sweep may have compacted the tab).
function saveChunk_(key, fp, rec, jobId) {
  return withLock_(function () {
    const sh = tab_('JobChunks');
    const row = [key, fp, rec.input, rec.state, String(rec.failures), rec.lastFailureAt === null ? '' : String(rec.lastFailureAt),
      String(pcmailNow_()), rec.result === null ? '' : JSON.stringify(rec.result)];
    const rows = findRows_(sh, 2, [fp]);
    const mine = rows.length ? readRowsAt_(sh, rows, 1) : {};
    const at = rows.filter(function (r) { return mine[r][0] === key; })[0];
    if (at) writeText_(sh, at, 1, [row]); else appendText_(sh, [row]);
    const loc = workerJob_(jobId);
    if (!loc || loc.job.state !== 'running' || loc.job.runner !== WORKER_RUNNER) return { gone: true };
    loc.job.heartbeatAt = pcmailNow_();
    jobSave_([loc]);
    return { gone: false, cancel: loc.job.cancelRequested };
  });
}

// Is this input's failure counter still holding it back?
function chunkDropped_(rec, now) {
  return rec && rec.state === 'failed' && rec.failures >= CHUNK.MAX_FAILURES && rec.lastFailureAt !== null &&
    rec.lastFailureAt + CHUNK.FAILURE_EXPIRY_MS > now;
}

function runChunked_(picked, entry, ctx, runStart) {
  const job = picked.loc.job;
  const key = job.command + '|' + job.subject;
  const inputs = entry.inputs(job.args, ctx) || [];
  const progress = readChunks_(key);
  const deadline = runStart + Math.floor(CHUNK.START_DEADLINE * job.timeLimitMs);
  const budget = job.timeLimitMs - Math.floor(CHUNK.START_DEADLINE * job.timeLimitMs);
  const items = inputs.map(function (input) { return { input: input, fp: chunkFp_(input) }; });
  let stopped = false;
  let attemptedFailed = 0;
  for (let i = 0; i < items.length && !stopped; i++) {
    const it = items[i];
    const rec = progress[it.fp];
    if (rec && rec.state === 'ok') continue;
    const now = pcmailNow_();
    if (chunkDropped_(rec, now)) continue;
    if (now >= deadline) { stopped = true; break; } // never start an input after the deadline
    const next = rec || { row: null, input: String(it.input.id), state: 'pending', failures: 0, lastFailureAt: null, result: null };
    if (next.state === 'failed' && next.failures >= CHUNK.MAX_FAILURES) next.failures = 0; // the counter expired
    const began = pcmailNow_();
    try {
      const value = entry.process(it.input, job.args, ctx);
      const text = JSON.stringify(value === undefined ? null : value);
      if (text.length > CHUNK.RESULT_MAX_CHARS) throw new Error('the result of input ' + it.input.id + ' is over ' + CHUNK.RESULT_MAX_CHARS + ' characters');
      next.state = 'ok';
      next.result = value === undefined ? null : value;
    } catch (err) {
      next.state = 'failed';
      next.failures += 1;
      next.lastFailureAt = pcmailNow_();
      attemptedFailed++;
      ctx.log('input ' + it.input.id + ' failed (' + next.failures + '/' + CHUNK.MAX_FAILURES + '): ' + ((err && err.message) || err));
    }
    // Each input's budget is what the run has left after the start deadline.
    const took = pcmailNow_() - began;
    if (took > budget) ctx.log('input ' + it.input.id + ' took ' + took + ' ms, over its budget of ' + budget + ' ms: lower the time per input or raise timeLimitMs');
    progress[it.fp] = next;
    const h = saveChunk_(key, it.fp, next, job.id);
    if (h.gone || h.cancel) stopped = true;
  }
  const now = pcmailNow_();
  const counts = { done: 0, total: items.length, failed: 0, skipped: 0 };
  const results = {};
  let pending = 0;
  items.forEach(function (it) {
    const rec = progress[it.fp];
    if (rec && rec.state === 'ok') { counts.done++; results[String(it.input.id)] = rec.result; } else if (chunkDropped_(rec, now)) counts.skipped++;
    else if (rec && rec.state === 'failed') { counts.failed++; pending++; } else pending++;
  });
  const result = emptyResult_(true);
  result.chunks = counts;
  if (pending) {
    result.exit = null;
    return { again: true, result: result };
  }
  result.data = typeof entry.combine === 'function' ? entry.combine(results, job.args) : results;
  result.exit = counts.skipped ? 1 : 0;
  if (counts.skipped) {
    const dropped = items.filter(function (it) { return chunkDropped_(progress[it.fp], now); }).map(function (it) { return String(it.input.id); });
    return { state: 'failed', reason: counts.skipped + ' input(s) dropped after ' + CHUNK.MAX_FAILURES + ' failures, retried after 3 days: ' + dropped.join(', '), result: result };
  }
  return { state: 'ok', reason: null, result: result };
}

// The sweep's chunk step (one short lock): results not written for 30 days go (an input
// not seen for a month is gone or changed; a live failure counter is at most 3 days old).
function chunkSweep_(now) {
  return withLock_(function () {
    const sh = tab_('JobChunks');
    const n = sh.getLastRow() - 1;
    if (n < 1) return 0;
    const nc = TABS.JobChunks.length;
    const rows = readText_(sh, 2, 1, n, nc);
    const kept = rows.filter(function (r) { return r[0] !== '' && Number(r[6]) >= now - CHUNK.KEEP_MS; });
    if (kept.length === n) return 0;
    if (kept.length) writeText_(sh, 2, 1, kept);
    deleteRowsSafe_(sh, 2 + kept.length, n - kept.length);
    return n - kept.length;
  });
}

// ---- entry points --------------------------------------------------------------------------

// Time-trigger target (every minute, installJobsWorker). Never throws. Like the sweep it
// runs only when the trigger's (HEAD) build is the one the web app serves: the web app
// checked the job's args against its JOBS_WHITELIST, so the worker must run that one.
function jobsWorkerTrigger() {
  resetExec_();
  try {
    const served = prop_('DEPLOYED_BUILD');
    if (served && served !== PCMAIL_BUILD) {
      console.warn('jobs worker: the trigger runs build ' + PCMAIL_BUILD + ' but the web app serves ' + served + ': nothing run (the sweep raises stale_deploy)');
      return { ran: null, stale: true };
    }
    const r = runJobsWorker_();
    if (r.ran) console.log('jobs worker: ' + JSON.stringify(r));
    return r;
  } catch (err) {
    console.warn('jobs worker skipped: ' + ((err && err.message) || err));
    return { ran: null, error: String((err && err.message) || err) };
  }
}

// Idempotent: exactly one 1-minute trigger for jobsWorkerTrigger afterwards.
function installJobsWorker() {
  const mine = ScriptApp.getProjectTriggers().filter(function (t) { return t.getHandlerFunction() === 'jobsWorkerTrigger'; });
  mine.slice(1).forEach(function (t) { ScriptApp.deleteTrigger(t); });
  if (!mine.length) ScriptApp.newTrigger('jobsWorkerTrigger').timeBased().everyMinutes(1).create();
  return ScriptApp.getProjectTriggers().filter(function (t) { return t.getHandlerFunction() === 'jobsWorkerTrigger'; }).length;
}
