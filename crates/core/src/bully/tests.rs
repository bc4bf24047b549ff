//! Pure-core scenario tests for Bully (Garcia-Molina, 1982). Each test names
//! the property it asserts.

use super::{BullyConfig, BullyMessage, BullyNode, Winner};
use crate::protocol::{Protocol, Role};
use crate::test_cluster::Cluster;
use crate::types::NodeId;

/// The largest one-way latency of a fault-free run, in ticks.
const LATENCY_TICKS_MAX: u64 = 5;

fn config(winner: Winner) -> BullyConfig {
    BullyConfig {
        winner,
        ..BullyConfig::default()
    }
}

/// The node that should lead among `alive` under `winner`.
fn best(winner: Winner, alive: &[u64]) -> u64 {
    let ids: Vec<NodeId> = alive.iter().copied().map(NodeId).collect();
    winner.best(&ids).expect("some node is alive").0
}

/// A cluster whose messages arrive at once, so no timeout races a reply.
fn instant(winner: Winner, size: u64) -> Cluster<BullyNode> {
    Cluster::new(config(winner), size, 7, 0)
}

/// A cluster with the fault-free latency of 1 to 5 ticks, drawn from `seed`.
fn timed(winner: Winner, size: u64, seed: u64) -> Cluster<BullyNode> {
    Cluster::new(config(winner), size, seed, LATENCY_TICKS_MAX)
}

#[test]
fn three_and_five_node_clusters_elect_the_best_node_under_both_rules() {
    for winner in [Winner::Highest, Winner::Lowest] {
        for size in [3, 5] {
            let mut cluster = instant(winner, size);
            cluster.run(100);
            let all: Vec<u64> = (1..=size).collect();
            cluster.assert_settled_on(best(winner, &all));
            assert_eq!(cluster.leaders_at_once_max, 1);
        }
    }
}

#[test]
fn nodes_booting_at_once_never_have_two_leaders_with_real_latency() {
    for winner in [Winner::Highest, Winner::Lowest] {
        for size in [1, 2, 3, 5, 7] {
            for seed in 0..20 {
                let mut cluster = timed(winner, size, seed);
                cluster.run(400);
                let all: Vec<u64> = (1..=size).collect();
                cluster.assert_settled_on(best(winner, &all));
                assert_eq!(
                    cluster.leaders_at_once_max, 1,
                    "two leaders at once: {winner:?}, size {size}, seed {seed}"
                );
            }
        }
    }
}

#[test]
fn killing_the_leader_with_a_hint_elects_the_next_best_at_once() {
    for winner in [Winner::Highest, Winner::Lowest] {
        let mut cluster = instant(winner, 5);
        cluster.run(100);
        let leader = best(winner, &[1, 2, 3, 4, 5]);
        cluster.crash(NodeId(leader));
        for id in (1..=5).filter(|id| *id != leader) {
            cluster.hint(NodeId(id), NodeId(leader));
        }
        // Answer timeout plus takeover delay, far below any leader timeout.
        cluster.run(40);
        let alive: Vec<u64> = (1..=5).filter(|id| *id != leader).collect();
        cluster.assert_settled_on(best(winner, &alive));
        assert_eq!(cluster.leaders_at_once_max, 1);
    }
}

#[test]
fn killing_the_leader_silently_elects_the_next_best_after_the_leader_timeout() {
    let mut cluster = instant(Winner::Highest, 5);
    cluster.run(100);
    cluster.crash(NodeId(5));
    // The last heartbeat left at most 50 ticks ago and every leader timeout is
    // at least 150, so nobody may have replaced the leader yet.
    cluster.run(99);
    assert!(cluster.leaders().is_empty(), "no leader before the timeout");
    assert_eq!(cluster.status(1).leader, Some(NodeId(5)));
    cluster.run(400);
    cluster.assert_settled_on(4);
}

#[test]
fn a_recovered_better_node_takes_over_without_two_leaders_at_once() {
    for winner in [Winner::Highest, Winner::Lowest] {
        for seed in 0..20 {
            let mut cluster = timed(winner, 5, seed);
            cluster.run(400);
            let first = best(winner, &[1, 2, 3, 4, 5]);
            cluster.crash(NodeId(first));
            cluster.run(600);
            let alive: Vec<u64> = (1..=5).filter(|id| *id != first).collect();
            let second = best(winner, &alive);
            cluster.assert_settled_on(second);
            let second_token = cluster.status(second).fencing_token.unwrap();
            cluster.restart(NodeId(first));
            cluster.run(200);
            cluster.assert_settled_on(first);
            assert_eq!(cluster.leaders_at_once_max, 1, "seed {seed}");
            let token = cluster.status(first).fencing_token.unwrap();
            assert!(
                token > second_token,
                "the restarted node forgot every epoch but must lead above {second_token}, got {token}"
            );
        }
    }
}

#[test]
fn a_heartbeat_from_a_better_leader_makes_a_worse_leader_step_down() {
    let mut cluster = instant(Winner::Highest, 3);
    cluster.partition(&[3]);
    cluster.run(100);
    assert_eq!(cluster.leaders(), vec![NodeId(2), NodeId(3)]);
    let epoch = cluster.status(3).term.0;
    cluster.inject(NodeId(3), NodeId(2), BullyMessage::Heartbeat { epoch });
    let status = cluster.status(2);
    assert_eq!(status.role, Role::Follower);
    assert_eq!(status.leader, Some(NodeId(3)));
    assert_eq!(status.fencing_token, None);
}

#[test]
fn a_heartbeat_from_a_worse_leader_makes_the_better_leader_move_to_a_new_epoch() {
    let mut cluster = instant(Winner::Highest, 3);
    cluster.partition(&[3]);
    cluster.run(100);
    let before = cluster.status(3).fencing_token.unwrap();
    let worse_epoch = cluster.status(2).term.0;
    let node = cluster.node(3);
    node.step(NodeId(2), BullyMessage::Heartbeat { epoch: worse_epoch });
    let after = node.status();
    assert_eq!(after.role, Role::Leader, "the better leader keeps leading");
    let token = after.fencing_token.unwrap();
    assert!(token > before && token > worse_epoch);
    let sent = node.ready().messages;
    let targets: Vec<NodeId> = sent.iter().map(|envelope| envelope.to).collect();
    assert_eq!(targets, vec![NodeId(1), NodeId(2)], "heartbeat to everyone");
    assert!(sent
        .iter()
        .all(|envelope| envelope.message == BullyMessage::Heartbeat { epoch: token }));
}

#[test]
fn a_healed_partition_converges_on_one_leader() {
    for winner in [Winner::Highest, Winner::Lowest] {
        let mut cluster = timed(winner, 5, 3);
        cluster.partition(&[1, 2]);
        cluster.run(400);
        assert_eq!(cluster.leaders().len(), 2, "one leader per side");
        cluster.heal();
        cluster.run(400);
        cluster.assert_settled_on(best(winner, &[1, 2, 3, 4, 5]));
    }
}

#[test]
fn a_wrong_hint_does_not_unseat_a_healthy_leader() {
    let mut cluster = instant(Winner::Highest, 5);
    cluster.run(100);
    let token = cluster.status(5).fencing_token;
    cluster.hint(NodeId(1), NodeId(5));
    assert_eq!(
        cluster.status(1).role,
        Role::Candidate,
        "the hint was acted on"
    );
    cluster.run(100);
    cluster.assert_settled_on(5);
    assert_eq!(cluster.status(5).fencing_token, token, "same leadership");
    assert_eq!(cluster.leaders_at_once_max, 1);
}

#[test]
fn the_best_survivor_noticing_first_costs_one_election_and_n_minus_1_coordinators() {
    let mut cluster = instant(Winner::Highest, 5);
    cluster.run(100);
    cluster.reset_counts();
    cluster.crash(NodeId(5));
    cluster.hint(NodeId(4), NodeId(5));
    cluster.run(30);
    cluster.assert_settled_on(4);
    // Node 4 asks only node 5, hears nothing, and tells the other four.
    assert_eq!(cluster.sent("election"), 1);
    assert_eq!(cluster.sent("answer"), 0);
    assert_eq!(cluster.sent("coordinator"), 4);
}

#[test]
fn the_worst_node_noticing_first_costs_a_quadratic_number_of_elections() {
    let mut cluster = instant(Winner::Highest, 5);
    cluster.run(100);
    cluster.reset_counts();
    cluster.crash(NodeId(5));
    cluster.hint(NodeId(1), NodeId(5));
    cluster.run(30);
    cluster.assert_settled_on(4);
    // Each node k of 1..=4 asks every node above it: 4 + 3 + 2 + 1. Each live
    // node k answers the k - 1 live nodes below it: 0 + 1 + 2 + 3.
    assert_eq!(cluster.sent("election"), 10);
    assert_eq!(cluster.sent("answer"), 6);
    assert_eq!(cluster.sent("coordinator"), 4);
}

#[test]
fn a_lone_node_leads_on_its_first_tick_and_only_the_leader_has_a_token() {
    let mut cluster = instant(Winner::Highest, 1);
    assert_eq!(cluster.status(1).role, Role::Follower);
    assert_eq!(cluster.status(1).fencing_token, None);
    cluster.run(1);
    let status = cluster.status(1);
    assert_eq!(status.role, Role::Leader);
    assert_eq!(status.fencing_token, Some(status.term.0));
}

#[test]
fn a_winner_waits_for_the_takeover_delay_before_leading() {
    let members = [NodeId(1), NodeId(2)];
    let rng = crate::rng::Rng::new(1);
    let mut node = BullyNode::new(&BullyConfig::default(), NodeId(2), &members, 0, rng);
    node.tick();
    assert_eq!(node.status().role, Role::Candidate);
    let sent = node.ready().messages;
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].message, BullyMessage::Coordinator { epoch: 1 });
    for _ in 0..BullyConfig::default().takeover_delay_ticks {
        assert_ne!(node.status().role, Role::Leader);
        node.tick();
    }
    assert_eq!(node.status().role, Role::Leader);
}

#[test]
fn random_crashes_and_restarts_never_leave_two_leaders_and_end_with_the_best() {
    for winner in [Winner::Highest, Winner::Lowest] {
        for size in [2, 3, 5] {
            for seed in 0..15 {
                for hints in [false, true] {
                    let mut cluster = timed(winner, size, seed);
                    cluster.run(300);
                    cluster.crash_and_restart_randomly(seed, 6, hints);
                    cluster.run(1_000);
                    let all: Vec<u64> = (1..=size).collect();
                    cluster.assert_settled_on(best(winner, &all));
                    assert_eq!(
                        cluster.leaders_at_once_max, 1,
                        "{winner:?}, size {size}, seed {seed}, hints {hints}"
                    );
                }
            }
        }
    }
}
