//! The member's ordering rules, checked on the driver alone: a small
//! in-memory cluster carries out its steps as the server does (disk images
//! instead of a log, queues instead of connections) and records when each
//! client was answered relative to the fsyncs.

use bellwether_core::raft::{RaftConfig, RaftDurable, RaftNode};
use bellwether_core::{LogIndex, NodeId, Protocol, Rng};
use bellwether_member::{
    Answer, ClientError, DurableWatermark, Effect, Forward, Member, MemberParts, Request, Roster,
    StateMachine, Step,
};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// A state machine whose answer to a command is the index it was applied
/// at and the command itself.
#[derive(Default)]
struct Echo {
    applied: Vec<u64>,
}

impl StateMachine for Echo {
    fn apply(&mut self, index: LogIndex, command: &[u8]) -> Vec<u8> {
        self.applied.push(index.0);
        let mut answer = index.0.to_le_bytes().to_vec();
        answer.extend_from_slice(command);
        answer
    }
    fn snapshot(&self) -> Vec<u8> {
        Vec::new()
    }
    fn restore(&mut self, _applied: LogIndex, _data: &[u8]) {}
}

/// A message between two members.
enum Wire {
    Raft(bellwether_core::raft::RaftMessage),
    Forward(Forward),
}

/// Members, their disks, the messages in flight and the answers given.
struct Cluster {
    members: Vec<Member<u32, u32>>,
    disks: Vec<RaftDurable>,
    in_flight: VecDeque<(NodeId, NodeId, Wire)>,
    /// (member, answer, fsyncs that member had finished when it answered).
    answers: Vec<(usize, Answer<u32, u32>, u64)>,
    fsyncs: Vec<u64>,
    now: Duration,
    /// A member that is down: not ticked, and what is sent to or by it is
    /// lost.
    down: Option<usize>,
    /// Calls that reached a member's runtime: (member, caller, request,
    /// body).
    calls: Vec<(usize, NodeId, u64, Vec<u8>)>,
}

impl Cluster {
    fn new(size: u64) -> Cluster {
        let ids: Vec<NodeId> = (1..=size).map(NodeId).collect();
        let config = RaftConfig {
            heartbeat_ticks: 2,
            election_ticks_min: 10,
            election_jitter_ticks: 10,
            ..RaftConfig::default()
        };
        let members = ids
            .iter()
            .map(|&id| {
                let raft = RaftNode::new(&config, id, &ids, RaftDurable::default(), Rng::new(id.0));
                Member::new(MemberParts {
                    id,
                    raft,
                    machine: Box::new(Echo::default()),
                    roster: Roster::new(&BTreeMap::new(), &BTreeMap::new(), &BTreeMap::new()),
                    durable: DurableWatermark::default(),
                    snapshot: (LogIndex(0), 0),
                    first_request: 1_000 * id.0,
                    now: Duration::ZERO,
                    snapshot_schedule: Default::default(),
                })
            })
            .collect();
        Cluster {
            members,
            disks: vec![RaftDurable::default(); size as usize],
            in_flight: VecDeque::new(),
            answers: Vec::new(),
            fsyncs: vec![0; size as usize],
            now: Duration::ZERO,
            down: None,
            calls: Vec::new(),
        }
    }

    /// Carries out member `i`'s effects.
    fn effects(&mut self, i: usize) {
        while let Some(effect) = self.members[i].next_effect() {
            match effect {
                Effect::Answer(answer) => self.answers.push((i, answer, self.fsyncs[i])),
                Effect::Forward(to, forward) => {
                    let from = NodeId(i as u64 + 1);
                    self.in_flight.push_back((from, to, Wire::Forward(forward)));
                }
                Effect::Call {
                    from,
                    request,
                    body,
                } => self.calls.push((i, from, request, body)),
                _ => {}
            }
        }
    }

    fn send(
        &mut self,
        i: usize,
        messages: Vec<bellwether_core::Envelope<bellwether_core::raft::RaftMessage>>,
    ) {
        let from = NodeId(i as u64 + 1);
        for envelope in messages {
            self.in_flight
                .push_back((from, envelope.to, Wire::Raft(envelope.message)));
        }
    }

    /// Carries out member `i`'s steps, as the server's shell does.
    fn batch(&mut self, i: usize) {
        self.members[i].begin_batch();
        loop {
            match self.members[i].next_step() {
                Step::Done | Step::Yield => break,
                Step::PollForAnswers => {}
                Step::AnswerThenSend(messages) => {
                    self.effects(i);
                    self.send(i, messages);
                }
                Step::Ready(plan) => {
                    let plan = *plan;
                    self.send(i, plan.early);
                    if let Some(planned) = plan.persist {
                        self.members[i].apply_all(plan.apply_before);
                        self.effects(i);
                        self.disks[i].apply(planned.persist);
                        self.fsyncs[i] += 1;
                        let durable = DurableWatermark::of(&self.disks[i]);
                        self.members[i].persisted(durable, planned.on_loop);
                    }
                    let late = self.members[i].checked(plan.late);
                    self.send(i, late);
                    self.members[i].apply_all(plan.apply_after);
                    self.members[i].finish_ready();
                    self.effects(i);
                }
            }
        }
        self.effects(i);
    }

    /// One round: every member ticks and carries out its batch, then every
    /// message in flight is delivered and carried out.
    fn round(&mut self) {
        self.now += Duration::from_millis(1);
        for i in 0..self.members.len() {
            if self.down == Some(i) {
                continue;
            }
            self.members[i].wake(self.now);
            self.members[i].tick();
            self.batch(i);
        }
        while let Some((from, to, wire)) = self.in_flight.pop_front() {
            let i = to.0 as usize - 1;
            if self
                .down
                .is_some_and(|d| d == i || d + 1 == from.0 as usize)
            {
                continue;
            }
            match wire {
                Wire::Raft(message) => self.members[i].step_raft(from, message),
                Wire::Forward(forward) => self.members[i].forwarded(from, forward),
            }
            self.effects(i);
            self.batch(i);
        }
    }

    fn leader(&self) -> Option<usize> {
        self.members.iter().position(|m| m.is_leader())
    }

    fn elect(&mut self) -> usize {
        for _ in 0..200 {
            self.round();
            if let Some(leader) = self.leader() {
                return leader;
            }
        }
        panic!("no leader after 200 rounds");
    }

    fn write(&mut self, at: usize, reply: u32, command: &[u8]) {
        let command = command.to_vec();
        self.request(at, Request::Propose { command, reply });
    }

    /// Hands `request` to member `at` and carries out what it does at once.
    fn request(&mut self, at: usize, request: Request<u32, u32>) {
        self.members[at].wake(self.now);
        self.members[at].request(request);
        self.effects(at);
        self.batch(at);
    }

    /// Hands member `at` a leader-only write and runs five rounds.
    fn write_here(&mut self, at: usize, reply: u32, command: &[u8]) {
        let command = command.to_vec();
        self.request(at, Request::ProposeHere { command, reply });
        for _ in 0..5 {
            self.round();
        }
    }

    fn answer_to(&self, reply: u32) -> Option<&(usize, Answer<u32, u32>, u64)> {
        self.answers.iter().find(|(_, answer, _)| match answer {
            Answer::Write(r, _) | Answer::Read(r, _) => *r == reply,
        })
    }
}

#[test]
fn a_lone_voters_write_is_answered_only_after_the_fsync_that_holds_it() {
    let mut cluster = Cluster::new(1);
    let leader = cluster.elect();
    let fsyncs_before = cluster.fsyncs[leader];
    cluster.write(leader, 7, b"x");
    let (_, answer, fsyncs_then) = cluster.answer_to(7).expect("answered in its batch");
    match answer {
        Answer::Write(_, Ok(bytes)) => assert_eq!(&bytes[8..], b"x"),
        other => panic!("unexpected answer {other:?}"),
    }
    assert!(
        *fsyncs_then > fsyncs_before,
        "answered after the fsync of its entry"
    );
}

#[test]
fn a_leaders_write_is_answered_once_a_majority_holds_it() {
    let mut cluster = Cluster::new(3);
    let leader = cluster.elect();
    cluster.round();
    cluster.write(leader, 7, b"x");
    assert!(cluster.answer_to(7).is_none(), "no quorum has it yet");
    cluster.round();
    let (member, answer, _) = cluster.answer_to(7).expect("answered");
    assert_eq!(*member, leader);
    assert!(matches!(answer, Answer::Write(7, Ok(_))));
    let holding = cluster
        .disks
        .iter()
        .filter(|disk| {
            disk.entries
                .iter()
                .any(|e| e.payload == bellwether_core::raft::Payload::Command(b"x".to_vec()))
        })
        .count();
    assert!(holding >= 2, "a majority's disks hold the entry: {holding}");
}

#[test]
fn a_followers_write_is_forwarded_and_answered_from_its_own_apply() {
    let mut cluster = Cluster::new(3);
    let leader = cluster.elect();
    cluster.round();
    let follower = (leader + 1) % 3;
    cluster.write(follower, 9, b"y");
    for _ in 0..5 {
        cluster.round();
    }
    let (member, answer, _) = cluster.answer_to(9).expect("answered");
    assert_eq!(*member, follower, "the follower answers its own client");
    let Answer::Write(_, Ok(bytes)) = answer else {
        panic!("unexpected answer {answer:?}");
    };
    assert_eq!(&bytes[8..], b"y", "the command, without the envelope");
    let index = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    assert!(
        cluster.members[follower].raft().commit_index() >= LogIndex(index),
        "answered from a committed entry"
    );
}

#[test]
fn a_write_to_a_member_without_a_leader_is_refused_with_no_leader_named() {
    let mut cluster = Cluster::new(3);
    cluster.write(0, 5, b"z");
    let (_, answer, _) = cluster.answer_to(5).expect("answered at once");
    assert_eq!(
        *answer,
        Answer::Write(5, Err(ClientError::not_leader(None)))
    );
}

#[test]
fn a_followers_leader_only_write_is_refused_and_never_forwarded() {
    let mut cluster = Cluster::new(3);
    let leader = cluster.elect();
    cluster.round();
    let follower = (leader + 1) % 3;
    cluster.write_here(follower, 11, b"revoke");
    let (member, answer, _) = cluster.answer_to(11).expect("answered");
    assert_eq!(*member, follower);
    assert!(
        matches!(answer, Answer::Write(11, Err(_))),
        "refused: {answer:?}"
    );
    let anywhere = cluster.disks.iter().any(|disk| {
        disk.entries
            .iter()
            .any(|e| e.payload == bellwether_core::raft::Payload::Command(b"revoke".to_vec()))
    });
    assert!(!anywhere, "the write reached a log");
    // The leader itself takes it.
    cluster.write_here(leader, 12, b"revoke");
    let (_, answer, _) = cluster.answer_to(12).expect("answered");
    assert!(matches!(answer, Answer::Write(12, Ok(_))), "{answer:?}");
}

/// Takes the forwarded write in flight from `from`, leaving the rest.
fn take_forwarded_write(cluster: &mut Cluster, from: usize) -> (NodeId, Forward) {
    let at = cluster
        .in_flight
        .iter()
        .position(|(f, _, wire)| {
            f.0 as usize == from + 1 && matches!(wire, Wire::Forward(Forward::Propose { .. }))
        })
        .expect("a forwarded write in flight");
    let (_, to, wire) = cluster.in_flight.remove(at).expect("listed");
    let Wire::Forward(forward) = wire else {
        unreachable!("picked a forward")
    };
    (to, forward)
}

#[test]
fn a_forwarded_write_named_for_another_term_is_refused_and_never_logged() {
    let mut cluster = Cluster::new(3);
    let leader = cluster.elect();
    cluster.round();
    let follower = (leader + 1) % 3;
    cluster.write(follower, 21, b"late");
    let (to, forward) = take_forwarded_write(&mut cluster, follower);
    let Forward::Propose {
        request,
        term,
        command,
    } = forward
    else {
        unreachable!("a write")
    };
    assert_eq!(to.0 as usize, leader + 1, "sent to the leader");
    assert_eq!(term, cluster.members[leader].raft().status().term);
    // As if it had been sent in an earlier term and arrived only now.
    let earlier = bellwether_core::Term(term.0 - 1);
    let late = Forward::Propose {
        request,
        term: earlier,
        command,
    };
    cluster
        .in_flight
        .push_back((NodeId(follower as u64 + 1), to, Wire::Forward(late)));
    for _ in 0..5 {
        cluster.round();
    }
    let (_, answer, _) = cluster.answer_to(21).expect("answered");
    assert!(
        matches!(
            answer,
            Answer::Write(21, Err(ClientError::NotLeader { .. }))
        ),
        "refused: {answer:?}"
    );
    let logged = cluster.disks.iter().any(|disk| {
        disk.entries.iter().any(|e| match &e.payload {
            bellwether_core::raft::Payload::Command(c) => c.ends_with(b"late"),
            _ => false,
        })
    });
    assert!(!logged, "a write for another term reached a log");
}

#[test]
fn a_followers_write_lost_with_its_leader_is_answered_not_applied_once_the_next_term_applies() {
    let mut cluster = Cluster::new(3);
    let leader = cluster.elect();
    cluster.round();
    let follower = (leader + 1) % 3;
    cluster.write(follower, 31, b"lost");
    // The leader dies before the write reaches it.
    let _ = take_forwarded_write(&mut cluster, follower);
    cluster.down = Some(leader);
    let old_term = cluster.members[follower].raft().status().term;
    for _ in 0..300 {
        cluster.round();
        if cluster.answer_to(31).is_some() {
            break;
        }
    }
    let (_, answer, _) = cluster
        .answer_to(31)
        .expect("answered once a new leader committed");
    assert_eq!(*answer, Answer::Write(31, Err(ClientError::NotApplied)));
    let status = cluster.members[follower].raft().status();
    assert!(status.term > old_term, "a later term");
    assert!(
        cluster.members[follower].raft().applied_index()
            >= cluster.members[follower].raft().commit_index(),
        "answered from what it applied"
    );
}

#[test]
fn a_call_reaches_the_other_members_runtime_and_its_answer_or_refusal_comes_back() {
    let mut cluster = Cluster::new(3);
    let leader = cluster.elect();
    let follower = (leader + 1) % 3;
    let leader_id = NodeId(leader as u64 + 1);
    let follower_id = NodeId(follower as u64 + 1);
    let call = |reply, body: &[u8]| Request::Call {
        to: leader_id,
        body: body.to_vec(),
        reply,
    };
    cluster.request(follower, call(7, b"renew"));
    cluster.request(follower, call(8, b"promote"));
    cluster.round();
    assert_eq!(cluster.calls.len(), 2, "both reached the leader's runtime");
    for (at, from, _, _) in &cluster.calls {
        assert_eq!((*at, *from), (leader, follower_id));
    }
    assert!(
        cluster.answer_to(7).is_none(),
        "no answer before the runtime's"
    );
    let (_, _, renew, body) = cluster.calls[0].clone();
    assert_eq!(body, b"renew");
    let (_, _, promote, _) = cluster.calls[1].clone();
    cluster.members[leader].answer_call(follower_id, renew, b"ttl 10".to_vec());
    cluster.members[leader].refuse_call(follower_id, promote);
    cluster.effects(leader);
    cluster.round();
    assert_eq!(
        cluster.answer_to(7).map(|(at, answer, _)| (*at, answer)),
        Some((follower, &Answer::Write(7, Ok(b"ttl 10".to_vec()))))
    );
    assert_eq!(
        cluster.answer_to(8).map(|(_, answer, _)| answer),
        Some(&Answer::Write(
            8,
            Err(ClientError::Unreachable { member: leader_id })
        ))
    );
    // A call whose member's connection breaks is answered at once; one to
    // the member itself never leaves.
    cluster.request(follower, call(9, b"renew"));
    cluster.members[follower].peer_lost(leader_id);
    cluster.effects(follower);
    assert_eq!(
        cluster.answer_to(9).map(|(_, answer, _)| answer),
        Some(&Answer::Write(
            9,
            Err(ClientError::Unreachable { member: leader_id })
        ))
    );
    cluster.request(leader, call(10, b"renew"));
    assert_eq!(
        cluster.answer_to(10).map(|(_, answer, _)| answer),
        Some(&Answer::Write(
            10,
            Err(ClientError::Unreachable { member: leader_id })
        ))
    );
}
