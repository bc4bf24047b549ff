//! The Bully state machine: construction, timers and the transitions every
//! handler shares. Message handlers live in `handlers.rs`.
//!
//! See the module docs of [`crate::bully`] for the algorithm and for why no
//! two nodes lead at once in a fault-free run.

use super::config::{BullyConfig, MEMBERS_MAX};
use super::message::BullyMessage;
use super::outbox::Outbox;
use super::state::State;
use crate::adaptive_detector::{AdaptiveDetector, DetectorBounds, DetectorState};
use crate::protocol::{Protocol, Ready, Role, Status};
use crate::rng::Rng;
use crate::types::{NodeId, Term};

/// Most messages one call may produce: a broadcast of heartbeats, a broadcast
/// of `Election` or `Coordinator`, and a reply or two. Asserted per call.
pub const MESSAGES_PER_CALL_MAX: usize = 2 * MEMBERS_MAX + 4;

/// Most messages buffered if the runtime stops draining [`Protocol::ready`].
pub const OUTBOX_MAX: usize = 8 * MEMBERS_MAX;

/// One member of a cluster running the Bully algorithm.
#[derive(Debug)]
pub struct BullyNode {
    /// Timeouts and the winner rule, fixed for the node's life.
    pub(crate) config: BullyConfig,
    /// This node.
    pub(crate) id: NodeId,
    /// Every member except this node, sorted, so that broadcasts always go out
    /// in the same order.
    pub(crate) others: Vec<NodeId>,
    /// The members better than this node under the winner rule, sorted: the
    /// only nodes an `Election` is sent to.
    pub(crate) better: Vec<NodeId>,
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
    /// Where the node is in the protocol.
    pub(crate) state: State,
    /// Messages waiting for the runtime.
    pub(crate) outbox: Outbox<BullyMessage>,
    /// Learns the leader's heartbeats and suspects its silence before the
    /// leader timeout (off when `None`).
    pub(crate) detector: Option<AdaptiveDetector>,
}

impl BullyNode {
    /// True when `candidate` beats `other` under the configured winner rule.
    pub(crate) fn prefers(&self, candidate: NodeId, other: NodeId) -> bool {
        self.config.winner.prefers(candidate, other)
    }

    /// True when `peer` is another member of this cluster.
    pub(crate) fn is_peer(&self, peer: NodeId) -> bool {
        self.others.binary_search(&peer).is_ok()
    }

    /// The adaptive detector's state, when it is on.
    pub fn detector_state(&self) -> Option<DetectorState> {
        self.detector.as_ref().map(AdaptiveDetector::state)
    }

    /// Messages dropped because the runtime did not drain the output in time.
    pub fn outbox_dropped_total(&self) -> u64 {
        self.outbox.dropped_total()
    }

    /// A fresh leader timeout in `[min, 2 * min)`, so that followers of a dead
    /// leader do not all start elections on the same tick.
    fn leader_deadline_tick(&mut self) -> u64 {
        let minimum = self.config.leader_timeout_ticks_min;
        let timeout = self.rng.range(minimum, 2 * minimum);
        assert!((minimum..2 * minimum).contains(&timeout));
        self.now_ticks + timeout
    }

    /// Sends `message` to every other member, in id order.
    fn broadcast(&mut self, message: BullyMessage) {
        for peer in &self.others {
            self.outbox.push(*peer, message.clone());
        }
    }

    /// Starts an election (Garcia-Molina's "hold an election"): ask every
    /// better node whether it is alive, or win at once if there is none.
    pub(crate) fn start_election(&mut self) {
        assert!(
            !matches!(self.state, State::Leader { .. }),
            "a leader never needs an election to keep leading"
        );
        if self.better.is_empty() {
            self.announce();
            return;
        }
        let epoch = self.epoch;
        for peer in &self.better {
            self.outbox.push(*peer, BullyMessage::Election { epoch });
        }
        self.state = State::AwaitingAnswer {
            deadline_tick: self.now_ticks + self.config.answer_timeout_ticks,
        };
    }

    /// Claims leadership under a fresh epoch: tell everyone, then wait for the
    /// takeover delay so that an old leader steps down before this node takes
    /// office.
    pub(crate) fn announce(&mut self) {
        let previous = self.epoch;
        self.epoch += 1;
        let epoch = self.epoch;
        self.broadcast(BullyMessage::Coordinator { epoch });
        if self.config.takeover_delay_ticks == 0 || self.others.is_empty() {
            self.take_office(epoch);
        } else {
            self.state = State::Announcing {
                epoch,
                deadline_tick: self.now_ticks + self.config.takeover_delay_ticks,
            };
        }
        assert!(self.epoch > previous, "every announcement uses a new epoch");
    }

    /// Becomes Leader under `epoch`. Heartbeats start one period later: the
    /// `Coordinator` already told everyone.
    fn take_office(&mut self, epoch: u64) {
        assert!(epoch <= self.epoch, "cannot lead under an epoch never seen");
        self.state = State::Leader {
            epoch,
            heartbeat_due_tick: self.now_ticks + self.config.heartbeat_ticks,
        };
    }

    /// While leading, moves to a fresh epoch above everything seen and tells
    /// everyone at once with a heartbeat. Used when another node claims
    /// leadership or a higher epoch turns up, so that two leaders never share
    /// a fencing token for longer than one message delay.
    pub(crate) fn reannounce(&mut self) {
        assert!(matches!(self.state, State::Leader { .. }));
        self.epoch += 1;
        let epoch = self.epoch;
        self.state = State::Leader {
            epoch,
            heartbeat_due_tick: self.now_ticks + self.config.heartbeat_ticks,
        };
        self.broadcast(BullyMessage::Heartbeat { epoch });
    }

    /// Follows `leader` and restarts the leader timeout.
    pub(crate) fn follow(&mut self, leader: NodeId) {
        assert!(leader != self.id, "a node does not follow itself");
        assert!(self.is_peer(leader), "leader {leader} is not a member");
        let now = self.now_ticks;
        let same = matches!(self.state, State::Follower { leader: Some(l), .. } if l == leader);
        if let Some(detector) = &mut self.detector {
            if !same {
                detector.forget();
            }
            detector.heard(now);
        }
        let leader_deadline_tick = self.leader_deadline_tick();
        self.state = State::Follower {
            leader: Some(leader),
            leader_deadline_tick,
        };
    }

    /// Runs whichever timer of the current state has expired.
    fn on_timers(&mut self) {
        let now = self.now_ticks;
        match self.state {
            State::Follower {
                leader_deadline_tick,
                ..
            } if now >= leader_deadline_tick => self.start_election(),
            State::Follower {
                leader: Some(_), ..
            } if self.detector.as_mut().is_some_and(|d| d.suspects(now)) => {
                // As the connection-loss hint: if the leader is alive after
                // all, it answers the election and keeps leading.
                self.start_election()
            }
            State::AwaitingAnswer { deadline_tick } if now >= deadline_tick => self.announce(),
            State::AwaitingCoordinator { deadline_tick } if now >= deadline_tick => {
                self.start_election()
            }
            State::Announcing {
                epoch,
                deadline_tick,
            } if now >= deadline_tick => self.take_office(epoch),
            State::Leader {
                epoch,
                heartbeat_due_tick,
            } if now >= heartbeat_due_tick => {
                self.broadcast(BullyMessage::Heartbeat { epoch });
                self.state = State::Leader {
                    epoch,
                    heartbeat_due_tick: now + self.config.heartbeat_ticks,
                };
            }
            _ => {}
        }
    }

    /// Restores the invariants every call must end with. A leader that has
    /// learned of an epoch above its own moves past it, so that its fencing
    /// token is always the highest epoch it knows.
    pub(crate) fn finish_call(&mut self) {
        if let State::Leader { epoch, .. } = self.state {
            if self.epoch > epoch {
                self.reannounce();
            }
        }
        if let Some(claimed) = self.state.claimed_epoch() {
            assert!(claimed <= self.epoch, "claimed epoch above the known one");
        }
        if let State::Leader { epoch, .. } = self.state {
            assert_eq!(epoch, self.epoch, "a leader's token is its epoch");
        }
    }
}

impl Protocol for BullyNode {
    type Config = BullyConfig;
    type Message = BullyMessage;
    type Durable = u64;
    type Persist = u64;
    type Output = std::convert::Infallible;

    const NAME: &'static str = "bully";

    fn new(config: &BullyConfig, id: NodeId, members: &[NodeId], durable: u64, rng: Rng) -> Self {
        if let Err(error) = config.validate() {
            panic!("invalid Bully configuration: {error}");
        }
        assert!(members.contains(&id), "{id} is not among its own members");
        assert!(
            members.len() <= MEMBERS_MAX,
            "more than {MEMBERS_MAX} members"
        );
        let mut others: Vec<NodeId> = members.iter().copied().filter(|m| *m != id).collect();
        others.sort();
        others.dedup();
        assert_eq!(others.len() + 1, members.len(), "member ids must be unique");
        let better = others
            .iter()
            .copied()
            .filter(|peer| config.winner.prefers(*peer, id))
            .collect();
        let mut node = BullyNode {
            config: config.clone(),
            id,
            others,
            better,
            rng,
            now_ticks: 0,
            booted: false,
            epoch: durable,
            persisted_epoch: durable,
            state: State::Follower {
                leader: None,
                leader_deadline_tick: 0,
            },
            outbox: Outbox::new(MESSAGES_PER_CALL_MAX, OUTBOX_MAX),
            detector: DetectorBounds::of(
                config.detector_floor_heartbeats,
                config.heartbeat_ticks,
                config.leader_timeout_ticks_min,
            )
            .map(AdaptiveDetector::new),
        };
        let leader_deadline_tick = node.leader_deadline_tick();
        node.state = State::Follower {
            leader: None,
            leader_deadline_tick,
        };
        node
    }

    fn tick(&mut self) {
        self.outbox.begin_call();
        self.now_ticks += 1;
        if !self.booted {
            // A node that (re)starts must run an election: if it is the best
            // alive, it has to take over from whoever leads now.
            self.booted = true;
            if !self.state.election_under_way() && !self.state.claims_leadership() {
                self.start_election();
            }
        } else {
            self.on_timers();
        }
        self.finish_call();
    }

    fn step(&mut self, from: NodeId, message: BullyMessage) {
        self.outbox.begin_call();
        if !self.is_peer(from) {
            return;
        }
        let stale = message.epoch() < self.epoch;
        self.epoch = self.epoch.max(message.epoch());
        match message {
            BullyMessage::Election { .. } => self.on_election(from),
            BullyMessage::Answer { .. } => self.on_answer(from),
            BullyMessage::Coordinator { .. } => self.on_coordinator(from, stale),
            BullyMessage::Heartbeat { .. } => self.on_heartbeat(from, stale),
        }
        self.finish_call();
    }

    fn peer_unreachable(&mut self, peer: NodeId) {
        self.outbox.begin_call();
        // Only the leader's failure matters to Bully; the hint starts an
        // election at once instead of after the leader timeout. If the hint
        // is wrong, the leader answers the `Election` and keeps leading.
        if let State::Follower {
            leader: Some(leader),
            ..
        } = self.state
        {
            if leader == peer {
                self.start_election();
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
        let role = self.state.role();
        let leader = match self.state {
            State::Follower { leader, .. } => leader,
            State::Leader { .. } => Some(self.id),
            _ => None,
        };
        let fencing_token = match self.state {
            State::Leader { epoch, .. } => Some(epoch),
            _ => None,
        };
        assert_eq!(role == Role::Leader, fencing_token.is_some());
        Status {
            id: self.id,
            role,
            term: Term(self.epoch),
            leader,
            fencing_token,
        }
    }
}
