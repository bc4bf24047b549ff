"""One contender of kazoo's Election recipe, for the fault tests in
crates/cli/tests/zookeeper.rs.

Usage: contender.py HOSTS NAME

Prints one line per event, flushed at once, for the test to read:
  session 0x...          the session it holds
  state LOST|SUSPENDED|CONNECTED   kazoo's connection state changes
  leading NAME           it won the election (it then holds it forever)
"""

import sys
import time

from kazoo.client import KazooClient

hosts, name = sys.argv[1], sys.argv[2]
zk = KazooClient(hosts=hosts, timeout=4.0)
zk.add_listener(lambda state: print(f"state {state}", flush=True))
zk.start(timeout=30)
print(f"session {zk.client_id[0]:#x}", flush=True)


def lead():
    print(f"leading {name}", flush=True)
    while True:
        time.sleep(1)


zk.Election("/faults-election", name).run(lead)
