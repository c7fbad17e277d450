'use strict';
// gas's own op facts and limits against the op table pcmail-core writes
// (tests/protocol/generated/op-table.json): names, who may call each op, how
// Code.js locks it, the features hello answers, and every limit both servers share.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const path = require('path');
const { makeServer } = require('../lib/testkit');

const TABLE_FILE = path.join(__dirname, '../../tests/protocol/generated/op-table.json');
// A bare copy of gas/ (outside the pcmail repo) has no table: these tests say so and skip.
const skip = fs.existsSync(TABLE_FILE) ? false : `no op table at ${TABLE_FILE} (a copy of gas/ outside the pcmail repo)`;
const TABLE = skip ? { ops: [], limits: {}, lease: {}, job: {}, sessions: {}, jobBuiltins: {} } : JSON.parse(fs.readFileSync(TABLE_FILE, 'utf8'));
const names = TABLE.ops.map((o) => o.name);

test('the ops gas parses and handles are the table\'s, in its order', { skip }, () => {
  const s = makeServer();
  assert.ok(names.length >= 28);
  assert.deepStrictEqual([...s.ctx.__get('OPS')], names);
  assert.deepStrictEqual(Object.keys(s.ctx.handlers_()), names);
});

test('each op\'s auth class is the table\'s (Auth.js opClass_)', { skip }, () => {
  const s = makeServer();
  const cls = (op, args) => s.ctx.opClass_({ op, pc: 'pc-a', args: args || {} });
  for (const o of TABLE.ops) {
    if (o.class === 'own-entry-or-admin') {
      assert.strictEqual(cls(o.name, { label: 'pc-a' }), 'pc', o.name + ' of the caller\'s own entry');
      assert.strictEqual(cls(o.name, { label: 'pc-a', replace: true }), 'admin', o.name + ' taking a label over');
      assert.strictEqual(cls(o.name, { label: 'pc-b' }), 'admin', o.name + ' of another PC');
    } else {
      assert.strictEqual(cls(o.name), o.class, o.name);
    }
  }
});

test('Code.js holds the script lock around exactly the ops the table says', { skip }, () => {
  const s = makeServer();
  const unlocked = s.ctx.__get('UNLOCKED_OPS');
  const want = TABLE.ops.filter((o) => o.gasLock !== 'request').map((o) => o.name).sort();
  assert.deepStrictEqual(Object.keys(unlocked).filter((k) => unlocked[k]).sort(), want);
  assert.ok(want.includes('hello') && !want.includes('send'), 'the table was read');
});

test('hello answers the table\'s features', { skip }, () => {
  const s = makeServer();
  assert.deepStrictEqual(TABLE.features, ['mark-results', 'expires-in', 'label-binding', 'credentials', 'leases', 'received-updates', 'jobs', 'sessions', 'multi-recipient']);
  assert.deepStrictEqual(s.call('hello', 'pc-a').features, TABLE.features);
  assert.strictEqual(s.call('hello', 'pc-a').protocol, TABLE.protocolVersion);
});

// gas name → the table's name (and the divisor from its unit), per group.
function assertSame(group, gasObj, table, pairs) {
  const got = {}; const want = {};
  for (const [g, t, scale] of pairs) {
    assert.ok(t in table, `${t} is in the table's ${group}`);
    got[g] = gasObj[g];
    want[g] = scale ? table[t] / scale : table[t];
  }
  assert.deepStrictEqual(got, want, group);
}

test('the mail limits, join-code lifetimes and alert thresholds are the table\'s', { skip }, () => {
  const s = makeServer();
  assertSame('limits', s.ctx.__get('LIMITS'), TABLE.limits, [
    ['SUBJECT_MAX', 'SUBJECT_MAX_CHARS'], ['BODY_MAX', 'BODY_MAX_CHARS'], ['HOP_LIMIT', 'HOP_LIMIT'],
    ['POLL_DEFAULT', 'POLL_LIMIT_DEFAULT'], ['POLL_MAX', 'POLL_LIMIT_MAX'], ['UPDATES_MAX', 'UPDATES_MAX'],
    ['STATUS_MAX', 'STATUS_IDS_MAX'], ['MARKS_MAX', 'MARKS_MAX'], ['WAIT_MAX', 'WAIT_MS_MAX'],
    ['BODY_BYTES_MAX', 'BODY_BYTES_MAX'], ['MIN', 'MIN'], ['EXPIRES_IN_MAX', 'EXPIRES_IN_MAX_MS'],
    ['UNSEEN_URGENT_MS', 'UNSEEN_URGENT_MS'], ['UNSEEN_MS', 'UNSEEN_MS'], ['UNDELIVERED_MS', 'UNDELIVERED_MS'],
    ['STALE_PC_MS', 'STALE_PC_MS'], ['POLL_RECORD_STEP_MS', 'POLL_RECORD_STEP_MS'], ['RECIPIENTS_MAX', 'RECIPIENTS_MAX']
  ]);
  assert.deepStrictEqual([s.ctx.__get('JOIN_CODE_DEFAULT_MS'), s.ctx.__get('JOIN_CODE_MAX_MS')],
    [TABLE.limits.JOIN_CODE_DEFAULT_MS, TABLE.limits.JOIN_CODE_MAX_MS]);
});

test('the lease and session limits are the table\'s', { skip }, () => {
  const s = makeServer();
  const L = TABLE.lease;
  assertSame('lease', s.ctx.__get('LEASE'), Object.assign({}, L, { ACTOR_MAX_CHARS: TABLE.limits.ACTOR_MAX_CHARS, REASON_MAX_CHARS: TABLE.limits.REASON_MAX_CHARS }), [
    ['HEARTBEAT_MS', 'HEARTBEAT_MS'], ['STALE_AFTER_MS', 'STALE_AFTER_MS'], ['STALE_ALERT_MS', 'STALE_ALERT_MS'],
    ['ENDED_WINDOW_MS', 'ENDED_WINDOW_MS'], ['TTL_MIN_MS', 'TTL_MIN_MS'], ['TTL_MAX_MS', 'TTL_MAX_MS'],
    ['FILES_MAX', 'FILES_MAX'], ['GLOB_MAX', 'GLOB_MAX_CHARS'], ['RESOURCE_MAX', 'RESOURCE_MAX_CHARS'],
    ['DESCRIPTION_MAX', 'DESCRIPTION_MAX_CHARS'], ['REPO_MAX', 'REPO_MAX_CHARS'], ['CLAIM_ID_MAX', 'CLAIM_ID_MAX_CHARS'],
    ['SESSION_MAX', 'SESSION_MAX_CHARS'], ['POLL_ITEMS_MAX', 'POLL_ITEMS_MAX'],
    ['ACTOR_MAX', 'ACTOR_MAX_CHARS'], ['REASON_MAX', 'REASON_MAX_CHARS']
  ]);
  assertSame('sessions', s.ctx.__get('SESS'), TABLE.sessions, [
    ['SESSIONS_MAX', 'SESSIONS_MAX'], ['SESSION_MAX', 'SESSION_MAX_CHARS'], ['REPO_MAX', 'REPO_MAX_CHARS'],
    ['BRANCH_MAX', 'BRANCH_MAX_CHARS'], ['CWD_MAX', 'CWD_MAX_CHARS'], ['LEASES_MAX', 'LEASES_MAX'],
    ['REPORT_FRESH_MS', 'REPORT_FRESH_MS']
  ]);
});

test('jobs: the limits, built-ins, PC probes and sweep reasons are the table\'s', { skip }, () => {
  const s = makeServer();
  const J = Object.assign({}, TABLE.job, { ACTOR_MAX_CHARS: TABLE.limits.ACTOR_MAX_CHARS, REASON_MAX_CHARS: TABLE.limits.REASON_MAX_CHARS });
  assertSame('job', s.ctx.__get('JOB'), J, [
    ['H_MS', 'HEARTBEAT_MS'], ['NO_HEARTBEAT_MS', 'STALE_AFTER_MS'], ['QUEUED_MAX_MS', 'QUEUED_MAX_AGE_MS'],
    ['DEDUP_DEFAULT_MS', 'DEDUP_WINDOW_DEFAULT_MS'], ['DEDUP_MAX_MS', 'DEDUP_WINDOW_MAX_MS'],
    ['TIME_LIMIT_MIN_MS', 'TIME_LIMIT_MIN_MS'], ['TIME_LIMIT_MAX_MS', 'TIME_LIMIT_MAX_MS'], ['ARGS_MAX', 'ARGS_MAX'],
    ['STRING_DEFAULT_MAX', 'STRING_MAX_LEN_DEFAULT'], ['STRING_HARD_MAX', 'STRING_MAX_LEN_CAP'],
    ['POLL_ITEMS_MAX', 'POLL_ITEMS_MAX'], ['OFFER_MAX', 'OFFERED_MAX'], ['LIST_DEFAULT', 'LIST_LIMIT_DEFAULT'],
    ['LIST_MAX', 'LIST_LIMIT_MAX'], ['OUTPUT_MAX_BYTES', 'OUTPUT_CAP_BYTES'], ['COMMANDS_MAX', 'COMMANDS_MAX'],
    ['DESCRIPTION_MAX', 'DESCRIPTION_MAX_CHARS'], ['ARTIFACTS_MAX', 'ARTIFACTS_MAX'], ['ARTIFACT_MAX', 'ARTIFACT_MAX_CHARS'],
    ['PATTERN_MAX', 'PATTERN_MAX_CHARS'], ['VALUES_MAX', 'VALUES_MAX'], ['ACTOR_MAX', 'ACTOR_MAX_CHARS'],
    ['REASON_MAX', 'REASON_MAX_CHARS']
  ]);
  assertSame('chunks', s.ctx.__get('CHUNK'), TABLE.job, [
    ['START_DEADLINE', 'CHUNK_START_DEADLINE_PERCENT', 100], ['MAX_FAILURES', 'CHUNK_FAILURES_MAX'],
    ['FAILURE_EXPIRY_MS', 'CHUNK_FAILURE_EXPIRY_MS']
  ]);
  assert.deepStrictEqual(Object.keys(s.ctx.__get('BUILTIN_JOBS')), TABLE.jobBuiltins.server);
  assert.deepStrictEqual([...s.ctx.__get('PC_PROBES')], TABLE.jobBuiltins.pc);
  const gasSrc = fs.readFileSync(path.join(__dirname, '../Jobs.js'), 'utf8');
  for (const r of [TABLE.job.REASON_NO_HEARTBEAT, TABLE.job.REASON_PAST_LIMIT, TABLE.job.REASON_NEVER_STARTED]) {
    assert.ok(gasSrc.includes("'" + r + "'"), r);
  }
  // The refusal reasons and the server's target name are written where they are used.
  const allSrc = fs.readdirSync(path.join(__dirname, '..')).filter((f) => /^[A-Z].*\.js$/.test(f))
    .map((f) => fs.readFileSync(path.join(__dirname, '..', f), 'utf8')).join('\n');
  for (const r of ['REFUSED_NO_EXECUTOR', 'REFUSED_NOT_WHITELISTED', 'REFUSED_BAD_ARGUMENT', 'REFUSED_SUBMITTER_NOT_ALLOWED',
    'REFUSED_TARGET_REVOKED', 'SERVER_TARGET']) {
    assert.ok(allSrc.includes("'" + TABLE.job[r] + "'"), r + ' = ' + TABLE.job[r]);
  }
});
