#!/usr/bin/env bash
# Issue 11's demo: two named Claude Code sessions, ani (on PC kim) and vasya (on
# PC lee), on one embedded server file: mail by name, a lease conflict, a handoff
# picked up by a new session, a rollup, a memory gotcha at the next SessionStart,
# and `pcmail watch` receiving mail without a prompt. Each session is a stand-in
# process for `claude` (the hook and pcmail find it through PCMAIL_CLAUDE_PID);
# every hook run is the real hook with Claude Code's JSON on stdin.
set -euo pipefail
cd "$(dirname "$0")/.."
# PCMAIL_BIN: a pcmail already built (else this builds it, as scripts/demo.sh did).
if [ -n "${PCMAIL_BIN:-}" ]; then PCMAIL="$PCMAIL_BIN"; else
  cargo build --quiet -p pcmail-cli
  PCMAIL="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')/debug/pcmail"
fi
D="$(mktemp -d)"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$D"; }
trap cleanup EXIT

# A repo both PCs work in (each its own clone in real life; one folder here).
git init -q "$D/app" && git -C "$D/app" remote add origin https://github.com/kim/app.git
git -C "$D/app" -c user.name=demo -c user.email=demo@example.com commit -q --allow-empty -m init

pc() { local label=$1; shift; PCMAIL_HOME="$D/$label" "$PCMAIL" "$@"; }
# A session: its stand-in claude process and id ($1 = variable prefix).
start_session() { # name label id
  sleep 600 & PIDS+=($!)
  eval "$1_PID=$!; $1_PC=$2; $1_ID=$3"
}
in_session() { # prefix, then pcmail args
  local p=$1; shift; local pid="${p}_PID" label="${p}_PC"
  (cd "$D/app" && PCMAIL_CLAUDE_PID="${!pid}" PCMAIL_HOME="$D/${!label}" "$PCMAIL" "$@")
}
hook() { # prefix event: prints what the session is shown
  local p=$1 ev=$2; local pid="${p}_PID" label="${p}_PC" id="${p}_ID"
  printf '{"session_id":"%s","hook_event_name":"%s","cwd":"%s","prompt":"hi"}' "${!id}" "$ev" "$D/app" \
    | PCMAIL_CLAUDE_PID="${!pid}" PCMAIL_HOME="$D/${!label}" "$PCMAIL" hook \
    | sed -n 's/.*"additionalContext":"\(.*\)".*/\1/p' | sed 's/\\n/\n/g; s/\\"/"/g' | sed 's/^/    | /'
}
step() { printf '\n== %s\n' "$*"; }

for label in kim lee; do
  pc "$label" init --label "$label" --server embedded --embedded-db "$D/server.db" >/dev/null
done
pc kim sync >/dev/null; pc lee sync >/dev/null

step "two sessions start: ani's on kim, vasya's on lee; each takes its name"
start_session ANI kim 0a1c2e4f-ani-session-1
start_session VASYA lee 5b7d9f1a-vasya-session-1
hook ANI SessionStart >/dev/null; hook VASYA SessionStart >/dev/null
in_session ANI name ani
in_session VASYA name vasya
pc kim sync >/dev/null; pc lee sync >/dev/null
echo "\$ pcmail who"; pc kim who | sed 's/^/    /'

step "mail by name: ani asks vasya (addressed to the name, shown to vasya's session only)"
MAIL1=$(pc kim --json send vasya --kind request --subject "cmake" --body "did you change the libsodium link in CMakeLists?" | sed -n 's/.*"ids":\["\([^"]*\)".*/\1/p')
echo "    sent $MAIL1 to vasya"
pc lee sync >/dev/null
echo "  vasya's next prompt shows:"; hook VASYA UserPromptSubmit
in_session VASYA reply "$MAIL1" --body "yes: target_link_libraries(app PRIVATE sodium), rebuild" >/dev/null
pc kim sync >/dev/null
echo "  ani's next prompt shows the reply:"; hook ANI UserPromptSubmit

step "a lease conflict: ani holds db-migrations, vasya's claim is refused (exit 10)"
in_session ANI lease claim db-migrations -d "rewriting the session table" -f 'migrations/**' --name ani
pc lee sync >/dev/null
set +e; in_session VASYA lease claim db-migrations -d "add an index" --name vasya 2>&1 | sed 's/^/    /'; CODE=${PIPESTATUS[0]}; set -e
echo "    (exit $CODE)"

step "ani writes a handoff, then her session exits: its lease is released"
in_session ANI handoff new --slug session-table --goal "Rewrite the session table" \
  --done "migrations/0007_sessions.sql" --failed "ALTER in place locks the table for minutes" \
  --state "working" --next "Backfill with batches of 10k"
kill "$ANI_PID"; wait "$ANI_PID" 2>/dev/null || true
pc kim sync >/dev/null; pc lee sync >/dev/null
in_session VASYA lease claim db-migrations -d "add an index" --name vasya

step "a memory gotcha; a new session on kim takes the name ani and sees the handoff and the gotcha at SessionStart"
in_session VASYA memory add gotcha --topic build/cmake "libsodium must be linked PRIVATE or the plugin loads twice" --why "two copies of sodium_init"
start_session ANI2 kim 3c5e7a9b-ani-session-2
echo "  ani's new session starts:"; hook ANI2 SessionStart
in_session ANI2 name ani

in_session ANI2 handoff pickup session-table | head -3 | sed 's/^/    /'

step "a rollup folds the handoffs so far"
in_session ANI2 handoff rollup --through now --slug week-1 --body "Session table rewritten; next: backfill." | sed 's/^/    /'

step "pcmail watch: vasya's session is idle, mail reaches it without a prompt"
WATCH_OUT="$D/watch.out"
mkfifo "$D/watch.in"
(in_session VASYA watch < "$D/watch.in" > "$WATCH_OUT" 2>&1) & WATCH=$!
exec 7>"$D/watch.in"
MAIL2=$(pc kim --json send vasya --body "backfill is running: leave db-migrations to me after your index" | sed -n 's/.*"ids":\["\([^"]*\)".*/\1/p')
pc lee sync >/dev/null
for _ in $(seq 100); do grep -q "$MAIL2" "$WATCH_OUT" 2>/dev/null && break; sleep 0.05; done
sed 's/^/    /' "$WATCH_OUT"
exec 7>&-; wait "$WATCH" || true

cat <<MERMAID

== what happened, as a Mermaid diagram (renders on GitHub)
\`\`\`mermaid
sequenceDiagram
    participant ani as ani (kim, session 1)
    participant ani2 as ani (kim, session 2)
    participant S as server
    participant vasya as vasya (lee)
    participant repo as repo .claude/
    ani->>S: name ani
    vasya->>S: name vasya
    ani->>S: send vasya "cmake" (${MAIL1: -8})
    S->>vasya: poll: mail to vasya (hook shows it to vasya's session only)
    vasya->>S: reply
    S->>ani: reply shown at ani's next prompt
    ani->>S: lease claim db-migrations (granted)
    vasya-xS: lease claim db-migrations: held by kim/ani (exit 10)
    ani->>repo: handoff new session-table (INDEX: ACTIVE)
    Note over ani: session exits: lease released
    vasya->>S: lease claim db-migrations (granted)
    vasya->>repo: memory add gotcha build/cmake
    repo-->>ani2: SessionStart: handoff session-table + gotcha
    ani2->>S: name ani (moves from the ended session)
    ani2->>repo: handoff pickup (PICKED_UP), rollup week-1 (ROLLED_UP)
    ani2->>S: send vasya (${MAIL2: -8})
    S->>vasya: poll stores it; pcmail watch prints it, no prompt
\`\`\`
MERMAID
