//! Partial connectivity, after OmniPaxos (Ng et al., EuroSys 2023), which
//! reports that Raft and Multi-Paxos deadlock or livelock in these shapes,
//! where two nodes that cannot reach each other can both reach a third.
//! Each scenario runs for Raft and for Multi-Paxos over 100 seeds: elect a
//! leader, cut links, and measure how long until one leader that reaches a
//! quorum acts alone, then check it stays (no livelock of rising terms or
//! ballots). The bound is four maximum election timeouts (4 × 300 ms).
//!
//! - **Quorum loss** (5 nodes): every link is cut except those of one
//!   follower, the hub. Only the hub reaches a quorum, and it keeps hearing
//!   the old leader.
//! - **Constrained election** (5 nodes): a follower S loses its link to the
//!   leader, which then commits entries S never gets. Then the leader is cut
//!   off and the three others lose their links to each other: only S
//!   reaches a quorum, and S has a stale log.
//! - **Chained** (3 nodes): the link between the leader and one follower
//!   is cut; the middle node reaches both.
//!
//! Every outcome is asserted, including the one where an algorithm does not
//! recover: Raft cannot elect S (its log is behind, paper §5.4.1) and no
//! other node reaches a quorum, so the constrained election leaves Raft
//! without a leader for as long as the partition lasts. Paxos elects S,
//! which fetches the missing entries in phase 1.

use bellwether_core::paxos::{PaxosConfig, PaxosNode};
use bellwether_core::raft::{RaftConfig, RaftNode};
use bellwether_core::{NodeId, Protocol};
use bellwether_sim::{Partition, World, WorldConfig};

const MS: u64 = 1_000;
/// Four maximum election timeouts of the default configuration.
const RECOVERY_BOUND_US: u64 = 4 * 300 * MS;
/// How long a recovered leader must then stay, alone, in one term.
const STABLE_US: u64 = 2_000 * MS;
/// Entries the leader commits before the constrained election.
const ENTRIES_S_MISSES: u64 = 3;

fn index(id: NodeId) -> usize {
    (id.0 - 1) as usize
}

/// Both directions of every pair.
fn both_ways(pairs: &[(usize, usize)]) -> Vec<(usize, usize)> {
    pairs.to_vec()
}

/// True when `node` reaches a majority (itself included) over links not
/// in `cut`.
fn reaches_quorum(nodes: usize, cut: &[(usize, usize)], node: usize) -> bool {
    let linked = |a: usize, b: usize| {
        !cut.iter()
            .any(|&(x, y)| (x, y) == (a, b) || (y, x) == (a, b))
    };
    let reachable = (0..nodes)
        .filter(|o| *o == node || linked(node, *o))
        .count();
    reachable > nodes / 2
}

/// µs from `cut_at` until a leader that reaches a quorum acted alone, or
/// `None` if none did within the bound or it did not stay.
fn await_recovery<P: Protocol>(
    world: &mut World<P>,
    cut: &[(usize, usize)],
    cut_at: u64,
) -> Option<u64> {
    let nodes = world.config.nodes;
    while world.now_us() - cut_at <= RECOVERY_BOUND_US {
        world.run_for(5 * MS).unwrap();
        let leaders = world.acting_leaders();
        if let [(id, term)] = leaders[..] {
            if reaches_quorum(nodes, cut, index(id)) {
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

/// Elects a leader, then cuts `cut(leader)`; the recovery time or `None`.
fn recovery<P: Protocol>(
    config: P::Config,
    nodes: usize,
    seed: u64,
    cut: impl Fn(usize) -> Vec<(usize, usize)>,
) -> Option<u64> {
    let mut world: World<P> = World::new(WorldConfig::new(nodes, seed), config);
    let (leader, _) = world
        .run_until_agreement(5_000 * MS)
        .unwrap()
        .expect("a leader within 5 s");
    world.run_for(300 * MS).unwrap();
    let pairs = both_ways(&cut(index(leader)));
    world.partition(&Partition::Links {
        pairs: pairs.clone(),
    });
    let cut_at = world.now_us();
    await_recovery(&mut world, &pairs, cut_at)
}

/// The constrained election: `propose` makes the leader at the index it is
/// given commit one entry. Returns the recovery time or `None`.
fn constrained_election<P: Protocol>(
    config: P::Config,
    seed: u64,
    propose: impl Fn(&mut P) -> bool,
) -> Option<u64> {
    let nodes = 5;
    let mut world: World<P> = World::new(WorldConfig::new(nodes, seed), config);
    let (leader, _) = world
        .run_until_agreement(5_000 * MS)
        .unwrap()
        .expect("a leader within 5 s");
    let leader = index(leader);
    let stale = (leader + 1) % nodes;
    world.partition(&Partition::Links {
        pairs: vec![(leader, stale)],
    });
    world.run_for(50 * MS).unwrap();
    for _ in 0..ENTRIES_S_MISSES {
        let node = world.node_mut(leader).expect("the leader runs");
        assert!(propose(node), "the leader accepts a proposal");
        world.flush(leader);
        world.run_for(20 * MS).unwrap();
    }
    world.run_for(200 * MS).unwrap();
    let others: Vec<usize> = (0..nodes).filter(|n| *n != leader && *n != stale).collect();
    let mut pairs: Vec<(usize, usize)> = (0..nodes)
        .filter(|n| *n != leader)
        .map(|n| (leader, n))
        .collect();
    for (i, a) in others.iter().enumerate() {
        for b in &others[i + 1..] {
            pairs.push((*a, *b));
        }
    }
    world.heal_links();
    world.partition(&Partition::Links {
        pairs: pairs.clone(),
    });
    let cut_at = world.now_us();
    let recovered = await_recovery(&mut world, &pairs, cut_at);
    if recovered.is_some() {
        let winner = world.acting_leaders()[0].0;
        assert_eq!(index(winner), stale, "only S reaches a quorum");
        let fetched = world.node(stale).unwrap().catch_up_entries().unwrap_or(0);
        assert!(
            fetched >= ENTRIES_S_MISSES,
            "S fetched {fetched} entries in phase 1"
        );
    }
    recovered
}

/// Prints the outcome and returns how many seeds recovered.
fn report(name: &str, results: &[Option<u64>]) -> usize {
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
    times.len()
}

fn quorum_loss(leader: usize) -> Vec<(usize, usize)> {
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
}

fn chained(leader: usize) -> Vec<(usize, usize)> {
    vec![(leader, (leader + 1) % 3)]
}

fn raft_propose(node: &mut RaftNode) -> bool {
    node.propose(b"entry".to_vec()).is_ok()
}

fn paxos_propose(node: &mut PaxosNode) -> bool {
    node.propose(0xE).is_ok()
}

#[test]
fn raft_recovers_from_quorum_loss() {
    let results: Vec<_> = (0..100)
        .map(|seed| recovery::<RaftNode>(RaftConfig::default(), 5, seed, quorum_loss))
        .collect();
    assert_eq!(
        report("raft, quorum loss, 5 nodes", &results),
        100,
        "{results:?}"
    );
}

#[test]
fn paxos_recovers_from_quorum_loss() {
    let results: Vec<_> = (0..100)
        .map(|seed| recovery::<PaxosNode>(PaxosConfig::default(), 5, seed, quorum_loss))
        .collect();
    assert_eq!(
        report("paxos, quorum loss, 5 nodes", &results),
        100,
        "{results:?}"
    );
}

#[test]
fn raft_recovers_from_the_chained_scenario() {
    let results: Vec<_> = (0..100)
        .map(|seed| recovery::<RaftNode>(RaftConfig::default(), 3, seed, chained))
        .collect();
    assert_eq!(
        report("raft, chained, 3 nodes", &results),
        100,
        "{results:?}"
    );
}

#[test]
fn paxos_recovers_from_the_chained_scenario() {
    let results: Vec<_> = (0..100)
        .map(|seed| recovery::<PaxosNode>(PaxosConfig::default(), 3, seed, chained))
        .collect();
    assert_eq!(
        report("paxos, chained, 3 nodes", &results),
        100,
        "{results:?}"
    );
}

#[test]
fn raft_cannot_elect_the_only_quorum_connected_node_when_its_log_is_stale() {
    let results: Vec<_> = (0..100)
        .map(|seed| constrained_election::<RaftNode>(RaftConfig::default(), seed, raft_propose))
        .collect();
    assert_eq!(
        report("raft, constrained election, 5 nodes", &results),
        0,
        "{results:?}"
    );
}

#[test]
fn paxos_elects_the_stale_quorum_connected_node_which_fetches_what_it_missed() {
    let results: Vec<_> = (0..100)
        .map(|seed| constrained_election::<PaxosNode>(PaxosConfig::default(), seed, paxos_propose))
        .collect();
    assert_eq!(
        report("paxos, constrained election, 5 nodes", &results),
        100,
        "{results:?}"
    );
}
