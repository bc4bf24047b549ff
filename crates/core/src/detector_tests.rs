//! The adaptive detector in every algorithm: a leader that goes silent is
//! replaced after a few heartbeats instead of the fixed timeout, with the
//! same cluster, latencies and seed.

use crate::protocol::{Protocol, Role};
use crate::test_cluster::Cluster;
use crate::types::NodeId;

/// Heartbeat and fixed timeout of every configuration here, in ticks.
pub(crate) const HEARTBEAT: u64 = 15;
pub(crate) const TIMEOUT: u64 = 150;
/// The detector's floor, in heartbeats.
pub(crate) const FLOOR: u64 = 3;

/// Ticks from a silent crash of the leader of a 5-node cluster (1 to 5
/// ticks of latency, seed `seed`) until another node leads and every live
/// node follows it.
pub(crate) fn silent_failover_ticks<P: Protocol>(config: P::Config, seed: u64) -> u64 {
    let mut cluster: Cluster<P> = Cluster::new(config, 5, seed, 5);
    cluster.run(1_000);
    let leaders = cluster.leaders();
    assert_eq!(leaders.len(), 1, "one leader before the crash");
    let old = leaders[0];
    cluster.crash(old);
    for ticks in 1..=5_000 {
        cluster.run(1);
        let leaders = cluster.leaders();
        if let [new] = leaders[..] {
            let all = (1..=5u64)
                .map(NodeId)
                .filter(|id| *id != old)
                .all(|id| cluster.status(id.0).leader == Some(new));
            if new != old && all && cluster.status(new.0).role == Role::Leader {
                return ticks;
            }
        }
    }
    panic!("no new leader within 5,000 ticks of the crash");
}

/// The detector must save at least half of what the fixed timeout waits
/// beyond the detector's floor.
pub(crate) fn assert_sooner(algorithm: &str, fixed: u64, adaptive: u64) {
    eprintln!("{algorithm} silent failover median: fixed {fixed} ticks, adaptive {adaptive}");
    assert!(fixed >= TIMEOUT, "{algorithm}: fixed {fixed} ticks");
    let saved = fixed.saturating_sub(adaptive);
    assert!(
        saved >= (TIMEOUT - FLOOR * HEARTBEAT) / 2,
        "{algorithm}: adaptive {adaptive} ticks against fixed {fixed}"
    );
}

/// The median over seeds 1..=`seeds` of [`silent_failover_ticks`].
pub(crate) fn median_failover<P: Protocol>(config: &P::Config, seeds: u64) -> u64 {
    let mut all: Vec<u64> = (1..=seeds)
        .map(|seed| silent_failover_ticks::<P>(config.clone(), seed))
        .collect();
    all.sort_unstable();
    all[all.len() / 2]
}

mod bully {
    use super::*;
    use crate::bully::{BullyConfig, BullyNode};

    fn config(floor: u64) -> BullyConfig {
        BullyConfig {
            heartbeat_ticks: HEARTBEAT,
            leader_timeout_ticks_min: TIMEOUT,
            detector_floor_heartbeats: floor,
            ..BullyConfig::default()
        }
    }

    #[test]
    fn a_silent_bully_leader_is_replaced_after_a_few_heartbeats() {
        let fixed = median_failover::<BullyNode>(&config(0), 15);
        let adaptive = median_failover::<BullyNode>(&config(FLOOR), 15);
        assert_sooner("bully", fixed, adaptive);
    }
}

mod ring {
    use super::*;
    use crate::ring::{RingConfig, RingNode};

    fn config(floor: u64) -> RingConfig {
        RingConfig {
            heartbeat_ticks: HEARTBEAT,
            leader_timeout_ticks_min: TIMEOUT,
            detector_floor_heartbeats: floor,
            ..RingConfig::default()
        }
    }

    #[test]
    fn a_silent_ring_leader_is_replaced_after_a_few_heartbeats() {
        let fixed = median_failover::<RingNode>(&config(0), 15);
        let adaptive = median_failover::<RingNode>(&config(FLOOR), 15);
        assert_sooner("ring", fixed, adaptive);
    }
}

mod paxos {
    use super::*;
    use crate::paxos::{PaxosConfig, PaxosNode};

    fn config(floor: u64) -> PaxosConfig {
        PaxosConfig {
            heartbeat_ticks: HEARTBEAT,
            election_ticks_min: TIMEOUT,
            election_jitter_ticks: TIMEOUT,
            detector_floor_heartbeats: floor,
            ..PaxosConfig::default()
        }
    }

    #[test]
    fn a_silent_paxos_leader_is_replaced_after_a_few_heartbeats() {
        let fixed = median_failover::<PaxosNode>(&config(0), 15);
        let adaptive = median_failover::<PaxosNode>(&config(FLOOR), 15);
        assert_sooner("paxos", fixed, adaptive);
    }

    #[test]
    fn with_the_detector_a_promise_and_a_leaders_lease_last_one_floor() {
        let on = config(FLOOR);
        assert_eq!(on.promise_ticks(), FLOOR * HEARTBEAT);
        assert_eq!(on.promise_margin_ticks(), 5, "15 × 45 / 150, rounded up");
        let off = config(0);
        assert_eq!(off.promise_ticks(), TIMEOUT);
        assert_eq!(off.promise_margin_ticks(), off.lease_margin_ticks);
    }
}
