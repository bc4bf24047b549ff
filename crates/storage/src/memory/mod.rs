//! A [`Storage`] that lives in memory, for the simulator and the in-memory
//! benchmark, which still loses exactly what a real disk could lose.
//!
//! It keeps the synced state (a [`MemoryImage`]) and, separately, the writes
//! staged since the last sync, in order. [`MemoryStorage::crash`] drops the
//! staged writes, which is how the simulator models a power loss on a node
//! whose runtime had not yet fsync'd; [`MemoryStorage::crash_keeping`] keeps
//! a prefix of them, as a disk that wrote some of its cache back would.
//! Staging costs one clone of the entries and no copying of the log, and a
//! sync moves staged entries into the image without cloning them again.

mod image;
mod pending_write;

use crate::contract;
use crate::error::StorageError;
use crate::recovered::Recovered;
use crate::storage::Storage;
use bellwether_core::raft::{Entry, HardState, Snapshot, SnapshotMeta};
use bellwether_core::{LogIndex, Term};
use image::MemoryImage;
use pending_write::PendingWrite;

/// Most staged writes a [`MemoryStorage`] holds. When a write would exceed
/// it, all staged writes are applied first, as an operating system writes
/// dirty pages back on its own; this bounds memory when a runtime stages
/// without syncing, and is allowed by the contract (nothing says unsynced
/// data must be lost).
pub const PENDING_WRITES_MAX: usize = 4096;

/// An in-memory [`Storage`] that tells synced from unsynced writes.
#[derive(Clone, Debug, Default)]
pub struct MemoryStorage {
    /// What survives [`MemoryStorage::crash`].
    durable: MemoryImage,
    /// Writes staged since the last sync, oldest first; at most
    /// [`PENDING_WRITES_MAX`].
    pending: Vec<PendingWrite>,
    /// Last index of the current view (durable plus staged), kept so that
    /// queries never replay `pending`.
    last_index: LogIndex,
    /// Term of the entry at `last_index`, for the contract check that terms
    /// never decrease.
    last_term: Term,
    /// Hard state of the current view.
    hard_state: HardState,
}

impl MemoryStorage {
    /// An empty store: no entries, default hard state, no snapshot.
    pub fn new() -> Self {
        MemoryStorage::default()
    }

    /// Simulates a power loss: every write staged since the last sync is
    /// lost. Call [`Storage::recover`] afterwards to restart the node.
    pub fn crash(&mut self) {
        self.crash_keeping(0);
    }

    /// Simulates a power loss after the disk had written back the first
    /// `writes` staged writes (in order) and none of the rest.
    pub fn crash_keeping(&mut self, writes: usize) {
        let kept = writes.min(self.pending.len());
        let staged: Vec<PendingWrite> = self.pending.drain(..kept).collect();
        for write in staged {
            self.durable.apply(write);
        }
        self.pending.clear();
        self.refresh_view();
    }

    /// Term of the entry at `index` in the synced state, if stored; for
    /// tests and checkers that compare logs.
    pub fn synced_term_at(&self, index: LogIndex) -> Option<Term> {
        self.durable.term_at(index)
    }

    /// Writes staged since the last sync: what a crash now could lose.
    pub fn pending_writes(&self) -> usize {
        self.pending.len()
    }

    fn refresh_view(&mut self) {
        assert!(
            self.pending.is_empty(),
            "the view is rebuilt from the image alone"
        );
        self.last_index = self.durable.last_index();
        self.last_term = self.durable.last_term();
        self.hard_state = self.durable.hard_state;
    }

    fn stage(&mut self, write: PendingWrite) {
        if self.pending.len() >= PENDING_WRITES_MAX {
            self.apply_pending();
        }
        self.pending.push(write);
        assert!(self.pending.len() <= PENDING_WRITES_MAX);
    }

    fn apply_pending(&mut self) {
        for write in std::mem::take(&mut self.pending) {
            self.durable.apply(write);
        }
        assert_eq!(
            self.durable.last_index(),
            self.last_index,
            "view matches image"
        );
    }
}

impl Storage for MemoryStorage {
    fn recover(&mut self) -> Result<Recovered, StorageError> {
        // A restart without a crash loses nothing: staged writes had reached
        // the (simulated) operating system.
        self.apply_pending();
        self.refresh_view();
        Ok(self.durable.recovered())
    }

    fn append(&mut self, entries: &[Entry]) -> Result<(), StorageError> {
        let Some(last) = entries.last() else {
            return Ok(());
        };
        let extends = entries[0].index.0 == self.last_index.0 + 1;
        let previous_term = extends.then_some(self.last_term);
        let snapshot_index = self.durable.snapshot_index();
        contract::check_append(entries, self.last_index, snapshot_index, previous_term);
        self.stage(PendingWrite::Append(entries.to_vec()));
        self.last_index = last.index;
        self.last_term = last.term;
        Ok(())
    }

    fn save_hard_state(&mut self, state: &HardState) -> Result<(), StorageError> {
        contract::check_hard_state(&self.hard_state, state);
        if *state != self.hard_state {
            self.stage(PendingWrite::HardState(*state));
            self.hard_state = *state;
        }
        Ok(())
    }

    fn save_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), StorageError> {
        contract::check_snapshot(self.durable.snapshot_index(), snapshot.meta.last_index);
        // Everything staged before the snapshot becomes durable before it,
        // as with the WAL, so a crash never keeps the snapshot but loses
        // writes made before it.
        self.apply_pending();
        self.durable.install_snapshot(snapshot);
        self.refresh_view();
        Ok(())
    }

    fn compact(&mut self, through: LogIndex) -> Result<(), StorageError> {
        contract::check_compact(through, self.durable.snapshot_index());
        self.apply_pending();
        self.durable.compact(through);
        Ok(())
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        if !self.pending.is_empty() {
            self.apply_pending();
        }
        Ok(())
    }

    fn last_index(&self) -> LogIndex {
        self.last_index
    }

    fn hard_state(&self) -> HardState {
        self.hard_state
    }

    fn snapshot_meta(&self) -> Option<&SnapshotMeta> {
        self.durable
            .snapshot
            .as_ref()
            .map(|snapshot| &snapshot.meta)
    }
}
