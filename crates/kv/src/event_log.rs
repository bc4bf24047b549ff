//! The bounded log of recent watch events, grouped by revision.
//!
//! The watch service reads it with [`KvStore::events_since`](crate::KvStore::events_since).
//! It holds every event from `first_revision` on. It shrinks in two ways,
//! both dropping whole revisions so that a watcher never sees half a txn:
//! compaction drops revisions below the compact revision, and the bound
//! [`EVENT_LOG_EVENTS_MAX`] drops the oldest revisions. Either way a watcher
//! that asks for a dropped revision gets [`KvError::Compacted`] naming the
//! first revision still held, and restarts from there.

use crate::{Event, KeyRange, KvError, EVENT_LOG_EVENTS_MAX};
use std::collections::VecDeque;

/// The events of one write revision, in the order they were applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RevisionEvents {
    /// The write's revision.
    pub(crate) revision: i64,
    /// Its events, at least one.
    pub(crate) events: Vec<Event>,
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
        self.revisions
            .push_back(RevisionEvents { revision, events });
        // Keep the newest revision even if it alone exceeds the bound: a
        // watcher must be able to see the write that was just made.
        while self.events_count > EVENT_LOG_EVENTS_MAX && self.revisions.len() > 1 {
            self.drop_oldest();
        }
    }

    /// Drops every revision below `revision`.
    pub(crate) fn compact(&mut self, revision: i64) {
        while self
            .revisions
            .front()
            .is_some_and(|front| front.revision < revision)
        {
            self.drop_oldest();
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
            .flat_map(|entry| &entry.events);
        Ok(events
            .filter(|event| range.contains(&event.kv.key))
            .cloned()
            .collect())
    }
}
