#!/usr/bin/env bash
# The ratio gates (docs/benchmarks.md "Ratio gates"): short runs of the
# benchmarks on release builds, each gate a ratio of two figures taken in the
# same run. Runs every bench even when one misses a gate, prints a `gate:`
# line per ratio and exits 1 at the end when any missed.
#
#   bash scripts/bench-gates.sh RELEASE_DIR
# RELEASE_DIR holds release builds of pcmail, pcmail-hook, pcmail-bench,
# pcmail-bench-pc and pcmail-bench-floor and examples/mcp_bench (cargo build
# --release -p pcmail-cli -p pcmail-hook -p pcmail-bench -p pcmail-bench-pc -p
# pcmail-mcp --bins --example mcp_bench; on Linux the hook and the floor
# relinked statically, as scripts/test.sh does).
set -uo pipefail
REL="${1:?usage: bench-gates.sh RELEASE_DIR}"
for b in pcmail pcmail-hook pcmail-bench pcmail-bench-pc pcmail-bench-floor examples/mcp_bench; do
  [[ -x "$REL/$b" ]] || { echo "bench-gates: $REL/$b is missing (a release build)"; exit 2; }
done
export PCMAIL_BENCH_GATE=1
failed=()
run() {
  local name="$1"; shift
  echo "== $name"
  "$@" 2>&1 || failed+=("$name")
}
run "server: poll against hello" env PCMAIL_BENCH_SHORT=1 PCMAIL_BENCH_SECS=3 "$REL/pcmail-bench" server
run "seen against delivered" env PCMAIL_BIN="$REL/pcmail" PCMAIL_BENCH_ROUNDS=20 "$REL/pcmail-bench" seen
run "hook at 10k against 100 unread" "$REL/pcmail-bench-pc" hook 30
run "lease claim and guard" "$REL/pcmail-bench-pc" lease 30
run "MCP send against hello" "$REL/examples/mcp_bench" 5 100
if ((${#failed[@]})); then
  echo "bench-gates: missed: ${failed[*]}"
  exit 1
fi
echo "bench-gates: every gate held"
