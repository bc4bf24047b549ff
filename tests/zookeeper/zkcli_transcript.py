"""ZooKeeper 3.8's own shell, zkCli.sh, given a fixed list of commands,
and its output put in a canonical form.

Why: the ZooKeeper project's command-line client is what operators type
at a server, and its messages ("Node already exists: /zkcli/p", a Stat
block, an ACL listing) are the answers they read. crates/cli/tests/
zookeeper_zkcli.rs runs zkCli.sh against a real ZooKeeper ensemble and a
bellwether cluster and compares the two canonical outputs. By hand:

    python3 tests/zookeeper/zkcli_transcript.py input \
      | TZ=UTC /usr/share/zookeeper/bin/zkCli.sh -server HOST:PORT 2>&1 \
      | python3 tests/zookeeper/zkcli_transcript.py canonical

`input` prints what zkCli reads on stdin: the commands of
tests/zookeeper/zkcli_transcript.txt, all for one zkCli (one JVM, one
session), and `quit`. Without a terminal zkCli reads stdin with no prompt
and no echo, so before each command goes a marker, `get //zkcli-step-N`:
zkCli rejects that path itself, with no request to the server, printing
`Invalid path string "//zkcli-step-N"...`, and everything between two
markers is the output of one command. `canonical` reads zkCli's stdout and
stderr (as one stream, in the order it printed them) on stdin.

The canonical output is, for every command, `> COMMAND` and the lines it
printed, with what differs between two correct servers normalized:
  * a zxid (cZxid, mZxid, pZxid) prints as z<rank>, its rank among all
    zxids the run printed, smallest first: equality and order stay, the
    epoch, gaps and offsets do not;
  * ctime and mtime print as <recent> when within ten minutes of this
    machine's clock (zkCli must run with TZ=UTC for them to parse; one
    that does not parse stays as it is);
  * a non-zero ephemeralOwner prints as session<N>, N counting sessions
    in the order they first appear;
  * getEphemerals' list is sorted: ZooKeeper keeps a session's ephemeral
    paths in a hash set and promises no order;
  * in `/zookeeper/config`'s lines (zkCli's `config`), a server's peer
    and client addresses print as <address>, its ports as <port>, and the
    config's version as <version>: the servers listen where they were
    told to, and the version is a zxid;
  * getAcl's entries are sorted: the ACL an `auth` entry expands to lists
    the session's identities, which ZooKeeper keeps in a hash set;
  * dropped: everything before the first marker (the JVM's and slf4j's
    notices, "Connecting to HOST:PORT", the welcome), and anywhere the
    connection-state events zkCli's event thread prints (`WATCHER::` and
    `WatchedEvent state:... type:None path:null`, whose place among the
    lines is a race), slf4j, log4j and JVM notices.
A command whose marker is missing (zkCli stopped, or printed "Not
connected" for the marker) shows as `> COMMAND` with `<no marker>`.
`canonical` fails (exit status 1, zkCli's output on stderr) when zkCli
printed no marker at all: it did not connect or did not run.
"""

import os
import re
import sys
import time
from datetime import datetime, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
COMMANDS = os.path.join(HERE, "zkcli_transcript.txt")
MARKER_PATH = "//zkcli-step-%d"
MARKER = re.compile(r'^Invalid path string "//zkcli-step-(\d+)" caused by ')
# Lines of the JVM, slf4j and log4j (when a log4j jar is on the class path,
# with the pattern of Debian's /etc/zookeeper/conf/log4j.properties).
NOISE = re.compile(
    r"^(SLF4J: |log4j:|OpenJDK .*VM warning|Picked up _?JAVA_TOOL_OPTIONS"
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ )"
)
# What zkCli's watcher prints for a connection-state event: two writes,
# each a whole line with an empty line before it.
STATE_EVENT = re.compile(r"\nWATCHER::\n|\nWatchedEvent state:\w+ type:None path:null\n")
ZXID = re.compile(r"^(cZxid|mZxid|pZxid) = 0x([0-9a-f]+)$")
TIME = re.compile(r"^(ctime|mtime) = (.*)$")
OWNER = re.compile(r"^ephemeralOwner = 0x([0-9a-f]+)$")
CONFIG_SERVER = re.compile(
    r"^(server\.\d+)=[^:;]+:\d+:\d+:(participant|observer);[^:;]+:\d+$"
)
CONFIG_VERSION = re.compile(r"^version=[0-9a-f]+$")
RECENT_MS = 600_000


def commands():
    """The commands of zkcli_transcript.txt."""
    with open(COMMANDS) as file:
        lines = [line.rstrip("\n") for line in file]
    return [line for line in lines if line.strip() and not line.startswith("#")]


def split_by_marker(output, count):
    """Lines printed after marker i, for each of the count commands; None
    for a command whose marker never showed."""
    blocks = [None] * count
    current = None
    lines = STATE_EVENT.sub("", output).split("\n")
    if lines[-1] == "":
        lines.pop()  # what follows the last newline
    for line in lines:
        found = MARKER.match(line)
        if found:
            current = int(found.group(1))
            blocks[current] = []
        elif current is not None and not NOISE.match(line):
            blocks[current].append(line)
    return blocks


def canonical_time(value, now_ms):
    try:
        when = datetime.strptime(value, "%a %b %d %H:%M:%S UTC %Y")
    except ValueError:
        return value
    when_ms = when.replace(tzinfo=timezone.utc).timestamp() * 1000
    return "<recent>" if abs(when_ms - now_ms) < RECENT_MS else value


def canonical(commands, blocks):
    """The canonical text: `> command` and its normalized lines."""
    zxids = sorted({
        int(found.group(2), 16)
        for block in blocks if block
        for found in map(ZXID.match, block) if found
    })
    rank = {zxid: i for i, zxid in enumerate(zxids)}
    sessions = {}
    now_ms = time.time() * 1000
    out = []
    for command, block in zip(commands, blocks):
        out.append("> " + command)
        if block is None:
            out.append("<no marker>")
            continue
        if command.startswith("getAcl "):
            block = sorted_acl(block)
        for line in block:
            if command.startswith("getEphemerals "):
                line = sorted_list(line)
            zxid = ZXID.match(line)
            stamp = TIME.match(line)
            owner = OWNER.match(line)
            server = CONFIG_SERVER.match(line)
            if server:
                line = "%s=<address>:<port>:<port>:%s;<address>:<port>" % server.groups()
            elif CONFIG_VERSION.match(line):
                line = "version=<version>"
            elif zxid:
                line = "%s = z%d" % (zxid.group(1), rank[int(zxid.group(2), 16)])
            elif stamp:
                line = "%s = %s" % (stamp.group(1), canonical_time(stamp.group(2), now_ms))
            elif owner and int(owner.group(1), 16) != 0:
                session = sessions.setdefault(owner.group(1), len(sessions) + 1)
                line = "ephemeralOwner = session%d" % session
            out.append(line)
    return "\n".join(out)


def sorted_acl(block):
    """getAcl's entries (`'scheme,'id` and `: perms` lines) sorted, the
    lines after them (a Stat block) kept in place."""
    entries = []
    while len(entries) * 2 + 1 < len(block):
        scheme, perms = block[len(entries) * 2:len(entries) * 2 + 2]
        if not (scheme.startswith("'") and perms.startswith(": ")):
            break
        entries.append((scheme, perms))
    rest = block[len(entries) * 2:]
    return [line for entry in sorted(entries) for line in entry] + rest


def sorted_list(line):
    """`[b, a]` as `[a, b]`."""
    if line.startswith("[") and line.endswith("]") and len(line) > 2:
        return "[" + ", ".join(sorted(line[1:-1].split(", "))) + "]"
    return line


def zkcli_input(steps):
    """What zkCli reads: each command after its marker, then quit."""
    marked = ("get %s\n%s\n" % (MARKER_PATH % i, command) for i, command in enumerate(steps))
    return "".join(marked) + "quit\n"


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("input", "canonical"):
        print("usage: zkcli_transcript.py input|canonical", file=sys.stderr)
        return 2
    steps = commands()
    if sys.argv[1] == "input":
        sys.stdout.write(zkcli_input(steps))
        return 0
    output = sys.stdin.read()
    if not any(MARKER.match(line) for line in output.split("\n")):
        print(output, file=sys.stderr)
        print("zkCli ran no command: it printed no marker", file=sys.stderr)
        return 1
    print(canonical(steps, split_by_marker(output, len(steps))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
