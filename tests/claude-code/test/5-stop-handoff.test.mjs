// Scenario 5: the Stop hook reminds a session once to write a handoff. The model ends
// its turn; pcmail's Stop hook answers decision "block" with the command to run; Claude Code
// continues the session with that reason; the model writes the handoff through Bash; its next
// Stop (stop_hook_active) passes; a resumed turn of the same session is never reminded again.
import test from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { scenario, texts } from '../lib/harness.mjs';
import { text, toolUse } from '../lib/fake-api.mjs';

const REMINDER = /this session did real work \(transcript \d+ KB\) and wrote no handoff/;

test('scenario 5: Stop blocks once, the model writes the handoff, then the session may stop', { timeout: 240_000 }, async () => {
  const s = await scenario('stop', { pcs: ['pc-a'] });
  try {
    const a = s.pc('pc-a');
    const settings = a.installHooks();
    assert.ok(settings.hooks.Stop, 'hooks install registers Stop');
    // Any transcript counts as real work here (the default threshold is 1 MiB).
    fs.appendFileSync(path.join(a.pcmailHome, 'config.toml'), '\n[handoffs]\nstop_reminder_min_transcript_kb = 0\n');
    assert.equal(spawnSync('git', ['init', '-q', a.repo]).status, 0);

    let sessionInReason;
    s.api.script(
      text('the refactor is done'),
      // The continuation: the reminder reached the model; it runs the command it names.
      (body) => {
        const all = texts(body);
        assert.match(all, REMINDER);
        sessionInReason = all.match(/PCMAIL_SESSION=([A-Za-z0-9._-]+) pcmail handoff new/)[1];
        const command = `PCMAIL_SESSION=${sessionInReason} pcmail handoff new --slug auth-refactor `
          + '--goal "Refactor the auth middleware" --done "src/auth/middleware.rs" '
          + '--failed "a global lock: deadlocks under load" --state working --next "add the race test"';
        return toolUse('Bash', { command, description: 'write the handoff' }, 'toolu_handoff_1');
      },
      text('handoff written'),
    );
    const run = await a.claude('refactor the auth middleware', { allowedTools: ['Bash'] });
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.result.result, 'handoff written');
    // Three turns: the first answer, the continuation the block caused, the answer after the tool.
    assert.equal(s.api.turns.length, 3);
    assert.doesNotMatch(texts(s.api.turns[0]), REMINDER);
    assert.equal(sessionInReason, run.sessionId, 'the reason names this session');
    // The reminder was given once: Claude Code puts one block into the history twice (the
    // feedback and a system entry); the request after the tool has no more than the one before.
    const count = (body) => (texts(body).match(new RegExp(REMINDER, 'g')) || []).length;
    const once = count(s.api.turns[1]);
    assert.ok(once >= 1);
    assert.equal(count(s.api.turns[2]), once);

    // The handoff is in the repo, named for this session, with an ACTIVE line in the INDEX.
    const dir = path.join(a.repo, '.claude', 'handoffs');
    const files = fs.readdirSync(dir).filter((f) => f.endsWith('_auth-refactor.md'));
    assert.equal(files.length, 1);
    assert.ok(files[0].includes(`_${run.sessionId.slice(0, 8)}_`), files[0]);
    const index = fs.readFileSync(path.join(dir, 'INDEX.md'), 'utf8');
    assert.match(index, new RegExp(`ACTIVE ${files[0].replace('.md', '')} by pc-a/${run.sessionId.slice(0, 8)} — Refactor the auth middleware`));
    const list = a.json(['handoff', 'list', '--repo', a.repo]);
    assert.equal(list.handoffs[0].next, 'add the race test');

    // A resumed turn of the same session: no second reminder.
    s.api.script(text('still here'));
    const again = await a.claude('one more thing', { resume: run.sessionId });
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.result.result, 'still here');
    assert.equal(s.api.turns.length, 4);
    assert.equal(count(s.api.turns[3]), once, 'only the old reminder, from the history');
  } finally {
    await s.close();
  }
});
