//! [`KvStore`]: the deterministic MVCC key-value state machine.
//!
//! Every replica applies the same committed commands in the same order and
//! must end in the same state, so the store does no IO, reads no clock and
//! iterates only sorted maps. Its behaviour follows etcd v3's data model:
//!
//! - The store starts at revision 1; every write that changes something gets
//!   the next revision (the first write is revision 2). A txn's writes share
//!   one revision; a read-only txn or a delete of nothing does not advance it.
//! - Each key keeps the history of its writes until compaction, so reads at
//!   an older revision see the state of that revision.
//! - Each write appends watch events to a bounded [`EventLog`].
//!
//! The methods are split by concern: reads in `read.rs`, puts and deletes in
//! `write.rs`, txns in `txn.rs`, leases in `lease.rs`, compaction in
//! `compact.rs`, snapshots in `snapshot.rs`.

mod alarm;
mod batch;
mod compact;
mod compaction_queue;
mod image;
mod lease;
mod member;
mod read;
mod snapshot;
mod snapshot_events;

pub(crate) use alarm::revision_bytes;
pub use alarm::REVISION_OVERHEAD_BYTES;
pub use image::{ImageWrite, PendingImage, StoreImage};
pub use read::RetainedWrite;
pub use snapshot::{PendingSnapshot, SNAPSHOT_VERSION, STREAM_CHUNK_BYTES};
mod txn;
mod write;

use crate::event_log::EventLog;
use crate::key_history::{KeyHistory, KeyMap};
use crate::member::MemberRecord;
use crate::{Alarm, AuthState, Event, IdMap, KeyRange, KvError, Lease};
use compaction_queue::CompactionQueue;
use std::collections::{BTreeMap, BTreeSet};

/// The revision of an empty store, as in etcd.
pub const REVISION_INITIAL: i64 = 1;

/// The key-value state machine of one replica.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KvStore {
    /// The revision of the last write; reads default to it.
    revision: i64,
    /// Reads below this revision fail: their history is gone. 0 until the
    /// first compaction.
    compact_revision: i64,
    /// Every key with retained history, live or deleted, in key order.
    keys: KeyMap,
    /// The keys the next compactions must visit.
    to_compact: CompactionQueue,
    /// Live leases by id.
    leases: IdMap<Lease>,
    /// The keys attached to each lease that has any, in key order, so a
    /// revoke deletes them in the same order on every replica. A lease
    /// without keys has no entry (see [`Lease`]).
    lease_keys: BTreeMap<i64, BTreeSet<Vec<u8>>>,
    /// Recent events, for watchers.
    events: EventLog,
    /// Raised alarms (see [`crate::alarm`]).
    alarms: BTreeSet<Alarm>,
    /// The member directory (see [`crate::member`]), by id.
    members: BTreeMap<u64, MemberRecord>,
    /// The lowest id a new member may get: above every id recorded.
    next_member_id: u64,
    /// Users, roles and permissions (see [`crate::auth`]).
    auth: AuthState,
    /// The retained history's size, kept as writes and compactions happen
    /// (see [`KvStore::size_bytes`]).
    size_bytes: u64,
}

impl Default for KvStore {
    fn default() -> Self {
        Self::new()
    }
}

impl KvStore {
    /// An empty store at [`REVISION_INITIAL`].
    pub fn new() -> Self {
        KvStore {
            revision: REVISION_INITIAL,
            compact_revision: 0,
            keys: KeyMap::new(),
            to_compact: CompactionQueue::default(),
            leases: IdMap::new(),
            lease_keys: BTreeMap::new(),
            events: EventLog::new(REVISION_INITIAL),
            alarms: BTreeSet::new(),
            members: BTreeMap::new(),
            next_member_id: 1,
            auth: AuthState::default(),
            size_bytes: 0,
        }
    }

    /// Users, roles and permissions.
    pub fn auth(&self) -> &AuthState {
        &self.auth
    }

    /// Users, roles and permissions, to apply an auth request to.
    pub fn auth_mut(&mut self) -> &mut AuthState {
        &mut self.auth
    }

    /// The revision of the last write.
    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// The revision of the last compaction, 0 if none. Reads below it fail.
    pub fn compact_revision(&self) -> i64 {
        self.compact_revision
    }

    /// Events on keys in `range` from `start_revision` on, oldest first; in
    /// a revision, in the order the writes were applied.
    ///
    /// A `start_revision` past the current revision gives no events: the
    /// watch waits for them. So does 0 or less, etcd's "from now on". One whose events are gone, by compaction or
    /// the log's bound, fails with [`KvError::Compacted`] naming the oldest
    /// revision still held, from which the watcher can restart.
    pub fn events_since(
        &self,
        start_revision: i64,
        range: &KeyRange,
    ) -> Result<Vec<Event>, KvError> {
        if start_revision <= 0 || start_revision > self.revision {
            return Ok(Vec::new());
        }
        self.events.since(start_revision, range)
    }

    /// A bounded page of [`events_since`](Self::events_since): events on
    /// keys in `range` from `start_revision` on, looking at events worth
    /// about `scan_bytes_max` bytes of keys and values at most (whole
    /// revisions only, so a watcher never sees half a txn). Returns the events and the revision
    /// the next page starts at, one past the store's revision once the
    /// watcher has seen everything.
    ///
    /// Unlike `events_since`, a `start_revision` of 0 or less is not "from
    /// now": the caller resolves that. One below the oldest revision held
    /// fails with [`KvError::Compacted`], as does a negative one (etcd
    /// treats those as compacted too).
    pub fn events_page(
        &self,
        start_revision: i64,
        range: &KeyRange,
        scan_bytes_max: usize,
    ) -> Result<(Vec<Event>, i64), KvError> {
        if start_revision > self.revision {
            return Ok((Vec::new(), start_revision));
        }
        let (events, next) = self.events.page(start_revision, range, scan_bytes_max)?;
        let next_revision = next.unwrap_or(self.revision + 1);
        assert!(next_revision > start_revision || events.is_empty());
        Ok((events, next_revision))
    }

    /// The live state of `key` at the current revision, if it exists. A
    /// shortcut for tests and the server's own lookups.
    pub fn get(&self, key: &[u8]) -> Option<&crate::KeyValue> {
        self.keys.get(key).and_then(KeyHistory::latest)
    }
}
