// The runner: each scenario gets its own HOME (Claude Code's settings, sessions, debug logs),
// its own PCMAIL_HOME per PC, its own repo dir, and its own fake Messages API. Nothing here
// reaches the internet: Claude Code is always pointed at the loopback fake.
//
//   const s = await scenario('name', { pcs: ['pc-a', 'pc-b'] });   // embedded server shared by the PCs
//   const id = s.pc('pc-b').send('pc-a', 'please look', ['--kind', 'request']);
//   s.pc('pc-a').sync();
//   s.pc('pc-a').installHooks();
//   s.api.script(toolUse('Bash', { command: `pcmail ack ${id}` }), text('done'));
//   const run = await s.pc('pc-a').claude('check your mail', { allowedTools: ['Bash(pcmail ack:*)'] });
//   s.api.turns[1]   // the request after the tool ran
//   await s.close();

import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startFakeApi } from './fake-api.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
export const testDir = path.resolve(here, '..');
export const repoRoot = path.resolve(testDir, '../..');

/** The pcmail binary under test: PCMAIL_BIN, else `${CARGO_TARGET_DIR:-target}/debug/pcmail`. */
export const PCMAIL_BIN = process.env.PCMAIL_BIN
  ? path.resolve(process.env.PCMAIL_BIN)
  : path.resolve(repoRoot, process.env.CARGO_TARGET_DIR || 'target', 'debug', 'pcmail');

/** The Claude Code installs of package.json, by the name they are installed under. */
export const CLAUDE = {
  newest: '@anthropic-ai/claude-code',
  v2_0_0: 'claude-code-2.0.0',
  min: 'claude-code-min',
};

/** `{ version, argv }` to run the Claude Code installed as `pkg` in node_modules. */
export function claudeCode(pkg = CLAUDE.newest) {
  const dir = path.join(testDir, 'node_modules', pkg);
  const meta = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  const bin = path.join(dir, typeof meta.bin === 'string' ? meta.bin : meta.bin.claude);
  // Up to 2.0.x the package is a Node script; later ones ship a native binary.
  const argv = bin.endsWith('.js') || bin.endsWith('.mjs') ? [process.execPath, bin] : [bin];
  return { version: meta.version, argv };
}

export const TOKEN = 'claude-code-test-token-0123';

/** Runs pcmail synchronously (never while a claude run is waiting on the fake API). */
function pcmailSync(env, args, { input, allowFail = false } = {}) {
  const r = spawnSync(PCMAIL_BIN, args, { env, input, encoding: 'utf8', timeout: 30_000 });
  if (!allowFail && r.status !== 0) {
    throw new Error(`pcmail ${args.join(' ')} exited ${r.status}: ${r.stderr}${r.stdout}`);
  }
  return r;
}

class Pc {
  constructor(s, label) {
    this.s = s;
    this.label = label;
    this.pcmailHome = path.join(s.root, label, 'pcmail');
    this.home = path.join(s.root, label, 'home');
    this.repo = path.join(s.root, label, 'repo');
    for (const d of [this.pcmailHome, this.home, this.repo]) fs.mkdirSync(d, { recursive: true });
    // This simulated installation's own credential (its label is bound to it on
    // a shared server); no keyring in the tests, so it travels in the environment.
    this.cred = crypto.randomBytes(32).toString('hex');
  }

  /** The environment pcmail and Claude Code run in for this PC. */
  env(extra = {}) {
    return {
      PATH: `${path.dirname(PCMAIL_BIN)}${path.delimiter}${path.dirname(process.execPath)}${path.delimiter}/usr/bin:/bin`,
      HOME: this.home,
      PCMAIL_HOME: this.pcmailHome,
      PCMAIL_TOKEN: TOKEN,
      PCMAIL_CREDENTIAL: this.cred,
      LANG: 'C.UTF-8',
      ...extra,
    };
  }

  pcmail(args, opts) {
    return pcmailSync(this.env(), args, opts);
  }

  /** `pcmail --json …` parsed. */
  json(args) {
    return JSON.parse(this.pcmail(['--json', ...args]).stdout);
  }

  /** Sends; returns the new mail id. */
  send(to, body, extra = []) {
    const out = this.pcmail(['send', to, '--body', body, ...extra]).stdout;
    const id = out.match(/mail-[0-9]+-[0-9a-f]+/)?.[0];
    if (!id) throw new Error(`no mail id in: ${out}`);
    return id;
  }

  sync() {
    return this.pcmail(['sync']);
  }

  /** The state and timeline of `id` as this PC sees it (after a sync). */
  status(id) {
    this.sync();
    return this.json(['status', id])[0];
  }

  /** `pcmail hooks install` into this PC's ~/.claude/settings.json; returns the settings. */
  installHooks() {
    this.pcmail(['hooks', 'install']);
    return this.settings();
  }

  get settingsPath() {
    return path.join(this.home, '.claude', 'settings.json');
  }

  settings() {
    return JSON.parse(fs.readFileSync(this.settingsPath, 'utf8'));
  }

  writeSettings(v) {
    fs.mkdirSync(path.dirname(this.settingsPath), { recursive: true });
    fs.writeFileSync(this.settingsPath, JSON.stringify(v, null, 2));
  }

  /**
   * Runs `claude -p <prompt>` in this PC's repo against the scenario's fake API. Options:
   * `pkg` (a CLAUDE entry), `args` (more CLI arguments), `allowedTools`, `resume` (a session id),
   * `json` (adds `--output-format json` and parses stdout). Resolves to
   * `{ code, stdout, stderr, result?, sessionId?, debug }`: `debug` is Claude Code's --debug
   * output (stderr and ~/.claude/debug/*.txt, whichever the version writes).
   */
  async claude(prompt, { pkg = CLAUDE.newest, args = [], allowedTools = [], resume, json = true, timeoutMs = 60_000 } = {}) {
    const { argv } = claudeCode(pkg);
    const full = [...argv.slice(1), '-p', prompt, '--debug'];
    if (json) full.push('--output-format', 'json');
    if (allowedTools.length) full.push('--allowedTools', ...allowedTools);
    if (resume) full.push('--resume', resume);
    full.push(...args);
    const debugDir = path.join(this.home, '.claude', 'debug');
    const before = new Set(fs.existsSync(debugDir) ? fs.readdirSync(debugDir) : []);
    const env = this.env({
      ANTHROPIC_BASE_URL: this.s.api.url,
      ANTHROPIC_API_KEY: 'dummy',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      DISABLE_AUTOUPDATER: '1',
      TERM: 'dumb',
    });
    const r = await new Promise((resolve, reject) => {
      const p = spawn(argv[0], full, { env, cwd: this.repo, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      p.stdout.on('data', (d) => { stdout += d; });
      p.stderr.on('data', (d) => { stderr += d; });
      const timer = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
      p.on('error', reject);
      p.on('close', (code, signal) => { clearTimeout(timer); resolve({ code, signal, stdout, stderr }); });
    });
    const logs = fs.existsSync(debugDir)
      ? fs.readdirSync(debugDir).filter((f) => f.endsWith('.txt') && !before.has(f))
        .map((f) => fs.readFileSync(path.join(debugDir, f), 'utf8'))
      : [];
    r.debug = [r.stderr, r.stdout, ...logs].join('\n');
    if (r.signal) throw new Error(`claude was killed after ${timeoutMs} ms: ${r.stderr.slice(-2000)}`);
    if (json && r.code === 0) {
      // Older versions print debug lines before the JSON result on stdout.
      const line = r.stdout.split('\n').reverse().find((l) => l.trim().startsWith('{'));
      r.result = line ? JSON.parse(line) : undefined;
      r.sessionId = r.result?.session_id;
    }
    return r;
  }
}

// ---------------------------------------------------------------------------------------------
// the plugin

/** `claude plugin …` for this PC (no model involved). */
export function claudePlugin(pc, args) {
  const { argv } = claudeCode();
  const r = spawnSync(argv[0], [...argv.slice(1), 'plugin', ...args], {
    env: pc.env({ CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', DISABLE_AUTOUPDATER: '1' }),
    cwd: pc.repo, encoding: 'utf8', timeout: 60_000,
  });
  if (r.status !== 0) throw new Error(`claude plugin ${args.join(' ')}: ${r.stdout}${r.stderr}`);
  return r.stdout;
}

/** The plugin as its users install it: this repo's marketplace by its local path, then the plugin. */
export function installPlugin(pc) {
  const added = claudePlugin(pc, ['marketplace', 'add', repoRoot]);
  if (!/Successfully added marketplace: pcmail/.test(added)) throw new Error(added);
  const installed = claudePlugin(pc, ['install', 'pcmail@pcmail']);
  if (!/Successfully installed plugin: pcmail@pcmail/.test(installed)) throw new Error(installed);
}

/**
 * A scenario: a temp root, a fake API, and PCs (`pcs` labels). `server: 'embedded'` (default)
 * links the PCs through one embedded server file; `server: 'serve'` starts `pcmail serve` on
 * loopback and points every PC at it.
 */
export async function scenario(name, { pcs = ['pc-a'], server = 'embedded', script = [] } = {}) {
  if (!fs.existsSync(PCMAIL_BIN)) throw new Error(`no pcmail binary at ${PCMAIL_BIN}: cargo build -p pcmail-cli`);
  const s = {
    name,
    root: fs.mkdtempSync(path.join(os.tmpdir(), `pcmail-cc-${name}-`)),
    pcs: new Map(),
    api: await startFakeApi(script),
    serve: null,
  };
  let url = 'embedded';
  if (server === 'serve') {
    s.serve = await startServe(s.root);
    url = s.serve.url;
  }
  const shared = path.join(s.root, 'embedded-server.db');
  for (const label of pcs) {
    const pc = new Pc(s, label);
    const init = ['init', '--label', label, '--server', url];
    if (server === 'embedded') init.push('--embedded-db', shared);
    pc.pcmail(init);
    s.pcs.set(label, pc);
  }
  // Every PC on the roster of every other.
  for (const pc of s.pcs.values()) pc.sync();
  s.pc = (label) => s.pcs.get(label);
  s.close = async () => {
    await s.api.close();
    if (s.serve) s.serve.child.kill();
    if (!process.env.KEEP_SCENARIOS) fs.rmSync(s.root, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
    if (s.api.errors.length) throw s.api.errors[0];
  };
  return s;
}

/** `pcmail serve` on 127.0.0.1 with a free port; resolves once it says where it listens. */
function startServe(root) {
  return new Promise((resolve, reject) => {
    const home = path.join(root, 'server');
    fs.mkdirSync(home, { recursive: true });
    const child = spawn(PCMAIL_BIN, ['serve', '--listen', '127.0.0.1:0', '--db', path.join(home, 'serve.db')], {
      env: { PATH: process.env.PATH, PCMAIL_HOME: home, PCMAIL_TOKEN: TOKEN },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    const timer = setTimeout(() => { child.kill(); reject(new Error(`pcmail serve did not start: ${out}`)); }, 20_000);
    child.on('error', reject);
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on (\S+)/);
      if (m) { clearTimeout(timer); resolve({ url: m[1], child }); }
    });
    child.stderr.on('data', (d) => { out += d; });
  });
}

// ---------------------------------------------------------------------------------------------
// reading what reached the model

/** Every text the model was given in `body`: system prompt and message contents, flattened. */
export function texts(body) {
  const out = [];
  const walk = (v) => {
    if (typeof v === 'string') out.push(v);
    else if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') {
      if (typeof v.text === 'string') out.push(v.text);
      if (v.content !== undefined) walk(v.content);
    }
  };
  walk(body.system);
  walk(body.messages);
  return out.join('\n');
}

/** The `<pcmail-mail …>` blocks in `text`: `{ id, from, body }`. */
export function mailBlocks(text) {
  return [...text.matchAll(/<pcmail-mail id="([^"]+)" from="([^"]+)"[^>]*>\n([\s\S]*?)\n<\/pcmail-mail>/g)]
    .map((m) => ({ id: m[1], from: m[2], body: m[3] }));
}

/** The tool results in the last user message of `body`. */
export function toolResults(body) {
  const last = body.messages[body.messages.length - 1];
  return (Array.isArray(last.content) ? last.content : []).filter((c) => c.type === 'tool_result');
}

/**
 * Each pcmail hook output in `text`, in order: `{ text, blocks, more, earlier, countOnly }`.
 * `more`/`earlier`: the closing line's counts (`+N more …, M shown earlier`), `countOnly`: the
 * output was only the count line of a session that was shown everything already.
 */
export function hookOutputs(text) {
  const re = /pcmail: mail for this PC \([^)]*\)[^\n]*(?:\n<pcmail-mail [^>]*>\n[^\n]*\n<\/pcmail-mail>)*(?:\n\+\d+ more[^\n]*)?|pcmail: \d+ open mail for \S+ already shown earlier in this session[^\n]*/g;
  return [...text.matchAll(re)].map(([t]) => {
    const closing = t.match(/\n\+(\d+) more \((\d+) expired not shown\)(?:, (\d+) shown earlier in this session)?: pcmail inbox$/);
    const count = t.match(/^pcmail: (\d+) open mail for \S+ already shown earlier/);
    return {
      text: t,
      blocks: mailBlocks(t),
      more: closing ? Number(closing[1]) : 0,
      earlier: count ? Number(count[1]) : closing?.[3] ? Number(closing[3]) : 0,
      countOnly: Boolean(count),
    };
  });
}
