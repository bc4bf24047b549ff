//! The checkers must be able to fail. These tests run deliberately broken
//! variants of Raft through ordinary sweeps and demand that the simulator
//! catches them.

use bellwether_core::raft::{
    RaftConfig, RaftDurable, RaftMessage, RaftNode, RaftOutput, RaftPersist,
};
use bellwether_core::{NodeId, Protocol, Ready, Rng, Status};
use bellwether_sim::scenario::run_with;
use bellwether_sim::{Algorithm, FaultProfile, RunSpec};

/// Raft with one deliberate bug, chosen by `BUG`.
struct Mutant<const BUG: u8>(RaftNode);

/// Forgets whom it voted for after every message, so it can vote for two
/// candidates in one term: the textbook way to get two leaders.
const FORGETS_VOTES: u8 = 0;
/// With the adaptive detector on, keeps a leader in office for a whole
/// election timeout, though followers may vote one detector floor after
/// they last heard it.
const TIMEOUT_LEADERSHIP: u8 = 1;

type ForgetsVotes = Mutant<FORGETS_VOTES>;
type TimeoutLeadership = Mutant<TIMEOUT_LEADERSHIP>;

impl<const BUG: u8> Protocol for Mutant<BUG> {
    type Config = RaftConfig;
    type Message = RaftMessage;
    type Durable = RaftDurable;
    type Persist = RaftPersist;
    type Output = RaftOutput;
    const NAME: &'static str = "raft";

    fn new(
        config: &RaftConfig,
        id: NodeId,
        members: &[NodeId],
        durable: RaftDurable,
        rng: Rng,
    ) -> Self {
        let mut node = RaftNode::new(config, id, members, durable, rng);
        if BUG == TIMEOUT_LEADERSHIP {
            node.keep_timeout_leadership_for_fault_injection();
        }
        Mutant(node)
    }
    fn tick(&mut self) {
        self.0.tick()
    }
    fn step(&mut self, from: NodeId, message: RaftMessage) {
        self.0.step(from, message);
        if BUG == FORGETS_VOTES {
            self.0.forget_vote_for_fault_injection();
        }
    }
    fn peer_unreachable(&mut self, peer: NodeId) {
        self.0.peer_unreachable(peer)
    }
    fn has_ready(&self) -> bool {
        self.0.has_ready()
    }
    fn durable_term(durable: &RaftDurable) -> bellwether_core::Term {
        RaftNode::durable_term(durable)
    }
    fn apply_persist(durable: &mut RaftDurable, persist: RaftPersist) {
        RaftNode::apply_persist(durable, persist)
    }
    fn ready(&mut self) -> Ready<Self> {
        let inner = self.0.ready();
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

#[test]
fn a_raft_that_forgets_its_vote_is_caught_by_election_safety() {
    // Without PreVote, split votes (two candidates in one term) are common
    // enough for the bug to bite within a sweep.
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

#[test]
fn a_raft_leader_that_outlives_its_lease_is_caught_overlapping() {
    // Without stickiness a follower votes as soon as its own timer fires,
    // and the leader steps down by the older CheckQuorum rule (no quorum
    // heard for one election timeout): the two can both lead for a while.
    let config = RaftConfig {
        leader_stickiness: false,
        ..RaftConfig::default()
    };
    let caught = (1..=3_000).find_map(|seed| {
        let spec = RunSpec::new(Algorithm::Raft, 3, seed, FaultProfile::Partition);
        let report = run_with::<RaftNode>(&spec, config.clone());
        report
            .violation
            .filter(|v| v.property == "raft-leaders-never-overlap")
            .map(|v| (seed, v))
    });
    assert!(
        caught.is_some(),
        "3000 partition seeds never showed two Raft leaders at once"
    );
}

#[test]
fn the_correct_raft_never_overlaps_in_the_same_sweep() {
    for seed in 1..=1_000 {
        let spec = RunSpec::new(Algorithm::Raft, 3, seed, FaultProfile::Partition);
        let report = run_with::<RaftNode>(&spec, RaftConfig::default());
        assert!(report.passed(), "seed {seed}: {:?}", report.violation);
    }
}

#[test]
fn a_leader_that_outlives_its_followers_detectors_is_caught_overlapping() {
    // The detector lets a follower vote one floor after it last heard the
    // leader; a leader that still counts a whole election timeout for its
    // term of office overlaps the successor a partition elects.
    let find = |broken: bool| {
        (1..=200).find_map(|seed| {
            let mut spec = RunSpec::new(Algorithm::Raft, 3, seed, FaultProfile::Partition);
            spec.detector = true;
            let config = bellwether_sim::run::raft_config(&spec);
            let report = if broken {
                run_with::<TimeoutLeadership>(&spec, config)
            } else {
                run_with::<RaftNode>(&spec, config)
            };
            report
                .violation
                .filter(|v| v.property == "raft-leaders-never-overlap")
                .map(|v| (seed, v))
        })
    };
    assert!(
        find(true).is_some(),
        "200 partition seeds never showed the overlap"
    );
    let correct = find(false);
    assert!(
        correct.is_none(),
        "the correct Raft overlapped: {correct:?}"
    );
}
