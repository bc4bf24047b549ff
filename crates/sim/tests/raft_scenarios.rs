//! Failure scenarios reported against real Raft deployments, replayed in the
//! simulator with their expected outcomes. Each has a control where one
//! exists: the same script with the protecting feature off must show the
//! failure, which proves the scenario can tell the difference.

use bellwether_core::raft::{RaftConfig, RaftNode};
use bellwether_core::{NodeId, Protocol, Role, Term};
use bellwether_sim::{Partition, World, WorldConfig};

const MS: u64 = 1_000;

fn world(nodes: usize, seed: u64, config: RaftConfig) -> World<RaftNode> {
    World::new(WorldConfig::new(nodes, seed), config)
}

fn index(id: NodeId) -> usize {
    (id.0 - 1) as usize
}

fn elect(world: &mut World<RaftNode>) -> NodeId {
    let deadline = world.now_us() + 5_000 * MS;
    let (leader, _) = world
        .run_until_agreement(deadline)
        .unwrap()
        .expect("a leader within 5 s");
    leader
}

fn term_of(world: &World<RaftNode>, id: NodeId) -> Term {
    world.node(index(id)).unwrap().status().term
}

/// Runs the etcd #9333 script: a follower is cut off for two seconds and
/// rejoins. Returns the number of leader elections after the first.
fn rejoin_after_partition(config: RaftConfig, seed: u64) -> u64 {
    let mut world = world(5, seed, config);
    let leader = elect(&mut world);
    world.run_for(300 * MS).unwrap();
    let elections = world.stats.leader_elections;
    let follower = (0..5).find(|i| *i != index(leader)).unwrap();
    world.partition(&Partition::Isolated { node: follower });
    world.run_for(2_000 * MS).unwrap();
    world.heal_links();
    world.run_for(2_000 * MS).unwrap();
    assert!(world.violation().is_none());
    world.stats.leader_elections - elections
}

#[test]
fn etcd_9333_a_rejoining_partitioned_node_does_not_disrupt_the_leader() {
    for seed in 0..20 {
        assert_eq!(
            rejoin_after_partition(RaftConfig::default(), seed),
            0,
            "seed {seed}"
        );
    }
}

#[test]
fn etcd_9333_control_without_prevote_the_rejoining_node_forces_an_election() {
    let config = RaftConfig {
        pre_vote: false,
        ..RaftConfig::default()
    };
    let disrupted = (0..20)
        .filter(|seed| rejoin_after_partition(config.clone(), *seed) > 0)
        .count();
    assert_eq!(
        disrupted, 20,
        "its inflated term unseats the leader every time"
    );
}

#[test]
fn one_way_partition_a_follower_that_cannot_hear_the_leader_does_not_disrupt_it() {
    // etcd #9563: a follower whose inbound traffic is cut keeps timing out
    // and campaigning. With PreVote and stickiness nobody listens to it.
    for seed in 0..20 {
        let mut world = world(5, seed, RaftConfig::default());
        let leader = elect(&mut world);
        let term = term_of(&world, leader);
        let follower = (0..5).find(|i| *i != index(leader)).unwrap();
        world.partition(&Partition::OneWay {
            node: follower,
            inbound: true,
        });
        world.run_for(3_000 * MS).unwrap();
        assert_eq!(
            world.acting_leaders(),
            vec![(leader, term.0)],
            "seed {seed}"
        );
        world.heal_links();
        world.run_for(500 * MS).unwrap();
        assert_eq!(
            world.agreed_leader(),
            Some(leader),
            "seed {seed}: it rejoins quietly"
        );
        assert_eq!(term_of(&world, leader), term);
    }
}

#[test]
fn one_way_partition_a_leader_that_cannot_hear_anyone_is_replaced() {
    for seed in 0..20 {
        let mut world = world(5, seed, RaftConfig::default());
        let leader = elect(&mut world);
        world.partition(&Partition::OneWay {
            node: index(leader),
            inbound: true,
        });
        world.run_for(1_000 * MS).unwrap();
        let leaders = world.acting_leaders();
        assert_eq!(
            leaders.len(),
            1,
            "seed {seed}: CheckQuorum deposed the deaf leader"
        );
        assert_ne!(leaders[0].0, leader, "seed {seed}");
        world.heal_links();
        elect(&mut world);
        assert!(world.violation().is_none());
    }
}

#[test]
fn openraft_2080_a_bridge_node_does_not_keep_a_cut_off_leader_alive() {
    // Five voters: the old leader reaches only the bridge; the bridge and
    // two others are fully connected; the fifth is isolated.
    for seed in 0..20 {
        let mut world = world(5, seed, RaftConfig::default());
        let leader = index(elect(&mut world));
        let others: Vec<usize> = (0..5).filter(|i| *i != leader).collect();
        let (bridge, a, b, lonely) = (others[0], others[1], others[2], others[3]);
        world.partition(&Partition::Isolated { node: lonely });
        world.partition(&Partition::Bridge {
            bridge,
            side: vec![leader],
        });
        world.run_for(1_500 * MS).unwrap();
        let leaders = world.acting_leaders();
        assert_eq!(
            leaders.len(),
            1,
            "seed {seed}: exactly one acting leader: {leaders:?}"
        );
        let new = index(leaders[0].0);
        assert!(
            [bridge, a, b].contains(&new),
            "seed {seed}: the connected quorum leads"
        );
    }
}

#[test]
fn etcd_raft_48_all_peers_starting_at_the_same_instant_elect_quickly() {
    for seed in 0..50 {
        let config = WorldConfig {
            tick_phase_random: false,
            ..WorldConfig::new(3, seed)
        };
        let mut world = World::<RaftNode>::new(config, RaftConfig::default());
        let leader = elect(&mut world);
        // Each node draws its timeout from its own seeded stream, so equal
        // start times do not mean equal timeouts.
        assert!(
            term_of(&world, leader) <= Term(3),
            "seed {seed}: took until {}",
            term_of(&world, leader)
        );
    }
}

#[test]
fn etcd_10355_prevote_with_check_quorum_elects_after_the_leader_is_cut_off() {
    for seed in 0..20 {
        let mut world = world(3, seed, RaftConfig::default());
        let leader = elect(&mut world);
        world.partition(&Partition::Isolated {
            node: index(leader),
        });
        world.run_for(1_000 * MS).unwrap();
        let leaders = world.acting_leaders();
        assert_eq!(leaders.len(), 1, "seed {seed}: {leaders:?}");
        assert_ne!(leaders[0].0, leader, "seed {seed}");
    }
}

#[test]
fn etcd_8243_a_node_with_a_smaller_term_does_not_block_the_election() {
    for seed in 0..20 {
        let mut world = world(3, seed, RaftConfig::default());
        let leader = elect(&mut world);
        // n_lagging is cut off while the other two raise their term by
        // handing leadership back and forth.
        let lagging = (0..3).find(|i| *i != index(leader)).unwrap();
        world.partition(&Partition::Isolated { node: lagging });
        let mut current = leader;
        for _ in 0..4 {
            world.run_for(100 * MS).unwrap();
            let peer = (0..3)
                .find(|i| *i != lagging && *i != index(current))
                .unwrap();
            let node = world.node_mut(index(current)).unwrap();
            let target = node
                .transfer_leadership(Some(NodeId(peer as u64 + 1)))
                .unwrap();
            world.flush(index(current));
            world.run_for(200 * MS).unwrap();
            current = target;
        }
        let high = term_of(&world, current);
        let low = world.node(lagging).unwrap().status().term;
        assert!(low < high, "seed {seed}: {low} < {high}");
        // The lagging node returns just as the leader dies.
        world.heal_links();
        world.crash(index(current));
        world.run_for(1_000 * MS).unwrap();
        let leaders = world.acting_leaders();
        assert_eq!(
            leaders.len(),
            1,
            "seed {seed}: the two survivors elected a leader"
        );
    }
}

#[test]
fn a_paused_leader_wakes_stale_and_its_term_is_never_accepted() {
    for seed in 0..20 {
        let mut world = world(5, seed, RaftConfig::default());
        let old = elect(&mut world);
        let old_term = term_of(&world, old);
        world.pause(index(old));
        world.run_for(1_000 * MS).unwrap();
        let new = world
            .agreed_leader()
            .expect("the others elected a new leader");
        assert!(term_of(&world, new) > old_term);
        world.resume(index(old));
        world.run_for(200 * MS).unwrap();
        let status = world.node(index(old)).unwrap().status();
        assert_eq!(
            status.role,
            Role::Follower,
            "seed {seed}: the stale leader stepped down"
        );
        assert_eq!(
            world.agreed_leader(),
            Some(new),
            "seed {seed}: nobody followed the stale term"
        );
        assert!(world.violation().is_none());
    }
}

#[test]
fn a_wrong_connection_loss_hint_does_not_change_the_leader() {
    for seed in 0..20 {
        let mut world = world(5, seed, RaftConfig::default());
        let leader = elect(&mut world);
        let term = term_of(&world, leader);
        for follower in (0..5).filter(|i| *i != index(leader)).take(2) {
            world.node_mut(follower).unwrap().peer_unreachable(leader);
            world.flush(follower);
        }
        world.run_for(1_000 * MS).unwrap();
        assert_eq!(world.agreed_leader(), Some(leader), "seed {seed}");
        assert_eq!(term_of(&world, leader), term, "seed {seed}");
    }
}

#[test]
fn liveness_failure_is_reported_when_no_quorum_can_ever_form() {
    // The checker must be able to fail: with every node isolated, no leader
    // can be agreed on.
    let mut world = world(3, 1, RaftConfig::default());
    for node in 0..3 {
        world.partition(&Partition::Isolated { node });
    }
    let agreed = world.run_until_agreement(3_000 * MS).unwrap();
    assert_eq!(agreed, None);
}
