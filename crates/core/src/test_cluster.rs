//! A tiny deterministic cluster for pure-core tests of Bully, Ring and
//! Paxos.
//!
//! It routes [`crate::Ready`] messages between nodes of any [`Protocol`],
//! either instantly (latency 0: delivered in order until the network is
//! quiet, so timeouts never race with replies) or with a seeded latency in
//! `1..=latency_ticks_max`. After every delivery, tick and hint it counts the
//! nodes in the Leader role, so a test can assert that two leaders never
//! coexisted. It is not the simulator: no loss, no duplication; crashes,
//! restarts and partitions only.

use crate::protocol::{Message, Protocol, Role, Status};
use crate::rng::Rng;
use crate::types::NodeId;
use std::collections::{BTreeMap, BTreeSet};

/// Upper bound on messages in flight, so that a runaway protocol fails the
/// test instead of exhausting memory.
const IN_FLIGHT_MAX: usize = 100_000;

/// One message on the wire.
struct Flight<M> {
    /// Sender.
    from: NodeId,
    /// Receiver.
    to: NodeId,
    /// Payload.
    message: M,
}

/// A cluster of nodes of one protocol, members `1..=size`.
pub(crate) struct Cluster<P: Protocol> {
    /// Configuration every node is (re)built with.
    config: P::Config,
    /// Every member id, sorted.
    members: Vec<NodeId>,
    /// Live nodes; a crashed node is absent.
    nodes: BTreeMap<NodeId, P>,
    /// Messages keyed by (delivery tick, send order): delivery is in that
    /// order, which keeps runs deterministic.
    in_flight: BTreeMap<(u64, u64), Flight<P::Message>>,
    /// Directed links that drop everything (partitions).
    cut: BTreeSet<(NodeId, NodeId)>,
    /// Simulated time.
    pub(crate) now_ticks: u64,
    /// Send counter, the tie-breaker in `in_flight`.
    sent_total: u64,
    /// 0 for instant delivery, else the largest one-way latency.
    latency_ticks_max: u64,
    /// Latency draws.
    rng: Rng,
    /// Seed for node rngs.
    seed: u64,
    /// Restarts so far, so a restarted node gets a fresh rng stream.
    restarts: u64,
    /// Messages sent, by kind.
    pub(crate) sent_by_kind: BTreeMap<&'static str, u64>,
    /// Most nodes seen in the Leader role at one instant.
    pub(crate) leaders_at_once_max: usize,
}

impl<P: Protocol> Cluster<P> {
    /// Builds members `1..=size`; nothing has ticked yet.
    pub(crate) fn new(config: P::Config, size: u64, seed: u64, latency_ticks_max: u64) -> Self {
        assert!(size > 0);
        let members: Vec<NodeId> = (1..=size).map(NodeId).collect();
        let mut cluster = Cluster {
            config,
            members: members.clone(),
            nodes: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            cut: BTreeSet::new(),
            now_ticks: 0,
            sent_total: 0,
            latency_ticks_max,
            rng: Rng::derive(seed, 0),
            seed,
            restarts: 0,
            sent_by_kind: BTreeMap::new(),
            leaders_at_once_max: 0,
        };
        for id in members {
            cluster.start(id);
        }
        cluster
    }

    /// Builds a fresh node `id`, as after a restart with no durable state.
    fn start(&mut self, id: NodeId) {
        let stream = id.0 + 1_000 * self.restarts;
        let rng = Rng::derive(self.seed, stream + 1);
        let node = P::new(&self.config, id, &self.members, P::Durable::default(), rng);
        self.nodes.insert(id, node);
    }

    /// Runs `ticks` ticks: each delivers what is due, ticks every live node in
    /// id order, then delivers again (for instant delivery).
    pub(crate) fn run(&mut self, ticks: u64) {
        for _ in 0..ticks {
            self.now_ticks += 1;
            self.deliver_due();
            let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
            for id in ids {
                self.tick_one(id);
            }
            self.deliver_due();
        }
    }

    /// Ticks only node `id` and routes its output (instantly if latency is 0).
    pub(crate) fn tick_one(&mut self, id: NodeId) {
        if let Some(node) = self.nodes.get_mut(&id) {
            node.tick();
            self.drain(id);
        }
    }

    /// Delivers, in order, every message due by now, including replies that
    /// become due while doing so.
    pub(crate) fn deliver_due(&mut self) {
        while let Some(entry) = self.in_flight.first_entry() {
            if entry.key().0 > self.now_ticks {
                break;
            }
            let flight = entry.remove();
            if self.cut.contains(&(flight.from, flight.to)) {
                continue;
            }
            if let Some(node) = self.nodes.get_mut(&flight.to) {
                node.step(flight.from, flight.message);
                self.drain(flight.to);
            }
        }
    }

    /// Moves node `id`'s output onto the wire and checks the leader count.
    fn drain(&mut self, id: NodeId) {
        let node = self.nodes.get_mut(&id).expect("draining a live node");
        if node.has_ready() {
            let ready = node.ready();
            for envelope in ready.messages {
                *self
                    .sent_by_kind
                    .entry(envelope.message.kind())
                    .or_default() += 1;
                let latency = if self.latency_ticks_max == 0 {
                    0
                } else {
                    self.rng.range(1, self.latency_ticks_max + 1)
                };
                self.sent_total += 1;
                let key = (self.now_ticks + latency, self.sent_total);
                let flight = Flight {
                    from: id,
                    to: envelope.to,
                    message: envelope.message,
                };
                self.in_flight.insert(key, flight);
            }
        }
        assert!(self.in_flight.len() <= IN_FLIGHT_MAX, "message storm");
        let leaders = self.leaders().len();
        self.leaders_at_once_max = self.leaders_at_once_max.max(leaders);
    }

    /// Delivers `message` from `from` to `to` right now, bypassing the wire.
    pub(crate) fn inject(&mut self, from: NodeId, to: NodeId, message: P::Message) {
        let node = self.nodes.get_mut(&to).expect("injecting into a live node");
        node.step(from, message);
        self.drain(to);
    }

    /// Tells node `at` that its connection to `peer` broke.
    pub(crate) fn hint(&mut self, at: NodeId, peer: NodeId) {
        if let Some(node) = self.nodes.get_mut(&at) {
            node.peer_unreachable(peer);
            self.drain(at);
        }
    }

    /// Crashes node `id`: it disappears with everything in memory, and
    /// messages to it are lost.
    pub(crate) fn crash(&mut self, id: NodeId) {
        assert!(self.nodes.remove(&id).is_some(), "{id} was already down");
    }

    /// Restarts node `id` from nothing.
    pub(crate) fn restart(&mut self, id: NodeId) {
        assert!(!self.nodes.contains_key(&id), "{id} is still up");
        self.restarts += 1;
        self.start(id);
    }

    /// Cuts every link between `side` and the other members, both ways.
    pub(crate) fn partition(&mut self, side: &[u64]) {
        for a in &self.members {
            for b in &self.members {
                if side.contains(&a.0) != side.contains(&b.0) {
                    self.cut.insert((*a, *b));
                }
            }
        }
    }

    /// Restores every link.
    pub(crate) fn heal(&mut self) {
        self.cut.clear();
    }

    /// Live nodes now in the Leader role.
    pub(crate) fn leaders(&self) -> Vec<NodeId> {
        self.nodes
            .iter()
            .filter(|(_, node)| node.status().role == Role::Leader)
            .map(|(id, _)| *id)
            .collect()
    }

    /// The status of live node `id`.
    pub(crate) fn status(&self, id: u64) -> Status {
        self.nodes[&NodeId(id)].status()
    }

    /// Direct access to live node `id`, for white-box assertions.
    pub(crate) fn node(&mut self, id: u64) -> &mut P {
        self.nodes.get_mut(&NodeId(id)).expect("a live node")
    }

    /// Messages of `kind` sent so far.
    pub(crate) fn sent(&self, kind: &str) -> u64 {
        self.sent_by_kind.get(kind).copied().unwrap_or(0)
    }

    /// Forgets the message counts, to measure one episode.
    pub(crate) fn reset_counts(&mut self) {
        self.sent_by_kind.clear();
    }

    /// Crashes and restarts nodes at random, `events` times, `schedule_seed`
    /// choosing what and when: a crash hits the leader more often than not,
    /// at least one node stays up, and with `hints` every live node is told of
    /// each crash at once (as a TCP reset would). Then everything restarts.
    pub(crate) fn crash_and_restart_randomly(
        &mut self,
        schedule_seed: u64,
        events: u64,
        hints: bool,
    ) {
        let mut schedule = Rng::derive(schedule_seed, u64::MAX);
        let size = self.members.len() as u64;
        for _ in 0..events {
            let down: Vec<NodeId> = self
                .members
                .iter()
                .copied()
                .filter(|id| !self.nodes.contains_key(id))
                .collect();
            if !down.is_empty() && schedule.chance(0.5) {
                let index = schedule.range(0, down.len() as u64) as usize;
                self.restart(down[index]);
            } else if (down.len() as u64) + 1 < size {
                let leaders = self.leaders();
                let victim = match leaders.first() {
                    Some(leader) if schedule.chance(0.6) => *leader,
                    _ => NodeId(schedule.range(1, size + 1)),
                };
                if self.nodes.contains_key(&victim) {
                    self.crash(victim);
                    let alive: Vec<NodeId> = self.nodes.keys().copied().collect();
                    for id in alive.into_iter().filter(|_| hints) {
                        self.hint(id, victim);
                    }
                }
            }
            self.run(schedule.range(1, 400));
        }
        let down: Vec<NodeId> = self
            .members
            .iter()
            .copied()
            .filter(|id| !self.nodes.contains_key(id))
            .collect();
        for id in down {
            self.restart(id);
        }
    }

    /// Asserts that exactly `leader` leads and every live node follows it.
    pub(crate) fn assert_settled_on(&self, leader: u64) {
        let leader = NodeId(leader);
        assert_eq!(self.leaders(), vec![leader], "exactly one leader");
        for (id, node) in &self.nodes {
            let status = node.status();
            assert_eq!(status.leader, Some(leader), "{id} follows {leader}");
        }
    }
}
