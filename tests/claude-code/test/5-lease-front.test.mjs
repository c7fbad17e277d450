// Scenario 5b: a lease claimed from the real Claude Code's Bash tool through the small front
// (`pcmail-hook lease claim`), which the PC's running daemon answers. The lease is the
// session's: it follows the Claude Code process above the front (not the daemon's parents) and
// its holder is the session the hooks recorded; the release goes the same way. The daemon's
// debug log says it answered both, so `pcmail` run in its place would not pass this test.
import test from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { scenario, toolResults, PCMAIL_BIN } from '../lib/harness.mjs';
import { text, toolUse } from '../lib/fake-api.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

test('scenario 5b: pcmail-hook lease claim from the Bash tool, answered by the daemon, holds for the session', { timeout: 120_000 }, async () => {
  const s = await scenario('lease-front', { pcs: ['pc-a'] });
  let daemon;
  try {
    const a = s.pc('pc-a');
    execFileSync('git', ['init', '-q'], { cwd: a.repo });
    execFileSync('git', ['remote', 'add', 'origin', 'git@github.com:acme/shop.git'], { cwd: a.repo });
    a.sync();
    a.installHooks();
    daemon = spawn(PCMAIL_BIN, ['daemon'], { env: a.env({ PCMAIL_LOG: 'warn,pcmail=debug' }), stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    daemon.stderr.on('data', (d) => { log += d; });
    for (let i = 0; i < 100 && !log.includes('daemon for pc-a'); i++) await sleep(100);
    assert.match(log, /daemon for pc-a/);

    s.api.script(
      toolUse('Bash', { command: 'pcmail-hook lease claim deploy -d "shipping 1.4"', description: 'claim' }, 'toolu_claim'),
      toolUse('Bash', { command: 'pcmail lease list --json deploy', description: 'list' }, 'toolu_list'),
      toolUse('Bash', { command: 'pcmail-hook lease release deploy', description: 'release' }, 'toolu_release'),
      text('done'),
    );
    const run = await a.claude('take the deploy lease, look, give it back', { allowedTools: ['Bash'] });
    assert.equal(run.code, 0, run.stderr.slice(-3000));
    // The text of the tool result the i-th request to the model carries.
    const result = (i) => {
      const c = toolResults(s.api.turns[i])[0].content;
      return typeof c === 'string' ? c : c.map((p) => p.text ?? '').join('');
    };
    assert.match(result(1), /pcmail: holding deploy \(fence 1\) while this Claude Code session \(PID \d+\) runs/, result(1));
    const listed = JSON.parse(result(2));
    const lease = listed.leases[0];
    assert.equal(lease.resource, 'deploy', JSON.stringify(listed));
    assert.equal(lease.holder.session, run.sessionId, 'the session the hooks recorded holds it');
    assert.equal(lease.repo, 'github.com/acme/shop');
    assert.match(result(3), /pcmail: released deploy/, result(3));
    // Both commands were the daemon's to answer.
    const answered = log.match(/front door: lease command.*/g) ?? [];
    assert.ok(answered.some((l) => /action="?claim/.test(l) && /served=true/.test(l) && /exit=0/.test(l)), log);
    assert.ok(answered.some((l) => /action="?release/.test(l) && /served=true/.test(l) && /exit=0/.test(l)), log);
  } finally {
    if (daemon) daemon.kill();
    await s.close();
  }
});
