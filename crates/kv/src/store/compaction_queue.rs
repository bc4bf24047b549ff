//! [`CompactionQueue`]: the keys a compaction has to visit.
//!
//! Only a key whose history holds a write that a later write superseded, or
//! a tombstone, has anything for a compaction to drop, and it got that way
//! by that later write or by the delete. The store notes the revision and
//! key of each such write, and a compaction at `c` visits the keys noted up
//! to `c`, not every key in the store.
//!
//! Walking every key instead cost a fifth of a busy leader's CPU under
//! `bellwether bench tasks`: the leader compacts every thousand revisions,
//! and a task queue leaves two keys behind for every task it ran.

use crate::key_history::KeyMap;
use std::collections::VecDeque;

/// Writes that left something for a compaction to drop, in revision order.
#[derive(Clone, Debug, Default)]
pub(crate) struct CompactionQueue {
    /// (revision, key) of each such write, oldest first.
    writes: VecDeque<(i64, Vec<u8>)>,
}

impl CompactionQueue {
    /// Notes that `key` was written at `revision` over an older write, or
    /// deleted: a compaction at `revision` or later may drop something.
    pub(crate) fn note(&mut self, revision: i64, key: &[u8]) {
        if let Some((last, _)) = self.writes.back() {
            assert!(revision >= *last, "writes noted out of revision order");
        }
        self.writes.push_back((revision, key.to_vec()));
    }

    /// Takes the keys noted at `revision` or before: those a compaction at
    /// `revision` must visit. A key may come more than once.
    pub(crate) fn take_due(&mut self, revision: i64) -> Vec<Vec<u8>> {
        let due = self.writes.partition_point(|(noted, _)| *noted <= revision);
        self.writes.drain(..due).map(|(_, key)| key).collect()
    }

    /// The queue for histories read back from a snapshot: every write that
    /// is not its key's first, and every tombstone.
    pub(crate) fn of(keys: &KeyMap) -> CompactionQueue {
        let mut writes: Vec<(i64, Vec<u8>)> = keys
            .iter()
            .flat_map(|(key, history)| {
                history
                    .revisions
                    .iter()
                    .enumerate()
                    .filter(|(index, entry)| *index > 0 || entry.kv.is_none())
                    .map(|(_, entry)| (entry.revision, key.clone()))
            })
            .collect();
        writes.sort_unstable();
        CompactionQueue {
            writes: writes.into(),
        }
    }

    /// Writes noted and not yet taken.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.writes.len()
    }
}

/// The queue is a schedule of work, not part of the store's state: two
/// stores with the same history are equal whichever work each has noted
/// (a restored store notes only what its histories still hold).
impl PartialEq for CompactionQueue {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl Eq for CompactionQueue {}
