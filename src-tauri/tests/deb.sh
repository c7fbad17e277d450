#!/usr/bin/env bash
# The tray app installed like a desktop app: the .deb that Tauri's CLI
# makes (`npx tauri build --bundles deb` in src-tauri/, or `npx tauri bundle
# --debug --bundles deb` of the debug build, as scripts/test.sh does) is installed with
# `dpkg -i`, the installed /usr/bin/pcmail-tray starts under Xvfb + D-Bus as
# a new user (a throwaway system user whose home is in the work dir) and comes
# up (its PCMAIL_TRAY_TEST_STATE file), writes its start-at-login entry in
# that home for the installed path, and `dpkg -r` removes every file it
# installed and, through the package's postrm, that autostart entry.
#
#   src-tauri/tests/deb.sh      (root: it installs a package; DEB=file.deb to use a given one)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
DEB="${DEB:-$(ls -t "$TARGET"/{release,debug}/bundle/deb/*.deb 2>/dev/null | head -1 || true)}"
[[ -n "$DEB" && -f "$DEB" ]] || { echo "deb: no .deb (build it: cd src-tauri && npm ci && npx tauri build --bundles deb)"; exit 2; }
[[ "$(id -u)" == 0 ]] || { echo "deb: must run as root (dpkg -i)"; exit 2; }
for t in xvfb-run dbus-run-session dpkg dpkg-deb useradd userdel setpriv; do command -v "$t" >/dev/null || { echo "deb: $t is missing"; exit 2; }; done

PKG="$(dpkg-deb -f "$DEB" Package)"
WORK="$(mktemp -d /tmp/pcmail-deb.XXXXXX)"
APP_PID=""
USER_MADE=""
TEST_USER="pcmail-deb-$$"
cleanup() {
  if [[ -n "$APP_PID" ]]; then kill -- "-$APP_PID" 2>/dev/null || true; sleep 0.3; kill -9 -- "-$APP_PID" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  dpkg-query -W "$PKG" >/dev/null 2>&1 && dpkg --purge "$PKG" >/dev/null 2>&1 || true
  [[ -n "$USER_MADE" ]] && userdel "$TEST_USER" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "deb: FAIL: $*"; echo "--- app log"; tail -30 "$WORK/app.log" 2>/dev/null || true; exit 1; }

installed() { dpkg-query -W -f='${Status}' "$PKG" 2>/dev/null | grep -q 'install ok installed'; }
installed && fail "$PKG is already installed here: not touching it"
echo "deb: $(basename "$DEB") ($(du -h "$DEB" | cut -f1)), package $PKG, depends: $(dpkg-deb -f "$DEB" Depends)"
dpkg -i "$DEB" >"$WORK/dpkg-i.log" 2>&1 || { cat "$WORK/dpkg-i.log"; fail "dpkg -i failed"; }
dpkg -L "$PKG" | sort >"$WORK/files"
BIN=/usr/bin/pcmail-tray
[[ -x "$BIN" ]] || fail "$BIN was not installed"
grep -qx "$BIN" "$WORK/files" || fail "$BIN is not the package's"
DESKTOP_APP="$(grep -E '^/usr/share/applications/.*\.desktop$' "$WORK/files" | head -1)"
[[ -n "$DESKTOP_APP" ]] || fail "no menu entry (/usr/share/applications/*.desktop) in the package"
grep -q "^Exec=pcmail-tray" "$DESKTOP_APP" || fail "the menu entry does not start pcmail-tray: $(grep ^Exec "$DESKTOP_APP")"
grep -qE '^/usr/share/icons/hicolor/.*/apps/.*\.png$' "$WORK/files" || fail "no icon in the package"
echo "deb: installed $BIN, $DESKTOP_APP and $(grep -c '/usr/share/icons/' "$WORK/files") icons"

# the installed app comes up for a new user (embedded server, no config yet):
# a throwaway system user whose home is in the work dir, so the app's
# start-at-login entry lands in a real home that the postrm can find
HOME_DIR="$WORK/home"
useradd --system --no-create-home --home-dir "$HOME_DIR" --shell /usr/sbin/nologin "$TEST_USER" || fail "useradd $TEST_USER"
USER_MADE=1
chmod 755 "$WORK"
# its own runtime dir, as a login session has (the tray icon's image goes there, not to a shared /tmp dir)
mkdir -p "$HOME_DIR/.run" && chmod 700 "$HOME_DIR/.run" && chown -R "$TEST_USER:" "$HOME_DIR"
STATE="$HOME_DIR/state.json"
(cd "$HOME_DIR" && exec setpriv --reuid "$TEST_USER" --regid "$TEST_USER" --init-groups \
  env -i PATH=/usr/bin:/bin HOME="$HOME_DIR" USER="$TEST_USER" XDG_RUNTIME_DIR="$HOME_DIR/.run" PCMAIL_HOME="$HOME_DIR/.pcmail" \
    PCMAIL_TRAY_TEST_STATE="$STATE" WEBKIT_DISABLE_COMPOSITING_MODE=1 NO_AT_BRIDGE=1 \
  setsid xvfb-run -a dbus-run-session -- "$BIN") >"$WORK/app.log" 2>&1 &
APP_PID=$!
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], ""))' "$STATE" "$1" 2>/dev/null || true; }
for _ in $(seq 1 300); do
  [[ -f "$STATE" && -n "$(field badge)" ]] && break
  kill -0 "$APP_PID" 2>/dev/null || fail "the installed app exited"
  sleep 0.1
done
[[ -n "$(field badge)" ]] || fail "the installed app wrote no tray state in 30 s"
echo "deb: the installed app is up: badge $(field badge), tooltip '$(field tooltip)'"
AUTOSTART="$HOME_DIR/.config/autostart/pcmail-tray.desktop"
for _ in $(seq 1 50); do [[ -f "$AUTOSTART" ]] && break; sleep 0.1; done
grep -q "\"$BIN\"" "$AUTOSTART" 2>/dev/null || fail "no start-at-login entry for $BIN in the user's home"
echo "deb: first run turned start at login on: $(grep ^Exec "$AUTOSTART")"
kill -- "-$APP_PID" 2>/dev/null || true
wait "$APP_PID" 2>/dev/null || true
APP_PID=""

# removed cleanly: the package is gone and so is every file it installed
dpkg -r "$PKG" >"$WORK/dpkg-r.log" 2>&1 || { cat "$WORK/dpkg-r.log"; fail "dpkg -r failed"; }
installed && fail "$PKG still installed"
left=0
while read -r f; do
  [[ -f "$f" || -L "$f" ]] && { echo "deb: left behind: $f"; left=$((left + 1)); }
done <"$WORK/files"
[[ "$left" == 0 ]] || fail "$left files left after dpkg -r"
[[ -e "$AUTOSTART" ]] && fail "the start-at-login entry $AUTOSTART is left after dpkg -r"
echo "deb: dpkg -r removed $PKG, its $(grep -c . "$WORK/files") paths and the user's start-at-login entry"
# purge: dpkg forgets the package (dpkg -r keeps its record while it has a postrm)
dpkg --purge "$PKG" >"$WORK/dpkg-purge.log" 2>&1 || { cat "$WORK/dpkg-purge.log"; fail "dpkg --purge failed"; }
dpkg-query -W "$PKG" >/dev/null 2>&1 && fail "dpkg still knows $PKG after --purge"
echo "deb: 1 passed, 0 failed"
