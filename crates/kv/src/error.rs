//! Why a key-value request failed.
//!
//! Where etcd has an error for the same condition, the message is etcd's, so
//! that the gRPC layer can map each variant to the status etcd clients
//! expect (`etcdctl` and client libraries match on these strings).

/// A rejected request. A rejected request changes nothing: every check runs
/// before the first write.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KvError {
    /// A request named an empty key.
    #[error("etcdserver: key is not provided")]
    KeyNotProvided,
    /// A request is larger than [`REQUEST_BYTES_MAX`](crate::REQUEST_BYTES_MAX).
    #[error("etcdserver: request is too large")]
    RequestTooLarge {
        /// The request's size.
        size_bytes: usize,
        /// The limit it exceeded.
        size_bytes_max: usize,
    },
    /// A txn branch has more than [`TXN_OPS_MAX`](crate::TXN_OPS_MAX) operations.
    #[error("etcdserver: too many operations in txn request")]
    TooManyOps,
    /// Txns are nested deeper than [`TXN_DEPTH_MAX`](crate::TXN_DEPTH_MAX).
    #[error("bellwether: txn nested deeper than {depth_max} levels")]
    TxnTooDeep {
        /// The limit.
        depth_max: usize,
    },
    /// One txn writes the same key twice (put and put, or put and delete).
    #[error("etcdserver: duplicate key given in txn request")]
    DuplicateKey,
    /// A read or compaction asked for a revision that compaction removed.
    #[error("etcdserver: mvcc: required revision has been compacted")]
    Compacted {
        /// The oldest revision still available. Watchers restart from it.
        compact_revision: i64,
    },
    /// A read or compaction asked for a revision not written yet.
    #[error("etcdserver: mvcc: required revision is a future revision")]
    FutureRevision,
    /// A put with `ignore_value` or `ignore_lease` names a missing key.
    #[error("etcdserver: key not found")]
    KeyNotFound,
    /// A put with `ignore_value` also carries a value.
    #[error("etcdserver: value is provided")]
    ValueProvided,
    /// A put with `ignore_lease` also carries a lease.
    #[error("etcdserver: lease is provided")]
    LeaseProvided,
    /// A request names a lease that does not exist (never granted, revoked
    /// or expired).
    #[error("etcdserver: requested lease not found")]
    LeaseNotFound,
    /// A grant reuses the id of a live lease.
    #[error("etcdserver: lease already exists")]
    LeaseExists,
    /// A grant asks for lease id 0. The id must be chosen before the grant
    /// enters the log, so that every replica applies the same one.
    #[error("bellwether: lease id 0 must be replaced by a chosen id before proposing")]
    LeaseIdZero,
    /// A grant asks for a TTL above [`LEASE_TTL_SECONDS_MAX`](crate::LEASE_TTL_SECONDS_MAX).
    #[error("etcdserver: too large lease TTL")]
    LeaseTtlTooLarge,
    /// [`LEASES_MAX`](crate::LEASES_MAX) leases are alive already.
    #[error("bellwether: too many leases (at most {leases_max}); revoke unused leases")]
    TooManyLeases {
        /// The limit.
        leases_max: usize,
    },
    /// A snapshot could not be decoded.
    #[error("bellwether: kv snapshot is corrupt at byte {offset}: {reason}")]
    SnapshotCorrupt {
        /// Where decoding stopped.
        offset: usize,
        /// What was wrong there.
        reason: &'static str,
    },
    /// A snapshot was written by an encoding version this build cannot read.
    #[error("bellwether: kv snapshot version {version} is not supported (expected {expected})")]
    SnapshotVersion {
        /// The version found.
        version: u32,
        /// The version this build writes and reads.
        expected: u32,
    },
}
