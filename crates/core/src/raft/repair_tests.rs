//! Amnesia, in the pure core: members that lost their logs are audited
//! against their promise records and repaired (`promises.rs`), and the
//! same scenario without the audit loses committed entries (the control).

use super::tests::{config, Router};
use super::*;
use crate::protocol::{Protocol, Role};
use crate::rng::Rng;
use crate::types::{LogIndex, NodeId, Term};

/// Three members elect a leader and commit `writes` entries; returns the
/// router and the promise record each member's disk justifies.
fn committed_cluster(writes: usize) -> (Router, Vec<PromiseRecord>) {
    let mut router = Router::new(3, config());
    let leader = router.elect();
    for k in 0..writes {
        router
            .nodes
            .get_mut(&leader)
            .unwrap()
            .propose(vec![k as u8])
            .expect("the leader takes proposals");
        router.settle();
    }
    router.run(5);
    let records = (1..=3)
        .map(|id| {
            let disk = &router.disk[&NodeId(id)];
            let last = disk.entries.last().expect("a log");
            PromiseRecord {
                term: disk.hard_state.term,
                voted_for: disk.hard_state.voted_for,
                last_term: last.term,
                last_index: last.index,
                repair: None,
            }
        })
        .collect();
    (router, records)
}

/// Replaces member `id` by one whose log was wiped, audited against
/// `record` when `guarded`.
fn restart_wiped(router: &mut Router, id: u64, record: &PromiseRecord, guarded: bool) {
    let mut durable = RaftDurable::default();
    let found = audit(record, &mut durable);
    if !guarded {
        durable = RaftDurable::default();
    }
    let members = [NodeId(1), NodeId(2), NodeId(3)];
    let mut node = RaftNode::new(
        &config(),
        NodeId(id),
        &members,
        durable.clone(),
        Rng::new(id + 7),
    );
    if guarded {
        node.start_repair(found.repair.expect("a wiped log is damaged"));
    }
    router.nodes.insert(NodeId(id), node);
    router.disk.insert(NodeId(id), durable);
}

/// Every member still running holds the committed entries 1..=`count`
/// (index 1 is the first leader's no-op).
fn holds_writes(router: &Router, id: u64, count: usize) -> bool {
    let log = router.node(id).log();
    (0..count).all(|k| {
        log.entry(LogIndex(k as u64 + 2))
            .is_some_and(|e| e.payload == Payload::Command(vec![k as u8]))
    })
}

#[test]
fn two_wiped_members_refuse_to_elect_until_the_third_returns_and_then_lose_nothing() {
    let (mut router, records) = committed_cluster(20);
    let old_term = router.node(1).status().term;
    router.isolate(1);
    restart_wiped(&mut router, 2, &records[1], true);
    restart_wiped(&mut router, 3, &records[2], true);
    assert_eq!(
        router.node(2).status().term,
        old_term,
        "the term came back from the record"
    );
    router.run(500);
    let repairing_leaders: Vec<_> = router
        .leaders()
        .into_iter()
        .filter(|(id, _)| *id != NodeId(1))
        .collect();
    assert!(
        repairing_leaders.is_empty(),
        "damaged members elected {repairing_leaders:?}"
    );
    assert!(router.node(2).repair().is_some() && router.node(3).repair().is_some());
    router.heal();
    let leader = router.elect();
    assert_eq!(
        leader,
        NodeId(1),
        "only the member that kept its log can lead"
    );
    assert!(router.node(1).status().term > old_term);
    router.run(20);
    for id in 1..=3 {
        assert!(holds_writes(&router, id, 20), "n{id} lost committed writes");
        assert!(router.node(id).repair().is_none(), "n{id} still repairing");
    }
    // Repaired, they vote again: the former leader can be replaced.
    router.isolate(1);
    router.run(300);
    assert!(
        router.leaders().iter().any(|(id, _)| *id != NodeId(1)),
        "repaired members elect among themselves"
    );
}

#[test]
fn the_control_without_the_audit_elects_blank_members_and_loses_the_writes() {
    let (mut router, records) = committed_cluster(20);
    router.isolate(1);
    restart_wiped(&mut router, 2, &records[1], false);
    restart_wiped(&mut router, 3, &records[2], false);
    router.run(500);
    let blank_leader = router
        .leaders()
        .into_iter()
        .find(|(id, _)| *id != NodeId(1));
    assert!(
        blank_leader.is_some(),
        "blank voters elect one of themselves"
    );
    router.heal();
    router.run(100);
    let lost = (1..=3).any(|id| !holds_writes(&router, id, 20));
    assert!(lost, "the control must show the loss the audit prevents");
}

#[test]
fn a_repairing_member_refuses_candidates_behind_its_record_and_grants_those_past_it() {
    let (mut router, records) = committed_cluster(3);
    restart_wiped(&mut router, 3, &records[2], true);
    let node = router.node_mut(3);
    super::tests::past_boot(node);
    let term = node.status().term;
    for pre_vote in [true, false] {
        let ask = if pre_vote {
            RaftMessage::PreVoteRequest {
                term: term.next(),
                last_log_index: LogIndex(0),
                last_log_term: Term(0),
            }
        } else {
            RaftMessage::VoteRequest {
                term: term.next(),
                last_log_index: LogIndex(0),
                last_log_term: Term(0),
                leadership_transfer: false,
            }
        };
        node.step(NodeId(2), ask);
        let ready = node.ready();
        let granted = ready.messages.iter().any(|m| {
            matches!(
                m.message,
                RaftMessage::PreVoteResponse { granted: true, .. }
                    | RaftMessage::VoteResponse { granted: true, .. }
            )
        });
        assert!(
            !granted,
            "a repairing member granted a vote (pre-vote: {pre_vote})"
        );
    }
    let floor = records[2];
    node.step(
        NodeId(1),
        RaftMessage::VoteRequest {
            term: term.next(),
            last_log_index: floor.last_index,
            last_log_term: floor.last_term,
            leadership_transfer: false,
        },
    );
    let ready = node.ready();
    assert!(
        ready
            .messages
            .iter()
            .any(|m| matches!(m.message, RaftMessage::VoteResponse { granted: true, .. })),
        "a candidate as up-to-date as the record gets the vote"
    );
    assert_eq!(node.status().role, Role::Follower);
    assert!(node.repair().is_some(), "a vote does not repair the log");
}

#[test]
fn a_cluster_whose_every_log_was_wiped_elects_nobody() {
    let (mut router, records) = committed_cluster(5);
    for id in 1..=3 {
        restart_wiped(&mut router, id, &records[id as usize - 1], true);
    }
    router.run(1_000);
    assert!(
        router.leaders().is_empty(),
        "elected {:?}",
        router.leaders()
    );
}

#[test]
fn a_follower_wiped_under_a_steady_leader_is_repaired_by_it_in_the_same_term() {
    let (mut router, records) = committed_cluster(10);
    let leader = router.agreed_leader().expect("a leader");
    let term = router.node(leader.0).status().term;
    let follower = (1..=3).find(|id| NodeId(*id) != leader).unwrap();
    restart_wiped(&mut router, follower, &records[follower as usize - 1], true);
    router.run(50);
    assert_eq!(
        router.agreed_leader(),
        Some(leader),
        "no election was needed"
    );
    assert_eq!(router.node(leader.0).status().term, term);
    assert!(
        holds_writes(&router, follower, 10),
        "the leader sent the log again"
    );
    assert!(
        router.node(follower).repair().is_none(),
        "and the repair ended"
    );
}
