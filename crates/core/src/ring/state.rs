//! The pieces of a Ring node's state that come and go: whether it leads,
//! which election it takes part in, and which `Coordinator` round it drives.
//!
//! They are independent: a follower can take part in an election and drive a
//! `Coordinator` round at the same time, so they are separate fields rather
//! than one state enum. Each holds its own deadline.

use crate::types::NodeId;

/// Whether this node leads. Deadlines are absolute tick counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Leadership {
    /// Follows `leader`, or waits for one when it is `None`.
    Follower {
        /// The node this one believes leads.
        leader: Option<NodeId>,
        /// When silence from the leader turns into an election; ignored
        /// while the node takes part in one.
        leader_deadline_tick: u64,
    },
    /// Leads.
    Leader {
        /// The epoch of this leadership: the fencing token.
        epoch: u64,
        /// When the next round of heartbeats is due.
        heartbeat_due_tick: u64,
    },
}

/// The election this node takes part in (it started or forwarded it).
/// Chang and Roberts' extinction rule compares against `initiator`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Participation {
    /// The best initiator whose `Election` this node has passed on.
    pub(crate) initiator: NodeId,
    /// When to give up waiting for a `Coordinator` and start over.
    pub(crate) deadline_tick: u64,
}

/// A `Coordinator` round this node started and waits to see return.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Announcement {
    /// The epoch the round announces; identifies it on return.
    pub(crate) epoch: u64,
    /// When to give up waiting for its return and start over.
    pub(crate) deadline_tick: u64,
}
