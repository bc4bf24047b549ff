//! Deletes: the request and response of etcd's `KV.DeleteRange`.

use crate::{KeyRange, KeyValue};

/// Delete a key or a range of keys.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeleteRangeRequest {
    /// First key; see [`KeyRange`] for the `range_end` conventions.
    pub key: Vec<u8>,
    /// End of the range, empty for a single key, `\0` for "no end".
    pub range_end: Vec<u8>,
    /// Return the deleted keys' last states.
    pub prev_kv: bool,
}

impl DeleteRangeRequest {
    /// A delete of `key .. range_end` without `prev_kv`.
    pub fn new(key: impl Into<Vec<u8>>, range_end: impl Into<Vec<u8>>) -> Self {
        DeleteRangeRequest {
            key: key.into(),
            range_end: range_end.into(),
            prev_kv: false,
        }
    }

    /// The keys this request names.
    pub fn key_range(&self) -> KeyRange {
        KeyRange::new(self.key.clone(), self.range_end.clone())
    }
}

/// The result of a delete.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeleteRangeResponse {
    /// The store's revision after the delete. Unchanged when nothing was
    /// deleted: a delete that changes nothing is not a write.
    pub revision: i64,
    /// How many keys were deleted.
    pub deleted: i64,
    /// The deleted keys' last states, in key order, when asked for.
    pub prev_kvs: Vec<KeyValue>,
}
