//! One revision of puts and deletes decided outside the store: for state
//! machines layered on the keyspace (ZooKeeper's tree), whose one write
//! becomes several keys. Unlike a txn, it has no operation count bound:
//! the log entry that caused it is bounded instead, and a session's end,
//! which may delete many ephemeral nodes, must never be refused.

use super::KvStore;
use crate::{KeyRange, KvError, PutRequest};
use std::collections::BTreeSet;

impl KvStore {
    /// Applies `puts` and deletes the live keys `deletes` names, all at the
    /// next revision, or nothing if a put is refused (an unknown lease,
    /// say). Each key appears once. Returns the store's revision after.
    pub fn write_batch(
        &mut self,
        puts: &[PutRequest],
        deletes: &[Vec<u8>],
    ) -> Result<i64, KvError> {
        let mut keys = BTreeSet::new();
        for key in puts.iter().map(|p| &p.key).chain(deletes) {
            assert!(keys.insert(key), "a batch names a key twice");
        }
        for put in puts {
            self.check_put(put)?;
        }
        let mut pending = self.begin_write();
        for put in puts {
            self.apply_put(put, &mut pending);
        }
        for key in deletes {
            self.apply_delete(&KeyRange::single(key.clone()), false, &mut pending);
        }
        Ok(self.finish_write(pending))
    }
}
