//! Watch events: what one write did to one key.
//!
//! Every write to the store produces one [`Event`] per changed key, in the
//! order the writes were applied, all carrying the write's revision. The
//! watch service replays them to clients from a start revision.

use crate::KeyValue;
use std::sync::Arc;

/// Whether a key was written or removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// The key was created or updated.
    Put,
    /// The key was deleted, explicitly or by a lease revoke.
    Delete,
}

/// One change to one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Put or delete.
    pub kind: EventKind,
    /// For a put, the key's new state. For a delete, only the key and the
    /// delete's revision in `mod_revision`, as etcd reports it. Shared with
    /// the key's history (see [`Event::new`]).
    pub kv: Arc<KeyValue>,
    /// The key's state just before this change, if it existed. Watchers ask
    /// for it with `prev_kv`; the store always records it so that watchers do
    /// not need a second read that compaction could have made impossible.
    pub prev_kv: Option<Arc<KeyValue>>,
}

impl Event {
    /// An event that owns its states (tests, and callers with nothing to
    /// share them with).
    pub fn new(kind: EventKind, kv: KeyValue, prev_kv: Option<KeyValue>) -> Self {
        Event {
            kind,
            kv: Arc::new(kv),
            prev_kv: prev_kv.map(Arc::new),
        }
    }

    /// The revision of the write that produced this event.
    pub fn revision(&self) -> i64 {
        self.kv.mod_revision
    }
}
