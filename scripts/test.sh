#!/usr/bin/env bash
# The whole pcmail test suite: Rust workspace (unit, property, protocol
# vectors, HTTP, end-to-end against both servers), the Apps Script code under
# Node, the tray UI in headless Chromium, and the tray app under Xvfb.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"

echo "== Apps Script server (gas/, node --test)"
(cd gas && npm test)

echo "== Rust workspace"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast
else
  cargo test --workspace --no-fail-fast
fi

echo "== tray UI in headless Chromium (ui/)"
(cd ui && npm ci --no-audit --no-fund && npm test)

if [ -x src-tauri/tests/smoke.sh ]; then
  echo "== tray app under Xvfb (src-tauri/)"
  bash src-tauri/tests/smoke.sh
fi
echo "pcmail: all test suites passed"
