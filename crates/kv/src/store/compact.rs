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
        for key in self.to_compact.take_due(revision) {
            let Some(history) = self.keys.get_mut(&key) else {
                // Noted twice, and already gone with the first visit.
                continue;
            };
            let (empty, bytes) = history.compact(revision, key.len());
            dropped += bytes;
            if empty {
                self.keys.remove(&key);
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DeleteRangeRequest, PutRequest, RangeRequest};

    /// A small deterministic generator (xorshift), so a failure repeats.
    struct Dice(u64);

    impl Dice {
        fn roll(&mut self, sides: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % sides
        }
    }

    /// Whether a compaction at `revision` that visits every key would still
    /// find something to drop.
    fn anything_left_to_drop(store: &KvStore, revision: i64) -> Option<Vec<u8>> {
        store.keys.iter().find_map(|(key, history)| {
            let (empty, bytes) = history.clone().compact(revision, key.len());
            (empty || bytes > 0).then(|| key.clone())
        })
    }

    fn everything_at(store: &KvStore, revision: i64) -> Vec<(Vec<u8>, Vec<u8>)> {
        let request = RangeRequest {
            revision,
            ..RangeRequest::new(vec![0], vec![0])
        };
        let response = store.range(&request).unwrap();
        response
            .kvs
            .into_iter()
            .map(|kv| (kv.key, kv.value))
            .collect()
    }

    #[test]
    fn visiting_only_the_noted_keys_leaves_nothing_a_full_walk_would_drop() {
        for seed in 1..=40u64 {
            let mut dice = Dice(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut store = KvStore::new();
            // The same writes, never compacted: what reads must still see.
            let mut twin = KvStore::new();
            for step in 0..400 {
                let key = format!("k{}", dice.roll(12));
                if dice.roll(4) == 0 {
                    let delete = DeleteRangeRequest::new(key.as_bytes(), "");
                    store.delete_range(&delete).unwrap();
                    twin.delete_range(&delete).unwrap();
                } else {
                    let put = PutRequest::new(key.as_bytes(), format!("v{step}").as_bytes());
                    store.put(&put).unwrap();
                    twin.put(&put).unwrap();
                }
                if dice.roll(9) == 0 && store.revision() > store.compact_revision() + 1 {
                    let span = (store.revision() - store.compact_revision()) as u64;
                    let at = store.compact_revision() + 1 + dice.roll(span) as i64;
                    store.compact(at).unwrap();
                    assert_eq!(anything_left_to_drop(&store, at), None, "seed {seed}");
                    assert_eq!(store.size_bytes, store.count_size_bytes(), "seed {seed}");
                    for revision in at..=store.revision() {
                        assert_eq!(
                            everything_at(&store, revision),
                            everything_at(&twin, revision),
                            "seed {seed}, revision {revision}"
                        );
                    }
                }
                if step == 200 {
                    // A restored store notes its work from its histories.
                    store = KvStore::restore(&store.snapshot()).unwrap();
                }
            }
            let last = store.revision();
            store.compact(last).unwrap();
            assert_eq!(anything_left_to_drop(&store, last), None, "seed {seed}");
            assert_eq!(store.to_compact.len(), 0, "seed {seed}");
            assert!(store.keys.values().all(|h| h.revisions.len() == 1));
        }
    }
}
