// Scenario 6: the Claude Code plugin, installed the way its users install it: the repo's own
// marketplace added by its local path (`claude plugin marketplace add`), then `claude plugin
// install pcmail@pcmail`. Without `pcmail hooks install` or `pcmail mcp install`, a session
// gets the mail at SessionStart, the lease guard refuses a Write under another session's lease,
// and the plugin's MCP server answers a tool call, on the same PC store as the CLI. With
// `pcmail hooks install` as well, the mail is shown once (the plugin's hook defers), and
// `pcmail doctor` says which entry acts.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { scenario, installPlugin, claudePlugin, repoRoot, texts, toolResults } from '../lib/harness.mjs';
import { text, toolUse } from '../lib/fake-api.mjs';

function gitRepo(dir) {
  fs.mkdirSync(path.join(dir, 'src', 'auth'), { recursive: true });
  execFileSync('git', ['init', '-q'], { cwd: dir });
  execFileSync('git', ['remote', 'add', 'origin', 'git@github.com:acme/shop.git'], { cwd: dir });
  fs.writeFileSync(path.join(dir, 'src', 'auth', 'login.rs'), 'fn login() {}\n');
}

const MCP_INBOX = 'mcp__plugin_pcmail_pcmail__inbox';

test('scenario 6: the plugin from the repo\'s marketplace gives hooks, the lease guard and the MCP server', { timeout: 240_000 }, async () => {
  const s = await scenario('plugin', { pcs: ['pc-a', 'pc-b'] });
  try {
    const a = s.pc('pc-a');
    const b = s.pc('pc-b');
    gitRepo(a.repo);
    gitRepo(b.repo);
    // The plugin and the marketplace pass Claude Code's own check.
    for (const dir of [path.join(repoRoot, 'plugins', 'pcmail'), repoRoot]) {
      assert.match(claudePlugin(a, ['validate', dir]), /Validation passed/, dir);
    }
    installPlugin(a);
    assert.equal(fs.existsSync(a.settingsPath) && JSON.parse(fs.readFileSync(a.settingsPath, 'utf8')).hooks, undefined,
      'the plugin, not settings.json, carries the hooks');

    const id = b.send('pc-a', 'please review the login change', ['--kind', 'request']);
    b.json(['lease', 'claim', 'auth', '--ttl', '30m', '-d', 'moving login', '-f', 'src/auth/**', '--name', 'ani',
      '--repo', 'github.com/acme/shop']);
    a.sync();

    const leased = path.join(a.repo, 'src', 'auth', 'session.rs');
    s.api.script(
      toolUse(MCP_INBOX, {}, 'toolu_inbox'),
      toolUse('Write', { file_path: leased, content: 'pub struct Session;\n' }, 'toolu_write'),
      text('done'),
    );
    const run = await a.claude('check your mail', { allowedTools: ['Write', MCP_INBOX] });
    assert.equal(run.code, 0, run.stderr.slice(-3000));

    // SessionStart through the plugin's hook: the mail and the lease.
    const first = texts(s.api.turns[0]);
    assert.match(first, new RegExp(`<pcmail-mail id="${id}" from="pc-b"`));
    assert.match(first, /pcmail: lease auth \[src\/auth\/\*\*\] held by pc-b\/ani/);
    // The plugin's MCP server, on the CLI's PC store.
    const [inbox] = toolResults(s.api.turns[1]);
    assert.equal(inbox.tool_use_id, 'toolu_inbox');
    assert.match(JSON.stringify(inbox.content), new RegExp(id));
    // The plugin's PreToolUse hook: the Write under pc-b's lease is refused.
    const [denied] = toolResults(s.api.turns[2]);
    assert.equal(denied.is_error, true, JSON.stringify(denied));
    assert.match(JSON.stringify(denied.content), /src\/auth\/session\.rs is under the exclusive lease `auth` held by pc-b\/ani/);
    assert.equal(fs.existsSync(leased), false);

    // `pcmail hooks install` too: both register SessionStart; the mail is shown once.
    a.installHooks();
    const id2 = b.send('pc-a', 'one more thing');
    a.sync();
    s.api.turns.length = 0;
    s.api.script(text('ok'));
    const again = await a.claude('and now?');
    assert.equal(again.code, 0, again.stderr.slice(-3000));
    const shown = texts(s.api.turns[0]);
    assert.equal(shown.split(`<pcmail-mail id="${id2}"`).length - 1, 1, shown.slice(-3000));
    assert.equal((shown.match(/pcmail: mail for this PC/g) ?? []).length, 1, 'one hook output, not two');
    const doctor = a.pcmail(['doctor'], { allowFail: true }).stdout;
    assert.match(doctor, /plugin pcmail@pcmail/, doctor);
    assert.match(doctor, /settings\.json entries act/, doctor);
  } finally {
    await s.close();
  }
});
