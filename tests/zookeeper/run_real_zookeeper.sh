#!/usr/bin/env bash
# Starts a 3-server Apache ZooKeeper 3.8 ensemble (Debian's `zookeeper`
# package) for the differential ZooKeeper tests (crates/cli/tests/
# zookeeper.rs): the reference that bellwether's ZooKeeper protocol is
# compared with, a cluster of three like the bellwether cluster it is
# compared against.
#
#   tests/zookeeper/run_real_zookeeper.sh DIR NET
#
# Server i (1 to 3) is QuorumPeerMain on its own loopback IP
# 127.0.NET.(100+i) with ZooKeeper's usual ports (clients 2181, quorum
# 2888, election 3888); DIR gets s<i>.cfg, the data directory s<i>/ with
# its myid, and the log s<i>.log. The admin server is off and of the
# four-letter words only `srvr` is on (this script's readiness check).
# TTL nodes are enabled (zookeeper.extendedTypesEnabled), as bellwether
# has them. Once every server answers `srvr` as leader or follower and
# exactly one leads, this prints one line per server and then `ready`:
#   zookeeper server 1 127.0.NET.101:2181 follower pid JAVA_PID
#   zookeeper server 2 127.0.NET.102:2181 leader pid JAVA_PID
#   zookeeper server 3 127.0.NET.103:2181 follower pid JAVA_PID
#   zookeeper ready
# and stays in the foreground until a server exits. Stop it by killing
# this script's process group (the tests start it as a group leader: the
# JVMs are in that group too).
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 DIR NET   (servers on 127.0.NET.101-103)" >&2
  exit 2
fi
dir=$1
net=$2
servers=3
jar=${ZOOKEEPER_JAR:-/usr/share/java/zookeeper.jar}
ready_seconds=90

if ! command -v java >/dev/null 2>&1; then
  echo "java not found: install Debian's zookeeper package, which brings a JRE (scripts/test.sh does)" >&2
  exit 2
fi
if [ ! -f "$jar" ]; then
  echo "$jar not found: install Debian's zookeeper package (scripts/test.sh does), or set ZOOKEEPER_JAR" >&2
  exit 2
fi
if ! [[ "$net" =~ ^[0-9]+$ ]] || [ "$net" -gt 255 ]; then
  echo "NET must be 0 to 255, not $net" >&2
  exit 2
fi

ip() { echo "127.0.$net.$((100 + $1))"; }

# preAllocSize is in KiB (the default preallocates 64 MiB of log);
# forceSync=no skips fsync: neither changes what clients see. Each
# server's client address is on its server line (ZooKeeper 3.5's form),
# so that /zookeeper/config lists it, as bellwether's does.
for i in $(seq 1 $servers); do
  mkdir -p "$dir/s$i"
  echo "$i" >"$dir/s$i/myid"
  {
    echo "tickTime=2000"
    echo "initLimit=10"
    echo "syncLimit=5"
    echo "dataDir=$dir/s$i"
    echo "maxClientCnxns=100"
    echo "admin.enableServer=false"
    echo "4lw.commands.whitelist=srvr"
    echo "preAllocSize=1024"
    echo "forceSync=no"
    for j in $(seq 1 $servers); do
      echo "server.$j=$(ip "$j"):2888:3888;$(ip "$j"):2181"
    done
  } >"$dir/s$i.cfg"
done

# The jar's manifest names the Debian jars it needs; no logging backend is
# on the class path, so a server logs nothing but slf4j's notice.
pids=()
for i in $(seq 1 $servers); do
  java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Djava.net.preferIPv4Stack=true \
    -Dzookeeper.extendedTypesEnabled=true \
    -cp "$jar" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/s$i.cfg" \
    >"$dir/s$i.log" 2>&1 &
  pids+=($!)
done

# The `Mode:` server i reports to `srvr` (leader, follower, ...), or
# nothing while it does not serve; in a subshell so that a refused
# connection only fails it.
mode() (
  exec 3<>"/dev/tcp/$(ip "$1")/2181"
  printf 'srvr' >&3
  timeout 2 cat <&3 | sed -n 's/^Mode: //p'
)

logs() {
  for i in $(seq 1 $servers); do
    echo "--- server $i's log ($dir/s$i.log):" >&2
    cat "$dir/s$i.log" >&2
  done
}

deadline=$((SECONDS + ready_seconds))
while :; do
  modes=()
  for i in $(seq 1 $servers); do
    modes+=("$(mode "$i" 2>/dev/null || true)")
  done
  leaders=0
  others=0
  for m in "${modes[@]}"; do
    case "$m" in
      leader) leaders=$((leaders + 1)) ;;
      follower) ;;
      *) others=$((others + 1)) ;;
    esac
  done
  if [ "$leaders" -eq 1 ] && [ "$others" -eq 0 ]; then
    break
  fi
  for i in $(seq 1 $servers); do
    if ! kill -0 "${pids[$((i - 1))]}" 2>/dev/null; then
      echo "ZooKeeper server $i exited before the ensemble served clients" >&2
      logs
      exit 1
    fi
  done
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "the ensemble did not elect one leader that all follow within ${ready_seconds} s (modes: ${modes[*]})" >&2
    logs
    exit 1
  fi
  sleep 0.1
done
for i in $(seq 1 $servers); do
  echo "zookeeper server $i $(ip "$i"):2181 ${modes[$((i - 1))]} pid ${pids[$((i - 1))]}"
done
echo "zookeeper ready"
# Any server's exit ends the script (and shows the test something is off).
wait -n "${pids[@]}"
