//! Linearizable reads without writing to the log (thesis §6.4).
//!
//! **ReadIndex.** The leader notes its commit index, then proves it still
//! leads by a round of heartbeats answered by a quorum; once the state
//! machine has applied that index, the read may be served. Reads that arrive
//! between two `ready()` calls share one round. A new leader first commits
//! its no-op, since until then its commit index may lag its predecessor's.
//!
//! **Leases** (`lease_reads`). Followers ignore votes for
//! `election_ticks_min` after hearing the leader (stickiness), so no other
//! leader can be elected before `sent + election_ticks_min` on their clocks,
//! where `sent` is when the leader sent the newest heartbeat a quorum
//! answered. The leader serves reads until `sent + election_ticks_min -
//! lease_margin_ticks` on its own clock, which is safe while clocks drift
//! apart by less than the margin over one election timeout (10% by
//! default). Leases are refused with the connection-loss hint (a hinted
//! follower votes early) and end as soon as a leadership transfer starts.

use super::node::RaftNode;
use super::output::RaftOutput;
use crate::protocol::Role;
use crate::types::{LogIndex, NodeId};
use std::collections::VecDeque;
use std::fmt;

/// Heartbeat rounds remembered for lease accounting; older ones are too old
/// to extend a lease anyway.
const ROUNDS_REMEMBERED_MAX: usize = 64;

/// A read waiting for its round to be confirmed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PendingRead {
    id: u64,
    index: LogIndex,
    round: u64,
}

/// Reads in flight on a leader.
#[derive(Clone, Debug, Default)]
pub struct ReadQueue {
    /// Reads that arrived before this leader committed in its term.
    waiting_for_commit: VecDeque<u64>,
    /// Reads waiting for a quorum to answer their round, in round order.
    pending: VecDeque<PendingRead>,
    /// Last round number handed out (rounds start at 1; 0 means none).
    last_round: u64,
    /// A round has reads but no heartbeat carried it yet.
    round_unsent: bool,
    /// `(round, leader tick when sent)`, newest last.
    sent: VecDeque<(u64, u64)>,
    /// A TimeoutNow was sent in this term (leases end for the term).
    pub(super) timeout_now_sent_in_term: bool,
}

impl ReadQueue {
    /// Forgets everything (new term).
    pub(super) fn reset(&mut self) {
        *self = ReadQueue {
            last_round: self.last_round,
            ..ReadQueue::default()
        };
    }

    /// Reads waiting in any stage.
    fn len(&self) -> usize {
        self.waiting_for_commit.len() + self.pending.len()
    }

    /// Fails every waiting read (leadership lost).
    pub(super) fn fail_all(&mut self, output: &mut Vec<RaftOutput>) {
        let ids = self
            .waiting_for_commit
            .drain(..)
            .chain(self.pending.drain(..).map(|r| r.id));
        output.extend(ids.map(|id| RaftOutput::ReadFailed { id }));
        self.round_unsent = false;
    }

    /// Stops lease reads until a new round is confirmed after the transfer.
    pub(super) fn end_lease(&mut self) {
        self.sent.clear();
    }
}

/// Why a read was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadError {
    /// Only the leader confirms reads; `leader` is the current one if known.
    NotLeader {
        /// Where to send it instead.
        leader: Option<NodeId>,
    },
    /// Too many reads are waiting; retry after backing off.
    Busy,
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::NotLeader { leader: Some(l) } => {
                write!(f, "not the leader; the leader is {l}")
            }
            ReadError::NotLeader { leader: None } => {
                write!(f, "not the leader, and no leader is known")
            }
            ReadError::Busy => write!(f, "too many reads waiting; retry after backing off"),
        }
    }
}

impl std::error::Error for ReadError {}

impl RaftNode {
    /// Starts a linearizable read named `id`. The answer comes as
    /// `RaftOutput::ReadReady { id, index }` (serve it once `index` is
    /// applied) or `RaftOutput::ReadFailed { id }`.
    pub fn read_index(&mut self, id: u64) -> Result<(), ReadError> {
        if self.role != Role::Leader {
            return Err(ReadError::NotLeader {
                leader: self.leader,
            });
        }
        if self.reads.len() >= self.config.pending_reads_max {
            return Err(ReadError::Busy);
        }
        if self.log.term(self.commit) != Some(self.term) {
            self.reads.waiting_for_commit.push_back(id);
            return Ok(());
        }
        self.enqueue_read(id);
        Ok(())
    }

    fn enqueue_read(&mut self, id: u64) {
        // A follower may have committed, applied and acknowledged up to
        // what this leader announced durable (`durable_notice.rs`).
        let index = self.commit.max(self.announced_durable);
        if self.quorum() == 1 && self.is_voter() || self.lease_valid() {
            self.pending_output
                .push(RaftOutput::ReadReady { id, index });
            return;
        }
        if !self.reads.round_unsent {
            self.reads.last_round += 1;
            self.reads.round_unsent = true;
        }
        let round = self.reads.last_round;
        self.reads
            .pending
            .push_back(PendingRead { id, index, round });
    }

    /// The no-op of this term committed: reads that waited for it start.
    pub(super) fn start_reads_waiting_for_commit(&mut self) {
        while let Some(id) = self.reads.waiting_for_commit.pop_front() {
            self.enqueue_read(id);
        }
    }

    /// A round number for a heartbeat broadcast now: the round that reads
    /// are waiting on, or a fresh one that keeps the lease alive.
    pub(super) fn start_round(&mut self) -> u64 {
        if !self.reads.round_unsent {
            self.reads.last_round += 1;
        }
        self.reads.round_unsent = false;
        let round = self.reads.last_round;
        if self.reads.sent.len() >= ROUNDS_REMEMBERED_MAX {
            self.reads.sent.pop_front();
        }
        self.reads.sent.push_back((round, self.now_tick));
        round
    }

    /// True when reads wait for a round that no heartbeat carried yet.
    pub(super) fn read_round_unsent(&self) -> bool {
        self.reads.round_unsent
    }

    /// Same, for `has_ready`: only a leader sends rounds.
    pub(super) fn reads_waiting_for_round(&self) -> bool {
        self.role == Role::Leader && self.reads.round_unsent
    }

    /// Highest round answered by a quorum of voters (this leader counts as
    /// having answered every round).
    fn quorum_round(&self) -> u64 {
        let mut rounds: Vec<u64> = self
            .cluster
            .voters
            .iter()
            .map(|v| {
                if *v == self.id {
                    u64::MAX
                } else {
                    self.progress.get(v).map_or(0, |p| p.round_acked)
                }
            })
            .collect();
        rounds.sort_unstable_by(|a, b| b.cmp(a));
        rounds[self.quorum() - 1]
    }

    /// Releases reads whose round a quorum confirmed.
    pub(super) fn release_confirmed_reads(&mut self) {
        let confirmed = self.quorum_round();
        while self
            .reads
            .pending
            .front()
            .is_some_and(|r| r.round <= confirmed)
        {
            let read = self.reads.pending.pop_front().expect("checked");
            self.pending_output.push(RaftOutput::ReadReady {
                id: read.id,
                index: read.index,
            });
        }
    }

    /// The leader lease holds now (see the module docs).
    fn lease_valid(&self) -> bool {
        self.lease_remaining_ticks().is_some()
    }

    /// The tick at which this leader's leadership lease ends: one
    /// leadership window (`leadership_window_ticks`), minus a 10% drift
    /// margin, after the later of its vote requests and the newest
    /// heartbeat round a quorum answered. Every voter that granted one of
    /// those refuses other candidates for at least one window after
    /// receiving it (stickiness), so no other node can be elected before
    /// then on their clocks. A leader that is its own quorum never ends.
    pub(super) fn leadership_end_tick(&self) -> u64 {
        if self.quorum() <= usize::from(self.is_voter()) {
            return u64::MAX;
        }
        let confirmed = self.quorum_round();
        let heartbeat = self
            .reads
            .sent
            .iter()
            .rev()
            .find(|(round, _)| *round <= confirmed)
            .map_or(0, |(_, sent)| *sent);
        self.campaign_tick.max(heartbeat) + self.leadership_window_ticks()
            - self.leadership_margin_ticks()
    }

    /// How long, at least, a follower defends a leader it heard (or a
    /// candidate it voted for) against other candidates: the minimum
    /// election timeout, or with the adaptive detector its floor, since a
    /// follower's detector may release it that soon. A leadership lasts
    /// this long (less the margin) after a quorum confirmed it.
    pub(super) fn leadership_window_ticks(&self) -> u64 {
        #[cfg(feature = "fault-injection")]
        if self.timeout_leadership {
            return self.config.election_ticks_min;
        }
        self.config
            .detector_bounds()
            .map_or(self.config.election_ticks_min, |b| b.floor_ticks)
    }

    /// Fault injection for the simulator's own tests: the leadership
    /// window stays one election timeout with the detector on, so a leader
    /// outlives the promises of followers whose detectors let them vote
    /// sooner. The checkers must catch the overlap. Not compiled into
    /// normal builds.
    #[cfg(feature = "fault-injection")]
    pub fn keep_timeout_leadership_for_fault_injection(&mut self) {
        self.timeout_leadership = true;
    }

    /// The leadership lease's drift margin: 10% of the leadership window,
    /// safe while no two clocks' rates differ by more.
    pub(super) fn leadership_margin_ticks(&self) -> u64 {
        (self.leadership_window_ticks() / 10).max(1)
    }

    /// While this node leads under a valid lease (`lease_reads`), how many
    /// more ticks the lease lasts: no other node can be elected before then,
    /// on this node's clock, while clocks drift within the margin. `None`
    /// when there is no lease (not leading, leases off, a transfer started,
    /// or no quorum-confirmed heartbeat recent enough).
    pub fn lease_remaining_ticks(&self) -> Option<u64> {
        // Once a TimeoutNow left in this term, its target may win an election
        // that skips stickiness at any later time: no lease for the rest of
        // the term.
        if !self.config.lease_reads
            || self.role != Role::Leader
            || self.transfer.is_some()
            || self.reads.timeout_now_sent_in_term
        {
            return None;
        }
        let confirmed = self.quorum_round();
        let (_, sent_tick) = self
            .reads
            .sent
            .iter()
            .rev()
            .find(|(round, _)| *round <= confirmed)?;
        let lease_ticks = self.config.election_ticks_min - self.config.lease_margin_ticks;
        let end = sent_tick + lease_ticks;
        (self.now_tick < end).then(|| end - self.now_tick)
    }
}
