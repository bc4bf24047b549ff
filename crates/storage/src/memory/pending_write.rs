//! A write that was made but not yet synced.

use bellwether_core::raft::{Entry, HardState};

/// One staged write of a [`MemoryStorage`](super::MemoryStorage), kept in
/// order so that a crash can keep any prefix of them, as a disk would.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PendingWrite {
    /// Entries to append, possibly truncating a conflicting suffix first.
    Append(Vec<Entry>),
    /// A hard state to store.
    HardState(HardState),
}
