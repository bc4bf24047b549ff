#!/usr/bin/env bash
# bellwether's test command: the one the README gives and .ci/run calls.
#
# It installs what the tests need when it is missing (rustfmt and clippy,
# and the Debian packages listed below), then runs
#   1. formatting and lint checks,
#   2. every unit, scenario, simulator and real-process test, including the
#      etcdctl and etcd-client conformance tests (cargo test, in the `ci`
#      profile: release settings without link-time optimisation),
#   3. the CI simulator sweeps: 2,000 chaos seeds per algorithm (Raft,
#      Bully, Ring and Multi-Paxos), and 500
#      chaos seeds of the KV workload on 5 nodes and 500 on 3, checked for
#      linearizability,
#   4. the dashboard in headless Chromium, and the README's tour as written
#      (scripts/dashboard_test.sh, scripts/readme_tour_test.sh),
# and ends with one summary line "tests: N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/.."

SEEDS="${BELLWETHER_CI_SEEDS:-2000}"
# The elect test cuts a leading `elect` off the cluster this many times
# (about 2 s each); run it with 100 by hand for the full check.
export BELLWETHER_ELECT_CUT_RUNS="${BELLWETHER_ELECT_CUT_RUNS:-30}"
KV_SEEDS="${BELLWETHER_CI_KV_SEEDS:-500}"

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust first (https://rustup.rs), then rerun $0" >&2
  exit 2
fi
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  rustup component add rustfmt clippy
fi

# Debian packages the tests use: nftables for partition tests, mount (its
# tmpfs is verify's full disk), chromium
# for the dashboard test, curl for the JSON gateway's transcripts, etcd-client for the etcdctl conformance tests,
# etcd-server (a real etcd 3.4) for the tests that compare answers with it,
# protobuf-compiler (protoc) to build the Rust etcd-client crate that
# crates/conformance's tests use (bellwether itself never needs protoc),
# zookeeper (a real ZooKeeper 3.8; it depends on default-jre, so java comes
# with it) and python3-venv (target/zk-venv, below) for the tests that
# compare bellwether's ZooKeeper protocol with it, and Apache Curator
# (libcurator-*-java, 5.4.0 in bookworm) with a JDK's javac
# (default-jdk-headless) for the Curator recipes test; postgresql (15 in
# bookworm) and Debian's own python3-venv (target/patroni-venv, below) for
# the Patroni test.
need=()
command -v nft >/dev/null 2>&1 || need+=(nftables)
command -v mount >/dev/null 2>&1 || need+=(mount)
command -v etcdctl >/dev/null 2>&1 || need+=(etcd-client)
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
command -v protoc >/dev/null 2>&1 || [ -n "${PROTOC:-}" ] || need+=(protobuf-compiler)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v curl >/dev/null 2>&1 || need+=(curl)
{ command -v java && [ -f /usr/share/java/zookeeper.jar ]; } >/dev/null 2>&1 || need+=(zookeeper)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)
/usr/bin/python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)
compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || need+=(postgresql)
command -v javac >/dev/null 2>&1 || need+=(default-jdk-headless)
for curator in recipes framework client; do
  [ -f "/usr/share/java/curator-$curator.jar" ] || need+=("libcurator-$curator-java")
done
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "note: ${need[*]} missing and cannot be installed here (needs root and apt-get); the tests that need them will fail, and without protoc the etcd-client conformance tests (crates/conformance) cannot build" >&2
  fi
fi

# phase NAME: prints NAME with the time since the script started, so a
# slow step shows in the log.
started=$SECONDS
phase() {
  echo "== $1 (at $((SECONDS - started)) s)"
}

# kazoo for crates/cli/tests/zookeeper.rs (tests/zookeeper/transcript.py):
# made once, kept in target/ like the build.
phase "target/zk-venv (kazoo 2.10.0)"
if ! target/zk-venv/bin/python -c "import importlib.metadata as m, sys; sys.exit(m.version('kazoo') != '2.10.0')" >/dev/null 2>&1; then
  if ! { python3 -m venv target/zk-venv && target/zk-venv/bin/pip install --quiet kazoo==2.10.0; }; then
    echo "FAILED: could not create target/zk-venv with kazoo==2.10.0 (python3 -m venv, then pip); the ZooKeeper tests cannot run" >&2
    exit 1
  fi
fi

# Patroni for crates/cli/tests/patroni.rs, made with Debian's /usr/bin/python3:
# Patroni runs as the postgres user (PostgreSQL refuses root), who cannot
# enter a Python under /root. If this fails the Patroni tests try again and
# fail with pip's message.
phase "target/patroni-venv (patroni 4.1.5)"
if ! { grep -qx 'home = /usr/bin' target/patroni-venv/pyvenv.cfg &&
  target/patroni-venv/bin/python -c "import importlib.metadata as m, sys, psycopg2; sys.exit(m.version('patroni') != '4.1.5')"; } >/dev/null 2>&1; then
  rm -rf target/patroni-venv
  if ! { /usr/bin/python3 -m venv target/patroni-venv &&
    target/patroni-venv/bin/pip install --quiet 'patroni[etcd3]==4.1.5' psycopg2-binary==2.9.10; }; then
    echo "FAILED: could not create target/patroni-venv with patroni[etcd3]==4.1.5 and psycopg2-binary==2.9.10 (/usr/bin/python3 -m venv, then pip); the Patroni tests will fail" >&2
  fi
fi

phase "cargo fmt --check"
cargo fmt --all -- --check

phase "cargo clippy"
cargo clippy --release --workspace --all-targets -- -D warnings

phase "no file-level import circles in cli, cli-common, harness, client and server (scripts/import_cycles.py)"
python3 scripts/import_cycles.py crates/cli/src crates/cli-common/src crates/harness/src crates/client/src crates/server/src

phase "cargo build --profile ci"
cargo build --profile ci --workspace

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
phase "cargo test"
set +e
cargo test --profile ci --workspace 2>&1 | tee "$log"
test_status=${PIPESTATUS[0]}
set -e

sweep_failed=0
sweep_passed=0
# sweep LABEL ARGS...: one simulator sweep, counted as passed or failed.
sweep() {
  phase "sweep: $1"
  shift
  if ./target/ci/bellwether sim sweep "$@" --quiet; then
    sweep_passed=$((sweep_passed + 1))
  else
    sweep_failed=$((sweep_failed + 1))
  fi
}
for algorithm in raft bully ring paxos; do
  sweep "$algorithm, 5 nodes, $SEEDS chaos seeds" \
    --algorithm "$algorithm" --nodes 5 --faults chaos --seeds "$SEEDS"
done
sweep "raft + kv workload, 5 nodes, $KV_SEEDS chaos seeds, linearizability" \
  --algorithm raft --nodes 5 --workload kv --check linearizability \
  --faults chaos --seeds "$KV_SEEDS"
# With three voters the leader and one follower are a quorum, so followers
# commit from the leader's durable notice (crates/core/src/raft/
# durable_notice.rs): this sweep covers that path, which five nodes skip.
sweep "raft + kv workload, 3 nodes, $KV_SEEDS chaos seeds, linearizability" \
  --algorithm raft --nodes 3 --workload kv --check linearizability \
  --faults chaos --seeds "$KV_SEEDS"
# The member driver that production runs (crates/member), carried out on
# the simulator's disk and network, with the etcd store behind it.
sweep "member driver + etcd workload, 3 nodes, $SEEDS chaos seeds, linearizability" \
  --algorithm raft --nodes 3 --workload etcd --check linearizability \
  --faults chaos --seeds "$SEEDS"
sweep "member driver + etcd workload, 5 nodes, $SEEDS chaos seeds, linearizability" \
  --algorithm raft --nodes 5 --workload etcd --check linearizability \
  --faults chaos --seeds "$SEEDS"

phase "dashboard in headless Chromium: the leader shown changes after the leader is killed"
if command -v chromium >/dev/null 2>&1; then
  if BIN=target/ci/bellwether ./scripts/dashboard_test.sh; then
    sweep_passed=$((sweep_passed + 1))
  else
    sweep_failed=$((sweep_failed + 1))
  fi
else
  echo "chromium is not installed and could not be installed: dashboard test FAILED to run"
  sweep_failed=$((sweep_failed + 1))
fi

phase "the README's tour, run as written (scripts/readme_tour_test.sh)"
if BIN=target/ci/bellwether ./scripts/readme_tour_test.sh; then
  sweep_passed=$((sweep_passed + 1))
else
  sweep_failed=$((sweep_failed + 1))
fi

passed=$(grep -Eo '[0-9]+ passed' "$log" | awk '{s += $1} END {print s + 0}')
failed=$(grep -Eo '[0-9]+ failed' "$log" | awk '{s += $1} END {print s + 0}')
passed=$((passed + sweep_passed))
failed=$((failed + sweep_failed))
if [ "$test_status" -ne 0 ] && [ "$failed" -eq 0 ]; then
  failed=1
fi
echo
echo "took $((SECONDS - started)) s"
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
