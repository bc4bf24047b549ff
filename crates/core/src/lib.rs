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

pub mod bully;
mod epoch;
pub mod paxos;
pub mod protocol;
pub mod raft;
pub mod ring;
pub mod rng;
pub mod types;

pub use protocol::{Envelope, Message, Protocol, Ready, Role, Status};
pub use rng::Rng;
pub use types::{LogIndex, NodeId, Term};
