#!/usr/bin/env bash
# The release step of the Claude Code plugin: builds pcmail and pcmail-hook and puts them in
# plugins/pcmail/bin/native/, where the plugin's launchers look first; with --archive it also
# packs the marketplace (its .claude-plugin/marketplace.json and plugins/pcmail, binaries
# included) into dist/pcmail-plugin-<version>-<os>-<arch>.tar.gz, which a user without Rust
# unpacks and adds as a local marketplace (docs/agents.md, "The Claude Code plugin").
# --debug uses the debug build (for a quick try; a release ships --release binaries, on Linux
# with the hook linked statically).
set -euo pipefail
cd "$(dirname "$0")/.."
profile=release archive=0
for a in "$@"; do
  case "$a" in
    --debug) profile=debug ;;
    --archive) archive=1 ;;
    *) echo "usage: scripts/plugin-bin.sh [--debug] [--archive]" >&2; exit 2 ;;
  esac
done
flags=(--release); [ "$profile" = debug ] && flags=()
cargo build "${flags[@]}" -p pcmail-cli -p pcmail-hook
if [ "$profile" = release ] && [ "$(uname -s)" = Linux ]; then
  # The hook runs on every prompt: linked statically it skips the dynamic
  # loader at each start (docs/benchmarks.md, "Receiving PC"). `cargo rustc`
  # gives the flag to the hook's own crate only; in RUSTFLAGS it would also
  # reach build scripts and proc-macros, which cannot be static.
  cargo rustc --release -p pcmail-hook --bin pcmail-hook -- -C target-feature=+crt-static
fi
out="${CARGO_TARGET_DIR:-target}/$profile"
dest=plugins/pcmail/bin/native
mkdir -p "$dest"
install -m 0755 "$out/pcmail" "$out/pcmail-hook" "$dest/"
linked=dynamic
if command -v readelf >/dev/null && ! readelf -l "$dest/pcmail-hook" 2>/dev/null | grep -q INTERP; then linked=static; fi
echo "plugin-bin: $dest holds $("$dest/pcmail" --version) and $("$dest/pcmail-hook" --version) (linked $linked)"
if [ "$archive" = 1 ]; then
  version=$(python3 -c 'import json; print(json.load(open("plugins/pcmail/.claude-plugin/plugin.json"))["version"])')
  name="pcmail-plugin-$version-$(uname -s | tr 'A-Z' 'a-z')-$(uname -m)"
  mkdir -p dist
  tar czf "dist/$name.tar.gz" --transform "s,^,$name/," .claude-plugin/marketplace.json plugins/pcmail
  echo "plugin-bin: dist/$name.tar.gz"
fi
