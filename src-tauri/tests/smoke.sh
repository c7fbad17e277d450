#!/usr/bin/env bash
# Smoke test of the real tray app: a real `pcmail serve`, the app for PC
# "tray-b" under Xvfb with a D-Bus session, and mail sent from another
# simulated PC ("sender-a", its own PCMAIL_HOME). Passes when the tray's title
# (read from the PCMAIL_TRAY_TEST_STATE file the app keeps) goes to the unread
# count, and says how long after the mail was stored the tray showed it.
#
#   src-tauri/tests/smoke.sh            (builds what is missing)
# Env: PCMAIL_BIN, TRAY_BIN to use given binaries; SMOKE_PORT (default: one the server picks);
# MEASURE_IDLE=1 also measures idle CPU/RSS over IDLE_SECONDS (30), tray only, with
# src-tauri/tests/measure_idle.py; KEEP=1 keeps the work dir; SCREENSHOT=file.png
# saves the real window under Xvfb; SCREENSHOT_NOTIFICATION=file.png the top
# right of the screen with the decision request's notification (dunst, "(A)":
# it has actions; NOTIFICATION_DAEMON=/usr/lib/notification-daemon/notification-daemon
# uses GNOME's, which draws the buttons, and SCREENSHOT_CROP=WxH+X+Y the part
# saved, default 640x200+640+0; SCREENSHOT_WAIT=seconds before it, 0.5); WITH_DAEMON=1 starts a `pcmail daemon` for
# tray-b first: the app must use it (no second poller) and still show the mail.
# At the end a job runs through the tray: tray-b whitelists `hello` (echo),
# sender-a runs `pcmail job run tray-b hello --wait`: ok, its output, run by the app.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PCMAIL_BIN_GIVEN="${PCMAIL_BIN:-}"
TRAY_BIN_GIVEN="${TRAY_BIN:-}"
PCMAIL_BIN="${PCMAIL_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/pcmail}"
TRAY_BIN="${TRAY_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/pcmail-tray}"
# Port 0 unless told: the server takes a free port itself and says which
# (a port found free beforehand may be taken by then).
LISTEN="127.0.0.1:${SMOKE_PORT:-0}"
export PCMAIL_TOKEN="smoke-token-$$"
# Each simulated PC's own credential (labels are bound on pcmail serve; no keyring here).
CRED_A="$(python3 -c 'import secrets; print(secrets.token_hex(32))')"
CRED_B="$(python3 -c 'import secrets; print(secrets.token_hex(32))')"

# Always build (a no-op when up to date): a stale binary in a shared target
# directory must never be what the smoke test measures.
if [[ -z "${PCMAIL_BIN_GIVEN:-}" ]]; then (cd "$ROOT" && nice cargo build -q -p pcmail-cli); fi
if [[ -z "${TRAY_BIN_GIVEN:-}" ]]; then (cd "$ROOT" && nice cargo build -q -p pcmail-tray-app); fi
for t in xvfb-run dbus-run-session; do command -v "$t" >/dev/null || { echo "smoke: $t is missing"; exit 2; }; done

WORK="$(mktemp -d /tmp/pcmail-smoke.XXXXXX)"
SERVE_PID=""; APP_PID=""; DAEMON_PID=""
cleanup() {
  # the app runs in its own session: Xvfb, dbus, the portals D-Bus started and
  # WebKit's processes all go with its process group
  if [[ -n "$APP_PID" ]]; then kill -- "-$APP_PID" 2>/dev/null || true; sleep 0.5; kill -9 -- "-$APP_PID" 2>/dev/null || true; fi
  [[ -n "$DAEMON_PID" ]] && kill "$DAEMON_PID" 2>/dev/null || true
  [[ -n "$SERVE_PID" ]] && kill "$SERVE_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  if [[ "${KEEP:-}" != 1 ]]; then rm -rf "$WORK"; else echo "smoke: kept $WORK"; fi
}
trap cleanup EXIT
fail() { echo "smoke: FAIL: $*"; echo "--- app log"; tail -40 "$WORK/app.log" || true; echo "--- serve log"; tail -20 "$WORK/serve.log" || true; exit 1; }

mkdir -p "$WORK/serve" "$WORK/b" "$WORK/a"
# the server
PCMAIL_HOME="$WORK/serve" "$PCMAIL_BIN" serve --listen "$LISTEN" --db "$WORK/serve/serve.db" >"$WORK/serve.log" 2>&1 &
SERVE_PID=$!
URL=""
for _ in $(seq 1 100); do
  URL="$(grep -o 'http://127\.0\.0\.1:[0-9]*/api' "$WORK/serve.log" | head -1 || true)"
  [[ -n "$URL" ]] && curl -s -m 1 -o /dev/null "$URL" -d '{}' && break
  sleep 0.1
done
[[ -n "$URL" ]] || fail "serve did not say where it listens"
# the two PCs
PCMAIL_HOME="$WORK/b" PCMAIL_CREDENTIAL="$CRED_B" "$PCMAIL_BIN" init --label tray-b --server "$URL" >/dev/null
PCMAIL_HOME="$WORK/a" PCMAIL_CREDENTIAL="$CRED_A" "$PCMAIL_BIN" init --label sender-a --server "$URL" >/dev/null
PCMAIL_HOME="$WORK/a" PCMAIL_CREDENTIAL="$CRED_A" "$PCMAIL_BIN" sync --quiet || fail "sender-a could not sync"
# tray-b runs jobs: one trivial whitelisted command, sender-a may submit
mkdir -p "$WORK/b/checkout"
cat >>"$WORK/b/config.toml" <<TOML

[jobs]
allowed_submitters = ["sender-a"]

[jobs.checkouts]
smoke = "$WORK/b/checkout"

[[jobs.commands]]
name = "hello"
description = "echo a greeting (the smoke test's job)"
argv = ["echo", "hello from the tray:", "{who}"]
cwd = "smoke"
read_only = true
time_limit_secs = 30

[[jobs.commands.args]]
name = "who"
type = "string"
pattern = "^[a-z0-9-]+\$"
max_len = 32
TOML

if [[ "${WITH_DAEMON:-}" == 1 ]]; then
  PCMAIL_HOME="$WORK/b" PCMAIL_CREDENTIAL="$CRED_B" "$PCMAIL_BIN" daemon >"$WORK/daemon.log" 2>&1 &
  DAEMON_PID=$!
  for _ in $(seq 1 100); do [[ -s "$WORK/b/daemon.lock" ]] && break; sleep 0.1; done
  echo "smoke: pcmail daemon for tray-b running (pid $DAEMON_PID)"
fi

# the app for tray-b
STATE="$WORK/tray-state.json"
# XDG_CONFIG_HOME: the first run's autostart entry goes to the work dir, not ~/.config
export XDG_CONFIG_HOME="$WORK/xdg"
PCMAIL_HOME="$WORK/b" PCMAIL_CREDENTIAL="$CRED_B" PCMAIL_TRAY_TEST_STATE="$STATE" WEBKIT_DISABLE_COMPOSITING_MODE=1 NO_AT_BRIDGE=1 \
  setsid xvfb-run -a dbus-run-session -- sh -c 'echo "$DISPLAY" >"$0.display"; echo "$DBUS_SESSION_BUS_ADDRESS" >"$0.bus"; echo "$XAUTHORITY" >"$0.xauth"
      if command -v "$2" >/dev/null; then "$2" >"$0.notifyd.log" 2>&1 & fi
      exec "$1"' \
    "$WORK/session" "$TRAY_BIN" "${NOTIFICATION_DAEMON:-dunst}" >"$WORK/app.log" 2>&1 &
APP_PID=$!

field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d.get(sys.argv[2], ""))' "$STATE" "$1" 2>/dev/null || true; }
for _ in $(seq 1 300); do
  [[ -f "$STATE" && "$(field badge)" != "" ]] && break
  kill -0 "$APP_PID" 2>/dev/null || fail "the app exited"
  sleep 0.1
done
[[ -f "$STATE" ]] || fail "the app wrote no tray state in 30 s"
# wait until tray-b has polled once (it registers itself on the roster)
for _ in $(seq 1 300); do
  PCMAIL_HOME="$WORK/a" PCMAIL_CREDENTIAL="$CRED_A" "$PCMAIL_BIN" roster 2>/dev/null | grep -q tray-b && break
  sleep 0.1
done
echo "smoke: app up, title '$(field title)', badge $(field badge)"
if [[ -n "$DAEMON_PID" ]]; then
  for _ in $(seq 1 80); do [[ "$(field tooltip)" == *"via pcmail daemon"* ]] && break; sleep 0.1; done
  [[ "$(field tooltip)" == *"via pcmail daemon"* ]] || fail "the app did not see the running daemon (tooltip '$(field tooltip)')"
  grep -q "cannot open\|already running" "$WORK/app.log" && fail "unexpected poller trouble in the app"
  echo "smoke: the app uses the running daemon: '$(field tooltip)'"
fi
[[ "$(field title)" == "" ]] || fail "title should be empty before any mail"

# start at login: the first run wrote the XDG entry for this binary and remembered it
DESKTOP="$WORK/xdg/autostart/pcmail-tray.desktop"
for _ in $(seq 1 50); do [[ -f "$DESKTOP" ]] && break; sleep 0.1; done
[[ -f "$DESKTOP" ]] || fail "the first run wrote no autostart entry ($DESKTOP)"
grep -qF "Exec=env PCMAIL_HOME=\"$WORK/b\" \"$(readlink -f "$TRAY_BIN")\"" "$DESKTOP" || { cat "$DESKTOP"; fail "the autostart entry does not start this binary for this PC user"; }
grep -q '"autostart": true' "$WORK/b/tray.json" || fail "tray.json does not remember autostart"
grep -q CRED "$DESKTOP" && fail "a credential in the autostart entry"
echo "smoke: first run: autostart entry $(basename "$DESKTOP") written, tray.json remembers it"
# one poller: with the app polling, a `pcmail daemon` (what the service and
# an autostarted session would start) refuses at once
if [[ -z "$DAEMON_PID" ]]; then
  OUT=$(PCMAIL_HOME="$WORK/b" PCMAIL_CREDENTIAL="$CRED_B" timeout 15 "$PCMAIL_BIN" daemon 2>&1) || fail "pcmail daemon beside the app: exit $? ($OUT)"
  [[ "$OUT" == *"already running"* ]] || fail "a second poller started beside the app: $OUT"
  echo "smoke: pcmail daemon beside the polling app: '$OUT' (one poller)"
fi

if [[ "${MEASURE_IDLE:-}" == 1 ]]; then
  echo "smoke: measuring idle (tray only, no window: the app's normal state) over ${IDLE_SECONDS:-30} s"
  sleep 5
  python3 "$ROOT/src-tauri/tests/measure_idle.py" "$APP_PID" "${IDLE_SECONDS:-30}" | tee "$WORK/idle.txt" || fail "idle over target"
  # where the memory goes: smaps_rollup and the largest mappings by library
  APP_ONLY="$(pgrep -s "$APP_PID" -x pcmail-tray | head -1 || true)"
  [[ -n "$APP_ONLY" ]] && python3 "$ROOT/src-tauri/tests/smaps_by_lib.py" "$APP_ONLY" 14
fi

# another PC sends a decision request
ms() { python3 -c 'import time; print(int(time.time() * 1000))'; }
SENT_AT=$(ms)
PCMAIL_HOME="$WORK/a" PCMAIL_CREDENTIAL="$CRED_A" "$PCMAIL_BIN" send tray-b --kind decision -s "[判断依頼] smoke <script>x</script>" -b "from the smoke test" >/dev/null \
  || fail "send failed"
for _ in $(seq 1 300); do
  [[ "$(field title)" == "1" ]] && break
  sleep 0.05
done
[[ "$(field title)" == "1" ]] || fail "tray title did not become 1 (it is '$(field title)')"
[[ "$(field badge)" == "attention" ]] || fail "badge should be attention, is $(field badge)"

# `pcmail send` started → tray title: the whole way (the CLI, the server, the
# poller's long poll, the store, the watch). An upper bound of "stored → shown". (The inbox row's
# received_at is stamped when the poll round starts, before a long-poll wait,
# so it cannot time the store.)
[[ -n "$(field titleAt)" ]] || fail "the tray state has no titleAt"
LAT=$(( $(field titleAt) - SENT_AT ))
[[ "$LAT" -ge 0 ]] || fail "titleAt is before the send (${LAT} ms)"
echo "smoke: tray title 1, badge attention; sent → tray in ${LAT} ms"
MENU=$(python3 -c 'import json,sys; print(" ".join(d["id"] for d in json.load(open(sys.argv[1]))["menu"]))' "$STATE")
[[ "$MENU" == mail-* && "$MENU" != *" "* ]] || fail "the tray menu should list the one decision request (it lists '$MENU')"
echo "smoke: the tray menu lists the decision request $MENU (Open / Ack)"
[[ "$LAT" -lt 1000 ]] || fail "sent → tray took ${LAT} ms (target < 1000)"
grep -q '"notified"' "$STATE" || true
NOTIFIED=$(field notified)
echo "smoke: notifications tried: $NOTIFIED"
if [[ -z "$DAEMON_PID" ]]; then
  [[ "$NOTIFIED" == *mail-* ]] || fail "no notification was tried for the decision request"
  # its title's kind badge and its buttons in the user's language (LC_ALL, LC_MESSAGES, LANG)
  SHOWN=$(python3 -c 'import json,sys; print(" | ".join(json.load(open(sys.argv[1]))["shown"][sys.argv[2]]))' "$STATE" "$MENU")
  LOCALE="${LC_ALL:-${LC_MESSAGES:-${LANG:-}}}"
  if [[ "$LOCALE" == ja* ]]; then WANT="pcmail: [判断依頼] sender-a から | 開く | 完了にする | 返信…"
  else WANT="pcmail: [decision request] from sender-a | Open | Ack | Reply…"; fi
  [[ "$SHOWN" == "$WANT" ]] || fail "the notification showed '$SHOWN', expected '$WANT'"
  echo "smoke: the notification: $SHOWN"
  # the screen with the decision request's notification, as soon as the
  # notification server has it (GNOME's notification-daemon closes its bubble
  # after ~5 s)
  if [[ -n "${SCREENSHOT_NOTIFICATION:-}" ]] && command -v import >/dev/null; then
    for _ in $(seq 1 50); do [[ "$(field serverIds)" == *"$MENU"* ]] && break; sleep 0.1; done
    sleep "${SCREENSHOT_WAIT:-0.5}"
    DISPLAY="$(cat "$WORK/session.display")" XAUTHORITY="$(cat "$WORK/session.xauth")" \
      import -window root -crop "${SCREENSHOT_CROP:-640x200+640+0}" +repage "$SCREENSHOT_NOTIFICATION" && echo "smoke: screenshot $SCREENSHOT_NOTIFICATION"
  fi
fi


sq() { python3 -c 'import sqlite3,sys; r=sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone(); print(r[0] if r else "")' "$WORK/b/store.db" "$1"; }
in_session() { DISPLAY="$(cat "$WORK/session.display")" XAUTHORITY="$(cat "$WORK/session.xauth")" DBUS_SESSION_BUS_ADDRESS="$(cat "$WORK/session.bus")" "$@"; }
seen_and_cleared() {  # $1 = id, $2 = how it was opened
  # a loaded machine may take long to start WebKit for the first window
  for _ in $(seq 1 600); do [[ "$(field title)" == "" ]] && break; sleep 0.1; done
  [[ "$(field title)" == "" ]] || fail "$2: the window did not open the mail (title '$(field title)')"
  [[ "$(sq "select status from inbox where id='$1'")" == "seen" ]] || fail "$2: the mail is not seen in the store"
  echo "smoke: $2 → window opened $1 → seen by $(sq "select status_by from inbox where id='$1'"), title cleared"
}
ID=$(sq "select id from inbox")

# a click on the notification opens that mail (needs a notification server:
# dunst in the test session; the click is its ActionInvoked "default" signal)
CLICKED=""
if [[ -n "$DAEMON_PID" ]]; then
  echo "smoke: (with a daemon, whoever claims first notifies: click not tested)"
elif in_session gdbus call --session --dest org.freedesktop.Notifications --object-path /org/freedesktop/Notifications \
     --method org.freedesktop.Notifications.GetServerInformation >/dev/null 2>&1; then
  SID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["serverIds"][sys.argv[2]])' "$STATE" "$ID") \
    || fail "the notification for $ID did not reach the notification server"
  sleep 0.5
  in_session gdbus emit --session --object-path /org/freedesktop/Notifications \
    --signal org.freedesktop.Notifications.ActionInvoked "uint32 $SID" "'default'" >/dev/null
  seen_and_cleared "$ID" "notification click"
  CLICKED=1
else
  echo "smoke: no notification server in the session (install dunst): click not tested"
fi

# a second start is "Open": with one decision request waiting, the window opens
# on it (a new window via #open=<id>, an open one via the open-mail event),
# the page calls open_mail, the mail is seen, the title clears
if [[ -n "$CLICKED" ]]; then
  PCMAIL_HOME="$WORK/a" PCMAIL_CREDENTIAL="$CRED_A" "$PCMAIL_BIN" send tray-b --kind decision -s "second" -b "for the second start" >/dev/null || fail "send failed"
  for _ in $(seq 1 100); do [[ "$(field title)" == "1" ]] && break; sleep 0.05; done
  [[ "$(field title)" == "1" ]] || fail "the second mail did not show"
  ID=$(sq "select id from inbox where id != '$ID'")
fi
in_session env PCMAIL_HOME="$WORK/b" PCMAIL_CREDENTIAL="$CRED_B" timeout 20 "$TRAY_BIN" >"$WORK/second.log" 2>&1 || fail "the second start did not hand over and exit"
seen_and_cleared "$ID" "second start (Open)"
# ack from the CLI on tray-b's PC: done, and the tray stays calm
PCMAIL_HOME="$WORK/b" PCMAIL_CREDENTIAL="$CRED_B" "$PCMAIL_BIN" ack "$ID" >/dev/null || fail "ack failed"
for _ in $(seq 1 100); do [[ "$(sq "select status from inbox where id='$ID'")" == "done" ]] && break; sleep 0.05; done
sleep 0.6
[[ "$(field title)" == "" && "$(field badge)" == "none" ]] || fail "after the ack: title '$(field title)', badge $(field badge)"
echo "smoke: ack → done, title empty, badge $(field badge)"
# the sender sees it on the server: seen, then done
PCMAIL_HOME="$WORK/a" PCMAIL_CREDENTIAL="$CRED_A" "$PCMAIL_BIN" status "$ID" >"$WORK/status.txt" 2>&1 || true
grep -q seen "$WORK/status.txt" && grep -q done "$WORK/status.txt" || { cat "$WORK/status.txt"; fail "the server timeline lacks seen/done"; }
echo "smoke: the sender's status shows seen and done"

# Ack on a notification: a work request's notification carries Open / Ack /
# Reply…; the notification server reports "ack" (its ActionInvoked signal):
# the mail is done on the server, and no window opened for it
if [[ -n "$CLICKED" ]]; then
  PCMAIL_HOME="$WORK/a" PCMAIL_CREDENTIAL="$CRED_A" "$PCMAIL_BIN" send tray-b --kind request -s "[作業依頼] rotate the logs" -b "ack me from the notification" >/dev/null || fail "send failed"
  for _ in $(seq 1 100); do [[ "$(field title)" == "1" ]] && break; sleep 0.05; done
  ID3=$(sq "select id from inbox where kind='request'")
  for _ in $(seq 1 100); do [[ "$(field serverIds)" == *"$ID3"* ]] && break; sleep 0.05; done
  ACTIONS=$(python3 -c 'import json,sys; print(",".join(json.load(open(sys.argv[1]))["actions"][sys.argv[2]]))' "$STATE" "$ID3") \
    || fail "no notification with actions for $ID3"
  [[ "$ACTIONS" == "open,ack,reply" ]] || fail "the work request's notification carries '$ACTIONS', not open,ack,reply"
  SID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["serverIds"][sys.argv[2]])' "$STATE" "$ID3")
  in_session gdbus emit --session --object-path /org/freedesktop/Notifications \
    --signal org.freedesktop.Notifications.ActionInvoked "uint32 $SID" "'ack'" >/dev/null
  for _ in $(seq 1 100); do [[ "$(sq "select status from inbox where id='$ID3'")" == "done" ]] && break; sleep 0.05; done
  [[ "$(sq "select status from inbox where id='$ID3'")" == "done" ]] || fail "Ack on the notification did not make $ID3 done"
  [[ "$(field opened)" != *"$ID3"* ]] || fail "Ack opened the window"
  [[ "$(field acted)" == *"ack:$ID3:Acked"* ]] || fail "the app did not record the ack ($(field acted))"
  PCMAIL_HOME="$WORK/a" PCMAIL_CREDENTIAL="$CRED_A" "$PCMAIL_BIN" status "$ID3" >"$WORK/status3.txt" 2>&1 || true
  grep -q done "$WORK/status3.txt" || { cat "$WORK/status3.txt"; fail "the server does not say done for $ID3"; }
  for _ in $(seq 1 40); do [[ "$(field title)" == "" ]] && break; sleep 0.05; done
  [[ "$(field title)" == "" ]] || fail "after Ack the tray title is '$(field title)'"
  echo "smoke: Ack on the notification → $ID3 done on the server (sender's status), no window, title cleared"
fi
# A job run through the tray: the app's poller is tray-b's job
# executor (`enable_executor`, as the daemon's). sender-a submits and waits;
# the job must end ok with the command's output, run by the app's own process
# (its runner is `tray-b/<pid>`), and be in the list the Jobs view shows
# (`pcmail job list` on tray-b: the same pcmail_api::jobs::job_list).
for _ in $(seq 1 100); do [[ -n "$(sq "select value from meta where key='job_whitelist_hash'")" ]] && break; sleep 0.1; done
[[ -n "$(sq "select value from meta where key='job_whitelist_hash'")" ]] || fail "tray-b never published its job whitelist"
JOB_AT=$(ms)
PCMAIL_HOME="$WORK/a" PCMAIL_CREDENTIAL="$CRED_A" timeout 60 "$PCMAIL_BIN" job run tray-b hello who=smoke --wait --timeout 45s --json >"$WORK/job.json" 2>"$WORK/job.err" \
  || { cat "$WORK/job.err" "$WORK/job.json"; fail "pcmail job run tray-b hello --wait: exit $?"; }
JOB_MS=$(( $(ms) - JOB_AT ))
jq_job() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))["job"]; print(eval(sys.argv[2], {"j": j}))' "$WORK/job.json" "$1"; }
JOB_ID=$(jq_job 'j["id"]')
[[ "$(jq_job 'j["state"]')" == ok ]] || { cat "$WORK/job.json"; fail "the job ended $(jq_job 'j["state"]'), not ok"; }
[[ "$(jq_job 'j["result"]["exit"]')" == 0 ]] || fail "the job's exit code is $(jq_job 'j["result"]["exit"]')"
[[ "$(jq_job 'j["result"]["output"].strip()')" == "hello from the tray: smoke" ]] || fail "the job's output is '$(jq_job 'j["result"]["output"]')'"
RUNNER=$(jq_job 'j["runner"]')
if [[ -n "$DAEMON_PID" ]]; then EXECUTOR="$DAEMON_PID"; else EXECUTOR="$(pgrep -s "$APP_PID" -x pcmail-tray | head -1 || true)"; fi
[[ "$RUNNER" == "tray-b/$EXECUTOR" ]] || fail "the job ran as $RUNNER, not tray-b/$EXECUTOR (the ${DAEMON_PID:+daemon}${DAEMON_PID:-app})"
PCMAIL_HOME="$WORK/b" PCMAIL_CREDENTIAL="$CRED_B" "$PCMAIL_BIN" job list --json >"$WORK/jobs-b.json" || fail "job list on tray-b failed"
python3 -c 'import json,sys; js=json.load(open(sys.argv[1]))["jobs"]; j=[x for x in js if x["id"]==sys.argv[2]]; sys.exit(0 if j and j[0]["state"]=="ok" and j[0]["target"]=="tray-b" else 1)' "$WORK/jobs-b.json" "$JOB_ID" \
  || { cat "$WORK/jobs-b.json"; fail "tray-b's job list (the Jobs view's) lacks $JOB_ID ok"; }
echo "smoke: job $JOB_ID (hello on tray-b) ran by $RUNNER: ok, exit 0, '$(jq_job 'j["result"]["output"].strip()')'; submit → ended seen by --wait in ${JOB_MS} ms; listed ok on tray-b"

# the real window (SCREENSHOT=file.png; docs/screenshots/real-app-xvfb.png):
# open since the second start, with the mail and every view in its bar. The
# window alone when xwininfo finds it (there is no window manager: it sits
# at the screen's corner), else the whole screen.
if [[ -n "${SCREENSHOT:-}" ]]; then
  command -v import >/dev/null || fail "SCREENSHOT needs ImageMagick's import (scripts/install-deps.sh installs it)"
  sleep "${SCREENSHOT_WAIT:-1.5}"
  GEOM=$(in_session xwininfo -root -tree 2>/dev/null | awk '/"pcmail"/ && $0 ~ /[0-9]+x[0-9]+\+/ { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+x[0-9]+\+-?[0-9]+\+-?[0-9]+$/) { print $i; exit } }')
  if [[ -n "$GEOM" ]]; then
    in_session import -window root -crop "$GEOM" +repage "$SCREENSHOT" || fail "import could not save $SCREENSHOT"
  else
    in_session import -window root "$SCREENSHOT" || fail "import could not save $SCREENSHOT"
  fi
  echo "smoke: screenshot $SCREENSHOT (${GEOM:-the whole screen})"
fi

if [[ "${MEASURE_IDLE:-}" == 1 ]]; then
  echo "smoke: idle with the window open (for information; the window is closed in normal use)"
  python3 "$ROOT/src-tauri/tests/measure_idle.py" "$APP_PID" 10 | tee "$WORK/idle-open.txt" || true
fi
echo "smoke: 1 passed, 0 failed"
