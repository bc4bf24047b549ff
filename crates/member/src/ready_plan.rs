//! How the member carries out one batch of the core's output: the order of
//! persisting, sending and applying, which is where a member's latency and
//! its safety both come from.
//!
//! The core's contract is that a `Ready`'s state is durable before its
//! messages are sent. One exception is safe and is what lets a leader's
//! fsync overlap its followers' (Raft thesis §10.2.1): a leader's
//! AppendEntries, heartbeats, durable notices and snapshot chunks claim
//! nothing about this member's disk beyond what earlier fsyncs wrote, so
//! they leave first ([`sendable_before_persist`]), once their term itself
//! is on disk. The leader still counts itself in a commit quorum only after
//! its own fsync, because the fsync completes before the runtime steps any
//! answer to those messages into the core (the core counts the leader at
//! its last index). Every answer and vote, which does claim durability,
//! waits for the fsync, and [`DurableWatermark`] checks each message as it
//! leaves.
//!
//! Committed entries a `Ready` does not write are applied while its fsync
//! runs on another thread, or just before an fsync on the event loop (see
//! [`applies_before_persist`]), so a leader answers the clients of the
//! previous batch without waiting for the next fsync.
//!
//! A small persist is written on the event loop itself when the member
//! serves one writer at a time ([`Member::persists_inline`]). After a
//! leader's fsync on the loop, the runtime steps the followers' answers
//! that arrived meanwhile, may poll for them briefly, and the next `Ready`
//! that only applies is carried out answers first
//! ([`Step::AnswerThenSend`]).

use crate::durable_watermark::DurableWatermark;
use crate::member::Member;
use bellwether_core::raft::{RaftMessage, RaftOutput, RaftPersist, SnapshotMeta};
use bellwether_core::{Envelope, LogIndex, Protocol, Role};

/// Most entries a member writes and fsyncs on its own loop instead of on
/// a blocking thread (see [`Member::persists_inline`]): a lone client's
/// write is one entry, and a larger append means load, where the loop
/// should keep serving.
const INLINE_PERSIST_ENTRIES_MAX: usize = 2;
/// ... and at most this many bytes of them, so a large write (up to the
/// 1.5 MiB request bound) still goes to the blocking thread.
const INLINE_PERSIST_BYTES_MAX: usize = 16 * 1024;

/// Most bytes of entries a member applies in one batch before it lets its
/// runtime serve the rest of the world ([`Step::Yield`]), with the core's
/// `apply_batch_bytes_max` bounding each `Ready`. A member replaying its
/// log after a restart (640,000 puts after the last snapshot at a million
/// keys) applied it all in one turn of its loop, 0.87 s, without a word
/// to its leader or its clients; in 4 MiB batches (about 14,000 puts, some
/// 20 ms) the loop turns between them.
pub const BATCH_APPLY_BYTES_MAX: usize = 4 << 20;

/// What one wake-up's batch has done so far.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    /// The last plan fsynced a leader's write on the event loop.
    after_leader_fsync: bool,
    /// The runtime already stepped what arrived during such an fsync.
    drained_after_fsync: bool,
    /// A poll for the followers' answers is due once nothing is left.
    poll_due: bool,
    /// Bytes of the entries applied (see [`BATCH_APPLY_BYTES_MAX`]).
    pub(crate) applied_bytes: usize,
}

/// What the runtime does next in this wake-up.
#[derive(Debug)]
pub enum Step {
    /// Nothing: the batch is over.
    Done,
    /// The batch is over, but the core has more ready: the batch applied
    /// [`BATCH_APPLY_BYTES_MAX`]. Let the rest of the runtime run (timers,
    /// messages, clients), then begin the next batch at once.
    Yield,
    /// Poll for the followers' answers, for up to the configured budget,
    /// while [`Member::awaits_answers`] says so.
    PollForAnswers,
    /// The output was applied; carry out the answers queued, let them
    /// reach the clients, then send these messages.
    AnswerThenSend(Vec<Envelope<RaftMessage>>),
    /// Carry out a `Ready`, in the plan's order.
    Ready(Box<ReadyPlan>),
}

/// One `Ready`, in the order to carry it out: send `early`; start the
/// persist; apply `apply_before`; finish the persist and report it with
/// [`Member::persisted`]; send what [`Member::checked`] gives back for
/// `late`; apply `apply_after` and end with [`Member::finish_ready`].
#[derive(Debug)]
pub struct ReadyPlan {
    /// Messages that may leave before the persist, already checked.
    pub early: Vec<Envelope<RaftMessage>>,
    /// What to persist, if anything.
    pub persist: Option<PlannedPersist>,
    /// Output that may be applied while the persist runs.
    pub apply_before: Vec<RaftOutput>,
    /// Messages that wait for the persist.
    pub late: AfterPersist,
    /// Output that waits for the persist.
    pub apply_after: Vec<RaftOutput>,
}

/// A persist, and where to carry it out.
#[derive(Debug)]
pub struct PlannedPersist {
    /// What to write and fsync.
    pub persist: RaftPersist,
    /// Write it on the event loop (small, one writer at a time) rather than
    /// on another thread.
    pub on_loop: bool,
    /// A snapshot written beside the log, for the log to record first.
    pub record: Option<SnapshotMeta>,
}

/// Messages that may leave only once the persist before them finished;
/// [`Member::checked`] hands them out.
#[derive(Debug)]
pub struct AfterPersist(Vec<Envelope<RaftMessage>>);

impl<W, R> Member<W, R> {
    /// A new batch of output begins (once per wake-up).
    pub fn begin_batch(&mut self) {
        self.batch = Batch::default();
    }

    /// What to do next (see [`Step`]).
    pub fn next_step(&mut self) -> Step {
        if self.raft.has_ready() && self.batch.applied_bytes >= BATCH_APPLY_BYTES_MAX {
            self.release_confirmed_reads();
            return Step::Yield;
        }
        if !self.raft.has_ready() {
            // Polled only once nothing is left to send: the durable
            // notices a follower's forwarded write waits for leave first.
            if !std::mem::take(&mut self.batch.poll_due) {
                self.release_confirmed_reads();
                return Step::Done;
            }
            return Step::PollForAnswers;
        }
        let ready = self.raft.ready();
        if self.batch.after_leader_fsync && ready.persist.is_none() && !ready.output.is_empty() {
            self.apply_all(ready.output);
            self.release_confirmed_reads();
            self.maybe_snapshot();
            return Step::AnswerThenSend(self.checked(AfterPersist(ready.messages)));
        }
        self.batch.after_leader_fsync = false;
        let durable = self.durable;
        let (early, late): (Vec<_>, Vec<_>) = ready.messages.into_iter().partition(|envelope| {
            sendable_before_persist(&envelope.message) && durable.term_is_durable(&envelope.message)
        });
        let early = self.checked(AfterPersist(early));
        let mut output = ready.output;
        let persist = ready.persist.map(|persist| {
            let unwritten_from = first_written_index(&persist);
            let waiting = output
                .iter()
                .position(|o| !applies_before_persist(o, unwritten_from))
                .unwrap_or(output.len());
            let apply_after = output.split_off(waiting);
            let on_loop = self.persists_inline(&persist);
            let record = if on_loop {
                None
            } else {
                self.snapshots.to_record.take()
            };
            let planned = PlannedPersist {
                persist,
                on_loop,
                record,
            };
            (planned, apply_after)
        });
        let (persist, apply_before, apply_after) = match persist {
            Some((planned, apply_after)) => (Some(planned), output, apply_after),
            None => (None, Vec::new(), output),
        };
        Step::Ready(Box::new(ReadyPlan {
            early,
            persist,
            apply_before,
            late: AfterPersist(late),
            apply_after,
        }))
    }

    /// The plan's persist finished: the disk now holds `durable`.
    pub fn persisted(&mut self, durable: DurableWatermark, on_loop: bool) {
        assert!(
            durable.hard_state.term >= self.durable.hard_state.term,
            "the term on disk never goes back"
        );
        self.durable = durable;
        if on_loop {
            self.batch.after_leader_fsync = self.raft.status().role == Role::Leader;
        } else {
            // A poll is for a lone write; this one was not.
            self.batch.poll_due = false;
        }
    }

    /// The messages, each checked against what the disk holds now (see
    /// [`DurableWatermark`]): a message that promises more stops the
    /// member.
    pub fn checked(&self, messages: AfterPersist) -> Vec<Envelope<RaftMessage>> {
        for envelope in &messages.0 {
            self.durable.assert_may_send(envelope.to, &envelope.message);
        }
        messages.0
    }

    /// The plan's output is applied: answers the reads now applied, takes
    /// a snapshot if one is due. True when the runtime should now let the
    /// connections read and step what arrived during a leader's fsync on
    /// the loop (once per batch); a poll is then due.
    pub fn finish_ready(&mut self) -> bool {
        self.release_confirmed_reads();
        self.maybe_snapshot();
        if self.batch.after_leader_fsync && !self.batch.drained_after_fsync {
            self.batch.drained_after_fsync = true;
            self.batch.poll_due = true;
            return true;
        }
        false
    }

    /// The index a poll for answers waits to see committed: this leader's
    /// last entry, if it is not committed yet.
    pub fn poll_target(&self) -> Option<LogIndex> {
        let awaited = self.raft.log().last_index();
        (self.raft.commit_index() < awaited).then_some(awaited)
    }

    /// True while a poll for `awaited` should go on: it is not committed,
    /// nothing else is to be carried out, and this member still leads.
    pub fn awaits_answers(&self, awaited: LogIndex) -> bool {
        self.raft.commit_index() < awaited
            && !self.raft.has_ready()
            && self.raft.status().role == Role::Leader
    }

    /// True when `persist` is better written and fsynced on the event loop
    /// than on a blocking thread: it is small (see
    /// [`INLINE_PERSIST_ENTRIES_MAX`]), and this member either follows
    /// with no write or linearizable read of its own in flight, or has seen
    /// only lone appends lately ([`crate::lone_writes::LoneWrites`]).
    ///
    /// Why: handing a small fsync to a blocking thread costs two thread
    /// wake-ups (there and back), a good part of a lone client's write on
    /// a loaded 2-core machine, and both the leader's fsync and a
    /// follower's are on that write's path. While the loop waits on the
    /// disk nothing else of this member runs (the `node` command runs a
    /// member on one thread): a serializable read, a watch event or a
    /// keep-alive relayed through it waits one small fsync, about 0.1 ms
    /// here. Under load the fsync stays on the blocking thread, where the
    /// gRPC side and the transport keep running meanwhile.
    fn persists_inline(&mut self, persist: &RaftPersist) -> bool {
        let small = persist.snapshot.is_none()
            && self.snapshots.to_record.is_none()
            && persist.entries.len() <= INLINE_PERSIST_ENTRIES_MAX
            && persist
                .entries
                .iter()
                .map(|e| e.size_bytes())
                .sum::<usize>()
                <= INLINE_PERSIST_BYTES_MAX;
        let no_reads = self.reads.is_empty() && self.confirmed_reads.is_empty();
        let role = self.raft.status().role;
        let idle_follower = role == Role::Follower
            && self.proposals.is_empty()
            && no_reads
            && self.forwarding.is_idle();
        let uncommitted =
            (self.raft.log().last_index().0).saturating_sub(self.raft.commit_index().0);
        let lone = small
            && no_reads
            && persist.entries.len() == 1
            && uncommitted == 1
            && self.proposals.len() <= 1
            && self.forwarding.writes_waiting() <= 1;
        let lone_streak = !persist.entries.is_empty() && self.lone_writes.observe(lone);
        small && (idle_follower || lone_streak)
    }
}

/// The first log index `persist` writes, or `None` when it installs a
/// snapshot (which replaces the whole log); `LogIndex(u64::MAX)` when it
/// writes no entries.
fn first_written_index(persist: &RaftPersist) -> Option<LogIndex> {
    if persist.snapshot.is_some() {
        return None;
    }
    Some(
        persist
            .entries
            .first()
            .map_or(LogIndex(u64::MAX), |e| e.index),
    )
}

/// True for an output that may be applied while the `Ready`'s fsync runs:
/// a committed entry below every entry the `Ready` writes. Such an entry is
/// durable on a majority already, this member's own disk included when it
/// leads (its earlier fsyncs finished before the answers that committed
/// the entry were stepped), so applying it and answering its client does
/// not depend on this fsync. Whatever the `Ready` writes (a single-member
/// cluster commits its own entries at once), a snapshot to install, and
/// every output after the first that must wait, waits for the fsync.
fn applies_before_persist(output: &RaftOutput, unwritten_from: Option<LogIndex>) -> bool {
    match (output, unwritten_from) {
        (RaftOutput::Apply(entry), Some(first)) => entry.index < first,
        _ => false,
    }
}

/// A leader's replication: the messages that may leave before the fsync.
fn sendable_before_persist(message: &RaftMessage) -> bool {
    matches!(
        message,
        RaftMessage::AppendEntries { .. }
            | RaftMessage::Heartbeat { .. }
            | RaftMessage::LeaderDurable { .. }
            | RaftMessage::InstallSnapshot { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellwether_core::raft::Payload;
    use bellwether_core::Term;

    fn entry(index: u64) -> bellwether_core::raft::Entry {
        bellwether_core::raft::Entry {
            term: Term(2),
            index: LogIndex(index),
            payload: Payload::Noop,
        }
    }

    /// A member that restarts with 24 MiB of committed entries (1 MiB
    /// each) applies them over several batches, each ending with a yield
    /// once it applied [`BATCH_APPLY_BYTES_MAX`], and the last with
    /// `Done`: all of them, in order, once.
    #[test]
    fn a_replay_yields_to_the_runtime_between_bounded_batches() {
        use crate::{Member, MemberParts, Roster};
        use bellwether_core::raft::{HardState, RaftConfig, RaftDurable, RaftNode};
        use bellwether_core::{NodeId, Rng};
        use std::collections::BTreeMap;
        use std::time::Duration;
        let entries: Vec<_> = (1..=24u64)
            .map(|i| bellwether_core::raft::Entry {
                term: Term(1),
                index: LogIndex(i),
                payload: Payload::Command(crate::forwarding::local_command(vec![1; 1 << 20])),
            })
            .collect();
        let mut disk = RaftDurable {
            hard_state: HardState {
                term: Term(1),
                voted_for: None,
                commit: LogIndex(24),
            },
            snapshot: None,
            entries,
        };
        let members = [NodeId(1), NodeId(2), NodeId(3)];
        let raft = RaftNode::new(
            &RaftConfig::default(),
            NodeId(2),
            &members,
            disk.clone(),
            Rng::new(2),
        );
        let empty = BTreeMap::new();
        let mut member: Member<u32, u32> = Member::new(MemberParts {
            id: NodeId(2),
            raft,
            machine: Box::new(crate::state_machine::NullMachine),
            roster: Roster::new(&empty, &empty, &empty),
            durable: DurableWatermark::of(&disk),
            snapshot: (LogIndex(0), 0),
            first_request: 1,
            now: Duration::ZERO,
            snapshot_schedule: Default::default(),
        });
        let mut batches = Vec::new();
        loop {
            member.begin_batch();
            let ended = loop {
                match member.next_step() {
                    Step::Ready(plan) => {
                        let plan = *plan;
                        if let Some(planned) = plan.persist {
                            member.apply_all(plan.apply_before);
                            disk.apply(planned.persist);
                            member.persisted(DurableWatermark::of(&disk), planned.on_loop);
                        }
                        member.checked(plan.late);
                        member.apply_all(plan.apply_after);
                        member.finish_ready();
                    }
                    Step::AnswerThenSend(_) | Step::PollForAnswers => {}
                    ended @ (Step::Done | Step::Yield) => break ended,
                }
            };
            batches.push((member.batch.applied_bytes, matches!(ended, Step::Yield)));
            if matches!(ended, Step::Done) {
                break;
            }
        }
        let mib = |bytes: usize| bytes >> 20;
        let (last, yields) = batches.split_last().expect("a batch");
        assert!(!last.1, "the last batch ends with Done");
        assert!(
            yields.len() >= 2,
            "24 MiB in batches of 4 to 8: {batches:?}"
        );
        for (bytes, yielded) in yields {
            assert!(yielded, "each earlier batch yields: {batches:?}");
            assert!(
                (4..=8).contains(&mib(*bytes)),
                "a batch applies 4 to 8 MiB: {batches:?}"
            );
        }
        let total: usize = batches.iter().map(|(bytes, _)| bytes).sum();
        assert_eq!(mib(total), 24, "every entry applied once: {batches:?}");
        assert_eq!(member.raft.applied_index(), LogIndex(24));
    }

    #[test]
    fn only_committed_entries_below_what_the_fsync_writes_are_applied_during_it() {
        let writes = RaftPersist {
            entries: vec![entry(8), entry(9)],
            ..RaftPersist::default()
        };
        let from = first_written_index(&writes);
        assert_eq!(from, Some(LogIndex(8)));
        assert!(applies_before_persist(&RaftOutput::Apply(entry(7)), from));
        // A single-member cluster commits what it has just appended: its
        // client is answered only once the entry is on disk.
        assert!(!applies_before_persist(&RaftOutput::Apply(entry(8)), from));
        assert!(!applies_before_persist(&RaftOutput::Apply(entry(9)), from));
        let reads = RaftOutput::ReadReady {
            id: 1,
            index: LogIndex(7),
        };
        assert!(!applies_before_persist(&reads, from), "reads wait");

        let hard_state_only = RaftPersist {
            hard_state: Some(Default::default()),
            ..RaftPersist::default()
        };
        let from = first_written_index(&hard_state_only);
        assert!(applies_before_persist(&RaftOutput::Apply(entry(9)), from));

        let snapshot = RaftPersist {
            snapshot: Some(Default::default()),
            entries: vec![entry(12)],
            ..RaftPersist::default()
        };
        let from = first_written_index(&snapshot);
        assert_eq!(from, None, "a snapshot replaces the whole log");
        assert!(!applies_before_persist(&RaftOutput::Apply(entry(3)), from));
    }

    #[test]
    fn only_a_leaders_replication_leaves_before_the_fsync() {
        let (term, index) = (Term(3), LogIndex(7));
        let early = [
            RaftMessage::AppendEntries {
                term,
                prev_log_index: index,
                prev_log_term: term,
                entries: Vec::new(),
                leader_commit: index,
            },
            RaftMessage::Heartbeat {
                term,
                commit: index,
                round: 1,
            },
            // It speaks of the disk too, but only of earlier Readys, which
            // are on disk before this one is taken.
            RaftMessage::LeaderDurable {
                term,
                index,
                config_index: index,
            },
        ];
        // Each of these tells its receiver something about our disk (an
        // entry stored, a vote cast): sent early, a crash could take it back.
        let late = [
            RaftMessage::AppendResponse {
                term,
                success: true,
                match_index: index,
                hint_index: index,
                hint_term: None,
            },
            RaftMessage::HeartbeatResponse {
                term,
                round: 1,
                last_log_index: index,
            },
            RaftMessage::VoteResponse {
                term,
                granted: true,
            },
            RaftMessage::PreVoteResponse {
                term,
                granted: true,
            },
            RaftMessage::VoteRequest {
                term,
                last_log_index: index,
                last_log_term: term,
                leadership_transfer: false,
            },
            RaftMessage::TimeoutNow { term },
        ];
        assert!(early.iter().all(sendable_before_persist));
        assert!(!late.iter().any(sendable_before_persist));
    }
}
