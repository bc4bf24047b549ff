//! Compaction: forgetting history no read may need any more.
//!
//! After `compact(c)`, reads at revisions below `c` fail and watchers that
//! start below `c` are told to restart from `c`. The state as of `c` and
//! everything after it stay readable. The server decides when to compact
//! (etcd's auto-compaction policy); the store only carries it out, and the
//! command goes through the log so every replica compacts at the same point.

use super::KvStore;
use crate::KvError;

impl KvStore {
    /// Drops the history below `revision`. Does not advance the revision.
    ///
    /// Fails with [`KvError::Compacted`] if `revision` is not above the last
    /// compaction, and [`KvError::FutureRevision`] if it is past the current
    /// revision.
    pub fn compact(&mut self, revision: i64) -> Result<(), KvError> {
        if revision <= self.compact_revision {
            return Err(KvError::Compacted {
                compact_revision: self.compact_revision,
            });
        }
        if revision > self.revision {
            return Err(KvError::FutureRevision);
        }
        let mut dropped = 0;
        self.keys.retain(|key, history| {
            let (empty, bytes) = history.compact(revision, key.len());
            dropped += bytes;
            !empty
        });
        self.size_bytes = self
            .size_bytes
            .checked_sub(dropped)
            .expect("compaction dropped more than the store held");
        self.events.compact(revision);
        self.compact_revision = revision;
        assert!(self.compact_revision <= self.revision);
        Ok(())
    }
}
