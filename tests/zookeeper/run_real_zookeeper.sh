#!/usr/bin/env bash
# Starts a standalone Apache ZooKeeper 3.8 (Debian's `zookeeper` package)
# for the differential ZooKeeper tests (crates/cli/tests/zookeeper.rs): the
# reference that bellwether's ZooKeeper protocol is compared with.
#
#   tests/zookeeper/run_real_zookeeper.sh DIR [PORT]
#
# DIR gets zoo.cfg, the data directory and zookeeper.log. Without PORT a
# free port is picked. Clients are served on 127.0.0.1 only; the admin
# server and the four-letter words are off (ZooKeeper 3.8 always keeps
# `srvr`). Once ZooKeeper answers a session handshake this prints
#   zookeeper ready 127.0.0.1:PORT pid JAVA_PID
# and stays in the foreground until ZooKeeper exits. Stop it by killing
# this script's process group (the tests start it as a group leader).
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 DIR [PORT]" >&2
  exit 2
fi
dir=$1
port=${2:-}
jar=${ZOOKEEPER_JAR:-/usr/share/java/zookeeper.jar}

if ! command -v java >/dev/null 2>&1; then
  echo "java not found: install Debian's zookeeper package, which brings a JRE (scripts/test.sh does)" >&2
  exit 2
fi
if [ ! -f "$jar" ]; then
  echo "$jar not found: install Debian's zookeeper package (scripts/test.sh does), or set ZOOKEEPER_JAR" >&2
  exit 2
fi
if [ -z "$port" ]; then
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
fi

mkdir -p "$dir/data"
# preAllocSize is in KiB (the default preallocates 64 MiB of log);
# forceSync=no skips fsync: neither changes what clients see.
cat >"$dir/zoo.cfg" <<EOF
tickTime=2000
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
maxClientCnxns=100
admin.enableServer=false
4lw.commands.whitelist=
preAllocSize=1024
forceSync=no
EOF

# The jar's manifest names the Debian jars it needs; no logging backend is
# on the class path, so ZooKeeper logs nothing but slf4j's notice.
java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
  -Djava.net.preferIPv4Stack=true \
  -cp "$jar" org.apache.zookeeper.server.ZooKeeperServerMain "$dir/zoo.cfg" \
  >"$dir/zookeeper.log" 2>&1 &
zk=$!

# handshake: a ConnectRequest (protocol 0, zxid 0, 4 s timeout, session 0,
# 16-byte empty password, not read-only) and then closeSession (xid 1,
# op -11), in a subshell so that a refused connection only fails it.
# Succeeds when ZooKeeper sends back its ConnectResponse (4 + 37 bytes).
handshake() (
  exec 3<>"/dev/tcp/127.0.0.1/$port"
  printf '\x00\x00\x00\x2d\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x0f\xa0' >&3
  printf '\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x10' >&3
  printf '\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00' >&3
  answer=$(timeout 2 head -c 41 <&3 | wc -c) || true
  printf '\x00\x00\x00\x08\x00\x00\x00\x01\xff\xff\xff\xf5' >&3 || true
  [ "${answer:-0}" -ge 40 ]
)

deadline=$((SECONDS + 60))
until handshake 2>/dev/null; do
  if ! kill -0 "$zk" 2>/dev/null; then
    echo "ZooKeeper exited before serving clients; its log ($dir/zookeeper.log):" >&2
    cat "$dir/zookeeper.log" >&2
    exit 1
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "ZooKeeper did not answer on 127.0.0.1:$port within 60 s; its log:" >&2
    cat "$dir/zookeeper.log" >&2
    kill -KILL "$zk" 2>/dev/null || true
    exit 1
  fi
  sleep 0.1
done
echo "zookeeper ready 127.0.0.1:$port pid $zk"
wait "$zk"
