//! Partial connectivity, after OmniPaxos (Ng et al., EuroSys 2023), which
//! reports livelocks for Raft in these shapes: two nodes that cannot reach
//! each other can both reach a third. For each scenario and seed: elect a
//! leader, cut the links, and measure how long until one leader that
//! reaches a quorum is acting alone, then check it stays (no livelock of
//! rising terms). The bound is four maximum election timeouts (4 × 300 ms).
//!
//! - **Quorum loss** (5 nodes): every link is cut except those of one
//!   follower, the hub. Only the hub reaches a quorum, and it keeps hearing
//!   the old leader.
//! - **Chained** (3 nodes): the link between the leader and one follower
//!   is cut; the middle node reaches both.
//!
//! The third shape, the constrained election (the only node that reaches a
//! quorum has a stale log), needs diverged logs and is not scripted here.

use bellwether_core::raft::{RaftConfig, RaftNode};
use bellwether_core::{NodeId, Protocol};
use bellwether_sim::{Partition, World, WorldConfig};

const MS: u64 = 1_000;
/// Four maximum election timeouts of the default configuration.
const RECOVERY_BOUND_US: u64 = 4 * 300 * MS;
/// How long a recovered leader must then stay, alone, in one term.
const STABLE_US: u64 = 2_000 * MS;

fn index(id: NodeId) -> usize {
    (id.0 - 1) as usize
}

/// Cuts `pairs` after electing a leader; returns µs until a leader that
/// reaches a quorum acted alone, or `None` if none did within the bound or
/// it did not stay.
fn recovery(nodes: usize, seed: u64, cut: impl Fn(usize) -> Vec<(usize, usize)>) -> Option<u64> {
    let mut world: World<RaftNode> =
        World::new(WorldConfig::new(nodes, seed), RaftConfig::default());
    let (leader, _) = world
        .run_until_agreement(5_000 * MS)
        .unwrap()
        .expect("a leader within 5 s");
    world.run_for(300 * MS).unwrap();
    let pairs = cut(index(leader));
    world.partition(&Partition::Links {
        pairs: pairs.clone(),
    });
    let reaches_quorum = |node: usize| {
        let reachable = (0..nodes)
            .filter(|other| {
                *other == node
                    || !pairs
                        .iter()
                        .any(|(a, b)| (*a, *b) == (node, *other) || (*b, *a) == (node, *other))
            })
            .count();
        reachable > nodes / 2
    };
    let cut_at = world.now_us();
    while world.now_us() - cut_at <= RECOVERY_BOUND_US {
        world.run_for(5 * MS).unwrap();
        let leaders = world.acting_leaders();
        if let [(id, term)] = leaders[..] {
            if reaches_quorum(index(id)) {
                let recovered = world.now_us() - cut_at;
                world.run_for(STABLE_US).unwrap();
                let stayed = world.acting_leaders() == vec![(id, term)]
                    && world.node(index(id)).unwrap().status().term.0 == term;
                return stayed.then_some(recovered);
            }
        }
    }
    None
}

fn report(name: &str, results: &[Option<u64>]) {
    let mut times: Vec<u64> = results.iter().flatten().copied().collect();
    times.sort_unstable();
    let failed = results.len() - times.len();
    let median = times.get(times.len() / 2).map_or(0.0, |t| *t as f64 / 1e3);
    let worst = times.last().map_or(0.0, |t| *t as f64 / 1e3);
    eprintln!(
        "{name}: {} of {} seeds recovered within 4 election timeouts (median {median:.1} ms, worst {worst:.1} ms); {failed} did not",
        times.len(),
        results.len()
    );
}

#[test]
fn raft_recovers_from_quorum_loss() {
    let results: Vec<Option<u64>> = (0..100)
        .map(|seed| {
            recovery(5, seed, |leader| {
                let hub = (leader + 1) % 5;
                let mut pairs = Vec::new();
                for a in 0..5 {
                    for b in a + 1..5 {
                        if a != hub && b != hub {
                            pairs.push((a, b));
                        }
                    }
                }
                pairs
            })
        })
        .collect();
    report("quorum loss, 5 nodes", &results);
    assert!(results.iter().all(Option::is_some), "{results:?}");
}

#[test]
fn raft_recovers_from_the_chained_scenario() {
    let results: Vec<Option<u64>> = (0..100)
        .map(|seed| recovery(3, seed, |leader| vec![(leader, (leader + 1) % 3)]))
        .collect();
    report("chained, 3 nodes", &results);
    assert!(results.iter().all(Option::is_some), "{results:?}");
}
