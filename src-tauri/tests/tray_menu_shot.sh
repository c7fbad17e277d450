#!/usr/bin/env bash
# A screenshot of the real tray menu. Xvfb has no tray, so this starts
# trayer (an XEmbed system tray from Debian's apt) in the Xvfb session: with
# no StatusNotifier host on the bus, libayatana-appindicator falls back to an
# XEmbed icon, which trayer shows. Another PC (`kim-laptop`, its own
# PCMAIL_HOME on the same embedded server file) sends two decision requests;
# once the app's test state lists them in the menu, xdotool clicks the icon,
# hovers over the first request (its Open / Ack submenu) and imagemagick's
# `import` saves the top right of the screen.
#
#   src-tauri/tests/tray_menu_shot.sh OUT.png   (TRAY_BIN, PCMAIL_BIN: binaries to use;
#                                                LANG=ja_JP.UTF-8 for the Japanese labels)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="$(realpath -m "${1:?usage: tray_menu_shot.sh OUT.png}")"
PCMAIL_BIN="${PCMAIL_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/pcmail}"
TRAY_BIN="${TRAY_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/pcmail-tray}"
for t in xvfb-run dbus-run-session trayer xdotool xwininfo import; do
  command -v "$t" >/dev/null || { echo "tray_menu_shot: $t is missing (scripts/install-deps.sh installs it)"; exit 2; }
done
WORK="$(mktemp -d /tmp/pcmail-menu.XXXXXX)"
APP_PID=""
cleanup() {
  if [[ -n "$APP_PID" ]]; then kill -- "-$APP_PID" 2>/dev/null || true; sleep 0.3; kill -9 -- "-$APP_PID" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/b" "$WORK/a"
PCMAIL_HOME="$WORK/b" "$PCMAIL_BIN" init --label tray-b >/dev/null
printf 'label = "kim-laptop"\nnative_notifications = false\n\n[server]\nkind = "embedded"\ndb = "%s"\n' "$WORK/b/server.db" >"$WORK/a/config.toml"
PCMAIL_HOME="$WORK/b" "$PCMAIL_BIN" sync --quiet
PCMAIL_HOME="$WORK/a" "$PCMAIL_BIN" sync --quiet
PCMAIL_HOME="$WORK/a" "$PCMAIL_BIN" send tray-b --kind decision -s "ship 0.4 with the known flaky test?" -b "1 run in 30 fails" >/dev/null
PCMAIL_HOME="$WORK/a" "$PCMAIL_BIN" send tray-b --kind decision -s "[判断依頼] drop the legacy sync API?" -b "callers: 2" >/dev/null

cat >"$WORK/session.sh" <<'INNER'
#!/usr/bin/env bash
cd "$1"
trayer --edge top --align right --widthtype request --height 32 --SetDockType true --transparent false --tint 0xdddddd >trayer.log 2>&1 &
sleep 1
"$2" >app.log 2>&1 &
for _ in $(seq 1 300); do
  python3 -c 'import json,sys; sys.exit(0 if len(json.load(open("state.json"))["menu"]) == 2 else 1)' 2>/dev/null && break
  sleep 0.2
done
sleep 1
geo=$(xwininfo -root -tree | grep '"tray-icon tray app main"' | head -1 | grep -Eo '\+[0-9]+\+[0-9]+$' || true)
[[ -n "$geo" ]] || { echo "no tray icon in trayer"; exit 1; }
x=$(cut -d+ -f2 <<<"$geo"); y=$(cut -d+ -f3 <<<"$geo")
xdotool mousemove $((x + 16)) $((y + 15)) click 1
sleep 1.5
# the first decision request's row (below the heading): its submenu opens on hover
xdotool mousemove $((x - 200)) $((y + 71))
sleep 1.5
import -window root -crop 760x260+264+0 +repage shot.png
INNER
chmod +x "$WORK/session.sh"
PCMAIL_HOME="$WORK/b" PCMAIL_TRAY_TEST_STATE="$WORK/state.json" XDG_CONFIG_HOME="$WORK/xdg" NO_AT_BRIDGE=1 \
  setsid xvfb-run -a -s "-screen 0 1024x600x24" dbus-run-session -- "$WORK/session.sh" "$WORK" "$TRAY_BIN" >"$WORK/session.log" 2>&1 &
APP_PID=$!
wait "$APP_PID" || { tail -20 "$WORK/session.log" "$WORK/app.log"; echo "tray_menu_shot: FAIL"; exit 1; }
APP_PID=""
[[ -s "$WORK/shot.png" ]] || { echo "tray_menu_shot: no screenshot"; exit 1; }
cp "$WORK/shot.png" "$OUT"
echo "tray_menu_shot: menu with $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["menu"]))' "$WORK/state.json") decision requests saved to $OUT"
