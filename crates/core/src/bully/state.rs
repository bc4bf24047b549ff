//! Where a Bully node is in Garcia-Molina's protocol, with the one deadline
//! that matters in each place.
//!
//! Keeping the deadline inside the variant means a timer can only exist in
//! the state that owns it: a leader has no answer timeout, a follower no
//! heartbeat schedule.

use crate::protocol::Role;
use crate::types::NodeId;

/// The phase of a Bully node. Deadlines are absolute tick counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// Follows `leader`, or waits for one when it is `None`.
    Follower {
        /// The node this one believes leads.
        leader: Option<NodeId>,
        /// When silence from the leader turns into an election.
        leader_deadline_tick: u64,
    },
    /// Sent `Election` to every better node; waiting for any `Answer`.
    AwaitingAnswer {
        /// When silence means no better node is alive.
        deadline_tick: u64,
    },
    /// A better node answered; waiting for its `Coordinator`.
    AwaitingCoordinator {
        /// When to give up on that node and start over.
        deadline_tick: u64,
    },
    /// Won, sent `Coordinator` to everyone, waiting for any old leader to
    /// step down before taking office.
    Announcing {
        /// The epoch announced in the `Coordinator`.
        epoch: u64,
        /// When to take the Leader role.
        deadline_tick: u64,
    },
    /// Leads.
    Leader {
        /// The epoch of this leadership: the fencing token.
        epoch: u64,
        /// When the next round of heartbeats is due.
        heartbeat_due_tick: u64,
    },
}

impl State {
    /// The role reported in [`crate::Status`]: any phase of an election this
    /// node takes part in is `Candidate`.
    pub(crate) fn role(&self) -> Role {
        match self {
            State::Follower { .. } => Role::Follower,
            State::AwaitingAnswer { .. }
            | State::AwaitingCoordinator { .. }
            | State::Announcing { .. } => Role::Candidate,
            State::Leader { .. } => Role::Leader,
        }
    }

    /// True while this node runs an election of its own, so that it does not
    /// start a second one on top of it.
    pub(crate) fn election_under_way(&self) -> bool {
        self.role() == Role::Candidate
    }

    /// True while this node claims leadership or is about to: such a node
    /// answers an `Election` with a `Coordinator`.
    pub(crate) fn claims_leadership(&self) -> bool {
        matches!(self, State::Announcing { .. } | State::Leader { .. })
    }

    /// The epoch this node has announced for its own leadership, if any.
    pub(crate) fn claimed_epoch(&self) -> Option<u64> {
        match self {
            State::Announcing { epoch, .. } | State::Leader { epoch, .. } => Some(*epoch),
            _ => None,
        }
    }
}
