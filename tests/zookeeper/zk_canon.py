"""Canonical printing for tests/zookeeper/transcript.py.

Why: two correct ZooKeeper servers differ in values that carry no meaning
for a client (zxid gaps, session ids, clock readings, the order of a
children list, the random root a run works under). This module prints
every answer with only those normalized, so that two servers' transcripts
can be compared line by line:

  * paths are relative to the run's root ("." is the root itself);
  * a zxid prints as z<rank>, its rank among all zxids the transcript saw,
    smallest first: equality and order stay, gaps and offsets do not;
  * ephemeralOwner prints as the name of the session it is (self, other,
    third...), 0, or "unknown";
  * ctime/mtime print as t=same|later|EARLIER (mtime against ctime) and
    clock=ok when both are within ten minutes of this machine's clock;
  * data prints as its bytes when short, else as its length and a digest.
Ranks need every zxid first, so lines are kept and printed at the end.
"""

import hashlib
import time

from kazoo.protocol.states import ZnodeStat


class Zxid:
    """A zxid seen in an answer; printed as its rank."""

    def __init__(self, value):
        self.value = value


class Transcript:
    """The lines of one run, with what is needed to print them."""

    def __init__(self, root):
        self.root = root
        self.lines = []
        self.zxids = set()
        self.sessions = {}  # session id -> name

    def name_session(self, session_id, name):
        self.sessions[session_id] = name

    def line(self, step, *parts):
        """Adds `step: parts...` (parts are str, Zxid or lists of them)."""
        flat = []
        for part in parts:
            flat.extend(part if isinstance(part, list) else [part])
        self.lines.append([step + ":"] + flat)

    def rel(self, path):
        if path is None:
            return "None"
        if path == self.root:
            return "."
        if path.startswith(self.root + "/"):
            return path[len(self.root) + 1:]
        return "OUTSIDE:" + path

    def zxid(self, value):
        self.zxids.add(value)
        return Zxid(value)

    def owner(self, session_id):
        if session_id == 0:
            return "0"
        return self.sessions.get(session_id, "unknown")

    def stat(self, st):
        """A ZnodeStat as parts: versions, sizes, owner, zxid ranks, times."""
        now = time.time() * 1000
        if st.mtime == st.ctime:
            order = "same"
        elif st.mtime > st.ctime:
            order = "later"
        else:
            order = "EARLIER"
        recent = all(abs(t - now) < 600_000 for t in (st.ctime, st.mtime))
        return [
            "{v=%d cv=%d av=%d len=%d kids=%d owner=%s"
            % (st.version, st.cversion, st.aversion, st.dataLength,
               st.numChildren, self.owner(st.ephemeralOwner)),
            "cz=", self.zxid(st.czxid), "mz=", self.zxid(st.mzxid),
            "pz=", self.zxid(st.pzxid),
            "t=%s clock=%s}" % (order, "ok" if recent else "off"),
        ]

    def data(self, value):
        if value is None:
            return "None"
        if len(value) <= 48:
            return repr(value)
        digest = hashlib.sha256(value).hexdigest()[:16]
        return "bytes(len=%d sha256=%s)" % (len(value), digest)

    def result(self, value):
        """Any answer kazoo gives, as parts."""
        if isinstance(value, BaseException):
            return "!" + type(value).__name__
        if isinstance(value, ZnodeStat):
            return self.stat(value)
        if value is None or isinstance(value, bool):
            return str(value)
        if isinstance(value, bytes):
            return self.data(value)
        if isinstance(value, str):
            return self.rel(value) if value.startswith("/") else value
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], ZnodeStat):
            first = value[0]
            head = self.children(first) if isinstance(first, list) else self.data(first)
            return [head] + self.stat(value[1])
        if isinstance(value, list):
            parts = ["["]
            for i, item in enumerate(value):
                parts.extend(self.flat(self.result(item)))
                parts.append("," if i + 1 < len(value) else "")
            return parts + ["]"]
        return "?" + type(value).__name__ + ":" + repr(value)

    def children(self, names):
        """A children list, sorted: ZooKeeper promises no order."""
        return "[" + ", ".join(sorted(names)) + "]"

    def event(self, event):
        if event is None:
            return "no event"
        return "event %s %s %s" % (event.type, event.state, self.rel(event.path))

    @staticmethod
    def flat(parts):
        return parts if isinstance(parts, list) else [parts]

    def render(self):
        """The transcript: zxids as ranks; a zxid, "," and "]" stick to
        the word before them, and a word to a "[" before it."""
        ranks = {z: i for i, z in enumerate(sorted(self.zxids))}
        out = []
        for parts in self.lines:
            text = ""
            for part in parts:
                zxid = isinstance(part, Zxid)
                word = "z%d" % ranks[part.value] if zxid else part
                if word == "":
                    continue
                sticky = zxid or word in (",", "]") or text.endswith("[")
                text += word if sticky or not text else " " + word
            out.append(text)
        return "\n".join(out)
