//! Tells when a member's appends come one at a time, so that the node loop
//! can fsync them itself instead of handing each to a blocking thread.
//!
//! Why: the hand-off costs two thread wake-ups, there and back. On a small
//! machine that is a good part of a lone client's write, whose path holds
//! the leader's fsync and a follower's. But while the loop waits on the
//! disk nothing else of the member runs (one thread runs it all): the
//! answers to other clients and their next requests wait behind the fsync.
//! Taking every small fsync on the loop cost 10–25% of the throughput of
//! two to four clients when it was measured. So the loop takes one only
//! after a streak of appends that each held the only uncommitted entry:
//! what a member serving one writer at a time sees (a lone client, a
//! session's keep-alive writer, an election). One append that overlaps
//! another ends the streak, and the appends that follow go back to the
//! blocking thread until a new streak is complete.
//!
//! A follower judges by what the leader saw as well as by its own commit
//! index: it deduces commits from the leader's durable notices sooner than the
//! leader counts the answers, so with two clients about half its appends
//! looked lone from where it stood, and taking those on its loop cost 8%
//! of the two clients' throughput. An append is lone at the leader when it
//! carries one entry and the leader's commit index reaches the entry
//! before it.

use bellwether_core::LogIndex;

/// Lone appends in a row before the loop fsyncs them itself. Two clients
/// overlap on most appends, so a streak this long almost never forms under
/// them; one client completes it within its first few writes.
pub const LONE_STREAK_MIN: u32 = 8;

/// The streak of lone appends this member has seen.
#[derive(Debug, Default)]
pub struct LoneWrites {
    /// Lone appends in a row, up to [`LONE_STREAK_MIN`].
    streak: u32,
    /// A follower stepped an AppendEntries since the last persist that
    /// was not lone at the leader.
    overlapped_append: bool,
}

impl LoneWrites {
    /// Follower: notes an AppendEntries about to be stepped, which
    /// carries `entries` entries after `prev_index`, sent when the leader's
    /// commit index was `leader_commit`. One without entries (a probe)
    /// says nothing.
    pub fn note_append(&mut self, entries: usize, prev_index: LogIndex, leader_commit: LogIndex) {
        if entries > 0 && !(entries == 1 && leader_commit == prev_index) {
            self.overlapped_append = true;
        }
    }

    /// Records one append. `lone` says whether its entry was the only one
    /// in the log not yet known committed. Returns true when the streak
    /// that this append completes or extends is long enough.
    pub fn observe(&mut self, lone: bool) -> bool {
        let overlapped = std::mem::take(&mut self.overlapped_append);
        if lone && !overlapped {
            self.streak = (self.streak + 1).min(LONE_STREAK_MIN);
        } else {
            self.streak = 0;
        }
        assert!(self.streak <= LONE_STREAK_MIN, "the streak is bounded");
        self.streak >= LONE_STREAK_MIN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_full_streak_of_lone_appends_is_taken_on_the_loop() {
        let mut lone = LoneWrites::default();
        for _ in 1..LONE_STREAK_MIN {
            assert!(!lone.observe(true));
        }
        assert!(lone.observe(true), "the streak is complete");
        assert!(lone.observe(true), "and stays so");
    }

    #[test]
    fn one_overlapping_append_starts_the_streak_again() {
        let mut lone = LoneWrites::default();
        for _ in 0..LONE_STREAK_MIN {
            lone.observe(true);
        }
        assert!(!lone.observe(false));
        for _ in 1..LONE_STREAK_MIN {
            assert!(!lone.observe(true));
        }
        assert!(lone.observe(true));
    }

    #[test]
    fn a_follower_counts_an_append_lone_only_when_it_was_lone_at_the_leader() {
        let mut lone = LoneWrites::default();
        for index in 1..LONE_STREAK_MIN as u64 {
            lone.note_append(1, LogIndex(index), LogIndex(index));
            assert!(!lone.observe(true));
        }
        lone.note_append(0, LogIndex(20), LogIndex(3));
        lone.note_append(1, LogIndex(20), LogIndex(20));
        assert!(
            lone.observe(true),
            "a probe says nothing; the streak is complete"
        );
        lone.note_append(1, LogIndex(21), LogIndex(20));
        assert!(
            !lone.observe(true),
            "entry 21 was uncommitted when 22 was sent"
        );
        for index in 0..LONE_STREAK_MIN as u64 {
            lone.note_append(2, LogIndex(30 + 2 * index), LogIndex(30 + 2 * index));
            assert!(!lone.observe(true), "two entries at once are two writers");
        }
        for _ in 1..LONE_STREAK_MIN {
            assert!(!lone.observe(true));
        }
        assert!(
            lone.observe(true),
            "the overlaps are forgotten once persisted"
        );
    }
}
