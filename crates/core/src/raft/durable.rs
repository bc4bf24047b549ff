//! What a Raft node must find again after a crash (paper Figure 2,
//! "persistent state on all servers"), and the changes `ready()` asks the
//! runtime to persist.

use super::entry::{Entry, Snapshot};
use crate::types::{LogIndex, NodeId, Term};

/// Term and vote. Both must be on disk before any message that depends on
/// them leaves, or a restarted node could vote twice in one term.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HardState {
    /// Latest term this node has seen.
    pub term: Term,
    /// Candidate that received this node's vote in `term`, if any.
    pub voted_for: Option<NodeId>,
    /// The commit index when written (updated with every `Ready` in which
    /// it advanced). Not needed for safety, but lets a restarted node
    /// re-apply its log without waiting for a leader.
    pub commit: LogIndex,
}

/// Everything a Raft node persists, as storage hands it back on restart.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RaftDurable {
    /// Term, vote and a commit hint.
    pub hard_state: HardState,
    /// The latest snapshot, if the log was ever compacted.
    pub snapshot: Option<Snapshot>,
    /// Entries after the snapshot, contiguous.
    pub entries: Vec<Entry>,
}

/// One change to persist, in field order: snapshot, then entries, then hard
/// state. All of it must be durable (fsync) before the messages of the same
/// `Ready` are sent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RaftPersist {
    /// A snapshot that now covers the log up to its last index; entries up
    /// to there may be dropped.
    pub snapshot: Option<Snapshot>,
    /// Contiguous entries; if the first index is at or below the last stored
    /// one, storage truncates from there first (conflict resolution, §5.3).
    pub entries: Vec<Entry>,
    /// New term/vote/commit.
    pub hard_state: Option<HardState>,
}

impl RaftPersist {
    /// True when there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.snapshot.is_none() && self.entries.is_empty() && self.hard_state.is_none()
    }
}

impl RaftDurable {
    /// Applies `change` to this in-memory image of the disk.
    pub fn apply(&mut self, change: RaftPersist) {
        if let Some(snapshot) = change.snapshot {
            let last = snapshot.meta.last_index;
            let keeps_suffix = self
                .entries
                .iter()
                .any(|e| e.index == last && e.term == snapshot.meta.last_term);
            if keeps_suffix {
                self.entries.retain(|e| e.index > last);
            } else {
                self.entries.clear();
            }
            self.snapshot = Some(snapshot);
        }
        if let Some(first) = change.entries.first() {
            let base = self
                .snapshot
                .as_ref()
                .map_or(LogIndex(0), |s| s.meta.last_index);
            assert!(
                first.index > base,
                "entries {} overlap the snapshot at {base}",
                first.index
            );
            let next = LogIndex(base.0 + self.entries.len() as u64 + 1);
            assert!(
                first.index <= next,
                "gap before {} (next is {next})",
                first.index
            );
            self.entries.truncate((first.index.0 - base.0 - 1) as usize);
            self.entries.extend(change.entries);
        }
        if let Some(hard_state) = change.hard_state {
            assert!(
                hard_state.term >= self.hard_state.term,
                "terms never go back"
            );
            self.hard_state = hard_state;
        }
    }
}
