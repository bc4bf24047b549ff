//! The Paxos state machine: construction, timers, the lease promise, and
//! the [`Protocol`] entry points. The acceptor's handlers live in
//! `acceptor.rs`, the proposer's and leader's in `proposer.rs`.

use super::ballot::{Ballot, NODE_ID_MAX};
use super::config::PaxosConfig;
use super::durable::{PaxosDurable, PaxosPersist};
use super::message::{Entry, PaxosMessage};
use super::state::State;
use crate::adaptive_detector::{AdaptiveDetector, DetectorState};
use crate::bully::outbox::Outbox;
use crate::protocol::{Protocol, Ready, Role, Status};
use crate::rng::Rng;
use crate::types::{NodeId, Term};
use std::collections::BTreeMap;

/// Largest cluster a Paxos node accepts.
pub const MEMBERS_MAX: usize = 128;
/// Most slots a log may hold. This Multi-Paxos is election-only: each
/// election adds one no-op, so the bound is far away; a node refuses to
/// propose past it rather than grow without limit.
pub const LOG_SLOTS_MAX: u64 = 1 << 20;
/// Most values in one `Accept`; a follower further behind catches up over
/// several heartbeats.
pub const ACCEPT_VALUES_MAX: usize = 1_024;
/// Most messages one call may produce: a broadcast after stepping down,
/// another on taking office, and a reply.
pub const MESSAGES_PER_CALL_MAX: usize = 2 * MEMBERS_MAX + 2;
/// Most messages buffered if the runtime stops draining `ready()`.
pub const OUTBOX_MAX: usize = 4 * MESSAGES_PER_CALL_MAX;

/// What a Paxos node hands the application: a slot it now knows is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PaxosOutput {
    /// `value` is chosen for `slot`; slots are reported in order, once per
    /// incarnation.
    Chosen {
        /// The slot.
        slot: u64,
        /// Its value.
        value: u64,
    },
}

/// One member of a Multi-Paxos cluster: acceptor, learner and, when elected,
/// the distinguished proposer.
#[derive(Debug)]
pub struct PaxosNode {
    /// Settings, fixed for the node's life.
    pub(crate) config: PaxosConfig,
    /// This node.
    pub(crate) id: NodeId,
    /// Every member including this one, sorted.
    pub(crate) members: Vec<NodeId>,
    /// The only source of randomness: election timeouts.
    pub(crate) rng: Rng,
    /// Ticks since this node was built; every deadline is on this clock.
    pub(crate) now_tick: u64,
    /// The highest ballot promised (durable).
    pub(crate) promised: Ballot,
    /// The highest round seen in any message, so a new ballot beats it.
    pub(crate) round_seen: u64,
    /// Accepted entries by slot (durable).
    pub(crate) log: BTreeMap<u64, Entry>,
    /// Every slot up to here is known chosen (not durable: a restarted
    /// node learns it again).
    pub(crate) commit: u64,
    /// The phase.
    pub(crate) state: State,
    /// Lease promise: until this tick, ignore `Prepare` from anyone but
    /// `sticky_to` (from everyone when `None`, as after a restart).
    pub(crate) sticky_until_tick: u64,
    /// Whom the lease promise is for.
    pub(crate) sticky_to: Option<NodeId>,
    /// The follower's deadline is a hinted campaign's slot, not a timeout.
    pub(crate) hint_campaign: bool,
    /// Entries the latest leadership of this node had to fetch in phase 1.
    pub(crate) catch_up_entries: Option<u64>,
    /// Changes not yet handed to the runtime.
    pub(crate) pending: PaxosPersist,
    /// Chosen slots not yet handed to the application.
    pub(crate) output: Vec<PaxosOutput>,
    /// Messages not yet handed to the runtime.
    pub(crate) outbox: Outbox<PaxosMessage>,
    /// Learns the leader's heartbeats and suspects its silence before the
    /// election timeout (off when `None`).
    pub(crate) detector: Option<AdaptiveDetector>,
}

impl PaxosNode {
    /// Votes needed for a quorum: a majority of the members.
    pub(crate) fn quorum(&self) -> usize {
        self.members.len() / 2 + 1
    }

    /// Every member but this one, in id order.
    pub(crate) fn peers(&self) -> Vec<NodeId> {
        self.members
            .iter()
            .copied()
            .filter(|m| *m != self.id)
            .collect()
    }

    /// True when `node` is another member.
    fn is_peer(&self, node: NodeId) -> bool {
        node != self.id && self.members.binary_search(&node).is_ok()
    }

    /// A fresh election deadline.
    pub(crate) fn election_deadline(&mut self) -> u64 {
        let minimum = self.config.election_ticks_min;
        let timeout = self
            .rng
            .range(minimum, minimum + self.config.election_jitter_ticks);
        self.now_tick + timeout
    }

    /// Raises the promise (to be persisted before anything is sent).
    pub(crate) fn promise(&mut self, ballot: Ballot) {
        assert!(ballot >= self.promised, "a promise never goes back");
        if ballot > self.promised {
            self.promised = ballot;
            self.pending.promised = Some(ballot);
        }
        self.round_seen = self.round_seen.max(ballot.round);
    }

    /// Accepts `value` for `slot` in `ballot` (to be persisted first).
    pub(crate) fn accept(&mut self, slot: u64, ballot: Ballot, value: u64) {
        assert!(
            ballot == self.promised,
            "accept only in the promised ballot"
        );
        assert!(
            (1..=LOG_SLOTS_MAX).contains(&slot),
            "slot {slot} out of range"
        );
        let entry = Entry { ballot, value };
        if self.log.get(&slot) != Some(&entry) {
            self.log.insert(slot, entry);
            self.pending.entries.push((slot, entry));
        }
    }

    /// Learns that every slot up to `chosen` holds a chosen value, and
    /// reports the new ones in order.
    pub(crate) fn advance_commit(&mut self, chosen: u64) {
        while self.commit < chosen {
            let slot = self.commit + 1;
            let entry = self.log.get(&slot).expect("a chosen slot is held");
            self.output.push(PaxosOutput::Chosen {
                slot,
                value: entry.value,
            });
            self.commit = slot;
        }
    }

    /// Becomes a follower of `leader` (or of nobody) with a fresh timer.
    pub(crate) fn follow(&mut self, leader: Option<NodeId>) {
        let now = self.now_tick;
        let same =
            matches!(self.state, State::Follower { leader: Some(l), .. } if Some(l) == leader);
        if let Some(detector) = &mut self.detector {
            if !same {
                detector.forget();
            }
            if leader.is_some() {
                detector.heard(now);
            }
        }
        self.hint_campaign = false;
        let deadline_tick = self.election_deadline();
        self.state = State::Follower {
            leader,
            deadline_tick,
        };
    }

    /// Promises `leader` the lease: no other proposer's `Prepare` is taken
    /// for [`PaxosConfig::promise_ticks`] from now.
    pub(crate) fn grant_lease(&mut self, leader: NodeId) {
        if self.config.leases {
            self.sticky_to = Some(leader);
            self.sticky_until_tick = self.now_tick + self.config.promise_ticks();
        }
    }

    /// True while a lease promise forbids answering `from`'s `Prepare`.
    pub(crate) fn lease_forbids(&self, from: NodeId) -> bool {
        self.config.leases && self.now_tick < self.sticky_until_tick && self.sticky_to != Some(from)
    }

    /// Every slot known chosen, with its value, in order.
    pub fn chosen(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.log
            .range(1..=self.commit)
            .map(|(slot, entry)| (*slot, entry.value))
    }

    /// Messages dropped because the runtime did not drain the output.
    pub fn outbox_dropped_total(&self) -> u64 {
        self.outbox.dropped_total()
    }

    /// Ranks this node among the members other than `gone` by the order of
    /// their ballots in one round: 0 is the best.
    pub(crate) fn rank_without(&self, gone: NodeId) -> u64 {
        let key = |node: NodeId| (self.config.priority(node), node);
        self.members
            .iter()
            .filter(|m| **m != gone && **m != self.id && key(**m) > key(self.id))
            .count() as u64
    }

    fn tick_follower(&mut self) {
        if let State::Follower {
            deadline_tick,
            leader,
        } = self.state
        {
            if self.now_tick >= deadline_tick {
                self.start_election();
                return;
            }
            let now = self.now_tick;
            if let Some(leader) = leader {
                if self.detector.as_mut().is_some_and(|d| d.suspects(now)) {
                    // Its promise to the leader ended one floor after the
                    // leader was last heard, no later than now.
                    assert!(
                        !self.config.leases
                            || self.sticky_to != Some(leader)
                            || self.sticky_until_tick <= now,
                        "the detector suspected inside a lease promise"
                    );
                    self.suspect_leader(leader);
                }
            }
        }
    }

    /// This follower no longer trusts `leader` to be alive: it releases
    /// its lease promise and starts phase 1 at its rank slot, so that the
    /// best-ranked survivor asks first.
    fn suspect_leader(&mut self, leader: NodeId) {
        // The hint may be wrong; releasing the lease promise for a live
        // leader is the one way this costs the no-overlap guarantee, as
        // with Raft's hint (docs/architecture.md). The detector's promise
        // has already ended when it suspects.
        if self.sticky_to == Some(leader) {
            self.sticky_until_tick = self.sticky_until_tick.min(self.now_tick);
        }
        let slot = self.config.hint_slot_ticks.max(1);
        self.state = State::Follower {
            leader: None,
            deadline_tick: self.now_tick + (self.rank_without(leader) + 1) * slot,
        };
        self.hint_campaign = true;
        if let Some(detector) = &mut self.detector {
            detector.forget();
        }
    }

    /// The adaptive detector's state, when it is on.
    pub fn detector_state(&self) -> Option<DetectorState> {
        self.detector.as_ref().map(AdaptiveDetector::state)
    }
}

impl Protocol for PaxosNode {
    type Config = PaxosConfig;
    type Message = PaxosMessage;
    type Durable = PaxosDurable;
    type Persist = PaxosPersist;
    type Output = PaxosOutput;

    const NAME: &'static str = "paxos";

    fn new(
        config: &PaxosConfig,
        id: NodeId,
        members: &[NodeId],
        durable: PaxosDurable,
        rng: Rng,
    ) -> Self {
        if let Err(error) = config.validate() {
            panic!("{error}");
        }
        let mut sorted = members.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), members.len(), "member ids must be unique");
        assert!(sorted.contains(&id), "{id} is not among its own members");
        assert!(
            sorted.len() <= MEMBERS_MAX,
            "more than {MEMBERS_MAX} members"
        );
        assert!(
            sorted.iter().all(|m| (1..=NODE_ID_MAX).contains(&m.0)),
            "member ids must be in 1..={NODE_ID_MAX}"
        );
        let mut node = PaxosNode {
            config: config.clone(),
            id,
            members: sorted,
            rng,
            now_tick: 0,
            promised: durable.promised,
            round_seen: durable.promised.round,
            log: durable.log,
            commit: 0,
            state: State::Follower {
                leader: None,
                deadline_tick: 0,
            },
            // A (re)started node may have promised a lease it no longer
            // remembers: it honours every lease for one election timeout.
            sticky_until_tick: config.election_ticks_min,
            sticky_to: None,
            hint_campaign: false,
            detector: config.detector_bounds().map(AdaptiveDetector::new),
            catch_up_entries: None,
            pending: PaxosPersist::default(),
            output: Vec::new(),
            outbox: Outbox::new(MESSAGES_PER_CALL_MAX, OUTBOX_MAX),
        };
        node.follow(None);
        node
    }

    fn apply_persist(durable: &mut PaxosDurable, persist: PaxosPersist) {
        durable.apply(persist);
    }

    fn durable_term(durable: &PaxosDurable) -> Term {
        Term(durable.promised.token())
    }

    fn tick(&mut self) {
        self.outbox.begin_call();
        self.now_tick += 1;
        match self.state {
            State::Follower { .. } => self.tick_follower(),
            State::Preparing { deadline_tick, .. } => {
                if self.now_tick >= deadline_tick {
                    self.start_election();
                }
            }
            State::Proposing(_) => self.tick_proposer(),
        }
    }

    fn step(&mut self, from: NodeId, message: PaxosMessage) {
        self.outbox.begin_call();
        if !self.is_peer(from) || !message.is_well_formed() {
            return;
        }
        self.round_seen = self.round_seen.max(message.ballot().round);
        match message {
            PaxosMessage::Prepare { ballot, from_slot } => self.on_prepare(from, ballot, from_slot),
            PaxosMessage::Promise { ballot, entries } => self.on_promise(from, ballot, entries),
            PaxosMessage::Accept {
                ballot,
                first_slot,
                values,
                commit,
                sent_tick,
            } => self.on_accept(from, ballot, first_slot, values, commit, sent_tick),
            PaxosMessage::Accepted {
                ballot,
                through_slot,
                sent_tick,
            } => self.on_accepted(from, ballot, through_slot, sent_tick),
            PaxosMessage::Reject { ballot, promised } => self.on_reject(ballot, promised),
        }
    }

    fn peer_unreachable(&mut self, peer: NodeId) {
        self.outbox.begin_call();
        if !self.is_peer(peer) || self.config.hint_slot_ticks == 0 {
            return;
        }
        if let State::Follower {
            leader: Some(leader),
            ..
        } = self.state
        {
            if leader == peer {
                self.suspect_leader(peer);
            }
        }
    }

    fn has_ready(&self) -> bool {
        !self.pending.is_empty() || !self.outbox.is_empty() || !self.output.is_empty()
    }

    fn ready(&mut self) -> Ready<Self> {
        let persist = std::mem::take(&mut self.pending);
        Ready {
            persist: (!persist.is_empty()).then_some(persist),
            messages: self.outbox.take(),
            output: std::mem::take(&mut self.output),
        }
    }

    fn status(&self) -> Status {
        let role = self.state.role();
        let leader = match &self.state {
            State::Follower { leader, .. } => *leader,
            _ if role == Role::Leader => Some(self.id),
            _ => None,
        };
        Status {
            id: self.id,
            role,
            term: Term(self.promised.token()),
            leader,
            fencing_token: (role == Role::Leader).then(|| {
                self.state
                    .own_ballot()
                    .expect("a leader has a ballot")
                    .token()
            }),
        }
    }

    fn catch_up_entries(&self) -> Option<u64> {
        self.catch_up_entries
    }
}
