//! Following an election's leader through the store's event history, for
//! `Election/Observe`. Pure: it reads a [`KvStore`] and says what to send.
//!
//! The rules are etcd's (`concurrency.Election.Observe`):
//! - with no leader, the first key put under the prefix becomes the leader
//!   and is reported at its own revision;
//! - while a key leads, every put to it is reported (a proclaim, even of the
//!   same value), at the put's revision;
//! - when the leading key is deleted, the store is read again at its current
//!   revision: the key with the lowest create revision, if any, is the new
//!   leader and is reported at that revision. Changes in between are not
//!   replayed, only the latest state, as etcd's fresh read does.
//!
//! The observer reads a member's applied store, which is a prefix of the
//! committed history, so what it reports is in revision order and never
//! ahead of the cluster; a member that is behind reports later.

use super::campaign::first_created;
use bellwether_kv::{EventKind, KeyRange, KeyValue, KvStore};
use std::sync::Arc;

/// One leader state to report: the leader's key-value at `revision`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sighting {
    /// The leader's key-value.
    pub kv: KeyValue,
    /// The revision for the response header.
    pub revision: i64,
}

/// The leader an observer follows.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Followed {
    /// The leading key.
    key: Vec<u8>,
    /// Its mod revision when last reported, to tell whether a fresh read
    /// after a gap shows anything new.
    mod_revision: i64,
}

/// An observer of one election.
#[derive(Clone, Debug)]
pub struct LeaderObserver {
    /// `name/`.
    prefix: Vec<u8>,
    /// Every key under the prefix.
    range: KeyRange,
    /// The leader last reported; `None` while there is no leader.
    leader: Option<Followed>,
    /// Every event at or below this revision has been handled.
    cursor: i64,
}

impl LeaderObserver {
    /// An observer that has reported `leader` (or found none) as of
    /// `revision`.
    pub fn new(prefix: Vec<u8>, leader: Option<(&[u8], i64)>, revision: i64) -> Self {
        LeaderObserver {
            range: KeyRange::prefix(prefix.clone()),
            prefix,
            leader: leader.map(|(key, mod_revision)| Followed {
                key: key.to_vec(),
                mod_revision,
            }),
            cursor: revision,
        }
    }

    /// Handles what `store` applied since the last step; returns at most
    /// `sightings_max` reports, in order. If it returns that many, more
    /// may be waiting: step again without waiting for a new revision.
    pub fn step(&mut self, store: &KvStore, sightings_max: usize) -> Vec<Sighting> {
        assert!(sightings_max > 0, "a step must be able to report");
        let events = match store.events_since(self.cursor + 1, &self.range) {
            Ok(events) => events,
            // The history the observer needed is gone (compaction, the
            // bounded event log): report the current state if it differs
            // from the last report.
            Err(_) => return self.resync(store),
        };
        let mut sightings = Vec::new();
        for event in events {
            if sightings.len() == sightings_max {
                return sightings;
            }
            let revision = event.revision();
            if revision <= self.cursor {
                continue;
            }
            match (&self.leader, event.kind) {
                (None, EventKind::Put) => {
                    sightings.push(self.report(Arc::unwrap_or_clone(event.kv), revision))
                }
                (Some(leader), EventKind::Put) if leader.key == event.kv.key => {
                    sightings.push(self.report(Arc::unwrap_or_clone(event.kv), revision));
                }
                (Some(leader), EventKind::Delete) if leader.key == event.kv.key => {
                    sightings.extend(self.resync(store));
                }
                _ => {}
            }
        }
        self.cursor = self.cursor.max(store.revision());
        sightings
    }

    /// Follows `kv` from `revision` on and reports it.
    fn report(&mut self, kv: KeyValue, revision: i64) -> Sighting {
        self.leader = Some(Followed {
            key: kv.key.clone(),
            mod_revision: kv.mod_revision,
        });
        self.cursor = revision;
        Sighting { kv, revision }
    }

    /// Reads the leader afresh at the store's revision and reports it if it
    /// is not what was last reported.
    fn resync(&mut self, store: &KvStore) -> Vec<Sighting> {
        let revision = store.revision();
        self.cursor = revision;
        let Some(kv) = first_created(store, &self.prefix) else {
            self.leader = None;
            return Vec::new();
        };
        let known = self
            .leader
            .as_ref()
            .is_some_and(|leader| leader.key == kv.key && leader.mod_revision == kv.mod_revision);
        if known {
            return Vec::new();
        }
        vec![self.report(kv, revision)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellwether_kv::{DeleteRangeRequest, PutRequest};

    fn put(store: &mut KvStore, key: &str, value: &str) -> i64 {
        store.put(&PutRequest::new(key, value)).unwrap();
        store.revision()
    }

    fn delete(store: &mut KvStore, key: &str) -> i64 {
        store
            .delete_range(&DeleteRangeRequest::new(key, ""))
            .unwrap();
        store.revision()
    }

    fn seen(sightings: &[Sighting]) -> Vec<(String, String, i64)> {
        sightings
            .iter()
            .map(|s| {
                let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                (text(&s.kv.key), text(&s.kv.value), s.revision)
            })
            .collect()
    }

    fn owned(list: &[(&str, &str, i64)]) -> Vec<(String, String, i64)> {
        list.iter()
            .map(|(k, v, r)| (k.to_string(), v.to_string(), *r))
            .collect()
    }

    #[test]
    fn with_no_leader_the_first_put_under_the_prefix_leads() {
        let mut store = KvStore::new();
        let mut observer = LeaderObserver::new(b"e/".to_vec(), None, store.revision());
        put(&mut store, "other", "x");
        assert!(observer.step(&store, 8).is_empty());
        let a = put(&mut store, "e/a", "1");
        put(&mut store, "e/b", "2");
        assert_eq!(seen(&observer.step(&store, 8)), owned(&[("e/a", "1", a)]));
    }

    #[test]
    fn every_put_to_the_leader_is_reported_and_others_are_not() {
        let mut store = KvStore::new();
        let created = put(&mut store, "e/a", "1");
        let mut observer = LeaderObserver::new(b"e/".to_vec(), Some((b"e/a", created)), created);
        put(&mut store, "e/b", "x");
        let second = put(&mut store, "e/a", "2");
        let same = put(&mut store, "e/a", "2");
        assert_eq!(
            seen(&observer.step(&store, 8)),
            owned(&[("e/a", "2", second), ("e/a", "2", same)])
        );
        assert!(observer.step(&store, 8).is_empty(), "nothing twice");
    }

    #[test]
    fn a_deleted_leader_is_followed_by_the_oldest_key_at_that_time() {
        let mut store = KvStore::new();
        let created = put(&mut store, "e/a", "1");
        let mut observer = LeaderObserver::new(b"e/".to_vec(), Some((b"e/a", created)), created);
        put(&mut store, "e/b", "2");
        put(&mut store, "e/c", "3");
        delete(&mut store, "e/a");
        put(&mut store, "e/b", "2b");
        let now = delete(&mut store, "e/c");
        // One fresh read at the current revision: e/b with its latest value,
        // and its later put is not reported again.
        assert_eq!(
            seen(&observer.step(&store, 8)),
            owned(&[("e/b", "2b", now)])
        );
        let gone = delete(&mut store, "e/b");
        assert!(observer.step(&store, 8).is_empty(), "no leader: nothing");
        assert_eq!(observer.leader, None);
        assert_eq!(observer.cursor, gone);
        let d = put(&mut store, "e/d", "4");
        assert_eq!(seen(&observer.step(&store, 8)), owned(&[("e/d", "4", d)]));
    }

    #[test]
    fn a_full_batch_leaves_the_rest_for_the_next_step() {
        let mut store = KvStore::new();
        let created = put(&mut store, "e/a", "0");
        let mut observer = LeaderObserver::new(b"e/".to_vec(), Some((b"e/a", created)), created);
        let revisions: Vec<i64> = (1..=5)
            .map(|i| put(&mut store, "e/a", &i.to_string()))
            .collect();
        let first = observer.step(&store, 2);
        let second = observer.step(&store, 2);
        let third = observer.step(&store, 2);
        let all: Vec<i64> = [first, second, third]
            .concat()
            .iter()
            .map(|s| s.revision)
            .collect();
        assert_eq!(all, revisions);
    }
}
