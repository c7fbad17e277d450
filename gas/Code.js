// Web app entry points, the lock, authentication (Auth.js) and the time trigger.

const LOCK_WAIT_MS = 10000; // bounded wait for the script lock, then `busy`

function doPost(e) {
  const body = e && e.postData && typeof e.postData.contents === 'string' ? e.postData.contents : '';
  return jsonOut_(handleBody_(body));
}

// A tiny health answer; it needs no token and reveals nothing.
function doGet() {
  return jsonOut_({ ok: true, now: pcmailNow_(), server: 'pcmail-gas', protocol: 1 });
}

function jsonOut_(obj) {
  return ContentService.createTextOutput(JSON.stringify(obj)).setMimeType(ContentService.MimeType.JSON);
}

function handlers_() {
  return {
    'hello': opHello_, 'roster.get': opRosterGet_, 'roster.set': opRosterSet_,
    'roster.remove': opRosterRemove_, 'send': opSend_, 'poll': opPoll_, 'mark': opMark_,
    'status': opStatus_, 'sweep': opSweep_, 'alerts': opAlerts_,
    'roster.enrol': opEnrol_, 'join': opJoin_, 'roster.revoke': opRevoke_, 'rotate': opRotate_,
    'roster.requireCredentials': opRequireCredentials_, 'roster.log': opAuditLog_,
    'lease.claim': opLeaseClaim_, 'lease.release': opLeaseRelease_, 'lease.list': opLeaseList_,
    'lease.check': opLeaseCheck_,
    'job.submit': opJobSubmit_, 'job.status': opJobStatus_, 'job.list': opJobList_, 'job.cancel': opJobCancel_,
    'job.start': opJobStart_, 'job.report': opJobReport_,
    'name.take': opNameTake_, 'who': opWho_
  };
}

// hello reads one property; alerts reads a tab only the sweep writes; the sweep locks per band;
// job.submit locks twice around a built-in's run (a probe, the sweep), never during it.
const UNLOCKED_OPS = { hello: true, alerts: true, sweep: true, 'job.submit': true };

function handleBody_(body) {
  resetExec_();
  const now = pcmailNow_();
  try {
    if (utf8Len_(body) > LIMITS.BODY_BYTES_MAX) throw pcErr_('too_large', 'the body exceeds 256 KiB');
    const req = parseRequest_(body);
    req.caller = authenticate_(req); // Auth.js: the admin secret or the PC's own credential
    recordServingBuild_();
    const fn = handlers_()[req.op];
    const result = UNLOCKED_OPS[req.op] ? fn(req, now) : withLock_(function () { return fn(req, now); });
    const out = { ok: true, now: now };
    Object.keys(result).forEach(function (k) { out[k] = result[k]; });
    return out;
  } catch (err) {
    if (err && err.pcmail) return errorBody_(err.pcmail.code, err.pcmail.message, err.pcmail.extra);
    console.error('internal error: ' + (err && err.stack || err));
    return errorBody_('internal', 'internal error: ' + (err && err.message || String(err)));
  }
}

// Pending Sheets writes are flushed INSIDE the lock: Apps Script batches writes, and
// the next execution's getLastRow() must see every row this one appended.
function withLock_(fn) {
  const lock = LockService.getScriptLock();
  if (!lock.tryLock(LOCK_WAIT_MS)) throw pcErr_('busy', 'the server is busy, retry with backoff');
  try {
    const out = fn();
    SpreadsheetApp.flush();
    return out;
  } finally {
    try { SpreadsheetApp.flush(); } finally { lock.releaseLock(); }
  }
}

// Time-trigger target. Never throws: a failed sweep is retried in 10 minutes.
// Triggers run the HEAD code, the web app the deployed version: the sweep runs only
// when both are the same build (Version.js), else it raises a `stale_deploy` alert.
function sweepTrigger() {
  resetExec_();
  try {
    const now = pcmailNow_();
    const served = prop_('DEPLOYED_BUILD');
    if (served && served !== PCMAIL_BUILD) {
      const msg = 'pcmail: the sweep did not run: the time trigger runs build ' + PCMAIL_BUILD +
        ' but the web app serves ' + served + ' (push without a deployment?). Run the deploy command in gas/README.md';
      raiseAlert_('stale_deploy', 'gas', 'server', msg, now);
      console.warn(msg);
      return;
    }
    const r = runSweep_(now);
    console.log('sweep: ' + JSON.stringify(r));
  } catch (err) {
    console.warn('sweep skipped: ' + (err && err.message || err));
  }
}

// The web app records the build it serves, so the trigger can compare (one write per
// deployment, read from the cached properties otherwise).
function recordServingBuild_() {
  if (prop_('DEPLOYED_BUILD') === PCMAIL_BUILD) return;
  try { setProp_('DEPLOYED_BUILD', PCMAIL_BUILD); } catch (e) { console.warn('cannot record the build: ' + e.message); }
}

// Idempotent: exactly one 10-minute trigger for sweepTrigger afterwards.
function installTriggers() {
  const mine = ScriptApp.getProjectTriggers().filter(function (t) { return t.getHandlerFunction() === 'sweepTrigger'; });
  mine.slice(1).forEach(function (t) { ScriptApp.deleteTrigger(t); });
  if (!mine.length) ScriptApp.newTrigger('sweepTrigger').timeBased().everyMinutes(10).create();
  return ScriptApp.getProjectTriggers().filter(function (t) { return t.getHandlerFunction() === 'sweepTrigger'; }).length;
}

// Run once from the editor: creates the tabs with text-formatted headers, the sweep trigger
// and, when JobsWhitelist.js registers team functions, the jobs worker trigger.
function setup() {
  Object.keys(TABS).forEach(function (name) { tab_(name); });
  if (Object.keys(JOBS_WHITELIST).length) installJobsWorker();
  return installTriggers();
}
