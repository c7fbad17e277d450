#!/usr/bin/env bash
# Figures in the docs are written by the benchmark that measured them, never
# by hand:
#
#   bash scripts/bench-record.sh FILE NAME -- COMMAND [ARGS…]
#       runs COMMAND (its output also on this terminal) and replaces the block
#       `<!-- bench:NAME begin -->` … `<!-- bench:NAME end sha256=… -->` in
#       FILE with what it printed, headed by the date, the commit, the cores,
#       the load average, the PCMAIL_BENCH_* settings and the command. The
#       block is written even when COMMAND fails (a missed gate is a figure
#       too); the exit code is COMMAND's.
#   bash scripts/bench-record.sh --check FILE…
#       fails when a recorded block was edited by hand (its text no longer
#       matches the hash on its end line) or has no end line.
#
# The hash covers the lines between the begin and the end line, so a figure
# typed into a recorded block fails the suite's gates section.
set -euo pipefail

block_check() {
  python3 - "$@" <<'PY'
import hashlib, re, sys
bad = 0
for path in sys.argv[1:]:
    try:
        lines = open(path, encoding="utf-8").read().split("\n")
    except OSError as e:
        print(f"{path}: cannot be read ({e.strerror})")
        bad += 1
        continue
    i = 0
    while i < len(lines):
        m = re.fullmatch(r"<!-- bench:([\w-]+) begin -->", lines[i])
        if not m:
            i += 1
            continue
        name, start = m.group(1), i
        end = next((j for j in range(i + 1, len(lines)) if re.fullmatch(rf"<!-- bench:{re.escape(name)} end sha256=[0-9a-f]{{64}} -->", lines[j])), None)
        if end is None:
            print(f"{path}:{start + 1}: bench:{name} has no end line")
            bad += 1
            break
        body = "\n".join(lines[start + 1:end]) + "\n"
        want = lines[end].split("sha256=")[1].split()[0]
        if hashlib.sha256(body.encode()).hexdigest() != want:
            print(f"{path}:{start + 1}: bench:{name} was edited by hand (record it again: bash scripts/bench-record.sh {path} {name} -- …)")
            bad += 1
        i = end + 1
print(f"bench-record: {len(sys.argv) - 1} file(s) checked, {bad} bad block(s)")
sys.exit(1 if bad else 0)
PY
}

if [[ "${1:-}" == --check ]]; then
  shift
  block_check "$@"
  exit $?
fi

if [[ $# -lt 4 || "$3" != -- ]]; then
  echo "usage: bench-record.sh FILE NAME -- COMMAND [ARGS…] | bench-record.sh --check FILE…" >&2
  exit 2
fi
file="$1" name="$2"
shift 3
[[ -f "$file" ]] || { echo "bench-record: no file $file" >&2; exit 2; }
[[ "$name" =~ ^[A-Za-z0-9_-]+$ ]] || { echo "bench-record: NAME is letters, digits, - and _" >&2; exit 2; }
grep -qx "<!-- bench:$name begin -->" "$file" || { echo "bench-record: $file has no line <!-- bench:$name begin -->" >&2; exit 2; }

out="$(mktemp)"
trap 'rm -f "$out"' EXIT
set +e
"$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
set -e

# The commit measured; "+changes" when code (anything but the pages) differs from it.
top="$(git -C "$(dirname "$file")" rev-parse --show-toplevel 2>/dev/null || true)"
commit="$( [[ -n "$top" ]] && git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n "$top" && -n "$(git -C "$top" status --porcelain --untracked-files=no -- . ':!*.md' 2>/dev/null)" ]]; then
  commit="$commit+changes"
fi
settings="$(env | grep -E '^PCMAIL_BENCH_' | sort | tr '\n' ' ' || true)"
python3 - "$file" "$name" "$out" "$rc" "$commit" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "${settings% }" "$*" <<'PY'
import hashlib, os, re, sys, time
path, name, out, rc, commit, cores, load, settings, command = sys.argv[1:]
text = open(out, encoding="utf-8", errors="replace").read().rstrip("\n")
# Only the figures: no terminal escapes or other control characters, no trailing blanks.
text = "\n".join(re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", "", re.sub(r"\x1b\[[0-9;]*m", "", l)).rstrip() for l in text.split("\n"))
head = (f"Recorded by `scripts/bench-record.sh` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"commit `{commit}`, {cores} cores, load average {load}"
        + (f", {settings}" if settings else "")
        + f"; command `{command}`" + ("" if rc == "0" else f"; it exited {rc}") + ":")
body = f"{head}\n\n```text\n{text}\n```\n"
digest = hashlib.sha256(body.encode()).hexdigest()
src = open(path, encoding="utf-8").read()
pat = re.compile(rf"<!-- bench:{re.escape(name)} begin -->\n.*?<!-- bench:{re.escape(name)} end[^\n]*-->", re.S)
new = f"<!-- bench:{name} begin -->\n{body}<!-- bench:{name} end sha256={digest} -->"
if pat.search(src):
    src = pat.sub(lambda _: new, src, count=1)
else:
    src = src.replace(f"<!-- bench:{name} begin -->", new, 1)
tmp = path + ".bench-record.tmp"
with open(tmp, "w", encoding="utf-8") as f:
    f.write(src)
    f.flush()
    os.fsync(f.fileno())
os.replace(tmp, path)
print(f"bench-record: {path} bench:{name} written")
PY
exit "$rc"
