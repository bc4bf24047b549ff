//! One watcher: a key range, the next revision it has not seen yet, and
//! what it asked to see of each event.
//!
//! A watcher that has events to send reads the store's event log itself,
//! a bounded page at a time, from its own `next_revision`; while it has
//! none, its stream's synced group reads for it (`synced_group.rs`). Nothing is pushed to it, so a watcher that
//! is not read (its client is slow) costs no memory; if the log drops the
//! revisions it still needs, its next read says so and the stream cancels
//! it with the compact revision, as etcd cancels a watcher whose start
//! revision was compacted.

use bellwether_api::etcdserverpb as pb;
use bellwether_api::mvccpb;
use bellwether_etcd::convert;
use bellwether_kv::{Event, EventKind, KeyRange, KvError, KvStore};
use std::sync::Arc;

/// Most bytes of keys and values one read looks at (see
/// `KvStore::events_page`). It bounds both the time the store stays locked
/// and the size of one response: well under the 4 MiB that gRPC clients
/// accept by default, even with `prev_kv`, unless a single revision is
/// larger (a revision is never split).
pub const READ_SCAN_BYTES_MAX: usize = 1024 * 1024;

/// etcd's `NOPUT` filter value in `WatchCreateRequest.filters`.
const FILTER_NO_PUT: i32 = 0;
/// etcd's `NODELETE` filter value.
const FILTER_NO_DELETE: i32 = 1;

/// What a read of the store gave a watcher.
#[derive(Debug, PartialEq)]
pub enum Read {
    /// Events to send (possibly none: nothing in the range changed, or the
    /// filters removed it).
    Events(Vec<mvccpb::Event>),
    /// The revisions the watcher needs are gone; the oldest held is this.
    Compacted(i64),
}

/// One watch on a stream.
#[derive(Clone, Debug)]
pub struct Watcher {
    /// The keys watched, with etcd's `range_end` conventions.
    pub range: KeyRange,
    /// The first revision whose events the watcher has not been sent. The
    /// watcher is caught up when this is past the store's revision.
    pub next_revision: i64,
    /// Drop put events (etcd's `NOPUT` filter).
    pub no_put: bool,
    /// Drop delete events (etcd's `NODELETE` filter).
    pub no_delete: bool,
    /// Send each event's previous key state.
    pub prev_kv: bool,
    /// Send an empty response, periodically, while nothing was sent.
    pub progress_notify: bool,
    /// Events went to the client since the last progress tick, so the next
    /// tick needs no notification: the events said the same.
    pub sent_since_tick: bool,
}

impl Watcher {
    /// A watcher as a create request asks for it, starting at
    /// `next_revision` (already resolved from "0 means now").
    pub fn new(request: &pb::WatchCreateRequest, range: KeyRange, next_revision: i64) -> Self {
        Watcher {
            range,
            next_revision,
            no_put: request.filters.contains(&FILTER_NO_PUT),
            no_delete: request.filters.contains(&FILTER_NO_DELETE),
            prev_kv: request.prev_kv,
            progress_notify: request.progress_notify,
            sent_since_tick: false,
        }
    }

    /// True while the store holds revisions this watcher has not seen.
    pub fn is_behind(&self, store_revision: i64) -> bool {
        self.next_revision <= store_revision
    }

    /// Reads the next page of events and moves past them. Reads nothing
    /// when the watcher is caught up.
    pub fn read(&mut self, store: &KvStore) -> Read {
        if !self.is_behind(store.revision()) {
            return Read::Events(Vec::new());
        }
        match store.events_page(self.next_revision, &self.range, READ_SCAN_BYTES_MAX) {
            Ok((events, next_revision)) => {
                assert!(next_revision > self.next_revision, "a read must advance");
                self.next_revision = next_revision;
                Read::Events(
                    events
                        .into_iter()
                        .filter(|event| self.passes(event))
                        .map(|event| self.wire_event(event))
                        .collect(),
                )
            }
            Err(KvError::Compacted { compact_revision }) => Read::Compacted(compact_revision),
            // events_page fails only with Compacted; anything else would
            // be a store bug, and treating it as a compaction makes the
            // client resynchronise rather than wait forever.
            Err(_) => Read::Compacted(store.compact_revision()),
        }
    }

    /// False for events the watcher's filters drop.
    fn passes(&self, event: &Event) -> bool {
        match event.kind {
            EventKind::Put => !self.no_put,
            EventKind::Delete => !self.no_delete,
        }
    }

    /// An event as sent on the wire, with its previous state only if the
    /// watcher asked for it. The store records no previous state for a
    /// put that created its key, which is when etcd sends none either.
    fn wire_event(&self, event: Event) -> mvccpb::Event {
        let kind = match event.kind {
            EventKind::Put => mvccpb::event::EventType::Put,
            EventKind::Delete => mvccpb::event::EventType::Delete,
        };
        let prev_kv = if self.prev_kv {
            event
                .prev_kv
                .map(|kv| convert::key_value(Arc::unwrap_or_clone(kv)))
        } else {
            None
        };
        mvccpb::Event {
            r#type: kind as i32,
            kv: Some(convert::key_value(Arc::unwrap_or_clone(event.kv))),
            prev_kv,
        }
    }
}
