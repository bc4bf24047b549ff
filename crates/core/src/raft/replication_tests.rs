//! Tests for log replication (§5.3), commitment (§5.4.2), reads (thesis
//! §6.4), membership (thesis §4) and snapshots (§7), on the synchronous
//! router of `tests.rs`.

use super::tests::{config, Router};
use super::*;
use crate::protocol::{Envelope, Protocol, Role};
use crate::types::{LogIndex, NodeId, Term};
use std::collections::BTreeMap;

fn applied_commands(router: &Router, id: NodeId) -> Vec<Vec<u8>> {
    router
        .outputs
        .get(&id)
        .map(|outputs| {
            outputs
                .iter()
                .filter_map(|o| match o {
                    RaftOutput::Apply(Entry {
                        payload: Payload::Command(data),
                        ..
                    }) => Some(data.clone()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

fn applied_indexes(router: &Router, id: NodeId) -> Vec<u64> {
    router.outputs.get(&id).map_or(Vec::new(), |outputs| {
        outputs
            .iter()
            .filter_map(|o| match o {
                RaftOutput::Apply(entry) => Some(entry.index.0),
                _ => None,
            })
            .collect()
    })
}

fn propose(router: &mut Router, leader: NodeId, data: &[u8]) -> LogIndex {
    let index = router
        .nodes
        .get_mut(&leader)
        .unwrap()
        .propose(data.to_vec())
        .unwrap();
    router.settle();
    index
}

#[test]
fn paper_5_3_committed_commands_are_applied_everywhere_in_order() {
    let mut router = Router::new(5, config());
    let leader = router.elect();
    for k in 0..10u8 {
        propose(&mut router, leader, &[k]);
    }
    router.run(5);
    let expected: Vec<Vec<u8>> = (0..10u8).map(|k| vec![k]).collect();
    for id in router.nodes.keys().copied().collect::<Vec<_>>() {
        assert_eq!(applied_commands(&router, id), expected, "{id}");
        let indexes = applied_indexes(&router, id);
        assert!(
            indexes.windows(2).all(|w| w[1] == w[0] + 1),
            "{id} applies strictly in order"
        );
        assert_eq!(
            router.nodes[&id].commit_index(),
            router.nodes[&leader].log().last_index()
        );
    }
}

#[test]
fn paper_5_3_followers_persist_entries_before_acknowledging() {
    let mut router = Router::new(3, config());
    let leader = router.elect();
    let index = propose(&mut router, leader, b"x");
    for (id, disk) in &router.disk {
        let stored = disk.entries.iter().any(|e| e.index == index);
        assert!(
            stored,
            "{id} stored entry {index} before the leader could count it"
        );
    }
}

#[test]
fn paper_5_3_a_follower_with_a_divergent_tail_is_repaired() {
    // n1 led term 1 and appended entries nobody else got; n2 then leads.
    let logs = BTreeMap::from([
        (
            NodeId(1),
            vec![Term(1), Term(1), Term(1), Term(1), Term(1), Term(1)],
        ),
        (NodeId(2), vec![Term(1), Term(2), Term(2)]),
        (NodeId(3), vec![Term(1), Term(2), Term(2)]),
    ]);
    let mut router = Router::with_logs(3, config(), logs);
    router.isolate(1);
    let leader = router.elect_among(&[2, 3]);
    router.heal();
    propose(&mut router, leader, b"after");
    router.run(10);
    let n1 = router.node(1).log().clone();
    let reference = router.nodes[&leader].log().clone();
    assert_eq!(n1.last_index(), reference.last_index());
    for i in 1..=reference.last_index().0 {
        assert_eq!(
            n1.term(LogIndex(i)),
            reference.term(LogIndex(i)),
            "index {i}"
        );
    }
    let appends = router.count_sent("append_entries");
    assert!(
        appends < 40,
        "fast backtracking keeps repair short: {appends} appends"
    );
}

#[test]
fn paper_5_4_2_old_term_entries_commit_only_with_an_entry_of_the_new_term() {
    // n1 holds an entry of term 2 that only n1 has; n1 wins term 3 and its
    // no-op; the term-2 entry commits together with the no-op, never alone.
    let logs = BTreeMap::from([
        (NodeId(1), vec![Term(1), Term(2)]),
        (NodeId(2), vec![Term(1)]),
        (NodeId(3), vec![Term(1)]),
    ]);
    let mut router = Router::with_logs(3, config(), logs);
    router.isolate(2);
    router.isolate(3);
    router.run(40);
    let n1 = router.node(1);
    assert!(
        n1.commit_index() < LogIndex(2),
        "no quorum, nothing new commits"
    );
    router.heal();
    let leader = router.elect();
    router.run(5);
    let node = &router.nodes[&leader];
    let commit = node.commit_index();
    assert_eq!(
        node.log().term(commit),
        Some(node.status().term),
        "the commit point is in the leader's term"
    );
}

#[test]
fn flow_control_proposals_are_refused_when_too_much_is_uncommitted() {
    let mut cfg = config();
    cfg.uncommitted_entries_max = 8;
    let mut router = Router::new(3, cfg);
    let leader = router.elect();
    router.isolate(leader.0);
    let node = router.nodes.get_mut(&leader).unwrap();
    let mut accepted = 0;
    let mut refused = None;
    for k in 0..20u8 {
        match node.propose(vec![k]) {
            Ok(_) => accepted += 1,
            Err(error) => {
                refused = Some(error);
                break;
            }
        }
    }
    assert_eq!(refused, Some(ProposeError::Busy));
    assert!(accepted <= 8, "{accepted} accepted");
}

#[test]
fn flow_control_inflight_appends_are_bounded() {
    let mut cfg = config();
    cfg.inflight_appends_max = 3;
    cfg.append_entries_max = 1;
    let mut router = Router::new(3, cfg);
    let leader = router.elect();
    let follower = ids(3).into_iter().find(|id| *id != leader).unwrap();
    router.cut.insert((follower, leader)); // answers are lost
    let node = router.nodes.get_mut(&leader).unwrap();
    for k in 0..10u8 {
        node.propose(vec![k]).unwrap();
    }
    let ready = node.ready();
    let to_follower = ready
        .messages
        .iter()
        .filter(|e| e.to == follower && matches!(e.message, RaftMessage::AppendEntries { .. }))
        .count();
    assert!(to_follower <= 3, "{to_follower} appends in flight");
}

fn ids(n: u64) -> Vec<NodeId> {
    (1..=n).map(NodeId).collect()
}

#[test]
fn propose_on_a_follower_names_the_leader() {
    let mut router = Router::new(3, config());
    let leader = router.elect();
    let follower = ids(3).into_iter().find(|id| *id != leader).unwrap();
    let result = router
        .nodes
        .get_mut(&follower)
        .unwrap()
        .propose(b"x".to_vec());
    assert_eq!(
        result,
        Err(ProposeError::NotLeader {
            leader: Some(leader)
        })
    );
}

// --- reads (thesis §6.4) -----------------------------------------------------

fn reads(router: &Router, id: NodeId) -> Vec<RaftOutput> {
    router.outputs.get(&id).map_or(Vec::new(), |o| {
        o.iter()
            .filter(|o| {
                matches!(
                    o,
                    RaftOutput::ReadReady { .. } | RaftOutput::ReadFailed { .. }
                )
            })
            .cloned()
            .collect()
    })
}

#[test]
fn read_index_is_released_after_a_quorum_round_at_the_commit_index() {
    let mut router = Router::new(3, config());
    let leader = router.elect();
    let index = propose(&mut router, leader, b"x");
    router
        .nodes
        .get_mut(&leader)
        .unwrap()
        .read_index(7)
        .unwrap();
    let ready = router.nodes.get_mut(&leader).unwrap().ready();
    assert!(ready.output.is_empty(), "not before the round is confirmed");
    let rounds = ready
        .messages
        .iter()
        .filter(|e| matches!(e.message, RaftMessage::Heartbeat { round, .. } if round > 0))
        .count();
    assert_eq!(rounds, 2, "one heartbeat round to each follower");
    for envelope in ready.messages {
        router
            .queue
            .push_back((leader, envelope.to, envelope.message));
    }
    router.settle();
    assert_eq!(
        reads(&router, leader),
        vec![RaftOutput::ReadReady { id: 7, index }]
    );
}

#[test]
fn read_index_on_a_cut_off_leader_never_succeeds_and_fails_on_step_down() {
    let mut router = Router::new(3, config());
    let leader = router.elect();
    router.isolate(leader.0);
    router
        .nodes
        .get_mut(&leader)
        .unwrap()
        .read_index(9)
        .unwrap();
    router.run(30);
    assert_eq!(
        reads(&router, leader),
        vec![RaftOutput::ReadFailed { id: 9 }]
    );
}

#[test]
fn reads_wait_until_the_new_leader_commits_its_noop() {
    let mut router = Router::new(3, config());
    let leader = router.elect();
    router.run(3);
    let node = router.nodes.get_mut(&leader).unwrap();
    assert_eq!(
        node.log().term(node.commit_index()),
        Some(node.status().term)
    );
    // Fresh cluster where the noop cannot commit: the read must wait.
    let mut router = Router::new(3, config());
    let leader = router.elect();
    router.isolate(leader.0);
    let node = router.nodes.get_mut(&leader).unwrap();
    let uncommitted = node.log().term(node.commit_index()) != Some(node.status().term);
    if uncommitted {
        node.read_index(1).unwrap();
        assert!(
            node.ready().output.is_empty(),
            "no read before the no-op commits"
        );
    }
}

#[test]
fn lease_reads_are_served_at_once_and_refused_with_the_hint() {
    let mut cfg = config();
    cfg.lease_reads = true;
    cfg.lease_margin_ticks = 2;
    assert!(
        cfg.validate().is_err(),
        "the hint lets followers vote inside the lease"
    );
    cfg.hint_slot_ticks = 0;
    assert!(cfg.validate().is_ok());
    let mut router = Router::new(3, cfg);
    let leader = router.elect();
    router.run(3);
    let node = router.nodes.get_mut(&leader).unwrap();
    node.read_index(5).unwrap();
    let output = node.ready().output;
    assert!(
        matches!(output.as_slice(), [RaftOutput::ReadReady { id: 5, .. }]),
        "{output:?}"
    );
    // Cut off, the lease runs out before followers may elect anyone else.
    router.isolate(leader.0);
    router.run(9);
    let node = router.nodes.get_mut(&leader).unwrap();
    if node.status().role == Role::Leader {
        node.read_index(6).unwrap();
        assert!(
            node.ready().output.is_empty(),
            "an expired lease serves nothing"
        );
    }
}

// --- membership (thesis §4) -----------------------------------------------------

#[test]
fn membership_a_learner_catches_up_and_is_promoted() {
    let mut router = Router::new(4, config());
    // n4 starts outside the cluster: remove it first (bootstrap has all four).
    router.isolate(4);
    let leader = router.elect_among(&[1, 2, 3]);
    router.run(3);
    let node = router.nodes.get_mut(&leader).unwrap();
    node.propose_membership(MembershipChange::Remove(NodeId(4)))
        .unwrap();
    router.run(3);
    for k in 0..5u8 {
        propose(&mut router, leader, &[k]);
    }
    router.heal();
    let node = router.nodes.get_mut(&leader).unwrap();
    node.propose_membership(MembershipChange::AddLearner(NodeId(4)))
        .unwrap();
    let early = node.propose_membership(MembershipChange::PromoteLearner(NodeId(4)));
    assert_eq!(
        early,
        Err(ProposeError::ConfigChangePending),
        "one change at a time"
    );
    router.run(10);
    assert_eq!(
        router.node(4).commit_index(),
        router.nodes[&leader].commit_index(),
        "the learner caught up"
    );
    assert_eq!(router.node(4).status().role, Role::Follower);
    let node = router.nodes.get_mut(&leader).unwrap();
    node.propose_membership(MembershipChange::PromoteLearner(NodeId(4)))
        .unwrap();
    router.run(10);
    assert!(router.node(4).cluster().voters.contains(&NodeId(4)));
    assert_eq!(router.nodes[&leader].cluster().voters.len(), 4);
}

#[test]
fn membership_a_member_started_as_joining_learns_the_log_and_never_campaigns_before() {
    let mut router = Router::new(4, config());
    router.isolate(4);
    let leader = router.elect_among(&[1, 2, 3]);
    router.run(3);
    let node = router.nodes.get_mut(&leader).unwrap();
    node.propose_membership(MembershipChange::Remove(NodeId(4)))
        .unwrap();
    router.run(3);
    for k in 0..5u8 {
        propose(&mut router, leader, &[k]);
    }
    // A brand-new n4 with an empty disk, told only who votes today.
    let voters = [NodeId(1), NodeId(2), NodeId(3)];
    let fresh = RaftNode::joining(
        &config(),
        NodeId(4),
        &voters,
        RaftDurable::default(),
        crate::Rng::new(7),
    );
    assert!(fresh.cluster().learners.contains(&NodeId(4)));
    router.nodes.insert(NodeId(4), fresh);
    router.heal();
    // Many election timeouts before it is added: it stays a follower.
    for _ in 0..10 {
        router.run(5);
        assert_eq!(router.node(4).status().role, Role::Follower);
    }
    let node = router.nodes.get_mut(&leader).unwrap();
    node.propose_membership(MembershipChange::AddLearner(NodeId(4)))
        .unwrap();
    router.run(10);
    assert_eq!(
        applied_commands(&router, NodeId(4)),
        applied_commands(&router, leader),
        "the joined member applied the whole log"
    );
    let node = router.nodes.get_mut(&leader).unwrap();
    node.propose_membership(MembershipChange::PromoteLearner(NodeId(4)))
        .unwrap();
    router.run(10);
    assert_eq!(router.node(4).cluster().voters.len(), 4);
}

#[test]
fn membership_a_lagging_learner_is_not_promoted() {
    let mut router = Router::new(3, config());
    let leader = router.elect();
    router.run(3);
    let node = router.nodes.get_mut(&leader).unwrap();
    node.propose_membership(MembershipChange::AddLearner(NodeId(9)))
        .unwrap();
    router.run(3);
    let node = router.nodes.get_mut(&leader).unwrap();
    let result = node.propose_membership(MembershipChange::PromoteLearner(NodeId(9)));
    assert!(
        matches!(result, Err(ProposeError::LearnerBehind { .. })),
        "{result:?}"
    );
}

#[test]
fn membership_a_new_leader_must_commit_in_its_term_first() {
    let mut router = Router::new(3, config());
    let leader = router.elect();
    router.isolate(leader.0);
    let node = router.nodes.get_mut(&leader).unwrap();
    if node.log().term(node.commit_index()) != Some(node.status().term) {
        let result = node.propose_membership(MembershipChange::Remove(NodeId(1)));
        assert_eq!(result, Err(ProposeError::NotReady));
    }
}

#[test]
fn membership_the_leader_can_remove_itself_and_the_rest_elect() {
    let mut router = Router::new(3, config());
    let leader = router.elect();
    router.run(3);
    router
        .nodes
        .get_mut(&leader)
        .unwrap()
        .propose_membership(MembershipChange::Remove(leader))
        .unwrap();
    router.run(100);
    assert_ne!(
        router.nodes[&leader].status().role,
        Role::Leader,
        "the removed leader stepped down"
    );
    let leaders: Vec<_> = router.leaders().into_iter().map(|(id, _)| id).collect();
    assert_eq!(leaders.len(), 1);
    assert_ne!(leaders[0], leader);
    let new = leaders[0];
    assert!(!router.nodes[&new].cluster().voters.contains(&leader));
}

// --- snapshots (§7) ------------------------------------------------------------

/// A leader that has applied 20 entries while one follower, cut off,
/// has none: `(router, leader, lagging)`.
fn leader_with_a_lagging_follower(cfg: RaftConfig) -> (Router, NodeId, NodeId) {
    let mut router = Router::new(3, cfg);
    let leader = router.elect();
    let lagging = ids(3).into_iter().find(|id| *id != leader).unwrap();
    router.isolate(lagging.0);
    for k in 0..20u8 {
        propose(&mut router, leader, &[k]);
    }
    router.run(3);
    (router, leader, lagging)
}

/// The data of the first snapshot `node` restored, if any.
fn restored_snapshot(router: &Router, node: NodeId) -> Option<Vec<u8>> {
    router.outputs[&node].iter().find_map(|o| match o {
        RaftOutput::Restore(snapshot) => Some(snapshot.data.bytes().to_vec()),
        _ => None,
    })
}

#[test]
fn snapshots_compact_the_log_and_a_lagging_follower_installs_one_in_chunks() {
    let mut cfg = config();
    cfg.snapshot_chunk_bytes_max = 4;
    let (mut router, leader, lagging) = leader_with_a_lagging_follower(cfg);
    let node = router.nodes.get_mut(&leader).unwrap();
    let applied = node.applied_index();
    node.compact(applied, b"state-of-the-machine".to_vec())
        .unwrap();
    assert_eq!(node.log().snapshot_index(), applied);
    assert!(
        node.compact(applied, Vec::new()).is_err(),
        "cannot compact twice at one index"
    );
    router.settle();
    assert!(
        router.disk[&leader].snapshot.is_some(),
        "the snapshot was persisted"
    );
    router.heal();
    router.run(20);
    let kinds: Vec<String> = router
        .sent
        .iter()
        .map(|(f, t, m)| format!("{f}->{t} {}", crate::protocol::Message::kind(m)))
        .collect();
    let chunks = router.count_sent("install_snapshot");
    assert!(chunks > 0, "{:?}", &kinds[kinds.len().saturating_sub(30)..]);
    assert!(chunks >= 5, "20 bytes in 4-byte chunks: {chunks}");
    assert_eq!(
        restored_snapshot(&router, lagging),
        Some(b"state-of-the-machine".to_vec())
    );
    assert_eq!(
        router.nodes[&lagging].commit_index(),
        router.nodes[&leader].commit_index()
    );
    let disk = &router.disk[&lagging];
    assert_eq!(
        disk.snapshot.as_ref().map(|s| s.meta.last_index),
        Some(applied)
    );
}

#[test]
fn a_snapshot_the_caller_persists_is_not_in_a_ready_and_is_still_sent() {
    let (mut router, leader, lagging) = leader_with_a_lagging_follower(config());
    let disk_before = router.disk[&leader].snapshot.clone();
    let node = router.nodes.get_mut(&leader).unwrap();
    let applied = node.applied_index();
    let snapshot = node
        .compact_unpersisted(applied, b"kept-by-the-caller".to_vec())
        .unwrap();
    assert_eq!(snapshot.meta.last_index, applied);
    assert_eq!(node.log().snapshot_index(), applied);
    assert!(node.compact_unpersisted(applied, Vec::new()).is_err());
    router.settle();
    assert_eq!(
        router.disk[&leader].snapshot, disk_before,
        "no Ready persisted the caller's snapshot"
    );
    router.heal();
    router.run(20);
    assert_eq!(
        restored_snapshot(&router, lagging),
        Some(b"kept-by-the-caller".to_vec())
    );
}

/// Snapshot bytes "stored" outside the node, counting the reads.
struct CountedStore {
    bytes: Vec<u8>,
    reads: std::sync::atomic::AtomicUsize,
}

impl crate::raft::StoredSnapshot for CountedStore {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn read(&self, start: u64, end: u64) -> Vec<u8> {
        self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.bytes[start as usize..end as usize].to_vec()
    }
}

#[test]
fn a_stored_snapshot_leaves_memory_and_is_sent_from_its_store_in_chunks() {
    let mut cfg = config();
    cfg.snapshot_chunk_bytes_max = 4;
    let (mut router, leader, lagging) = leader_with_a_lagging_follower(cfg);
    let node = router.nodes.get_mut(&leader).unwrap();
    let applied = node.applied_index();
    let data = b"state-read-from-its-file".to_vec();
    node.compact_unpersisted(applied, data.clone()).unwrap();
    assert_eq!(
        node.snapshot_in_memory(),
        Some((applied, data.len() as u64))
    );
    let store = std::sync::Arc::new(CountedStore {
        bytes: data.clone(),
        reads: Default::default(),
    });
    // A store for another index is ignored.
    node.snapshot_stored(LogIndex(applied.0 - 1), store.clone());
    assert!(node.snapshot_in_memory().is_some());
    node.snapshot_stored(applied, store.clone());
    assert_eq!(node.snapshot_in_memory(), None, "the bytes left memory");
    router.settle();
    router.heal();
    router.run(20);
    assert_eq!(restored_snapshot(&router, lagging), Some(data));
    assert!(
        store.reads.load(std::sync::atomic::Ordering::SeqCst) >= 6,
        "24 bytes in 4-byte chunks, each read from the store"
    );
}

/// Entries `node` was handed after its first restore.
fn applied_after_restore(router: &Router, node: NodeId) -> Vec<LogIndex> {
    router.outputs[&node]
        .iter()
        .skip_while(|o| !matches!(o, RaftOutput::Restore(_)))
        .filter_map(|o| match o {
            RaftOutput::Apply(entry) => Some(entry.index),
            _ => None,
        })
        .collect()
}

#[test]
fn a_snapshot_restored_in_the_background_holds_later_entries_until_it_is_restored() {
    let (mut router, leader, lagging) = leader_with_a_lagging_follower(config());
    router
        .nodes
        .get_mut(&lagging)
        .unwrap()
        .restore_in_background();
    let state_before = router.nodes[&lagging].applied_index();
    let node = router.nodes.get_mut(&leader).unwrap();
    let snapshot_at = node.applied_index();
    node.compact(snapshot_at, b"state".to_vec()).unwrap();
    router.settle();
    router.heal();
    router.run(20);
    assert_eq!(restored_snapshot(&router, lagging), Some(b"state".to_vec()));
    for k in 0..3u8 {
        propose(&mut router, leader, &[100 + k]);
    }
    router.run(10);
    let follower = &router.nodes[&lagging];
    assert!(
        follower.commit_index() > snapshot_at,
        "later entries commit"
    );
    assert_eq!(
        follower.pending_restore().map(|p| p.index),
        Some(snapshot_at)
    );
    assert_eq!(
        follower.applied_index(),
        state_before,
        "the state is the one before the snapshot until it is restored"
    );
    assert!(
        applied_after_restore(&router, lagging).is_empty(),
        "nothing after the snapshot is handed out meanwhile"
    );
    let commit = follower.commit_index();
    let node = router.nodes.get_mut(&lagging).unwrap();
    // An older index than the one awaited changes nothing.
    node.snapshot_restored(LogIndex(snapshot_at.0 - 1));
    assert!(node.pending_restore().is_some());
    node.snapshot_restored(snapshot_at);
    assert_eq!(node.pending_restore(), None);
    router.run(3);
    let handed: Vec<LogIndex> = applied_after_restore(&router, lagging);
    let expected: Vec<LogIndex> = (snapshot_at.0 + 1..=commit.0).map(LogIndex).collect();
    assert_eq!(handed, expected, "then every later entry, in order");
    assert_eq!(router.nodes[&lagging].applied_index(), commit);
}

#[test]
fn restart_from_disk_restores_log_and_reapplies_committed_entries() {
    let mut router = Router::new(3, config());
    let leader = router.elect();
    for k in 0..5u8 {
        propose(&mut router, leader, &[k]);
    }
    router.run(3);
    let follower = ids(3).into_iter().find(|id| *id != leader).unwrap();
    let disk = router.disk[&follower].clone();
    let mut restarted = RaftNode::new(&config(), follower, &ids(3), disk, crate::Rng::new(5));
    assert_eq!(
        restarted.log().last_index(),
        router.nodes[&leader].log().last_index()
    );
    let applied: Vec<_> = restarted
        .ready()
        .output
        .into_iter()
        .filter(|o| matches!(o, RaftOutput::Apply(_)))
        .collect();
    assert!(
        !applied.is_empty(),
        "the persisted commit hint lets it re-apply at once"
    );
}

// --- regressions found in review ------------------------------------------------

#[test]
fn a_restarted_voter_keeps_stickiness_for_one_election_timeout() {
    // Leader leases rely on voters that acknowledged a heartbeat refusing
    // other candidates for election_ticks_min; a restart must not void that.
    let cfg = config();
    let mut node = RaftNode::new(
        &cfg,
        NodeId(2),
        &ids(3),
        RaftDurable::default(),
        crate::Rng::new(3),
    );
    let vote = |transfer| RaftMessage::VoteRequest {
        term: Term(5),
        last_log_index: LogIndex(0),
        last_log_term: Term(0),
        leadership_transfer: transfer,
    };
    node.step(NodeId(3), vote(false));
    assert!(!node.has_ready(), "ignored right after start");
    node.step(NodeId(3), vote(true));
    let ready = node.ready();
    assert!(
        matches!(
            ready.messages[0].message,
            RaftMessage::VoteResponse { granted: true, .. }
        ),
        "a transfer vote is still granted"
    );
}

#[test]
fn a_full_pipeline_whose_answers_were_lost_recovers() {
    let mut cfg = config();
    cfg.inflight_appends_max = 2;
    cfg.append_entries_max = 1;
    let mut router = Router::new(3, cfg);
    let leader = router.elect();
    router.run(3);
    let follower = ids(3).into_iter().find(|id| *id != leader).unwrap();
    router.cut.insert((follower, leader)); // its answers are lost
    for k in 0..6u8 {
        router
            .nodes
            .get_mut(&leader)
            .unwrap()
            .propose(vec![k])
            .unwrap();
        router.settle();
    }
    router.cut.clear();
    router.run(30);
    let last = router.nodes[&leader].log().last_index();
    assert_eq!(
        router.nodes[&leader]
            .progress(follower)
            .unwrap()
            .match_index,
        last,
        "caught up again"
    );
}

#[test]
fn a_waiting_read_is_released_when_the_cluster_shrinks_to_one_voter() {
    let mut router = Router::new(2, config());
    let leader = router.elect();
    router.run(3);
    let follower = ids(2).into_iter().find(|id| *id != leader).unwrap();
    router.cut.insert((follower, leader));
    let node = router.nodes.get_mut(&leader).unwrap();
    node.read_index(7).unwrap();
    node.propose_membership(MembershipChange::Remove(follower))
        .unwrap();
    router.settle();
    router.run(2);
    assert!(
        reads(&router, leader)
            .iter()
            .any(|o| matches!(o, RaftOutput::ReadReady { id: 7, .. })),
        "{:?}",
        reads(&router, leader)
    );
}

/// Thesis §4.1: a server answers vote requests from a candidate outside
/// its latest configuration (that candidate's log may hold a newer
/// configuration in which it is a voter and needs this vote), while votes
/// from outside the configuration never count for this server's own
/// campaigns.
#[test]
fn membership_vote_requests_from_outside_the_configuration_are_answered() {
    let cfg = config();
    let mut node = RaftNode::new(
        &cfg,
        NodeId(1),
        &ids(3),
        RaftDurable::default(),
        crate::Rng::new(7),
    );
    // Past the start-up stickiness, and no leader heard of.
    for _ in 0..cfg.election_ticks_min {
        node.tick();
        let _ = node.ready();
    }
    node.step(
        NodeId(4),
        RaftMessage::PreVoteRequest {
            term: Term(5),
            last_log_index: LogIndex(3),
            last_log_term: Term(2),
        },
    );
    let answers: Vec<_> = node
        .ready()
        .messages
        .into_iter()
        .filter(|e| e.to == NodeId(4))
        .map(|e| e.message)
        .collect();
    assert_eq!(
        answers,
        [RaftMessage::PreVoteResponse {
            term: Term(5),
            granted: true
        }]
    );
    // A stranger's granted answer does not count towards a quorum: with
    // its own vote and one stranger's grant, a pre-candidate of a 3-voter
    // configuration stays one.
    for _ in 0..4 * cfg.election_ticks_min {
        node.tick();
        let _ = node.ready();
        if node.status().role == Role::PreCandidate {
            break;
        }
    }
    assert_eq!(node.status().role, Role::PreCandidate, "its timer fired");
    let asked = node.term.next();
    node.step(
        NodeId(4),
        RaftMessage::PreVoteResponse {
            term: asked,
            granted: true,
        },
    );
    assert_eq!(node.status().role, Role::PreCandidate);
    // A voter's grant does make the quorum.
    node.step(
        NodeId(2),
        RaftMessage::PreVoteResponse {
            term: asked,
            granted: true,
        },
    );
    assert_eq!(node.status().role, Role::Candidate);
}

/// A follower that holds the whole log learns a commit as soon as the
/// leader makes it, without waiting for a heartbeat: it applies (and can
/// answer a client whose write it forwarded) one round trip after the
/// leader does.
#[test]
fn caught_up_followers_learn_a_commit_without_waiting_for_a_heartbeat() {
    let mut router = Router::new(3, config());
    let leader = router.elect();
    router.run(1);
    // No tick from here on: only messages move.
    let index = propose(&mut router, leader, b"x");
    for (id, node) in &router.nodes {
        assert_eq!(node.commit_index(), index, "{id} learned the commit");
    }
    for id in ids(3) {
        assert_eq!(
            applied_commands(&router, id).last().map(Vec::as_slice),
            Some(&b"x"[..]),
            "{id} applied it"
        );
    }
}

/// Delivers `leader`'s heartbeats (ticking it until it sends them) to every
/// follower and returns their answers undelivered.
fn heartbeat_answers_held_back(router: &mut Router, leader: NodeId) -> Vec<(NodeId, RaftMessage)> {
    let mut heartbeats = Vec::new();
    for _ in 0..config().heartbeat_ticks {
        let node = router.nodes.get_mut(&leader).unwrap();
        node.tick();
        heartbeats.extend(node.ready().messages);
    }
    let mut answers = Vec::new();
    for envelope in heartbeats {
        assert!(matches!(envelope.message, RaftMessage::Heartbeat { round, .. } if round > 0));
        let follower = router.nodes.get_mut(&envelope.to).unwrap();
        follower.step(leader, envelope.message);
        for answer in follower.ready().messages {
            answers.push((envelope.to, answer.message));
        }
    }
    assert_eq!(answers.len(), 2, "both followers answered");
    answers
}

#[test]
fn a_heartbeat_answer_that_overtook_an_append_does_not_resend_it() {
    let mut router = Router::new(3, config());
    let leader = router.elect();
    propose(&mut router, leader, b"a");
    let answers = heartbeat_answers_held_back(&mut router, leader);
    // An append leaves after the heartbeat; the heartbeat's answers arrive
    // while it is still in flight.
    let node = router.nodes.get_mut(&leader).unwrap();
    node.propose(b"b".to_vec()).unwrap();
    let appends = node.ready().messages;
    assert_eq!(appends.len(), 2, "one append per follower");
    for (from, answer) in answers {
        node.step(from, answer);
    }
    let after = node.ready().messages;
    assert!(
        after
            .iter()
            .all(|e| !matches!(e.message, RaftMessage::AppendEntries { .. })),
        "nothing resent: {after:?}"
    );
    for peer in ids(3).into_iter().filter(|id| *id != leader) {
        assert_eq!(
            node.progress(peer).unwrap().state,
            ReplicationState::Replicate
        );
    }
}

#[test]
fn appends_lost_before_a_heartbeat_are_resent_when_it_is_answered() {
    let mut router = Router::new(3, config());
    let leader = router.elect();
    propose(&mut router, leader, b"a");
    let follower = ids(3).into_iter().find(|id| *id != leader).unwrap();
    router.cut.insert((leader, follower));
    let index = propose(&mut router, leader, b"b"); // lost on the way
    router.cut.clear();
    assert!(router.nodes[&follower].log().last_index() < index);
    // No proposal follows: only the heartbeat's answer can reveal the loss.
    router.run(config().heartbeat_ticks);
    assert_eq!(router.nodes[&follower].log().last_index(), index);
    assert_eq!(
        router.nodes[&leader]
            .progress(follower)
            .unwrap()
            .match_index,
        index
    );
}

// --- commitment from the leader's durable notice (durable_notice.rs) ---------

/// Proposes `data` on `leader` and returns its index, the appends it sent
/// (undelivered) and the durable notices of its next `ready()`, taken once
/// the first is on its disk.
fn propose_and_announce(
    router: &mut Router,
    leader: NodeId,
    data: &[u8],
) -> (
    LogIndex,
    Vec<Envelope<RaftMessage>>,
    Vec<Envelope<RaftMessage>>,
) {
    let node = router.nodes.get_mut(&leader).unwrap();
    let index = node.propose(data.to_vec()).unwrap();
    let appends = node.ready().messages;
    assert!(
        node.has_ready(),
        "a notice is due once the entry is on disk"
    );
    let notices = node.ready().messages;
    (index, appends, notices)
}

/// A settled 3-voter cluster, its leader and one follower.
fn three_with_a_follower() -> (Router, NodeId, NodeId) {
    let mut router = Router::new(3, config());
    let leader = router.elect();
    router.run(1);
    let follower = ids(3).into_iter().find(|id| *id != leader).unwrap();
    (router, leader, follower)
}

fn to(envelopes: &[Envelope<RaftMessage>], peer: NodeId) -> RaftMessage {
    envelopes
        .iter()
        .find(|e| e.to == peer)
        .map(|e| e.message.clone())
        .expect("a message for the peer")
}

#[test]
fn a_follower_commits_from_the_leaders_durable_notice_without_its_commit_index() {
    let (mut router, leader, follower) = three_with_a_follower();
    let (index, appends, notices) = propose_and_announce(&mut router, leader, b"x");
    let term = router.nodes[&leader].status().term;
    assert_eq!(
        to(&notices, follower),
        RaftMessage::LeaderDurable {
            term,
            index,
            config_index: LogIndex(0),
        }
    );
    let node = router.nodes.get_mut(&follower).unwrap();
    node.step(leader, to(&appends, follower));
    let persisted = node.ready(); // its acknowledgement is never delivered
    assert_eq!(persisted.persist.unwrap().entries.len(), 1);
    node.step(leader, to(&notices, follower));
    assert_eq!(node.commit_index(), index, "leader and follower hold it");
    let applied = node.ready().output;
    assert!(
        matches!(applied.as_slice(), [RaftOutput::Apply(e)] if e.index == index),
        "{applied:?}"
    );
    assert!(
        router.nodes[&leader].commit_index() < index,
        "the leader has not counted it yet"
    );
}

#[test]
fn a_follower_covered_by_the_durable_notice_is_sent_no_commit_notice() {
    let (mut router, leader, follower) = three_with_a_follower();
    let other = ids(3)
        .into_iter()
        .find(|id| *id != leader && *id != follower)
        .unwrap();
    let (index, appends, notices) = propose_and_announce(&mut router, leader, b"x");
    // The follower takes the append and the notice, and acknowledges.
    let node = router.nodes.get_mut(&follower).unwrap();
    node.step(leader, to(&appends, follower));
    let acknowledgement = node.ready().messages;
    node.step(leader, to(&notices, follower));
    assert_eq!(node.commit_index(), index, "deduced from the notice");
    node.ready();
    // The leader commits with that acknowledgement; the notice it already
    // sent tells both followers, so no commit notice follows, and the other
    // follower (which has not acknowledged yet) is not sent one either.
    let node = router.nodes.get_mut(&leader).unwrap();
    for envelope in acknowledgement {
        node.step(follower, envelope.message);
    }
    assert_eq!(node.commit_index(), index);
    let after = node.ready().messages;
    assert!(
        after
            .iter()
            .all(|e| !matches!(e.message, RaftMessage::Heartbeat { round: 0, .. })),
        "{after:?}"
    );
    // The other follower, once it holds the entry, deduces the commit from
    // the same notice.
    let node = router.nodes.get_mut(&other).unwrap();
    node.step(leader, to(&appends, other));
    node.step(leader, to(&notices, other));
    node.ready();
    node.ready();
    assert_eq!(node.commit_index(), index);
}

#[test]
fn a_commit_notice_is_not_answered_and_a_heartbeat_is() {
    let (mut router, leader, follower) = three_with_a_follower();
    let term = router.nodes[&leader].status().term;
    let commit = router.nodes[&follower].commit_index();
    let node = router.nodes.get_mut(&follower).unwrap();
    node.step(
        leader,
        RaftMessage::Heartbeat {
            term,
            commit,
            round: 0,
        },
    );
    assert!(node.ready().messages.is_empty(), "a commit notice");
    node.step(
        leader,
        RaftMessage::Heartbeat {
            term,
            commit,
            round: 1,
        },
    );
    let answers = node.ready().messages;
    assert!(
        matches!(
            answers.as_slice(),
            [Envelope {
                message: RaftMessage::HeartbeatResponse { round: 1, .. },
                ..
            }]
        ),
        "{answers:?}"
    );
}

#[test]
fn a_follower_commits_nothing_its_own_disk_does_not_hold_yet() {
    let (mut router, leader, follower) = three_with_a_follower();
    let (index, appends, notices) = propose_and_announce(&mut router, leader, b"x");
    let node = router.nodes.get_mut(&follower).unwrap();
    // The notice arrives before the follower handed the entry to its disk.
    node.step(leader, to(&appends, follower));
    node.step(leader, to(&notices, follower));
    assert!(node.commit_index() < index);
    let first = node.ready();
    assert_eq!(first.persist.unwrap().entries.len(), 1);
    assert!(first.output.is_empty(), "{:?}", first.output);
    // Once that Ready is carried out, the next one commits from the notice
    // it remembered.
    assert!(node.has_ready());
    let second = node.ready();
    assert!(
        matches!(second.output.as_slice(), [RaftOutput::Apply(e)] if e.index == index),
        "{:?}",
        second.output
    );
}

#[test]
fn a_notice_naming_another_configuration_commits_nothing() {
    let (mut router, leader, follower) = three_with_a_follower();
    let (index, appends, notices) = propose_and_announce(&mut router, leader, b"x");
    let node = router.nodes.get_mut(&follower).unwrap();
    node.step(leader, to(&appends, follower));
    node.ready();
    let RaftMessage::LeaderDurable { term, .. } = to(&notices, follower) else {
        unreachable!()
    };
    node.step(
        leader,
        RaftMessage::LeaderDurable {
            term,
            index,
            config_index: LogIndex(1),
        },
    );
    assert!(node.commit_index() < index, "configurations differ");
    assert!(!node.has_ready());
}

#[test]
fn five_voters_are_sent_no_durable_notice() {
    let mut router = Router::new(5, config());
    let leader = router.elect();
    router.run(1);
    let node = router.nodes.get_mut(&leader).unwrap();
    node.propose(b"x".to_vec()).unwrap();
    node.ready();
    let later = node.ready().messages;
    assert!(
        later
            .iter()
            .all(|e| !matches!(e.message, RaftMessage::LeaderDurable { .. })),
        "{later:?}"
    );
}

#[test]
fn the_leaders_read_index_covers_what_it_announced_durable() {
    let mut cfg = config();
    cfg.lease_reads = true;
    cfg.lease_margin_ticks = 2;
    cfg.hint_slot_ticks = 0;
    let mut router = Router::new(3, cfg);
    let leader = router.elect();
    router.run(3);
    let (index, _appends, _notices) = propose_and_announce(&mut router, leader, b"x");
    let node = router.nodes.get_mut(&leader).unwrap();
    assert!(node.commit_index() < index);
    // A follower may already have answered the write: a read served on the
    // leader must wait until it has applied it.
    node.read_index(5).unwrap();
    let output = node.ready().output;
    assert_eq!(output, vec![RaftOutput::ReadReady { id: 5, index }]);
}
