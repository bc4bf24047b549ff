//! The etcd v3 convention for naming a set of keys with `key` and
//! `range_end`.
//!
//! - `range_end` empty: just `key`.
//! - `range_end` is the single byte `\0`: every key `>= key`.
//! - otherwise: the half-open interval `[key, range_end)`. A prefix is the
//!   interval from the prefix to the prefix with its last byte incremented
//!   (see [`KeyRange::prefix`]).
//!
//! One type holds the rule so that range, delete-range, txn compares, watch
//! filters and the txn duplicate-key check cannot disagree about it.

use std::ops::Bound;

/// A set of keys named the etcd way.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyRange {
    /// The first key, or the only key when `range_end` is empty.
    pub key: Vec<u8>,
    /// The exclusive end; empty for a single key; `\0` for "no end".
    pub range_end: Vec<u8>,
}

impl KeyRange {
    /// The range `key .. range_end` with etcd's conventions.
    pub fn new(key: impl Into<Vec<u8>>, range_end: impl Into<Vec<u8>>) -> Self {
        KeyRange {
            key: key.into(),
            range_end: range_end.into(),
        }
    }

    /// Exactly one key.
    pub fn single(key: impl Into<Vec<u8>>) -> Self {
        KeyRange {
            key: key.into(),
            range_end: Vec::new(),
        }
    }

    /// Every key that starts with `prefix`. An empty prefix, or one made only
    /// of `0xff` bytes that has no successor, means every key `>= prefix`.
    pub fn prefix(prefix: impl Into<Vec<u8>>) -> Self {
        let mut key = prefix.into();
        let mut end = key.clone();
        while let Some(last) = end.pop() {
            if last < 0xff {
                end.push(last + 1);
                return KeyRange {
                    key,
                    range_end: end,
                };
            }
        }
        if key.is_empty() {
            // etcd spells "all keys" as key "\0", range_end "\0".
            key.push(0);
        }
        KeyRange {
            key,
            range_end: vec![0],
        }
    }

    /// True when the range names exactly one key.
    pub fn is_single(&self) -> bool {
        self.range_end.is_empty()
    }

    /// True when the range is "every key `>= key`".
    pub fn is_from_key(&self) -> bool {
        self.range_end.as_slice() == [0]
    }

    /// True when no key can be in the range: an explicit end at or before
    /// the start.
    pub fn is_empty_interval(&self) -> bool {
        !self.is_single() && !self.is_from_key() && self.range_end <= self.key
    }

    /// True when `key` is in the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        if self.is_single() {
            return key == self.key.as_slice();
        }
        if key < self.key.as_slice() {
            return false;
        }
        self.is_from_key() || key < self.range_end.as_slice()
    }

    /// True when the two ranges share at least one key.
    pub fn intersects(&self, other: &KeyRange) -> bool {
        if self.is_empty_interval() || other.is_empty_interval() {
            return false;
        }
        if self.is_single() {
            return other.contains(&self.key);
        }
        if other.is_single() {
            return self.contains(&other.key);
        }
        let self_before_other_ends = other.is_from_key() || self.key < other.range_end;
        let other_before_self_ends = self.is_from_key() || other.key < self.range_end;
        self_before_other_ends && other_before_self_ends
    }

    /// Bounds for `BTreeMap::range`. Callers must check
    /// [`is_empty_interval`](Self::is_empty_interval) first: `BTreeMap`
    /// panics on a start after the end.
    pub fn bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        assert!(!self.is_empty_interval(), "bounds of an empty interval");
        let start = Bound::Included(self.key.as_slice());
        if self.is_single() {
            (start, Bound::Included(self.key.as_slice()))
        } else if self.is_from_key() {
            (start, Bound::Unbounded)
        } else {
            (start, Bound::Excluded(self.range_end.as_slice()))
        }
    }

    /// Bytes the range takes in a request, for the request size bound.
    pub fn size_bytes(&self) -> usize {
        self.key.len() + self.range_end.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_increments_the_last_byte_below_0xff() {
        assert_eq!(KeyRange::prefix("ab"), KeyRange::new("ab", "ac"));
        assert_eq!(
            KeyRange::prefix(vec![b'a', 0xff]),
            KeyRange::new(vec![b'a', 0xff], "b")
        );
        assert_eq!(
            KeyRange::prefix(vec![0xff]),
            KeyRange::new(vec![0xff], vec![0])
        );
        assert_eq!(KeyRange::prefix(""), KeyRange::new(vec![0], vec![0]));
    }

    #[test]
    fn contains_follows_the_three_conventions() {
        assert!(KeyRange::single("a").contains(b"a"));
        assert!(!KeyRange::single("a").contains(b"ab"));
        assert!(KeyRange::new("b", vec![0]).contains(b"zzz"));
        assert!(!KeyRange::new("b", vec![0]).contains(b"a"));
        assert!(KeyRange::new("a", "c").contains(b"b"));
        assert!(!KeyRange::new("a", "c").contains(b"c"));
        assert!(!KeyRange::new("c", "a").contains(b"b"));
    }

    #[test]
    fn intersects_detects_overlap_and_disjointness() {
        assert!(KeyRange::new("a", "c").intersects(&KeyRange::single("b")));
        assert!(!KeyRange::new("a", "c").intersects(&KeyRange::single("c")));
        assert!(KeyRange::new("a", "c").intersects(&KeyRange::new("b", vec![0])));
        assert!(!KeyRange::new("a", "c").intersects(&KeyRange::new("c", "d")));
    }
}
