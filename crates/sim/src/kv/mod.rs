//! The key-value workload: simulated clients, per-node state machines, and
//! the replication invariant checks that run with it.

mod app;
mod checks;
pub(crate) mod client;
pub(crate) mod clients;
pub(crate) mod codec;
mod machine;
mod membership;

pub use app::{KvApp, KvConfig, KvStats};
pub use checks::ReplicationChecker;
pub use client::Client;
pub use machine::KvMachine;
pub use membership::{MEMBERSHIP_PERIOD_US_MAX, MEMBERSHIP_PERIOD_US_MIN, VOTERS_MIN};

use bellwether_core::raft::{
    RaftConfig, RaftDurable, RaftMessage, RaftNode, RaftOutput, RaftPersist,
};
use bellwether_core::Protocol;

/// A protocol that is Raft underneath: the workload drives proposals and
/// reads through [`RaftLike::raft_mut`]. Implemented by [`RaftNode`] and by
/// deliberately broken wrappers in tests, which must be caught.
pub trait RaftLike:
    Protocol<
    Config = RaftConfig,
    Message = RaftMessage,
    Durable = RaftDurable,
    Persist = RaftPersist,
    Output = RaftOutput,
>
{
    /// The Raft node inside.
    fn raft(&self) -> &RaftNode;
    /// The Raft node inside, mutably.
    fn raft_mut(&mut self) -> &mut RaftNode;
}

impl RaftLike for RaftNode {
    fn raft(&self) -> &RaftNode {
        self
    }
    fn raft_mut(&mut self) -> &mut RaftNode {
        self
    }
}
