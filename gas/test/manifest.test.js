'use strict';
// Defect 5: the push step refuses a manifest `clasp create` would have replaced.
// (clasp itself needs a Google login: only this check is testable here.)
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawnSync } = require('child_process');

const CHECK = path.join(__dirname, '..', 'scripts', 'check-manifest.js');
const PUSH = path.join(__dirname, '..', 'scripts', 'push.js');
const run = (file) => spawnSync(process.execPath, [CHECK, file], { encoding: 'utf8' });

test('check-manifest: the checked-in manifest passes; a bare clasp manifest and a missing scope fail', () => {
  const ok = run(path.join(__dirname, '..', 'appsscript.json'));
  assert.strictEqual(ok.status, 0, ok.stderr);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pcmail-manifest-'));
  const bare = path.join(dir, 'bare.json');
  fs.writeFileSync(bare, JSON.stringify({ timeZone: 'America/New_York', dependencies: {}, exceptionLogging: 'STACKDRIVER', runtimeVersion: 'V8' }));
  const r = run(bare);
  assert.strictEqual(r.status, 1);
  assert.match(r.stderr, /no "webapp" block/);
  assert.match(r.stderr, /git checkout -- gas\/appsscript.json/);
  const good = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'appsscript.json'), 'utf8'));
  good.oauthScopes = good.oauthScopes.slice(1);
  const noScope = path.join(dir, 'noscope.json');
  fs.writeFileSync(noScope, JSON.stringify(good));
  const s = run(noScope);
  assert.strictEqual(s.status, 1);
  assert.match(s.stderr, /lacks https:\/\/www.googleapis.com\/auth\/spreadsheets/);
});

test('push --dry-run checks the manifest, stamps a build id and restores Version.js', () => {
  const version = path.join(__dirname, '..', 'Version.js');
  const before = fs.readFileSync(version, 'utf8');
  const r = spawnSync(process.execPath, [PUSH, '--dry-run'], { encoding: 'utf8' });
  assert.strictEqual(r.status, 0, r.stderr);
  assert.match(r.stdout, /check-manifest: .* OK/);
  assert.match(r.stdout, /dry run, build \d{8}T\d{6}Z-/);
  assert.strictEqual(fs.readFileSync(version, 'utf8'), before);
});
