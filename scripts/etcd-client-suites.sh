#!/usr/bin/env bash
# Runs the upstream test suites of two Python etcd clients, python-etcd3
# (PyPI `etcd3`) and aetcd, against a 3-member bellwether cluster and then
# against a 3-member etcd 3.4 cluster, and compares the two result lists.
# Not part of CI: it needs PyPI, etcd and etcdctl, and takes several minutes.
#
#   scripts/etcd-client-suites.sh            # both suites
#   SUITES=aetcd scripts/etcd-client-suites.sh
#
# Needs: target/ci/bellwether (`cargo build --profile ci -p bellwether`),
# etcd and etcdctl 3.4 on PATH (the suites call `etcdctl` themselves),
# python3 with venv, and 127.0.0.1:2379 free (see below).
#
# Environment (all optional):
#   BELLWETHER  the binary               (default: target/ci/bellwether)
#   ETCD        etcd's binary            (default: etcd on PATH)
#   PYTHON      interpreter for the venvs (default: python3; 3.10 or later)
#   WORK        venvs, sources, data, logs, results (default: /tmp/etcd-client-suites)
#   BASE_PORT   ports of the other members (default: 45000; see start_bellwether)
#   SUITES      which suites, space-separated (default: "etcd3 aetcd")
#   SERVERS     which servers, space-separated (default: "bellwether etcd")
#
# How the suites' harnesses are satisfied. Upstream runs both suites under
# `pifpaf run etcd --cluster`, which starts three etcd members named
# pifpaf0..2, the first one's client port on localhost:2379, and exports
# its URL (PYTHON_ETCD_HTTP_URL for etcd3, TEST_ETCD_HTTP_URL for aetcd with
# `--with-cluster`). This script does the same by hand for both servers:
#   - member 0's client port is 127.0.0.1:2379, because some tests use the
#     clients' defaults (etcd3.client(), aetcd.Client(), bare `etcdctl`);
#   - the serializable-read tests SIGSTOP the processes that
#     `pgrep -f -- '--name pifpaf[12]'` finds (members 1 and 2) and read
#     from member 0. etcd members get `--name pifpafN`; bellwether members
#     have no names, so their argv[0] is set to "bellwether --name pifpafN"
#     (`exec -a`; the MIMALLOC_* variables are set so that the member does
#     not re-exec itself, which would reset argv[0]).
# Each suite gets a fresh cluster. Results are read from pytest's JUnit XML.
#
# Exit status: 0 when every test that passes on etcd passes on bellwether
# too, except those in ALLOWED_DIFFERENCES below; 1 otherwise (or when a
# suite could not run at all).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BELLWETHER=${BELLWETHER:-$ROOT/target/ci/bellwether}
ETCD=${ETCD:-$(command -v etcd || true)}
PYTHON=${PYTHON:-python3}
WORK=${WORK:-/tmp/etcd-client-suites}
BASE_PORT=${BASE_PORT:-45000}
SUITES=${SUITES:-etcd3 aetcd}
SERVERS=${SERVERS:-bellwether etcd}
FIRST_CLIENT_PORT=2379

# Exact versions. etcd3 0.12.0's generated protobuf modules predate
# protobuf 4, so its venv keeps protobuf 3.20; tenacity 6.1.0 and
# hypothesis 4.56.3 are its requirements/*.txt pins (its locks pass
# tenacity a two-argument wait function, which tenacity 8 no longer
# takes; hypothesis 5 and later refuse @given with the function-scoped
# `etcd` fixture). aetcd 1.0.0's test pins are its pyproject's `test` extra.
ETCD3_VERSION=0.12.0
AETCD_VERSION=1.0.0
ETCD3_REQUIREMENTS=(
    "grpcio==1.62.3" "protobuf==3.20.3" "six==1.17.0" "tenacity==6.1.0"
    "pytest==8.3.5" "pytest-timeout==2.4.0" "hypothesis==4.56.3" "mock==5.2.0"
)
AETCD_REQUIREMENTS=(
    "aetcd==$AETCD_VERSION" "grpcio==1.85.3" "protobuf==7.36.2"
    "pytest==9.0.3" "pytest-asyncio==1.3.0" "pytest-mock==3.15.1"
    "pytest-timeout==2.4.0"
)

# Tests allowed to fail on bellwether while they pass on etcd, as
# JUnit "classname::name", each with the reason.
ALLOWED_DIFFERENCES=(
    # The harness asserts that every member's name starts with "pifpaf"
    # (the names pifpaf gives etcd members). bellwether members have no
    # configurable name: they are listed as n1, n2, n3.
    "tests.test_etcd3.TestEtcd3::test_member_list"
    "tests.integration.test_cluster::test_member_list"
)

# Each suite's pytest run gets at most this long, each test at most TEST_TIMEOUT.
SUITE_TIMEOUT=${SUITE_TIMEOUT:-1800}
TEST_TIMEOUT=${TEST_TIMEOUT:-120}

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

[[ -x $BELLWETHER ]] || die "no $BELLWETHER (build it: cargo build --profile ci -p bellwether)"
[[ -n $ETCD && -x $ETCD ]] || die "no etcd binary (set ETCD)"
command -v etcdctl >/dev/null || die "no etcdctl on PATH (the suites call it)"
command -v pgrep >/dev/null || die "no pgrep (the suites call it)"

mkdir -p "$WORK"
RESULTS=$WORK/results
rm -rf "$RESULTS"
mkdir -p "$RESULTS"

# --- processes this script started, stopped on exit -----------------------
PIDS=()
stop_servers() {
    local pid
    for pid in "${PIDS[@]}"; do
        kill -CONT "$pid" 2>/dev/null || true   # a test may have paused it
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        for _ in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    PIDS=()
}
trap stop_servers EXIT
trap 'exit 130' INT TERM

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
require_free_ports() {
    local port
    for port in "$@"; do
        ! port_in_use "$port" || die "port 127.0.0.1:$port is in use"
    done
}

wait_healthy() {  # endpoints...
    local endpoints
    endpoints=$(IFS=,; echo "$*")
    for _ in $(seq 60); do
        if etcdctl --endpoints "$endpoints" --command-timeout 2s endpoint health >/dev/null 2>&1 &&
            etcdctl --endpoints "$1" --command-timeout 2s put /etcd-client-suites/ready 1 >/dev/null 2>&1 &&
            etcdctl --endpoints "$1" --command-timeout 2s del /etcd-client-suites/ready >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.5
    done
    return 1
}

client_port() { if (($1 == 0)); then echo "$FIRST_CLIENT_PORT"; else echo $((BASE_PORT + $2 + $1)); fi; }

# bellwether member i (1..3) is pifpaf(i-1): peer port BASE+i, HTTP BASE+100+i,
# client port 2379 for the first, BASE+200+i for the others.
start_bellwether() {  # data dir
    local dir=$1 i n peers=() https=() clients=() ports=()
    rm -rf "$dir"
    mkdir -p "$dir"
    for i in 1 2 3; do
        n=$((i - 1))
        peers+=("$i=127.0.0.1:$((BASE_PORT + i))")
        https+=("$i=127.0.0.1:$((BASE_PORT + 100 + i))")
        clients+=("$i=127.0.0.1:$(client_port "$n" 200)")
        ports+=("$((BASE_PORT + i))" "$((BASE_PORT + 100 + i))" "$(client_port "$n" 200)")
    done
    require_free_ports "${ports[@]}"
    for i in 1 2 3; do
        n=$((i - 1))
        (
            export MIMALLOC_PURGE_DELAY=0 MIMALLOC_ARENA_EAGER_COMMIT=0 BELLWETHER_LOG=warn
            exec -a "bellwether --name pifpaf$n" "$BELLWETHER" node --id "$i" \
                --cluster etcd-client-suites \
                --peers "$(IFS=,; echo "${peers[*]}")" \
                --peer-http "$(IFS=,; echo "${https[*]}")" \
                --peer-client "$(IFS=,; echo "${clients[*]}")" \
                --http-listen "127.0.0.1:$((BASE_PORT + 100 + i))" \
                --client-listen "127.0.0.1:$(client_port "$n" 200)" \
                --data-dir "$dir/n$i"
        ) >"$dir/n$i.log" 2>&1 &
        PIDS+=("$!")
    done
    wait_healthy "127.0.0.1:$FIRST_CLIENT_PORT" "127.0.0.1:$(client_port 1 200)" "127.0.0.1:$(client_port 2 200)" ||
        die "the bellwether cluster did not become healthy (logs in $dir)"
}

# etcd member pifpafN: peer port BASE+10+N, client 2379 for the first, BASE+20+N.
start_etcd() {  # data dir
    local dir=$1 n cluster=() ports=()
    rm -rf "$dir"
    mkdir -p "$dir"
    for n in 0 1 2; do
        cluster+=("pifpaf$n=http://127.0.0.1:$((BASE_PORT + 10 + n))")
        ports+=("$((BASE_PORT + 10 + n))" "$(client_port "$n" 20)")
    done
    require_free_ports "${ports[@]}"
    for n in 0 1 2; do
        "$ETCD" --name "pifpaf$n" --data-dir "$dir/pifpaf$n" \
            --listen-peer-urls "http://127.0.0.1:$((BASE_PORT + 10 + n))" \
            --initial-advertise-peer-urls "http://127.0.0.1:$((BASE_PORT + 10 + n))" \
            --listen-client-urls "http://127.0.0.1:$(client_port "$n" 20)" \
            --advertise-client-urls "http://127.0.0.1:$(client_port "$n" 20)" \
            --initial-cluster "$(IFS=,; echo "${cluster[*]}")" \
            --initial-cluster-token "etcd-client-suites-$$" \
            --initial-cluster-state new >"$dir/pifpaf$n.log" 2>&1 &
        PIDS+=("$!")
    done
    wait_healthy "127.0.0.1:$FIRST_CLIENT_PORT" "127.0.0.1:$(client_port 1 20)" "127.0.0.1:$(client_port 2 20)" ||
        die "the etcd cluster did not become healthy (logs in $dir)"
}

# --- venvs and the suites' sources -----------------------------------------
make_venv() {  # dir requirements...
    local dir=$1
    shift
    local stamp
    stamp=$(printf '%s\n' "$@")
    if [[ -f $dir/.requirements && $(cat "$dir/.requirements") == "$stamp" ]]; then
        return 0
    fi
    log "creating $dir"
    rm -rf "$dir"
    "$PYTHON" -m venv "$dir"
    "$dir/bin/pip" install --quiet --disable-pip-version-check "$@"
    printf '%s\n' "$stamp" >"$dir/.requirements"
}

# The suites are not in the wheels: unpack the sdists, which carry them.
fetch_sdist() {  # name version -> prints the unpacked directory
    local name=$1 version=$2 dir=$WORK/src
    if [[ ! -d $dir/$name-$version/tests ]]; then
        mkdir -p "$dir"
        "$PYTHON" -m pip download --quiet --disable-pip-version-check \
            --no-binary :all: --no-deps -d "$dir" "$name==$version" >&2
        tar -xzf "$dir/$name-$version.tar.gz" -C "$dir"
    fi
    [[ -d $dir/$name-$version/tests ]] || die "the $name $version sdist has no tests/"
    echo "$dir/$name-$version"
}

for suite in $SUITES; do
    case $suite in
    etcd3)
        ETCD3_SRC=$(fetch_sdist etcd3 "$ETCD3_VERSION")
        # etcd3 0.12.0 is on PyPI as an sdist only: install the one unpacked.
        make_venv "$WORK/venv-etcd3" "${ETCD3_REQUIREMENTS[@]}" "$ETCD3_SRC"
        ;;
    aetcd)
        AETCD_SRC=$(fetch_sdist aetcd "$AETCD_VERSION")
        make_venv "$WORK/venv-aetcd" "${AETCD_REQUIREMENTS[@]}"
        ;;
    *) die "unknown suite $suite (etcd3, aetcd)" ;;
    esac
done

# --- running ----------------------------------------------------------------
run_suite() {  # suite server
    local suite=$1 server=$2 xml=$RESULTS/$1-$2.xml out=$RESULTS/$1-$2.log
    local url="http://127.0.0.1:$FIRST_CLIENT_PORT" status=0 started=$SECONDS
    log "$suite on $server (output: $out)"
    case $suite in
    etcd3)
        (
            cd "$ETCD3_SRC"
            # TestClient::test_user_pwd_auth patches a top-level module
            # `etcdrpc`, which is importable only with etcd3/ on the path.
            PYTHONPATH=$ETCD3_SRC/etcd3 PYTHON_ETCD_HTTP_URL=$url TEST_ETCD_VERSION=v3.4.23 \
                timeout "$SUITE_TIMEOUT" "$WORK/venv-etcd3/bin/python" -m pytest tests \
                -p no:cacheprovider --timeout "$TEST_TIMEOUT" -rfEs \
                --junitxml "$xml" -o junit_family=xunit1
        ) >"$out" 2>&1 || status=$?
        ;;
    aetcd)
        (
            cd "$AETCD_SRC"
            TEST_ETCD_HTTP_URL=$url \
                timeout "$SUITE_TIMEOUT" "$WORK/venv-aetcd/bin/python" -m pytest tests \
                --with-cluster -o addopts= -p no:cacheprovider --timeout "$TEST_TIMEOUT" -rfEs \
                --junitxml "$xml" -o junit_family=xunit1
        ) >"$out" 2>&1 || status=$?
        ;;
    esac
    log "$suite on $server: pytest exit $status in $((SECONDS - started)) s; $(tail -n 1 "$out")"
}

for server in $SERVERS; do
    for suite in $SUITES; do
        case $server in
        bellwether) start_bellwether "$WORK/data/bellwether-$suite" ;;
        etcd) start_etcd "$WORK/data/etcd-$suite" ;;
        *) die "unknown server $server (bellwether, etcd)" ;;
        esac
        run_suite "$suite" "$server"
        stop_servers
    done
done

# --- summary and comparison -------------------------------------------------
"$PYTHON" - "$RESULTS" "$SUITES" "$SERVERS" "${ALLOWED_DIFFERENCES[@]}" <<'EOF'
import sys
import xml.etree.ElementTree as ET

results, suites, servers, allowed = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), set(sys.argv[4:])

def outcomes(path):
    """{classname::name: (outcome, message)} from a JUnit XML file."""
    found = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            child = case.find(tag)
            if child is not None:
                outcome = "skipped" if tag == "skipped" else "failed"
                message = (child.get("message") or "").splitlines()[0:1]
                message = message[0][:200] if message else ""
                break
        # An error in teardown adds a second element to a passed case.
        if outcome != "failed" and case.find("error") is not None:
            child = case.find("error")
            outcome, message = "failed", (child.get("message") or "")[:200]
        found[name] = (outcome, message)
    return found

bad = False
for suite in suites:
    runs = {}
    for server in servers:
        try:
            runs[server] = outcomes(f"{results}/{suite}-{server}.xml")
        except (OSError, ET.ParseError) as error:
            print(f"{suite} on {server}: no results ({error}); see {results}/{suite}-{server}.log")
            bad = True
            continue
        counts = {k: sum(1 for o, _ in runs[server].values() if o == k) for k in ("passed", "failed", "skipped")}
        print(f"{suite} on {server}: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
        for name, (outcome, message) in sorted(runs[server].items()):
            if outcome == "failed":
                print(f"    FAILED {name}: {message}")
    if "bellwether" in runs and "etcd" in runs:
        bw, et = runs["bellwether"], runs["etcd"]
        for name in sorted(set(bw) | set(et)):
            b, e = bw.get(name, ("absent", ""))[0], et.get(name, ("absent", ""))[0]
            if b == e:
                continue
            if b != "passed" and e == "passed":
                if name in allowed:
                    print(f"  differs (allowed): {name}: {b} on bellwether, passed on etcd")
                else:
                    print(f"  DIFFERS: {name}: {b} on bellwether, passed on etcd")
                    bad = True
            else:
                print(f"  differs: {name}: {b} on bellwether, {e} on etcd")
sys.exit(1 if bad else 0)
EOF
