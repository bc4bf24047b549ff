//! Calls one member's process makes to another's, for what is not in the
//! log: a lease's renewal and time-to-live on the leader's lease clock, a
//! learner's promotion that only the leader can judge, a member's history
//! hash for the consistency check.
//!
//! Why over the peer connection and not a second gRPC client: a member
//! then reaches another by one path only, the one its Raft messages and
//! forwarded requests already take, with its TLS, its cluster check and
//! its bounded queues; no member dials another's client port, so a client
//! port behind a firewall or a proxy breaks nothing between members.
//!
//! The member only carries the bytes ([`bellwether_member::Forward::Call`]).
//! The node hands each call that arrives to whoever took
//! [`crate::node::Node::take_calls`] (the etcd services, see
//! `etcd/call_server.rs`), and that one answers through
//! [`crate::client::NodeClient::answer_call`].

use bellwether_core::NodeId;

/// Calls that arrived and wait for the process to take them, at most;
/// past it a call is refused, and its caller may ask again.
pub const INCOMING_CALLS_MAX: usize = 1_024;

/// Another member's call, for this member's process to answer.
#[derive(Debug)]
pub struct IncomingCall {
    /// The calling member.
    pub from: NodeId,
    /// Its request id, to answer with.
    pub request: u64,
    /// What it asks.
    pub body: Vec<u8>,
}
