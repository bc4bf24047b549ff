//! Client requests that reach a follower, carried to the leader over the
//! peer connection instead of a second gRPC call (etcd's followers do the
//! same through Raft).
//!
//! - **Writes.** The follower wraps the command in an [`envelope`] naming
//!   itself and a request id, and sends it to the leader, which proposes it
//!   as is. When the follower applies that entry it answers its client from
//!   its own state machine: every member computes the same answer at the
//!   same index, so nothing needs to travel back.
//! - **Reads** (Raft thesis §6.4). The follower asks the leader for a read
//!   index; the leader confirms its leadership with a heartbeat round and
//!   names its commit index; the follower serves the read once it has
//!   applied that index.
//!
//! A forwarded write names the leader's term, and a leader proposes it only
//! in that term. Once the follower applies an entry of a later term, every
//! entry of the earlier term that will ever commit lies before it, so a
//! write still waiting never applies: its client gets "not applied" and
//! may send it again. So a leader's crash costs the clients of the other
//! members a retry, not an unknown outcome (etcd answers those "leader
//! changed", and ZooKeeper closes their connections). A write that stays
//! unanswered for [`FORWARD_TIMEOUT`] has an unknown outcome. Request ids
//! start from
//! the clock at boot, so an entry a previous incarnation forwarded, applied
//! again after a restart, never matches a request of this one.

use crate::client_error::ClientError;
use crate::effect::Answer;
use bellwether_core::{NodeId, Term};
use std::collections::BTreeMap;
use std::time::Duration;

/// Forwarded writes, reads and calls waiting at once, at most; past it a
/// write or read is answered "not the leader" and a call "busy", and the
/// runtime asks again (`EtcdBackend::propose` in the server).
pub const FORWARDED_MAX: usize = 16_384;
/// A forwarded request not answered within this is given up with an
/// unknown outcome (etcd's default request timeout is 5 s).
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(5);

/// First byte of an enveloped command. Commands of this project's state
/// machines start with a tag below it; a local command that happens to
/// start with it is enveloped too (with origin 0), so decoding is never
/// ambiguous.
const ENVELOPE_MARKER: u8 = 0xFE;
/// Marker, origin and request id.
const ENVELOPE_HEADER_BYTES: usize = 1 + 8 + 8;

/// `command` as forwarded by member `origin` under id `request`.
pub fn envelope(origin: NodeId, request: u64, command: &[u8]) -> Vec<u8> {
    wrap(origin.0, request, command)
}

/// `command` in an envelope naming `origin` (0: none, a local command)
/// and `request`.
fn wrap(origin: u64, request: u64, command: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ENVELOPE_HEADER_BYTES + command.len());
    out.push(ENVELOPE_MARKER);
    out.extend_from_slice(&origin.to_le_bytes());
    out.extend_from_slice(&request.to_le_bytes());
    out.extend_from_slice(command);
    out
}

/// A local command as it goes into the log: as is, unless it could be
/// mistaken for an envelope.
pub fn local_command(command: Vec<u8>) -> Vec<u8> {
    if command.first() == Some(&ENVELOPE_MARKER) {
        wrap(0, 0, &command)
    } else {
        command
    }
}

/// Splits a log entry's command into its forwarder (origin, request), if
/// any, and the state machine's command.
pub fn open(entry: &[u8]) -> (Option<(NodeId, u64)>, &[u8]) {
    if entry.first() != Some(&ENVELOPE_MARKER) || entry.len() < ENVELOPE_HEADER_BYTES {
        return (None, entry);
    }
    let origin = u64::from_le_bytes(entry[1..9].try_into().expect("8 bytes"));
    let request = u64::from_le_bytes(entry[9..17].try_into().expect("8 bytes"));
    let forwarded = (origin != 0).then_some((NodeId(origin), request));
    (forwarded, &entry[ENVELOPE_HEADER_BYTES..])
}

/// A request waiting for its leader.
struct Waiting<R> {
    /// The leader it was sent to.
    leader: NodeId,
    /// That leader's term: a write enters the log in no other.
    term: Term,
    /// When it was sent, on the member's clock.
    sent: Duration,
    /// Where the answer goes.
    reply: R,
}

/// Forwarded write ids a leader remembers per follower: more than a
/// follower forwards while one copy of a message could still be in flight.
pub const RECENT_PROPOSALS_MAX: usize = 4_096;

/// The latest ids seen, at most [`RECENT_PROPOSALS_MAX`], oldest first.
#[derive(Default)]
struct RecentIds {
    order: std::collections::VecDeque<u64>,
    set: std::collections::HashSet<u64>,
}

impl RecentIds {
    /// Records `id`; false if it is among the latest ids already.
    fn insert(&mut self, id: u64) -> bool {
        if !self.set.insert(id) {
            return false;
        }
        self.order.push_back(id);
        if self.order.len() > RECENT_PROPOSALS_MAX {
            let oldest = self.order.pop_front().expect("over the bound");
            self.set.remove(&oldest);
        }
        assert_eq!(self.order.len(), self.set.len(), "one entry per id");
        true
    }
}

/// One member's forwarded requests: as a follower, those it sent and waits
/// for; as a leader, the reads it confirms for followers. `W` and `R` are
/// where a write's and a read's answer go (see [`Answer`]).
pub struct Forwarding<W, R> {
    /// This member.
    me: NodeId,
    /// Next request id.
    next_request: u64,
    /// Writes sent to a leader, by request id.
    writes: BTreeMap<u64, Waiting<W>>,
    /// Read-index requests sent to a leader, by request id.
    reads: BTreeMap<u64, Waiting<R>>,
    /// Calls sent to another member's process, by request id (`leader`
    /// names the member called).
    calls: BTreeMap<u64, Waiting<W>>,
    /// Leader side: the core's read id of a follower's read → (follower,
    /// its request id).
    remote_reads: BTreeMap<u64, (NodeId, u64)>,
    /// The leader known at the last [`Forwarding::expire`].
    known_leader: Option<NodeId>,
    /// Leader side: the latest write request ids proposed for each
    /// follower (see [`Forwarding::first_sight`]).
    proposed: BTreeMap<NodeId, RecentIds>,
    /// BROKEN on purpose, for the simulator's controls: writes sent to a
    /// deposed leader are answered "not applied" as soon as another leader
    /// is known, though that leader's log may hold them.
    #[cfg(feature = "fault-injection")]
    pub(crate) not_applied_on_leader_change: bool,
}

/// Records `request`, sent to `leader` at `now`, waiting to answer `reply`.
fn wait<R>(
    requests: &mut BTreeMap<u64, Waiting<R>>,
    request: u64,
    (leader, term): (NodeId, Term),
    reply: R,
    now: Duration,
) {
    let waiting = Waiting {
        leader,
        term,
        sent: now,
        reply,
    };
    assert!(
        requests.insert(request, waiting).is_none(),
        "request ids are unique"
    );
}

/// Ids of the requests `stale` picks.
fn ids_where<R>(
    requests: &BTreeMap<u64, Waiting<R>>,
    stale: impl Fn(&Waiting<R>) -> bool,
) -> Vec<u64> {
    requests
        .iter()
        .filter(|(_, waiting)| stale(waiting))
        .map(|(id, _)| *id)
        .collect()
}

impl<W, R> Forwarding<W, R> {
    /// Nothing forwarded yet; ids start at `first_request`, which the
    /// runtime takes from the wall clock at boot (see the module doc).
    pub fn new(me: NodeId, first_request: u64) -> Self {
        Forwarding {
            me,
            next_request: first_request.max(1),
            writes: BTreeMap::new(),
            reads: BTreeMap::new(),
            calls: BTreeMap::new(),
            remote_reads: BTreeMap::new(),
            known_leader: None,
            proposed: BTreeMap::new(),
            #[cfg(feature = "fault-injection")]
            not_applied_on_leader_change: false,
        }
    }

    /// True when no write, read or call of this member's clients waits
    /// on another member, and no follower's read waits here.
    pub fn is_idle(&self) -> bool {
        self.writes.is_empty()
            && self.reads.is_empty()
            && self.calls.is_empty()
            && self.remote_reads.is_empty()
    }

    /// Writes of this member's clients waiting on the leader.
    pub fn writes_waiting(&self) -> usize {
        self.writes.len()
    }

    fn full(&self) -> bool {
        self.writes.len() + self.reads.len() + self.calls.len() >= FORWARDED_MAX
    }

    fn take_id(&mut self) -> u64 {
        let id = self.next_request;
        self.next_request += 1;
        id
    }

    /// Registers a write for `leader`, leading `term`; returns the request
    /// id and the enveloped command to send, or gives `reply` back when
    /// full.
    pub fn write(
        &mut self,
        (leader, term): (NodeId, Term),
        command: &[u8],
        reply: W,
        now: Duration,
    ) -> Result<(u64, Vec<u8>), W> {
        if self.full() {
            return Err(reply);
        }
        let request = self.take_id();
        if let Some((_, last)) = self.writes.last_key_value() {
            assert!(last.term <= term, "a member's term never goes back");
        }
        wait(&mut self.writes, request, (leader, term), reply, now);
        Ok((request, envelope(self.me, request, command)))
    }

    /// Registers a read barrier for `leader`; returns the request id, or
    /// gives `reply` back when full.
    pub fn read(&mut self, leader: NodeId, reply: R, now: Duration) -> Result<u64, R> {
        if self.full() {
            return Err(reply);
        }
        let request = self.take_id();
        wait(&mut self.reads, request, (leader, Term(0)), reply, now);
        Ok(request)
    }

    /// Registers a call for member `to`'s process; returns the request
    /// id, or gives `reply` back when full.
    pub fn call(&mut self, to: NodeId, reply: W, now: Duration) -> Result<u64, W> {
        if self.full() {
            return Err(reply);
        }
        let request = self.take_id();
        wait(&mut self.calls, request, (to, Term(0)), reply, now);
        Ok(request)
    }

    /// A call whose send failed, or that the called member refused: its
    /// reply and the member called, to answer otherwise.
    pub fn unsent_call(&mut self, request: u64) -> Option<(W, NodeId)> {
        self.calls.remove(&request).map(|c| (c.reply, c.leader))
    }

    /// The called member answered `request`: the reply waiting for it, if
    /// any still does.
    pub fn call_answered(&mut self, request: u64) -> Option<W> {
        self.calls.remove(&request).map(|c| c.reply)
    }

    /// The connection to `peer` was lost: calls waiting on it get
    /// "unreachable" (a call is asked again only by its caller, and the
    /// answer, if one comes, has no one to go to). Their answers go into
    /// `out`.
    pub fn peer_lost(&mut self, peer: NodeId, out: &mut Vec<Answer<W, R>>) {
        for id in ids_where(&self.calls, |c| c.leader == peer) {
            let call = self.calls.remove(&id).expect("listed");
            out.push(Answer::Write(
                call.reply,
                Err(ClientError::Unreachable { member: peer }),
            ));
        }
    }

    /// A write whose send failed: its reply, to answer otherwise.
    pub fn unsent_write(&mut self, request: u64) -> Option<W> {
        self.writes.remove(&request).map(|w| w.reply)
    }

    /// A read whose send failed: its reply, to answer otherwise.
    pub fn unsent_read(&mut self, request: u64) -> Option<R> {
        self.reads.remove(&request).map(|r| r.reply)
    }

    /// An applied entry carried `forwarded`: the reply waiting for it, if
    /// this member forwarded it in this incarnation.
    pub fn applied(&mut self, forwarded: Option<(NodeId, u64)>) -> Option<W> {
        let (origin, request) = forwarded?;
        if origin != self.me {
            return None;
        }
        self.writes.remove(&request).map(|w| w.reply)
    }

    /// An entry of `term` was applied: the writes sent in earlier terms
    /// and not applied by now never will be (see the module doc). Their
    /// answers, "not applied", go into `out`. Cheap when there are none:
    /// ids and terms grow together, so only the oldest are looked at.
    pub fn applied_term(&mut self, term: Term, out: &mut Vec<Answer<W, R>>) {
        while let Some(entry) = self.writes.first_entry() {
            if entry.get().term >= term {
                break;
            }
            out.push(Answer::Write(
                entry.remove().reply,
                Err(ClientError::NotApplied),
            ));
        }
    }

    /// The leader refused write `request`, naming the leader it knows:
    /// the answer its client gets, if it still waits.
    pub fn write_refused(
        &mut self,
        request: u64,
        leader: Option<NodeId>,
        busy: bool,
    ) -> Option<Answer<W, R>> {
        let write = self.writes.remove(&request)?;
        let error = if busy {
            ClientError::Busy
        } else {
            ClientError::not_leader(leader)
        };
        Some(Answer::Write(write.reply, Err(error)))
    }

    /// The leader confirmed read `request` at `index`: its reply, to
    /// release once `index` is applied here.
    pub fn read_confirmed(&mut self, request: u64) -> Option<R> {
        self.reads.remove(&request).map(|r| r.reply)
    }

    /// The leader could not confirm read `request`, naming the leader it
    /// knows.
    pub fn read_refused(&mut self, request: u64, leader: Option<NodeId>) -> Option<Answer<W, R>> {
        let read = self.reads.remove(&request)?;
        Some(Answer::Read(
            read.reply,
            Err(ClientError::not_leader(leader)),
        ))
    }

    /// Leader side: the core's read `id` serves follower `origin`'s
    /// `request`.
    pub fn serve_remote_read(&mut self, id: u64, origin: NodeId, request: u64) {
        assert!(
            self.remote_reads.insert(id, (origin, request)).is_none(),
            "read ids are unique"
        );
    }

    /// Leader side: the follower and request behind the core's read `id`.
    pub fn remote_read(&mut self, id: u64) -> Option<(NodeId, u64)> {
        self.remote_reads.remove(&id)
    }

    /// Answers what can no longer be answered normally: reads sent to a
    /// leader other than `leader` (when a leader is known), and requests
    /// older than [`FORWARD_TIMEOUT`]. Writes and calls get "timed out"
    /// (their outcome is unknown); reads get "not the leader" (safe to
    /// retry). A
    /// write sent to a deposed leader waits for an entry of a later term
    /// ([`Forwarding::applied_term`]), which tells whether it applied.
    /// Cheap when nothing changed: ids grow with time, so only the oldest
    /// requests are looked at unless the leader changed. The answers go
    /// into `out`.
    pub fn expire(&mut self, leader: Option<NodeId>, now: Duration, out: &mut Vec<Answer<W, R>>) {
        if let Some(current) = leader.filter(|l| Some(*l) != self.known_leader) {
            #[cfg(feature = "fault-injection")]
            if self.not_applied_on_leader_change {
                for id in ids_where(&self.writes, |w| w.leader != current) {
                    let write = self.writes.remove(&id).expect("listed");
                    out.push(Answer::Write(write.reply, Err(ClientError::NotApplied)));
                }
            }
            for id in ids_where(&self.reads, |r| r.leader != current) {
                let read = self.reads.remove(&id).expect("listed");
                out.push(Answer::Read(
                    read.reply,
                    Err(ClientError::not_leader(leader)),
                ));
            }
        }
        if leader.is_some() {
            self.known_leader = leader;
        }
        let old = |sent: Duration| now.saturating_sub(sent) >= FORWARD_TIMEOUT;
        while let Some(entry) = self.writes.first_entry() {
            if !old(entry.get().sent) {
                break;
            }
            out.push(Answer::Write(
                entry.remove().reply,
                Err(ClientError::TimedOut),
            ));
        }
        while let Some(entry) = self.reads.first_entry() {
            if !old(entry.get().sent) {
                break;
            }
            let reply = entry.remove().reply;
            out.push(Answer::Read(reply, Err(ClientError::not_leader(leader))));
        }
        while let Some(entry) = self.calls.first_entry() {
            if !old(entry.get().sent) {
                break;
            }
            let reply = entry.remove().reply;
            out.push(Answer::Write(reply, Err(ClientError::TimedOut)));
        }
    }

    /// Leader side: true the first time follower `origin`'s write
    /// `request` arrives, so it is proposed once: proposing a copy would
    /// apply the write twice, the second time after writes that came
    /// later. The peer connection delivers in order and at most once, so a
    /// copy should never come; this holds even on a network that
    /// duplicates. It remembers the last [`RECENT_PROPOSALS_MAX`] ids per
    /// follower, compared exactly: a follower restarted with its clock
    /// stepped back (smaller ids) is not refused.
    pub fn first_sight(&mut self, origin: NodeId, request: u64) -> bool {
        if self.proposed.len() >= FORWARDED_MAX && !self.proposed.contains_key(&origin) {
            self.proposed.clear();
        }
        self.proposed.entry(origin).or_default().insert(request)
    }

    /// Leader side: the connection to `origin` broke; what it proposed
    /// before is forgotten.
    pub fn forget_origin(&mut self, origin: NodeId) {
        self.proposed.remove(&origin);
    }

    /// The state machine was replaced by a snapshot: writes it may cover
    /// can no longer be answered from an apply. Their answers go into `out`.
    pub fn restored(&mut self, out: &mut Vec<Answer<W, R>>) {
        for (_, write) in std::mem::take(&mut self.writes) {
            out.push(Answer::Write(write.reply, Err(ClientError::TimedOut)));
        }
    }

    /// Leader side: reads this member no longer leads for.
    pub fn forget_remote_reads(&mut self) {
        self.remote_reads.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_name_their_forwarder_and_local_commands_stay_unambiguous() {
        let wrapped = envelope(NodeId(3), 77, b"\x01put");
        assert_eq!(wrapped[1..9], 3u64.to_le_bytes(), "the origin's number");
        assert_eq!(open(&wrapped), (Some((NodeId(3), 77)), &b"\x01put"[..]));
        assert_eq!(open(b"\x01put"), (None, &b"\x01put"[..]));
        let odd = local_command(vec![ENVELOPE_MARKER, 1, 2]);
        assert_eq!(open(&odd), (None, &[ENVELOPE_MARKER, 1, 2][..]));
        assert_eq!(local_command(b"\x01x".to_vec()), b"\x01x".to_vec());
    }

    /// A member's forwarding whose answers go to numbered clients.
    fn forwarding() -> Forwarding<u32, u32> {
        Forwarding::new(NodeId(2), 1_000)
    }

    #[test]
    fn a_write_is_answered_once_by_the_apply_that_carries_it() {
        let mut forwarding = forwarding();
        let (request, command) = forwarding
            .write((NodeId(1), Term(2)), b"\x01put", 7, Duration::ZERO)
            .ok()
            .unwrap();
        let (forwarded, inner) = open(&command);
        assert_eq!(inner, b"\x01put");
        // Another member's forward, or a stale id, answers nobody.
        assert!(forwarding.applied(Some((NodeId(3), request))).is_none());
        assert!(forwarding.applied(Some((NodeId(2), request + 1))).is_none());
        assert_eq!(forwarding.applied(forwarded), Some(7), "client 7 waits");
        assert!(forwarding.applied(forwarded).is_none(), "answered once");
    }

    #[test]
    fn a_write_still_waiting_when_a_later_terms_entry_applies_is_known_not_applied() {
        let mut forwarding = forwarding();
        let now = Duration::from_secs(1);
        for (reply, term) in [(7, 2), (8, 2), (9, 3)] {
            forwarding
                .write((NodeId(1), Term(term)), b"\x01put", reply, now)
                .ok()
                .unwrap();
        }
        forwarding.read(NodeId(1), 10, now).ok().unwrap();
        let mut answers = Vec::new();
        forwarding.applied_term(Term(2), &mut answers);
        assert!(answers.is_empty(), "term 2 may still apply them");
        // A new leader: reads go at once (safe to retry); writes wait for
        // what the log says.
        forwarding.expire(Some(NodeId(3)), now, &mut answers);
        assert_eq!(
            answers,
            [Answer::Read(
                10,
                Err(ClientError::not_leader(Some(NodeId(3))))
            )]
        );
        answers.clear();
        forwarding.applied_term(Term(3), &mut answers);
        assert_eq!(
            answers,
            [
                Answer::Write(7, Err(ClientError::NotApplied)),
                Answer::Write(8, Err(ClientError::NotApplied)),
            ],
            "term 2's writes never apply once an entry of term 3 has"
        );
        answers.clear();
        forwarding.applied_term(Term(4), &mut answers);
        assert_eq!(answers, [Answer::Write(9, Err(ClientError::NotApplied))]);
        assert!(forwarding.is_idle());
    }

    #[test]
    #[should_panic(expected = "a member's term never goes back")]
    fn writes_are_registered_in_terms_that_never_go_back() {
        let mut forwarding = forwarding();
        let _ = forwarding.write((NodeId(1), Term(3)), b"x", 1, Duration::ZERO);
        let _ = forwarding.write((NodeId(1), Term(2)), b"x", 2, Duration::ZERO);
    }

    #[test]
    fn a_copy_of_a_forwarded_write_is_proposed_once() {
        let mut leader = forwarding();
        assert!(leader.first_sight(NodeId(1), 5));
        assert!(!leader.first_sight(NodeId(1), 5), "a copy");
        assert!(leader.first_sight(NodeId(1), 4), "overtaken, not a copy");
        assert!(leader.first_sight(NodeId(3), 5), "another follower's ids");
        for id in 100..100 + RECENT_PROPOSALS_MAX as u64 {
            assert!(leader.first_sight(NodeId(1), id));
        }
        assert!(leader.first_sight(NodeId(1), 5), "forgotten past the bound");
        assert!(!leader.first_sight(NodeId(1), 5));
        leader.forget_origin(NodeId(1));
        assert!(
            leader.first_sight(NodeId(1), 5),
            "forgotten with its connection"
        );
    }

    #[test]
    fn a_call_is_answered_once_and_fails_fast_when_its_member_is_lost() {
        let mut forwarding = forwarding();
        let answered = forwarding.call(NodeId(1), 7, Duration::ZERO).unwrap();
        let lost = forwarding.call(NodeId(3), 8, Duration::ZERO).unwrap();
        let kept = forwarding.call(NodeId(1), 9, Duration::ZERO).unwrap();
        assert_eq!(forwarding.call_answered(answered), Some(7));
        assert_eq!(forwarding.call_answered(answered), None, "answered once");
        let mut answers = Vec::new();
        forwarding.peer_lost(NodeId(3), &mut answers);
        assert_eq!(
            answers,
            [Answer::Write(
                8,
                Err(ClientError::Unreachable { member: NodeId(3) })
            )]
        );
        assert_eq!(forwarding.call_answered(lost), None);
        answers.clear();
        forwarding.expire(Some(NodeId(1)), FORWARD_TIMEOUT, &mut answers);
        assert_eq!(answers, [Answer::Write(9, Err(ClientError::TimedOut))]);
        assert_eq!(forwarding.call_answered(kept), None);
        assert!(forwarding.is_idle());
    }

    #[test]
    fn old_requests_time_out_and_the_table_is_bounded() {
        let mut forwarding = forwarding();
        forwarding
            .write((NodeId(1), Term(2)), b"\x01put", 7, Duration::ZERO)
            .ok()
            .unwrap();
        let mut answers = Vec::new();
        forwarding.expire(Some(NodeId(1)), FORWARD_TIMEOUT, &mut answers);
        assert_eq!(answers, [Answer::Write(7, Err(ClientError::TimedOut))]);
        for client in 0..FORWARDED_MAX as u32 {
            assert!(forwarding.read(NodeId(1), client, Duration::ZERO).is_ok());
        }
        let full = forwarding.write((NodeId(1), Term(2)), b"x", 9, Duration::ZERO);
        assert!(full.is_err(), "full");
    }
}
