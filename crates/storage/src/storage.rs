//! The storage contract between the Raft runtime and a durable medium.
//!
//! The Raft paper (Figure 2) lists what every server must keep on stable
//! storage before it answers an RPC: the current term, the vote, and the log.
//! This trait says exactly when each write is durable, so the runtime can
//! order "persist, then send" (`ARCHITECTURE.md`, "Durability rules") without
//! knowing whether the medium is a WAL, a simulated disk or plain memory.

use crate::error::StorageError;
use crate::recovered::Recovered;
use bellwether_core::raft::{Entry, HardState, RaftPersist, Snapshot, SnapshotMeta};
use bellwether_core::LogIndex;

/// The durable sink of a Raft node, and its source on restart.
///
/// # Model
///
/// The core keeps the log in memory; storage only has to write what the core
/// hands it and give it back after a restart. Storage therefore holds:
///
/// - the latest [`HardState`] (term, vote, commit);
/// - the latest [`Snapshot`], if any;
/// - the log entries after that snapshot, contiguous.
///
/// # Durability and group commit
///
/// [`append`](Storage::append) and [`save_hard_state`](Storage::save_hard_state)
/// only *stage* writes. Nothing they write is guaranteed durable until a
/// later [`sync`](Storage::sync) returns `Ok`. The runtime must not send a
/// vote, acknowledge an append or answer a client on the strength of a write
/// until that sync has returned.
///
/// Staging several appends and hard-state saves and then calling `sync` once
/// is **group commit**: every write staged before the sync becomes durable
/// together, for the price of one fsync. Under load this is what makes the
/// throughput scale with the number of concurrent clients rather than with
/// the number of fsyncs the disk can do. `sync` with nothing staged costs
/// nothing, so the runtime may call it on every loop iteration.
///
/// # What a crash may leave
///
/// Writes become durable **in the order they were made**. After a crash,
/// recovery returns the state produced by some prefix of the writes that
/// contains at least every write made before the last successful `sync` (or
/// `save_snapshot`, or `compact`, which sync too). Within one `append`, a
/// prefix of its entries may survive. Nothing reordered, nothing invented.
///
/// # Errors
///
/// An IO error is returned with the path and the operation that failed. After
/// any IO error the storage is unusable: every later call fails with
/// [`StorageError::Poisoned`] until it is reopened and recovered, because
/// after a failed write or fsync the on-disk state is unknown (see the
/// PostgreSQL "fsyncgate" discussion). Data that was synced before the
/// failure is never lost by it.
///
/// # Contract violations
///
/// Calls that break the rules below are bugs in the caller, not runtime
/// conditions, and implementations panic on them (assertions stay on in
/// release builds): continuing would corrupt the log silently.
pub trait Storage {
    /// Reads back everything durable and returns it.
    ///
    /// Call it once after opening the storage (or, for
    /// [`MemoryStorage`](crate::MemoryStorage), after a simulated crash),
    /// before any write: it is also where a WAL repairs a torn tail, so it
    /// must run before anything is appended. The returned entries are
    /// contiguous and start right after the snapshot's `last_index` (or at
    /// index 1 without a snapshot). If the log on disk does not contain the
    /// snapshot's last entry with the snapshot's term (a crash hit between
    /// installing a snapshot and recording it in the log), the whole log is
    /// discarded, as Raft §7 prescribes for a conflicting snapshot.
    fn recover(&mut self) -> Result<Recovered, StorageError>;

    /// Stages `entries` for writing.
    ///
    /// `entries` must be contiguous, with terms that never decrease. The first
    /// index must be at most [`last_index`](Storage::last_index)` + 1` (no
    /// gaps) and above the snapshot's last index (a snapshot covers only
    /// committed entries, which never change). If the first index is at or
    /// below `last_index`, the stored suffix from that index on is replaced:
    /// this is Raft's conflict truncation (§5.3). An empty slice is a no-op.
    ///
    /// Returns [`StorageError::RecordTooLarge`] without writing anything when
    /// one entry is too large for the medium.
    fn append(&mut self, entries: &[Entry]) -> Result<(), StorageError>;

    /// Stages a new hard state. Its term never decreases, and within one term
    /// a vote, once cast, never changes: a second vote in the same term is
    /// exactly the bug durable votes exist to prevent.
    fn save_hard_state(&mut self, state: &HardState) -> Result<(), StorageError>;

    /// Stores a snapshot, durably and atomically: when this returns `Ok`, the
    /// snapshot and every write staged before it are durable, and a crash at
    /// any point leaves either the old snapshot or the new one, never a mix.
    ///
    /// Its last index must not be below the current snapshot's. Entries after
    /// it are kept when the log holds its last entry with the same term;
    /// otherwise the whole log is discarded (Raft §7, InstallSnapshot), and
    /// the next append starts right after the snapshot. Entries at or below
    /// the snapshot stay stored until [`compact`](Storage::compact) drops
    /// them, so that the runtime decides how much log to keep for slow
    /// followers.
    fn save_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), StorageError>;

    /// Drops entries up to and including `through`, which must not exceed the
    /// current snapshot's last index (those entries are covered by it).
    /// Implementations may keep some of them (a WAL deletes whole segments
    /// only). Syncs first, so that no staged write depends on what is dropped.
    fn compact(&mut self, through: LogIndex) -> Result<(), StorageError>;

    /// Makes every write staged so far durable (fsync). Cheap when nothing is
    /// staged. See "Durability and group commit" above.
    fn sync(&mut self) -> Result<(), StorageError>;

    /// Writes one `Ready`'s persist and makes it durable, in the one order
    /// every runtime uses: the snapshot first (so entries after it start a
    /// fresh log), then the entries, then the hard state (whose commit index
    /// may name the entries just written), then one fsync for all. Returns
    /// once everything is durable. What the same `Ready` sends waits for
    /// it, except messages that depend on nothing written here (a leader's
    /// appends to followers may leave during its own fsync; see the
    /// member's `sendable_before_persist`).
    fn persist(&mut self, persist: &RaftPersist) -> Result<(), StorageError> {
        if let Some(snapshot) = &persist.snapshot {
            self.save_snapshot(snapshot)?;
        }
        if !persist.entries.is_empty() {
            self.append(&persist.entries)?;
        }
        if let Some(hard_state) = &persist.hard_state {
            self.save_hard_state(hard_state)?;
        }
        self.sync()
    }

    /// Index of the last stored entry, synced or not: the snapshot's last
    /// index when no entry follows it, and 0 for an empty log.
    fn last_index(&self) -> LogIndex;

    /// The hard state most recently saved, synced or not.
    fn hard_state(&self) -> HardState;

    /// What the current snapshot covers, if there is one.
    fn snapshot_meta(&self) -> Option<&SnapshotMeta>;
}
