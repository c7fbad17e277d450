'use strict';
// Fakes of the Apps Script services pcmail uses, as strict as Google is:
// - Sheets are 2-D arrays; values written to cells not formatted '@' are coerced the way
//   Sheets does it.
// - Writes are batched per execution: another execution sees them only after
//   SpreadsheetApp.flush() or the end of the writing execution. A read by the writing
//   execution applies its own pending writes first (Sheets flushes before a read), so a
//   queued write can fail at a later call than the one that queued it.
// - Every getValues/setValues/setNumberFormat/TextFinder call is one round trip with a
//   simulated cost (`fakes.cost`, ms); `fakes.sim.ms` adds them up and the script lock
//   records how long each hold lasted in simulated time (the bench's lock-hold estimate).
// - A sheet has a grid (getMaxRows/getMaxColumns, 1,000 x 26 for a new tab); with
//   `fakes.gridStrict` (default) a range outside it throws like Google does.
// - Properties reads/writes count against a daily quota (50,000, consumer account).

const crypto = require('crypto');

// ---- Sheets coercion -------------------------------------------------------------

const NUM_RE = /^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$/;
const ISO_DATE_RE = /^(\d{4})-(\d{1,2})-(\d{1,2})(?:[T ](\d{1,2}):(\d{2})(?::(\d{2}))?)?$/;
const US_DATE_RE = /^(\d{1,2})\/(\d{1,2})\/(\d{4})$/;

// What Sheets stores when `v` is typed into a cell of an automatic format.
// Returns {value, formula}.
function coerce(v) {
  if (typeof v !== 'string') return { value: v === undefined || v === null ? '' : v, formula: null };
  if (v.startsWith("'")) return { value: v.slice(1), formula: null }; // apostrophe: literal text
  if (v.startsWith('=')) return { value: evalFormula(v), formula: v };
  if (/^(true|false)$/i.test(v)) return { value: v.toLowerCase() === 'true', formula: null };
  if (NUM_RE.test(v)) return { value: Number(v), formula: null };
  if (/^[+-]/.test(v)) return { value: '#ERROR!', formula: v }; // "+x" / "-x" parse as formulas
  if (v.startsWith('@')) return { value: '#NAME?', formula: v };
  let m = ISO_DATE_RE.exec(v);
  if (m) return { value: new Date(Date.UTC(+m[1], +m[2] - 1, +m[3], +(m[4] || 0), +(m[5] || 0), +(m[6] || 0))), formula: null };
  m = US_DATE_RE.exec(v);
  if (m) return { value: new Date(Date.UTC(+m[3], +m[1] - 1, +m[2])), formula: null };
  return { value: v, formula: null };
}

function evalFormula(f) {
  const m = /^=\s*(-?\d+(?:\.\d+)?)\s*([+*-])\s*(-?\d+(?:\.\d+)?)\s*$/.exec(f);
  if (m) {
    const a = Number(m[1]), b = Number(m[3]);
    return m[2] === '+' ? a + b : m[2] === '-' ? a - b : a * b;
  }
  return '#NAME?';
}

// ---- Spreadsheet ---------------------------------------------------------------

function newCounters() {
  return { getValuesCalls: 0, cellsRead: 0, setValuesCalls: 0, cellsWritten: 0, formatCalls: 0,
    textFinderCalls: 0, textFinderCellsScanned: 0, deleteRowsCalls: 0, appendRowCalls: 0, lastRowCalls: 0,
    rangeCalls: 0, metaCalls: 0, structureCalls: 0 };
}

// Simulated cost per call in ms. ASSUMPTIONS (docs/gas-quota.md says where they come from):
// one Sheets round trip costs tens of ms whatever its size, plus a small per-cell share.
const DEFAULT_COST = {
  rangeCall: 60,          // getValues / setValues / setNumberFormat round trip
  perCellRead: 0.005,     // 5 µs a cell read
  perCellWritten: 0.02,   // 20 µs a cell written
  textFinder: 100,        // findAll round trip
  perCellScanned: 0.0005, // scan inside Sheets
  meta: 20,               // getLastRow / getMaxRows / getSheetByName / insertSheet lookups
  structure: 150,         // insertRows / deleteRows / deleteColumns / insertSheet
  flush: 30,              // SpreadsheetApp.flush with pending writes
  props: 30,              // one Properties read or write
  cache: 10,              // one CacheService call
  lock: 20                // tryLock without contention
};
const GRID_ROWS = 1000;
const GRID_COLS = 26;
const OUT_OF_GRID = 'Exception: The coordinates of the range are outside the dimensions of the sheet.';

class FakeSheet {
  constructor(ss, name) {
    this.ss = ss;
    this.name = name;
    this.cells = [];   // rows of {v, f, fmt}
    this.frozen = 0;
    this.maxRows = GRID_ROWS;
    this.maxCols = GRID_COLS;
    this.counters = newCounters();
  }
  _fakes() { return this.ss.fakes; }
  // Before any read: the calling execution's own pending writes are applied.
  _read() { this._fakes()._flushOwn(); }
  _meta() { this._read(); this._tick('metaCalls', 1); this._fakes()._spend('meta'); }
  _checkGrid(row, col, nr, nc) {
    if (!this._fakes().gridStrict) return;
    if (row + nr - 1 > this.maxRows || col + nc - 1 > this.maxCols) throw new Error(OUT_OF_GRID);
  }
  _grow(r, c) { if (r > this.maxRows) this.maxRows = r; if (c > this.maxCols) this.maxCols = c; }
  _cell(r, c) { // 1-based, creates
    while (this.cells.length < r) this.cells.push([]);
    const row = this.cells[r - 1];
    while (row.length < c) row.push({ v: '', f: null, fmt: null });
    return row[c - 1];
  }
  _peek(r, c) {
    const row = this.cells[r - 1];
    return row && row[c - 1] ? row[c - 1] : null;
  }
  _tick(key, n) { this.counters[key] += n; this.ss.counters[key] += n; this.ss.fakes._onSheetCall(this, key, n); }
  getName() { return this.name; }
  getParent() { return this.ss; }
  setFrozenRows(n) { this.frozen = n; }
  getMaxRows() { this._meta(); return this.maxRows; }
  getMaxColumns() { this._meta(); return this.maxCols; }
  insertRowsAfter(after, n) {
    this._structure('insertRowsAfter', () => {
      if (after < 1 || after > this.maxRows || n < 1) throw new Error('Exception: Those rows are out of bounds.');
      if (this.cells.length > after) this.cells.splice(after, 0, ...Array.from({ length: n }, () => []));
      this.maxRows += n; // new rows carry no number format here (the stricter case)
    });
    return this;
  }
  insertColumnsAfter(after, n) {
    this._structure('insertColumnsAfter', () => {
      if (after < 1 || after > this.maxCols || n < 1) throw new Error('Exception: Those columns are out of bounds.');
      this.cells.forEach((row) => { if (row.length > after) row.splice(after, 0, ...Array(n).fill(undefined)); });
      this.maxCols += n; // new columns carry no number format here (the stricter case)
    });
    return this;
  }
  deleteColumns(start, n) {
    this._structure('deleteColumns', () => {
      if (start < 1 || n < 1 || start + n - 1 > this.maxCols) throw new Error('Exception: Those columns are out of bounds.');
      this.cells.forEach((row) => row.splice(start - 1, n));
      this.maxCols -= n;
    });
    return this;
  }
  // Queued like a write (structure changes are batched too), charged now.
  _structure(what, apply) {
    this._tick('structureCalls', 1);
    this._fakes()._spend('structure');
    this._fakes()._queue(this, what, apply);
  }
  getLastRow() {
    this._read();
    this._tick('lastRowCalls', 1);
    this._tick('metaCalls', 1);
    this._fakes()._spend('meta');
    for (let r = this.cells.length; r >= 1; r--) {
      if (this.cells[r - 1].some((c) => c.v !== '' && c.v !== null)) return r;
    }
    return 0;
  }
  getLastColumn() {
    this._read();
    let n = 0;
    this.cells.forEach((row) => row.forEach((c, i) => { if (c.v !== '') n = Math.max(n, i + 1); }));
    return n;
  }
  getRange(row, col, nr, nc) {
    if (typeof row === 'string') throw new Error('A1 notation is not supported by the fake');
    nr = nr === undefined ? 1 : nr;
    nc = nc === undefined ? 1 : nc;
    if (!(row >= 1 && col >= 1 && nr >= 1 && nc >= 1) || [row, col, nr, nc].some((x) => !Number.isInteger(x))) {
      throw new Error(`Exception: The coordinates or dimensions of the range are invalid. (${row},${col},${nr},${nc})`);
    }
    this.ss._call();
    this._read();
    this._checkGrid(row, col, nr, nc);
    return new FakeRange(this, row, col, nr, nc);
  }
  getDataRange() { return this.getRange(1, 1, Math.max(this.getLastRow(), 1), Math.max(this.getLastColumn(), 1)); }
  appendRow(values) {
    this._tick('appendRowCalls', 1);
    this._tick('rangeCalls', 1);
    this._fakes()._spend('rangeCall');
    this._fakes()._queue(this, 'appendRow', () => {
      const r = this.getLastRowRaw() + 1;
      this._grow(r, values.length);
      values.forEach((v, i) => this._write(r, i + 1, v));
    });
    return this;
  }
  getLastRowRaw() {
    for (let r = this.cells.length; r >= 1; r--) {
      if (this.cells[r - 1].some((c) => c.v !== '' && c.v !== null)) return r;
    }
    return 0;
  }
  deleteRows(start, n) {
    this._tick('deleteRowsCalls', 1);
    this._tick('structureCalls', 1);
    this._fakes()._spend('structure');
    this._fakes()._queue(this, 'deleteRows', () => {
      if (start < 1 || n < 1 || start + n - 1 > this.maxRows) throw new Error('Exception: Those rows are out of bounds.');
      if (this.maxRows - n <= this.frozen) throw new Error('Exception: Sorry, it is not possible to delete all non-frozen rows.');
      this.cells.splice(start - 1, n);
      this.maxRows -= n;
    });
    return this;
  }
  deleteRow(r) { return this.deleteRows(r, 1); }
  clear() { this._fakes()._queue(this, 'clear', () => { this.cells = []; }); return this; }
  createTextFinder(text) { return this.getDataRange().createTextFinder(text); }
  _write(r, c, v) {
    const cell = this._cell(r, c);
    if (cell.fmt === '@' && typeof v === 'string') { cell.v = v; cell.f = null; return; }
    if (cell.fmt === '@') { cell.v = v === null || v === undefined ? '' : String(v); cell.f = null; return; }
    const x = coerce(v);
    cell.v = x.value;
    cell.f = x.formula;
  }
  // Test helper: raw rows written in bulk (no counting, no batching), already text.
  seedRows(startRow, rows) {
    this._grow(startRow + rows.length - 1, rows.length ? rows[0].length : 0);
    rows.forEach((vals, i) => vals.forEach((v, j) => {
      const cell = this._cell(startRow + i, j + 1);
      cell.v = v; cell.f = null; cell.fmt = '@';
    }));
  }
  // The stored values up to the last row with a value (the grid's empty rows left out).
  dump() { return this.cells.slice(0, this.getLastRowRaw()).map((row) => row.map((c) => c.v)); }
}

class FakeRange {
  constructor(sheet, row, col, nr, nc) { Object.assign(this, { sheet, row, col, nr, nc }); }
  getRow() { return this.row; }
  getColumn() { return this.col; }
  getNumRows() { return this.nr; }
  getNumColumns() { return this.nc; }
  getSheet() { return this.sheet; }
  getValues() {
    this.sheet.ss._call();
    this.sheet._read();
    this.sheet._checkGrid(this.row, this.col, this.nr, this.nc);
    this.sheet._tick('getValuesCalls', 1);
    this.sheet._tick('rangeCalls', 1);
    this.sheet._tick('cellsRead', this.nr * this.nc);
    this.sheet._fakes()._spend('rangeCall', this.nr * this.nc * this.sheet._fakes().cost.perCellRead);
    const out = [];
    for (let i = 0; i < this.nr; i++) {
      const r = [];
      for (let j = 0; j < this.nc; j++) {
        const c = this.sheet._peek(this.row + i, this.col + j);
        const v = c ? c.v : '';
        r.push(v instanceof Date ? new Date(v.getTime()) : v);
      }
      out.push(r);
    }
    return out;
  }
  getValue() { return this.sheet.getRange(this.row, this.col).getValues()[0][0]; }
  getFormulas() {
    this.sheet._read();
    const out = [];
    for (let i = 0; i < this.nr; i++) {
      const r = [];
      for (let j = 0; j < this.nc; j++) { const c = this.sheet._peek(this.row + i, this.col + j); r.push(c && c.f ? c.f : ''); }
      out.push(r);
    }
    return out;
  }
  setValues(values) {
    this.sheet.ss._call();
    if (!Array.isArray(values) || values.length !== this.nr || values.some((r) => !Array.isArray(r) || r.length !== this.nc)) {
      throw new Error(`Exception: The number of rows or columns in the data does not match the range (${this.nr}x${this.nc}).`);
    }
    const fakes = this.sheet._fakes();
    fakes._maybeFail('setValues', this.sheet);
    this.sheet._tick('setValuesCalls', 1);
    this.sheet._tick('rangeCalls', 1);
    this.sheet._tick('cellsWritten', this.nr * this.nc);
    fakes._spend('rangeCall', this.nr * this.nc * fakes.cost.perCellWritten);
    const copy = values.map((r) => r.slice());
    fakes._queue(this.sheet, 'setValues', () => {
      this.sheet._checkGrid(this.row, this.col, this.nr, this.nc);
      this.sheet._grow(this.row + this.nr - 1, this.col + this.nc - 1); // lenient mode: the grid grows
      copy.forEach((r, i) => r.forEach((v, j) => this.sheet._write(this.row + i, this.col + j, v)));
    });
    return this;
  }
  setValue(v) { return this.setValues([[v]]); }
  setNumberFormat(fmt) {
    this.sheet.ss._call();
    const fakes = this.sheet._fakes();
    fakes._maybeFail('setNumberFormat', this.sheet);
    this.sheet._tick('formatCalls', 1);
    this.sheet._tick('rangeCalls', 1);
    fakes._spend('rangeCall');
    if (fakes.faults.formatLost) return this; // simulates a lost '@' format
    fakes._queue(this.sheet, 'setNumberFormat', () => {
      this.sheet._checkGrid(this.row, this.col, this.nr, this.nc);
      for (let i = 0; i < this.nr; i++) for (let j = 0; j < this.nc; j++) this.sheet._cell(this.row + i, this.col + j).fmt = fmt;
    });
    return this;
  }
  getNumberFormat() { this.sheet._read(); const c = this.sheet._peek(this.row, this.col); return c && c.fmt ? c.fmt : 'General'; }
  clearContent() {
    this.sheet._fakes()._queue(this.sheet, 'clearContent', () => {
      for (let i = 0; i < this.nr; i++) for (let j = 0; j < this.nc; j++) {
        const c = this.sheet._peek(this.row + i, this.col + j); if (c) { c.v = ''; c.f = null; }
      }
    });
    return this;
  }
  createTextFinder(text) { return new FakeTextFinder(this, String(text)); }
}

class FakeTextFinder {
  constructor(range, text) {
    Object.assign(this, { range, text, entire: false, caseSens: false, regex: false });
  }
  matchEntireCell(b) { this.entire = !!b; return this; }
  matchCase(b) { this.caseSens = !!b; return this; }
  useRegularExpression(b) { this.regex = !!b; return this; }
  findAll() {
    const { range } = this;
    const sheet = range.sheet;
    sheet.ss._call();
    sheet._read();
    sheet._tick('textFinderCalls', 1);
    sheet._tick('rangeCalls', 1);
    const lastRow = Math.min(range.row + range.nr - 1, sheet.cells.length);
    const scanned = Math.max(0, lastRow - range.row + 1) * range.nc;
    sheet._tick('textFinderCellsScanned', scanned);
    sheet._fakes()._spend('textFinder', scanned * sheet._fakes().cost.perCellScanned);
    const flags = this.caseSens ? '' : 'i';
    let re;
    if (this.regex) re = new RegExp(this.entire ? '^(?:' + this.text + ')$' : this.text, flags);
    else {
      const esc = this.text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      re = new RegExp(this.entire ? '^' + esc + '$' : esc, flags);
    }
    const out = [];
    for (let r = range.row; r <= lastRow; r++) {
      for (let c = range.col; c < range.col + range.nc; c++) {
        const cell = sheet._peek(r, c);
        if (!cell || cell.v === '') continue;
        const shown = cell.v instanceof Date ? cell.v.toISOString() : typeof cell.v === 'boolean' ? String(cell.v).toUpperCase() : String(cell.v);
        if (re.test(shown)) out.push(new FakeRange(sheet, r, c, 1, 1));
      }
    }
    return out;
  }
  findNext() { return this.findAll()[0] || null; }
}

class FakeSpreadsheet {
  constructor(fakes, id) {
    this.fakes = fakes;
    this.id = id || 'fake-ss-' + crypto.randomBytes(4).toString('hex');
    this.sheets = [];
    this.counters = newCounters();
    this.calls = 0;
  }
  _call() { this.calls++; this.fakes.counts.sheetsCalls++; }
  getId() { return this.id; }
  getUrl() { return 'https://docs.google.com/spreadsheets/d/' + this.id + '/edit'; }
  getSheets() { this._call(); this.fakes._spend('meta'); return this.sheets.slice(); }
  getSheetByName(name) { this._call(); this.fakes._spend('meta'); return this.sheets.find((s) => s.name === name) || null; }
  // Structural, so not batched: the new tab exists for everyone at once.
  insertSheet(name) {
    this._call();
    this.fakes._spend('structure');
    if (this.sheets.some((s) => s.name === name)) throw new Error(`Exception: A sheet with the name "${name}" already exists.`);
    const s = new FakeSheet(this, name);
    this.sheets.push(s);
    return s;
  }
  deleteSheet(sheet) { this.sheets = this.sheets.filter((s) => s !== sheet); }
  toJSON() {
    // Rows below the last value are stored as one count and format (the formatted grid).
    return { id: this.id, sheets: this.sheets.map((s) => {
      const last = s.getLastRowRaw();
      const below = s.cells.slice(last);
      const fmt = below.length && below[0][0] ? below[0][0].fmt : null;
      return { name: s.name, frozen: s.frozen, maxRows: s.maxRows, maxCols: s.maxCols,
        blank: { rows: below.length, cols: below.length ? below[0].length : 0, fmt },
        cells: s.cells.slice(0, last).map((row) => row.map((c) => ({ v: c.v instanceof Date ? { date: c.v.toISOString() } : c.v, f: c.f, fmt: c.fmt }))) };
    }) };
  }
  static fromJSON(fakes, j) {
    const ss = new FakeSpreadsheet(fakes, j.id);
    j.sheets.forEach((sj) => {
      const s = new FakeSheet(ss, sj.name);
      s.frozen = sj.frozen || 0;
      s.maxRows = Math.max(sj.maxRows || GRID_ROWS, sj.cells.length);
      s.maxCols = Math.max(sj.maxCols || GRID_COLS, ...sj.cells.map((r) => r.length));
      s.cells = sj.cells.map((row) => row.map((c) => ({ v: c.v && typeof c.v === 'object' && c.v.date ? new Date(c.v.date) : c.v, f: c.f || null, fmt: c.fmt || null })));
      const b = sj.blank || { rows: 0 };
      for (let i = 0; i < b.rows; i++) s.cells.push(Array.from({ length: b.cols }, () => ({ v: '', f: null, fmt: b.fmt })));
      ss.sheets.push(s);
    });
    return ss;
  }
}

// ---- The other services ----------------------------------------------------------

function createFakes(opts) {
  opts = opts || {};
  const fakes = {
    now: opts.now || (() => Date.now()),
    counts: { sheetsCalls: 0, lockTries: 0, lockBusy: 0, propsCalls: 0, cacheCalls: 0, fetches: 0, sleeps: 0, flushes: 0 },
    // formatLost: setNumberFormat does nothing. setValuesThrowOn: a sheet name (or true)
    // whose setValues throws at the call. plan: [{what, sheet, nth, deferred}] — the nth
    // matching call (setValues, setNumberFormat, deleteRows, insertRowsAfter, appendRow…)
    // fails, at the call or (deferred) when its batch is applied later; each entry fires once.
    faults: { formatLost: false, setValuesThrowOn: null, plan: [] },
    gridStrict: opts.gridStrict === undefined ? true : !!opts.gridStrict,
    cost: Object.assign({}, DEFAULT_COST, opts.cost || {}),
    sim: { ms: 0 },            // simulated time spent in service calls
    propsQuotaPerDay: opts.propsQuotaPerDay || 50000,
    propsUsed: {},             // day (UTC, from fakes.now) → Properties reads + writes
    exec: { stack: [], seq: 0 },
    onSheetCall: null, // hook(sheet, key, n)
    _onSheetCall(sheet, key, n) {
      if (fakes.lock.heldBy) fakes.lock.touchedWhileHeld += key === 'cellsRead' || key === 'cellsWritten' ? n : 0;
      if (fakes.onSheetCall) fakes.onSheetCall(sheet, key, n);
    },
    _spend(kind, extra) { fakes.sim.ms += (fakes.cost[kind] || 0) + (extra || 0); },
    _planHit(what, sheet) {
      for (const f of fakes.faults.plan) {
        if (f.done || f.what !== what || (f.sheet && f.sheet !== sheet.name)) continue;
        f.seen = (f.seen || 0) + 1;
        if (f.seen === (f.nth || 1)) { f.done = true; return f; }
      }
      return null;
    },
    _maybeFail(what, sheet) {
      const f = fakes.faults.setValuesThrowOn;
      if (f && what === 'setValues' && (f === true || f === sheet.name)) throw new Error('Exception: Service Spreadsheets failed while accessing document');
    },
    // The execution running now (null: outside any execution, writes apply at once).
    _cur() { const st = fakes.exec.stack; return st.length ? st[st.length - 1] : null; },
    _queue(sheet, what, apply) {
      const hit = fakes._planHit(what, sheet);
      if (hit && !hit.deferred) throw new Error('Exception: Service Spreadsheets failed while accessing document with id ' + sheet.ss.id + '. (' + what + ' on ' + sheet.name + ')');
      const op = { sheet, what, apply, fail: !!hit };
      const cur = fakes._cur();
      if (cur) cur.queue.push(op); else fakes._apply([op]);
    },
    _apply(ops) {
      for (let i = 0; i < ops.length; i++) {
        if (ops[i].fail) throw new Error('Exception: Service Spreadsheets failed while accessing document (a batched ' + ops[i].what + ' on ' + ops[i].sheet.name + '). ' + (ops.length - i - 1) + ' later writes of the batch were dropped.');
        ops[i].apply();
      }
    },
    // Applies the current execution's pending writes (a read or flush() does this).
    _flushOwn() {
      const cur = fakes._cur();
      if (!cur || !cur.queue.length) return;
      const ops = cur.queue;
      cur.queue = [];
      fakes.counts.flushes++;
      fakes._apply(ops);
    },
    // Runs fn as one Apps Script execution: its writes are visible to other executions
    // only after flush() or when it returns.
    runExecution(fn) {
      const ex = { id: ++fakes.exec.seq, queue: [] };
      fakes.exec.stack.push(ex);
      let ok = false;
      try {
        const r = fn();
        ok = true;
        return r;
      } finally {
        fakes.exec.stack.pop();
        const ops = ex.queue;
        ex.queue = [];
        try { fakes._apply(ops); } catch (e) {
          logs.push('error: end-of-execution write failed: ' + e.message);
          if (ok && fakes.throwOnEndFlush) throw e;
        }
      }
    },
    pendingWrites() { return fakes.exec.stack.reduce((n, e) => n + e.queue.length, 0); }
  };
  const ss = opts.spreadsheet ? FakeSpreadsheet.fromJSON(fakes, opts.spreadsheet) : new FakeSpreadsheet(fakes);
  fakes.ss = ss;

  // LockService: one script lock shared by "executions". `contended` simulates another
  // execution holding it; tryLock then fails after the (virtual) wait.
  const lock = {
    heldBy: null, contended: false, acquisitions: 0, maxTouchedWhileHeld: 0, touchedWhileHeld: 0, onAcquire: null, onRelease: null, seq: 0,
    heldSinceSim: 0, maxHoldMs: 0, holds: [], pendingAtRelease: 0
  };
  fakes.lock = lock;
  function makeLock() {
    const me = { id: ++lock.seq };
    return {
      tryLock(ms) {
        fakes.counts.lockTries++;
        if (lock.heldBy === me) return true;
        if (lock.contended || lock.heldBy) { fakes.counts.lockBusy++; return false; }
        lock.heldBy = me;
        lock.acquisitions++;
        lock.touchedWhileHeld = 0;
        fakes._spend('lock');
        lock.heldSinceSim = fakes.sim.ms;
        if (lock.onAcquire) lock.onAcquire();
        return true;
      },
      waitLock(ms) { if (!this.tryLock(ms)) throw new Error('Lock timeout: another process was holding the lock for too long.'); },
      hasLock() { return lock.heldBy === me; },
      releaseLock() {
        if (lock.heldBy !== me) return;
        lock.maxTouchedWhileHeld = Math.max(lock.maxTouchedWhileHeld, lock.touchedWhileHeld);
        const held = fakes.sim.ms - lock.heldSinceSim;
        lock.holds.push(held);
        lock.maxHoldMs = Math.max(lock.maxHoldMs, held);
        // Writes still queued when the lock goes are the defect-1 hazard: count them.
        const cur = fakes._cur();
        if (cur && cur.queue.length) lock.pendingAtRelease += cur.queue.length;
        lock.heldBy = null;
        if (lock.onRelease) lock.onRelease();
      }
    };
  }
  const LockService = { getScriptLock: makeLock, getUserLock: makeLock, getDocumentLock: makeLock };

  // Every call counts against the daily Properties quota of the deploying user.
  function propsCall() {
    fakes.counts.propsCalls++;
    fakes._spend('props');
    const day = Math.floor(fakes.now() / 86400000);
    fakes.propsUsed[day] = (fakes.propsUsed[day] || 0) + 1;
    if (fakes.propsUsed[day] > fakes.propsQuotaPerDay) throw new Error('Exception: Service invoked too many times for one day: properties.');
  }
  function makeProps(store) {
    return {
      getProperty(k) { propsCall(); return Object.prototype.hasOwnProperty.call(store, k) ? store[k] : null; },
      setProperty(k, v) { propsCall(); store[k] = String(v); return this; },
      deleteProperty(k) { propsCall(); delete store[k]; return this; },
      getProperties() { propsCall(); return Object.assign({}, store); },
      setProperties(o, del) { propsCall(); if (del) Object.keys(store).forEach((k) => delete store[k]); Object.keys(o).forEach((k) => { store[k] = String(o[k]); }); return this; },
      getKeys() { propsCall(); return Object.keys(store); }
    };
  }
  fakes.scriptProps = Object.assign({}, opts.properties || {});
  const PropertiesService = {
    getScriptProperties: () => makeProps(fakes.scriptProps),
    getUserProperties: () => makeProps(fakes.userProps || (fakes.userProps = {})),
    getDocumentProperties: () => makeProps(fakes.docProps || (fakes.docProps = {}))
  };

  // CacheService: values are strings ≤ 100 KB, expiry in seconds (default 600, max 21600).
  const cacheStore = new Map();
  fakes.cacheStore = cacheStore;
  const cache = {
    get(k) { fakes.counts.cacheCalls++; fakes._spend('cache'); const e = cacheStore.get(k); if (!e) return null; if (e.until <= fakes.now()) { cacheStore.delete(k); return null; } return e.v; },
    put(k, v, ttl) {
      fakes.counts.cacheCalls++;
      fakes._spend('cache');
      if (typeof v !== 'string') v = String(v);
      if (Buffer.byteLength(v, 'utf8') > 100 * 1024) throw new Error('Exception: Argument too large: value');
      if (k.length > 250) throw new Error('Exception: Argument too large: key');
      const s = Math.min(ttl === undefined ? 600 : ttl, 21600);
      cacheStore.set(k, { v, until: fakes.now() + s * 1000 });
    },
    remove(k) { fakes.counts.cacheCalls++; cacheStore.delete(k); },
    getAll(keys) { const o = {}; keys.forEach((k) => { const v = cache.get(k); if (v !== null) o[k] = v; }); return o; },
    putAll(o, ttl) { Object.keys(o).forEach((k) => cache.put(k, o[k], ttl)); },
    removeAll(keys) { keys.forEach((k) => cache.remove(k)); }
  };
  const CacheService = { getScriptCache: () => cache, getUserCache: () => cache, getDocumentCache: () => cache };

  const ContentService = {
    MimeType: { JSON: 'application/json', TEXT: 'text/plain', CSV: 'text/csv', JAVASCRIPT: 'application/javascript' },
    createTextOutput(s) {
      return { content: s === undefined ? '' : String(s), mime: 'text/plain',
        setMimeType(m) { this.mime = m; return this; }, getContent() { return this.content; },
        getMimeType() { return this.mime; }, setContent(c) { this.content = String(c); return this; } };
    }
  };

  // UrlFetchApp: records requests; `fetch.script` is a list of outcomes consumed in
  // order (a status number, 'throw', or a function(req) → status); default 200.
  fakes.fetch = { requests: [], script: [], handler: null };
  const UrlFetchApp = {
    fetch(url, params) {
      fakes.counts.fetches++;
      const req = { url, params: params || {}, payload: params && params.payload };
      fakes.fetch.requests.push(req);
      let outcome = fakes.fetch.script.length ? fakes.fetch.script.shift() : 200;
      if (fakes.fetch.handler) outcome = fakes.fetch.handler(req);
      if (typeof outcome === 'function') outcome = outcome(req);
      if (outcome === 'throw') throw new Error('Exception: Address unavailable: ' + url);
      // An outcome is a status number or {code, headers, body}.
      const o = typeof outcome === 'object' && outcome !== null ? outcome : { code: outcome };
      const code = Number(o.code);
      if (code >= 400 && !(params && params.muteHttpExceptions)) throw new Error('Exception: Request failed for ' + url + ' returned code ' + code);
      return { getResponseCode: () => code, getContentText: () => o.body || '', getHeaders: () => Object.assign({}, o.headers || {}),
        getAllHeaders: () => Object.assign({}, o.headers || {}) };
    }
  };

  // ScriptApp triggers.
  fakes.triggers = [];
  let trigSeq = 0;
  const ScriptApp = {
    getProjectTriggers: () => fakes.triggers.slice(),
    deleteTrigger(t) { fakes.triggers = fakes.triggers.filter((x) => x !== t); },
    newTrigger(fn) {
      const spec = { fn, minutes: null };
      const builder = {
        timeBased() { return builder; },
        everyMinutes(n) { if ([1, 5, 10, 15, 30].indexOf(n) < 0) throw new Error('everyMinutes: invalid ' + n); spec.minutes = n; return builder; },
        everyHours(n) { spec.minutes = n * 60; return builder; },
        create() {
          const id = 'trigger-' + (++trigSeq);
          const t = { getHandlerFunction: () => spec.fn, getUniqueId: () => id, getEventType: () => 'CLOCK', minutes: spec.minutes };
          fakes.triggers.push(t);
          return t;
        }
      };
      return builder;
    },
    EventType: { CLOCK: 'CLOCK' }
  };

  const Utilities = {
    DigestAlgorithm: { SHA_256: 'sha256', MD5: 'md5', SHA_1: 'sha1' },
    Charset: { UTF_8: 'utf8' },
    // Without a charset a string is hashed in the platform default (Latin-1 here), as
    // Apps Script does not promise UTF-8: pass Utilities.Charset.UTF_8.
    computeDigest(algo, s, charset) {
      fakes.counts.digests = (fakes.counts.digests || 0) + 1;
      const enc = charset === 'utf8' ? 'utf8' : 'latin1';
      const buf = crypto.createHash(algo).update(typeof s === 'string' ? Buffer.from(s, enc) : Buffer.from(s)).digest();
      return Array.from(buf, (b) => (b > 127 ? b - 256 : b)); // Apps Script gives signed bytes
    },
    getUuid: () => crypto.randomUUID(),
    sleep(ms) { fakes.counts.sleeps++; fakes.sleptMs = (fakes.sleptMs || 0) + ms; },
    formatDate(d, tz, fmt) {
      const iso = new Date(d.getTime()).toISOString();
      if (fmt === "yyyy-MM-dd'T'HH:mm:ss'Z'") return iso.slice(0, 19) + 'Z';
      if (fmt === 'yyyy-MM-dd') return iso.slice(0, 10);
      return iso;
    },
    base64Encode: (s) => Buffer.from(s).toString('base64')
  };

  const SpreadsheetApp = {
    // A standalone script (not bound to a Sheet) has no active spreadsheet.
    getActiveSpreadsheet: () => (opts.standalone ? null : ss),
    getActive: () => (opts.standalone ? null : ss),
    openById(id) { if (id !== ss.id) throw new Error('Exception: Unexpected error while getting the method or property openById'); return ss; },
    flush() { fakes._spend('flush'); fakes._flushOwn(); }
  };

  const logs = [];
  fakes.logs = logs;
  const log = (lvl) => (...a) => logs.push(lvl + ': ' + a.join(' '));
  const console_ = { log: log('log'), info: log('info'), warn: log('warn'), error: log('error') };

  fakes.globals = { SpreadsheetApp, LockService, PropertiesService, CacheService, ContentService, UrlFetchApp,
    ScriptApp, Utilities, Logger: { log: log('log') }, console: console_ };
  fakes.sheet = (name) => ss.sheets.find((s) => s.name === name) || null;
  fakes.resetCounters = () => {
    Object.keys(fakes.counts).forEach((k) => { fakes.counts[k] = 0; });
    ss.counters = newCounters();
    ss.sheets.forEach((s) => { s.counters = newCounters(); });
    lock.maxTouchedWhileHeld = 0;
    lock.acquisitions = 0;
    lock.maxHoldMs = 0;
    lock.holds = [];
    fakes.sim.ms = 0;
  };
  // Totals over all sheets and per sheet.
  fakes.snapshotCounters = () => {
    const per = {};
    ss.sheets.forEach((s) => { per[s.name] = Object.assign({}, s.counters); });
    return { total: Object.assign({}, ss.counters), perSheet: per, services: Object.assign({}, fakes.counts),
      lockAcquisitions: lock.acquisitions, maxCellsPerLockHold: lock.maxTouchedWhileHeld,
      simMs: fakes.sim.ms, maxLockHoldMs: lock.maxHoldMs };
  };
  return fakes;
}

module.exports = { createFakes, coerce, FakeSpreadsheet, DEFAULT_COST, OUT_OF_GRID };
