//! The store's alarms and the size the storage quota is checked against.

use super::KvStore;
use crate::{Alarm, AlarmKind};

/// What one retained write costs in [`KvStore::size_bytes`] beyond its key
/// and value: its revision, create revision, version, lease and the
/// history's bookkeeping, rounded up.
pub const REVISION_OVERHEAD_BYTES: u64 = 64;

/// The bytes one retained write of `key_bytes` and `value_bytes` counts
/// for (a delete is a write with no value).
pub(crate) fn revision_bytes(key_bytes: usize, value_bytes: usize) -> u64 {
    REVISION_OVERHEAD_BYTES + key_bytes as u64 + value_bytes as u64
}

impl KvStore {
    /// Raises `alarm`; raising one already raised changes nothing. Returns
    /// the alarm, as etcd answers an activation.
    pub fn alarm_activate(&mut self, alarm: Alarm) -> Alarm {
        self.alarms.insert(alarm);
        alarm
    }

    /// Clears `alarm`; returns it if it was raised.
    pub fn alarm_deactivate(&mut self, alarm: Alarm) -> Option<Alarm> {
        self.alarms.remove(&alarm).then_some(alarm)
    }

    /// Every raised alarm, by member id then kind.
    pub fn alarms(&self) -> impl Iterator<Item = Alarm> + '_ {
        self.alarms.iter().copied()
    }

    /// True while any member's alarm of `kind` is raised.
    pub fn is_alarmed(&self, kind: AlarmKind) -> bool {
        self.alarms.iter().any(|alarm| alarm.kind == kind)
    }

    /// The bytes the store's retained history takes by its own count:
    /// every retained write's key and value plus
    /// [`REVISION_OVERHEAD_BYTES`]. Deterministic (the same on every
    /// replica), grows with every write and shrinks only by compaction, as
    /// etcd's database does; the storage quota is checked against it.
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    /// [`size_bytes`](Self::size_bytes) counted from scratch, for a
    /// restored store and for the checks of tests.
    pub(crate) fn count_size_bytes(&self) -> u64 {
        self.keys
            .iter()
            .map(|(key, history)| history.size_bytes(key.len()))
            .sum()
    }
}
