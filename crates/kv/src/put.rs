//! Puts: the request and response of etcd's `KV.Put`.

use crate::{KeyValue, KvError};

/// Write one key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PutRequest {
    /// The key to write. Must not be empty.
    pub key: Vec<u8>,
    /// The new value. Must be empty with `ignore_value`.
    pub value: Vec<u8>,
    /// Lease to attach the key to, 0 for none. Must exist.
    pub lease: i64,
    /// Return the key's previous state.
    pub prev_kv: bool,
    /// Keep the current value; the key must exist.
    pub ignore_value: bool,
    /// Keep the current lease; the key must exist.
    pub ignore_lease: bool,
}

impl PutRequest {
    /// The put's own faults, which need no store, in etcd's order: no key,
    /// a value with `ignore_value`, a lease with `ignore_lease`.
    pub fn shape_error(&self) -> Option<KvError> {
        if self.key.is_empty() {
            return Some(KvError::KeyNotProvided);
        }
        if self.ignore_value && !self.value.is_empty() {
            return Some(KvError::ValueProvided);
        }
        if self.ignore_lease && self.lease != 0 {
            return Some(KvError::LeaseProvided);
        }
        None
    }

    /// A plain put of `value` at `key`, without lease or options.
    pub fn new(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Self {
        PutRequest {
            key: key.into(),
            value: value.into(),
            ..PutRequest::default()
        }
    }

    /// Bytes the request takes, for the request size bound.
    pub fn size_bytes(&self) -> usize {
        self.key.len() + self.value.len()
    }
}

/// The result of a put.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PutResponse {
    /// The store's revision after the put: the put's own revision.
    pub revision: i64,
    /// The key's state before the put, when asked for and the key existed.
    pub prev_kv: Option<KeyValue>,
}
