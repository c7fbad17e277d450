// Scenario 5: the lease guard in the real Claude Code. pc-b holds `auth` (src/auth/**)
// exclusively; pc-a's poll puts it into pc-a's lease cache. The model on pc-a asks Write of a new
// file under that lease (Write allowed, so only pcmail's PreToolUse hook can stop it; a new file, so
// Claude Code's own read-before-edit check does not come first): Claude Code denies the call, the
// model is told why (holder and how to reach them), and no file appears. A Write outside the lease
// goes through, and SessionStart told the model about the lease.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { scenario, texts, toolResults } from '../lib/harness.mjs';
import { text, toolUse } from '../lib/fake-api.mjs';

function gitRepo(dir) {
  fs.mkdirSync(path.join(dir, 'src', 'auth'), { recursive: true });
  execFileSync('git', ['init', '-q'], { cwd: dir });
  execFileSync('git', ['remote', 'add', 'origin', 'git@github.com:acme/shop.git'], { cwd: dir });
  fs.writeFileSync(path.join(dir, 'src', 'auth', 'login.rs'), 'fn login() {}\n');
  fs.writeFileSync(path.join(dir, 'src', 'main.rs'), 'fn main() {}\n');
}

test('scenario 5: PreToolUse denies a Write under another session\'s exclusive lease', { timeout: 180_000 }, async () => {
  const s = await scenario('lease-guard', { pcs: ['pc-a', 'pc-b'] });
  try {
    const a = s.pc('pc-a');
    const b = s.pc('pc-b');
    gitRepo(a.repo);
    gitRepo(b.repo); // another clone of the same repo on the other PC
    const claim = b.json(['lease', 'claim', 'auth', '--ttl', '30m', '-d', 'moving login to the new API', '-f', 'src/auth/**',
      '--name', 'ani', '--repo', 'github.com/acme/shop']);
    assert.equal(claim.outcome, 'granted', JSON.stringify(claim));
    a.sync();
    const settings = a.installHooks();
    assert.equal(settings.hooks.PreToolUse[0].matcher, 'Edit|Write|MultiEdit|NotebookEdit');

    const leased = path.join(a.repo, 'src', 'auth', 'session.rs');
    const free = path.join(a.repo, 'src', 'util.rs');
    s.api.script(
      toolUse('Write', { file_path: leased, content: 'pub struct Session;\n' }, 'toolu_edit_1'),
      toolUse('Write', { file_path: free, content: 'pub fn run() {}\n' }, 'toolu_edit_2'),
      text('done'),
    );
    const run = await a.claude('refactor login', { allowedTools: ['Write'] });
    assert.equal(run.code, 0, run.stderr);
    assert.equal(s.api.turns.length, 3);

    // SessionStart told the model who holds what in this repo.
    assert.match(texts(s.api.turns[0]), /pcmail: lease auth \[src\/auth\/\*\*\] held by pc-b\/ani \(exclusive/);

    // The leased file: denied by the hook, with the holder and how to reach them; unchanged.
    const [denied] = toolResults(s.api.turns[1]);
    assert.equal(denied.tool_use_id, 'toolu_edit_1');
    assert.equal(denied.is_error, true, JSON.stringify(denied));
    const why = texts({ messages: [{ content: denied.content }] });
    assert.match(why, /src\/auth\/session\.rs is under the exclusive lease `auth` held by pc-b\/ani/);
    assert.match(why, /pcmail send pc-b/);
    assert.equal(fs.existsSync(leased), false, 'the denied Write did not run');

    // The file outside the lease: no decision from pcmail, the Write ran.
    const [edited] = toolResults(s.api.turns[2]);
    assert.equal(edited.tool_use_id, 'toolu_edit_2');
    assert.notEqual(edited.is_error, true, JSON.stringify(edited));
    assert.equal(fs.readFileSync(free, 'utf8'), 'pub fn run() {}\n');
  } finally {
    await s.close();
  }
});
