//! A lease: a TTL granted by the leader and the keys attached to it.
//!
//! Time lives outside the state machine. The leader's clock decides when a
//! lease expires and proposes a revoke through the log; every replica then
//! applies the same revoke at the same point. So the store keeps only what
//! must be identical on every replica: the id, the granted TTL and the
//! attached keys. The remaining TTL and last keep-alive are the leader's
//! volatile state, which is why a new leader extends leases instead of
//! expiring them spuriously.
//!
//! Most leases in a busy cluster carry no key (a session granted and kept
//! alive) or a handful, and a store can hold a million of them, so a
//! lease's key set takes one pointer until its first key arrives, and the
//! id is the store's map key only: 16 bytes a lease where an id and an
//! empty `BTreeSet` inline took 40.

use std::collections::BTreeSet;

/// One granted lease; the store keys it by its id (never 0, which means
/// "no lease" on a key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The TTL granted, in seconds, after raising it to
    /// [`LEASE_TTL_SECONDS_MIN`](crate::LEASE_TTL_SECONDS_MIN).
    pub ttl_seconds: i64,
    /// Keys attached to the lease, sorted so that revoke deletes them in a
    /// deterministic order on every replica.
    pub keys: LeaseKeys,
}

/// The sorted set of keys attached to a lease, allocated only while it is
/// not empty.
///
/// The box is deliberate (clippy's `box_collection` is allowed): an empty
/// `BTreeSet` is 24 bytes inline, a `None` box 8, and most leases never
/// hold a key.
#[allow(clippy::box_collection)]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaseKeys(Option<Box<BTreeSet<Vec<u8>>>>);

impl LeaseKeys {
    /// Attaches `key`; returns whether it was not attached already.
    pub fn insert(&mut self, key: Vec<u8>) -> bool {
        self.0.get_or_insert_with(Box::default).insert(key)
    }

    /// Detaches `key`; returns whether it was attached. The set's memory
    /// goes with its last key.
    pub fn remove(&mut self, key: &[u8]) -> bool {
        let Some(set) = self.0.as_mut() else {
            return false;
        };
        let removed = set.remove(key);
        if set.is_empty() {
            self.0 = None;
        }
        removed
    }

    /// The attached keys, in key order.
    pub fn iter(&self) -> impl Iterator<Item = &Vec<u8>> {
        self.0.iter().flat_map(|set| set.iter())
    }

    /// How many keys are attached.
    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |set| set.len())
    }

    /// True when no key is attached.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_set_holds_no_allocation_and_frees_it_with_its_last_key() {
        assert_eq!(std::mem::size_of::<Lease>(), 16);
        let mut keys = LeaseKeys::default();
        assert!(keys.is_empty() && keys.0.is_none());
        assert!(keys.insert(b"b".to_vec()));
        assert!(keys.insert(b"a".to_vec()));
        assert!(!keys.insert(b"a".to_vec()), "already attached");
        assert_eq!(keys.len(), 2);
        assert_eq!(keys.iter().collect::<Vec<_>>(), [b"a", b"b"]);
        assert!(!keys.remove(b"c"));
        assert!(keys.remove(b"a"));
        assert!(!keys.is_empty());
        assert!(keys.remove(b"b"));
        assert!(
            keys.is_empty() && keys.0.is_none(),
            "freed with the last key"
        );
        assert!(!keys.remove(b"b"));
    }
}
