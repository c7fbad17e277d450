'use strict';
// Runs protocol vector files (docs/protocol.md, "Vector files") against the gas code.

const fs = require('fs');
const path = require('path');
const { createFakes } = require('./fakes');
const { loadGas, post } = require('./loader');

const VECTOR_DIR = path.join(__dirname, '..', '..', 'tests', 'protocol');

function vectorsPresent(dir) {
  return fs.existsSync(dir || VECTOR_DIR);
}

function vectorFiles(dir) {
  dir = dir || VECTOR_DIR;
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir).filter((f) => f.endsWith('.json')).sort().map((f) => path.join(dir, f));
}

// Subset match; returns a list of "path: problem" strings (empty when it matches).
function subsetMismatches(expect, actual, at) {
  at = at || '$';
  if (expect === '<any>') return actual === undefined ? [at + ': missing'] : [];
  if (Array.isArray(expect)) {
    if (!Array.isArray(actual)) return [at + ': expected an array, got ' + JSON.stringify(actual)];
    if (expect.length !== actual.length) return [at + `: expected ${expect.length} elements, got ${actual.length}: ` + JSON.stringify(actual)];
    return expect.flatMap((e, i) => subsetMismatches(e, actual[i], at + '[' + i + ']'));
  }
  if (expect !== null && typeof expect === 'object') {
    if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) return [at + ': expected an object, got ' + JSON.stringify(actual)];
    return Object.keys(expect).flatMap((k) => (k in actual
      ? subsetMismatches(expect[k], actual[k], at + '.' + k)
      : [at + '.' + k + ': missing']));
  }
  return expect === actual ? [] : [at + `: expected ${JSON.stringify(expect)}, got ${JSON.stringify(actual)}`];
}

// A fresh server (fake spreadsheet, token, roster) for one vector file.
function freshServer(vec) {
  // An empty or missing token is the embedded default: no token, any request passes.
  const props = { PCMAIL_TOKEN: vec.token };
  const fakes = createFakes({ properties: props });
  const ctx = loadGas(fakes);
  let now = (vec.steps && vec.steps[0] && vec.steps[0].now) || 0;
  ctx.__setNow(() => now);
  (vec.roster || []).forEach((pc) => ctx.rosterSet_(pc.label, pc.hostname, pc.number === undefined ? null : pc.number));
  return { fakes, ctx, setNow: (n) => { now = n; } };
}

// A vector may name the servers it runs on ("servers": ["gas"]); none means both.
// A vector without a token is the embedded default (the Rust engine in-process): a deployed
// gas always authenticates (no switch turns that off), so it does not run here.
function runsOnGas(vec) {
  return (!Array.isArray(vec.servers) || vec.servers.includes('gas')) && !!vec.token;
}

// Runs every step; returns [{step, problems, response}] for the steps that failed.
function runVector(vec) {
  const srv = freshServer(vec);
  const failures = [];
  vec.steps.forEach((step, i) => {
    if (step.now !== undefined) srv.setNow(step.now);
    const body = step.raw !== undefined ? step.raw : JSON.stringify(step.request);
    const res = post(srv.ctx, body).json;
    const problems = subsetMismatches(step.expect, res);
    if (res.ok === true && step.now !== undefined && res.now !== step.now) problems.push('$.now: expected the step now ' + step.now);
    if (problems.length) failures.push({ step: i, note: step.note || step.comment, problems, response: res });
  });
  return failures;
}

module.exports = { VECTOR_DIR, vectorsPresent, runsOnGas, vectorFiles, subsetMismatches, runVector, freshServer };
