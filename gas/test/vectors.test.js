'use strict';
// Every tests/protocol/*.json vector must pass against gas exactly as against Rust.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const path = require('path');
const { VECTOR_DIR, vectorsPresent, runsOnGas, vectorFiles, runVector, subsetMismatches } = require('../lib/vectors');

test('subset matcher follows protocol.md', () => {
  assert.deepStrictEqual(subsetMismatches({ a: 1 }, { a: 1, b: 2 }), []);
  assert.strictEqual(subsetMismatches({ a: '<any>' }, {}).length, 1);
  assert.deepStrictEqual(subsetMismatches({ a: '<any>' }, { a: null }), []);
  assert.strictEqual(subsetMismatches([1], [1, 2]).length, 1, 'arrays must have the same length');
  assert.deepStrictEqual(subsetMismatches([{ x: 1 }], [{ x: 1, y: 2 }]), []);
  assert.strictEqual(subsetMismatches({ a: null }, { a: 0 }).length, 1);
  assert.strictEqual(subsetMismatches({ a: '1' }, { a: 1 }).length, 1, 'no type coercion');
});

const files = vectorFiles();
// A bare copy of gas/ (no ../tests/protocol) skips this one test and says why.
const skip = vectorsPresent() ? false : `no protocol vectors at ${VECTOR_DIR} (a copy of gas/ outside the pcmail repo): vector tests skipped`;
test('there are vectors to run', { skip }, () => {
  assert.ok(files.length > 0, 'no vectors in tests/protocol');
});

for (const file of files) {
  const vec = JSON.parse(fs.readFileSync(file, 'utf8'));
  test(`vector ${path.basename(file)}: ${vec.name}`, { skip: runsOnGas(vec) ? false : 'not a gas vector' }, () => {
    const failures = runVector(vec);
    assert.deepStrictEqual(failures.map((f) => `step ${f.step}${f.note ? ' (' + f.note + ')' : ''}: ${f.problems.join('; ')}`), []);
  });
}
