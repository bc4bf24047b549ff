//! Why a client's request failed, in words that say what the caller can
//! do. The etcd services map each to etcd's own error.

use bellwether_core::NodeId;

/// Why a request failed. Each says what the caller can do.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// Only the leader orders writes and confirms reads.
    #[error("not the leader; {}", match .leader { Some(l) => format!("the leader is {l}"), None => "no leader is known yet".to_string() })]
    NotLeader {
        /// The leader, if known.
        leader: Option<NodeId>,
    },
    /// Too much is in flight; retry after backing off.
    #[error("busy: too many requests in flight; retry after backing off")]
    Busy,
    /// The command was replaced by another leader's entry: it was not
    /// applied; retrying is safe.
    #[error("leadership changed before the command committed; it was not applied")]
    NotApplied,
    /// The node stopped.
    #[error("the node is shutting down")]
    Stopped,
    /// A write forwarded to a leader that lost leadership before this
    /// member applied it, or one whose entry a snapshot from the leader
    /// covered: it may or may not be applied.
    #[error("leader changed")]
    LeaderChanged,
    /// A forwarded write was not seen applied in time: it may or may not
    /// be applied.
    #[error("request timed out")]
    TimedOut,
    /// A call for another member's process could not reach it (no
    /// connection, or its runtime could not take the call); retrying is
    /// safe.
    #[error("member {member} cannot take the call now")]
    Unreachable {
        /// The member called.
        member: NodeId,
    },
}

impl ClientError {
    /// [`ClientError::NotLeader`], naming `leader` if one is known.
    pub fn not_leader(leader: Option<NodeId>) -> ClientError {
        ClientError::NotLeader { leader }
    }
}
