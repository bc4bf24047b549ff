//! Multi-Paxos leader election (Lamport, "The Part-Time Parliament", 1998,
//! and "Paxos Made Simple", 2001), as a sans-IO state machine behind
//! [`crate::Protocol`], with the leader leases and the distinguished
//! proposer that practical systems add (Chandra, Griesemer and Redstone,
//! "Paxos Made Live", 2007, §5.2).
//!
//! # The algorithm
//!
//! Every node is an acceptor and a learner; the elected one is also the
//! distinguished proposer, the leader.
//!
//! - **Ballots** are `(round, priority, node)`, ordered in that order
//!   ([`Ballot`]). A node that hears no leader for its election timeout
//!   picks a round above every one it has seen and runs phase 1 for every
//!   slot from its commit index on.
//! - **Phase 1.** Acceptors promise the ballot if it is the highest they
//!   have seen, and return what they accepted from that slot on. With a
//!   majority of promises, the proposer keeps each slot's value of the
//!   highest ballot, fills gaps with no-ops, adds one no-op of its own, and
//!   proposes them all in phase 2. The entries it did not hold are counted:
//!   that is what a new Paxos leader fetches before it can serve, where a
//!   Raft leader fetches nothing (only an up-to-date candidate can win).
//! - **Phase 2 and heartbeats.** The leader's `Accept` is also its
//!   heartbeat. Once a majority accepted its no-op, everything before it is
//!   chosen and the node serves (takes the Leader role).
//! - **Rejections.** An acceptor that promised a higher ballot answers
//!   `Reject`. A proposer backs off for an election timeout; a serving
//!   leader re-runs phase 1 above the higher round at once, which the
//!   acceptors bound to it by its lease accept.
//!
//! # Leases: two leaders never act at once
//!
//! With `leases` on (the default), an acceptor that accepts a leader's
//! `Accept` promises it a lease: for `election_ticks_min` it ignores every
//! other proposer's `Prepare`. The leader dates each `Accept` on its own
//! clock; the acceptors echo the date, and the leader serves until the date
//! of the newest round a quorum answered plus `election_ticks_min` minus
//! `lease_margin_ticks`. A new ballot needs the promise of a quorum, which
//! shares an acceptor with that quorum; that acceptor either promised the
//! new ballot before the `Accept` (and so rejected it) or ignores the
//! `Prepare` until the lease is over on its clock. So while clocks drift
//! apart by less than the margin per election timeout, no node takes office
//! before the old leader's lease has ended, and the old leader steps down
//! when it ends. A restarted node honours any lease it may have promised
//! and forgotten, for one election timeout. A node takes office only once
//! its own phase 2 was accepted by a quorum, so promises themselves bind
//! nobody, and two proposers of one round do not split a vote as Raft
//! candidates do: the higher ballot wins.
//!
//! The connection-loss hint releases a follower's lease promise for its
//! leader, as Raft's does; a wrong hint is the documented exception.
//!
//! # Scope
//!
//! This is election-only Multi-Paxos: the log holds the leaders' no-ops and
//! whatever [`PaxosNode::propose`] adds, and a follower learns a chosen slot
//! only from the leader it accepted it from. There is no log compaction; the
//! log is bounded by [`LOG_SLOTS_MAX`].

mod acceptor;
mod ballot;
mod config;
mod durable;
mod message;
mod node;
mod proposer;
mod state;

#[cfg(test)]
mod tests;

pub use ballot::{Ballot, NODE_ID_MAX, PRIORITY_MAX, ROUND_MAX};
pub use config::{ConfigError, PaxosConfig};
pub use durable::{PaxosDurable, PaxosPersist};
pub use message::{Entry, PaxosMessage};
pub use node::{
    PaxosNode, PaxosOutput, ACCEPT_VALUES_MAX, LOG_SLOTS_MAX, MEMBERS_MAX, MESSAGES_PER_CALL_MAX,
    OUTBOX_MAX,
};
pub use proposer::ProposeError;
