//! [`SimMember`]: the member driver of `bellwether-member` as a simulated
//! node. It carries out the driver's steps the way the server's event loop
//! does (`crates/server/src/node/steps.rs`), on the simulator's disk and
//! network instead of a log file and TCP:
//!
//! - a batch's early messages and the answers of what may be applied
//!   before its fsync leave at once;
//! - its persist goes to the simulated disk, and until that fsync ends the
//!   member takes no input: messages, ticks and client requests that arrive
//!   meanwhile wait, as they wait in the server's queues while its loop
//!   waits on the disk;
//! - once the fsync ends, the member is told what the disk holds, sends the
//!   messages that waited for it, applies the rest and answers, and steps
//!   what arrived meanwhile.
//!
//! Clients are answered through [`SimMember::take_answers`], not through
//! the disk: a real member answers a client the moment it decides to, so a
//! runtime that answered too early must be able to show it here
//! ([`Runtime::AnswersBeforeFsync`]).

use super::etcd_entries::{outcome, read, Outcome, SharedStore, Write};
use super::lessor::{LessorMode, SimLessor};
use super::message::MemberMessage;
use super::tagged_machine::{untag, LeaseEvents, TaggedMachine};
use crate::linearizability::{Key, Response};
use bellwether_core::raft::{
    RaftConfig, RaftDurable, RaftMessage, RaftNode, RaftOutput, RaftPersist, Snapshot,
};
use bellwether_core::{Envelope, LogIndex, NodeId, Protocol, Ready, Rng, Role, Status, Term};
use bellwether_etcd::{Leadership, Renewal};
use bellwether_member::{
    Answer, ClientError, DurableWatermark, Effect, Member, MemberParts, Request, Roster, Runtime,
    Step,
};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Who asked: a client's attempt at an operation, and the key it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpRef {
    /// The client.
    pub client: u64,
    /// Its attempt.
    pub attempt: u32,
    /// The key a read reads (a write's is in its command).
    pub key: Key,
    /// A keep-alive: the lease to renew once the read barrier passes.
    pub renew: Option<i64>,
    /// A write: which request, to read its answer.
    pub write: Option<Write>,
    /// A write: the tag of its entry, which its answer must carry.
    pub entry: u64,
}

impl OpRef {
    /// The operation's id: its client and attempt.
    pub fn op_id(&self) -> u64 {
        (self.client << 32) | u64::from(self.attempt)
    }

    /// Whether this is a lease clock's expiry revoke.
    pub fn is_expiry(&self) -> bool {
        self.client >= super::lessor::LESSOR_CLIENT_BASE
    }
}

/// What a client is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientAnswer {
    /// The answer to `op`.
    Answered(OpRef, Result<Response, ClientError>),
    /// A leased put's lease is granted: its put may go.
    Granted(OpRef),
    /// The state machine refused `op`'s write: nothing changed.
    Refused(OpRef, bellwether_etcd::Refusal),
    /// A write was answered from the entry of another operation (whose
    /// tag is given): the runtime routed an answer wrongly.
    Misrouted(OpRef, u64),
    /// What a keep-alive found.
    KeepAlive(OpRef, Renewal),
}

/// Ticks a snapshot from the leader takes to decode.
const RESTORE_TICKS: u32 = 50;

/// A simulated member's settings.
#[derive(Clone, Debug)]
pub struct SimMemberConfig {
    /// The Raft core's.
    pub raft: RaftConfig,
    /// The simulated time of one tick.
    pub tick_us: u64,
    /// The runtime around the driver.
    pub runtime: Runtime,
    /// Members booted so far in this cluster: each incarnation starts its
    /// forwarded request ids above every earlier one's, as the server's
    /// start from the wall clock does.
    pub boots: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// How the lease clock proposes its expiry revokes.
    pub lessor: LessorMode,
    /// A state machine broken on purpose, for tests that the checks catch
    /// it; `None` runs it as production does.
    pub mutation: Option<bellwether_etcd::Mutation>,
    /// Read barriers that reached a leader holding a leadership lease, so
    /// served without a round (lease reads), over every member.
    pub reads_under_lease: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// When members snapshot: [`SIM_SNAPSHOT_SCHEDULE`] unless a test asks
    /// for another.
    pub snapshot_schedule: bellwether_member::SnapshotSchedule,
}

/// The simulator's snapshot schedule: the server's takes 1,000 entries or
/// more, which a run of a few simulated seconds rarely reaches, so a
/// follower that fell behind was never sent a snapshot. This one snapshots
/// every 200 entries (every 50 on a log that grew for 300 ms), and a
/// leader holds one back for a follower at most 100 entries behind.
pub const SIM_SNAPSHOT_SCHEDULE: bellwether_member::SnapshotSchedule =
    bellwether_member::SnapshotSchedule {
        every_entries_min: 200,
        slow_log_entries_min: 50,
        slow_log_after: Duration::from_millis(300),
        every_entries_max: 10_000,
        hold_entries_max: 100,
        idle_after: Duration::from_millis(500),
    };

/// An input that arrived while the member waited on its disk.
enum Held {
    Tick,
    Message(NodeId, MemberMessage),
    Lost(NodeId),
    Request(Request<OpRef, OpRef>),
}

/// What waits for the fsync of the persist handed out.
struct AfterFsync {
    late: bellwether_member::AfterPersist,
    apply_after: Vec<RaftOutput>,
    on_loop: bool,
    durable: DurableWatermark,
}

/// The member driver on a simulated host (see the module doc).
pub struct SimMember {
    member: Member<OpRef, OpRef>,
    /// See [`SimMemberConfig::reads_under_lease`].
    reads_under_lease: std::sync::Arc<std::sync::atomic::AtomicU64>,
    store: SharedStore,
    lessor: SimLessor,
    runtime: Runtime,
    tick: Duration,
    now: Duration,
    /// The disk as it will be once everything handed out is synced.
    written: RaftDurable,
    in_batch: bool,
    /// A persist to hand out with the next `ready`, and the messages that
    /// go with it.
    to_persist: Option<(RaftPersist, Vec<Envelope<MemberMessage>>)>,
    /// What waits for the fsync of the persist handed out.
    awaiting: Option<AfterFsync>,
    /// That fsync ended.
    synced: bool,
    /// This member's own snapshot, for the next persist to record.
    snapshot_to_record: Option<Snapshot>,
    /// Snapshots from the leader restored so far.
    restores: u64,
    /// A snapshot from the leader being decoded "on another thread": the
    /// job runs, and the member hears of it, after
    /// [`RESTORE_TICKS`] more ticks, so entries commit and reads arrive
    /// while the member waits for it, as in the server.
    restoring: Option<(LogIndex, bellwether_member::RestoreJob, u32)>,
    held: VecDeque<Held>,
    messages: Vec<Envelope<MemberMessage>>,
    answers: Vec<ClientAnswer>,
}

impl SimMember {
    /// A client's request. Waits, as in the server's queue, while the
    /// member waits on its disk.
    pub fn request(&mut self, request: Request<OpRef, OpRef>) {
        self.input(Held::Request(request));
    }

    /// The persist handed out is synced (the workload calls this from the
    /// disk's hook).
    pub fn persist_done(&mut self) {
        if self.awaiting.is_some() {
            self.synced = true;
        }
    }

    /// The answers given since the last call, in order.
    pub fn take_answers(&mut self) -> Vec<ClientAnswer> {
        std::mem::take(&mut self.answers)
    }

    /// Snapshots from the leader this incarnation restored.
    pub fn snapshots_restored(&self) -> u64 {
        self.restores
    }

    /// Breaks this member on purpose: committed entries are applied while
    /// a snapshot from the leader is being restored (see the core's hook).
    pub fn apply_while_restoring_for_fault_injection(&mut self) {
        self.member
            .raft_for_fault_injection()
            .apply_while_restoring_for_fault_injection();
    }

    /// Breaks this member on purpose: its clients' forwarded writes are
    /// answered "not applied" as soon as a new leader is known (see the
    /// member's hook).
    pub fn answer_not_applied_on_leader_change_for_fault_injection(&mut self) {
        self.member
            .answer_not_applied_on_leader_change_for_fault_injection();
    }

    /// The store, to read.
    pub fn store(&self) -> &SharedStore {
        &self.store
    }

    /// The expiry revokes the lease clock decided since the last call, for
    /// the workload to hand back through the event queue (see
    /// `lessor.rs`), and the client id of this incarnation's revokes.
    pub fn take_lessor_requests(&mut self) -> (u64, Vec<Request<OpRef, OpRef>>) {
        (self.lessor.client(), self.lessor.take_requests())
    }

    /// The client id of this incarnation's expiry revokes.
    pub fn lessor_client(&self) -> u64 {
        self.lessor.client()
    }

    /// The expiry revokes the lease clock handed out since the last call,
    /// with their operations.
    pub fn take_expiry_revokes(&mut self) -> Vec<(OpRef, crate::linearizability::Command)> {
        self.lessor.take_proposed()
    }

    /// The leases whose expiry revoke this member applied since the last
    /// call.
    pub fn take_expired(&mut self) -> Vec<i64> {
        self.lessor.take_expired()
    }

    /// The host's clock reads `wall`: the lease clock checks, if a check
    /// is due, on the member's status as it is now.
    pub fn lease_clock(&mut self, wall: Duration) {
        let leadership = self.leadership();
        self.lessor.on_clock(wall, leadership, &self.store);
    }

    /// What this member's status says of its leadership, for its lease
    /// clock (the server's lessor reads the same from its status).
    fn leadership(&self) -> Leadership {
        let raft = self.member.raft();
        let committed_in_term = raft.log().term(raft.commit_index()) == Some(raft.status().term);
        let caught_up = committed_in_term && raft.applied_index() >= raft.commit_index();
        Leadership::of(self.leading_term(), caught_up)
    }

    /// The term this member leads, by its own status.
    fn leading_term(&self) -> Option<u64> {
        let status = self.member.raft().status();
        (status.role == Role::Leader && status.leader == Some(status.id)).then_some(status.term.0)
    }

    fn waits_on_disk(&self) -> bool {
        self.awaiting.is_some()
    }

    fn carry_out(&mut self, input: Held) {
        self.member.wake(self.now);
        let read = matches!(
            input,
            Held::Request(Request::ReadBarrier { .. })
                | Held::Message(
                    _,
                    MemberMessage::Forward(bellwether_member::Forward::ReadIndex { .. })
                )
        );
        if read && self.member.raft().lease_remaining_ticks().is_some() {
            self.reads_under_lease
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        match input {
            Held::Tick => {
                self.restore_if_due();
                self.member.tick()
            }
            Held::Message(from, MemberMessage::Raft(message)) => {
                self.member.step_raft(from, message)
            }
            Held::Message(from, MemberMessage::Forward(forward)) => {
                self.member.forwarded(from, forward)
            }
            Held::Lost(peer) => self.member.peer_lost(peer),
            Held::Request(request) => self.member.request(request),
        }
        self.carry_effects();
    }

    fn input(&mut self, input: Held) {
        if self.waits_on_disk() {
            self.held.push_back(input);
        } else {
            self.carry_out(input);
        }
    }

    fn step_held(&mut self) {
        while let Some(input) = self.held.pop_front() {
            self.carry_out(input);
        }
    }

    fn step_held_peer_events(&mut self) {
        let mut later = VecDeque::new();
        while let Some(input) = self.held.pop_front() {
            match input {
                Held::Message(..) | Held::Lost(_) => self.carry_out(input),
                other => later.push_back(other),
            }
        }
        self.held = later;
    }

    fn queue_raft(&mut self, envelopes: Vec<Envelope<RaftMessage>>) {
        self.messages
            .extend(envelopes.into_iter().map(|envelope| Envelope {
                to: envelope.to,
                message: MemberMessage::Raft(envelope.message),
            }));
    }

    /// Carries out the driver's effects: answers go to the clients at once.
    fn carry_effects(&mut self) {
        while let Some(effect) = self.member.next_effect() {
            match effect {
                Effect::Answer(Answer::Write(op, Ok(bytes))) => {
                    self.answers.push(Self::client_answer(op, &bytes))
                }
                Effect::Answer(Answer::Write(op, Err(error))) => {
                    self.answers.push(ClientAnswer::Answered(op, Err(error)))
                }
                Effect::Answer(Answer::Read(op, result)) => match op.renew {
                    Some(lease) => {
                        let term = self.leading_term().filter(|_| result.is_ok());
                        let renewal = self.lessor.renew(term, lease, &self.store);
                        self.answers.push(ClientAnswer::KeepAlive(op, renewal));
                    }
                    None => {
                        let result = result.map(|()| Response::Get(read(&self.store, op.key)));
                        self.answers.push(ClientAnswer::Answered(op, result));
                    }
                },
                Effect::Forward(to, forward) => self.messages.push(Envelope {
                    to,
                    message: MemberMessage::Forward(forward),
                }),
                Effect::Call { .. } => {
                    unreachable!("the simulator's clients make no member calls")
                }
                Effect::ProposalApplied { .. } => {}
                Effect::EncodeSnapshot { job, .. } => {
                    let mut bytes = Vec::new();
                    job(&mut bytes).expect("encoding into memory does not fail");
                    self.member.snapshot_encoded(bytes.into());
                }
                Effect::SnapshotDropped { .. } => {}
                Effect::RestoreSnapshot { index, job } => {
                    self.restoring = Some((index, job, RESTORE_TICKS));
                }
                Effect::WriteSnapshot(snapshot) => {
                    self.snapshot_to_record = Some(snapshot);
                    self.member.snapshot_written();
                }
            }
        }
    }

    /// Finishes the snapshot being decoded once its ticks have passed.
    fn restore_if_due(&mut self) {
        let Some((_, _, ticks)) = &mut self.restoring else {
            return;
        };
        if *ticks > 0 {
            *ticks -= 1;
            return;
        }
        let (index, job, _) = self.restoring.take().expect("matched above");
        self.restores += 1;
        self.member.snapshot_decoded(index, job());
    }

    /// What a write's answer tells its client.
    fn client_answer(op: OpRef, bytes: &[u8]) -> ClientAnswer {
        let write = op.write.expect("a write's reply names its request");
        match untag(bytes) {
            Some((tag, answer)) if tag == op.entry => match outcome(write, answer) {
                Outcome::Done(response) => ClientAnswer::Answered(op, Ok(response)),
                Outcome::Granted => ClientAnswer::Granted(op),
                Outcome::Refused(refusal) => ClientAnswer::Refused(op, refusal),
            },
            Some((tag, _)) => ClientAnswer::Misrouted(op, tag),
            None => ClientAnswer::Misrouted(op, 0),
        }
    }

    /// Starts carrying out `plan`: early messages and the output that may
    /// be applied before the fsync now, the persist with the next `ready`.
    fn start_plan(&mut self, plan: bellwether_member::ReadyPlan) {
        self.queue_raft(plan.early);
        let Some(planned) = plan.persist else {
            let late = self.member.checked(plan.late);
            self.queue_raft(late);
            self.member.apply_all(plan.apply_after);
            self.member.finish_ready();
            return;
        };
        let mut persist = planned.persist;
        if let Some(snapshot) = self.snapshot_to_record.take() {
            // Recorded with this persist, as the server's log records a
            // snapshot written beside it.
            if persist.snapshot.is_none()
                && persist
                    .entries
                    .first()
                    .is_none_or(|e| e.index > snapshot.meta.last_index)
            {
                persist.snapshot = Some(snapshot);
            }
        }
        if self.runtime == Runtime::AppliesBeforeCommit {
            for entry in &persist.entries {
                self.member.apply(RaftOutput::Apply(entry.clone()));
            }
        }
        self.member.apply_all(plan.apply_before);
        self.carry_effects();
        RaftNode::apply_persist(&mut self.written, persist.clone());
        let durable = DurableWatermark::of(&self.written);
        if self.runtime == Runtime::AnswersBeforeFsync {
            // Broken: goes on as if the fsync had ended. Its messages still
            // wait for the disk (the simulated disk sends nothing early),
            // so only its answers come too soon.
            self.member.persisted(durable, planned.on_loop);
            let late = self.member.checked(plan.late);
            let before = self.messages.len();
            self.queue_raft(late);
            let late = self.messages.split_off(before);
            self.member.apply_all(plan.apply_after);
            self.member.finish_ready();
            self.to_persist = Some((persist, late));
            return;
        }
        self.to_persist = Some((persist, Vec::new()));
        self.awaiting = Some(AfterFsync {
            late: plan.late,
            apply_after: plan.apply_after,
            on_loop: planned.on_loop,
            durable,
        });
    }

    /// The fsync ended: what waited for it.
    fn finish_plan(&mut self) {
        let after = self.awaiting.take().expect("a persist was awaited");
        self.synced = false;
        self.member.persisted(after.durable, after.on_loop);
        let late = self.member.checked(after.late);
        self.queue_raft(late);
        self.member.apply_all(after.apply_after);
        if self.member.finish_ready() {
            // What peers sent during the fsync, as the server's loop drains
            // its peer events then; ticks and client requests wait for the
            // next wake-up.
            self.step_held_peer_events();
        }
    }
}

impl SimMember {
    /// Builds the member as the server's `recover_member` does: the state
    /// machine from the snapshot, Raft from the log, in repair when the
    /// audit of its disk found it short of its promises.
    pub fn start(
        config: &SimMemberConfig,
        id: NodeId,
        members: &[NodeId],
        durable: RaftDurable,
        repair: Option<bellwether_core::raft::Repair>,
        rng: Rng,
    ) -> Self {
        // The server starts forwarded request ids from the wall clock at
        // boot, so an incarnation's ids are above its predecessor's; here
        // from the count of boots.
        let boot = config
            .boots
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let first_request = (boot + 1) << 40;
        let lease_events = LeaseEvents::default();
        let mut machine = TaggedMachine::new(lease_events.clone(), config.mutation);
        let store = machine.store();
        let snapshot = durable.snapshot.as_ref().map_or((LogIndex(0), 0), |s| {
            bellwether_member::StateMachine::restore(
                &mut machine,
                s.meta.last_index,
                s.data.bytes(),
            );
            (s.meta.last_index, s.data.len())
        });
        let written = durable.clone();
        let mut raft = RaftNode::new(&config.raft, id, members, durable, rng);
        if let Some(repair) = repair {
            raft.start_repair(repair);
        }
        let member = Member::new(MemberParts {
            id,
            raft,
            machine: Box::new(machine),
            roster: Roster::new(&BTreeMap::new(), &BTreeMap::new(), &BTreeMap::new()),
            durable: DurableWatermark::of(&written),
            snapshot,
            first_request,
            now: Duration::ZERO,
            snapshot_schedule: config.snapshot_schedule,
        });
        // The server's takeover extension: two election timeouts.
        let tick = Duration::from_micros(config.tick_us);
        let extension = tick * (2 * config.raft.election_ticks_min) as u32;
        SimMember {
            member,
            reads_under_lease: config.reads_under_lease.clone(),
            store,
            lessor: SimLessor::new(lease_events, extension, config.lessor, boot),
            runtime: config.runtime,
            tick: Duration::from_micros(config.tick_us),
            now: Duration::ZERO,
            written,
            in_batch: false,
            to_persist: None,
            awaiting: None,
            synced: false,
            snapshot_to_record: None,
            restoring: None,
            restores: 0,
            held: VecDeque::new(),
            messages: Vec::new(),
            answers: Vec::new(),
        }
    }

    /// The repair under way, if any (see `bellwether_core::raft::promises`).
    pub fn repair(&self) -> Option<bellwether_core::raft::Repair> {
        self.member.raft().repair()
    }
}

impl Protocol for SimMember {
    type Config = SimMemberConfig;
    type Message = MemberMessage;
    type Durable = RaftDurable;
    type Persist = RaftPersist;
    type Output = ();

    /// Raft underneath, carried out by the member's runtime.
    const NAME: &'static str = "member";

    fn new(
        config: &SimMemberConfig,
        id: NodeId,
        members: &[NodeId],
        durable: RaftDurable,
        rng: Rng,
    ) -> Self {
        SimMember::start(config, id, members, durable, None, rng)
    }

    fn apply_persist(durable: &mut RaftDurable, persist: RaftPersist) {
        RaftNode::apply_persist(durable, persist)
    }

    fn durable_term(durable: &RaftDurable) -> Term {
        RaftNode::durable_term(durable)
    }

    fn tick(&mut self) {
        self.now += self.tick;
        self.input(Held::Tick);
    }

    fn step(&mut self, from: NodeId, message: MemberMessage) {
        self.input(Held::Message(from, message));
    }

    fn peer_unreachable(&mut self, peer: NodeId) {
        self.input(Held::Lost(peer));
    }

    fn has_ready(&self) -> bool {
        if self.to_persist.is_some() || self.synced {
            return true;
        }
        if self.waits_on_disk() {
            return false;
        }
        self.in_batch
            || !self.held.is_empty()
            || !self.messages.is_empty()
            || self.member.raft().has_ready()
    }

    fn ready(&mut self) -> Ready<Self> {
        let mut ready = Ready::default();
        if let Some((persist, messages)) = self.to_persist.take() {
            ready.persist = Some(persist);
            ready.messages = messages;
            return ready;
        }
        if self.synced {
            self.finish_plan();
        } else if !self.in_batch {
            self.step_held();
        }
        if !self.in_batch {
            self.member.begin_batch();
            self.in_batch = true;
        }
        if !self.waits_on_disk() {
            loop {
                match self.member.next_step() {
                    // A yield ends the batch as the server's loop does; the
                    // core still has a ready, so the next call begins another.
                    Step::Done | Step::Yield => {
                        self.in_batch = false;
                        break;
                    }
                    Step::PollForAnswers => continue,
                    Step::AnswerThenSend(messages) => {
                        self.carry_effects();
                        self.queue_raft(messages);
                        break;
                    }
                    Step::Ready(plan) => {
                        self.start_plan(*plan);
                        break;
                    }
                }
            }
        }
        self.carry_effects();
        ready.messages = std::mem::take(&mut self.messages);
        ready
    }

    fn status(&self) -> Status {
        self.member.raft().status()
    }

    fn catch_up_entries(&self) -> Option<u64> {
        self.member.raft().catch_up_entries()
    }
}
