//! Raft leader election (Ongaro and Ousterhout, "In Search of an
//! Understandable Consensus Algorithm", §5.2; Ongaro's thesis §3.10, §4.2.3,
//! §9.6) as a pure state machine.
//!
//! On top of the paper's terms, randomized timeouts and RequestVote with the
//! log check (§5.4.1), it adds what production clusters need:
//!
//! - PreVote, so a node that cannot win never inflates terms;
//! - CheckQuorum, so a leader cut off from a majority steps down;
//! - leader stickiness, so a rejoining node cannot unseat a healthy leader;
//! - leadership transfer (TimeoutNow) and node priorities;
//! - a connection-loss hint that starts PreVote at once.
//!
//! PreVote and CheckQuorum interact badly if done naively (etcd #8243,
//! #10355). Here a pre-candidate forgets its leader, so it no longer defends
//! it against others' pre-votes, and a lower-term pre-vote is refused with our
//! term instead of being dropped.

mod config;
mod durable;
mod durable_notice;
mod election;
mod entry;
mod follower;
mod leader;
mod log;
mod membership;
mod message;
mod node;
mod output;
mod progress;
mod promises;
mod proposal;
mod reads;
mod replication;
mod snapshot;

pub use config::{ConfigError, RaftConfig};
pub use durable::{HardState, RaftDurable, RaftPersist};
pub use entry::{
    ClusterConfig, Entry, Payload, Snapshot, SnapshotData, SnapshotMeta, StoredSnapshot,
};
pub use leader::TransferError;
pub use log::{Conflict, RaftLog};
pub use membership::MembershipChange;
pub use message::RaftMessage;
pub use node::{RaftNode, Transfer, OUTBOX_MESSAGES_PER_PEER_MAX};
pub use output::RaftOutput;
pub use progress::{Progress, ReplicationState};
pub use promises::{audit, recover, Audit, Finding, PromiseRecord, Recovery, Repair};
pub use proposal::ProposeError;
pub use reads::ReadError;
pub use snapshot::{CompactError, PendingRestore};
#[cfg(test)]
mod detector_tests;
#[cfg(test)]
mod repair_tests;
#[cfg(test)]
mod replication_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod trace_tests;
