//! What a restarted node gets back from storage.

use bellwether_core::raft::{Entry, HardState, Snapshot};
use bellwether_core::LogIndex;

/// The durable state of a node as found on restart: everything the core
/// needs to rebuild itself (paper Figure 2, "persistent state").
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Term, vote and commit as last saved. `commit` may lag the snapshot's
    /// last index; entries covered by a snapshot are committed regardless.
    pub hard_state: HardState,
    /// The newest complete snapshot, from which the state machine restarts.
    pub snapshot: Option<Snapshot>,
    /// The log after the snapshot: contiguous, starting at the snapshot's
    /// `last_index + 1`, or at index 1 without a snapshot.
    pub entries: Vec<Entry>,
}

impl Recovered {
    /// Index of the last entry the recovered log holds, counting the
    /// snapshot as holding its last entry.
    pub fn last_index(&self) -> LogIndex {
        match (self.entries.last(), &self.snapshot) {
            (Some(entry), _) => entry.index,
            (None, Some(snapshot)) => snapshot.meta.last_index,
            (None, None) => LogIndex(0),
        }
    }

    /// Index the entries start at: right after the snapshot, or 1.
    pub fn first_entry_index(&self) -> LogIndex {
        let snapshot_index = self
            .snapshot
            .as_ref()
            .map_or(0, |snapshot| snapshot.meta.last_index.0);
        LogIndex(snapshot_index + 1)
    }

    /// Panics unless the entries are contiguous and start right after the
    /// snapshot: the shape every implementation promises.
    pub fn assert_well_formed(&self) {
        let first = self.first_entry_index();
        for (offset, entry) in self.entries.iter().enumerate() {
            assert_eq!(
                entry.index.0,
                first.0 + offset as u64,
                "recovered entries must be contiguous from {first}"
            );
        }
        assert!(
            self.entries
                .windows(2)
                .all(|pair| pair[0].term <= pair[1].term),
            "recovered entry terms must never decrease"
        );
    }
}
