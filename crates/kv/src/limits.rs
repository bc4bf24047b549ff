//! Every bound the key-value state machine enforces, in one place.
//!
//! The store runs inside the Raft apply loop, so an unbounded request would
//! stall every node at once. Each limit is a named constant so the server can
//! report it and tests can reach it. Where etcd has a default, the value is
//! the same, so clients tuned for etcd behave the same way here.

/// Most operations in one branch (success or failure) of a txn. etcd's
/// default `--max-txn-ops`.
pub const TXN_OPS_MAX: usize = 128;

/// Deepest nesting of txns inside txns. etcd has no such limit; we bound the
/// recursion so a crafted request cannot exhaust the stack of every replica.
pub const TXN_DEPTH_MAX: usize = 16;

/// Largest request, counted as the bytes of its keys, values and range ends.
/// etcd's default `--max-request-bytes` (1.5 MiB).
pub const REQUEST_BYTES_MAX: usize = 1024 * 1024 + 512 * 1024;

/// Most events the watch event log keeps. Older revisions are dropped whole
/// when the log is over this bound; watchers that fall behind get a
/// compacted error and resynchronise, as with etcd compaction.
pub const EVENT_LOG_EVENTS_MAX: usize = 100_000;

/// Most leases alive at once. etcd has no explicit limit; we bound it so a
/// lease-granting client loop cannot grow the state machine without end.
pub const LEASES_MAX: usize = 1_000_000;

/// Shortest lease TTL. Shorter grants are raised to it, as etcd does, so a
/// lease cannot expire before a new leader has had time to keep it alive.
pub const LEASE_TTL_SECONDS_MIN: i64 = 2;

/// Longest lease TTL. etcd's `MaxLeaseTTL`.
pub const LEASE_TTL_SECONDS_MAX: i64 = 9_000_000_000;
