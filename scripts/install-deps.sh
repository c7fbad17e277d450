#!/usr/bin/env bash
# Installs what pcmail's build and tests need on Debian/Ubuntu: Rust (if
# missing), the Tauri system libraries, Xvfb + D-Bus for the tray smoke test,
# trayer + xdotool + imagemagick for the tray menu screenshot, GNOME's
# notification-daemon for the notification screenshot with its buttons, Chromium for the UI tests, Node for the Apps Script tests,
# tmux for the interactive Claude Code that runs the plugin's monitor, PostgreSQL (the tests start throwaway
# clusters of their own), haproxy for the balancer and cluster tests (PROXY protocol, forwarded headers,
# two `pcmail serve` on one PostgreSQL), iproute2's `ss` for the listener's queue length, and for the
# Windows suite under Wine: mingw-w64, Wine 8 and Rust's windows-gnu target. Idempotent.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

pkgs=(build-essential pkg-config libssl-dev curl ca-certificates
      libwebkit2gtk-4.1-dev libayatana-appindicator3-dev librsvg2-dev libxdo-dev
      xvfb xauth dbus dbus-x11 chromium dunst libglib2.0-bin python3 gnome-keyring faketime
      trayer xdotool x11-utils imagemagick notification-daemon
      gcc-mingw-w64-x86-64 wine64 wine
      tmux postgresql haproxy iproute2)
command -v node >/dev/null 2>&1 || pkgs+=(nodejs npm)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "install-deps: installing Rust with rustup"
  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
  # shellcheck disable=SC1091
  . "$HOME/.cargo/env"
fi

# The Windows suite cross-builds with mingw-w64 (tests/windows/run.sh).
if ! rustup target list --installed 2>/dev/null | grep -qx x86_64-pc-windows-gnu; then
  echo "install-deps: rustup target add x86_64-pc-windows-gnu"
  rustup target add x86_64-pc-windows-gnu
fi
