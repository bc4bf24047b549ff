//! Pure-core scenario tests for Ring (LeLann, 1977; Chang and Roberts, 1979).
//! Each test names the property it asserts.

use super::{RingConfig, RingMessage, RingNode, Winner};
use crate::protocol::{Envelope, Protocol, Role};
use crate::rng::Rng;
use crate::test_cluster::Cluster;
use crate::types::NodeId;

/// The largest one-way latency of a fault-free run, in ticks.
const LATENCY_TICKS_MAX: u64 = 5;

fn config(winner: Winner) -> RingConfig {
    RingConfig {
        winner,
        ..RingConfig::default()
    }
}

/// The node that should lead among `alive` under `winner`.
fn best(winner: Winner, alive: &[u64]) -> u64 {
    let ids: Vec<NodeId> = alive.iter().copied().map(NodeId).collect();
    winner.best(&ids).expect("some node is alive").0
}

/// A cluster whose messages arrive at once, so no timeout races a reply.
fn instant(winner: Winner, size: u64) -> Cluster<RingNode> {
    Cluster::new(config(winner), size, 7, 0)
}

/// A cluster with the fault-free latency of 1 to 5 ticks, drawn from `seed`.
fn timed(winner: Winner, size: u64, seed: u64) -> Cluster<RingNode> {
    Cluster::new(config(winner), size, seed, LATENCY_TICKS_MAX)
}

/// A lone node `id` of members `1..=size`, outside any cluster.
fn lone_node(id: u64, size: u64) -> RingNode {
    let members: Vec<NodeId> = (1..=size).map(NodeId).collect();
    RingNode::new(
        &RingConfig::default(),
        NodeId(id),
        &members,
        0,
        Rng::new(id),
    )
}

fn election(initiator: u64, ids: &[u64], sequence: u64) -> RingMessage {
    RingMessage::Election {
        initiator: NodeId(initiator),
        ids: ids.iter().copied().map(NodeId).collect(),
        epoch: 0,
        sequence,
    }
}

#[test]
fn three_and_five_node_rings_elect_the_best_node_under_both_rules() {
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
fn killing_the_leader_with_a_hint_elects_the_next_best() {
    for winner in [Winner::Highest, Winner::Lowest] {
        let mut cluster = instant(winner, 5);
        cluster.run(100);
        let leader = best(winner, &[1, 2, 3, 4, 5]);
        cluster.crash(NodeId(leader));
        for id in (1..=5).filter(|id| *id != leader) {
            cluster.hint(NodeId(id), NodeId(leader));
        }
        // One acknowledgement timeout to skip the dead leader, well below any
        // leader timeout.
        cluster.run(40);
        let alive: Vec<u64> = (1..=5).filter(|id| *id != leader).collect();
        cluster.assert_settled_on(best(winner, &alive));
        assert_eq!(cluster.leaders_at_once_max, 1);
    }
}

#[test]
fn killing_the_leader_silently_elects_the_next_best_after_the_leader_timeout() {
    for seed in 0..10 {
        let mut cluster = timed(Winner::Highest, 5, seed);
        cluster.run(400);
        cluster.crash(NodeId(5));
        // The last heartbeat left at most 50 ticks ago and every leader
        // timeout is at least 150, so nobody may have replaced the leader.
        cluster.run(99);
        assert!(cluster.leaders().is_empty(), "no leader before the timeout");
        cluster.run(500);
        cluster.assert_settled_on(4);
        assert_eq!(cluster.leaders_at_once_max, 1, "seed {seed}");
    }
}

#[test]
fn a_dead_successor_is_skipped_after_the_ack_timeout() {
    let mut node = lone_node(1, 3);
    node.tick();
    let first = node.ready().messages;
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].to, NodeId(2), "the successor of 1 is 2");
    let RingMessage::Election { sequence, .. } = first[0].message else {
        panic!("node 1 starts an election on boot");
    };
    for _ in 1..RingConfig::default().ack_timeout_ticks {
        node.tick();
        assert!(!node.has_ready(), "no resend before the ack timeout");
    }
    node.tick();
    let resent = node.ready().messages;
    assert_eq!(resent.len(), 1);
    assert_eq!(resent[0].to, NodeId(3), "dead node 2 is skipped");
    let RingMessage::Election {
        ids,
        sequence: new_sequence,
        ..
    } = &resent[0].message
    else {
        panic!("the election is resent");
    };
    assert_eq!(ids, &vec![NodeId(1)]);
    assert_ne!(*new_sequence, sequence, "a new hop gets a new sequence");
}

#[test]
fn an_acknowledged_message_is_not_resent() {
    let mut node = lone_node(1, 3);
    node.tick();
    let sent = node.ready().messages;
    let RingMessage::Election { sequence, .. } = sent[0].message else {
        panic!("node 1 starts an election on boot");
    };
    node.step(NodeId(2), RingMessage::Ack { sequence });
    for _ in 0..RingConfig::default().ack_timeout_ticks * 2 {
        node.tick();
    }
    assert!(!node.has_ready(), "nothing to resend");
}

#[test]
fn a_node_whose_every_successor_is_dead_leads_itself() {
    let mut cluster = instant(Winner::Highest, 3);
    cluster.crash(NodeId(2));
    cluster.crash(NodeId(3));
    cluster.run(2 * RingConfig::default().ack_timeout_ticks + 1);
    let status = cluster.status(1);
    assert_eq!(status.role, Role::Leader);
    assert_eq!(status.leader, Some(NodeId(1)));
}

#[test]
fn chang_roberts_extinction_drops_worse_elections_and_passes_better_ones() {
    let mut node = lone_node(3, 5);
    node.tick(); // Takes part in its own election.
    node.ready();
    node.step(NodeId(2), election(2, &[2], 40));
    let dropped = node.ready().messages;
    let ack = Envelope {
        to: NodeId(2),
        message: RingMessage::Ack { sequence: 40 },
    };
    assert_eq!(dropped, vec![ack], "only acknowledged: 2 is worse than 3");
    node.step(NodeId(2), election(5, &[5, 1, 2], 41));
    let passed = node.ready().messages;
    assert_eq!(passed.len(), 2, "acknowledged and passed on");
    assert_eq!(passed[1].to, NodeId(4));
    let RingMessage::Election { initiator, ids, .. } = &passed[1].message else {
        panic!("the better election is passed on");
    };
    assert_eq!(*initiator, NodeId(5));
    assert_eq!(ids, &vec![NodeId(5), NodeId(1), NodeId(2), NodeId(3)]);
    node.step(NodeId(2), election(4, &[4, 5, 1, 2], 42));
    assert_eq!(node.ready().messages.len(), 1, "4 is worse than 5: dropped");
}

#[test]
fn one_initiator_costs_n_election_hops_n_coordinator_hops_and_2n_acks() {
    for size in [3, 5, 8] {
        let mut cluster = instant(Winner::Highest, size);
        // Only node 1 boots; the election reaches the others before they do.
        cluster.tick_one(NodeId(1));
        cluster.deliver_due();
        assert_eq!(cluster.sent("election"), size);
        assert_eq!(cluster.sent("coordinator"), size);
        assert_eq!(cluster.sent("ack"), 2 * size);
        cluster.run(100);
        cluster.assert_settled_on(size);
        assert_eq!(cluster.sent("election"), size, "nobody else started one");
    }
}

#[test]
fn all_nodes_starting_at_once_cost_linear_or_quadratic_hops_by_ring_direction() {
    let size = 8;
    let mut highest = instant(Winner::Highest, size);
    highest.run(1);
    // Each node's successor is better, so every election but node 8's dies
    // after one hop: (n - 1) + n.
    assert_eq!(highest.sent("election"), 2 * size - 1);
    let mut lowest = instant(Winner::Lowest, size);
    lowest.run(1);
    // Each election travels on until it reaches node 1: node k's takes
    // n - k + 1 hops, node 1's takes n; n(n + 1)/2 in all.
    let quadratic = (2..=size).map(|k| size - k + 1).sum::<u64>() + size;
    assert_eq!(quadratic, size * (size + 1) / 2);
    assert_eq!(lowest.sent("election"), quadratic);
    highest.assert_settled_on(size);
    lowest.assert_settled_on(1);
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
            assert!(token > second_token, "{token} must exceed {second_token}");
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
    cluster.inject(NodeId(3), NodeId(2), RingMessage::Heartbeat { epoch });
    let status = cluster.status(2);
    assert_eq!(status.role, Role::Follower);
    assert_eq!(status.leader, Some(NodeId(3)));
    assert_eq!(status.fencing_token, None);
}

#[test]
fn a_heartbeat_from_a_worse_leader_is_answered_with_a_heartbeat_under_a_new_epoch() {
    let mut cluster = instant(Winner::Highest, 3);
    cluster.partition(&[3]);
    cluster.run(100);
    let before = cluster.status(3).fencing_token.unwrap();
    let worse_epoch = cluster.status(2).term.0;
    let node = cluster.node(3);
    node.step(NodeId(2), RingMessage::Heartbeat { epoch: worse_epoch });
    let after = node.status();
    assert_eq!(after.role, Role::Leader, "the better leader keeps leading");
    let token = after.fencing_token.unwrap();
    assert!(token > before && token > worse_epoch);
    let sent = node.ready().messages;
    let targets: Vec<NodeId> = sent.iter().map(|envelope| envelope.to).collect();
    assert_eq!(targets, vec![NodeId(1), NodeId(2)], "heartbeat to everyone");
    assert!(sent
        .iter()
        .all(|envelope| envelope.message == RingMessage::Heartbeat { epoch: token }));
}

#[test]
fn a_healed_partition_converges_on_one_leader() {
    for winner in [Winner::Highest, Winner::Lowest] {
        let mut cluster = timed(winner, 5, 3);
        cluster.partition(&[1, 2]);
        cluster.run(400);
        assert_eq!(cluster.leaders().len(), 2, "one leader per side");
        cluster.heal();
        cluster.run(600);
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
fn a_hint_about_a_follower_makes_the_ring_skip_it() {
    let mut node = lone_node(1, 3);
    node.peer_unreachable(NodeId(2));
    node.tick();
    let sent = node.ready().messages;
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].to, NodeId(3), "suspected node 2 is skipped");
    node.step(NodeId(2), RingMessage::Heartbeat { epoch: 0 });
    node.ready();
    assert!(!node.relay.is_suspected(NodeId(2)), "hearing 2 clears it");
}

#[test]
fn after_random_crashes_and_restarts_the_ring_settles_on_the_best_node() {
    // Only convergence is asserted: a restart can leave a live node
    // suspected, and two concurrent elections that each miss a live node can
    // name two leaders for a moment (see the module docs).
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
                }
            }
        }
    }
}
