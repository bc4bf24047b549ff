//! Txn guards: etcd's `Compare`, the condition that picks a txn's branch.
//!
//! A compare names a key or a range. Every key in the range must satisfy it.
//! A missing key compares as if all its numbers were 0 (so "version = 0"
//! means "does not exist"), except for a value compare, which a missing key
//! always fails: etcd cannot tell a missing value from an empty one.

use crate::{KeyRange, KeyValue};
use std::cmp::Ordering;

/// How the key's field must relate to the given value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareResult {
    /// Field equals the value.
    Equal,
    /// Field is greater than the value.
    Greater,
    /// Field is less than the value.
    Less,
    /// Field differs from the value.
    NotEqual,
}

/// Which field to compare, and the value to compare it with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompareTarget {
    /// The key's version.
    Version(i64),
    /// The key's create revision.
    Create(i64),
    /// The key's mod revision.
    Mod(i64),
    /// The key's value, compared as bytes.
    Value(Vec<u8>),
    /// The key's lease id.
    Lease(i64),
}

/// One txn guard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compare {
    /// First key; see [`KeyRange`] for the `range_end` conventions.
    pub key: Vec<u8>,
    /// End of the range, empty for a single key, `\0` for "no end".
    pub range_end: Vec<u8>,
    /// The relation that must hold.
    pub result: CompareResult,
    /// The field and the value on the right-hand side.
    pub target: CompareTarget,
}

impl Compare {
    /// A compare on a single key.
    pub fn new(key: impl Into<Vec<u8>>, result: CompareResult, target: CompareTarget) -> Self {
        Compare {
            key: key.into(),
            range_end: Vec::new(),
            result,
            target,
        }
    }

    /// The same compare over `key .. range_end`.
    pub fn with_range_end(mut self, range_end: impl Into<Vec<u8>>) -> Self {
        self.range_end = range_end.into();
        self
    }

    /// The keys this compare names.
    pub fn key_range(&self) -> KeyRange {
        KeyRange::new(self.key.clone(), self.range_end.clone())
    }

    /// Bytes the compare takes in a request, for the request size bound.
    pub fn size_bytes(&self) -> usize {
        let target_bytes = match &self.target {
            CompareTarget::Value(value) => value.len(),
            _ => 8,
        };
        self.key.len() + self.range_end.len() + target_bytes
    }

    /// Whether the compare holds over `kvs`, the live keys in its range.
    pub fn holds(&self, kvs: &[&KeyValue]) -> bool {
        if kvs.is_empty() {
            if matches!(self.target, CompareTarget::Value(_)) {
                return false;
            }
            return self.holds_for(&KeyValue::default());
        }
        kvs.iter().all(|kv| self.holds_for(kv))
    }

    /// Whether the compare holds for one key's state.
    fn holds_for(&self, kv: &KeyValue) -> bool {
        let ordering = match &self.target {
            CompareTarget::Version(version) => kv.version.cmp(version),
            CompareTarget::Create(revision) => kv.create_revision.cmp(revision),
            CompareTarget::Mod(revision) => kv.mod_revision.cmp(revision),
            CompareTarget::Value(value) => kv.value.as_slice().cmp(value.as_slice()),
            CompareTarget::Lease(lease) => kv.lease.cmp(lease),
        };
        match self.result {
            CompareResult::Equal => ordering == Ordering::Equal,
            CompareResult::Greater => ordering == Ordering::Greater,
            CompareResult::Less => ordering == Ordering::Less,
            CompareResult::NotEqual => ordering != Ordering::Equal,
        }
    }
}
