// The runner for the real Codex CLI and Gemini CLI (pinned in package.json), modelled on
// tests/claude-code/lib/harness.mjs: each scenario gets a temp root and PCs, each PC its own
// HOME (the agent's ~/.codex or ~/.gemini), PCMAIL_HOME and git repo (the agent's cwd).
// Nothing reaches the internet: each agent is pointed at a loopback fake of its model API.
//
//   const s = await scenario('name', { pcs: ['pc-a', 'pc-b'] });
//   const a = s.pc('pc-a');
//   a.pcmail(['mcp', 'install', '--client', 'codex']);      // pcmail's own install commands
//   const run = await a.codex('check your mail', { api });  // `codex exec` against the fake
//   await s.close();

import { spawn, spawnSync, execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const testDir = path.resolve(here, '..');
export const repoRoot = path.resolve(testDir, '../..');

/** The pcmail binary under test: PCMAIL_BIN, else `${CARGO_TARGET_DIR:-target}/debug/pcmail`. */
export const PCMAIL_BIN = process.env.PCMAIL_BIN
  ? path.resolve(process.env.PCMAIL_BIN)
  : path.resolve(repoRoot, process.env.CARGO_TARGET_DIR || 'target', 'debug', 'pcmail');

export const TOKEN = 'agents-test-token-0123456789';

/** `{ version, argv }` of an npm package's CLI in node_modules (run with this Node). */
export function npmCli(pkg, bin) {
  const dir = path.join(testDir, 'node_modules', pkg);
  const meta = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  const rel = typeof meta.bin === 'string' ? meta.bin : meta.bin[bin];
  return { version: meta.version, argv: [process.execPath, path.join(dir, rel)] };
}

function pcmailSync(env, args, { input, allowFail = false, cwd } = {}) {
  const r = spawnSync(PCMAIL_BIN, args, { env, input, cwd, encoding: 'utf8', timeout: 30_000 });
  if (!allowFail && r.status !== 0) throw new Error(`pcmail ${args.join(' ')} exited ${r.status}: ${r.stderr}${r.stdout}`);
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
    this.cred = crypto.randomBytes(32).toString('hex');
  }

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

  pcmail(args, opts = {}) {
    return pcmailSync(this.env(opts.env), args, { cwd: this.repo, ...opts });
  }

  json(args) {
    return JSON.parse(this.pcmail(['--json', ...args]).stdout);
  }

  send(to, body, extra = []) {
    return this.json(['send', to, '--body', body, ...extra]).ids[0];
  }

  sync() {
    return this.pcmail(['sync']);
  }

  status(id) {
    this.sync();
    return this.json(['status', id])[0];
  }

  /** A git repo with an origin (leases are per repo) and two source files. */
  gitRepo(origin = 'git@github.com:acme/shop.git') {
    fs.mkdirSync(path.join(this.repo, 'src', 'auth'), { recursive: true });
    execFileSync('git', ['init', '-q'], { cwd: this.repo });
    execFileSync('git', ['remote', 'add', 'origin', origin], { cwd: this.repo });
    fs.writeFileSync(path.join(this.repo, 'src', 'auth', 'login.rs'), 'fn login() {}\n');
    fs.writeFileSync(path.join(this.repo, 'src', 'main.rs'), 'fn main() {}\n');
  }

  /** Runs a CLI in this PC's repo; resolves to `{ code, signal, stdout, stderr }`. Never synchronous:
   * the fake model API runs in this process and must keep answering. */
  run(argv, { env, timeoutMs = 120_000, input } = {}) {
    return new Promise((resolve, reject) => {
      const p = spawn(argv[0], argv.slice(1), { env, cwd: this.repo, stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      p.stdout.on('data', (d) => { stdout += d; });
      p.stderr.on('data', (d) => { stderr += d; });
      if (input !== undefined) p.stdin.end(input);
      const timer = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
      p.on('error', reject);
      p.on('close', (code, signal) => {
        clearTimeout(timer);
        if (signal) reject(new Error(`${argv[1] ?? argv[0]} was killed after ${timeoutMs} ms: ${stderr.slice(-3000)}`));
        else resolve({ code, signal, stdout, stderr });
      });
    });
  }

  /**
   * `codex exec <prompt>` against the fake Responses API `api`: a custom model provider on
   * loopback given with `-c` (so ~/.codex/config.toml holds only what pcmail wrote). Options:
   * `args` (more flags, e.g. the sandbox and hook trust), `env`.
   */
  codex(prompt, { api, args = [], env = {}, timeoutMs } = {}) {
    const { argv } = npmCli('@openai/codex', 'codex');
    const provider = [
      '-c', 'model_provider="fake"',
      '-c', 'model_providers.fake.name="fake"',
      '-c', `model_providers.fake.base_url="${api.url}/v1"`,
      '-c', 'model_providers.fake.wire_api="responses"',
      '-c', 'model_providers.fake.env_key="FAKE_OPENAI_KEY"',
      '-c', 'model_providers.fake.supports_websockets=false',
      '-c', 'check_for_update_on_startup=false',
    ];
    return this.run([...argv, 'exec', ...provider, '-m', 'gpt-5.5', ...args, prompt], {
      env: this.env({ FAKE_OPENAI_KEY: 'dummy', CODEX_HOME: path.join(this.home, '.codex'), NO_COLOR: '1', ...env }),
      timeoutMs,
    });
  }

  /** `gemini -p <prompt>` against the fake Gemini API `api` (GOOGLE_GEMINI_BASE_URL). */
  gemini(prompt, { api, args = [], env = {}, timeoutMs } = {}) {
    const { argv } = npmCli('@google/gemini-cli', 'gemini');
    return this.run([...argv, '-p', prompt, '-m', 'gemini-2.5-flash', ...args], {
      env: this.env({
        GOOGLE_GEMINI_BASE_URL: api.url,
        GEMINI_API_KEY: 'dummy',
        GEMINI_CLI_NO_RELAUNCH: 'true',
        NO_COLOR: '1',
        TERM: 'dumb',
        ...env,
      }),
      timeoutMs,
    });
  }
}

/** A scenario: a temp root and PCs linked through one embedded server file. */
export async function scenario(name, { pcs = ['pc-a'] } = {}) {
  if (!fs.existsSync(PCMAIL_BIN)) throw new Error(`no pcmail binary at ${PCMAIL_BIN}: cargo build -p pcmail-cli`);
  const s = { name, root: fs.mkdtempSync(path.join(os.tmpdir(), `pcmail-agent-${name}-`)), pcs: new Map() };
  const shared = path.join(s.root, 'embedded-server.db');
  for (const label of pcs) {
    const pc = new Pc(s, label);
    pc.pcmail(['init', '--label', label, '--embedded-db', shared]);
    s.pcs.set(label, pc);
  }
  for (const pc of s.pcs.values()) pc.sync();
  s.pc = (label) => s.pcs.get(label);
  s.close = async () => {
    // The agent may exit before the `pcmail mcp` it started has closed its
    // store (SQLite makes the -wal again as it writes its last rows): the
    // removal is tried again while that process finishes, as the Claude Code
    // harness does; one that outlives the retries still fails the test.
    if (!process.env.KEEP_SCENARIOS) fs.rmSync(s.root, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
  };
  return s;
}
