// Sheet access: every value goes in as plain text ('@') and comes out normalised,
// so Sheets can never turn "true", "0123", "2026-01-01" or "=…" into something else.

const TABS = {
  Mail: ['id', 'from', 'to', 'kind', 'urgent', 'expiresAt', 'inReplyTo', 'auto', 'hop',
    'createdAt', 'broadcastOf', 'state', 'timeline', 'updatedAt', 'q', 'subject', 'body', 'expiresIn',
    'recipients'], // recipients: a copy of mail to several addresses, the whole list (JSON)
  Roster: ['number', 'label', 'hostname', 'lastPollAt', 'cursor'], // cursor: the PC's last poll `since`
  // u: the sender, r: the recipient, for changes past `new` (r and note: the
  // received-updates feed; rows written before it have them empty)
  Events: ['seq', 'from', 'id', 'state', 'at', 'by', 'u', 'r', 'note'],
  Alerts: ['key', 'kind', 'subject', 'pc', 'message', 'openedAt', 'updatedAt', 'resolvedAt',
    'count', 'posted', 'postTries', 'lastError', 'nextTryAt'],
  Purged: ['at', 'count', 'firstId', 'lastId', 'oldestCreatedAt', 'newestCreatedAt'], // archive retention records
  Audit: ['seq', 'at', 'by', 'action', 'label', 'detail'], // admin actions and joins (Auth.js)
  // Leases.js: one row per grant (live, or ended within 24 h); the counters; lost reports owed.
  Leases: ['resource', 'fence', 'state', 'mode', 'holderPc', 'holderSession', 'holderName', 'claimId', 'grantedAt',
    'heartbeatAt', 'ttlExpiresAt', 'endedAt', 'repo', 'description', 'files', 'timeline'],
  LeaseCounters: ['key', 'value'], // "version", "fence:<resource>"
  LeaseLost: ['pc', 'resource', 'fence', 'takenBy', 'at', 'reason', 'event'],
  // Jobs.js: live jobs (queued, running, ended and not yet told to every
  // submitter); q = the target while it waits for its executor, cx = the target while a
  // cancel is requested, tell = " pc pc " owed the finish; the job is JSON over j1..j4.
  Jobs: ['id', 'q', 'cx', 'tell', 'target', 'state', 'dedupKey', 'submittedAt', 'endedAt', 'j1', 'j2', 'j3', 'j4'],
  JobWhitelists: ['target', 'hash', 'at', 'w1', 'w2', 'w3', 'w4'], // each PC's published CommandSpecs
  // JobsServer.js: a chunked team function's per-input results, keyed by (command, subject)
  JobChunks: ['key', 'fp', 'input', 'state', 'failures', 'lastFailureAt', 'at', 'result'],
  // Sessions.js: live sessions as each PC last reported them, names, their
  // moves, where mail to a name was delivered, and the mail a PC must withdraw.
  Sessions: ['pc', 'session', 'repo', 'branch', 'cwd', 'idleMs', 'leases', 'reportedAt'],
  Names: ['name', 'pc', 'session', 'since'],
  NameEvents: ['seq', 'name', 'at', 'pc', 'session', 'prevPc', 'prevSession', 'requeued'],
  NameMail: ['id', 'pc'],
  NameWithdraw: ['pc', 'id']
};
// Archive has the Mail layout: a final mail moves there unchanged.
TABS.Archive = TABS.Mail;
TABS.JobsArchive = TABS.Jobs; // ended jobs told to everyone, moved by the sweep

const GRID_GROW_ROWS = 1000; // rows added at a time when a tab's grid is full

// Per-execution memo: Apps Script starts every execution with fresh globals.
let execProps_ = null;
let execSS_ = null;
let execTabs_ = null;
function resetExec_() {
  execProps_ = null;
  execSS_ = null;
  execTabs_ = {};
}

// Script Properties cost quota (50,000 reads+writes a day, per deploying user) and the
// web app is open to anonymous callers, so every execution reads them from CacheService;
// Properties are read at most once a minute (PROPS_CACHE_S) or after a write.
const PROPS_CACHE_KEY = 'pcmail:props:v1';
const PROPS_CACHE_S = 60;
function prop_(key) {
  if (!execProps_) execProps_ = loadProps_();
  return Object.prototype.hasOwnProperty.call(execProps_, key) ? execProps_[key] : null;
}
function loadProps_() {
  const cache = CacheService.getScriptCache();
  const hit = cache.get(PROPS_CACHE_KEY);
  if (hit) {
    try { return JSON.parse(hit); } catch (e) { /* re-read below */ }
  }
  const all = PropertiesService.getScriptProperties().getProperties();
  const view = cacheableProps_(all);
  try { cache.put(PROPS_CACHE_KEY, JSON.stringify(view), PROPS_CACHE_S); } catch (e) { /* next execution re-reads */ }
  return view;
}
// The token itself never goes into the cache: only its SHA-256 digest.
function cacheableProps_(all) {
  const out = {};
  Object.keys(all).forEach(function (k) { if (k !== 'PCMAIL_TOKEN') out[k] = all[k]; });
  out.PCMAIL_TOKEN_SHA256 = all.PCMAIL_TOKEN ? sha256Hex_(all.PCMAIL_TOKEN) : '';
  return out;
}
// Writes a Script Property and drops the cached copy, so the next read sees it.
function setProp_(key, value) {
  const props = PropertiesService.getScriptProperties();
  if (value === null) props.deleteProperty(key); else props.setProperty(key, String(value));
  if (execProps_) { if (value === null) delete execProps_[key]; else execProps_[key] = String(value); }
  try { CacheService.getScriptCache().remove(PROPS_CACHE_KEY); } catch (e) { /* expires within a minute */ }
}

function sha256Hex_(s) {
  return Utilities.computeDigest(Utilities.DigestAlgorithm.SHA_256, String(s), Utilities.Charset.UTF_8)
    .map(function (b) { return ((b + 256) % 256).toString(16).padStart(2, '0'); }).join('');
}

function spreadsheet_() {
  if (!execSS_) {
    const id = prop_('SPREADSHEET_ID');
    const ss = id ? SpreadsheetApp.openById(id) : SpreadsheetApp.getActiveSpreadsheet();
    if (!ss) {
      throw pcErr_('not_configured', 'this Apps Script project is not bound to a spreadsheet: set the Script Property ' +
        'SPREADSHEET_ID to the id of a Google Sheet you own (Project Settings → Script properties), then run setup once');
    }
    execSS_ = ss;
  }
  return execSS_;
}

// Returns the tab, creating it when missing: trimmed to its columns, the whole grid
// formatted as text, the header written.
function tab_(name) {
  if (execTabs_ && execTabs_[name]) return execTabs_[name];
  const ss = spreadsheet_();
  let sh = ss.getSheetByName(name);
  if (!sh) {
    sh = ss.insertSheet(name);
    const nc = TABS[name].length;
    const maxCols = sh.getMaxColumns();
    if (maxCols > nc) sh.deleteColumns(nc + 1, maxCols - nc);
    sh.getRange(1, 1, sh.getMaxRows(), nc).setNumberFormat('@');
    writeText_(sh, 1, 1, [TABS[name]]);
    sh.setFrozenRows(1);
  } else if (name === 'Mail' || name === 'Archive') {
    ensureColumns_(sh); // an older build's grid ends before `recipients`
  }
  if (execTabs_) execTabs_[name] = sh;
  return sh;
}

// A tab made by an older build has fewer columns than TABS names now (the grid was cut
// to the header): the missing columns are added once, formatted as text, with their
// header. A Script Property remembers it, so later executions pay nothing.
function ensureColumns_(sh) {
  const name = sh.getName();
  const nc = TABS[name].length;
  const key = 'COLUMNS_' + name;
  if (Number(prop_(key)) === nc) return;
  const have = sh.getMaxColumns();
  if (have < nc) {
    sh.insertColumnsAfter(have, nc - have);
    sh.getRange(1, have + 1, sh.getMaxRows(), nc - have).setNumberFormat('@');
    writeText_(sh, 1, have + 1, [TABS[name].slice(have)]);
  }
  setProp_(key, nc);
}

// Makes the grid hold `lastRow`: new rows are added (and formatted as text) explicitly,
// so writes are correct whether or not Sheets would grow the grid on its own.
function ensureRows_(sheet, lastRow) {
  const max = sheet.getMaxRows();
  if (lastRow <= max) return;
  const add = Math.max(GRID_GROW_ROWS, lastRow - max);
  sheet.insertRowsAfter(max, add);
  const nc = TABS[sheet.getName()] ? TABS[sheet.getName()].length : sheet.getMaxColumns();
  sheet.getRange(max + 1, 1, add, nc).setNumberFormat('@');
}

// Normalises whatever Sheets hands back to the text we stored.
function cellStr_(v) {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'number') return String(v);
  if (Object.prototype.toString.call(v) === '[object Date]') return v.toISOString();
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

function readText_(sheet, row, col, nr, nc) {
  if (nr <= 0 || nc <= 0) return [];
  return sheet.getRange(row, col, nr, nc).getValues().map(function (r) { return r.map(cellStr_); });
}

// Text that Sheets would parse or evaluate if the '@' format were missing AND that
// cellStr_ could not restore ("true" → TRUE → "true" is fine; "0123" → 123 is not).
function isRiskyText_(s) {
  if (typeof s !== 'string' || s === '') return false;
  if (/^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$/.test(s)) return String(Number(s)) !== s;
  if (/^[=+\-@']/.test(s)) return true;
  if (/^(true|false)$/i.test(s)) return s !== 'true' && s !== 'false';
  return /^\d{1,4}[-/.]\d{1,2}/.test(s) || /^\d{1,2}:\d{2}/.test(s) ||
    /^[$€£¥]?\s*[+-]?\d[\d,]*(\.\d+)?\s*%?$/.test(s);
}

// Writes a block as text. Rows inside the grid are formatted '@' when their tab or
// its grid growth was made (tab_, ensureRows_), so a write is one setValues; `format`
// forces a setNumberFormat first. Risky cells are read back and, if the format did not
// hold, rewritten with Sheets' apostrophe escape.
function writeText_(sheet, row, col, rows, format) {
  if (!rows.length) return;
  const nc = rows[0].length;
  ensureRows_(sheet, row + rows.length - 1);
  const range = sheet.getRange(row, col, rows.length, nc);
  if (format) range.setNumberFormat('@');
  range.setValues(rows);
  const risky = [];
  rows.forEach(function (r, i) {
    r.forEach(function (v, j) { if (isRiskyText_(v)) risky.push([i, j]); });
  });
  if (!risky.length) return;
  const back = range.getValues();
  risky.forEach(function (p) {
    const want = rows[p[0]][p[1]];
    if (cellStr_(back[p[0]][p[1]]) === want) return;
    const cell = sheet.getRange(row + p[0], col + p[1]);
    cell.setValue("'" + want);
    if (cellStr_(cell.getValue()) !== want) throw new Error('Sheets did not keep text in ' + sheet.getName());
  });
}

// The sweep keeps GRID_GROW_ROWS empty (text-formatted) rows below the data of the tabs
// requests append to, so a request almost never pays for growing the grid.
function ensureHeadroom_(sheet) {
  ensureRows_(sheet, sheet.getLastRow() + GRID_GROW_ROWS);
}

// deleteRows that never removes every non-frozen row (Sheets refuses that).
function deleteRowsSafe_(sheet, start, n) {
  if (n <= 0) return;
  const max = sheet.getMaxRows();
  if (max - n <= 1) sheet.insertRowsAfter(max, GRID_GROW_ROWS);
  sheet.deleteRows(start, n);
}

function appendText_(sheet, rows) {
  if (!rows.length) return 0;
  const start = sheet.getLastRow() + 1;
  writeText_(sheet, start, 1, rows);
  return start;
}

function escapeRe_(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

// Row numbers whose cell in `col` is exactly one of `texts`. TextFinder runs inside
// Sheets, so the script never downloads the column (poll cost stays flat).
// One TextFinder per FIND_BATCH texts (an alternation regex of up to ~30,000 characters;
// an assumption to confirm on a real deployment, docs/gas-quota.md): a poll's 500 confirms,
// 500 marks and its own label fit in one.
const FIND_BATCH = 1001;
function findRows_(sheet, col, texts, fromRow, toRow) {
  const first = fromRow || 2;
  const last = toRow || sheet.getLastRow();
  if (last < first || !texts.length) return [];
  const range = sheet.getRange(first, col, last - first + 1, 1);
  const rows = {};
  for (let i = 0; i < texts.length; i += FIND_BATCH) {
    const part = texts.slice(i, i + FIND_BATCH);
    const finder = part.length === 1
      ? range.createTextFinder(part[0]).matchCase(true).matchEntireCell(true)
      : range.createTextFinder('^(?:' + part.map(escapeRe_).join('|') + ')$')
        .useRegularExpression(true).matchCase(true).matchEntireCell(true);
    finder.findAll().forEach(function (r) { rows[r.getRow()] = true; });
  }
  return Object.keys(rows).map(Number).sort(function (a, b) { return a - b; });
}

// Reads the given rows (sorted) with ONE getValues of the span covering them, however
// they interleave with other rows: one round trip beats one per run.
function readRowsAt_(sheet, rows, nc) {
  const out = {};
  if (!rows.length) return out;
  const lo = rows[0];
  const vals = readText_(sheet, lo, 1, rows[rows.length - 1] - lo + 1, nc);
  rows.forEach(function (r) { out[r] = vals[r - lo]; });
  return out;
}
