//! [`RaftNode`]: one member's Raft election state machine, and the term rules
//! every message goes through (paper §5.1) before it reaches a role handler.
//!
//! Role-specific behaviour lives beside this file: `election.rs` (followers,
//! pre-candidates and candidates) and `leader.rs` (heartbeats, CheckQuorum,
//! transfer and priority).

use super::config::RaftConfig;
use super::durable::{HardState, RaftDurable};
use super::log::RaftLog;
use super::message::RaftMessage;
use super::progress::Progress;
use crate::protocol::{Envelope, Protocol, Ready, Role, Status};
use crate::rng::Rng;
use crate::types::{LogIndex, NodeId, Term};
use std::collections::BTreeMap;

/// At most this many messages per peer may wait in the outbox between two
/// calls to `ready()`. A runtime that drains after every input never comes
/// close; the bound turns a runtime that forgets to drain into a loud crash
/// instead of unbounded memory.
pub const OUTBOX_MESSAGES_PER_PEER_MAX: usize = 64;

/// A leadership transfer under way (thesis §3.10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// The member that should become leader.
    pub target: NodeId,
    /// Leader-local tick at which the transfer began; it is abandoned after
    /// one minimum election timeout.
    pub started_tick: u64,
    /// Whether TimeoutNow has been sent already (it is sent once).
    pub timeout_now_sent: bool,
}

/// One Raft member. Build it with [`Protocol::new`]; drive it with `tick`,
/// `step` and `peer_unreachable`; drain `ready()` after each call.
#[derive(Debug)]
pub struct RaftNode {
    /// Settings shared by the cluster.
    pub(super) config: RaftConfig,
    /// This member.
    pub(super) id: NodeId,
    /// All voting members, sorted, including `id`.
    pub(super) voters: Vec<NodeId>,
    /// The only source of randomness: election timeouts.
    pub(super) rng: Rng,
    /// Persistent: latest term seen.
    pub(super) term: Term,
    /// Persistent: vote cast in `term`.
    pub(super) voted_for: Option<NodeId>,
    /// Persistent: the log, compared in elections.
    pub(super) log: RaftLog,
    /// Term or vote changed since the last `ready()`; must be persisted
    /// before the messages produced alongside it are sent.
    pub(super) durable_dirty: bool,
    /// Current role.
    pub(super) role: Role,
    /// The leader of `term` as far as this node knows.
    pub(super) leader: Option<NodeId>,
    /// Local logical clock, one per tick. Never leaves the node: other nodes'
    /// clocks may run at other rates.
    pub(super) now_tick: u64,
    /// Ticks since the election timer was last reset.
    pub(super) election_elapsed_ticks: u64,
    /// Current randomized election timeout in
    /// `[election_ticks_min, 2 * election_ticks_min)`.
    pub(super) election_timeout_ticks: u64,
    /// Local tick at which the leader was last heard from (stickiness).
    pub(super) leader_contact_tick: Option<u64>,
    /// The transport said the connection to `leader` broke; stickiness no
    /// longer protects that leader from this node's point of view.
    pub(super) leader_lost: bool,
    /// Local tick at which a hint-triggered PreVote will start.
    pub(super) hint_campaign_tick: Option<u64>,
    /// Answers collected by the current (pre-)campaign: voter → granted.
    pub(super) votes: BTreeMap<NodeId, bool>,
    /// Leader only: ticks since the last heartbeat broadcast.
    pub(super) heartbeat_elapsed_ticks: u64,
    /// Leader only: what it knows of each follower.
    pub(super) progress: BTreeMap<NodeId, Progress>,
    /// Leader only: a leadership transfer under way.
    pub(super) transfer: Option<Transfer>,
    /// Messages produced since the last `ready()`.
    pub(super) outbox: Vec<Envelope<RaftMessage>>,
}

impl RaftNode {
    /// The persistent state, as the runtime should have stored it.
    pub fn durable(&self) -> RaftDurable {
        RaftDurable {
            hard_state: self.hard_state(),
            log: self.log.clone(),
        }
    }

    /// Current term and vote.
    pub fn hard_state(&self) -> HardState {
        HardState {
            term: self.term,
            voted_for: self.voted_for,
            commit: LogIndex(0),
        }
    }

    /// The log this node compares in elections.
    pub fn log(&self) -> &RaftLog {
        &self.log
    }

    /// The leadership transfer under way, if this node leads and started one.
    pub fn transfer(&self) -> Option<Transfer> {
        self.transfer
    }

    /// The settings this node runs with.
    pub fn config(&self) -> &RaftConfig {
        &self.config
    }

    /// Voters needed for a majority.
    pub(super) fn quorum(&self) -> usize {
        self.voters.len() / 2 + 1
    }

    /// Other voters, in id order.
    pub(super) fn peers(&self) -> impl Iterator<Item = NodeId> + '_ {
        let me = self.id;
        self.voters.iter().copied().filter(move |v| *v != me)
    }

    /// Queues one message.
    pub(super) fn send(&mut self, to: NodeId, message: RaftMessage) {
        assert_ne!(to, self.id, "a node never messages itself");
        let bound = OUTBOX_MESSAGES_PER_PEER_MAX * self.voters.len();
        assert!(
            self.outbox.len() < bound,
            "outbox over {bound}: ready() not drained"
        );
        self.outbox.push(Envelope { to, message });
    }

    /// Leader stickiness: true while this node would defend its leader
    /// against a vote for a higher term.
    pub(super) fn in_lease(&self) -> bool {
        if !self.config.leader_stickiness {
            return false;
        }
        if self.role == Role::Leader {
            return true;
        }
        match (self.leader, self.leader_contact_tick) {
            (Some(_), Some(contact)) => {
                !self.leader_lost && self.now_tick - contact < self.config.election_ticks_min
            }
            _ => false,
        }
    }

    /// Restarts the election timer with a fresh random timeout (§5.2).
    pub(super) fn reset_election_timer(&mut self) {
        let min = self.config.election_ticks_min;
        self.election_elapsed_ticks = 0;
        self.election_timeout_ticks = self.rng.range(min, 2 * min);
    }

    /// Moves to a higher term, forgetting the vote. Persisted before the next
    /// message leaves.
    pub(super) fn raise_term(&mut self, term: Term) {
        assert!(
            term > self.term,
            "terms only grow: {} -> {}",
            self.term,
            term
        );
        self.term = term;
        self.voted_for = None;
        self.durable_dirty = true;
    }

    /// Becomes a follower of `leader` (or of nobody yet) in `term`.
    pub(super) fn become_follower(&mut self, term: Term, leader: Option<NodeId>) {
        if term > self.term {
            self.raise_term(term);
        }
        assert!(term == self.term, "cannot follow in an older term");
        self.role = Role::Follower;
        self.leader = leader;
        self.votes.clear();
        self.progress.clear();
        self.transfer = None;
        self.hint_campaign_tick = None;
        if leader.is_some() {
            self.leader_contact_tick = Some(self.now_tick);
            self.leader_lost = false;
        }
        self.reset_election_timer();
    }

    /// Applies the term rules of §5.1 (plus stickiness and PreVote's
    /// exceptions) and then hands the message to its role handler.
    fn step_message(&mut self, from: NodeId, message: RaftMessage) {
        let term = message.term();
        if term > self.term && !self.accept_higher_term(from, &message) {
            return;
        }
        if term < self.term {
            self.answer_stale(from, &message);
            return;
        }
        match message {
            RaftMessage::PreVoteRequest { .. } | RaftMessage::VoteRequest { .. } => {
                self.handle_vote_request(from, &message)
            }
            RaftMessage::PreVoteResponse { term, granted } => {
                self.handle_pre_vote_response(from, term, granted)
            }
            RaftMessage::VoteResponse { term, granted } => {
                self.handle_vote_response(from, term, granted)
            }
            RaftMessage::Heartbeat { term } => self.handle_heartbeat(from, term),
            RaftMessage::HeartbeatResponse {
                term,
                last_log_index,
                last_log_term,
            } => self.handle_heartbeat_response(from, term, (last_log_term, last_log_index)),
            RaftMessage::TimeoutNow { term } => self.handle_timeout_now(from, term),
        }
    }

    /// A message from a higher term. Returns false when it must be dropped
    /// without touching our term.
    fn accept_higher_term(&mut self, from: NodeId, message: &RaftMessage) -> bool {
        match message {
            RaftMessage::VoteRequest {
                leadership_transfer,
                ..
            } if self.in_lease() && !leadership_transfer => false,
            RaftMessage::PreVoteRequest { .. } if self.in_lease() => false,
            // A pre-vote never raises the receiver's term, and a granted
            // pre-vote answer merely echoes the term we asked about.
            RaftMessage::PreVoteRequest { .. } => true,
            RaftMessage::PreVoteResponse { granted: true, .. } => true,
            RaftMessage::Heartbeat { term } | RaftMessage::TimeoutNow { term } => {
                self.become_follower(*term, Some(from));
                true
            }
            other => {
                self.become_follower(other.term(), None);
                true
            }
        }
    }

    /// A message from an older term: mostly ignored, but answered where the
    /// sender would otherwise be stuck (etcd #8243 and the stale-leader case).
    fn answer_stale(&mut self, from: NodeId, message: &RaftMessage) {
        match message {
            // A leader from an older term, e.g. one that was paused or cut
            // off: tell it our term so it steps down. Without this, a node
            // whose term ran ahead could never rejoin, because stickiness and
            // PreVote stop it from raising anyone else's term.
            RaftMessage::Heartbeat { .. } => self.send(from, self.heartbeat_response()),
            // A pre-candidate with an older term would otherwise wait forever
            // for an answer it can use; the refusal carries our term so it
            // catches up and can campaign in a term that can win.
            RaftMessage::PreVoteRequest { .. } => self.send(
                from,
                RaftMessage::PreVoteResponse {
                    term: self.term,
                    granted: false,
                },
            ),
            _ => {}
        }
    }

    /// This node's answer to a heartbeat, at its own term.
    pub(super) fn heartbeat_response(&self) -> RaftMessage {
        RaftMessage::HeartbeatResponse {
            term: self.term,
            last_log_index: self.log.last_index(),
            last_log_term: self.log.last_term(),
        }
    }
}

impl Protocol for RaftNode {
    type Config = RaftConfig;
    type Message = RaftMessage;
    type Durable = RaftDurable;
    type Persist = RaftDurable;
    type Output = std::convert::Infallible;
    const NAME: &'static str = "raft";

    fn new(
        config: &RaftConfig,
        id: NodeId,
        members: &[NodeId],
        durable: RaftDurable,
        rng: Rng,
    ) -> Self {
        if let Err(error) = config.validate() {
            panic!("{error}");
        }
        let mut voters = members.to_vec();
        voters.sort();
        voters.dedup();
        assert!(
            voters.contains(&id),
            "{id} must be one of the members {voters:?}"
        );
        let mut node = RaftNode {
            config: config.clone(),
            id,
            voters,
            rng,
            term: durable.hard_state.term,
            voted_for: durable.hard_state.voted_for,
            log: durable.log,
            durable_dirty: false,
            role: Role::Follower,
            leader: None,
            now_tick: 0,
            election_elapsed_ticks: 0,
            election_timeout_ticks: 0,
            leader_contact_tick: None,
            leader_lost: false,
            hint_campaign_tick: None,
            votes: BTreeMap::new(),
            heartbeat_elapsed_ticks: 0,
            progress: BTreeMap::new(),
            transfer: None,
            outbox: Vec::new(),
        };
        node.reset_election_timer();
        node
    }

    fn tick(&mut self) {
        self.now_tick += 1;
        if self.role == Role::Leader {
            self.tick_leader();
        } else {
            self.tick_election();
        }
    }

    fn step(&mut self, from: NodeId, message: RaftMessage) {
        // Input from a non-member is dropped: membership, not the message,
        // decides who may vote.
        if from == self.id || !self.voters.contains(&from) {
            return;
        }
        self.step_message(from, message);
        debug_assert!(self.role != Role::Leader || self.leader == Some(self.id));
    }

    fn peer_unreachable(&mut self, peer: NodeId) {
        self.handle_unreachable_hint(peer);
    }

    fn apply_persist(durable: &mut RaftDurable, persist: RaftDurable) {
        assert!(
            persist.hard_state.term >= durable.hard_state.term,
            "terms never go back"
        );
        *durable = persist;
    }

    fn has_ready(&self) -> bool {
        self.durable_dirty || !self.outbox.is_empty()
    }

    fn ready(&mut self) -> Ready<Self> {
        let persist = if self.durable_dirty {
            self.durable_dirty = false;
            Some(self.durable())
        } else {
            None
        };
        Ready {
            persist,
            messages: std::mem::take(&mut self.outbox),
            output: Vec::new(),
        }
    }

    fn status(&self) -> Status {
        Status {
            id: self.id,
            role: self.role,
            term: self.term,
            leader: self.leader,
            fencing_token: (self.role == Role::Leader).then_some(self.term.0),
        }
    }
}
