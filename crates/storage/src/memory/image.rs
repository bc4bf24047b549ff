//! What a [`MemoryStorage`](super::MemoryStorage) would find on its
//! "disk" after a crash: the synced state.

use super::pending_write::PendingWrite;
use crate::recovered::Recovered;
use bellwether_core::raft::{Entry, HardState, Snapshot};
use bellwether_core::{LogIndex, Term};
use std::collections::VecDeque;

/// The synced state of a memory store.
#[derive(Clone, Debug, Default)]
pub(crate) struct MemoryImage {
    /// Latest synced hard state.
    pub(crate) hard_state: HardState,
    /// Latest snapshot (snapshots are durable as soon as they are saved).
    pub(crate) snapshot: Option<Snapshot>,
    /// Index of the entry just before `entries[0]`: 0 at first, then the
    /// last compacted entry, or the snapshot's last entry after the log was
    /// reset to it.
    anchor_index: LogIndex,
    /// Term of the entry at `anchor_index`, so that a snapshot there can be
    /// matched against the log (Raft §7).
    anchor_term: Term,
    /// Entries `anchor_index + 1 ..`, contiguous. A deque because
    /// compaction pops from the front.
    entries: VecDeque<Entry>,
}

impl MemoryImage {
    /// Index of the last entry (the anchor when there is none).
    pub(crate) fn last_index(&self) -> LogIndex {
        LogIndex(self.anchor_index.0 + self.entries.len() as u64)
    }

    /// Term of the last entry (the anchor's when there is none).
    pub(crate) fn last_term(&self) -> Term {
        self.entries
            .back()
            .map_or(self.anchor_term, |entry| entry.term)
    }

    /// Term of the entry at `index`, if it is stored.
    pub(crate) fn term_at(&self, index: LogIndex) -> Option<Term> {
        if index == self.anchor_index {
            return Some(self.anchor_term);
        }
        let offset = index.0.checked_sub(self.anchor_index.0 + 1)?;
        self.entries.get(offset as usize).map(|entry| entry.term)
    }

    /// Index of the snapshot's last entry, 0 without one.
    pub(crate) fn snapshot_index(&self) -> LogIndex {
        self.snapshot
            .as_ref()
            .map_or(LogIndex(0), |snapshot| snapshot.meta.last_index)
    }

    /// Applies one staged write.
    pub(crate) fn apply(&mut self, write: PendingWrite) {
        match write {
            PendingWrite::Append(entries) => self.append(entries),
            PendingWrite::HardState(state) => self.hard_state = state,
        }
    }

    fn append(&mut self, entries: Vec<Entry>) {
        let first = entries[0].index;
        assert!(
            first > self.anchor_index && first.0 <= self.last_index().0 + 1,
            "staged appends were checked against the current view"
        );
        let keep = first.0 - self.anchor_index.0 - 1;
        self.entries.truncate(keep as usize);
        self.entries.extend(entries);
        assert_eq!(
            self.entries.back().map(|e| e.index),
            Some(self.last_index())
        );
    }

    /// Stores a snapshot: keeps the entries after it if the log holds its
    /// last entry with the same term, and otherwise discards the whole log
    /// (Raft §7).
    pub(crate) fn install_snapshot(&mut self, snapshot: &Snapshot) {
        let meta = &snapshot.meta;
        assert!(
            meta.last_index >= self.snapshot_index(),
            "snapshots only move forward"
        );
        if self.term_at(meta.last_index) != Some(meta.last_term) {
            self.entries.clear();
            self.anchor_index = meta.last_index;
            self.anchor_term = meta.last_term;
        }
        self.snapshot = Some(snapshot.clone());
    }

    /// Drops entries up to and including `through`.
    pub(crate) fn compact(&mut self, through: LogIndex) {
        assert!(
            through <= self.snapshot_index(),
            "only snapshotted entries are dropped"
        );
        while let Some(front) = self.entries.front() {
            if front.index > through {
                break;
            }
            self.anchor_index = front.index;
            self.anchor_term = front.term;
            self.entries.pop_front();
        }
    }

    /// The state a restart would find.
    pub(crate) fn recovered(&self) -> Recovered {
        let snapshot_index = self.snapshot_index();
        let entries = self
            .entries
            .iter()
            .filter(|entry| entry.index > snapshot_index)
            .cloned()
            .collect();
        let recovered = Recovered {
            hard_state: self.hard_state,
            snapshot: self.snapshot.clone(),
            entries,
        };
        recovered.assert_well_formed();
        recovered
    }
}
