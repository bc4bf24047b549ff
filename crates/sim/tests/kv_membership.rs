//! Membership changes (thesis §4) under faults: while clients run, the
//! leader keeps removing voters (itself included), adding them back as
//! learners and promoting them. Every invariant and linearizability must
//! hold, the cluster must recover after healing, and a removed node that
//! missed its own removal must not disrupt the others.

use bellwether_core::raft::{MembershipChange, RaftConfig, RaftNode};
use bellwether_core::Protocol;
use bellwether_sim::kv::{KvApp, KvConfig, RaftLike};
use bellwether_sim::{run, FaultProfile, Partition, RunSpec, World, WorldConfig};

fn membership_spec(seed: u64, faults: FaultProfile) -> RunSpec {
    RunSpec {
        readers: 2,
        op_timeout_ms: 100,
        ..RunSpec::kv(5, seed, faults).with_membership_changes()
    }
}

#[test]
fn membership_changes_under_chaos_keep_every_invariant_and_linearizability() {
    let (mut changes, mut leader_removals) = (0, 0);
    for seed in 1..=300 {
        let report = run(&membership_spec(seed, FaultProfile::Chaos));
        assert!(
            report.passed(),
            "seed {seed}: {:?}\nreplay: {}",
            report.violation,
            report.spec.replay_command()
        );
        let workload = report.workload.expect("the workload ran");
        assert_eq!(workload.linearizability, "linearizable");
        changes += workload.membership_changes;
        leader_removals += workload.leader_removals;
    }
    // Without these the test would pass with no change ever made.
    assert!(changes > 1_000, "only {changes} membership changes");
    assert!(
        leader_removals > 100,
        "only {leader_removals} leader removals"
    );
}

#[test]
fn membership_changes_across_crashes_and_partitions_keep_every_invariant() {
    for faults in [FaultProfile::Crash, FaultProfile::Partition] {
        for seed in 1..=50 {
            let report = run(&membership_spec(seed, faults));
            assert!(
                report.passed(),
                "{faults} seed {seed}: {:?}\nreplay: {}",
                report.violation,
                report.spec.replay_command()
            );
        }
    }
}

#[test]
fn membership_changes_with_lease_reads_stay_linearizable() {
    for seed in 1..=100 {
        let spec = RunSpec {
            readers: 2,
            op_timeout_ms: 100,
            ..RunSpec::kv(5, seed, FaultProfile::Chaos)
                .with_membership_changes()
                .with_lease_reads()
        };
        let report = run(&spec);
        assert!(
            report.passed(),
            "seed {seed}: {:?}\nreplay: {}",
            report.violation,
            spec.replay_command()
        );
    }
}

#[test]
fn a_removed_node_that_missed_its_removal_does_not_disrupt_the_cluster() {
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
        let leader_index = (leader.0 - 1) as usize;
        let victim = (leader_index + 1) % 5;
        // Cut off, the victim never hears of its removal: it still thinks
        // it votes, times out and campaigns once the links heal.
        world.partition(&Partition::Isolated { node: victim });
        let removal = MembershipChange::Remove(bellwether_core::NodeId(victim as u64 + 1));
        let raft = world.node_mut(leader_index).expect("up").raft_mut();
        raft.propose_membership(removal).expect("removal accepted");
        world.flush(leader_index);
        world.run_for(1_000_000).unwrap();
        let victim_raft = world.node(victim).expect("up").raft();
        assert!(
            victim_raft.cluster().voters.len() == 5,
            "seed {seed}: the isolated victim must not know of its removal"
        );
        let term = world.node(leader_index).expect("up").status().term;
        let completed = world.app.clients.completed();
        world.heal_links();
        world.run_for(3_000_000).unwrap();
        let status = world.node(leader_index).expect("up").status();
        assert_eq!(
            (status.leader, status.term),
            (Some(leader), term),
            "seed {seed}: the removed node's campaigns unseated the leader"
        );
        assert_eq!(world.agreed_leader(), Some(leader), "seed {seed}");
        assert!(
            world.app.clients.completed() > completed + 500,
            "seed {seed}: the clients stalled"
        );
        assert!(world.violation().is_none(), "{:?}", world.violation());
    }
}
