// The real Codex CLI (`codex exec`, pinned in package.json) with pcmail installed by pcmail's
// own commands, against a scripted fake of the Responses API on loopback:
// - `pcmail mcp install --client codex` writes an entry Codex starts on the user's PC store
//   (PCMAIL_HOME by value, credentials by name), and Codex runs the read-only `inbox` without
//   asking (readOnlyHint) while `codex exec` never asks;
// - `pcmail hooks install --client codex` writes ~/.codex/hooks.json in the nested shape the
//   pinned Codex loads; once trusted (here `--dangerously-bypass-hook-trust`, the documented
//   way for automation), SessionStart/UserPromptSubmit put the mail into the model's input,
//   PreToolUse refuses an apply_patch under another session's lease, and Stop reminds about
//   a handoff; without trust Codex runs none of them.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { scenario, npmCli } from '../lib/harness.mjs';
import { startFakeResponses, text, mcpCall, toolSearch, patch, inputTexts, callOutput } from '../lib/fake-responses.mjs';

const CODEX = npmCli('@openai/codex', 'codex').version;

/** The call id the fake gave the `n`-th script entry's call (ids are in the next request's input). */
function outputOf(api, turn, name) {
  const body = api.turns[turn];
  const calls = (body.input ?? []).filter((i) => /_call$/.test(i.type) && (i.name === name || (!i.name && name === 'tool_search')));
  const c = calls[calls.length - 1];
  assert.ok(c, `no ${name} call in turn ${turn}: ${JSON.stringify(body.input?.slice(-3))}`);
  return callOutput(body, c.call_id);
}

test(`codex ${CODEX}: pcmail installed with its own commands: MCP tools, hook context, lease guard`, { timeout: 240_000 }, async () => {
  const s = await scenario('codex', { pcs: ['pc-a', 'pc-b'] });
  const api = await startFakeResponses();
  try {
    const a = s.pc('pc-a');
    const b = s.pc('pc-b');
    a.gitRepo();
    b.gitRepo();

    // pcmail's own install commands.
    assert.match(a.pcmail(['mcp', 'install', '--client', 'codex']).stdout, /installed in .*config\.toml/);
    const config = fs.readFileSync(path.join(a.home, '.codex', 'config.toml'), 'utf8');
    assert.match(config, /\[mcp_servers\.pcmail\]/);
    assert.ok(config.includes(a.pcmailHome), config);
    assert.match(config, /env_vars = \["PCMAIL_TOKEN", "PCMAIL_CREDENTIAL"\]/);
    assert.ok(!config.includes(a.cred), 'the credential itself is not written');
    assert.match(a.pcmail(['hooks', 'install', '--client', 'codex']).stdout, /installed/);
    const hooksFile = path.join(a.home, '.codex', 'hooks.json');
    const hooks = JSON.parse(fs.readFileSync(hooksFile, 'utf8')).hooks;
    assert.deepEqual(Object.keys(hooks), ['SessionStart', 'UserPromptSubmit', 'PreToolUse', 'Stop']);
    assert.equal(hooks.PreToolUse[0].matcher, 'apply_patch');
    const mtime = fs.statSync(hooksFile).mtimeMs;
    assert.match(a.pcmail(['hooks', 'install', '--client', 'codex']).stdout, /already installed/);
    assert.equal(fs.statSync(hooksFile).mtimeMs, mtime, 'an unchanged install leaves the trusted file alone');

    // Mail for pc-a, and pc-b's exclusive lease on src/auth/** in the same repo.
    const id = b.send('pc-a', 'please review the login change', ['--kind', 'request']);
    const claim = b.json(['lease', 'claim', 'auth', '--ttl', '30m', '-d', 'moving login', '-f', 'src/auth/**',
      '--name', 'ani', '--repo', 'github.com/acme/shop']);
    assert.equal(claim.outcome, 'granted', JSON.stringify(claim));
    a.sync();

    // Without trust, Codex runs no hook: nothing of pcmail's reaches the model.
    api.script(text('nothing to do'));
    let run = await a.codex('hello', { api, args: ['--skip-git-repo-check'] });
    assert.equal(run.code, 0, run.stderr);
    assert.doesNotMatch(inputTexts(api.turns[0]), /pcmail-mail/, 'an untrusted hook does not run');
    api.turns.length = 0;

    // Trusted for this run (the documented non-interactive way), in Codex's default read-only
    // sandbox: the MCP tools, and the lease guard on apply_patch.
    fs.appendFileSync(path.join(a.pcmailHome, 'config.toml'), '\n[handoffs]\nstop_reminder_min_transcript_kb = 0\n');
    const leased = path.join(a.repo, 'src', 'auth', 'session.rs');
    api.script(
      toolSearch('pcmail mail inbox send lease'),
      mcpCall('pcmail', 'inbox', {}),
      mcpCall('pcmail', 'send', { to: 'pc-b', body: 'looking at it now' }),
      mcpCall('pcmail', 'lease_claim', { resource: 'docs', files: ['docs/**'], description: 'writing the guide' }),
      patch(`*** Begin Patch\n*** Add File: ${leased}\n+pub struct Session;\n*** End Patch\n`),
      patch('*** Begin Patch\n*** Update File: src/main.rs\n*** Move to: src/auth/main.rs\n@@\n-fn main() {}\n+fn main() { run() }\n*** End Patch\n'),
      text('done'),
    );
    run = await a.codex('check your mail', {
      api,
      args: ['--skip-git-repo-check', '--dangerously-bypass-hook-trust', '--sandbox', 'read-only'],
    });
    assert.equal(run.code, 0, run.stderr.slice(-3000));
    const sessionId = (run.stdout + run.stderr).match(/session id: (\S+)/)?.[1];
    assert.ok(sessionId, run.stderr.slice(0, 2000));

    // SessionStart: the mail, quoted from its sender, in the model's input (a developer message);
    // UserPromptSubmit: only the count line for mail this session was already shown.
    const first = inputTexts(api.turns[0]);
    assert.match(first, new RegExp(`<pcmail-mail id="${id}" from="pc-b"`));
    assert.match(first, /pcmail: lease auth \[src\/auth\/\*\*\] held by pc-b\/ani/);
    assert.match(first, /1 open mail for pc-a already shown earlier in this session/);
    assert.equal(a.status(id).state, 'seen');

    // The read-only tool and the write tools ran without approval, on the user's PC store.
    assert.match(outputOf(api, 2, 'inbox'), new RegExp(id));
    const sent = JSON.parse(outputOf(api, 3, 'send').replace(/^[\s\S]*?Output:\n/, ''));
    b.sync();
    assert.equal(b.json(['inbox'])[0].body, 'looking at it now', JSON.stringify(sent));
    // The lease follows the Codex process (found among the MCP server's ancestors) and the
    // session its hooks named.
    const claimed = JSON.parse(outputOf(api, 4, 'lease_claim').replace(/^[\s\S]*?Output:\n/, ''));
    assert.equal(claimed.outcome, 'granted', JSON.stringify(claimed));
    assert.equal(claimed.follows.how, 'agent', JSON.stringify(claimed.follows));
    assert.equal(claimed.follows.session, sessionId, JSON.stringify(claimed.follows));
    console.log(`# codex session ${sessionId}; the lease follows ${JSON.stringify(claimed.follows)}`);

    // apply_patch under pc-b's lease (an added file, and a file moved into src/auth/): refused
    // by pcmail's PreToolUse hook with the holder and how to reach them; nothing written.
    for (const turn of [5, 6]) {
      const why = outputOf(api, turn, 'apply_patch');
      assert.match(why, /blocked by PreToolUse hook: pcmail: src\/auth\/(session|main)\.rs is under the exclusive lease `auth` held by pc-b\/ani/, why);
      assert.match(why, /pcmail send pc-b/);
    }
    assert.equal(fs.existsSync(leased), false);
    assert.equal(fs.readFileSync(path.join(a.repo, 'src', 'main.rs'), 'utf8'), 'fn main() {}\n');

    // Stop: the handoff reminder (decision: block) made Codex go on with its reason; the next
    // Stop (stop_hook_active) let it end.
    assert.equal(api.turns.length, 8, `requests: ${api.turns.length}`);
    assert.match(inputTexts(api.turns[7]), /pcmail handoff new/);

    // Outside a lease, with writes allowed: no decision from pcmail, the patch applies.
    api.turns.length = 0;
    api.script(patch('*** Begin Patch\n*** Add File: src/util.rs\n+pub fn run() {}\n*** End Patch\n'), text('done'));
    run = await a.codex('add a helper', {
      api,
      args: ['--skip-git-repo-check', '--dangerously-bypass-hook-trust', '--sandbox', 'danger-full-access'],
    });
    assert.equal(run.code, 0, run.stderr.slice(-3000));
    assert.doesNotMatch(outputOf(api, 1, 'apply_patch'), /PreToolUse/);
    assert.equal(fs.readFileSync(path.join(a.repo, 'src', 'util.rs'), 'utf8'), 'pub fn run() {}\n');
  } finally {
    await api.close();
    await s.close();
  }
});
