'use strict';
// Loads the server files into ONE vm context, the way Apps Script does: every file's
// top-level declarations share a global scope, files run in file-name order.
// Server files are the Capitalised *.js at the top of gas/ (clasp pushes exactly those).

const fs = require('fs');
const path = require('path');
const vm = require('vm');

const GAS_DIR = path.join(__dirname, '..');

function serverFiles() {
  return fs.readdirSync(GAS_DIR).filter((f) => /^[A-Z][A-Za-z0-9_]*\.js$/.test(f)).sort();
}

function loadGas(fakes, opts) {
  opts = opts || {};
  const sandbox = Object.assign({}, fakes.globals);
  const ctx = vm.createContext(sandbox);
  for (const f of serverFiles()) {
    const code = fs.readFileSync(path.join(GAS_DIR, f), 'utf8');
    vm.runInContext(code, ctx, { filename: f, timeout: opts.timeoutMs });
  }
  // `now` injection: the gas code calls the global pcmailNow_().
  ctx.__setNow = vm.runInContext('(function (f) { pcmailNow_ = f; })', ctx);
  // Each entry point Google calls is one execution: its Sheets writes are batched
  // until flush() or its return (see lib/fakes.js).
  ENTRY_POINTS.forEach((name) => {
    const fn = ctx[name];
    if (typeof fn !== 'function') return;
    ctx[name] = function () {
      const args = arguments;
      return fakes.runExecution(() => fn.apply(null, args));
    };
  });
  ctx.__exec = (fn) => fakes.runExecution(fn);
  ctx.__get = (name) => vm.runInContext(name, ctx); // top-level const/let are not globals

  return ctx;
}

const ENTRY_POINTS = ['doPost', 'doGet', 'sweepTrigger', 'setup', 'jobsWorkerTrigger'];

// Runs doPost with a body string and returns {text, json, mime}.
function post(ctx, body) {
  const out = ctx.doPost({ postData: { contents: body, type: 'application/json', length: body.length }, parameter: {} });
  const text = out.getContent();
  return { text, json: JSON.parse(text), mime: out.getMimeType() };
}

module.exports = { loadGas, post, serverFiles, GAS_DIR };
