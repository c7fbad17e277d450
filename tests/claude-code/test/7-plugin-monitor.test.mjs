// Scenario 7: the plugin's monitor (`pcmail watch`) brings new mail to an idle session. Claude
// Code starts a plugin's monitors only in an interactive session (`-p` does not), so the real
// interactive CLI runs under tmux: it starts, answers nothing, and when pc-b's mail reaches
// pc-a's store the monitor's line wakes the session: the next request to the model carries it,
// with no prompt typed. The monitor runs with the login shell's PATH, so the plugin's launcher
// finds the pcmail under test through PCMAIL_BIN_DIR (what a user whose pcmail is not on that
// PATH sets too).
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';
import { scenario, claudeCode, installPlugin, PCMAIL_BIN, texts } from '../lib/harness.mjs';
import { text } from '../lib/fake-api.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const unescape = (t) => t.replaceAll('&lt;', '<').replaceAll('&gt;', '>').replaceAll('&quot;', '"');

test('scenario 7: the plugin\'s monitor wakes an idle interactive session with new mail', { timeout: 120_000 }, async (t) => {
  const tmux = spawnSync('tmux', ['-V'], { encoding: 'utf8' });
  assert.equal(tmux.status, 0, 'tmux is needed (scripts/test.sh installs it)');
  const s = await scenario('monitor', { pcs: ['pc-a', 'pc-b'] });
  const sock = path.join(s.root, 'tmux.sock');
  let panePid;
  try {
    const a = s.pc('pc-a');
    const b = s.pc('pc-b');
    installPlugin(a);
    // What an interactive first start asks once (onboarding, this key, this folder's trust),
    // answered as a user who said yes before.
    const key = `sk-ant-api03-${'x'.repeat(60)}pcmailmonitortest000`;
    fs.writeFileSync(path.join(a.home, '.claude.json'), JSON.stringify({
      hasCompletedOnboarding: true,
      theme: 'dark',
      customApiKeyResponses: { approved: [key.slice(-20)], rejected: [] },
      projects: { [a.repo]: { hasTrustDialogAccepted: true, hasCompletedProjectOnboarding: true } },
    }));
    s.api.script(text('ready'), text('I see the mail'));
    const env = a.env({
      PCMAIL_BIN_DIR: path.dirname(PCMAIL_BIN),
      ANTHROPIC_BASE_URL: s.api.url,
      ANTHROPIC_API_KEY: key,
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      DISABLE_AUTOUPDATER: '1',
      TERM: 'xterm-256color',
    });
    const { argv } = claudeCode();
    execFileSync('tmux', ['-S', sock, 'new-session', '-d', '-x', '160', '-y', '50', '-s', 'cc', '-c', a.repo,
      ...Object.entries(env).flatMap(([k, v]) => ['-e', `${k}=${v}`]), ...argv]);
    panePid = Number(spawnSync('tmux', ['-S', sock, 'list-panes', '-F', '#{pane_pid}'], { encoding: 'utf8' }).stdout.trim());
    const screen = () => spawnSync('tmux', ['-S', sock, 'capture-pane', '-p', '-t', 'cc'], { encoding: 'utf8' }).stdout;
    // The monitor's first line (its header) is the session's first event; wait for it.
    for (let i = 0; i < 60 && !/Monitor event: pcmail watch/.test(screen()); i++) await sleep(500);
    assert.match(screen(), /Monitor event: pcmail watch/, screen());
    for (let i = 0; i < 20 && s.api.turns.length < 1; i++) await sleep(250);
    const before = s.api.turns.length;

    // Mail from pc-b; pc-a's poll stores it; nobody types anything.
    const id = b.send('pc-a', 'are you there?', ['--kind', 'request']);
    a.sync();
    for (let i = 0; i < 60 && s.api.turns.length <= before; i++) await sleep(250);
    assert.ok(s.api.turns.length > before, `no request after the mail arrived:\n${screen()}`);
    const woke = unescape(texts(s.api.turns[s.api.turns.length - 1]));
    assert.match(woke, new RegExp(`<pcmail-mail id="${id}" from="pc-b" kind="work-request"[^>]*> \\[work request\\] — are you there\\?`));
    assert.match(woke, /Monitor event/);
    t.diagnostic(`the monitor's line reached the model ${s.api.turns.length - before} request(s) after the mail`);
  } finally {
    spawnSync('tmux', ['-S', sock, 'kill-server']);
    // Claude Code (and the monitor and MCP server under it) write on their way out: wait for it.
    const alive = (pid) => { try { process.kill(pid, 0); return true; } catch { return false; } };
    for (let i = 0; i < 50 && panePid && alive(panePid); i++) await sleep(100);
    await sleep(300);
    await s.close();
  }
});
