//! What a leader knows about one follower: liveness for CheckQuorum and
//! priorities, and replication flow control (probe / replicate / snapshot,
//! as in etcd-io/raft's progress tracker, thesis §3.5).

use crate::types::LogIndex;
use std::collections::VecDeque;

/// How the leader currently sends entries to a follower.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicationState {
    /// Where the logs diverge is unknown: one AppendEntries at a time,
    /// backing off by the follower's hints.
    Probe {
        /// An append is outstanding; wait for its answer (or a heartbeat
        /// answer) before sending another.
        paused: bool,
    },
    /// The follower matches: stream entries, up to the inflight limit.
    Replicate,
    /// The entries it needs are compacted: send the snapshot in chunks.
    Snapshot {
        /// Snapshot being sent.
        last_index: LogIndex,
        /// Bytes the follower confirmed so far.
        offset: u64,
        /// A chunk is outstanding.
        paused: bool,
    },
}

/// The leader's view of one follower, reset at each election.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Leader-local tick at which this follower last answered. CheckQuorum
    /// counts followers whose last answer is recent.
    pub last_contact_tick: u64,
    /// Start of the current unbroken run of answers, or `None` before the
    /// first answer of this term. Priority hand-off waits until a follower
    /// has been steadily reachable, so a flapping node is never handed the
    /// leadership.
    pub reachable_since_tick: Option<u64>,
    /// Highest index known to match the leader's log.
    pub match_index: LogIndex,
    /// Next index to send.
    pub next_index: LogIndex,
    /// Flow-control state.
    pub state: ReplicationState,
    /// Last index of each AppendEntries in flight, oldest first.
    pub inflight: VecDeque<LogIndex>,
    /// Highest ReadIndex round this follower has answered.
    pub round_acked: u64,
    /// Highest commit index sent to this follower (in AppendEntries or a
    /// heartbeat) or that it deduces from the durable notices sent to it,
    /// so a commit notice goes only to followers that lack it.
    pub commit_sent: LogIndex,
    /// The latest numbered heartbeat sent while replicating, with the last
    /// index streamed before it. Its answer proves which appends were lost;
    /// an answer to anything older may have overtaken appends still in
    /// flight and proves nothing.
    pub loss_probe: Option<LossProbe>,
    /// The highest numbered heartbeat round sent to this follower.
    pub round_sent: u64,
    /// `round_sent` when the outstanding probe append left. An answer to
    /// that round or an older one was sent before the append arrived (the
    /// connection is FIFO), so it says nothing of the append and does not
    /// unpause the probe; without this a new leader sent its first entry
    /// twice, unpaused by the answer to the heartbeat sent just before it.
    pub probe_round: u64,
}

/// A heartbeat that doubles as a check for lost appends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LossProbe {
    /// The heartbeat's round (nonzero).
    pub round: u64,
    /// Last index sent to the follower before that heartbeat.
    pub sent_last: LogIndex,
}

impl Progress {
    /// Fresh progress for a new term: the follower is presumed live (it may
    /// have just voted for us), but nothing is known of its log.
    pub fn new(now_tick: u64, next_index: LogIndex) -> Self {
        Progress {
            last_contact_tick: now_tick,
            reachable_since_tick: None,
            match_index: LogIndex(0),
            next_index,
            state: ReplicationState::Probe { paused: false },
            inflight: VecDeque::new(),
            round_acked: 0,
            commit_sent: LogIndex(0),
            loss_probe: None,
            round_sent: 0,
            probe_round: 0,
        }
    }

    /// Records any answer at `now_tick`. An answer after a silence of
    /// `silence_ticks_max` or more starts a new reachable run.
    pub fn record_contact(&mut self, now_tick: u64, silence_ticks_max: u64) {
        assert!(now_tick >= self.last_contact_tick, "leader clock went back");
        let broken = now_tick - self.last_contact_tick >= silence_ticks_max;
        if self.reachable_since_tick.is_none() || broken {
            self.reachable_since_tick = Some(now_tick);
        }
        self.last_contact_tick = now_tick;
    }

    /// The follower accepted entries up to `index`.
    pub fn on_match(&mut self, index: LogIndex) {
        if index > self.match_index {
            self.match_index = index;
        }
        if self.next_index <= self.match_index {
            self.next_index = self.match_index.next();
        }
        while self.inflight.front().is_some_and(|last| *last <= index) {
            self.inflight.pop_front();
        }
        if matches!(self.state, ReplicationState::Probe { .. }) {
            self.state = ReplicationState::Replicate;
        }
        assert!(
            self.next_index > self.match_index,
            "next always follows match"
        );
    }

    /// The follower refused at or below what it had matched: its log lost
    /// entries it had acknowledged (a member repairing after damage,
    /// `promises.rs`). Forget the match, which only ever makes the leader
    /// count less, and probe again from `next`.
    pub fn on_lost_entries(&mut self, next: LogIndex) {
        self.match_index = LogIndex(0);
        self.on_refusal(next);
    }

    /// The follower refused; go back to probing from `next`.
    pub fn on_refusal(&mut self, next: LogIndex) {
        self.next_index = next.max(self.match_index.next());
        self.inflight.clear();
        self.loss_probe = None;
        self.state = ReplicationState::Probe { paused: false };
    }

    /// A heartbeat of `round` is going out: while replicating, remember
    /// what was streamed before it, unless an earlier probe still waits for
    /// its answer (any later numbered answer settles that one too, so rounds
    /// sent faster than answers come back, as under a stream of
    /// linearizable reads, cannot keep replacing it unanswered). Round 0 (a
    /// commit notice) is not numbered and not answered.
    pub fn on_heartbeat_sent(&mut self, round: u64) {
        self.round_sent = self.round_sent.max(round);
        if round > 0 && self.state == ReplicationState::Replicate && self.loss_probe.is_none() {
            self.loss_probe = Some(LossProbe {
                round,
                sent_last: LogIndex(self.next_index.0 - 1),
            });
        }
    }

    /// Whether a heartbeat answer of `round`, from a follower whose log
    /// ends at `last_log_index`, shows that appends sent before that
    /// heartbeat were lost (the connection is FIFO, so they would have
    /// arrived first). Consumes the probe when it answers it.
    pub fn appends_lost(&mut self, round: u64, last_log_index: LogIndex) -> bool {
        let Some(probe) = self.loss_probe else {
            return false;
        };
        if round < probe.round {
            return false;
        }
        self.loss_probe = None;
        self.state == ReplicationState::Replicate
            && last_log_index < probe.sent_last
            && self.match_index < probe.sent_last
    }

    /// Whether another AppendEntries may be sent now.
    pub fn can_send(&self, inflight_max: usize) -> bool {
        match self.state {
            ReplicationState::Probe { paused } => !paused,
            ReplicationState::Replicate => self.inflight.len() < inflight_max,
            ReplicationState::Snapshot { .. } => false,
        }
    }

    /// Records an AppendEntries ending at `last` that was just sent.
    pub fn on_sent(&mut self, last: LogIndex, inflight_max: usize) {
        match &mut self.state {
            ReplicationState::Probe { paused } => {
                *paused = true;
                self.probe_round = self.round_sent;
            }
            ReplicationState::Replicate => {
                assert!(
                    self.inflight.len() < inflight_max,
                    "inflight over {inflight_max}"
                );
                self.inflight.push_back(last);
                self.next_index = last.next();
            }
            ReplicationState::Snapshot { .. } => {
                unreachable!("no appends while sending a snapshot")
            }
        }
    }

    /// Lets a probing follower receive again after an answer to heartbeat
    /// `round`: a probe append only once the answer is to a heartbeat sent
    /// after it (see `probe_round`), a snapshot chunk on any answer.
    pub fn unpause(&mut self, round: u64) {
        match &mut self.state {
            ReplicationState::Probe { paused } => {
                if round > self.probe_round {
                    *paused = false;
                }
            }
            ReplicationState::Snapshot { paused, .. } => *paused = false,
            ReplicationState::Replicate => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replicating(match_index: u64, sent_last: u64) -> Progress {
        let mut progress = Progress::new(0, LogIndex(1));
        progress.state = ReplicationState::Replicate;
        progress.match_index = LogIndex(match_index);
        progress.next_index = LogIndex(sent_last + 1);
        progress
    }

    #[test]
    fn a_probe_waits_for_its_answer_while_later_rounds_go_out() {
        let mut progress = replicating(3, 5);
        for round in 1..=3 {
            progress.on_heartbeat_sent(round);
        }
        assert!(
            progress.appends_lost(1, LogIndex(3)),
            "the answer to the first probe still proves the loss"
        );
    }

    #[test]
    fn answers_to_older_rounds_and_commit_notices_prove_nothing() {
        let mut progress = replicating(3, 5);
        progress.on_heartbeat_sent(7);
        assert!(
            !progress.appends_lost(6, LogIndex(3)),
            "sent before the probe"
        );
        progress.on_heartbeat_sent(0);
        assert!(!progress.appends_lost(0, LogIndex(3)), "a commit notice");
        assert!(!progress.appends_lost(7, LogIndex(5)), "it has them all");
        progress.on_heartbeat_sent(8);
        progress.match_index = LogIndex(5);
        assert!(!progress.appends_lost(8, LogIndex(3)), "acknowledged since");
    }
}
