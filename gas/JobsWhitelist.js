// The team functions `@server` runs: ONE object, in this file only. A PC
// submits `pcmail job run @server NAME ARG=VALUE…`; the submit checks the args against
// the spec below (nothing else reaches the function), queues the job, and the worker
// trigger (installJobsWorker, every minute) runs it under a lease on its subject.
// Empty by default: nothing runs until a team adds an entry. See gas/README.md "Jobs".
//
// An entry:
//   name: {                                  // like a label: a-z 0-9 . _ - (no leading _)
//     args: [ArgSpec…],                      // {name, type: string|int|bool|enum|path, required,
//                                            //  pattern?, maxLen?, min?, max?, values?}
//     subject: 'doc' | null,                 // the arg naming what it works on (its lease)
//     timeLimitMs: 300000,                   // ≤ 330,000: Apps Script stops a run at 6 min
//     artifacts: ['reports/{command}-{subject}-{ts}.pdf'],   // what it makes (names)
//     description: '…',
//     allowedSubmitters: null | ['pc-a'],    // null: every roster PC
//     run: function (args, ctx) { … return data; }           // plain: one run
//     // or chunked: resumes over several worker runs
//     chunked: true,
//     inputs: function (args, ctx) { return [{id, mtime}…]; },  // fingerprinted by id + mtime
//     process: function (input, args, ctx) { return result; }, // one input; throw = a failure
//     combine: function (resultsById, args) { return data; }   // optional
//     // optional for both:
//     existing: function (args, ctx) { return [names…]; },      // what it would make exists:
//                                            // answered with those names, not run (unless force)
//     verify: function (data, args, ctx) { return {ok, output}; } // read-only check after the run
//   }
// ctx: job (the Job), now(), log(text) (→ result.output), readBack(text) (what a write read
// back), artifact(name), heartbeat() (false: cancelled or timed out, stop).
//
// Example (commented out):
// 'count-rows': {
//   args: [{ name: 'sheet', type: 'string', required: true, pattern: '[A-Za-z0-9 _-]{1,60}' }],
//   subject: 'sheet', timeLimitMs: 120000, artifacts: [], description: 'rows of one tab',
//   run: function (args, ctx) {
//     const sh = SpreadsheetApp.getActiveSpreadsheet().getSheetByName(args.sheet);
//     if (!sh) throw new Error('no tab ' + args.sheet);
//     return { rows: sh.getLastRow() };
//   }
// }
const JOBS_WHITELIST = {
};
