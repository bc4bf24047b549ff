//! The MVCC history of one key: every revision that wrote it, so that reads
//! at an older revision see the state as of that revision until compaction
//! removes it.

use crate::KeyValue;
use std::sync::Arc;

/// Every key with retained history, in key order. A persistent map: a
/// clone shares every node with the original and costs a pointer, and a
/// write to either copies only the nodes on its path that are still
/// shared. So a snapshot clones the keys on the member's loop in constant
/// time and encodes them on another thread, while applies go on.
pub(crate) type KeyMap = imbl::OrdMap<Vec<u8>, KeyHistory>;

/// One write to a key: the new state, or `None` for a delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeyRevision {
    /// The revision of the write.
    pub(crate) revision: i64,
    /// The state after the write; `None` is a tombstone. Shared with the
    /// watch events of the write and the next, so a put copies its key
    /// and value once rather than once per place that records them.
    pub(crate) kv: Option<Arc<KeyValue>>,
}

/// All retained writes to one key, oldest first.
///
/// Invariant: revisions strictly increase, because the txn duplicate-key
/// check allows at most one write per key per revision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct KeyHistory {
    /// The writes, oldest first. After compaction at `c`, the first entry is
    /// the key's live state as of `c` (never a tombstone), or a write after
    /// `c`.
    pub(crate) revisions: Vec<KeyRevision>,
}

impl KeyHistory {
    /// A history of one write, in an allocation of one: most keys are
    /// written once, and a default `Vec` grows to four on its first push
    /// (48 bytes a key wasted, 46 MiB at a million keys).
    pub(crate) fn with_capacity(writes: usize) -> Self {
        KeyHistory {
            revisions: Vec::with_capacity(writes),
        }
    }

    /// The key's state as of `revision`, or `None` if it did not exist then.
    pub(crate) fn at(&self, revision: i64) -> Option<&KeyValue> {
        let after = self
            .revisions
            .partition_point(|entry| entry.revision <= revision);
        after
            .checked_sub(1)
            .and_then(|index| self.revisions[index].kv.as_deref())
    }

    /// The key's newest state, or `None` if it is deleted.
    pub(crate) fn latest(&self) -> Option<&KeyValue> {
        self.revisions.last().and_then(|entry| entry.kv.as_deref())
    }

    /// The key's newest state, shared, or `None` if it is deleted.
    pub(crate) fn latest_shared(&self) -> Option<&Arc<KeyValue>> {
        self.revisions.last().and_then(|entry| entry.kv.as_ref())
    }

    /// Records a write at `revision`. A tombstone is `None`.
    pub(crate) fn push(&mut self, revision: i64, kv: Option<Arc<KeyValue>>) {
        if let Some(last) = self.revisions.last() {
            assert!(
                revision > last.revision,
                "key written twice at revision {revision}"
            );
        }
        if let Some(kv) = &kv {
            assert_eq!(
                kv.mod_revision, revision,
                "mod_revision differs from write revision"
            );
        }
        self.revisions.push(KeyRevision { revision, kv });
    }

    /// The bytes the retained writes count for in the store's size; the
    /// key is `key_bytes` long.
    pub(crate) fn size_bytes(&self, key_bytes: usize) -> u64 {
        self.revisions
            .iter()
            .map(|entry| entry.size_bytes(key_bytes))
            .sum()
    }

    /// Drops the writes no read at `revision` or later can see. Returns
    /// whether nothing is left (the key can be forgotten) and the bytes
    /// dropped, counted as [`KeyHistory::size_bytes`] counts them.
    pub(crate) fn compact(&mut self, revision: i64, key_bytes: usize) -> (bool, u64) {
        let after = self
            .revisions
            .partition_point(|entry| entry.revision <= revision);
        // Keep the newest write at or below `revision` if it is a live value:
        // it is what reads at `revision` see. A tombstone there is not needed.
        let keep_from = match after.checked_sub(1) {
            Some(index) if self.revisions[index].kv.is_some() => index,
            _ => after,
        };
        let dropped = self
            .revisions
            .drain(..keep_from)
            .map(|entry| entry.size_bytes(key_bytes))
            .sum();
        if self.revisions.capacity() > 2 * self.revisions.len().max(1) {
            // What a key updated often and then compacted keeps.
            self.revisions.shrink_to_fit();
        }
        if let Some(first) = self.revisions.first() {
            assert!(
                first.kv.is_some() || first.revision > revision,
                "tombstone survived compaction"
            );
        }
        (self.revisions.is_empty(), dropped)
    }
}

impl KeyRevision {
    /// What this write counts for in the store's size.
    fn size_bytes(&self, key_bytes: usize) -> u64 {
        let value_bytes = self.kv.as_ref().map_or(0, |kv| kv.value.len());
        crate::store::revision_bytes(key_bytes, value_bytes)
    }
}
