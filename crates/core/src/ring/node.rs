//! The Ring state machine: construction, timers, and the [`Protocol`]
//! entry points. Elections, `Coordinator` rounds and leadership live in
//! `election.rs`, `coordinator.rs` and `leadership.rs`.
//!
//! See the module docs of [`crate::ring`] for the algorithm and for why no
//! two nodes lead at once in a fault-free run.

use super::config::{RingConfig, MEMBERS_MAX, PENDING_MAX};
use super::message::RingMessage;
use super::relay::Relay;
use super::state::{Announcement, Leadership, Participation};
use crate::adaptive_detector::{AdaptiveDetector, DetectorBounds, DetectorState};
use crate::bully::outbox::Outbox;
use crate::protocol::{Protocol, Ready, Role, Status};
use crate::rng::Rng;
use crate::types::{NodeId, Term};

/// Most messages one call may produce: every overdue message resent, a
/// heartbeat broadcast, an `Ack`, a forward and a reply.
pub const MESSAGES_PER_CALL_MAX: usize = PENDING_MAX + 2 * MEMBERS_MAX + 4;

/// Most messages buffered if the runtime stops draining [`Protocol::ready`].
pub const OUTBOX_MAX: usize = 4 * MESSAGES_PER_CALL_MAX;

/// One member of a cluster running the Ring algorithm.
#[derive(Debug)]
pub struct RingNode {
    /// Timeouts and the winner rule, fixed for the node's life.
    pub(crate) config: RingConfig,
    /// This node.
    pub(crate) id: NodeId,
    /// Every member including this node, sorted: the ring order, and the
    /// order of heartbeat broadcasts.
    pub(crate) members: Vec<NodeId>,
    /// The only source of randomness: leader timeouts.
    pub(crate) rng: Rng,
    /// Ticks since this node was built; all deadlines are in this clock.
    pub(crate) now_ticks: u64,
    /// False until the first tick, which starts the boot election.
    pub(crate) booted: bool,
    /// The highest election epoch this node has seen. Never decreases, not
    /// even across a restart: it is persisted, so a restarted node cannot
    /// hand out a fencing token it already used.
    pub(crate) epoch: u64,
    /// The epoch the runtime last persisted.
    pub(crate) persisted_epoch: u64,
    /// Whether this node leads, and whom it follows otherwise.
    pub(crate) leadership: Leadership,
    /// The election this node takes part in, if any. Always `None` while
    /// leading.
    pub(crate) participation: Option<Participation>,
    /// The `Coordinator` round this node started, until it returns.
    pub(crate) announcement: Option<Announcement>,
    /// The last (epoch, leader) this node accepted, so that a `Coordinator`
    /// it has already seen stops instead of circling again.
    pub(crate) last_coordinator: Option<(u64, NodeId)>,
    /// Successor, suspicion and acknowledgements.
    pub(crate) relay: Relay,
    /// Messages waiting for the runtime.
    pub(crate) outbox: Outbox<RingMessage>,
    /// Learns the leader's heartbeats and suspects its silence before the
    /// leader timeout (off when `None`).
    pub(crate) detector: Option<AdaptiveDetector>,
}

impl RingNode {
    /// The adaptive detector's state, when it is on.
    pub fn detector_state(&self) -> Option<DetectorState> {
        self.detector.as_ref().map(AdaptiveDetector::state)
    }

    /// True when `candidate` beats `other` under the configured winner rule.
    pub(crate) fn prefers(&self, candidate: NodeId, other: NodeId) -> bool {
        self.config.winner.prefers(candidate, other)
    }

    /// True when `peer` is another member of this ring.
    pub(crate) fn is_peer(&self, peer: NodeId) -> bool {
        peer != self.id && self.members.binary_search(&peer).is_ok()
    }

    /// True while this node leads.
    pub(crate) fn is_leader(&self) -> bool {
        matches!(self.leadership, Leadership::Leader { .. })
    }

    /// Messages dropped because the runtime did not drain the output in time.
    pub fn outbox_dropped_total(&self) -> u64 {
        self.outbox.dropped_total()
    }

    /// A fresh leader timeout in `[min, 2 * min)`.
    pub(crate) fn leader_deadline_tick(&mut self) -> u64 {
        let minimum = self.config.leader_timeout_ticks_min;
        let timeout = self.rng.range(minimum, 2 * minimum);
        assert!((minimum..2 * minimum).contains(&timeout));
        self.now_ticks + timeout
    }

    /// Passes a ring message to the successor. With no live successor this
    /// node is alone and leads itself.
    pub(crate) fn forward(&mut self, message: RingMessage) {
        assert!(message.is_forwarded());
        match self.relay.send(message, self.now_ticks) {
            Some(envelope) => self.outbox.push(envelope.to, envelope.message),
            None => self.lead_alone(),
        }
    }

    /// Starts an election as its initiator: an `Election` holding only this
    /// node's id goes to the successor.
    pub(crate) fn start_election(&mut self) {
        assert!(!self.is_leader(), "a leader never needs an election");
        let leader_deadline_tick = self.leader_deadline_tick();
        self.leadership = Leadership::Follower {
            leader: None,
            leader_deadline_tick,
        };
        self.participation = Some(Participation {
            initiator: self.id,
            deadline_tick: self.now_ticks + self.config.round_timeout_ticks,
        });
        let election = RingMessage::Election {
            initiator: self.id,
            ids: vec![self.id],
            epoch: self.epoch,
            sequence: 0,
        };
        self.forward(election);
        assert!(self.participation.is_some() || self.is_leader());
    }

    /// Resends every message whose `Ack` is overdue to the next successor,
    /// suspecting the silent one.
    fn resend_overdue(&mut self) {
        for pending in self.relay.take_expired(self.now_ticks) {
            if self.relay.heard_since(pending.to, pending.sent_tick) {
                // The successor spoke since the message left, so it is alive
                // and the message was lost, typically because the successor
                // restarted: send it again rather than skip a live node.
                let envelope = self
                    .relay
                    .send_to(pending.to, pending.message, self.now_ticks);
                self.outbox.push(envelope.to, envelope.message);
                continue;
            }
            self.relay.suspect(pending.to);
            if self.relay.successor().is_none() {
                // Everyone else is suspected: lead alone and drop the rest,
                // which have nowhere to go.
                self.lead_alone();
                break;
            }
            self.forward(pending.message);
        }
        assert!(self.relay.pending_count() <= PENDING_MAX);
    }

    /// Runs the round, election and leader timers.
    fn on_timers(&mut self) {
        let now = self.now_ticks;
        if self.announcement.is_some_and(|a| now >= a.deadline_tick) {
            // The `Coordinator` round never came back. A leader keeps leading
            // (its heartbeats tell everyone); anyone else starts over.
            self.announcement = None;
            if !self.is_leader() && self.participation.is_none() {
                self.start_election();
            }
        }
        if self.participation.is_some_and(|p| now >= p.deadline_tick) {
            self.participation = None;
            self.start_election();
        }
        match self.leadership {
            Leadership::Leader {
                heartbeat_due_tick, ..
            } if now >= heartbeat_due_tick => self.send_heartbeats(),
            Leadership::Follower {
                leader_deadline_tick,
                ..
            } if self.participation.is_none() && now >= leader_deadline_tick => {
                self.start_election()
            }
            Leadership::Follower {
                leader: Some(_), ..
            } if self.participation.is_none()
                && self.detector.as_mut().is_some_and(|d| d.suspects(now)) =>
            {
                // As the connection-loss hint: elect at once, without
                // suspecting the leader in the relay, so that a live leader
                // still sees the election and ends it.
                self.start_election()
            }
            _ => {}
        }
    }

    /// Restores the invariants every call must end with. A leader that has
    /// learned of an epoch above its own moves past it.
    fn finish_call(&mut self) {
        if let Leadership::Leader { epoch, .. } = self.leadership {
            if self.epoch > epoch {
                self.reannounce();
            }
        }
        if let Leadership::Leader { epoch, .. } = self.leadership {
            assert_eq!(epoch, self.epoch, "a leader's token is its epoch");
            assert!(
                self.participation.is_none(),
                "a leader takes part in no election"
            );
        }
        assert!(self.relay.pending_count() <= PENDING_MAX);
    }
}

impl Protocol for RingNode {
    type Config = RingConfig;
    type Message = RingMessage;
    type Durable = u64;
    type Persist = u64;
    type Output = std::convert::Infallible;

    const NAME: &'static str = "ring";

    fn new(
        config: &RingConfig,
        id: NodeId,
        members: &[NodeId],
        durable: u64,
        mut rng: Rng,
    ) -> Self {
        if let Err(error) = config.validate() {
            panic!("invalid Ring configuration: {error}");
        }
        assert!(members.contains(&id), "{id} is not among its own members");
        assert!(
            members.len() <= MEMBERS_MAX,
            "more than {MEMBERS_MAX} members"
        );
        let mut sorted = members.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), members.len(), "member ids must be unique");
        let first_sequence = rng.next_u64() >> 1;
        let relay = Relay::new(id, sorted.clone(), config.ack_timeout_ticks, first_sequence);
        let mut node = RingNode {
            config: config.clone(),
            id,
            members: sorted,
            rng,
            now_ticks: 0,
            booted: false,
            epoch: durable,
            persisted_epoch: durable,
            leadership: Leadership::Follower {
                leader: None,
                leader_deadline_tick: 0,
            },
            participation: None,
            announcement: None,
            last_coordinator: None,
            relay,
            outbox: Outbox::new(MESSAGES_PER_CALL_MAX, OUTBOX_MAX),
            detector: DetectorBounds::of(
                config.detector_floor_heartbeats,
                config.heartbeat_ticks,
                config.leader_timeout_ticks_min,
            )
            .map(AdaptiveDetector::new),
        };
        let leader_deadline_tick = node.leader_deadline_tick();
        node.leadership = Leadership::Follower {
            leader: None,
            leader_deadline_tick,
        };
        node
    }

    fn tick(&mut self) {
        self.outbox.begin_call();
        self.now_ticks += 1;
        if !self.booted {
            // A (re)started node runs an election unless it already takes
            // part in one or has learned of a leader since it was built.
            self.booted = true;
            let has_leader = !matches!(self.leadership, Leadership::Follower { leader: None, .. });
            if self.participation.is_none() && !has_leader {
                self.start_election();
            }
        } else {
            self.resend_overdue();
            self.on_timers();
        }
        self.finish_call();
    }

    fn step(&mut self, from: NodeId, message: RingMessage) {
        self.outbox.begin_call();
        if !self.is_peer(from) {
            return;
        }
        self.relay.heard_from(from, self.now_ticks);
        if let Some(epoch) = message.epoch() {
            self.epoch = self.epoch.max(epoch);
        }
        match message {
            RingMessage::Election {
                initiator,
                ids,
                sequence,
                ..
            } => {
                self.outbox.push(from, RingMessage::Ack { sequence });
                self.on_election(initiator, ids);
            }
            RingMessage::Coordinator {
                initiator,
                leader,
                members,
                epoch,
                sequence,
            } => {
                self.outbox.push(from, RingMessage::Ack { sequence });
                self.on_coordinator(initiator, leader, members, epoch);
            }
            RingMessage::Ack { sequence } => self.relay.acknowledge(from, sequence),
            RingMessage::Heartbeat { .. } => self.on_heartbeat(from),
        }
        self.finish_call();
    }

    fn peer_unreachable(&mut self, peer: NodeId) {
        self.outbox.begin_call();
        if self.is_peer(peer) {
            let follows_peer = matches!(
                self.leadership,
                Leadership::Follower { leader: Some(leader), .. } if leader == peer
            );
            if follows_peer {
                // Elect at once, but do not suspect the leader on a hint: if
                // the hint is wrong, the election must still pass through the
                // live leader, or it would elect a second one.
                if self.participation.is_none() {
                    self.start_election();
                }
            } else {
                self.relay.suspect(peer);
            }
        }
        self.finish_call();
    }

    fn durable_term(durable: &u64) -> crate::types::Term {
        crate::epoch::durable_term(durable)
    }

    fn apply_persist(durable: &mut u64, persist: u64) {
        crate::epoch::apply(durable, persist);
    }

    fn has_ready(&self) -> bool {
        !self.outbox.is_empty() || self.epoch != self.persisted_epoch
    }

    fn ready(&mut self) -> Ready<Self> {
        let persist = crate::epoch::take_change(self.epoch, &mut self.persisted_epoch);
        Ready {
            persist,
            messages: self.outbox.take(),
            output: Vec::new(),
        }
    }

    fn status(&self) -> Status {
        let (role, leader, fencing_token) = match self.leadership {
            Leadership::Leader { epoch, .. } => (Role::Leader, Some(self.id), Some(epoch)),
            Leadership::Follower { leader, .. } if self.participation.is_some() => {
                (Role::Candidate, leader, None)
            }
            Leadership::Follower { leader, .. } => (Role::Follower, leader, None),
        };
        assert!(leader != Some(self.id) || role == Role::Leader);
        Status {
            id: self.id,
            role,
            term: Term(self.epoch),
            leader,
            fencing_token,
        }
    }
}
