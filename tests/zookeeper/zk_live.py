"""The scenario steps of tests/zookeeper/transcript.py that involve time
or more than one session: watches, a session's ephemerals going with it,
sequence counters, kazoo's Lock and Election recipes, a 100 KiB value and
the final tree.

Why separate: these steps wait for events, so each wait is bounded and an
absent event is printed as an answer ("no event") rather than hanging.
Waits on another session's write use sync() first, as a ZooKeeper client
must to see it.
"""

import queue
import threading
import time

# How long a watch event may take to arrive, and how long a step waits to
# show that no (further) event comes.
EVENT_WAIT = 10.0
QUIET_WAIT = 0.5


class Watch:
    """A watch callback that queues the events it gets."""

    def __init__(self):
        self.events = queue.Queue()

    def __call__(self, event):
        self.events.put(event)

    def next(self):
        try:
            return self.events.get(timeout=EVENT_WAIT)
        except queue.Empty:
            return None

    def quiet(self):
        """None, or an event that came though none should."""
        try:
            return self.events.get(timeout=QUIET_WAIT)
        except queue.Empty:
            return None


def wait_for(what, predicate, timeout=EVENT_WAIT):
    """Polls predicate until true; fails the run after timeout."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("waited %.0f s for %s" % (timeout, what))
        time.sleep(0.05)


def watches(run, c1):
    p, s, t = run.path, run.step, run.t
    s("create w", lambda: c1.create(p("w"), b"watched"))
    w = Watch()
    s("get w with data watch", lambda: c1.get(p("w"), watch=w))
    s("set w", lambda: c1.set(p("w"), b"changed"))
    run.note("data watch after set", t.event(w.next()))
    s("set w again", lambda: c1.set(p("w"), b"again"))
    run.note("data watch is one-shot", t.event(w.quiet()))

    w = Watch()
    s("get w with data watch", lambda: c1.get(p("w"), watch=w))
    s("delete w", lambda: c1.delete(p("w")))
    run.note("data watch after delete", t.event(w.next()))

    w = Watch()
    s("exists later with watch", lambda: c1.exists(p("later"), watch=w))
    s("create later", lambda: c1.create(p("later"), b"now"))
    run.note("exists watch after create", t.event(w.next()))
    w = Watch()
    s("exists later with watch", lambda: c1.exists(p("later"), watch=w))
    s("set later", lambda: c1.set(p("later"), b"changed"))
    run.note("exists watch after set", t.event(w.next()))

    s("create kids", lambda: c1.create(p("kids"), b""))
    w = Watch()
    s("get_children kids with watch", lambda: run.kids(c1, p("kids"), watch=w))
    s("create kids/k1", lambda: c1.create(p("kids/k1"), b"k1"))
    run.note("child watch after child create", t.event(w.next()))
    w = Watch()
    s("get_children kids with watch", lambda: run.kids(c1, p("kids"), watch=w))
    s("set kids/k1", lambda: c1.set(p("kids/k1"), b"k1 changed"))
    s("set kids", lambda: c1.set(p("kids"), b"parent changed"))
    run.note("child watch ignores data changes", t.event(w.quiet()))
    s("delete kids/k1", lambda: c1.delete(p("kids/k1")))
    run.note("child watch after child delete", t.event(w.next()))
    w = Watch()
    data = Watch()
    s("get_children kids with watch", lambda: run.kids(c1, p("kids"), watch=w))
    s("get kids with data watch", lambda: c1.get(p("kids"), watch=data))
    s("delete kids", lambda: c1.delete(p("kids")))
    run.note("child watch after delete of its node", t.event(w.next()))
    run.note("data watch after delete of its node", t.event(data.next()))


def sessions(run, c1):
    p, s, t = run.path, run.step, run.t
    s("create sess", lambda: c1.create(p("sess"), b"s"))
    c2 = run.connect("other")
    s("other: create sess/mine ephemeral",
      lambda: c2.create(p("sess/mine"), b"mine", ephemeral=True))
    s("other: create sess/seq- ephemeral-sequential",
      lambda: c2.create(p("sess/seq-"), b"q", ephemeral=True, sequence=True))
    s("other: create sess/kept", lambda: c2.create(p("sess/kept"), b"kept"))
    s("other: exists e (self's ephemeral)", lambda: c2.exists(p("e")))
    s("sync sess", lambda: c1.sync(p("sess")))
    s("exists sess/mine (other's ephemeral)", lambda: c1.exists(p("sess/mine")))
    w = Watch()
    s("get_children sess with watch", lambda: run.kids(c1, p("sess"), watch=w))
    run.current = "other: stop"
    c2.stop()
    c2.close()
    run.note("other: stopped", "ok")
    run.note("child watch after other's session closed", t.event(w.next()))
    s("sync sess", lambda: c1.sync(p("sess")))
    s("get_children sess after other closed",
      lambda: c1.get_children(p("sess"), include_data=True))
    s("exists sess/mine after other closed", lambda: c1.exists(p("sess/mine")))
    s("get sess/kept after other closed", lambda: c1.get(p("sess/kept")))


def sequence_numbers(run, c1):
    p, s = run.path, run.step
    s("create seq", lambda: c1.create(p("seq"), b""))
    first = s("create seq/n- #1", lambda: c1.create(p("seq/n-"), sequence=True))
    second = s("create seq/n- #2", lambda: c1.create(p("seq/n-"), sequence=True))
    s("delete seq/n- #1", lambda: c1.delete(first))
    s("delete seq/n- #2", lambda: c1.delete(second))
    s("create seq/n- after deletes", lambda: c1.create(p("seq/n-"), sequence=True))
    s("create seq/plain", lambda: c1.create(p("seq/plain")))
    s("create seq/n- after a plain create", lambda: c1.create(p("seq/n-"), sequence=True))
    s("delete seq/plain", lambda: c1.delete(p("seq/plain")))
    s("create seq/m- ephemeral-sequential",
      lambda: c1.create(p("seq/m-"), ephemeral=True, sequence=True))
    s("create seq/n- under a missing parent",
      lambda: c1.create(p("seq/plain/n-"), sequence=True))
    s("create seq/n- once more", lambda: c1.create(p("seq/n-"), sequence=True))
    # A plain node squatting on the next sequential name: the sequential
    # create collides with it, and the counter does not move on its own.
    s("create seq/n-0000000008 (plain)", lambda: c1.create(p("seq/n-0000000008")))
    s("create seq/n- colliding", lambda: c1.create(p("seq/n-"), sequence=True))
    s("create seq/n- colliding again", lambda: c1.create(p("seq/n-"), sequence=True))
    s("delete seq/n-0000000008", lambda: c1.delete(p("seq/n-0000000008")))
    s("create seq/n- after the collision", lambda: c1.create(p("seq/n-"), sequence=True))
    s("get_children seq", lambda: c1.get_children(p("seq"), include_data=True))


def recipes(run, c1):
    """Lock and Election between self and a third session; the order of
    what each side did is the answer, so a lock that lets two in shows."""
    p, s = run.path, run.step
    c3 = run.connect("third")
    order = []
    order_lock = threading.Lock()

    def did(what):
        with order_lock:
            order.append(what)

    lock1 = c1.Lock(p("lock"), "self")
    lock3 = c3.Lock(p("lock"), "third")
    run.current = "lock: self acquires"
    did("self acquired" if lock1.acquire(timeout=EVENT_WAIT) else "self timed out")

    def contend():
        if lock3.acquire(timeout=3 * EVENT_WAIT):
            did("third acquired")
            lock3.release()
            did("third released")
        else:
            did("third timed out")

    third = threading.Thread(target=contend, daemon=True)
    third.start()
    run.current = "lock: third waits"
    wait_for("two lock contenders", lambda: len(lock1.contenders()) == 2)
    s("lock contenders", lock1.contenders)
    time.sleep(QUIET_WAIT)
    did("self releasing")
    lock1.release()
    third.join(timeout=4 * EVENT_WAIT)
    run.note("lock order", ", ".join(order))
    s("get_children lock after release", lambda: run.kids(c1, p("lock")))

    order.clear()
    seen = []
    election1 = c1.Election(p("election"), "self")
    election3 = c3.Election(p("election"), "third")
    third = threading.Thread(target=lambda: election3.run(did, "third leads"), daemon=True)

    def lead():
        did("self leads")
        third.start()
        wait_for("two election contenders", lambda: len(election1.contenders()) == 2)
        seen.append(election1.contenders())
        time.sleep(QUIET_WAIT)
        did("self steps down")

    run.current = "election"
    election1.run(lead)
    third.join(timeout=4 * EVENT_WAIT)
    if third.is_alive():
        election3.cancel()
        did("third never led")
    run.note("election contenders while self led", t_list(seen))
    run.note("election order", ", ".join(order))
    s("election contenders after", election1.contenders)


def t_list(lists):
    return "; ".join(",".join(names) for names in lists) or "none"


def big_value(run, c1):
    p, s = run.path, run.step
    value = bytes((i * 7 + i // 251) % 256 for i in range(100 * 1024))
    s("create big (100 KiB)", lambda: c1.create(p("big"), value))
    s("get big", lambda: c1.get(p("big")))
    s("set big (100 KiB + 1, reversed)", lambda: c1.set(p("big"), value[::-1] + b"!"))
    s("get big after set", lambda: c1.get(p("big")))


def final_tree(run, c1):
    """Every node left under the root with its stat; then the first
    session closes and a new one sees its ephemerals gone and removes
    the root."""
    s, t = run.step, run.t

    def walk(path):
        run.current = "tree " + t.rel(path)
        data, stat = c1.get(path)
        t.line("tree " + t.rel(path), t.data(data), t.stat(stat))
        for child in sorted(c1.get_children(path)):
            walk(path + "/" + child)

    walk(run.root)
    run.current = "self: stop"
    c1.stop()
    c1.close()
    run.note("self: stopped", "ok")
    c4 = run.connect("fourth")
    s("fourth: get_children root", lambda: run.kids(c4, run.root))
    s("fourth: get_children seq", lambda: run.kids(c4, run.path("seq")))
    s("fourth: delete root recursively", lambda: c4.delete(run.root, recursive=True))
    s("fourth: exists root", lambda: c4.exists(run.root))
