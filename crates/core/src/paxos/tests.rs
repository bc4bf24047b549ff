//! Pure-core tests of Multi-Paxos. Each test names the property it asserts.

use super::*;
use crate::protocol::{Protocol, Role};
use crate::rng::Rng;
use crate::test_cluster::Cluster;
use crate::types::NodeId;

fn members(size: u64) -> Vec<NodeId> {
    (1..=size).map(NodeId).collect()
}

fn node(id: u64, size: u64, durable: PaxosDurable) -> PaxosNode {
    PaxosNode::new(
        &PaxosConfig::default(),
        NodeId(id),
        &members(size),
        durable,
        Rng::derive(5, id),
    )
}

fn ballot(round: u64, id: u64) -> Ballot {
    Ballot {
        round,
        priority: 0,
        node: NodeId(id),
    }
}

/// Ticks `node` until it sends something, at most `ticks_max` ticks.
fn tick_until_ready(node: &mut PaxosNode, ticks_max: u64) -> crate::Ready<PaxosNode> {
    for _ in 0..ticks_max {
        node.tick();
        if node.has_ready() {
            return node.ready();
        }
    }
    panic!("nothing to send within {ticks_max} ticks");
}

#[test]
fn a_fault_free_cluster_elects_one_leader_that_everyone_follows() {
    for seed in 0..20 {
        let mut cluster: Cluster<PaxosNode> = Cluster::new(PaxosConfig::default(), 5, seed, 5);
        cluster.run(1_000);
        assert_eq!(cluster.leaders_at_once_max, 1, "seed {seed}");
        let leader = cluster.leaders()[0];
        cluster.assert_settled_on(leader.0);
        let token = cluster.status(leader.0).fencing_token.unwrap();
        for id in 1..=5 {
            let chosen: Vec<(u64, u64)> = cluster.node(id).chosen().collect();
            assert_eq!(
                chosen,
                vec![(1, token)],
                "seed {seed}: n{id} learned the no-op"
            );
        }
    }
}

#[test]
fn the_promise_is_persisted_in_the_ready_that_sends_the_prepare() {
    let mut candidate = node(1, 3, PaxosDurable::default());
    let ready = tick_until_ready(&mut candidate, 400);
    let persisted = ready.persist.expect("the self-promise is persisted");
    let promised = persisted.promised.expect("a new promise");
    assert_eq!(promised.node, NodeId(1));
    assert_eq!(ready.messages.len(), 2, "a Prepare to each peer");
    for envelope in ready.messages {
        assert_eq!(
            envelope.message,
            PaxosMessage::Prepare {
                ballot: promised,
                from_slot: 1
            }
        );
    }
}

#[test]
fn a_lower_ballot_is_rejected_with_the_promise() {
    let mut acceptor = node(2, 3, PaxosDurable::default());
    for _ in 0..200 {
        acceptor.tick(); // past the restart lease
    }
    let _ = acceptor.ready();
    acceptor.step(
        NodeId(3),
        PaxosMessage::Prepare {
            ballot: ballot(5, 3),
            from_slot: 1,
        },
    );
    let ready = acceptor.ready();
    assert_eq!(ready.persist.unwrap().promised, Some(ballot(5, 3)));
    acceptor.step(
        NodeId(1),
        PaxosMessage::Prepare {
            ballot: ballot(4, 1),
            from_slot: 1,
        },
    );
    let ready = acceptor.ready();
    assert!(ready.persist.is_none(), "a refusal changes nothing durable");
    assert_eq!(
        ready.messages[0].message,
        PaxosMessage::Reject {
            ballot: ballot(4, 1),
            promised: ballot(5, 3)
        }
    );
}

#[test]
fn phase_one_returns_accepted_entries_and_the_new_leader_counts_what_it_fetched() {
    // n2 and n3 accepted slots 1 and 2 from an old leader n9's ballot; n1
    // holds nothing. n1 runs phase 1 and must re-propose both values.
    let old = ballot(3, 2);
    let mut with_entries = PaxosDurable {
        promised: old,
        ..PaxosDurable::default()
    };
    with_entries.log.insert(
        1,
        Entry {
            ballot: old,
            value: 111,
        },
    );
    with_entries.log.insert(
        2,
        Entry {
            ballot: old,
            value: 222,
        },
    );
    let knows_the_round = PaxosDurable {
        promised: old,
        ..PaxosDurable::default()
    };
    let mut nodes = [
        node(1, 3, knows_the_round),
        node(2, 3, with_entries.clone()),
        node(3, 3, with_entries),
    ];
    let prepare = tick_until_ready(&mut nodes[0], 400);
    for acceptor in &mut nodes[1..] {
        acceptor.sticky_until_tick = 0; // long after their restart
    }
    let mut to_leader = Vec::new();
    for envelope in prepare.messages {
        let index = (envelope.to.0 - 1) as usize;
        nodes[index].step(NodeId(1), envelope.message);
        to_leader.extend(
            nodes[index]
                .ready()
                .messages
                .into_iter()
                .map(|m| (index, m)),
        );
    }
    assert!(to_leader.iter().all(|(_, e)| matches!(e.message, PaxosMessage::Promise { ref entries, .. } if entries.len() == 2)));
    let mut accepts = Vec::new();
    for (index, envelope) in to_leader {
        nodes[0].step(NodeId(index as u64 + 1), envelope.message);
        accepts.extend(nodes[0].ready().messages);
    }
    let values: Vec<Vec<u64>> = accepts
        .iter()
        .filter_map(|e| match &e.message {
            PaxosMessage::Accept {
                values,
                first_slot: 1,
                ..
            } => Some(values.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(values.len(), 2, "phase 2 goes to both acceptors once");
    let noop = nodes[0].promised.token();
    assert_eq!(
        values[0],
        vec![111, 222, noop],
        "old values kept, then a no-op"
    );
    for envelope in accepts {
        let index = (envelope.to.0 - 1) as usize;
        nodes[index].step(NodeId(1), envelope.message);
        for answer in nodes[index].ready().messages {
            nodes[0].step(envelope.to, answer.message);
        }
    }
    assert_eq!(nodes[0].status().role, Role::Leader);
    assert_eq!(nodes[0].catch_up_entries(), Some(2));
    let chosen: Vec<(u64, u64)> = nodes[0].chosen().collect();
    assert_eq!(chosen, vec![(1, 111), (2, 222), (3, noop)]);
}

#[test]
fn an_acceptor_ignores_other_proposers_while_it_promised_a_lease() {
    let mut acceptor = node(2, 3, PaxosDurable::default());
    for _ in 0..200 {
        acceptor.tick();
    }
    acceptor.step(
        NodeId(1),
        PaxosMessage::Prepare {
            ballot: ballot(1, 1),
            from_slot: 1,
        },
    );
    acceptor.step(
        NodeId(1),
        PaxosMessage::Accept {
            ballot: ballot(1, 1),
            first_slot: 1,
            values: vec![7],
            commit: 0,
            sent_tick: 10,
        },
    );
    let _ = acceptor.ready();
    let rival = PaxosMessage::Prepare {
        ballot: ballot(2, 3),
        from_slot: 1,
    };
    for _ in 0..149 {
        acceptor.step(NodeId(3), rival.clone());
        assert!(!acceptor.has_ready(), "ignored within the lease");
        acceptor.tick();
    }
    acceptor.tick();
    acceptor.step(NodeId(3), rival);
    let ready = acceptor.ready();
    assert!(matches!(
        ready.messages[0].message,
        PaxosMessage::Promise { .. }
    ));
}

#[test]
fn a_restarted_acceptor_honours_a_lease_it_may_have_forgotten() {
    let durable = PaxosDurable {
        promised: ballot(1, 1),
        ..PaxosDurable::default()
    };
    let mut acceptor = node(2, 3, durable);
    let rival = PaxosMessage::Prepare {
        ballot: ballot(2, 3),
        from_slot: 1,
    };
    acceptor.step(NodeId(3), rival.clone());
    assert!(!acceptor.has_ready(), "no promise right after a restart");
    for _ in 0..150 {
        acceptor.tick();
    }
    let _ = acceptor.ready();
    acceptor.step(NodeId(3), rival);
    assert!(matches!(
        acceptor.ready().messages[0].message,
        PaxosMessage::Promise { .. }
    ));
}

#[test]
fn a_leader_whose_lease_is_not_renewed_steps_down_before_another_can_be_elected() {
    let mut cluster: Cluster<PaxosNode> = Cluster::new(PaxosConfig::default(), 3, 3, 5);
    cluster.run(1_000);
    let leader = cluster.leaders()[0];
    let others: Vec<u64> = (1..=3).filter(|id| *id != leader.0).collect();
    cluster.partition(&[leader.0]);
    let cut_at = cluster.now_ticks;
    let mut stepped_down_at = None;
    let mut successor_at = None;
    for _ in 0..2_000 {
        cluster.run(1);
        if stepped_down_at.is_none() && cluster.status(leader.0).role != Role::Leader {
            stepped_down_at = Some(cluster.now_ticks);
        }
        if successor_at.is_none()
            && others
                .iter()
                .any(|id| cluster.status(*id).role == Role::Leader)
        {
            successor_at = Some(cluster.now_ticks);
        }
    }
    let (down, up) = (stepped_down_at.unwrap(), successor_at.unwrap());
    assert!(
        down < up,
        "old leader stepped down at {down}, successor at {up}"
    );
    assert!(
        down - cut_at <= 150,
        "the lease is shorter than one election timeout"
    );
    assert_eq!(cluster.leaders_at_once_max, 1);
}

#[test]
fn two_proposers_of_one_round_do_not_split_the_vote_the_higher_ballot_wins() {
    let mut acceptors = [
        node(1, 3, PaxosDurable::default()),
        node(2, 3, PaxosDurable::default()),
        node(3, 3, PaxosDurable::default()),
    ];
    for acceptor in &mut acceptors {
        for _ in 0..150 {
            acceptor.tick();
        }
        let _ = acceptor.ready();
    }
    // n1 and n3 both open round 1; n2 hears n1 first.
    acceptors[1].step(
        NodeId(1),
        PaxosMessage::Prepare {
            ballot: ballot(1, 1),
            from_slot: 1,
        },
    );
    let _ = acceptors[1].ready();
    acceptors[1].step(
        NodeId(3),
        PaxosMessage::Prepare {
            ballot: ballot(1, 3),
            from_slot: 1,
        },
    );
    let ready = acceptors[1].ready();
    assert!(
        matches!(ready.messages[0].message, PaxosMessage::Promise { ballot: b, .. } if b == ballot(1, 3)),
        "a promise binds nobody: the higher ballot of the round gets n2 too"
    );
}

#[test]
fn without_leases_a_deposed_leader_acts_until_it_hears_of_a_higher_ballot() {
    let config = PaxosConfig {
        leases: false,
        ..PaxosConfig::default()
    };
    let mut cluster: Cluster<PaxosNode> = Cluster::new(config, 3, 4, 5);
    cluster.run(1_000);
    let leader = cluster.leaders()[0];
    cluster.partition(&[leader.0]);
    cluster.run(2_000);
    assert_eq!(cluster.leaders().len(), 2, "classic Multi-Paxos: both act");
    cluster.heal();
    cluster.run(500);
    assert_eq!(cluster.leaders().len(), 1, "the higher ballot prevails");
}

#[test]
fn a_lone_node_leads_for_good_and_reports_an_endless_lease() {
    let mut alone = PaxosNode::new(
        &PaxosConfig::default(),
        NodeId(1),
        &members(1),
        PaxosDurable::default(),
        Rng::derive(1, 1),
    );
    for _ in 0..2_000 {
        alone.tick();
        let _ = alone.ready();
    }
    assert_eq!(alone.status().role, Role::Leader);
    assert_eq!(alone.lease_remaining_ticks(), Some(u64::MAX));
}

#[test]
fn out_of_range_ballots_and_slots_from_a_peer_are_dropped_unread() {
    let mut acceptor = node(2, 3, PaxosDurable::default());
    acceptor.sticky_until_tick = 0;
    let huge = Ballot {
        round: ROUND_MAX,
        priority: 0,
        node: NodeId(3),
    };
    let bad_priority = Ballot {
        priority: PRIORITY_MAX + 1,
        ..ballot(1, 3)
    };
    let garbage = [
        PaxosMessage::Accept {
            ballot: huge,
            first_slot: 1,
            values: vec![],
            commit: 0,
            sent_tick: 0,
        },
        PaxosMessage::Prepare {
            ballot: bad_priority,
            from_slot: 1,
        },
        PaxosMessage::Prepare {
            ballot: ballot(1, 3),
            from_slot: 0,
        },
        PaxosMessage::Reject {
            ballot: ballot(1, 3),
            promised: huge,
        },
        PaxosMessage::Accept {
            ballot: ballot(1, 3),
            first_slot: LOG_SLOTS_MAX,
            values: vec![1, 2],
            commit: 0,
            sent_tick: 0,
        },
    ];
    for message in garbage {
        acceptor.step(NodeId(3), message.clone());
        assert!(!acceptor.has_ready(), "{message:?} was acted on");
        assert_eq!(acceptor.promised, Ballot::ZERO);
    }
    let _ = acceptor.status(); // would panic on an out-of-range promise
                               // A promise carrying a slot beyond the log's bound is dropped, so it
                               // cannot veto (or overflow) the proposer's election.
    let mut proposer = node(1, 3, PaxosDurable::default());
    let prepare = tick_until_ready(&mut proposer, 400);
    let asked = proposer.promised;
    let entry = Entry {
        ballot: ballot(0, 2),
        value: 7,
    };
    for slot in [u64::MAX, LOG_SLOTS_MAX + 1] {
        let poison = PaxosMessage::Promise {
            ballot: asked,
            entries: vec![(slot, entry)],
        };
        proposer.step(NodeId(2), poison);
        assert_eq!(
            proposer.status().role,
            Role::Candidate,
            "still collecting promises"
        );
    }
    assert_eq!(prepare.messages.len(), 2);
}
