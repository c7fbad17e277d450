// Scenario 4: the Claude Code versions pcmail supports. The oldest release whose hooks reach the
// model (SessionStart exists and `hookSpecificOutput.additionalContext` is used) is 1.0.62
// (1.0.61 rejects the whole `hooks` setting because it does not know SessionStart); the newest
// is pinned in package.json. Also the exec-form entry pcmail wrote before
// (`command` + `args`) blocks every prompt on releases that predate `args` (2.0.0 here).
import test from 'node:test';
import assert from 'node:assert/strict';
import { scenario, texts, hookOutputs, claudeCode, CLAUDE, PCMAIL_BIN } from '../lib/harness.mjs';
import { text } from '../lib/fake-api.mjs';

/** A PC with 4 open requests from pc-b and pcmail's hooks installed the way `hooks install` does. */
async function withMail(name) {
  const s = await scenario(name, { pcs: ['pc-a', 'pc-b'] });
  const ids = [];
  for (let i = 0; i < 4; i++) ids.push(s.pc('pc-b').send('pc-a', `request ${i}`, ['--kind', 'request']));
  s.pc('pc-a').sync();
  return { s, a: s.pc('pc-a'), ids };
}

/** The exec-form entries pcmail wrote before the fix (`pcmail` + `args: ["hook"]`). */
function oldExecForm() {
  const h = { type: 'command', command: PCMAIL_BIN, args: ['hook'], timeout: 5 };
  return { hooks: {
    SessionStart: [{ matcher: 'startup|resume|clear|compact', hooks: [h] }],
    UserPromptSubmit: [{ hooks: [h] }],
  } };
}

for (const [pkg, expected] of [[CLAUDE.min, '1.0.62'], [CLAUDE.v2_0_0, '2.0.0'], [CLAUDE.newest, null]]) {
  test(`scenario 4: the hooks pcmail hooks install writes reach the model on Claude Code ${claudeCode(pkg).version}`, { timeout: 180_000 }, async () => {
    if (expected) assert.equal(claudeCode(pkg).version, expected);
    const { s, a, ids } = await withMail(`v${claudeCode(pkg).version}`);
    try {
      const settings = a.installHooks();
      s.api.script(text('seen it'));
      const run = await a.claude('hello', { pkg });
      assert.equal(run.code, 0, run.stderr);
      assert.equal(s.api.turns.length, 1, 'the prompt reached the model');
      // SessionStart showed 3, UserPromptSubmit the 4th: both hooks reached the model.
      const outs = hookOutputs(texts(s.api.turns[0]));
      assert.deepEqual(outs.map((o) => o.blocks.length), [3, 1], texts(s.api.turns[0]).slice(0, 4000));
      assert.deepEqual(outs.flatMap((o) => o.blocks.map((bl) => bl.id)), [...ids].reverse());
      for (const id of ids) assert.equal(a.status(id).state, 'seen');
      // what made it work on every release: a shell command, no `args`
      for (const ev of ['SessionStart', 'UserPromptSubmit']) {
        const h = settings.hooks[ev][0].hooks[0];
        assert.equal(h.args, undefined);
        assert.match(h.command, / hook$|pcmail-hook'?$/);
      }
    } finally {
      await s.close();
    }
  });
}

test('scenario 4 (exec form): the old exec-form entry blocks every prompt on Claude Code 2.0.0; hooks install fixes it', { timeout: 180_000 }, async () => {
  const { s, a, ids } = await withMail('defect0');
  try {
    a.writeSettings(oldExecForm());
    s.api.script(text('never asked'));
    const blocked = await a.claude('hello', { pkg: CLAUDE.v2_0_0 });
    // 2.0.0 ignores `args`, runs bare `pcmail` (usage, exit 2), and exit 2 blocks the prompt.
    assert.equal(s.api.turns.length, 0, 'no request reached the model');
    assert.equal(blocked.result.num_turns, 0, blocked.stdout);
    for (const id of ids) assert.equal(a.status(id).state, 'delivered');

    // `pcmail hooks install` migrates the entries in place; the same CLI now works.
    const settings = a.installHooks();
    assert.equal(settings.hooks.UserPromptSubmit.length, 1);
    assert.equal(settings.hooks.UserPromptSubmit[0].hooks[0].args, undefined);
    const run = await a.claude('hello again', { pkg: CLAUDE.v2_0_0 });
    assert.equal(run.code, 0, run.stderr);
    assert.equal(s.api.turns.length, 1);
    assert.deepEqual(hookOutputs(texts(s.api.turns[0])).flatMap((o) => o.blocks.map((bl) => bl.id)), [...ids].reverse());
  } finally {
    await s.close();
  }
});

test('scenario 4: the newest Claude Code knows `args`, so the old entry worked there', { timeout: 180_000 }, async () => {
  const { s, a, ids } = await withMail('exec-newest');
  try {
    a.writeSettings(oldExecForm());
    s.api.script(text('ok'));
    const run = await a.claude('hello');
    assert.equal(run.code, 0, run.stderr);
    assert.equal(s.api.turns.length, 1);
    assert.equal(hookOutputs(texts(s.api.turns[0])).flatMap((o) => o.blocks).length, ids.length);
  } finally {
    await s.close();
  }
});
