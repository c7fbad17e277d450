#!/usr/bin/env bash
# Installs `pcmail-hook` with cargo install, linked statically where the
# platform allows: on Linux with glibc (any *-linux-gnu host) it is built with
# `-C target-feature=+crt-static`, so each start skips the dynamic loader (the
# hook starts on every prompt and every guarded edit: docs/benchmarks.md,
# "Receiving PC"). The flag is given for the host triple with --target, so it
# reaches the hook's crates only: in RUSTFLAGS it would also reach build
# scripts and proc-macros, which cannot be static. Elsewhere (macOS, Windows,
# musl is static already) it is the plain cargo install.
#
#   bash scripts/install-hook.sh [cargo install options, e.g. --root DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
host=$(rustc -vV | sed -n 's/^host: //p')
static=()
case "$host" in
  *-linux-gnu*) static=(--target "$host" --config "target.$host.rustflags=[\"-C\", \"target-feature=+crt-static\"]") ;;
esac
cargo install --locked --path hook-cli "${static[@]}" "$@"
