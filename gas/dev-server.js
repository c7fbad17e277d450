#!/usr/bin/env node
'use strict';
// A local stand-in for the deployed web app: the gas code in a vm on the fake
// spreadsheet, answering like Google does (POST /exec → 302 → one-time GET of the JSON;
// HTML pages with status 200 when the script throws or runs out of time).
//
//   node gas/dev-server.js --port 8787 --token T [--db-file state.json]
//       [--sweep-every-ms 600000] [--webhook-url URL]
//   faults: env PCMAIL_GAS_FAULT=throw|timeout|lost with PCMAIL_GAS_FAULT_EVERY=N (every Nth
//   POST /exec), or at run time POST /__fault {"mode":"throw"|"timeout"|"lost"|"off","every":N}.
//   test hooks: POST /__sweep[?now=ms] runs the sweep now; POST /__clock {"now":ms|null}.

const http = require('http');
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const { execFileSync } = require('child_process');
const { createFakes } = require('./lib/fakes');
const { loadGas } = require('./lib/loader');

function parseArgs(argv) {
  const o = { port: 8787, token: null, dbFile: null, sweepEveryMs: 600000, webhookUrl: null, host: '127.0.0.1' };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i], v = argv[i + 1];
    if (k === '--port') { o.port = Number(v); i++; } else if (k === '--token') { o.token = v; i++; } else if (k === '--db-file') { o.dbFile = v; i++; } else if (k === '--sweep-every-ms') { o.sweepEveryMs = Number(v); i++; } else if (k === '--webhook-url') { o.webhookUrl = v; i++; } else if (k === '--host') { o.host = v; i++; } else if (k === '--help' || k === '-h') {
      process.stdout.write('usage: node dev-server.js --port 8787 --token T [--db-file path.json] [--sweep-every-ms N] [--webhook-url URL]\n');
      process.exit(0);
    } else { process.stderr.write('unknown argument ' + k + '\n'); process.exit(2); }
  }
  if (!o.token) { process.stderr.write('--token is required\n'); process.exit(2); }
  return o;
}

// A synchronous HTTP POST (UrlFetchApp is synchronous): a child node does the request.
function fetchSync(url, params) {
  const script = `
    const u = new URL(process.argv[1]); const mod = u.protocol === 'https:' ? require('https') : require('http');
    const body = process.argv[3] || '';
    const req = mod.request(u, { method: process.argv[2], headers: { 'content-type': process.argv[4] || 'application/json' }, timeout: 5000 },
      (res) => { let b = ''; res.setEncoding('utf8'); res.on('data', (d) => { if (b.length < 4096) b += d; });
        res.on('end', () => { process.stdout.write(JSON.stringify({ code: res.statusCode, headers: { 'Retry-After': res.headers['retry-after'] || '' }, body: b })); }); });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (e) => { process.stdout.write('ERR ' + e.message); });
    req.end(body);`;
  try {
    const out = execFileSync(process.execPath, ['-e', script, url, (params.method || 'get').toUpperCase(), params.payload || '', params.contentType || ''],
      { timeout: 8000, encoding: 'utf8' });
    if (out.startsWith('ERR')) return 'throw';
    const o = JSON.parse(out);
    if (!o.headers['Retry-After']) delete o.headers['Retry-After'];
    return o; // {code, headers, body}: what UrlFetchApp's response gives the script
  } catch (e) {
    return 'throw';
  }
}

const HTML = {
  throw: (msg) => `<!DOCTYPE html><html><head><link rel="shortcut icon" href="//ssl.gstatic.com/docs/script/images/favicon.ico"><title>Error</title></head><body style="margin:20px"><div><img alt="Google Apps Script" src="//ssl.gstatic.com/docs/script/images/logo.png"></div><div style="text-align:center;font-family:monospace;margin:50px auto 0;max-width:600px">${msg}</div></body></html>`,
  timeout: () => HTML.throw('Exceeded maximum execution time'),
  notFound: () => `<!DOCTYPE html><html lang=en><meta charset=utf-8><title>Error 404 (Not Found)!!1</title><p><b>404.</b> <ins>That’s an error.</ins><p>The requested URL was not found on this server. <ins>That’s all we know.</ins></html>`
};

function main() {
  const opts = parseArgs(process.argv.slice(2));
  let saved = null;
  if (opts.dbFile && fs.existsSync(opts.dbFile)) saved = JSON.parse(fs.readFileSync(opts.dbFile, 'utf8'));
  const properties = Object.assign({}, saved ? saved.properties : {}, { PCMAIL_TOKEN: opts.token });
  if (opts.webhookUrl) properties.WEBHOOK_URL = opts.webhookUrl;
  let fixedNow = null;
  const clock = () => (fixedNow === null ? Date.now() : fixedNow);
  const fakes = createFakes({ properties, spreadsheet: saved ? saved.spreadsheet : null, now: clock });
  fakes.fetch.handler = (req) => fetchSync(req.url, req.params);
  const ctx = loadGas(fakes);
  ctx.__setNow(clock);
  ctx.setup(); // the tabs and the (fake) trigger, as a deploy would

  const persist = () => {
    if (!opts.dbFile) return;
    const tmp = opts.dbFile + '.tmp-' + process.pid;
    fs.mkdirSync(path.dirname(path.resolve(opts.dbFile)), { recursive: true });
    fs.writeFileSync(tmp, JSON.stringify({ spreadsheet: fakes.ss.toJSON(), properties: fakes.scriptProps }));
    fs.renameSync(tmp, opts.dbFile);
  };
  persist();

  const fault = { mode: process.env.PCMAIL_GAS_FAULT || 'off', every: Number(process.env.PCMAIL_GAS_FAULT_EVERY || 1), n: 0 };
  const echoes = new Map(); // one-time results: key → {body, until}
  let port = opts.port;
  const base = () => `http://127.0.0.1:${port}`;

  const send = (res, status, type, body, headers) => {
    res.writeHead(status, Object.assign({ 'Content-Type': type, 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-cache, no-store' }, headers || {}));
    res.end(body);
  };
  const redirectTo = (res, text) => {
    const key = crypto.randomBytes(18).toString('base64url');
    echoes.set(key, { body: text, until: Date.now() + 60000 });
    send(res, 302, 'text/html; charset=UTF-8', `<HTML><HEAD><TITLE>Moved Temporarily</TITLE></HEAD><BODY>Moved Temporarily</BODY></HTML>`,
      { Location: `${base()}/echo?key=${key}` });
  };
  // Runs one script entry point; HTML page on a throw or an injected fault.
  const runScript = (res, fn) => {
    let nextFault = null;
    if (fault.mode !== 'off') {
      fault.n++;
      if (fault.n % Math.max(1, fault.every) === 0) nextFault = fault.mode;
    }
    if (nextFault === 'timeout') return send(res, 200, 'text/html; charset=utf-8', HTML.timeout());
    try {
      if (nextFault === 'lost') {
        // The script ran and stored its work, but the caller only sees an
        // error page: the lost-response case every write must survive.
        fn();
        persist();
        return send(res, 200, 'text/html; charset=utf-8', HTML.timeout());
      }
      if (nextFault === 'throw') throw new Error('Exception: Service Spreadsheets timed out while accessing document (injected)');
      const out = fn();
      persist();
      redirectTo(res, out.getContent());
    } catch (e) {
      send(res, 200, 'text/html; charset=utf-8', HTML.throw(String(e && e.message || e).replace(/[<&]/g, ' ')));
    }
  };

  const server = http.createServer((req, res) => {
    const url = new URL(req.url, base());
    const chunks = [];
    let size = 0;
    req.on('data', (c) => { size += c.length; if (size <= 50 * 1024 * 1024) chunks.push(c); });
    req.on('error', () => {});
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      try {
        if (url.pathname === '/exec' && req.method === 'POST') {
          return runScript(res, () => ctx.doPost({ postData: { contents: body, type: req.headers['content-type'] || '', length: body.length }, parameter: Object.fromEntries(url.searchParams) }));
        }
        if (url.pathname === '/exec' && req.method === 'GET') return runScript(res, () => ctx.doGet({ parameter: Object.fromEntries(url.searchParams) }));
        if (url.pathname === '/echo' && req.method === 'GET') {
          const key = url.searchParams.get('key');
          const e = echoes.get(key);
          echoes.delete(key);
          if (!e || e.until < Date.now()) return send(res, 404, 'text/html; charset=UTF-8', HTML.notFound());
          return send(res, 200, 'application/json; charset=utf-8', e.body);
        }
        if (url.pathname === '/__sweep' && req.method === 'POST') {
          const saveNow = fixedNow;
          if (url.searchParams.get('now')) fixedNow = Number(url.searchParams.get('now'));
          try {
            const r = ctx.__exec(() => { ctx.resetExec_(); return ctx.runSweep_(clock()); });
            persist();
            return send(res, 200, 'application/json', JSON.stringify(Object.assign({ ok: true, now: clock() }, r)));
          } catch (e) {
            return send(res, 200, 'application/json', JSON.stringify({ ok: false, error: e.pcmail || { code: 'internal', message: String(e.message) } }));
          } finally { fixedNow = saveNow; }
        }
        if (url.pathname === '/__clock' && req.method === 'POST') {
          const j = body ? JSON.parse(body) : {};
          fixedNow = j.now === undefined || j.now === null ? null : Number(j.now);
          return send(res, 200, 'application/json', JSON.stringify({ ok: true, now: clock() }));
        }
        if (url.pathname === '/__fault' && req.method === 'POST') {
          const j = body ? JSON.parse(body) : {};
          if (!['throw', 'timeout', 'lost', 'off'].includes(j.mode)) return send(res, 400, 'application/json', '{"ok":false}');
          Object.assign(fault, { mode: j.mode, every: Number(j.every || 1), n: 0 });
          return send(res, 200, 'application/json', JSON.stringify({ ok: true, fault: { mode: fault.mode, every: fault.every } }));
        }
        return send(res, 404, 'text/html; charset=UTF-8', HTML.notFound());
      } catch (e) {
        return send(res, 200, 'text/html; charset=utf-8', HTML.throw('dev-server: ' + String(e.message).replace(/[<&]/g, ' ')));
      }
    });
  });

  // The 10-minute trigger. A busy lease just skips this round, as in Apps Script.
  const timer = opts.sweepEveryMs > 0 ? setInterval(() => {
    try { ctx.sweepTrigger(); persist(); } catch (e) { process.stderr.write('sweep: ' + e.message + '\n'); }
    const t = Date.now();
    for (const [k, e] of echoes) if (e.until < t) echoes.delete(k);
  }, opts.sweepEveryMs) : null;

  const stop = () => {
    if (timer) clearInterval(timer);
    server.close(() => { try { persist(); } finally { process.exit(0); } });
    server.closeAllConnections();
    setTimeout(() => process.exit(0), 2000).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  server.on('error', (e) => { process.stderr.write('dev-server: ' + e.message + '\n'); process.exit(1); });
  server.listen(opts.port, opts.host, () => {
    port = server.address().port;
    process.stdout.write(`listening on http://127.0.0.1:${port}/exec\n`);
  });
}

main();
