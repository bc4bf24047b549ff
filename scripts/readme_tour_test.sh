#!/usr/bin/env bash
# The README's tour, run as it is written.
#
# It reads the ```sh block under "## A five-minute tour" in README.md and
# runs its commands one by one in a scratch directory, after starting the
# cluster as "Two commands" says (`up`, here the binary the tests built in
# place of `cargo run --release --`). `bw` is that binary. Each command must
# succeed; some must also print what the README says they do (EXPECT).
#
# Three kinds of line are treated apart, each listed below by the text it
# starts with. The script fails when an entry no longer matches a line of
# the tour, so the lists follow the README:
#   - BLOCKING: runs until Ctrl-C (`etcdctl elect`, a second `bw up`). It
#     is started, must print what EXPECT says within its time, and is then
#     sent Ctrl-C (SIGINT).
#   - SHORTER: runs for minutes. It runs here as written but shorter: the
#     first text beside it is replaced by the second (fewer runs or seconds).
#   - a line ending in `&` runs in the background until the script ends.
#
# Usage: BIN=target/ci/bellwether scripts/readme_tour_test.sh
set -uo pipefail
# Job control: each background command gets a process group of its own,
# so Ctrl-C (SIGINT) reaches it as it would from a terminal. Without it a
# script's background commands ignore SIGINT.
set -m
cd "$(dirname "$0")/.."
root=$(pwd)
BIN="$(realpath "${BIN:-target/ci/bellwether}")"
readme="$root/README.md"

declare -A BLOCKING=(
  ["etcdctl elect cron node-a"]=10
  ["bw up --tls"]=30
)
declare -A SHORTER=(
  ["bw sim compare --runs 1000"]="--runs 1000|--runs 5"
  ["bw verify --workload register --seconds 60 --runs 5"]="--seconds 60 --runs 5|--seconds 10 --runs 1"
  ["bw bench failover --runs 5 --compare-etcd"]="--runs 5|--runs 1"
)
# The longest a command that should end may take.
FOREGROUND_SECONDS_MAX=300
declare -A EXPECT=(
  ["bw status"]="^n[0-9]+ +[0-9.:]+ +leader "
  ["etcdctl get greeting"]="^hello$"
  ["etcdctl elect cron node-a"]="^cron/"
  ["etcdctl lock nightly-job"]="only one of us runs this"
  ["etcdctl member list -w table"]="started[[:space:]]+\|[[:space:]]+n4[[:space:]]"
  ["bw up --tls"]="etcdctl"
)

fail() {
  echo "README tour FAILED: $*" >&2
  exit 1
}

command -v etcdctl >/dev/null || fail "etcdctl is not installed (scripts/test.sh installs etcd-client)"
[ -x "$BIN" ] || fail "no binary at $BIN (build it with cargo build --profile ci)"

scratch=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do
    kill -INT -- "-$pid" 2>/dev/null
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null
  done
  pkill -KILL -f "$scratch" 2>/dev/null
  rm -rf "$scratch"
}
trap cleanup EXIT
cd "$scratch" || exit 1

# The tour's lines: the sh block after the heading, comments and blanks dropped.
mapfile -t lines < <(awk '
  /^## A five-minute tour/ { in_section = 1; next }
  in_section && /^```sh/ { in_block = 1; next }
  in_block && /^```/ { exit }
  in_block && !/^[[:space:]]*(#|$)/ { print }
' "$readme")
[ "${#lines[@]}" -ge 10 ] || fail "found ${#lines[@]} commands in the tour; is the heading still \"## A five-minute tour\"?"

# Every listed line must still be in the tour.
for listed in "${!BLOCKING[@]}" "${!SHORTER[@]}" "${!EXPECT[@]}"; do
  found=0
  for line in "${lines[@]}"; do
    [[ "$line" == "$listed"* ]] && found=1
  done
  [ "$found" -eq 1 ] || fail "no tour line starts with \"$listed\"; update this script with the README"
done

# `bw` is the built binary, as the tour's alias makes it `cargo run`.
bw() { "$BIN" "$@"; }

# The tour's clusters use fixed ports; something already listening there
# would answer in their place.
for port in 7001 7002 7003 7004 7101 7102 7103 7104 7201 7202 7203 7204 8001 8101 8201; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    fail "port $port is in use; the tour needs 7001-7204 and 8001-8203 free"
  fi
done

# The first set-up command: a 3-member cluster in ./bellwether-data.
"$BIN" up > up.log 2>&1 &
pids+=($!)
for _ in $(seq 1 150); do
  ready=0
  for port in 7101 7102 7103; do
    curl -sf "http://127.0.0.1:$port/ready" >/dev/null 2>&1 && ready=$((ready + 1))
  done
  [ "$ready" -eq 3 ] && break
  sleep 0.2
done
[ "$ready" -eq 3 ] || { cat up.log; fail "bw up: the members were not ready in 30 s"; }

# run_within LINE SECONDS: runs LINE with its output in out.txt, and
# returns its exit status; stops it (Ctrl-C, then SIGKILL) and fails the
# tour if it is still running after SECONDS.
run_within() {
  eval "$1" > out.txt 2>&1 &
  local pid=$!
  for _ in $(seq 1 $(($2 * 10))); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -INT -- "-$pid" 2>/dev/null
    sleep 2
    kill -KILL -- "-$pid" 2>/dev/null
    cat out.txt
    fail "\"$1\" still ran after $2 s"
  fi
  wait "$pid"
}

# match LINE TABLE-NAME: the entry of the named table whose key starts LINE.
match() {
  local -n table=$2
  for key in "${!table[@]}"; do
    [[ "$1" == "$key"* ]] && { echo "$key"; return 0; }
  done
  return 1
}

ran=0
background=()
for line in "${lines[@]}"; do
  if [[ "$line" == alias\ bw=* ]]; then
    [ "$line" = "alias bw='cargo run --release -q --'" ] || fail "the alias changed: $line"
    continue
  fi
  if key=$(match "$line" SHORTER); then
    long=${SHORTER[$key]%%|*}
    short=${SHORTER[$key]#*|}
    [[ "$line" == *"$long"* ]] || fail "\"$line\" no longer says \"$long\""
    line=${line/"$long"/"$short"}
  fi
  echo "== $line"
  expect=""
  if key=$(match "$line" EXPECT); then expect=${EXPECT[$key]}; fi
  if key=$(match "$line" BLOCKING); then
    seconds=${BLOCKING[$key]}
    [ -n "$expect" ] || fail "\"$line\" runs until Ctrl-C but has nothing to expect"
    eval "$line" > out.txt 2>&1 &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 1 $((seconds * 10))); do
      grep -Eq "$expect" out.txt && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    cat out.txt
    kill -0 "$pid" 2>/dev/null || fail "\"$line\" ended; the tour says it runs until Ctrl-C"
    grep -Eq "$expect" out.txt || fail "\"$line\" printed no line matching /$expect/ in $seconds s"
    kill -INT -- "-$pid"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && fail "\"$line\" did not stop on Ctrl-C within 10 s"
    ran=$((ran + 1))
    continue
  fi
  if [[ "$line" =~ \&[[:space:]]*(#.*)?$ ]]; then
    command=$(sed -E 's/[[:space:]]*&[[:space:]]*(#.*)?$//' <<<"$line")
    eval "$command" > background.txt 2>&1 &
    pids+=($!)
    background+=("$!:$line")
    ran=$((ran + 1))
    continue
  fi
  if [[ "$line" == export\ * ]]; then
    eval "$line"
    continue
  fi
  run_within "$line" "$FOREGROUND_SECONDS_MAX"
  status=$?
  cat out.txt
  [ "$status" -eq 0 ] || fail "\"$line\" exited with $status"
  if [ -n "$expect" ]; then
    grep -Eq "$expect" out.txt || fail "\"$line\" printed no line matching /$expect/"
  fi
  ran=$((ran + 1))
done

# The cluster the tour started is the one that answered all along.
kill -0 "${pids[0]}" 2>/dev/null || { cat up.log; fail "bw up stopped during the tour"; }

# What the tour left in the background still runs (a watch keeps watching).
for entry in "${background[@]}"; do
  kill -0 "${entry%%:*}" 2>/dev/null || { cat background.txt; fail "\"${entry#*:}\" stopped"; }
done
echo "== README tour: $ran commands ran, ${#SHORTER[@]} of them shortened"
