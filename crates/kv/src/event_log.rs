//! The bounded log of recent watch events, grouped by revision.
//!
//! The watch service reads it with [`KvStore::events_since`](crate::KvStore::events_since).
//! It holds every event from `first_revision` on. It shrinks in two ways,
//! both dropping whole revisions so that a watcher never sees half a txn:
//! compaction drops revisions below the compact revision, and the bound
//! [`EVENT_LOG_EVENTS_MAX`] drops the oldest revisions. Either way a watcher
//! that asks for a dropped revision gets [`KvError::Compacted`] naming the
//! first revision still held, and restarts from there.

use crate::{Event, EventKind, KeyRange, KvError, EVENT_LOG_EVENTS_MAX};
use std::collections::VecDeque;
use std::sync::Arc;

/// The events of one write revision, in the order they were applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RevisionEvents {
    /// The write's revision.
    pub(crate) revision: i64,
    /// Its events, at least one. Shared, so a snapshot clones the log for
    /// a pointer per revision.
    pub(crate) events: Arc<Vec<Event>>,
}

/// Recent events, oldest revision first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EventLog {
    /// Revisions with events, strictly increasing.
    pub(crate) revisions: VecDeque<RevisionEvents>,
    /// Total events in `revisions`, kept to enforce the bound cheaply.
    pub(crate) events_count: usize,
    /// Every event with a revision at or above this one is held.
    pub(crate) first_revision: i64,
}

impl EventLog {
    /// An empty log that holds everything from `first_revision` on.
    pub(crate) fn new(first_revision: i64) -> Self {
        EventLog {
            revisions: VecDeque::new(),
            events_count: 0,
            first_revision,
        }
    }

    /// Appends the events of a new write revision and drops the oldest
    /// revisions beyond the bound.
    pub(crate) fn push(&mut self, revision: i64, events: Vec<Event>) {
        assert!(!events.is_empty(), "a write revision without events");
        assert!(
            events.iter().all(|event| event.revision() == revision),
            "event revision mismatch"
        );
        if let Some(last) = self.revisions.back() {
            assert!(revision > last.revision, "event revisions must increase");
        }
        self.events_count += events.len();
        self.revisions.push_back(RevisionEvents {
            revision,
            events: Arc::new(events),
        });
        // Keep the newest revision even if it alone exceeds the bound: a
        // watcher must be able to see the write that was just made.
        while self.events_count > EVENT_LOG_EVENTS_MAX && self.revisions.len() > 1 {
            self.drop_oldest();
        }
    }

    /// Drops every revision below `revision`, and the deletes at
    /// `revision` itself. etcd's compaction keeps each key's newest
    /// version at or below the compact revision unless it is a deletion,
    /// so a watch that starts exactly there gets that revision's puts and
    /// not its deletes; a watcher here gets the same.
    pub(crate) fn compact(&mut self, revision: i64) {
        while self
            .revisions
            .front()
            .is_some_and(|front| front.revision < revision)
        {
            self.drop_oldest();
        }
        if let Some(front) = self
            .revisions
            .front_mut()
            .filter(|front| front.revision == revision)
        {
            let before = front.events.len();
            Arc::make_mut(&mut front.events).retain(|event| event.kind == EventKind::Put);
            self.events_count -= before - front.events.len();
            if front.events.is_empty() {
                self.revisions.pop_front();
            }
        }
        self.first_revision = self.first_revision.max(revision);
    }

    /// Drops the oldest revision and moves `first_revision` past it.
    fn drop_oldest(&mut self) {
        let dropped = self
            .revisions
            .pop_front()
            .expect("drop from an empty event log");
        self.events_count -= dropped.events.len();
        self.first_revision = self.first_revision.max(dropped.revision + 1);
    }

    /// Like [`since`](Self::since), but looks at events worth no more than
    /// about `scan_bytes_max` (see [`scan_bytes`]), matching or not, so one
    /// call costs a bounded amount, and its answer has a bounded size,
    /// however far behind the caller is. Stops only at a revision boundary:
    /// a revision that alone exceeds the bound is still returned whole.
    /// Returns the events and the revision to continue from; `None` when
    /// every held revision was looked at.
    pub(crate) fn page(
        &self,
        start_revision: i64,
        range: &KeyRange,
        scan_bytes_max: usize,
    ) -> Result<(Vec<Event>, Option<i64>), KvError> {
        if start_revision < self.first_revision {
            return Err(KvError::Compacted {
                compact_revision: self.first_revision,
            });
        }
        let first = self
            .revisions
            .partition_point(|entry| entry.revision < start_revision);
        let mut events = Vec::new();
        let mut scanned = 0;
        for entry in self.revisions.range(first..) {
            let entry_bytes: usize = entry.events.iter().map(scan_bytes).sum();
            if scanned > 0 && scanned + entry_bytes > scan_bytes_max {
                return Ok((events, Some(entry.revision)));
            }
            scanned += entry_bytes;
            events.extend(
                entry
                    .events
                    .iter()
                    .filter(|event| range.contains(&event.kv.key))
                    .cloned(),
            );
        }
        Ok((events, None))
    }

    /// Events at `start_revision` or later on keys in `range`, oldest first.
    pub(crate) fn since(
        &self,
        start_revision: i64,
        range: &KeyRange,
    ) -> Result<Vec<Event>, KvError> {
        if start_revision < self.first_revision {
            return Err(KvError::Compacted {
                compact_revision: self.first_revision,
            });
        }
        let first = self
            .revisions
            .partition_point(|entry| entry.revision < start_revision);
        let events = self
            .revisions
            .range(first..)
            .flat_map(|entry| entry.events.iter());
        Ok(events
            .filter(|event| range.contains(&event.kv.key))
            .cloned()
            .collect())
    }
}

/// What looking at `event` costs against a page's bound: its keys and
/// values, plus a fixed overhead so that empty events count too.
fn scan_bytes(event: &Event) -> usize {
    /// Roughly the revisions, version, lease and framing of one event.
    const EVENT_SCAN_BYTES_FIXED: usize = 64;
    let kv_bytes = |kv: &crate::KeyValue| kv.key.len() + kv.value.len();
    EVENT_SCAN_BYTES_FIXED + kv_bytes(&event.kv) + event.prev_kv.as_deref().map_or(0, kv_bytes)
}

#[cfg(test)]
mod tests {
    use crate::{EventKind, KeyRange, KvError, KvStore, PutRequest, RequestOp, TxnRequest};

    fn all() -> KeyRange {
        KeyRange::new(vec![0], vec![0])
    }

    /// Revision 2: one put; revision 3: a txn of three puts; revision 4:
    /// one put outside `a..c`.
    fn store() -> KvStore {
        let mut store = KvStore::new();
        store.put(&PutRequest::new("a", "1")).unwrap();
        let txn = TxnRequest {
            compare: Vec::new(),
            success: ["a", "b", "bb"]
                .into_iter()
                .map(|key| RequestOp::Put(PutRequest::new(key, "2")))
                .collect(),
            failure: Vec::new(),
        };
        store.txn(&txn).unwrap();
        store.put(&PutRequest::new("z", "3")).unwrap();
        store
    }

    #[test]
    fn page_stops_at_a_revision_boundary_and_never_splits_a_txn() {
        let store = store();
        // A bound of about two small events reaches into the three-event
        // txn: the page ends before it, then the next page holds the txn
        // whole.
        let (events, next) = store.events_page(2, &all(), 150).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(next, 3);
        let (events, next) = store.events_page(next, &all(), 150).unwrap();
        assert_eq!(events.len(), 3);
        assert!(events.iter().all(|event| event.revision() == 3));
        assert_eq!(next, 4);
        let (events, next) = store.events_page(next, &all(), 150).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(next, store.revision() + 1);
    }

    #[test]
    fn page_counts_events_outside_the_range_against_the_bound() {
        let store = store();
        let range = KeyRange::new("b", "c");
        let (events, next) = store.events_page(2, &range, 10_000).unwrap();
        let keys: Vec<&[u8]> = events.iter().map(|e| e.kv.key.as_slice()).collect();
        assert_eq!(keys, [b"b".as_slice(), b"bb"]);
        assert_eq!(next, 5);
        // A future start waits: no events, same start.
        assert_eq!(
            store.events_page(9, &range, 10_000).unwrap(),
            (Vec::new(), 9)
        );
    }

    #[test]
    fn page_below_the_oldest_held_revision_is_compacted() {
        let mut store = store();
        store.compact(3).unwrap();
        let compacted = Err(KvError::Compacted {
            compact_revision: 3,
        });
        assert_eq!(store.events_page(2, &all(), 10), compacted);
        assert_eq!(store.events_page(-1, &all(), 10), compacted);
        assert_eq!(store.events_page(3, &all(), 10_000).unwrap().0.len(), 4);
    }

    /// etcd 3.4, asked by the differential test: after a compaction at
    /// revision C, a watch from C gets C's puts but not its deletes.
    #[test]
    fn a_watch_from_the_compact_revision_gets_its_puts_and_not_its_deletes() {
        let mut store = store();
        // Revision 5: a txn that deletes `z` and puts `y`.
        let txn = TxnRequest {
            compare: Vec::new(),
            success: vec![
                RequestOp::DeleteRange(crate::DeleteRangeRequest::new("z", "")),
                RequestOp::Put(PutRequest::new("y", "4")),
            ],
            failure: Vec::new(),
        };
        store.txn(&txn).unwrap();
        // Revision 6: a delete alone.
        store
            .delete_range(&crate::DeleteRangeRequest::new("y", ""))
            .unwrap();
        store.compact(5).unwrap();
        let (events, _) = store.events_page(5, &all(), 10_000).unwrap();
        let kinds: Vec<(EventKind, i64)> = events.iter().map(|e| (e.kind, e.revision())).collect();
        assert_eq!(kinds, [(EventKind::Put, 5), (EventKind::Delete, 6)]);
        store.compact(6).unwrap();
        assert!(store.events_page(6, &all(), 10_000).unwrap().0.is_empty());
    }
}
