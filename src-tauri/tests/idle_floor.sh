#!/usr/bin/env bash
# The floor for the tray app's idle memory (docs/tray.md "Idle memory"): the
# bare Tauri 2 tray app `examples/tray-floor` (release, built with the app's
# settings), started RUNS times (5) under Xvfb + D-Bus as the smoke test
# starts the app, measured 5 s after it is up over IDLE_SECONDS (10) with
# measure_idle.py; prints each run, the medians, and where the memory goes
# (smaps_by_lib.py) for the last run.
#
#   nice cargo build --release -p pcmail-tray-app --example tray-floor
#   src-tauri/tests/idle_floor.sh          (FLOOR_BIN=path to use another binary)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BIN="${FLOOR_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/tray-floor}"
RUNS="${RUNS:-5}"
[[ -x "$BIN" ]] || { echo "idle_floor: no $BIN (build it: see the header)"; exit 2; }
NAME="$(basename "$BIN")"
rss=(); pss=()
for i in $(seq 1 "$RUNS"); do
  WORK="$(mktemp -d /tmp/pcmail-floor.XXXXXX)"
  PCMAIL_TRAY_TEST_STATE="$WORK/state.json" WEBKIT_DISABLE_COMPOSITING_MODE=1 NO_AT_BRIDGE=1 \
    setsid xvfb-run -a dbus-run-session -- "$BIN" >"$WORK/log" 2>&1 &
  APP=$!
  for _ in $(seq 1 300); do [[ -s "$WORK/state.json" ]] && break; sleep 0.1; done
  [[ -s "$WORK/state.json" ]] || { cat "$WORK/log"; kill -- "-$APP" 2>/dev/null; echo "idle_floor: $NAME did not come up"; exit 1; }
  sleep 5
  line="$(python3 "$ROOT/src-tauri/tests/measure_idle.py" "$APP" "${IDLE_SECONDS:-10}" "$NAME" | tail -1 || true)"
  echo "run $i: $line"
  rss+=("$(sed -E 's/.*rss ([0-9.]+) MB.*/\1/' <<<"$line")")
  pss+=("$(sed -E 's/.*pss ([0-9.]+) MB.*/\1/' <<<"$line")")
  if [[ "$i" == "$RUNS" ]]; then
    PID="$(pgrep -s "$APP" -x "${NAME:0:15}" | head -1)"
    python3 "$ROOT/src-tauri/tests/smaps_by_lib.py" "$PID" 14
  fi
  kill -- "-$APP" 2>/dev/null || true; sleep 0.5; kill -9 -- "-$APP" 2>/dev/null || true
  wait "$APP" 2>/dev/null || true
  rm -rf "$WORK"
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "idle_floor: $NAME over $RUNS runs: median rss $(median "${rss[@]}") MB, median pss $(median "${pss[@]}") MB (runs: rss ${rss[*]}; pss ${pss[*]})"
