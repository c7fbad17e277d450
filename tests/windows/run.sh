#!/usr/bin/env bash
# The Windows suite under Wine: cross-builds pcmail.exe (and pcmail-hook.exe
# when the hook binary's crate exists) for x86_64-pc-windows-gnu, builds the
# test-only ProcessPrng shim, prepares a headless Wine prefix and runs
# tests/windows/suite.py against a Linux `pcmail serve` on loopback (and, in
# it, pcmail-local's and pcmail-client's Windows unit tests under Wine). Also
# `cargo check --target x86_64-pc-windows-gnu` of the tray app.
#
#   bash tests/windows/run.sh
# Env: WIN_PROFILE=debug|release (default debug: faster end to end, see
# docs/windows.md), PCMAIL_WINEPREFIX (default ~/.cache/pcmail-wine).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
TARGET=x86_64-pc-windows-gnu
PROFILE="${WIN_PROFILE:-debug}"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
export WINEPREFIX="${PCMAIL_WINEPREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/pcmail-wine}"
export WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml=" LC_ALL=C.UTF-8
unset DISPLAY

for t in x86_64-w64-mingw32-gcc wine python3; do
  command -v "$t" >/dev/null || { echo "windows: $t is missing (bash scripts/install-deps.sh)"; exit 2; }
done
rustup target list --installed 2>/dev/null | grep -qx "$TARGET" || rustup target add "$TARGET"

# The separate hook binary, when its crate is in the tree.
bins=(--bin pcmail)
if [[ -d hook-cli || -d crates/hook-cli ]]; then bins+=(--bin pcmail-hook); fi
flag=(); [[ "$PROFILE" == release ]] && flag=(--release)
t0=$(date +%s)
nice cargo build -q "${flag[@]}" --target "$TARGET" "${bins[@]}"
# The lib tests for Windows whose `win_tests` the suite runs under Wine:
# pcmail-local's (process identity) and pcmail-client's (the job executor's
# Job Object); each exe's path from cargo's JSON.
# Both in one cargo invocation: one feature resolution, so what the two
# share is built once.
# (The file is named here, not in the redirection: a redirection's words are
# expanded in the child that runs the command, so an assignment there is lost.)
units_json=$(mktemp)
nice cargo test -q --no-run "${flag[@]}" --target "$TARGET" -p pcmail-local -p pcmail-client --lib --message-format=json \
  > "$units_json"
unit_exe() {
  python3 -c 'import json,sys; print([m["executable"] for m in map(json.loads, open(sys.argv[1])) if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[2]][-1])' \
    "$units_json" "$1"
}
UNIT_EXE=$(unit_exe pcmail_local)
CLIENT_UNIT_EXE=$(unit_exe pcmail_client)
rm -f "$units_json"
# The Linux PC and `pcmail serve`: PCMAIL_BIN (the suite passes the debug
# build its Rust section made), else built here.
LINUX_PCMAIL="${PCMAIL_BIN:-$TARGET_DIR/debug/pcmail}"
[[ -n "${PCMAIL_BIN:-}" ]] || nice cargo build -q -p pcmail-cli
# The tray app type-checks for Windows (its window needs WebView2, which Wine
# lacks, so it is not run). WIN_SKIP_TRAY=1 skips it.
if [[ "${WIN_SKIP_TRAY:-}" != 1 ]]; then
  nice cargo check -q --target "$TARGET" -p pcmail-tray-app
  echo "# windows: the tray app (src-tauri) checks for $TARGET"
fi
t1=$(date +%s)

if [[ ! -f "$WINEPREFIX/system.reg" ]]; then
  mkdir -p "$WINEPREFIX"
  wineboot -i >/dev/null 2>&1
fi
# Every run starts from a clean user folder; the exe and the shim go beside each other there.
USER_DIR="$WINEPREFIX/drive_c/users/山田 太郎"
rm -rf "$USER_DIR"
EXE_DIR="$USER_DIR/bin dir"
mkdir -p "$EXE_DIR"
x86_64-w64-mingw32-gcc -O2 -shared -o "$EXE_DIR/bcryptprimitives.dll" tests/windows/shim/bcryptprimitives.c -ladvapi32
OUT="$TARGET_DIR/$TARGET/$PROFILE"
cp "$OUT/pcmail.exe" "$EXE_DIR/"
[[ -f "$OUT/pcmail-hook.exe" && " ${bins[*]} " == *pcmail-hook* ]] && cp "$OUT/pcmail-hook.exe" "$EXE_DIR/"
cp "$UNIT_EXE" "$EXE_DIR/pcmail-local-tests.exe"
cp "$CLIENT_UNIT_EXE" "$EXE_DIR/pcmail-client-tests.exe"
# The test-only helper (tests/windows/helper/helper.c), also as claude.exe and
# bash.exe: Claude Code and its shell above a `pcmail.exe lease claim`.
x86_64-w64-mingw32-gcc -municode -O2 -o "$EXE_DIR/helper.exe" tests/windows/helper/helper.c
cp "$EXE_DIR/helper.exe" "$EXE_DIR/claude.exe"
cp "$EXE_DIR/helper.exe" "$EXE_DIR/bash.exe"
rm -f "$WINEPREFIX/drive_c/windows/system32/tasks/pcmail"

stop_wine() { wineserver -k >/dev/null 2>&1 || true; }
trap stop_wine EXIT
set +e
python3 tests/windows/suite.py --exe-dir "$EXE_DIR" --linux-pcmail "$LINUX_PCMAIL" --prefix "$WINEPREFIX" \
  --unit-tests "$EXE_DIR/pcmail-local-tests.exe" --unit-tests "$EXE_DIR/pcmail-client-tests.exe"
rc=$?
t2=$(date +%s)
echo "# windows: build and tray check $((t1 - t0)) s, suite $((t2 - t1)) s ($PROFILE)"
exit $rc
