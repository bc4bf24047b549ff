//! [`World`]: a deterministic simulated cluster. It owns the virtual clock,
//! the network, every host, and the invariant checkers, and it drives the
//! very same protocol code that a real node runs.
//!
//! Scripted tests use it directly (crash this node, cut that link, run for
//! so long); the fault profiles in `scenario.rs` are built on the same calls.

use crate::checkers::{ElectionSafety, SplitBrain, TermMonotonic, Violation};
use crate::event::{Event, EventQueue, NodeIndex};
use crate::host::{HeldInput, Host, HELD_INPUTS_MAX, MISSED_TICKS_BURST_MAX};
use crate::network::Network;
use crate::partition::Partition;
use bellwether_core::{Message, NodeId, Protocol, Rng, Role};
use serde::Serialize;
use std::collections::VecDeque;

mod app;
mod clock_skew;
mod disk;
mod disk_faults;

pub use app::{Application, NoApp};
pub use disk_faults::{
    audit_raft_image, damage_raft_image, DiskFault, DiskGuard, Image, Recovered,
};

/// Settings of a world; everything else follows from the seed.
#[derive(Clone, Debug)]
pub struct WorldConfig {
    /// Cluster size.
    pub nodes: usize,
    /// The one number that fixes the whole run.
    pub seed: u64,
    /// Nominal tick length; protocol timeouts are in ticks.
    pub tick_us: u64,
    /// Smallest one-way network latency.
    pub latency_us_min: u64,
    /// Largest one-way network latency (without delay spikes).
    pub latency_us_max: u64,
    /// Deliver connection-loss hints when a node crashes.
    pub hint: bool,
    /// Each node's clock runs at a rate drawn from `1 ± skew_ppm_max / 10^6`.
    pub skew_ppm_max: u64,
    /// When false, every node boots at t = 0 and ticks in lockstep, the
    /// worst case for split votes (etcd-io/raft #48).
    pub tick_phase_random: bool,
    /// Enforce Election Safety (Raft). Bully and Ring make no such promise.
    pub strict_election_safety: bool,
    /// Any moment with two acting leaders fails the run, as a violation of
    /// this property: every Raft run, and fault-free runs of any algorithm.
    pub split_brain_forbidden: Option<&'static str>,
    /// Keep a human-readable event trace.
    pub trace: bool,
    /// Time one fsync takes; 0 makes the disk synchronous (persisting costs
    /// no virtual time).
    pub fsync_us: u64,
}

impl WorldConfig {
    /// Defaults: 1 ms ticks, 1–5 ms latency, hints on, no skew.
    pub fn new(nodes: usize, seed: u64) -> Self {
        WorldConfig {
            nodes,
            seed,
            tick_us: 1_000,
            latency_us_min: 1_000,
            latency_us_max: 5_000,
            hint: true,
            skew_ppm_max: 0,
            tick_phase_random: true,
            strict_election_safety: true,
            split_brain_forbidden: None,
            trace: false,
            fsync_us: 0,
        }
    }
}

/// One node's uninterrupted time as acting leader.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LeadershipSpan {
    /// The leader.
    pub node: u64,
    /// Its term (or epoch).
    pub term: u64,
    /// When it began acting as leader.
    pub start_us: u64,
    /// When it stopped (stepped down, crashed or paused).
    pub end_us: u64,
}

/// Counters kept while the world runs.
#[derive(Clone, Debug, Default)]
pub struct WorldStats {
    /// Events processed (ticks, deliveries, hints).
    pub events: u64,
    /// Messages handed to the network, by kind (index into `all_kinds`).
    pub sent_by_kind: Vec<u64>,
    /// Messages the network dropped (loss or partition).
    pub dropped: u64,
    /// Times any node entered the leader role.
    pub leader_elections: u64,
    /// For each of those with a log: the entries the new leader had to
    /// fetch before it could serve ([`Protocol::catch_up_entries`]).
    pub catch_up_entries: Vec<u64>,
    /// Disk faults injected ([`World::damage_disk`]).
    pub disk_faults: u64,
    /// Restarts whose audit found the disk short of its promise record.
    pub disk_audits_failed: u64,
}

impl WorldStats {
    /// All messages sent.
    pub fn sent_total(&self) -> u64 {
        self.sent_by_kind.iter().sum()
    }
}

/// A simulated cluster of `P` nodes, with an application `A` on top.
pub struct World<P: Protocol, A: Application<P> = NoApp> {
    /// The application (workload, state machines, its own checkers).
    pub app: A,
    /// Application output not yet handed to `A`, in order. Queued so that an
    /// application reacting to output (e.g. by proposing) never re-enters.
    outputs: VecDeque<(NodeIndex, P::Output)>,
    /// True while outputs are being handed over.
    draining_outputs: bool,
    /// Settings.
    pub config: WorldConfig,
    /// Protocol settings shared by all nodes.
    protocol_config: P::Config,
    /// Member ids, `n1..nN`.
    members: Vec<NodeId>,
    /// The machines, by index.
    pub hosts: Vec<Host<P>>,
    /// Pending events.
    queue: EventQueue<P::Message>,
    /// Links and faults.
    pub network: Network,
    /// Randomness of the network and of faults (nodes have their own).
    pub rng: Rng,
    /// Virtual time.
    now_us: u64,
    /// Invariant: one leader per term.
    election_safety: ElectionSafety,
    /// Invariant: terms never go back.
    term_monotonic: TermMonotonic,
    /// Split-brain incidents (a violation only when forbidden).
    pub split_brain: SplitBrain,
    /// First violation; the world stops running once set.
    violation: Option<Violation>,
    /// Counters.
    pub stats: WorldStats,
    /// The leader every running node follows, if they all agree.
    agreed: Option<NodeId>,
    /// Closed leadership spans, for timelines.
    pub timeline: Vec<LeadershipSpan>,
    /// Per node: `(term, start)` of its open span.
    open_spans: Vec<Option<(u64, u64)>>,
    /// Event trace lines, when enabled.
    pub trace: Vec<String>,
    /// When the first acting leader appeared.
    pub first_leader_us: Option<u64>,
    /// Per directed link (`from * nodes + to`): latest scheduled delivery.
    /// A connection-loss hint is delivered after it, as a TCP reset arrives
    /// after the data that preceded it on the same connection.
    link_last_delivery_us: Vec<u64>,
    /// Promise records and their audit at restart, for protocols that keep
    /// them (see `disk_faults`).
    disk_guard: Option<DiskGuard<P>>,
}

impl<P: Protocol> World<P, NoApp> {
    /// Builds the cluster with no application and boots every node.
    pub fn new(config: WorldConfig, protocol_config: P::Config) -> Self {
        World::with_app(config, protocol_config, NoApp)
    }
}

impl<P: Protocol, A: Application<P>> World<P, A> {
    /// Builds the cluster with application `app` and boots every node at
    /// t = 0.
    pub fn with_app(config: WorldConfig, protocol_config: P::Config, app: A) -> Self {
        assert!(config.nodes >= 1 && config.tick_us >= 1);
        let mut rng = Rng::derive(config.seed, 0);
        let members: Vec<NodeId> = (0..config.nodes).map(Host::<P>::id_of).collect();
        let hosts = (0..config.nodes)
            .map(|_| {
                let skew = config.skew_ppm_max as i64;
                let ppm = if skew == 0 {
                    0
                } else {
                    rng.range(0, 2 * skew as u64 + 1) as i64 - skew
                };
                let interval = config.tick_us as i64 * (1_000_000 + ppm) / 1_000_000;
                Host::new(interval.max(1) as u64)
            })
            .collect();
        let network = Network::new(config.nodes, config.latency_us_min, config.latency_us_max);
        let links = config.nodes * config.nodes;
        let mut world = World {
            app,
            outputs: VecDeque::new(),
            draining_outputs: false,
            split_brain: SplitBrain::new(config.split_brain_forbidden),
            term_monotonic: TermMonotonic::new(config.nodes),
            open_spans: vec![None; config.nodes],
            stats: WorldStats {
                sent_by_kind: vec![0; P::Message::all_kinds().len()],
                ..WorldStats::default()
            },
            config,
            protocol_config,
            members,
            hosts,
            queue: EventQueue::default(),
            network,
            rng,
            now_us: 0,
            election_safety: ElectionSafety::default(),
            violation: None,
            agreed: None,
            timeline: Vec::new(),
            trace: Vec::new(),
            first_leader_us: None,
            link_last_delivery_us: vec![0; links],
            disk_guard: None,
        };
        for index in 0..world.config.nodes {
            world.boot(index);
        }
        world
    }

    /// Current virtual time.
    pub fn now_us(&self) -> u64 {
        self.now_us
    }

    /// The first invariant violation, if any.
    pub fn violation(&self) -> Option<&Violation> {
        self.violation.as_ref()
    }

    /// The leader all running nodes follow, if they agree on one that is
    /// itself running and leading.
    pub fn agreed_leader(&self) -> Option<NodeId> {
        self.agreed
    }

    /// The node at `index`, if it is up.
    pub fn node(&self, index: NodeIndex) -> Option<&P> {
        self.hosts[index].node.as_ref()
    }

    /// Mutable access for scripted tests (e.g. a leadership transfer);
    /// call [`World::flush`] afterwards so its output is sent.
    pub fn node_mut(&mut self, index: NodeIndex) -> Option<&mut P> {
        self.hosts[index].node.as_mut()
    }

    /// Number of nodes that are up and not paused.
    pub fn running_count(&self) -> usize {
        self.hosts.iter().filter(|h| h.is_running()).count()
    }

    /// Acting leaders: running nodes in the leader role, as `(id, term)`.
    pub fn acting_leaders(&self) -> Vec<(NodeId, u64)> {
        self.hosts
            .iter()
            .filter(|h| h.is_running())
            .filter_map(|h| h.last_status)
            .filter(|s| s.role == Role::Leader)
            .map(|s| (s.id, s.term.0))
            .collect()
    }

    fn trace_line(&mut self, line: impl FnOnce() -> String) {
        if self.config.trace {
            let text = format!("{:>11.3} ms  {}", self.now_us as f64 / 1000.0, line());
            self.trace.push(text);
        }
    }

    // --- running -----------------------------------------------------------

    /// Processes events up to and including `until_us`, then sets the clock
    /// there. Stops early at the first violation.
    pub fn run_until(&mut self, until_us: u64) -> Result<(), Violation> {
        while self.queue.peek_time().is_some_and(|t| t <= until_us) {
            self.process_next();
            if let Some(violation) = &self.violation {
                return Err(violation.clone());
            }
        }
        self.now_us = self.now_us.max(until_us);
        Ok(())
    }

    /// Runs for `duration_us` more.
    pub fn run_for(&mut self, duration_us: u64) -> Result<(), Violation> {
        self.run_until(self.now_us + duration_us)
    }

    /// Runs until every running node agrees on one running leader, or until
    /// `deadline_us`. Returns the leader and when agreement was reached.
    pub fn run_until_agreement(
        &mut self,
        deadline_us: u64,
    ) -> Result<Option<(NodeId, u64)>, Violation> {
        if let Some(leader) = self.agreed {
            return Ok(Some((leader, self.now_us)));
        }
        while self.queue.peek_time().is_some_and(|t| t <= deadline_us) {
            self.process_next();
            if let Some(violation) = &self.violation {
                return Err(violation.clone());
            }
            if let Some(leader) = self.agreed {
                return Ok(Some((leader, self.now_us)));
            }
        }
        self.now_us = self.now_us.max(deadline_us);
        Ok(None)
    }

    fn process_next(&mut self) {
        let Some((time_us, event)) = self.queue.pop() else {
            return;
        };
        assert!(time_us >= self.now_us, "virtual time never goes back");
        self.now_us = time_us;
        self.stats.events += 1;
        match event {
            Event::Tick { node, generation } => self.on_tick(node, generation),
            Event::Deliver {
                from,
                to,
                incarnation,
                message,
            } => self.on_deliver(from, to, incarnation, message),
            Event::Hint {
                node,
                incarnation,
                peer,
            } => self.on_hint(node, incarnation, peer),
            Event::DiskDone { node, incarnation } => self.on_disk_done(node, incarnation),
            Event::App { token } => A::on_timer(self, token),
        }
        self.drain_outputs();
    }

    fn on_tick(&mut self, index: NodeIndex, generation: u64) {
        let host = &mut self.hosts[index];
        if host.tick_generation != generation || !host.is_running() {
            return;
        }
        host.node.as_mut().expect("running").tick();
        let next = self.now_us + host.tick_interval_us;
        self.queue.push(
            next,
            Event::Tick {
                node: index,
                generation,
            },
        );
        self.after_input(index);
    }

    fn on_deliver(
        &mut self,
        from: NodeIndex,
        to: NodeIndex,
        incarnation: u64,
        message: P::Message,
    ) {
        let host = &self.hosts[to];
        if host.node.is_none()
            || host.incarnation != incarnation
            || self.network.is_blocked(from, to)
        {
            self.stats.dropped += 1;
            return;
        }
        if host.paused {
            self.hold(to, HeldInput::Message(from, message));
            return;
        }
        self.trace_line(|| format!("n{} -> n{}  {:?}", from + 1, to + 1, message));
        let node = self.hosts[to].node.as_mut().expect("up");
        node.step(Host::<P>::id_of(from), message);
        self.after_input(to);
    }

    fn on_hint(&mut self, index: NodeIndex, incarnation: u64, peer: NodeIndex) {
        let host = &self.hosts[index];
        if host.node.is_none() || host.incarnation != incarnation {
            return;
        }
        if host.paused {
            self.hold(index, HeldInput::Hint(peer));
            return;
        }
        self.trace_line(|| format!("n{}: connection to n{} lost", index + 1, peer + 1));
        let node = self.hosts[index].node.as_mut().expect("up");
        node.peer_unreachable(Host::<P>::id_of(peer));
        self.after_input(index);
    }

    fn hold(&mut self, index: NodeIndex, input: HeldInput<P::Message>) {
        let held = &mut self.hosts[index].held;
        if held.len() >= HELD_INPUTS_MAX {
            held.pop_front();
            self.stats.dropped += 1;
        }
        held.push_back(input);
    }

    /// Carries out a node's output after an input, then re-checks invariants.
    fn after_input(&mut self, index: NodeIndex) {
        self.flush(index);
        self.observe(index);
    }

    /// Takes whatever node `index` has ready and passes it through its disk:
    /// persisted first, then its messages are sent and its output handed to
    /// the application.
    pub fn flush(&mut self, index: NodeIndex) {
        loop {
            let Some(node) = self.hosts[index].node.as_mut() else {
                return;
            };
            if !node.has_ready() {
                break;
            }
            let ready = node.ready();
            self.write_through_disk(index, ready);
        }
        A::on_flushed(self, index);
    }

    fn send(&mut self, from: NodeIndex, to: NodeIndex, message: P::Message) {
        assert!(
            to < self.config.nodes && to != from,
            "bad destination n{}",
            to + 1
        );
        let kind = message.kind();
        let kind_index = P::Message::all_kinds()
            .iter()
            .position(|k| *k == kind)
            .expect("listed kind");
        self.stats.sent_by_kind[kind_index] += 1;
        if self.rng.chance(self.network.faults.loss) {
            self.stats.dropped += 1;
            return;
        }
        if self.rng.chance(self.network.faults.duplicate) {
            self.schedule_delivery(from, to, message.clone());
        }
        self.schedule_delivery(from, to, message);
    }

    /// Puts one copy of `message` on the wire with a sampled latency.
    fn schedule_delivery(&mut self, from: NodeIndex, to: NodeIndex, message: P::Message) {
        let incarnation = self.hosts[to].incarnation;
        let at = self.now_us + self.network.sample_latency_us(&mut self.rng);
        let last = &mut self.link_last_delivery_us[from * self.config.nodes + to];
        *last = (*last).max(at);
        let deliver = Event::Deliver {
            from,
            to,
            incarnation,
            message,
        };
        self.queue.push(at, deliver);
    }

    /// Re-reads node `index`'s status and runs the checkers if it changed.
    fn observe(&mut self, index: NodeIndex) {
        let status = self.hosts[index].node.as_ref().map(|n| n.status());
        let previous = self.hosts[index].last_status;
        if status == previous {
            // Who must follow the leader can change without any status
            // changing (a membership change), so agreement is re-read.
            self.agreed = self.compute_agreement();
            return;
        }
        self.hosts[index].last_status = status;
        A::on_status(self, index, previous, status);
        if let Some(status) = status {
            self.trace_line(|| {
                let leader = status.leader.map_or("none".to_string(), |l| l.to_string());
                format!(
                    "n{} is {} in {} (leader {})",
                    index + 1,
                    status.role.as_str(),
                    status.term,
                    leader
                )
            });
            if status.role == Role::Leader && previous.is_none_or(|p| p.role != Role::Leader) {
                self.stats.leader_elections += 1;
                let node = self.hosts[index].node.as_ref().expect("a leader runs");
                if let Some(entries) = node.catch_up_entries() {
                    self.stats.catch_up_entries.push(entries);
                }
            }
            let mut result = self.term_monotonic.observe(self.now_us, index, status.term);
            if self.config.strict_election_safety {
                result = result.and_then(|_| self.election_safety.observe(self.now_us, &status));
            }
            self.record(result);
        }
        self.refresh_leadership();
    }

    fn record(&mut self, result: Result<(), Violation>) {
        if let Err(violation) = result {
            self.violation.get_or_insert(violation);
        }
    }

    /// Recomputes acting leaders, split brain, timeline spans and agreement.
    fn refresh_leadership(&mut self) {
        let leaders = self.acting_leaders();
        if !leaders.is_empty() && self.first_leader_us.is_none() {
            self.first_leader_us = Some(self.now_us);
        }
        let result = self.split_brain.observe(self.now_us, &leaders);
        self.record(result);
        for index in 0..self.config.nodes {
            let id = Host::<P>::id_of(index);
            let acting = leaders
                .iter()
                .find(|(l, _)| *l == id)
                .map(|(_, term)| *term);
            match (self.open_spans[index], acting) {
                (None, Some(term)) => self.open_spans[index] = Some((term, self.now_us)),
                (Some((term, start)), now) if now != Some(term) => {
                    self.timeline.push(LeadershipSpan {
                        node: id.0,
                        term,
                        start_us: start,
                        end_us: self.now_us,
                    });
                    self.open_spans[index] = now.map(|t| (t, self.now_us));
                }
                _ => {}
            }
        }
        self.agreed = self.compute_agreement();
    }

    /// The acting leader that every running node the application names
    /// (by default, all of them) follows, if there is one.
    fn compute_agreement(&self) -> Option<NodeId> {
        let running: Vec<NodeIndex> = (0..self.config.nodes)
            .filter(|i| self.hosts[*i].is_running())
            .collect();
        let acting = running.iter().copied().filter(|i| {
            self.hosts[*i]
                .last_status
                .is_some_and(|s| s.role == Role::Leader)
        });
        for leader_index in acting {
            let leader = Host::<P>::id_of(leader_index);
            let all = running
                .iter()
                .filter(|i| A::must_follow(self, leader_index, **i))
                .all(|i| {
                    self.hosts[*i]
                        .last_status
                        .is_some_and(|s| s.leader == Some(leader))
                });
            if all {
                return Some(leader);
            }
        }
        None
    }

    /// Runs the application's timer `token` at `at_us`.
    pub fn schedule_app_timer(&mut self, at_us: u64, token: u64) {
        assert!(at_us >= self.now_us, "timers are set in the future");
        self.queue.push(at_us, Event::App { token });
    }

    /// Records a violation found by the application's own checkers; the
    /// world stops at the end of the current event.
    pub fn report_violation(&mut self, violation: Violation) {
        self.violation.get_or_insert(violation);
    }

    /// Re-checks node `index` after its disk completed writes.
    pub(super) fn observe_after_disk(&mut self, index: NodeIndex) {
        self.observe(index);
    }

    /// Closes open spans and incidents; call once at the end of a run.
    pub fn finish(&mut self) {
        for index in 0..self.config.nodes {
            if let Some((term, start)) = self.open_spans[index].take() {
                self.timeline.push(LeadershipSpan {
                    node: index as u64 + 1,
                    term,
                    start_us: start,
                    end_us: self.now_us,
                });
            }
        }
        self.split_brain.finish(self.now_us);
    }

    // --- faults ------------------------------------------------------------

    fn boot(&mut self, index: NodeIndex) {
        let stream = ((index as u64 + 1) << 32) | self.hosts[index].incarnation;
        let rng = Rng::derive(self.config.seed, stream);
        let Some(node) = self.build_node(index, rng) else {
            return;
        };
        let host = &mut self.hosts[index];
        host.node = Some(node);
        host.paused = false;
        host.tick_generation += 1;
        let interval = host.tick_interval_us;
        let first = if self.config.tick_phase_random {
            self.rng.range(1, interval + 1)
        } else {
            interval
        };
        let generation = self.hosts[index].tick_generation;
        self.queue.push(
            self.now_us + first,
            Event::Tick {
                node: index,
                generation,
            },
        );
        self.trace_line(|| format!("n{} boots", index + 1));
        let durable_term = P::durable_term(&self.hosts[index].disk);
        self.term_monotonic.restart(index, durable_term);
        A::on_boot(self, index);
        self.after_input(index);
    }

    /// Kills node `index`: volatile state is lost, its disk is kept. Peers
    /// with a working link get a connection-loss hint one latency later.
    pub fn crash(&mut self, index: NodeIndex) {
        let host = &mut self.hosts[index];
        if host.node.is_none() {
            return;
        }
        host.node = None;
        host.paused = false;
        host.held.clear();
        host.tick_generation += 1;
        // Writes not yet fsynced are lost, and with them the messages and
        // output that waited for them.
        host.unsynced.clear();
        host.disk_busy = false;
        self.outputs.retain(|(node, _)| *node != index);
        self.trace_line(|| format!("n{} crashes", index + 1));
        if self.config.hint {
            for peer in (0..self.config.nodes).filter(|p| *p != index) {
                if self.hosts[peer].node.is_some() && !self.network.is_blocked(index, peer) {
                    let latency = self.network.sample_latency_us(&mut self.rng);
                    let in_flight = self.link_last_delivery_us[index * self.config.nodes + peer];
                    let at = (self.now_us + latency).max(in_flight + 1);
                    let incarnation = self.hosts[peer].incarnation;
                    self.queue.push(
                        at,
                        Event::Hint {
                            node: peer,
                            incarnation,
                            peer: index,
                        },
                    );
                }
            }
        }
        self.observe(index);
    }

    /// Restarts a crashed node from its disk.
    pub fn restart(&mut self, index: NodeIndex) {
        if self.hosts[index].node.is_some() {
            return;
        }
        self.hosts[index].incarnation += 1;
        self.trace_line(|| format!("n{} restarts", index + 1));
        self.boot(index);
    }

    /// Stops node `index` (SIGSTOP): no ticks, input waits in its buffers.
    pub fn pause(&mut self, index: NodeIndex) {
        let now = self.now_us;
        let host = &mut self.hosts[index];
        if host.node.is_none() || host.paused {
            return;
        }
        host.paused = true;
        host.paused_at_us = now;
        host.tick_generation += 1;
        self.trace_line(|| format!("n{} pauses", index + 1));
        self.refresh_leadership();
    }

    /// Resumes a paused node (SIGCONT). It wakes with the view it had when
    /// it stopped; first its timers catch up on the ticks it missed, then it
    /// reads the input buffered meanwhile.
    pub fn resume(&mut self, index: NodeIndex) {
        let now = self.now_us;
        let host = &mut self.hosts[index];
        if host.node.is_none() || !host.paused {
            return;
        }
        host.paused = false;
        host.tick_generation += 1;
        let (generation, interval) = (host.tick_generation, host.tick_interval_us);
        let missed = ((now - host.paused_at_us) / interval).min(MISSED_TICKS_BURST_MAX);
        self.queue.push(
            now + interval,
            Event::Tick {
                node: index,
                generation,
            },
        );
        self.trace_line(|| format!("n{} resumes after missing {missed} ticks", index + 1));
        for _ in 0..missed {
            self.hosts[index].node.as_mut().expect("up").tick();
            self.after_input(index);
        }
        while let Some(input) = self.hosts[index].held.pop_front() {
            let node = self.hosts[index].node.as_mut().expect("up");
            match input {
                HeldInput::Message(from, message) => node.step(Host::<P>::id_of(from), message),
                HeldInput::Hint(peer) => node.peer_unreachable(Host::<P>::id_of(peer)),
            }
            self.after_input(index);
        }
        self.observe(index);
        self.refresh_leadership();
    }

    /// Adds a partition on top of whatever is already cut.
    pub fn partition(&mut self, partition: &Partition) {
        self.trace_line(|| format!("partition: {partition}"));
        partition.apply(&mut self.network, self.config.nodes);
    }

    /// Restores every link.
    pub fn heal_links(&mut self) {
        self.trace_line(|| "partitions healed".to_string());
        self.network.heal_links();
    }
}
