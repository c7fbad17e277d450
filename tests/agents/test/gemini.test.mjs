// The real Gemini CLI (`gemini -p`, pinned in package.json) with pcmail installed by pcmail's
// own commands, against a scripted fake of the Gemini API on loopback (GOOGLE_GEMINI_BASE_URL):
// - `pcmail mcp install --client gemini` and `pcmail hooks install --client gemini` edit a
//   settings.json that holds comments and keep them; the policy file the install writes lets
//   the read-only tools run in headless mode; a write tool runs once the user's own policy
//   allows it; Gemini's injected `wait_for_previous` argument is no longer refused;
// - the folder-trust step: an untrusted folder stops headless Gemini (`--skip-trust` here);
// - SessionStart puts the mail into the prompt, BeforeTool refuses a write_file under another
//   session's lease, and a lease made under Gemini follows the Gemini process and session.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { scenario, npmCli } from '../lib/harness.mjs';
import { startFakeGemini, text, fnCall, contentTexts, functionResponses } from '../lib/fake-gemini.mjs';

const GEMINI = npmCli('@google/gemini-cli', 'gemini').version;

/** The response Gemini sent back for the call made in the previous turn. */
function responseIn(api, turn, name) {
  const r = functionResponses(api.turns[turn]).find((f) => f.name === name);
  assert.ok(r, `no ${name} response in turn ${turn}: ${JSON.stringify(functionResponses(api.turns[turn]))}`);
  return r.response;
}
const payload = (r) => JSON.parse((r.output ?? '').replace(/^<untrusted_context>\n/, '').replace(/\n<\/untrusted_context>$/, ''));

test(`gemini ${GEMINI}: pcmail installed with its own commands: MCP tools, hook context, lease guard`, { timeout: 240_000 }, async () => {
  const s = await scenario('gemini', { pcs: ['pc-a', 'pc-b'] });
  const api = await startFakeGemini();
  try {
    const a = s.pc('pc-a');
    const b = s.pc('pc-b');
    a.gitRepo();
    b.gitRepo();

    // A settings.json with comments, as Gemini allows, and the API-key auth the fake needs.
    const settings = path.join(a.home, '.gemini', 'settings.json');
    fs.mkdirSync(path.dirname(settings), { recursive: true });
    fs.writeFileSync(settings, '{\n  // the fake API takes any key\n  "security": { "auth": { "selectedType": "gemini-api-key" } } /* mine */\n}\n');
    assert.match(a.pcmail(['mcp', 'install', '--client', 'gemini']).stdout, /installed in .*settings\.json/);
    assert.match(a.pcmail(['hooks', 'install', '--client', 'gemini']).stdout, /installed/);
    const written = fs.readFileSync(settings, 'utf8');
    assert.ok(written.includes('// the fake API takes any key') && written.includes('/* mine */'), written);
    assert.match(written, /"BeforeTool": \[/);
    assert.ok(written.includes(`"PCMAIL_HOME": "${a.pcmailHome}"`), written);
    assert.match(written, /"PCMAIL_TOKEN": "\$PCMAIL_TOKEN"/);
    assert.ok(!written.includes(a.cred), 'the credential itself is not written');
    assert.ok(fs.existsSync(path.join(a.home, '.gemini', 'policies', 'pcmail.toml')));

    const id = b.send('pc-a', 'please review the login change', ['--kind', 'request']);
    const claim = b.json(['lease', 'claim', 'auth', '--ttl', '30m', '-d', 'moving login', '-f', 'src/auth/**',
      '--name', 'ani', '--repo', 'github.com/acme/shop']);
    assert.equal(claim.outcome, 'granted', JSON.stringify(claim));
    a.sync();

    // Folder trust: headless Gemini refuses an untrusted folder outright.
    let run = await a.gemini('hello', { api });
    assert.equal(run.code, 55, run.stderr.slice(-2000));
    assert.match(run.stderr + run.stdout, /not running in a trusted directory/);
    assert.equal(api.turns.length, 0);

    // The user's own policy for the write tools this run uses (Gemini asks otherwise, and
    // headless it cannot ask), beside the one pcmail wrote.
    const mine = path.join(a.home, '.gemini', 'policies', 'mine.toml');
    fs.writeFileSync(mine, '[[rule]]\nmcpName = "pcmail"\ntoolName = ["send", "lease_claim"]\ndecision = "allow"\npriority = 100\n');
    const leased = path.join(a.repo, 'src', 'auth', 'session.rs');
    const free = path.join(a.repo, 'src', 'util.rs');
    api.script(
      // Gemini adds `wait_for_previous` to every tool's schema, and the model fills it in.
      fnCall('mcp_pcmail_inbox', { wait_for_previous: false }),
      fnCall('mcp_pcmail_send', { to: 'pc-b', body: 'looking at it now', wait_for_previous: true }),
      fnCall('mcp_pcmail_lease_claim', { resource: 'docs', files: ['docs/**'], description: 'writing the guide' }),
      fnCall('write_file', { file_path: leased, content: 'pub struct Session;\n' }),
      fnCall('write_file', { file_path: free, content: 'pub fn run() {}\n' }),
      text('done'),
    );
    run = await a.gemini('check your mail', { api, args: ['--skip-trust', '--approval-mode', 'auto_edit'] });
    assert.equal(run.code, 0, run.stderr.slice(-3000));

    // SessionStart: the mail, quoted from its sender, prepended to the prompt (Gemini escapes
    // the hook's text inside its own <hook_context> block); the lease too.
    const unescape = (t) => t.replaceAll('&lt;', '<').replaceAll('&gt;', '>').replaceAll('&quot;', '"').replaceAll('&amp;', '&');
    const first = unescape(contentTexts(api.turns[0]));
    assert.match(first, /<hook_context>pcmail: mail for this PC \(pc-a\)/);
    assert.match(first, new RegExp(`<pcmail-mail id="${id}" from="pc-b"`));
    assert.match(first, /pcmail: lease auth \[src\/auth\/\*\*\] held by pc-b\/ani/);
    assert.equal(a.status(id).state, 'seen');

    const decl = api.turns[0].tools.flatMap((t) => t.functionDeclarations ?? []).find((f) => f.name === 'mcp_pcmail_send');
    assert.ok(JSON.stringify(decl).includes('wait_for_previous'), JSON.stringify(decl));
    assert.doesNotMatch(JSON.stringify(api.turns[0].tools), /"format":"(uint|int|double|float)/, 'no non-standard format');
    // The read-only tool ran by the policy pcmail wrote; the write tools by the user's.
    assert.match(JSON.stringify(responseIn(api, 1, 'mcp_pcmail_inbox')), new RegExp(id));
    assert.equal(payload(responseIn(api, 2, 'mcp_pcmail_send')).queued, false);
    b.sync();
    assert.equal(b.json(['inbox'])[0].body, 'looking at it now');
    const claimed = payload(responseIn(api, 3, 'mcp_pcmail_lease_claim'));
    assert.equal(claimed.outcome, 'granted', JSON.stringify(claimed));
    assert.equal(claimed.follows.how, 'agent', JSON.stringify(claimed.follows));
    assert.match(claimed.follows.session, /^[0-9a-f-]{36}$/, JSON.stringify(claimed.follows));
    console.log(`# gemini: the lease follows ${JSON.stringify(claimed.follows)}`);

    // BeforeTool on write_file: refused under pc-b's lease (the reason goes to the model);
    // outside it, no decision from pcmail and the file is written.
    const why = JSON.stringify(responseIn(api, 4, 'write_file'));
    assert.match(why, /src\/auth\/session\.rs is under the exclusive lease `auth` held by pc-b\/ani/, why);
    assert.equal(fs.existsSync(leased), false);
    assert.doesNotMatch(JSON.stringify(responseIn(api, 5, 'write_file')), /lease/);
    assert.equal(fs.readFileSync(free, 'utf8'), 'pub fn run() {}\n');
  } finally {
    await api.close();
    await s.close();
  }
});
