//! Log entries and the cluster configuration they can carry (paper §5.3,
//! §6; thesis §4). Shared by the core, the storage crate and the simulator.

use crate::types::{LogIndex, NodeId, Term};
use std::collections::BTreeSet;

/// What an entry asks the state machine (or the cluster) to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Payload {
    /// Appended by a new leader so that it commits an entry of its own term
    /// at once (§5.4.2, §8). Applies to nothing.
    Noop,
    /// An opaque command for the state machine.
    Command(Vec<u8>),
    /// A new cluster configuration; it takes effect as soon as it is in the
    /// log, committed or not (thesis §4.1).
    Membership(ClusterConfig),
}

/// One log entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Term of the leader that created it.
    pub term: Term,
    /// Its position in the log.
    pub index: LogIndex,
    /// What it carries.
    pub payload: Payload,
}

impl Entry {
    /// Approximate size in bytes, for batch and flow-control limits.
    pub fn size_bytes(&self) -> usize {
        const HEADER_BYTES: usize = 24;
        HEADER_BYTES
            + match &self.payload {
                Payload::Noop => 0,
                Payload::Command(data) => data.len(),
                Payload::Membership(config) => 8 * (config.voters.len() + config.learners.len()),
            }
    }
}

/// Who votes and who only replicates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterConfig {
    /// Members whose votes count for elections and commitment.
    pub voters: BTreeSet<NodeId>,
    /// Members that receive the log but never vote (thesis §4.2.1); they are
    /// promoted once caught up.
    pub learners: BTreeSet<NodeId>,
}

impl ClusterConfig {
    /// A configuration of voters only.
    pub fn voters(ids: impl IntoIterator<Item = NodeId>) -> Self {
        ClusterConfig {
            voters: ids.into_iter().collect(),
            learners: BTreeSet::new(),
        }
    }

    /// Everyone who receives the log.
    pub fn members(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.voters.union(&self.learners).copied()
    }
}

/// What a snapshot stands for: the state after applying every entry up to
/// and including `last_index`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SnapshotMeta {
    /// Last entry the snapshot covers.
    pub last_index: LogIndex,
    /// Term of that entry.
    pub last_term: Term,
    /// Configuration in force at `last_index`.
    pub config: ClusterConfig,
}

/// A state-machine snapshot: metadata and opaque data.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// What it covers.
    pub meta: SnapshotMeta,
    /// The state machine's serialized state, shared: the node keeps the
    /// latest snapshot to send to lagging followers while the runtime
    /// writes the same bytes to disk, and a copy would hold a second image
    /// of the whole state in memory.
    pub data: std::sync::Arc<Vec<u8>>,
}
