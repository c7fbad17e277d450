// Scenario 3: a reply turn across two PCs linked by `pcmail serve` on loopback. The model on
// pc-a asks Bash `pcmail reply <id> --body …`; pc-b's hook then shows the reply to pc-b's model.
import test from 'node:test';
import assert from 'node:assert/strict';
import { scenario, texts, hookOutputs, toolResults } from '../lib/harness.mjs';
import { text, toolUse } from '../lib/fake-api.mjs';

test('scenario 3: a reply written through Claude Code on one PC reaches the model on the other', { timeout: 180_000 }, async () => {
  const s = await scenario('reply', { pcs: ['pc-a', 'pc-b'], server: 'serve' });
  try {
    const a = s.pc('pc-a');
    const b = s.pc('pc-b');
    const id = b.send('pc-a', 'which port does the staging db use?', ['--kind', 'request']);
    a.sync();
    a.installHooks();
    b.installHooks();

    const answer = 'staging db listens on 5433';
    s.api.script(
      toolUse('Bash', { command: `pcmail reply ${id} --body '${answer}'` }, 'toolu_reply_1'),
      text('replied'),
    );
    const run = await a.claude('answer your mail', { allowedTools: ['Bash(pcmail reply:*)'] });
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(hookOutputs(texts(s.api.turns[0])).flatMap((o) => o.blocks.map((bl) => bl.id)), [id]);
    const [result] = toolResults(s.api.turns[1]);
    assert.equal(result.tool_use_id, 'toolu_reply_1');
    assert.notEqual(result.is_error, true, JSON.stringify(result));
    assert.equal(a.status(id).state, 'done');

    // pc-b: the reply arrives with the next poll, and pc-b's hook shows it to pc-b's model.
    b.sync();
    s.api.script(text('noted'));
    const other = await b.claude('anything for me?');
    assert.equal(other.code, 0, other.stderr);
    const turn = s.api.turns.at(-1);
    const blocks = hookOutputs(texts(turn)).flatMap((o) => o.blocks);
    assert.equal(blocks.length, 1, texts(turn));
    assert.equal(blocks[0].from, 'pc-a');
    assert.equal(blocks[0].body, answer);
    assert.match(texts(turn), /kind="reply-to-your-mail"/);
    // the original request is done, the reply seen by pc-b's session
    assert.equal(b.status(id).state, 'done');
    const reply = b.status(blocks[0].id);
    assert.equal(reply.inReplyTo, id);
    assert.ok(['seen', 'done'].includes(reply.state), reply.state);
    assert.ok(reply.timeline.some((e) => e.state === 'seen' && e.by === `pc-b/${other.sessionId.slice(0, 8)}`), JSON.stringify(reply.timeline));
  } finally {
    await s.close();
  }
});
