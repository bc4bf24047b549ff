//! What a Raft node hands to the application after persisting.

use super::entry::{Entry, Snapshot};
use crate::types::LogIndex;

/// Application-facing output, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RaftOutput {
    /// Apply this committed entry; entries arrive once each, in index order.
    Apply(Entry),
    /// The leader sent a snapshot that replaces this node's state: reset the
    /// state machine to it. Later `Apply` outputs follow its last index.
    Restore(Snapshot),
    /// The linearizable read `id` may be served once the state machine has
    /// applied `index` (ReadIndex, thesis §6.4, or a leader lease).
    ReadReady {
        /// The caller's id for the read.
        id: u64,
        /// Apply at least up to here, then read.
        index: LogIndex,
    },
    /// The read `id` cannot be confirmed here (leadership was lost); retry
    /// on the current leader.
    ReadFailed {
        /// The caller's id for the read.
        id: u64,
    },
}
