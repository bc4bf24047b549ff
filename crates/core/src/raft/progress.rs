//! What a leader knows about one follower.

use crate::types::{LogIndex, Term};

/// The leader's view of one follower, reset at each election.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Leader-local tick at which this follower last answered. CheckQuorum
    /// counts followers whose last answer is recent.
    pub last_contact_tick: u64,
    /// Start of the current unbroken run of answers, or `None` before the
    /// first answer of this term. Priority hand-off waits until a follower
    /// has been steadily reachable, so a flapping node is never handed the
    /// leadership.
    pub reachable_since_tick: Option<u64>,
    /// Last log position the follower reported.
    pub last_log_index: LogIndex,
    /// Term of that entry.
    pub last_log_term: Term,
}

impl Progress {
    /// Fresh progress for a new term: the follower is presumed live (it may
    /// have just voted for us), but it has not answered yet.
    pub fn new(now_tick: u64) -> Self {
        Progress {
            last_contact_tick: now_tick,
            reachable_since_tick: None,
            last_log_index: LogIndex(0),
            last_log_term: Term(0),
        }
    }

    /// Records an answer at `now_tick`. An answer after a silence of
    /// `silence_ticks_max` or more starts a new reachable run.
    pub fn record_answer(&mut self, now_tick: u64, silence_ticks_max: u64, last: (Term, LogIndex)) {
        assert!(now_tick >= self.last_contact_tick, "leader clock went back");
        let broken = now_tick - self.last_contact_tick >= silence_ticks_max;
        if self.reachable_since_tick.is_none() || broken {
            self.reachable_since_tick = Some(now_tick);
        }
        self.last_contact_tick = now_tick;
        self.last_log_term = last.0;
        self.last_log_index = last.1;
    }
}
