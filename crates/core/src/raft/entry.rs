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
    /// The state machine's serialized state (see [`SnapshotData`]).
    pub data: SnapshotData,
}

/// A snapshot's bytes: in memory while the member restores or writes
/// them, then, once the runtime has them in a synced file, that file.
///
/// The node keeps its latest snapshot to send to lagging followers. Kept
/// in memory, it was a second image of the whole state: at a million keys
/// about 400 MB beside the store itself, held from one snapshot to the
/// next. Once the runtime has written the bytes, it hands the node a
/// [`StoredSnapshot`] ([`RaftNode::snapshot_stored`](super::RaftNode::snapshot_stored)),
/// and the node reads each chunk it sends from there. Clones share the
/// bytes.
#[derive(Clone)]
pub enum SnapshotData {
    /// Held in memory.
    Memory(std::sync::Arc<Vec<u8>>),
    /// In a file the runtime wrote and synced.
    Stored(std::sync::Arc<dyn StoredSnapshot>),
}

/// Snapshot bytes that the runtime keeps outside memory (a file beside
/// the log), read a chunk at a time.
pub trait StoredSnapshot: Send + Sync {
    /// Their length.
    fn len(&self) -> u64;
    /// Whether there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The bytes in `start..end` (within `0..len()`). The runtime wrote
    /// and synced them; one it can no longer read is a failed disk, and
    /// it stops the member rather than send anything else.
    fn read(&self, start: u64, end: u64) -> Vec<u8>;
}

impl SnapshotData {
    /// Their length in bytes.
    pub fn len(&self) -> u64 {
        match self {
            SnapshotData::Memory(bytes) => bytes.len() as u64,
            SnapshotData::Stored(stored) => stored.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes in `start..end`, clamped to the data.
    pub fn read(&self, start: u64, end: u64) -> Vec<u8> {
        let end = end.min(self.len());
        let start = start.min(end);
        match self {
            SnapshotData::Memory(bytes) => bytes[start as usize..end as usize].to_vec(),
            SnapshotData::Stored(stored) => {
                let chunk = stored.read(start, end);
                assert_eq!(
                    chunk.len() as u64,
                    end - start,
                    "a stored snapshot reads whole chunks"
                );
                chunk
            }
        }
    }

    /// The bytes, held in memory: a snapshot is restored and written only
    /// before it is stored, so a stored one here is a bug.
    pub fn bytes(&self) -> &[u8] {
        match self {
            SnapshotData::Memory(bytes) => bytes,
            SnapshotData::Stored(_) => {
                panic!("a snapshot's bytes are asked for after they went to a file")
            }
        }
    }

    /// Whether they are held in memory.
    pub fn in_memory(&self) -> bool {
        matches!(self, SnapshotData::Memory(_))
    }
}

impl From<Vec<u8>> for SnapshotData {
    fn from(bytes: Vec<u8>) -> Self {
        SnapshotData::Memory(std::sync::Arc::new(bytes))
    }
}

impl Default for SnapshotData {
    fn default() -> Self {
        SnapshotData::from(Vec::new())
    }
}

impl std::fmt::Debug for SnapshotData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SnapshotData::Memory(bytes) => write!(f, "Memory({} bytes)", bytes.len()),
            SnapshotData::Stored(stored) => write!(f, "Stored({} bytes)", stored.len()),
        }
    }
}

/// Equal bytes are equal data; stored data is read whole to compare
/// (tests and assertions only compare small snapshots).
impl PartialEq for SnapshotData {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.read(0, self.len()) == other.read(0, other.len())
    }
}

impl Eq for SnapshotData {}
