// Scenario 2: a tool turn. The model asks Bash `pcmail ack <id>` (allowed with --allowedTools),
// Claude Code runs it, the mail is `done`, and the next request carries the tool result.
import test from 'node:test';
import assert from 'node:assert/strict';
import { scenario, texts, hookOutputs, toolResults } from '../lib/harness.mjs';
import { text, toolUse } from '../lib/fake-api.mjs';

test('scenario 2: the model acks a mail through Claude Code\'s Bash tool', { timeout: 180_000 }, async () => {
  const s = await scenario('ack', { pcs: ['pc-a', 'pc-b'] });
  try {
    const a = s.pc('pc-a');
    const b = s.pc('pc-b');
    const id = b.send('pc-a', 'please rerun the flaky test', ['--kind', 'request']);
    a.sync();
    a.installHooks();

    // Turn 1: the model read the mail and acks it; turn 2: it answers after the tool ran.
    // A script entry can be a function of the request: ack the id the hook showed the model.
    s.api.script(
      (body) => {
        const [shown] = hookOutputs(texts(body)).flatMap((o) => o.blocks.map((bl) => bl.id));
        return toolUse('Bash', { command: `pcmail ack ${shown}`, description: 'ack the mail' }, 'toolu_ack_1');
      },
      text('acked'),
    );
    const run = await a.claude('handle your mail', { allowedTools: ['Bash(pcmail ack:*)'] });
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.result.result, 'acked');
    assert.equal(s.api.turns.length, 2);

    // The second request carries the tool's result: pcmail's own output for the ack.
    const [result] = toolResults(s.api.turns[1]);
    assert.equal(result.tool_use_id, 'toolu_ack_1');
    assert.notEqual(result.is_error, true, JSON.stringify(result));
    const out = texts({ messages: [{ content: result.content }] });
    assert.match(out, new RegExp(id));

    // pcmail's state: done, on this PC and on the sender's.
    assert.equal(a.status(id).state, 'done');
    const st = b.status(id);
    assert.equal(st.state, 'done');
    assert.deepEqual(st.timeline.map((e) => e.state), ['new', 'delivered', 'seen', 'done']);
  } finally {
    await s.close();
  }
});

test('scenario 2b: a Bash call not allowed never runs: the mail stays open', { timeout: 180_000 }, async () => {
  const s = await scenario('ack-denied', { pcs: ['pc-a', 'pc-b'] });
  try {
    const a = s.pc('pc-a');
    const id = s.pc('pc-b').send('pc-a', 'please look', ['--kind', 'request']);
    a.sync();
    a.installHooks();
    s.api.script(toolUse('Bash', { command: `pcmail ack ${id}` }, 'toolu_ack_2'), text('could not'));
    const run = await a.claude('handle your mail'); // no --allowedTools
    assert.equal(run.code, 0, run.stderr);
    const [result] = toolResults(s.api.turns[1]);
    assert.equal(result.tool_use_id, 'toolu_ack_2');
    assert.equal(result.is_error, true, JSON.stringify(result));
    assert.equal(a.status(id).state, 'seen');
  } finally {
    await s.close();
  }
});
