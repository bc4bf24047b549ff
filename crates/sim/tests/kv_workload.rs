//! The KV workload over Raft: linearizable histories and intact replication
//! invariants under faults, a disk stall that must not block the cluster,
//! and broken variants of Raft that the checks must catch.

use bellwether_core::raft::{
    RaftConfig, RaftDurable, RaftMessage, RaftNode, RaftOutput, RaftPersist,
};
use bellwether_core::{NodeId, Protocol, Ready, Rng, Status, Term};
use bellwether_sim::kv::{KvApp, KvConfig, RaftLike};
use bellwether_sim::run::run_kv_with;
use bellwether_sim::{run, FaultProfile, RunSpec, World, WorldConfig};

#[test]
fn kv_histories_are_linearizable_under_every_fault_profile() {
    for faults in [
        FaultProfile::None,
        FaultProfile::Crash,
        FaultProfile::Partition,
        FaultProfile::Chaos,
    ] {
        for seed in 1..=40 {
            let report = run(&RunSpec::kv(5, seed, faults));
            assert!(
                report.passed(),
                "{faults} seed {seed}: {:?}",
                report.violation
            );
            let workload = report.workload.expect("the workload ran");
            assert!(
                workload.completed > 50,
                "{faults} seed {seed}: only {} ops completed",
                workload.completed
            );
            assert_eq!(workload.linearizability, "linearizable");
        }
    }
}

#[test]
fn hashicorp_raft_503_a_leader_whose_disk_stalls_does_not_block_the_cluster() {
    for seed in 1..=10 {
        let config = WorldConfig {
            fsync_us: 500,
            ..WorldConfig::new(5, seed)
        };
        let app = KvApp::new(KvConfig::default(), 5, seed);
        let mut world = World::<RaftNode, KvApp>::with_app(config, RaftConfig::default(), app);
        KvApp::start(&mut world);
        let (leader, _) = world
            .run_until_agreement(5_000_000)
            .unwrap()
            .expect("a leader");
        world.run_for(300_000).unwrap();
        let stalled = (leader.0 - 1) as usize;
        let before = world.app.clients.completed();
        world.stall_disk(stalled, world.now_us() + 3_000_000);
        world.run_for(2_000_000).unwrap();
        let during = world.app.clients.completed() - before;
        assert!(
            during > 100,
            "seed {seed}: only {during} operations completed while the leader's disk stalled"
        );
        let leaders = world.acting_leaders();
        assert!(
            leaders.iter().any(|(id, _)| *id != leader),
            "seed {seed}: another node leads while {leader}'s disk is stuck: {leaders:?}"
        );
        assert!(world.violation().is_none());
    }
}

/// Raft that acknowledges entries without ever writing them to disk: after
/// a crash a node forgets entries it promised to keep.
struct NeverPersistsEntries(RaftNode);

impl Protocol for NeverPersistsEntries {
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
        NeverPersistsEntries(RaftNode::new(config, id, members, durable, rng))
    }
    fn durable_term(durable: &RaftDurable) -> Term {
        RaftNode::durable_term(durable)
    }
    fn apply_persist(durable: &mut RaftDurable, persist: RaftPersist) {
        RaftNode::apply_persist(durable, persist)
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
    fn ready(&mut self) -> Ready<Self> {
        let inner = self.0.ready();
        let persist = inner.persist.map(|p| RaftPersist {
            entries: Vec::new(),
            snapshot: None,
            hard_state: p.hard_state.map(|mut h| {
                h.commit = bellwether_core::LogIndex(0);
                h
            }),
        });
        Ready {
            persist,
            messages: inner.messages,
            output: inner.output,
        }
    }
    fn status(&self) -> Status {
        self.0.status()
    }
}

impl RaftLike for NeverPersistsEntries {
    fn raft(&self) -> &RaftNode {
        &self.0
    }
    fn raft_mut(&mut self) -> &mut RaftNode {
        &mut self.0
    }
}

#[test]
fn a_raft_that_acknowledges_entries_without_persisting_them_is_caught() {
    // Crashes then lose entries that were acknowledged; some run must show
    // it as a broken invariant or a non-linearizable history.
    let caught = (1..=500).find_map(|seed| {
        let report = run_kv_with::<NeverPersistsEntries>(
            &RunSpec::kv(3, seed, FaultProfile::Chaos),
            RaftConfig::default(),
        );
        report.violation
    });
    let violation = caught.expect("500 chaos seeds never noticed lost acknowledged entries");
    let properties = [
        "linearizability",
        "state-machine-safety",
        "leader-completeness",
        "log-matching",
    ];
    assert!(
        properties.contains(&violation.property),
        "caught as {}",
        violation.property
    );
}
