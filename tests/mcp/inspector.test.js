// `pcmail mcp` driven by the MCP Inspector's CLI mode (@modelcontextprotocol/inspector,
// pinned in package.json / package-lock.json): a client this project did not write.
// tools/list (with the Inspector's --strict schema-portability check) of the default
// profile and of `--tools all`, and tools/call for every tool, on two PCs that share one
// embedded server file (leases included); every successful result is validated against
// the tool's outputSchema with Ajv (a JSON-Schema validator this project did not write).
//
// PCMAIL_BIN names the pcmail binary (default: $CARGO_TARGET_DIR or ../../target, debug).
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const repo = path.resolve(__dirname, '../..');
const bin = process.env.PCMAIL_BIN ||
  path.join(process.env.CARGO_TARGET_DIR || path.join(repo, 'target'), 'debug', 'pcmail');
const Ajv2020 = require('ajv/dist/2020');
const inspector = require.resolve('@modelcontextprotocol/inspector/package.json')
  .replace(/package\.json$/, 'clients/launcher/build/index.js');

const TOOLS = ['ack', 'alerts', 'fail', 'handoff_close', 'handoff_list', 'handoff_new', 'handoff_pickup',
  'handoff_rollup', 'handoff_show', 'inbox', 'job_cancel', 'job_list', 'job_run', 'job_status', 'lease_check',
  'lease_claim', 'lease_list', 'lease_release', 'lease_takeover', 'map', 'map_check', 'memory_add', 'memory_search',
  'memory_show', 'name', 'read', 'reply', 'roster', 'roster_add', 'roster_enrol', 'roster_log', 'roster_remove',
  'roster_require_credentials', 'roster_revoke', 'send', 'sent', 'status', 'sync', 'token_rotate', 'wait_for', 'who'];

// The default profile: what every session that loads pcmail pays for.
const DEFAULT = ['ack', 'handoff_new', 'handoff_pickup', 'inbox', 'lease_claim', 'lease_list', 'lease_release', 'read',
  'reply', 'send', 'wait_for', 'who'];

let dir;
let validators;
const home = (pc) => path.join(dir, pc);

function pcmail(pc, args, input) {
  const r = spawnSync(bin, args, {
    env: { ...process.env, PCMAIL_HOME: home(pc) },
    input: input || '',
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, `pcmail ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

// One Inspector run: a fresh `pcmail mcp` process for the PC, one method.
function inspect(pc, method, extra, serverArgs = ['--tools', 'all']) {
  const args = [inspector, '--cli', '-e', `PCMAIL_HOME=${home(pc)}`, '--format', 'json',
    '--method', method, ...(extra || []), '--', bin, 'mcp', ...serverArgs];
  const r = spawnSync(process.execPath, args, {
    // The Inspector keeps its own files under HOME: a private one.
    env: { ...process.env, HOME: dir, INSPECTOR_SKIP_CLIENT_INSTALL: '1' },
    encoding: 'utf8',
    timeout: 60_000,
  });
  let out;
  try {
    out = JSON.parse(r.stdout);
  } catch (e) {
    assert.fail(`inspector ${method} ${extra}: not JSON (exit ${r.status}): ${r.stdout}\n${r.stderr}`);
  }
  return { status: r.status, stderr: r.stderr, result: out.result };
}

function call(pc, tool, args) {
  const r = inspect(pc, 'tools/call', ['--tool-name', tool, '--tool-args-json', JSON.stringify(args || {})]);
  assert.ok(r.result, `${tool}: ${r.stderr}`);
  // Structured JSON, and the same JSON as text for clients that read only text.
  assert.deepEqual(JSON.parse(r.result.content[0].text), r.result.structuredContent, tool);
  return r;
}

function ok(pc, tool, args) {
  const r = call(pc, tool, args);
  assert.equal(r.result.isError, false, `${tool}: ${JSON.stringify(r.result)}`);
  assert.equal(r.status, 0);
  const validate = validators.get(tool);
  assert.ok(validate(r.result.structuredContent),
    `${tool}: result does not match its outputSchema: ${JSON.stringify(validate.errors)} ${JSON.stringify(r.result.structuredContent)}`);
  return r.result.structuredContent;
}

before(() => {
  assert.ok(fs.existsSync(bin), `${bin} missing: cargo build -p pcmail-cli (or set PCMAIL_BIN)`);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pcmail-inspector-'));
  const shared = path.join(dir, 'shared-server.db');
  for (const pc of ['pc-a', 'pc-b']) {
    pcmail(pc, ['init', '--label', pc, '--embedded-db', shared]);
    pcmail(pc, ['sync']);
  }
  const all = inspect('pc-a', 'tools/list').result.tools;
  const ajv = new Ajv2020({ allErrors: true });
  validators = new Map(all.map((t) => [t.name, ajv.compile(t.outputSchema)]));
});

after(() => fs.rmSync(dir, { recursive: true, force: true }));

test('tools/list: the default profile within 12 tools and 10,000 characters; --tools all: one tool per operation', () => {
  const d = inspect('pc-a', 'tools/list', ['--strict'], []);
  assert.equal(d.status, 0, d.stderr);
  assert.deepEqual(d.result.tools.map((t) => t.name).sort(), DEFAULT);
  const chars = JSON.stringify(d.result).length;
  console.log(`# default profile: ${d.result.tools.length} tools, ${chars} characters of tools/list`);
  assert.ok(chars <= 10_000, `${chars} characters`);
  assert.doesNotMatch(d.stderr, /Warning: tool|Error: tool/, d.stderr);
  const jobs = inspect('pc-a', 'tools/list', [], ['--tools', 'jobs']).result.tools.map((t) => t.name);
  assert.ok(jobs.includes('job_run') && jobs.includes('send') && !jobs.includes('token_rotate'), jobs.join());

  const r = inspect('pc-a', 'tools/list', ['--strict']);
  assert.equal(r.status, 0, r.stderr);
  const names = r.result.tools.map((t) => t.name).sort();
  assert.deepEqual(names, TOOLS);
  for (const t of r.result.tools) {
    assert.equal(t.inputSchema.type, 'object', t.name);
    assert.equal(t.outputSchema.type, 'object', t.name);
    for (const k of ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint']) {
      assert.equal(typeof t.annotations[k], 'boolean', `${t.name}: ${k}`);
    }
    // Only the formats JSON Schema defines (Gemini CLI warns about any other).
    assert.doesNotMatch(JSON.stringify(t), /"format":"(?!date-time|date|time|duration|email|uri|uuid)/, t.name);
  }
  assert.doesNotMatch(r.stderr, /Warning: tool|Error: tool/, r.stderr);
  const send = r.result.tools.find((t) => t.name === 'send');
  assert.deepEqual([...send.inputSchema.required].sort(), ['body', 'to']);
});

test('tools/call: every tool, across two PCs', () => {
  const roster = ok('pc-a', 'roster');
  assert.deepEqual(roster.pcs.map((p) => p.label).sort(), ['pc-a', 'pc-b']);
  assert.equal(roster.me, 'pc-a');

  const sent = ok('pc-a', 'send', { to: 'pc-b', kind: 'decision', subject: 'merge?', body: 'merge it?' });
  assert.equal(sent.queued, false);
  const id = sent.ids[0];
  const other = ok('pc-a', 'send', { to: 'pc-b', body: 'a second one' }).ids[0];

  assert.ok(ok('pc-b', 'sync').stored.includes(id));
  const inbox = ok('pc-b', 'inbox');
  assert.deepEqual(inbox.mails.map((m) => m.id).sort(), [id, other].sort());
  assert.equal(ok('pc-b', 'read', { id }).body, 'merge it?');

  assert.equal(ok('pc-a', 'status', { ids: [id] }).mails[0].state, 'seen');
  assert.equal(ok('pc-a', 'wait_for', { ids: [id], state: 'seen', timeout_secs: 5 }).mails[0].state, 'seen');

  const reply = ok('pc-b', 'reply', { id, body: 'yes' });
  assert.equal(ok('pc-a', 'status', { ids: [id] }).mails[0].state, 'done');
  assert.equal(ok('pc-b', 'fail', { id: other, reason: 'not mine' }).state, 'failed');

  ok('pc-a', 'sync');
  assert.equal(ok('pc-a', 'ack', { id: reply.ids[0] }).state, 'done');
  const mine = ok('pc-a', 'sent', { limit: 10 }).mails;
  assert.deepEqual(mine.map((m) => [m.id, m.state]).sort(), [[id, 'done'], [other, 'failed']].sort());

  assert.ok(ok('pc-a', 'roster_add', { label: 'pc-x', hostname: 'host-x' }).version > 0);
  assert.ok(ok('pc-a', 'roster').pcs.some((p) => p.label === 'pc-x'));
  ok('pc-a', 'roster_remove', { label: 'pc-x' });
  assert.ok(!ok('pc-a', 'roster').pcs.some((p) => p.label === 'pc-x'));
  assert.ok(Array.isArray(ok('pc-a', 'alerts', { all: true }).alerts));

  // Leases: a TTL lease (the Inspector's process is short-lived).
  const claim = ok('pc-a', 'lease_claim', { resource: 'staging-deploy', description: 'deploying', ttl: '10m', repo: '' });
  assert.equal(claim.outcome, 'granted');
  const fence = claim.lease.fence;
  assert.equal(ok('pc-b', 'lease_list', {}).leases[0].holder.pc, 'pc-a');
  assert.equal(ok('pc-b', 'lease_check', { resource: 'staging-deploy', fence }).current, true);
  const held = call('pc-b', 'lease_claim', { resource: 'staging-deploy', ttl: '10m', repo: '' });
  assert.equal(held.result.structuredContent.error.code, 'held');
  assert.equal(held.result.structuredContent.error.exit, 10);
  assert.equal(held.result.structuredContent.error.lease.holder.pc, 'pc-a');
  const taken = call('pc-b', 'lease_takeover', { resource: 'staging-deploy', reason: 'not stale yet' });
  assert.equal(taken.result.isError, true, 'a live holder is not taken over');
  assert.equal(ok('pc-a', 'lease_release', { resource: 'staging-deploy' }).released[0].released, true);
  assert.equal(ok('pc-b', 'lease_check', { resource: 'staging-deploy', fence }).current, false);
});

test('the code map and the admin tools: map, map_check, and the credential commands on the embedded default', () => {
  const repoDir = path.join(dir, 'maprepo');
  fs.mkdirSync(repoDir);
  fs.writeFileSync(path.join(repoDir, 'lib.rs'), '/// Hi.\npub fn hi() {}\n');
  let e = call('pc-a', 'map_check', { repo: repoDir }).result.structuredContent.error;
  assert.deepEqual([e.code, e.exit], ['map_stale', 15]);
  const m = ok('pc-a', 'map', { repo: repoDir });
  assert.equal(m.files, 1);
  assert.equal(ok('pc-a', 'map_check', { repo: repoDir }).files, 1);
  assert.deepEqual(JSON.parse(pcmail('pc-a', ['--json', 'map', '--repo', repoDir, '--check'])),
    ok('pc-a', 'map_check', { repo: repoDir }), 'the same report as the CLI');

  // The embedded default has no join codes: roster_enrol adds the PC directly, as `roster add` does.
  assert.ok(ok('pc-a', 'roster_enrol', { label: 'pc-e', hostname: 'host-e' }).version > 0);
  assert.ok(ok('pc-a', 'roster').pcs.some((p) => p.label === 'pc-e'));
  e = call('pc-a', 'roster_enrol', { label: 'pc-f' }).result.structuredContent.error;
  assert.deepEqual([e.code, e.exit], ['usage', 2], JSON.stringify(e));
  // The credential commands answer as the CLI does on the same PC (exit codes included).
  for (const [tool, args, cli] of [
    ['roster_revoke', { label: 'pc-e' }, ['roster', 'revoke', 'pc-e']],
    ['roster_log', { limit: 5 }, ['roster', 'log', '--limit', '5']],
    ['roster_require_credentials', { on: false }, ['roster', 'require-credentials', '--off']],
    ['token_rotate', {}, ['token', 'rotate']],
  ]) {
    const r = call('pc-a', tool, args);
    const c = spawnSync(bin, ['--json', ...cli], { env: { ...process.env, PCMAIL_HOME: home('pc-a') }, encoding: 'utf8' });
    if (r.result.isError) {
      assert.equal(r.result.structuredContent.error.exit, c.status, `${tool}: ${JSON.stringify(r.result)} vs ${c.stderr}`);
    } else {
      assert.equal(c.status, 0, c.stderr);
      // The CLI ran second: a revoke or a switch it repeats says `changed: false`; `now` is the server's clock.
      const same = (v) => { const o = { ...v }; delete o.changed; delete o.now; return o; };
      assert.deepEqual(same(r.result.structuredContent), same(JSON.parse(c.stdout)), tool);
    }
  }
  ok('pc-a', 'roster_remove', { label: 'pc-e' });
});

test('tool errors carry the CLI exit codes: candidates for an unknown address, the rule for a refusal', () => {
  pcmail('pc-a', ['roster', 'add', 'kim-laptop', '--hostname', 'kl']);
  let r = call('pc-a', 'send', { to: 'kim', body: 'x' });
  assert.equal(r.result.isError, true);
  assert.notEqual(r.status, 0, 'the Inspector reports the tool error');
  let e = r.result.structuredContent.error;
  assert.equal(e.code, 'unknown_address');
  assert.equal(e.exit, 4);
  assert.ok(e.candidates.includes('kim-laptop'), JSON.stringify(e));

  const q = ok('pc-a', 'send', { to: 'pc-b', body: 'auto question', auto: true }).ids[0];
  ok('pc-b', 'sync');
  e = call('pc-b', 'reply', { id: q, body: 'auto answer', auto: true }).result.structuredContent.error;
  assert.deepEqual([e.code, e.exit, e.rule], ['refused', 5, 'loop_refused']);

  e = call('pc-b', 'read', { id: 'mail-1-0000abcd' }).result.structuredContent.error;
  assert.deepEqual([e.code, e.exit], ['not_found', 7]);
});

// The Inspector converts a string argument to the schema's type (`"yes"` for a
// boolean becomes true), so the mistyped values here are arrays and numbers.
test('bad arguments: a structured usage error (exit 2, as the CLI) naming the argument, from every tool', () => {
  const cases = [
    ['send', { to: 'pc-b' }, 'body'],
    ['send', { to: 'pc-b', body: 'x', urgent: [true] }, 'urgent'],
    ['send', { to: 'pc-b', bdy: 'x' }, 'bdy'],
    ['read', {}, 'id'],
    ['ack', { id: 7 }, 'id'],
    ['reply', { id: 'm' }, 'body'],
    ['fail', { id: 'm' }, 'reason'],
    ['status', { ids: 'm' }, 'ids'],
    ['wait_for', { ids: ['m'], state: 'read' }, 'state'],
    ['inbox', { limit: -1 }, 'limit'],
    ['sent', { limit: [3] }, 'limit'],
    ['roster', { verbose: true }, 'verbose'],
    ['roster_add', { hostname: 'h' }, 'label'],
    ['roster_remove', {}, 'label'],
    ['alerts', { all: [1] }, 'all'],
    ['sync', { now: true }, 'now'],
    ['lease_claim', { description: 'd' }, 'resource'],
    ['lease_release', {}, 'resource'],
    ['lease_list', { all: [1] }, 'all'],
    ['lease_check', { resource: 'r' }, 'fence'],
    ['job_run', { target: 'pc-b' }, 'command'],
    ['job_status', {}, 'job_id'],
    ['job_list', { mine: [1] }, 'mine'],
    ['job_cancel', { reason: 'r' }, 'job_id'],
    ['lease_takeover', { resource: 'r' }, 'reason'],
    ['handoff_new', { goal: 'g' }, 'slug'],
    ['handoff_list', { every: true }, 'every'],
    ['handoff_show', {}, 'name'],
    ['handoff_pickup', { name: [3] }, 'name'],
    ['handoff_close', {}, 'name'],
    ['handoff_rollup', { slug: 's', body: 'b' }, 'through'],
    ['memory_add', { topic: 't', text: 'x' }, 'kind'],
    ['memory_show', { topic: [5] }, 'topic'],
    ['memory_search', {}, 'words'],
    ['name', {}, 'name'],
    ['who', { all: [1] }, 'all'],
    ['map', { llms_budget: [1] }, 'llms_budget'],
    ['map_check', { repo: [7] }, 'repo'],
    ['roster_enrol', { hostname: 'h' }, 'label'],
    ['roster_revoke', {}, 'label'],
    ['roster_log', { limit: -1 }, 'limit'],
    ['roster_require_credentials', { on: [false] }, 'on'],
    ['token_rotate', { force: true }, 'force'],
  ];
  assert.deepEqual([...new Set(cases.map((c) => c[0]))].sort(), TOOLS, 'every tool is covered');
  for (const [tool, args, field] of cases) {
    const r = call('pc-a', tool, args);
    assert.equal(r.result.isError, true, `${tool} ${JSON.stringify(args)}: ${JSON.stringify(r.result)}`);
    const e = r.result.structuredContent.error;
    assert.deepEqual([e.code, e.exit, e.field], ['usage', 2, field], `${tool} ${JSON.stringify(args)}: ${JSON.stringify(e)}`);
    assert.match(e.message, new RegExp(field), tool);
  }
  const r = spawnSync(bin, ['send', 'pc-b', '--kind', 'memo', '--body', 'x'], { env: { ...process.env, PCMAIL_HOME: home('pc-a') } });
  assert.equal(r.status, 2, 'the CLI exits 2 for a bad option value');
});

test("an argument a client injects (Gemini CLI's wait_for_previous) is ignored and noted; other unknown ones still fail", () => {
  const r = call('pc-a', 'inbox', { wait_for_previous: true });
  assert.equal(r.result.isError, false, JSON.stringify(r.result));
  assert.deepEqual(r.result._meta?.['pcmail/ignoredArguments'], ['wait_for_previous'], JSON.stringify(r.result));
  const e = call('pc-a', 'inbox', { wait_for_previous: true, wait_for_next: true }).result.structuredContent.error;
  assert.deepEqual([e.code, e.exit, e.field], ['usage', 2, 'wait_for_next'], JSON.stringify(e));
});
