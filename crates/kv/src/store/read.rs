//! Range reads at the current or an older revision.

use super::KvStore;
use crate::key_history::KeyHistory;
use crate::{KeyRange, KeyValue, KvError, RangeRequest, RangeResponse, SortOrder, SortTarget};
use std::cmp::Ordering;

impl KvStore {
    /// Reads keys as of `request.revision` (0 for the current revision).
    ///
    /// Fails with [`KvError::Compacted`] below the compact revision and
    /// [`KvError::FutureRevision`] past the current one.
    pub fn range(&self, request: &RangeRequest) -> Result<RangeResponse, KvError> {
        self.check_range(request, self.revision)?;
        Ok(self.range_at(request, self.revision))
    }

    /// Checks a read against `current`, the revision reads default to.
    pub(super) fn check_range(&self, request: &RangeRequest, current: i64) -> Result<(), KvError> {
        if request.key.is_empty() {
            return Err(KvError::KeyNotProvided);
        }
        if request.revision > current {
            return Err(KvError::FutureRevision);
        }
        let revision = if request.revision <= 0 {
            current
        } else {
            request.revision
        };
        if revision < self.compact_revision {
            return Err(KvError::Compacted {
                compact_revision: self.compact_revision,
            });
        }
        Ok(())
    }

    /// Serves a checked read. `current` is the store's revision as seen by
    /// the caller: inside a txn that has written, one past `self.revision`.
    pub(super) fn range_at(&self, request: &RangeRequest, current: i64) -> RangeResponse {
        let revision = if request.revision <= 0 {
            current
        } else {
            request.revision
        };
        assert!(revision <= current, "range past the current revision");
        assert!(
            revision >= self.compact_revision,
            "range below the compact revision"
        );
        let live = self.live_at(&request.key_range(), revision);
        let count = i64::try_from(live.len()).expect("key count fits in i64");
        if request.count_only {
            return RangeResponse {
                revision: current,
                kvs: Vec::new(),
                more: false,
                count,
            };
        }
        let mut kvs: Vec<&KeyValue> = live
            .into_iter()
            .filter(|kv| request.passes_filters(kv))
            .collect();
        let limit = usize::try_from(request.limit).unwrap_or(0);
        let filters_named = [
            request.min_mod_revision,
            request.max_mod_revision,
            request.min_create_revision,
            request.max_create_revision,
        ]
        .iter()
        .any(|bound| *bound != 0);
        if request.sort_order == SortOrder::None && !filters_named && limit > 0 {
            // etcd reads only the first limit + 1 keys (key order) when no
            // order or filter is asked for, and sorts just those: a
            // non-key target then orders that window, not the range.
            kvs.truncate(limit + 1);
        }
        sort(&mut kvs, request.sort_order, request.sort_target);
        let more = limit > 0 && kvs.len() > limit;
        if more {
            kvs.truncate(limit);
        }
        let kvs = kvs
            .into_iter()
            .map(|kv| strip(kv, request.keys_only))
            .collect();
        RangeResponse {
            revision: current,
            kvs,
            more,
            count,
        }
    }

    /// The live keys in `range` as of `revision`, in key order.
    pub(super) fn live_at(&self, range: &KeyRange, revision: i64) -> Vec<&KeyValue> {
        if range.is_empty_interval() {
            return Vec::new();
        }
        self.keys
            .range::<_, [u8]>(range.bounds())
            .filter_map(|(_, history)| history.at(revision))
            .collect()
    }

    /// The live keys in `range` now, in key order.
    pub(super) fn live_now(&self, range: &KeyRange) -> Vec<&KeyValue> {
        if range.is_empty_interval() {
            return Vec::new();
        }
        self.keys
            .range::<_, [u8]>(range.bounds())
            .filter_map(|(_, h)| KeyHistory::latest(h))
            .collect()
    }
}

/// Sorts key-ordered `kvs` as etcd does: a non-key target without an order
/// implies ascending; key ascending is the order they are already in. The
/// sort is stable, so ties stay in key order.
fn sort(kvs: &mut [&KeyValue], order: SortOrder, target: SortTarget) {
    let order = match (order, target) {
        (SortOrder::None, SortTarget::Key) => return,
        (SortOrder::None, _) => SortOrder::Ascend,
        (order, _) => order,
    };
    let compare = |a: &&KeyValue, b: &&KeyValue| -> Ordering {
        match target {
            SortTarget::Key => a.key.cmp(&b.key),
            SortTarget::Version => a.version.cmp(&b.version),
            SortTarget::Create => a.create_revision.cmp(&b.create_revision),
            SortTarget::Mod => a.mod_revision.cmp(&b.mod_revision),
            SortTarget::Value => a.value.cmp(&b.value),
        }
    };
    match order {
        SortOrder::Descend => kvs.sort_by(|a, b| compare(b, a)),
        _ => kvs.sort_by(compare),
    }
}

/// A copy of `kv` for a response, without its value for `keys_only`.
fn strip(kv: &KeyValue, keys_only: bool) -> KeyValue {
    if keys_only {
        KeyValue {
            value: Vec::new(),
            ..kv.clone()
        }
    } else {
        kv.clone()
    }
}

/// One retained write, as [`KvStore::retained_writes`] lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetainedWrite<'a> {
    /// The key written.
    pub key: &'a [u8],
    /// The write's revision.
    pub revision: i64,
    /// The key's state after the write; `None` for a delete.
    pub kv: Option<&'a KeyValue>,
}

impl KvStore {
    /// Every retained write at or below `revision` (0: the current one),
    /// by key then revision: what etcd's `HashKV` hashes, so members that
    /// applied the same log up to `revision` and compacted at the same
    /// point list the same writes.
    ///
    /// Fails with [`KvError::FutureRevision`] past the current revision
    /// and [`KvError::Compacted`] at or below the compact revision (as
    /// etcd 3.4's HashKV refuses the compact revision itself; 0, the
    /// current revision, is always served).
    pub fn retained_writes(
        &self,
        revision: i64,
    ) -> Result<impl Iterator<Item = RetainedWrite<'_>> + '_, KvError> {
        if revision > self.revision {
            return Err(KvError::FutureRevision);
        }
        if revision > 0 && revision <= self.compact_revision {
            return Err(KvError::Compacted {
                compact_revision: self.compact_revision,
            });
        }
        let upto = if revision <= 0 {
            self.revision
        } else {
            revision
        };
        Ok(self.keys.iter().flat_map(move |(key, history)| {
            history
                .revisions
                .iter()
                .take_while(move |entry| entry.revision <= upto)
                .map(move |entry| RetainedWrite {
                    key,
                    revision: entry.revision,
                    kv: entry.kv.as_deref(),
                })
        }))
    }
}
