//! Range reads: the request and response of etcd's `KV.Range`.
//!
//! The order of work follows etcd, because clients depend on its quirks:
//! `count` is the number of keys in the range at the revision before the
//! revision filters and the limit apply; the filters run before sorting;
//! `more` says the limit cut the filtered, sorted result.

use crate::{KeyRange, KeyValue};

/// Which way to sort a range result.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SortOrder {
    /// Key order, unless a non-key target is given, which implies ascending
    /// (over the first `limit + 1` keys only, when a limit is set: etcd's
    /// window).
    #[default]
    None,
    /// Smallest first.
    Ascend,
    /// Largest first.
    Descend,
}

/// Which field to sort a range result by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SortTarget {
    /// The key bytes.
    #[default]
    Key,
    /// The version.
    Version,
    /// The create revision.
    Create,
    /// The mod revision.
    Mod,
    /// The value bytes.
    Value,
}

/// A range read. `Default` is "the empty key, current revision, no limit".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeRequest {
    /// First key; see [`KeyRange`] for the `range_end` conventions.
    pub key: Vec<u8>,
    /// End of the range, empty for a single key, `\0` for "no end".
    pub range_end: Vec<u8>,
    /// Most keys to return; 0 or less means no limit.
    pub limit: i64,
    /// Revision to read at; 0 or less means the current revision.
    pub revision: i64,
    /// Sort direction.
    pub sort_order: SortOrder,
    /// Sort field.
    pub sort_target: SortTarget,
    /// Whether a follower may serve the read from its own state. The store
    /// ignores it; the server decides where reads go.
    pub serializable: bool,
    /// Return keys without values.
    pub keys_only: bool,
    /// Return only the count.
    pub count_only: bool,
    /// Keep only keys with `mod_revision >= min_mod_revision`; 0 disables.
    pub min_mod_revision: i64,
    /// Keep only keys with `mod_revision <= max_mod_revision`; 0 disables.
    pub max_mod_revision: i64,
    /// Keep only keys with `create_revision >= min_create_revision`; 0 disables.
    pub min_create_revision: i64,
    /// Keep only keys with `create_revision <= max_create_revision`; 0 disables.
    pub max_create_revision: i64,
}

impl RangeRequest {
    /// A read of the keys `key .. range_end`, all other options default.
    pub fn new(key: impl Into<Vec<u8>>, range_end: impl Into<Vec<u8>>) -> Self {
        RangeRequest {
            key: key.into(),
            range_end: range_end.into(),
            ..RangeRequest::default()
        }
    }

    /// The keys this request names.
    pub fn key_range(&self) -> KeyRange {
        KeyRange::new(self.key.clone(), self.range_end.clone())
    }

    /// True when `kv` passes the min/max create/mod revision filters.
    pub fn passes_filters(&self, kv: &KeyValue) -> bool {
        let above = |value: i64, min: i64| min <= 0 || value >= min;
        let below = |value: i64, max: i64| max <= 0 || value <= max;
        above(kv.mod_revision, self.min_mod_revision)
            && below(kv.mod_revision, self.max_mod_revision)
            && above(kv.create_revision, self.min_create_revision)
            && below(kv.create_revision, self.max_create_revision)
    }

    /// True when a filter is set, which, as in etcd, means the limit can only
    /// be applied after reading the whole range.
    pub fn has_filters(&self) -> bool {
        self.min_mod_revision > 0
            || self.max_mod_revision > 0
            || self.min_create_revision > 0
            || self.max_create_revision > 0
    }
}

/// The result of a range read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeResponse {
    /// The store's revision when the response was made (etcd's
    /// `header.revision`), not the revision read at.
    pub revision: i64,
    /// The keys, filtered, sorted and limited. Empty with `count_only`.
    pub kvs: Vec<KeyValue>,
    /// True when the limit left out keys that passed the filters.
    pub more: bool,
    /// Keys in the range at the revision read, before filters and limit.
    pub count: i64,
}
