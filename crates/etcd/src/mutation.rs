//! Deliberate faults in the state machine, for the simulator's tests that
//! show its checkers catch a wrong state machine. Nothing in the server
//! sets one; [`EtcdMachine::mutated`](crate::EtcdMachine::mutated) says so
//! where it is called.

/// A way to break the state machine on purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutation {
    /// BROKEN: a txn's compares read the store one revision back, as if
    /// the last write had not happened yet.
    TxnComparesOneRevisionBack,
    /// BROKEN: the lease clock is told every lease was granted for half
    /// its TTL, so leases expire early.
    LeaseClockHalvesTtls,
    /// BROKEN: a ZooKeeper create of a node that exists replaces it
    /// instead of failing with NODEEXISTS.
    ZkCreateOverwrites,
}
