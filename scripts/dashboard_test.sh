#!/usr/bin/env bash
# Dashboard failover test, through a real browser: start a local cluster,
# read the leader off the dashboard with headless Chromium, SIGKILL that
# leader, and check a surviving node's dashboard names a new leader, in a
# higher term, within FAILOVER_TIMEOUT_S seconds. The new leader is another
# node, or else a restarted process of the old one (see the pid-file note).
#
# Assumptions about `bellwether up` (the CLI is written separately; adjust
# here if it changes):
#   - `"$BIN" up --nodes N --dir DIR --base-port P` runs an N-node cluster on
#     127.0.0.1 until it is killed, and prints, among other lines, the
#     dashboard URL http://127.0.0.1:<port>/;
#   - node i (i = 1..N) listens for peers on port P+i and serves HTTP
#     (/status, the dashboard) on port P+100+i;
#   - it writes node i's process id to DIR/n<i>.pid (and rewrites it when
#     it restarts a member that exited, which it does: so the killed leader
#     may come back, and may even win the next election as a new process).
#
# Every request goes to 127.0.0.1 only. Chromium is installed from Debian
# if missing (needs root). Prints PASS or FAIL; exits 0 only on PASS.
#
# Environment: BIN (default target/release/bellwether), PORT (base port,
# default 17300), NODES (default 3), LEADER_TIMEOUT_S (default 30),
# FAILOVER_TIMEOUT_S (default 10).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN="${BIN:-target/release/bellwether}"
PORT="${PORT:-17300}"
NODES="${NODES:-3}"
LEADER_TIMEOUT_S="${LEADER_TIMEOUT_S:-30}"
FAILOVER_TIMEOUT_S="${FAILOVER_TIMEOUT_S:-10}"
# One Chromium run loads the page and lets it poll for 3 s of virtual time;
# past this wall-clock bound it is hung, and is killed.
CHROMIUM_RUN_TIMEOUT_S=20
# How long cleanup waits for the cluster to exit on SIGTERM before SIGKILL
# (`up` gives its members 5 s to hand over and stop).
STOP_TIMEOUT_S=8

fail() {
  echo "FAIL: $*" >&2
  if [ -n "${WORK:-}" ] && [ -f "$WORK/up.log" ]; then
    echo "--- last lines of 'bellwether up' output:" >&2
    tail -n 20 "$WORK/up.log" >&2 || true
  fi
  exit 1
}

if [ ! -x "$BIN" ]; then
  echo "FAIL: $BIN is missing: build it with 'cargo build --release', or set BIN" >&2
  exit 2
fi
if ! command -v chromium >/dev/null 2>&1; then
  (apt-get update && apt-get install -y chromium) ||
    fail "could not install chromium: run as root, or 'apt-get install chromium' first"
fi

TMP="$(mktemp -d "${TMPDIR:-/tmp}/bellwether-cluster.XXXXXX")" # the cluster's --dir
WORK="$(mktemp -d "${TMPDIR:-/tmp}/bellwether-dashboard.XXXXXX")" # logs, browser profiles
UP_PID=""

# Ends what this script started: the `up` process group (setsid below made
# its pid the group id), then any node from a pid file still running
# bellwether, then the temp dirs.
cleanup() {
  local status=$? pid waited=0
  trap - EXIT INT TERM
  if [ -n "$UP_PID" ]; then
    kill -TERM -- "-$UP_PID" 2>/dev/null || true
    while kill -0 "$UP_PID" 2>/dev/null && [ "$waited" -lt $((STOP_TIMEOUT_S * 10)) ]; do
      sleep 0.1
      waited=$((waited + 1))
    done
    kill -KILL -- "-$UP_PID" 2>/dev/null || true
    wait "$UP_PID" 2>/dev/null || true
  fi
  for pid_file in "$TMP"/n*.pid; do
    [ -f "$pid_file" ] || continue
    pid="$(tr -dc '0-9' <"$pid_file")"
    if [ -n "$pid" ] && grep -qa bellwether "/proc/$pid/cmdline" 2>/dev/null; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$TMP" "$WORK"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

http_port() { echo $((PORT + 100 + $1)); }

# Prints the text of the dashboard's id="leader" element at URL $1
# ("n2 (term 5)" or "none"), or nothing if the page did not load.
leader_shown() {
  local profile dom
  profile="$(mktemp -d "$WORK/profile.XXXXXX")"
  dom="$(timeout "$CHROMIUM_RUN_TIMEOUT_S" chromium --headless --no-sandbox --disable-gpu \
    --disable-quic --no-first-run --disable-background-networking --disable-component-update \
    --disable-sync --user-data-dir="$profile" --virtual-time-budget=3000 --dump-dom "$1" \
    2>>"$WORK/chromium.log")" || true
  rm -rf "$profile"
  printf '%s' "$dom" | tr -d '\n' | sed -n 's/.*<[^>]* id="leader"[^>]*>\([^<]*\)<.*/\1/p'
}

LEADER_PATTERN='^n([0-9]+) \(term ([0-9]+)\)$'

echo "== starting $NODES nodes: $BIN up --nodes $NODES --dir $TMP --base-port $PORT"
setsid "$BIN" up --nodes "$NODES" --dir "$TMP" --base-port "$PORT" >"$WORK/up.log" 2>&1 &
UP_PID=$!

echo "== waiting up to ${LEADER_TIMEOUT_S}s for the dashboard to show a leader"
deadline=$((SECONDS + LEADER_TIMEOUT_S))
shown=""
while :; do
  kill -0 "$UP_PID" 2>/dev/null || fail "'bellwether up' exited early"
  # Prefer the URL `up` printed; until it has, node 1's assumed port.
  url="$(grep -Eo 'http://127\.0\.0\.1:[0-9]+/' "$WORK/up.log" | head -n 1 || true)"
  url="${url:-http://127.0.0.1:$(http_port 1)/}"
  shown="$(leader_shown "$url")"
  [[ "$shown" =~ $LEADER_PATTERN ]] && break
  [ "$SECONDS" -lt "$deadline" ] || fail "no leader on $url after ${LEADER_TIMEOUT_S}s (shown: '${shown}')"
  sleep 0.5
done
old_leader="${BASH_REMATCH[1]}"
old_term="${BASH_REMATCH[2]}"
echo "   $url shows leader: $shown"

pid_file="$TMP/n$old_leader.pid"
[ -f "$pid_file" ] || fail "no pid file $pid_file for the leader n$old_leader"
leader_pid="$(tr -dc '0-9' <"$pid_file")"
[ -n "$leader_pid" ] || fail "pid file $pid_file holds no pid"
survivor=1
[ "$survivor" -ne "$old_leader" ] || survivor=2
survivor_url="http://127.0.0.1:$(http_port "$survivor")/"

echo "== SIGKILL leader n$old_leader (pid $leader_pid); watching n$survivor's dashboard $survivor_url"
kill -KILL "$leader_pid" || fail "could not kill pid $leader_pid"
killed_ms="$(date +%s%3N)"
deadline=$((SECONDS + FAILOVER_TIMEOUT_S))
note=""
while :; do
  shown="$(leader_shown "$survivor_url")"
  if [[ "$shown" =~ $LEADER_PATTERN ]]; then
    new_leader="${BASH_REMATCH[1]}"
    new_term="${BASH_REMATCH[2]}"
    if [ "$new_leader" -ne "$old_leader" ]; then
      break
    fi
    # `up` restarts members that exit, so the old id can lead again, but only
    # as a new process: a pid file still naming the killed pid means the
    # dashboard is showing the dead leader.
    current_pid="$(tr -dc '0-9' <"$pid_file" 2>/dev/null || true)"
    if [ -n "$current_pid" ] && [ "$current_pid" != "$leader_pid" ] && [ "$new_term" -gt "$old_term" ]; then
      note=" (the restarted n$old_leader, pid $current_pid, won the new election)"
      break
    fi
  fi
  [ "$SECONDS" -lt "$deadline" ] ||
    fail "after ${FAILOVER_TIMEOUT_S}s the dashboard still shows '${shown}', not a new leader"
  sleep 0.2
done
# Raft §5.2: a new leader is elected in a later term than the one it replaces.
[ "$new_term" -gt "$old_term" ] ||
  fail "new leader n$new_leader is in term $new_term, not after the old term $old_term"

echo "PASS: dashboard moved from n$old_leader (term $old_term) to $shown$note $(($(date +%s%3N) - killed_ms)) ms after the kill"

# Applications' elections: campaigns through the Election service show up
# in the surviving member's dashboard table, by name, with their counts.
survivor_client="127.0.0.1:$((PORT + 200 + survivor))"
echo "== campaigning through the Election service of n$survivor ($survivor_client)"
"$BIN" bench kv --op campaign --clients 1 --conns 1 --seconds 1 --warmup-seconds 0 \
  --endpoints "$survivor_client" >"$WORK/campaign.log" 2>&1 ||
  fail "the campaign load failed: $(tail -n 3 "$WORK/campaign.log")"
profile="$(mktemp -d "$WORK/profile.XXXXXX")"
dom="$(timeout "$CHROMIUM_RUN_TIMEOUT_S" chromium --headless --no-sandbox --disable-gpu \
  --disable-quic --no-first-run --disable-background-networking --disable-component-update \
  --disable-sync --user-data-dir="$profile" --virtual-time-budget=3000 --dump-dom "$survivor_url" \
  2>>"$WORK/chromium.log")" || true
row="$(printf '%s' "$dom" | tr -d '\n' | grep -Eo '<tr><td>bench-election/[^<]*</td><td>election</td><td>[^<]*</td><td>[^<]*</td><td>[^<]*</td><td>[0-9]+</td><td>[0-9]+</td></tr>' | head -n 1 || true)"
[ -n "$row" ] || fail "the dashboard of n$survivor lists no bench-election/ row in its elections table"
campaigns="$(printf '%s' "$row" | sed -E 's#.*<td>([0-9]+)</td><td>([0-9]+)</td></tr>#\1#')"
[ "$campaigns" -gt 0 ] || fail "the elections row shows no campaigns: $row"
echo "PASS: the dashboard lists the application's election: $(printf '%s' "$row" | sed -E 's#</td><td>#, #g; s#</?t[dr]>##g')"

# Task queues: a queue with one task done and one dead-lettered shows up in
# the Tasks table with its depth by state and its dead letter.
echo "== a task queue through n$survivor"
task_id="$("$BIN" tasks submit dash-queue --endpoints "$survivor_client" hello)" ||
  fail "tasks submit failed"
"$BIN" tasks submit dash-queue --endpoints "$survivor_client" --id poison --max-attempts 1 fail >/dev/null ||
  fail "tasks submit (poison) failed"
BELLWETHER_LOG=warn timeout 20 "$BIN" tasks worker dash-queue --endpoints "$survivor_client" -- \
  sh -c 'x=$(cat); [ "$x" != fail ]' >"$WORK/worker.log" 2>&1 &
worker_pid=$!
timeout 20 "$BIN" tasks result dash-queue "$task_id" --endpoints "$survivor_client" >/dev/null ||
  fail "the task did not finish: $(tail -n 3 "$WORK/worker.log")"
status=0
timeout 20 "$BIN" tasks result dash-queue poison --endpoints "$survivor_client" >/dev/null 2>&1 || status=$?
[ "$status" -eq 1 ] || fail "the poison task was not dead-lettered (tasks result exited $status)"
profile="$(mktemp -d "$WORK/profile.XXXXXX")"
dom="$(timeout "$CHROMIUM_RUN_TIMEOUT_S" chromium --headless --no-sandbox --disable-gpu \
  --disable-quic --no-first-run --disable-background-networking --disable-component-update \
  --disable-sync --user-data-dir="$profile" --virtual-time-budget=3000 --dump-dom "$survivor_url" \
  2>>"$WORK/chromium.log")" || true
kill "$worker_pid" 2>/dev/null || true
wait "$worker_pid" 2>/dev/null || true
row="$(printf '%s' "$dom" | tr -d '\n' | grep -Eo '<tr><td>dash-queue</td>(<td>[^<]*</td>){9}</tr>' | head -n 1 || true)"
[ -n "$row" ] || fail "the dashboard of n$survivor lists no dash-queue row in its task queues table"
cells="$(printf '%s' "$row" | sed -E 's#</td><td>#|#g; s#</?t[dr]>##g')"
# queue|pending|assigned|failed|done|dead|done/s|leader|workers|dead letters
printf '%s' "$cells" | grep -Eq '^dash-queue\|0\|0\|0\|1\|1\|[^|]*\|[^|]*\|[^|]*\|poison$' ||
  fail "the task queue row does not show 1 done, 1 dead and the dead letter: $cells"
echo "PASS: the dashboard lists the task queue: $cells"
metrics="$(timeout "$CHROMIUM_RUN_TIMEOUT_S" chromium --headless --no-sandbox --disable-gpu \
  --disable-quic --no-first-run --disable-background-networking --disable-component-update \
  --disable-sync --user-data-dir="$profile" --dump-dom "${survivor_url}metrics" \
  2>>"$WORK/chromium.log")" || true
for line in 'bellwether_tasks_depth{queue="dash-queue",state="done"} 1' \
  'bellwether_tasks_dead_letters{queue="dash-queue"} 1'; do
  printf '%s' "$metrics" | grep -qF "$line" || fail "/metrics of n$survivor lacks: $line"
done
echo "PASS: /metrics counts the task queue's done and dead-lettered tasks"

# Elector groups: a `bellwether peer up` group named in the page's address
# (?elector=) shows on the member's dashboard, one row per peer, with
# exactly one leader.
PEER_BASE=$((PORT + 500))
PEER_PID=""
stop_peers() {
  if [ -n "$PEER_PID" ]; then
    kill -TERM -- "-$PEER_PID" 2>/dev/null || true
    sleep 1
    kill -KILL -- "-$PEER_PID" 2>/dev/null || true
    wait "$PEER_PID" 2>/dev/null || true
    PEER_PID=""
  fi
}
trap 'status=$?; stop_peers; (exit $status); cleanup' EXIT
echo "== an elector group (bellwether peer up, base port $PEER_BASE) on n$survivor's dashboard"
setsid "$BIN" peer up --nodes 3 --base-port "$PEER_BASE" --dir "$TMP/peers" >"$WORK/peers.log" 2>&1 &
PEER_PID=$!
elector_url="${survivor_url}?elector=127.0.0.1:$((PEER_BASE + 101))"
deadline=$((SECONDS + LEADER_TIMEOUT_S))
while :; do
  profile="$(mktemp -d "$WORK/profile.XXXXXX")"
  dom="$(timeout "$CHROMIUM_RUN_TIMEOUT_S" chromium --headless --no-sandbox --disable-gpu \
    --disable-quic --no-first-run --disable-background-networking --disable-component-update \
    --disable-sync --user-data-dir="$profile" --virtual-time-budget=3000 --dump-dom "$elector_url" \
    2>>"$WORK/chromium.log")" || true
  rows="$(printf '%s' "$dom" | tr -d '\n' | grep -Eo '<tr( class="[^"]*")?><td>127\.0\.0\.1:[0-9]+</td><td>n[0-9]+</td><td>[^<]*</td><td>raft</td><td>[^<]*</td><td>[0-9]+</td><td>[^<]*</td></tr>' || true)"
  peers_shown="$(printf '%s\n' "$rows" | grep -c '<td>n[0-9]' || true)"
  leaders_shown="$(printf '%s\n' "$rows" | grep -c '<td>leader</td>' || true)"
  [ "$peers_shown" -eq 3 ] && [ "$leaders_shown" -eq 1 ] && break
  [ "$SECONDS" -lt "$deadline" ] ||
    fail "the dashboard does not show the elector group with one leader: $peers_shown peers, $leaders_shown leaders: $rows; peers: $(tail -n 3 "$WORK/peers.log")"
  sleep 0.5
done
stop_peers
echo "PASS: the dashboard shows the elector group: $(printf '%s\n' "$rows" | sed -E 's#</td><td>#, #g; s#</?t[dr][^>]*>##g' | tr '\n' ';')"
