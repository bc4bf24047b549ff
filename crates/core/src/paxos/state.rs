//! Where a Paxos node is: following, in phase 1, or proposing (phase 2,
//! first to take office and then as the serving leader). Each phase owns
//! its deadlines, so a timer can only exist where it means something.

use super::ballot::Ballot;
use super::message::Entry;
use crate::protocol::Role;
use crate::types::NodeId;
use std::collections::BTreeMap;

/// What the proposer knows of one acceptor in its ballot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PeerProgress {
    /// The next slot to send it.
    pub(crate) next_slot: u64,
    /// It accepted every slot of this ballot up to here.
    pub(crate) through_slot: u64,
    /// The newest `sent_tick` it echoed: it promised the lease from then.
    pub(crate) acked_tick: Option<u64>,
}

/// A proposer whose phase 1 succeeded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Proposing {
    /// Its ballot: the fencing token once it serves.
    pub(crate) ballot: Ballot,
    /// The first slot it proposes in this ballot (its commit index + 1 when
    /// phase 1 began).
    pub(crate) base_slot: u64,
    /// The no-op that opened this ballot: once chosen, everything before it
    /// is too, and the leader may serve.
    pub(crate) noop_slot: u64,
    /// Entries phase 1 brought in that this node did not hold.
    pub(crate) fetched_entries: u64,
    /// True once it serves: the no-op is chosen and the lease holds.
    pub(crate) serving: bool,
    /// Before serving: when to give up and start a new round.
    pub(crate) deadline_tick: u64,
    /// The next heartbeat round.
    pub(crate) heartbeat_due_tick: u64,
    /// Its lease ends here (with leases on); 0 before any quorum answered.
    pub(crate) lease_end_tick: u64,
    /// Per acceptor, every member but this node.
    pub(crate) peers: BTreeMap<NodeId, PeerProgress>,
}

/// The phase of a Paxos node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// Accepts what a leader sends, or waits for one.
    Follower {
        /// The node whose `Accept` it took last, while that one seems alive.
        leader: Option<NodeId>,
        /// When silence turns into phase 1.
        deadline_tick: u64,
    },
    /// Phase 1: collecting promises.
    Preparing {
        /// The ballot asked for.
        ballot: Ballot,
        /// The first slot asked about.
        from_slot: u64,
        /// When to give up and start a new round.
        deadline_tick: u64,
        /// Promises so far, with the entries each returned (this node's own
        /// included).
        promises: BTreeMap<NodeId, Vec<(u64, Entry)>>,
    },
    /// Phase 2 of its own ballot.
    Proposing(Proposing),
}

impl State {
    /// The role reported in [`crate::Status`].
    pub(crate) fn role(&self) -> Role {
        match self {
            State::Follower { .. } => Role::Follower,
            State::Preparing { .. } => Role::Candidate,
            State::Proposing(p) if p.serving => Role::Leader,
            State::Proposing(_) => Role::Candidate,
        }
    }

    /// The ballot this node proposes in, if it is a proposer.
    pub(crate) fn own_ballot(&self) -> Option<Ballot> {
        match self {
            State::Follower { .. } => None,
            State::Preparing { ballot, .. } => Some(*ballot),
            State::Proposing(p) => Some(p.ballot),
        }
    }
}
