// Generated from pcmail-core (the op table and the shared limits), the same JSON as
// tests/protocol/generated/op-table.json. Do not edit: PCMAIL_WRITE_OP_TABLE=1 cargo test -p pcmail-core --test op_table_json
'use strict';
window.PCMAIL_OP_TABLE = {
  "features": [
    "mark-results",
    "expires-in",
    "label-binding",
    "credentials",
    "leases",
    "received-updates",
    "jobs",
    "sessions",
    "multi-recipient"
  ],
  "job": {
    "ARGS_MAX": 20,
    "ARTIFACTS_MAX": 20,
    "ARTIFACT_MAX_CHARS": 400,
    "CHUNK_FAILURES_MAX": 3,
    "CHUNK_FAILURE_EXPIRY_MS": 259200000,
    "CHUNK_START_DEADLINE_PERCENT": 70,
    "COMMANDS_MAX": 200,
    "DEDUP_WINDOW_DEFAULT_MS": 300000,
    "DEDUP_WINDOW_MAX_MS": 86400000,
    "DESCRIPTION_MAX_CHARS": 1000,
    "HEARTBEAT_MS": 30000,
    "LIST_LIMIT_DEFAULT": 100,
    "LIST_LIMIT_MAX": 500,
    "OFFERED_MAX": 20,
    "OUTPUT_CAP_BYTES": 65536,
    "PATTERN_MAX_CHARS": 500,
    "PC_PROBE_ITEMS_MAX": 100,
    "POLL_ITEMS_MAX": 500,
    "QUEUED_MAX_AGE_MS": 604800000,
    "REASON_NEVER_STARTED": "never started",
    "REASON_NO_HEARTBEAT": "no heartbeat for 180 s (executor gone; outcome unknown)",
    "REASON_PAST_LIMIT": "running past twice its time limit",
    "REFUSED_BAD_ARGUMENT": "bad_argument",
    "REFUSED_NOT_WHITELISTED": "not_whitelisted",
    "REFUSED_NO_EXECUTOR": "no_executor",
    "REFUSED_SUBMITTER_NOT_ALLOWED": "submitter_not_allowed",
    "REFUSED_TARGET_REVOKED": "target_revoked",
    "RUNNER_MAX_CHARS": 100,
    "SERVER_ACTOR": "server",
    "SERVER_TARGET": "@server",
    "SESSION_MAX_CHARS": 100,
    "STALE_AFTER_MS": 180000,
    "STRING_MAX_LEN_CAP": 4096,
    "STRING_MAX_LEN_DEFAULT": 200,
    "TIME_LIMIT_MAX_MS": 86400000,
    "TIME_LIMIT_MIN_MS": 1000,
    "VALUES_MAX": 500
  },
  "jobBuiltins": {
    "pc": [
      "_debug_pc",
      "_debug_sessions",
      "_debug_leases",
      "_debug_jobs"
    ],
    "server": [
      "_debug_roster",
      "_debug_mail",
      "_debug_alerts",
      "_debug_sweep_plan",
      "_debug_jobs",
      "sweep",
      "prune"
    ]
  },
  "lease": {
    "CLAIM_ID_MAX_CHARS": 100,
    "DESCRIPTION_MAX_CHARS": 1000,
    "ENDED_WINDOW_MS": 86400000,
    "FILES_MAX": 200,
    "GLOB_MAX_CHARS": 400,
    "HEARTBEAT_MS": 30000,
    "POLL_ITEMS_MAX": 500,
    "REPO_MAX_CHARS": 500,
    "RESOURCE_MAX_CHARS": 100,
    "SESSION_MAX_CHARS": 100,
    "STALE_AFTER_MS": 180000,
    "STALE_ALERT_MS": 3600000,
    "TTL_MAX_MS": 604800000,
    "TTL_MIN_MS": 1000
  },
  "limits": {
    "ACTOR_MAX_CHARS": 100,
    "BODY_BYTES_MAX": 262144,
    "BODY_MAX_CHARS": 20000,
    "EXPIRES_IN_MAX_MS": 31622400000,
    "HOP_LIMIT": 3,
    "JOIN_CODE_DEFAULT_MS": 86400000,
    "JOIN_CODE_MAX_MS": 2592000000,
    "MARKS_MAX": 500,
    "MIN": 60000,
    "POLL_LIMIT_DEFAULT": 100,
    "POLL_LIMIT_MAX": 500,
    "POLL_RECORD_STEP_MS": 10000,
    "REASON_MAX_CHARS": 2000,
    "RECIPIENTS_MAX": 20,
    "STALE_PC_MS": 600000,
    "STATUS_IDS_MAX": 200,
    "SUBJECT_MAX_CHARS": 200,
    "SWEEP_EVERY_MS": 600000,
    "UNDELIVERED_MS": 1800000,
    "UNSEEN_MS": 21600000,
    "UNSEEN_URGENT_MS": 7200000,
    "UPDATES_MAX": 200,
    "WAIT_MS_MAX": 25000
  },
  "ops": [
    {
      "class": "any",
      "feature": null,
      "gasLock": "unlocked",
      "name": "hello",
      "onRoster": false,
      "readOnly": true,
      "wakes": []
    },
    {
      "class": "any",
      "feature": null,
      "gasLock": "request",
      "name": "roster.get",
      "onRoster": false,
      "readOnly": true,
      "wakes": []
    },
    {
      "class": "own-entry-or-admin",
      "feature": null,
      "gasLock": "request",
      "name": "roster.set",
      "onRoster": false,
      "readOnly": false,
      "wakes": []
    },
    {
      "class": "admin",
      "feature": null,
      "gasLock": "request",
      "name": "roster.remove",
      "onRoster": false,
      "readOnly": false,
      "wakes": []
    },
    {
      "class": "pc",
      "feature": null,
      "gasLock": "request",
      "name": "send",
      "onRoster": true,
      "readOnly": false,
      "wakes": [
        "mail"
      ]
    },
    {
      "class": "pc",
      "feature": null,
      "gasLock": "request",
      "name": "poll",
      "onRoster": true,
      "readOnly": false,
      "wakes": [
        "mail",
        "lease",
        "job"
      ]
    },
    {
      "class": "pc",
      "feature": null,
      "gasLock": "request",
      "name": "mark",
      "onRoster": true,
      "readOnly": false,
      "wakes": [
        "mail"
      ]
    },
    {
      "class": "pc",
      "feature": null,
      "gasLock": "request",
      "name": "status",
      "onRoster": true,
      "readOnly": true,
      "wakes": []
    },
    {
      "class": "any",
      "feature": null,
      "gasLock": "own-sections",
      "name": "sweep",
      "onRoster": false,
      "readOnly": false,
      "wakes": [
        "mail",
        "lease",
        "job"
      ]
    },
    {
      "class": "any",
      "feature": null,
      "gasLock": "unlocked",
      "name": "alerts",
      "onRoster": false,
      "readOnly": true,
      "wakes": []
    },
    {
      "class": "admin",
      "feature": "credentials",
      "gasLock": "request",
      "name": "roster.enrol",
      "onRoster": false,
      "readOnly": false,
      "wakes": []
    },
    {
      "class": "join",
      "feature": "credentials",
      "gasLock": "request",
      "name": "join",
      "onRoster": false,
      "readOnly": false,
      "wakes": [
        "mail"
      ]
    },
    {
      "class": "admin",
      "feature": "credentials",
      "gasLock": "request",
      "name": "roster.revoke",
      "onRoster": false,
      "readOnly": false,
      "wakes": [
        "job"
      ]
    },
    {
      "class": "pc",
      "feature": "credentials",
      "gasLock": "request",
      "name": "rotate",
      "onRoster": true,
      "readOnly": false,
      "wakes": []
    },
    {
      "class": "admin",
      "feature": "credentials",
      "gasLock": "request",
      "name": "roster.requireCredentials",
      "onRoster": false,
      "readOnly": false,
      "wakes": []
    },
    {
      "class": "admin",
      "feature": "credentials",
      "gasLock": "request",
      "name": "roster.log",
      "onRoster": false,
      "readOnly": true,
      "wakes": []
    },
    {
      "class": "pc",
      "feature": "leases",
      "gasLock": "request",
      "name": "lease.claim",
      "onRoster": true,
      "readOnly": false,
      "wakes": [
        "lease"
      ]
    },
    {
      "class": "pc",
      "feature": "leases",
      "gasLock": "request",
      "name": "lease.release",
      "onRoster": true,
      "readOnly": false,
      "wakes": [
        "lease"
      ]
    },
    {
      "class": "pc",
      "feature": "leases",
      "gasLock": "request",
      "name": "lease.list",
      "onRoster": true,
      "readOnly": false,
      "wakes": [
        "lease"
      ]
    },
    {
      "class": "pc",
      "feature": "leases",
      "gasLock": "request",
      "name": "lease.check",
      "onRoster": true,
      "readOnly": false,
      "wakes": [
        "lease"
      ]
    },
    {
      "class": "pc",
      "feature": "jobs",
      "gasLock": "own-sections",
      "name": "job.submit",
      "onRoster": true,
      "readOnly": false,
      "wakes": [
        "mail",
        "lease",
        "job"
      ]
    },
    {
      "class": "pc",
      "feature": "jobs",
      "gasLock": "request",
      "name": "job.status",
      "onRoster": true,
      "readOnly": true,
      "wakes": []
    },
    {
      "class": "pc",
      "feature": "jobs",
      "gasLock": "request",
      "name": "job.list",
      "onRoster": true,
      "readOnly": true,
      "wakes": []
    },
    {
      "class": "pc",
      "feature": "jobs",
      "gasLock": "request",
      "name": "job.cancel",
      "onRoster": true,
      "readOnly": false,
      "wakes": [
        "job"
      ]
    },
    {
      "class": "pc",
      "feature": "jobs",
      "gasLock": "request",
      "name": "job.start",
      "onRoster": true,
      "readOnly": false,
      "wakes": []
    },
    {
      "class": "pc",
      "feature": "jobs",
      "gasLock": "request",
      "name": "job.report",
      "onRoster": true,
      "readOnly": false,
      "wakes": [
        "job"
      ]
    },
    {
      "class": "pc",
      "feature": "sessions",
      "gasLock": "request",
      "name": "name.take",
      "onRoster": true,
      "readOnly": false,
      "wakes": [
        "mail"
      ]
    },
    {
      "class": "pc",
      "feature": "sessions",
      "gasLock": "request",
      "name": "who",
      "onRoster": true,
      "readOnly": true,
      "wakes": []
    }
  ],
  "protocolVersion": 1,
  "sessions": {
    "BRANCH_MAX_CHARS": 250,
    "CWD_MAX_CHARS": 1000,
    "LEASES_MAX": 100,
    "REPORT_FRESH_MS": 180000,
    "REPO_MAX_CHARS": 500,
    "SESSIONS_MAX": 200,
    "SESSION_MAX_CHARS": 100
  }
};
