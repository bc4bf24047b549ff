//! A lease: a TTL granted by the leader and the keys attached to it.
//!
//! Time lives outside the state machine. The leader's clock decides when a
//! lease expires and proposes a revoke through the log; every replica then
//! applies the same revoke at the same point. So the store keeps only what
//! must be identical on every replica: the id, the granted TTL and the
//! attached keys. The remaining TTL and last keep-alive are the leader's
//! volatile state, which is why a new leader extends leases instead of
//! expiring them spuriously.

use std::collections::BTreeSet;

/// One granted lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The lease id, never 0 (0 means "no lease" on a key).
    pub id: i64,
    /// The TTL granted, in seconds, after raising it to
    /// [`LEASE_TTL_SECONDS_MIN`](crate::LEASE_TTL_SECONDS_MIN).
    pub ttl_seconds: i64,
    /// Keys attached to the lease, sorted so that revoke deletes them in a
    /// deterministic order on every replica.
    pub keys: BTreeSet<Vec<u8>>,
}
