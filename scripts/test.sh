#!/usr/bin/env bash
# The whole pcmail test suite: Rust workspace (unit, property, protocol
# vectors, HTTP, end-to-end against both servers), the Apps Script code under
# Node, `pcmail mcp` under the MCP Inspector, the real Claude Code CLI against pcmail's hooks and
# plugin, the real Codex CLI and Gemini CLI (offline), the tray UI
# in headless Chromium, the tray app under Xvfb, and the Windows build of the
# CLI and the hook under Wine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
LOG="$(mktemp -d)"
trap 'rm -rf "$LOG"' EXIT
# Each section's wall time, printed in the closing lines (the suite's budget:
# docs/architecture.md "CI time").
SUITE_START=$SECONDS
SECTION_NAME=""; SECTION_START=$SECONDS
: > "$LOG/times"
section() {
  if [[ -n "$SECTION_NAME" ]]; then echo "$SECTION_NAME $(( SECONDS - SECTION_START ))" >> "$LOG/times"; fi
  SECTION_NAME="$1"; SECTION_START=$SECONDS
  echo "== $2"
}

section gates "the gates: cargo fmt --check (clippy runs in the Rust section's build)"
cargo fmt --all -- --check
# Figures in the docs are written by the benchmarks (scripts/bench-record.sh):
# a recorded block edited by hand fails here.
bash scripts/bench-record-test.sh
bash scripts/bench-record.sh --check README.md docs/*.md

section gas "Apps Script server (gas/, node --test)"
(cd gas && npm ci --no-audit --no-fund --ignore-scripts && npm test) 2>&1 | tee "$LOG/gas"

section rust "Rust workspace, built through clippy (-D warnings)"
# The whole workspace, the tray app included, built once for both the tests
# and clippy: clippy-driver compiles the workspace's own crates
# (RUSTC_WORKSPACE_WRAPPER, which is what `cargo clippy` sets for its check
# build) with every warning an error, so a lint fails this build as `cargo
# clippy --workspace --all-targets -- -D warnings` would fail. A separate
# `cargo clippy` was a check build of every dependency besides this one
# (about five minutes of a cold run). Dependencies are compiled by rustc with
# their lints capped, as under `cargo clippy`. The targets are those of
# `--all-targets` (libs, bins, tests, examples; the workspace has no benches):
# the test build and the build of the executables below. Every debug build of
# the suite runs with the same wrapper, or the workspace's crates would be
# built again.
lint=(env RUSTC_WORKSPACE_WRAPPER="$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver)" CLIPPY_ARGS=-Dwarnings)
if cargo nextest --version >/dev/null 2>&1; then
  "${lint[@]}" cargo nextest run --workspace --no-fail-fast 2>&1 | tee "$LOG/rust"
else
  "${lint[@]}" cargo test --workspace --no-fail-fast 2>&1 | tee "$LOG/rust"
fi
# The debug executables the later sections run (pcmail for Claude Code, the
# agents, the demo, MCP, smoke and Windows; the tray app for the .deb and
# smoke): a build that selects the same packages and dev-dependencies as the
# test build resolves the same features, so it only links what the tests did
# not (the tray app has no integration test, so its executable is built
# here). `-p pcmail-cli` alone would resolve fewer features and build the CLI
# and much of the stack again.
"${lint[@]}" cargo build --workspace --tests --bins -q

section claude-code "real Claude Code against a scripted fake Messages API (tests/claude-code/)"
# Claude Code from npm (pinned by package-lock.json), offline: every run points it at a fake
# API on loopback. Runs the debug pcmail the Rust section built.
(cd tests/claude-code && npm ci --no-audit --no-fund && npm test) 2>&1 | tee "$LOG/claude-code"
section agents "real Codex CLI and Gemini CLI against fakes of their model APIs (tests/agents/)"
# Codex (npm @openai/codex) and Gemini CLI (npm @google/gemini-cli), pinned by package-lock.json,
# offline: each run points the agent at a scripted fake of its model API on loopback. pcmail is
# installed with its own commands; runs the debug pcmail the Rust section built.
(cd tests/agents && npm ci --no-audit --no-fund && npm test) 2>&1 | tee "$LOG/agents"
section demo "pcmail demo --no-pause (every layer: mail, names, leases, handoffs, rollup, memory, watch, a job)"
# The binary alone walks every layer and fails on any step that does not do what it shows; ~3 s.
"${CARGO_TARGET_DIR:-target}/debug/pcmail" demo --no-pause > "$LOG/demo-out" 2>&1 || { cat "$LOG/demo-out"; exit 1; }
tail -3 "$LOG/demo-out"; echo "demo: 1 passed" | tee "$LOG/demo"

section mcp "MCP server under the MCP Inspector (tests/mcp/, uses the pcmail binary the Rust section built)"
# `npm install` (it installs the locked versions): npm 11 leaves vite's
# Windows-only optional dependency out of the lockfile, and `npm ci` then refuses it.
(cd tests/mcp && npm install --no-audit --no-fund && npm test) 2>&1 | tee "$LOG/mcp"

section ui "tray UI in headless Chromium (ui/)"
(cd ui && npm ci --no-audit --no-fund && npm test) 2>&1 | tee "$LOG/ui"

section deb "tray app installed from its .deb (src-tauri/tests/deb.sh)"
# The tray app the Rust section built (debug, with `custom-protocol` like
# every build of it) bundled by the pinned Tauri CLI (`tauri bundle --debug
# --bundles deb`: no build of its own), installed with dpkg -i, run under
# Xvfb as a throwaway user and removed. The package's files, menu entry,
# icons, start-at-login entry and removal are what the test checks, and the
# optimiser changes none of them; a release .deb is `npx tauri build
# --bundles deb` (docs/tray.md "Install"). On by default where it can run
# (root: it installs a package); PCMAIL_TEST_DEB=0 skips it.
DEBUG_DIR="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug"
if [[ "${PCMAIL_TEST_DEB:-1}" == 0 ]]; then
  echo "deb: skipped (PCMAIL_TEST_DEB=0)" | tee "$LOG/deb"
elif [[ "$(id -u)" != 0 ]]; then
  echo "deb: skipped (not root: dpkg -i needs root)" | tee "$LOG/deb"
else
  # Tauri refuses to bundle a frontendDist (ui/) holding node_modules, which the UI section installed.
  rm -rf ui/node_modules
  # the bundle this run makes, not an older one left in a kept target directory
  rm -rf "$DEBUG_DIR/bundle/deb"
  (cd src-tauri && npm ci --no-audit --no-fund && npx tauri bundle --debug --bundles deb) 2>&1 | tail -3
  DEB="$DEBUG_DIR/bundle/deb/pcmail_$(python3 -c 'import json; print(json.load(open("src-tauri/tauri.conf.json"))["version"])')_amd64.deb" \
    bash src-tauri/tests/deb.sh 2>&1 | tee "$LOG/deb"
fi

section smoke "tray app under Xvfb (src-tauri/)"
# The debug pcmail and tray app the Rust section built (the script's own
# `cargo build` of either would resolve fewer features and build much of the
# stack again).
env PCMAIL_BIN="$DEBUG_DIR/pcmail" TRAY_BIN="$DEBUG_DIR/pcmail-tray" bash src-tauri/tests/smoke.sh 2>&1 | tee "$LOG/smoke"
# The app with its stderr gone (a closed terminal) runs on.
python3 src-tauri/tests/stderr_gone.py "$DEBUG_DIR/pcmail-tray" 2>&1 | tee -a "$LOG/smoke"

section perf "ratio gates on release builds (docs/benchmarks.md \"Ratio gates\")"
# Short runs of the benchmarks on release builds; every gate compares two
# figures taken in the same run (never an absolute time) and fails the suite
# when a ratio misses its limit. One cargo invocation for every release
# binary the gates run, so their dependencies are resolved and built once.
# (An example takes its package's dev-dependencies into the resolution: the
# MCP bench built on its own resolved other features and built most of the
# stack again, 226 s of a cold run.)
nice cargo build --release -q -p pcmail-cli -p pcmail-hook -p pcmail-bench -p pcmail-bench-pc -p pcmail-mcp --bins --example mcp_bench
# The hook as it ships (scripts/install-hook.sh, scripts/plugin-bin.sh) and
# the floor program it is measured against: linked statically on Linux.
# `cargo rustc` takes one package, so the hook's and the floor's crates are
# resolved (and, after a change below them, built) once more on their own.
if [[ "$(uname -s)" == Linux ]]; then
  nice cargo rustc --release -q -p pcmail-hook --bin pcmail-hook -- -C target-feature=+crt-static
  nice cargo rustc --release -q -p pcmail-bench-pc --bin pcmail-bench-floor -- -C target-feature=+crt-static
fi
REL="${CARGO_TARGET_DIR:-target}/release"
bash scripts/bench-gates.sh "$REL" 2>&1 | tee "$LOG/perf"
echo "perf: $(grep -c '^gate: .*: ok$' "$LOG/perf") passed" | tee -a "$LOG/perf"

section windows "Windows under Wine (tests/windows/)"
PCMAIL_BIN="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/debug/pcmail" bash tests/windows/run.sh 2>&1 | tee "$LOG/windows"

# One closing line for all suites (each suite above already failed the run
# on its own if anything failed: pipefail).
node_pass() { awk '/^# pass /{n+=$3} END{print n+0}' "$1"; }
rust_pass=$(grep -Eo '[0-9]+ passed' "$LOG/rust" | tail -1 | grep -Eo '[0-9]+' || echo 0)
smoke_pass=$(grep -Eo '^smoke: [0-9]+ passed' "$LOG/smoke" | grep -Eo '[0-9]+' || echo 0)
deb_pass=$(grep -Eo '^deb: [0-9]+ passed' "$LOG/deb" | grep -Eo '[0-9]+' || echo 0)
windows_pass=$(grep -Eo '^windows: [0-9]+ passed' "$LOG/windows" | grep -Eo '[0-9]+' || echo 0)
demo_pass=$(grep -Eo '^demo: [0-9]+ passed' "$LOG/demo" | grep -Eo '[0-9]+' || echo 0)
perf_pass=$(grep -Eo '^perf: [0-9]+ passed' "$LOG/perf" | grep -Eo '[0-9]+' || echo 0)
total=$(( $(node_pass "$LOG/gas") + rust_pass + $(node_pass "$LOG/claude-code") + $(node_pass "$LOG/agents") + $(node_pass "$LOG/mcp") + $(node_pass "$LOG/ui") + smoke_pass + deb_pass + windows_pass + demo_pass + perf_pass ))
section end ""
echo "section times (s):"; awk '{printf "  %-12s %5d\n", $1, $2}' "$LOG/times"
echo "  total        $(( SECONDS - SUITE_START ))"
echo "all: $total passed, 0 failed"
