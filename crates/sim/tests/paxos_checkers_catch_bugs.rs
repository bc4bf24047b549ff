//! The Paxos checkers must be able to fail. A Multi-Paxos whose acceptors
//! leave their accepted entries out of phase 1 lets a new leader overwrite
//! a chosen value, and one without leases lets a deposed leader act beside
//! its successor; ordinary sweeps must catch both, and pass the correct
//! algorithm on the same seeds.

use bellwether_core::paxos::{
    PaxosConfig, PaxosDurable, PaxosMessage, PaxosNode, PaxosOutput, PaxosPersist,
};
use bellwether_core::{NodeId, Protocol, Ready, Rng, Status, Term};
use bellwether_sim::run::run_paxos_with;
use bellwether_sim::{Algorithm, FaultProfile, RunSpec};

/// Paxos whose acceptors promise without reporting what they accepted: the
/// textbook way to lose a chosen value.
struct HidesAcceptedEntries(PaxosNode);

impl Protocol for HidesAcceptedEntries {
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
        HidesAcceptedEntries(PaxosNode::new(config, id, members, durable, rng))
    }
    fn apply_persist(durable: &mut PaxosDurable, persist: PaxosPersist) {
        PaxosNode::apply_persist(durable, persist)
    }
    fn durable_term(durable: &PaxosDurable) -> Term {
        PaxosNode::durable_term(durable)
    }
    fn tick(&mut self) {
        self.0.tick()
    }
    fn step(&mut self, from: NodeId, message: PaxosMessage) {
        self.0.step(from, message)
    }
    fn peer_unreachable(&mut self, peer: NodeId) {
        self.0.peer_unreachable(peer)
    }
    fn has_ready(&self) -> bool {
        self.0.has_ready()
    }
    fn ready(&mut self) -> Ready<Self> {
        let mut inner = self.0.ready();
        for envelope in &mut inner.messages {
            if let PaxosMessage::Promise { entries, .. } = &mut envelope.message {
                entries.clear();
            }
        }
        Ready {
            persist: inner.persist,
            messages: inner.messages,
            output: inner.output,
        }
    }
    fn status(&self) -> Status {
        self.0.status()
    }
}

fn chaos(seed: u64) -> RunSpec {
    RunSpec::new(Algorithm::Paxos, 5, seed, FaultProfile::Chaos)
}

#[test]
fn a_paxos_that_hides_accepted_entries_in_its_promises_is_caught() {
    let caught = (1..=2_000).find_map(|seed| {
        let report = run_paxos_with::<HidesAcceptedEntries>(&chaos(seed), PaxosConfig::default());
        report
            .violation
            .filter(|v| v.property == "paxos-one-value-per-slot")
            .map(|v| (seed, v))
    });
    assert!(
        caught.is_some(),
        "2000 chaos seeds never caught a lost chosen value"
    );
}

#[test]
fn the_correct_paxos_passes_chaos_seeds() {
    for seed in 1..=300 {
        let report = run_paxos_with::<PaxosNode>(&chaos(seed), PaxosConfig::default());
        assert!(report.passed(), "seed {seed}: {:?}", report.violation);
    }
}

#[test]
fn a_paxos_without_leases_is_caught_with_two_leaders_at_once() {
    let config = PaxosConfig {
        leases: false,
        ..PaxosConfig::default()
    };
    let caught = (1..=1_000).find_map(|seed| {
        let spec = RunSpec::new(Algorithm::Paxos, 3, seed, FaultProfile::Partition);
        let report = run_paxos_with::<PaxosNode>(&spec, config.clone());
        report
            .violation
            .filter(|v| v.property == "paxos-leaders-never-overlap")
    });
    assert!(
        caught.is_some(),
        "1000 partition seeds never showed two leaders"
    );
}

#[test]
fn the_correct_paxos_never_overlaps_in_partition_seeds() {
    for seed in 1..=1_000 {
        let spec = RunSpec::new(Algorithm::Paxos, 3, seed, FaultProfile::Partition);
        let report = run_paxos_with::<PaxosNode>(&spec, PaxosConfig::default());
        assert!(report.passed(), "seed {seed}: {:?}", report.violation);
    }
}
