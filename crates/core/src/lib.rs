//! The pure core of bellwether: leader-election state machines with no IO.
//!
//! Four algorithms sit behind one [`Protocol`] trait so that the simulator
//! (and later the server) can drive any of them the same way:
//!
//! - [`raft`]: Raft leader election (Ongaro and Ousterhout, §5.2) with PreVote,
//!   CheckQuorum, leader stickiness, leadership transfer, priorities and a
//!   connection-loss hint;
//! - [`bully`]: the Bully algorithm (Garcia-Molina, 1982);
//! - [`ring`]: the Ring algorithm (Chang and Roberts, 1979; LeLann, 1977);
//! - [`paxos`]: Multi-Paxos leader election with a distinguished proposer
//!   and leader leases (Lamport, 1998 and 2001).
//!
//! Time is counted in ticks and randomness comes from an injected [`Rng`];
//! nothing here reads a clock, touches a socket or spawns a thread.
//!
//! # The cycle, for three Raft nodes
//!
//! A runtime ticks each node, delivers the messages the nodes produce, and
//! carries out each [`Ready`] in order: persist, then send, then output.
//! Here the "disk" is the in-memory image [`Protocol::apply_persist`]
//! keeps, and the "network" a queue; after enough ticks one node leads.
//!
//! ```
//! use bellwether_core::raft::{RaftConfig, RaftNode};
//! use bellwether_core::{Envelope, NodeId, Protocol, Role, Rng};
//!
//! let members = [NodeId(1), NodeId(2), NodeId(3)];
//! let config = RaftConfig::default();
//! let mut nodes: Vec<RaftNode> = members
//!     .iter()
//!     .map(|id| RaftNode::new(&config, *id, &members, Default::default(), Rng::new(id.0)))
//!     .collect();
//! let mut disks = vec![Default::default(); 3];
//! let mut network: Vec<(NodeId, Envelope<_>)> = Vec::new();
//! for _tick in 0..1_000 {
//!     for node in nodes.iter_mut() {
//!         node.tick();
//!     }
//!     // Deliver until the cluster is quiet, carrying out every Ready.
//!     loop {
//!         for (i, node) in nodes.iter_mut().enumerate() {
//!             while node.has_ready() {
//!                 let ready = node.ready();
//!                 if let Some(persist) = ready.persist {
//!                     RaftNode::apply_persist(&mut disks[i], persist); // 1. fsync
//!                 }
//!                 let from = members[i];
//!                 network.extend(ready.messages.into_iter().map(|m| (from, m))); // 2. send
//!                 drop(ready.output); // 3. committed entries would go to the application
//!             }
//!         }
//!         if network.is_empty() {
//!             break;
//!         }
//!         for (from, envelope) in network.drain(..) {
//!             nodes[(envelope.to.0 - 1) as usize].step(from, envelope.message);
//!         }
//!     }
//!     if nodes.iter().any(|n| n.status().role == Role::Leader) {
//!         break;
//!     }
//! }
//! let leaders: Vec<_> = nodes.iter().filter(|n| n.status().role == Role::Leader).collect();
//! assert_eq!(leaders.len(), 1, "one leader");
//! let term = leaders[0].status().term;
//! assert!(disks.iter().filter(|d| RaftNode::durable_term(d) == term).count() >= 2,
//!         "a majority of the disks hold the leader's term");
//! ```

pub mod adaptive_detector;
pub mod bully;
#[cfg(test)]
mod detector_tests;
mod epoch;
pub mod paxos;
pub mod protocol;
pub mod raft;
pub mod ring;
pub mod rng;
#[cfg(test)]
mod test_cluster;
pub mod types;

pub use protocol::{Envelope, Message, Protocol, Ready, Role, Status};
pub use rng::Rng;
pub use types::{LogIndex, NodeId, Term};
