//! The adaptive detector in Raft: a silent leader is replaced after a few
//! heartbeats instead of an election timeout, and a follower that suspects
//! while the others still hear the leader changes nothing.

use super::tests::Router;
use super::*;
use crate::protocol::{Protocol, Role};
use crate::types::{NodeId, Term};

/// Heartbeat 2 ticks, election timeout [40, 80), the detector's floor 3
/// heartbeats (or off).
fn detector_config(floor_heartbeats: u64) -> RaftConfig {
    RaftConfig {
        heartbeat_ticks: 2,
        election_ticks_min: 40,
        election_jitter_ticks: 40,
        hint_slot_ticks: 1,
        detector_floor_heartbeats: floor_heartbeats,
        ..RaftConfig::default()
    }
}

/// Ticks from the leader's isolation to a new leader among the others.
fn silent_failover_ticks(config: RaftConfig) -> (u64, Term, Term) {
    let mut router = Router::new(5, config);
    let leader = router.elect();
    // Enough heartbeats for the detector to learn their pattern.
    router.run(100);
    let term = router.nodes[&leader].status().term;
    router.isolate(leader.0);
    for ticks in 1..=1_000 {
        router.run(1);
        let new: Vec<(NodeId, Term)> = router
            .leaders()
            .into_iter()
            .filter(|(id, _)| *id != leader)
            .collect();
        if let Some((_, new_term)) = new.first() {
            return (ticks, term, *new_term);
        }
    }
    panic!("no new leader after 1,000 ticks");
}

#[test]
fn a_silent_leader_is_replaced_after_a_few_heartbeats_not_an_election_timeout() {
    let (adaptive, term, new_term) = silent_failover_ticks(detector_config(3));
    assert_eq!(new_term, Term(term.0 + 1), "won in the first new term");
    // Floor 6 ticks of silence, then the rank-0 slot and one round trip.
    assert!(adaptive <= 12, "{adaptive} ticks: the detector did not act");
    let (fixed, _, _) = silent_failover_ticks(detector_config(0));
    eprintln!("silent failover: adaptive {adaptive} ticks, fixed {fixed} ticks");
    assert!(
        fixed >= 40,
        "{fixed} ticks: without the detector the timeout is waited out"
    );
}

#[test]
fn a_follower_that_suspects_while_the_others_hear_the_leader_changes_nothing() {
    let mut router = Router::new(5, detector_config(3));
    let leader = router.elect();
    router.run(100);
    let term = router.nodes[&leader].status().term;
    let paused = router
        .nodes
        .keys()
        .copied()
        .find(|id| *id != leader)
        .unwrap();
    // The follower is paused: it neither ticks nor hears anything, and
    // when it resumes its clock catches up before any message arrives.
    router.isolate(paused.0);
    let others: Vec<NodeId> = router
        .nodes
        .keys()
        .copied()
        .filter(|id| *id != paused)
        .collect();
    for _ in 0..30 {
        for id in &others {
            router.nodes.get_mut(id).unwrap().tick();
        }
        router.settle();
    }
    router.heal();
    router.sent.clear();
    for _ in 0..30 {
        router.nodes.get_mut(&paused).unwrap().tick();
    }
    assert!(
        router.nodes[&paused]
            .detector_state()
            .is_some_and(|d| d.suspicions == 1),
        "the paused follower suspected its leader"
    );
    router.settle();
    router.run(200);
    assert!(
        router.count_sent("pre_vote_request") > 0,
        "it asked for pre-votes"
    );
    assert_eq!(router.count_sent("vote_request"), 0, "nobody granted them");
    assert_eq!(router.agreed_leader(), Some(leader));
    assert_eq!(router.nodes[&leader].status().term, term);
    assert_eq!(router.nodes[&paused].status().role, Role::Follower);
}

#[test]
fn lease_reads_refuse_the_detector() {
    let config = RaftConfig {
        lease_reads: true,
        hint_slot_ticks: 0,
        ..detector_config(3)
    };
    let error = config.validate().unwrap_err();
    assert!(error.0.contains("detector_floor_heartbeats"), "{error}");
    let config = RaftConfig {
        detector_floor_heartbeats: 21,
        ..detector_config(3)
    };
    assert!(config.validate().is_err(), "a floor above the timeout");
}

/// A stall of both followers longer than the detector's floor (so the
/// leader's term of office runs out) but shorter than an election timeout:
/// the leader stops acting while it lasts, and acts again in the same term
/// once they answer, with no election.
#[test]
fn a_leader_whose_office_lapses_stops_acting_and_resumes_in_the_same_term() {
    let mut router = Router::new(3, detector_config(3));
    let leader = router.elect();
    router.run(100);
    let term = router.nodes[&leader].status().term;
    // The followers neither tick nor answer for 12 ticks (twice the
    // floor); what the leader sends them is lost.
    router.isolate(leader.0);
    let mut lapsed_at = None;
    for tick in 1..=12 {
        router.nodes.get_mut(&leader).unwrap().tick();
        router.settle();
        let status = router.nodes[&leader].status();
        if status.role != Role::Leader && lapsed_at.is_none() {
            lapsed_at = Some(tick);
            assert_eq!(status.leader, None, "a lapsed leader names nobody");
            assert_eq!(status.fencing_token, None, "nor hands out its token");
            assert_eq!(status.term, term);
        }
    }
    let lapsed_at = lapsed_at.expect("the office ran out within twice the floor");
    assert!(lapsed_at <= 6, "lapsed after {lapsed_at} ticks, floor 6");
    let node = &router.nodes[&leader];
    assert_eq!(node.role, Role::Leader, "it keeps the role and heartbeats");
    assert!(node.in_lease(), "and refuses votes meanwhile");
    router.heal();
    router.sent.clear();
    router.run(4);
    assert_eq!(router.agreed_leader(), Some(leader), "acting again");
    assert_eq!(
        router.nodes[&leader].status().term,
        term,
        "in the same term"
    );
    assert_eq!(router.count_sent("pre_vote_request"), 0);
}

/// The same leader cut off for longer than an election timeout steps down,
/// as CheckQuorum makes it without the detector.
#[test]
fn a_lapsed_leader_steps_down_after_an_election_timeout_without_a_quorum() {
    let mut router = Router::new(3, detector_config(3));
    let leader = router.elect();
    router.run(100);
    router.isolate(leader.0);
    for _ in 0..39 {
        router.nodes.get_mut(&leader).unwrap().tick();
        router.settle();
    }
    assert_eq!(router.nodes[&leader].role, Role::Leader);
    for _ in 0..2 {
        router.nodes.get_mut(&leader).unwrap().tick();
        router.settle();
    }
    assert_eq!(router.nodes[&leader].role, Role::Follower);
}
