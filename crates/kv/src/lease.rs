//! A lease: a TTL granted by the leader, and the keys attached to it.
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
//! alive) or a handful, and a store can hold a million of them. So a
//! [`Lease`] is its TTL alone, 8 bytes beside its id in the store's
//! [`IdMap`](crate::IdMap), and the store keeps the key sets apart, for
//! the leases that have keys only (`KvStore::lease_keys`). An empty
//! `BTreeSet` inline took 24 bytes a lease, and a boxed optional one 8.

/// One granted lease; the store keys it by its id (never 0, which means
/// "no lease" on a key).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The TTL granted, in seconds, after raising it to
    /// [`LEASE_TTL_SECONDS_MIN`](crate::LEASE_TTL_SECONDS_MIN).
    pub ttl_seconds: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_its_ttl_alone() {
        assert_eq!(std::mem::size_of::<Lease>(), 8);
    }
}
