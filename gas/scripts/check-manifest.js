#!/usr/bin/env node
'use strict';
// Fails (exit 1) on an appsscript.json that would break the deployment: `clasp create`
// writes a bare manifest (no webapp block, no scopes) that the next `clasp push -f`
// would upload. Run by scripts/push.js before every push.
//   node scripts/check-manifest.js [path/to/appsscript.json]
const fs = require('fs');
const path = require('path');

const REQUIRED_SCOPES = [
  'https://www.googleapis.com/auth/spreadsheets',
  'https://www.googleapis.com/auth/script.external_request',
  'https://www.googleapis.com/auth/script.scriptapp'
];

// Returns the problems found (empty when the manifest is right).
function manifestProblems(m) {
  const out = [];
  if (!m || typeof m !== 'object') return ['the manifest is not a JSON object'];
  if (m.runtimeVersion !== 'V8') out.push('runtimeVersion must be "V8"');
  const w = m.webapp;
  if (!w || typeof w !== 'object') out.push('no "webapp" block: the web app would not be deployable as pcmail expects');
  else {
    if (w.executeAs !== 'USER_DEPLOYING') out.push('webapp.executeAs must be "USER_DEPLOYING"');
    if (w.access !== 'ANYONE_ANONYMOUS') out.push('webapp.access must be "ANYONE_ANONYMOUS" (clients send the token, not a Google login)');
  }
  const scopes = Array.isArray(m.oauthScopes) ? m.oauthScopes : [];
  REQUIRED_SCOPES.forEach((s) => { if (!scopes.includes(s)) out.push('oauthScopes lacks ' + s); });
  return out;
}

function main() {
  const file = process.argv[2] || path.join(__dirname, '..', 'appsscript.json');
  let m;
  try {
    m = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    process.stderr.write(`check-manifest: cannot read ${file}: ${e.message}\n`);
    process.exit(2);
  }
  const problems = manifestProblems(m);
  if (problems.length) {
    process.stderr.write(`check-manifest: ${file} is not pcmail's manifest:\n` + problems.map((p) => '  - ' + p + '\n').join('') +
      'Restore it (git checkout -- gas/appsscript.json) before pushing; `clasp create-script` overwrites it.\n');
    process.exit(1);
  }
  process.stdout.write(`check-manifest: ${file} OK\n`);
}

if (require.main === module) main();
module.exports = { manifestProblems, REQUIRED_SCOPES };
