// Scenario 1: SessionStart and UserPromptSubmit with the real Claude Code. The mail reaches the
// model's request, bounded as pcmail promises; the next prompt of the same session carries only
// the count line; `status` shows `seen` by that session's id; the debug log validates every
// pcmail hook output.
import test from 'node:test';
import assert from 'node:assert/strict';
import { scenario, texts, hookOutputs } from '../lib/harness.mjs';
import { text } from '../lib/fake-api.mjs';

test('scenario 1: the hooks put the mail into the model request, once per session, and mark it seen', { timeout: 180_000 }, async () => {
  const s = await scenario('hooks', { pcs: ['pc-a', 'pc-b'] });
  try {
    const a = s.pc('pc-a');
    const b = s.pc('pc-b');
    // 4 work requests (they stay open until answered; the hook shows 3 at a time) with long bodies.
    const long = 'x'.repeat(600);
    const ids = [];
    for (let i = 0; i < 4; i++) ids.push(b.send('pc-a', `request ${i} ${long}`, ['--kind', 'request']));
    a.sync();
    const settings = a.installHooks();
    assert.equal(settings.hooks.UserPromptSubmit[0].hooks[0].args, undefined, 'shell form, no args');

    s.api.script(text('first answer'), text('second answer'));
    const first = await a.claude('what is new?');
    assert.equal(first.code, 0, first.stderr);
    assert.equal(first.result.result, 'first answer');
    const sid = first.sessionId;
    assert.match(sid, /^[0-9a-f-]{36}$/);
    assert.equal(s.api.turns.length, 1);

    // What reached the model: two hook outputs (SessionStart, then UserPromptSubmit), the
    // newest requests first, 3 at a time, each mail cut to 240 chars, each output within 1,800,
    // the closing line counting the rest; no mail twice.
    const t1 = texts(s.api.turns[0]);
    const outs1 = hookOutputs(t1);
    assert.equal(outs1.length, 2, t1);
    const blocks = outs1.flatMap((o) => o.blocks);
    assert.deepEqual(blocks.map((bl) => bl.id), [...ids].reverse(), 'every request once, newest first');
    assert.deepEqual(outs1.map((o) => o.blocks.length), [3, 1]);
    assert.deepEqual(outs1.map((o) => [o.more, o.earlier]), [[1, 0], [0, 3]]);
    for (const o of outs1) assert.ok([...o.text].length <= 1800, `${[...o.text].length} chars`);
    for (const bl of blocks) {
      assert.equal(bl.from, 'pc-b');
      assert.ok([...bl.body].length <= 240, `${[...bl.body].length} chars`);
      assert.ok(bl.body.endsWith('…'), 'cut');
    }

    // Claude Code's debug log: both pcmail hook runs exited 0 and each output was taken as
    // additionalContext, whole (its length is the text that reached the model).
    const runs = [...first.debug.matchAll(/Hooks: (SessionStart:startup|UserPromptSubmit) \[[^\]]*pcmail[^\]]*\] finished with status (\d+)/g)];
    assert.deepEqual(runs.map((m) => [m[1], m[2]]), [['SessionStart:startup', '0'], ['UserPromptSubmit', '0']], first.debug.slice(-3000));
    const taken = [...first.debug.matchAll(/Hook (SessionStart|UserPromptSubmit) \([^)]*pcmail[^)]*\) provided additionalContext \((\d+) chars\)/g)];
    assert.deepEqual(taken.map((m) => [m[1], Number(m[2])]), [['SessionStart', outs1[0].text.length], ['UserPromptSubmit', outs1[1].text.length]]);
    assert.doesNotMatch(first.debug, /Hook (SessionStart|UserPromptSubmit)[^\n]*error/i);

    // seen, by this very session (the actor is `<label>/<first 8 chars of the session id>`)
    const shown = ids;
    for (const id of shown) {
      const st = a.status(id);
      assert.equal(st.state, 'seen', id);
      assert.ok(st.timeline.some((e) => e.state === 'seen' && e.by === `pc-a/${sid.slice(0, 8)}`), JSON.stringify(st.timeline));
    }
    // the sender sees it too
    assert.equal(b.status(ids[0]).state, 'seen');

    // The next prompt of the same session: no mail repeated, only the count line.
    const second = await a.claude('anything else?', { resume: sid });
    assert.equal(second.code, 0, second.stderr);
    assert.equal(s.api.turns.length, 2);
    // The history of the first prompt is replayed; what the hooks added for this prompt is
    // the count line only (SessionStart of the resumed session, then UserPromptSubmit).
    const outs2 = hookOutputs(texts(s.api.turns[1]));
    const added = outs2.slice(outs1.length);
    assert.equal(added.length, 2, texts(s.api.turns[1]));
    for (const o of added) {
      assert.ok(o.countOnly, o.text);
      assert.equal(o.earlier, ids.length);
      assert.equal(o.blocks.length, 0);
    }
  } finally {
    await s.close();
  }
});
