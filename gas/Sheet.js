// Sheet access: every value goes in as plain text ('@') and comes out normalised,
// so Sheets can never turn "true", "0123", "2026-01-01" or "=…" into something else.

const TABS = {
  Mail: ['id', 'from', 'to', 'kind', 'urgent', 'expiresAt', 'inReplyTo', 'auto', 'hop',
    'createdAt', 'broadcastOf', 'state', 'timeline', 'updatedAt', 'q', 'subject', 'body', 'expiresIn'],
  Roster: ['number', 'label', 'hostname', 'lastPollAt'],
  Events: ['seq', 'from', 'id', 'state', 'at', 'by', 'u'], // u: the sender, for changes past `new`
  Alerts: ['key', 'kind', 'subject', 'pc', 'message', 'openedAt', 'updatedAt', 'resolvedAt',
    'count', 'posted', 'postTries']
};
// Archive has the Mail layout: a final mail moves there unchanged.
TABS.Archive = TABS.Mail;

// Per-execution memo: Apps Script starts every execution with fresh globals, and the
// Properties quota (50,000 reads+writes a day) must not be spent once per Sheets call.
let execProps_ = null;
let execSS_ = null;
function resetExec_() {
  execProps_ = null;
  execSS_ = null;
}
function prop_(key) {
  if (!execProps_) execProps_ = PropertiesService.getScriptProperties().getProperties();
  return Object.prototype.hasOwnProperty.call(execProps_, key) ? execProps_[key] : null;
}

function spreadsheet_() {
  if (!execSS_) {
    const id = prop_('SPREADSHEET_ID');
    execSS_ = id ? SpreadsheetApp.openById(id) : SpreadsheetApp.getActiveSpreadsheet();
  }
  return execSS_;
}

// Returns the tab, creating it (with a text-formatted header) when missing.
function tab_(name) {
  const ss = spreadsheet_();
  let sh = ss.getSheetByName(name);
  if (!sh) {
    sh = ss.insertSheet(name);
    writeText_(sh, 1, 1, [TABS[name]]);
    sh.setFrozenRows(1);
  }
  return sh;
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

// Writes a block as text: format first, then values; risky cells are read back
// and, if the format did not hold, rewritten with Sheets' apostrophe escape.
function writeText_(sheet, row, col, rows) {
  if (!rows.length) return;
  const nc = rows[0].length;
  const range = sheet.getRange(row, col, rows.length, nc);
  range.setNumberFormat('@');
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
function findRows_(sheet, col, texts, fromRow) {
  const first = fromRow || 2;
  const last = sheet.getLastRow();
  if (last < first || !texts.length) return [];
  const range = sheet.getRange(first, col, last - first + 1, 1);
  const rows = {};
  for (let i = 0; i < texts.length; i += 40) {
    const part = texts.slice(i, i + 40);
    const finder = part.length === 1
      ? range.createTextFinder(part[0]).matchCase(true).matchEntireCell(true)
      : range.createTextFinder('^(?:' + part.map(escapeRe_).join('|') + ')$')
        .useRegularExpression(true).matchCase(true).matchEntireCell(true);
    finder.findAll().forEach(function (r) { rows[r.getRow()] = true; });
  }
  return Object.keys(rows).map(Number).sort(function (a, b) { return a - b; });
}

// Reads the given rows (sorted) with one getValues per contiguous run.
function readRowsAt_(sheet, rows, nc) {
  const out = {};
  let i = 0;
  while (i < rows.length) {
    let j = i;
    while (j + 1 < rows.length && rows[j + 1] === rows[j] + 1) j++;
    const vals = readText_(sheet, rows[i], 1, j - i + 1, nc);
    for (let k = i; k <= j; k++) out[rows[k]] = vals[k - i];
    i = j + 1;
  }
  return out;
}
