// Web app entry points, the lock, the token check and the time trigger.

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
    'status': opStatus_, 'sweep': opSweep_, 'alerts': opAlerts_
  };
}

// hello reads one property; alerts reads a tab only the sweep writes; the sweep locks per band.
const UNLOCKED_OPS = { hello: true, alerts: true, sweep: true };

function handleBody_(body) {
  resetExec_();
  const now = pcmailNow_();
  try {
    if (utf8Len_(body) > LIMITS.BODY_BYTES_MAX) throw pcErr_('too_large', 'the body exceeds 256 KiB');
    const req = parseRequest_(body);
    checkToken_(req.token);
    checkLabelBinding_(req);
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

function withLock_(fn) {
  const lock = LockService.getScriptLock();
  if (!lock.tryLock(LOCK_WAIT_MS)) throw pcErr_('busy', 'the server is busy, retry with backoff');
  try {
    return fn();
  } finally {
    lock.releaseLock();
  }
}

// Compares digests byte by byte without an early exit. No token configured means nobody
// gets in, unless PCMAIL_ALLOW_NO_TOKEN=true (the embedded-default mode the vectors use).
function checkToken_(given) {
  const want = prop_('PCMAIL_TOKEN');
  if (!want && prop_('PCMAIL_ALLOW_NO_TOKEN') === 'true') return;
  const a = Utilities.computeDigest(Utilities.DigestAlgorithm.SHA_256, String(given === null ? '' : given));
  const b = Utilities.computeDigest(Utilities.DigestAlgorithm.SHA_256, String(want || ''));
  let diff = want ? 0 : 1;
  if (given === null) diff |= 1;
  for (let i = 0; i < b.length; i++) diff |= (a[i] ^ b[i]);
  if (diff !== 0) throw pcErr_('unauthorized', 'wrong or missing token');
}

// Time-trigger target. Never throws: a failed sweep is retried in 10 minutes.
function sweepTrigger() {
  resetExec_();
  try {
    const r = runSweep_(pcmailNow_());
    console.log('sweep: ' + JSON.stringify(r));
  } catch (err) {
    console.warn('sweep skipped: ' + (err && err.message || err));
  }
}

// Idempotent: exactly one 10-minute trigger for sweepTrigger afterwards.
function installTriggers() {
  const mine = ScriptApp.getProjectTriggers().filter(function (t) { return t.getHandlerFunction() === 'sweepTrigger'; });
  mine.slice(1).forEach(function (t) { ScriptApp.deleteTrigger(t); });
  if (!mine.length) ScriptApp.newTrigger('sweepTrigger').timeBased().everyMinutes(10).create();
  return ScriptApp.getProjectTriggers().filter(function (t) { return t.getHandlerFunction() === 'sweepTrigger'; }).length;
}

// Run once from the editor: creates the tabs with text-formatted headers.
function setup() {
  Object.keys(TABS).forEach(function (name) { tab_(name); });
  return installTriggers();
}
