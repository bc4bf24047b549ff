//! The checkers must be able to fail. These tests run deliberately broken
//! variants of Raft through ordinary sweeps and demand that the simulator
//! catches them.

use bellwether_core::raft::{RaftConfig, RaftDurable, RaftMessage, RaftNode};
use bellwether_core::{NodeId, Protocol, Ready, Rng, Status};
use bellwether_sim::scenario::run_with;
use bellwether_sim::{Algorithm, FaultProfile, RunSpec};

/// Raft that "persists" its term but silently drops its vote, so after a
/// crash it can vote a second time in the same term.
struct ForgetsVotes(RaftNode);

impl Protocol for ForgetsVotes {
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
        ForgetsVotes(RaftNode::new(config, id, members, durable, rng))
    }
    fn tick(&mut self) {
        self.0.tick()
    }
    fn step(&mut self, from: NodeId, message: RaftMessage) {
        self.0.step(from, message)
    }
    fn peer_unreachable(&mut self, peer: NodeId) {
        self.0.peer_unreachable(peer)
    }
    fn has_ready(&self) -> bool {
        self.0.has_ready()
    }
    fn apply_persist(durable: &mut RaftDurable, persist: RaftDurable) {
        RaftNode::apply_persist(durable, persist)
    }
    fn ready(&mut self) -> Ready<Self> {
        let inner = self.0.ready();
        let mut ready: Ready<Self> = Ready {
            persist: inner.persist,
            messages: inner.messages,
            output: inner.output,
        };
        if let Some(durable) = ready.persist.as_mut() {
            durable.hard_state.voted_for = None;
        }
        ready
    }
    fn status(&self) -> Status {
        self.0.status()
    }
}

#[test]
fn a_raft_that_forgets_its_vote_is_caught_by_election_safety() {
    // Without PreVote and with hints off, crashed voters restart into
    // contested terms often enough for the bug to bite within a sweep.
    let config = RaftConfig {
        pre_vote: false,
        ..RaftConfig::default()
    };
    let caught = (1..=3_000).find_map(|seed| {
        let mut spec = RunSpec::new(Algorithm::Raft, 5, seed, FaultProfile::Chaos);
        spec.hint = false;
        let report = run_with::<ForgetsVotes>(&spec, config.clone());
        report.violation.filter(|v| v.property == "election-safety")
    });
    assert!(
        caught.is_some(),
        "3000 chaos seeds never caught a double vote"
    );
}

#[test]
fn the_correct_raft_passes_the_same_sweep() {
    let config = RaftConfig {
        pre_vote: false,
        ..RaftConfig::default()
    };
    for seed in 1..=300 {
        let mut spec = RunSpec::new(Algorithm::Raft, 5, seed, FaultProfile::Chaos);
        spec.hint = false;
        let report = run_with::<RaftNode>(&spec, config.clone());
        assert!(report.passed(), "seed {seed}: {:?}", report.violation);
    }
}
