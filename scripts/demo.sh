#!/usr/bin/env bash
# pcmail's main job on its embedded default: two simulated PCs exchange mail
# through the in-process server (no Google account, no network, no token);
# then two named sessions go through names, leases, handoffs, a rollup, memory,
# `pcmail watch` and a job. `pcmail demo` does all of it; this script only
# makes sure there is a pcmail to run.
set -euo pipefail
cd "$(dirname "$0")/.."
# PCMAIL_BIN: a pcmail already built (the docs test runs this script with the
# binaries of its own build); else this builds it, installing what it needs.
if [ -n "${PCMAIL_BIN:-}" ]; then
  exec "$PCMAIL_BIN" demo "$@"
fi
if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then . "$HOME/.cargo/env"; fi
if ! command -v cargo >/dev/null 2>&1 || ! command -v cc >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  command -v cc >/dev/null 2>&1 || { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq build-essential pkg-config curl ca-certificates >/dev/null; }
  if ! command -v cargo >/dev/null 2>&1; then
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
    . "$HOME/.cargo/env"
  fi
fi
exec cargo run --quiet -p pcmail-cli -- demo "$@"
