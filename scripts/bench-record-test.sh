#!/usr/bin/env bash
# Tests scripts/bench-record.sh: a recorded block passes --check, a figure
# typed into it fails, recording again replaces it (once), a failing command
# is recorded with its exit code and passes that code on.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
rec="$here/bench-record.sh"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
doc="$dir/page.md"
fail() { echo "bench-record-test: FAIL: $*"; exit 1; }
printf '# Page\n\nBefore.\n\n<!-- bench:demo begin -->\n<!-- bench:demo end sha256=%064d -->\n\nAfter.\n' 0 > "$doc"

bash "$rec" --check "$doc" >/dev/null 2>&1 && fail "an unrecorded placeholder passed --check"
PCMAIL_BENCH_SECS=3 bash "$rec" "$doc" demo -- printf 'poll: 1234 req/s\ngate: ratio 1.50x (limit 2x): ok\n' >/dev/null
grep -q '^poll: 1234 req/s$' "$doc" || fail "the output is not in the page"
grep -q 'PCMAIL_BENCH_SECS=3' "$doc" || fail "the bench settings are not in the header"
grep -q '^Before\.$' "$doc" && grep -q '^After\.$' "$doc" || fail "text around the block changed"
bash "$rec" --check "$doc" >/dev/null || fail "a recorded block failed --check"

sed -i 's/1234 req/9999 req/' "$doc"
bash "$rec" --check "$doc" >/dev/null 2>&1 && fail "a figure edited by hand passed --check"

bash "$rec" "$doc" demo -- printf 'poll: 777 req/s\n' >/dev/null
[[ "$(grep -c 'bench:demo begin' "$doc")" == 1 ]] || fail "recording again made a second block"
grep -q '9999' "$doc" && fail "recording again kept the old figure"
bash "$rec" --check "$doc" >/dev/null || fail "a block recorded again failed --check"

set +e
bash "$rec" "$doc" demo -- bash -c 'echo "gate: x: FAIL"; exit 3' >/dev/null
rc=$?
set -e
[[ $rc == 3 ]] || fail "the command's exit code 3 came back as $rc"
grep -q 'it exited 3' "$doc" || fail "the header does not say the command failed"
bash "$rec" --check "$doc" >/dev/null || fail "a recorded failure failed --check"

bash "$rec" "$doc" missing -- true >/dev/null 2>&1 && fail "a block the page does not have was accepted"
out="$(bash "$rec" --check "$dir/nope.md" 2>&1)" && fail "a missing page passed --check"
grep -q "nope.md: cannot be read" <<<"$out" || fail "a missing page is not named: $out"

bash "$rec" "$doc" demo -- printf 'ok\033[31m red\033[0m\007 bell\n' >/dev/null
grep -q '^ok red bell$' "$doc" || fail "control characters reached the page"
echo "bench-record-test: 10 passed"
