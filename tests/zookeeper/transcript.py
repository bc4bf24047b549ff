"""A fixed ZooKeeper scenario, printed as a canonical transcript.

Why: bellwether serves ZooKeeper's client protocol, and the surest check
that it answers as ZooKeeper does is to run the same client steps against
both and compare the answers line by line (crates/cli/tests/zookeeper.rs
does, against Apache ZooKeeper 3.8). Usage, with kazoo 2.10:

    python tests/zookeeper/transcript.py HOST:PORT

Everything happens under a fresh root /bw-transcript-<random>, so the
server's other contents never matter, and the root is removed at the end.
One line per step goes to stdout (zk_canon.py says what is normalized).
A kazoo error a step gets is its answer ("!NoNodeError"); anything else
(lost connection, a watch or recipe that hangs, a bug here) aborts: the
transcript so far is printed with "ABORTED at step ..." and the exit
status is 1.
"""

import logging
import secrets
import sys
import time
import traceback

from kazoo.client import KazooClient
from kazoo.exceptions import (
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    OperationTimeoutError,
    SessionExpiredError,
)

from kazoo.security import make_acl, make_digest_acl

from zk_canon import Transcript
import zk_live

# Errors that mean the session or connection is gone: the run cannot go on.
FATAL = (ConnectionClosedError, ConnectionLoss, OperationTimeoutError, SessionExpiredError)


class Run:
    """The server, the transcript and the sessions of one run."""

    def __init__(self, hosts, transcript):
        self.hosts = hosts
        self.t = transcript
        self.root = transcript.root
        self.current = "start"
        self.clients = []

    def path(self, relative):
        return self.root + "/" + relative if relative else self.root

    def connect(self, name):
        """A new session, known in owners as `name`."""
        self.current = "connect " + name
        client = KazooClient(hosts=self.hosts, timeout=10.0)
        self.clients.append(client)
        client.start(timeout=20)
        self.t.name_session(client.client_id[0], name)
        return client

    def step(self, name, fn):
        """Runs fn, prints its answer (or the kazoo error) as `name`.
        Steps start at least 5 ms apart, so that a write's mtime differs
        from the ctime an earlier step gave (one transaction has one time,
        and that must show)."""
        self.current = name
        time.sleep(0.005)
        try:
            value = fn()
        except FATAL:
            raise
        except KazooException as error:
            value = error
        self.t.line(name, self.t.result(value))
        return value

    @staticmethod
    def kids(client, path, **options):
        """get_children, sorted: ZooKeeper promises no order."""
        return sorted(client.get_children(path, **options))

    def note(self, name, *parts):
        self.current = name
        self.t.line(name, *parts)

    def close_all(self):
        for client in self.clients:
            try:
                client.stop()
                client.close()
            except Exception:  # closing what may already be closed
                pass


def plain_operations(run, c1):
    p = run.path
    s = run.step
    s("create persistent", lambda: c1.create(p("p"), b"persistent"))
    s("create ephemeral", lambda: c1.create(p("e"), b"ephemeral", ephemeral=True))
    s("create persistent-sequential", lambda: c1.create(p("ps-"), b"ps", sequence=True))
    s("create ephemeral-sequential",
      lambda: c1.create(p("es-"), b"es", ephemeral=True, sequence=True))
    s("create empty data", lambda: c1.create(p("empty")))
    s("create existing", lambda: c1.create(p("p"), b"again"))
    s("create existing ephemeral", lambda: c1.create(p("e"), ephemeral=True))
    s("create missing parent", lambda: c1.create(p("missing/child"), b"x"))
    s("create child of ephemeral", lambda: c1.create(p("e/child"), b"x"))
    s("get persistent", lambda: c1.get(p("p")))
    s("get ephemeral", lambda: c1.get(p("e")))
    s("get persistent-sequential", lambda: c1.get(p("ps-0000000002")))
    s("get empty data", lambda: c1.get(p("empty")))
    s("get missing", lambda: c1.get(p("nothing")))
    s("set right version", lambda: c1.set(p("p"), b"v1", version=0))
    s("set wrong version", lambda: c1.set(p("p"), b"v2", version=0))
    s("set version -1", lambda: c1.set(p("p"), b"v2", version=-1))
    s("set missing", lambda: c1.set(p("nothing"), b"x"))
    s("set ephemeral to empty", lambda: c1.set(p("e"), b""))
    s("get after sets", lambda: c1.get(p("p")))
    s("exists present", lambda: c1.exists(p("p")))
    s("exists ephemeral", lambda: c1.exists(p("e")))
    s("exists missing", lambda: c1.exists(p("nothing")))
    s("exists root", lambda: c1.exists(run.root))

    s("create dir", lambda: c1.create(p("dir"), b"d"))
    for child in ("c", "a", "b"):
        s("create dir/" + child, lambda: c1.create(p("dir/" + child), child.encode()))
    s("create dir/a/deep", lambda: c1.create(p("dir/a/deep"), b"deep"))
    s("get_children dir", lambda: run.kids(c1, p("dir")))
    s("get_children dir with data", lambda: c1.get_children(p("dir"), include_data=True))
    s("get_children leaf", lambda: run.kids(c1, p("dir/b")))
    s("get_children missing", lambda: run.kids(c1, p("nothing")))
    s("delete wrong version", lambda: c1.delete(p("dir/b"), version=5))
    s("delete right version", lambda: c1.delete(p("dir/b"), version=0))
    s("delete with children", lambda: c1.delete(p("dir")))
    s("delete missing", lambda: c1.delete(p("dir/b")))
    s("delete version -1", lambda: c1.delete(p("dir/c"), version=-1))
    s("exists dir after deletes", lambda: c1.exists(p("dir")))
    s("get_children dir after deletes", lambda: c1.get_children(p("dir"), include_data=True))


def transactions(run, c1):
    p = run.path
    s = run.step
    s("create tx-del", lambda: c1.create(p("tx-del"), b"doomed"))

    def succeeding():
        tx = c1.transaction()
        tx.create(p("tx"), b"t0")
        tx.set_data(p("tx"), b"t1", version=0)
        tx.set_data(p("p"), b"tx", version=2)
        tx.check(p("p"), 3)
        tx.create(p("txs-"), b"s", sequence=True)
        tx.delete(p("tx-del"))
        return tx.commit()

    s("transaction create+set+set+check+create-seq+delete", succeeding)
    s("get tx after transaction", lambda: c1.get(p("tx")))
    s("get p after transaction", lambda: c1.get(p("p")))
    s("exists tx-del after transaction", lambda: c1.exists(p("tx-del")))

    def failing_check():
        tx = c1.transaction()
        tx.create(p("tx2"), b"no")
        tx.check(p("p"), 99)
        tx.set_data(p("p"), b"no")
        tx.delete(p("tx"))
        return tx.commit()

    s("transaction failing at check", failing_check)

    def failing_create():
        tx = c1.transaction()
        tx.set_data(p("p"), b"no")
        tx.create(p("p"), b"exists")
        tx.delete(p("tx"))
        return tx.commit()

    s("transaction failing at create", failing_create)

    def failing_last():
        tx = c1.transaction()
        tx.create(p("tx3"), b"no")
        tx.delete(p("tx"))
        tx.create(p("nowhere/tx4"), b"no")
        return tx.commit()

    s("transaction failing at last op", failing_last)

    def failing_delete():
        tx = c1.transaction()
        tx.delete(p("dir"))
        tx.create(p("tx5"), b"no")
        return tx.commit()

    s("transaction failing at delete", failing_delete)
    s("exists tx2 after failures", lambda: c1.exists(p("tx2")))
    s("exists tx3 after failures", lambda: c1.exists(p("tx3")))
    s("get p after failures", lambda: c1.get(p("p")))
    s("get tx after failures", lambda: c1.get(p("tx")))


def acls(run, c1):
    """Digest, auth and ip ACLs: who may read, write, create, delete and
    see the ACL, with and without `addauth`."""
    p = run.path
    s = run.step
    bob_all = make_digest_acl("bob", "secret", all=True)

    def acl_of(client, path):
        entries, _ = client.get_acls(path)
        return ["%d %s %s" % (a.perms, a.id.scheme, a.id.id) for a in entries]

    s("create with bob's digest acl", lambda: c1.create(p("sec"), b"s", acl=[bob_all]))
    s("get without auth", lambda: c1.get(p("sec")))
    s("get_acls without auth", lambda: acl_of(c1, p("sec")))
    s("set without auth", lambda: c1.set(p("sec"), b"x"))
    s("create child without auth", lambda: c1.create(p("sec/c")))
    s("exists without auth", lambda: c1.exists(p("sec")))
    s("create with auth acl, not authenticated",
      lambda: c1.create(p("bad"), acl=[make_acl("auth", "", all=True)]))
    s("create with a bad world id",
      lambda: c1.create(p("bad"), acl=[make_acl("world", "someone", all=True)]))
    bob = run.connect("bob")
    s("bob: addauth digest", lambda: bob.add_auth("digest", "bob:secret"))
    s("bob: get", lambda: bob.get(p("sec")))
    s("bob: get_acls", lambda: acl_of(bob, p("sec")))
    s("bob: set", lambda: bob.set(p("sec"), b"bob's"))
    s("bob: create child with auth acl",
      lambda: bob.create(p("sec/c"), b"c", acl=[make_acl("auth", "", read=True, delete=True)]))
    s("bob: get_acls of child", lambda: acl_of(bob, p("sec/c")))
    s("bob: set child without write", lambda: bob.set(p("sec/c"), b"x"))
    s("bob: delete child", lambda: bob.delete(p("sec/c")))
    s("delete bob's node without auth", lambda: c1.delete(p("sec")))
    s("create with ip acl", lambda: c1.create(p("ip"), b"i",
                                             acl=[make_acl("ip", "127.0.0.1", all=True)]))
    s("get ip-secured from 127.0.0.1", lambda: c1.get(p("ip")))
    s("create with another ip's acl", lambda: c1.create(p("ip2"), b"j",
                                                        acl=[make_acl("ip", "10.1.2.3", all=True)]))
    s("get another ip's node", lambda: c1.get(p("ip2")))
    s("delete ip nodes", lambda: [c1.delete(p("ip")), c1.delete(p("ip2"))])


def scenario(run):
    c1 = run.connect("self")
    run.step("create root", lambda: c1.create(run.root, b"transcript"))
    plain_operations(run, c1)
    transactions(run, c1)
    acls(run, c1)
    zk_live.watches(run, c1)
    zk_live.sessions(run, c1)
    zk_live.sequence_numbers(run, c1)
    zk_live.recipes(run, c1)
    zk_live.big_value(run, c1)
    zk_live.final_tree(run, c1)


def main():
    if len(sys.argv) != 2:
        print("usage: transcript.py HOST:PORT", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    transcript = Transcript("/bw-transcript-" + secrets.token_hex(6))
    run = Run(sys.argv[1], transcript)
    status = 0
    try:
        scenario(run)
    except Exception as error:  # anything unexpected ends the run
        traceback.print_exc()
        print("transcript aborted at step %r: %r" % (run.current, error), file=sys.stderr)
        transcript.line("ABORTED at step " + run.current, type(error).__name__)
        status = 1
    finally:
        run.close_all()
    print(transcript.render())
    return status


if __name__ == "__main__":
    sys.exit(main())
