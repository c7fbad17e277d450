// A long `wait_for` reports progress to a client that asked for it (a progressToken in the
// request's _meta), with the official MCP TypeScript client SDK (@modelcontextprotocol/client,
// pinned in package.json) talking to `pcmail mcp` over stdio; without a token, no
// notification is sent.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Client } = require('@modelcontextprotocol/client');
const { StdioClientTransport } = require('@modelcontextprotocol/client/stdio');

const repo = path.resolve(__dirname, '../..');
const bin = process.env.PCMAIL_BIN ||
  path.join(process.env.CARGO_TARGET_DIR || path.join(repo, 'target'), 'debug', 'pcmail');

let dir;
const home = (pc) => path.join(dir, pc);
const pcmail = (pc, args) => {
  const r = spawnSync(bin, args, { env: { ...process.env, PCMAIL_HOME: home(pc) }, encoding: 'utf8' });
  assert.equal(r.status, 0, `pcmail ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
};

before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pcmail-progress-'));
  const shared = path.join(dir, 'shared-server.db');
  for (const pc of ['pc-a', 'pc-b']) {
    pcmail(pc, ['init', '--label', pc, '--embedded-db', shared]);
    pcmail(pc, ['sync']);
  }
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

async function connect(pc) {
  const transport = new StdioClientTransport({ command: bin, args: ['mcp'], env: { ...process.env, PCMAIL_HOME: home(pc) } });
  const client = new Client({ name: 'pcmail-progress-test', version: '0' });
  await client.connect(transport);
  return client;
}

test('wait_for sends progress notifications while it waits, only when asked', { timeout: 60_000 }, async () => {
  const id = JSON.parse(pcmail('pc-a', ['--json', 'send', 'pc-b', '--body', 'will anyone read this?'])).ids[0];
  const client = await connect('pc-a');
  try {
    const seen = [];
    const r = await client.callTool(
      { name: 'wait_for', arguments: { ids: [id], state: 'seen', timeout_secs: 3 } },
      { onprogress: (p) => seen.push(p), timeout: 30_000 },
    );
    // Nobody reads it: the wait ends in the timeout error, after progress every second.
    assert.equal(r.isError, true, JSON.stringify(r));
    assert.equal(r.structuredContent.error.exit, 8, JSON.stringify(r.structuredContent));
    assert.ok(seen.length >= 2, `progress notifications: ${JSON.stringify(seen)}`);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i].progress > seen[i - 1].progress, JSON.stringify(seen));
    assert.equal(seen[0].total, 3);
    assert.match(seen[0].message, /waiting for 1 mail\(s\) to reach seen/);

    // Without onprogress the SDK sends no token: the same wait says nothing on the way.
    let quiet = 0;
    client.fallbackNotificationHandler = async (n) => { if (n.method === 'notifications/progress') quiet++; };
    const r2 = await client.callTool({ name: 'wait_for', arguments: { ids: [id], state: 'seen', timeout_secs: 2 } });
    assert.equal(r2.isError, true);
    assert.equal(quiet, 0);
  } finally {
    await client.close();
  }
});
