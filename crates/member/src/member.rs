//! [`Member`]: the Raft core and the decisions around it, driven by events.
//!
//! The runtime calls [`Member::wake`] with its clock once per wake-up, then
//! feeds what woke it (a tick, a peer's message, a client's request), then
//! carries out the member's [`crate::Step`]s until it has none left
//! (`ready_plan.rs`), and after every call takes the [`Effect`]s queued.
//! Client requests and forwarding are in `requests.rs`, applying committed
//! output in `apply.rs`.

use crate::client_error::ClientError;
use crate::durable_watermark::DurableWatermark;
use crate::effect::{Answer, Effect};
use crate::forward::Forward;
use crate::forwarding::Forwarding;
use crate::lone_writes::LoneWrites;
use crate::ready_plan::Batch;
use crate::roster::Roster;
use crate::snapshots::{SnapshotSchedule, Snapshots};
use crate::state_machine::StateMachine;
use bellwether_core::raft::SnapshotData;
use bellwether_core::raft::{MembershipChange, RaftMessage, RaftNode, TransferError};
use bellwether_core::Protocol;
use bellwether_core::{LogIndex, NodeId, Role, Term};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// What a member is built from: its recovered core, its restored state
/// machine and where its members are.
pub struct MemberParts {
    /// This member.
    pub id: NodeId,
    /// The Raft core, recovered from the log.
    pub raft: RaftNode,
    /// The state machine, restored from the last snapshot.
    pub machine: Box<dyn StateMachine>,
    /// The members' addresses (the directory is read from `machine`).
    pub roster: Roster,
    /// What the log held when the member started (all of it is synced).
    pub durable: DurableWatermark,
    /// The index and size of the snapshot `machine` was restored from.
    pub snapshot: (LogIndex, u64),
    /// The first forwarded request's id: the wall clock at boot, in
    /// microseconds (see [`crate::forwarding`]).
    pub first_request: u64,
    /// The member's clock now.
    pub now: Duration,
    /// When it snapshots (the server runs the default).
    pub snapshot_schedule: SnapshotSchedule,
}

/// One member's state and decisions (see the crate doc). `W` and `R` are
/// where a client's write and read answers go ([`Answer`]).
pub struct Member<W, R> {
    pub(crate) id: NodeId,
    pub(crate) raft: RaftNode,
    pub(crate) machine: Box<dyn StateMachine>,
    pub(crate) roster: Roster,
    /// Proposals waiting for their entry: index → (term proposed in, when,
    /// reply). An entry of another term at that index means it was replaced.
    pub(crate) proposals: BTreeMap<LogIndex, (Term, Duration, W)>,
    /// Reads waiting for ReadIndex confirmation, by read id.
    pub(crate) reads: BTreeMap<u64, R>,
    /// Confirmed reads waiting for the state machine to reach their index.
    pub(crate) confirmed_reads: Vec<(LogIndex, R)>,
    /// Next read id.
    pub(crate) next_read_id: u64,
    /// Writes and reads forwarded to the leader, or served for followers.
    pub(crate) forwarding: Forwarding<W, R>,
    /// Whether this member's appends come one at a time.
    pub(crate) lone_writes: LoneWrites,
    /// What the disk holds as of the last finished fsync; every Raft
    /// message is checked against it before it leaves.
    pub(crate) durable: DurableWatermark,
    /// The snapshot schedule.
    pub(crate) snapshots: Snapshots,
    /// What the current wake-up's batch has done (see `ready_plan.rs`).
    pub(crate) batch: Batch,
    /// The member's clock at this wake-up.
    pub(crate) now: Duration,
    /// What the runtime is to do, in order.
    pub(crate) effects: VecDeque<Effect<W, R>>,
}

impl<W, R> Member<W, R> {
    /// A member from its recovered parts.
    pub fn new(parts: MemberParts) -> Self {
        let MemberParts {
            id,
            mut raft,
            machine,
            mut roster,
            durable,
            snapshot,
            first_request,
            now,
            snapshot_schedule,
        } = parts;
        assert_eq!(raft.status().id, id, "the core is this member's");
        raft.restore_in_background();
        roster.set_directory(machine.directory(), machine.directory_version());
        Member {
            id,
            raft,
            machine,
            roster,
            proposals: BTreeMap::new(),
            reads: BTreeMap::new(),
            confirmed_reads: Vec::new(),
            next_read_id: 1,
            forwarding: Forwarding::new(id, first_request),
            lone_writes: LoneWrites::default(),
            durable,
            snapshots: Snapshots::new(snapshot.0, snapshot.1, now, snapshot_schedule),
            batch: Batch::default(),
            now,
            effects: VecDeque::new(),
        }
    }

    /// The Raft core, to observe.
    pub fn raft(&self) -> &RaftNode {
        &self.raft
    }

    /// Breaks this member on purpose, for the simulator's controls: its
    /// clients' writes forwarded to a leader that is then deposed are
    /// answered "not applied" as soon as another leader is known, before
    /// the log can tell (see [`crate::forwarding`]).
    #[cfg(feature = "fault-injection")]
    pub fn answer_not_applied_on_leader_change_for_fault_injection(&mut self) {
        self.forwarding.not_applied_on_leader_change = true;
    }

    /// The Raft core, to break on purpose (the simulator's own tests).
    #[cfg(feature = "fault-injection")]
    pub fn raft_for_fault_injection(&mut self) -> &mut RaftNode {
        &mut self.raft
    }

    /// The state machine, to observe.
    pub fn machine(&self) -> &dyn StateMachine {
        self.machine.as_ref()
    }

    /// The members and their addresses.
    pub fn roster(&self) -> &Roster {
        &self.roster
    }

    /// Reads the member directory afresh if the state machine changed it.
    pub fn refresh_roster(&mut self) {
        let version = self.machine.directory_version();
        if version != self.roster.directory_version {
            self.roster.set_directory(self.machine.directory(), version);
        }
    }

    /// What the disk holds as of the last finished fsync.
    pub fn durable(&self) -> DurableWatermark {
        self.durable
    }

    /// True while this member leads.
    pub fn is_leader(&self) -> bool {
        self.raft.status().role == Role::Leader
    }

    /// The next effect to carry out, in the order they were queued.
    ///
    /// A member answers with its own word only: a "not the leader" answer
    /// never names the member that gives it. One can arise when a request
    /// forwarded to the old leader is refused or expires just as this
    /// member takes over; naming itself would send the client round in a
    /// loop, so it names no leader and the client retries.
    pub fn next_effect(&mut self) -> Option<Effect<W, R>> {
        let me = self.id;
        let effect = self.effects.pop_front()?;
        let own_word = |error: &mut ClientError| {
            if let ClientError::NotLeader { leader } = error {
                if *leader == Some(me) {
                    *leader = None;
                }
            }
        };
        Some(match effect {
            Effect::Answer(Answer::Write(reply, Err(mut error))) => {
                own_word(&mut error);
                Effect::Answer(Answer::Write(reply, Err(error)))
            }
            Effect::Answer(Answer::Read(reply, Err(mut error))) => {
                own_word(&mut error);
                Effect::Answer(Answer::Read(reply, Err(error)))
            }
            other => other,
        })
    }

    /// A new wake-up at `now` on the member's clock.
    pub fn wake(&mut self, now: Duration) {
        self.now = now;
    }

    /// A tick of the clock: the core's timers, forwarded requests that
    /// can no longer be answered, the leader's membership step, and a
    /// snapshot encoded while no entry was applied.
    pub fn tick(&mut self) {
        self.raft.tick();
        let leader = self.raft.status().leader;
        let mut answers = Vec::new();
        self.forwarding.expire(leader, self.now, &mut answers);
        self.effects.extend(answers.into_iter().map(Effect::Answer));
        self.step_membership();
        self.maybe_snapshot();
    }

    /// Forgets the confirmed reads whose callers gave up: a confirmed read
    /// waits for this member to apply its index, which a cut-off follower
    /// may never do, so they must not pile up.
    pub fn forget_abandoned_reads(&mut self, abandoned: impl Fn(&R) -> bool) {
        self.confirmed_reads.retain(|(_, reply)| !abandoned(reply));
    }

    /// A Raft message from member `from`.
    pub fn step_raft(&mut self, from: NodeId, message: RaftMessage) {
        if let RaftMessage::AppendEntries {
            prev_log_index,
            entries,
            leader_commit,
            ..
        } = &message
        {
            self.lone_writes
                .note_append(entries.len(), *prev_log_index, *leader_commit);
        }
        self.raft.step(from, message)
    }

    /// The connection to member `peer` was lost.
    pub fn peer_lost(&mut self, peer: NodeId) {
        self.forwarding.forget_origin(peer);
        let mut answers = Vec::new();
        self.forwarding.peer_lost(peer, &mut answers);
        self.effects.extend(answers.into_iter().map(Effect::Answer));
        self.raft.peer_unreachable(peer)
    }

    /// Shutting down: a leader hands leadership to the most up-to-date
    /// follower. Returns the target, or why there is none.
    pub fn hand_over(&mut self) -> Option<Result<NodeId, TransferError>> {
        self.is_leader()
            .then(|| self.raft.transfer_leadership(None))
    }

    /// A forwarding message to `to` could not be queued: a write or read of
    /// this member's client is answered "not the leader" naming `to` (the
    /// runtime hands it to the member again), a call "unreachable". An
    /// answer to another member is dropped; its request times out there.
    pub fn forward_unsent(&mut self, to: NodeId, forward: Forward) {
        let not_leader = crate::ClientError::not_leader(Some(to));
        let answer = match forward {
            Forward::Propose { request, .. } => self
                .forwarding
                .unsent_write(request)
                .map(|reply| Answer::Write(reply, Err(not_leader))),
            Forward::ReadIndex { request } => self
                .forwarding
                .unsent_read(request)
                .map(|reply| Answer::Read(reply, Err(not_leader))),
            Forward::Call { request, .. } => {
                self.forwarding.unsent_call(request).map(|(reply, member)| {
                    Answer::Write(reply, Err(ClientError::Unreachable { member }))
                })
            }
            _ => None,
        };
        self.effects.extend(answer.map(Effect::Answer));
    }

    /// A leader steps Raft's configuration toward the member directory,
    /// one change at a time (see [`Roster::next_change`]).
    fn step_membership(&mut self) {
        if !self.is_leader() {
            return;
        }
        self.refresh_roster();
        let Some(change) = self.roster.next_change(&self.raft) else {
            return;
        };
        // A leader asked to remove itself hands leadership over first, so
        // the cluster does not wait out an election timeout after the
        // removal commits; the next leader removes it. With no voter to
        // hand over to, it removes itself.
        if change == MembershipChange::Remove(self.id) {
            if self.raft.transfer().is_some() {
                return;
            }
            match self.raft.transfer_leadership(None) {
                Ok(target) => {
                    tracing::info!(
                        target = target.0,
                        "removed from the cluster: handing leadership over first"
                    );
                    return;
                }
                Err(error) => tracing::info!(%error, "removing itself without a handover"),
            }
        }
        match self.raft.propose_membership(change) {
            Ok(index) => tracing::info!(?change, index = index.0, "membership change proposed"),
            Err(error) => tracing::debug!(?change, %error, "membership change waits"),
        }
    }

    /// Takes a snapshot when one is due, and compacts the log with the one
    /// held once the followers have what it covers (see `snapshots.rs`).
    pub(crate) fn maybe_snapshot(&mut self) {
        if self.snapshots.busy() || self.raft.pending_restore().is_some() {
            return;
        }
        let applied = self.raft.applied_index();
        let Some((index, _)) = &self.snapshots.held else {
            if self.snapshots.due(applied, self.now) {
                self.snapshots.start(applied, self.now);
                let job = self.machine.snapshot_later();
                self.effects.push_back(Effect::EncodeSnapshot {
                    index: applied,
                    job,
                });
            }
            return;
        };
        let index = *index;
        let waited = applied.0 - index.0;
        if !self.followers_hold(index) && waited < self.snapshots.schedule.hold_entries_max {
            return;
        }
        let (index, data) = self.snapshots.held.take().expect("held above");
        let bytes = data.len();
        match self.raft.compact_unpersisted(index, data) {
            Ok(snapshot) => {
                tracing::debug!(index = index.0, bytes, waited, "snapshot taken");
                self.snapshots.index = index;
                self.snapshots.bytes = bytes;
                self.snapshots.writing = Some(snapshot.meta.clone());
                self.effects.push_back(Effect::WriteSnapshot(snapshot));
            }
            Err(error) => {
                tracing::debug!(index = index.0, %error, "snapshot dropped");
                self.effects.push_back(Effect::SnapshotDropped { index });
            }
        }
    }

    /// The snapshot asked for with [`Effect::EncodeSnapshot`] is encoded.
    /// A snapshot from the leader restored meanwhile makes it useless:
    /// compacting then fails harmlessly, as for any snapshot at or below
    /// the log's.
    pub fn snapshot_encoded(&mut self, data: SnapshotData) {
        self.snapshots.encoded(data);
    }

    /// The snapshot from the leader at `index`, asked for with
    /// [`Effect::RestoreSnapshot`], is decoded: the state machine takes it,
    /// and committed entries after it are applied again. One superseded
    /// by a later snapshot from the leader is dropped.
    pub fn snapshot_decoded(&mut self, index: LogIndex, decoded: crate::DecodedSnapshot) {
        if self.raft.pending_restore().map(|p| p.index) != Some(index) {
            return;
        }
        self.machine.restore_decoded(index, decoded);
        self.raft.snapshot_restored(index);
        self.refresh_roster();
        self.release_confirmed_reads();
    }

    /// The snapshot asked for with [`Effect::WriteSnapshot`] is on disk:
    /// the log records it at its next persist.
    pub fn snapshot_written(&mut self) {
        self.snapshots.written();
    }

    /// The latest snapshot, at `index`, is in a synced file the runtime
    /// reads as `stored`: the core drops its copy in memory (see
    /// `bellwether_core::raft::SnapshotData`).
    pub fn snapshot_stored(
        &mut self,
        index: LogIndex,
        stored: std::sync::Arc<dyn bellwether_core::raft::StoredSnapshot>,
    ) {
        self.raft.snapshot_stored(index, stored);
    }

    /// True unless this member leads and some follower lacks entries up to
    /// `index`.
    fn followers_hold(&self, index: LogIndex) -> bool {
        if !self.is_leader() {
            return true;
        }
        self.raft
            .cluster()
            .members()
            .filter(|id| *id != self.id)
            .all(|id| {
                self.raft
                    .progress(id)
                    .is_none_or(|p| p.match_index >= index)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state_machine::NullMachine;
    use bellwether_core::raft::{RaftConfig, RaftDurable};
    use bellwether_core::Rng;

    fn member(id: u64) -> Member<u32, u32> {
        let members = [NodeId(1), NodeId(2), NodeId(3)];
        let raft = RaftNode::new(
            &RaftConfig::default(),
            NodeId(id),
            &members,
            RaftDurable::default(),
            Rng::new(id),
        );
        let empty = BTreeMap::new();
        Member::new(MemberParts {
            id: NodeId(id),
            raft,
            machine: Box::new(NullMachine),
            roster: Roster::new(&empty, &empty, &empty),
            durable: DurableWatermark::default(),
            snapshot: (LogIndex(0), 0),
            first_request: 1,
            now: Duration::ZERO,
            snapshot_schedule: Default::default(),
        })
    }

    /// A follower holding its own encoded snapshot at 5 is sent the
    /// leader's at 10: it restores that one off the loop, applies nothing
    /// meanwhile, and then drops its own, telling the runtime to delete
    /// what it streamed it into.
    #[test]
    fn a_snapshot_from_the_leader_is_restored_by_a_job_and_supersedes_the_own() {
        use bellwether_core::raft::{ClusterConfig, RaftMessage, SnapshotMeta};
        use bellwether_core::Term;
        let mut member = member(2);
        member.snapshots.held = Some((LogIndex(5), vec![5].into()));
        let meta = SnapshotMeta {
            last_index: LogIndex(10),
            last_term: Term(1),
            config: ClusterConfig::voters([NodeId(1), NodeId(2), NodeId(3)]),
        };
        let chunk = RaftMessage::InstallSnapshot {
            term: Term(1),
            meta,
            offset: 0,
            total_bytes: 0,
            data: Vec::new(),
        };
        member.raft.step(NodeId(1), chunk);
        let ready = member.raft.ready();
        member.apply_all(ready.output);
        let job = match member.next_effect() {
            Some(Effect::RestoreSnapshot { index, job }) => {
                assert_eq!(index, LogIndex(10));
                job
            }
            other => panic!("a restore job first, not {other:?}"),
        };
        assert_eq!(member.raft.applied_index(), LogIndex(0), "not restored yet");
        member.maybe_snapshot();
        assert!(
            member.next_effect().is_none(),
            "no snapshot while restoring"
        );
        member.snapshot_decoded(LogIndex(10), job());
        assert_eq!(member.raft.applied_index(), LogIndex(10));
        member.maybe_snapshot();
        match member.next_effect() {
            Some(Effect::SnapshotDropped { index }) => assert_eq!(index, LogIndex(5)),
            other => panic!("the own snapshot dropped, not {other:?}"),
        }
    }

    #[test]
    fn a_not_the_leader_answer_never_names_the_member_that_gives_it() {
        let mut member = member(2);
        for leader in [Some(NodeId(2)), Some(NodeId(3)), None] {
            member.effects.push_back(Effect::Answer(Answer::Read(
                7,
                Err(ClientError::not_leader(leader)),
            )));
            member.effects.push_back(Effect::Answer(Answer::Write(
                8,
                Err(ClientError::not_leader(leader)),
            )));
            let expected = leader.filter(|l| *l != NodeId(2));
            for _ in 0..2 {
                let named = match member.next_effect() {
                    Some(Effect::Answer(Answer::Read(
                        _,
                        Err(ClientError::NotLeader { leader }),
                    )))
                    | Some(Effect::Answer(Answer::Write(
                        _,
                        Err(ClientError::NotLeader { leader }),
                    ))) => leader,
                    _ => panic!("a not-the-leader answer"),
                };
                assert_eq!(named, expected, "hint {leader:?}");
            }
        }
    }
}
